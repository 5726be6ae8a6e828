#include "runtime/driver.h"

#include <cstring>

#include "runtime/api.h"
#include "runtime/buffer.h"
#include "runtime/instance.h"
#include "trace/trace.h"

namespace axrt {

Stream::~Stream() { trace::retire_track(trace_track); }

std::string Stream::describe() const {
  return label.empty() ? fmt::format("stream on {}", device->id())
                       : fmt::format("stream '{}' on {}", label, device->id());
}

}  // namespace axrt

using namespace axrt;

namespace {

// `offset + length <= limit` without overflow.
bool range_fits(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

// That `buffer` (the parameter `name`) belongs to the stream's instance and
// was not deallocated.
axrt_status_t check_usable(const ApiCall& api, const Stream* stream, const Buffer* buffer,
                           const char* name) {
  if (buffer->device->instance != stream->device->instance) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}` ({}) belongs to another instance than {}", name, buffer->describe(),
                     stream->describe());
  }
  if (buffer->is_deallocated()) {
    return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                     "`{}` ({}) was deallocated (axrt_stream_deallocate_buffer) and may not be "
                     "used any more",
                     name, buffer->describe());
  }
  return nullptr;
}

// Resolves the buffer parameter `name` for use by `stream`: a live buffer the
// stream's device can reach, not deallocated.
axrt_status_t resolve_stream_buffer(const ApiCall& api, const Stream* stream, axrt_buffer_t handle,
                                    const char* name, Buffer** out) {
  Buffer* buffer = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(handle, name, &buffer));
  if (buffer->device.get() != stream->device.get() &&
      buffer->allocation()->memory_type != AXRT_MEMORY_TYPE_HOST_PINNED) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}` is {}, which {} cannot reach (only its own buffers and host-pinned "
                     "buffers)",
                     name, buffer->describe(), stream->describe());
  }
  AXRT_RETURN_IF_ERROR(check_usable(api, stream, buffer, name));
  *out = buffer;
  return nullptr;
}

// Resolves the buffer parameter `name` of a copy between buffers: a live
// buffer of any device of the stream's instance, not deallocated.
axrt_status_t resolve_copy_buffer(const ApiCall& api, const Stream* stream, axrt_buffer_t handle,
                                  const char* name, Buffer** out) {
  Buffer* buffer = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(handle, name, &buffer));
  AXRT_RETURN_IF_ERROR(check_usable(api, stream, buffer, name));
  *out = buffer;
  return nullptr;
}

axrt_status_t check_range(const ApiCall& api, const Stream* stream, const Buffer* buffer,
                          const char* name, uint64_t offset, uint64_t length) {
  if (range_fits(offset, length, buffer->size)) return nullptr;
  return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                   "range [offset {}, length {}) of `{}` on {} does not fit in {}", offset, length,
                   name, stream->describe(), buffer->describe());
}

// Validates one side of a 2-D copy and resolves it into `out`. A buffer may
// belong to any device of the stream's instance when `any_device` (a copy
// between buffers), else to the stream's device or be host-pinned.
axrt_status_t resolve_endpoint(const ApiCall& api, const Stream* stream,
                               const axrt_copy_2d_endpoint_t& in, const char* name, uint64_t width,
                               uint64_t height, bool any_device, CopyEndpoint* out) {
  if ((in.buffer == nullptr) == (in.host_pointer == nullptr)) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`copy->{}` must set exactly one of `buffer` and `host_pointer`", name);
  }
  if (height > 1 && in.pitch < width) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`copy->{}.pitch` {} is smaller than the row width {}", name, in.pitch, width);
  }
  // Bytes spanned from the first row's start to the last row's end.
  uint64_t extent = 0;
  if (width && height) {
    if (height - 1 > 0 && in.pitch > (UINT64_MAX - width) / (height - 1)) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "`copy->{}`: {} rows of pitch {} overflow 64 bits", name, height, in.pitch);
    }
    extent = (height - 1) * in.pitch + width;
  }
  out->pitch = in.pitch;
  if (in.host_pointer) {
    if (reinterpret_cast<uintptr_t>(in.host_pointer) > UINT64_MAX - in.offset - extent) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "`copy->{}`: host range wraps around the address space", name);
    }
    out->host = static_cast<std::byte*>(in.host_pointer) + in.offset;
    return nullptr;
  }
  Buffer* buffer = nullptr;
  std::string param = fmt::format("copy->{}.buffer", name);
  AXRT_RETURN_IF_ERROR(any_device
                           ? resolve_copy_buffer(api, stream, in.buffer, param.c_str(), &buffer)
                           : resolve_stream_buffer(api, stream, in.buffer, param.c_str(), &buffer));
  if (!range_fits(in.offset, extent, buffer->size)) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "`copy->{}`: {} rows of {} bytes at pitch {} from offset {} span {} bytes, "
                     "beyond {}",
                     name, height, width, in.pitch, in.offset, extent, buffer->describe());
  }
  out->buffer = buffer;
  out->offset = buffer->offset + in.offset;
  return nullptr;
}

