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
// Held work (cuda_held.h, cuda_held.cc): while a host function that may fail
// its stream has not run, later work on the stream is held back on the host,
// handed to CUDA once the function succeeded and skipped once it failed; a
// device thread (the releaser) does that when no caller does it first. Pool
// allocations are ordered on the device, never waited for (cuda_device.cc).
// docs/cuda-driver.md ("Streams", "Memory") explains both.
//
// Tracing (cuda_trace.cc): work queued while a trace runs is bracketed by
// timing events on its stream, and recorded once they completed, in trace
// time (docs/cuda-driver.md, "Tracing and NVTX").
//
// Graphs (cuda_graph.cc): a captured call's batch made once into a CUDA
// graph, each replay one cuGraphLaunch in the stream's order
// (docs/cuda-driver.md, "Graphs").
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_

#include <atomic>
#include <chrono>
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
struct HostCall;
class HeldOp;
class HeldRecord;

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
  // reaper thread (cuda_held.cc), which finishes it once the work is done.
  // The stream keeps the device alive until then. When no thread can be
  // started, waits for the work and finishes the stream here (which may
  // destroy the device): no stream's last reference is released under an
  // order_mutex or a record_mutex.
  void retire(CudaStream* stream);

  // The releaser: a device thread that hands a stream's held work to CUDA
  // once what held it back is done (cuda_held.cc). Started before the
  // first host function that may hold work back; RESOURCE_EXHAUSTED when no
  // thread can be had.
  axrt_status_t start_releaser();
  // Queues `stream` for the releaser. Any thread, host functions' included;
  // only for streams that hold work (they outlive the queue entry).
  void kick(CudaStream* stream) noexcept;
  // Takes `stream` out of the releaser's queue for a caller that releases
  // its work itself (finishing the stream). While the releaser is working on
  // it: waits for it, or returns false when `wait` is false.
  bool leave_releaser(CudaStream* stream, bool wait);
  // Waits until some stream of the device stopped holding work back, at
  // most `timeout`; note_released() says one did.
  void wait_for_release(std::chrono::microseconds timeout);
  void note_released() noexcept;
  // Keeps a stream that holds work from being finished while another
  // stream's flush hands that work over (HeldRecord::pin_stream).
  void pin(CudaStream* stream) noexcept;
  void unpin(CudaStream* stream) noexcept;
  // Streams with held work or a host function holding work back.
  std::atomic<int> held_streams{0};

  const CudaApi& cu;
  CUdevice cu_device;
  CUcontext context = nullptr;
  // Device memory: a CUDA memory pool where the device has them (memory is
  // taken and returned on `allocation_stream`), else a caching pool over
  // cuMemAlloc/cuMemFree.
  CUmemoryPool pool = nullptr;
  CUstream allocation_stream = nullptr;
  // Recorded on `allocation_stream` behind every pool allocation, counted by
  // `allocation_epoch`: a stream waits for it (on the device) before its
  // first work after an allocation, instead of the allocation waiting for
  // the allocation stream on the host.
  CUevent allocation_fence = nullptr;
  std::atomic<uint64_t> allocation_epoch{0};
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

  // The device's PCI address (cuDeviceGetPCIBusId), empty when the driver
  // does not say: how NVML and sysfs know it.
  std::string pci_bus_id;

  // Before the first peer copy of one of its streams with `peer`'s memory:
  // lets this device reach that memory directly where CUDA can
  // (cuCtxEnablePeerAccess, and access to the peer's memory pool), once per
  // pair. Copies work either way (cuda_stream.cc). Any thread but a
  // callback thread.
  void prepare_peer_access(CudaDevice* peer);
  // The NUMA node of the device's PCI bus (initialize()); -1 when unknown.
  int32_t read_numa_node() const;

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

  // By the peer's axrt ordinal: whether prepare_peer_access() ran for it.
  std::mutex peer_mutex_;
  std::vector<bool> peer_prepared_;

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

  // Shared with the releaser thread, which may outlive the device as the
  // reaper does. The queue's streams hold work, so they stay alive;
  // CudaStream's release_* fields are guarded by `mutex`.
  struct Releaser {
    std::mutex mutex;
    std::condition_variable wake;      // a stream was queued, or stop
    std::condition_variable progress;  // the releaser finished a stream
    std::deque<CudaStream*> streams;
    bool stop = false;
  };
  std::shared_ptr<Releaser> releaser_ = std::make_shared<Releaser>();
  std::thread releaser_thread_;
  // Stops the releaser and the reaper and waits for them, unless this is one
  // of them (the destructor).
  void stop_threads();
};

