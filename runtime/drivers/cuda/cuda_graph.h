// CUDA graphs (docs/cuda-driver.md, "Graphs"): a captured call's batch made
// once into an instantiated CUDA graph (DeviceVtable::create_graph), and
// replayed with one cuGraphLaunch in its stream's order, like a batch
// (StreamVtable::launch_graph).
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_GRAPH_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_GRAPH_H_

#include <memory>

#include "runtime/driver.h"

namespace axrt::cuda {

// Makes the commands of `batch` into a chain of kernel, memcpy and memset
// nodes in their order, and instantiates it. UNIMPLEMENTED when the driver
// library lacks a graph entry point, or for a command the chain does not
// take: a kernel launched in clusters, a copy with host memory, an 8-byte
// fill pattern.
axrt_status_t create_graph(Device* device, const CommandBatch& batch,
                           std::unique_ptr<DeviceGraph>* out);

// Queues one replay of `graph` on `stream` in its order (held back behind a
// host function as a batch is), keeping `keep` until the replay ran.
axrt_status_t launch_graph(Stream* stream, DeviceGraph* graph, Ref<Object> keep);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_GRAPH_H_
