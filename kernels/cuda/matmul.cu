// Matmuls on f32, bf16, int8 and fp8 weights (docs/kernels.md, "Matrix
// multiplication"); the tiling is matmul_tile.cuh's.
#include <cuda_fp16.h>

#include <type_traits>

#include "matmul_tile.cuh"

namespace axrt_cuda {
namespace {

// w f32 [K, N]: a warp reads 32 consecutive columns of one k.
struct F32Weights {
  const float* __restrict__ w;
  uint64_t N;
  uint64_t K;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
#pragma unroll
    for (unsigned l = 0; l < kTileK * kTileMN / kBlockThreads; ++l) {
      const unsigned idx = threadIdx.x + l * kBlockThreads;
      const unsigned kk = idx / kTileMN;
      const unsigned c = idx % kTileMN;
      const uint64_t k = k0 + kk;
      const uint64_t n = n0 + c;
      tile[kk][c] = (k < K && n < N) ? w[k * N + n] : 0.0f;
    }
  }
};

// w [N, K] (the [out, in] layout) of f32, or of bf16 as raw 16-bit patterns:
// W[k][n] is w[n][k], bf16 widened exactly (it is the top half of an f32).
// A half-warp reads 16 consecutive k of one output channel.
__device__ __forceinline__ float widen(float value) { return value; }
__device__ __forceinline__ float widen(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

template <class T>
struct NkWeights {
  const T* __restrict__ w;
  uint64_t N;
  uint64_t K;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
#pragma unroll
    for (unsigned l = 0; l < kTileK * kTileMN / kBlockThreads; ++l) {
      const unsigned idx = threadIdx.x + l * kBlockThreads;
      const unsigned c = idx / kTileK;
      const unsigned kk = idx % kTileK;
      const uint64_t k = k0 + kk;
      const uint64_t n = n0 + c;
      tile[kk][c] = (k < K && n < N) ? widen(w[n * K + k]) : 0.0f;
    }
  }
};

// A code's value: int8 as it is, e4m3fn decoded (both exact in f32).
struct Int8Code {
  using T = int8_t;
  __device__ __forceinline__ static float value(int8_t c) { return static_cast<float>(c); }
};
struct E4m3fnCode {
  using T = uint8_t;
  __device__ __forceinline__ static float value(uint8_t c) { return e4m3fn_to_float(c); }
};

// Codes [N, K] (int8 or e4m3fn), scale f32 [N, 1]: W[k][n] = value(w[n][k])
// * scale[n]. A half-warp reads 16 consecutive k of one output channel.
template <class Code>
struct PerChannelWeights {
  const typename Code::T* __restrict__ w;
  const float* __restrict__ scale;
  uint64_t N;
  uint64_t K;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
#pragma unroll
    for (unsigned l = 0; l < kTileK * kTileMN / kBlockThreads; ++l) {
      const unsigned idx = threadIdx.x + l * kBlockThreads;
      const unsigned c = idx / kTileK;
      const unsigned kk = idx % kTileK;
      const uint64_t k = k0 + kk;
      const uint64_t n = n0 + c;
      tile[kk][c] = (k < K && n < N) ? Code::value(w[n * K + k]) * scale[n] : 0.0f;
    }
  }
};

// w e4m3fn [N, K], scale f32 [ceil(N / bn), ceil(K / bk)] with bn, bk the
// block extents (the whole dimension where the scalar is 0):
// W[k][n] = e4m3(w[n][k]) * scale[n / bn][k / bk].
struct Fp8E4m3Weights {
  const uint8_t* __restrict__ w;
  const float* __restrict__ scale;
  uint64_t N;
  uint64_t K;
  uint64_t block_n;  // bn, never 0
  uint64_t block_k;  // bk, never 0
  uint64_t scale_cols;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
#pragma unroll
    for (unsigned l = 0; l < kTileK * kTileMN / kBlockThreads; ++l) {
      const unsigned idx = threadIdx.x + l * kBlockThreads;
      const unsigned c = idx / kTileK;
      const unsigned kk = idx % kTileK;
      const uint64_t k = k0 + kk;
      const uint64_t n = n0 + c;
      float value = 0.0f;
      if (k < K && n < N) {
        value = e4m3fn_to_float(w[n * K + k]) * scale[(n / block_n) * scale_cols + k / block_k];
      }
      tile[kk][c] = value;
    }
  }
};

