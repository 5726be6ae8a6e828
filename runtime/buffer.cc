#include "runtime/buffer.h"

#include <bit>
#include <new>

#include "base/fault.h"
#include "runtime/api.h"
#include "base/spent_list.h"

namespace axrt {
namespace {

// The storage of buffer objects that are gone, kept for the next ones: a
// call allocates its arena (and often its outputs) every time, and the
// objects need not come from the heap each time. Never destroyed: buffers
// may be released while the process exits.
SpentList<void, 64>& spent_buffers() {
  static auto* spent = new SpentList<void, 64>();
  return *spent;
}

Buffer* new_buffer() {
  void* storage = spent_buffers().take();
  return storage ? new (storage) Buffer() : new Buffer();
}

void destroy_buffer(Object* object) {
  auto* buffer = static_cast<Buffer*>(object);
  if (!buffer->root) buffer_return_memory(buffer);
  buffer->~Buffer();
  if (!spent_buffers().put(buffer)) ::operator delete(static_cast<void*>(buffer));
}

const char* memory_type_name(axrt_memory_type_t type) {
  switch (type) {
    case AXRT_MEMORY_TYPE_DEVICE_LOCAL: return "device-local";
    case AXRT_MEMORY_TYPE_HOST_PINNED: return "host-pinned";
  }
  return "unknown";
}

}  // namespace

std::string Buffer::describe() const {
  const Buffer* named = label.empty() && !borrowed_label ? allocation() : this;
  const std::string& name = named->borrowed_label ? *named->borrowed_label : named->label;
  const std::string quoted = name.empty() ? std::string() : fmt::format(" '{}'", name);
  if (root) {
    return fmt::format("buffer{} (view of {} bytes at offset {} of a {}-byte allocation on {})",
                       quoted, size, offset, allocation()->size, device->id());
  }
  return fmt::format("buffer{} ({} bytes of {} memory on {})", quoted, size,
                     memory_type_name(memory_type), device->id());
}

axrt_status_t read_buffer_options(const ApiCall& api, const Device* device, uint64_t size,
                                  const axrt_buffer_options_t* options, BufferParams* out) {
  axrt_buffer_options_t opts = AXRT_BUFFER_OPTIONS_INIT;
  Extensions extensions;
  if (options) {
    AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_buffer_options_t",
                                               sizeof(axrt_buffer_options_t)));
    AXRT_READ_FIELD(options, &opts, memory_type);
    AXRT_READ_FIELD(options, &opts, alignment);
    AXRT_RETURN_IF_ERROR(
        api.read_extensions(options->next, "options", kAcceptDebugLabel, &extensions));
  }
  if (size == 0) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`size` is 0; a buffer holds at least 1 byte");
  }
  if (opts.memory_type != AXRT_MEMORY_TYPE_DEVICE_LOCAL &&
      opts.memory_type != AXRT_MEMORY_TYPE_HOST_PINNED) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`options->memory_type` is {}, not a known axrt_memory_type_t",
                     opts.memory_type);
  }
  const axrt_device_properties_t& props = device->properties;
  uint64_t alignment = opts.alignment ? opts.alignment : props.buffer_alignment;
  if (!std::has_single_bit(alignment)) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`options->alignment` {} is not a power of two", alignment);
  }
  if (alignment > props.max_buffer_alignment) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`options->alignment` {} exceeds the largest alignment {} supports ({})",
                     alignment, device->id(), props.max_buffer_alignment);
  }
  if (alignment < props.buffer_alignment) alignment = props.buffer_alignment;
  if (size > props.total_memory) {
    return api.error(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                     "cannot allocate {} bytes{}: {} has {} bytes of memory in all", size,
                     extensions.label.empty() ? "" : fmt::format(" for '{}'", extensions.label),
                     device->id(), props.total_memory);
  }
  out->memory_type = opts.memory_type;
  out->alignment = alignment;
  out->label = std::move(extensions.label);
  return nullptr;
}

axrt_status_t buffer_allocate(const ApiCall& api, Device* device, uint64_t size,
                              BufferParams params, Ref<Buffer>* out_buffer) {
  MemoryBlock block;
  axrt_status_t status =
      fault::should_fail(fault::Site::kDeviceAllocation)
          ? make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "out of memory (injected)")
          : device->vtable->allocate(device, size, params.alignment, params.memory_type, &block);
  if (status) {
    StatusPtr owned(status);
    return api.error(axrt_status_code(status), "cannot allocate {} bytes of {} memory{} on {}: {}",
                     size, memory_type_name(params.memory_type),
                     params.borrowed_label ? fmt::format(" for '{}'", *params.borrowed_label)
                     : params.label.empty() ? ""
                                            : fmt::format(" for '{}'", params.label),
                     device->id(), axrt_status_message(status));
  }
  Buffer* buffer = nullptr;
  try {
    buffer = new_buffer();
  } catch (...) {
    device->vtable->deallocate(device, params.memory_type, block);
    throw;
  }
  buffer->destroy = destroy_buffer;
  buffer->device = Ref<Device>(device);
  buffer->size = size;
  buffer->label = std::move(params.label);
  buffer->borrowed_label = params.borrowed_label;
  buffer->memory_type = params.memory_type;
  buffer->alignment = params.alignment;
  buffer->block = block;
  auto ref = Ref<Buffer>::adopt(buffer);
  object_register(buffer);
  *out_buffer = std::move(ref);
  return nullptr;
}

