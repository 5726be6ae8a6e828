/* The interface between libaxrt and a transport module: the messages of the
 * "cpu" backend between processes (group/process_backend.cc). The module is
 * a shared object libaxrt opens at run time, as it opens NCCL, so that
 * libaxrt itself depends on no transport library: libaxrt_gloo.so, over
 * gloo's TCP pairs (group/gloo_transport.cc), found beside libaxrt or where
 * AXRT_GLOO_TRANSPORT says. Plain C, versioned: the module exports
 * axrt_transport_api_v1(), and libaxrt refuses a table of another version.
 *
 * A transport connects `size` processes, one per rank, through the
 * rendezvous store libaxrt lends it (a full mesh). Messages are matched by
 * the pair of ranks and a 64-bit slot: a send to rank p in slot s meets
 * rank p's receive from this rank in slot s, of the same byte count. An
 * operation is posted, then waited for; any thread may abort it, which ends
 * its wait. Every function is thread-safe; errors are written, NUL-ended
 * and cut to fit, into `error`. */
#ifndef AXRT_GROUP_TRANSPORT_H_
#define AXRT_GROUP_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AXRT_TRANSPORT_API_VERSION 1u

/* The rendezvous store, libaxrt's. Both return 0, or -1 with `error`. */
typedef struct axrt_transport_store_t {
  void* context;
  int (*set)(void* context, const char* key, const void* data, size_t size, char* error,
             size_t error_size);
  /* Waits up to `timeout_ms` for `key`; `sink` receives its value. */
  int (*get)(void* context, const char* key, uint64_t timeout_ms,
             void (*sink)(void* sink_context, const void* data, size_t size), void* sink_context,
             char* error, size_t error_size);
} axrt_transport_store_t;

/* What axrt_transport_api_t.wait() tells. */
enum {
  AXRT_TRANSPORT_DONE = 0,
  AXRT_TRANSPORT_TIMED_OUT = 1,
  AXRT_TRANSPORT_ABORTED = 2,
  AXRT_TRANSPORT_FAILED = 3, /* the pair with the peer failed (closed, reset) */
};

typedef struct axrt_transport_api_t {
  uint32_t version; /* AXRT_TRANSPORT_API_VERSION */
  const char* name; /* "gloo" */
  /* Connects this process as `rank` of `size`: listens on `hostname` (NULL
   * or "": the host's name), publishes its address in `store` under keys
   * starting with `prefix`, and connects to every other rank, within
   * `timeout_ms`. Writes the transport, or returns -1 with `error`. */
  int (*connect)(const axrt_transport_store_t* store, const char* prefix, int rank, int size,
                 const char* hostname, uint64_t timeout_ms, void** out_transport, char* error,
                 size_t error_size);
  /* Closes every pair. No operation may be pending (abort and release them
   * first). */
  void (*destroy)(void* transport);
  /* Posts a send (`is_send` 1) of `bytes` at `data` to `peer`, or a receive
   * of them from `peer`, in `slot`. `data` must stay valid until the
   * operation is released. Writes the operation, or returns -1 with
   * `error`. */
  int (*post)(void* transport, int is_send, int peer, uint64_t slot, void* data, size_t bytes,
              void** out_operation, char* error, size_t error_size);
  /* Waits up to `timeout_ms` for the operation: AXRT_TRANSPORT_*. */
  int (*wait)(void* operation, uint64_t timeout_ms, char* error, size_t error_size);
  /* Makes a wait on the operation, running or to come, return ABORTED. */
  void (*abort)(void* operation);
  /* Frees the operation; it may still be pending (aborted or failed). */
  void (*release)(void* operation);
} axrt_transport_api_t;

typedef const axrt_transport_api_t* (*axrt_transport_api_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_GROUP_TRANSPORT_H_ */
