// The instance: the enabled drivers and the devices they contributed.
#ifndef AXRT_RUNTIME_INSTANCE_H_
#define AXRT_RUNTIME_INSTANCE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "axrt/device.h"
#include "runtime/object.h"

namespace axrt {

struct Device;
struct KernelLibrary;

struct Instance : Object {
  static constexpr ObjectType kType = ObjectType::kInstance;

  struct DriverEntry {
    std::string name;
    std::string availability;
    uint32_t device_count = 0;
  };

  Instance() : Object(kType) {}

  std::vector<DriverEntry> drivers;
  // Owned by the instance: a device's references are the instance's.
  std::vector<Device*> devices;
  // CPU kernel libraries by name (runtime/kernel_library.cc).
  std::mutex kernel_libraries_mutex;
  std::vector<std::shared_ptr<KernelLibrary>> kernel_libraries;
};

// Tracing (runtime/trace_api.cc): starts the AXRT_TRACE trace with the
// first instance created while the variable is set; stops and writes the
// trace `instance` runs, if any (when it is destroyed).
void start_environment_trace(const Instance* instance) noexcept;
void stop_instance_trace(const Instance* instance) noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_INSTANCE_H_
