// Throughput of the built-in CPU kernels (kernels/cpu, docs/kernels.md), set
// side by side with what a client could use instead, and with the same work
// run through the runtime:
//   - f32 matmul y = x . w + bias: axrt_matmul_f32 called directly over all
//     workgroups on one thread; a naive triple loop; OpenBLAS cblas_sgemm on
//     one thread and on every CPU; and a one-dispatch function invoked on
//     cpu:0, whose workgroups run on the CPU driver's pool.
//   - a quantized 2-layer MLP (int8 per-channel fc1, exact GELU, AWQ int4
//     fc2, symbolic batch) built in process with the builder C API: its three
//     kernels called directly on one thread, and the function invoked on
//     cpu:0.
// Every benchmark reports FLOPS (multiply-adds count 2), so ratios read off
// directly. Times are wall clock: the runtime's workgroups run on other
// threads.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/library.h"
#include "tests/bench/bench_util.h"

#if defined(AXRT_BENCH_HAVE_OPENBLAS)
#include <cblas.h>
// OpenBLAS's own cblas.h declares these; a cblas.h of another provider found
// beside libopenblas does not.
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" char* openblas_get_config(void);
#endif

namespace axrt_bench {
axrt_instance_t g_instance = nullptr;
}  // namespace axrt_bench

namespace {

using namespace axrt_bench;

constexpr uint32_t kTile = 64;         // matmul workgroup tile (docs/kernels.md)
constexpr uint64_t kGeluChunk = 4096;  // elements per elementwise workgroup
constexpr uint64_t kGroupSize = 128;   // AWQ group
constexpr uint64_t kMaxBatch = 64;     // the MLP's bound on its batch symbol

uint32_t CeilDiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// --- The built-in kernels, called directly ------------------------------------------

// The argument blocks of docs/kernels.md.
struct MatmulF32Args {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  uint64_t M, N, K;
};
static_assert(sizeof(MatmulF32Args) == 56);

struct MatmulInt8Args {
  const float* x;
  const int8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M, N, K;
};
static_assert(sizeof(MatmulInt8Args) == 64);

struct MatmulInt4Args {
  const float* x;
  const uint32_t* qweight;
  const uint16_t* scales;
  const uint32_t* qzeros;
  const float* bias;
  float* y;
  uint64_t M, N, K, group_size;
};
static_assert(sizeof(MatmulInt4Args) == 80);

struct UnaryArgs {
  const float* x;
  float* out;
  uint64_t n;
};
static_assert(sizeof(UnaryArgs) == 24);

// The kernel `name` of the built-in library, checked against the size of
// the argument block this file builds for it.
axrt_cpu_kernel_fn_t BuiltinKernel(const char* name, uint32_t args_size) {
  const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    const axrt_kernel_info_t& kernel = library->kernels[i];
    if (std::strcmp(kernel.name, name) != 0) continue;
    if (kernel.args_size != args_size) {
      throw SetupError(std::string(name) + ": the library's argument block is " +
                       std::to_string(kernel.args_size) + " bytes, this benchmark builds " +
                       std::to_string(args_size));
    }
    return kernel.function;
  }
  throw SetupError(std::string("the built-in library has no kernel ") + name);
}

// Runs every workgroup of a (gx, gy) grid on the calling thread, in order,
// as one worker of one.
void RunAllWorkgroups(axrt_cpu_kernel_fn_t kernel, const void* args, uint32_t gx, uint32_t gy,
                      const char* what) {
  axrt_kernel_dispatch_t dispatch = {};
  dispatch.struct_size = sizeof(dispatch);
  dispatch.workgroup_count = {gx, gy, 1};
  dispatch.workgroup_size = {1, 1, 1};
  dispatch.worker_count = 1;
  char message[256] = "";
  axrt_kernel_workgroup_t workgroup = {};
  workgroup.struct_size = sizeof(workgroup);
  workgroup.error_message = message;
  workgroup.error_message_capacity = sizeof(message);
  for (uint32_t y = 0; y < gy; ++y) {
    for (uint32_t x = 0; x < gx; ++x) {
      workgroup.workgroup_id = {x, y, 0};
      if (kernel(args, &dispatch, &workgroup) != AXRT_KERNEL_OK) {
        throw SetupError(std::string(what) + " failed: " + message);
      }
    }
  }
}

