/* axrt: a host-side accelerator runtime. This umbrella header includes the
 * whole public C API; nothing outside include/axrt/ is API.
 *
 * Ownership
 *   - Handles (axrt_instance_t, axrt_device_t, axrt_buffer_t, axrt_stream_t,
 *     axrt_event_t, ...) are reference-counted. Every handle a function
 *     writes to an `out_*` parameter is a new reference owned by the caller,
 *     who drops it with the matching axrt_<object>_release(). _retain adds a
 *     reference; _release of NULL is a no-op.
 *   - Handles passed as arguments are borrowed for the duration of the call.
 *     An object that needs one longer (a view needs its buffer, a queued
 *     copy its buffers) retains it itself, so callers may release their
 *     references as soon as a call returns.
 *   - Objects keep what they depend on alive: a buffer its device, a device
 *     its instance. Release order does not matter.
 *   - Pointers to caller memory (options, host copy sources) are borrowed for
 *     the call, except host pointers of queued copies, which must stay valid
 *     until the copy completes.
 *
 * Errors
 *   Every fallible function returns axrt_status_t: NULL on success, or an
 *   owned status (code + message naming the cause and the object) that the
 *   caller frees with axrt_status_free(). Out-parameters are written only on
 *   success. The library never aborts on bad input and never throws across
 *   this boundary. Codes used throughout:
 *     INVALID_ARGUMENT     NULL or mistyped handles and pointers, bad values,
 *                          cyclic or overlong extension chains
 *     OUT_OF_RANGE         offsets and lengths outside a buffer or a count
 *     FAILED_PRECONDITION  released handles, deallocated buffers, events
 *                          never recorded, incomplete events
 *     UNIMPLEMENTED        extension types, or fields of a newer struct, that
 *                          this library does not take
 *     RESOURCE_EXHAUSTED   out of device or host memory
 *   Handles are not pointers: a released handle, or a handle of another kind
 *   (a stream passed as a buffer), is reported by name rather than
 *   dereferenced, until its slot has been reused 2^32 times. A device handle
 *   stays valid for as long as its instance lives, even after its own
 *   references are released. _retain and _release cannot report errors; they
 *   ignore NULL, released and mistyped handles.
 *
 * Thread safety
 *   Unless a function says otherwise, every function may be called from any
 *   thread at any time, and handles may be shared between threads. Release
 *   racing with use of the same reference is the caller's bug.
 *
 * Structs and versions: see base.h. */
#ifndef AXRT_AXRT_H_
#define AXRT_AXRT_H_

#include "axrt/base.h"
#include "axrt/device.h"
#include "axrt/event.h"
#include "axrt/executable.h"
#include "axrt/format.h"
#include "axrt/group.h"
#include "axrt/kernel_abi.h"
#include "axrt/memory.h"
#include "axrt/serving.h"
#include "axrt/stream.h"
#include "axrt/trace.h"

/* DLPack exchange needs the system's <dlpack/dlpack.h>: included when the
 * compiler finds it (define AXRT_NO_DLPACK to leave it out); elsewhere
 * include "axrt/dlpack.h" directly. */
#if !defined(AXRT_NO_DLPACK) && defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#include "axrt/dlpack.h"
#endif
#endif

#endif /* AXRT_AXRT_H_ */
