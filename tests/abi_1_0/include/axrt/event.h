/* axrt events: markers recorded into streams, waited on by the host or by
 * other streams, and timed.
 *
 * An event may be recorded many times; a query or wait refers to the most
 * recent record enqueued before the call. An event recorded on a stream that
 * has failed completes with that stream's failure, and a stream that waits
 * on it fails too, so a failure travels along every dependency. */
#ifndef AXRT_EVENT_H_
#define AXRT_EVENT_H_

#include "axrt/base.h"
#include "axrt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_event_s* axrt_event_t;

typedef uint32_t axrt_event_flags_t;
enum {
  AXRT_EVENT_FLAG_NONE = 0,
  /* Skip timestamps; axrt_event_elapsed_time() then fails. */
  AXRT_EVENT_FLAG_DISABLE_TIMING = 1u << 0,
};

typedef struct axrt_event_options_t {
  size_t struct_size;
  const void* next; /* may carry an axrt_debug_label_t */
  axrt_event_flags_t flags;
} axrt_event_options_t;

#define AXRT_EVENT_OPTIONS_INIT \
  { sizeof(axrt_event_options_t), NULL, AXRT_EVENT_FLAG_NONE }

/* Creates an event on `device`; `options` may be NULL. The caller owns
 * `*out_event`. */
AXRT_API axrt_status_t axrt_event_create(axrt_device_t device,
                                         const axrt_event_options_t* options,
                                         axrt_event_t* out_event);

/* Adds a reference to `event`. NULL is a no-op. */
AXRT_API void axrt_event_retain(axrt_event_t event);

/* Drops a reference to `event`. NULL is a no-op. Queued records and waits
 * hold their own references. */
AXRT_API void axrt_event_release(axrt_event_t event);

/* Writes whether the latest record of `event` has completed, without
 * blocking. When it completed with a failure, returns that failure instead
 * and leaves `*out_complete` unwritten. FAILED_PRECONDITION when the event
 * was never recorded. */
AXRT_API axrt_status_t axrt_event_query(axrt_event_t event,
                                        bool* out_complete);

/* Blocks the calling thread until the latest record of `event` completes or
 * `timeout_ns` nanoseconds pass (AXRT_TIMEOUT_INFINITE waits forever; 0
 * polls). DEADLINE_EXCEEDED on timeout; FAILED_PRECONDITION when the event
 * was never recorded; otherwise the failure the event completed with. */
AXRT_API axrt_status_t axrt_event_wait(axrt_event_t event, uint64_t timeout_ns);

/* Writes the time between the completions of the latest records of `start`
 * and `end`, in nanoseconds (negative when `end` completed first). Both must
 * be on the same device (INVALID_ARGUMENT), recorded and complete, and
 * created without AXRT_EVENT_FLAG_DISABLE_TIMING (FAILED_PRECONDITION). */
AXRT_API axrt_status_t axrt_event_elapsed_time(axrt_event_t start,
                                               axrt_event_t end,
                                               int64_t* out_nanoseconds);

/* Makes work enqueued later on `native_stream` wait, on the device, for the
 * latest record of `event`, without blocking the calling thread: the
 * producer's half of the DLPack stream protocol. `native_stream` is a queue
 * of the driver of `event`'s device: for CUDA, a CUstream of any CUDA device
 * of the process (such as axrt_stream_get_native_handle() gives), or one of
 * the special handles CU_STREAM_LEGACY ((void*)1) and CU_STREAM_PER_THREAD
 * ((void*)2), which name the legacy and the calling thread's default stream
 * of the primary context of `event`'s device. NULL is INVALID_ARGUMENT (it
 * means either of those, depending on how the consumer was compiled; pass
 * one of them explicitly).
 *
 * The wait covers everything the record waits for, host functions and
 * waits on events of other drivers included. It refers to the record
 * current at the call: `event` may be recorded again or released at once.
 * A native queue cannot fail: when the record is already known to complete
 * with a failure, that failure is returned and nothing is enqueued; a
 * failure known only later does not hold the native queue back once the
 * record is reached (axrt_event_query() and the recording stream report
 * it).
 * FAILED_PRECONDITION when `event` was never recorded; UNIMPLEMENTED for a
 * device whose driver has no native queues (the CPU device). Borrows `event`
 * and `native_stream` (the wait holds what it needs); thread-safe. */
AXRT_API axrt_status_t axrt_event_enqueue_native_wait(axrt_event_t event,
                                                      void* native_stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_EVENT_H_ */