// --- f32 matmul -------------------------------------------------------------------

struct MatmulProblem {
  uint64_t M, N, K;
  std::vector<float> x, w, bias, y;

  explicit MatmulProblem(uint64_t size) : M(size), N(size), K(size) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    x.resize(M * K);
    w.resize(K * N);
    bias.resize(N);
    y.assign(M * N, 0.0f);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    for (float& v : bias) v = dist(rng);
  }

  // Compares 64 spread elements of `result` with a double-precision
  // reference, within the bound docs/kernels.md states for the kernel
  // (scaled up 10x: BLAS sums in another order).
  void Verify(const float* result, const char* what) const {
    for (uint64_t s = 0; s < 64; ++s) {
      const uint64_t i = (s * 7919) % M, j = (s * 104729) % N;
      double ref = bias[j], magnitude = std::fabs(bias[j]);
      for (uint64_t k = 0; k < K; ++k) {
        ref += static_cast<double>(x[i * K + k]) * w[k * N + j];
        magnitude += std::fabs(static_cast<double>(x[i * K + k]) * w[k * N + j]);
      }
      if (std::fabs(result[i * N + j] - ref) > 1e-4 * magnitude + 1e-5) {
        char message[160];
        std::snprintf(message, sizeof(message), "%s: y[%llu][%llu] = %g, expected %g", what,
                      static_cast<unsigned long long>(i), static_cast<unsigned long long>(j),
                      result[i * N + j], ref);
        throw SetupError(message);
      }
    }
  }

  double Flops() const { return 2.0 * static_cast<double>(M) * N * K; }
};

void SetFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] = benchmark::Counter(
      flops_per_iteration, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Runs `body` once (checked against the reference by `verify`), then times
// it. SetupErrors become a skip.
template <typename Body, typename Verify>
void TimeChecked(benchmark::State& state, Body&& body, Verify&& verify) {
  try {
    body();
    verify();
    for (auto _ : state) {
      body();
      benchmark::ClobberMemory();
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
  }
}

// axrt_matmul_f32 over all workgroups, one thread.
void BM_MatmulKernelDirect(benchmark::State& state) {
  MatmulProblem p(static_cast<uint64_t>(state.range(0)));
  TimeChecked(
      state,
      [&] {
        static axrt_cpu_kernel_fn_t kernel = BuiltinKernel("axrt_matmul_f32", sizeof(MatmulF32Args));
        const MatmulF32Args args{p.x.data(), p.w.data(), p.bias.data(), p.y.data(), p.M, p.N, p.K};
        RunAllWorkgroups(kernel, &args, CeilDiv(p.N, kTile), CeilDiv(p.M, kTile), "axrt_matmul_f32");
      },
      [&] { p.Verify(p.y.data(), "axrt_matmul_f32"); });
  SetFlops(state, p.Flops());
  state.counters["threads"] = 1;
}
BENCHMARK(BM_MatmulKernelDirect)->ArgName("size")->Arg(256)->Arg(512)->Arg(1024)->UseRealTime();

// The textbook i-j-k loop with a float accumulator, as a C programmer writes
// it first (the build's baseline ISA, no FMA contraction).
void BM_MatmulNaive(benchmark::State& state) {
  MatmulProblem p(static_cast<uint64_t>(state.range(0)));
  TimeChecked(
      state,
      [&] {
        for (uint64_t i = 0; i < p.M; ++i) {
          for (uint64_t j = 0; j < p.N; ++j) {
            float acc = p.bias[j];
            for (uint64_t k = 0; k < p.K; ++k) acc += p.x[i * p.K + k] * p.w[k * p.N + j];
            p.y[i * p.N + j] = acc;
          }
        }
      },
      [&] { p.Verify(p.y.data(), "naive loop"); });
  SetFlops(state, p.Flops());
  state.counters["threads"] = 1;
}
BENCHMARK(BM_MatmulNaive)->ArgName("size")->Arg(256)->Arg(512)->Arg(1024)->UseRealTime();

// cblas_sgemm with beta = 1 over y pre-filled with the bias rows, so it
// computes what the kernel does. Arg threads: 0 means every CPU.
void BM_MatmulOpenBlas(benchmark::State& state) {
#if defined(AXRT_BENCH_HAVE_OPENBLAS)
  MatmulProblem p(static_cast<uint64_t>(state.range(0)));
  const int threads = state.range(1) == 0 ? static_cast<int>(std::thread::hardware_concurrency())
                                          : static_cast<int>(state.range(1));
  openblas_set_num_threads(threads);
  TimeChecked(
      state,
      [&] {
        for (uint64_t i = 0; i < p.M; ++i) {
          std::memcpy(p.y.data() + i * p.N, p.bias.data(), p.N * sizeof(float));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(p.M),
                    static_cast<int>(p.N), static_cast<int>(p.K), 1.0f, p.x.data(),
                    static_cast<int>(p.K), p.w.data(), static_cast<int>(p.N), 1.0f, p.y.data(),
                    static_cast<int>(p.N));
      },
      [&] { p.Verify(p.y.data(), "cblas_sgemm"); });
  // Back to one thread, so idle OpenBLAS threads stay asleep while the
  // other benchmarks run.
  openblas_set_num_threads(1);
  SetFlops(state, p.Flops());
  state.counters["threads"] = threads;
#else
  state.SkipWithError("OpenBLAS was not found when this benchmark was configured "
                      "(install libopenblas-dev and reconfigure)");
#endif
}

// --- Through the runtime --------------------------------------------------------------

Device CpuDevice() {
  axrt_device_t raw = nullptr;
  Check(axrt_instance_find_device(g_instance, "cpu:0", &raw), "axrt_instance_find_device");
  return Device(raw);
}

Stream NewStream(axrt_device_t device) {
  axrt_stream_t raw = nullptr;
  Check(axrt_stream_create(device, nullptr, &raw), "axrt_stream_create");
  return Stream(raw);
}

uint32_t ComputeUnits(axrt_device_t device) {
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  Check(axrt_device_query_properties(device, &properties), "axrt_device_query_properties");
  return properties.compute_units;
}

// One function "matmul": y = x . w + bias, all three inputs, one dispatch of
// axrt_matmul_f32 over ceil(N/64) x ceil(M/64) workgroups. invoke +
// synchronize with a supplied output.
void BM_MatmulRuntime(benchmark::State& state) {
  MatmulProblem p(static_cast<uint64_t>(state.range(0)));
  uint32_t threads = 0;
  try {
    Device device = CpuDevice();
    threads = ComputeUnits(device.get());
    Stream stream = NewStream(device.get());
    AxeBuilder b;
    const uint32_t lib = b.AddLibrary(axrt::kernels::kCpuLibraryName, axrt::kernels::kCpuLibraryVersion);
    const uint32_t kernel =
        b.AddKernel("axrt_matmul_f32", lib,
                    {Read("x"), Read("w"), Read("bias"), Write("y"), U64("M"), U64("N"), U64("K")});
    const uint32_t f = b.AddFunction(
        "matmul", {},
        {Sig{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(p.M), Fixed(p.K)}},
         Sig{"w", AXRT_AXE_DTYPE_FLOAT32, {Fixed(p.K), Fixed(p.N)}},
         Sig{"bias", AXRT_AXE_DTYPE_FLOAT32, {Fixed(p.N)}}},
        {Sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(p.M), Fixed(p.N)}}});
    b.Dispatch(f, kernel, Lit(CeilDiv(p.N, kTile)), Lit(CeilDiv(p.M, kTile)),
               {Input(0), Input(1), Input(2), Output(0), Scalar(Lit(p.M)), Scalar(Lit(p.N)),
                Scalar(Lit(p.K))});
    Executable exe = b.Load(device.get());
    Function function = FindFunction(exe.get(), "matmul");
    const auto m = static_cast<int64_t>(p.M), n = static_cast<int64_t>(p.N),
               k = static_cast<int64_t>(p.K);
    Tensor x = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {m, k}, p.x.data());
    Tensor w = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {k, n}, p.w.data());
    Tensor bias = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {n}, p.bias.data());
    Tensor y = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {m, n});
    axrt_tensor_t inputs[] = {x.get(), w.get(), bias.get()};
    axrt_tensor_t outputs[] = {y.get()};
    auto call = [&] {
      Check(axrt_function_invoke(function.get(), stream.get(), inputs, 3, outputs, 1, nullptr),
            "axrt_function_invoke");
      Check(axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
    };
    TimeChecked(state, call,
                [&] { p.Verify(static_cast<const float*>(TensorData(y.get())), "runtime matmul"); });
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetFlops(state, p.Flops());
  state.counters["threads"] = threads;
}
BENCHMARK(BM_MatmulRuntime)->ArgName("size")->Arg(256)->Arg(512)->Arg(1024)->UseRealTime();

