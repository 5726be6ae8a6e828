// The mock Driver API's state and the helpers its files share: mock_cuda.cc
// (every entry point but the graphs, the control API, NVML) and
// mock_cuda_graph.cc (graphs). Nothing here is exported from the library:
// its version script keeps everything but mock_cuda.h's functions local.
//
// Concurrency: one mutex (State::mu) guards all bookkeeping; every helper
// below that takes a State& expects it to be held. Stream workers run their
// operations without it; State::done_cv is notified whenever an operation
// completes or a context is poisoned.
#ifndef AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_INTERNAL_H_
#define AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_INTERNAL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "axrt/kernel_abi.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda.h"

namespace axrt::mock_cuda {

// ---------------------------------------------------------------------------
// Limits the mock reports and enforces.
// ---------------------------------------------------------------------------
constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr unsigned kMaxGridDim[3] = {2147483647u, 65535, 65535};
constexpr int kSharedPerBlock = 48 * 1024;
constexpr int kSharedPerBlockOptin = 232448;  // 227 KiB
constexpr int kWarpSize = 32;
constexpr int kMultiprocessors = 4;
constexpr size_t kAllocAlignment = 256;
constexpr unsigned kMaxClusterSize = 8;  // the portable cluster size limit

struct Device;

// One queued stream operation. `run` returns 0, or a code that poisons the
// stream's context (a kernel fault). Operations are dropped once the context
// is poisoned, except `always` ones: bookkeeping that must still happen
// (event records, so that waiters wake up; async frees, so nothing leaks).
struct Op {
  std::function<CUresult()> run;
  bool always = false;
};

// A registered kernel: its host function and parameter layout.
struct KernelDef {
  std::string name;
  axrt_mock_cuda_kernel_fn fn;
  void* user;
  std::vector<uint32_t> sizes;
  std::vector<uint32_t> offsets;
  uint32_t buffer_size = 0;  // last offset + last size
};
using KernelRef = std::shared_ptr<const KernelDef>;

// A kernel's parameter buffer, 16-byte aligned.
struct alignas(16) Chunk {
  unsigned char bytes[16];
};
using ParamBuffer = std::vector<Chunk>;

struct LaunchShape {
  axrt_mock_cuda_dim3 grid;
  axrt_mock_cuda_dim3 block;
  unsigned shared_bytes;
};

// What a code image provides: every registered kernel, or (mock images) the
// listed ones.
struct ImageNames {
  bool restricted = false;
  std::set<std::string> names;
  // "mock-lazy-jit-error" PTX: loads, and every kernel lookup
  // (cuLibraryGetKernel, cuModuleGetFunction) fails with
  // CUDA_ERROR_INVALID_PTX, as a lazily loading driver reports a broken image.
  bool lazy_jit_error = false;
};

enum class AllocKind { kDevice, kPool, kPinned };

struct Allocation {
  size_t size;      // what was asked for: the valid range
  size_t capacity;  // what it holds (rounded up), counted against the device
  AllocKind kind;
  Device* device;
  std::shared_ptr<CUmemPoolHandle_st> pool;  // kPool
};

// A block a pool keeps for reuse. One freed in stream order (cuMemFreeAsync)
// is kept from the call on, with the stream and the place of its free: work
// queued before the free may still use it until the stream got there.
struct CachedBlock {
  void* block;
  uint64_t id;                          // of the free that put it here
  std::shared_ptr<CUstream_st> stream;  // null: freed by cuMemFree
  uint64_t seq = 0;                     // the free's operation on `stream`
  bool reached = true;                  // the stream got to the free
};

// A node of a graph (mock_cuda_graph.cc): the work it would queue as a
// launch, copy or memset of its own, with its parameters as given.
struct GraphNode {
  enum class Kind { kKernel, kMemcpy, kMemset };
  Kind kind = Kind::kKernel;
  // kKernel: the parameter buffer was copied when the node was made.
  CUfunc_st* function = nullptr;
  KernelRef kernel;
  ParamBuffer params;
  LaunchShape shape{};
  // kMemcpy, kMemset: resolved again at each launch.
  CUDA_MEMCPY3D copy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
};

}  // namespace axrt::mock_cuda

// The CUDA handle types, at global scope as cuda_api.h declares them.

// A device's primary context; there is exactly one per device.
struct CUctx_st {
  axrt::mock_cuda::Device* device;
};

