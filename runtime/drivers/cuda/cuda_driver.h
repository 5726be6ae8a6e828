// The CUDA driver: CUDA devices through the Driver API, loaded at run time
// (runtime/drivers/cuda/cuda_api.h). One primary context per device, device
// memory from a stream-ordered pool, pinned host memory from a caching pool,
// a CUDA stream per axrt stream, device code as CUDA modules or libraries.
//
// Threads: the CUDA callback thread runs host functions and must make no
// CUDA call. Anything that would (returning memory, destroying a stream or a
// module) is handed from that thread to the device's deferred list, which
// the next call on the device drains.
//
// Failure: an error that corrupts the CUDA context (an illegal address, a
// launch failure) marks the device lost; every later call on it fails at
// once with DEVICE_LOST naming that first error.
//
// Tracing (cuda_trace.cc): work queued while a trace runs is bracketed by
// timing events on its stream, and recorded once they completed, in trace
// time (docs/cuda-driver.md, "Tracing and NVTX").
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "runtime/caching_pool.h"
#include "runtime/driver.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "runtime/drivers/cuda/cuda_trace.h"

namespace axrt::cuda {

// The driver library and its entry points, loaded once per process and never
// unloaded (callbacks may still be running in it at exit).
struct CudaApi {
#define AXRT_CUDA_DECLARE_SYMBOL(name, ret, params, version, required) ret(*name) params = nullptr;
  AXRT_CUDA_SYMBOLS(AXRT_CUDA_DECLARE_SYMBOL)
#undef AXRT_CUDA_DECLARE_SYMBOL
  std::string path;        // what was loaded
  int driver_version = 0;  // 12080 for CUDA 12.8
  bool has_pools = false;  // every cuMemPool* entry point present

