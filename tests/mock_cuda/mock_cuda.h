/* A mock of the CUDA Driver API for testing axrt's CUDA driver on machines
 * without a GPU (libaxrt_mock_cuda.so).
 *
 * The library exports exactly three kinds of symbols:
 *   - cuGetProcAddress_v2, through which the driver fetches every entry point
 *     listed in AXRT_CUDA_SYMBOLS (runtime/drivers/cuda/cuda_api.h); the
 *     entry points themselves are not exported;
 *   - the axrt_mock_cuda_* control functions below, with which a test
 *     configures the mock, injects faults and checks for leaks;
 *   - the NVML functions the CUDA driver reads NVLinks with
 *     (runtime/drivers/cuda/nvml.cc), so that the library also stands in for
 *     libnvidia-ml.so.1 (AXRT_NVML_LIBRARY): nvmlInit_v2,
 *     nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetNvLinkState,
 *     nvmlDeviceGetNvLinkRemoteDeviceType and
 *     nvmlDeviceGetNvLinkRemotePciInfo_v2, over the links of
 *     axrt_mock_cuda_set_nvlinks().
 * The library is linked with -z nodelete: once loaded it stays loaded, so its
 * state (and its stream threads) outlive a dlclose by the driver, and a test
 * that links the library and a driver that dlopens it share one instance.
 *
 * What is modelled
 *   Devices are host memory: a device pointer is the host address of its
 *   bytes, so kernels run on the host (registered kernels, including every
 *   kernel of the built-in "axrt.cpu" library) dereference them directly.
 *   Every stream has a worker thread that runs its operations in order; the
 *   NULL stream of each device is a stream of its own, which the special
 *   handles CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) name too (the
 *   mock keeps no per-thread streams). Calls that create objects or queue
 *   work (allocations, streams, events, modules, libraries, copies,
 *   launches, cuCtxSynchronize, cuMemGetInfo) need a current context that
 *   is retained, else CUDA_ERROR_INVALID_CONTEXT; what they create
 *   belongs to that context's device. Calls on existing objects (synchronize,
 *   query, destroy, free) work from any thread. A faulting kernel (or an injected
 *   sticky error: 214, 700, 710, 714-719) poisons its device's context:
 *   every later call touching that context returns the error, queued work is
 *   dropped, and destroying or freeing objects still releases them.
 *   As in the real driver, a copy from pageable host memory (any pointer
 *   that is not a cuMemHostAlloc allocation) stages the source during the
 *   call, a copy into pageable memory returns once it is done, and cuMemFree
 *   (cuMemFreeHost) first waits for the work queued on the streams of the
 *   memory's device (of every device).
 *   Device-side ranges of copies and memsets must lie inside live
 *   allocations (cuMemcpyAsync: both sides, device or pinned memory), else
 *   CUDA_ERROR_INVALID_VALUE.
 *   Memory pools keep a block freed with cuMemFreeAsync from the call on,
 *   and hand it to an allocation on another stream as CUDA's reuse policy
 *   (CU_MEMPOOL_ATTR_REUSE_*, all enabled by default) allows: once its
 *   stream got to the free (ALLOW_OPPORTUNISTIC), or before, making the
 *   allocating stream wait for the free (ALLOW_INTERNAL_DEPENDENCIES); on
 *   the freeing stream itself, at once. Event dependencies between streams
 *   are not tracked, so FOLLOW_EVENT_DEPENDENCIES allows nothing more. A
 *   block goes back to the device (release threshold, trimming) only once
 *   its free was reached.
 *   Any CUDA call made from a stream's worker thread (a host function or a
 *   kernel) returns CUDA_ERROR_NOT_PERMITTED, as the real driver forbids
 *   CUDA calls from host functions.
 *   Peers: device n sits at PCI address 0000:<0x10 + n>:00.0
 *   (cuDeviceGetPCIBusId, in capitals). Every pair of devices can access
 *   each other with native atomics and performance rank 0 unless
 *   axrt_mock_cuda_set_peer_access() / _set_peer_attributes() say
 *   otherwise; cuCtxEnablePeerAccess refuses a pair without access
 *   (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) and a second enabling
 *   (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), and a context forgets what it
 *   enabled when its last retain is released. Copies between devices work
 *   with or without access (cuMemcpyAsync and cuMemcpy2DAsync through
 *   unified addressing, cuMemcpyPeerAsync); axrt_mock_cuda_peer_copies()
 *   counts the cuMemcpyPeerAsync calls that had access and those that did
 *   not. CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is -1 unless
 *   axrt_mock_cuda_set_host_numa_node() sets it.
 *   Graphs (mock_cuda_graph.cc): a graph holds kernel, memcpy and memset
 *   nodes in the order they were added (dependencies, checked to be nodes
 *   of the graph and listed once, can only name earlier nodes); a kernel
 *   node is checked as cuLaunchKernel checks a launch and copies its
 *   parameter buffer (from kernelParams or extra) when made, and must name
 *   its function (`func`; a CUkernel is not modelled); memcpy nodes are 2-D
 *   (Depth 1, no arrays) and memset nodes 1-, 2- or 4-byte, both checked
 *   against live allocations when made and again at each launch, host
 *   memory read and written when the node runs. cuGraphInstantiateWithFlags
 *   (flags 0; the current context) copies the nodes, so the graph may go;
 *   cuGraphLaunch queues on the stream what each node would queue as a
 *   launch, copy or memset of its own, in order, all or nothing (a kernel
 *   left a fault by axrt_mock_cuda_fail_kernel() faults there, as in a
 *   launch). Null pointers and handles that are not live graphs, nodes or
 *   execs (destroyed ones included) are CUDA_ERROR_INVALID_VALUE; an exec
 *   destroyed with launches queued lets them run.
 *
 * Environment, read by cuInit (devices are reconfigured only while nothing
 * is allocated, retained or created, so a process can re-init with new
 * values after tearing everything down):
 *   AXRT_MOCK_CUDA_DEVICE_COUNT        devices (default 2; 0: cuInit fails
 *                                      with CUDA_ERROR_NO_DEVICE)
 *   AXRT_MOCK_CUDA_MEMORY_MB           memory per device in MiB (default 1024)
 *   AXRT_MOCK_CUDA_COMPUTE_CAPABILITY  major * 10 + minor (default 90 = 9.0)
 *   AXRT_MOCK_CUDA_INIT_ERROR          a CUresult that cuInit returns instead
 *                                      of initializing (e.g. 100, NO_DEVICE);
 *                                      read on every call (an earlier
 *                                      successful init stays in effect)
 * Read on every call of the function concerned:
 *   AXRT_MOCK_CUDA_HIDE                comma-separated entry point names that
 *                                      cuGetProcAddress_v2 reports as missing
 *   AXRT_MOCK_CUDA_DRIVER_VERSION      cuDriverGetVersion's answer (12080)
 *
 * Code images (cuModuleLoadDataEx, cuLibraryLoadData): a cubin ("\x7f" "ELF"),
 * a fatbin (little-endian magic 0xBA55ED50) or PTX (text with ".version" and
 * ".target") provide every registered kernel; a mock image, the line
 * "AXRTMOCKCUDA" followed by one kernel name per line, provides the listed
 * names that are registered. Anything else: CUDA_ERROR_INVALID_IMAGE (text
 * images must be NUL-terminated). PTX containing "mock-jit-error: MESSAGE"
 * fails with CUDA_ERROR_INVALID_PTX and MESSAGE (to the end of its line) in
 * the CU_JIT_ERROR_LOG_BUFFER; a successful load writes "mock JIT: ok" into
 * the CU_JIT_INFO_LOG_BUFFER. Logs are truncated to the *_SIZE_BYTES option
 * and NUL-terminated, and the bytes written (NUL included) are stored back
 * into that option's value.
 *
 * Every control function is thread-safe and may be called before cuInit. */
