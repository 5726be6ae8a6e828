// The tiled matmul every matmul kernel shares (docs/kernels.md, "Matrix
// multiplication"): y[M, N] = x[M, K] . W + bias[N].
//
// Block (j, i) computes output rows [64 i, 64 i + 64) and columns
// [64 j, 64 j + 64), clipped to M and N, with 256 threads. K is walked in
// slices of 16: the block stages the x slice [64 x 16] and the W slice
// [16 x 64] in shared memory as f32, then each thread accumulates 4 x 4
// outputs in registers: rows ty + 16 a and columns tx + 16 b (a, b < 4) for
// tx = tid % 16 and ty = tid / 16, so a warp reads shared memory without bank
// conflicts and writes y in 64-byte runs.
//
// A kernel supplies only the W loader: it writes the f32 value of
// W[k0 + kk][n0 + c] to tile[kk][c] for kk < 16 and c < 64, and 0 outside
// [K, N]. Quantized weights are dequantized there, once per element per
// block. Accumulation is in f32 in K order, as the contract's error bound
// assumes. `y` must not alias `x` or the weights.
#ifndef AXRT_KERNELS_CUDA_MATMUL_TILE_CUH_
#define AXRT_KERNELS_CUDA_MATMUL_TILE_CUH_

#include "common.cuh"

namespace axrt_cuda {

constexpr unsigned kTileMN = 64;
constexpr unsigned kTileK = 16;
// Shared-memory row stride: 68 keeps rows 16-byte aligned.
constexpr unsigned kTileStride = kTileMN + 4;
constexpr unsigned kThreadTile = 4;
constexpr unsigned kThreadsPerRow = kTileMN / kThreadTile;  // 16

using WeightTile = float[kTileK][kTileStride];

template <class LoadWeights>
__device__ __forceinline__ void matmul_tile(const float* __restrict__ x,
                                            const float* __restrict__ bias, float* __restrict__ y,
                                            uint64_t M, uint64_t N, uint64_t K,
                                            const LoadWeights& load_weights) {
  __shared__ float x_tile[kTileK][kTileStride];  // transposed: x_tile[kk][r]
  __shared__ WeightTile w_tile;

  // The thread mapping needs exactly 256 threads; a block outside the
  // output has nothing to do. Both are the same for every thread.
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kTileMN;
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kTileMN;
  if (m0 >= M || n0 >= N) return;

  const unsigned tid = threadIdx.x;
  const unsigned tx = tid % kThreadsPerRow;
  const unsigned ty = tid / kThreadsPerRow;

  float acc[kThreadTile][kThreadTile];
#pragma unroll
  for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) acc[a][b] = 0.0f;
  }

  for (uint64_t k0 = 0; k0 < K; k0 += kTileK) {
    // 64 x 16 values of x, 4 per thread; a half-warp reads 16 consecutive k.
#pragma unroll
    for (unsigned l = 0; l < kTileMN * kTileK / kBlockThreads; ++l) {
      const unsigned idx = tid + l * kBlockThreads;
      const unsigned r = idx / kTileK;
      const unsigned kk = idx % kTileK;
      const uint64_t m = m0 + r;
      const uint64_t k = k0 + kk;
      x_tile[kk][r] = (m < M && k < K) ? x[m * K + k] : 0.0f;
    }
    load_weights(w_tile, k0, n0);
    __syncthreads();

#pragma unroll
    for (unsigned kk = 0; kk < kTileK; ++kk) {
      float xv[kThreadTile];
      float wv[kThreadTile];
#pragma unroll
      for (unsigned a = 0; a < kThreadTile; ++a) xv[a] = x_tile[kk][ty + a * kThreadsPerRow];
#pragma unroll
      for (unsigned b = 0; b < kThreadTile; ++b) wv[b] = w_tile[kk][tx + b * kThreadsPerRow];
#pragma unroll
      for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
        for (unsigned b = 0; b < kThreadTile; ++b) acc[a][b] = fmaf(xv[a], wv[b], acc[a][b]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (unsigned a = 0; a < kThreadTile; ++a) {
    const uint64_t m = m0 + ty + a * kThreadsPerRow;
    if (m >= M) continue;
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) {
      const uint64_t n = n0 + tx + b * kThreadsPerRow;
      if (n < N) y[m * N + n] = acc[a][b] + bias[n];
    }
  }
}

}  // namespace axrt_cuda

#endif  // AXRT_KERNELS_CUDA_MATMUL_TILE_CUH_
