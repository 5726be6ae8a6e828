// How a driver plugs into axrt: a factory in the built-in registry that, when
// an instance is created, contributes the driver's devices. Each device then
// brings its own vtables for devices, streams and events (runtime/device.h,
// runtime/stream.h, runtime/event.h). runtime/drivers/cpu is the reference.
#ifndef AXRT_RUNTIME_DRIVER_H_
#define AXRT_RUNTIME_DRIVER_H_

#include <span>
#include <string>
#include <vector>

#include "axrt/base.h"

namespace axrt {

struct Device;
struct Instance;

// What a driver found when asked for its devices.
struct DriverDevices {
  std::vector<Device*> devices;  // owned; adopted by the instance
  // Why there are no devices ("libcuda.so.1 not found"); empty otherwise.
  std::string availability;
};

struct DriverFactory {
  const char* name;
  // Creates the driver's devices for `instance`, numbering ordinals from 0.
  // Finding no hardware is not an error: return OK with no devices and say
  // why in `availability`. An error fails instance creation.
  axrt_status_t (*enumerate_devices)(Instance* instance, DriverDevices* out);
};

// The drivers compiled into this library, in enumeration order.
std::span<const DriverFactory* const> builtin_drivers() noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_DRIVER_H_
