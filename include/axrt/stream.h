/* axrt streams: in-order queues of copies, fills, host functions, event
 * records and waits, and stream-ordered allocations.
 *
 * Every axrt_stream_* function that enqueues returns as soon as the work is
 * queued (or, for small work on an idle stream, done); the work itself runs
 * after everything enqueued earlier on the same stream has completed, and
 * before anything enqueued later starts. Argument errors (bad handles, a
 * buffer the operation does not take) are returned at once and enqueue
 * nothing; ranges that do not fit a buffer are OUT_OF_RANGE. Fills, copies
 * from and to host memory and 2-D copies with a host side take the stream's
 * own buffers and host-pinned buffers of any device; copies between buffers
 * take the buffers of any device of the stream's instance. Copies and fills
 * of zero bytes (including 2-D copies of zero width or height) are valid and
 * do nothing.
 * Enqueueing onto a failed stream is not an error: the work completes with
 * the stream's failure.
 *
 * A failed operation fails its stream: the failure is sticky, and every
 * later operation completes with that same status without running (host
 * functions still run, to release what they own, and are told the status).
 * axrt_stream_synchronize() and axrt_stream_query() report it. A failed
 * stream stays failed; create a new one to go on.
 *
 * Enqueueing onto one stream from several threads is safe; the order between
 * the threads is whatever order the calls happen in. Host pointers passed to
 * copies must stay valid until the copy completes. */
#ifndef AXRT_STREAM_H_
#define AXRT_STREAM_H_

#include "axrt/base.h"
#include "axrt/device.h"
#include "axrt/event.h"
#include "axrt/memory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_stream_s* axrt_stream_t;

typedef struct axrt_stream_options_t {
  size_t struct_size;
  const void* next; /* may carry an axrt_debug_label_t */
} axrt_stream_options_t;

#define AXRT_STREAM_OPTIONS_INIT { sizeof(axrt_stream_options_t), NULL }

/* Creates a stream on `device`; `options` may be NULL. The caller owns
 * `*out_stream`. */
AXRT_API axrt_status_t axrt_stream_create(axrt_device_t device,
                                          const axrt_stream_options_t* options,
                                          axrt_stream_t* out_stream);

/* Adds a reference to `stream`. NULL is a no-op. */
AXRT_API void axrt_stream_retain(axrt_stream_t stream);

/* Drops a reference to `stream`. NULL is a no-op. Dropping the last one lets
 * the queued work finish, then frees the stream; it does not wait. */
AXRT_API void axrt_stream_release(axrt_stream_t stream);

/* Writes a new reference to the device `stream` belongs to. The caller
 * releases it. Borrows `stream`; thread-safe. */
AXRT_API axrt_status_t axrt_stream_get_device(axrt_stream_t stream,
                                              axrt_device_t* out_device);

/* Copies `length` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
 * The buffers may belong to any devices of the stream's instance (a buffer
 * of another instance is INVALID_ARGUMENT): a copy between two devices (a
 * peer copy) runs on the stream like any other copy, directly when the
 * devices can reach each other's memory (axrt_device_query_peer), else
 * staged through host memory. UNIMPLEMENTED when there is no such path:
 * both sides are device memory that no host pointer reaches, of devices
 * whose drivers cannot copy between them (docs/multi-device.md). The stream
 * orders it only against its own work: make it wait for the other device's
 * work with an event (axrt_stream_wait_event) before reading what that
 * device wrote, and make the other device wait for the stream before it
 * uses what the copy wrote. It counts as a copy of the stream's device
 * (axrt_device_query_stream_statistics). The ranges may not overlap when
 * the buffers share an allocation. Retains both buffers until done. */
AXRT_API axrt_status_t axrt_stream_copy_buffer(axrt_stream_t stream,
                                               axrt_buffer_t src,
                                               uint64_t src_offset,
                                               axrt_buffer_t dst,
                                               uint64_t dst_offset,
                                               uint64_t length);

/* Copies `length` bytes from host memory at `src` to `dst` at `dst_offset`.
 * `src` may be pageable; it is read when the copy runs. */
AXRT_API axrt_status_t axrt_stream_copy_from_host(axrt_stream_t stream,
                                                  const void* src,
                                                  axrt_buffer_t dst,
                                                  uint64_t dst_offset,
                                                  uint64_t length);

/* Copies `length` bytes from `src` at `src_offset` to host memory at `dst`.
 * `dst` holds the bytes once the copy completes (see
 * axrt_stream_synchronize() and events). */
AXRT_API axrt_status_t axrt_stream_copy_to_host(axrt_stream_t stream,
                                                axrt_buffer_t src,
                                                uint64_t src_offset,
                                                void* dst, uint64_t length);

/* One side of a 2-D copy: either a buffer (with `host_pointer` NULL) or host
 * memory (with `buffer` NULL). Row r starts at `offset + r * pitch` bytes. */
typedef struct axrt_copy_2d_endpoint_t {
  axrt_buffer_t buffer;
  void* host_pointer;
  uint64_t offset;
  uint64_t pitch; /* bytes between row starts; at least `width` when more
                     than one row is copied, ignored otherwise */
} axrt_copy_2d_endpoint_t;

