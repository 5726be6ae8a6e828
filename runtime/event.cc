#include "runtime/driver.h"

#include "runtime/api.h"

namespace axrt {

std::string Event::describe() const {
  return label.empty() ? fmt::format("event on {}", device->id())
                       : fmt::format("event '{}' on {}", label, device->id());
}

}  // namespace axrt

using namespace axrt;

namespace {

axrt_status_t require_recorded(const ApiCall& api, const Event* event, const char* name) {
  if (event->ever_recorded.load(std::memory_order_acquire)) return nullptr;
  return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                   "`{}` ({}) was never recorded; record it on a stream first", name,
                   event->describe());
}

}  // namespace

extern "C" {

AXRT_API axrt_status_t axrt_event_create(axrt_device_t device, const axrt_event_options_t* options,
                                         axrt_event_t* out_event) {
  static constexpr ApiCall api("axrt_event_create");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_event, "out_event"));
    axrt_event_options_t opts = AXRT_EVENT_OPTIONS_INIT;
    Extensions extensions;
    if (options) {
      AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_event_options_t",
                                                 sizeof(axrt_event_options_t)));
      AXRT_READ_FIELD(options, &opts, flags);
      AXRT_RETURN_IF_ERROR(
          api.read_extensions(options->next, "options", kAcceptDebugLabel, &extensions));
    }
    if (opts.flags & ~axrt_event_flags_t{AXRT_EVENT_FLAG_DISABLE_TIMING}) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`options->flags` {:#x} has bits no axrt_event_flags_t value defines",
                       opts.flags);
    }
    Event* event = nullptr;
    AXRT_RETURN_IF_ERROR(self->vtable->create_event(self, &event));
    auto ref = Ref<Event>::adopt(event);
    event->device = Ref<Device>(self);
    event->flags = opts.flags;
    event->label = std::move(extensions.label);
    object_register(event);
    *out_event = to_handle<axrt_event_t>(ref.release());
    return nullptr;
  });
}

AXRT_API void axrt_event_retain(axrt_event_t event) { retain_handle<Event>(event); }

AXRT_API void axrt_event_release(axrt_event_t event) { release_handle<Event>(event); }

AXRT_API axrt_status_t axrt_event_query(axrt_event_t event, bool* out_complete) {
  static constexpr ApiCall api("axrt_event_query");
  Event* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(event, "event", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_complete, "out_complete"));
  AXRT_RETURN_IF_ERROR(require_recorded(api, self, "event"));
  return self->vtable->query(self, out_complete);
}

AXRT_API axrt_status_t axrt_event_wait(axrt_event_t event, uint64_t timeout_ns) {
  static constexpr ApiCall api("axrt_event_wait");
  return guard(api.function(), [&]() -> axrt_status_t {
    Event* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(event, "event", &self));
    AXRT_RETURN_IF_ERROR(require_recorded(api, self, "event"));
    return self->vtable->wait(self, timeout_ns);
  });
}

AXRT_API axrt_status_t axrt_event_elapsed_time(axrt_event_t start, axrt_event_t end,
                                               int64_t* out_nanoseconds) {
  static constexpr ApiCall api("axrt_event_elapsed_time");
  Event* first = nullptr;
  Event* second = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(start, "start", &first));
  AXRT_RETURN_IF_ERROR(api.resolve(end, "end", &second));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_nanoseconds, "out_nanoseconds"));
  for (const Event* e : {first, second}) {
    if (e->flags & AXRT_EVENT_FLAG_DISABLE_TIMING) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "{} was created with AXRT_EVENT_FLAG_DISABLE_TIMING", e->describe());
    }
  }
  if (first->device.get() != second->device.get()) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`start` ({}) and `end` ({}) belong to different devices", first->describe(),
                     second->describe());
  }
  AXRT_RETURN_IF_ERROR(require_recorded(api, first, "start"));
  AXRT_RETURN_IF_ERROR(require_recorded(api, second, "end"));
  for (Event* e : {first, second}) {
    bool complete = false;
    AXRT_RETURN_IF_ERROR(e->vtable->query(e, &complete));
    if (!complete) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "{} has not completed yet; wait for it first", e->describe());
    }
  }
  return first->vtable->elapsed_time(first, second, out_nanoseconds);
}

AXRT_API axrt_status_t axrt_event_enqueue_native_wait(axrt_event_t event, void* native_stream) {
  static constexpr ApiCall api("axrt_event_enqueue_native_wait");
  return guard(api.function(), [&]() -> axrt_status_t {
    Event* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(event, "event", &self));
    if (!native_stream) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`native_stream` is NULL, which would name the legacy or the per-thread "
                       "default stream depending on how the caller was compiled; name one "
                       "explicitly (for CUDA, CU_STREAM_LEGACY ((void*)1) or "
                       "CU_STREAM_PER_THREAD ((void*)2))");
    }
    if (!self->vtable->enqueue_native_wait) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "`event` ({}) cannot make a native queue wait: the '{}' driver has no "
                       "native queues",
                       self->describe(), self->device->properties.driver);
    }
    AXRT_RETURN_IF_ERROR(require_recorded(api, self, "event"));
    return self->vtable->enqueue_native_wait(self, native_stream);
  });
}

}  // extern "C"
