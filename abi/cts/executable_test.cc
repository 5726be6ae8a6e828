// Loading and invoking executables (executable.h), with a kernel library the
// suite registers itself, so that every rule of the load and call paths is
// exercised without depending on the built-in kernels.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"
#include "abi/cts/cts_kernel_library.h"
#include "tests/support/axe_test_builder.h"

namespace axrt_cts {
namespace {

using namespace axrt_test;

// The suite's kernel library, "cts.kernels" (cts_kernel_library.h), and
// what it records.
constexpr uint32_t kElementsPerWorkgroup = kCtsElementsPerWorkgroup;
const axrt_kernel_library_t& kLibrary = *CtsKernelLibrary();
std::atomic<int>& g_init_count = CtsLibrary().init_count;
std::atomic<int>& g_deinit_count = CtsLibrary().deinit_count;
std::atomic<bool>& g_init_fails = CtsLibrary().init_fails;
std::atomic<bool>& g_state_mismatch = CtsLibrary().state_mismatch;

// A device test with the suite's library registered.
class ExecutableTest : public DeviceTest {
 public:
  ExecutableTest() {
    g_init_fails = false;
    g_state_mismatch = false;
    REQUIRE_OK(axrt_instance_register_kernel_library(instance(), &kLibrary));
  }

  // An executable with one function "axpy": out[n] = alpha x + y, with n
  // symbolic (upper bound 1000) or fixed; its producer is the suite.
  std::vector<uint8_t> AxpyFile(bool symbolic = true, float alpha = 2.0f) {
    AxeBuilder b("axrt conformance suite", "1");
    const uint32_t lib = b.AddLibrary("cts.kernels", 1);
    const uint32_t k = b.AddKernel(
        "axpy", lib, "cts_axpy",
        {BufferParam("x"), BufferParam("y"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
         ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("alpha", AXRT_AXE_DTYPE_FLOAT32)});
    const Dim n = symbolic ? Symbolic(0) : Fixed(100);
    const std::vector<SymbolDecl> symbols =
        symbolic ? std::vector<SymbolDecl>{{"n", 1000}} : std::vector<SymbolDecl>{};
    const uint32_t f = b.AddFunction("axpy", symbols, {{"x", AXRT_AXE_DTYPE_FLOAT32, {n}},
                                                      {"y", AXRT_AXE_DTYPE_FLOAT32, {n}}},
                                     {{"out", AXRT_AXE_DTYPE_FLOAT32, {n}}});
    const Expr count = symbolic ? Sym(0) : Lit(100);
    b.Dispatch(f, k, {CeilDiv(count, kElementsPerWorkgroup)},
               {BindInput(0), BindInput(1), BindOutput(0), BindScalar(count),
                BindScalar(F32(alpha))});
    return b.Bytes();
  }

  Executable Load(const std::vector<uint8_t>& bytes) {
    Executable exe;
    REQUIRE_OK(LoadBytes(device(), bytes, 0, Out(exe)));
    return exe;
  }

  Function Find(axrt_executable_t exe, const char* name) {
    Function function;
    REQUIRE_OK(axrt_executable_find_function(exe, name, Out(function)));
    return function;
  }

  Tensor F32Tensor(const std::vector<float>& values) {
    return NewTensor(*this, AXRT_DTYPE_FLOAT32, {static_cast<int64_t>(values.size())},
                     values.data());
  }
};

std::vector<float> Iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_CASE_METHOD(ExecutableTest, "executable: load, inspect and invoke with allocated and "
                                 "supplied outputs",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = Load(AxpyFile());
  axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
  REQUIRE_OK(axrt_executable_query_info(exe.get(), &info));
  CHECK(info.function_count == 1);
  CHECK(info.kernel_count == 1);
  CHECK(std::string(info.producer_name) == "axrt conformance suite");
  CHECK(g_init_count >= 1);

  Function fn = Find(exe.get(), "axpy");
  axrt_function_info_t fi = AXRT_FUNCTION_INFO_INIT;
  REQUIRE_OK(axrt_function_query_info(fn.get(), &fi));
  CHECK(std::string(fi.name) == "axpy");
  CHECK(fi.input_count == 2);
  CHECK(fi.output_count == 1);
  CHECK(fi.symbol_count == 1);
  axrt_argument_info_t arg = AXRT_ARGUMENT_INFO_INIT;
  REQUIRE_OK(axrt_function_query_argument(fn.get(), AXRT_ARGUMENT_KIND_INPUT, 1, &arg));
  CHECK(std::string(arg.name) == "y");
  CHECK(arg.dtype == AXRT_DTYPE_FLOAT32);
  REQUIRE(arg.rank == 1);
  CHECK(arg.dims[0] == -1);
  CHECK(arg.dim_symbols[0] == 0);
  const char* symbol = nullptr;
  uint64_t bound = 0;
  REQUIRE_OK(axrt_function_query_symbol(fn.get(), 0, &symbol, &bound));
  CHECK(std::string(symbol) == "n");
  CHECK(bound == 1000);

  Stream stream = NewStream();
  for (size_t n : {1u, 63u, 64u, 65u, 1000u}) {
    INFO("n = " << n);
    const std::vector<float> x = Iota(n, 1.0f), y = Iota(n, -3.0f);
    Tensor tx = F32Tensor(x), ty = F32Tensor(y);
    axrt_tensor_t inputs[] = {tx.get(), ty.get()};
    axrt_tensor_t outputs[] = {nullptr};
    REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 2, outputs, 1, nullptr));
    Tensor out(outputs[0]);
    REQUIRE(out != nullptr);
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    axrt_tensor_info_t ti = AXRT_TENSOR_INFO_INIT;
    REQUIRE_OK(axrt_tensor_query_info(out.get(), &ti));
    CHECK(ti.dtype == AXRT_DTYPE_FLOAT32);
    REQUIRE(ti.rank == 1);
    CHECK(ti.shape[0] == static_cast<int64_t>(n));
    const std::vector<float> got = ReadAs<float>(*this, out.get());
    REQUIRE(got.size() == n);
    for (size_t i = 0; i < n; ++i) CHECK(got[i] == 2.0f * x[i] + y[i]);
  }