// --- The quantized MLP ------------------------------------------------------------------

// y[B, out] = fc2(gelu(fc1(x))): fc1 int8 per output channel
// ("int8.per_channel": w int8 [hidden, in], scale f32 [hidden, 1]), fc2 AWQ
// int4 ("awq.int4.g128": qweight u32 [hidden, out/8], scales f16
// [hidden/128, out], qzeros u32 [hidden/128, out/8]). Random weights of a
// fixed seed; the values matter only in that they stay finite.
struct Mlp {
  uint64_t in, hidden, out;
  std::vector<int8_t> w1;
  std::vector<float> scale1, bias1;
  std::vector<uint32_t> qweight2, qzeros2;
  std::vector<uint16_t> scales2;
  std::vector<float> bias2;

  Mlp(uint64_t in_features, uint64_t hidden_features, uint64_t out_features)
      : in(in_features), hidden(hidden_features), out(out_features) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> int8(-127, 127);
    std::uniform_int_distribution<uint32_t> word;
    std::uniform_real_distribution<float> small(-0.1f, 0.1f);
    w1.resize(hidden * in);
    for (int8_t& v : w1) v = static_cast<int8_t>(int8(rng));
    scale1.assign(hidden, 1.0f / (127.0f * std::sqrt(static_cast<float>(in))));
    bias1.resize(hidden);
    for (float& v : bias1) v = small(rng);
    qweight2.resize(hidden * out / 8);
    for (uint32_t& v : qweight2) v = word(rng);
    const uint64_t groups = hidden / kGroupSize;
    qzeros2.resize(groups * out / 8);
    for (uint32_t& v : qzeros2) v = word(rng);
    scales2.assign(groups * out, 0x1c00);  // f16 2^-8
    bias2.resize(out);
    for (float& v : bias2) v = small(rng);
  }

  double Flops(uint64_t batch) const {
    return 2.0 * static_cast<double>(batch) * (in * hidden + hidden * out);
  }

  std::vector<float> Input(uint64_t batch) const {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(batch * in);
    for (float& v : x) v = dist(rng);
    return x;
  }
};

const uint64_t kPerChannelBlock[] = {1, 0};
const uint64_t kAwqBlock[] = {kGroupSize, 1};

