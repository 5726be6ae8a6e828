// The CUDA driver against the raw Driver API, in the same process run: every
// runtime benchmark here has a twin that does the same work with the CUDA
// entry points the driver itself loaded (axrt::cuda::cuda_api(), the static
// axrt_internal's), on the same device and the same primary context. The
// figures only mean something as a ratio taken on one machine in one run.
//
//   Dispatch    axrt_function_invoke of one axrt_add_f32 dispatch (1024
//               floats) vs cuLaunchKernel of the same kernel from the same
//               image with the same 32-byte parameter buffer; and
//               axrt_graph_replay of a graph of 1 or 64 such dispatches
//               (per_dispatch: the host time of a replayed kernel).
//   Copy        host -> device and device -> host, 64 KiB to 256 MiB, from
//               pinned and from pageable memory, each copy followed by a
//               synchronize, vs cuMemcpy{HtoD,DtoH}Async + cuStreamSynchronize.
//   Allocate    axrt_buffer_allocate + axrt_buffer_release (the device's
//               stream-ordered pool) vs cuMemAlloc + cuMemFree.
//
// Every benchmark runs on cuda:0 and skips, naming the CUDA driver's reason,
// when there is none. Without a GPU, AXRT_CUDA_DRIVER_LIBRARY may name the
// in-project mock (tests/mock_cuda, libaxrt_mock_cuda.so): device memory is
// host memory there and kernels run on host threads, so the run is a smoke
// test of both sides and its figures say nothing about a GPU. The context
// entry `cuda_driver_library` says which library ran.
//
// The kernel image: the fatbin of kernels/cuda when CMake built it
// (AXRT_CUDA_KERNELS_FATBIN, read at run time), else a stand-in that only the
// mock driver accepts; on a real GPU without nvcc's fatbin the dispatch
// benchmarks skip with the load error. The stand-in is a bare fatbin header:
// the mock takes any image with the fatbin magic as providing every kernel it
// registers (axrt_add_f32 among them), and the .axe builder, which checks a
// CUDA_FATBIN's magic, accepts it. (The mock's own text image,
// "AXRTMOCKCUDA\n<names>", is refused by the builder as a CUDA_FATBIN, and
// is no valid PTX or cubin either.)
//
// The raw side takes CUDA ordinal 0, which is cuda:0 unless an earlier CUDA
// device failed to initialise in the runtime (cuda:N counts usable devices).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "axrt/axrt.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "tests/bench/bench_util.h"
#include "tests/mock_cuda/mock_cuda.h"  // the leak count's type only; nothing is linked

namespace axrt_bench {
axrt_instance_t g_instance = nullptr;
}  // namespace axrt_bench