  // A supplied output is written in place.
  const std::vector<float> x = Iota(10, 0.5f), y(10, 1.0f);
  Tensor tx = F32Tensor(x), ty = F32Tensor(y), tout = F32Tensor(std::vector<float>(10, -1.0f));
  axrt_tensor_t inputs[] = {tx.get(), ty.get()};
  axrt_tensor_t outputs[] = {tout.get()};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 2, outputs, 1, nullptr));
  CHECK(outputs[0] == tout.get());
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  const std::vector<float> got = ReadAs<float>(*this, tout.get());
  for (size_t i = 0; i < 10; ++i) CHECK(got[i] == 2.0f * x[i] + 1.0f);
  CHECK_FALSE(g_state_mismatch);
}

TEST_CASE_METHOD(ExecutableTest, "executable: signed scalar parameters take negative literals "
                                 "(format 1.3)",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  // affine(x: f32[n]) -> (out: f32[n]) with the scalars scale = -2.5f (f32),
  // `shift` (i32), bias = -0.25 (f64) and step = -3 (i64).
  auto affine_file = [](Expr shift) {
    AxeBuilder b("axrt conformance suite", "1");
    const uint32_t lib = b.AddLibrary("cts.kernels", 1);
    const uint32_t k = b.AddKernel(
        "affine", lib, "cts_affine",
        {BufferParam("x"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
         ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("scale", AXRT_AXE_DTYPE_FLOAT32),
         ScalarParam("shift", AXRT_AXE_DTYPE_INT32), ScalarParam("bias", AXRT_AXE_DTYPE_FLOAT64),
         ScalarParam("step", AXRT_AXE_DTYPE_INT64)});
    const uint32_t f = b.AddFunction("affine", {{"n", 1000}},
                                     {{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                                     {{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}});
    b.Dispatch(f, k, {CeilDiv(Sym(0), kElementsPerWorkgroup)},
               {BindInput(0), BindOutput(0), BindScalar(Sym(0)), BindScalar(F32(-2.5f)),
                BindScalar(std::move(shift)), BindScalar(F64(-0.25)), BindScalar(Int(-3))});
    return b.Bytes();
  };
  Stream stream = NewStream();
  auto check_affine = [&](axrt_executable_t exe) {
    Function fn = Find(exe, "affine");
    for (size_t n : {1u, 64u, 130u}) {
      INFO("n = " << n);
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i);
      Tensor tx = F32Tensor(x);
      axrt_tensor_t inputs[] = {tx.get()};
      axrt_tensor_t outputs[] = {nullptr};
      REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 1, outputs, 1, nullptr));
      Tensor out(outputs[0]);
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      const std::vector<float> got = ReadAs<float>(*this, out.get());
      REQUIRE(got.size() == n);
      // -2.5 (i / 2) - 7 - 0.25 - 3 i, exact in f32 at these sizes.
      for (size_t i = 0; i < n; ++i) CHECK(got[i] == -4.25f * static_cast<float>(i) - 7.25f);
    }
  };
  Executable exe = Load(affine_file(Int(-7)));
  check_affine(exe.get());
#ifdef AXRT_CTS_GOLDEN_DIR
  // The committed golden file of format 1.3 holds the same function (in
  // the source tree, or under AXRT_CTS_GOLDEN_PATH where the suite runs
  // from a copy of the build).
  const char* golden_dir = std::getenv("AXRT_CTS_GOLDEN_PATH");
  if (golden_dir == nullptr || *golden_dir == '\0') golden_dir = AXRT_CTS_GOLDEN_DIR;
  const std::string golden_file = std::string(golden_dir) + "/v1.3/signed_scalars.axe";
  Executable golden;
  REQUIRE_OK(axrt_executable_load_file(device(), golden_file.c_str(), nullptr, Out(golden)));
  check_affine(golden.get());
#endif

  // A negative literal beyond its parameter's type fails every call,
  // naming the value, as a positive one does.
  Executable wide = Load(affine_file(Int(int64_t{INT32_MIN} - 1)));
  Function wide_fn = Find(wide.get(), "affine");
  Tensor tx = F32Tensor({1.0f});
  axrt_tensor_t inputs[] = {tx.get()};
  axrt_tensor_t outputs[] = {nullptr};
  CHECK_STATUS(axrt_function_invoke(wide_fn.get(), stream.get(), inputs, 1, outputs, 1, nullptr),
               AXRT_STATUS_CODE_OUT_OF_RANGE,
               "scalar argument value -2147483649 does not fit its type int32");
}

