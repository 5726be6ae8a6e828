/* axrt executables: tensors, loading .axe files onto a device, and invoking
 * their functions on streams; kernel libraries registered by the
 * application.
 *
 * A tensor is a typed, shaped view of a buffer: dtype, shape and strides in
 * elements (the DLPack convention), and a byte offset. Functions take and
 * return tensors.
 *
 * Loading verifies the whole file (docs/format.md §7), then runs a
 * pre-flight check before allocating anything: every kernel's library and
 * symbol present and matching its parameter table, every launch within the
 * device's limits, every quantized parameter bound to weights of the layout
 * it declares. Only then are kernel libraries initialised and constants
 * made resident (on the CPU device: views of the mapped file, no copy).
 *
 * Invocation is asynchronous: axrt_function_invoke() checks the call,
 * allocates what it must, and queues the function's commands on a stream as
 * one unit. */
#ifndef AXRT_EXECUTABLE_H_
#define AXRT_EXECUTABLE_H_

#include "axrt/base.h"
#include "axrt/device.h"
#include "axrt/group.h"
#include "axrt/kernel_abi.h"
#include "axrt/memory.h"
#include "axrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Tensors                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct axrt_tensor_s* axrt_tensor_t;

/* The largest rank a tensor may have. */
#define AXRT_TENSOR_MAX_RANK 16

typedef struct axrt_tensor_desc_t {
  size_t struct_size;
  const void* next;
  axrt_dtype_t dtype;    /* not AXRT_DTYPE_INVALID */
  uint32_t rank;         /* at most AXRT_TENSOR_MAX_RANK; 0 is a scalar */
  const int64_t* shape;  /* `rank` extents, each >= 0; may be NULL when rank is 0 */
  /* `rank` strides in elements, or NULL for row-major contiguous. Sub-byte
   * dtypes (int4, fp4 ...) must be contiguous. */
  const int64_t* strides;
  uint64_t byte_offset;  /* of element 0 from the start of the buffer */
} axrt_tensor_desc_t;

#define AXRT_TENSOR_DESC_INIT \
  { sizeof(axrt_tensor_desc_t), NULL, AXRT_DTYPE_INVALID, 0, NULL, NULL, 0 }

/* Creates a tensor over `buffer` (retained) described by `desc` (copied).
 * OUT_OF_RANGE when an element lies outside the buffer; INVALID_ARGUMENT for
 * a bad dtype, rank, extent or stride. The caller owns `*out_tensor`. */
AXRT_API axrt_status_t axrt_tensor_create(axrt_buffer_t buffer,
                                          const axrt_tensor_desc_t* desc,
                                          axrt_tensor_t* out_tensor);

/* Allocates a contiguous tensor on `device` (`desc->strides` must be NULL
 * and `desc->byte_offset` 0) from the device's pool. `buffer_options` may
 * be NULL. The caller owns `*out_tensor`. */
AXRT_API axrt_status_t axrt_tensor_allocate(axrt_device_t device,
                                            const axrt_tensor_desc_t* desc,
                                            const axrt_buffer_options_t* buffer_options,
                                            axrt_tensor_t* out_tensor);

/* Adds a reference to `tensor`. NULL is a no-op. */
AXRT_API void axrt_tensor_retain(axrt_tensor_t tensor);

/* Drops a reference to `tensor`. NULL is a no-op. */
AXRT_API void axrt_tensor_release(axrt_tensor_t tensor);

/* Properties of a tensor beyond its layout (axrt_tensor_info_t.flags). */
typedef uint64_t axrt_tensor_flags_t;
enum {
  /* The tensor's memory must not be written through it: imported from a
   * read-only DLPack tensor (axrt/dlpack.h). axrt_function_invoke() refuses
   * it as an output. */
  AXRT_TENSOR_FLAG_READ_ONLY = 1u << 0,
};

