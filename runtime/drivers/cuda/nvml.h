// NVLink facts from NVML, the NVIDIA Management Library, loaded at run time
// (libnvidia-ml.so.1, or the path in AXRT_NVML_LIBRARY) and never linked:
// the topology queries of the CUDA driver need it only to tell NVLink from
// PCIe. Without it they still answer, from the Driver API alone.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_NVML_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_NVML_H_

#include <cstdint>
#include <string_view>

namespace axrt::cuda {

// The NVLinks between the GPUs at PCI addresses `bus_id` and `peer_bus_id`
// (as cuDeviceGetPCIBusId writes them), counted at the first: its active
// links whose remote end is the peer; when there are none and both GPUs
// have active links to NVSwitches, the smaller of their switch link counts.
// 0 when NVML cannot be loaded, does not know either GPU, or reports no such
// link. Thread-safe; loads NVML at the first call.
uint32_t nvlink_count(std::string_view bus_id, std::string_view peer_bus_id);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_NVML_H_
