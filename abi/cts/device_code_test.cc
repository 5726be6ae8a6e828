// Executables with CUDA code objects (cubin, fatbin, PTX) on the devices that
// run them: the built-in kernels of docs/kernels.md, as a kernel's only
// implementation or as a variant of a CPU one, checked against host
// references; then the load errors device code has of its own.
//
// The kernels come from the fatbin kernels/cuda builds when nvcc is there
// (AXRT_CTS_CUDA_FATBIN, read at run time), as it is on machines with a GPU.
// Without nvcc the image is a mock image naming the kernels, which only the
// mock of the CUDA Driver API (tests/mock_cuda) takes; the mock runs either
// image with the CPU kernels of the same names.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"
#include "tests/support/axe_test_builder.h"

namespace axrt_cts {
namespace {

using namespace axrt_test;

// docs/kernels.md: elementwise kernels cover 4096 elements per workgroup,
// and every CUDA kernel runs blocks of 256 threads (the row-wise ones check).
constexpr uint64_t kElementsPerWorkgroup = 4096;
constexpr axrt_kernel_dim3_t kCudaBlock = {256, 1, 1};
// The bound of the symbolic element count of the elementwise functions.
constexpr uint64_t kMaxElements = 1 << 16;

// One code image holding the kernels, and how an executable declares it.
struct CudaImage {
  axrt_axe_code_object_kind_t kind = AXRT_AXE_CODE_OBJECT_KIND_INVALID;
  std::string target;
  std::vector<uint8_t> bytes;
  bool mock = false;
};

// "compute_90" for a device of compute capability 9.0; "compute_80", the
// oldest the kernels are built for, for devices without one.
std::string ComputeTarget(const axrt_device_properties_t& properties) {
  if (properties.compute_capability_major == 0) return "compute_80";
  return "compute_" + std::to_string(properties.compute_capability_major) +
         std::to_string(properties.compute_capability_minor);
}

std::vector<uint8_t> TextBytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

CudaImage KernelImage([[maybe_unused]] const axrt_device_properties_t& properties) {
  CudaImage image;
#ifdef AXRT_CTS_CUDA_FATBIN
  // The build tree's fatbin, or AXRT_CTS_CUDA_FATBIN_PATH where the suite
  // runs from a copy of the build (tools/gpu_check.sh).
  const char* path = std::getenv("AXRT_CTS_CUDA_FATBIN_PATH");
  if (path == nullptr || *path == '\0') path = AXRT_CTS_CUDA_FATBIN;
  std::ifstream file(path, std::ios::binary);
  INFO("the CUDA kernels' fatbin " << path);
  REQUIRE(file.good());
  image.bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  REQUIRE(!image.bytes.empty());
  // What kernels/cuda/CMakeLists.txt builds: SASS for sm_80 and sm_90, PTX
  // for compute_90.
  image.kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN;
  image.target = "sm_80,sm_90,compute_90";
#else
  // The mock image ("AXRTMOCKCUDA", then a kernel name per line) travels as
  // PTX: the format checks a fatbin for its magic number and a cubin for its
  // ELF header, but PTX only for being text with the .version and .target
  // directives. The mock takes those two lines for names of kernels it does
  // not have.
  image.kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX;
  image.target = ComputeTarget(properties);
  image.bytes = TextBytes(
      "AXRTMOCKCUDA\n"
      "axrt_add_f32\n"
      "axrt_mul_f32\n"
      "axrt_layernorm_f32\n"
      "axrt_rmsnorm_f32\n"
      ".version 8.0\n"
      ".target " + image.target + "\n");
  image.mock = true;
#endif
  return image;
}

// Deterministic values in [lo, hi); different seeds give different values.
std::vector<float> Values(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::vector<float> values(n);
  uint32_t state = seed * 2654435761u + 0x9e3779b9u;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = lo + (hi - lo) * static_cast<float>(state >> 8) / 16777216.0f;
  }
  return values;
}

std::vector<uint8_t> BytesOf(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// One assertion for a whole output, naming the first wrong element, so that
// outputs of millions of elements stay cheap to check.
void CheckEqual(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && wrong++ == 0) first = i;
  }
  INFO(wrong << " of " << got.size() << " elements differ; element " << first << " is "
             << (wrong ? got[first] : 0.0f) << ", expected " << (wrong ? want[first] : 0.0f));
  CHECK(wrong == 0);
}

