// Graphs of the mock Driver API (mock_cuda.h, "Graphs"). A graph keeps its
// nodes in the order they were added, which their dependencies (always on
// nodes added earlier) allow; instantiating copies them. A launch queues on
// the stream, in that order, what each node would queue as a launch, copy or
// memset of its own, through the code cuLaunchKernel, cuMemcpy2DAsync and
// cuMemsetD*Async use (mock_cuda.cc).
#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tests/mock_cuda/mock_cuda_internal.h"

namespace axrt::mock_cuda {
namespace {

CUgraph_st* find_graph(State& s, CUgraph graph) {
  auto it = s.graphs.find(graph);
  return it != s.graphs.end() ? it->second.get() : nullptr;
}

// A new node's graph, with its dependencies checked: nodes of that graph,
// none twice.
CUresult check_new_node(State& s, CUgraphNode* node, CUgraph graph,
                        const CUgraphNode* dependencies, size_t dependency_count,
                        CUgraph_st** out) {
  if (node == nullptr || (dependency_count > 0 && dependencies == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUgraph_st* g = find_graph(s, graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < dependency_count; ++i) {
    const bool in_graph = std::any_of(g->nodes.begin(), g->nodes.end(), [&](const auto& n) {
      return n.get() == dependencies[i];
    });
    const bool repeated = std::find(dependencies, dependencies + i, dependencies[i]) !=
                          dependencies + i;
    if (!in_graph || repeated) return CUDA_ERROR_INVALID_VALUE;
  }
  *out = g;
  return CUDA_SUCCESS;
}

// Adds `node` to `graph` and hands out its handle.
CUresult add_node(CUgraph_st* graph, GraphNode node, CUgraphNode* out) {
  graph->nodes.push_back(std::make_unique<CUgraphNode_st>(CUgraphNode_st{std::move(node)}));
  *out = graph->nodes.back().get();
  return CUDA_SUCCESS;
}

// The context a copy or memset node runs in: a device's, retained and not
// poisoned.
CUresult check_context(State& s, CUcontext context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < s.device_count; ++i) {
    const Device& d = *s.devices[i];
    if (&d.context != context) continue;
    if (d.retain_count == 0) return CUDA_ERROR_INVALID_CONTEXT;
    return d.sticky;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// Resolves both sides of a copy node as cuMemcpy2DAsync does; the mock takes
// 2-D copies only (Depth 1, no arrays). Null sides: nothing to copy.
CUresult resolve_copy(State& s, const CUDA_MEMCPY3D& c, unsigned char** src, unsigned char** dst) {
  *src = *dst = nullptr;
  if (c.Depth != 1 || c.srcZ != 0 || c.dstZ != 0 || c.srcLOD != 0 || c.dstLOD != 0 ||
      c.reserved0 != nullptr || c.reserved1 != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c.WidthInBytes == 0 || c.Height == 0) return CUDA_SUCCESS;
  if (CUresult r = resolve_2d(s, c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, c.srcY,
                              c.srcPitch, c.WidthInBytes, c.Height, src)) {
    return r;
  }
  return resolve_2d(s, c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, c.dstY, c.dstPitch,
                    c.WidthInBytes, c.Height, dst);
}

CUresult check_memset_node(State& s, const CUDA_MEMSET_NODE_PARAMS& m) {
  if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return check_memset(s, m.dst, m.pitch, m.elementSize, m.width, m.height);
}

}  // namespace

CUresult mock_cuGraphCreate(CUgraph* graph, unsigned int flags) {
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto created = std::make_unique<CUgraph_st>();
  *graph = created.get();
  s.graphs.emplace(created.get(), std::move(created));
  return CUDA_SUCCESS;
}

CUresult mock_cuGraphDestroy(CUgraph graph) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.graphs.erase(graph) > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The parameters are checked as cuLaunchKernel checks them, and the
// parameter buffer copied, now; `func` must be set (kernels given as a
// CUkernel are not modelled).
CUresult mock_cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph,
                                   const CUgraphNode* dependencies, size_t dependency_count,
                                   const CUDA_KERNEL_NODE_PARAMS* params) {
  if (params == nullptr || params->func == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  CUgraph_st* g = nullptr;
  if (CUresult r = check_new_node(s, node, graph, dependencies, dependency_count, &g)) return r;
  if (s.functions.count(params->func) == 0) return CUDA_ERROR_INVALID_VALUE;
  CUfunc_st& f = *params->func;
  if (f.device->sticky != CUDA_SUCCESS) return f.device->sticky;
  GraphNode n;
  n.kind = GraphNode::Kind::kKernel;
  n.function = &f;
  n.kernel = f.kernel;
  n.shape = {{params->gridDimX, params->gridDimY, params->gridDimZ},
             {params->blockDimX, params->blockDimY, params->blockDimZ},
             params->sharedMemBytes};
  if (CUresult r = check_launch(f, n.shape, nullptr, 0)) return r;
  if (CUresult r = pack_params(*f.kernel, params->kernelParams, params->extra, &n.params)) return r;
  return add_node(g, std::move(n), node);
}

// The copy is checked now and resolved again at each launch: memory freed
// since fails the launch.
CUresult mock_cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph graph,
                                   const CUgraphNode* dependencies, size_t dependency_count,
                                   const CUDA_MEMCPY3D* copy, CUcontext context) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  CUgraph_st* g = nullptr;
  if (CUresult r = check_new_node(s, node, graph, dependencies, dependency_count, &g)) return r;
  if (CUresult r = check_context(s, context)) return r;
  unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  if (CUresult r = resolve_copy(s, *copy, &src, &dst)) return r;
  GraphNode n;
  n.kind = GraphNode::Kind::kMemcpy;
  n.copy = *copy;
  return add_node(g, std::move(n), node);
}

// As the copies: checked now and at each launch.
CUresult mock_cuGraphAddMemsetNode(CUgraphNode* node, CUgraph graph,
                                   const CUgraphNode* dependencies, size_t dependency_count,
                                   const CUDA_MEMSET_NODE_PARAMS* memset, CUcontext context) {
  if (memset == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  CUgraph_st* g = nullptr;
  if (CUresult r = check_new_node(s, node, graph, dependencies, dependency_count, &g)) return r;
  if (CUresult r = check_context(s, context)) return r;
  if (CUresult r = check_memset_node(s, *memset)) return r;
  GraphNode n;
  n.kind = GraphNode::Kind::kMemset;
  n.memset = *memset;
  return add_node(g, std::move(n), node);
}

// In the current context; the mock models no instantiation flag.
CUresult mock_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags) {
  if (exec == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lock(s.mu);
  Device* d = nullptr;
  if (CUresult r = need_context(s, &d)) return r;
  const CUgraph_st* g = find_graph(s, graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto created = std::make_unique<CUgraphExec_st>();
  created->device = d;
  for (const auto& n : g->nodes) created->nodes.push_back(n->node);
  *exec = created.get();
  s.graph_execs.emplace(created.get(), std::move(created));
  return CUDA_SUCCESS;
}

// Every node is checked before any is queued: a launch queues all or nothing.
CUresult mock_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.graph_execs.find(exec);
  if (it == s.graph_execs.end()) return CUDA_ERROR_INVALID_VALUE;
  Device* d = nullptr;
  std::shared_ptr<CUstream_st> st;
  if (CUresult r = prepare_stream(s, stream, &d, &st)) return r;
  const CUgraphExec_st& e = *it->second;
  if (e.device != st->device) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::pair<unsigned char*, unsigned char*>> copies;  // per memcpy node
  for (const GraphNode& n : e.nodes) {
    switch (n.kind) {
      case GraphNode::Kind::kKernel:
        // A function unloaded since, or of another device.
        if (s.functions.count(n.function) == 0 || n.function->device != st->device) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        break;
      case GraphNode::Kind::kMemcpy: {
        unsigned char* src = nullptr;
        unsigned char* dst = nullptr;
        if (CUresult r = resolve_copy(s, n.copy, &src, &dst)) return r;
        copies.emplace_back(src, dst);
        break;
      }
      case GraphNode::Kind::kMemset:
        if (CUresult r = check_memset_node(s, n.memset)) return r;
        break;
    }
  }
  auto copy = copies.begin();
  for (const GraphNode& n : e.nodes) {
    switch (n.kind) {
      case GraphNode::Kind::kKernel:
        enqueue(st.get(), kernel_op(s, n.kernel, n.params, n.shape));
        break;
      case GraphNode::Kind::kMemcpy: {
        const auto [src, dst] = *copy++;
        if (src == nullptr) break;  // nothing to copy
        enqueue(st.get(), copy_rows_op(dst, n.copy.dstPitch, src, n.copy.srcPitch,
                                       n.copy.WidthInBytes, n.copy.Height));
        break;
      }
      case GraphNode::Kind::kMemset: {
        const CUDA_MEMSET_NODE_PARAMS& m = n.memset;
        if (m.width == 0 || m.height == 0) break;
        enqueue(st.get(), memset_op(m.dst, m.pitch, m.value, m.elementSize, m.width, m.height));
        break;
      }
    }
  }
  return CUDA_SUCCESS;
}

// Launches still queued keep what they run: they complete.
CUresult mock_cuGraphExecDestroy(CUgraphExec exec) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.graph_execs.find(exec);
  if (it == s.graph_execs.end()) return CUDA_ERROR_INVALID_VALUE;
  const CUresult sticky = it->second->device->sticky;
  s.graph_execs.erase(it);
  return sticky;
}

}  // namespace axrt::mock_cuda
