// Work held back behind host functions (docs/cuda-driver.md, "Work held
// back behind host functions"): host calls and the gates they make, held
// operations and records, handing them to CUDA (drains, and flushes for
// native waits), and the device's two threads: the releaser, which hands a
// stream's held work over once its gate ran, and the reaper, which finishes
// released streams once their work is done (finish_stream, cuda_stream.cc).
//
// Locks, in the order taken (a thread holding one takes only those below):
//   1. g_flush_mutex (flush_mutex()): by flushes only (flush_record,
//      stream_get_native_handle), before any order_mutex.
//   2. CudaStream::order_mutex: one at a time, but a flush goes on from a
//      locked stream to the stream of the held record it waits for (a
//      record comes before its waits, so the chain has no cycle).
//   3. CudaEvent::record_mutex: after an order_mutex, never before one.
//   4. HeldRecord::mutex_: after an order_mutex (drain, mark_issued) or
//      g_flush_mutex (flush_record), never with a record_mutex held.
//   5. CudaDevice::streams_mutex_: check() marking the device lost.
//   6. CudaDevice::Releaser::mutex, of any device: takes nothing, and its
//      condition variables wait with it alone.
// Leaves, which take none of these: CudaDevice::Reaper::mutex, fences_mutex_
// and lost_mutex_, FailureState::mutex_, CudaStream::host_calls_mutex,
// g_orphans_mutex (cuda_stream.cc) and the trace's locks (cuda_trace.cc,
// which take only each other). CudaStream::pending_mutex_ reaches 5 and 6
// only through check().
//
// Threads: a caller takes 1 to 6 in that order, and runs a held user's
// function it did not hand to CUDA once it holds none (HeldDone). The CUDA
// callback thread (host_call_trampoline) takes leaves and Releaser::mutex
// (kick); it never drains, so it takes an order_mutex only where a user's
// function calls axrt. The releaser takes Releaser::mutex, lets it go, and
// drains one stream under its order_mutex (with 3 to 6 below it). The
// reaper takes Reaper::mutex, lets it go, and finishes one stream holding
// nothing. leave_releaser(wait) waits, like a lock, until the releaser and
// flushes (pin_stream) are done with the stream, for which they need its
// order_mutex; finishing a stream with `wait` calls it and then takes the
// stream's order_mutex. The reaper does that holding nothing, and so does a
// thread that releases a stream's last reference, which finishes the stream
// itself when no reaper can be started (retire()). So no reference that may
// be a stream's last is released under an order_mutex or a record_mutex:
// an event holds the stream of its latest record, and stream_record_event
// lets the one it replaces go after its locks; held work hands on copies of
// its events and is released by HeldDone, completed work by reap().
#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>

#include "base/thread.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_held.h"