__device__ __forceinline__ void matmul_fp8_e4m3(const float* x, const uint8_t* w,
                                                const float* scale, const float* bias, float* y,
                                                uint64_t M, uint64_t N, uint64_t K,
                                                uint64_t block_n, uint64_t block_k) {
  // An empty N or K leaves no scale to read; the tile then writes y = bias.
  const uint64_t bn = block_n != 0 ? block_n : (N != 0 ? N : 1);
  const uint64_t bk = block_k != 0 ? block_k : (K != 0 ? K : 1);
  matmul_tile(x, bias, y, M, N, K, Fp8E4m3Weights{w, scale, N, K, bn, bk, (K + bk - 1) / bk});
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_f32(const float* x, const float* w, const float* bias, float* y, uint64_t M,
                    uint64_t N, uint64_t K) {
  axrt_cuda::matmul_tile(x, bias, y, M, N, K, axrt_cuda::F32Weights{w, N, K});
}

// bf16 weights [N, K], no quantization layout.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_bf16_f32(const float* x, const uint16_t* w, const float* bias, float* y,
                         uint64_t M, uint64_t N, uint64_t K) {
  axrt_cuda::matmul_tile(x, bias, y, M, N, K, axrt_cuda::NkWeights<uint16_t>{w, N, K});
}