// As CheckEqual, allowing element i to be off by 1e-5 * scale[i].
void CheckClose(const std::vector<float>& got, const std::vector<double>& want,
                const std::vector<double>& scale) {
  REQUIRE(got.size() == want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= 1e-5 * scale[i]) && wrong++ == 0) first = i;
  }
  INFO(wrong << " of " << got.size() << " elements are off; element " << first << " is "
             << (wrong ? got[first] : 0.0f) << ", expected " << (wrong ? want[first] : 0.0));
  CHECK(wrong == 0);
}

// The parameters of the binary elementwise kernels (axrt_add_f32 ...).
std::vector<Param> BinaryParams() {
  return {BufferParam("a"), BufferParam("b"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
          ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
}

// Function "main": out[n] = kernel(a, b) for a symbolic n, one workgroup per
// 4096 elements.
void AddBinaryFunction(AxeBuilder& b, uint32_t kernel) {
  const Dim n = Symbolic(0);
  const uint32_t f = b.AddFunction("main", {{"n", kMaxElements}},
                                   {{"a", AXRT_AXE_DTYPE_FLOAT32, {n}},
                                    {"b", AXRT_AXE_DTYPE_FLOAT32, {n}}},
                                   {{"out", AXRT_AXE_DTYPE_FLOAT32, {n}}});
  b.Dispatch(f, kernel, {CeilDiv(Sym(0), kElementsPerWorkgroup)},
             {BindInput(0), BindInput(1), BindOutput(0), BindScalar(Sym(0))});
}

class DeviceCodeTest : public DeviceTest {
 public:
  // The kernel image, read once per test.
  const CudaImage& Image() {
    if (image_.bytes.empty()) image_ = KernelImage(properties());
    return image_;
  }

  uint32_t AddImage(AxeBuilder& b) {
    const CudaImage& image = Image();
    return b.AddCode(image.kind, image.target, image.bytes);
  }

  // False, after a warning, when the device runs no code of the fatbin (it
  // carries sm_80 and sm_90 code and compute_90 PTX).
  bool ImageRuns() {
    if (Image().mock || properties().compute_capability_major >= 8) return true;
    WARN("skipped on " << properties().id << ": the CUDA kernels are built for sm_80 and later; "
                       << "the device is sm_" << properties().compute_capability_major
                       << properties().compute_capability_minor);
    return false;
  }

  Executable Load(const std::vector<uint8_t>& bytes) {
    Executable exe;
    REQUIRE_OK(LoadBytes(device(), bytes, 0, Out(exe)));
    return exe;
  }

  Function Main(axrt_executable_t exe, const char* name = "main") {
    Function function;
    REQUIRE_OK(axrt_executable_find_function(exe, name, Out(function)));
    return function;
  }

  Tensor F32Tensor(const std::vector<float>& values, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
    return NewTensor(*this, AXRT_DTYPE_FLOAT32, shape, values.data());
  }

  // Calls `fn` with its one output allocated by the runtime and returns the
  // output's values.
  std::vector<float> Call(axrt_function_t fn, axrt_stream_t stream,
                          std::vector<axrt_tensor_t> inputs) {
    axrt_tensor_t outputs[] = {nullptr};
    REQUIRE_OK(axrt_function_invoke(fn, stream, inputs.data(), inputs.size(), outputs, 1, nullptr));
    Tensor out(outputs[0]);
    REQUIRE(out != nullptr);
    REQUIRE_OK(axrt_stream_synchronize(stream));
    return ReadAs<float>(*this, out.get());
  }

  // Runs "main" of `exe` (AddBinaryFunction) on `n` elements and checks
  // out[i] = op(a[i], b[i]).
  void CheckBinary(axrt_executable_t exe, size_t n, float (*op)(float, float)) {
    INFO("n = " << n);
    Function fn = Main(exe);
    Stream stream = NewStream();
    const std::vector<float> a = Values(n, 1), b = Values(n, 2);
    Tensor ta = F32Tensor(a), tb = F32Tensor(b);
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = op(a[i], b[i]);
    CheckEqual(Call(fn.get(), stream.get(), {ta.get(), tb.get()}), want);
  }

  // "main" (AddBinaryFunction) over a kernel whose CUDA implementation
  // launches with `shared` bytes of dynamic shared memory in clusters of
  // `cluster`: as the kernel's only implementation, computing a + b; or as a
  // variant, computing a * b, of a CPU implementation computing a + b, so
  // that the result tells which one ran (the two take the same parameters).
  std::vector<uint8_t> AddFile(bool as_variant, uint32_t shared = 0,
                               axrt_kernel_dim3_t cluster = {0, 0, 0}) {
    AxeBuilder b;
    uint32_t k = 0;
    if (as_variant) {
      const uint32_t lib = b.AddLibrary("axrt.cpu");
      const uint32_t code = AddImage(b);
      k = b.AddKernel("op", lib, "axrt_add_f32", BinaryParams());
      b.AddVariant(k, code, "axrt_mul_f32", kCudaBlock, shared, cluster);
    } else {
      const uint32_t code = AddImage(b);
      k = b.AddKernel("op", code, "axrt_add_f32", BinaryParams(), kCudaBlock, shared, cluster);
    }
    AddBinaryFunction(b, k);
    return b.Bytes();
  }

 private:
  CudaImage image_;
};

// Returns from the test, with a warning, unless the device runs device code
// and the kernels' image.
#define CTS_REQUIRE_KERNEL_IMAGE()             \
  do {                                         \
    CTS_REQUIRE_FEATURE(Feature::kDeviceCode); \
    if (!ImageRuns()) return;                  \
  } while (false)

float Add(float a, float b) { return a + b; }
float Mul(float a, float b) { return a * b; }

TEST_CASE_METHOD(DeviceCodeTest, "device code: a CUDA kernel runs with allocated and supplied "
                                 "outputs",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  Executable exe = Load(AddFile(false));
  // One element, one whole workgroup, a partial second one, three.
  for (size_t n : {1u, 4096u, 5000u, 3u * 4096u - 100u}) CheckBinary(exe.get(), n, Add);

  // A supplied output is written in place.
  Function fn = Main(exe.get());
  Stream stream = NewStream();
  const size_t n = 3 * 4096 - 100;
  const std::vector<float> a = Values(n, 3), b = Values(n, 4);
  Tensor ta = F32Tensor(a), tb = F32Tensor(b), tout = F32Tensor(std::vector<float>(n, -1.0f));
  axrt_tensor_t inputs[] = {ta.get(), tb.get()};
  axrt_tensor_t outputs[] = {tout.get()};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 2, outputs, 1, nullptr));
  CHECK(outputs[0] == tout.get());
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  CheckEqual(ReadAs<float>(*this, tout.get()), want);
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: a captured call replays its kernels, copy "
                                 "and fill, with new inputs each time",
                 "[cts][device-code][graph]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  // t = a + b in the arena, out = t + b, head = t[0, 4) (a copy out of the
  // arena), mark = 0x01020304 eight times (a fill): a graph of two kernels,
  // a copy and a fill where the driver makes graphs of its own.
  constexpr int64_t n = 5000;
  AxeBuilder b;
  const uint32_t code = AddImage(b);
  const uint32_t add = b.AddKernel("add", code, "axrt_add_f32", BinaryParams(), kCudaBlock);
  const uint32_t f = b.AddFunction(
      "chain", {},
      {{"a", AXRT_AXE_DTYPE_FLOAT32, {Fixed(n)}}, {"b", AXRT_AXE_DTYPE_FLOAT32, {Fixed(n)}}},
      {{"out", AXRT_AXE_DTYPE_FLOAT32, {Fixed(n)}},
       {"head", AXRT_AXE_DTYPE_FLOAT32, {Fixed(4)}},
       {"mark", AXRT_AXE_DTYPE_UINT32, {Fixed(8)}}},
      n * 4);
  const Expr groups = CeilDiv(Lit(n), kElementsPerWorkgroup);
  b.Dispatch(f, add, {groups},
             {BindInput(0), BindInput(1), BindArena(0, n * 4), BindScalar(Lit(n))});
  b.Dispatch(f, add, {groups},
             {BindArena(0, n * 4), BindInput(1), BindOutput(0), BindScalar(Lit(n))});
  b.Copy(f, BindArena(0, n * 4), Lit(0), BindOutput(1), Lit(0), Lit(16));
  b.Fill(f, BindOutput(2), Lit(0), Lit(32), 0x01020304u, 4);
  Executable exe = Load(b.Bytes());
  Function fn = Main(exe.get(), "chain");
  Stream stream = NewStream();
  Buffer ab = NewBuffer(n * 4), bb = NewBuffer(n * 4), ob = NewBuffer(n * 4);
  Tensor ta = TensorOver(ab.get(), AXRT_DTYPE_FLOAT32, {n});
  Tensor tb = TensorOver(bb.get(), AXRT_DTYPE_FLOAT32, {n});
  Tensor out = TensorOver(ob.get(), AXRT_DTYPE_FLOAT32, {n});
  Tensor head = NewTensor(*this, AXRT_DTYPE_FLOAT32, {4});
  Tensor mark = NewTensor(*this, AXRT_DTYPE_UINT32, {8});
  axrt_tensor_t inputs[] = {ta.get(), tb.get()};
  axrt_tensor_t outputs[] = {out.get(), head.get(), mark.get()};
  Graph graph;
  REQUIRE_OK(axrt_function_capture(fn.get(), stream.get(), inputs, 2, outputs, 3, nullptr,
                                   Out(graph)));
  axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
  REQUIRE_OK(axrt_graph_query_info(graph.get(), &info));
  CHECK(info.command_count == 4);
  WARN("the graph on " << properties().id << " is "
                       << (info.native ? "the driver's own" : "replayed by resubmission"));
  constexpr int kRounds = 3;
  std::vector<std::vector<float>> as, bs, outs(kRounds, std::vector<float>(n));
  for (int r = 0; r < kRounds; ++r) {
    as.push_back(Values(n, 10 + r));
    bs.push_back(Values(n, 20 + r));
  }
  for (int r = 0; r < kRounds; ++r) {
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), as[r].data(), ab.get(), 0, n * 4));
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), bs[r].data(), bb.get(), 0, n * 4));
    REQUIRE_OK(axrt_graph_replay(graph.get()));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), ob.get(), 0, outs[r].data(), n * 4));
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  for (int r = 0; r < kRounds; ++r) {
    INFO("round " << r);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = (as[r][i] + bs[r][i]) + bs[r][i];
    CheckEqual(outs[r], want);
  }
  const std::vector<float> t = ReadAs<float>(*this, head.get());
  for (int i = 0; i < 4; ++i) CHECK(t[i] == as[kRounds - 1][i] + bs[kRounds - 1][i]);
  CHECK(ReadAs<uint32_t>(*this, mark.get()) == std::vector<uint32_t>(8, 0x01020304u));
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: a kernel's CUDA variant runs where its CPU "
                                 "implementation cannot",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  Executable exe = Load(AddFile(true));
  CheckBinary(exe.get(), 5000, Mul);
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: host devices run a kernel's CPU implementation and "
                                 "refuse a CUDA-only kernel",
                 "[cts][device-code]") {
  // The other side of the test above, on the devices that run CPU kernels.
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = Load(AddFile(true));
  CheckBinary(exe.get(), 5000, Add);
  // A device that runs device code too would load the CUDA-only kernel.
  if (Supports(Feature::kDeviceCode)) return;
  const std::vector<uint8_t> cuda_only = AddFile(false);
  Executable refused;
  CHECK_STATUS(LoadBytes(device(), cuda_only, 0, Out(refused)), AXRT_STATUS_CODE_UNIMPLEMENTED,
               "code object 0 is a CUDA");
  CHECK_STATUS(LoadBytes(device(), cuda_only, 0, Out(refused)), AXRT_STATUS_CODE_UNIMPLEMENTED,
               "which " + DeviceUnderTestId() + " cannot run");
}