TEST_CASE_METHOD(ExecutableTest, "executable: a mutable input is written in place, in stream "
                                 "order",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  // accumulate(acc: mutable f32[n], x: f32[n]): acc = 2 x + acc, in place.
  AxeBuilder b("axrt conformance suite", "1");
  const uint32_t lib = b.AddLibrary("cts.kernels", 1);
  const uint32_t k = b.AddKernel(
      "axpy", lib, "cts_axpy",
      {BufferParam("x"), BufferParam("y"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
       ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("alpha", AXRT_AXE_DTYPE_FLOAT32)});
  Sig acc{"acc", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}};
  acc.is_mutable = true;
  const uint32_t f = b.AddFunction("accumulate", {{"n", 1000}},
                                   {acc, {"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}}, {});
  b.Dispatch(f, k, {CeilDiv(Sym(0), kElementsPerWorkgroup)},
             {BindInput(1), BindInput(0), BindInput(0), BindScalar(Sym(0)), BindScalar(F32(2.0f))});
  Executable exe = Load(b.Bytes());
  Function fn = Find(exe.get(), "accumulate");
  axrt_argument_info_t arg = AXRT_ARGUMENT_INFO_INIT;
  REQUIRE_OK(axrt_function_query_argument(fn.get(), AXRT_ARGUMENT_KIND_INPUT, 0, &arg));
  CHECK(arg.flags == AXRT_ARGUMENT_FLAG_MUTABLE);

  const size_t n = 300;
  const std::vector<float> x = Iota(n, 1.0f);
  Tensor tacc = F32Tensor(std::vector<float>(n, 0.5f)), tx = F32Tensor(x);
  axrt_buffer_t before = nullptr;
  REQUIRE_OK(axrt_tensor_get_buffer(tacc.get(), &before));
  Stream first = NewStream(), second = NewStream();
  axrt_tensor_t inputs[] = {tacc.get(), tx.get()};
  // Three calls queued back to back each see the previous one's writes.
  for (int call = 0; call < 3; ++call) {
    REQUIRE_OK(axrt_function_invoke(fn.get(), first.get(), inputs, 2, nullptr, 0, nullptr));
  }
  // Another stream ordered after them by an event sees them too.
  Event done = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(first.get(), done.get()));
  REQUIRE_OK(axrt_stream_wait_event(second.get(), done.get()));
  REQUIRE_OK(axrt_function_invoke(fn.get(), second.get(), inputs, 2, nullptr, 0, nullptr));
  REQUIRE_OK(axrt_stream_synchronize(second.get()));
  const std::vector<float> got = ReadAs<float>(*this, tacc.get());
  REQUIRE(got.size() == n);
  for (size_t i = 0; i < n; ++i) CHECK(got[i] == 0.5f + 4 * 2.0f * x[i]);
  // The same memory throughout.
  axrt_buffer_t after = nullptr;
  REQUIRE_OK(axrt_tensor_get_buffer(tacc.get(), &after));
  axrt_buffer_info_t info_before = AXRT_BUFFER_INFO_INIT, info_after = AXRT_BUFFER_INFO_INIT;
  REQUIRE_OK(axrt_buffer_query_info(before, &info_before));
  REQUIRE_OK(axrt_buffer_query_info(after, &info_after));
  CHECK(info_before.device_address == info_after.device_address);
  axrt_buffer_release(before);
  axrt_buffer_release(after);
  CHECK_FALSE(g_state_mismatch);
}

TEST_CASE_METHOD(ExecutableTest, "executable: calls that do not match the signature are refused "
                                 "naming the function, the argument and both shapes",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = Load(AxpyFile());
  Function fn = Find(exe.get(), "axpy");
  Stream stream = NewStream();
  Tensor x10 = F32Tensor(std::vector<float>(10, 1.0f));
  Tensor y10 = F32Tensor(std::vector<float>(10, 1.0f));
  Tensor y11 = F32Tensor(std::vector<float>(11, 1.0f));
  Tensor big = F32Tensor(std::vector<float>(1001, 1.0f));
  std::vector<int32_t> ints(10, 1);
  Tensor i10 = NewTensor(*this, AXRT_DTYPE_INT32, {10}, ints.data());
  Tensor m2x5 = NewTensor(*this, AXRT_DTYPE_FLOAT32, {2, 5}, std::vector<float>(10).data());
  axrt_tensor_t out[] = {nullptr};

  axrt_tensor_t one[] = {x10.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), one, 1, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "function 'axpy'");
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), one, 1, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "takes 2 inputs and 1 outputs; the call passes 1");

  axrt_tensor_t wrong_dtype[] = {x10.get(), i10.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), wrong_dtype, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "input 1 ('y') is int32[10] but the signature "
                                                  "wants f32[n<=1000]");
  axrt_tensor_t wrong_rank[] = {x10.get(), m2x5.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), wrong_rank, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "f32[2, 5] but the signature wants f32[n<=1000]");
  axrt_tensor_t inconsistent[] = {x10.get(), y11.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), inconsistent, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "an earlier argument set 'n' to 10");
  axrt_tensor_t too_big[] = {big.get(), big.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), too_big, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "above the bound 1000 of 'n'");
  axrt_tensor_t ok[] = {x10.get(), y10.get()};
  axrt_tensor_t bad_out[] = {y11.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), ok, 2, bad_out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "output 0 ('out') has shape [11]");
  axrt_tensor_t null_input[] = {x10.get(), nullptr};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), null_input, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "inputs[1]");
  CHECK(out[0] == nullptr);  // written only on success

  // A strided view is refused with its strides.
  Buffer buffer;
  REQUIRE_OK(axrt_tensor_get_buffer(m2x5.get(), Out(buffer)));
  const int64_t shape[] = {10};
  const int64_t strides[] = {2};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  desc.strides = strides;
  Tensor strided;
  CHECK_STATUS(axrt_tensor_create(buffer.get(), &desc, Out(strided)),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "needs 76 bytes");
  const int64_t five[] = {5};
  desc.shape = five;
  REQUIRE_OK(axrt_tensor_create(buffer.get(), &desc, Out(strided)));
  Tensor x5 = F32Tensor(std::vector<float>(5, 1.0f));
  axrt_tensor_t with_strided[] = {x5.get(), strided.get()};
  CHECK_STATUS(axrt_function_invoke(fn.get(), stream.get(), with_strided, 2, out, 1, nullptr),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "has strides [2] for shape [5]");

  // Nothing was queued by any refused call; the stream is healthy.
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

