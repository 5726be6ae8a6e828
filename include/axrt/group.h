/* axrt device groups: collectives across the devices of one process, or
 * across processes and hosts (axrt_group_join()).
 *
 * A group is an ordered set of distinct devices of one instance, its
 * members; a member's index in the group is its rank. A collective names,
 * for every member, the stream it runs on and the buffers it reads and
 * writes, and is queued on those streams like any other operation: it
 * starts on a member once the work queued earlier on that member's stream
 * completed, and the work queued later waits for it. Every call queues on
 * all members at once, so the members see the group's collectives in one
 * order; collectives of one group are queued under one lock, and the
 * caller keeps collectives of different groups that share streams in one
 * order on every stream (as with any collective library).
 *
 * Backends: the members' driver decides how the work is done.
 *   - "cpu": CPU devices; the runtime's own implementation over their host
 *     memory. In all-reduce and reduce-scatter each member reduces its
 *     block of the vector, reading every member's buffer in rank order (an
 *     all-reduce then copies the other members' blocks; up to 64 KiB each
 *     member reduces the whole vector itself); all-gather is a ring of
 *     copies, broadcast a flat tree (each member copies from the root),
 *     send/recv a direct copy. Every member ends with bit-identical
 *     results, and every element of a reduction is combined in rank order
 *     whatever the count, so it does not depend on the vector's length.
 *   - "nccl": CUDA devices, through NCCL (libnccl.so.2, loaded at run time;
 *     AXRT_NCCL_LIBRARY names another file), one communicator per member.
 *     NCCL queues onto each member stream's CUstream, which the group takes
 *     with axrt_stream_get_native_handle(), with what that means for the
 *     stream (docs/cuda-driver.md, "Native queues"). UNAVAILABLE from
 *     axrt_group_create() when the library is missing or older than 2.10.
 * Members of different drivers cannot form a group (UNIMPLEMENTED).
 *
 * Failure. A member fails when its stream has failed by the time a
 * collective reaches it, when it does not reach a collective within the
 * group's timeout while the others wait for it, when its device is lost,
 * or when the application calls axrt_group_abort(). The first failure
 * aborts the group: the collectives waiting, queued or queued later fail
 * at once on every member with ABORTED (DEADLINE_EXCEEDED on the members
 * that timed out), which fails those streams as any failed operation does,
 * and the message names the member that failed and why;
 * axrt_group_query_info() tells the same. An aborted group stays aborted:
 * destroy it, and build a new group, with new streams, on the devices that
 * remain (docs/multi-device.md, "Failure and recovery").
 *
 * Every function here is thread-safe, except that axrt_group_destroy()
 * must not overlap another call on the same group. Calls borrow their
 * arguments (the group, the `members` and `transfers` arrays, the streams)
 * for their duration only; what a queued collective needs later it keeps
 * (the buffers, see below). */
#ifndef AXRT_GROUP_H_
#define AXRT_GROUP_H_

#include "axrt/base.h"
#include "axrt/device.h"
#include "axrt/memory.h"
#include "axrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_group_s* axrt_group_t;

/* How a reducing collective combines the members' elements. */
typedef uint32_t axrt_reduce_op_t;
enum {
  AXRT_REDUCE_SUM = 0,
  AXRT_REDUCE_MAX = 1,
  AXRT_REDUCE_MIN = 2,
};

typedef struct axrt_group_options_t {
  size_t struct_size;
  const void* next;
  /* A name for messages and traces, copied; NULL: "group". */
  const char* label;
  /* How long a member that reached a collective waits for the others
   * before the group aborts, in nanoseconds; 0: the default, 300 s;
   * UINT64_MAX: no limit. */
  uint64_t timeout_ns;
  /* "cpu" or "nccl"; NULL or "": the backend of the members' driver. */
  const char* backend;
} axrt_group_options_t;

#define AXRT_GROUP_OPTIONS_INIT { sizeof(axrt_group_options_t), NULL, NULL, 0, NULL }

/* Creates a group of the `count` (at least 1) distinct `devices`, rank i
 * being devices[i]; `options` may be NULL. Retains the devices. The caller
 * owns `*out_group`. */