// docs/kernels.md, "Row-wise": one workgroup per row of [rows, cols].
constexpr uint64_t kCols = 777;  // not a multiple of the 256 threads of a block
constexpr uint64_t kMaxRows = 64;
// Large enough to move every output far beyond the tolerance, so that an
// epsilon the kernel does not receive shows.
constexpr float kEpsilon = 0.25f;

std::vector<Param> LayerNormParams() {
  return {BufferParam("x"),
          BufferParam("gamma"),
          BufferParam("beta"),
          BufferParam("out", AXRT_AXE_ACCESS_WRITE),
          ScalarParam("rows", AXRT_AXE_DTYPE_UINT64),
          ScalarParam("cols", AXRT_AXE_DTYPE_UINT64),
          ScalarParam("epsilon", AXRT_AXE_DTYPE_FLOAT32)};
}

std::vector<Param> RmsNormParams() {
  return {BufferParam("x"),
          BufferParam("gamma"),
          BufferParam("out", AXRT_AXE_ACCESS_WRITE),
          ScalarParam("rows", AXRT_AXE_DTYPE_UINT64),
          ScalarParam("cols", AXRT_AXE_DTYPE_UINT64),
          ScalarParam("epsilon", AXRT_AXE_DTYPE_FLOAT32)};
}