// A stream failure that later work and events see: the first host function
// that failed, or a wait on a failed event.
struct StreamFailure {
  uint64_t sequence = 0;  // of the failing operation
  FailurePtr failure;
};

// A stream's failure, shared with the host calls that check a record of the
// stream on another stream (which may run after the stream is gone).
class FailureState {
 public:
  // The failure if it came before operation `sequence`.
  FailurePtr before(uint64_t sequence) const;
  FailurePtr get() const;
  // Keeps the first failure; false when there was one already.
  bool set(uint64_t sequence, FailurePtr failure);

 private:
  mutable std::mutex mutex_;
  StreamFailure failure_;
};

struct CudaStream : Stream {
  explicit CudaStream(CudaDevice* device);
  ~CudaStream();

  CudaDevice* cuda_device() const noexcept { return static_cast<CudaDevice*>(device.get()); }

  // The stream's failure if it failed before operation `sequence`.
  FailurePtr failure_before(uint64_t sequence) const { return failure_->before(sequence); }
  FailurePtr failure() const { return failure_->get(); }
  const std::shared_ptr<FailureState>& failure_state() const noexcept { return failure_; }
  void fail(uint64_t sequence, FailurePtr failure);
  // Counts the stream's first failure (its own or its device's loss) in the
  // device's counters and records it in a running trace as `what`.
  void count_failure(std::string_view what) noexcept;

  // What operations handed to CUDA keep until they completed: the fence
  // event recorded behind them (null while unfenced), and what they hold.
  struct Retained {
    CUevent fence = nullptr;
    std::vector<Ref<Object>> keep;
    std::vector<CommandBatchPtr> batches;
    std::vector<Ref<Buffer>> returns;  // memory returned when done
    bool empty() const noexcept { return keep.empty() && batches.empty() && returns.empty(); }
  };
  // Keeps `keep` (buffers, batches) alive until the work handed to CUDA so
  // far completed. Under `order_mutex`. With `coalesce` (the calls and graph
  // replays, many a second), they may wait for the fence of a later
  // operation: one fence event covers up to kCoalescedFences coalesced
  // operations, recorded with the last of them or with the next operation
  // that does not coalesce, which saves an event record and query a call.
  axrt_status_t retain_until_done(std::vector<Ref<Object>> keep, CommandBatchPtr batch,
                                  std::vector<Ref<Buffer>> returns, bool coalesce = false);
  static constexpr uint32_t kCoalescedFences = 8;
  // Releases what completed work held; everything when `all` (the unfenced
  // too). Never under `order_mutex`: what it releases may finish streams.
  void reap(bool all);
  // What waits unfenced, taken out before the stream is asked whether it is
  // idle (and released if it is), or put back.
  Retained take_unfenced();
  void restore_unfenced(Retained retained);
  // Lets go of what `retained` held (its fence back to the device's pool);
  // no lock held.
  void release(Retained& retained);

  CUstream stream = nullptr;
  CUstream staging_stream = nullptr;  // copies through pinned chunks
  std::atomic<uint64_t> sequence{0};  // operations enqueued