#ifndef AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_H_
#define AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AXRT_MOCK_CUDA_EXPORT __attribute__((visibility("default")))

/* The driver's only entry point (PFN_cuGetProcAddress_v2 in cuda_api.h; the
 * types here are the same: CUresult and the query result are int). Unknown
 * or hidden names: CUDA_ERROR_NOT_FOUND with *pfn = NULL and *symbol_status =
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; a cuda_version below the entry
 * point's minimum: CUDA_ERROR_NOT_FOUND with VERSION_NOT_SUFFICIENT. Works
 * before cuInit. */
AXRT_MOCK_CUDA_EXPORT int cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                              uint64_t flags, int* symbol_status);

typedef struct axrt_mock_cuda_dim3 {
  uint32_t x;
  uint32_t y;
  uint32_t z;
} axrt_mock_cuda_dim3;

/* A registered kernel, called once per block of a launch on the stream's
 * worker thread, blocks in order x fastest, then y, then z. `params` is the
 * kernel's parameter buffer (16-byte aligned), `shared_memory` the block's
 * dynamic shared memory (64-byte aligned, NULL when shared_bytes is 0).
 * Returns 0, or a CUresult that fails the launch: the launch call has already
 * succeeded, the stream fails and the context is poisoned with that code
 * (the remaining blocks do not run). */
