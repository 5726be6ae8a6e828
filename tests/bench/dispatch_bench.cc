// Host cost of a kernel dispatch on cpu:0: functions of tiny kernels invoked
// through the public C API (axrt_function_invoke + axrt_stream_synchronize),
// set beside calling the same kernel functions directly, the floor no
// runtime can beat. The kernels come from a library the benchmark registers
// itself ("axrt.bench"), so the figures contain no kernel work to speak of.
//
// Every benchmark reports `per_dispatch`, the time per kernel dispatch, so a
// 10-dispatch function reads against the 1-dispatch one directly.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_util.h"

namespace {

using namespace axrt_bench;
using Clock = std::chrono::steady_clock;

constexpr int64_t kElements = 16;  // every tensor here is f32 [16]
// The idle gap before each call of the AfterIdle benchmarks: well past the
// 20 us the CPU stream's worker spins before it sleeps.
constexpr auto kIdleGap = std::chrono::microseconds(200);
// Calls of the AfterIdle benchmarks (the gaps are untimed, so a time-based
// run would last minutes).
constexpr int64_t kIdleIterations = 2000;

// --- The benchmark's kernel library ---------------------------------------------

struct PairArgs {
  const float* x;
  float* y;
};
static_assert(sizeof(PairArgs) == 16);

// Does nothing: a dispatch's cost with no work in it.
axrt_kernel_result_t bench_empty(const void*, const axrt_kernel_dispatch_t*,
                                 const axrt_kernel_workgroup_t*) {
  return AXRT_KERNEL_OK;
}

struct AddOneArgs {
  const float* x;
  float* y;
  uint64_t n;
};
static_assert(sizeof(AddOneArgs) == 24);

// y[i] = x[i] + 1: tiny work, 16 elements in one workgroup.
axrt_kernel_result_t bench_add_one(const void* args, const axrt_kernel_dispatch_t*,
                                   const axrt_kernel_workgroup_t*) {
  const auto& a = *static_cast<const AddOneArgs*>(args);
  for (uint64_t i = 0; i < a.n; ++i) a.y[i] = a.x[i] + 1.0f;
  return AXRT_KERNEL_OK;
}

struct SpinArgs {
  float* y;
  uint64_t ns;
};
static_assert(sizeof(SpinArgs) == 16);

// The thread that calls axrt_function_invoke in the worker-path benchmark,
// and whether bench_spin last ran on it.
std::atomic<std::thread::id> g_calling_thread;
std::atomic<bool> g_spin_ran_inline{false};

// Busy-waits `ns` nanoseconds; 0 returns at once. Notes whether it ran on
// the calling thread (the stream's inline path) or elsewhere (its worker).
axrt_kernel_result_t bench_spin(const void* args, const axrt_kernel_dispatch_t*,
                                const axrt_kernel_workgroup_t*) {
  const auto& a = *static_cast<const SpinArgs*>(args);
  g_spin_ran_inline.store(std::this_thread::get_id() == g_calling_thread.load(),
                          std::memory_order_relaxed);
  if (a.ns == 0) return AXRT_KERNEL_OK;
  const auto end = Clock::now() + std::chrono::nanoseconds(a.ns);
  while (Clock::now() < end) {
  }
  return AXRT_KERNEL_OK;
}

const axrt_kernel_param_info_t kPairParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
};
const axrt_kernel_param_info_t kAddOneParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
const axrt_kernel_param_info_t kSpinParams[] = {
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"ns", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
const axrt_kernel_info_t kKernels[] = {
    {"bench_empty", bench_empty, kPairParams, 2, sizeof(PairArgs)},
    {"bench_add_one", bench_add_one, kAddOneParams, 3, sizeof(AddOneArgs)},
    {"bench_spin", bench_spin, kSpinParams, 2, sizeof(SpinArgs)},
};
const axrt_kernel_library_t kLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, "axrt.bench", kKernels, 3,
    nullptr, nullptr};

// --- Setup ------------------------------------------------------------------

// cpu:0 and a stream on it, the library registered, and one executable with
// the functions:
//   "empty1": y = f(x), one dispatch of bench_empty, grid 1;
//   "add10":  y = x + 10, ten dispatches of bench_add_one (x -> y, then y -> y
//             nine times), each grid 1;
//   "spin":   y untouched, one dispatch of bench_spin for (t.shape[0] - 1)
//             microseconds, where t is a uint8 input of symbolic length.
struct Fixture {
  Device device;
  Stream stream;
  Executable executable;
  Function empty1, add10, spin;
  Tensor x, y;