typedef struct axrt_tensor_info_t {
  size_t struct_size;
  const void* next;
  axrt_dtype_t dtype;
  uint32_t rank;
  /* `rank` entries each, owned by the tensor and valid while it lives.
   * Strides are always filled (in elements). */
  const int64_t* shape;
  const int64_t* strides;
  uint64_t byte_offset;   /* of element 0 within the buffer */
  uint64_t element_count;
  uint64_t byte_size;     /* bytes of the elements when contiguous */
  bool contiguous;        /* row-major, no gaps */
  /* AXRT_TENSOR_FLAG_* bits. 64-bit so that it lies past the end of the
   * struct as it was before the field (whose tail padding a library without
   * the field may write): a library that does not know it leaves it 0. */
  axrt_tensor_flags_t flags;
} axrt_tensor_info_t;

#define AXRT_TENSOR_INFO_INIT \
  { sizeof(axrt_tensor_info_t), NULL, AXRT_DTYPE_INVALID, 0, NULL, NULL, 0, 0, 0, false, 0 }

/* Fills `*out_info` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_tensor_query_info(axrt_tensor_t tensor,
                                              axrt_tensor_info_t* out_info);

/* Writes a new reference to the buffer `tensor` views. */
AXRT_API axrt_status_t axrt_tensor_get_buffer(axrt_tensor_t tensor,
                                              axrt_buffer_t* out_buffer);

/* Bits per element of `dtype` (4 for int4, 32 for float32); 0 for an
 * unknown or invalid dtype. */
AXRT_API uint32_t axrt_dtype_bit_width(axrt_dtype_t dtype);

/* The dtype's short name as `axrt inspect` prints it ("f32", "int4",
 * "fp8_e4m3fn"), or "invalid"; a static string. */
AXRT_API const char* axrt_dtype_name(axrt_dtype_t dtype);

/* ---------------------------------------------------------------------- */
/* Kernel libraries                                                        */
/* ---------------------------------------------------------------------- */

/* Makes a CPU kernel library available to executables loaded through
 * `instance` under `library->name`. The table is borrowed and must stay
 * valid until the instance is destroyed. It is checked first (ABI version,
 * struct sizes, unique kernel names, parameter tables, argument block
 * sizes); INVALID_ARGUMENT names what is wrong, ALREADY_EXISTS a name taken
 * (the built-in library is "axrt.cpu"), UNIMPLEMENTED a newer ABI. init runs
 * later, once per device, when the first executable that needs the library
 * there loads. Thread-safe. */
AXRT_API axrt_status_t axrt_instance_register_kernel_library(
    axrt_instance_t instance, const axrt_kernel_library_t* library);

/* ---------------------------------------------------------------------- */
/* Executables                                                             */
/* ---------------------------------------------------------------------- */

typedef struct axrt_executable_s* axrt_executable_t;
typedef struct axrt_function_s* axrt_function_t;

typedef uint32_t axrt_executable_load_flags_t;
enum {
  /* Accept HOST_SHARED_OBJECT code objects: native code from the file runs
   * in this process. Without the flag such files are refused
   * (PERMISSION_DENIED) before any of their code is mapped. */
  AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE = 1u << 0,
  /* Check every segment's CRC-32C while loading (DATA_LOSS on mismatch). */
  AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS = 1u << 1,
};

typedef struct axrt_executable_load_options_t {
  size_t struct_size;
  const void* next; /* may carry an axrt_debug_label_t: the name in messages */
  axrt_executable_load_flags_t flags;
} axrt_executable_load_options_t;

#define AXRT_EXECUTABLE_LOAD_OPTIONS_INIT \
  { sizeof(axrt_executable_load_options_t), NULL, 0 }

/* Loads the .axe file at `path` onto `device`; the file is memory-mapped and
 * stays mapped while the executable lives. `options` may be NULL. Errors
 * name the file and the cause: NOT_FOUND for a missing file, kernel,
 * library or symbol; INVALID_ARGUMENT for a broken file or a parameter
 * table or layout that does not match; UNIMPLEMENTED for features, code
 * objects or ABI versions this runtime does not have; OUT_OF_RANGE for a
 * launch beyond the device's limits; PERMISSION_DENIED for host code
 * without the flag. The caller owns `*out_executable`. */
