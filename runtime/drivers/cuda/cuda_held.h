// Work a CUDA stream holds back behind host functions (docs/cuda-driver.md,
// "Work held back behind host functions"): host calls and the gates they
// make, the operations held behind a gate, records held back, and handing
// that work to CUDA, by the caller or the device's releaser thread. The
// stream's operations (cuda_stream.cc) call in under their order_mutex
// where a function below says so. cuda_held.cc's opening comment gives the
// locks involved and the order in which they are taken.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_HELD_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_HELD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/drivers/cuda/cuda_driver.h"
#include "trace/trace.h"

namespace axrt::cuda {

// Host work queued on a stream: a user's host function or a step of the
// runtime's own (a staging copy, a cross-driver wait). The stream owns it;
// it runs once, on the callback thread or, when the device was lost before
// CUDA ran it, on the thread that finds that out.
struct HostCall {
  CudaStream* stream = nullptr;
  uint64_t sequence = 0;
  // May fail the stream: the stream holds back what follows until it ran.
  bool gating = false;
  std::function<axrt_status_t(axrt_status_t told)> body;
  std::atomic<bool> claimed{false};
  std::atomic<bool> finished{false};
};

// What taking held work off its queue does with it.
enum class Disposition {
  kIssue,    // hand it to CUDA
  kSkip,     // the stream failed before it: complete it without running it
  kAbandon,  // the device is lost: CUDA runs nothing more
};

// An operation a stream holds back, in its place, while a host function that
// may fail the stream has not run.
class HeldOp {
 public:
  explicit HeldOp(uint64_t sequence) : sequence(sequence) {}
  virtual ~HeldOp() = default;
  HeldOp(const HeldOp&) = delete;
  HeldOp& operator=(const HeldOp&) = delete;

  // Called once, under the stream's order_mutex. An error when issuing fails
  // the stream from this operation on. An event it holds (which holds the
  // stream of its latest record) is handed on as a copy: the operation's own
  // reference goes with it, once no lock is held (HeldDone).
  virtual axrt_status_t run(Disposition how) = 0;
  // Called once after run(), with no lock held: what may not run under one
  // (a user's function).
  virtual void after_run() noexcept {}

  const uint64_t sequence;  // the operation's place on its stream
  // A wait for a record another stream still holds back: not run before
  // that record is issued.
  std::shared_ptr<HeldRecord> after;

 private:
  friend class HeldDone;
  std::unique_ptr<HeldOp> done_next_;
};

// Held work that runs a callable: `f(how)`.
template <class F>
class HeldCall final : public HeldOp {
 public:
  HeldCall(uint64_t sequence, F f) : HeldOp(sequence), f_(std::move(f)) {}
  axrt_status_t run(Disposition how) override { return f_(how); }

 private:
  F f_;
};

template <class F>
std::unique_ptr<HeldOp> make_held(uint64_t sequence, F f) {
  return std::make_unique<HeldCall<F>>(sequence, std::move(f));
}

// Held work a drain is done with. Its after_run() and destruction wait until
// the owner holds no lock (finish(), or the destructor: declare it before
// the locks), since they may run a user's function or release the last
// reference to buffers, events and streams. Adding never allocates.
class HeldDone {
 public:
  HeldDone() = default;
  ~HeldDone() { finish(); }
  HeldDone(const HeldDone&) = delete;
  HeldDone& operator=(const HeldDone&) = delete;

  void add(std::unique_ptr<HeldOp> op) noexcept;
  void finish() noexcept;

 private:
  std::unique_ptr<HeldOp> head_;
  HeldOp* tail_ = nullptr;
};

// A record of an event that its stream held back (see HeldOp). Whoever waits
// for that record (a host, another stream, a native queue) waits for `fence`,
// recorded on the stream at the record's place when it reaches CUDA; the
// event's own CUevent stands for its latest record only.
class HeldRecord {
 public:
  HeldRecord(CudaDevice* device, CudaStream* stream, CUevent fence);
  ~HeldRecord();  // gives the fence back
  HeldRecord(const HeldRecord&) = delete;
  HeldRecord& operator=(const HeldRecord&) = delete;

  // Whether it reached CUDA (or was given up with its device). Then
  // `settled` says whether its failure was known by then: false when a host
  // function that may still fail the stream came before it (a native wait
  // made the stream hand it over early).
  bool issued() const noexcept { return issued_.load(std::memory_order_acquire); }
  bool settled() const noexcept { return settled_.load(std::memory_order_acquire); }
  void mark_issued(bool settled) noexcept;
  // Waits until issued(); false once `deadline` passed first.
  bool wait_issued(std::chrono::steady_clock::time_point deadline);
  // Streams whose next held work is a wait for this record, kicked when it
  // is issued. add_waiter() is false when it was issued already.
  bool add_waiter(CudaStream* stream);
  void remove_waiter(CudaStream* stream) noexcept;
  // The stream, kept from being finished until its device's unpin(); null
  // once issued.
  CudaStream* pin_stream();