AXRT_API axrt_status_t axrt_group_create(const axrt_device_t* devices, size_t count,
                                         const axrt_group_options_t* options,
                                         axrt_group_t* out_group);

/* Groups across processes. Each process joins with its one device and its
 * rank; the members meet through a rendezvous that the id names, an opaque
 * string every member is given (as NCCL's unique id is):
 *   - "tcp://HOST:PORT[/NAME]": rank 0 serves a small key-value store on
 *     HOST:PORT, from its first join there until its process exits; the
 *     others connect to it.
 *   - "file://DIR[#NAME]": a directory every member can write (a shared
 *     file system); use a fresh one (or NAME) for every launch.
 * NAME tells groups that meet in one place apart. Rank 0 opens a new
 * epoch of the group each time it joins, and the others join the newest:
 * after a failure, the members left and a process replacing a lost one
 * join the same id again (a rank whose claim in the current epoch is a lost
 * member's waits for rank 0 to open the next).
 *
 * Backends:
 *   - "cpu" (CPU devices; the default for them): messages through gloo's
 *     TCP transport, in libaxrt_gloo.so (beside libaxrt, loaded at run
 *     time; AXRT_GLOO_TRANSPORT names another file; UNAVAILABLE when it or
 *     Debian's libgloo0 is missing). Reductions combine the members'
 *     elements in rank order, as in one process: the results are the same
 *     bits on every member, and the same as a group of one process.
 *   - "nccl" (CUDA devices; the default for them): rank 0 makes NCCL's
 *     unique id, the others get it through the rendezvous, and each member
 *     makes its communicator with ncclCommInitRank on its device.
 *
 * A member's collectives: the functions below take its own entry only
 * (`members` points to one axrt_collective_member_t), or
 * axrt_group_enqueue_part() with its own rank; the n-th collective of every
 * member is one collective. axrt_group_send_recv() is UNIMPLEMENTED across
 * processes; axrt_group_get_device() answers for this member only.
 *
 * Failure ("cpu"): a member process that exits or is killed breaks its
 * connections, and the others fail the group at once naming it; one that
 * stops answering (stopped, hung, cut off) misses its heartbeats, and the
 * others fail the group after the heartbeat timeout. ("nccl"): NCCL's
 * asynchronous errors on the member's communicator, its device's loss, and
 * the group's timeout, as in one process. The group then fails
 * as any group does (above): every waiting and later collective fails, on
 * every surviving member, with a message naming the member lost. */
typedef struct axrt_group_join_options_t {
  size_t struct_size;
  const void* next;
  /* As axrt_group_options_t: a name (NULL: the id), the collectives'
   * timeout (0: 300 s) and the backend (NULL or "": "cpu" for a CPU
   * device). */
  const char* label;
  uint64_t timeout_ns;
  const char* backend;
  /* How long joining waits for every member to arrive and connect; 0: 60 s.
   * UINT64_MAX: no limit. */
  uint64_t rendezvous_timeout_ns;
  /* The heartbeat's interval (0: 1 s; UINT64_MAX: no heartbeat) and how
   * late a member's beat may be before it counts as lost (0: 10 s). */
  uint64_t heartbeat_interval_ns;
  uint64_t heartbeat_timeout_ns;
  /* The address this member listens on for the others; NULL or "": the
   * address it reaches a TCP rendezvous from, else the host's name. */
  const char* hostname;
} axrt_group_join_options_t;

#define AXRT_GROUP_JOIN_OPTIONS_INIT \
  { sizeof(axrt_group_join_options_t), NULL, NULL, 0, NULL, 0, 0, 0, NULL }

/* Joins the group `id` names as member `rank` of `size` (rank below size),
 * with `device`; `options` may be NULL. Blocks until every member arrived
 * and connected, or fails naming what is wrong: DEADLINE_EXCEEDED naming
 * the members that did not arrive within the rendezvous timeout,
 * ALREADY_EXISTS when another process holds the same rank and no new epoch
 * opened within it, INVALID_ARGUMENT when members disagree on the size.
 * Borrows `id` and `options` for the call; retains `device`. The caller
 * owns `*out_group`; destroying it leaves the group (the others then see
 * this member gone). Thread-safe. */
