// Matmuls on f32, bf16, int8 and fp8 weights (docs/kernels.md, "Matrix
// multiplication"); the tiling is matmul_tile.cuh's.
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

// w int8 [N, K], scale f32 [N, 1]: W[k][n] = w[n][k] * scale[n]. A half-warp
// reads 16 consecutive k of one output channel.
struct Int8PerChannelWeights {
  const int8_t* __restrict__ w;
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
      tile[kk][c] = (k < K && n < N) ? static_cast<float>(w[n * K + k]) * scale[n] : 0.0f;
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
  axrt_cuda::matmul_tile(x, bias, y, M, N, K, axrt_cuda::Int8PerChannelWeights{w, scale, N, K});
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
