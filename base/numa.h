// The host's NUMA layout as Linux's sysfs describes it, for the
// `numa_node` the drivers report in axrt_device_properties_t.
#ifndef AXRT_BASE_NUMA_H_
#define AXRT_BASE_NUMA_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace axrt {

// 0 on a host whose memory is one NUMA node (/sys/devices/system/node/online
// lists node 0 alone); -1 when it lists several nodes or cannot be read.
int32_t single_host_numa_node() noexcept;

// A PCI address "domain:bus:device.function" in hexadecimal, any case, with
// a domain of up to 8 digits ("0000:3B:00.0", "00000000:3b:00.0"), as sysfs
// names it: "0000:3b:00.0". Empty when `bus_id` is not such an address.
std::string normalize_pci_bus_id(std::string_view bus_id);

// The NUMA node of the PCI device `bus_id` (any form normalize_pci_bus_id
// takes) from /sys/bus/pci/devices/<id>/numa_node; -1 when sysfs does not
// say (no such file, or the kernel's own -1).
int32_t pci_numa_node(std::string_view bus_id) noexcept;

}  // namespace axrt

#endif  // AXRT_BASE_NUMA_H_