// The stream's timeline in traces: "stream 3 'prefill'" under "cpu:0".
uint32_t register_stream_track(const Stream& stream) {
  static std::atomic<uint64_t> streams{0};
  const uint64_t number = ++streams;
  return trace::register_track(
      stream.device->id(), stream.label.empty() ? fmt::format("stream {}", number)
                                                : fmt::format("stream {} '{}'", number, stream.label));
}

// Counts work the driver queued (status NULL) in the device's counters
// (axrt_device_query_stream_statistics); passes `status` on.
axrt_status_t counted(axrt_status_t status, std::atomic<uint64_t>& operations,
                      std::atomic<uint64_t>* bytes = nullptr, uint64_t length = 0) {
  if (!status) {
    operations.fetch_add(1, std::memory_order_relaxed);
    if (bytes) bytes->fetch_add(length, std::memory_order_relaxed);
  }
  return status;
}

bool ranges_overlap(uint64_t a, uint64_t a_length, uint64_t b, uint64_t b_length) {
  return a < b + b_length && b < a + a_length;
}

// --- Copies between devices (docs/multi-device.md, "Peer copies") ----------

bool same_driver(const Device* a, const Device* b) {
  return std::strcmp(a->properties.driver, b->properties.driver) == 0;
}

// How a stream reaches one side of a copy.
enum class Reach : uint8_t {
  kDirect,   // as copy() takes it: host memory, a buffer of the stream's
             // device, a host-pinned buffer of any device
  kPeer,     // device-local memory of another device of the stream's driver,
             // which has copy_peer()
  kHost,     // host-visible device-local memory of another device that
             // copy_peer() does not take: handed over as host memory
  kForeign,  // device-local memory no host pointer reaches, of a device of
             // another driver
  kNone,     // device-local memory no host pointer reaches, of another device
             // of the stream's driver, which has no copy_peer()
};

Reach reach(const Stream* stream, const CopyEndpoint& side) {
  const Buffer* buffer = side.buffer;
  if (side.host) return buffer ? Reach::kHost : Reach::kDirect;
  if (buffer->device.get() == stream->device.get() ||
      buffer->allocation()->memory_type == AXRT_MEMORY_TYPE_HOST_PINNED) {
    return Reach::kDirect;
  }
  const bool same = same_driver(buffer->device.get(), stream->device.get());
  if (same && stream->vtable->copy_peer) return Reach::kPeer;
  if (buffer->host_visible()) return Reach::kHost;
  return same ? Reach::kNone : Reach::kForeign;
}

// A copy between host memory on both sides (other devices' host-visible
// memory), which no driver's copy() takes: a host function of the stream
// copies it, holding the buffers until then.
struct HostCopy {
  CopyCommand copy;
  Ref<Buffer> buffers[2];
};

axrt_status_t run_host_copy(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<HostCopy> work(static_cast<HostCopy*>(user_data));
  if (stream_status) return nullptr;  // a failed stream runs no more copies
  const CopyCommand& c = work->copy;
  for (uint64_t row = 0; row < c.height; ++row) {
    std::memcpy(c.dst.host + row * c.dst.pitch, c.src.host + row * c.src.pitch, c.width);
  }
  return nullptr;
}

axrt_status_t queue_host_copy(Stream* stream, const CopyCommand& copy) {
  auto work = std::make_unique<HostCopy>();
  work->copy = copy;
  work->buffers[0] = Ref<Buffer>(copy.src.buffer);
  work->buffers[1] = Ref<Buffer>(copy.dst.buffer);
  // A launch that fails has not run the function, which frees the work.
  AXRT_RETURN_IF_ERROR(stream->vtable->launch_host_func(stream, run_host_copy, work.get()));
  work.release();
  return nullptr;
}