namespace axrt::cuda {

void enter_cuda_callback() noexcept;
void leave_cuda_callback() noexcept;

namespace {

// Lock 1 above, flush_mutex() (cuda_held.h).
std::mutex g_flush_mutex;

void run_host_call(HostCall* call, axrt_status_t told) {
  axrt_status_t result = call->body(told);
  // A call told of an earlier failure cannot change it: the stream keeps
  // its first failure.
  if (result) {
    if (told) {
      axrt_status_free(result);
    } else {
      call->stream->fail(call->sequence, make_failure(result));
    }
  }
}

void host_call_trampoline(void* user_data) {
  auto* call = static_cast<HostCall*>(user_data);
  if (call->claimed.exchange(true, std::memory_order_acq_rel)) {
    call->finished.store(true, std::memory_order_release);
    return;
  }
  enter_cuda_callback();
  CudaStream* stream = call->stream;
  CudaDevice* device = stream->cuda_device();
  const bool gating = call->gating;
  FailurePtr failure = stream->failure_before(call->sequence);
  StatusPtr told(failure ? status_from_failure(failure)
                         : (device->is_lost() ? device->lost_status() : nullptr));
  run_host_call(call, told.get());
  leave_cuda_callback();
  // The call may be reaped from here on; the stream lives until CUDA saw
  // this function return.
  call->finished.store(true, std::memory_order_release);
  // What the call held back may go on (or be skipped) now. A lost device
  // has the releaser abandon held work on its own.
  if (gating && !device->is_lost()) device->kick(stream);
}

// Under order_mutex: keeps `holding` (and the device's count) up to date.
void update_holding(CudaStream* s) {
  const bool holding = s->gate != nullptr || !s->held.empty();
  if (holding == s->holding.load(std::memory_order_relaxed)) return;
  s->holding.store(holding, std::memory_order_release);
  CudaDevice* d = s->cuda_device();
  if (holding) {
    d->held_streams.fetch_add(1, std::memory_order_acq_rel);
  } else {
    d->held_streams.fetch_sub(1, std::memory_order_acq_rel);
    d->note_released();
  }
}

void flush_locked(CudaStream* s, const HeldRecord* through, HeldDone* done);

// The releaser's step: hands the held work of `s` to CUDA as far as it may
// go now.
void release_held_work(CudaStream* s, HeldDone* done) {
  std::lock_guard<std::mutex> lock(s->order_mutex);
  drain(s, done);
}

}  // namespace

// --- Host calls -------------------------------------------------------------

axrt_status_t enqueue_host_call(CudaStream* stream, CUstream on, uint64_t sequence,
                                std::function<axrt_status_t(axrt_status_t)> body, bool gating) {
  auto call = std::make_shared<HostCall>();
  call->stream = stream;
  call->sequence = sequence;
  call->gating = gating;
  call->body = std::move(body);
  HostCall* raw = call.get();
  {
    std::lock_guard<std::mutex> lock(stream->host_calls_mutex);
    stream->host_calls.push_back(call);
  }
  CudaDevice* d = stream->cuda_device();
  const CUresult result = d->cu.cuLaunchHostFunc(on, host_call_trampoline, raw);
  if (result != CUDA_SUCCESS) {
    raw->claimed.store(true);
    raw->finished.store(true);
    return d->check(result, "cuLaunchHostFunc");
  }
  if (gating) {
    stream->gate = std::move(call);
    update_holding(stream);
  }
  return nullptr;
}

bool may_gate(const CudaStream* s) {
  return !s->native_handed_out.load(std::memory_order_relaxed) && !s->failure();
}

void run_abandoned_calls(CudaStream* stream) {
  std::vector<std::shared_ptr<HostCall>> pending;
  {
    std::lock_guard<std::mutex> lock(stream->host_calls_mutex);
    pending = stream->host_calls;
  }
  StatusPtr lost(stream->cuda_device()->lost_status());
  for (const auto& call : pending) {
    if (call->claimed.exchange(true, std::memory_order_acq_rel)) continue;
    run_host_call(call.get(), lost.get());
  }
}

// --- HeldDone, HeldRecord ---------------------------------------------------

void HeldDone::add(std::unique_ptr<HeldOp> op) noexcept {
  HeldOp* raw = op.get();
  if (tail_) {
    tail_->done_next_ = std::move(op);
  } else {
    head_ = std::move(op);
  }
  tail_ = raw;
}

void HeldDone::finish() noexcept {
  // One at a time: a long chain must not be destroyed recursively.
  while (head_) {
    std::unique_ptr<HeldOp> op = std::move(head_);
    head_ = std::move(op->done_next_);
    op->after_run();
  }
  tail_ = nullptr;
}

HeldRecord::HeldRecord(CudaDevice* device, CudaStream* stream, CUevent fence)
    : device(device), stream(stream), fence(fence) {}

HeldRecord::~HeldRecord() { static_cast<CudaDevice*>(device.get())->recycle_fence(fence); }

void HeldRecord::mark_issued(bool settled) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (issued()) return;
  settled_.store(settled, std::memory_order_release);
  issued_.store(true, std::memory_order_release);
  issued_cv_.notify_all();
  // Kicked under the lock: a waiter that leaves the list after this point
  // is queued already, and its finishing takes it out of the queue.
  for (CudaStream* waiter : waiters_) waiter->cuda_device()->kick(waiter);
  waiters_.clear();
}

bool HeldRecord::wait_issued(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    issued_cv_.wait(lock, [&] { return issued(); });
    return true;
  }
  return issued_cv_.wait_until(lock, deadline, [&] { return issued(); });
}

bool HeldRecord::add_waiter(CudaStream* waiter) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (issued()) return false;
  if (std::find(waiters_.begin(), waiters_.end(), waiter) == waiters_.end()) {
    waiters_.push_back(waiter);
  }
  return true;
}

void HeldRecord::remove_waiter(CudaStream* waiter) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase(waiters_, waiter);
}

CudaStream* HeldRecord::pin_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (issued()) return nullptr;
  // The stream holds this record until it is issued, which takes this
  // mutex: pinned now, it stays until unpinned.
  stream->cuda_device()->pin(stream);
  return stream;
}

// --- Draining and flushing --------------------------------------------------

