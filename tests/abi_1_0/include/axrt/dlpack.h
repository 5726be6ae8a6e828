/* axrt DLPack exchange: tensors handed to and taken from other frameworks
 * without copying, as DLPack managed tensors.
 *
 * This header includes the system's <dlpack/dlpack.h> (any version from 0.6
 * on). When that header predates DLPack 1.0 (it does not define
 * DLPACK_MAJOR_VERSION), the 1.x declarations axrt uses are declared here
 * with the layout the DLPack specification gives them: DLPackVersion,
 * DLManagedTensorVersioned and the DLPACK_FLAG_BITMASK_* flags. Data type
 * codes added after 0.6 are named AXRT_DL_* below, whatever the header's
 * version, so that code using them compiles against either.
 *
 * axrt implements DLPack 1.1 (AXRT_DLPACK_MAJOR_VERSION.MINOR): versioned
 * exports carry version {1, 1}.
 *
 * Devices
 *   CPU memory                              kDLCPU, device_id 0 (cpu:0)
 *   CUDA device-local memory of cuda:N      kDLCUDA, device_id N
 *   host-pinned memory of a CUDA device     kDLCUDAHost, device_id 0
 *   Imports map the same way back, except that kDLCUDAHost memory, being
 *   page-locked host memory, becomes a host-pinned tensor on cpu:0 (its id
 *   is ignored). Other DLPack device types (OpenCL, ROCm, CUDA managed
 *   memory, ...) are UNIMPLEMENTED; a device id this instance has no device
 *   for is NOT_FOUND.
 *
 * Element types (lanes is always 1; other lanes are UNIMPLEMENTED)
 *   bool                         AXRT_DL_BOOL, 8 bits
 *   int2/4/8/16/32/64            kDLInt, 2/4/8/16/32/64 bits
 *   uint2/4/8/16/32/64           kDLUInt, 2/4/8/16/32/64 bits
 *   f16, f32, f64                kDLFloat, 16/32/64 bits
 *   bf16                         kDLBfloat, 16 bits
 *   fp8 e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu (ue8m0)
 *                                AXRT_DL_FLOAT8_*, 8 bits
 *   fp4 e2m1                     AXRT_DL_FLOAT4_E2M1FN, 4 bits
 *   Sub-byte elements are packed, element 0 in the low bits of byte 0 (as
 *   DLPack and axrt both lay them out), and such tensors must be contiguous.
 *   Anything else (complex, kDLFloat 8, the other fp8 and fp6 codes) is
 *   UNIMPLEMENTED.
 *
 * Layout
 *   An export's `data` is the address of the first byte of the buffer (or
 *   view) the tensor views (the host address for host memory, the device
 *   address for CUDA device memory) and `byte_offset` the tensor's byte
 *   offset within that buffer, so that `data + byte_offset` is element 0 and
 *   `data` is as aligned as the buffer. A tensor without elements exports
 *   `data` NULL and `byte_offset` 0. `shape` and `strides`
 *   (in elements) are always filled and live in the managed tensor's own
 *   allocation, as long as it does.
 *   Imports honour `byte_offset` and `strides`; NULL strides mean compact
 *   row-major. Negative strides are UNIMPLEMENTED (axrt strides are
 *   non-negative), except on dimensions of extent 0 or 1 (where they
 *   address nothing). The imported tensor's buffer covers exactly the bytes
 *   its elements span, starting at element 0.
 *
 * Lifetime
 *   An export holds a reference to the tensor (and so to its buffer and
 *   memory) until its deleter runs. Call the deleter exactly once; it may be
 *   called from any thread. Memory given back early with
 *   axrt_stream_deallocate_buffer() is gone whatever exports exist, as for
 *   views.
 *   An import owns the managed tensor from a successful return on, and
 *   calls its deleter (when not NULL) exactly once, when the tensor's memory
 *   is released: when the last reference to the tensor, to its buffer
 *   (axrt_tensor_get_buffer) and to views of that buffer goes, or when
 *   axrt_stream_deallocate_buffer() returns the buffer in stream order. The
 *   deleter may run on any thread, a stream's included. A failed import
 *   leaves the managed tensor with the caller and calls nothing.
 *   Queued work that reads or writes the memory is ordered by the caller,
 *   as for any buffer: DLPack exchange does not synchronise streams. For
 *   the DLPack stream protocol, record an event behind the producer's work
 *   and pass the consumer's stream to axrt_event_enqueue_native_wait()
 *   (event.h).
 *   The functions below borrow `tensor` and `instance` (an export takes its
 *   own reference) and are thread-safe.
 *
 * Read-only
 *   A tensor can be read-only (AXRT_TENSOR_FLAG_READ_ONLY of
 *   axrt_tensor_info_t): a versioned import with DLPACK_FLAG_BITMASK_READ_ONLY
 *   makes one, and axrt_function_invoke() refuses it as an output. Versioned
 *   exports set the flag for read-only tensors and when asked to. The flag
 *   belongs to the tensor handle: other tensors made over its buffer, and
 *   copies into that buffer, are not checked. */
#ifndef AXRT_DLPACK_H_
#define AXRT_DLPACK_H_

#include <dlpack/dlpack.h>

#include "axrt/base.h"
#include "axrt/device.h"
#include "axrt/executable.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* DLPack 1.x declarations for pre-1.0 headers                             */
/* ---------------------------------------------------------------------- */

