/* axrt tracing: where the time goes, as a Chrome Trace Event JSON file that
 * the Perfetto UI (ui.perfetto.dev) and chrome://tracing open as they are.
 *
 * A trace records, while it runs, the whole process's axrt activity:
 *   - on each host thread, every API call that queues work (copies, fills,
 *     host functions, event records and waits, deallocations, function
 *     invocations), the serving engine's steps, and the ranges the
 *     application adds with axrt_trace_range_begin/end;
 *   - on each stream (a track under its device), every operation from start
 *     to end, with the time it was queued, its size or kernel and launch
 *     shape; a function invocation is a slice with its kernels, copies and
 *     fills nested inside;
 *   - a flow arrow from each API call to the operation it queued;
 *   - each device's memory pools (bytes in use, bytes reserved, allocations
 *     served) as counter tracks;
 *   - stream failures and lost devices as instant events.
 * docs/profiling.md documents the file's shape and how to read it.
 *
 * Cost: when no trace runs, the recording points cost one relaxed atomic
 * load each. While one runs, events go to per-thread buffers (no lock on the
 * recording path) and the file is written by axrt_instance_trace_stop,
 * without stopping streams. A trace holds at most `max_events` events;
 * later ones are dropped and counted (axrt_trace_result_t.dropped_events).
 *
 * One trace runs at a time in a process. The environment variable
 * AXRT_TRACE=path.json starts one when the first instance is created and
 * writes it when that instance is destroyed (or at process exit). */
#ifndef AXRT_TRACE_H_
#define AXRT_TRACE_H_

#include "axrt/base.h"
#include "axrt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_trace_options_t {
  size_t struct_size;
  const void* next;
  /* The file axrt_instance_trace_stop writes (required). Created (or
   * truncated) when the trace starts, and written when it stops. */
  const char* path;
  /* The most events the trace keeps; 0 means 1,048,576 (about 96 MiB of
   * buffers at most). Buffers grow as events arrive. */
  uint64_t max_events;
} axrt_trace_options_t;

#define AXRT_TRACE_OPTIONS_INIT { sizeof(axrt_trace_options_t), NULL, NULL, 0 }

typedef struct axrt_trace_result_t {
  size_t struct_size;
  void* next;
  uint64_t events;          /* events written to the file */
  uint64_t dropped_events;  /* events lost to the max_events limit */
  uint64_t bytes_written;   /* size of the file */
} axrt_trace_result_t;

#define AXRT_TRACE_RESULT_INIT { sizeof(axrt_trace_result_t), NULL, 0, 0, 0 }

/* Starts a trace owned by `instance`. `options` (required) and its path are
 * borrowed for the call: the path is copied, and the instance is not
 * retained (destroying it stops the trace). FAILED_PRECONDITION when a
 * trace is already running in the process (the message names its file);
 * NOT_FOUND or PERMISSION_DENIED when `options->path` cannot be created.
 * Every function here is thread-safe; start and stop are serialised. */
AXRT_API axrt_status_t axrt_instance_trace_start(axrt_instance_t instance,
                                                 const axrt_trace_options_t* options);

/* Stops the trace `instance` started and writes its file. Work still queued
 * keeps running; operations that end after the stop are not in the file.
 * `out_result` may be NULL. FAILED_PRECONDITION when `instance` runs no
 * trace. The trace is stopped even when writing the file fails (the status
 * then names the file and the error). Destroying the instance stops and
 * writes its trace too. */
AXRT_API axrt_status_t axrt_instance_trace_stop(axrt_instance_t instance,
                                                axrt_trace_result_t* out_result);

/* Whether a trace runs in the process (a relaxed read: a trace started or
 * stopped by another thread at the same moment may not be seen yet). */
AXRT_API bool axrt_trace_is_active(void);

/* Opens a range named `name` (copied; at most 255 bytes kept) on the calling
 * thread; axrt_trace_range_end closes the innermost open one. Ranges nest
 * per thread and show as slices enclosing the API calls made inside them.
 * Both do nothing when no trace runs; an end without a begin is dropped from
 * the file. INVALID_ARGUMENT when `name` is NULL. */
AXRT_API axrt_status_t axrt_trace_range_begin(const char* name);
AXRT_API void axrt_trace_range_end(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_TRACE_H_ */
