// The report `axrt devices` prints, apart from the instance it comes from,
// so that drivers without devices, and topologies of devices this machine
// lacks, can be tested on any machine.
#ifndef AXRT_TOOLS_AXRT_DEVICES_H_
#define AXRT_TOOLS_AXRT_DEVICES_H_

#include <span>
#include <string>

#include "axrt/device.h"

namespace axrt::tools {

// The text (or, with `json`, the JSON object) `axrt devices` prints for
// `drivers` and `devices`. Every driver is listed; one with no devices says
// why (its availability text, or that it gave no reason). With `topology`
// (`axrt devices --topology`): how each device reaches each device's
// memory, row by row, `devices.size()` squared entries (row i, column j at
// i * size + j: axrt_device_query_peer(device i, device j)), and each
// device's NUMA node.
std::string devices_report(std::span<const axrt_driver_info_t> drivers,
                           std::span<const axrt_device_properties_t> devices, bool json,
                           std::span<const axrt_device_peer_info_t> topology = {});

// A topology cell: the link's name, with the link count for NVLink
// ("nvlink x4").
std::string link_text(const axrt_device_peer_info_t& info);

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_DEVICES_H_
