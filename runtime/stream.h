// The core view of a stream. The core validates every argument and resolves
// buffers and offsets before a driver's vtable sees the work; drivers retain
// what they queue.
#ifndef AXRT_RUNTIME_STREAM_H_
#define AXRT_RUNTIME_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "axrt/stream.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/event.h"
#include "runtime/object.h"

namespace axrt {

struct CommandBatch;
struct Stream;

// One side of a copy: a buffer (offsets from the start of its allocation) or
// host memory.
struct CopyEndpoint {
  Buffer* buffer = nullptr;
  std::byte* host = nullptr;
  uint64_t offset = 0;
  uint64_t pitch = 0;
};

// A `width` x `height` byte copy; 1-D copies have height 1.
struct CopyCommand {
  CopyEndpoint src;
  CopyEndpoint dst;
  uint64_t width = 0;
  uint64_t height = 0;
};

struct StreamVtable {
  void (*destroy)(Stream* stream);
  axrt_status_t (*copy)(Stream* stream, const CopyCommand& copy);
  // `offset` is from the start of the buffer's allocation.
  axrt_status_t (*fill)(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                        uint64_t pattern, uint32_t pattern_size);
  axrt_status_t (*launch_host_func)(Stream* stream, axrt_host_func_t func, void* user_data);
  axrt_status_t (*record_event)(Stream* stream, Event* event);
  // `event` may come from another device or driver.
  axrt_status_t (*wait_event)(Stream* stream, Event* event);
  // Returns the memory of root buffer `buffer` to the pool in stream order.
  axrt_status_t (*deallocate_buffer)(Stream* stream, Buffer* buffer);
  // Runs the commands of `batch` in order, as one unit of stream work (the
  // driver takes ownership). A command that fails fails the stream.
  axrt_status_t (*submit_batch)(Stream* stream, std::unique_ptr<CommandBatch> batch);
  axrt_status_t (*synchronize)(Stream* stream);
  axrt_status_t (*query)(Stream* stream, bool* out_idle);
  // (optional) The driver's own queue behind the stream (a CUstream). Null
  // for drivers without native queues: the core answers UNIMPLEMENTED.
  axrt_status_t (*get_native_handle)(Stream* stream, void** out_handle);
};

struct Stream : Object {
  static constexpr ObjectType kType = ObjectType::kStream;

  explicit Stream(const StreamVtable* vt) : Object(kType), vtable(vt) {}

  const StreamVtable* vtable;
  Ref<Device> device;
  std::string label;

  std::string describe() const;
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_STREAM_H_