TEST_CASE_METHOD(ExecutableTest, "executable: a missing library, kernel or parameter mismatch is "
                                 "refused at load, naming it",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  auto one_kernel = [](const std::string& library, uint32_t min_version, const std::string& entry,
                       const std::vector<Param>& params) {
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary(library, min_version);
    b.AddKernel("k", lib, entry, params);
    return b.Bytes();
  };
  const std::vector<Param> axpy_params = {
      BufferParam("x"), BufferParam("y"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
      ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("alpha", AXRT_AXE_DTYPE_FLOAT32)};
  Executable exe;
  CHECK_STATUS(LoadBytes(device(), one_kernel("no.such.library", 0, "cts_axpy", axpy_params), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_NOT_FOUND, "kernel library 'no.such.library', which is not registered");
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 4, "cts_axpy", axpy_params), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "version 4 or later; version 3 is registered");
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_missing", axpy_params), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_NOT_FOUND, "kernel 'k': kernel library 'cts.kernels'");
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_missing", axpy_params), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_NOT_FOUND, "has no kernel 'cts_missing'");
  std::vector<Param> fewer(axpy_params.begin(), axpy_params.end() - 1);
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_axpy", fewer), 0, Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "declares 4 parameters, but 'cts_axpy'");
  std::vector<Param> wrong_type = axpy_params;
  wrong_type[4].scalar_type = AXRT_AXE_DTYPE_FLOAT64;
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_axpy", wrong_type), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "parameter 4 ('alpha') is a f64 scalar, but 'cts_axpy' in kernel library "
               "'cts.kernels' takes a f32 scalar");
  std::vector<Param> buffer_for_scalar = axpy_params;
  buffer_for_scalar[3] = BufferParam("n");
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_axpy", buffer_for_scalar), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "parameter 3 ('n') is a buffer");

  // A library kernel that reads a quantization layout refuses a parameter
  // that declares none, or another one.
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_dequant_rows",
                                              {BufferParam("w"), BufferParam("out", AXRT_AXE_ACCESS_WRITE)}),
                         0, Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "parameter 0 ('w') declares no quantization layout, but 'cts_dequant_rows' in "
               "kernel library 'cts.kernels' reads layout 'cts.int8.rows'");
  const uint64_t block[] = {1, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "other.int8.rows";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.block_shape = block;
  layout.rank = 2;
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  Param w = BufferParam("w");
  w.layout = &layout;
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_dequant_rows",
                                              {w, BufferParam("out", AXRT_AXE_ACCESS_WRITE)}),
                         0, Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "declares layout 'other.int8.rows', but 'cts_dequant_rows' in kernel library "
               "'cts.kernels' reads layout 'cts.int8.rows'");
  layout.layout_id = "cts.int8.rows";
  REQUIRE_OK(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_dequant_rows",
                                            {w, BufferParam("out", AXRT_AXE_ACCESS_WRITE)}),
                       0, Out(exe)));
  // A plain kernel parameter refuses a declared layout.
  std::vector<Param> axpy_with_layout = axpy_params;
  axpy_with_layout[0].layout = &layout;
  CHECK_STATUS(LoadBytes(device(), one_kernel("cts.kernels", 0, "cts_axpy", axpy_with_layout), 0,
                         Out(exe)),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "but 'cts_axpy' in kernel library 'cts.kernels' "
                                                  "reads plain data there");

  // A kernel library for a GPU target does not run here.
  {
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary("cts.kernels", 0, "sm_90");
    b.AddKernel("k", lib, "cts_axpy", axpy_params);
    CHECK_STATUS(LoadBytes(device(), b.Bytes(), 0, Out(exe)), AXRT_STATUS_CODE_UNIMPLEMENTED,
                 "kernel library for sm_90, which " + DeviceUnderTestId() + " cannot run");
  }
  // Launches beyond the device's limits.
  {
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary("cts.kernels");
    b.AddKernel("k", lib, "cts_axpy", axpy_params, {2048, 1, 1});
    CHECK_STATUS(LoadBytes(device(), b.Bytes(), 0, Out(exe)), AXRT_STATUS_CODE_OUT_OF_RANGE,
                 "workgroup size (2048, 1, 1) exceeds");
  }
  {
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary("cts.kernels");
    b.AddKernel("k", lib, "cts_coverage", {BufferParam("c", AXRT_AXE_ACCESS_WRITE),
                                           BufferParam("s", AXRT_AXE_ACCESS_WRITE)},
                {1, 1, 1}, properties().max_shared_memory_per_workgroup + 1);
    CHECK_STATUS(LoadBytes(device(), b.Bytes(), 0, Out(exe)), AXRT_STATUS_CODE_OUT_OF_RANGE,
                 "bytes of dynamic shared memory exceed");
  }
}