AXRT_API axrt_status_t axrt_group_join(const char* id, uint32_t size, uint32_t rank,
                                       axrt_device_t device,
                                       const axrt_group_join_options_t* options,
                                       axrt_group_t* out_group);

/* Destroys `group` and releases its devices. NULL is a no-op. Collectives
 * already queued still run (or fail, if the group aborted); destroying never
 * waits for them. */
AXRT_API void axrt_group_destroy(axrt_group_t group);

/* Whether a group can still run collectives. */
typedef uint32_t axrt_group_state_t;
enum {
  AXRT_GROUP_STATE_ACTIVE = 0,
  AXRT_GROUP_STATE_ABORTED = 1,
};

typedef struct axrt_group_info_t {
  size_t struct_size;
  const void* next;
  char label[64];
  char backend[16];        /* "cpu", "nccl" */
  uint32_t size;           /* members */
  axrt_group_state_t state;
  /* The rank whose failure aborted the group, or -1 (active, or aborted
   * by axrt_group_abort() without a rank). */
  int32_t failed_rank;
  /* Why the group aborted: the failure's code and message ("member 2
   * (cpu:2) ..."); OK and "" while active. */
  axrt_status_code_t failure_code;
  char failure[256];
  uint64_t collectives;    /* collectives queued since creation */
  /* This process's member in a group across processes; -1 for a group of
   * one process. */
  int32_t rank;
} axrt_group_info_t;

#define AXRT_GROUP_INFO_INIT \
  { sizeof(axrt_group_info_t), NULL, {0}, {0}, 0, 0, -1, 0, {0}, 0, -1 }

/* Fills `*out_info` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_group_query_info(axrt_group_t group, axrt_group_info_t* out_info);

/* Writes a new reference to the device of `rank`; OUT_OF_RANGE past the
 * last member, FAILED_PRECONDITION for a member in another process. The
 * caller releases it. */
AXRT_API axrt_status_t axrt_group_get_device(axrt_group_t group, size_t rank,
                                             axrt_device_t* out_device);

/* Aborts `group` as if member `rank` had failed with `reason` (copied; NULL:
 * "aborted by the application"); `rank` -1 names no member. The group's
 * waiting and queued collectives fail at once (NCCL: its communicators are
 * aborted). Aborting an aborted group does nothing (the first failure
 * stays). OUT_OF_RANGE for a rank past the last member. */
AXRT_API axrt_status_t axrt_group_abort(axrt_group_t group, int32_t rank, const char* reason);

/* One member's part of a collective: the stream it runs on (a stream of
 * the member's device) and the buffers it reads (`send`) and writes
 * (`recv`), each with a byte offset, on the member's device. `send` and
 * `recv` may be the same range (in place); other overlaps are
 * INVALID_ARGUMENT. The buffers are retained until the collective ran. */
typedef struct axrt_collective_member_t {
  axrt_stream_t stream;
  axrt_buffer_t send_buffer;
  uint64_t send_offset;
  axrt_buffer_t recv_buffer;
  uint64_t recv_offset;
} axrt_collective_member_t;

/* Element types of collectives: INT8, UINT8, INT32, UINT32, INT64, UINT64,
 * FLOAT16, BFLOAT16, FLOAT32 and FLOAT64. Integers wrap on overflow; 16-bit
 * floats are reduced in float32 and rounded to nearest-even at every step
 * (as each ring step stores its partial). Counts are in elements; 0 is
 * valid and still orders the members' streams. Every function below takes
 * `members`, one entry per rank. */

/* Each member's `recv` becomes the reduction of every member's `send`:
 * `count` elements. */
AXRT_API axrt_status_t axrt_group_all_reduce(axrt_group_t group,
                                             const axrt_collective_member_t* members,
                                             uint64_t count, axrt_dtype_t dtype,
                                             axrt_reduce_op_t op);

/* Each member's `recv` (size x `count` elements) becomes every member's
 * `send` (`count` elements), rank 0 first. In place when a member's send
 * range is its own slot of recv. */