namespace {

using namespace axrt_bench;
using axrt::cuda::CudaApi;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// cuda:0 and the Driver API, or why there are none (set by main()).
axrt_device_t g_device = nullptr;
const CudaApi* g_cu = nullptr;
std::string g_unavailable;

// The code image of axrt_add_f32 and how to declare it in an .axe, or why
// there is none (set by main()).
std::vector<unsigned char> g_image;
axrt_axe_code_object_kind_t g_image_kind = AXRT_AXE_CODE_OBJECT_KIND_INVALID;
const char* g_image_target = "";
const char* g_image_label = "";  // "fatbin", "stand-in fatbin"
std::string g_image_error;

// Whether cuda:0 is there; skips the benchmark with the reason otherwise.
bool HaveCuda(benchmark::State& state) {
  if (g_device != nullptr && g_cu != nullptr) return true;
  state.SkipWithError(("no cuda:0: " + g_unavailable).c_str());
  return false;
}

// A failed CUDA call in the timed loop: skips the benchmark naming it.
bool CuFailed(benchmark::State& state, CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return false;
  state.SkipWithError((std::string(call) + ": " + g_cu->describe(result)).c_str());
  return true;
}

// A failed CUDA call while setting up: thrown, as Check() does for axrt.
void CuCheck(CUresult result, const char* call) {
  if (result != CUDA_SUCCESS) throw SetupError(std::string(call) + ": " + g_cu->describe(result));
}

// --- The raw side ------------------------------------------------------------

// What a client of the raw Driver API sets up: the primary context of CUDA
// device 0 (the one the runtime retained too) made current on this thread, a
// non-blocking stream of its own, and the modules and memory a benchmark asks
// for. The destructor gives everything back (synchronising the stream first)
// and restores the thread's previous context, so a benchmark leaks nothing
// even when it stops half-way.
class RawCuda {
 public:
  RawCuda() : cu_(*g_cu) {
    try {
      CuCheck(cu_.cuDeviceGet(&device_, 0), "cuDeviceGet");
      CuCheck(cu_.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
      CuCheck(cu_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
      CuCheck(cu_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
      switched_ = true;
      CuCheck(cu_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    } catch (...) {
      Close();
      throw;
    }
  }
  ~RawCuda() { Close(); }
  RawCuda(const RawCuda&) = delete;
  RawCuda& operator=(const RawCuda&) = delete;

  const CudaApi& cu() const { return cu_; }
  CUstream stream() const { return stream_; }

  // Device memory, freed by the destructor.
  CUdeviceptr Alloc(size_t size) {
    CUdeviceptr pointer = 0;
    CuCheck(cu_.cuMemAlloc(&pointer, size), "cuMemAlloc");
    device_memory_.push_back(pointer);
    return pointer;
  }
  // Pinned host memory (cuMemHostAlloc), freed by the destructor.
  void* HostAlloc(size_t size) {
    void* pointer = nullptr;
    CuCheck(cu_.cuMemHostAlloc(&pointer, size, 0), "cuMemHostAlloc");
    host_memory_.push_back(pointer);
    return pointer;
  }
  // `name` from a module loaded from `image`, unloaded by the destructor.
  CUfunction LoadFunction(const std::vector<unsigned char>& image, const char* name) {
    CUmodule module = nullptr;
    CuCheck(cu_.cuModuleLoadDataEx(&module, image.data(), 0, nullptr, nullptr),
            "cuModuleLoadDataEx");
    modules_.push_back(module);
    CUfunction function = nullptr;
    CuCheck(cu_.cuModuleGetFunction(&function, module, name), "cuModuleGetFunction");
    return function;
  }

 private:
  void Close() {
    if (stream_ != nullptr) {
      cu_.cuStreamSynchronize(stream_);
      cu_.cuStreamDestroy(stream_);
      stream_ = nullptr;
    }
    for (CUdeviceptr pointer : device_memory_) cu_.cuMemFree(pointer);
    device_memory_.clear();
    for (void* pointer : host_memory_) cu_.cuMemFreeHost(pointer);
    host_memory_.clear();
    for (CUmodule module : modules_) cu_.cuModuleUnload(module);
    modules_.clear();
    if (switched_) {
      cu_.cuCtxSetCurrent(previous_);
      switched_ = false;
    }
    if (context_ != nullptr) {
      cu_.cuDevicePrimaryCtxRelease(device_);
      context_ = nullptr;
    }
  }

  const CudaApi& cu_;
  CUdevice device_ = 0;
  CUcontext previous_ = nullptr;
  CUcontext context_ = nullptr;
  bool switched_ = false;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> device_memory_;
  std::vector<void*> host_memory_;
  std::vector<CUmodule> modules_;
};

// --- The runtime side ----------------------------------------------------------

Stream NewStream() {
  axrt_stream_t raw = nullptr;
  Check(axrt_stream_create(g_device, nullptr, &raw), "axrt_stream_create");
  return Stream(raw);
}

Buffer NewBuffer(uint64_t size, axrt_memory_type_t type = AXRT_MEMORY_TYPE_DEVICE_LOCAL) {
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = type;
  axrt_buffer_t raw = nullptr;
  Check(axrt_buffer_allocate(g_device, size, &options, &raw), "axrt_buffer_allocate");
  return Buffer(raw);
}

// An f32 tensor on cuda:0 holding `values` (copied in on `stream`, which is
// synchronised).
Tensor NewDeviceTensor(axrt_stream_t stream, const std::vector<float>& values) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  axrt_tensor_t raw = nullptr;
  Check(axrt_tensor_allocate(g_device, &desc, nullptr, &raw), "axrt_tensor_allocate");
  Tensor tensor(raw);
  axrt_buffer_t raw_buffer = nullptr;
  Check(axrt_tensor_get_buffer(tensor.get(), &raw_buffer), "axrt_tensor_get_buffer");
  Buffer buffer(raw_buffer);
  Check(axrt_stream_copy_from_host(stream, values.data(), buffer.get(), 0, values.size() * 4),
        "axrt_stream_copy_from_host");
  Check(axrt_stream_synchronize(stream), "axrt_stream_synchronize");
  return tensor;
}

std::vector<float> ReadDeviceTensor(axrt_stream_t stream, axrt_tensor_t tensor, size_t n) {
  axrt_buffer_t raw_buffer = nullptr;
  Check(axrt_tensor_get_buffer(tensor, &raw_buffer), "axrt_tensor_get_buffer");
  Buffer buffer(raw_buffer);
  std::vector<float> out(n);
  Check(axrt_stream_copy_to_host(stream, buffer.get(), 0, out.data(), n * 4),
        "axrt_stream_copy_to_host");
  Check(axrt_stream_synchronize(stream), "axrt_stream_synchronize");
  return out;
}

// Free device memory, through the raw side (the runtime reports only the
// total); the 256 MiB copies skip unless their buffer fits with room to spare.
bool FitsOnDevice(benchmark::State& state, uint64_t bytes) {
  constexpr uint64_t kHeadroom = 64 * kMiB;
  size_t free_bytes = 0, total_bytes = 0;
  {
    RawCuda raw;
    CuCheck(raw.cu().cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo");
  }
  if (free_bytes >= bytes + kHeadroom) return true;
  state.SkipWithError((std::to_string(bytes / kMiB) + " MiB does not fit on cuda:0: " +
                       std::to_string(free_bytes / kMiB) + " MiB free of " +
                       std::to_string(total_bytes / kMiB) + " MiB")
                          .c_str());
  return false;
}

// --- Dispatch -------------------------------------------------------------------

// axrt_add_f32 (docs/kernels.md): out[i] = a[i] + b[i], grid ceil(n / 4096),
// CUDA block 256 threads. One workgroup for the n here.
constexpr uint64_t kAddElements = 1024;
constexpr unsigned kAddGrid = (kAddElements + 4095) / 4096;
constexpr unsigned kAddBlock = 256;
// The stream is synchronised after this many dispatches and after the last
// one, inside the timed loop (see below).
constexpr int64_t kSyncEvery = 4096;

// The kernel's parameter buffer as the driver builds it (buffers are 8-byte
// device addresses, scalars by value): 32 bytes.
struct AddParams {
  CUdeviceptr a;
  CUdeviceptr b;
  CUdeviceptr out;
  uint64_t n;
};
static_assert(sizeof(AddParams) == 32);

std::vector<float> Iota(size_t n, float first) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = first + static_cast<float>(i);
  return values;
}

// Whether out = a + b for the inputs both sides use.
bool CheckSum(benchmark::State& state, const std::vector<float>& a, const std::vector<float>& b,
              const std::vector<float>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != a[i] + b[i]) {
      state.SkipWithError(("axrt_add_f32 computed a wrong result at element " + std::to_string(i))
                              .c_str());
      return false;
    }
  }
  return true;
}

// Whether to synchronise after dispatch number `issued` (from 1).
bool SyncNow(const benchmark::State& state, int64_t issued) {
  return issued % kSyncEvery == 0 || issued == static_cast<int64_t>(state.max_iterations);
}

void SetDispatchCounters(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations());
  state.counters["per_dispatch"] = benchmark::Counter(
      1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// How the loops below are timed. Neither side synchronises per dispatch: what
// a client pays per dispatch is the host cost of issuing it, and a sync per
// call would add a full round trip to the device to both sides and drown the
// difference. Every kSyncEvery dispatches, and after the last one, the
// stream is synchronised *inside* the timed loop, not behind PauseTiming: a
// steady stream of launches must eventually wait for the device, and
// whatever work a side defers to completion (the runtime's bookkeeping of
// finished batches) belongs in its figure; pausing would hide the drain.
//
// The figure is therefore the steady issue rate: the host cost per dispatch
// as long as the device keeps up. A 1024-float add is about the smallest
// launch a GPU runs, but should the device fall behind (its queue fills and
// launches block), both sides converge on the device's own rate and the
// ratio approaches 1: read that as "the runtime's overhead is hidden", not
// as "the runtime adds nothing".

// Function "add" of `dispatches` dispatches of axrt_add_f32 (each x + y ->
// out, all [1024] f32) loaded on cuda:0, with its tensors on `stream`.
struct AddCall {
  AddCall(axrt_stream_t stream, int64_t dispatches) {
    AxeBuilder b;
    const uint32_t code = b.AddCode(g_image_kind, g_image_target, g_image.data(), g_image.size());
    const uint32_t add = b.AddKernel("add", code, {Read("a"), Read("b"), Write("out"), U64("n")},
                                     "axrt_add_f32", {kAddBlock, 1, 1});
    const Sig sig_x{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kAddElements)}};
    const Sig sig_y{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kAddElements)}};
    const Sig sig_out{"out", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kAddElements)}};
    const uint32_t f = b.AddFunction("add", {}, {sig_x, sig_y}, {sig_out});
    for (int64_t i = 0; i < dispatches; ++i) {
      b.Dispatch(f, add, Lit(kAddGrid), Lit(1),
                 {Input(0), Input(1), Output(0), Scalar(Lit(kAddElements))});
    }
    executable = b.Load(g_device);
    function = FindFunction(executable.get(), "add");
    x = NewDeviceTensor(stream, a);
    y = NewDeviceTensor(stream, bv);
    out = NewDeviceTensor(stream, std::vector<float>(kAddElements, 0.0f));
    inputs[0] = x.get();
    inputs[1] = y.get();
    outputs[0] = out.get();
  }

  const std::vector<float> a = Iota(kAddElements, 1.0f), bv = Iota(kAddElements, -7.0f);
  Executable executable;
  Function function;
  Tensor x, y, out;
  axrt_tensor_t inputs[2] = {};
  axrt_tensor_t outputs[1] = {};
};