// An event or stream of `device` for the core's own use (a peer copy).
axrt_status_t make_event(Device* device, Ref<Event>* out) {
  Event* raw = nullptr;
  AXRT_RETURN_IF_ERROR(device->vtable->create_event(device, &raw));
  *out = Ref<Event>::adopt(raw);
  raw->device = Ref<Device>(device);
  raw->flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  raw->label = "peer copy";
  return nullptr;
}

axrt_status_t make_stream(Device* device, const Stream* for_stream, Ref<Stream>* out) {
  Stream* raw = nullptr;
  AXRT_RETURN_IF_ERROR(device->vtable->create_stream(device, &raw));
  *out = Ref<Stream>::adopt(raw);
  raw->device = Ref<Device>(device);
  raw->label = fmt::format("peer copies for {}", for_stream->describe());
  return nullptr;
}

axrt_status_t record(Stream* stream, Event* event) {
  AXRT_RETURN_IF_ERROR(stream->vtable->record_event(stream, event));
  event->ever_recorded.store(true, std::memory_order_release);
  return nullptr;
}

axrt_status_t queue_copy(const ApiCall& api, Stream* stream, CopyCommand copy);

// A copy with a side in `other`'s device memory, which `stream`'s driver
// cannot reach: it runs on a new stream of `other`, after the work queued
// on `stream` so far and before what is queued there later (an event each
// way; a failure on either side travels with the events).
axrt_status_t queue_on_device(const ApiCall& api, Stream* stream, Device* other,
                              const CopyCommand& copy) {
  Ref<Stream> helper;
  AXRT_RETURN_IF_ERROR(api.prefix(make_stream(other, stream, &helper)));
  for (const CopyEndpoint* side : {&copy.src, &copy.dst}) {
    const Reach r = reach(helper.get(), *side);
    if (r == Reach::kForeign || r == Reach::kNone) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{} cannot copy between {} and {}: both are device memory that no host "
                       "pointer reaches, of devices whose drivers cannot copy between them; "
                       "copy through a host-pinned buffer in two steps",
                       stream->describe(), copy.src.buffer->describe(),
                       copy.dst.buffer->describe());
    }
  }
  Ref<Event> before;
  Ref<Event> after;
  AXRT_RETURN_IF_ERROR(api.prefix(make_event(stream->device.get(), &before)));
  AXRT_RETURN_IF_ERROR(api.prefix(make_event(other, &after)));
  AXRT_RETURN_IF_ERROR(api.prefix(record(stream, before.get())));
  axrt_status_t status = api.prefix(helper->vtable->wait_event(helper.get(), before.get()));
  if (!status) status = queue_copy(api, helper.get(), copy);
  if (!status) status = api.prefix(record(helper.get(), after.get()));
  if (status) {
    // A driver may refuse work for a stream it knows has failed (the CUDA
    // driver does), and the helper fails as soon as it finds `stream` had
    // failed before the copy. The copy is then skipped, as all later work
    // of `stream` is, and queueing it succeeds, as queueing onto a failed
    // stream does; the helper's error says nothing more.
    bool idle = false;
    StatusPtr failed(stream->vtable->query(stream, &idle));
    if (!failed) return status;
    axrt_status_free(status);
    return nullptr;
  }
  return api.prefix(stream->vtable->wait_event(stream, after.get()));
}

// Queues `copy` (validated: buffers live and of the stream's instance,
// ranges inside them) on `stream`, by the rules of docs/multi-device.md.
axrt_status_t queue_copy(const ApiCall& api, Stream* stream, CopyCommand copy) {
  const Reach src = reach(stream, copy.src);
  const Reach dst = reach(stream, copy.dst);
  for (const auto& [r, side] : {std::pair{src, &copy.src}, std::pair{dst, &copy.dst}}) {
    if (r == Reach::kNone) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{} cannot reach {}: the '{}' driver does not copy between its devices, "
                       "and no host pointer reaches that memory",
                       stream->describe(), side->buffer->describe(),
                       stream->device->properties.driver);
    }
  }
  if (src == Reach::kForeign) {
    return queue_on_device(api, stream, copy.src.buffer->device.get(), copy);
  }
  if (dst == Reach::kForeign) {
    return queue_on_device(api, stream, copy.dst.buffer->device.get(), copy);
  }
  for (CopyEndpoint* side : {&copy.src, &copy.dst}) {
    if (side->buffer && !side->host && reach(stream, *side) == Reach::kHost) {
      side->host = side->buffer->host_address(side->offset);
    }
  }
  // Driver errors name the call and the device already, as in every copy.
  if (copy.src.host && copy.dst.host) return queue_host_copy(stream, copy);
  if (src == Reach::kPeer || dst == Reach::kPeer) return stream->vtable->copy_peer(stream, copy);
  return stream->vtable->copy(stream, copy);
}

}  // namespace