AXRT_API axrt_status_t axrt_group_all_gather(axrt_group_t group,
                                             const axrt_collective_member_t* members,
                                             uint64_t count, axrt_dtype_t dtype);

/* Member r's `recv` (`count` elements) becomes the reduction of block r of
 * every member's `send` (size x `count` elements). In place when a
 * member's recv range is block r of its own send. */
AXRT_API axrt_status_t axrt_group_reduce_scatter(axrt_group_t group,
                                                 const axrt_collective_member_t* members,
                                                 uint64_t count, axrt_dtype_t dtype,
                                                 axrt_reduce_op_t op);

/* Every member's `recv` (`count` elements) becomes the `send` of member
 * `root`. Only the root's send is read; the others' may be NULL. */
AXRT_API axrt_status_t axrt_group_broadcast(axrt_group_t group,
                                            const axrt_collective_member_t* members,
                                            uint64_t count, axrt_dtype_t dtype, size_t root);

/* A point-to-point transfer: `count` elements of `src_rank`'s buffer, on
 * its stream, into `dst_rank`'s buffer, on its stream (the two ranks
 * differ). Both streams wait for the transfer: the sender's buffer may be
 * reused, and the receiver's read, by work queued after it. */
typedef struct axrt_group_transfer_t {
  size_t src_rank;
  axrt_stream_t src_stream;
  axrt_buffer_t src_buffer;
  uint64_t src_offset;
  size_t dst_rank;
  axrt_stream_t dst_stream;
  axrt_buffer_t dst_buffer;
  uint64_t dst_offset;
  uint64_t count;
  axrt_dtype_t dtype;
} axrt_group_transfer_t;

/* Queues `transfer_count` transfers as one operation (each send with its
 * receive, NCCL: within one group call); the members they name take part,
 * the others do not. A rank takes part on one stream per call
 * (INVALID_ARGUMENT otherwise). */
AXRT_API axrt_status_t axrt_group_send_recv(axrt_group_t group,
                                            const axrt_group_transfer_t* transfers,
                                            size_t transfer_count);

/* The collectives, as one member's part names them. */
typedef uint32_t axrt_collective_kind_t;
enum {
  AXRT_COLLECTIVE_ALL_REDUCE = 0,
  AXRT_COLLECTIVE_ALL_GATHER = 1,
  AXRT_COLLECTIVE_REDUCE_SCATTER = 2,
  AXRT_COLLECTIVE_BROADCAST = 3,
};

/* Queues member `rank`'s part of a collective on its stream, alone: the
 * functions above queue every member's part in one call; here each member
 * queues its own, as a function's collective commands do (the invoke
 * options' channels, axrt/executable.h), and the collective runs once
 * every member's stream reached its part. `member` is that member's entry
 * of `members` above, checked the same way; `kind`, `count`, `dtype`,
 * `op` (reductions) and `root` (broadcast) mean what they mean there.
 *
 * Parts meet by order: member r's n-th collective (counting the whole-group
 * calls above too) is every other member's n-th. Parts that disagree on
 * the kind, the count, the element type, the reduction or the root abort
 * the group, naming the member whose part differs from the first one
 * queued (INVALID_ARGUMENT from the call that finds it). A member that
 * never queues its part leaves the others waiting until the group's
 * timeout, which then aborts the group naming it. A whole-group call is
 * FAILED_PRECONDITION while some member has not yet queued its part of an
 * earlier collective; destroying the group then aborts the parts queued.
 *
 * With the "nccl" backend a part is its member's NCCL call, made when the
 * part is queued, outside any NCCL group call (docs/multi-device.md,
 * "Collectives inside functions", says what that asks of the threads that
 * queue them). */
AXRT_API axrt_status_t axrt_group_enqueue_part(axrt_group_t group, size_t rank,
                                               axrt_collective_kind_t kind,
                                               const axrt_collective_member_t* member,
                                               uint64_t count, axrt_dtype_t dtype,
                                               axrt_reduce_op_t op, size_t root);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_GROUP_H_ */