AXRT_API axrt_status_t axrt_executable_load_file(axrt_device_t device, const char* path,
                                                 const axrt_executable_load_options_t* options,
                                                 axrt_executable_t* out_executable);

/* As axrt_executable_load_file(), from `size` bytes at `data`, which are
 * copied (the caller may free them when the call returns). */
AXRT_API axrt_status_t axrt_executable_load_memory(axrt_device_t device, const void* data,
                                                   size_t size,
                                                   const axrt_executable_load_options_t* options,
                                                   axrt_executable_t* out_executable);

/* Adds a reference to `executable`. NULL is a no-op. */
AXRT_API void axrt_executable_retain(axrt_executable_t executable);

/* Drops a reference to `executable`. NULL is a no-op. Invocations already
 * queued keep it alive; when the last reference goes, kernel libraries it
 * alone used on its device are deinitialised. */
AXRT_API void axrt_executable_release(axrt_executable_t executable);

typedef struct axrt_executable_info_t {
  size_t struct_size;
  const void* next;
  /* Strings owned by the executable, valid while it lives. */
  const char* name;              /* the path, label or "<memory>" */
  const char* producer_name;     /* "" when absent */
  const char* producer_version;
  uint32_t function_count;
  uint32_t kernel_count;
  uint32_t constant_count;
  uint64_t constant_bytes;       /* of all constants' data */
} axrt_executable_info_t;

#define AXRT_EXECUTABLE_INFO_INIT \
  { sizeof(axrt_executable_info_t), NULL, NULL, NULL, NULL, 0, 0, 0, 0 }

/* Fills `*out_info` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_executable_query_info(axrt_executable_t executable,
                                                  axrt_executable_info_t* out_info);

/* Writes a reference to the executable's function `index`: OUT_OF_RANGE at
 * or beyond function_count. A function's references are references to its
 * executable. */
AXRT_API axrt_status_t axrt_executable_get_function(axrt_executable_t executable,
                                                    uint32_t index,
                                                    axrt_function_t* out_function);

/* Writes a reference to the function named `name`; NOT_FOUND lists the
 * names there are. */
AXRT_API axrt_status_t axrt_executable_find_function(axrt_executable_t executable,
                                                     const char* name,
                                                     axrt_function_t* out_function);

/* The executable's free-form metadata (docs/format.md section 2: `key` /
 * `value` strings a compiler wrote, such as a model's configuration).
 * Entry `index` in file order: `*out_key` and `*out_value` point to
 * NUL-terminated strings owned by the executable, valid while it lives;
 * `*out_value_size` (optional, may be NULL) is the value's length in bytes,
 * which a value holding NUL bytes needs. OUT_OF_RANGE at or beyond the
 * number of entries, so a caller enumerates from 0 until it sees that.
 * Nothing is retained or to be freed. Thread-safe. */
AXRT_API axrt_status_t axrt_executable_get_metadata(axrt_executable_t executable, uint32_t index,
                                                    const char** out_key,
                                                    const char** out_value,
                                                    size_t* out_value_size);

/* The value of the first metadata entry whose key is `key` (borrowed for
 * the call), as axrt_executable_get_metadata gives it: owned by the
 * executable, valid while it lives. NOT_FOUND when there is none.
 * Thread-safe. */
AXRT_API axrt_status_t axrt_executable_find_metadata(axrt_executable_t executable,
                                                     const char* key, const char** out_value,
                                                     size_t* out_value_size);

/* Writes a new reference to the device the executable was loaded on. */
AXRT_API axrt_status_t axrt_executable_get_device(axrt_executable_t executable,
                                                  axrt_device_t* out_device);

/* ---------------------------------------------------------------------- */
/* Functions                                                               */
/* ---------------------------------------------------------------------- */

/* Adds a reference to `function` (and so to its executable). */
AXRT_API void axrt_function_retain(axrt_function_t function);

