// Traces of the CUDA driver's work. The GPU runs an operation after the call
// that queued it returned, so its times come from CUDA timing events
// recorded on its stream around it (and between the commands of a function
// call), converted to the trace clock through a TraceClock; the operation is
// recorded once its last event completed. docs/cuda-driver.md ("Tracing and
// NVTX") says how and what.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_TRACE_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_TRACE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/drivers/cuda/cuda_api.h"
#include "trace/trace.h"

namespace axrt::cuda {

struct CudaDevice;
struct CudaStream;

// A timing event that completed at `host_ns` on the trace clock: an event
// `e` of the same device completed at host_ns + cuEventElapsedTime(event, e).
struct TraceClock {
  CudaDevice* device = nullptr;
  CUevent event = nullptr;
  int64_t host_ns = 0;
  ~TraceClock();  // gives the event back to the device
};

// One traced operation: its timing events, in the order they were recorded
// on the stream, and its records (the operation or function first, then the
// commands of a function call), whose `begin` and `end` hold the indices of
// their first and last events until the events completed.
struct TracedWork {
  std::shared_ptr<const TraceClock> clock;
  std::vector<CUevent> events;
  std::vector<trace::Record> records;
};

// A stream's traced operations, in the order they were queued, until their
// last event completed. Thread-safe.
class StreamTrace {
 public:
  // At most this many operations wait to be recorded; later ones are not
  // traced until earlier ones were.
  static constexpr size_t kMaxPending = 4096;

  bool has_room() const noexcept {
    return count_.load(std::memory_order_relaxed) < kMaxPending;
  }
  // Whether operations wait: one relaxed load, for the paths that poll.
  bool pending() const noexcept { return count_.load(std::memory_order_relaxed) != 0; }
  void add(CudaDevice* device, std::unique_ptr<TracedWork> work) noexcept;
  // Records the operations whose events completed, oldest first, and gives
  // their events back; when no trace runs, gives every operation's events
  // back unrecorded. Makes no call that may mark the device lost.
  void poll(CudaDevice* device) noexcept;
  // Gives every operation's events back unrecorded.
  void discard(CudaDevice* device) noexcept;

 private:
  void record(CudaDevice* device, TracedWork& work) noexcept;

  std::mutex mutex_;
  std::deque<std::unique_ptr<TracedWork>> pending_;
  std::atomic<size_t> count_{0};
  int64_t last_end_ = 0;  // of the latest record: the stream's slices never overlap
};

// Brackets one operation queued on a stream with timing events while a
// trace runs: start() before the operation's first CUDA call, command()
// after each command of a function call, finish() once it is all queued.
// An operation that failed to queue gives its events back when the scope
// ends. Callers call start() only while trace::recording() their stamp; a
// scope never started (or that could not trace) does nothing.
class TraceScope {
 public:
  TraceScope() = default;
  ~TraceScope() {
    if (work_) abandon();
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  // `record`: the operation's kind, names and arguments. `stamp`: what
  // trace::stamp() gave when the operation was enqueued, its queue time and
  // flow (a stream may hold work back until later); the track is added here.
  // `commands`: how many command() calls follow. Untraced unless the stamp's
  // trace still runs, and when the stream has no track, too much traced work
  // waits, or no event can be had.
  void start(CudaStream* stream, const trace::Record& record, const trace::OpStamp& stamp,
             size_t commands = 0) noexcept;
  // The command described by `record` was queued.
  void command(const trace::Record& record) noexcept;
  void finish() noexcept {
    if (work_) commit();
  }
  bool active() const noexcept { return work_ != nullptr; }

 private:
  bool record_event() noexcept;
  void commit() noexcept;
  void abandon() noexcept;

  CudaStream* stream_ = nullptr;
  std::unique_ptr<TracedWork> work_;
};

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_TRACE_H_