  Fixture() {
    static const bool registered = [] {
      Check(axrt_instance_register_kernel_library(g_instance, &kLibrary),
            "axrt_instance_register_kernel_library");
      return true;
    }();
    (void)registered;
    axrt_device_t raw_device = nullptr;
    Check(axrt_instance_find_device(g_instance, "cpu:0", &raw_device), "axrt_instance_find_device");
    device.reset(raw_device);
    axrt_stream_t raw_stream = nullptr;
    Check(axrt_stream_create(device.get(), nullptr, &raw_stream), "axrt_stream_create");
    stream.reset(raw_stream);

    AxeBuilder b;
    const uint32_t lib = b.AddLibrary("axrt.bench", 1);
    const uint32_t empty = b.AddKernel("bench_empty", lib, {Read("x"), Write("y")});
    const uint32_t add_one = b.AddKernel("bench_add_one", lib, {Read("x"), Write("y"), U64("n")});
    const uint32_t spin_kernel = b.AddKernel("bench_spin", lib, {Write("y"), U64("ns")});
    const Sig x_sig{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};
    const Sig y_sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};

    const uint32_t f_empty = b.AddFunction("empty1", {}, {x_sig}, {y_sig});
    b.Dispatch(f_empty, empty, Lit(1), Lit(1), {Input(0), Output(0)});

    const uint32_t f_add = b.AddFunction("add10", {}, {x_sig}, {y_sig});
    b.Dispatch(f_add, add_one, Lit(1), Lit(1), {Input(0), Output(0), Scalar(Lit(kElements))});
    for (int i = 1; i < 10; ++i) {
      b.Dispatch(f_add, add_one, Lit(1), Lit(1), {Output(0), Output(0), Scalar(Lit(kElements))});
    }

    const uint32_t f_spin = b.AddFunction("spin", {{"t", uint64_t{1} << 20}},
                                          {Sig{"t", AXRT_AXE_DTYPE_UINT8, {Symbolic(0)}}}, {y_sig});
    b.Dispatch(f_spin, spin_kernel, Lit(1), Lit(1),
               {Output(0), Scalar(Mul(Sub(Sym(0), 1), 1000))});

    executable = b.Load(device.get());
    empty1 = FindFunction(executable.get(), "empty1");
    add10 = FindFunction(executable.get(), "add10");
    spin = FindFunction(executable.get(), "spin");
    std::vector<float> values(kElements);
    for (int64_t i = 0; i < kElements; ++i) values[i] = static_cast<float>(i);
    x = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {kElements}, values.data());
    y = NewTensor(device.get(), AXRT_DTYPE_FLOAT32, {kElements});
  }
};

// The per-call times of a manually timed benchmark. Beside the mean the
// benchmark reports, the median (p50) and 90th percentile (p90): on a
// shared machine one preempted call moves the mean by more than the effect
// measured.
class CallTimes {
 public:
  explicit CallTimes(benchmark::State& state) : state_(state) {
    times_.reserve(static_cast<size_t>(state.max_iterations));
  }
  void Start() { start_ = Clock::now(); }
  void Stop() {
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    state_.SetIterationTime(seconds);
    times_.push_back(seconds);
  }
  void Report() {
    if (times_.empty()) return;
    std::sort(times_.begin(), times_.end());
    state_.counters["p50"] = times_[times_.size() / 2];
    state_.counters["p90"] = times_[times_.size() * 9 / 10];
  }

 private:
  benchmark::State& state_;
  std::vector<double> times_;
  Clock::time_point start_;
};