// The runtime: axrt_function_invoke of "add" (one dispatch of axrt_add_f32,
// x + y -> out, all [1024] f32) with a supplied output tensor.
void BM_CudaDispatchRuntime(benchmark::State& state) {
  if (!HaveCuda(state)) return;
  if (g_image.empty()) {
    state.SkipWithError(g_image_error.c_str());
    return;
  }
  try {
    Stream stream = NewStream();
    AddCall call(stream.get(), 1);
    Function& function = call.function;
    const std::vector<float>& a = call.a;
    const std::vector<float>& bv = call.bv;
    Tensor& out = call.out;
    axrt_tensor_t* inputs = call.inputs;
    axrt_tensor_t* outputs = call.outputs;

    // Once untimed: loads the module on first use, and checks the result.
    if (Failed(state, axrt_function_invoke(function.get(), stream.get(), inputs, 2, outputs, 1,
                                           nullptr),
               "axrt_function_invoke")) {
      return;
    }
    if (!CheckSum(state, a, bv, ReadDeviceTensor(stream.get(), out.get(), kAddElements))) return;

    int64_t issued = 0;
    for (auto _ : state) {
      if (Failed(state, axrt_function_invoke(function.get(), stream.get(), inputs, 2, outputs, 1,
                                             nullptr),
                 "axrt_function_invoke")) {
        break;
      }
      if (SyncNow(state, ++issued) &&
          Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
        break;
      }
    }
    if (Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) return;
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetDispatchCounters(state);
  state.SetLabel(std::string("axrt_function_invoke, ") + g_image_label);
}
BENCHMARK(BM_CudaDispatchRuntime)->UseRealTime();

// A graph (axrt_function_capture) of a function of `dispatches` dispatches
// of the add above, each x + y -> out, replayed: what a replayed kernel
// costs the host (per_dispatch), a CUDA graph launch for the whole function
// where the driver makes one. With 1 dispatch, beside the call above.
void BM_CudaGraphReplay(benchmark::State& state) {
  if (!HaveCuda(state)) return;
  if (g_image.empty()) {
    state.SkipWithError(g_image_error.c_str());
    return;
  }
  const int64_t dispatches = state.range(0);
  uint32_t native = 0;
  try {
    Stream stream = NewStream();
    AddCall call(stream.get(), dispatches);
    Function& function = call.function;
    const std::vector<float>& a = call.a;
    const std::vector<float>& bv = call.bv;
    Tensor& out = call.out;
    axrt_tensor_t* inputs = call.inputs;
    axrt_tensor_t* outputs = call.outputs;
    axrt_graph_t raw_graph = nullptr;
    if (Failed(state, axrt_function_capture(function.get(), stream.get(), inputs, 2, outputs, 1,
                                            nullptr, &raw_graph),
               "axrt_function_capture")) {
      return;
    }
    std::unique_ptr<axrt_graph_s, void (*)(axrt_graph_t)> graph(raw_graph, axrt_graph_release);
    axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
    if (Failed(state, axrt_graph_query_info(graph.get(), &info), "axrt_graph_query_info")) return;
    native = info.native;
    // Once untimed: loads the module on first use, and checks the result.
    if (Failed(state, axrt_graph_replay(graph.get()), "axrt_graph_replay")) return;
    if (!CheckSum(state, a, bv, ReadDeviceTensor(stream.get(), out.get(), kAddElements))) return;

    // A synchronize every kSyncEvery dispatches, as above.
    const int64_t every = std::max<int64_t>(1, kSyncEvery / dispatches);
    int64_t replays = 0;
    for (auto _ : state) {
      if (Failed(state, axrt_graph_replay(graph.get()), "axrt_graph_replay")) break;
      ++replays;
      if ((replays % every == 0 || replays == static_cast<int64_t>(state.max_iterations)) &&
          Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
        break;
      }
    }
    if (Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) return;
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * dispatches);
  state.counters["per_dispatch"] = benchmark::Counter(
      static_cast<double>(dispatches),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string("axrt_graph_replay, ") + (native ? "CUDA graph, " : "resubmitted, ") +
                 g_image_label);
}
BENCHMARK(BM_CudaGraphReplay)->ArgName("dispatches")->Arg(1)->Arg(64)->UseRealTime();

// The floor: cuLaunchKernel of axrt_add_f32 from the same image (loaded with
// cuModuleLoadDataEx), grid 1 x 256 threads, with the same 32-byte parameter
// buffer (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE, as the driver launches), on a
// stream of its own.
void BM_CudaDispatchRaw(benchmark::State& state) {
  if (!HaveCuda(state)) return;
  if (g_image.empty()) {
    state.SkipWithError(g_image_error.c_str());
    return;
  }
  // Host memory first: it outlives `raw`, whose destructor waits for the
  // copies that read or write it.
  const std::vector<float> a = Iota(kAddElements, 1.0f), b = Iota(kAddElements, -7.0f);
  std::vector<float> out(kAddElements);
  try {
    RawCuda raw;
    const CudaApi& cu = raw.cu();
    const CUfunction function = raw.LoadFunction(g_image, "axrt_add_f32");
    const size_t bytes = kAddElements * sizeof(float);
    AddParams params{raw.Alloc(bytes), raw.Alloc(bytes), raw.Alloc(bytes), kAddElements};
    CuCheck(cu.cuMemcpyHtoDAsync(params.a, a.data(), bytes, raw.stream()), "cuMemcpyHtoDAsync");
    CuCheck(cu.cuMemcpyHtoDAsync(params.b, b.data(), bytes, raw.stream()), "cuMemcpyHtoDAsync");
    size_t params_size = sizeof(params);
    void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER, &params,
                     AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE, &params_size, AXRT_CU_LAUNCH_PARAM_END};
    auto launch = [&] {
      return cu.cuLaunchKernel(function, kAddGrid, 1, 1, kAddBlock, 1, 1, 0, raw.stream(), nullptr,
                               extra);
    };

    // Once untimed, checked.
    if (CuFailed(state, launch(), "cuLaunchKernel")) return;
    CuCheck(cu.cuMemcpyDtoHAsync(out.data(), params.out, bytes, raw.stream()), "cuMemcpyDtoHAsync");
    CuCheck(cu.cuStreamSynchronize(raw.stream()), "cuStreamSynchronize");
    if (!CheckSum(state, a, b, out)) return;

    int64_t issued = 0;
    for (auto _ : state) {
      if (CuFailed(state, launch(), "cuLaunchKernel")) break;
      if (SyncNow(state, ++issued) &&
          CuFailed(state, cu.cuStreamSynchronize(raw.stream()), "cuStreamSynchronize")) {
        break;
      }
    }
    if (CuFailed(state, cu.cuStreamSynchronize(raw.stream()), "cuStreamSynchronize")) return;
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  SetDispatchCounters(state);
  state.SetLabel(std::string("cuLaunchKernel, ") + g_image_label);
}
BENCHMARK(BM_CudaDispatchRaw)->UseRealTime();

// --- Copies -------------------------------------------------------------------------

// Args: size in bytes, direction (0: host -> device, 1: device -> host),
// host memory (1: pinned, 0: pageable). Each copy is followed by a
// synchronize, so the figure is end-to-end bandwidth including the
// completion round trip, which dominates at 64 KiB. The device memory is
// written once first, and one copy runs untimed (the runtime creates its
// pinned staging chunks at the first pageable copy).
void CopyArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bytes", "to_host", "pinned"});
  for (int64_t pinned : {1, 0}) {
    for (int64_t to_host : {0, 1}) {
      for (int64_t size : {64 * kKiB, 1 * kMiB, 16 * kMiB, 256 * kMiB}) {
        b->Args({size, to_host, pinned});
      }
    }
  }
}