typedef struct axrt_copy_2d_t {
  size_t struct_size;
  const void* next;
  axrt_copy_2d_endpoint_t src;
  axrt_copy_2d_endpoint_t dst;
  uint64_t width;  /* bytes per row */
  uint64_t height; /* rows */
} axrt_copy_2d_t;

#define AXRT_COPY_2D_INIT \
  { sizeof(axrt_copy_2d_t), NULL, {NULL, NULL, 0, 0}, {NULL, NULL, 0, 0}, 0, 0 }

/* Copies a `width` x `height` byte rectangle between two strided layouts
 * (buffer to buffer, host to buffer or buffer to host; at least one side is
 * a buffer). Every row of both sides must lie inside its buffer. Buffer to
 * buffer, the buffers may belong to any devices of the stream's instance,
 * as in axrt_stream_copy_buffer(); with host memory on one side, the buffer
 * is the stream's device's or host-pinned. */
AXRT_API axrt_status_t axrt_stream_copy_2d(axrt_stream_t stream,
                                           const axrt_copy_2d_t* copy);

/* Fills `length` bytes of `buffer` from `offset` by repeating the
 * `pattern_size`-byte pattern at `pattern` (1, 2, 4 or 8 bytes, copied at
 * the call). `offset` and `length` must be multiples of `pattern_size`. */
AXRT_API axrt_status_t axrt_stream_fill_buffer(axrt_stream_t stream,
                                               axrt_buffer_t buffer,
                                               uint64_t offset,
                                               uint64_t length,
                                               const void* pattern,
                                               size_t pattern_size);

/* A host function run in stream order. `stream_status` is NULL, or the
 * stream's failure (borrowed) when the stream has failed. Returning a
 * non-NULL status fails the stream with it; the runtime takes ownership.
 * Host functions must not call axrt functions that block on streams or
 * events (they would wait on themselves). */
typedef axrt_status_t (*axrt_host_func_t)(void* user_data,
                                          axrt_status_t stream_status);

/* Enqueues `func(user_data, ...)`. It runs exactly once, even when the
 * stream has failed, on a runtime thread or on a thread blocked in
 * axrt_stream_synchronize() of this stream (which, rather than wake a
 * sleeping stream worker, may run the queued work itself); never on the
 * calling thread within this call. */
AXRT_API axrt_status_t axrt_stream_launch_host_func(axrt_stream_t stream,
                                                    axrt_host_func_t func,
                                                    void* user_data);

/* Records `event` at this point of `stream`: it completes when everything
 * enqueued before it has. `event` must belong to the stream's device.
 * Retains `event` until done. */
AXRT_API axrt_status_t axrt_stream_record_event(axrt_stream_t stream,
                                                axrt_event_t event);

/* Makes later work on `stream` wait for the latest record of `event` (from
 * any stream, device or driver of the same instance). FAILED_PRECONDITION
 * when `event` was never recorded. If the event completes with a failure,
 * `stream` fails with it. */
AXRT_API axrt_status_t axrt_stream_wait_event(axrt_stream_t stream,
                                              axrt_event_t event);

/* Allocates `size` bytes from the device's pool for use by work enqueued on
 * `stream` from now on (stream-ordered). Other streams must synchronise with
 * `stream` before touching it. `options` may be NULL. The caller owns
 * `*out_buffer`. */
AXRT_API axrt_status_t axrt_stream_allocate_buffer(
    axrt_stream_t stream, uint64_t size, const axrt_buffer_options_t* options,
    axrt_buffer_t* out_buffer);

/* Returns the memory of `buffer` (a whole allocation, not a view) to the
 * pool once `stream` reaches this point. Later enqueues that name `buffer`,
 * or a view of it, fail with FAILED_PRECONDITION. The caller still releases
 * its handle. */
AXRT_API axrt_status_t axrt_stream_deallocate_buffer(axrt_stream_t stream,
                                                     axrt_buffer_t buffer);

/* Blocks until all work enqueued on `stream` has completed. Returns the
 * stream's failure, if it has one. */
AXRT_API axrt_status_t axrt_stream_synchronize(axrt_stream_t stream);

/* Writes whether all enqueued work has completed, without blocking. When the
 * stream has failed, returns its failure instead and leaves `*out_idle`
 * unwritten. */
AXRT_API axrt_status_t axrt_stream_query(axrt_stream_t stream,
                                         bool* out_idle);

/* Writes the driver's own queue behind `stream` to `*out_handle`, for
 * exchange with other libraries (the DLPack stream protocol): a CUstream for
 * a CUDA device. The same handle on every call. Borrowed: valid until the
 * last reference to `stream` goes; do not destroy it. Work another library
 * enqueues on it runs in order with the stream's own work, and
 * axrt_stream_synchronize() waits for it too, but its failures are not the
 * stream's. UNIMPLEMENTED for a device whose driver has no native queue (the
 * CPU device); `*out_handle` is then left unwritten. Borrows `stream`;
 * thread-safe. */
AXRT_API axrt_status_t axrt_stream_get_native_handle(axrt_stream_t stream,
                                                     void** out_handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_STREAM_H_ */
