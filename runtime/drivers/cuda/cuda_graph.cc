// CUDA graphs of captured calls (docs/cuda-driver.md, "Graphs"). A batch
// becomes a chain of nodes, one per command in its order, each depending on
// the one before: kernel nodes take the argument block as launch() passes it
// (the packed buffer of `extra`, which CUDA copies into the node), memcpy
// nodes copy between buffers by unified address, memset nodes fill with 1-,
// 2- or 4-byte patterns. The chain is instantiated once and the template
// graph destroyed. A replay is one cuGraphLaunch, queued in the stream's
// order as a batch is (cuda_stream.cc), held back behind a host function
// that may fail the stream, and skipped once one did.
#include "runtime/drivers/cuda/cuda_graph.h"

#include <string>
#include <utility>
#include <vector>

#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_held.h"
#include "runtime/drivers/cuda/cuda_nvtx.h"
#include "trace/trace.h"

namespace axrt::cuda {
namespace {

// An instantiated graph of a device. Its owner outlives every replay, so
// the exec is destroyed with nothing in flight (with the device's context
// current; from a callback thread, at the device's next call).
struct CudaGraph final : DeviceGraph {
  explicit CudaGraph(CudaDevice* d) : device(d) {}
  ~CudaGraph() override {
    if (!exec) return;
    CudaDevice* d = device;
    CUgraphExec e = exec;
    d->defer_or_run([d, e] {
      ContextScope scope(d);
      d->cu.cuGraphExecDestroy(e);
    });
  }

  CudaDevice* const device;  // outlives the graph: its owner holds the executable
  CUgraphExec exec = nullptr;
};

// The template graph, destroyed once instantiated or given up.
struct TemplateDeleter {
  const CudaApi* cu;
  void operator()(CUgraph graph) const noexcept { cu->cuGraphDestroy(graph); }
};
using TemplatePtr = std::unique_ptr<CUgraph_st, TemplateDeleter>;

std::string label_of(const CommandBatch& batch) {
  return batch.label ? *batch.label : std::string("a batch");
}

// The first graph entry point the driver library lacks, or null.
const char* missing_entry_point(const CudaApi& cu) {
  const std::pair<const char*, bool> entries[] = {
      {"cuGraphCreate", cu.cuGraphCreate != nullptr},
      {"cuGraphDestroy", cu.cuGraphDestroy != nullptr},
      {"cuGraphAddKernelNode", cu.cuGraphAddKernelNode != nullptr},
      {"cuGraphAddMemcpyNode", cu.cuGraphAddMemcpyNode != nullptr},
      {"cuGraphAddMemsetNode", cu.cuGraphAddMemsetNode != nullptr},
      {"cuGraphInstantiateWithFlags", cu.cuGraphInstantiateWithFlags != nullptr},
      {"cuGraphLaunch", cu.cuGraphLaunch != nullptr},
      {"cuGraphExecDestroy", cu.cuGraphExecDestroy != nullptr},
  };
  for (const auto& [name, present] : entries) {
    if (!present) return name;
  }
  return nullptr;
}

// Why command `i` of `batch` cannot be a node of the chain (UNIMPLEMENTED),
// or NULL. Checked for every command before any CUDA call.
axrt_status_t check_command(const CommandBatch& batch, size_t i) {
  const BatchCommand& command = batch.commands[i];
  const uint32_t index = batch.command_base + static_cast<uint32_t>(i);
  switch (command.kind) {
    case BatchCommand::Kind::kDispatch:
      if (!command.device_kernel) {
        return make_status(AXRT_STATUS_CODE_INTERNAL,
                           "command {} of {} has no CUDA kernel to launch", index,
                           label_of(batch));
      }
      if (command.device_kernel->cluster_dims.x != 0) {
        return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                           "{}: command {} ({}) is launched in thread block clusters, which the "
                           "CUDA driver's graphs do not set on kernel nodes",
                           label_of(batch), index, command.device_kernel->name);
      }
      return nullptr;
    case BatchCommand::Kind::kCopy:
      if (command.copy.src.host || command.copy.dst.host || !command.copy.src.buffer ||
          !command.copy.dst.buffer) {
        return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                           "{}: command {} copies with host memory, which the CUDA driver's "
                           "graphs do not copy (only buffers, by device address)",
                           label_of(batch), index);
      }
      return nullptr;
    case BatchCommand::Kind::kFill:
      if (command.fill_pattern_size != 1 && command.fill_pattern_size != 2 &&
          command.fill_pattern_size != 4) {
        return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                           "{}: command {} fills with a {}-byte pattern; CUDA memset nodes take "
                           "1, 2 or 4 bytes",
                           label_of(batch), index, command.fill_pattern_size);
      }
      return nullptr;
  }
  return nullptr;
}