void drain(CudaStream* s, HeldDone* done, bool all, const HeldRecord* through) {
  CudaDevice* d = s->cuda_device();
  ContextScope scope(d);
  for (;;) {
    const bool lost = d->is_lost();
    if (s->gate && (lost || s->gate->finished.load(std::memory_order_acquire))) s->gate.reset();
    const bool forcing = all || (through && !through->issued());
    if (s->held.empty() || (s->gate && !forcing)) break;
    HeldOp& next = *s->held.front();
    const Disposition how = lost                                  ? Disposition::kAbandon
                            : s->failure_before(next.sequence)    ? Disposition::kSkip
                                                                  : Disposition::kIssue;
    if (how == Disposition::kIssue && next.after && !next.after->issued()) {
      if (forcing) {
        if (CudaStream* other = next.after->pin_stream()) {
          flush_locked(other, next.after.get(), done);
          other->cuda_device()->unpin(other);
        }
        if (!next.after->issued()) break;  // flushing issues it; never loop
      } else if (next.after->add_waiter(s)) {
        break;
      }
      continue;
    }
    std::unique_ptr<HeldOp> op = std::move(s->held.front());
    s->held.pop_front();
    if (op->after) op->after->remove_waiter(s);
    // Work handed over later than its enqueue has no caller to tell.
    if (axrt_status_t status =
            guard("work held back behind a host function", [&] { return op->run(how); })) {
      if (how == Disposition::kIssue && !d->is_lost()) {
        s->fail(op->sequence, make_failure(status));
      } else {
        axrt_status_free(status);  // skipped or abandoned work fails nothing more
      }
    }
    done->add(std::move(op));
  }
  update_holding(s);
}

namespace {

void flush_locked(CudaStream* s, const HeldRecord* through, HeldDone* done) {
  std::lock_guard<std::mutex> lock(s->order_mutex);
  drain(s, done, false, through);
}

}  // namespace

bool ready(CudaStream* s, HeldDone* done) {
  if (!s->holding.load(std::memory_order_relaxed)) return true;
  if (!in_cuda_callback()) drain(s, done);
  return !s->holding.load(std::memory_order_relaxed);
}

axrt_status_t hold(CudaStream* s, std::unique_ptr<HeldOp> op) {
  s->held.push_back(std::move(op));
  update_holding(s);
  return nullptr;
}

axrt_status_t release_held(CudaStream* s) {
  CudaDevice* d = s->cuda_device();
  while (s->holding.load(std::memory_order_acquire)) {
    std::shared_ptr<HostCall> gate;
    {
      HeldDone done;
      std::lock_guard<std::mutex> lock(s->order_mutex);
      drain(s, &done);
      gate = s->gate;
    }
    if (!s->holding.load(std::memory_order_acquire)) break;
    if (!gate) {
      // A record another stream holds back; that stream goes on by itself.
      d->wait_for_release(std::chrono::milliseconds(1));
      continue;
    }
    const CUresult result = d->cu.cuStreamSynchronize(s->stream);
    if (result != CUDA_SUCCESS) {
      axrt_status_t status = d->check(result, "cuStreamSynchronize");
      if (!d->is_lost()) return status;
      axrt_status_free(status);
    }
  }
  return nullptr;
}

std::mutex& flush_mutex() noexcept { return g_flush_mutex; }

void stop_holding(CudaStream* s, HeldDone* done) {
  if (!in_cuda_callback()) drain(s, done, true);
  // A host function still running that held work back holds nothing from
  // now on: what the stream enqueues next goes to CUDA at once, in order
  // with what another library enqueues on the handle.
  s->gate.reset();
  update_holding(s);
}

// Hands the latest record of `e` to CUDA now if its stream still holds it
// back, so that a stream that holds nothing back (one whose native queue was
// handed out) or a native queue can wait for it on the device. Takes
// g_flush_mutex: no order_mutex may be held.
void flush_record(CudaEvent* e) {
  if (in_cuda_callback()) return;  // no CUDA call there
  HeldDone done;
  std::lock_guard<std::mutex> flush(g_flush_mutex);
  std::shared_ptr<HeldRecord> record;
  {
    std::lock_guard<std::mutex> lock(e->record_mutex);
    record = e->held_record;
  }
  if (!record) return;
  if (CudaStream* source = record->pin_stream()) {
    flush_locked(source, record.get(), &done);
    source->cuda_device()->unpin(source);
  }
}

bool settle_held_work(CudaStream* s, bool wait) {
  CudaDevice* d = s->cuda_device();
  if (!wait) return !s->holding.load(std::memory_order_acquire) && d->leave_releaser(s, false);
  d->leave_releaser(s, true);
  // A CUDA error other than the device's loss while waiting leaves what is
  // held to be dropped with the stream: nothing could run it.
  StatusPtr(release_held(s));
  return true;
}

