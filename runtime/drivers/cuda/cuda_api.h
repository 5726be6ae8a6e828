// The part of the CUDA Driver API that axrt uses, declared here from the
// published API so that the CUDA driver compiles without the CUDA toolkit and
// never links libcuda: every entry point is fetched at run time through
// cuGetProcAddress_v2 (runtime/drivers/cuda/cuda_symbols.h).
//
// AXRT_CUDA_SYMBOLS lists those entry points once, as
//   X(name, return type, parameter list, minimum CUDA version, required)
// The version is the `cudaVersion` handed to cuGetProcAddress: it pins the ABI
// of the function the driver returns (cuMemAlloc asked for at 12000 is the
// 64-bit cuMemAlloc_v2). Optional entry points may be missing from older
// drivers; the driver then takes its fallback path.
//
// The in-project mock driver (tests/mock_cuda) implements the same list.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_API_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_API_H_

#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUlib_st* CUlibrary;
typedef struct CUkern_st* CUkernel;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUarray_st* CUarray;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef void (*CUhostFn)(void* user_data);

// Results (CUresult values).
enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
  CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_CONTAINED = 226,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
  CUDA_ERROR_ASSERT = 710,
  CUDA_ERROR_TOO_MANY_PEERS = 711,
  CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  CUDA_ERROR_INVALID_PC = 718,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
  CUDA_ERROR_UNKNOWN = 999,
};

// cuGetProcAddress
enum : cuuint64_t { CU_GET_PROC_ADDRESS_DEFAULT = 0 };
typedef int CUdriverProcAddressQueryResult;
enum : CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* symbol_status);

typedef int CUdevice_attribute;
enum : CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120,
  // The host NUMA node closest to the device, -1 when the system has no
  // NUMA (CUDA 12.2 and later; older drivers refuse the attribute).
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
};

// cuDeviceGetP2PAttribute
typedef int CUdevice_P2PAttribute;
enum : CUdevice_P2PAttribute {
  CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK = 1,
  CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED = 2,
  CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED = 3,
};

typedef int CUpointer_attribute;
enum : CUpointer_attribute { CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2 };

typedef int CUmemorytype;
enum : CUmemorytype {
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_ARRAY = 3,
  CU_MEMORYTYPE_UNIFIED = 4,
};

enum : unsigned int {
  CU_STREAM_NON_BLOCKING = 0x1,
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_MEMHOSTALLOC_PORTABLE = 0x1,
  CU_MEMHOSTALLOC_DEVICEMAP = 0x2,
};

typedef struct CUDA_MEMCPY2D_st {
  size_t srcXInBytes;
  size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
} CUDA_MEMCPY2D;