namespace axrt_cuda {
namespace {

struct FloatAdd {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

constexpr uint64_t kDecodeCols = 8;   // output columns of a block: one a warp
constexpr unsigned kDecodeRows = 16;  // rows of x a block serves

// An fp8 e4m3fn code, as its own type for matmul_decode.
struct E4m3 {
  uint8_t code;
};

// Two e4m3fn codes, the first in the low byte, as floats, exactly: through
// f16 (which holds every e4m3fn value) by the conversion instruction of
// sm_89 and later, else one code at a time.
__device__ __forceinline__ float2 e4m3fn_pair_to_float2(uint32_t pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(static_cast<uint16_t>(pair)));
  return make_float2(__half2float(__ushort_as_half(static_cast<uint16_t>(halves))),
                     __half2float(__ushort_as_half(static_cast<uint16_t>(halves >> 16))));
#else
  return make_float2(e4m3fn_to_float(static_cast<uint8_t>(pair)),
                     e4m3fn_to_float(static_cast<uint8_t>(pair >> 8)));
#endif
}

// Weights [N, K] of type W (bf16 bits; int8 or e4m3fn, then times the
// column's scale) on the decode grid (docs/kernels.md, "Decode matmuls"):
// block (j, i) computes columns [8 j, 8 j + 8), a warp each, for rows
// [16 i, 16 i + 16). A lane reads 16 bytes of weights at a time (8 bf16 or
// 16 int8 or e4m3fn, widened exactly), at k = E lane + 32 E t, and keeps a
// sum per row; the warp then adds its lanes' sums in a fixed tree, and int8
// and fp8 multiply the sum by the column's scale, as the CPU does. Each
// output's arithmetic is the same whatever M and the other rows, so results
// do not depend on the batch. K a multiple of E takes 16-byte loads (the
// rows 16-byte aligned); another K, one element at a time in the same
// order.
template <class W>
__device__ __forceinline__ float widen(W v) {
  if constexpr (std::is_same_v<W, E4m3>) {
    return e4m3fn_to_float(v.code);
  } else if constexpr (sizeof(W) == 2) {
    return __uint_as_float(static_cast<uint32_t>(v) << 16);
  } else {
    return static_cast<float>(v);
  }
}

// The output y[m][n] = (sum (times scale[n])) + bias[n] of matmul_decode.
struct StoreOutput {
  float* y;
  uint64_t N;
  __device__ __forceinline__ void operator()(uint64_t m, uint64_t n, unsigned, float v) const {
    y[m * N + n] = v;
  }
};

template <class W, class Store = StoreOutput>
__device__ __forceinline__ void matmul_decode(const float* x, const W* w, const float* scale,
                                              const float* bias, uint64_t M, uint64_t N,
                                              uint64_t K, const Store& store) {
  constexpr int E = 16 / sizeof(W);  // weights a lane reads at a time
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t n = static_cast<uint64_t>(blockIdx.x) * kDecodeCols + threadIdx.x / kWarpSize;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kDecodeRows;
  if (blockIdx.z != 0 || n >= N || m0 >= M) return;
  const unsigned rows = M - m0 < kDecodeRows ? static_cast<unsigned>(M - m0) : kDecodeRows;
  const unsigned lane = threadIdx.x % kWarpSize;
  const W* row = w + n * K;
  const float* xs = x + m0 * K;
  float acc[kDecodeRows];
#pragma unroll
  for (unsigned r = 0; r < kDecodeRows; ++r) acc[r] = 0.0f;
  const bool vector = K % E == 0 && (reinterpret_cast<uintptr_t>(w) % 16) == 0 &&
                      (reinterpret_cast<uintptr_t>(x) % 16) == 0;
  for (uint64_t k = E * lane; k < K; k += E * kWarpSize) {
    float wf[E];
    if (vector) {
      const uint4 packed = *reinterpret_cast<const uint4*>(row + k);
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const uint32_t word = words[e * sizeof(W) / 4];
        const unsigned shift = 8 * ((e * sizeof(W)) % 4);
        if constexpr (std::is_same_v<W, E4m3>) {
          if (e % 2 == 0) {
            const float2 pair = e4m3fn_pair_to_float2(word >> shift);
            wf[e] = pair.x;
            wf[e + 1] = pair.y;
          }
        } else if constexpr (sizeof(W) == 2) {
          wf[e] = __uint_as_float(((word >> shift) & 0xffffu) << 16);
        } else {
          wf[e] = static_cast<float>(static_cast<int8_t>((word >> shift) & 0xffu));
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) wf[e] = k + e < K ? widen(row[k + e]) : 0.0f;
    }
#pragma unroll
    for (unsigned r = 0; r < kDecodeRows; ++r) {
      if (r < rows) {
        const float* xr = xs + r * K + k;
        float xf[E];
        if (vector) {
#pragma unroll
          for (int q = 0; q < E / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(xr + 4 * q);
            xf[4 * q] = v.x, xf[4 * q + 1] = v.y, xf[4 * q + 2] = v.z, xf[4 * q + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int e = 0; e < E; ++e) xf[e] = k + e < K ? xr[e] : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < E; ++e) acc[r] = fmaf(xf[e], wf[e], acc[r]);
      }
    }
  }
#pragma unroll
  for (unsigned r = 0; r < kDecodeRows; ++r) {
    const float sum = warp_reduce(acc[r], FloatAdd{});
    if (lane == 0 && r < rows) {
      store(m0 + r, n, r, (scale != nullptr ? sum * scale[n] : sum) + bias[n]);
    }
  }
}

// The gate/up outputs of a decode block into shared memory, h[r][warp].
struct StoreShared {
  float (*h)[kDecodeCols];
  __device__ __forceinline__ void operator()(uint64_t, uint64_t, unsigned r, float v) const {
    h[r][threadIdx.x / kWarpSize] = v;
  }
};

// bf16 gate/up weights interleaved 4 and 4 on the decode grid, then the
// gated SiLU (docs/kernels.md, "Decode matmuls"): block (j, i)'s warps 0..3
// compute the gate columns 8 j .. 8 j + 3 and warps 4..7 their up columns
// as matmul_decode does; act[m][4 j + c] = silu_mul(gate, up) through
// shared memory. N % 8 == 0, so a block's warps are all in range or none.
__device__ __forceinline__ void matmul_bf16_decode_silu(const float* x, const uint16_t* w,
                                                        const float* bias, float* act,
                                                        uint64_t M, uint64_t N, uint64_t K) {
  __shared__ float h[kDecodeRows][kDecodeCols];
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kDecodeRows;
  if (N % kDecodeCols != 0 || blockIdx.z != 0 || blockIdx.x * kDecodeCols >= N || m0 >= M) {
    return;
  }
  matmul_decode<uint16_t>(x, w, nullptr, bias, M, N, K, StoreShared{h});
  __syncthreads();
  const unsigned rows = M - m0 < kDecodeRows ? static_cast<unsigned>(M - m0) : kDecodeRows;
  constexpr unsigned kHalf = kDecodeCols / 2;
  const unsigned r = threadIdx.x / kHalf;
  const unsigned c = threadIdx.x % kHalf;
  if (r < rows) {
    act[(m0 + r) * (N / 2) + blockIdx.x * kHalf + c] = silu_mul(h[r][c], h[r][kHalf + c]);
  }
}

}  // namespace
}  // namespace axrt_cuda

// bf16 weights [N, K] on the decode grid (opt-in: docs/kernels.md).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_bf16_f32_decode(const float* x, const uint16_t* w, const float* bias, float* y,
                                uint64_t M, uint64_t N, uint64_t K) {
  axrt_cuda::matmul_decode<uint16_t>(x, w, nullptr, bias, M, N, K, axrt_cuda::StoreOutput{y, N});
}