typedef int (*axrt_mock_cuda_kernel_fn)(void* user, const void* params,
                                        const axrt_mock_cuda_dim3* grid,
                                        const axrt_mock_cuda_dim3* block,
                                        const axrt_mock_cuda_dim3* block_id, void* shared_memory,
                                        uint32_t shared_bytes);

/* Live objects, for leak checks. */
typedef struct axrt_mock_cuda_objects_t {
  uint64_t device_allocations; /* cuMemAlloc + pool blocks not yet freed */
  uint64_t pinned_allocations; /* cuMemHostAlloc */
  uint64_t pools;              /* cuMemPoolCreate */
  uint64_t streams;            /* cuStreamCreate (not the NULL streams) */
  uint64_t events;
  uint64_t modules;            /* modules + libraries */
  uint64_t context_retains;    /* primary context retain counts, summed */
  uint64_t graphs;             /* cuGraphCreate */
  uint64_t graph_execs;        /* cuGraphInstantiateWithFlags */
} axrt_mock_cuda_objects_t;

/* Clears sticky errors, pending error injections and kernel faults, hidden
 * symbols (those of the control API; AXRT_MOCK_CUDA_HIDE still applies),
 * memory limit overrides, the peer, NVLink and NUMA settings below, call
 * counts, peer copy counts and host waits. Live objects, registered kernels
 * and the peer access contexts enabled stay. */
AXRT_MOCK_CUDA_EXPORT void axrt_mock_cuda_reset(void);

/* Makes one call of `function` (an AXRT_CUDA_SYMBOLS name such as
 * "cuMemAlloc") fail with `cuda_result`: the first call after `skip` more
 * calls of it have succeeded. The failing call does nothing else; a sticky
 * code (214, 700, 710, 714-719) also poisons the caller's current context.
 * One injection per function (a new one replaces it). Returns 0, or
 * CUDA_ERROR_INVALID_VALUE (1) for an unknown name or cuda_result 0. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_inject_error(const char* function, int cuda_result,
                                                      uint32_t skip);

/* Makes the next launch of the registered kernel `name` fault with
 * `cuda_result` (the launch call succeeds, the stream then fails and the
 * context is poisoned; no block runs). Returns 0 or CUDA_ERROR_INVALID_VALUE. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_fail_kernel(const char* name, int cuda_result);

/* Registers (or replaces) the kernel `name` with `param_count` parameters of
 * `param_sizes` bytes each (1, 2, 4 or 8). The parameters are laid out by C
 * rules, each at the next multiple of its size; the parameter buffer is last
 * offset + last size bytes, no tail padding, as the CUDA driver sees a kernel
 * with those parameters. Modules see the kernel from their next
 * cuModuleGetFunction / cuLibraryGetKernel on. At load, the mock registers
 * every kernel of the "axrt.cpu" library (buffers 8 bytes, scalars their
 * size; a CPU kernel's failure faults with CUDA_ERROR_LAUNCH_FAILED).
 * Returns 0 or CUDA_ERROR_INVALID_VALUE. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_register_kernel(const char* name,
                                                         axrt_mock_cuda_kernel_fn fn, void* user,
                                                         const uint32_t* param_sizes,
                                                         uint32_t param_count);

/* Makes cuGetProcAddress_v2 report `name` as missing (until reset). Meant to
 * be called before the driver loads. Returns 0 or CUDA_ERROR_INVALID_VALUE. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_hide_symbol(const char* name);

/* Caps the device's memory (cuMemAlloc bytes plus pool reserved bytes; each
 * rounded up to 256) at `bytes`, overriding AXRT_MOCK_CUDA_MEMORY_MB for the
 * limit (cuDeviceTotalMem still reports the configured size). May be called
 * before cuInit. Returns 0 or CUDA_ERROR_INVALID_VALUE for a negative device. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_set_memory_limit(int device, uint64_t bytes);

/* Calls of `function` (an AXRT_CUDA_SYMBOLS name or "cuGetProcAddress_v2")
 * since load or the last reset, failed ones included; 0 for unknown names. */