/* The DLPack version axrt's versioned exports carry. */
#define AXRT_DLPACK_MAJOR_VERSION 1
#define AXRT_DLPACK_MINOR_VERSION 1

#ifndef DLPACK_MAJOR_VERSION
/* A DLPack ABI version: a different major changes the layout of
 * DLManagedTensorVersioned after `flags`; minors add values. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* A managed tensor of DLPack 1.x. `deleter(self)` (may be NULL) frees it and
 * what it keeps alive. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif /* DLPACK_MAJOR_VERSION */

/* Bits of DLManagedTensorVersioned.flags. */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
/* The consumer must not write the tensor's memory. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
/* The producer made a copy that the consumer alone uses. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
/* Sub-byte elements take a byte each instead of being packed (DLPack 1.1);
 * axrt refuses such tensors. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)
#endif

/* Values of DLDataType.code added after DLPack 0.6 (bool in 1.0, the
 * others in 1.1), under axrt names so that they never clash with a
 * header's own enumerators. axrt maps only those its table above lists. */
enum {
  AXRT_DL_BOOL = 6,
  AXRT_DL_FLOAT8_E3M4 = 7,
  AXRT_DL_FLOAT8_E4M3 = 8,
  AXRT_DL_FLOAT8_E4M3B11FNUZ = 9,
  AXRT_DL_FLOAT8_E4M3FN = 10,
  AXRT_DL_FLOAT8_E4M3FNUZ = 11,
  AXRT_DL_FLOAT8_E5M2 = 12,
  AXRT_DL_FLOAT8_E5M2FNUZ = 13,
  AXRT_DL_FLOAT8_E8M0FNU = 14,
  AXRT_DL_FLOAT6_E2M3FN = 15,
  AXRT_DL_FLOAT6_E3M2FN = 16,
  AXRT_DL_FLOAT4_E2M1FN = 17,
};

/* ---------------------------------------------------------------------- */
/* Export and import                                                       */
/* ---------------------------------------------------------------------- */

typedef uint32_t axrt_dlpack_flags_t;
enum {
  AXRT_DLPACK_FLAG_NONE = 0,
  /* Mark the export read-only (DLPACK_FLAG_BITMASK_READ_ONLY) even when the
   * tensor is not. */
  AXRT_DLPACK_FLAG_READ_ONLY = 1u << 0,
};

/* Exports `tensor` without copying as a DLPack 1.1 managed tensor, written
 * to `*out`. Its flags carry DLPACK_FLAG_BITMASK_READ_ONLY when the tensor
 * is read-only or `flags` has AXRT_DLPACK_FLAG_READ_ONLY. The result holds a
 * reference to the tensor (and so to its memory) until the caller, or the
 * consumer it hands the result to, calls its deleter, exactly once.
 * UNIMPLEMENTED for unknown `flags` bits and for devices DLPack exchange
 * does not cover; FAILED_PRECONDITION for a deallocated buffer. */
AXRT_API axrt_status_t axrt_tensor_export_dlpack_versioned(
    axrt_tensor_t tensor, axrt_dlpack_flags_t flags, DLManagedTensorVersioned** out);

/* As axrt_tensor_export_dlpack_versioned() without flags, as a legacy
 * (pre-1.0) DLManagedTensor for consumers that do not take the versioned
 * one. The legacy form cannot say that a tensor is read-only: a read-only
 * tensor exports as well, and the consumer is trusted not to write it. */
AXRT_API axrt_status_t axrt_tensor_export_dlpack(axrt_tensor_t tensor, DLManagedTensor** out);

/* Imports a producer's DLPack 1.x managed tensor without copying, as a
 * tensor on the device of `instance` that `managed->dl_tensor.device` names,
 * written to `*out`; read-only when `managed->flags` has
 * DLPACK_FLAG_BITMASK_READ_ONLY. Any 1.x minor is taken; another major is
 * UNIMPLEMENTED (and no field past `flags` is read). On success the tensor
 * owns `managed` and calls its deleter once, when the tensor's memory is
 * released (see Lifetime above); on failure ownership stays with the caller
 * and nothing was called. Errors name the field: UNIMPLEMENTED for element
 * types, lanes, device types and layouts axrt cannot represent, NOT_FOUND
 * for a device the instance lacks, INVALID_ARGUMENT for malformed tensors
 * (negative extents, NULL data or shape, a span that overflows). */
AXRT_API axrt_status_t axrt_tensor_import_dlpack_versioned(axrt_instance_t instance,
                                                           DLManagedTensorVersioned* managed,
                                                           axrt_tensor_t* out);

/* As axrt_tensor_import_dlpack_versioned() for a legacy (pre-1.0)
 * DLManagedTensor, which carries no flags: the tensor is writable. */
AXRT_API axrt_status_t axrt_tensor_import_dlpack(axrt_instance_t instance,
                                                 DLManagedTensor* managed, axrt_tensor_t* out);

/* Writes to `*out_dtype` the DLPack element type of `dtype`, as exports
 * describe it (the table under Element types above; lanes 1): for a
 * producer that lends its own memory through
 * axrt_tensor_import_dlpack_versioned(). INVALID_ARGUMENT for
 * AXRT_DTYPE_INVALID and values this library does not know. Thread-safe. */
AXRT_API axrt_status_t axrt_dtype_to_dlpack(axrt_dtype_t dtype, DLDataType* out_dtype);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_DLPACK_H_ */