  // Work held back behind host functions (cuda_held.cc). Every operation
  // that hands work to `stream` takes `order_mutex`, so that operations go
  // to CUDA whole and in their order; it is never held while waiting for the
  // device or running a user's function.
  std::mutex order_mutex;
  // Under order_mutex: the latest host call handed to CUDA that may fail the
  // stream and is not known to have run, the work enqueued after it, and
  // the allocation_epoch of the device the stream last waited for.
  std::shared_ptr<HostCall> gate;
  std::deque<std::unique_ptr<HeldOp>> held;
  uint64_t allocations_seen = 0;
  // gate || !held.empty(): written under order_mutex, read anywhere.
  std::atomic<bool> holding{false};
  // Under the device's releaser mutex: queued for the releaser, being
  // released by it, pinned by flushes.
  bool release_queued = false;
  bool release_busy = false;
  int release_pins = 0;
  // Set once axrt_stream_get_native_handle() handed `stream` out: other
  // libraries then enqueue onto it directly, so the stream holds nothing
  // back any more (under order_mutex; read anywhere).
  std::atomic<bool> native_handed_out{false};

  // Pinned chunks for pageable copies, created at the first one.
  struct StagingChunk {
    std::byte* host = nullptr;
    uint64_t size = 0;
    CUevent free = nullptr;    // recorded when the chunk's last use is done
    bool used = false;
  };
  std::vector<StagingChunk> staging;

  // Host work queued and not yet known to have run (cuda_held.cc).
  std::mutex host_calls_mutex;
  std::vector<std::shared_ptr<HostCall>> host_calls;

  // Operations queued while a trace ran, recorded once they completed.
  StreamTrace trace;
  // Whether tools were given the stream's name (NVTX), at its first use.
  std::atomic<bool> named_for_tools{false};

 private:
  std::shared_ptr<FailureState> failure_ = std::make_shared<FailureState>();
  std::atomic<bool> failure_counted_{false};

  std::mutex pending_mutex_;
  std::deque<Retained> pending_;  // fenced, in order
  Retained unfenced_;             // coalesced since the last fence
  uint32_t unfenced_count_ = 0;
};

struct CudaEvent : Event {
  explicit CudaEvent(CudaDevice* device);

  CUevent event = nullptr;
  // Where and when the latest record happened, for failures it carries, and
  // its HeldRecord when its stream held it back (null when it went to CUDA at
  // once, and then its failure was known by then). Taken after a stream's
  // order_mutex, never before one.
  std::mutex record_mutex;
  Ref<Stream> recorded_on;
  uint64_t recorded_sequence = 0;
  std::shared_ptr<HeldRecord> held_record;
};

bool is_cuda_event(const Event* event) noexcept;
// Hands the latest record of `e` to CUDA now if its stream still holds it
// back (cuda_held.cc; the events' waits use it too). No order_mutex may be
// held.
void flush_record(CudaEvent* e);

axrt_status_t create_stream(Device* device, Stream** out_stream);
// How `device` reaches `peer`'s memory (DeviceVtable::query_peer).
axrt_status_t query_peer(Device* device, Device* peer, axrt_device_peer_info_t* out);
// Finishes a released stream: false, doing nothing, while its work still
// runs and `wait` is false.
bool finish_stream(CudaStream* stream, bool wait);
axrt_status_t create_event(Device* device, Event** out_event);
axrt_status_t synchronize_device(CudaDevice* device);
axrt_status_t load_code(Device* device, DeviceCodeKind kind, std::string_view target,
                        std::span<const std::byte> image, std::shared_ptr<DeviceCode>* out);

// The steps each operation of a stream takes (cuda_stream.cc), also taken by
// graph launches (cuda_graph.cc). First, before any lock: DEVICE_LOST, or
// the stream's failure once it is known, else NULL.
axrt_status_t begin_work(CudaStream* s);
// Under order_mutex, once ready() (cuda_held.h) let the work go to CUDA: the
// stream's failure if a host function that ran meanwhile failed it before
// operation `sequence`.
axrt_status_t failed_meanwhile(CudaStream* s, uint64_t sequence);
// Under order_mutex, before work that touches device memory: the stream
// waits on the device for the pool allocations made since it last did.
axrt_status_t wait_for_allocations(CudaStream* s);
// Fails the stream (from its next operation on) with `status`, when set,
// and returns it.
axrt_status_t fail_with(CudaStream* s, axrt_status_t status);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_DRIVER_H_