AXRT_MOCK_CUDA_EXPORT uint64_t axrt_mock_cuda_call_count(const char* function);

/* How often a call blocked the calling thread until work queued on the
 * device was done, since load or the last reset: cuStreamSynchronize,
 * cuEventSynchronize of a recorded event, cuCtxSynchronize, cuMemFree,
 * cuMemFreeHost and copies into pageable memory, whether they had to wait
 * or not. */
AXRT_MOCK_CUDA_EXPORT uint64_t axrt_mock_cuda_host_waits(void);

/* Of those, the ones that waited for the work of `stream`, a live stream of
 * cuStreamCreate (cuCtxSynchronize, cuMemFree and cuMemFreeHost count for
 * every stream they wait for); 0 for anything else. */
AXRT_MOCK_CUDA_EXPORT uint64_t axrt_mock_cuda_stream_host_waits(const void* stream);

/* Fills *objects with the counts of live objects. */
AXRT_MOCK_CUDA_EXPORT void axrt_mock_cuda_live_objects(axrt_mock_cuda_objects_t* objects);

/* The device's sticky error (0: none; also 0 for a device that does not
 * exist). */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_sticky_error(int device);

/* Whether devices `a` and `b` can access each other's memory (both ways):
 * what cuDeviceCanAccessPeer and CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED
 * answer. Every pair can until told otherwise. Returns 0, or
 * CUDA_ERROR_INVALID_VALUE for a negative device or a == b. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_set_peer_access(int a, int b, int supported);

/* CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED (when there is access) and
 * _PERFORMANCE_RANK of the pair `a`, `b` (both ways; defaults 1 and 0).
 * Returns 0 or CUDA_ERROR_INVALID_VALUE as above. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_set_peer_attributes(int a, int b, int native_atomics,
                                                             int performance_rank);

/* cuMemcpyPeerAsync calls since load or the last reset: with `direct`
 * nonzero, those whose stream's device had enabled access to the other
 * device (cuCtxEnablePeerAccess), else those that had not. */
AXRT_MOCK_CUDA_EXPORT uint64_t axrt_mock_cuda_peer_copies(int direct);

/* What CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID answers for `device` (default -1).
 * Read when the CUDA driver enumerates devices. Returns 0 or
 * CUDA_ERROR_INVALID_VALUE for a negative device. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_set_host_numa_node(int device, int node);

/* The NVML mock's active NVLinks between devices `a` and `b` (both ways),
 * or, with `b` = -1, from `a` to NVSwitches. Device a's links are numbered
 * peer by peer (by ordinal), switch links last. Returns 0 or
 * CUDA_ERROR_INVALID_VALUE. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_set_nvlinks(int a, int b, uint32_t count);

/* Poisons the context of `device` with the sticky `cuda_result` (214, 700,
 * 710, 714-719), as a faulting kernel would: from now on every call touching
 * it returns that error and its queued work is dropped. May be called from
 * any thread, host functions included (it is not a CUDA call). Returns 0, or
 * CUDA_ERROR_INVALID_VALUE for a code that is not sticky or a device that
 * does not exist. */
AXRT_MOCK_CUDA_EXPORT int axrt_mock_cuda_poison_device(int device, int cuda_result);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_H_ */