Ref<Buffer> buffer_create_view(Buffer* buffer, uint64_t offset, uint64_t length,
                               std::string label) {
  auto* view = new_buffer();
  view->destroy = destroy_buffer;
  view->device = buffer->device;
  view->root = Ref<Buffer>(buffer->allocation());
  view->offset = buffer->offset + offset;
  view->size = length;
  view->label = std::move(label);
  view->memory_type = buffer->allocation()->memory_type;
  auto ref = Ref<Buffer>::adopt(view);
  object_register(view);
  return ref;
}

Ref<Buffer> buffer_wrap_external(Device* device, std::byte* host_pointer, uint64_t device_address,
                                 uint64_t size, axrt_memory_type_t memory_type, std::string label,
                                 void (*release)(void* context), void* context) {
  Buffer* buffer = nullptr;
  try {
    buffer = new_buffer();
  } catch (...) {
    if (release) release(context);
    throw;
  }
  buffer->destroy = destroy_buffer;
  buffer->device = Ref<Device>(device);
  buffer->size = size;
  buffer->label = std::move(label);
  buffer->memory_type = memory_type;
  buffer->alignment = uint64_t{1} << std::countr_zero(device_address | (uint64_t{1} << 63));
  buffer->block.host_pointer = host_pointer;
  buffer->block.device_address = device_address;
  buffer->block.size = size;
  buffer->release_external = release;
  buffer->external_context = context;
  auto ref = Ref<Buffer>::adopt(buffer);
  object_register(buffer);
  return ref;
}

void buffer_return_memory(Buffer* buffer) noexcept {
  if (buffer->memory_returned.exchange(true, std::memory_order_acq_rel)) return;
  if (buffer->release_external) {
    buffer->release_external(buffer->external_context);
    return;
  }
  buffer->device->vtable->deallocate(buffer->device.get(), buffer->memory_type, buffer->block);
}

}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_buffer_allocate(axrt_device_t device, uint64_t size,
                                            const axrt_buffer_options_t* options,
                                            axrt_buffer_t* out_buffer) {
  static constexpr ApiCall api("axrt_buffer_allocate");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_buffer, "out_buffer"));
    BufferParams params;
    AXRT_RETURN_IF_ERROR(read_buffer_options(api, self, size, options, &params));
    Ref<Buffer> buffer;
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, self, size, std::move(params), &buffer));
    *out_buffer = to_handle<axrt_buffer_t>(buffer.release());
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_buffer_create_view(axrt_buffer_t buffer, uint64_t offset,
                                               uint64_t length, axrt_buffer_t* out_view) {
  static constexpr ApiCall api("axrt_buffer_create_view");
  return guard(api.function(), [&]() -> axrt_status_t {
    Buffer* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_view, "out_view"));
    if (length == 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`length` is 0; a view holds at least 1 byte");
    }
    if (offset > self->size || length > self->size - offset) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "view [offset {}, length {}) does not fit in {}", offset, length,
                       self->describe());
    }
    *out_view = to_handle<axrt_buffer_t>(buffer_create_view(self, offset, length, "").release());
    return nullptr;
  });
}

AXRT_API void axrt_buffer_retain(axrt_buffer_t buffer) { retain_handle<Buffer>(buffer); }

AXRT_API void axrt_buffer_release(axrt_buffer_t buffer) { release_handle<Buffer>(buffer); }

AXRT_API axrt_status_t axrt_buffer_query_info(axrt_buffer_t buffer, axrt_buffer_info_t* out_info) {
  static constexpr ApiCall api("axrt_buffer_query_info");
  Buffer* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &self));
  AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_buffer_info_t"));
  const Buffer* root = self->allocation();
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  info.size = self->size;
  info.offset = self->offset;
  info.allocation_size = root->size;
  info.alignment = self->offset == 0
                       ? root->alignment
                       : std::min<uint64_t>(root->alignment, uint64_t{1} << std::countr_zero(self->offset));
  info.device_address = self->device_address(self->offset);
  info.memory_type = root->memory_type;
  info.host_visible = self->host_visible();
  info.deallocated = self->is_deallocated();
  write_query_struct(info, out_info);
  return nullptr;
}

AXRT_API axrt_status_t axrt_buffer_get_device(axrt_buffer_t buffer, axrt_device_t* out_device) {
  static constexpr ApiCall api("axrt_buffer_get_device");
  Buffer* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_device, "out_device"));
  object_retain(self->device.get());
  *out_device = to_handle<axrt_device_t>(self->device.get());
  return nullptr;
}

AXRT_API axrt_status_t axrt_buffer_map(axrt_buffer_t buffer, void** out_host_pointer) {
  static constexpr ApiCall api("axrt_buffer_map");
  return guard(api.function(), [&]() -> axrt_status_t {
    Buffer* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_host_pointer, "out_host_pointer"));
    if (self->is_deallocated()) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "{} was deallocated (axrt_stream_deallocate_buffer)", self->describe());
    }
    if (!self->host_visible()) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "{} is not host-visible; copy it through a stream instead",
                       self->describe());
    }
    *out_host_pointer = self->host_address(self->offset);
    return nullptr;
  });
}

}  // extern "C"