// Memory pools.
typedef struct CUmemLocation_st {
  int type;  // CU_MEM_LOCATION_TYPE_*
  int id;
} CUmemLocation;
enum : int { CU_MEM_LOCATION_TYPE_DEVICE = 1, CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
typedef struct CUmemPoolProps_st {
  int allocType;    // CU_MEM_ALLOCATION_TYPE_PINNED
  int handleTypes;  // 0: none
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;  // 0: the system's default
  unsigned char reserved[56];
} CUmemPoolProps;
// cuMemPoolSetAccess
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_*
} CUmemAccessDesc;
enum : int { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };
typedef int CUmemPool_attribute;
enum : CUmemPool_attribute {
  // int, 0 or 1; each 1 by default.
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,  // cuuint64_t
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

// Modules, libraries, functions.
typedef int CUjit_option;
enum : CUjit_option {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};
typedef int CUlibraryOption;
typedef int CUfunction_attribute;
enum : CUfunction_attribute {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

// The special stream handles: the legacy default stream and the calling
// thread's default stream of the current context.
#define AXRT_CU_STREAM_LEGACY ((CUstream)0x1)
#define AXRT_CU_STREAM_PER_THREAD ((CUstream)0x2)

// Launches.
#define AXRT_CU_LAUNCH_PARAM_END ((void*)0x00)
#define AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01)
#define AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE ((void*)0x02)
typedef int CUlaunchAttributeID;
enum : CUlaunchAttributeID { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4 };
typedef union CUlaunchAttributeValue_union {
  char pad[64];
  struct {
    unsigned int x;
    unsigned int y;
    unsigned int z;
  } clusterDim;
} CUlaunchAttributeValue;
typedef struct CUlaunchAttribute_st {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

// Graphs. cuGraphAddKernelNode asked for at 12000 is cuGraphAddKernelNode_v2,
// which takes this (v2) layout of the kernel node parameters.
typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
  CUfunction func;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;  // launched when `func` is null
  CUcontext ctx;  // ignored when `func` is set
} CUDA_KERNEL_NODE_PARAMS;
typedef struct CUDA_MEMCPY3D_st {
  size_t srcXInBytes;
  size_t srcY;
  size_t srcZ;
  size_t srcLOD;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  void* reserved0;  // null
  size_t srcPitch;
  size_t srcHeight;
  size_t dstXInBytes;
  size_t dstY;
  size_t dstZ;
  size_t dstLOD;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  void* reserved1;  // null
  size_t dstPitch;
  size_t dstHeight;
  size_t WidthInBytes;
  size_t Height;
  size_t Depth;
} CUDA_MEMCPY3D;
typedef struct CUDA_MEMSET_NODE_PARAMS_st {
  CUdeviceptr dst;
  size_t pitch;  // unused when height is 1
  unsigned int value;
  unsigned int elementSize;  // 1, 2 or 4
  size_t width;              // in elements
  size_t height;
} CUDA_MEMSET_NODE_PARAMS;

}  // extern "C"

// X(name, return type, (parameters), cudaVersion, required)
#define AXRT_CUDA_SYMBOLS(X)                                                                      \
  X(cuInit, CUresult, (unsigned int flags), 2000, true)                                           \
  X(cuDriverGetVersion, CUresult, (int* version), 2020, true)                                     \
  X(cuGetErrorName, CUresult, (CUresult error, const char** name), 6000, true)                    \
  X(cuGetErrorString, CUresult, (CUresult error, const char** text), 6000, true)                  \
  X(cuDeviceGetCount, CUresult, (int* count), 2000, true)                                         \
  X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal), 2000, true)                          \
  X(cuDeviceGetName, CUresult, (char* name, int length, CUdevice device), 2000, true)             \
  X(cuDeviceGetAttribute, CUresult, (int* value, CUdevice_attribute attribute, CUdevice device),  \
    2000, true)                                                                                   \
  X(cuDeviceTotalMem, CUresult, (size_t * bytes, CUdevice device), 3020, true)                    \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * context, CUdevice device), 7000, true)       \
  X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice device), 11000, true)                          \
  X(cuCtxGetCurrent, CUresult, (CUcontext * context), 4000, true)                                 \
  X(cuCtxSetCurrent, CUresult, (CUcontext context), 4000, true)                                   \
  X(cuCtxSynchronize, CUresult, (void), 2000, true)                                               \
  X(cuMemGetInfo, CUresult, (size_t * free_bytes, size_t * total_bytes), 3020, true)              \
  X(cuMemAlloc, CUresult, (CUdeviceptr * pointer, size_t size), 3020, true)                       \
  X(cuMemFree, CUresult, (CUdeviceptr pointer), 3020, true)                                       \
  X(cuMemHostAlloc, CUresult, (void** pointer, size_t size, unsigned int flags), 2020, true)      \
  X(cuMemFreeHost, CUresult, (void* pointer), 2000, true)                                         \
  X(cuMemHostGetDevicePointer, CUresult,                                                          \
    (CUdeviceptr * device_pointer, void* host_pointer, unsigned int flags), 3020, true)           \
  X(cuPointerGetAttribute, CUresult,                                                              \
    (void* data, CUpointer_attribute attribute, CUdeviceptr pointer), 4000, true)                 \
  X(cuMemcpyAsync, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream),    \
    4000, true)                                                                                   \
  X(cuMemcpyHtoDAsync, CUresult,                                                                  \
    (CUdeviceptr dst, const void* src, size_t size, CUstream stream), 3020, true)                 \
  X(cuMemcpyDtoHAsync, CUresult, (void* dst, CUdeviceptr src, size_t size, CUstream stream),      \
    3020, true)                                                                                   \
  X(cuMemcpy2DAsync, CUresult, (const CUDA_MEMCPY2D* copy, CUstream stream), 3020, true)          \
  X(cuMemsetD8Async, CUresult,                                                                    \
    (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream), 3020, true)            \
  X(cuMemsetD16Async, CUresult,                                                                   \
    (CUdeviceptr dst, unsigned short value, size_t count, CUstream stream), 3020, true)           \
  X(cuMemsetD32Async, CUresult,                                                                   \
    (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream), 3020, true)             \
  X(cuMemsetD2D32Async, CUresult,                                                                 \
    (CUdeviceptr dst, size_t pitch, unsigned int value, size_t width, size_t height,              \
     CUstream stream),                                                                            \
    3020, true)                                                                                   \
  X(cuStreamCreate, CUresult, (CUstream * stream, unsigned int flags), 2000, true)                \
  X(cuStreamDestroy, CUresult, (CUstream stream), 4000, true)                                     \
  X(cuStreamSynchronize, CUresult, (CUstream stream), 2000, true)                                 \
  X(cuStreamQuery, CUresult, (CUstream stream), 2000, true)                                       \
  X(cuStreamWaitEvent, CUresult, (CUstream stream, CUevent event, unsigned int flags), 3020,      \
    true)                                                                                         \
  X(cuLaunchHostFunc, CUresult, (CUstream stream, CUhostFn fn, void* user_data), 10000, true)     \
  X(cuEventCreate, CUresult, (CUevent * event, unsigned int flags), 2000, true)                   \
  X(cuEventDestroy, CUresult, (CUevent event), 4000, true)                                        \
  X(cuEventRecord, CUresult, (CUevent event, CUstream stream), 2000, true)                        \
  X(cuEventQuery, CUresult, (CUevent event), 2000, true)                                          \
  X(cuEventSynchronize, CUresult, (CUevent event), 2000, true)                                    \
  X(cuEventElapsedTime, CUresult, (float* milliseconds, CUevent start, CUevent end), 2000, true)  \
  X(cuModuleLoadDataEx, CUresult,                                                                 \
    (CUmodule * module, const void* image, unsigned int count, CUjit_option* options,             \
     void** values),                                                                              \
    2010, true)                                                                                   \
  X(cuModuleUnload, CUresult, (CUmodule module), 2000, true)                                      \
  X(cuModuleGetFunction, CUresult, (CUfunction * function, CUmodule module, const char* name),    \
    2000, true)                                                                                   \
  X(cuFuncGetAttribute, CUresult,                                                                 \
    (int* value, CUfunction_attribute attribute, CUfunction function), 2020, true)                \
  X(cuFuncSetAttribute, CUresult,                                                                 \
    (CUfunction function, CUfunction_attribute attribute, int value), 9000, true)                 \
  X(cuLaunchKernel, CUresult,                                                                     \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
     unsigned int block_x, unsigned int block_y, unsigned int block_z,                            \
     unsigned int shared_bytes, CUstream stream, void** params, void** extra),                    \
    4000, true)                                                                                   \
  X(cuMemPoolCreate, CUresult, (CUmemoryPool * pool, const CUmemPoolProps* props), 11020, false)  \
  X(cuMemPoolDestroy, CUresult, (CUmemoryPool pool), 11020, false)                                \
  X(cuMemPoolSetAttribute, CUresult,                                                              \
    (CUmemoryPool pool, CUmemPool_attribute attribute, void* value), 11020, false)                \
  X(cuMemPoolGetAttribute, CUresult,                                                              \
    (CUmemoryPool pool, CUmemPool_attribute attribute, void* value), 11020, false)                \
  X(cuMemPoolTrimTo, CUresult, (CUmemoryPool pool, size_t keep_bytes), 11020, false)              \
  X(cuMemAllocFromPoolAsync, CUresult,                                                            \
    (CUdeviceptr * pointer, size_t size, CUmemoryPool pool, CUstream stream), 11020, false)       \
  X(cuMemFreeAsync, CUresult, (CUdeviceptr pointer, CUstream stream), 11020, false)               \
  X(cuLaunchKernelEx, CUresult,                                                                   \
    (const CUlaunchConfig* config, CUfunction function, void** params, void** extra), 11060,      \
    false)                                                                                        \
  X(cuLibraryLoadData, CUresult,                                                                  \
    (CUlibrary * library, const void* image, CUjit_option* jit_options, void** jit_values,        \
     unsigned int jit_count, CUlibraryOption* library_options, void** library_values,             \
     unsigned int library_count),                                                                 \
    12000, false)                                                                                 \
  X(cuLibraryUnload, CUresult, (CUlibrary library), 12000, false)                                 \
  X(cuLibraryGetKernel, CUresult, (CUkernel * kernel, CUlibrary library, const char* name),       \
    12000, false)                                                                                 \
  X(cuKernelGetFunction, CUresult, (CUfunction * function, CUkernel kernel), 12000, false)        \
  X(cuFuncGetParamInfo, CUresult,                                                                 \
    (CUfunction function, size_t index, size_t* offset, size_t* size), 12040, false)             \
  X(cuDeviceGetPCIBusId, CUresult, (char* bus_id, int length, CUdevice device), 4010, false)      \
  X(cuDeviceCanAccessPeer, CUresult, (int* can_access, CUdevice device, CUdevice peer), 4000,     \
    false)                                                                                        \
  X(cuDeviceGetP2PAttribute, CUresult,                                                            \
    (int* value, CUdevice_P2PAttribute attribute, CUdevice source, CUdevice destination), 8000,  \
    false)                                                                                        \
  X(cuCtxEnablePeerAccess, CUresult, (CUcontext peer, unsigned int flags), 4000, false)           \
  X(cuMemcpyPeerAsync, CUresult,                                                                  \
    (CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context, size_t size, \
     CUstream stream),                                                                            \
    4000, false)                                                                                  \
  X(cuMemPoolSetAccess, CUresult,                                                                 \
    (CUmemoryPool pool, const CUmemAccessDesc* descriptors, size_t count), 11020, false)          \
  X(cuGraphCreate, CUresult, (CUgraph * graph, unsigned int flags), 10000, false)                 \
  X(cuGraphDestroy, CUresult, (CUgraph graph), 10000, false)                                      \
  X(cuGraphAddKernelNode, CUresult,                                                               \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* dependencies,                          \
     size_t dependency_count, const CUDA_KERNEL_NODE_PARAMS* params),                             \
    12000, false)                                                                                 \
  X(cuGraphAddMemcpyNode, CUresult,                                                               \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* dependencies,                          \
     size_t dependency_count, const CUDA_MEMCPY3D* copy, CUcontext context),                      \
    10000, false)                                                                                 \
  X(cuGraphAddMemsetNode, CUresult,                                                               \
    (CUgraphNode * node, CUgraph graph, const CUgraphNode* dependencies,                          \
     size_t dependency_count, const CUDA_MEMSET_NODE_PARAMS* memset, CUcontext context),          \
    10000, false)                                                                                 \
  X(cuGraphInstantiateWithFlags, CUresult,                                                        \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags), 11040, false)                  \
  X(cuGraphLaunch, CUresult, (CUgraphExec exec, CUstream stream), 10000, false)                   \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec exec), 10000, false)

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_API_H_
