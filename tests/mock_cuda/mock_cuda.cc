// A mock of the CUDA Driver API (see mock_cuda.h for what it models and how
// tests control it). Layout of this file:
//   1. state (its types are mock_cuda_internal.h's): devices, contexts,
//      allocations, pools, streams, events, modules
//   2. the entry point wrapper (call counts, NOT_PERMITTED, NOT_INITIALIZED,
//      error injection) and the symbol table generated from AXRT_CUDA_SYMBOLS
//   3. the CUDA functions, in the order of the X-macro, but for the graphs
//      (mock_cuda_graph.cc)
//   4. cuGetProcAddress_v2 and the control API
//
// Concurrency: one mutex (State::mu) guards all bookkeeping. Stream workers
// run their operations without it; State::done_cv is notified whenever an
// operation completes or a context is poisoned, and every wait (stream,
// event, context synchronization, cross-stream event waits) waits on it.
#include "tests/mock_cuda/mock_cuda.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "axrt/kernel_abi.h"
#include "kernels/cpu/library.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda_internal.h"

static_assert(std::is_same_v<decltype(&cuGetProcAddress_v2), PFN_cuGetProcAddress_v2>,
              "mock_cuda.h must declare cuGetProcAddress_v2 as cuda_api.h types it");

// Everything up to the exported functions is in axrt::mock_cuda, local to
// the library (its version script); mock_cuda_internal.h declares what the
// graphs use.
namespace axrt::mock_cuda {
namespace {

bool is_sticky(CUresult code) {
  switch (code) {
    case CUDA_ERROR_ECC_UNCORRECTABLE: case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC: case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

// An integer environment variable, or `fallback` when unset or not a number.
long long env_int(const char* name, long long fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  return *end == '\0' ? value : fallback;
}

// a * b + c without overflow, or false.
bool mul_add(size_t a, size_t b, size_t c, size_t* out) {
  size_t product = 0;
  return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(product, c, out);
}

bool round_up(size_t value, size_t alignment, size_t* out) {
  if (__builtin_add_overflow(value, alignment - 1, out)) return false;
  *out -= *out % alignment;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// 1. State (the types are mock_cuda_internal.h's).
// ---------------------------------------------------------------------------

constexpr const char* kSymbolNames[kSymbolCount] = {
#define AXRT_MOCK_NAME(name, ret, params, version, required) #name,
    AXRT_CUDA_SYMBOLS(AXRT_MOCK_NAME)
#undef AXRT_MOCK_NAME
    "cuGetProcAddress_v2"};

int symbol_index(const char* name) {
  if (name == nullptr) return -1;
  for (int i = 0; i < kSymbolCount; ++i) {
    if (std::strcmp(kSymbolNames[i], name) == 0) return i;
  }
  return -1;
}

thread_local CUctx_st* t_context = nullptr;
thread_local bool t_on_worker = false;  // set on stream worker threads

void register_cpu_kernels(State& s);

// Never destroyed: stream workers may still run at exit, and the library is
// never unloaded (-z nodelete).
State& state() {
  static State* const s = [] {
    auto* created = new State;
    register_cpu_kernels(*created);
    return created;
  }();
  return *s;
}

// --- Contexts ----------------------------------------------------------------

// All helpers below that take a State& expect s.mu to be held.

Device* device_at(State& s, int ordinal) {
  return ordinal >= 0 && ordinal < s.device_count ? s.devices[ordinal].get() : nullptr;
}

// The calling thread's current context's device, if it is live and retained.
Device* current_device(State& s) {
  if (t_context == nullptr) return nullptr;
  for (int i = 0; i < s.device_count; ++i) {
    if (&s.devices[i]->context == t_context) {
      return s.devices[i]->retain_count > 0 ? s.devices[i].get() : nullptr;
    }
  }
  return nullptr;
}

// For calls that need a current context: its device, not poisoned.
CUresult need_context(State& s, Device** out) {
  Device* device = current_device(s);
  if (device == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (device->sticky != CUDA_SUCCESS) return device->sticky;
  *out = device;
  return CUDA_SUCCESS;
}

void poison(State& s, Device* device, CUresult code) {
  if (device->sticky == CUDA_SUCCESS) device->sticky = code;
  s.done_cv.notify_all();  // wake waiters so they see the error
}

uint64_t memory_limit(State& s, const Device* device) {
  auto it = s.memory_limits.find(device->ordinal);
  return it != s.memory_limits.end() ? it->second : device->total_memory;
}

bool reserve_memory(State& s, Device* device, size_t bytes) {
  const uint64_t limit = memory_limit(s, device);
  if (device->used_memory > limit || bytes > limit - device->used_memory) return false;
  device->used_memory += bytes;
  return true;
}

// --- Allocations -------------------------------------------------------------

// The live allocation holding [address, address + size) (size >= 1), or null.
Allocation* find_allocation(State& s, uintptr_t address, size_t size) {
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  const uintptr_t offset = address - it->first;
  if (offset >= a.size || size > a.size - offset) return nullptr;
  return &a;
}

// A pool gives back a cached block to the device.
void release_block(CUmemPoolHandle_st& pool, void* block, size_t capacity) {
  std::free(block);
  pool.reserved -= capacity;
  pool.device->used_memory -= capacity;
}

// Releases cached blocks whose free was reached, largest first, until
// reserved <= used + keep.
void trim_pool(CUmemPoolHandle_st& pool, uint64_t keep) {
  for (auto it = pool.cache.end(); it != pool.cache.begin() && pool.reserved - pool.used > keep;) {
    --it;
    if (!it->second.reached) continue;  // work queued before its free may use it
    release_block(pool, it->second.block, it->first);
    it = pool.cache.erase(it);
  }
}

// A pool block comes back from the application: at once (cuMemFree, `stream`
// null), or in the order of `stream`, whose operation `seq` is the free. The
// pointer is invalid for API calls from now on. Returns the block's id.
uint64_t return_block(State& s, uintptr_t base, std::shared_ptr<CUstream_st> stream,
                      uint64_t seq) {
  auto it = s.allocations.find(base);
  const std::shared_ptr<CUmemPoolHandle_st> pool = it->second.pool;
  const size_t capacity = it->second.capacity;
  s.allocations.erase(it);
  pool->used -= capacity;
  const bool reached = stream == nullptr;
  const uint64_t id = ++pool->frees;
  if (pool->destroyed && reached) {
    release_block(*pool, reinterpret_cast<void*>(base), capacity);
    return id;
  }
  pool->cache.emplace(
      capacity, CachedBlock{reinterpret_cast<void*>(base), id, std::move(stream), seq, reached});
  trim_pool(*pool, pool->destroyed ? 0 : pool->release_threshold);
  return id;
}

// The stream got to the free `id` of `pool` (unless an allocation took the
// block since).
void reach_free(CUmemPoolHandle_st& pool, uint64_t id) {
  for (auto& [capacity, cached] : pool.cache) {
    if (cached.id != id) continue;
    cached.reached = true;
    break;
  }
  trim_pool(pool, pool.destroyed ? 0 : pool.release_threshold);
}

// --- Streams -----------------------------------------------------------------

void worker_main(CUstream_st* stream) {
  t_on_worker = true;
  State& s = state();
  std::unique_lock lock(s.mu);
  for (;;) {
    stream->work_cv.wait(lock, [&] { return !stream->queue.empty() || stream->stopping; });
    if (stream->queue.empty()) return;  // stopping, and every operation done
    Op op = std::move(stream->queue.front());
    stream->queue.pop_front();
    const bool drop = stream->device->sticky != CUDA_SUCCESS && !op.always;
    lock.unlock();
    CUresult result = CUDA_SUCCESS;
    if (!drop) {
      try {
        result = op.run();
      } catch (...) {  // a throwing host function or kernel
        result = CUDA_ERROR_LAUNCH_FAILED;
      }
    }
    op = Op{};  // release what the operation held before relocking
    lock.lock();
    if (result != CUDA_SUCCESS) poison(s, stream->device, result);
    ++stream->completed;
    s.done_cv.notify_all();
  }
}

CUresult start_worker(CUstream_st* stream) {
  if (stream->worker.joinable()) return CUDA_SUCCESS;
  try {
    stream->worker = std::thread(worker_main, stream);
  } catch (const std::system_error&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// 0, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD: the current device's NULL
// stream (the mock keeps no per-thread streams).
bool is_default_stream(CUstream handle) {
  return handle == nullptr || handle == AXRT_CU_STREAM_LEGACY ||
         handle == AXRT_CU_STREAM_PER_THREAD;
}

// A stream handle, without sticky checks: a default stream handle is the
// current device's NULL stream (null when there is no current context or the
// handle is unknown).
std::shared_ptr<CUstream_st> lookup_stream(State& s, CUstream handle, Device* current) {
  if (is_default_stream(handle)) {
    if (current == nullptr) return nullptr;
    if (!current->null_stream) current->null_stream = std::make_shared<CUstream_st>(current, 0u);
    return current->null_stream;
  }
  auto it = s.streams.find(handle);
  return it != s.streams.end() ? it->second : nullptr;
}

// For calls that queue work: the current (unpoisoned) device and the stream,
// its worker running.
CUresult prepare_stream(State& s, CUstream handle, Device** device,
                        std::shared_ptr<CUstream_st>* stream) {
  if (CUresult r = need_context(s, device)) return r;
  *stream = lookup_stream(s, handle, *device);
  if (!*stream) return CUDA_ERROR_INVALID_HANDLE;
  if ((*stream)->device->sticky != CUDA_SUCCESS) return (*stream)->device->sticky;
  return start_worker(stream->get());
}

uint64_t enqueue(CUstream_st* stream, Op op) {
  stream->queue.push_back(std::move(op));
  stream->work_cv.notify_one();
  return ++stream->enqueued;
}

// The calling thread waits for work of `stream` (axrt_mock_cuda_host_waits).
void count_host_wait(State& s, CUstream_st* stream) {
  ++s.host_waits;
  if (stream != nullptr) ++stream->host_waits;
}

// Waits for everything queued on `stream` so far.
void wait_stream(State& s, std::unique_lock<std::mutex>& lock, CUstream_st* stream) {
  count_host_wait(s, stream);
  const uint64_t target = stream->enqueued;
  s.done_cv.wait(lock, [&] { return stream->completed >= target; });
}

// Waits for everything queued so far on the streams of `only` (null: of
// every device), the NULL streams included.
void drain(State& s, std::unique_lock<std::mutex>& lock, const Device* only) {
  std::vector<std::pair<std::shared_ptr<CUstream_st>, uint64_t>> targets;
  for (int i = 0; i < s.device_count; ++i) {
    const auto& null_stream = s.devices[i]->null_stream;
    if (null_stream && (only == nullptr || only == s.devices[i].get())) {
      targets.emplace_back(null_stream, null_stream->enqueued);
    }
  }
  for (const auto& [handle, stream] : s.streams) {
    if (only == nullptr || stream->device == only) targets.emplace_back(stream, stream->enqueued);
  }
  ++s.host_waits;
  for (const auto& target : targets) ++target.first->host_waits;
  s.done_cv.wait(lock, [&] {
    return std::all_of(targets.begin(), targets.end(),
                       [](const auto& t) { return t.first->completed >= t.second; });
  });
}

bool event_complete(const CUevent_st& event) {
  return event.record_count == 0 || event.stream->completed >= event.seq;
}

// --- The entry point wrapper -------------------------------------------------

bool works_before_init(int index) {
  return index == k_cuInit || index == k_cuDriverGetVersion || index == k_cuGetErrorName ||
         index == k_cuGetErrorString;
}

// Before every CUDA function: count it, refuse it on stream workers and
// before cuInit, and fire a due injected error.
CUresult enter(int index) {
  State& s = state();
  s.call_counts[index].fetch_add(1, std::memory_order_relaxed);
  if (t_on_worker) return CUDA_ERROR_NOT_PERMITTED;
  std::lock_guard lock(s.mu);
  if (!s.initialized && !works_before_init(index)) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = s.injections.find(index);
  if (it == s.injections.end() || it->second.skip > 0) return CUDA_SUCCESS;
  const CUresult result = it->second.result;
  s.injections.erase(it);
  if (is_sticky(result)) {
    if (Device* device = current_device(s)) poison(s, device, result);
  }
  return result;
}

// After a CUDA function: a success counts against a pending injection's skip.
void leave(int index, CUresult result) {
  if (result != CUDA_SUCCESS) return;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.injections.find(index);
  if (it != s.injections.end() && it->second.skip > 0) --it->second.skip;
}

// The function handed out for entry point kIndex: wraps its implementation.
template <int kIndex, auto kImpl>
struct Entry;
template <int kIndex, class... Args, CUresult (*kImpl)(Args...)>
struct Entry<kIndex, kImpl> {
  static CUresult call(Args... args) {
    CUresult result = enter(kIndex);
    if (result != CUDA_SUCCESS) return result;
    try {
      result = kImpl(args...);
    } catch (const std::bad_alloc&) {
      result = CUDA_ERROR_OUT_OF_MEMORY;
    } catch (...) {
      result = CUDA_ERROR_UNKNOWN;
    }
    leave(kIndex, result);
    return result;
  }
};

struct SymbolEntry {
  const char* name;
  void* function;
  int min_version;
};

const SymbolEntry kSymbols[] = {
#define AXRT_MOCK_ENTRY(name, ret, params, version, required)                                     \
  {#name,                                                                                         \
   reinterpret_cast<void*>(&Entry<k_##name, static_cast<ret(*) params>(&mock_##name)>::call), \
   version},
    AXRT_CUDA_SYMBOLS(AXRT_MOCK_ENTRY)
#undef AXRT_MOCK_ENTRY
};

// ---------------------------------------------------------------------------
// 3. The CUDA functions.
// ---------------------------------------------------------------------------

// --- Initialization, errors, devices, contexts --------------------------------

bool idle(State& s) {
  if (!s.allocations.empty() || !s.streams.empty() || !s.events.empty() || !s.pools.empty() ||
      !s.modules.empty() || !s.libraries.empty() || !s.graphs.empty() ||
      !s.graph_execs.empty()) {
    return false;
  }
  for (const auto& device : s.devices) {
    if (device->retain_count > 0) return false;
    if (device->null_stream && device->null_stream->completed < device->null_stream->enqueued) {
      return false;
    }
  }
  return true;
}

// Reads the device configuration from the environment.
void configure(State& s) {
  const long long count = std::clamp(env_int("AXRT_MOCK_CUDA_DEVICE_COUNT", 2), 0LL, 64LL);
  s.device_count = static_cast<int>(count);
  const long long mb = std::clamp(env_int("AXRT_MOCK_CUDA_MEMORY_MB", 1024), 1LL, 1LL << 24);
  const long long cc = std::clamp(env_int("AXRT_MOCK_CUDA_COMPUTE_CAPABILITY", 90), 10LL, 199LL);
  for (int i = 0; i < s.device_count; ++i) {
    if (static_cast<int>(s.devices.size()) <= i) s.devices.push_back(std::make_unique<Device>(i));
    s.devices[i]->total_memory = static_cast<uint64_t>(mb) << 20;
    s.devices[i]->compute_capability = static_cast<int>(cc);
  }
}

CUresult mock_cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (const long long error = env_int("AXRT_MOCK_CUDA_INIT_ERROR", 0); error != 0) {
    return static_cast<CUresult>(error);
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  // Re-read the configuration whenever nothing depends on the old one.
  if (!s.initialized || idle(s)) configure(s);
  s.initialized = s.device_count > 0;
  return s.initialized ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult mock_cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = static_cast<int>(env_int("AXRT_MOCK_CUDA_DRIVER_VERSION", 12080));
  return CUDA_SUCCESS;
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

// Names and descriptions as the real driver reports them.
#define AXRT_MOCK_ERROR(code, text) {code, #code, text}
constexpr ErrorText kErrors[] = {
    AXRT_MOCK_ERROR(CUDA_SUCCESS, "no error"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    AXRT_MOCK_ERROR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    AXRT_MOCK_ERROR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    AXRT_MOCK_ERROR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NO_BINARY_FOR_GPU,
                    "no kernel image is available for execution on the device"),
    AXRT_MOCK_ERROR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    AXRT_MOCK_ERROR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                    "peer access is not supported between these two devices"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NVLINK_UNCORRECTABLE,
                    "uncorrectable NVLink error detected during the execution"),
    AXRT_MOCK_ERROR(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
    AXRT_MOCK_ERROR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                    "the provided PTX was compiled with an unsupported toolchain"),
    AXRT_MOCK_ERROR(CUDA_ERROR_CONTAINED,
                    "an exception occurred on the device that is now contained by the GPU's "
                    "error containment capability"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NOT_READY, "device not ready"),
    AXRT_MOCK_ERROR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    AXRT_MOCK_ERROR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    AXRT_MOCK_ERROR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    AXRT_MOCK_ERROR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                    "peer access is already enabled"),
    AXRT_MOCK_ERROR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    AXRT_MOCK_ERROR(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    AXRT_MOCK_ERROR(CUDA_ERROR_TOO_MANY_PEERS,
                    "peer mapping resources exhausted"),
    AXRT_MOCK_ERROR(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
    AXRT_MOCK_ERROR(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
    AXRT_MOCK_ERROR(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_ADDRESS_SPACE,
                    "operation not supported on global/shared address space"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_PC, "invalid program counter"),
    AXRT_MOCK_ERROR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    AXRT_MOCK_ERROR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    AXRT_MOCK_ERROR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
                    "system has unsupported display driver / cuda driver combination"),
    AXRT_MOCK_ERROR(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size"),
    AXRT_MOCK_ERROR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef AXRT_MOCK_ERROR

const ErrorText* find_error(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

CUresult mock_cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(error);
  *name = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult mock_cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(error);
  *text = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult mock_cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  *count = s.device_count;
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, ordinal) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceGetName(char* name, int length, CUdevice device) {
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "axrt mock GPU %d", device);
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  const Device* d = device_at(s, device);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = kMaxBlockDim[0]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = kMaxBlockDim[1]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = kMaxBlockDim[2]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = static_cast<int>(kMaxGridDim[0]); break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = kMaxGridDim[1]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = kMaxGridDim[2]; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = kSharedPerBlock; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = kWarpSize; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = kMultiprocessors; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = d->compute_capability / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = d->compute_capability % 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = kSharedPerBlockOptin;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *value = d->compute_capability >= 90; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: {
      auto it = s.host_numa_nodes.find(device);
      *value = it != s.host_numa_nodes.end() ? it->second : -1;
      break;
    }
    default: *value = 0; break;  // every other attribute: 0
  }
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  const Device* d = device_at(s, device);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d->total_memory;
  return CUDA_SUCCESS;
}

CUresult mock_cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = device_at(s, device);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  ++d->retain_count;
  *context = &d->context;
  return CUDA_SUCCESS;
}

CUresult mock_cuDevicePrimaryCtxRelease(CUdevice device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = device_at(s, device);
  if (d == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  if (d->retain_count == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--d->retain_count == 0) d->peers_enabled.clear();  // the context is gone
  return CUDA_SUCCESS;
}

CUresult mock_cuCtxGetCurrent(CUcontext* context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = t_context;
  return CUDA_SUCCESS;
}

CUresult mock_cuCtxSetCurrent(CUcontext context) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (context != nullptr) {
    bool known = false;
    for (int i = 0; i < s.device_count; ++i) known = known || &s.devices[i]->context == context;
    if (!known) return CUDA_ERROR_INVALID_CONTEXT;
  }
  t_context = context;
  return CUDA_SUCCESS;
}

CUresult mock_cuCtxSynchronize(void) {
  State& s = state();
  std::unique_lock lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  drain(s, lock, d);
  return d->sticky;
}

// --- Memory ------------------------------------------------------------------

CUresult mock_cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  const uint64_t limit = memory_limit(s, d);
  *free_bytes = limit > d->used_memory ? limit - d->used_memory : 0;
  *total_bytes = d->total_memory;
  return CUDA_SUCCESS;
}

CUresult mock_cuMemAlloc(CUdeviceptr* pointer, size_t size) {
  if (pointer == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  size_t capacity = 0;
  if (!round_up(size, kAllocAlignment, &capacity) || !reserve_memory(s, d, capacity)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* memory = std::aligned_alloc(kAllocAlignment, capacity);
  if (memory == nullptr) {
    d->used_memory -= capacity;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.allocations.emplace(reinterpret_cast<uintptr_t>(memory),
                        Allocation{size, capacity, AllocKind::kDevice, d, nullptr});
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

bool is_device_allocation(State& s, uintptr_t base) {
  auto it = s.allocations.find(base);
  return it != s.allocations.end() && it->second.kind != AllocKind::kPinned;
}

// Frees cuMemAlloc memory, or gives a pool block back to its pool. Like the
// real driver it synchronizes with the memory's device first. Works on a
// poisoned context (returning its error) so that teardown completes.
CUresult mock_cuMemFree(CUdeviceptr pointer) {
  if (pointer == 0) return CUDA_SUCCESS;
  State& s = state();
  std::unique_lock lock(s.mu);
  if (!is_device_allocation(s, pointer)) return CUDA_ERROR_INVALID_VALUE;
  drain(s, lock, s.allocations.find(pointer)->second.device);
  if (!is_device_allocation(s, pointer)) return CUDA_ERROR_INVALID_VALUE;  // freed meanwhile
  auto it = s.allocations.find(pointer);
  Device* d = it->second.device;
  if (it->second.kind == AllocKind::kPool) {
    return_block(s, pointer, nullptr, 0);
  } else {
    d->used_memory -= it->second.capacity;
    std::free(reinterpret_cast<void*>(pointer));
    s.allocations.erase(it);
  }
  return d->sticky;
}

CUresult mock_cuMemHostAlloc(void** pointer, size_t size, unsigned int flags) {
  constexpr unsigned kWriteCombined = 0x4;
  constexpr unsigned kKnownFlags =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | kWriteCombined;
  if (pointer == nullptr || size == 0 || (flags & ~kKnownFlags) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  size_t capacity = 0;
  void* memory = round_up(size, kAllocAlignment, &capacity)
                     ? std::aligned_alloc(kAllocAlignment, capacity) : nullptr;
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  s.allocations.emplace(reinterpret_cast<uintptr_t>(memory),
                        Allocation{size, capacity, AllocKind::kPinned, d, nullptr});
  *pointer = memory;
  return CUDA_SUCCESS;
}

// Synchronizes first, as the real driver does, with every device (pinned
// memory may be used by any).
CUresult mock_cuMemFreeHost(void* pointer) {
  State& s = state();
  std::unique_lock lock(s.mu);
  auto is_pinned = [&] {
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(pointer));
    return pointer != nullptr && it != s.allocations.end() && it->second.kind == AllocKind::kPinned;
  };
  if (!is_pinned()) return CUDA_ERROR_INVALID_VALUE;
  drain(s, lock, nullptr);
  if (!is_pinned()) return CUDA_ERROR_INVALID_VALUE;  // freed meanwhile
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(pointer));
  const CUresult sticky = it->second.device->sticky;
  std::free(pointer);
  s.allocations.erase(it);
  return sticky;
}

CUresult mock_cuMemHostGetDevicePointer(CUdeviceptr* device_pointer, void* host_pointer,
                                        unsigned int flags) {
  if (device_pointer == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  const Allocation* a = find_allocation(s, reinterpret_cast<uintptr_t>(host_pointer), 1);
  if (a == nullptr || a->kind != AllocKind::kPinned) return CUDA_ERROR_INVALID_VALUE;
  *device_pointer = reinterpret_cast<CUdeviceptr>(host_pointer);  // unified addressing
  return CUDA_SUCCESS;
}

CUresult mock_cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                    CUdeviceptr pointer) {
  if (data == nullptr || attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  const Allocation* a = find_allocation(s, pointer, 1);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;  // pageable or unknown
  const CUmemorytype type =
      a->kind == AllocKind::kPinned ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  std::memcpy(data, &type, sizeof(type));
  return CUDA_SUCCESS;
}

// Queues a copy of `size` bytes; both ranges were validated by the caller.
Op copy_op(void* dst, const void* src, size_t size) {
  return Op{[=] {
    std::memmove(dst, src, size);
    return CUDA_SUCCESS;
  }};
}

// Generic copy between tracked (device or pinned) memory.
CUresult mock_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  if (size == 0) return CUDA_SUCCESS;
  if (find_allocation(s, dst, size) == nullptr || find_allocation(s, src, size) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  enqueue(st.get(), copy_op(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), size));
  return CUDA_SUCCESS;
}

// Whether host memory is pageable (not a pinned allocation).
bool is_pageable(State& s, const void* host, size_t size) {
  const Allocation* a = find_allocation(s, reinterpret_cast<uintptr_t>(host), size);
  return a == nullptr || a->kind != AllocKind::kPinned;
}

// Returns once the operation `seq` of `stream` is done (or dropped), as the
// real driver does for copies into pageable memory.
CUresult wait_for(State& s, std::unique_lock<std::mutex>& lock, CUstream_st* stream,
                  uint64_t seq) {
  count_host_wait(s, stream);
  s.done_cv.wait(lock, [&] { return stream->completed >= seq; });
  return stream->device->sticky;
}

// Host pointers may be pageable (any pointer): like the real driver, a
// pageable source is staged at the call, so the caller may reuse it at once.
// The device side is tracked memory (device, or pinned as a device pointer).
CUresult mock_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t size, CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  if (size == 0) return CUDA_SUCCESS;
  if (src == nullptr || find_allocation(s, dst, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!is_pageable(s, src, size)) {
    enqueue(st.get(), copy_op(reinterpret_cast<void*>(dst), src, size));
    return CUDA_SUCCESS;
  }
  const auto* bytes = static_cast<const unsigned char*>(src);
  enqueue(st.get(), Op{[dst, staged = std::vector<unsigned char>(bytes, bytes + size)] {
            std::memcpy(reinterpret_cast<void*>(dst), staged.data(), staged.size());
            return CUDA_SUCCESS;
          }});
  return CUDA_SUCCESS;
}

// Into pageable memory the call returns once the copy is done (as the real
// driver); into pinned memory it is asynchronous.
CUresult mock_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t size, CUstream stream) {
  State& s = state();
  std::unique_lock lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  if (size == 0) return CUDA_SUCCESS;
  if (dst == nullptr || find_allocation(s, src, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t seq =
      enqueue(st.get(), copy_op(dst, reinterpret_cast<const void*>(src), size));
  return is_pageable(s, dst, size) ? wait_for(s, lock, st.get(), seq) : CUDA_SUCCESS;
}

CUresult resolve_2d(State& s, CUmemorytype type, const void* host, CUdeviceptr device,
                    size_t x, size_t y, size_t pitch, size_t width, size_t height,
                    unsigned char** out) {
  size_t span = 0, offset = 0;
  if (height > 1 && (pitch < width || pitch - width < x)) return CUDA_ERROR_INVALID_VALUE;
  if (!mul_add(height - 1, pitch, width, &span) || !mul_add(y, pitch, x, &offset)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uintptr_t base = 0;
  if (type == CU_MEMORYTYPE_HOST) {
    base = reinterpret_cast<uintptr_t>(host);
  } else if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) {
    base = device;
  } else {
    return CUDA_ERROR_INVALID_VALUE;  // arrays are not modelled
  }
  uintptr_t start = 0;
  if (base == 0 || __builtin_add_overflow(base, offset, &start)) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEMORYTYPE_HOST && find_allocation(s, start, span) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = reinterpret_cast<unsigned char*>(start);
  return CUDA_SUCCESS;
}

// Copies `height` rows of `width` bytes (the rows may overlap).
void copy_rows(unsigned char* dst, size_t dst_pitch, const unsigned char* src, size_t src_pitch,
               size_t width, size_t height) {
  for (size_t row = 0; row < height; ++row) {
    std::memmove(dst + row * dst_pitch, src + row * src_pitch, width);
  }
}

Op copy_rows_op(unsigned char* dst, size_t dst_pitch, const unsigned char* src, size_t src_pitch,
                size_t width, size_t height) {
  return Op{[=] {
    copy_rows(dst, dst_pitch, src, src_pitch, width, height);
    return CUDA_SUCCESS;
  }};
}

// Pageable host memory as in cuMemcpyHtoDAsync / cuMemcpyDtoHAsync.
CUresult mock_cuMemcpy2DAsync(const CUDA_MEMCPY2D* copy, CUstream stream) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::unique_lock lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  const CUDA_MEMCPY2D c = *copy;
  if (c.WidthInBytes == 0 || c.Height == 0) return CUDA_SUCCESS;
  unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  if (CUresult r = resolve_2d(s, c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, c.srcY,
                              c.srcPitch, c.WidthInBytes, c.Height, &src)) {
    return r;
  }
  if (CUresult r = resolve_2d(s, c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, c.dstY,
                              c.dstPitch, c.WidthInBytes, c.Height, &dst)) {
    return r;
  }
  const size_t span = (c.Height - 1) * c.srcPitch + c.WidthInBytes;  // checked by resolve_2d
  Op op;
  if (c.srcMemoryType == CU_MEMORYTYPE_HOST && is_pageable(s, src, span)) {
    std::vector<unsigned char> staged(c.WidthInBytes * c.Height);
    copy_rows(staged.data(), c.WidthInBytes, src, c.srcPitch, c.WidthInBytes, c.Height);
    op.run = [=, staged = std::move(staged)] {
      copy_rows(dst, c.dstPitch, staged.data(), c.WidthInBytes, c.WidthInBytes, c.Height);
      return CUDA_SUCCESS;
    };
  } else {
    op = copy_rows_op(dst, c.dstPitch, src, c.srcPitch, c.WidthInBytes, c.Height);
  }
  const uint64_t seq = enqueue(st.get(), std::move(op));
  const size_t dst_span = (c.Height - 1) * c.dstPitch + c.WidthInBytes;
  if (c.dstMemoryType == CU_MEMORYTYPE_HOST && is_pageable(s, dst, dst_span)) {
    return wait_for(s, lock, st.get(), seq);
  }
  return CUDA_SUCCESS;
}

// Zero width or height is valid (and does nothing).
CUresult check_memset(State& s, CUdeviceptr dst, size_t pitch, size_t element_size, size_t width,
                      size_t height) {
  if (dst % element_size != 0) return CUDA_ERROR_INVALID_VALUE;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  size_t row_bytes = 0, span = 0;
  if (!mul_add(width, element_size, 0, &row_bytes) || (height > 1 && pitch < row_bytes) ||
      !mul_add(height - 1, pitch, row_bytes, &span) || find_allocation(s, dst, span) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

template <class T>
Op typed_memset_op(CUdeviceptr dst, size_t pitch, T value, size_t width, size_t height) {
  return Op{[=] {
    for (size_t row = 0; row < height; ++row) {
      T* p = reinterpret_cast<T*>(dst + row * pitch);
      std::fill(p, p + width, value);
    }
    return CUDA_SUCCESS;
  }};
}

Op memset_op(CUdeviceptr dst, size_t pitch, unsigned value, size_t element_size, size_t width,
             size_t height) {
  switch (element_size) {
    case 1: return typed_memset_op(dst, pitch, static_cast<uint8_t>(value), width, height);
    case 2: return typed_memset_op(dst, pitch, static_cast<uint16_t>(value), width, height);
    default: return typed_memset_op(dst, pitch, static_cast<uint32_t>(value), width, height);
  }
}

// cuMemsetD*: `count` elements of `value` (of sizeof(T)) in `height` rows.
template <class T>
CUresult memset_2d(CUdeviceptr dst, size_t pitch, T value, size_t width, size_t height,
                   CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  if (CUresult r = check_memset(s, dst, pitch, sizeof(T), width, height)) return r;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  enqueue(st.get(), memset_op(dst, pitch, value, sizeof(T), width, height));
  return CUDA_SUCCESS;
}

CUresult mock_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
  return memset_2d(dst, 0, value, count, 1, stream);
}

CUresult mock_cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                               CUstream stream) {
  return memset_2d(dst, 0, value, count, 1, stream);
}

CUresult mock_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                               CUstream stream) {
  return memset_2d(dst, 0, value, count, 1, stream);
}

CUresult mock_cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int value, size_t width,
                                 size_t height, CUstream stream) {
  return memset_2d(dst, pitch, value, width, height, stream);
}

// --- Streams -----------------------------------------------------------------

CUresult mock_cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (stream == nullptr || (flags & ~CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  auto created = std::make_shared<CUstream_st>(d, flags);
  if (CUresult r = start_worker(created.get())) return r;
  s.streams.emplace(created.get(), created);
  *stream = created.get();
  return CUDA_SUCCESS;
}

// Waits for the stream's queued work (dropped if the context is poisoned),
// then joins its worker.
CUresult mock_cuStreamDestroy(CUstream stream) {
  State& s = state();
  std::unique_lock lock(s.mu);
  auto it = s.streams.find(stream);
  if (it == s.streams.end()) return CUDA_ERROR_INVALID_HANDLE;  // the NULL stream included
  const std::shared_ptr<CUstream_st> st = it->second;
  s.streams.erase(it);
  st->stopping = true;
  st->work_cv.notify_one();
  lock.unlock();
  if (st->worker.joinable()) st->worker.join();
  lock.lock();
  return st->device->sticky;
}

CUresult mock_cuStreamSynchronize(CUstream stream) {
  State& s = state();
  std::unique_lock lock(s.mu);
  const std::shared_ptr<CUstream_st> st = lookup_stream(s, stream, current_device(s));
  if (!st) {
    return is_default_stream(stream) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
  }
  wait_stream(s, lock, st.get());
  return st->device->sticky;
}

CUresult mock_cuStreamQuery(CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  const std::shared_ptr<CUstream_st> st = lookup_stream(s, stream, current_device(s));
  if (!st) {
    return is_default_stream(stream) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
  }
  if (st->device->sticky != CUDA_SUCCESS) return st->device->sticky;
  return st->completed < st->enqueued ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

// The stream waits for the event's latest record as of this call.
CUresult mock_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUevent_st& ev = *it->second;
  if (ev.device->sticky != CUDA_SUCCESS) return ev.device->sticky;
  if (event_complete(ev)) return CUDA_SUCCESS;  // never recorded, or already reached
  enqueue(st.get(), Op{[record = ev.stream, seq = ev.seq, waiter = st->device] {
            State& state_ = state();
            std::unique_lock wait_lock(state_.mu);
            // Stop waiting when either side is poisoned: the record's stream
            // drops its work, and this stream drops its own anyway.
            state_.done_cv.wait(wait_lock, [&] {
              return record->completed >= seq || record->device->sticky != CUDA_SUCCESS ||
                     waiter->sticky != CUDA_SUCCESS;
            });
            return CUDA_SUCCESS;
          }});
  return CUDA_SUCCESS;
}

CUresult mock_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  // Runs on the worker thread, where every CUDA call returns NOT_PERMITTED.
  enqueue(st.get(), Op{[fn, user_data] {
            fn(user_data);
            return CUDA_SUCCESS;
          }});
  return CUDA_SUCCESS;
}

// --- Events ------------------------------------------------------------------

CUresult mock_cuEventCreate(CUevent* event, unsigned int flags) {
  if (event == nullptr || (flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  auto created = std::make_shared<CUevent_st>(d, flags);
  s.events.emplace(created.get(), created);
  *event = created.get();
  return CUDA_SUCCESS;
}

// A pending record still completes (its operation holds the event).
CUresult mock_cuEventDestroy(CUevent event) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUresult sticky = it->second->device->sticky;
  s.events.erase(it);
  return sticky;
}

CUresult mock_cuEventRecord(CUevent event, CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const std::shared_ptr<CUevent_st> ev = it->second;
  if (ev->device != st->device) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t record = ++ev->record_count;
  // Always runs, even on a poisoned context, so that waiters wake up.
  ev->seq = enqueue(st.get(), Op{[ev, record] {
                                   const auto now = std::chrono::steady_clock::now();
                                   State& state_ = state();
                                   std::lock_guard stamp_lock(state_.mu);
                                   if (record > ev->stamped_record) {
                                     ev->stamped_record = record;
                                     ev->time = now;
                                   }
                                   return CUDA_SUCCESS;
                                 },
                                 true});
  ev->stream = st;
  return CUDA_SUCCESS;
}

CUresult mock_cuEventQuery(CUevent event) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUevent_st& ev = *it->second;
  if (ev.device->sticky != CUDA_SUCCESS) return ev.device->sticky;
  return event_complete(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult mock_cuEventSynchronize(CUevent event) {
  State& s = state();
  std::unique_lock lock(s.mu);
  auto it = s.events.find(event);
  if (it == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const std::shared_ptr<CUevent_st> ev = it->second;
  if (ev->record_count > 0) {
    const std::shared_ptr<CUstream_st> record = ev->stream;
    const uint64_t seq = ev->seq;
    count_host_wait(s, record.get());
    s.done_cv.wait(lock, [&] {
      return record->completed >= seq || ev->device->sticky != CUDA_SUCCESS;
    });
  }
  return ev->device->sticky;
}

CUresult mock_cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto a = s.events.find(start);
  auto b = s.events.find(end);
  if (a == s.events.end() || b == s.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUevent_st& e0 = *a->second;
  const CUevent_st& e1 = *b->second;
  if (e0.device->sticky != CUDA_SUCCESS) return e0.device->sticky;
  if (e1.device->sticky != CUDA_SUCCESS) return e1.device->sticky;
  if (((e0.flags | e1.flags) & CU_EVENT_DISABLE_TIMING) != 0) return CUDA_ERROR_INVALID_HANDLE;
  if (e0.record_count == 0 || e1.record_count == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (!event_complete(e0) || !event_complete(e1)) return CUDA_ERROR_NOT_READY;
  *milliseconds = std::chrono::duration<float, std::milli>(e1.time - e0.time).count();
  return CUDA_SUCCESS;
}

// --- Modules and libraries -----------------------------------------------------

// Looks up a JIT option's value.
void** jit_option(unsigned count, CUjit_option* options, void** values, CUjit_option which) {
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == which) return &values[i];
  }
  return nullptr;
}

// Writes `text` into a JIT log buffer if the caller gave one, truncated and
// NUL-terminated, and stores the bytes written (NUL included) back into the
// size option, as the real driver does.
void write_jit_log(unsigned count, CUjit_option* options, void** values, CUjit_option buffer_option,
                   CUjit_option size_option, std::string_view text) {
  void** buffer = jit_option(count, options, values, buffer_option);
  void** size = jit_option(count, options, values, size_option);
  if (buffer == nullptr || size == nullptr || *buffer == nullptr) return;
  const size_t capacity = reinterpret_cast<uintptr_t>(*size);
  if (capacity == 0) return;
  const size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(*buffer, text.data(), n);
  static_cast<char*>(*buffer)[n] = '\0';
  *size = reinterpret_cast<void*>(static_cast<uintptr_t>(n + 1));
}

bool starts_with_bytes(const void* image, std::initializer_list<unsigned char> magic) {
  // Stops at the first mismatch, so never reads past a NUL of a short image.
  const auto* bytes = static_cast<const unsigned char*>(image);
  size_t i = 0;
  for (unsigned char m : magic) {
    if (bytes[i++] != m) return false;
  }
  return true;
}

// Classifies a code image and runs the mock JIT (see mock_cuda.h). Text images
// are read up to their NUL, and refused at the first byte that is not text,
// so that a binary image of unknown size is not read far.
CUresult load_image(const void* image, unsigned count, CUjit_option* options, void** values,
                    ImageNames* out) {
  if (image == nullptr || (count > 0 && (options == nullptr || values == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto succeed = [&] {
    write_jit_log(count, options, values, CU_JIT_INFO_LOG_BUFFER,
                  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "mock JIT: ok");
    write_jit_log(count, options, values, CU_JIT_ERROR_LOG_BUFFER,
                  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "");
    return CUDA_SUCCESS;
  };
  if (starts_with_bytes(image, {0x7f, 'E', 'L', 'F'}) ||
      starts_with_bytes(image, {0x50, 0xED, 0x55, 0xBA})) {
    return succeed();  // cubin, fatbin
  }
  const char* chars = static_cast<const char*>(image);
  size_t length = 0;
  for (; chars[length] != '\0'; ++length) {
    const auto c = static_cast<unsigned char>(chars[length]);
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') return CUDA_ERROR_INVALID_IMAGE;
  }
  const std::string_view text(chars, length);
  constexpr std::string_view kMockMagic = "AXRTMOCKCUDA";
  if (text.substr(0, text.find('\n')) == kMockMagic ||
      text.substr(0, text.find('\n')) == std::string(kMockMagic) + "\r") {
    out->restricted = true;
    size_t pos = text.find('\n');
    while (pos != std::string_view::npos && pos < text.size()) {
      const size_t next = text.find('\n', pos + 1);
      std::string_view line = text.substr(pos + 1, next == std::string_view::npos
                                                       ? std::string_view::npos : next - pos - 1);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (!line.empty()) out->names.emplace(line);
      pos = next;
    }
    return succeed();
  }
  if (text.find(".version") == std::string_view::npos ||
      text.find(".target") == std::string_view::npos) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (text.find("mock-lazy-jit-error") != std::string_view::npos) {
    out->lazy_jit_error = true;
    return succeed();
  }
  constexpr std::string_view kJitError = "mock-jit-error:";
  if (const size_t at = text.find(kJitError); at != std::string_view::npos) {
    std::string_view message = text.substr(at + kJitError.size());
    message = message.substr(0, message.find('\n'));
    while (!message.empty() && message.front() == ' ') message.remove_prefix(1);
    if (!message.empty() && message.back() == '\r') message.remove_suffix(1);
    write_jit_log(count, options, values, CU_JIT_ERROR_LOG_BUFFER,
                  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, message);
    write_jit_log(count, options, values, CU_JIT_INFO_LOG_BUFFER,
                  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, "");
    return CUDA_ERROR_INVALID_PTX;
  }
  return succeed();
}

// The registered kernel `name` if the image provides it.
KernelRef find_kernel(State& s, const ImageNames& image, const char* name) {
  if (image.restricted && image.names.count(name) == 0) return nullptr;
  auto it = s.registry.find(name);
  return it != s.registry.end() ? it->second : nullptr;
}

CUresult mock_cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count,
                                 CUjit_option* options, void** values) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  auto loaded = std::make_unique<CUmod_st>();
  loaded->device = d;
  if (CUresult r = load_image(image, count, options, values, &loaded->image)) return r;
  *module = loaded.get();
  s.modules.emplace(loaded.get(), std::move(loaded));
  return CUDA_SUCCESS;
}

CUresult mock_cuModuleUnload(CUmodule module) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.modules.find(module);
  if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& [name, function] : it->second->functions) s.functions.erase(function.get());
  const CUresult sticky = it->second->device->sticky;
  s.modules.erase(it);
  return sticky;
}

CUresult mock_cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.modules.find(module);
  if (it == s.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  CUmod_st& m = *it->second;
  if (m.device->sticky != CUDA_SUCCESS) return m.device->sticky;
  if (m.image.lazy_jit_error) return CUDA_ERROR_INVALID_PTX;
  auto& slot = m.functions[name];
  if (!slot) {
    KernelRef kernel = find_kernel(s, m.image, name);
    if (!kernel) {
      m.functions.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    slot = std::make_unique<CUfunc_st>(CUfunc_st{m.device, std::move(kernel)});
    s.functions.insert(slot.get());
  }
  *function = slot.get();
  return CUDA_SUCCESS;
}

// A live function, its device not poisoned.
CUresult get_function(State& s, CUfunction function, CUfunc_st** out) {
  if (s.functions.count(function) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (function->device->sticky != CUDA_SUCCESS) return function->device->sticky;
  *out = function;
  return CUDA_SUCCESS;
}

CUresult mock_cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = get_function(s, function, &f)) return r;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = kMaxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = f->max_dynamic_shared; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult mock_cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  State& s = state();
  std::lock_guard lock(s.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = get_function(s, function, &f)) return r;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 ||
      value > kSharedPerBlockOptin) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  f->max_dynamic_shared = value;
  return CUDA_SUCCESS;
}

// --- Launches ------------------------------------------------------------------

CUresult pack_params(const KernelDef& kernel, void** params, void** extra, ParamBuffer* out) {
  out->assign((kernel.buffer_size + sizeof(Chunk) - 1) / sizeof(Chunk), Chunk{});
  auto* bytes = reinterpret_cast<unsigned char*>(out->data());
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra != nullptr) {
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    for (size_t i = 0; extra[i] != AXRT_CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = static_cast<const size_t*>(extra[i + 1]);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (size == nullptr || *size != kernel.buffer_size || (*size > 0 && buffer == nullptr)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (*size > 0) std::memcpy(bytes, buffer, *size);
    return CUDA_SUCCESS;
  }
  if (kernel.sizes.empty()) return CUDA_SUCCESS;
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < kernel.sizes.size(); ++i) {
    if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(bytes + kernel.offsets[i], params[i], kernel.sizes[i]);
  }
  return CUDA_SUCCESS;
}

// Runs every block of a launch on the stream's worker.
CUresult run_blocks(const KernelDef& kernel, const ParamBuffer& params, const LaunchShape& shape) {
  void* shared = nullptr;
  if (shape.shared_bytes > 0) {
    shared = std::aligned_alloc(64, (shape.shared_bytes + 63u) / 64u * 64u);
    if (shared == nullptr) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  const std::unique_ptr<void, void (*)(void*)> release(shared, std::free);
  axrt_mock_cuda_dim3 id{};
  for (id.z = 0; id.z < shape.grid.z; ++id.z) {
    for (id.y = 0; id.y < shape.grid.y; ++id.y) {
      for (id.x = 0; id.x < shape.grid.x; ++id.x) {
        const int r = kernel.fn(kernel.user, params.data(), &shape.grid, &shape.block, &id,
                                shared, shape.shared_bytes);
        if (r != 0) return r;
      }
    }
  }
  return CUDA_SUCCESS;
}

CUresult check_launch(const CUfunc_st& f, const LaunchShape& shape, const CUlaunchAttribute* attrs,
                      unsigned attr_count) {
  const unsigned grid[3] = {shape.grid.x, shape.grid.y, shape.grid.z};
  const unsigned block[3] = {shape.block.x, shape.block.y, shape.block.z};
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || grid[i] > kMaxGridDim[i] || block[i] == 0 || block[i] > kMaxBlockDim[i]) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (uint64_t{block[0]} * block[1] * block[2] > kMaxThreadsPerBlock) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (shape.shared_bytes > static_cast<unsigned>(f.max_dynamic_shared)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (attr_count > 0 && attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < attr_count; ++i) {
    if (attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) return CUDA_ERROR_INVALID_VALUE;
    if (f.device->compute_capability < 90) return CUDA_ERROR_NOT_SUPPORTED;
    const auto& c = attrs[i].value.clusterDim;
    const unsigned cluster[3] = {c.x, c.y, c.z};
    for (int k = 0; k < 3; ++k) {
      if (cluster[k] == 0 || grid[k] % cluster[k] != 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    if (uint64_t{c.x} * c.y * c.z > kMaxClusterSize) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  return CUDA_SUCCESS;
}

Op kernel_op(State& s, KernelRef kernel, ParamBuffer params, const LaunchShape& shape) {
  CUresult fault = CUDA_SUCCESS;
  if (auto it = s.kernel_faults.find(kernel->name); it != s.kernel_faults.end()) {
    fault = it->second;
    s.kernel_faults.erase(it);
  }
  return Op{[kernel = std::move(kernel), params = std::move(params), shape, fault] {
    return fault != CUDA_SUCCESS ? fault : run_blocks(*kernel, params, shape);
  }};
}

CUresult launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params,
                void** extra, const CUlaunchAttribute* attrs, unsigned attr_count) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  CUfunc_st* f = nullptr;
  if (CUresult r = get_function(s, function, &f)) return r;
  if (f->device != d || st->device != d) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = check_launch(*f, shape, attrs, attr_count)) return r;
  ParamBuffer buffer;
  if (CUresult r = pack_params(*f->kernel, params, extra, &buffer)) return r;
  enqueue(st.get(), kernel_op(s, f->kernel, std::move(buffer), shape));
  return CUDA_SUCCESS;
}

CUresult mock_cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void** params, void** extra) {
  const LaunchShape shape{{grid_x, grid_y, grid_z}, {block_x, block_y, block_z}, shared_bytes};
  return launch(function, shape, stream, params, extra, nullptr, 0);
}

// --- Memory pools ----------------------------------------------------------------

// A live pool, its device not poisoned.
CUresult get_pool(State& s, CUmemoryPool pool, std::shared_ptr<CUmemPoolHandle_st>* out) {
  auto it = s.pools.find(pool);
  if (it == s.pools.end()) return CUDA_ERROR_INVALID_VALUE;
  if (it->second->device->sticky != CUDA_SUCCESS) return it->second->device->sticky;
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult mock_cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (pool == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->handleTypes != 0 || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = device_at(s, props->location.id);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d->sticky != CUDA_SUCCESS) return d->sticky;
  auto created = std::make_shared<CUmemPoolHandle_st>();
  created->device = d;
  s.pools.emplace(created.get(), created);
  *pool = created.get();
  return CUDA_SUCCESS;
}

// Releases the cached blocks; blocks still allocated are freed when they come
// back.
CUresult mock_cuMemPoolDestroy(CUmemoryPool pool) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.pools.find(pool);
  if (it == s.pools.end()) return CUDA_ERROR_INVALID_VALUE;
  CUmemPoolHandle_st& p = *it->second;
  p.destroyed = true;
  trim_pool(p, 0);
  const CUresult sticky = p.device->sticky;
  s.pools.erase(it);
  return sticky;
}

// The pool's reuse policy flag for a CU_MEMPOOL_ATTR_REUSE_* attribute (an
// int), or null.
bool* reuse_flag(CUmemPoolHandle_st& pool, CUmemPool_attribute attribute) {
  switch (attribute) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      return &pool.reuse_follow_event_dependencies;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return &pool.reuse_allow_opportunistic;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      return &pool.reuse_allow_internal_dependencies;
    default: return nullptr;
  }
}

// Sets a reuse policy flag (an int) or the release threshold, or resets a
// high watermark (value 0) to the current value; the current values are
// read-only.
CUresult mock_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  std::shared_ptr<CUmemPoolHandle_st> p;
  if (CUresult r = get_pool(s, pool, &p)) return r;
  if (bool* flag = reuse_flag(*p, attribute)) {
    int enabled = 0;
    std::memcpy(&enabled, value, sizeof(enabled));
    *flag = enabled != 0;
    return CUDA_SUCCESS;
  }
  cuuint64_t v = 0;
  std::memcpy(&v, value, sizeof(v));
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = v; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (v != 0) return CUDA_ERROR_INVALID_VALUE;
      p->reserved_high = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (v != 0) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult mock_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  std::shared_ptr<CUmemPoolHandle_st> p;
  if (CUresult r = get_pool(s, pool, &p)) return r;
  if (const bool* flag = reuse_flag(*p, attribute)) {
    const int enabled = *flag ? 1 : 0;
    std::memcpy(value, &enabled, sizeof(enabled));
    return CUDA_SUCCESS;
  }
  cuuint64_t v = 0;
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  std::memcpy(value, &v, sizeof(v));
  return CUDA_SUCCESS;
}

CUresult mock_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep_bytes) {
  State& s = state();
  std::lock_guard lock(s.mu);
  std::shared_ptr<CUmemPoolHandle_st> p;
  if (CUresult r = get_pool(s, pool, &p)) return r;
  trim_pool(*p, keep_bytes);
  return CUDA_SUCCESS;
}

// Whether an allocation on `stream` may take `cached`, by the pool's reuse
// policy; `*wait` when only by making the stream wait for the free.
bool may_reuse(const CUmemPoolHandle_st& pool, const CachedBlock& cached,
               const CUstream_st* stream, bool* wait) {
  *wait = false;
  if (!cached.stream || cached.stream.get() == stream) return true;  // freed at once; in order
  if (cached.reached) return pool.reuse_allow_opportunistic;
  *wait = pool.reuse_allow_internal_dependencies;
  return *wait;
}

// Reuses the smallest cached block that fits and the pool's reuse policy
// allows (with the internal dependencies policy, the stream first waits for
// the block's free on its stream), or reserves a new one (first releasing
// this pool's cache if the device is full). The pointer is usable at once.
CUresult mock_cuMemAllocFromPoolAsync(CUdeviceptr* pointer, size_t size, CUmemoryPool pool,
                                      CUstream stream) {
  if (pointer == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  std::shared_ptr<CUmemPoolHandle_st> p;
  if (CUresult r = get_pool(s, pool, &p)) return r;
  size_t capacity = 0;
  if (!round_up(size, kAllocAlignment, &capacity)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* block = nullptr;
  auto reusable = p->cache.lower_bound(capacity);
  bool wait = false;
  while (reusable != p->cache.end() && !may_reuse(*p, reusable->second, st.get(), &wait)) {
    ++reusable;
  }
  if (reusable != p->cache.end()) {
    capacity = reusable->first;
    block = reusable->second.block;
    if (wait) {
      enqueue(st.get(), Op{[freed_on = reusable->second.stream, seq = reusable->second.seq,
                            waiter = st->device] {
                State& state_ = state();
                std::unique_lock wait_lock(state_.mu);
                state_.done_cv.wait(wait_lock, [&] {
                  return freed_on->completed >= seq || freed_on->device->sticky != CUDA_SUCCESS ||
                         waiter->sticky != CUDA_SUCCESS;
                });
                return CUDA_SUCCESS;
              }});
    }
    p->cache.erase(reusable);
  } else {
    if (!reserve_memory(s, p->device, capacity)) {
      trim_pool(*p, 0);
      if (!reserve_memory(s, p->device, capacity)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    block = std::aligned_alloc(kAllocAlignment, capacity);
    if (block == nullptr) {
      p->device->used_memory -= capacity;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->reserved += capacity;
    p->reserved_high = std::max(p->reserved_high, p->reserved);
  }
  p->used += capacity;
  p->used_high = std::max(p->used_high, p->used);
  s.allocations.emplace(reinterpret_cast<uintptr_t>(block),
                        Allocation{size, capacity, AllocKind::kPool, p->device, p});
  *pointer = reinterpret_cast<CUdeviceptr>(block);
  return CUDA_SUCCESS;
}

// The block goes back to its pool in the stream's order: the pool keeps it
// from now on, for reuse as its policy allows (see
// mock_cuMemAllocFromPoolAsync), and may release it to the device once the
// stream got here. The pointer is invalid for API calls from now on. On a
// poisoned context the free still happens (and the error is returned).
CUresult mock_cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = current_device(s);
  if (d == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const std::shared_ptr<CUstream_st> st = lookup_stream(s, stream, d);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  auto it = s.allocations.find(pointer);
  if (it == s.allocations.end() || it->second.kind != AllocKind::kPool) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (start_worker(st.get()) != CUDA_SUCCESS) {
    return_block(s, pointer, nullptr, 0);  // no worker: give it back now
  } else {
    const std::shared_ptr<CUmemPoolHandle_st> pool = it->second.pool;
    const uint64_t id = pool->frees + 1;  // return_block's, below
    const uint64_t seq = enqueue(st.get(), Op{[pool, id] {
                                                State& state_ = state();
                                                std::lock_guard free_lock(state_.mu);
                                                reach_free(*pool, id);
                                                return CUDA_SUCCESS;
                                              },
                                              true});
    return_block(s, pointer, st, seq);
  }
  if (d->sticky != CUDA_SUCCESS) return d->sticky;
  return st->device->sticky;
}

CUresult mock_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function, void** params,
                               void** extra) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const LaunchShape shape{{config->gridDimX, config->gridDimY, config->gridDimZ},
                          {config->blockDimX, config->blockDimY, config->blockDimZ},
                          config->sharedMemBytes};
  return launch(function, shape, config->hStream, params, extra, config->attrs, config->numAttrs);
}

// Libraries are loaded in the current context, and their kernels give a
// function per context (cuKernelGetFunction).
CUresult mock_cuLibraryLoadData(CUlibrary* library, const void* image, CUjit_option* jit_options,
                                void** jit_values, unsigned int jit_count,
                                CUlibraryOption* library_options, void** library_values,
                                unsigned int library_count) {
  if (library == nullptr ||
      (library_count > 0 && (library_options == nullptr || library_values == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  auto loaded = std::make_unique<CUlib_st>();
  loaded->device = d;
  if (CUresult r = load_image(image, jit_count, jit_options, jit_values, &loaded->image)) return r;
  *library = loaded.get();
  s.libraries.emplace(loaded.get(), std::move(loaded));
  return CUDA_SUCCESS;
}

CUresult mock_cuLibraryUnload(CUlibrary library) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.libraries.find(library);
  if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& [name, kernel] : it->second->kernels) {
    for (const auto& [device, function] : kernel->functions) s.functions.erase(function.get());
    s.kernels.erase(kernel.get());
  }
  const CUresult sticky = it->second->device->sticky;
  s.libraries.erase(it);
  return sticky;
}

CUresult mock_cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (kernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.libraries.find(library);
  if (it == s.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
  CUlib_st& lib = *it->second;
  if (lib.device->sticky != CUDA_SUCCESS) return lib.device->sticky;
  if (lib.image.lazy_jit_error) return CUDA_ERROR_INVALID_PTX;
  auto& slot = lib.kernels[name];
  if (!slot) {
    KernelRef def = find_kernel(s, lib.image, name);
    if (!def) {
      lib.kernels.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    slot = std::make_unique<CUkern_st>();
    slot->kernel = std::move(def);
    s.kernels.insert(slot.get());
  }
  *kernel = slot.get();
  return CUDA_SUCCESS;
}

CUresult mock_cuKernelGetFunction(CUfunction* function, CUkernel kernel) {
  if (function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  if (s.kernels.count(kernel) == 0) return CUDA_ERROR_INVALID_HANDLE;
  auto& slot = kernel->functions[d];
  if (!slot) {
    slot = std::make_unique<CUfunc_st>(CUfunc_st{d, kernel->kernel});
    s.functions.insert(slot.get());
  }
  *function = slot.get();
  return CUDA_SUCCESS;
}

CUresult mock_cuFuncGetParamInfo(CUfunction function, size_t index, size_t* offset, size_t* size) {
  State& s = state();
  std::lock_guard lock(s.mu);
  CUfunc_st* f = nullptr;
  if (CUresult r = get_function(s, function, &f)) return r;
  if (index >= f->kernel->sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = f->kernel->offsets[index];
  if (size != nullptr) *size = f->kernel->sizes[index];
  return CUDA_SUCCESS;
}

// --- Peers ---------------------------------------------------------------------

// The mock's PCI address of device `ordinal`: bus 0x10 + ordinal, written in
// capitals as the driver may write them.
constexpr unsigned kFirstBus = 0x10;
constexpr unsigned kSwitchBus = 0xF0;  // where NVSwitch links lead

State::PeerLink peer_link(State& s, int a, int b) {
  auto it = s.peer_links.find({std::min(a, b), std::max(a, b)});
  return it != s.peer_links.end() ? it->second : State::PeerLink{};
}

CUresult mock_cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  if (bus_id == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, device) == nullptr) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02X:00.0",
                kFirstBus + static_cast<unsigned>(device));
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceCanAccessPeer(int* can_access, CUdevice device, CUdevice peer) {
  if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, device) == nullptr || device_at(s, peer) == nullptr) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *can_access = device != peer && peer_link(s, device, peer).access;
  return CUDA_SUCCESS;
}

CUresult mock_cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attribute,
                                      CUdevice source, CUdevice destination) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, source) == nullptr || device_at(s, destination) == nullptr ||
      source == destination) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  const State::PeerLink link = peer_link(s, source, destination);
  switch (attribute) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = link.performance_rank; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *value = link.access; break;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
      *value = link.access && link.native_atomics;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult mock_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (flags != 0 || peer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  if (peer->device == d) return CUDA_ERROR_INVALID_DEVICE;
  if (peer->device->retain_count == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!peer_link(s, d->ordinal, peer->device->ordinal).access) {
    return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  }
  if (!d->peers_enabled.insert(peer->device->ordinal).second) {
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  }
  return CUDA_SUCCESS;
}

// Device memory of `context`'s device holding [address, address + size).
bool in_context(State& s, CUcontext context, CUdeviceptr address, size_t size) {
  const Allocation* a = find_allocation(s, address, size);
  return a != nullptr && a->kind != AllocKind::kPinned && a->device == context->device;
}

// Counts as direct when the stream's device enabled access to the other
// device of the copy, else as staged (both work, as in CUDA).
CUresult mock_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                                CUcontext src_context, size_t size, CUstream stream) {
  if (dst_context == nullptr || src_context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  if (dst_context->device->retain_count == 0 || src_context->device->retain_count == 0) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (size == 0) return CUDA_SUCCESS;
  if (!in_context(s, dst_context, dst, size) || !in_context(s, src_context, src, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Device* other = dst_context->device != d ? dst_context->device : src_context->device;
  const bool direct = other != d && d->peers_enabled.count(other->ordinal) > 0;
  ++s.peer_copies[direct ? 1 : 0];
  enqueue(st.get(), copy_op(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), size));
  return CUDA_SUCCESS;
}

CUresult mock_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* descriptors,
                                 size_t count) {
  if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  std::shared_ptr<CUmemPoolHandle_st> p;
  if (CUresult r = get_pool(s, pool, &p)) return r;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& desc = descriptors[i];
    if (desc.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        device_at(s, desc.location.id) == nullptr ||
        (desc.flags != 0 && desc.flags != 1 && desc.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// --- Kernel registration -------------------------------------------------------

// A kernel's parameter layout by C rules, without tail padding; null when a
// size is not 1, 2, 4 or 8.
std::shared_ptr<KernelDef> make_kernel(const char* name, axrt_mock_cuda_kernel_fn fn, void* user,
                                       const uint32_t* sizes, uint32_t count) {
  if (name == nullptr || *name == '\0' || fn == nullptr || (count > 0 && sizes == nullptr)) {
    return nullptr;
  }
  auto kernel = std::make_shared<KernelDef>();
  kernel->name = name;
  kernel->fn = fn;
  kernel->user = user;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t size = sizes[i];
    if (size != 1 && size != 2 && size != 4 && size != 8) return nullptr;
    offset = (offset + size - 1) / size * size;
    kernel->sizes.push_back(size);
    kernel->offsets.push_back(offset);
    offset += size;
  }
  kernel->buffer_size = offset;
  return kernel;
}

// The "axrt.cpu" library's state from its init, called once.
bool cpu_library_state(void** out) {
  static std::once_flag once;
  static void* library_state = nullptr;
  static bool ok = true;
  std::call_once(once, [] {
    const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
    if (library->init == nullptr) return;
    char message[256] = {};
    const axrt_kernel_library_context_t context{sizeof(context), "cuda-mock:0", 1, message,
                                                sizeof(message)};
    ok = library->init(&context, &library_state) == AXRT_KERNEL_OK;
  });
  *out = library_state;
  return ok;
}

// Runs one block of a CPU kernel as one workgroup.
int cpu_kernel_block(void* user, const void* params, const axrt_mock_cuda_dim3* grid,
                     const axrt_mock_cuda_dim3* block, const axrt_mock_cuda_dim3* block_id,
                     void* shared_memory, uint32_t shared_bytes) {
  const auto* cpu = static_cast<const CpuKernel*>(user);
  void* library_state = nullptr;
  if (!cpu_library_state(&library_state)) return CUDA_ERROR_LAUNCH_FAILED;
  // The argument block: the parameter buffer plus the struct's tail padding.
  const size_t bytes = std::max<size_t>(cpu->info->args_size, cpu->param_bytes);
  ParamBuffer args((bytes + sizeof(Chunk) - 1) / sizeof(Chunk), Chunk{});
  std::memcpy(args.data(), params, cpu->param_bytes);
  axrt_kernel_dispatch_t dispatch{};
  dispatch.struct_size = sizeof(dispatch);
  dispatch.workgroup_count = {grid->x, grid->y, grid->z};
  dispatch.workgroup_size = {block->x, block->y, block->z};
  dispatch.dynamic_shared_memory_size = shared_bytes;
  dispatch.worker_count = 1;
  dispatch.library_state = library_state;
  char message[256] = {};  // a failing kernel's reason; the mock has nowhere to report it
  axrt_kernel_workgroup_t workgroup{};
  workgroup.struct_size = sizeof(workgroup);
  workgroup.workgroup_id = {block_id->x, block_id->y, block_id->z};
  workgroup.worker_id = 0;
  workgroup.dynamic_shared_memory = shared_memory;
  workgroup.error_message = message;
  workgroup.error_message_capacity = sizeof(message);
  return cpu->info->function(args.data(), &dispatch, &workgroup) == AXRT_KERNEL_OK
             ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

void register_cpu_kernels(State& s) {
  const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
  for (uint32_t k = 0; k < library->kernel_count; ++k) {
    const axrt_kernel_info_t& info = library->kernels[k];
    std::vector<uint32_t> sizes;
    for (uint32_t i = 0; i < info.param_count; ++i) {
      const axrt_kernel_param_info_t& p = info.params[i];
      const bool buffer = p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER;
      sizes.push_back(buffer ? 8 : axrt_kernel_scalar_size(p.scalar_type));
    }
    CpuKernel& cpu = s.cpu_kernels.emplace_back(CpuKernel{&info, 0});
    auto kernel = make_kernel(info.name, cpu_kernel_block, &cpu, sizes.data(),
                              static_cast<uint32_t>(sizes.size()));
    if (!kernel) continue;  // a scalar type the mock cannot size
    cpu.param_bytes = kernel->buffer_size;
    s.registry[kernel->name] = std::move(kernel);
  }
}

// Whether cuGetProcAddress_v2 hides `name` (control API or environment).
bool is_hidden(State& s, std::string_view name) {
  {
    std::lock_guard lock(s.mu);
    if (s.hidden.count(std::string(name)) > 0) return true;
  }
  const char* env = std::getenv("AXRT_MOCK_CUDA_HIDE");
  std::string_view list = env != nullptr ? env : "";
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item == name) return true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return false;
}

}  // namespace axrt::mock_cuda

// ---------------------------------------------------------------------------
// 4. Exported functions.
// ---------------------------------------------------------------------------

using namespace axrt::mock_cuda;

extern "C" int cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                   uint64_t flags, int* symbol_status) {
  State& s = state();
  s.call_counts[k_cuGetProcAddress_v2].fetch_add(1, std::memory_order_relaxed);
  int status_storage = 0;
  int* status = symbol_status != nullptr ? symbol_status : &status_storage;
  if (symbol == nullptr || pfn == nullptr || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (is_hidden(s, symbol)) return CUDA_ERROR_NOT_FOUND;
  for (const SymbolEntry& entry : kSymbols) {
    if (std::strcmp(entry.name, symbol) != 0) continue;
    if (cuda_version < entry.min_version) {
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = entry.function;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}

extern "C" void axrt_mock_cuda_reset(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  for (const auto& device : s.devices) device->sticky = CUDA_SUCCESS;
  s.injections.clear();
  s.kernel_faults.clear();
  s.hidden.clear();
  s.memory_limits.clear();
  s.peer_links.clear();
  s.nvlinks.clear();
  s.host_numa_nodes.clear();
  s.peer_copies[0] = s.peer_copies[1] = 0;
  for (auto& count : s.call_counts) count.store(0, std::memory_order_relaxed);
  s.host_waits = 0;
  for (const auto& [handle, stream] : s.streams) stream->host_waits = 0;
  for (const auto& device : s.devices) {
    if (device->null_stream) device->null_stream->host_waits = 0;
  }
}

extern "C" int axrt_mock_cuda_inject_error(const char* function, int cuda_result, uint32_t skip) {
  const int index = symbol_index(function);
  if (index < 0 || index == k_cuGetProcAddress_v2 || cuda_result == CUDA_SUCCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  s.injections[index] = State::Injection{cuda_result, skip};
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_fail_kernel(const char* name, int cuda_result) {
  if (name == nullptr || cuda_result == CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.registry.count(name) == 0) return CUDA_ERROR_INVALID_VALUE;
  s.kernel_faults[name] = cuda_result;
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_register_kernel(const char* name, axrt_mock_cuda_kernel_fn fn,
                                              void* user, const uint32_t* param_sizes,
                                              uint32_t param_count) {
  auto kernel = make_kernel(name, fn, user, param_sizes, param_count);
  if (!kernel) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.registry[kernel->name] = std::move(kernel);
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_hide_symbol(const char* name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.hidden.emplace(name);
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_set_memory_limit(int device, uint64_t bytes) {
  if (device < 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.memory_limits[device] = bytes;
  return CUDA_SUCCESS;
}

extern "C" uint64_t axrt_mock_cuda_call_count(const char* function) {
  const int index = symbol_index(function);
  return index < 0 ? 0 : state().call_counts[index].load(std::memory_order_relaxed);
}

extern "C" uint64_t axrt_mock_cuda_host_waits(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.host_waits;
}

extern "C" uint64_t axrt_mock_cuda_stream_host_waits(const void* stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.streams.find(static_cast<CUstream>(const_cast<void*>(stream)));
  return it != s.streams.end() ? it->second->host_waits : 0;
}

extern "C" void axrt_mock_cuda_live_objects(axrt_mock_cuda_objects_t* objects) {
  if (objects == nullptr) return;
  State& s = state();
  std::lock_guard lock(s.mu);
  *objects = {};
  for (const auto& [base, a] : s.allocations) {
    ++(a.kind == AllocKind::kPinned ? objects->pinned_allocations : objects->device_allocations);
  }
  objects->pools = s.pools.size();
  objects->streams = s.streams.size();
  objects->events = s.events.size();
  objects->modules = s.modules.size() + s.libraries.size();
  for (const auto& device : s.devices) objects->context_retains += device->retain_count;
  objects->graphs = s.graphs.size();
  objects->graph_execs = s.graph_execs.size();
}

extern "C" int axrt_mock_cuda_sticky_error(int device) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return device >= 0 && device < static_cast<int>(s.devices.size()) ? s.devices[device]->sticky
                                                                     : CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_set_peer_access(int a, int b, int supported) {
  if (a < 0 || b < 0 || a == b) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.peer_links[{std::min(a, b), std::max(a, b)}].access = supported != 0;
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_set_peer_attributes(int a, int b, int native_atomics,
                                                  int performance_rank) {
  if (a < 0 || b < 0 || a == b) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  State::PeerLink& link = s.peer_links[{std::min(a, b), std::max(a, b)}];
  link.native_atomics = native_atomics != 0;
  link.performance_rank = performance_rank;
  return CUDA_SUCCESS;
}

extern "C" uint64_t axrt_mock_cuda_peer_copies(int direct) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.peer_copies[direct ? 1 : 0];
}

extern "C" int axrt_mock_cuda_set_host_numa_node(int device, int node) {
  if (device < 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.host_numa_nodes[device] = node;
  return CUDA_SUCCESS;
}

extern "C" int axrt_mock_cuda_set_nvlinks(int a, int b, uint32_t count) {
  if (a < 0 || b < -1 || a == b) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (b == -1) {
    s.nvlinks[{a, -1}] = count;
  } else {
    s.nvlinks[{std::min(a, b), std::max(a, b)}] = count;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// 5. The NVML mock: the part of NVML the CUDA driver reads, over the links
// of axrt_mock_cuda_set_nvlinks.
// ---------------------------------------------------------------------------

// NVML's types as nvml.h declares them (global, under the same tags): the
// driver calls these functions through pointers of exactly these types.
extern "C" {
struct nvmlDevice_st;
// nvmlPciInfo_t of the _v2 functions.
struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
}

namespace {

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlErrorInvalidArgument = 2;
constexpr int kNvmlErrorNotFound = 6;
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

// The remote end of each link of `device`, in order: a device ordinal for
// each link to a GPU (peers by ordinal), then -1 for each link to a switch.
std::vector<int> nvlink_ends(State& s, int device) {
  std::vector<int> ends;
  for (const auto& [pair, count] : s.nvlinks) {
    if (pair.second == -1) continue;
    const int other = pair.first == device ? pair.second : pair.second == device ? pair.first : -2;
    if (other < 0) continue;
    ends.insert(ends.end(), count, other);
  }
  auto it = s.nvlinks.find({device, -1});
  if (it != s.nvlinks.end()) ends.insert(ends.end(), it->second, -1);
  return ends;
}

// The handle of device `ordinal`: ordinal + 1, as a pointer.
int handle_ordinal(const void* handle) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(handle)) - 1;
}

}  // namespace

extern "C" AXRT_MOCK_CUDA_EXPORT int nvmlInit_v2(void) { return kNvmlSuccess; }

extern "C" AXRT_MOCK_CUDA_EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                                      nvmlDevice_st** device) {
  if (bus_id == nullptr || device == nullptr) return kNvmlErrorInvalidArgument;
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4) {
    return kNvmlErrorInvalidArgument;
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  const int ordinal = static_cast<int>(bus) - static_cast<int>(kFirstBus);
  if (domain != 0 || dev != 0 || function != 0 || device_at(s, ordinal) == nullptr) {
    return kNvmlErrorNotFound;
  }
  *device = reinterpret_cast<nvmlDevice_st*>(static_cast<uintptr_t>(ordinal + 1));
  return kNvmlSuccess;
}

extern "C" AXRT_MOCK_CUDA_EXPORT int nvmlDeviceGetNvLinkState(nvmlDevice_st* device, unsigned int link,
                                                              int* active) {
  if (active == nullptr) return kNvmlErrorInvalidArgument;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, handle_ordinal(device)) == nullptr) return kNvmlErrorInvalidArgument;
  const size_t links = nvlink_ends(s, handle_ordinal(device)).size();
  if (link >= std::max<size_t>(kNvmlMaxLinks, links)) return kNvmlErrorInvalidArgument;
  *active = link < links ? 1 : 0;  // NVML_FEATURE_ENABLED / DISABLED
  return kNvmlSuccess;
}

extern "C" AXRT_MOCK_CUDA_EXPORT int nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_st* device,
                                                                         unsigned int link,
                                                                         int* type) {
  if (type == nullptr) return kNvmlErrorInvalidArgument;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, handle_ordinal(device)) == nullptr) return kNvmlErrorInvalidArgument;
  const std::vector<int> ends = nvlink_ends(s, handle_ordinal(device));
  if (link >= ends.size()) return kNvmlErrorInvalidArgument;
  *type = ends[link] == -1 ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH / _GPU
  return kNvmlSuccess;
}

extern "C" AXRT_MOCK_CUDA_EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_st* device,
                                                                         unsigned int link,
                                                                         nvmlPciInfo_st* pci) {
  if (pci == nullptr) return kNvmlErrorInvalidArgument;
  State& s = state();
  std::lock_guard lock(s.mu);
  if (device_at(s, handle_ordinal(device)) == nullptr) return kNvmlErrorInvalidArgument;
  const std::vector<int> ends = nvlink_ends(s, handle_ordinal(device));
  if (link >= ends.size()) return kNvmlErrorInvalidArgument;
  *pci = nvmlPciInfo_st{};
  pci->bus = ends[link] == -1 ? kSwitchBus : kFirstBus + static_cast<unsigned>(ends[link]);
  std::snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus);
  return kNvmlSuccess;
}

extern "C" int axrt_mock_cuda_poison_device(int device, int cuda_result) {
  if (!is_sticky(cuda_result)) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = device_at(s, device);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  poison(s, d, cuda_result);
  return CUDA_SUCCESS;
}
