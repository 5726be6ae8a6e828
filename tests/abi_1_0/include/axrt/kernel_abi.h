/* axrt kernel ABI: how the runtime calls a kernel, and how a CPU kernel
 * library describes itself. docs/kernel-abi.md is the full specification.
 *
 * This header is self-contained: a kernel library includes it and nothing
 * else from axrt, and never links libaxrt.
 *
 * Argument block
 *   A dispatch passes its kernel one block of bytes laid out from the
 *   kernel's parameter table in order, with C struct rules: a BUFFER
 *   parameter is a uint64_t device address (on the CPU, a host pointer) at
 *   8-byte alignment; a SCALAR parameter is its value at its natural
 *   alignment (its size); the block's size is rounded up to its largest
 *   alignment. The same bytes are a CUDA kernel's packed parameter buffer and
 *   what a CPU kernel's `args` points to, so a kernel written as
 *     void k(const float* x, float* y, uint64_t n, float alpha)
 *   on either side reads exactly the block the runtime built.
 *
 * Work decomposition
 *   A dispatch runs a grid of workgroup_count.x * .y * .z workgroups. The
 *   grid is the function's choice and the same on every device; how many
 *   threads run one workgroup (workgroup_size) belongs to the kernel. A CPU
 *   kernel runs one workgroup per call; calls for different workgroups may
 *   run concurrently and in any order, so they must be independent.
 *
 * Thread safety
 *   Kernel functions are reentrant. init and deinit are never called
 *   concurrently with each other or with a dispatch of the same library on
 *   the same device. */
#ifndef AXRT_KERNEL_ABI_H_
#define AXRT_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. A library reports the version it was built
 * for; the runtime takes libraries of every version it knows, and a library
 * of a newer version is refused by number. Version 1 is this header. */
#define AXRT_KERNEL_ABI_VERSION 1u

/* Result of a kernel, init or deinit: 0 is success, anything else one of
 * the axrt_status_code_t numbers (13 = INTERNAL when unsure). */
typedef int32_t axrt_kernel_result_t;
#define AXRT_KERNEL_OK 0

typedef struct axrt_kernel_dim3_t {
  uint32_t x;
  uint32_t y;
  uint32_t z;
} axrt_kernel_dim3_t;

/* What every workgroup of one dispatch shares. Read-only to the kernel. */
typedef struct axrt_kernel_dispatch_t {
  size_t struct_size;                  /* sizeof at the runtime's ABI */
  axrt_kernel_dim3_t workgroup_count;  /* the grid */
  axrt_kernel_dim3_t workgroup_size;   /* from the executable's kernel */
  uint32_t dynamic_shared_memory_size; /* bytes per workgroup */
  /* Workgroups of this dispatch run on at most this many threads at once;
   * axrt_kernel_workgroup_t.worker_id is below it. */
  uint32_t worker_count;
  /* What the library's init returned for this device (NULL without init). */
  void* library_state;
} axrt_kernel_dispatch_t;

/* What one call of a CPU kernel is told about its workgroup. */
typedef struct axrt_kernel_workgroup_t {
  size_t struct_size;
  axrt_kernel_dim3_t workgroup_id; /* each below workgroup_count */
  /* The thread running this call, in [0, worker_count): per-thread scratch
   * may be indexed by it. */
  uint32_t worker_id;
  /* dynamic_shared_memory_size bytes, 64-byte aligned, private to this call,
   * contents undefined on entry; NULL when the size is 0. */
  void* dynamic_shared_memory;
  /* A kernel that fails may write a NUL-terminated reason here (truncated
   * to the capacity); the runtime puts it in its stream's failure. */
  char* error_message;
  size_t error_message_capacity;
} axrt_kernel_workgroup_t;

/* A CPU kernel: runs workgroup `workgroup->workgroup_id` of a dispatch.
 * `args` points at the argument block, 8-byte aligned. Returns
 * AXRT_KERNEL_OK, or a status code that fails the dispatch's stream; the
 * other workgroups of a failed dispatch may or may not run. A kernel never
 * calls blocking axrt functions. */
typedef axrt_kernel_result_t (*axrt_cpu_kernel_fn_t)(const void* args,
                                                     const axrt_kernel_dispatch_t* dispatch,
                                                     const axrt_kernel_workgroup_t* workgroup);