namespace axrt::mock_cuda {

struct Device {
  explicit Device(int ordinal) : ordinal(ordinal), context{this} {}
  int ordinal;
  uint64_t total_memory = 0;
  int compute_capability = 90;  // major * 10 + minor
  uint64_t used_memory = 0;     // cuMemAlloc bytes + pool reserved bytes
  int retain_count = 0;         // primary context retains
  CUresult sticky = CUDA_SUCCESS;
  CUctx_st context;
  std::shared_ptr<CUstream_st> null_stream;  // created on first use
  // Devices whose memory this context may access (cuCtxEnablePeerAccess);
  // forgotten when the primary context is released for the last time.
  std::set<int> peers_enabled;
};

}  // namespace axrt::mock_cuda

struct CUstream_st {
  CUstream_st(axrt::mock_cuda::Device* device, unsigned flags) : device(device), flags(flags) {}
  axrt::mock_cuda::Device* device;
  unsigned flags;
  std::deque<axrt::mock_cuda::Op> queue;
  uint64_t enqueued = 0;   // operations ever queued
  uint64_t completed = 0;  // operations finished (or dropped), in order
  bool stopping = false;
  std::condition_variable work_cv;  // new work or stopping
  std::thread worker;               // started on first use
  uint64_t host_waits = 0;          // axrt_mock_cuda_stream_host_waits
};

struct CUevent_st {
  CUevent_st(axrt::mock_cuda::Device* device, unsigned flags) : device(device), flags(flags) {}
  axrt::mock_cuda::Device* device;
  unsigned flags;
  // The latest record: complete once its stream completed operation `seq`.
  std::shared_ptr<CUstream_st> stream;
  uint64_t seq = 0;
  uint64_t record_count = 0;    // records issued; 0: never recorded
  uint64_t stamped_record = 0;  // the newest record whose time is in `time`
  std::chrono::steady_clock::time_point time;
};

struct CUmemPoolHandle_st {
  axrt::mock_cuda::Device* device;
  uint64_t release_threshold = 0;
  uint64_t reserved = 0, reserved_high = 0;  // bytes held from the device
  uint64_t used = 0, used_high = 0;          // bytes handed to the application
  // Free blocks by capacity.
  std::multimap<size_t, axrt::mock_cuda::CachedBlock> cache;
  uint64_t frees = 0;      // ids of CachedBlock
  bool destroyed = false;  // blocks still out are freed on return
  // CU_MEMPOOL_ATTR_REUSE_*, enabled by default as in CUDA.
  bool reuse_follow_event_dependencies = true;  // not modelled: allows nothing more
  bool reuse_allow_opportunistic = true;
  bool reuse_allow_internal_dependencies = true;
};

struct CUfunc_st {
  axrt::mock_cuda::Device* device;
  axrt::mock_cuda::KernelRef kernel;
  int max_dynamic_shared = axrt::mock_cuda::kSharedPerBlock;
};

struct CUmod_st {
  axrt::mock_cuda::Device* device;
  axrt::mock_cuda::ImageNames image;
  std::map<std::string, std::unique_ptr<CUfunc_st>> functions;
};

struct CUkern_st {
  axrt::mock_cuda::KernelRef kernel;
  std::map<axrt::mock_cuda::Device*, std::unique_ptr<CUfunc_st>> functions;  // per context
};

struct CUlib_st {
  axrt::mock_cuda::Device* device;  // the context it was loaded in
  axrt::mock_cuda::ImageNames image;
  std::map<std::string, std::unique_ptr<CUkern_st>> kernels;
};

// A node's handle (cuGraphAdd*Node), owned by its graph.
struct CUgraphNode_st {
  axrt::mock_cuda::GraphNode node;
};

// A graph: its nodes in the order they were added, which their dependencies
// (on nodes added before) always allow.
struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

// An instantiated graph: a copy of the graph's nodes, for the context it was
// instantiated in.
struct CUgraphExec_st {
  axrt::mock_cuda::Device* device;
  std::vector<axrt::mock_cuda::GraphNode> nodes;
};

