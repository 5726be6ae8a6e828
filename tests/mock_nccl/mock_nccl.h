/* A mock of NCCL for testing axrt's "nccl" group backend without GPUs
 * (libaxrt_mock_nccl.so), over the mock CUDA driver (tests/mock_cuda).
 *
 * The library exports the NCCL entry points of AXRT_NCCL_SYMBOLS
 * (group/nccl_api.h), with their real names and C ABI, and the
 * axrt_mock_nccl_* control functions below. It links libaxrt_mock_cuda.so
 * (both are never unloaded), so that a test, the CUDA driver and this mock
 * share one mock CUDA.
 *
 * What is modelled
 *   ncclCommInitAll makes one communicator per listed mock CUDA device (a
 *   clique), each retaining its device's primary context until
 *   ncclCommDestroy or ncclCommAbort. ncclGetUniqueId makes an id unique in
 *   the process; ncclCommInitRank with it makes the caller's rank of a
 *   clique on the device whose primary context is current, returning once
 *   every rank called it (members as threads of one process), or failing
 *   with ncclSystemError after 30 s. A collective, ncclSend or ncclRecv
 *   queues the rank's part on the given stream as a host function
 *   (cuLaunchHostFunc, in the communicator's context); within
 *   ncclGroupStart/ncclGroupEnd (which nest, per thread) a communicator's
 *   calls are one host function, queued at the outermost ncclGroupEnd, and
 *   must use one stream (else ncclInvalidUsage). The host function runs on
 *   the stream's worker thread when the stream gets there and meets its
 *   peers: the n-th collective of every rank of the clique, or the n-th
 *   send from rank a to rank b with the n-th receive on b from a. The last
 *   rank to arrive at a collective computes every rank's result (device
 *   pointers are host addresses): sums, products, maxima and minima,
 *   integers wrapping, 16-bit floats in float32 rounded to nearest-even at
 *   every step, ranks in order. The others wait until it is done, or until
 *   their own communicator is aborted (ncclCommAbort wakes them; they then
 *   leave without a result). Parts queued on an aborted communicator do
 *   nothing. ncclCommGetAsyncError reports an injected error (below), or
 *   ncclUnhandledCudaError once the communicator's device is poisoned.
 *   ncclCommFinalize only marks a communicator finalized. Handles that are
 *   not live communicators are ncclInvalidArgument. Host functions dropped
 *   by a poisoned device stay reachable, so nothing leaks.
 *
 * Environment, read on every call of ncclGetVersion:
 *   AXRT_MOCK_NCCL_VERSION   its answer (default 22105: NCCL 2.21.5)
 *
 * Every control function is thread-safe. */
#ifndef AXRT_TESTS_MOCK_NCCL_MOCK_NCCL_H_
#define AXRT_TESTS_MOCK_NCCL_MOCK_NCCL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AXRT_MOCK_NCCL_EXPORT __attribute__((visibility("default")))

/* Faults for axrt_mock_nccl_inject_fault. In each, the part does not take
 * part in its collective, so its peers wait until they are aborted. */
enum {
  /* The part waits until its communicator is aborted (a hung kernel). */
  AXRT_MOCK_NCCL_HANG = 1,
  /* The communicator's asynchronous error becomes `code` (an ncclResult_t)
   * and the part waits until its communicator is aborted (a kernel stuck
   * after a network error). */
  AXRT_MOCK_NCCL_ASYNC_ERROR = 2,
  /* The part poisons its device with `code` (a sticky CUresult such as 700)
   * through axrt_mock_cuda_poison_device and returns (a faulting kernel). */
  AXRT_MOCK_NCCL_DEVICE_FAULT = 3,
};

/* Makes the next part that runs on a communicator of CUDA device `device`
 * fail with `fault`. One fault per device (a new one replaces it). Returns
 * 0, or 1 for an unknown fault or a negative device. */
AXRT_MOCK_NCCL_EXPORT int axrt_mock_nccl_inject_fault(int device, int fault, int code);

/* Calls of the NCCL entry point `function` since load or the last reset,
 * failed ones included; 0 for other names. */
AXRT_MOCK_NCCL_EXPORT uint64_t axrt_mock_nccl_call_count(const char* function);

/* Communicators made and not yet destroyed or aborted. */
AXRT_MOCK_NCCL_EXPORT uint64_t axrt_mock_nccl_live_comms(void);

/* Clears injected faults and call counts. Communicators stay. */
AXRT_MOCK_NCCL_EXPORT void axrt_mock_nccl_reset(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_TESTS_MOCK_NCCL_MOCK_NCCL_H_ */
