// Traces of the CUDA driver's work: timing events, the clock that converts
// them to trace time, and each stream's operations waiting to be recorded.
#include "runtime/drivers/cuda/cuda_trace.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "runtime/drivers/cuda/cuda_driver.h"

namespace axrt::cuda {
namespace {

// Idle timing events a device keeps for reuse; more are destroyed.
constexpr size_t kIdleTimingEvents = 1024;
// How long a clock is used before the next traced operation makes a new one:
// cuEventElapsedTime's float milliseconds keep about 60 ns of precision over
// a second, and the host and device clocks drift apart slowly.
constexpr int64_t kClockLifetimeNs = 1'000'000'000;
// How long a new clock's event is polled before it is waited for.
constexpr int64_t kClockPollNs = 1'000'000;

int64_t to_ns(float milliseconds) {
  return std::llround(static_cast<double>(milliseconds) * 1e6);
}

void release(CudaDevice* device, TracedWork& work) noexcept {
  for (CUevent event : work.events) device->recycle_timing_event(event);
  work.events.clear();
  work.clock.reset();
}

}  // namespace

TraceClock::~TraceClock() {
  if (event) device->recycle_timing_event(event);
}

// --- CudaDevice -------------------------------------------------------------

bool CudaDevice::acquire_timing_event(CUevent* out) noexcept {
  {
    std::lock_guard<std::mutex> lock(timing_mutex_);
    if (!timing_events_.empty()) {
      *out = timing_events_.back();
      timing_events_.pop_back();
      return true;
    }
  }
  // Default flags: timing events must time.
  return cu.cuEventCreate(out, CU_EVENT_DEFAULT) == CUDA_SUCCESS;
}

void CudaDevice::recycle_timing_event(CUevent event) noexcept {
  {
    std::lock_guard<std::mutex> lock(timing_mutex_);
    if (timing_events_.size() < kIdleTimingEvents) {
      try {
        timing_events_.push_back(event);
        return;
      } catch (...) {
        // Destroyed below.
      }
    }
  }
  ContextScope scope(this);
  cu.cuEventDestroy(event);
}

std::shared_ptr<const TraceClock> CudaDevice::trace_clock() noexcept {
  std::lock_guard<std::mutex> lock(trace_clock_mutex_);
  if (trace_clock_ && trace::now() - trace_clock_->host_ns < kClockLifetimeNs) {
    return trace_clock_;
  }
  CUevent event = nullptr;
  if (!acquire_timing_event(&event)) return trace_clock_;
  // The allocation stream holds at most frees, so the event completes at
  // once. The host time read as soon as it did is the event's, late by one
  // poll: polled rather than waited for, since waking a waiting thread takes
  // longer (tens of microseconds).
  CUresult state = cu.cuEventRecord(event, allocation_stream);
  const int64_t deadline = trace::now() + kClockPollNs;
  if (state == CUDA_SUCCESS) {
    while ((state = cu.cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {
      if (trace::now() > deadline) {
        state = cu.cuEventSynchronize(event);
        break;
      }
    }
  }
  const int64_t host_ns = trace::now();
  if (state != CUDA_SUCCESS) {
    recycle_timing_event(event);
    return trace_clock_;
  }
  try {
    auto clock = std::make_shared<TraceClock>();
    clock->device = this;
    clock->event = event;
    clock->host_ns = host_ns;
    trace_clock_ = std::move(clock);
  } catch (...) {
    recycle_timing_event(event);
  }
  return trace_clock_;
}

void CudaDevice::poll_traced_streams() noexcept {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (CudaStream* stream : streams_) {
    if (stream->trace.pending()) stream->trace.poll(this);
  }
}

// --- StreamTrace ------------------------------------------------------------

void StreamTrace::add(CudaDevice* device, std::unique_ptr<TracedWork> work) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.size() < kMaxPending) {
      try {
        pending_.push_back(std::move(work));
        count_.store(pending_.size(), std::memory_order_relaxed);
        return;
      } catch (...) {
        // Untraced after all.
      }
    }
  }
  if (work) release(device, *work);
}

