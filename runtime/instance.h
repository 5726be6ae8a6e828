// The instance: the enabled drivers and the devices they contributed.
#ifndef AXRT_RUNTIME_INSTANCE_H_
#define AXRT_RUNTIME_INSTANCE_H_

#include <string>
#include <vector>

#include "axrt/device.h"
#include "runtime/object.h"

namespace axrt {

struct Device;

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
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_INSTANCE_H_
