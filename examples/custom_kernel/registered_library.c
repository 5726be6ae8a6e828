/* The "example.registered" kernel library (registered_library.h). */
#include "registered_library.h"

#include <stdio.h>
#include <stdlib.h>

/* A BUFFER parameter is an 8-byte address; on the CPU a host pointer, so
 * the argument structs below name buffers with their pointer types. */
_Static_assert(sizeof(void*) == 8, "the kernel ABI's buffers are 8-byte host pointers");

/* What init prepares for a device. A real library would keep per-worker
 * scratch or tuned tables here; this one keeps a marker the kernels check,
 * which shows that the state reaches every dispatch. */
typedef struct example_state_t {
  uint32_t magic;
  uint32_t worker_count;
} example_state_t;

#define EXAMPLE_STATE_MAGIC 0x4558504cu

static axrt_kernel_result_t example_init(const axrt_kernel_library_context_t* context,
                                         void** out_state) {
  example_state_t* state = malloc(sizeof(*state));
  if (state == NULL) {
    snprintf(context->error_message, context->error_message_capacity,
             "cannot allocate the state for %s", context->device_id);
    return 8; /* RESOURCE_EXHAUSTED */
  }
  state->magic = EXAMPLE_STATE_MAGIC;
  state->worker_count = context->worker_count;
  *out_state = state;
  return AXRT_KERNEL_OK;
}

static void example_deinit(void* state) { free(state); }

/* Refuses a dispatch whose state init did not make. */
static axrt_kernel_result_t check_state(const axrt_kernel_dispatch_t* dispatch,
                                        const axrt_kernel_workgroup_t* workgroup) {
  const example_state_t* state = (const example_state_t*)dispatch->library_state;
  if (state == NULL || state->magic != EXAMPLE_STATE_MAGIC) {
    snprintf(workgroup->error_message, workgroup->error_message_capacity,
             "the dispatch carries no state of this library's init");
    return 13; /* INTERNAL */
  }
  return AXRT_KERNEL_OK;
}

/* The elements [*begin, *end) of workgroup x, clipped to n. */
static void range_of(const axrt_kernel_workgroup_t* workgroup, uint64_t n, uint64_t* begin,
                     uint64_t* end) {
  *begin = (uint64_t)workgroup->workgroup_id.x * EXAMPLE_ELEMENTS_PER_WORKGROUP;
  *end = *begin + EXAMPLE_ELEMENTS_PER_WORKGROUP;
  if (*begin > n) *begin = n;
  if (*end > n) *end = n;
}

/* The argument blocks, laid out by the C rules of docs/kernel-abi.md §1. */
typedef struct saxpy_args_t {
  const float* x;
  const float* y;
  float* out;
  uint64_t n;
  float alpha;
} saxpy_args_t;
_Static_assert(sizeof(saxpy_args_t) == 40, "saxpy's argument block");

typedef struct clamp_args_t {
  const float* x;
  float* out;
  uint64_t n;
  float lo;
  float hi;
} clamp_args_t;
_Static_assert(sizeof(clamp_args_t) == 32, "clamp's argument block");

static axrt_kernel_result_t example_saxpy_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup) {
  const saxpy_args_t* a = (const saxpy_args_t*)args;
  const axrt_kernel_result_t status = check_state(dispatch, workgroup);
  if (status != AXRT_KERNEL_OK) return status;
  uint64_t begin, end;
  range_of(workgroup, a->n, &begin, &end);
  for (uint64_t i = begin; i < end; ++i) a->out[i] = a->alpha * a->x[i] + a->y[i];
  return AXRT_KERNEL_OK;
}

static axrt_kernel_result_t example_clamp_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup) {
  const clamp_args_t* a = (const clamp_args_t*)args;
  const axrt_kernel_result_t status = check_state(dispatch, workgroup);
  if (status != AXRT_KERNEL_OK) return status;
  uint64_t begin, end;
  range_of(workgroup, a->n, &begin, &end);
  for (uint64_t i = begin; i < end; ++i) {
    const float v = a->x[i];
    a->out[i] = v < a->lo ? a->lo : v > a->hi ? a->hi : v;
  }
  return AXRT_KERNEL_OK;
}

/* axrt_dtype_t numbers of the scalar types used here. */
enum { kUint64 = 9, kFloat32 = 12 };

static const axrt_kernel_param_info_t kSaxpyParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint64, NULL},
    {"alpha", AXRT_KERNEL_PARAM_KIND_SCALAR, kFloat32, NULL},
};

static const axrt_kernel_param_info_t kClampParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint64, NULL},
    {"lo", AXRT_KERNEL_PARAM_KIND_SCALAR, kFloat32, NULL},
    {"hi", AXRT_KERNEL_PARAM_KIND_SCALAR, kFloat32, NULL},
};

static const axrt_kernel_info_t kKernels[] = {
    {"example_saxpy_f32", example_saxpy_f32, kSaxpyParams, 5, sizeof(saxpy_args_t)},
    {"example_clamp_f32", example_clamp_f32, kClampParams, 5, sizeof(clamp_args_t)},
};

static const axrt_kernel_library_t kLibrary = {
    sizeof(axrt_kernel_library_t),
    AXRT_KERNEL_ABI_VERSION,
    EXAMPLE_REGISTERED_LIBRARY_VERSION,
    EXAMPLE_REGISTERED_LIBRARY_NAME,
    kKernels,
    sizeof(kKernels) / sizeof(kKernels[0]),
    example_init,
    example_deinit,
};

const axrt_kernel_library_t* example_registered_library(void) { return &kLibrary; }