std::string CopyLabel(bool to_host, bool pinned) {
  return std::string(to_host ? "device->host" : "host->device") +
         (pinned ? ", pinned" : ", pageable");
}

// The runtime: pinned is a HOST_PINNED axrt buffer (written through its
// axrt_buffer_map pointer) copied with axrt_stream_copy_buffer; pageable is
// a std::vector copied with axrt_stream_copy_{from,to}_host, which stages it
// through the stream's pinned chunks.
void BM_CudaCopyRuntime(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  const bool to_host = state.range(1) != 0;
  const bool pinned = state.range(2) != 0;
  if (!HaveCuda(state)) return;
  // Declared first, so it outlives the stream (synchronised before the end).
  std::vector<unsigned char> pageable;
  try {
    if (!FitsOnDevice(state, size)) return;
    Stream stream = NewStream();
    Buffer device = NewBuffer(size);
    Buffer pinned_buffer;
    void* host = nullptr;
    if (pinned) {
      pinned_buffer = NewBuffer(size, AXRT_MEMORY_TYPE_HOST_PINNED);
      Check(axrt_buffer_map(pinned_buffer.get(), &host), "axrt_buffer_map");
    } else {
      pageable.resize(size);
      host = pageable.data();
    }
    std::memset(host, 0x5a, size);
    Check(axrt_stream_fill_buffer(stream.get(), device.get(), 0, size, "\x21", 1),
          "axrt_stream_fill_buffer");
    auto copy = [&]() -> axrt_status_t {
      if (pinned) {
        return to_host ? axrt_stream_copy_buffer(stream.get(), device.get(), 0, pinned_buffer.get(),
                                                 0, size)
                       : axrt_stream_copy_buffer(stream.get(), pinned_buffer.get(), 0, device.get(),
                                                 0, size);
      }
      return to_host ? axrt_stream_copy_to_host(stream.get(), device.get(), 0, host, size)
                     : axrt_stream_copy_from_host(stream.get(), host, device.get(), 0, size);
    };
    const char* what = pinned ? "axrt_stream_copy_buffer"
                              : (to_host ? "axrt_stream_copy_to_host" : "axrt_stream_copy_from_host");
    Check(copy(), what);
    Check(axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
    for (auto _ : state) {
      if (Failed(state, copy(), what) ||
          Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
        break;
      }
    }
    // Nothing in flight once the memory goes, whatever stopped the loop.
    axrt_status_free(axrt_stream_synchronize(stream.get()));
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
  state.SetLabel(CopyLabel(to_host, pinned));
}
BENCHMARK(BM_CudaCopyRuntime)->Apply(CopyArgs)->UseRealTime();

// The raw Driver API: cuMemcpyHtoDAsync / cuMemcpyDtoHAsync +
// cuStreamSynchronize on its own stream, from cuMemHostAlloc memory (pinned)
// or a std::vector (pageable, which the CUDA driver stages itself). The
// synchronous cuMemcpyHtoD/DtoH are not among the entry points axrt loads;
// async + synchronize is what they amount to.
void BM_CudaCopyRaw(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  const bool to_host = state.range(1) != 0;
  const bool pinned = state.range(2) != 0;
  if (!HaveCuda(state)) return;
  // Declared first, so it outlives `raw` (whose destructor synchronises).
  std::vector<unsigned char> pageable;
  try {
    if (!FitsOnDevice(state, size)) return;
    RawCuda raw;
    const CudaApi& cu = raw.cu();
    const CUdeviceptr device = raw.Alloc(size);
    void* host = nullptr;
    if (pinned) {
      host = raw.HostAlloc(size);
    } else {
      pageable.resize(size);
      host = pageable.data();
    }
    std::memset(host, 0x5a, size);
    CuCheck(cu.cuMemsetD8Async(device, 0x21, size, raw.stream()), "cuMemsetD8Async");
    auto copy = [&] {
      return to_host ? cu.cuMemcpyDtoHAsync(host, device, size, raw.stream())
                     : cu.cuMemcpyHtoDAsync(device, host, size, raw.stream());
    };
    const char* what = to_host ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync";
    CuCheck(copy(), what);
    CuCheck(cu.cuStreamSynchronize(raw.stream()), "cuStreamSynchronize");
    for (auto _ : state) {
      if (CuFailed(state, copy(), what) ||
          CuFailed(state, cu.cuStreamSynchronize(raw.stream()), "cuStreamSynchronize")) {
        break;
      }
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
  state.SetLabel(CopyLabel(to_host, pinned));
}
BENCHMARK(BM_CudaCopyRaw)->Apply(CopyArgs)->UseRealTime();

// --- Allocation ---------------------------------------------------------------------

// axrt_buffer_allocate + axrt_buffer_release of device-local memory: the
// device's stream-ordered pool (cuMemAllocFromPoolAsync, blocks cached below
// the release threshold). One round runs untimed first, so the loop measures
// reuse of a cached block.
void BM_CudaAllocateRuntime(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  if (!HaveCuda(state)) return;
  try {
    NewBuffer(size);
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  for (auto _ : state) {
    axrt_buffer_t buffer = nullptr;
    if (Failed(state, axrt_buffer_allocate(g_device, size, nullptr, &buffer),
               "axrt_buffer_allocate")) {
      break;
    }
    axrt_buffer_release(buffer);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("pair, device-local");
}
BENCHMARK(BM_CudaAllocateRuntime)->ArgName("bytes")->Arg(1 * kMiB)->Arg(64 * kMiB)->UseRealTime();

// cuMemAlloc + cuMemFree of the same sizes: what the runtime's pool saves
// (cuMemFree synchronises the device on most drivers).
void BM_CudaAllocateRaw(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  if (!HaveCuda(state)) return;
  try {
    RawCuda raw;
    const CudaApi& cu = raw.cu();
    for (auto _ : state) {
      CUdeviceptr pointer = 0;
      if (CuFailed(state, cu.cuMemAlloc(&pointer, size), "cuMemAlloc") ||
          CuFailed(state, cu.cuMemFree(pointer), "cuMemFree")) {
        break;
      }
    }
  } catch (const SetupError& error) {
    state.SkipWithError(error.what());
    return;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("pair, cuMemAlloc");
}
BENCHMARK(BM_CudaAllocateRaw)->ArgName("bytes")->Arg(1 * kMiB)->Arg(64 * kMiB)->UseRealTime();

// --- Setup ------------------------------------------------------------------------

// cuda:0 of the instance and the loaded Driver API, or g_unavailable set to
// the CUDA driver's reason.
void FindCuda() {
  size_t drivers = 0;
  axrt_status_t status = axrt_instance_driver_count(g_instance, &drivers);
  if (status != nullptr) {
    g_unavailable = std::string("axrt_instance_driver_count: ") + axrt_status_message(status);
    axrt_status_free(status);
    return;
  }
  bool found = false;
  for (size_t i = 0; i < drivers && !found; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    status = axrt_instance_query_driver_info(g_instance, i, &info);
    if (status != nullptr) {
      axrt_status_free(status);
      continue;
    }
    if (std::string(info.name) != "cuda") continue;
    found = true;
    if (info.device_count == 0) {
      g_unavailable = info.availability[0] ? info.availability : "the CUDA driver has no devices";
      return;
    }
  }
  if (!found) {
    g_unavailable = "the instance has no CUDA driver";
    return;
  }
  status = axrt_instance_find_device(g_instance, "cuda:0", &g_device);
  if (status != nullptr) {
    g_unavailable = std::string("axrt_instance_find_device: ") + axrt_status_message(status);
    axrt_status_free(status);
    return;
  }
  std::string reason;
  g_cu = axrt::cuda::cuda_api(&reason);
  if (g_cu == nullptr) {
    g_unavailable = "axrt::cuda::cuda_api: " + reason;
    axrt_device_release(g_device);
    g_device = nullptr;
  }
}

// The image of axrt_add_f32 (see the top of the file).
void LoadImage() {
#if defined(AXRT_CUDA_KERNELS_FATBIN)
  // The build tree's fatbin, or AXRT_CUDA_KERNELS_FATBIN_PATH where the
  // benchmark runs from a copy of the build (tools/gpu_check.sh).
  const char* env = std::getenv("AXRT_CUDA_KERNELS_FATBIN_PATH");
  const std::string path = env != nullptr && *env != '\0' ? env : AXRT_CUDA_KERNELS_FATBIN;
  std::ifstream file(path, std::ios::binary);
  g_image.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (!file.good() && !file.eof()) g_image.clear();
  if (g_image.empty()) {
    g_image_error = "cannot read the CUDA kernels fatbin " + path +
                    " (rebuild the target axrt_cuda_kernels)";
  }
  g_image_kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN;
  g_image_target = "sm_80,sm_90,compute_90";
  g_image_label = "fatbin";
  benchmark::AddCustomContext("cuda_kernels", path);
#else
  // The fatbin header: magic 0xBA55ED50, version 1, header size 16, no
  // payload (all little-endian).
  g_image = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  g_image_kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN;
  g_image_target = "sm_80,sm_90";
  g_image_label = "stand-in fatbin";
  benchmark::AddCustomContext("cuda_kernels",
                              "stand-in fatbin for the mock driver (no nvcc at configure time)");
#endif
}

// With the mock driver: its count of CUDA objects still alive after
// everything was released (0 when nothing leaked); -1 with a real driver,
// which has no such call.
int64_t MockLiveObjects(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto live = reinterpret_cast<decltype(&axrt_mock_cuda_live_objects)>(
      dlsym(handle, "axrt_mock_cuda_live_objects"));
  int64_t total = -1;
  if (live != nullptr) {
    axrt_mock_cuda_objects_t o{};
    live(&o);
    total = static_cast<int64_t>(o.device_allocations + o.pinned_allocations + o.pools +
                                 o.streams + o.events + o.modules + o.context_retains);
  }
  dlclose(handle);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  axrt_status_t status = axrt_instance_create(nullptr, &g_instance);
  if (status != nullptr) {
    std::fprintf(stderr, "axrt_cuda_bench: axrt_instance_create: %s: %s\n",
                 axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
    axrt_status_free(status);
    return 1;
  }
  FindCuda();
  LoadImage();
  std::string library;
  if (g_device != nullptr) {
    library = g_cu->path;
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    status = axrt_device_query_properties(g_device, &properties);
    if (status == nullptr) {
      benchmark::AddCustomContext("axrt_device",
                                  std::string(properties.id) + " (" + properties.name + ")");
    }
    axrt_status_free(status);
    benchmark::AddCustomContext("cuda_driver_library", library);
    benchmark::AddCustomContext("cuda_driver_version", std::to_string(g_cu->driver_version));
  } else {
    benchmark::AddCustomContext("cuda", "unavailable: " + g_unavailable);
    std::fprintf(stderr, "axrt_cuda_bench: no cuda:0 (%s); every benchmark skips\n",
                 g_unavailable.c_str());
  }
  benchmark::AddCustomContext("axrt_version", axrt_version_string());

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  axrt_device_release(g_device);
  axrt_instance_release(g_instance);

  if (!library.empty()) {
    const int64_t live = MockLiveObjects(library);
    if (live >= 0) {
      std::fprintf(stderr, "axrt_cuda_bench: the mock driver holds %lld live CUDA objects after "
                   "teardown\n", static_cast<long long>(live));
    }
    if (live > 0) return 1;
  }
  return 0;
}
