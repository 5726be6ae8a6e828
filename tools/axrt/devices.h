// The report `axrt devices` prints, apart from the instance it comes from,
// so that drivers without devices can be tested on any machine.
#ifndef AXRT_TOOLS_AXRT_DEVICES_H_
#define AXRT_TOOLS_AXRT_DEVICES_H_

#include <span>
#include <string>

#include "axrt/device.h"

namespace axrt::tools {

// The text (or, with `json`, the JSON object) `axrt devices` prints for
// `drivers` and `devices`. Every driver is listed; one with no devices says
// why (its availability text, or that it gave no reason).
std::string devices_report(std::span<const axrt_driver_info_t> drivers,
                           std::span<const axrt_device_properties_t> devices, bool json);

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_DEVICES_H_