// --- The device's reaper and releaser ---------------------------------------

void CudaDevice::retire(CudaStream* stream) {
  {
    std::lock_guard<std::mutex> lock(reaper_->mutex);
    if (!reaper_thread_.joinable()) {
      try {
        // The thread owns only the shared state: it never touches the
        // device, which finishing a stream may destroy.
        reaper_thread_ = start_thread([reaper = reaper_] {
          std::unique_lock<std::mutex> lock(reaper->mutex);
          while (true) {
            reaper->wake.wait(lock, [&] { return reaper->stop || !reaper->streams.empty(); });
            if (reaper->streams.empty()) return;
            CudaStream* next = reaper->streams.front();
            reaper->streams.pop_front();
            lock.unlock();
            finish_stream(next, true);
            lock.lock();
          }
        });
      } catch (const std::system_error&) {
        // No thread to be had; finished below.
      }
    }
    if (reaper_thread_.joinable()) {
      reaper_->streams.push_back(stream);
      reaper_->wake.notify_one();
      return;
    }
  }
  // Releasing a stream must not throw (it would end the process): without a
  // reaper, the release waits for the stream's work. This may destroy the
  // device, so nothing touches it afterwards.
  finish_stream(stream, true);
}

axrt_status_t CudaDevice::start_releaser() {
  std::lock_guard<std::mutex> lock(releaser_->mutex);
  if (releaser_thread_.joinable()) return nullptr;
  try {
    // Like the reaper, the thread owns only the shared state: the last work
    // it is done with may release the device.
    releaser_thread_ = start_thread([releaser = releaser_] {
      std::unique_lock<std::mutex> lock(releaser->mutex);
      while (true) {
        releaser->wake.wait(lock, [&] { return releaser->stop || !releaser->streams.empty(); });
        if (releaser->streams.empty()) return;
        CudaStream* next = releaser->streams.front();
        releaser->streams.pop_front();
        next->release_queued = false;
        next->release_busy = true;
        lock.unlock();
        HeldDone done;
        release_held_work(next, &done);
        lock.lock();
        // The stream may be finished (deleted) from here on.
        next->release_busy = false;
        releaser->progress.notify_all();
        lock.unlock();
        done.finish();
        lock.lock();
      }
    });
  } catch (const std::system_error&) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                       "cannot start the thread that runs work held back behind host functions "
                       "on {}",
                       id());
  }
  return nullptr;
}

namespace {

// Stops the releaser or the reaper (`shared` is its state) and waits for it.
// The thread may itself be what released the device (with the last work or
// stream it was done with); it then ends on its own.
template <class Shared>
void stop_thread(Shared& shared, std::thread& thread) {
  if (!thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.stop = true;
  }
  shared.wake.notify_all();
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

}  // namespace

void CudaDevice::stop_threads() {
  // Streams that hold work, and retired streams, hold the device: neither
  // thread has any left.
  stop_thread(*releaser_, releaser_thread_);
  stop_thread(*reaper_, reaper_thread_);
}

void CudaDevice::kick(CudaStream* stream) noexcept {
  std::lock_guard<std::mutex> lock(releaser_->mutex);
  if (stream->release_queued) return;
  try {
    releaser_->streams.push_back(stream);
  } catch (...) {
    // The stream's next call, or its synchronization, releases its work.
    return;
  }
  stream->release_queued = true;
  releaser_->wake.notify_one();
}

bool CudaDevice::leave_releaser(CudaStream* stream, bool wait) {
  std::unique_lock<std::mutex> lock(releaser_->mutex);
  if (stream->release_queued) {
    std::erase(releaser_->streams, stream);
    stream->release_queued = false;
  }
  auto idle = [stream] { return !stream->release_busy && stream->release_pins == 0; };
  if (idle()) return true;
  if (!wait) return false;
  releaser_->progress.wait(lock, idle);
  return true;
}

void CudaDevice::wait_for_release(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(releaser_->mutex);
  releaser_->progress.wait_for(lock, timeout);
}

void CudaDevice::note_released() noexcept {
  std::lock_guard<std::mutex> lock(releaser_->mutex);
  releaser_->progress.notify_all();
}

void CudaDevice::pin(CudaStream* stream) noexcept {
  std::lock_guard<std::mutex> lock(releaser_->mutex);
  ++stream->release_pins;
}

void CudaDevice::unpin(CudaStream* stream) noexcept {
  std::lock_guard<std::mutex> lock(releaser_->mutex);
  --stream->release_pins;
  releaser_->progress.notify_all();
}

}  // namespace axrt::cuda
