/* "example.torch": elementwise kernels with their gradients, for axrt
 * functions used as PyTorch operators (torch_layer.py, and the tests in
 * tests/python/test_torch_ops.py). Built as a host shared object and
 * embedded in the executable that uses them; it includes only
 * axrt/kernel_abi.h. Every kernel runs as one workgroup over its elements;
 * f64 versions let torch.autograd.gradcheck run in double precision.
 *
 *   tanh2(x, y, n):                y = 2 tanh(x)
 *   tanh2_grad(x, gy, gx, n):      gx = 2 (1 - tanh(x)^2) gy
 *   mul(a, b, c, n):               c = a b
 *   mul_grad(a, b, gc, ga, gb, n): ga = gc b, gb = gc a
 *   rowsum(x, y, rows, cols):      y[r] = sum_c x[r, c]
 *   rowsum_grad(gy, gx, rows, cols): gx[r, c] = gy[r]
 *   accumulate(acc, x, y, n):      acc += x (in place), y = acc */
#include <axrt/kernel_abi.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct { const void* x; void* y; uint64_t n; } unary_args_t;
typedef struct { const void* x; const void* g; void* out; uint64_t n; } binary_args_t;
typedef struct { const void* a; const void* b; const void* gc; void* ga; void* gb;
                 uint64_t n; } mul_grad_args_t;
typedef struct { const void* x; void* y; uint64_t rows; uint64_t cols; } rows_args_t;
typedef struct { void* acc; const void* x; void* y; uint64_t n; } accumulate_args_t;

#define DEFINE_KERNELS(T, S)                                                          \
  static axrt_kernel_result_t tanh2_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                        const axrt_kernel_workgroup_t* w) {           \
    (void)d, (void)w;                                                                 \
    const unary_args_t* a = args;                                                     \
    for (uint64_t i = 0; i < a->n; ++i) ((T*)a->y)[i] = (T)(2 * tanh(((const T*)a->x)[i])); \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t tanh2_grad_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                             const axrt_kernel_workgroup_t* w) {      \
    (void)d, (void)w;                                                                 \
    const binary_args_t* a = args;                                                    \
    for (uint64_t i = 0; i < a->n; ++i) {                                             \
      const double t = tanh(((const T*)a->x)[i]);                                     \
      ((T*)a->out)[i] = (T)(2 * (1 - t * t) * ((const T*)a->g)[i]);                   \
    }                                                                                 \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t mul_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                      const axrt_kernel_workgroup_t* w) {             \
    (void)d, (void)w;                                                                 \
    const binary_args_t* a = args;                                                    \
    for (uint64_t i = 0; i < a->n; ++i)                                               \
      ((T*)a->out)[i] = ((const T*)a->x)[i] * ((const T*)a->g)[i];                    \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t mul_grad_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                           const axrt_kernel_workgroup_t* w) {        \
    (void)d, (void)w;                                                                 \
    const mul_grad_args_t* a = args;                                                  \
    for (uint64_t i = 0; i < a->n; ++i) {                                             \
      const T gc = ((const T*)a->gc)[i];                                              \
      ((T*)a->ga)[i] = gc * ((const T*)a->b)[i];                                      \
      ((T*)a->gb)[i] = gc * ((const T*)a->a)[i];                                      \
    }                                                                                 \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t rowsum_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                         const axrt_kernel_workgroup_t* w) {          \
    (void)d, (void)w;                                                                 \
    const rows_args_t* a = args;                                                      \
    for (uint64_t r = 0; r < a->rows; ++r) {                                          \
      double s = 0;                                                                   \
      for (uint64_t c = 0; c < a->cols; ++c) s += ((const T*)a->x)[r * a->cols + c];  \
      ((T*)a->y)[r] = (T)s;                                                           \
    }                                                                                 \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t rowsum_grad_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                              const axrt_kernel_workgroup_t* w) {     \
    (void)d, (void)w;                                                                 \
    const rows_args_t* a = args;                                                      \
    for (uint64_t r = 0; r < a->rows; ++r)                                            \
      for (uint64_t c = 0; c < a->cols; ++c)                                          \
        ((T*)a->y)[r * a->cols + c] = ((const T*)a->x)[r];                            \
    return AXRT_KERNEL_OK;                                                            \
  }                                                                                   \
  static axrt_kernel_result_t accumulate_##S(const void* args, const axrt_kernel_dispatch_t* d, \
                                             const axrt_kernel_workgroup_t* w) {      \
    (void)d, (void)w;                                                                 \
    const accumulate_args_t* a = args;                                                \
    for (uint64_t i = 0; i < a->n; ++i) {                                             \
      ((T*)a->acc)[i] += ((const T*)a->x)[i];                                         \
      ((T*)a->y)[i] = ((T*)a->acc)[i];                                                \
    }                                                                                 \
    return AXRT_KERNEL_OK;                                                            \
  }

DEFINE_KERNELS(double, f64)
DEFINE_KERNELS(float, f32)

enum { kUint64 = 9 };
#define B(name) {name, AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL}
#define U64(name) {name, AXRT_KERNEL_PARAM_KIND_SCALAR, kUint64, NULL}

static const axrt_kernel_param_info_t kUnary[] = {B("x"), B("y"), U64("n")};
static const axrt_kernel_param_info_t kBinary[] = {B("x"), B("g"), B("out"), U64("n")};
static const axrt_kernel_param_info_t kMulGrad[] = {B("a"), B("b"), B("gc"), B("ga"), B("gb"),
                                                    U64("n")};
static const axrt_kernel_param_info_t kRows[] = {B("x"), B("y"), U64("rows"), U64("cols")};
static const axrt_kernel_param_info_t kAccumulate[] = {B("acc"), B("x"), B("y"), U64("n")};

#define ENTRIES(S)                                                          \
  {"tanh2_" #S, tanh2_##S, kUnary, 3, sizeof(unary_args_t)},                \
  {"tanh2_grad_" #S, tanh2_grad_##S, kBinary, 4, sizeof(binary_args_t)},    \
  {"mul_" #S, mul_##S, kBinary, 4, sizeof(binary_args_t)},                  \
  {"mul_grad_" #S, mul_grad_##S, kMulGrad, 6, sizeof(mul_grad_args_t)},     \
  {"rowsum_" #S, rowsum_##S, kRows, 4, sizeof(rows_args_t)},                \
  {"rowsum_grad_" #S, rowsum_grad_##S, kRows, 4, sizeof(rows_args_t)},      \
  {"accumulate_" #S, accumulate_##S, kAccumulate, 4, sizeof(accumulate_args_t)}

static const axrt_kernel_info_t kKernels[] = {ENTRIES(f64), ENTRIES(f32)};

static const axrt_kernel_library_t kLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, "example.torch", kKernels,
    sizeof(kKernels) / sizeof(kKernels[0]), NULL, NULL};

__attribute__((visibility("default"))) const axrt_kernel_library_t* axrt_kernel_library_query(
    uint32_t max_abi_version) {
  return max_abi_version >= AXRT_KERNEL_ABI_VERSION ? &kLibrary : NULL;
}