// The row-wise scalars: the symbolic row count, the columns, epsilon.
std::vector<Binding> RowScalars() {
  return {BindScalar(Sym(0)), BindScalar(Lit(kCols)), BindScalar(F32(kEpsilon))};
}

std::vector<Binding> Concat(std::vector<Binding> a, std::vector<Binding> b) {
  for (Binding& binding : b) a.push_back(std::move(binding));
  return a;
}

// A reference in double and, per element, the magnitude its float
// computation rounds relative to: for layernorm, normalised x times gamma
// and beta, which may cancel, both count; for rmsnorm, the result.
struct Reference {
  std::vector<double> values;
  std::vector<double> scale;
};

Reference LayerNorm(const std::vector<float>& x, const std::vector<float>& gamma,
                    const std::vector<float>& beta) {
  Reference ref;
  for (size_t row = 0; row < x.size() / kCols; ++row) {
    const float* in = &x[row * kCols];
    double mean = 0, variance = 0;
    for (size_t c = 0; c < kCols; ++c) mean += in[c];
    mean /= kCols;
    for (size_t c = 0; c < kCols; ++c) variance += (in[c] - mean) * (in[c] - mean);
    variance /= kCols;
    const double inv_std = 1.0 / std::sqrt(variance + kEpsilon);
    for (size_t c = 0; c < kCols; ++c) {
      const double scaled = (in[c] - mean) * inv_std * gamma[c];
      ref.values.push_back(scaled + beta[c]);
      ref.scale.push_back(std::abs(scaled) + std::abs(beta[c]));
    }
  }
  return ref;
}