TEST_CASE_METHOD(ExecutableTest, "executable: a failing kernel fails its stream with its message",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  AxeBuilder b;
  const uint32_t lib = b.AddLibrary("cts.kernels");
  const uint32_t k = b.AddKernel("failing", lib, "cts_fail",
                                 {BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                  ScalarParam("failing_workgroup", AXRT_AXE_DTYPE_UINT32)});
  const uint32_t f = b.AddFunction("main", {}, {}, {{"out", AXRT_AXE_DTYPE_UINT32, {Fixed(8)}}});
  b.Fill(f, BindOutput(0), Lit(0), Lit(32), 0, 4);
  b.Dispatch(f, k, {Lit(8)}, {BindOutput(0), BindScalar(Lit(5))});
  Executable exe = Load(b.Bytes());
  Function fn = Find(exe.get(), "main");
  Stream stream = NewStream();
  axrt_tensor_t out[] = {nullptr};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), nullptr, 0, out, 1, nullptr));
  Tensor result(out[0]);
  CHECK_STATUS(axrt_stream_synchronize(stream.get()), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "kernel 'failing' (cts.kernels:cts_fail) failed in command 1 of function 'main'");
  CHECK_STATUS(axrt_stream_synchronize(stream.get()), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "workgroup 5 was told to fail");
  // Sticky: later calls on the stream complete with the same failure.
  axrt_tensor_t again[] = {nullptr};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), nullptr, 0, again, 1, nullptr));
  Tensor second(again[0]);
  CHECK_STATUS(axrt_stream_synchronize(stream.get()), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "workgroup 5 was told to fail");
}