// The executable of docs/kernels.md's MLP: function "main", x [batch, in] ->
// y [batch, out], batch <= kMaxBatch, the hidden activations in the arena.
Executable BuildMlp(axrt_device_t device, const Mlp& mlp) {
  AxeBuilder b;
  const uint32_t lib = b.AddLibrary(axrt::kernels::kCpuLibraryName, axrt::kernels::kCpuLibraryVersion);

  const uint32_t scale1 =
      b.AddConstant("fc1.weight.scale", AXRT_AXE_DTYPE_FLOAT32, {mlp.hidden, 1}, mlp.scale1);
  axrt_axe_quant_layout_t int8_layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  int8_layout.layout_id = "int8.per_channel";
  int8_layout.element_type = AXRT_AXE_DTYPE_INT8;
  int8_layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  int8_layout.rank = 2;
  int8_layout.block_shape = kPerChannelBlock;
  int8_layout.scale = {static_cast<int32_t>(scale1), AXRT_AXE_DTYPE_FLOAT32,
                       AXRT_AXE_SCALE_LAYOUT_GRID};
  const uint32_t w1 =
      b.AddConstant("fc1.weight", AXRT_AXE_DTYPE_INT8, {mlp.hidden, mlp.in}, mlp.w1, &int8_layout);
  const uint32_t bias1 = b.AddConstant("fc1.bias", AXRT_AXE_DTYPE_FLOAT32, {mlp.hidden}, mlp.bias1);

  const uint64_t groups = mlp.hidden / kGroupSize;
  const uint32_t scales2 =
      b.AddConstant("fc2.scales", AXRT_AXE_DTYPE_FLOAT16, {groups, mlp.out}, mlp.scales2);
  const uint32_t qzeros2 =
      b.AddConstant("fc2.qzeros", AXRT_AXE_DTYPE_INT32, {groups, mlp.out / 8}, mlp.qzeros2);
  const axrt_axe_packing_t awq_packing = {4, 32, 1, AXRT_AXE_ELEMENT_ORDER_AWQ,
                                          AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT,
                                          AXRT_AXE_PADDING_RULE_EXACT};
  axrt_axe_quant_layout_t awq_layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  awq_layout.layout_id = "awq.int4.g128";
  awq_layout.element_type = AXRT_AXE_DTYPE_UINT4;
  awq_layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  awq_layout.rank = 2;
  awq_layout.block_shape = kAwqBlock;
  awq_layout.scale = {static_cast<int32_t>(scales2), AXRT_AXE_DTYPE_FLOAT16,
                      AXRT_AXE_SCALE_LAYOUT_GRID};
  awq_layout.zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_INTEGER;
  awq_layout.zero_point.constant = static_cast<int32_t>(qzeros2);
  awq_layout.zero_point.dtype = AXRT_AXE_DTYPE_UINT4;
  awq_layout.zero_point.packing = awq_packing;
  awq_layout.packing = awq_packing;
  const uint32_t qweight2 = b.AddConstant("fc2.qweight", AXRT_AXE_DTYPE_UINT4,
                                          {mlp.hidden, mlp.out}, mlp.qweight2, &awq_layout);
  const uint32_t bias2 = b.AddConstant("fc2.bias", AXRT_AXE_DTYPE_FLOAT32, {mlp.out}, mlp.bias2);

  const uint32_t fc1 = b.AddKernel("axrt_matmul_int8_pc_f32", lib,
                                   {Read("x"), Read("w", &int8_layout), Read("scale"), Read("bias"),
                                    Write("y"), U64("M"), U64("N"), U64("K")});
  const uint32_t gelu = b.AddKernel("axrt_gelu_f32", lib, {Read("x"), Write("out"), U64("n")});
  const uint32_t fc2 = b.AddKernel("axrt_matmul_awq_int4_f32", lib,
                                   {Read("x"), Read("qweight", &awq_layout), Read("scales"),
                                    Read("qzeros"), Read("bias"), Write("y"), U64("M"), U64("N"),
                                    U64("K"), U64("group_size")});

  const uint64_t arena = kMaxBatch * mlp.hidden * sizeof(float);
  const uint32_t f = b.AddFunction(
      "main", {{"batch", kMaxBatch}},
      {Sig{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0), Fixed(mlp.in)}}},
      {Sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0), Fixed(mlp.out)}}}, arena);
  const Bind hidden = Arena(0, arena);
  b.Dispatch(f, fc1, Lit(CeilDiv(mlp.hidden, kTile)), CeilDiv(Sym(0), kTile),
             {Input(0), Constant(w1), Constant(scale1), Constant(bias1), hidden, Scalar(Sym(0)),
              Scalar(Lit(mlp.hidden)), Scalar(Lit(mlp.in))});
  b.Dispatch(f, gelu, CeilDiv(Mul(Sym(0), mlp.hidden), kGeluChunk), Lit(1),
             {hidden, hidden, Scalar(Mul(Sym(0), mlp.hidden))});
  b.Dispatch(f, fc2, Lit(CeilDiv(mlp.out, kTile)), CeilDiv(Sym(0), kTile),
             {hidden, Constant(qweight2), Constant(scales2), Constant(qzeros2), Constant(bias2),
              Output(0), Scalar(Sym(0)), Scalar(Lit(mlp.out)), Scalar(Lit(mlp.hidden)),
              Scalar(Lit(kGroupSize))});
  return b.Load(device);
}