// bf16 gate/up weights, interleaved, on the decode grid with the gated SiLU
// in the epilogue (opt-in: docs/kernels.md): act [M, N / 2].
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_bf16_f32_decode_silu(const float* x, const uint16_t* w, const float* bias,
                                     float* act, uint64_t M, uint64_t N, uint64_t K) {
  axrt_cuda::matmul_bf16_decode_silu(x, w, bias, act, M, N, K);
}

// Layout int8.per_channel on the decode grid (opt-in: docs/kernels.md).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_int8_pc_f32_decode(const float* x, const int8_t* w, const float* scale,
                                   const float* bias, float* y, uint64_t M, uint64_t N,
                                   uint64_t K) {
  axrt_cuda::matmul_decode<int8_t>(x, w, scale, bias, M, N, K, axrt_cuda::StoreOutput{y, N});
}

// Layout fp8.e4m3fn.per_channel on the decode grid (opt-in: docs/kernels.md).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_fp8_e4m3_pc_f32_decode(const float* x, const uint8_t* w, const float* scale,
                                       const float* bias, float* y, uint64_t M, uint64_t N,
                                       uint64_t K) {
  axrt_cuda::matmul_decode<axrt_cuda::E4m3>(x, reinterpret_cast<const axrt_cuda::E4m3*>(w),
                                            scale, bias, M, N, K, axrt_cuda::StoreOutput{y, N});
}

// f32 weights [N, K], no quantization layout.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_f32_nk(const float* x, const float* w, const float* bias, float* y, uint64_t M,
                       uint64_t N, uint64_t K) {
  axrt_cuda::matmul_tile(x, bias, y, M, N, K, axrt_cuda::NkWeights<float>{w, N, K});
}

// Layout int8.per_channel.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_int8_pc_f32(const float* x, const int8_t* w, const float* scale,
                            const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K) {
  axrt_cuda::matmul_tile(x, bias, y, M, N, K,
                         axrt_cuda::PerChannelWeights<axrt_cuda::Int8Code>{w, scale, N, K});
}

// Layout fp8.e4m3fn.per_channel.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_fp8_e4m3_pc_f32(const float* x, const uint8_t* w, const float* scale,
                                const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K) {
  axrt_cuda::matmul_tile(x, bias, y, M, N, K,
                         axrt_cuda::PerChannelWeights<axrt_cuda::E4m3fnCode>{w, scale, N, K});
}

// Layout fp8.e4m3fn.per_tensor (bound with block_n = block_k = 0).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_fp8_e4m3_f32(const float* x, const uint8_t* w, const float* scale,
                             const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K,
                             uint64_t block_n, uint64_t block_k) {
  axrt_cuda::matmul_fp8_e4m3(x, w, scale, bias, y, M, N, K, block_n, block_k);
}

// Layout fp8.e4m3fn.b128x128 (bound with block_n = block_k = 128): the same
// code as axrt_matmul_fp8_e4m3_f32 under the symbol that layout binds to.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_fp8_e4m3_b128_f32(const float* x, const uint8_t* w, const float* scale,
                                  const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K,
                                  uint64_t block_n, uint64_t block_k) {
  axrt_cuda::matmul_fp8_e4m3(x, w, scale, bias, y, M, N, K, block_n, block_k);
}