TEST_CASE_METHOD(ExecutableTest, "executable: every workgroup of a 3-D grid runs once, told its "
                                 "dispatch state",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  AxeBuilder b;
  const uint32_t lib = b.AddLibrary("cts.kernels");
  const uint32_t k = b.AddKernel("coverage", lib, "cts_coverage",
                                 {BufferParam("counts", AXRT_AXE_ACCESS_WRITE),
                                  BufferParam("shape", AXRT_AXE_ACCESS_WRITE)},
                                 {8, 4, 2}, 256);
  // Grid (ceil(x / 3), 5, 3) with x symbolic: counts live in the output,
  // the shape words in the arena, copied out at the end.
  const uint32_t f = b.AddFunction("main", {{"x", 64}}, {{"selector", AXRT_AXE_DTYPE_UINT8, {Symbolic(0)}}},
                                   {{"counts", AXRT_AXE_DTYPE_UINT32, {Fixed(22 * 15)}},
                                    {"shape", AXRT_AXE_DTYPE_UINT32, {Fixed(7)}}},
                                   64);
  b.Fill(f, BindOutput(0), Lit(0), Lit(22 * 15 * 4), 0, 4);
  b.Dispatch(f, k, {CeilDiv(Sym(0), 3), Lit(5), Lit(3)}, {BindOutput(0), BindArena(0, 28)});
  b.Copy(f, BindArena(0, 28), Lit(0), BindOutput(1), Lit(0), Lit(28));
  Executable exe = Load(b.Bytes());
  Function fn = Find(exe.get(), "main");
  Stream stream = NewStream();
  for (int64_t x : {1, 3, 4, 64}) {
    INFO("x = " << x);
    std::vector<uint8_t> selector(static_cast<size_t>(x), 0);
    Tensor input = NewTensor(*this, AXRT_DTYPE_UINT8, {x}, selector.data());
    axrt_tensor_t inputs[] = {input.get()};
    axrt_tensor_t out[] = {nullptr, nullptr};
    REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 1, out, 2, nullptr));
    Tensor counts(out[0]), shape(out[1]);
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    const uint32_t gx = static_cast<uint32_t>((x + 2) / 3);
    const std::vector<uint32_t> c = ReadAs<uint32_t>(*this, counts.get());
    for (uint32_t i = 0; i < 22 * 15; ++i) {
      INFO("workgroup " << i);
      CHECK(c[i] == (i < gx * 15 ? 1u : 0u));
    }
    const std::vector<uint32_t> s = ReadAs<uint32_t>(*this, shape.get());
    CHECK(s == std::vector<uint32_t>{gx, 5, 3, 8, 4, 2, 256});
  }
}