// The three kernels called directly over all their workgroups, one thread.
void RunMlpDirect(const Mlp& mlp, uint64_t batch, const float* x, float* hidden, float* y) {
  static axrt_cpu_kernel_fn_t fc1 =
      BuiltinKernel("axrt_matmul_int8_pc_f32", sizeof(MatmulInt8Args));
  static axrt_cpu_kernel_fn_t gelu = BuiltinKernel("axrt_gelu_f32", sizeof(UnaryArgs));
  static axrt_cpu_kernel_fn_t fc2 =
      BuiltinKernel("axrt_matmul_awq_int4_f32", sizeof(MatmulInt4Args));
  const MatmulInt8Args a1{x, mlp.w1.data(), mlp.scale1.data(), mlp.bias1.data(), hidden,
                          batch, mlp.hidden, mlp.in};
  RunAllWorkgroups(fc1, &a1, CeilDiv(mlp.hidden, kTile), CeilDiv(batch, kTile), "fc1");
  const UnaryArgs a2{hidden, hidden, batch * mlp.hidden};
  RunAllWorkgroups(gelu, &a2, CeilDiv(batch * mlp.hidden, kGeluChunk), 1, "gelu");
  const MatmulInt4Args a3{hidden, mlp.qweight2.data(), mlp.scales2.data(), mlp.qzeros2.data(),
                          mlp.bias2.data(), y, batch, mlp.out, mlp.hidden, kGroupSize};
  RunAllWorkgroups(fc2, &a3, CeilDiv(mlp.out, kTile), CeilDiv(batch, kTile), "fc2");
}

void CheckFinite(const float* y, size_t count, const char* what) {
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(y[i])) throw SetupError(std::string(what) + " produced a non-finite value");
  }
}

void MlpLabel(benchmark::State& state, const Mlp& mlp, uint64_t batch) {
  state.SetLabel("in=" + std::to_string(mlp.in) + " hidden=" + std::to_string(mlp.hidden) +
                 " out=" + std::to_string(mlp.out) + " batch=" + std::to_string(batch));
}

// Args: in, hidden, out, batch.
void BM_MlpKernelsDirect(benchmark::State& state) {
  const Mlp mlp(state.range(0), state.range(1), state.range(2));
  const auto batch = static_cast<uint64_t>(state.range(3));
  const std::vector<float> x = mlp.Input(batch);
  std::vector<float> hidden(batch * mlp.hidden), y(batch * mlp.out);
  TimeChecked(
      state, [&] { RunMlpDirect(mlp, batch, x.data(), hidden.data(), y.data()); },
      [&] { CheckFinite(y.data(), y.size(), "the MLP's kernels"); });
  SetFlops(state, mlp.Flops(batch));
  state.counters["threads"] = 1;
  MlpLabel(state, mlp, batch);
}