/* Drops a reference to `function`. NULL is a no-op. */
AXRT_API void axrt_function_release(axrt_function_t function);

typedef struct axrt_function_info_t {
  size_t struct_size;
  const void* next;
  const char* name; /* owned by the executable */
  uint32_t input_count;
  uint32_t output_count;
  uint32_t symbol_count;  /* symbolic dimensions */
  uint32_t command_count;
  uint64_t arena_size;    /* transient bytes per call */
  /* Format 1.4: channels, each bound to a group at every call
   * (axrt_invoke_options_t.channels); with axrt_function_query_channel. */
  uint32_t channel_count;
} axrt_function_info_t;

#define AXRT_FUNCTION_INFO_INIT \
  { sizeof(axrt_function_info_t), NULL, NULL, 0, 0, 0, 0, 0, 0 }

/* Channel `index` of `function` (format 1.4): writes its name (owned by
 * the executable, valid while it lives) and the members it needs (0: any).
 * OUT_OF_RANGE past the last; nothing is written on an error. Thread-safe. */
AXRT_API axrt_status_t axrt_function_query_channel(axrt_function_t function, uint32_t index,
                                                   const char** out_name, uint32_t* out_size);

/* Fills `*out_info` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_function_query_info(axrt_function_t function,
                                                axrt_function_info_t* out_info);

typedef uint32_t axrt_argument_kind_t;
enum {
  AXRT_ARGUMENT_KIND_INPUT = 1,
  AXRT_ARGUMENT_KIND_OUTPUT = 2,
};

/* Properties of an argument (axrt_argument_info_t.flags). */
typedef uint32_t axrt_argument_flags_t;
enum {
  /* A mutable input (format 1.2): the function writes the caller's tensor
   * in place, so the tensor passed must be writable; the call updates its
   * memory, with no copy, in stream order like an output's. */
  AXRT_ARGUMENT_FLAG_MUTABLE = 1u << 0,
};

typedef struct axrt_argument_info_t {
  size_t struct_size;
  const void* next;
  /* Pointers owned by the executable, valid while it lives. */
  const char* name;
  axrt_dtype_t dtype;
  uint32_t rank;
  /* `rank` entries: the extent, or -1 where the dimension is symbolic. */
  const int64_t* dims;
  /* `rank` entries: the symbol's index, or -1 where the extent is fixed. */
  const int32_t* dim_symbols;
  /* AXRT_ARGUMENT_FLAG_* bits. Past the end of the struct as it was before
   * the field, so a library without it leaves it 0. */
  axrt_argument_flags_t flags;
} axrt_argument_info_t;

#define AXRT_ARGUMENT_INFO_INIT \
  { sizeof(axrt_argument_info_t), NULL, NULL, AXRT_DTYPE_INVALID, 0, NULL, NULL, 0 }

/* Describes input or output `index` of `function`; OUT_OF_RANGE past the
 * count. */
AXRT_API axrt_status_t axrt_function_query_argument(axrt_function_t function,
                                                    axrt_argument_kind_t kind,
                                                    uint32_t index,
                                                    axrt_argument_info_t* out_info);

/* Writes symbol `index`'s name (owned by the executable) and upper bound. */
AXRT_API axrt_status_t axrt_function_query_symbol(axrt_function_t function, uint32_t index,
                                                  const char** out_name,
                                                  uint64_t* out_upper_bound);

/* Debugging modes of one call (axrt_invoke_options_t.flags; docs/debugging.md).
 * Either runs the call's commands one at a time, each followed by a host
 * function on `stream` that reads what the command wrote: slow, for finding
 * where a result goes wrong. Calls without them run as usual. */