void StreamTrace::poll(CudaDevice* device) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool recording = trace::active();
  while (!pending_.empty()) {
    TracedWork& work = *pending_.front();
    if (recording) {
      // The stream runs in order: the last event completes last.
      const CUresult state = device->cu.cuEventQuery(work.events.back());
      if (state == CUDA_ERROR_NOT_READY) break;
      // Another error is the device's, which its next call reports.
      if (state == CUDA_SUCCESS) record(device, work);
    }
    release(device, work);
    pending_.pop_front();
  }
  count_.store(pending_.size(), std::memory_order_relaxed);
}

void StreamTrace::discard(CudaDevice* device) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& work : pending_) release(device, *work);
  pending_.clear();
  count_.store(0, std::memory_order_relaxed);
}

void StreamTrace::record(CudaDevice* device, TracedWork& work) noexcept {
  const CudaApi& cu = device->cu;
  const std::vector<CUevent>& events = work.events;
  int64_t stack_times[8];
  std::vector<int64_t> heap_times;
  int64_t* times = stack_times;
  if (events.size() > std::size(stack_times)) {
    try {
      heap_times.resize(events.size());
    } catch (...) {
      return;
    }
    times = heap_times.data();
  }
  // The first event's time from the clock, the others' from the first, so
  // that a function's commands nest in it exactly; no slice starts before
  // the stream's previous one ended.
  float milliseconds = 0;
  if (cu.cuEventElapsedTime(&milliseconds, work.clock->event, events[0]) != CUDA_SUCCESS) return;
  times[0] = std::max(work.clock->host_ns + to_ns(milliseconds), last_end_);
  for (size_t i = 1; i < events.size(); ++i) {
    if (cu.cuEventElapsedTime(&milliseconds, events[0], events[i]) != CUDA_SUCCESS) return;
    times[i] = std::max(times[0] + to_ns(milliseconds), times[i - 1]);
  }
  last_end_ = times[events.size() - 1];
  for (trace::Record record : work.records) {
    record.begin = times[record.begin];
    record.end = times[record.end];
    trace::emit(record);
  }
}

// --- TraceScope -------------------------------------------------------------

void TraceScope::start(CudaStream* stream, const trace::Record& record,
                       const trace::OpStamp& stamp, size_t commands) noexcept {
  if (!trace::recording(stamp)) return;
  // Streams the runtime made for itself have no track; on a callback thread
  // no CUDA call is allowed.
  if (stream->trace_track == 0 || !stream->trace.has_room() || in_cuda_callback()) return;
  CudaDevice* device = stream->cuda_device();
  if (device->is_lost()) return;
  try {
    auto work = std::make_unique<TracedWork>();
    work->events.reserve(commands + 2);
    work->records.reserve(commands + 1);
    work->records.push_back(record);
    work->clock = device->trace_clock();
    if (!work->clock) return;
    trace::Record& r = work->records.front();
    r.begin = 0;
    r.end = 0;
    r.flow = stamp.flow;
    r.session = stamp.session;
    r.track = stream->trace_track;
    r.a[0] = stamp.queued;
    stream_ = stream;
    work_ = std::move(work);
  } catch (...) {
    return;
  }
  if (!record_event()) abandon();
}

void TraceScope::command(const trace::Record& record) noexcept {
  if (!work_) return;
  if (!record_event()) {
    abandon();
    return;
  }
  try {
    trace::Record& r = work_->records.emplace_back(record);
    r.track = stream_->trace_track;
    r.session = work_->records.front().session;
    r.end = static_cast<int64_t>(work_->events.size() - 1);
    r.begin = r.end - 1;
  } catch (...) {
    abandon();
  }
}

bool TraceScope::record_event() noexcept {
  CudaDevice* device = stream_->cuda_device();
  CUevent event = nullptr;
  if (!device->acquire_timing_event(&event)) return false;
  try {
    work_->events.push_back(event);
  } catch (...) {
    device->recycle_timing_event(event);
    return false;
  }
  return device->cu.cuEventRecord(event, stream_->stream) == CUDA_SUCCESS;
}

void TraceScope::commit() noexcept {
  // A function's last command ended with an event; anything else needs one.
  if (work_->records.size() == 1 && !record_event()) {
    abandon();
    return;
  }
  work_->records.front().end = static_cast<int64_t>(work_->events.size() - 1);
  stream_->trace.add(stream_->cuda_device(), std::move(work_));
}

void TraceScope::abandon() noexcept {
  release(stream_->cuda_device(), *work_);
  work_.reset();
}

}  // namespace axrt::cuda
