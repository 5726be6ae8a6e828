// The null driver: the smallest driver that passes the conformance suite,
// and the skeleton to copy when writing a new one. Every method of the
// three vtables is here, each with what a real driver would do instead.
//
// What it is: one host device, "null:0", whose memory is host memory from a
// caching pool and whose streams run every operation on the calling thread,
// at the moment it is enqueued. That is a valid axrt stream (operations
// still run in order, failures are still sticky); it is only not
// asynchronous. CPU kernels run one workgroup after another; there is no
// device code loader, so GPU code objects are never chosen for it.
//
// It takes part only in instances that name it (`drivers = "null"`), so it
// never shows among a user's devices. abi/cts runs on it with the gaps
// listed in cts_unsupported.inc beside this file.
//
// To start a driver from it: copy this folder, rename the driver in
// CMakeLists.txt and in AXRT_DRIVER_FACTORY below, then replace each method
// body, keeping the contract of runtime/driver.h.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "runtime/caching_pool.h"
#include "runtime/driver.h"

namespace axrt::null_driver {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------

struct NullDevice : Device {
  NullDevice();

  // Device-local and host-pinned memory are the same host memory here, from
  // one pool. A GPU driver allocates device memory (a device address, no
  // host pointer) and page-locked host memory (both), each from its own.
  std::unique_ptr<CachingPool> pool;
};

void* host_allocate(void*, uint64_t size, uint64_t alignment) {
  void* pointer = nullptr;
  return posix_memalign(&pointer, alignment, size) == 0 ? pointer : nullptr;
}

void host_free(void*, void* pointer, uint64_t, uint64_t) { std::free(pointer); }

axrt_status_t device_allocate(Device* device, uint64_t size, uint64_t alignment,
                              axrt_memory_type_t, MemoryBlock* out_block) {
  uint64_t block_size = 0;
  void* pointer = static_cast<NullDevice*>(device)->pool->allocate(size, alignment, &block_size);
  if (!pointer) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                       "{}: the host has no {} bytes aligned to {} to spare", device->id(), size,
                       alignment);
  }
  out_block->host_pointer = static_cast<std::byte*>(pointer);
  out_block->device_address = reinterpret_cast<uintptr_t>(pointer);
  out_block->size = block_size;
  // The pool files blocks by (size, alignment): keep the alignment.
  out_block->driver_data = reinterpret_cast<void*>(static_cast<uintptr_t>(alignment));
  return nullptr;
}

void device_deallocate(Device* device, axrt_memory_type_t, const MemoryBlock& block) {
  static_cast<NullDevice*>(device)->pool->deallocate(
      block.host_pointer, block.size, reinterpret_cast<uintptr_t>(block.driver_data));
}

void device_query_pool_statistics(Device* device, axrt_pool_statistics_t* out_statistics) {
  *out_statistics = static_cast<NullDevice*>(device)->pool->statistics();
  out_statistics->struct_size = sizeof(*out_statistics);
  out_statistics->next = nullptr;
}

axrt_status_t device_trim_pool(Device* device, uint64_t keep_bytes) {
  static_cast<NullDevice*>(device)->pool->trim(keep_bytes);
  return nullptr;
}

axrt_status_t create_stream(Device* device, Stream** out_stream);
axrt_status_t create_event(Device* device, Event** out_event);

// Streams finish their work before the enqueueing call returns, so there is
// never anything to wait for. A driver with queues waits for each of them
// here (and reports only its own failures, such as a lost device).
axrt_status_t device_synchronize(Device*) { return nullptr; }

void device_destroy(Device* device) { delete static_cast<NullDevice*>(device); }

const DeviceVtable kNullDeviceVtable = {
    .destroy = device_destroy,
    .allocate = device_allocate,
    .deallocate = device_deallocate,
    .query_pool_statistics = device_query_pool_statistics,
    .trim_pool = device_trim_pool,
    .create_stream = create_stream,
    .create_event = create_event,
    .synchronize = device_synchronize,
    // No device code: GPU code objects are never chosen for this device.
    .load_code = nullptr,
    // One device, so no peer of its own driver. A driver with several says
    // here how they reach each other (the CPU and CUDA drivers do).
    .query_peer = nullptr,
};

