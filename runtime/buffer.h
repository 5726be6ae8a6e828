// Buffers: a byte range of one device allocation. The root buffer owns the
// memory; views retain their root.
#ifndef AXRT_RUNTIME_BUFFER_H_
#define AXRT_RUNTIME_BUFFER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "axrt/memory.h"
#include "runtime/device.h"
#include "runtime/object.h"

namespace axrt {

struct Buffer : Object {
  static constexpr ObjectType kType = ObjectType::kBuffer;

  Buffer() : Object(kType) {}

  Ref<Device> device;
  Ref<Buffer> root;     // set for views only
  uint64_t offset = 0;  // of this buffer from the start of its allocation
  uint64_t size = 0;
  std::string label;

  // Meaningful on the root only.
  axrt_memory_type_t memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
  uint64_t alignment = 0;
  MemoryBlock block;
  // Memory the buffer wraps rather than owns (mapped files, imported
  // tensors): called once instead of returning the block to the device.
  void (*release_external)(void* context) = nullptr;
  void* external_context = nullptr;
  std::atomic<bool> deallocated{false};     // handed to a stream deallocation
  std::atomic<bool> memory_returned{false};

  Buffer* allocation() noexcept { return root ? root.get() : this; }
  const Buffer* allocation() const noexcept { return root ? root.get() : this; }
  bool host_visible() const noexcept { return allocation()->block.host_pointer != nullptr; }
  bool is_deallocated() const noexcept {
    return allocation()->deallocated.load(std::memory_order_acquire);
  }
  // Host address of byte `offset` of the allocation (not of this view).
  std::byte* host_address(uint64_t allocation_offset) const noexcept {
    return allocation()->block.host_pointer + allocation_offset;
  }
  uint64_t device_address(uint64_t allocation_offset) const noexcept {
    return allocation()->block.device_address + allocation_offset;
  }

  // "buffer 'weights' (4096 bytes on cpu:0)": how error messages name it.
  std::string describe() const;
};

// The validated contents of an axrt_buffer_options_t.
struct BufferParams {
  axrt_memory_type_t memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
  uint64_t alignment = 0;
  std::string label;
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
// `release(context)` runs once, when the buffer's memory is returned.
Ref<Buffer> buffer_wrap_external(Device* device, std::byte* host_pointer, uint64_t device_address,
                                 uint64_t size, axrt_memory_type_t memory_type, std::string label,
                                 void (*release)(void* context), void* context);

// Returns the memory of root buffer `buffer` to its device, once; later calls
// do nothing. Safe to call from any thread.
void buffer_return_memory(Buffer* buffer) noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_BUFFER_H_