/* ---------------------------------------------------------------------- */
/* Parameter tables                                                        */
/* ---------------------------------------------------------------------- */

/* The numbers are those of the .axe format's ParamKind. */
typedef uint32_t axrt_kernel_param_kind_t;
enum {
  AXRT_KERNEL_PARAM_KIND_BUFFER = 1,
  AXRT_KERNEL_PARAM_KIND_SCALAR = 2,
};

/* Scalar types use the .axe format's DType numbers (axrt_dtype_t). Only
 * whole-byte types are scalars: 1, 2, 4 or 8 bytes. */

/* One parameter as a library declares it. The runtime refuses to load an
 * executable whose kernel disagrees with the library's declaration. */
typedef struct axrt_kernel_param_info_t {
  const char* name;              /* for messages; may differ from the .axe */
  axrt_kernel_param_kind_t kind;
  uint32_t scalar_type;          /* SCALAR: an axrt_dtype_t; BUFFER: 0 */
  /* BUFFER, optional: the quantization layout_id this kernel reads. When
   * set, the executable's parameter must declare a layout with this id, so
   * the kernel can only ever be bound to weights in that layout. */
  const char* layout_id;
} axrt_kernel_param_info_t;

typedef struct axrt_kernel_info_t {
  const char* name; /* the entry symbol executables name; unique */
  axrt_cpu_kernel_fn_t function;
  const axrt_kernel_param_info_t* params;
  uint32_t param_count;
  /* The argument block's size under the layout rules above (a check on the
   * table: the runtime refuses a library whose sizes disagree). */
  uint32_t args_size;
} axrt_kernel_info_t;

/* ---------------------------------------------------------------------- */
/* Kernel libraries                                                        */
/* ---------------------------------------------------------------------- */

/* What init is told about the device it prepares the library for. */
typedef struct axrt_kernel_library_context_t {
  size_t struct_size;
  const char* device_id;  /* "cpu:0" */
  uint32_t worker_count;  /* threads that may run workgroups at once */
  char* error_message;    /* for a failing init, as in a workgroup */
  size_t error_message_capacity;
} axrt_kernel_library_context_t;

/* A kernel library: a static table that lives as long as the library is
 * loaded. Fields are append-only; struct_size tells the runtime which it
 * has. */
typedef struct axrt_kernel_library_t {
  size_t struct_size;
  uint32_t abi_version; /* AXRT_KERNEL_ABI_VERSION the library was built for */
  uint32_t version;     /* the library's own version, compared with an
                           executable's library_min_version */
  const char* name;     /* the name executables use ("axrt.cpu") */
  const axrt_kernel_info_t* kernels;
  uint32_t kernel_count;
  /* Optional. Called once per device before the first dispatch of any
   * executable that needs this library on it; `*out_state` becomes
   * axrt_kernel_dispatch_t.library_state there. A failure refuses the
   * load. */
  axrt_kernel_result_t (*init)(const axrt_kernel_library_context_t* context, void** out_state);
  /* Optional. Called once per successful init, when the last executable
   * using the library on that device is unloaded. */
  void (*deinit)(void* state);
} axrt_kernel_library_t;

/* The one function a library exports: returns its table for a runtime that
 * speaks ABI versions up to `max_abi_version`, or NULL when it cannot serve
 * one. A host shared object embedded in an .axe file exports it under
 * AXRT_KERNEL_LIBRARY_QUERY_SYMBOL. */
typedef const axrt_kernel_library_t* (*axrt_kernel_library_query_fn_t)(uint32_t max_abi_version);
#define AXRT_KERNEL_LIBRARY_QUERY_SYMBOL "axrt_kernel_library_query"

/* Bytes and alignment of a scalar of `dtype` (an axrt_dtype_t) in the
 * argument block; 0 for a type that cannot be a scalar. */
static inline uint32_t axrt_kernel_scalar_size(uint32_t dtype) {
  switch (dtype) {
    case 1: case 2: case 3: case 18: case 19: case 20: case 21: case 23:
      return 1; /* bool, int8, uint8, fp8 */
    case 4: case 5: case 10: case 11:
      return 2; /* int16, uint16, float16, bfloat16 */
    case 6: case 7: case 12:
      return 4; /* int32, uint32, float32 */
    case 8: case 9: case 13:
      return 8; /* int64, uint64, float64 */
    default:
      return 0;
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_KERNEL_ABI_H_ */