TEST_CASE_METHOD(ExecutableTest, "executable: libraries initialise once per device and "
                                 "deinitialise with their last executable",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  const int init_before = g_init_count, deinit_before = g_deinit_count;
  {
    Executable a = Load(AxpyFile());
    Executable b = Load(AxpyFile(false));
    CHECK(g_init_count - init_before == 1);
    a.reset();
    CHECK(g_deinit_count - deinit_before == 0);
    // A queued call keeps its executable alive after the last release.
    Function fn = Find(b.get(), "axpy");
    Stream stream = NewStream();
    Tensor x = F32Tensor(std::vector<float>(100, 1.0f)), y = F32Tensor(std::vector<float>(100, 2.0f));
    axrt_tensor_t inputs[] = {x.get(), y.get()};
    axrt_tensor_t out[] = {nullptr};
    REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 2, out, 1, nullptr));
    Tensor result(out[0]);
    fn.reset();
    b.reset();
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(ReadAs<float>(*this, result.get()) == std::vector<float>(100, 4.0f));
  }
  CHECK(g_init_count - init_before == 1);
  CHECK(g_deinit_count - deinit_before == 1);
  // Loading again initialises again.
  { Executable again = Load(AxpyFile()); }
  CHECK(g_init_count - init_before == 2);
  CHECK(g_deinit_count - deinit_before == 2);
  // A failing init refuses the load with the library's reason.
  g_init_fails = true;
  Executable failed;
  CHECK_STATUS(LoadBytes(device(), AxpyFile(), 0, Out(failed)), AXRT_STATUS_CODE_UNAVAILABLE,
               "kernel library 'cts.kernels' (the library registered by the application) failed "
               "to initialise on " + DeviceUnderTestId() + ": the test asked init to fail");
  g_init_fails = false;
  CHECK(g_deinit_count - deinit_before == 2);
  CHECK_FALSE(g_state_mismatch);
}