extern "C" {

AXRT_API axrt_status_t axrt_stream_create(axrt_device_t device, const axrt_stream_options_t* options,
                                          axrt_stream_t* out_stream) {
  static constexpr ApiCall api("axrt_stream_create");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_stream, "out_stream"));
    Extensions extensions;
    if (options) {
      AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_stream_options_t",
                                                 sizeof(axrt_stream_options_t)));
      AXRT_RETURN_IF_ERROR(
          api.read_extensions(options->next, "options", kAcceptDebugLabel, &extensions));
    }
    Stream* stream = nullptr;
    AXRT_RETURN_IF_ERROR(self->vtable->create_stream(self, &stream));
    auto ref = Ref<Stream>::adopt(stream);
    stream->device = Ref<Device>(self);
    stream->label = std::move(extensions.label);
    stream->trace_track = register_stream_track(*stream);
    self->counters.streams_created.fetch_add(1, std::memory_order_relaxed);
    object_register(stream);
    *out_stream = to_handle<axrt_stream_t>(ref.release());
    return nullptr;
  });
}

AXRT_API void axrt_stream_retain(axrt_stream_t stream) { retain_handle<Stream>(stream); }

AXRT_API void axrt_stream_release(axrt_stream_t stream) { release_handle<Stream>(stream); }

AXRT_API axrt_status_t axrt_stream_get_device(axrt_stream_t stream, axrt_device_t* out_device) {
  static constexpr ApiCall api("axrt_stream_get_device");
  Stream* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_device, "out_device"));
  object_retain(self->device.get());
  *out_device = to_handle<axrt_device_t>(self->device.get());
  return nullptr;
}

AXRT_API axrt_status_t axrt_stream_copy_buffer(axrt_stream_t stream, axrt_buffer_t src,
                                               uint64_t src_offset, axrt_buffer_t dst,
                                               uint64_t dst_offset, uint64_t length) {
  static constexpr ApiCall api("axrt_stream_copy_buffer");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Buffer* from = nullptr;
    Buffer* to = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(resolve_copy_buffer(api, self, src, "src", &from));
    AXRT_RETURN_IF_ERROR(resolve_copy_buffer(api, self, dst, "dst", &to));
    AXRT_RETURN_IF_ERROR(check_range(api, self, from, "src", src_offset, length));
    AXRT_RETURN_IF_ERROR(check_range(api, self, to, "dst", dst_offset, length));
    CopyCommand copy;
    copy.src.buffer = from;
    copy.src.offset = from->offset + src_offset;
    copy.dst.buffer = to;
    copy.dst.offset = to->offset + dst_offset;
    if (from->allocation() == to->allocation() &&
        ranges_overlap(copy.src.offset, length, copy.dst.offset, length)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "source and destination ranges overlap within {}", to->describe());
    }
    if (length == 0) return nullptr;
    copy.width = length;
    copy.height = 1;
    return counted(queue_copy(api, self, copy), self->device->counters.copies,
                   &self->device->counters.copy_bytes, length);
  });
}

AXRT_API axrt_status_t axrt_stream_copy_from_host(axrt_stream_t stream, const void* src,
                                                  axrt_buffer_t dst, uint64_t dst_offset,
                                                  uint64_t length) {
  static constexpr ApiCall api("axrt_stream_copy_from_host");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Buffer* to = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(src, "src"));
    AXRT_RETURN_IF_ERROR(resolve_stream_buffer(api, self, dst, "dst", &to));
    AXRT_RETURN_IF_ERROR(check_range(api, self, to, "dst", dst_offset, length));
    if (length == 0) return nullptr;
    CopyCommand copy;
    copy.src.host = static_cast<std::byte*>(const_cast<void*>(src));
    copy.dst.buffer = to;
    copy.dst.offset = to->offset + dst_offset;
    copy.width = length;
    copy.height = 1;
    return counted(self->vtable->copy(self, copy), self->device->counters.copies, &self->device->counters.copy_bytes, length);
  });
}