typedef uint32_t axrt_invoke_flags_t;
enum {
  /* After each command, the floating-point elements it wrote (f64, f32,
   * f16, bf16 and the fp8 types with NaN or Inf) are scanned; the first NaN
   * or Inf fails `stream` with DATA_LOSS naming the function, the command's
   * index, its kernel, the parameter and binding, and the element, and the
   * commands after it are skipped. Element types come from the signature
   * or from the kernel parameter's declaration (docs/format.md,
   * KernelParam); undeclared ones are not scanned. Inputs are not scanned,
   * and elements of a mutable input or a caller's output that were NaN or
   * Inf before the call are not reported. The call's arena and the outputs
   * it allocates start zeroed. */
  AXRT_INVOKE_FLAG_CHECK_FINITE = 1u << 0,
  /* Writes every input at the call's start and everything each command
   * wrote after it into .npy files under `dump_directory`, with an
   * index.json per call (docs/debugging.md names the files). A file that
   * cannot be written fails `stream`. */
  AXRT_INVOKE_FLAG_DUMP = 1u << 1,
};

/* The environment turns the modes on for every call of the process, read
 * once at the first call: AXRT_CHECK_FINITE=1 (any value but "", 0, false,
 * no, off) as AXRT_INVOKE_FLAG_CHECK_FINITE, AXRT_DUMP_DIR=<directory> as
 * AXRT_INVOKE_FLAG_DUMP with that directory (unless the options name one). */
typedef struct axrt_invoke_options_t {
  size_t struct_size;
  const void* next;
  axrt_invoke_flags_t flags; /* AXRT_INVOKE_FLAG_* bits */
  /* With AXRT_INVOKE_FLAG_DUMP, required (INVALID_ARGUMENT otherwise): an
   * existing directory (NOT_FOUND otherwise) that each call writes a
   * folder into; borrowed for the duration of the call. NULL without the
   * flag. */
  const char* dump_directory;
  /* Format 1.4: for a function with channels (collective commands), one
   * entry per channel, in the function's order, naming the group the
   * channel stands for in this call and the member the call runs as
   * (`stream` must be a stream of that member's device; a channel that
   * declares a size needs a group of that size). Each member invokes its
   * function on its own stream with its own rank; the function's collective
   * commands queue that member's parts (axrt_group_enqueue_part), in order
   * with the commands around them, and the call's work completes once
   * every member's part did. NULL and 0 for functions without channels.
   * The debugging modes (flags above) do not take such functions
   * (UNIMPLEMENTED). */
  const struct axrt_invoke_channel_t* channels;
  size_t channel_count;
} axrt_invoke_options_t;

typedef struct axrt_invoke_channel_t {
  axrt_group_t group; /* borrowed for the call */
  uint32_t rank;
} axrt_invoke_channel_t;

#define AXRT_INVOKE_OPTIONS_INIT { sizeof(axrt_invoke_options_t), NULL, 0, NULL, NULL, 0 }

/* Queues one call of `function` on `stream`, which must belong to the
 * executable's device. `inputs` are `input_count` tensors on that device,
 * matching the signature in count, dtype and rank, contiguous, with fixed
 * extents equal and symbolic extents consistent and within their bounds.
 * `outputs` has `output_count` entries: a non-NULL entry is a tensor the
 * caller supplies (checked like an input, against the shape the inputs
 * imply, and not read-only); a NULL entry is allocated from the device's pool and, on success
 * only, written with a tensor the caller owns. A mutable input
 * (AXRT_ARGUMENT_FLAG_MUTABLE) must not be read-only either: the commands
 * write its memory in place, with no copy, ordered on `stream` like an
 * output's (read it after the call completes). Every tensor is retained
 * until the call completes; inputs must not be written until then, and no
 * memory the call writes may be read or written by other work meanwhile.
 * `options` may be NULL.
 *
 * Errors are returned before anything is queued and name the function, the
 * argument and both shapes (with a debugging flag, a failure to queue the
 * checks or dumps may come after part of the call was queued; the stream
 * then runs what was queued). A kernel that fails at run time fails `stream`
 * (sticky) with the kernel's name and message. Thread-safe; calls on one
 * stream run in the order they were made. */