TEST_CASE_METHOD(ExecutableTest, "executable: function lookup, bad files and registration errors",
                 "[cts][executable]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = Load(AxpyFile());
  Function fn;
  CHECK_STATUS(axrt_executable_find_function(exe.get(), "mian", Out(fn)), AXRT_STATUS_CODE_NOT_FOUND,
               "has no function 'mian' (it has: axpy)");
  CHECK_STATUS(axrt_executable_get_function(exe.get(), 1, Out(fn)), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "`index` 1 is beyond the 1 functions");
  REQUIRE_OK(axrt_executable_get_function(exe.get(), 0, Out(fn)));
  // A function's reference keeps the executable alive.
  exe.reset();
  axrt_function_info_t fi = AXRT_FUNCTION_INFO_INIT;
  REQUIRE_OK(axrt_function_query_info(fn.get(), &fi));
  CHECK(std::string(fi.name) == "axpy");
  fn.reset();

  std::vector<uint8_t> bytes = AxpyFile();
  bytes[0] ^= 0xff;
  Executable bad;
  CHECK_STATUS(LoadBytes(device(), bytes, 0, Out(bad)), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "executable '<memory>'");
  CHECK_STATUS(axrt_executable_load_file(device(), "/nonexistent/model.axe", nullptr, Out(bad)),
               AXRT_STATUS_CODE_NOT_FOUND, "/nonexistent/model.axe");
  CHECK(bad == nullptr);

  CHECK_STATUS(axrt_instance_register_kernel_library(instance(), &kLibrary),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'cts.kernels' is already registered");
  axrt_kernel_library_t bad_size = kLibrary;
  bad_size.name = "cts.bad";
  axrt_kernel_info_t kernels[5];
  REQUIRE(kLibrary.kernel_count == 5);
  std::memcpy(kernels, kLibrary.kernels, sizeof(kernels));
  kernels[0].args_size = 36;
  bad_size.kernels = kernels;
  CHECK_STATUS(axrt_instance_register_kernel_library(instance(), &bad_size),
               AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "kernel 'cts_axpy' declares a 36-byte argument block, but its 5 parameters lay out "
               "to 40 bytes");
  axrt_kernel_library_t newer = kLibrary;
  newer.name = "cts.newer";
  newer.abi_version = AXRT_KERNEL_ABI_VERSION + 1;
  CHECK_STATUS(axrt_instance_register_kernel_library(instance(), &newer),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "built for kernel ABI version 2");
  axrt_kernel_library_t builtin = kLibrary;
  builtin.name = "axrt.cpu";
  CHECK_STATUS(axrt_instance_register_kernel_library(instance(), &builtin),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'axrt.cpu' is already registered");
}

}  // namespace
}  // namespace axrt_cts