// What a new driver fills from its hardware's queries.
NullDevice::NullDevice() : Device(&kNullDeviceVtable) {
  constexpr uint64_t kMemory = uint64_t{1} << 30;
  axrt_device_properties_t& p = properties;
  p.struct_size = sizeof(p);
  fmt::format_to_n(p.id, sizeof(p.id) - 1, "null:0");
  fmt::format_to_n(p.driver, sizeof(p.driver) - 1, "null");
  fmt::format_to_n(p.name, sizeof(p.name) - 1, "null device (synchronous, host memory)");
  p.type = AXRT_DEVICE_TYPE_CPU;  // host memory, CPU kernels
  p.ordinal = 0;
  p.flags = AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY | AXRT_DEVICE_FLAG_EVENT_TIMING |
            AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION;
  p.compute_units = 1;
  p.total_memory = kMemory;
  p.buffer_alignment = 256;
  p.max_buffer_alignment = uint64_t{1} << 21;
  p.max_workgroup_size[0] = p.max_workgroup_size[1] = p.max_workgroup_size[2] = 1024;
  p.max_workgroup_invocations = 1024;
  p.max_workgroup_count[0] = p.max_workgroup_count[1] = p.max_workgroup_count[2] = 0x7fffffffu;
  p.max_shared_memory_per_workgroup = 64 * 1024;
  // p.numa_node stays -1 (unknown), as the core sets it; a driver that
  // knows the node of its device says it here.
  pool = std::make_unique<CachingPool>(CachingPool::Backend{host_allocate, host_free, nullptr},
                                       kMemory / 4);
  destroy = [](Object* object) { device_destroy(static_cast<Device*>(object)); };
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

// Records complete when they are enqueued, so an event only remembers the
// latest record's failure and time.
struct NullEvent : Event {
  NullEvent();

  std::mutex mutex;
  FailurePtr failure;
  int64_t timestamp_ns = 0;

  void complete(FailurePtr record_failure) {
    const int64_t now = now_ns();
    std::lock_guard<std::mutex> lock(mutex);
    failure = std::move(record_failure);
    timestamp_ns = now;
  }
  FailurePtr current_failure() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }
};

axrt_status_t event_query(Event* event, bool* out_complete) {
  if (FailurePtr failure = static_cast<NullEvent*>(event)->current_failure()) {
    return status_from_failure(failure);
  }
  *out_complete = true;
  return nullptr;
}

// Never times out: the record already completed.
axrt_status_t event_wait(Event* event, uint64_t) {
  return status_from_failure(static_cast<NullEvent*>(event)->current_failure());
}

axrt_status_t event_elapsed_time(Event* start, Event* end, int64_t* out_nanoseconds) {
  auto* first = static_cast<NullEvent*>(start);
  auto* second = static_cast<NullEvent*>(end);
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

void event_destroy(Event* event) { delete static_cast<NullEvent*>(event); }

const EventVtable kNullEventVtable = {
    .destroy = event_destroy,
    .query = event_query,
    .wait = event_wait,
    .elapsed_time = event_elapsed_time,
    // No native queues to make wait.
    .enqueue_native_wait = nullptr,
};

NullEvent::NullEvent() : Event(&kNullEventVtable) {
  destroy = [](Object* object) { event_destroy(static_cast<Event*>(object)); };
}

axrt_status_t create_event(Device*, Event** out_event) {
  *out_event = new NullEvent();
  return nullptr;
}

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

// A stream that runs each operation when it is enqueued. A real driver
// queues the operation (retaining the buffers and events it touches) and
// runs it later on its own thread or hardware queue.
struct NullStream : Stream {
  NullStream();

  // The first failure, sticky: later copies, fills and batches are skipped,
  // host functions are told it, event records carry it.
  std::mutex mutex;
  FailurePtr failure;

  FailurePtr current_failure() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }
  void fail(FailurePtr f) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure) failure = std::move(f);
  }
};

NullStream* null_stream(Stream* stream) { return static_cast<NullStream*>(stream); }

std::byte* endpoint_address(const CopyEndpoint& endpoint) {
  return endpoint.host ? endpoint.host : endpoint.buffer->host_address(endpoint.offset);
}

