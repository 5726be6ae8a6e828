/* "example.embedded": a CPU kernel library built as a host shared object
 * and embedded in an .axe file (embedded.c). It exports exactly one symbol,
 * axrt_kernel_library_query (built with -fvisibility=hidden; everything
 * else is static), includes include/axrt/kernel_abi.h only and links
 * nothing from axrt.
 *
 * Kernels (entry symbols):
 *   example_transpose_f32(in, out, rows: u64, cols: u64)
 *       out[c][r] = in[r][c] for in [rows, cols]; workgroup (i, j) handles
 *       the 16 x 16 tile of columns [16 i, 16 i + 16) and rows
 *       [16 j, 16 j + 16): grid (ceil(cols / 16), ceil(rows / 16), 1).
 *   example_iota_u32(out, n: u32, start: u32, step: u32)
 *       out[i] = start + i step (mod 2^32); 256 elements per workgroup:
 *       grid (ceil(n / 256), 1, 1). */
#include <axrt/kernel_abi.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(sizeof(void*) == 8, "the kernel ABI's buffers are 8-byte host pointers");

enum { kTile = 16, kIotaPerWorkgroup = 256 };

typedef struct transpose_args_t {
  const float* in;
  float* out;
  uint64_t rows;
  uint64_t cols;
} transpose_args_t;
_Static_assert(sizeof(transpose_args_t) == 32, "transpose's argument block");

/* Three 4-byte scalars after a buffer: offsets 8, 12, 16, and the block
 * rounded up to its 8-byte alignment. */
typedef struct iota_args_t {
  uint32_t* out;
  uint32_t n;
  uint32_t start;
  uint32_t step;
} iota_args_t;
_Static_assert(sizeof(iota_args_t) == 24, "iota's argument block");

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static axrt_kernel_result_t example_transpose_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup) {
  (void)dispatch;
  const transpose_args_t* a = (const transpose_args_t*)args;
  const uint64_t c0 = (uint64_t)workgroup->workgroup_id.x * kTile;
  const uint64_t r0 = (uint64_t)workgroup->workgroup_id.y * kTile;
  const uint64_t c1 = min_u64(a->cols, c0 + kTile);
  const uint64_t r1 = min_u64(a->rows, r0 + kTile);
  for (uint64_t r = r0; r < r1; ++r) {
    for (uint64_t c = c0; c < c1; ++c) a->out[c * a->rows + r] = a->in[r * a->cols + c];
  }
  return AXRT_KERNEL_OK;
}

static axrt_kernel_result_t example_iota_u32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup) {
  (void)dispatch;
  const iota_args_t* a = (const iota_args_t*)args;
  const uint64_t begin = (uint64_t)workgroup->workgroup_id.x * kIotaPerWorkgroup;
  const uint64_t end = min_u64(a->n, begin + kIotaPerWorkgroup);
  for (uint64_t i = begin; i < end; ++i) a->out[i] = a->start + (uint32_t)i * a->step;
  return AXRT_KERNEL_OK;
}

/* axrt_dtype_t numbers of the scalar types used here. */
enum { kUint32 = 7, kUint64 = 9 };

static const axrt_kernel_param_info_t kTransposeParams[] = {
    {"in", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"rows", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint64, NULL},
    {"cols", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint64, NULL},
};

static const axrt_kernel_param_info_t kIotaParams[] = {
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint32, NULL},
    {"start", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint32, NULL},
    {"step", AXRT_KERNEL_PARAM_KIND_SCALAR, kUint32, NULL},
};

static const axrt_kernel_info_t kKernels[] = {
    {"example_transpose_f32", example_transpose_f32, kTransposeParams, 4, sizeof(transpose_args_t)},
    {"example_iota_u32", example_iota_u32, kIotaParams, 4, sizeof(iota_args_t)},
};

static const axrt_kernel_library_t kLibrary = {
    sizeof(axrt_kernel_library_t),
    AXRT_KERNEL_ABI_VERSION,
    1, /* the library's own version */
    "example.embedded",
    kKernels,
    sizeof(kKernels) / sizeof(kKernels[0]),
    NULL, /* no init: the kernels keep no state */
    NULL,
};

/* The one exported symbol (AXRT_KERNEL_LIBRARY_QUERY_SYMBOL). A runtime of
 * an older ABI than this library's would get NULL; version 1 is the first,
 * so every runtime that can load this file speaks it. */
__attribute__((visibility("default"))) const axrt_kernel_library_t* axrt_kernel_library_query(
    uint32_t max_abi_version) {
  return max_abi_version >= AXRT_KERNEL_ABI_VERSION ? &kLibrary : NULL;
}
