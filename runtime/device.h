// The core view of a device: what every driver's device provides through its
// vtable, and the properties it reports.
#ifndef AXRT_RUNTIME_DEVICE_H_
#define AXRT_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "axrt/device.h"
#include "axrt/kernel_abi.h"
#include "axrt/memory.h"
#include "runtime/object.h"

namespace axrt {

struct Device;
struct Event;
struct Instance;
struct Stream;

// One allocation as a driver hands it out.
struct MemoryBlock {
  std::byte* host_pointer = nullptr;  // set when the memory is host-visible
  uint64_t device_address = 0;        // what kernels are given
  uint64_t size = 0;                  // usable bytes, at least those asked for
  void* driver_data = nullptr;
};

// The kinds of device code a driver may load (the .axe code object kinds
// other than host code).
enum class DeviceCodeKind : uint8_t { kCudaCubin, kCudaFatbin, kCudaPtx };

// What the executable expects of one kernel of device code: its entry
// symbol, its parameters as the kernel ABI lays them out, and its launch
// shape.
struct DeviceKernelRequest {
  std::string_view symbol;
  std::span<const uint32_t> param_offsets;
  std::span<const uint32_t> param_sizes;
  uint32_t args_size = 0;  // of the kernel ABI argument block
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  axrt_kernel_dim3_t cluster_dims{0, 0, 0};  // 0: no clusters
  uint32_t dynamic_shared_memory = 0;
};

// A kernel of device code, ready to launch.
struct DeviceKernel {
  void* handle = nullptr;    // the driver's (a CUfunction)
  uint32_t params_size = 0;  // bytes of the argument block the kernel takes
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  axrt_kernel_dim3_t cluster_dims{0, 0, 0};
  uint32_t dynamic_shared_memory = 0;
  std::string name;  // "kernel 'fc1' (sm_90 cubin:axrt_matmul_f32)"
};

// Device code a driver loaded (a CUDA module or library). Unloads when the
// last owner lets go.
struct DeviceCode {
  virtual ~DeviceCode() = default;
  // Finds kernel `request.symbol`, checks it against the request where the
  // driver can, and prepares it for launch. A missing symbol is NOT_FOUND.
  virtual axrt_status_t get_kernel(const DeviceKernelRequest& request, DeviceKernel* out) = 0;
};

struct DeviceVtable {
  void (*destroy)(Device* device);
  // Allocates `size` bytes aligned to `alignment` (a power of two the core
  // has checked against the device's limits).
  axrt_status_t (*allocate)(Device* device, uint64_t size, uint64_t alignment,
                            axrt_memory_type_t memory_type, MemoryBlock* out_block);
  // Returns a block from allocate(); called exactly once per block.
  void (*deallocate)(Device* device, axrt_memory_type_t memory_type, const MemoryBlock& block);
  void (*query_pool_statistics)(Device* device, axrt_pool_statistics_t* out_statistics);
  axrt_status_t (*trim_pool)(Device* device, uint64_t keep_bytes);
  // Creates a stream or event; the core fills in the common fields after.
  axrt_status_t (*create_stream)(Device* device, Stream** out_stream);
  axrt_status_t (*create_event)(Device* device, Event** out_event);
  // Waits for every stream of the device.
  axrt_status_t (*synchronize)(Device* device);
  // Loads a code object of `kind` built for `target` ("sm_80,sm_90",
  // "compute_80"). Null for drivers that run no device code. UNIMPLEMENTED
  // says the device cannot run this object (another variant may do);
  // other errors say the object is broken.
  axrt_status_t (*load_code)(Device* device, DeviceCodeKind kind, std::string_view target,
                             std::span<const std::byte> image, std::shared_ptr<DeviceCode>* out);
};

struct Device : Object {
  static constexpr ObjectType kType = ObjectType::kDevice;

  explicit Device(const DeviceVtable* vt) : Object(kType), vtable(vt) {}

  const DeviceVtable* vtable;
  Instance* instance = nullptr;  // the owner of this device's references
  // Filled by the driver at creation (id, driver, name, limits ...).
  axrt_device_properties_t properties{};

  // Kernel libraries initialised on this device (runtime/kernel_library.cc).
  struct KernelLibraryUse {
    const axrt_kernel_library_t* table;
    void* state;
    uint32_t users;
  };
  std::mutex kernel_libraries_mutex;
  std::vector<KernelLibraryUse> kernel_libraries;

  const char* id() const noexcept { return properties.id; }
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_DEVICE_H_
