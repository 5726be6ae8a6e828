// The part of NCCL's C API that the "nccl" backend uses, declared here from
// NCCL's documented ABI (nccl.h) so that axrt builds without NCCL: the
// library is loaded at run time (group/nccl_api.cc) and never linked.
//
// AXRT_NCCL_SYMBOLS lists the entry points once, as
//   X(name, return type, parameter list, required)
// An optional entry point may be missing from older releases; the backend
// then does without it. The in-project mock (tests/mock_nccl) exports the
// same list.
#ifndef AXRT_GROUP_NCCL_API_H_
#define AXRT_GROUP_NCCL_API_H_

#include <stddef.h>

#include <string>

extern "C" {

// Opaque handles: a communicator, and a CUDA stream (the CUstream an axrt
// stream of a CUDA device hands out).
typedef struct ncclComm* ncclComm_t;
// NCCL's unique id: what rank 0 makes and every rank passes to
// ncclCommInitRank (its bytes, exchanged through the rendezvous).
#define AXRT_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[AXRT_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct CUstream_st* cudaStream_t;

// The C enums of nccl.h, which have the size of an int.
typedef int ncclResult_t;
enum : ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
};

typedef int ncclDataType_t;
enum : ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

typedef int ncclRedOp_t;
enum : ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };

}  // extern "C"

// NCCL_VERSION(major, minor, patch) of nccl.h: releases from 2.9 on count
// minors by hundreds, older ones by thousands.
constexpr int axrt_nccl_version_code(int major, int minor, int patch) {
  return major <= 2 && minor <= 8 ? major * 1000 + minor * 100 + patch
                                  : major * 10000 + minor * 100 + patch;
}

// X(name, return type, (parameters), required)
#define AXRT_NCCL_SYMBOLS(X)                                                                     \
  X(ncclGetVersion, ncclResult_t, (int* version), true)                                          \
  X(ncclGetErrorString, const char*, (ncclResult_t result), true)                                \
  X(ncclGetLastError, const char*, (ncclComm_t comm), false)                                     \
  X(ncclCommInitAll, ncclResult_t, (ncclComm_t * comms, int count, const int* devices), true)    \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId * id), false)                                   \
  X(ncclCommInitRank, ncclResult_t, (ncclComm_t * comm, int count, ncclUniqueId id, int rank),   \
    false)                                                                                       \
  X(ncclCommFinalize, ncclResult_t, (ncclComm_t comm), false)                                    \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm), true)                                      \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t comm), true)                                        \
  X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t comm, ncclResult_t * async_error), true)    \
  X(ncclGroupStart, ncclResult_t, (void), true)                                                  \
  X(ncclGroupEnd, ncclResult_t, (void), true)                                                    \
  X(ncclAllReduce, ncclResult_t,                                                                 \
    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,            \
     ncclComm_t comm, cudaStream_t stream),                                                      \
    true)                                                                                        \
  X(ncclAllGather, ncclResult_t,                                                                 \
    (const void* send, void* recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,      \
     cudaStream_t stream),                                                                       \
    true)                                                                                        \
  X(ncclReduceScatter, ncclResult_t,                                                             \
    (const void* send, void* recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,       \
     ncclComm_t comm, cudaStream_t stream),                                                      \
    true)                                                                                        \
  X(ncclBroadcast, ncclResult_t,                                                                 \
    (const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm, \
     cudaStream_t stream),                                                                       \
    true)                                                                                        \
  X(ncclSend, ncclResult_t,                                                                      \
    (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,             \
     cudaStream_t stream),                                                                       \
    true)                                                                                        \
  X(ncclRecv, ncclResult_t,                                                                      \
    (void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,                   \
     cudaStream_t stream),                                                                       \
    true)

namespace axrt::group {

// The oldest NCCL the backend takes: 2.10 brought bfloat16.
constexpr int kMinNcclVersion = axrt_nccl_version_code(2, 10, 0);

// The library and its entry points, loaded once per process and never
// unloaded (NCCL's own threads may still run in it at exit).
struct NcclApi {
#define AXRT_NCCL_DECLARE_SYMBOL(name, ret, params, required) ret(*name) params = nullptr;
  AXRT_NCCL_SYMBOLS(AXRT_NCCL_DECLARE_SYMBOL)
#undef AXRT_NCCL_DECLARE_SYMBOL
  std::string path;  // what was loaded
  int version = 0;   // ncclGetVersion's code
  std::string version_text;  // "2.21.5"

  // "unhandled cuda error (run with NCCL_DEBUG=INFO for details); last
  // error: ..." for `result`, with the communicator's last error when the
  // library has ncclGetLastError and `comm` is not null.
  std::string describe(ncclResult_t result, ncclComm_t comm = nullptr) const;
};

// Loads NCCL (AXRT_NCCL_LIBRARY, else libnccl.so.2) at the first call;
// nullptr with `*reason` set when it is missing or unusable.
const NcclApi* nccl_api(std::string* reason);

}  // namespace axrt::group

#endif  // AXRT_GROUP_NCCL_API_H_