// invoke + synchronize of "main" with a supplied output; checked once
// against the direct calls.
void BM_MlpRuntime(benchmark::State& state) {
  const Mlp mlp(state.range(0), state.range(1), state.range(2));
  const auto batch = static_cast<uint64_t>(state.range(3));
  uint32_t threads = 0;
  try {
    Device device = CpuDevice();
    threads = ComputeUnits(device.get());
    Stream stream = NewStream(device.get());
    Executable exe = BuildMlp(device.get(), mlp);
    Function function = FindFunction(exe.get(), "main");
    const std::vector<float> host_x = mlp.Input(batch);
    const auto b = static_cast<int64_t>(batch);
    Tensor x = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {b, static_cast<int64_t>(mlp.in)},
                         host_x.data());
    Tensor y = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {b, static_cast<int64_t>(mlp.out)});
    axrt_tensor_t inputs[] = {x.get()};
    axrt_tensor_t outputs[] = {y.get()};
    auto call = [&] {
      Check(axrt_function_invoke(function.get(), stream.get(), inputs, 1, outputs, 1, nullptr),
            "axrt_function_invoke");
      Check(axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
    };
    auto verify = [&] {
      std::vector<float> hidden(batch * mlp.hidden), expected(batch * mlp.out);
      RunMlpDirect(mlp, batch, host_x.data(), hidden.data(), expected.data());
      const auto* got = static_cast<const float*>(TensorData(y.get()));
      for (size_t i = 0; i < expected.size(); ++i) {
        if (std::fabs(got[i] - expected[i]) > 1e-4f * (1.0f + std::fabs(expected[i]))) {
          throw SetupError("the MLP through the runtime differs from its kernels called directly "
                           "at y[" + std::to_string(i) + "]");
        }
      }
    };
    TimeChecked(state, call, verify);
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetFlops(state, mlp.Flops(batch));
  state.counters["threads"] = threads;
  MlpLabel(state, mlp, batch);
}

void MlpSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"in", "hidden", "out", "batch"});
  for (int64_t batch : {1, 16}) b->Args({256, 1024, 256, batch});
  for (int64_t batch : {1, 16}) b->Args({1024, 4096, 1024, batch});
  b->UseRealTime();
}
BENCHMARK(BM_MlpKernelsDirect)->Apply(MlpSizes);
BENCHMARK(BM_MlpRuntime)->Apply(MlpSizes);

// OpenBLAS last: once it has run on several threads, its idle threads
// busy-wait for a while and would take a core from whatever ran next.
BENCHMARK(BM_MatmulOpenBlas)
    ->ArgNames({"size", "threads"})
    ->ArgsProduct({{256, 512, 1024}, {1}})
    ->UseRealTime();
BENCHMARK(BM_MatmulOpenBlas)
    ->ArgNames({"size", "threads"})
    ->ArgsProduct({{256, 512, 1024}, {0}})
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
#if defined(AXRT_BENCH_HAVE_OPENBLAS)
  openblas_set_num_threads(1);
  benchmark::AddCustomContext("openblas", openblas_get_config());
#else
  benchmark::AddCustomContext("openblas", "not found at configure time");
#endif

  axrt_status_t status = axrt_instance_create(nullptr, &g_instance);
  if (status != nullptr) {
    std::fprintf(stderr, "axrt_kernel_bench: axrt_instance_create: %s: %s\n",
                 axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
    axrt_status_free(status);
    return 1;
  }
  benchmark::AddCustomContext("axrt_version", axrt_version_string());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  axrt_instance_release(g_instance);
  return 0;
}