void run_copy(const CopyCommand& copy) {
  std::byte* src = endpoint_address(copy.src);
  std::byte* dst = endpoint_address(copy.dst);
  if (copy.height == 1) {
    std::memmove(dst, src, copy.width);
    return;
  }
  for (uint64_t row = 0; row < copy.height; ++row) {
    std::memmove(dst + row * copy.dst.pitch, src + row * copy.src.pitch, copy.width);
  }
}

void run_fill(Buffer* buffer, uint64_t offset, uint64_t length, uint64_t pattern,
              uint32_t pattern_size) {
  std::byte* base = buffer->host_address(offset);
  for (uint64_t i = 0; i < length; i += pattern_size) {
    std::memcpy(base + i, &pattern, pattern_size);  // little-endian: the low bytes
  }
}

axrt_status_t stream_copy(Stream* stream, const CopyCommand& copy) {
  if (!null_stream(stream)->current_failure()) run_copy(copy);
  return nullptr;
}

axrt_status_t stream_fill(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                          uint64_t pattern, uint32_t pattern_size) {
  if (!null_stream(stream)->current_failure()) {
    run_fill(buffer, offset, length, pattern, pattern_size);
  }
  return nullptr;
}

axrt_status_t stream_launch_host_func(Stream* stream, axrt_host_func_t func, void* user_data) {
  NullStream* self = null_stream(stream);
  const FailurePtr failed = self->current_failure();
  StatusPtr told(status_from_failure(failed));
  // A status from a function that was told of an earlier failure changes
  // nothing: the stream keeps its first failure.
  StatusPtr result(func(user_data, told.get()));
  if (result && !failed) self->fail(make_failure(result.release()));
  return nullptr;
}

axrt_status_t stream_record_event(Stream* stream, Event* event) {
  // The core checked that `event` belongs to this stream's device.
  static_cast<NullEvent*>(event)->complete(null_stream(stream)->current_failure());
  return nullptr;
}

axrt_status_t stream_wait_event(Stream* stream, Event* event) {
  NullStream* self = null_stream(stream);
  if (self->current_failure()) return nullptr;
  // An event of this driver completed when it was recorded; one of another
  // driver is waited for here, on the enqueueing thread.
  StatusPtr waited(event->vtable == &kNullEventVtable
                       ? event_wait(event, AXRT_TIMEOUT_INFINITE)
                       : event->vtable->wait(event, AXRT_TIMEOUT_INFINITE));
  if (waited) self->fail(make_failure(waited.release()));
  return nullptr;
}

axrt_status_t stream_deallocate_buffer(Stream*, Buffer* buffer) {
  // Everything enqueued before has run, so the memory can go now.
  buffer_return_memory(buffer);
  return nullptr;
}

// Runs every workgroup of one dispatch, one after another; the first that
// fails stops the dispatch and fails the stream. A real driver spreads the
// workgroups over its threads or launches device code.
FailurePtr run_dispatch(Stream* stream, const CommandBatch& batch, const BatchCommand& command,
                        size_t index) {
  const HostKernel& kernel = *command.host_kernel;
  axrt_kernel_dispatch_t dispatch = {};
  dispatch.struct_size = sizeof(dispatch);
  dispatch.workgroup_count = command.workgroup_count;
  dispatch.workgroup_size = kernel.workgroup_size;
  dispatch.dynamic_shared_memory_size = kernel.dynamic_shared_memory;
  dispatch.worker_count = 1;
  dispatch.library_state = kernel.library_state;
  // Kernels may expect their shared memory aligned as the CPU driver's is.
  struct AlignedFree {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], AlignedFree> shared;
  if (kernel.dynamic_shared_memory) {
    shared.reset(static_cast<std::byte*>(
        ::operator new[](kernel.dynamic_shared_memory, std::align_val_t{64})));
  }
  char message[256];
  axrt_kernel_workgroup_t workgroup = {};
  workgroup.struct_size = sizeof(workgroup);
  workgroup.worker_id = 0;
  workgroup.dynamic_shared_memory = shared.get();
  workgroup.error_message = message;
  workgroup.error_message_capacity = sizeof(message);
  const axrt_kernel_dim3_t count = command.workgroup_count;
  for (uint32_t z = 0; z < count.z; ++z) {
    for (uint32_t y = 0; y < count.y; ++y) {
      for (uint32_t x = 0; x < count.x; ++x) {
        workgroup.workgroup_id = {x, y, z};
        message[0] = '\0';
        const axrt_kernel_result_t result =
            kernel.function(batch.args_at(command.args_offset), &dispatch, &workgroup);
        if (result == AXRT_KERNEL_OK) continue;
        message[sizeof(message) - 1] = '\0';
        const auto code = static_cast<axrt_status_code_t>(
            result > 0 && result <= AXRT_STATUS_CODE_DEVICE_LOST ? result
                                                                 : AXRT_STATUS_CODE_INTERNAL);
        return make_failure(make_status(
            code, "{} failed in command {} of {} on {} (workgroup ({}, {}, {}), code {}): {}",
            kernel.name, index, batch.label ? *batch.label : "a command batch",
            stream->describe(), x, y, z, result,
            message[0] ? message : "the kernel gave no reason"));
      }
    }
  }
  return nullptr;
}

