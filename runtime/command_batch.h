// A command batch: the commands of one function call, resolved to buffers,
// addresses and argument blocks, that a driver runs in order as one unit of
// stream work. Drivers see no format types: the core builds batches from
// executables.
#ifndef AXRT_RUNTIME_COMMAND_BATCH_H_
#define AXRT_RUNTIME_COMMAND_BATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "axrt/kernel_abi.h"
#include "runtime/buffer.h"
#include "runtime/object.h"
#include "runtime/stream.h"

namespace axrt {

// A CPU kernel ready to dispatch: a library's function and its state on the
// device.
struct HostKernel {
  axrt_cpu_kernel_fn_t function = nullptr;
  void* library_state = nullptr;
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  uint32_t dynamic_shared_memory = 0;
  std::string name;  // "kernel 'fc1' (axrt.cpu:axrt_matmul_f32)"
};

struct BatchCommand {
  enum class Kind : uint8_t { kDispatch, kCopy, kFill };
  Kind kind = Kind::kDispatch;
  // kDispatch: a CPU kernel (host devices) or device code (the others)
  const HostKernel* host_kernel = nullptr;
  const DeviceKernel* device_kernel = nullptr;
  uint32_t args_offset = 0;  // in bytes into CommandBatch::args
  uint32_t args_size = 0;
  axrt_kernel_dim3_t workgroup_count{1, 1, 1};
  // kCopy
  CopyCommand copy;
  // kFill
  Buffer* fill_buffer = nullptr;
  uint64_t fill_offset = 0;  // from the start of the allocation
  uint64_t fill_length = 0;
  uint64_t fill_pattern = 0;
  uint32_t fill_pattern_size = 0;
};

struct CommandBatch {
  // What the batch is, for failure messages: "function 'main' of
  // executable 'mlp.axe'".
  const std::string* label = nullptr;
  std::vector<BatchCommand> commands;
  // The argument blocks, each at an 8-byte aligned offset.
  std::vector<uint64_t> args;
  // Every buffer the commands touch, and the object that owns the kernels.
  std::vector<Ref<Buffer>> buffers;
  Ref<Object> owner;
  // When set, the driver stores how long the batch ran (ns), and may run
  // the batch on the calling thread when the last run was short.
  std::atomic<uint64_t>* last_duration_ns = nullptr;

  const void* args_at(uint32_t offset) const noexcept {
    return reinterpret_cast<const std::byte*>(args.data()) + offset;
  }
};

using CommandBatchPtr = std::unique_ptr<CommandBatch>;

}  // namespace axrt

#endif  // AXRT_RUNTIME_COMMAND_BATCH_H_