  // "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
  std::string describe(CUresult result) const;
};

// Loads the driver (AXRT_CUDA_DRIVER_LIBRARY, else libcuda.so.1) and
// initialises it; nullptr with `*reason` set when there is none.
const CudaApi* cuda_api(std::string* reason);

// Whether `result` leaves the CUDA context unusable.
bool is_sticky_error(CUresult result) noexcept;

// True on the thread running a host function (no CUDA calls allowed).
bool in_cuda_callback() noexcept;

struct CudaDevice;
struct CudaStream;

// Makes the device's primary context current on this thread for the scope,
// restoring the previous one after.
class ContextScope {
 public:
  explicit ContextScope(const CudaDevice* device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const CudaApi& cu_;
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

struct CudaDevice : Device {
  CudaDevice(const CudaApi& api, CUdevice device, int ordinal);
  ~CudaDevice();

  // Retains the primary context and reads the device's properties.
  axrt_status_t initialize();

  // Turns a CUDA result into a status ("cuMemAlloc on cuda:0: ..."); a
  // sticky error marks the device lost first.
  axrt_status_t check(CUresult result, const char* call);
  // DEVICE_LOST once the device is lost; NULL otherwise. Also runs work
  // deferred from callback threads.
  axrt_status_t enter();
  bool is_lost() const noexcept { return lost_.load(std::memory_order_acquire); }
  axrt_status_t lost_status() const;
  void mark_lost(CUresult result, const char* call);

  // Runs `work` now, or later on a thread that may call CUDA when called
  // from a callback thread.
  void defer_or_run(std::function<void()> work);
  void run_deferred();

  // Events without timing for stream bookkeeping, reused.
  axrt_status_t acquire_fence(CUevent* out);
  void recycle_fence(CUevent event);

  // Timing events for traces (cuda_trace.cc), reused up to a bound; false
  // when none can be created.
  bool acquire_timing_event(CUevent* out) noexcept;
  void recycle_timing_event(CUevent event) noexcept;
  // Where the device's timing events meet the trace clock: made at the first
  // traced operation, made again once a second while tracing goes on (so that
  // the conversion stays precise); nullptr when none can be made.
  std::shared_ptr<const TraceClock> trace_clock() noexcept;

  // The device's streams, until they are finished (finish_stream).
  void add_stream(CudaStream* stream);
  void remove_stream(CudaStream* stream);
  // Records the traced work of every stream that completed (synchronize).
  void poll_traced_streams() noexcept;

  // Hands a released stream whose work is still running to the device's
  // reaper thread, which finishes it once the work is done. The stream keeps
  // the device alive until then. When no thread can be started, waits for
  // the work and finishes the stream here (which may destroy the device).
  void retire(CudaStream* stream);

  const CudaApi& cu;
  CUdevice cu_device;
  CUcontext context = nullptr;
  // Device memory: a CUDA memory pool where the device has them (memory is
  // taken and returned on `allocation_stream`), else a caching pool over
  // cuMemAlloc/cuMemFree.
  CUmemoryPool pool = nullptr;
  CUstream allocation_stream = nullptr;
  std::unique_ptr<CachingPool> fallback_pool;
  std::unique_ptr<CachingPool> pinned_pool;
  bool cluster_launch = false;

  // Statistics the CUDA pool does not keep.
  std::mutex pool_mutex;  // makes reuse visible: reserved bytes before and after
  std::atomic<uint64_t> allocation_count{0};
  std::atomic<uint64_t> reuse_count{0};
  std::atomic<uint64_t> free_count{0};
  std::atomic<uint64_t> trim_count{0};
  std::atomic<uint64_t> live_bytes{0};
  std::atomic<uint64_t> peak_live_bytes{0};

  // Blocks of the caching pools that were over-allocated for alignment:
  // aligned start -> what CUDA returned.
  std::mutex aligned_mutex;
  std::unordered_map<uintptr_t, uintptr_t> aligned_blocks;


 private:
  std::atomic<bool> lost_{false};
  mutable std::mutex lost_mutex_;
  std::string lost_reason_;
  CUresult lost_result_ = CUDA_SUCCESS;

  std::mutex deferred_mutex_;
  std::vector<std::function<void()>> deferred_;
  std::atomic<bool> has_deferred_{false};

  std::mutex fences_mutex_;
  std::vector<CUevent> fences_;

  std::mutex timing_mutex_;
  std::vector<CUevent> timing_events_;
  std::mutex trace_clock_mutex_;
  std::shared_ptr<const TraceClock> trace_clock_;

  // Never held while calling anything that may mark the device lost, which
  // takes it.
  std::mutex streams_mutex_;
  std::vector<CudaStream*> streams_;

  // Shared with the reaper thread, which may outlive the device: finishing
  // the last retired stream can release the device on that thread.
  struct Reaper {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<CudaStream*> streams;
    bool stop = false;
  };
  std::shared_ptr<Reaper> reaper_ = std::make_shared<Reaper>();
  std::thread reaper_thread_;
};

// A stream failure that later work and events see: the first host function
// that failed, or a wait on a failed event.
struct StreamFailure {
  uint64_t sequence = 0;  // of the failing operation
  FailurePtr failure;
};

struct HostCall;

struct CudaStream : Stream {
  explicit CudaStream(CudaDevice* device);
  ~CudaStream();

  CudaDevice* cuda_device() const noexcept { return static_cast<CudaDevice*>(device.get()); }

  // The stream's failure if it failed before operation `sequence`.
  FailurePtr failure_before(uint64_t sequence) const;
  FailurePtr failure() const;
  void fail(uint64_t sequence, FailurePtr failure);
  // Counts the stream's first failure (its own or its device's loss) in the
  // device's counters and records it in a running trace as `what`.
  void count_failure(std::string_view what) noexcept;

  // Keeps `keep` (buffers, batches) alive until the work enqueued so far
  // completed; returns what already completed.
  axrt_status_t retain_until_done(std::vector<Ref<Object>> keep, CommandBatchPtr batch,
                                  std::vector<Ref<Buffer>> returns);
  // Releases what completed work held; everything when `all`.
  void reap(bool all);

  CUstream stream = nullptr;
  CUstream staging_stream = nullptr;  // copies through pinned chunks
  std::atomic<uint64_t> sequence{0};  // operations enqueued
  std::atomic<bool> has_host_work{false};

  // Pinned chunks for pageable copies, created at the first one.
  struct StagingChunk {
    std::byte* host = nullptr;
    uint64_t size = 0;
    CUevent free = nullptr;    // recorded when the chunk's last use is done
    bool used = false;
  };
  std::vector<StagingChunk> staging;

  // Host work queued and not yet known to have run (cuda_stream.cc).
  std::mutex host_calls_mutex;
  std::vector<std::unique_ptr<HostCall>> host_calls;

  // Operations queued while a trace ran, recorded once they completed.
  StreamTrace trace;
  // Whether tools were given the stream's name (NVTX), at its first use.
  std::atomic<bool> named_for_tools{false};

 private:
  mutable std::mutex failure_mutex_;
  StreamFailure failure_;
  std::atomic<bool> failure_counted_{false};

  struct Pending {
    CUevent fence = nullptr;
    std::vector<Ref<Object>> keep;
    CommandBatchPtr batch;
    std::vector<Ref<Buffer>> returns;  // memory returned when done
  };
  std::mutex pending_mutex_;
  std::deque<Pending> pending_;
};

struct CudaEvent : Event {
  explicit CudaEvent(CudaDevice* device);

  CUevent event = nullptr;
  // Where and when the latest record happened, for failures it carries.
  std::mutex record_mutex;
  Ref<Stream> recorded_on;
  uint64_t recorded_sequence = 0;

  // The failure the latest record completed with, if any.
  FailurePtr record_failure();
};

bool is_cuda_event(const Event* event) noexcept;

axrt_status_t create_stream(Device* device, Stream** out_stream);
// Finishes a released stream: false, doing nothing, while its work still
// runs and `wait` is false.
bool finish_stream(CudaStream* stream, bool wait);
axrt_status_t create_event(Device* device, Event** out_event);
axrt_status_t synchronize_device(CudaDevice* device);
axrt_status_t load_code(Device* device, DeviceCodeKind kind, std::string_view target,
                        std::span<const std::byte> image, std::shared_ptr<DeviceCode>* out);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_
