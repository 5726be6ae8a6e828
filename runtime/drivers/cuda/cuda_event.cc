// CUDA events (docs/cuda-driver.md, "Streams"): a CUDA event per axrt event,
// recorded on a stream (cuda_stream.cc records and waits); queries and waits
// on the host find the latest record, which may still be held back behind a
// host function of its stream ("Work held back behind host functions",
// cuda_held.cc).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_held.h"
#include "trace/trace.h"

namespace axrt::cuda {
namespace {

// Records the traced work of the stream that recorded `e`, which completed.
void poll_recording_stream(CudaEvent* e) noexcept {
  if (in_cuda_callback()) return;
  Ref<Stream> source;
  {
    std::lock_guard<std::mutex> lock(e->record_mutex);
    source = e->recorded_on;
  }
  auto* s = static_cast<CudaStream*>(source.get());
  if (s && s->trace.pending()) s->trace.poll(s->cuda_device());
}

void event_destroy(Event* event) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  d->defer_or_run([e, d] {
    if (e->event) {
      ContextScope scope(d);
      d->cu.cuEventDestroy(e->event);
    }
    delete e;
  });
}

// The latest record of an event as of a call: what stands for it in CUDA
// (the event, or the fence of a record its stream held back, which stays
// that record's even when the event is recorded again) and how to find the
// failure it completes with.
struct LatestRecord {
  std::shared_ptr<HeldRecord> held;
  std::shared_ptr<FailureState> source;
  uint64_t sequence = 0;
  CUevent target = nullptr;

  bool waiting_on_host() const { return held && !held->issued(); }
  FailurePtr failure() const { return source ? source->before(sequence) : nullptr; }
};

LatestRecord latest_record(CudaEvent* e) {
  std::lock_guard<std::mutex> lock(e->record_mutex);
  LatestRecord r;
  r.held = e->held_record;
  if (auto* from = static_cast<CudaStream*>(e->recorded_on.get())) {
    r.source = from->failure_state();
    r.sequence = e->recorded_sequence;
  }
  r.target = r.held ? r.held->fence : e->event;
  return r;
}

// Why `function`, called from a host function, refuses to wait for the
// latest record of `e`: the record reaches CUDA only after a host function of
// its stream ran, which the waiting one could keep from ever happening.
axrt_status_t waits_behind_own_host_function(const char* function, const CudaEvent* e) {
  return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                     "{}: called from a host function while the latest record of {} waits "
                     "behind a host function of its stream",
                     function, e->describe());
}

axrt_status_t event_query(Event* event, bool* out_complete) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  const LatestRecord record = latest_record(e);
  // A record its stream still holds back has not even reached CUDA.
  const CUresult result =
      record.waiting_on_host() ? CUDA_ERROR_NOT_READY : d->cu.cuEventQuery(record.target);
  if (result == CUDA_ERROR_NOT_READY) {
    *out_complete = false;
    return nullptr;
  }
  AXRT_RETURN_IF_ERROR(d->check(result, "cuEventQuery"));
  if (FailurePtr failure = record.failure()) return status_from_failure(failure);
  if (trace::active()) poll_recording_stream(e);
  *out_complete = true;
  return nullptr;
}