void SetPerDispatch(benchmark::State& state, int64_t dispatches) {
  state.counters["per_dispatch"] = benchmark::Counter(
      static_cast<double>(dispatches),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// One invoke + synchronize; releases the output when the runtime allocated
// it. Returns false (the benchmark skipped) on failure.
bool InvokeSynchronize(benchmark::State& state, const Fixture& f, axrt_function_t function,
                       bool allocate_output) {
  axrt_tensor_t inputs[] = {f.x.get()};
  axrt_tensor_t outputs[] = {allocate_output ? nullptr : f.y.get()};
  if (Failed(state, axrt_function_invoke(function, f.stream.get(), inputs, 1, outputs, 1, nullptr),
             "axrt_function_invoke") ||
      Failed(state, axrt_stream_synchronize(f.stream.get()), "axrt_stream_synchronize")) {
    return false;
  }
  if (allocate_output) axrt_tensor_release(outputs[0]);
  return true;
}

// Checks that the function did what it should: y = x + 10 for add10.
bool CheckAdd10(benchmark::State& state, const Fixture& f) {
  if (!InvokeSynchronize(state, f, f.add10.get(), false)) return false;
  const auto* y = static_cast<const float*>(TensorData(f.y.get()));
  for (int64_t i = 0; i < kElements; ++i) {
    if (y[i] != static_cast<float>(i) + 10.0f) {
      state.SkipWithError("add10 computed a wrong result");
      return false;
    }
  }
  return true;
}

// The kernels called directly through function pointers the compiler cannot
// see through, with argument blocks built once: bench_empty once, or
// bench_add_one ten times (x -> y, then y -> y), as "add10" runs it.
struct DirectCalls {
  std::vector<float> x = std::vector<float>(kElements, 1.0f);
  std::vector<float> y = std::vector<float>(kElements, 0.0f);
  PairArgs pair{x.data(), y.data()};
  AddOneArgs first{x.data(), y.data(), kElements};
  AddOneArgs rest{y.data(), y.data(), kElements};
  axrt_kernel_dispatch_t dispatch = {};
  char message[256] = "";
  axrt_kernel_workgroup_t workgroup = {};
  axrt_cpu_kernel_fn_t empty = bench_empty;
  axrt_cpu_kernel_fn_t add_one = bench_add_one;

  DirectCalls(const DirectCalls&) = delete;
  DirectCalls& operator=(const DirectCalls&) = delete;
  DirectCalls() {
    dispatch.struct_size = sizeof(dispatch);
    dispatch.workgroup_count = {1, 1, 1};
    dispatch.workgroup_size = {1, 1, 1};
    dispatch.worker_count = 1;
    workgroup.struct_size = sizeof(workgroup);
    workgroup.error_message = message;
    workgroup.error_message_capacity = sizeof(message);
    benchmark::DoNotOptimize(empty);
    benchmark::DoNotOptimize(add_one);
  }

  void Run(int64_t dispatches) {
    if (dispatches == 1) {
      benchmark::DoNotOptimize(empty(&pair, &dispatch, &workgroup));
    } else {
      benchmark::DoNotOptimize(add_one(&first, &dispatch, &workgroup));
      for (int64_t i = 1; i < dispatches; ++i) {
        benchmark::DoNotOptimize(add_one(&rest, &dispatch, &workgroup));
      }
    }
    benchmark::ClobberMemory();
  }
};

// --- Benchmarks ---------------------------------------------------------------

// The floor: the kernels called directly (DirectCalls). Arg 1: bench_empty
// once; arg 10: bench_add_one ten times.
void BM_DispatchDirectCall(benchmark::State& state) {
  const int64_t dispatches = state.range(0);
  DirectCalls calls;
  for (auto _ : state) {
    calls.Run(dispatches);
  }
  SetPerDispatch(state, dispatches);
  state.SetLabel(dispatches == 1 ? "bench_empty" : "bench_add_one x10");
}
BENCHMARK(BM_DispatchDirectCall)->ArgName("dispatches")->Arg(1)->Arg(10)->UseRealTime();

// invoke + synchronize back to back. Args: dispatches (1: "empty1", 10:
// "add10"), and whether the runtime allocates the output (1) or the caller
// supplies it (0); an allocated output is released in the loop, as a client
// would. The function's runs take well under the CPU stream's 50 us inline
// limit, so after the first call they run on the calling thread.
void BM_InvokeSynchronize(benchmark::State& state) {
  const int64_t dispatches = state.range(0);
  const bool allocate = state.range(1) != 0;
  try {
    Fixture f;
    if (!CheckAdd10(state, f)) return;
    axrt_function_t function = dispatches == 1 ? f.empty1.get() : f.add10.get();
    // Once untimed, so the runtime has a short last run on record.
    if (!InvokeSynchronize(state, f, function, allocate)) return;
    for (auto _ : state) {
      if (!InvokeSynchronize(state, f, function, allocate)) break;
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetPerDispatch(state, dispatches);
  state.SetLabel(allocate ? "runtime-allocated output" : "supplied output");
}
BENCHMARK(BM_InvokeSynchronize)
    ->ArgNames({"dispatches", "allocated"})
    ->ArgsProduct({{1, 10}, {0, 1}})
    ->UseRealTime();

// Waits kIdleGap: asleep (the thread leaves its CPU, which may halt or run
// other work, as a client between requests would), or busy-waiting (it
// keeps its CPU). The difference between the two is what the machine charges
// for waking up, not what the runtime does.
void IdleGap(bool sleep) {
  if (sleep) {
    std::this_thread::sleep_for(kIdleGap);
    return;
  }
  const auto end = Clock::now() + kIdleGap;
  while (Clock::now() < end) {
  }
}

// The direct calls of BM_DispatchDirectCall, each after an idle gap: the
// floor for the AfterIdle benchmarks below.
void BM_DispatchDirectCallAfterIdle(benchmark::State& state) {
  const int64_t dispatches = state.range(0);
  const bool sleep = state.range(1) != 0;
  DirectCalls calls;
  CallTimes times(state);
  for (auto _ : state) {
    IdleGap(sleep);
    times.Start();
    calls.Run(dispatches);
    times.Stop();
  }
  times.Report();
  SetPerDispatch(state, dispatches);
  state.SetLabel(std::string(dispatches == 1 ? "bench_empty" : "bench_add_one x10") +
                 (sleep ? ", slept" : ", busy gap"));
}
BENCHMARK(BM_DispatchDirectCallAfterIdle)
    ->ArgNames({"dispatches", "sleep"})
    ->ArgsProduct({{1, 10}, {1, 0}})
    ->Iterations(kIdleIterations)
    ->UseManualTime();

// BM_InvokeSynchronize with each call after the stream sat idle for
// kIdleGap (not timed), the caller asleep (sleep:1) or busy (sleep:0). The
// runs are still short, so the calls still take the inline path and wake no
// thread; what grows is the cost of cold caches, predictors and TLBs.
void BM_InvokeSynchronizeAfterIdle(benchmark::State& state) {
  const int64_t dispatches = state.range(0);
  const bool allocate = state.range(1) != 0;
  const bool sleep = state.range(2) != 0;
  CallTimes times(state);
  try {
    Fixture f;
    axrt_function_t function = dispatches == 1 ? f.empty1.get() : f.add10.get();
    if (!InvokeSynchronize(state, f, function, allocate)) return;
    for (auto _ : state) {
      IdleGap(sleep);
      times.Start();
      if (!InvokeSynchronize(state, f, function, allocate)) break;
      times.Stop();
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  times.Report();
  SetPerDispatch(state, dispatches);
  state.SetLabel(std::string(allocate ? "runtime-allocated output" : "supplied output") +
                 (sleep ? ", slept" : ", busy gap"));
}
BENCHMARK(BM_InvokeSynchronizeAfterIdle)
    ->ArgNames({"dispatches", "allocated", "sleep"})
    ->ArgsProduct({{1, 10}, {0, 1}, {1, 0}})
    ->Iterations(kIdleIterations)
    ->UseManualTime();

// The worker path after idle: the CPU stream runs a function inline only
// when its last run took at most 50 us. Before each timed call, an untimed
// call of "spin" busy-waits 100 us (inline), then the stream idles for
// kIdleGap; the timed call (spin for 0 us) must then go to the stream's
// sleeping worker. `inline` is the share of timed calls whose kernel ran
// on the calling thread (0 when the path is the one intended).
void BM_InvokeWorkerPathAfterIdle(benchmark::State& state) {
  const bool allocate = state.range(0) != 0;
  int64_t ran_inline = 0;
  CallTimes times(state);
  try {
    Fixture f;
    g_calling_thread.store(std::this_thread::get_id());
    Tensor t_long = NewTensor(f.device.get(), AXRT_DTYPE_UINT8, {101});  // spins 100 us
    Tensor t_short = NewTensor(f.device.get(), AXRT_DTYPE_UINT8, {1});   // spins 0 us
    auto call = [&](axrt_tensor_t t, bool allocate_output) {
      axrt_tensor_t inputs[] = {t};
      axrt_tensor_t outputs[] = {allocate_output ? nullptr : f.y.get()};
      if (Failed(state,
                 axrt_function_invoke(f.spin.get(), f.stream.get(), inputs, 1, outputs, 1, nullptr),
                 "axrt_function_invoke") ||
          Failed(state, axrt_stream_synchronize(f.stream.get()), "axrt_stream_synchronize")) {
        return false;
      }
      if (allocate_output) axrt_tensor_release(outputs[0]);
      return true;
    };
    for (auto _ : state) {
      if (!call(t_long.get(), false)) break;
      IdleGap(true);
      times.Start();
      if (!call(t_short.get(), allocate)) break;
      times.Stop();
      ran_inline += g_spin_ran_inline.load(std::memory_order_relaxed) ? 1 : 0;
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  times.Report();
  SetPerDispatch(state, 1);
  state.counters["inline"] = benchmark::Counter(
      static_cast<double>(ran_inline) / static_cast<double>(std::max<int64_t>(state.iterations(), 1)));
  state.SetLabel(allocate ? "runtime-allocated output" : "supplied output");
}
BENCHMARK(BM_InvokeWorkerPathAfterIdle)
    ->ArgName("allocated")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(kIdleIterations)
    ->UseManualTime();

// --- Tracing (docs/profiling.md, "Cost") --------------------------------------

// A trace running for the benchmark's duration, written to a temporary file
// and removed after.
class ScopedTrace {
 public:
  ScopedTrace(benchmark::State& state, axrt_instance_t instance) : instance_(instance) {
    path_ = "/tmp/axrt-bench-trace-" + std::to_string(::getpid()) + ".json";
    axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
    options.path = path_.c_str();
    options.max_events = kTraceEvents;
    running_ = !Failed(state, axrt_instance_trace_start(instance_, &options),
                       "axrt_instance_trace_start");
  }
  ~ScopedTrace() {
    if (!running_) return;
    axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
    axrt_status_free(axrt_instance_trace_stop(instance_, &result));
    dropped_ = result.dropped_events;
    std::remove(path_.c_str());
  }
  bool running() const { return running_; }

  // Every benchmark below stays within this many events.
  static constexpr uint64_t kTraceEvents = 1u << 21;

 private:
  axrt_instance_t instance_;
  std::string path_;
  bool running_ = false;
  uint64_t dropped_ = 0;
};

// invoke + synchronize with a trace running: per call one API call, one
// function slice and one slice per dispatch are recorded (12 events for
// add10), beside BM_InvokeSynchronize's untraced figure.
void BM_InvokeSynchronizeTraced(benchmark::State& state) {
  const int64_t dispatches = state.range(0);
  try {
    Fixture f;
    if (!CheckAdd10(state, f)) return;
    axrt_function_t function = dispatches == 1 ? f.empty1.get() : f.add10.get();
    if (!InvokeSynchronize(state, f, function, false)) return;
    ScopedTrace trace(state, g_instance);
    if (!trace.running()) return;
    for (auto _ : state) {
      if (!InvokeSynchronize(state, f, function, false)) break;
    }
    state.counters["events_per_call"] = static_cast<double>(2 + dispatches);
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetPerDispatch(state, dispatches);
}
BENCHMARK(BM_InvokeSynchronizeTraced)
    ->ArgName("dispatches")
    ->Arg(1)
    ->Arg(10)
    ->Iterations(100000)
    ->UseRealTime();

// The recording path alone: a range's begin and end (two events) per
// iteration, with no trace (the cost of a recording point switched off) and
// with one.
void BM_TraceRange(benchmark::State& state) {
  const bool traced = state.range(0) != 0;
  try {
    Fixture f;
    std::unique_ptr<ScopedTrace> trace;
    if (traced) {
      trace = std::make_unique<ScopedTrace>(state, g_instance);
      if (!trace->running()) return;
    }
    for (auto _ : state) {
      axrt_status_free(axrt_trace_range_begin("bench"));
      axrt_trace_range_end();
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.counters["per_event"] = benchmark::Counter(
      2.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(traced ? "trace running" : "no trace");
}
BENCHMARK(BM_TraceRange)->ArgName("traced")->Arg(0)->Arg(1)->Iterations(500000)->UseRealTime();

}  // namespace
