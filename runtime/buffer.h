// The core's side of buffers: options, allocation, views and wrapped memory.
// The Buffer struct itself is in runtime/driver.h, since drivers read it.
#ifndef AXRT_RUNTIME_BUFFER_H_
#define AXRT_RUNTIME_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "axrt/memory.h"
#include "runtime/driver.h"

namespace axrt {

// The validated contents of an axrt_buffer_options_t.
struct BufferParams {
  axrt_memory_type_t memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
  uint64_t alignment = 0;
  std::string label;
  const std::string* borrowed_label = nullptr;  // see Buffer::borrowed_label
};

class ApiCall;
// Reads and checks `options` (may be NULL) for an allocation of `size` bytes
// on `device`.
axrt_status_t read_buffer_options(const ApiCall& api, const Device* device, uint64_t size,
                                  const axrt_buffer_options_t* options, BufferParams* out);

// Allocates a root buffer on `device` with validated `params`.
axrt_status_t buffer_allocate(const ApiCall& api, Device* device, uint64_t size,
                              BufferParams params, Ref<Buffer>* out_buffer);

// A registered view of `length` bytes at `offset` of `buffer` (checked by the
// caller), retaining its allocation.
Ref<Buffer> buffer_create_view(Buffer* buffer, uint64_t offset, uint64_t length,
                               std::string label);

// Wraps memory the runtime does not own as a root buffer of `device`:
// `release(context)` runs once, when the buffer's memory is returned, or
// before this throws (out of host memory).
Ref<Buffer> buffer_wrap_external(Device* device, std::byte* host_pointer, uint64_t device_address,
                                 uint64_t size, axrt_memory_type_t memory_type, std::string label,
                                 void (*release)(void* context), void* context);

}  // namespace axrt

#endif  // AXRT_RUNTIME_BUFFER_H_
