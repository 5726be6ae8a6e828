// The built-in CPU kernels (docs/kernels.md): their argument blocks as C
// structs and their entry points. Internal to the library; the runtime finds
// the kernels through cpu_kernel_library()'s table.
#ifndef AXRT_KERNELS_CPU_KERNELS_H_
#define AXRT_KERNELS_CPU_KERNELS_H_

#include <stdint.h>

#include "axrt/kernel_abi.h"

// A BUFFER parameter is an 8-byte address; on the CPU it is a host pointer,
// so the blocks below name it with its pointer type.
static_assert(sizeof(void*) == 8, "the CPU kernels need 64-bit host pointers");

namespace axrt::kernels::cpu {

// Elementwise, binary: a, b, out, n.
struct BinaryArgs {
  const float* a;
  const float* b;
  float* out;
  uint64_t n;
};
static_assert(sizeof(BinaryArgs) == 32);

// Elementwise, unary: x, out, n.
struct UnaryArgs {
  const float* x;
  float* out;
  uint64_t n;
};
static_assert(sizeof(UnaryArgs) == 24);

struct SoftmaxArgs {
  const float* x;
  float* out;
  uint64_t rows;
  uint64_t cols;
};
static_assert(sizeof(SoftmaxArgs) == 32);

struct LayerNormArgs {
  const float* x;
  const float* gamma;
  const float* beta;
  float* out;
  uint64_t rows;
  uint64_t cols;
  float epsilon;
};
static_assert(sizeof(LayerNormArgs) == 56);

struct RmsNormArgs {
  const float* x;
  const float* gamma;
  float* out;
  uint64_t rows;
  uint64_t cols;
  float epsilon;
};
static_assert(sizeof(RmsNormArgs) == 48);

// y[M, N] = x[M, K] . w[K, N] + bias[N].
struct MatmulF32Args {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulF32Args) == 56);

// w int8 [N, K], scale f32 [N, 1].
struct MatmulInt8Args {
  const float* x;
  const int8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulInt8Args) == 64);

// AWQ and GPTQ (v1, v2) int4: qweight u32, scales f16 [K/g, N], qzeros u32
// [K/g, N/8].
struct MatmulInt4Args {
  const float* x;
  const uint32_t* qweight;
  const uint16_t* scales;
  const uint32_t* qzeros;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
  uint64_t group_size;
};
static_assert(sizeof(MatmulInt4Args) == 80);

// w e4m3fn [N, K], scale f32 [ceil(N/bn), ceil(K/bk)].
struct MatmulFp8Args {
  const float* x;
  const uint8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
  uint64_t block_n;
  uint64_t block_k;
};
static_assert(sizeof(MatmulFp8Args) == 80);

}  // namespace axrt::kernels::cpu

// The entry points, C symbols named as in docs/kernels.md. Hidden like
// every non-API symbol of libaxrt.
extern "C" {

axrt_kernel_result_t axrt_add_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_mul_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_gelu_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_silu_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                   const axrt_kernel_workgroup_t* workgroup);

axrt_kernel_result_t axrt_softmax_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_layernorm_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                        const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rmsnorm_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                      const axrt_kernel_workgroup_t* workgroup);

axrt_kernel_result_t axrt_matmul_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_int8_pc_f32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_f32(const void* args,
                                               const axrt_kernel_dispatch_t* dispatch,
                                               const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_v1_int4_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_b128_f32(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);

}  // extern "C"

#endif  // AXRT_KERNELS_CPU_KERNELS_H_