axrt_status_t stream_submit_batch(Stream* stream, CommandBatchPtr batch) {
  NullStream* self = null_stream(stream);
  // The arena goes back once the batch ran (or was skipped): the core keeps
  // no other use of it, and everything before it in the stream is done.
  struct ArenaReturn {
    Buffer* arena;
    ~ArenaReturn() {
      if (arena && arena->claim_memory_return()) {
        device_deallocate(arena->device.get(), arena->memory_type, arena->block);
      }
    }
  } arena_return{batch->arena};
  if (self->current_failure()) return nullptr;
  for (size_t i = 0; i < batch->commands.size(); ++i) {
    const BatchCommand& command = batch->commands[i];
    switch (command.kind) {
      case BatchCommand::Kind::kDispatch:
        if (FailurePtr failure = run_dispatch(stream, *batch, command, batch->command_base + i)) {
          self->fail(std::move(failure));
          return nullptr;
        }
        break;
      case BatchCommand::Kind::kCopy:
        run_copy(command.copy);
        break;
      case BatchCommand::Kind::kFill:
        run_fill(command.fill_buffer, command.fill_offset, command.fill_length,
                 command.fill_pattern, command.fill_pattern_size);
        break;
    }
  }
  return nullptr;
}

axrt_status_t stream_synchronize(Stream* stream) {
  return status_from_failure(null_stream(stream)->current_failure());
}

axrt_status_t stream_query(Stream* stream, bool* out_idle) {
  if (FailurePtr failure = null_stream(stream)->current_failure()) {
    return status_from_failure(failure);
  }
  *out_idle = true;
  return nullptr;
}

void stream_destroy(Stream* stream) { delete null_stream(stream); }

const StreamVtable kNullStreamVtable = {
    .destroy = stream_destroy,
    .copy = stream_copy,
    .fill = stream_fill,
    .launch_host_func = stream_launch_host_func,
    .record_event = stream_record_event,
    .wait_event = stream_wait_event,
    .deallocate_buffer = stream_deallocate_buffer,
    .submit_batch = stream_submit_batch,
    .synchronize = stream_synchronize,
    .query = stream_query,
    // No native queue behind a stream.
    .get_native_handle = nullptr,
    // No copies between devices of this driver (it has one device): the
    // core reaches other devices' host-visible memory through its host
    // pointer and answers UNIMPLEMENTED for the rest. A driver with
    // several devices copies between them here.
    .copy_peer = nullptr,
};

NullStream::NullStream() : Stream(&kNullStreamVtable) {
  destroy = [](Object* object) { stream_destroy(static_cast<Stream*>(object)); };
}

axrt_status_t create_stream(Device*, Stream** out_stream) {
  *out_stream = new NullStream();
  return nullptr;
}

// ---------------------------------------------------------------------------
// Factory
// ---------------------------------------------------------------------------

// A real driver looks for its hardware here and, finding none, returns OK
// with no devices and a sentence in `availability` saying why.
axrt_status_t enumerate_devices(Instance*, DriverDevices* out) {
  auto device = std::make_unique<NullDevice>();
  out->devices.push_back(device.get());
  device.release();
  return nullptr;
}

}  // namespace
}  // namespace axrt::null_driver

AXRT_DECLARE_DRIVER_FACTORY(null);
const axrt::DriverFactory AXRT_DRIVER_FACTORY(null) = {
    .name = "null",
    .enumerate_devices = axrt::null_driver::enumerate_devices,
    .only_when_named = true,
};
