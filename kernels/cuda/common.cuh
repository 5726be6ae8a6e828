// Shared pieces of the CUDA kernels (docs/kernels.md): the block shape every
// kernel is built for, block reductions, the fp8 decoder and the KV cache's
// element types.
//
// Every kernel is an `extern "C" __global__` function whose parameters are
// its contract's (kernels/contracts.json) in order, with natural C types: a
// buffer is a pointer (8 bytes), a scalar its value. Its packed parameter
// buffer is then byte for byte the argument block of
// include/axrt/kernel_abi.h; the test cuda_kernels_fatbin checks every image
// against the contracts.
//
// There is no error channel from a kernel in ABI version 1: a kernel whose
// scalars break its rules (the CPU library refuses them with
// INVALID_ARGUMENT) returns without writing anything.
#ifndef AXRT_KERNELS_CUDA_COMMON_CUH_
#define AXRT_KERNELS_CUDA_COMMON_CUH_

#include <stdint.h>

namespace axrt_cuda {

// The CUDA block of every kernel ("CUDA block" in docs/kernels.md).
constexpr unsigned kBlockThreads = 256;
constexpr unsigned kWarpSize = 32;
constexpr unsigned kBlockWarps = kBlockThreads / kWarpSize;

// Elementwise kernels: elements per workgroup (the grid is ceil(n / 4096)).
constexpr uint64_t kElementsPerBlock = 4096;

struct SumOp {
  __device__ __forceinline__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (unsigned offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Reduces `v` over the block and returns the result to every thread, in the
// same order on every thread (so all of them agree bit for bit). `scratch`
// holds kBlockWarps values; the trailing barrier lets the caller reuse it.
// Needs blockDim.x == kBlockThreads.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* scratch, Op op) {
  v = warp_reduce(v, op);
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  T result = scratch[0];
#pragma unroll
  for (unsigned w = 1; w < kBlockWarps; ++w) result = op(result, scratch[w]);
  __syncthreads();
  return result;
}

// FLOAT8_E4M3FN (sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN) to f32, exactly.
__device__ __forceinline__ float e4m3fn_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exponent = (code >> 3) & 0xfu;
  const uint32_t mantissa = code & 0x7u;
  uint32_t bits;
  if (exponent == 0xfu && mantissa == 0x7u) {
    bits = 0x7fc00000u;
  } else if (exponent == 0) {
    // Subnormal: mantissa x 2^-9, exact in f32.
    bits = __float_as_uint(static_cast<float>(mantissa) * 0.001953125f);
  } else {
    bits = ((exponent + 120u) << 23) | (mantissa << 20);
  }
  return __uint_as_float(sign | bits);
}

// f32 -> FLOAT8_E4M3FN for |x| <= 448 or NaN, rounding to nearest even;
// larger magnitudes saturate to 448. The CPU's kernels/cpu/kv_cache.h, bit
// for bit.
__device__ __forceinline__ uint8_t float_to_e4m3fn(float x) {
  const uint32_t bits = __float_as_uint(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if (isnan(x)) return sign | 0x7f;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) return sign | static_cast<uint8_t>(__float2int_rn(a * 512.0f));
  const uint32_t magnitude = bits & 0x7fffffffu;
  const uint32_t code = ((magnitude + 0x7ffffu + ((magnitude >> 20) & 1u)) >> 20) - (120u << 3);
  return sign | static_cast<uint8_t>(code > 0x7eu ? 0x7eu : code);
}

// silu(g) * u, the one expression of axrt_silu_mul_f32 and of the matmuls
// that fuse it (the same bits wherever it is compiled into this fatbin).
__device__ __forceinline__ float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

// f32 -> bf16 bits, rounding to nearest even; NaN stays NaN.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  const uint32_t bits = __float_as_uint(x);
  if (isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// The paged KV cache's element types (kernels/cpu/kv_cache.h): the cache is
// [L, 2, NB, KVH, <run>], a run holding a block's block_size rows of one KV
// head: f32 or bf16 rows of D, or block_size rows of D e4m3fn codes then
// block_size f32 scales (a row's largest magnitude / 448).
enum class KvKind { kF32, kBf16, kFp8E4m3 };

__host__ __device__ constexpr uint64_t kv_run_bytes(KvKind kind, uint64_t block_size,
                                                    uint64_t head_dim) {
  return kind == KvKind::kF32    ? block_size * head_dim * 4
         : kind == KvKind::kBf16 ? block_size * head_dim * 2
                                 : block_size * (head_dim + 4);
}

// Element d of row `slot` of a run, as f32.
template <KvKind kKind>
__device__ __forceinline__ float kv_element(const uint8_t* run, uint64_t slot, uint64_t d,
                                            uint64_t block_size, uint64_t head_dim) {
  if constexpr (kKind == KvKind::kF32) {
    return reinterpret_cast<const float*>(run)[slot * head_dim + d];
  } else if constexpr (kKind == KvKind::kBf16) {
    return __uint_as_float(
        static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(run)[slot * head_dim + d]) << 16);
  } else {
    const float scale = reinterpret_cast<const float*>(run + block_size * head_dim)[slot];
    return e4m3fn_to_float(run[slot * head_dim + d]) * scale;
  }
}

}  // namespace axrt_cuda

#endif  // AXRT_KERNELS_CUDA_COMMON_CUH_
