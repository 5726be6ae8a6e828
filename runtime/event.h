// The core view of an event; drivers implement the vtable.
#ifndef AXRT_RUNTIME_EVENT_H_
#define AXRT_RUNTIME_EVENT_H_

#include <atomic>
#include <string>

#include "axrt/event.h"
#include "runtime/device.h"
#include "runtime/object.h"

namespace axrt {

struct Event;

struct EventVtable {
  void (*destroy)(Event* event);
  // The event has been recorded at least once when these are called.
  axrt_status_t (*query)(Event* event, bool* out_complete);
  axrt_status_t (*wait)(Event* event, uint64_t timeout_ns);
  // Both events belong to the same device and completed.
  axrt_status_t (*elapsed_time)(Event* start, Event* end, int64_t* out_nanoseconds);
  // (optional) Makes `native_stream`, a queue of this driver's native API
  // (not NULL), wait for the latest record. Null for drivers without native
  // queues: the core answers UNIMPLEMENTED.
  axrt_status_t (*enqueue_native_wait)(Event* event, void* native_stream);
};

struct Event : Object {
  static constexpr ObjectType kType = ObjectType::kEvent;

  explicit Event(const EventVtable* vt) : Object(kType), vtable(vt) {}

  const EventVtable* vtable;
  Ref<Device> device;
  axrt_event_flags_t flags = 0;
  std::string label;
  std::atomic<bool> ever_recorded{false};

  std::string describe() const;
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_EVENT_H_