AXRT_API axrt_status_t axrt_function_invoke(axrt_function_t function, axrt_stream_t stream,
                                            const axrt_tensor_t* inputs, size_t input_count,
                                            axrt_tensor_t* outputs, size_t output_count,
                                            const axrt_invoke_options_t* options);

/* ---------------------------------------------------------------------------
 * Graphs: one call captured once, replayed many times
 *
 * A graph is a call of a function with its tensors fixed: the same commands
 * over the same memory, every address and scalar resolved once. Replaying
 * it costs one launch where the driver has graphs of its own (CUDA graphs),
 * and on other drivers a resubmission that skips the call's checks and
 * binding. New data goes in by writing the captured input tensors' memory
 * before a replay (in stream order); results come out in the captured
 * outputs. The serving engine replays its decode steps this way
 * (axrt_engine_options_t.graph_max_batch, docs/serving.md).
 * ------------------------------------------------------------------------- */

typedef struct axrt_graph_s* axrt_graph_t;

typedef struct axrt_graph_info_t {
  size_t struct_size;
  const void* next;
  /* "function 'step' of executable 'model.axe' (graph)": borrowed, valid as
   * long as the graph. */
  const char* label;
  /* Commands replayed each time. */
  uint32_t command_count;
  /* 1 when the device's driver replays the graph as one launch of its own
   * (a CUDA graph); 0 when replays resubmit the captured commands (the CPU
   * driver, a device or driver without graph support, or commands its
   * graphs lack). */
  uint32_t native;
  /* Bytes of device memory the graph holds for the call's transient values
   * (its arena), allocated at capture and kept until the graph goes. */
  uint64_t arena_bytes;
} axrt_graph_info_t;

#define AXRT_GRAPH_INFO_INIT { sizeof(axrt_graph_info_t), NULL, NULL, 0, 0, 0 }

/* Captures a call of `function` on `stream` as a graph, queuing nothing:
 * `inputs` and `outputs` are checked as axrt_function_invoke() checks them,
 * except that every output must be supplied (no entry NULL). The graph
 * retains the tensors, the stream and the function, and allocates the
 * call's arena, for its whole life. `options` is reserved (NULL).
 *
 * Refused: a function with collective commands (UNIMPLEMENTED), and any
 * capture while a debugging mode of the environment (AXRT_CHECK_FINITE,
 * AXRT_DUMP_DIR) is on (FAILED_PRECONDITION: those check each call). A
 * driver that cannot make this call a graph of its own is not an error:
 * the graph then resubmits the commands (axrt_graph_info_t.native is 0).
 * The tensors and handles passed are borrowed for the call (the graph takes
 * its own references); `*out_graph` is the caller's to release, and is NULL
 * on failure. Thread-safe. */
AXRT_API axrt_status_t axrt_function_capture(axrt_function_t function, axrt_stream_t stream,
                                             const axrt_tensor_t* inputs, size_t input_count,
                                             const axrt_tensor_t* outputs, size_t output_count,
                                             const void* options, axrt_graph_t* out_graph);

/* Queues one replay of `graph` on the stream it was captured on, in order
 * with that stream's other work; it reads and writes the captured tensors'
 * memory as the call would, so work that changes the inputs goes before it
 * on that stream (or is ordered with events), and readers of the outputs
 * after it. Replays of one graph run one after another. A kernel that fails
 * fails the stream as a call's would. Thread-safe. */
AXRT_API axrt_status_t axrt_graph_replay(axrt_graph_t graph);

/* Fills `*out_info` (whose struct_size the caller sets). Thread-safe. */
AXRT_API axrt_status_t axrt_graph_query_info(axrt_graph_t graph, axrt_graph_info_t* out_info);

/* Reference counting, as for every handle: NULL, released and mistyped
 * handles are ignored. Thread-safe. */
AXRT_API void axrt_graph_retain(axrt_graph_t graph);
/* Replays already queued still run: they hold what the graph replays until
 * done. */
AXRT_API void axrt_graph_release(axrt_graph_t graph);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_EXECUTABLE_H_ */