// Adds the node of `command` to `graph` behind `after` (null: none) into
// `*out`; leaves `*out` null for a command with nothing to do (an empty
// grid, copy or fill), which launches skip too.
axrt_status_t add_node(CudaDevice* d, CUgraph graph, CUgraphNode after, const CommandBatch& batch,
                       const BatchCommand& command, CUgraphNode* out) {
  const CudaApi& cu = d->cu;
  const CUgraphNode* dependencies = after ? &after : nullptr;
  const size_t dependency_count = after ? 1 : 0;
  switch (command.kind) {
    case BatchCommand::Kind::kDispatch: {
      const DeviceKernel& kernel = *command.device_kernel;
      const axrt_kernel_dim3_t& grid = command.workgroup_count;
      if (grid.x == 0 || grid.y == 0 || grid.z == 0) return nullptr;
      size_t size = kernel.params_size;
      void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER,
                       const_cast<void*>(batch.args_at(command.args_offset)),
                       AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, AXRT_CU_LAUNCH_PARAM_END};
      CUDA_KERNEL_NODE_PARAMS params{};
      params.func = static_cast<CUfunction>(kernel.handle);
      params.gridDimX = grid.x;
      params.gridDimY = grid.y;
      params.gridDimZ = grid.z;
      params.blockDimX = kernel.workgroup_size.x;
      params.blockDimY = kernel.workgroup_size.y;
      params.blockDimZ = kernel.workgroup_size.z;
      params.sharedMemBytes = kernel.dynamic_shared_memory;
      params.extra = size ? extra : nullptr;
      return d->check(cu.cuGraphAddKernelNode(out, graph, dependencies, dependency_count, &params),
                      "cuGraphAddKernelNode");
    }
    case BatchCommand::Kind::kCopy: {
      const CopyCommand& copy = command.copy;
      if (copy.width == 0 || copy.height == 0) return nullptr;
      CUDA_MEMCPY3D params{};
      params.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
      params.srcDevice = copy.src.buffer->device_address(copy.src.offset);
      params.srcPitch = copy.src.pitch ? copy.src.pitch : copy.width;
      params.srcHeight = copy.height;
      params.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
      params.dstDevice = copy.dst.buffer->device_address(copy.dst.offset);
      params.dstPitch = copy.dst.pitch ? copy.dst.pitch : copy.width;
      params.dstHeight = copy.height;
      params.WidthInBytes = copy.width;
      params.Height = copy.height;
      params.Depth = 1;
      return d->check(cu.cuGraphAddMemcpyNode(out, graph, dependencies, dependency_count, &params,
                                              d->context),
                      "cuGraphAddMemcpyNode");
    }
    case BatchCommand::Kind::kFill: {
      const uint32_t element = command.fill_pattern_size;
      if (command.fill_length == 0) return nullptr;
      CUDA_MEMSET_NODE_PARAMS params{};
      params.dst = command.fill_buffer->device_address(command.fill_offset);
      params.value = element == 4 ? static_cast<unsigned int>(command.fill_pattern)
                                  : static_cast<unsigned int>(command.fill_pattern &
                                                              ((uint64_t{1} << (8 * element)) - 1));
      params.elementSize = element;
      params.width = command.fill_length / element;
      params.height = 1;
      return d->check(cu.cuGraphAddMemsetNode(out, graph, dependencies, dependency_count, &params,
                                              d->context),
                      "cuGraphAddMemsetNode");
    }
  }
  return nullptr;
}