AXRT_API axrt_status_t axrt_stream_copy_to_host(axrt_stream_t stream, axrt_buffer_t src,
                                                uint64_t src_offset, void* dst, uint64_t length) {
  static constexpr ApiCall api("axrt_stream_copy_to_host");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Buffer* from = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(resolve_stream_buffer(api, self, src, "src", &from));
    AXRT_RETURN_IF_ERROR(api.require_pointer(dst, "dst"));
    AXRT_RETURN_IF_ERROR(check_range(api, self, from, "src", src_offset, length));
    if (length == 0) return nullptr;
    CopyCommand copy;
    copy.src.buffer = from;
    copy.src.offset = from->offset + src_offset;
    copy.dst.host = static_cast<std::byte*>(dst);
    copy.width = length;
    copy.height = 1;
    return counted(self->vtable->copy(self, copy), self->device->counters.copies, &self->device->counters.copy_bytes, length);
  });
}

AXRT_API axrt_status_t axrt_stream_copy_2d(axrt_stream_t stream, const axrt_copy_2d_t* copy) {
  static constexpr ApiCall api("axrt_stream_copy_2d");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(copy, "copy"));
    AXRT_RETURN_IF_ERROR(
        api.check_struct_size(copy, "copy", "axrt_copy_2d_t", sizeof(axrt_copy_2d_t)));
    axrt_copy_2d_t desc = AXRT_COPY_2D_INIT;
    AXRT_READ_FIELD(copy, &desc, src);
    AXRT_READ_FIELD(copy, &desc, dst);
    AXRT_READ_FIELD(copy, &desc, width);
    AXRT_READ_FIELD(copy, &desc, height);
    Extensions extensions;
    AXRT_RETURN_IF_ERROR(api.read_extensions(copy->next, "copy", 0, &extensions));
    CopyCommand command;
    command.width = desc.width;
    command.height = desc.height;
    // A copy between buffers may name any devices' buffers, as
    // axrt_stream_copy_buffer does.
    const bool between_buffers = desc.src.buffer && !desc.src.host_pointer && desc.dst.buffer &&
                                 !desc.dst.host_pointer;
    AXRT_RETURN_IF_ERROR(resolve_endpoint(api, self, desc.src, "src", desc.width, desc.height,
                                          between_buffers, &command.src));
    AXRT_RETURN_IF_ERROR(resolve_endpoint(api, self, desc.dst, "dst", desc.width, desc.height,
                                          between_buffers, &command.dst));
    if (!command.src.buffer && !command.dst.buffer) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`copy` names host memory on both sides; at least one side must be a "
                       "buffer");
    }
    if (command.src.buffer && command.dst.buffer &&
        command.src.buffer->allocation() == command.dst.buffer->allocation() && desc.width &&
        desc.height) {
      const uint64_t src_extent = (desc.height - 1) * desc.src.pitch + desc.width;
      const uint64_t dst_extent = (desc.height - 1) * desc.dst.pitch + desc.width;
      if (ranges_overlap(command.src.offset, src_extent, command.dst.offset, dst_extent)) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "source and destination rectangles overlap within {}",
                         command.dst.buffer->describe());
      }
    }
    if (desc.width == 0 || desc.height == 0) return nullptr;
    return counted(queue_copy(api, self, command), self->device->counters.copies,
                   &self->device->counters.copy_bytes, desc.width * desc.height);
  });
}

AXRT_API axrt_status_t axrt_stream_fill_buffer(axrt_stream_t stream, axrt_buffer_t buffer,
                                               uint64_t offset, uint64_t length,
                                               const void* pattern, size_t pattern_size) {
  static constexpr ApiCall api("axrt_stream_fill_buffer");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Buffer* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(resolve_stream_buffer(api, self, buffer, "buffer", &target));
    AXRT_RETURN_IF_ERROR(api.require_pointer(pattern, "pattern"));
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`pattern_size` is {}; it must be 1, 2, 4 or 8", pattern_size);
    }
    if (offset % pattern_size || length % pattern_size) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`offset` {} and `length` {} must be multiples of `pattern_size` {}",
                       offset, length, pattern_size);
    }
    AXRT_RETURN_IF_ERROR(check_range(api, self, target, "buffer", offset, length));
    if (length == 0) return nullptr;
    uint64_t value = 0;
    std::memcpy(&value, pattern, pattern_size);
    return counted(self->vtable->fill(self, target, target->offset + offset, length, value,
                                      static_cast<uint32_t>(pattern_size)),
                   self->device->counters.fills, &self->device->counters.fill_bytes, length);
  });
}