Reference RmsNorm(const std::vector<float>& x, const std::vector<float>& gamma) {
  Reference ref;
  for (size_t row = 0; row < x.size() / kCols; ++row) {
    const float* in = &x[row * kCols];
    double mean_square = 0;
    for (size_t c = 0; c < kCols; ++c) mean_square += double{in[c]} * in[c];
    mean_square /= kCols;
    const double inv_rms = 1.0 / std::sqrt(mean_square + kEpsilon);
    for (size_t c = 0; c < kCols; ++c) {
      ref.values.push_back(in[c] * inv_rms * gamma[c]);
      ref.scale.push_back(std::abs(ref.values.back()));
    }
  }
  return ref;
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: layernorm and rmsnorm, whose parameters end before "
                                 "their argument block does",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  // The argument block of both is padded to 8 bytes after the f32 epsilon
  // (56 and 48 bytes); the CUDA kernels take their parameters only, 52 and
  // 44 bytes, and the launch must hand them just those.
  AxeBuilder b;
  const uint32_t code = AddImage(b);
  const uint32_t layernorm =
      b.AddKernel("layernorm", code, "axrt_layernorm_f32", LayerNormParams(), kCudaBlock);
  const uint32_t rmsnorm =
      b.AddKernel("rmsnorm", code, "axrt_rmsnorm_f32", RmsNormParams(), kCudaBlock);
  const Dim rows = Symbolic(0), cols = Fixed(kCols);
  const uint32_t f_layernorm = b.AddFunction(
      "layernorm", {{"rows", kMaxRows}},
      {{"x", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}},
       {"gamma", AXRT_AXE_DTYPE_FLOAT32, {cols}},
       {"beta", AXRT_AXE_DTYPE_FLOAT32, {cols}}},
      {{"out", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}}});
  b.Dispatch(f_layernorm, layernorm, {Sym(0)},
             Concat({BindInput(0), BindInput(1), BindInput(2), BindOutput(0)}, RowScalars()));
  const uint32_t f_rmsnorm = b.AddFunction(
      "rmsnorm", {{"rows", kMaxRows}},
      {{"x", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}}, {"gamma", AXRT_AXE_DTYPE_FLOAT32, {cols}}},
      {{"out", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}}});
  b.Dispatch(f_rmsnorm, rmsnorm, {Sym(0)},
             Concat({BindInput(0), BindInput(1), BindOutput(0)}, RowScalars()));
  Executable exe = Load(b.Bytes());
  Function fn_layernorm = Main(exe.get(), "layernorm"), fn_rmsnorm = Main(exe.get(), "rmsnorm");
  Stream stream = NewStream();

  const std::vector<float> gamma = Values(kCols, 20, 0.5f, 1.5f);
  const std::vector<float> beta = Values(kCols, 21, -0.5f, 0.5f);
  Tensor tgamma = F32Tensor(gamma), tbeta = F32Tensor(beta);
  for (int64_t r : {1, 7}) {
    INFO("rows = " << r);
    const std::vector<float> x = Values(r * kCols, 22, -1.0f, 3.0f);
    Tensor tx = F32Tensor(x, {r, static_cast<int64_t>(kCols)});
    const Reference want_layernorm = LayerNorm(x, gamma, beta);
    CheckClose(Call(fn_layernorm.get(), stream.get(), {tx.get(), tgamma.get(), tbeta.get()}),
               want_layernorm.values, want_layernorm.scale);
    const Reference want_rmsnorm = RmsNorm(x, gamma);
    CheckClose(Call(fn_rmsnorm.get(), stream.get(), {tx.get(), tgamma.get()}),
               want_rmsnorm.values, want_rmsnorm.scale);
  }
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: kernels read constants uploaded at load, large "
                                 "ones included",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  AxeBuilder b;
  const uint32_t code = AddImage(b);
  const uint32_t rmsnorm =
      b.AddKernel("rmsnorm", code, "axrt_rmsnorm_f32", RmsNormParams(), kCudaBlock);
  const uint32_t add = b.AddKernel("add", code, "axrt_add_f32", BinaryParams(), kCudaBlock);
  const std::vector<float> gamma = Values(kCols, 30, 0.5f, 1.5f);
  const uint32_t c_gamma = b.AddConstant("gamma", AXRT_AXE_DTYPE_FLOAT32, {kCols}, BytesOf(gamma));
  // 16 MiB and a bit: above 4 MiB, so that a driver staging uploads through
  // bounded host buffers goes through several of them.
  const uint64_t n = (uint64_t{1} << 22) + 777;
  const std::vector<float> bias = Values(n, 31);
  const uint32_t c_bias = b.AddConstant("bias", AXRT_AXE_DTYPE_FLOAT32, {n}, BytesOf(bias));

  const Dim rows = Symbolic(0), cols = Fixed(kCols);
  const uint32_t f_rmsnorm =
      b.AddFunction("rmsnorm", {{"rows", kMaxRows}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}}},
                    {{"out", AXRT_AXE_DTYPE_FLOAT32, {rows, cols}}});
  b.Dispatch(f_rmsnorm, rmsnorm, {Sym(0)},
             Concat({BindInput(0), BindConstant(c_gamma), BindOutput(0)}, RowScalars()));
  const uint32_t f_add = b.AddFunction("add_bias", {}, {{"a", AXRT_AXE_DTYPE_FLOAT32, {Fixed(n)}}},
                                       {{"out", AXRT_AXE_DTYPE_FLOAT32, {Fixed(n)}}});
  b.Dispatch(f_add, add, {CeilDiv(Lit(n), kElementsPerWorkgroup)},
             {BindInput(0), BindConstant(c_bias), BindOutput(0), BindScalar(Lit(n))});
  Executable exe = Load(b.Bytes());
  Stream stream = NewStream();

  const std::vector<float> x = Values(3 * kCols, 32, -1.0f, 3.0f);
  Tensor tx = F32Tensor(x, {3, static_cast<int64_t>(kCols)});
  const Reference want_rmsnorm = RmsNorm(x, gamma);
  CheckClose(Call(Main(exe.get(), "rmsnorm").get(), stream.get(), {tx.get()}), want_rmsnorm.values,
             want_rmsnorm.scale);

  const std::vector<float> a = Values(n, 33);
  Tensor ta = F32Tensor(a);
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = a[i] + bias[i];
  CheckEqual(Call(Main(exe.get(), "add_bias").get(), stream.get(), {ta.get()}), want);
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: broken images, missing kernels, foreign targets "
                                 "and mismatched parameters are refused at load",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  Executable exe;
  {
    // Text with the two directives the format wants of PTX, and nothing a
    // PTX compiler accepts; the mock's JIT refuses it by the marker it reads.
    AxeBuilder b;
    const std::string target = ComputeTarget(properties());
    const uint32_t code =
        b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, target,
                  TextBytes(".version 8.0\n.target " + target +
                            "\n// mock-jit-error: this is not PTX\nthis is not PTX {\n"));
    b.AddKernel("add", code, "axrt_add_f32", BinaryParams(), kCudaBlock);
    // Broken, or for all a driver can tell not for this device.
    CHECK_STATUS_ANY(LoadBytes(device(), b.Bytes(), 0, Out(exe)), "code object 0",
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, AXRT_STATUS_CODE_UNIMPLEMENTED);
  }
  {
    // The same for a driver that loads lazily and reports the broken image
    // at the first kernel looked up (the mock does so for this marker).
    AxeBuilder b;
    const std::string target = ComputeTarget(properties());
    const uint32_t code =
        b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, target,
                  TextBytes(".version 8.0\n.target " + target +
                            "\n// mock-lazy-jit-error\nthis is not PTX either {\n"));
    b.AddKernel("add", code, "axrt_add_f32", BinaryParams(), kCudaBlock);
    CHECK_STATUS_ANY(LoadBytes(device(), b.Bytes(), 0, Out(exe)), "code object 0",
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, AXRT_STATUS_CODE_UNIMPLEMENTED);
  }
  {
    AxeBuilder b;
    const uint32_t code = AddImage(b);
    b.AddKernel("missing", code, "axrt_no_such_kernel", BinaryParams(), kCudaBlock);
    CHECK_STATUS(LoadBytes(device(), b.Bytes(), 0, Out(exe)), AXRT_STATUS_CODE_NOT_FOUND,
                 "axrt_no_such_kernel");
  }
  {
    // No device runs sm_10 code, and devices that run CUDA code run no CPU
    // kernels (abi/cts/unsupported.cc), so the kernel has no implementation
    // here.
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary("axrt.cpu");
    const uint32_t code = b.AddCode(Image().kind, "sm_10", Image().bytes);
    const uint32_t k = b.AddKernel("add", lib, "axrt_add_f32", BinaryParams());
    b.AddVariant(k, code, "", kCudaBlock);
    CHECK_STATUS(LoadBytes(device(), b.Bytes(), 0, Out(exe)), AXRT_STATUS_CODE_UNIMPLEMENTED,
                 "sm_10");
  }
  {
    // axrt_add_f32 declared with a parameter it does not have. A driver
    // checks the parameters where the CUDA driver reports a kernel's
    // (cuFuncGetParamInfo, CUDA 12.4 and later), and must then refuse the
    // load; without that report it trusts the executable, and the load
    // succeeds (nothing is launched here).
    std::vector<Param> params = BinaryParams();
    params.push_back(ScalarParam("extra", AXRT_AXE_DTYPE_UINT64));
    AxeBuilder b;
    const uint32_t code = AddImage(b);
    b.AddKernel("add", code, "axrt_add_f32", params, kCudaBlock);
    CHECK_STATUS_ANY(LoadBytes(device(), b.Bytes(), 0, Out(exe)), "axrt_add_f32",
                     AXRT_STATUS_CODE_OK, AXRT_STATUS_CODE_INVALID_ARGUMENT);
  }
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: a kernel launches with more than 48 KiB of dynamic "
                                 "shared memory",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  // CUDA kernels get more than 48 KiB only by opting in
  // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). The kernel ignores
  // the memory: what is tested is that it launches.
  constexpr uint32_t kShared = 64 * 1024;
  if (properties().max_shared_memory_per_workgroup < kShared) {
    WARN("skipped on " << properties().id << ": it allows "
                       << properties().max_shared_memory_per_workgroup
                       << " bytes of shared memory per workgroup");
    return;
  }
  for (bool as_variant : {false, true}) {
    INFO((as_variant ? "a variant" : "the only implementation") << " with 64 KiB");
    Executable exe = Load(AddFile(as_variant, kShared));
    CheckBinary(exe.get(), 5000, as_variant ? Mul : Add);
  }
}

TEST_CASE_METHOD(DeviceCodeTest, "device code: kernels launched in thread block clusters",
                 "[cts][device-code]") {
  CTS_REQUIRE_KERNEL_IMAGE();
  // Clusters exist from sm_90 on. A driver may still be unable to launch
  // them (one without cuLaunchKernelEx); it must then say so at load.
  const bool has_clusters = properties().compute_capability_major >= 9;
  for (bool as_variant : {false, true}) {
    INFO((as_variant ? "a variant" : "the only implementation") << " in clusters of (2, 1, 1)");
    Executable exe;
    Status status(LoadBytes(device(), AddFile(as_variant, 0, {2, 1, 1}), 0, Out(exe)));
    if (!has_clusters || status) {
      CHECK_STATUS(status.release(), AXRT_STATUS_CODE_UNIMPLEMENTED, "clusters");
      continue;
    }
    // Grids of whole clusters.
    for (size_t n : {2u * 4096u, 4u * 4096u - 7u}) CheckBinary(exe.get(), n, as_variant ? Mul : Add);
  }
}

}  // namespace
}  // namespace axrt_cts