axrt_status_t event_wait(Event* event, uint64_t timeout_ns) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  const LatestRecord record = latest_record(e);
  const bool forever = timeout_ns == AXRT_TIMEOUT_INFINITE;
  const auto deadline =
      forever ? std::chrono::steady_clock::time_point::max()
              : std::chrono::steady_clock::now() +
                    std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, uint64_t{1} << 62));
  auto timed_out = [&] {
    return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                       "axrt_event_wait: {} did not complete within {} ns", e->describe(),
                       timeout_ns);
  };
  if (record.waiting_on_host()) {
    // The record goes to CUDA once the host function before it ran, which a
    // host function waiting here could keep from ever happening.
    if (in_cuda_callback()) {
      return waits_behind_own_host_function("axrt_event_wait", e);
    }
    if (!record.held->wait_issued(deadline)) return timed_out();
  }
  CUresult result;
  if (forever && !in_cuda_callback()) {
    result = d->cu.cuEventSynchronize(record.target);
  } else {
    // Poll: CUDA has no timed wait. Short sleeps first, longer ones later.
    auto pause = std::chrono::microseconds(2);
    while ((result = d->cu.cuEventQuery(record.target)) == CUDA_ERROR_NOT_READY) {
      if (std::chrono::steady_clock::now() >= deadline) return timed_out();
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  AXRT_RETURN_IF_ERROR(d->check(result, "cuEventSynchronize"));
  if (FailurePtr failure = record.failure()) return status_from_failure(failure);
  if (trace::active()) poll_recording_stream(e);
  return nullptr;
}

axrt_status_t event_elapsed_time(Event* start, Event* end, int64_t* out_nanoseconds) {
  auto* a = static_cast<CudaEvent*>(start);
  auto* b = static_cast<CudaEvent*>(end);
  CudaDevice* d = static_cast<CudaDevice*>(a->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  float milliseconds = 0;
  AXRT_RETURN_IF_ERROR(
      d->check(d->cu.cuEventElapsedTime(&milliseconds, a->event, b->event), "cuEventElapsedTime"));
  *out_nanoseconds = std::llround(static_cast<double>(milliseconds) * 1e6);
  return nullptr;
}

// Every axrt record that reaches CUDA is a cuEventRecord on the recording
// stream's CUDA stream, in stream order behind its host functions and
// cross-driver waits, so the CUDA event stands for the latest record exactly.
// A record its stream still holds back is handed to CUDA first (with the
// stream's work before it, even behind a host function that has not run:
// a native queue can only wait for what CUDA has), and the wait is for its
// fence.
axrt_status_t event_enqueue_native_wait(Event* event, void* native_stream) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  // The special handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) name the
  // default streams of the current context.
  ContextScope scope(d);
  auto refuse_failure = [&](const FailurePtr& failure) {
    // A native queue cannot fail, so it is not made to wait for a failure.
    return make_status(failure->code,
                       "axrt_event_enqueue_native_wait: the latest record of {} completes with a "
                       "failure, so no native stream is made to wait for it: {}",
                       e->describe(), failure->message);
  };
  CUresult result = CUDA_SUCCESS;
  for (;;) {
    LatestRecord record;
    {
      std::lock_guard<std::mutex> lock(e->record_mutex);
      record.held = e->held_record;
      if (auto* from = static_cast<CudaStream*>(e->recorded_on.get())) {
        record.source = from->failure_state();
        record.sequence = e->recorded_sequence;
      }
      if (!record.held) {
        if (FailurePtr failure = record.failure()) return refuse_failure(failure);
        result = d->cu.cuStreamWaitEvent(static_cast<CUstream>(native_stream), e->event, 0);
        break;
      }
    }
    if (record.waiting_on_host()) {
      if (in_cuda_callback()) {
        return waits_behind_own_host_function("axrt_event_enqueue_native_wait", e);
      }
      flush_record(e);
      continue;  // the latest record now, which may have changed
    }
    if (FailurePtr failure = record.failure()) return refuse_failure(failure);
    result = d->cu.cuStreamWaitEvent(static_cast<CUstream>(native_stream), record.held->fence, 0);
    break;
  }
  if (result == CUDA_ERROR_INVALID_HANDLE) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "axrt_event_enqueue_native_wait: `native_stream` {} is not a live CUstream "
                       "(cuStreamWaitEvent on {}: {})",
                       native_stream, d->id(), d->cu.describe(result));
  }
  return d->check(result, "cuStreamWaitEvent");
}

const EventVtable kCudaEventVtable = {
    .destroy = event_destroy,
    .query = event_query,
    .wait = event_wait,
    .elapsed_time = event_elapsed_time,
    .enqueue_native_wait = event_enqueue_native_wait,
};

}  // namespace

CudaEvent::CudaEvent(CudaDevice* d) : Event(&kCudaEventVtable) { device = Ref<Device>(d); }

bool is_cuda_event(const Event* event) noexcept { return event->vtable == &kCudaEventVtable; }

axrt_status_t create_event(Device* device, Event** out_event) {
  auto* d = static_cast<CudaDevice*>(device);
  AXRT_RETURN_IF_ERROR(d->enter());
  auto* e = new CudaEvent(d);
  e->destroy = [](Object* object) { event_destroy(static_cast<Event*>(object)); };
  *out_event = e;
  return nullptr;
}

}  // namespace axrt::cuda