AXRT_API axrt_status_t axrt_stream_launch_host_func(axrt_stream_t stream, axrt_host_func_t func,
                                                    void* user_data) {
  static constexpr ApiCall api("axrt_stream_launch_host_func");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    if (!func) return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`func` is NULL");
    return counted(self->vtable->launch_host_func(self, func, user_data), self->device->counters.host_functions);
  });
}

AXRT_API axrt_status_t axrt_stream_record_event(axrt_stream_t stream, axrt_event_t event) {
  static constexpr ApiCall api("axrt_stream_record_event");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Event* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.resolve(event, "event", &target));
    if (target->device.get() != self->device.get()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`event` ({}) belongs to another device than {}", target->describe(),
                       self->describe());
    }
    AXRT_RETURN_IF_ERROR(
        counted(self->vtable->record_event(self, target), self->device->counters.event_records));
    target->ever_recorded.store(true, std::memory_order_release);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_stream_wait_event(axrt_stream_t stream, axrt_event_t event) {
  static constexpr ApiCall api("axrt_stream_wait_event");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Event* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.resolve(event, "event", &target));
    if (target->device->instance != self->device->instance) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`event` ({}) belongs to another instance than {}", target->describe(),
                       self->describe());
    }
    if (!target->ever_recorded.load(std::memory_order_acquire)) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "`event` ({}) was never recorded, so {} would wait forever",
                       target->describe(), self->describe());
    }
    return counted(self->vtable->wait_event(self, target), self->device->counters.event_waits);
  });
}

AXRT_API axrt_status_t axrt_stream_allocate_buffer(axrt_stream_t stream, uint64_t size,
                                                   const axrt_buffer_options_t* options,
                                                   axrt_buffer_t* out_buffer) {
  static constexpr ApiCall api("axrt_stream_allocate_buffer");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_buffer, "out_buffer"));
    Device* device = self->device.get();
    BufferParams params;
    AXRT_RETURN_IF_ERROR(read_buffer_options(api, device, size, options, &params));
    // The pool hands out memory no queued work still uses, so the buffer is
    // ready for this stream at once.
    Ref<Buffer> buffer;
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, size, std::move(params), &buffer));
    *out_buffer = to_handle<axrt_buffer_t>(buffer.release());
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_stream_deallocate_buffer(axrt_stream_t stream, axrt_buffer_t buffer) {
  static constexpr ApiCall api("axrt_stream_deallocate_buffer");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    Buffer* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &target));
    if (target->root) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`buffer` is a view ({}); deallocate the buffer it views", target->describe());
    }
    if (target->device.get() != self->device.get()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`buffer` ({}) belongs to another device than {}", target->describe(),
                       self->describe());
    }
    if (target->deallocated.exchange(true, std::memory_order_acq_rel)) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION, "`buffer` ({}) was already deallocated",
                       target->describe());
    }
    axrt_status_t status =
        counted(self->vtable->deallocate_buffer(self, target), self->device->counters.deallocations);
    if (status) target->deallocated.store(false, std::memory_order_release);
    return status;
  });
}

AXRT_API axrt_status_t axrt_stream_synchronize(axrt_stream_t stream) {
  static constexpr ApiCall api("axrt_stream_synchronize");
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    return self->vtable->synchronize(self);
  });
}

AXRT_API axrt_status_t axrt_stream_query(axrt_stream_t stream, bool* out_idle) {
  static constexpr ApiCall api("axrt_stream_query");
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_idle, "out_idle"));
    return self->vtable->query(self, out_idle);
  });
}

AXRT_API axrt_status_t axrt_stream_get_native_handle(axrt_stream_t stream, void** out_handle) {
  static constexpr ApiCall api("axrt_stream_get_native_handle");
  return guard(api.function(), [&]() -> axrt_status_t {
    Stream* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_handle, "out_handle"));
    if (!self->vtable->get_native_handle) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{} has no native queue to hand out: the '{}' driver has no native "
                       "queues",
                       self->describe(), self->device->properties.driver);
    }
    return self->vtable->get_native_handle(self, out_handle);
  });
}

}  // extern "C"
