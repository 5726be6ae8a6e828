#include <chrono>

#include "runtime/drivers/cpu/cpu_driver.h"

namespace axrt::cpu {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

axrt_status_t event_query(Event* event, bool* out_complete) {
  auto* self = static_cast<CpuEvent*>(event);
  FailurePtr failure;
  const bool complete = self->is_complete(self->latest_record(), &failure);
  if (failure) return status_from_failure(failure);
  *out_complete = complete;
  return nullptr;
}

axrt_status_t event_wait(Event* event, uint64_t timeout_ns) {
  auto* self = static_cast<CpuEvent*>(event);
  FailurePtr failure;
  if (!self->wait(self->latest_record(), timeout_ns, &failure)) {
    return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                       "axrt_event_wait: {} did not complete within {} ns", self->describe(),
                       timeout_ns);
  }
  return status_from_failure(failure);
}

axrt_status_t event_elapsed_time(Event* start, Event* end, int64_t* out_nanoseconds) {
  auto* first = static_cast<CpuEvent*>(start);
  auto* second = static_cast<CpuEvent*>(end);
  int64_t t0, t1;
  {
    std::lock_guard<std::mutex> lock(first->mutex);
    t0 = first->timestamp_ns;
  }
  {
    std::lock_guard<std::mutex> lock(second->mutex);
    t1 = second->timestamp_ns;
  }
  *out_nanoseconds = t1 - t0;
  return nullptr;
}

void event_destroy(Event* event) { delete static_cast<CpuEvent*>(event); }

const EventVtable kCpuEventVtable = {
    .destroy = event_destroy,
    .query = event_query,
    .wait = event_wait,
    .elapsed_time = event_elapsed_time,
};

}  // namespace

CpuEvent::CpuEvent() : Event(&kCpuEventVtable) {
  destroy = [](Object* object) { event_destroy(static_cast<Event*>(object)); };
}

bool is_cpu_event(const Event* event) noexcept { return event->vtable == &kCpuEventVtable; }

uint64_t CpuEvent::begin_record() {
  std::lock_guard<std::mutex> lock(mutex);
  return ++recorded;
}

uint64_t CpuEvent::latest_record() {
  std::lock_guard<std::mutex> lock(mutex);
  return recorded;
}

void CpuEvent::complete(uint64_t sequence, FailurePtr record_failure) {
  const int64_t now = now_ns();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (sequence <= completed) return;
    completed = sequence;
    failure = std::move(record_failure);
    timestamp_ns = now;
  }
  completed_cv.notify_all();
}

bool CpuEvent::is_complete(uint64_t sequence, FailurePtr* out_failure) {
  std::lock_guard<std::mutex> lock(mutex);
  if (completed < sequence) return false;
  *out_failure = failure;
  return true;
}

bool CpuEvent::wait(uint64_t sequence, uint64_t timeout_ns, FailurePtr* out_failure) {
  std::unique_lock<std::mutex> lock(mutex);
  auto done = [&] { return completed >= sequence; };
  // Timeouts beyond a century are as good as infinite and would overflow
  // the clock arithmetic.
  constexpr uint64_t kForever = uint64_t{100} * 365 * 24 * 3600 * 1000000000;
  if (timeout_ns >= kForever) {
    completed_cv.wait(lock, done);
  } else if (!completed_cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns), done)) {
    return false;
  }
  *out_failure = failure;
  return true;
}

axrt_status_t create_event(Device*, Event** out_event) {
  *out_event = new CpuEvent();
  return nullptr;
}

}  // namespace axrt::cpu