// What a traced replay records: the function, as a batch's call records it
// (cuda_stream.cc), without its commands, which the graph runs unseen.
trace::Record replay_record(const DeviceGraph& graph) {
  trace::Record r;
  r.kind = trace::Kind::kFunction;
  r.name = graph.trace_name;
  r.detail = graph.trace_detail;
  r.a[1] = static_cast<int64_t>(graph.commands);
  return r;
}

// Under order_mutex: launches `graph` and keeps `*keep` (moved from only
// once the launch was queued) until it ran. A failure is returned, not given
// to the stream: the caller decides which operation failed.
axrt_status_t issue_replay(CudaStream* s, const CudaGraph& graph, Ref<Object>* keep,
                           const trace::OpStamp& stamp) {
  AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  CudaDevice* d = s->cuda_device();
  // Tools see the launch inside a range named by the function.
  nvtx::Range range(graph.trace_name ? graph.trace_name : "graph");
  TraceScope traced;
  if (trace::recording(stamp)) traced.start(s, replay_record(graph), stamp);
  if (axrt_status_t status =
          d->check(d->cu.cuGraphLaunch(graph.exec, s->stream), "cuGraphLaunch")) {
    StatusPtr owned(status);
    return make_status(axrt_status_code(status), "{} (graph): {}",
                       graph.label ? *graph.label : std::string("graph"),
                       axrt_status_message(status));
  }
  traced.finish();
  std::vector<Ref<Object>> kept;
  kept.push_back(std::move(*keep));
  return s->retain_until_done(std::move(kept), nullptr, {}, /*coalesce=*/true);
}

}  // namespace

axrt_status_t create_graph(Device* device, const CommandBatch& batch,
                           std::unique_ptr<DeviceGraph>* out) {
  auto* d = static_cast<CudaDevice*>(device);
  const CudaApi& cu = d->cu;
  if (const char* missing = missing_entry_point(cu)) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{}: the NVIDIA driver ({}) has no {}, so {} cannot be a CUDA graph",
                       d->id(), cu.path, missing, label_of(batch));
  }
  for (size_t i = 0; i < batch.commands.size(); ++i) {
    AXRT_RETURN_IF_ERROR(check_command(batch, i));
  }
  AXRT_RETURN_IF_ERROR(d->enter());
  ContextScope scope(d);
  CUgraph raw = nullptr;
  AXRT_RETURN_IF_ERROR(d->check(cu.cuGraphCreate(&raw, 0), "cuGraphCreate"));
  const TemplatePtr graph(raw, TemplateDeleter{&cu});
  CUgraphNode last = nullptr;
  for (size_t i = 0; i < batch.commands.size(); ++i) {
    const BatchCommand& command = batch.commands[i];
    CUgraphNode node = nullptr;
    if (axrt_status_t status = add_node(d, graph.get(), last, batch, command, &node)) {
      StatusPtr owned(status);
      return make_status(axrt_status_code(status), "{}: command {}{}: {}", label_of(batch),
                         batch.command_base + i,
                         command.device_kernel ? " (" + command.device_kernel->name + ")" : "",
                         axrt_status_message(status));
    }
    if (node) last = node;
  }
  auto native = std::make_unique<CudaGraph>(d);
  AXRT_RETURN_IF_ERROR(d->check(cu.cuGraphInstantiateWithFlags(&native->exec, graph.get(), 0),
                                "cuGraphInstantiateWithFlags"));
  native->trace_name = batch.trace_name;
  native->trace_detail = batch.trace_detail;
  native->label = batch.label;
  native->commands = static_cast<uint32_t>(batch.commands.size());
  *out = std::move(native);
  return nullptr;
}

axrt_status_t launch_graph(Stream* stream, DeviceGraph* graph, Ref<Object> keep) {
  auto* s = static_cast<CudaStream*>(stream);
  const auto* g = static_cast<const CudaGraph*>(graph);
  // `keep` may hold the last reference to the graph's owner (and so to
  // streams): queue_in_order lets it go, if not handed to the stream, only
  // once no lock is held.
  return queue_in_order<true>(s, [s, g, keep = std::move(keep)](
                                     Disposition how, const trace::OpStamp& stamp) mutable {
    return how == Disposition::kIssue ? issue_replay(s, *g, &keep, stamp) : nullptr;
  });
}

}  // namespace axrt::cuda