namespace axrt::mock_cuda {

enum SymbolIndex : int {
#define AXRT_MOCK_INDEX(name, ret, params, version, required) k_##name,
  AXRT_CUDA_SYMBOLS(AXRT_MOCK_INDEX)
#undef AXRT_MOCK_INDEX
  k_cuGetProcAddress_v2,
  kSymbolCount
};

// A CPU kernel of "axrt.cpu" registered as a mock kernel.
struct CpuKernel {
  const axrt_kernel_info_t* info;
  uint32_t param_bytes;
};

struct State {
  std::mutex mu;
  std::condition_variable done_cv;
  bool initialized = false;
  int device_count = 0;
  std::vector<std::unique_ptr<Device>> devices;  // only grows; pointers stay valid
  std::map<int, uint64_t> memory_limits;         // control API overrides
  std::map<uintptr_t, Allocation> allocations;   // by base address
  std::map<CUstream, std::shared_ptr<CUstream_st>> streams;
  std::map<CUevent, std::shared_ptr<CUevent_st>> events;
  std::map<CUmemoryPool, std::shared_ptr<CUmemPoolHandle_st>> pools;
  std::map<CUmodule, std::unique_ptr<CUmod_st>> modules;
  std::map<CUlibrary, std::unique_ptr<CUlib_st>> libraries;
  std::set<CUfunction> functions;  // live functions of modules and libraries
  std::set<CUkernel> kernels;      // live kernels of libraries
  std::map<CUgraph, std::unique_ptr<CUgraph_st>> graphs;
  std::map<CUgraphExec, std::unique_ptr<CUgraphExec_st>> graph_execs;
  std::map<std::string, KernelRef> registry;
  std::map<std::string, CUresult> kernel_faults;
  std::set<std::string> hidden;
  struct Injection {
    CUresult result;
    uint32_t skip;
  };
  std::map<int, Injection> injections;
  std::atomic<uint64_t> call_counts[kSymbolCount] = {};
  uint64_t host_waits = 0;  // axrt_mock_cuda_host_waits
  std::deque<CpuKernel> cpu_kernels;  // user data of the CPU kernels' entries
  // Peer-to-peer, by unordered device pair (smaller ordinal first): pairs
  // without an entry can access each other, with native atomics, rank 0.
  struct PeerLink {
    bool access = true;
    bool native_atomics = true;
    int performance_rank = 0;
  };
  std::map<std::pair<int, int>, PeerLink> peer_links;
  std::map<std::pair<int, int>, uint32_t> nvlinks;  // second -1: to NVSwitches
  std::map<int, int> host_numa_nodes;               // by device; default -1
  uint64_t peer_copies[2] = {0, 0};                 // [direct]: cuMemcpyPeerAsync
};

// Each entry point's implementation, declared from the X-macro so that a
// definition with another signature fails to link. The graph functions are
// mock_cuda_graph.cc's, the rest mock_cuda.cc's.
#define AXRT_MOCK_DECLARE(name, ret, params, version, required) ret mock_##name params;
AXRT_CUDA_SYMBOLS(AXRT_MOCK_DECLARE)
#undef AXRT_MOCK_DECLARE

// The state, created on first use and never destroyed.
State& state();

// The calling thread's current context's device, if it is live and retained.
Device* current_device(State& s);
// For calls that need a current context: its device, not poisoned.
CUresult need_context(State& s, Device** out);

// The live allocation holding [address, address + size) (size >= 1), or null.
Allocation* find_allocation(State& s, uintptr_t address, size_t size);

// For calls that queue work: the current (unpoisoned) device and the stream,
// its worker running.
CUresult prepare_stream(State& s, CUstream handle, Device** device,
                        std::shared_ptr<CUstream_st>* stream);
// Queues `op` on `stream`; returns its place (CUstream_st::enqueued).
uint64_t enqueue(CUstream_st* stream, Op op);

// A live function, its device not poisoned.
CUresult get_function(State& s, CUfunction function, CUfunc_st** out);
// Checks a launch of `f` in `shape` with `attrs` against the device's limits.
CUresult check_launch(const CUfunc_st& f, const LaunchShape& shape, const CUlaunchAttribute* attrs,
                      unsigned attr_count);
// Builds the parameter buffer from `params` (one pointer per parameter) or
// `extra` (a packed buffer whose size must match exactly).
CUresult pack_params(const KernelDef& kernel, void** params, void** extra, ParamBuffer* out);
// The operation that runs a launch's blocks, or faults with the code
// axrt_mock_cuda_fail_kernel() left for the kernel (taken by this launch).
Op kernel_op(State& s, KernelRef kernel, ParamBuffer params, const LaunchShape& shape);

// One side of a 2D copy: resolves its first byte, checking the pitch and that
// device (or unified) memory holds every row.
CUresult resolve_2d(State& s, CUmemorytype type, const void* host, CUdeviceptr device, size_t x,
                    size_t y, size_t pitch, size_t width, size_t height, unsigned char** out);
// The operation that copies `height` rows of `width` bytes.
Op copy_rows_op(unsigned char* dst, size_t dst_pitch, const unsigned char* src, size_t src_pitch,
                size_t width, size_t height);

// Checks a memset of `height` rows of `width` elements of `element_size`
// bytes (1, 2 or 4) at `dst`, rows `pitch` bytes apart: aligned, and inside
// an allocation.
CUresult check_memset(State& s, CUdeviceptr dst, size_t pitch, size_t element_size, size_t width,
                      size_t height);
// The operation that does that memset with `value`.
Op memset_op(CUdeviceptr dst, size_t pitch, unsigned value, size_t element_size, size_t width,
             size_t height);

}  // namespace axrt::mock_cuda

#endif  // AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_INTERNAL_H_