  const Ref<Device> device;
  // Valid until issued(): the stream holds the record until then.
  CudaStream* const stream;
  const CUevent fence;

 private:
  std::mutex mutex_;
  std::condition_variable issued_cv_;
  std::vector<CudaStream*> waiters_;
  std::atomic<bool> issued_{false};
  std::atomic<bool> settled_{false};
};

// Queues `body` on `on` (the stream's CUDA stream or its staging stream) as
// host work at `sequence`. A `gating` call (on the stream itself) holds back
// the work enqueued after it until it ran. Under order_mutex.
axrt_status_t enqueue_host_call(CudaStream* stream, CUstream on, uint64_t sequence,
                                std::function<axrt_status_t(axrt_status_t)> body, bool gating);
// Whether a host call enqueued now on `s` may fail it, and so holds back what
// follows: not once the stream failed (the call is told, and cannot change
// the failure), nor once other libraries enqueue onto the stream directly.
bool may_gate(const CudaStream* s);
// Runs, on this thread, every host call of `stream` CUDA has not run: the
// device is lost and CUDA will run nothing more.
void run_abandoned_calls(CudaStream* stream);

// Under s->order_mutex: whether new work may go to CUDA now, after the held
// work that may.
bool ready(CudaStream* s, HeldDone* done);
// Under s->order_mutex: queues `op` behind the work the stream holds.
axrt_status_t hold(CudaStream* s, std::unique_ptr<HeldOp> op);
// The steps every queued operation of a stream takes (copies, fills and
// batches in cuda_stream.cc, graph launches in cuda_graph.cc): begin_work();
// under the stream's context, finished work reaped and the operation
// stamped; then, under order_mutex, `work(Disposition::kIssue, stamp)` at
// once when ready() lets it go (after failed_meanwhile()), else `work` held
// behind what the stream holds, called with its disposition when drained.
// With kFailsStream an error issuing at once fails the stream from then on,
// as held work's does. What `work` owns is let go only once no lock is held
// (the held work a drain finished goes with `done`, declared before the
// lock; `work` itself is a parameter, destroyed after every local).
template <bool kFailsStream, class Work>
axrt_status_t queue_in_order(CudaStream* s, Work work) {
  AXRT_RETURN_IF_ERROR(begin_work(s));
  ContextScope scope(s->cuda_device());
  s->reap(false);
  const trace::OpStamp stamp = trace::stamp(s->trace_track);
  HeldDone done;
  std::lock_guard<std::mutex> order(s->order_mutex);
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  if (ready(s, &done)) {
    AXRT_RETURN_IF_ERROR(failed_meanwhile(s, sequence));
    axrt_status_t status = work(Disposition::kIssue, stamp);
    if constexpr (kFailsStream) status = fail_with(s, status);
    return status;
  }
  return hold(s, make_held(sequence, [work = std::move(work), stamp](Disposition how) mutable {
    return work(how, stamp);
  }));
}

// Under s->order_mutex: hands held work to CUDA in order, as far as it may
// go: up to a host function that may fail the stream and has not run yet, or
// up to a wait for a record that another stream still holds back (the
// stream is then kicked when that record is issued). Work behind a failure
// is skipped, work of a lost device abandoned. A flush (`all`, or `through`
// a record of this stream; the caller holds flush_mutex()) hands work over
// whatever holds it back, first flushing the records of other streams it
// waits for.
void drain(CudaStream* s, HeldDone* done, bool all = false, const HeldRecord* through = nullptr);
// Taken before any stream's order_mutex by whatever hands another stream's
// held work to CUDA early (a flush), so that flushes, which lock a chain of
// streams, never wait for each other in a cycle.
std::mutex& flush_mutex() noexcept;
// Under flush_mutex() and s->order_mutex, once `native_handed_out` is set:
// the stream holds nothing back from now on.
void stop_holding(CudaStream* s, HeldDone* done);
// Hands the held work of `s` to CUDA, or skips it, waiting for what holds it
// back (synchronize). An error is one of CUDA's while waiting; after the
// device's loss the held work is abandoned and the caller's next wait says
// so.
axrt_status_t release_held(CudaStream* s);
// Before a released stream is finished: nothing held back any more, and the
// releaser done with it. Without `wait`, only a stream that holds nothing
// qualifies, and no order_mutex is taken; with it, the caller holds no
// order_mutex or record_mutex (cuda_held.cc's opening comment).
bool settle_held_work(CudaStream* s, bool wait);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_HELD_H_
