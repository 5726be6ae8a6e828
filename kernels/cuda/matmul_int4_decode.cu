// The decode matmul of GPTQ v2 int4 weights (docs/kernels.md, "Decode
// matmuls"): y[M, N] = x[M, K] . W + bias, W[k][n] = (q[k][n] - z[k / g][n])
// * s[k / g][n] dequantized exactly, qweight u32 [K / 8, N] packed along K,
// so that a warp reads consecutive columns of one word row.
//
// Block (j, i) computes columns [16 j, 16 j + 16) for rows [16 i, 16 i + 16)
// with 8 warps, which split K: warp w takes the groups
// [G w / 8, G (w + 1) / 8) of the G = K / g groups. Lane l of a warp takes
// the 4 columns 16 j + 4 (l % 4) .. + 3 and word rows l / 4, l / 4 + 8, ...
// of its range: 16 bytes (4 words, 32 weights) a load, the 4 lanes of a
// word row reading 64 consecutive bytes, each weight dequantized once for
// up to 8 rows of x (a second pass over the same weights, from the caches,
// serves rows 8..15: 119 registers rather than about 200, two blocks an SM).
// A lane keeps a sum per row and column over its weights in k order; the
// warp adds its 8 word-row lanes in a fixed tree (shuffles), then the block
// adds its warps 0..7 in order through shared memory, then the bias. An
// output's arithmetic depends only on K and g, never on M or the other rows:
// batch-invariant.
//
// Rules: N % 8 == 0, group_size % 8 == 0 (a word row lies in one group),
// K % group_size == 0. The CPU library refuses anything else with
// INVALID_ARGUMENT; this body returns without writing `y`.
// It is also the CUDA entry point of axrt_matmul_gptq_int4_g64_f32_decode and
// _g32_f32_decode (groups of 64 and 32: kernels/contracts.json, cuda_entry).
#include <cuda_fp16.h>

#include "common.cuh"

namespace axrt_cuda {
namespace {

constexpr unsigned kInt4DecodeCols = 16;  // output columns of a block
constexpr unsigned kInt4DecodeRows = 16;  // rows of x a block serves
constexpr unsigned kInt4DecodeWarps = kBlockThreads / kWarpSize;  // split K
constexpr unsigned kColumnLanes = kInt4DecodeCols / 4;            // 4 columns a lane
constexpr unsigned kWordRowLanes = kWarpSize / kColumnLanes;      // 8 word rows at once

// 2^23 + b, b the value (below 256) of byte `index` of `bytes`: the byte in
// the low mantissa bits of 2^23, one byte permute.
__device__ __forceinline__ float byte_plus_2p23(uint32_t bytes, unsigned index) {
  return __uint_as_float(__byte_perm(bytes, 0x4b000000u, 0x7440u | index));
}

// The 4 words (columns n .. n + 3) of word row `row`.
__device__ __forceinline__ uint4 load_words(const uint32_t* qweight, uint64_t row, uint64_t N,
                                            uint64_t n, bool vector) {
  const uint32_t* p = qweight + row * N + n;
  if (vector) return *reinterpret_cast<const uint4*>(p);
  return make_uint4(p[0], p[1], p[2], p[3]);
}

constexpr unsigned kInt4PassRows = 8;  // rows of x a pass over the weights serves

// One pass: rows [r0, r0 + rows) of the block (rows <= 8), the warp's sums
// of its word rows into partial[warp][r0 + r][:].
__device__ __forceinline__ void gptq_int4_decode_pass(
    float (&partial)[kInt4DecodeWarps][kInt4DecodeRows][kInt4DecodeCols], const float* xs,
    const uint32_t* qweight, const __half* scales, const uint32_t* qzeros, uint64_t N,
    uint64_t K, uint64_t group_size, uint64_t n, bool active, unsigned r0, unsigned rows,
    bool vector, bool x_vector) {
  const unsigned warp = threadIdx.x / kWarpSize;
  const unsigned lane = threadIdx.x % kWarpSize;
  float acc[kInt4PassRows][4];
#pragma unroll
  for (unsigned r = 0; r < kInt4PassRows; ++r) {
#pragma unroll
    for (unsigned c = 0; c < 4; ++c) acc[r][c] = 0.0f;
  }
  const uint64_t words_per_group = group_size / 8;
  const uint64_t groups = K / group_size;
  const uint64_t begin = groups * warp / kInt4DecodeWarps * words_per_group;
  const uint64_t end = groups * (warp + 1) / kInt4DecodeWarps * words_per_group;
  xs += static_cast<uint64_t>(r0) * K;
  if (active) {
    // Two word rows in flight ahead of the one being multiplied.
    uint64_t t = begin + lane / kColumnLanes;
    uint4 next1 = make_uint4(0, 0, 0, 0);
    uint4 next2 = make_uint4(0, 0, 0, 0);
    if (t < end) next1 = load_words(qweight, t, N, n, vector);
    if (t + kWordRowLanes < end) next2 = load_words(qweight, t + kWordRowLanes, N, n, vector);
    uint64_t group_end = 0;  // the word row where the current group ends
    float s[4];
    float z[4];  // 2^23 + the zero point
    for (; t < end; t += kWordRowLanes) {
      const uint4 packed = next1;
      next1 = next2;
      if (t + 2 * kWordRowLanes < end) {
        next2 = load_words(qweight, t + 2 * kWordRowLanes, N, n, vector);
      }
      if (t >= group_end) {
        const uint64_t g = t / words_per_group;
        group_end = (g + 1) * words_per_group;
        const uint32_t zeros = qzeros[g * (N / 8) + n / 8];
#pragma unroll
        for (unsigned c = 0; c < 4; ++c) {
          s[c] = __half2float(scales[g * N + n + c]);
          const unsigned shift = 4 * static_cast<unsigned>((n + c) % 8);
          z[c] = 8388608.0f + static_cast<float>((zeros >> shift) & 0xfu);
        }
      }
      // W[8 t + e][n + c] = (q - z) s: the subtraction exact (both near
      // 2^23), the product exact (5 bits times 11).
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
      float w[4][8];
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) {
        const uint32_t even = words[c] & 0x0f0f0f0fu;        // codes 0, 2, 4, 6
        const uint32_t odd = (words[c] >> 4) & 0x0f0f0f0fu;  // codes 1, 3, 5, 7
#pragma unroll
        for (unsigned b = 0; b < 4; ++b) {
          w[c][2 * b] = (byte_plus_2p23(even, b) - z[c]) * s[c];
          w[c][2 * b + 1] = (byte_plus_2p23(odd, b) - z[c]) * s[c];
        }
      }
      const uint64_t k = 8 * t;
#pragma unroll
      for (unsigned r = 0; r < kInt4PassRows; ++r) {
        if (r < rows) {
          const float* xr = xs + r * K + k;
          float xv[8];
          if (x_vector) {
            const float4 lo = *reinterpret_cast<const float4*>(xr);
            const float4 hi = *reinterpret_cast<const float4*>(xr + 4);
            xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w;
            xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
          } else {
#pragma unroll
            for (unsigned e = 0; e < 8; ++e) xv[e] = xr[e];
          }
#pragma unroll
          for (unsigned c = 0; c < 4; ++c) {
#pragma unroll
            for (unsigned e = 0; e < 8; ++e) acc[r][c] = fmaf(xv[e], w[c][e], acc[r][c]);
          }
        }
      }
    }
  }
  // The warp's word-row lanes (lane bits 2..4) in a fixed tree.
#pragma unroll
  for (unsigned r = 0; r < kInt4PassRows; ++r) {
    if (r < rows) {
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) {
        float v = acc[r][c];
#pragma unroll
        for (unsigned offset = kColumnLanes; offset < kWarpSize; offset *= 2) {
          v += __shfl_xor_sync(0xffffffffu, v, offset);
        }
        if (lane < kColumnLanes) partial[warp][r0 + r][4 * lane + c] = v;
      }
    }
  }
}

__device__ __forceinline__ void matmul_gptq_int4_decode(const float* x, const uint32_t* qweight,
                                                        const __half* scales,
                                                        const uint32_t* qzeros, const float* bias,
                                                        float* y, uint64_t M, uint64_t N,
                                                        uint64_t K, uint64_t group_size) {
  __shared__ float partial[kInt4DecodeWarps][kInt4DecodeRows][kInt4DecodeCols];
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  if (N % 8 != 0 || group_size == 0 || group_size % 8 != 0 || K % group_size != 0) return;
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kInt4DecodeCols;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kInt4DecodeRows;
  if (blockIdx.z != 0 || n0 >= N || m0 >= M) return;
  const unsigned rows =
      M - m0 < kInt4DecodeRows ? static_cast<unsigned>(M - m0) : kInt4DecodeRows;
  const uint64_t n = n0 + 4 * (threadIdx.x % kWarpSize % kColumnLanes);
  // N % 8 == 0: all 4 columns of a lane or none.
  const bool active = n < N;
  const bool vector = (reinterpret_cast<uintptr_t>(qweight) % 16) == 0;
  const bool x_vector = (reinterpret_cast<uintptr_t>(x) % 16) == 0;
  // Up to 8 rows a pass: the second pass of 9..16 rows reads the weights
  // again, from the caches, and leaves registers for more blocks an SM.
  for (unsigned r0 = 0; r0 < rows; r0 += kInt4PassRows) {
    const unsigned pass_rows = rows - r0 < kInt4PassRows ? rows - r0 : kInt4PassRows;
    gptq_int4_decode_pass(partial, x + m0 * K, qweight, scales, qzeros, N, K, group_size, n,
                          active, r0, pass_rows, vector, x_vector);
  }
  __syncthreads();
  // The warps in order, then the bias.
  const unsigned r = threadIdx.x / kInt4DecodeCols;
  const unsigned c = threadIdx.x % kInt4DecodeCols;
  if (r < rows && n0 + c < N) {
    float sum = partial[0][r][c];
#pragma unroll
    for (unsigned w = 1; w < kInt4DecodeWarps; ++w) sum += partial[w][r][c];
    y[(m0 + r) * N + n0 + c] = sum + bias[n0 + c];
  }
}

}  // namespace
}  // namespace axrt_cuda

// Layout gptq_v2.int4.g128 on the int4 decode grid, x = ceil(N / 16),
// y = ceil(M / 16) (opt-in: docs/kernels.md).
extern "C" __global__ void __launch_bounds__(256, 2)
    axrt_matmul_gptq_int4_f32_decode(const float* x, const uint32_t* qweight,
                                     const __half* scales, const uint32_t* qzeros,
                                     const float* bias, float* y, uint64_t M, uint64_t N,
                                     uint64_t K, uint64_t group_size) {
  axrt_cuda::matmul_gptq_int4_decode(x, qweight, scales, qzeros, bias, y, M, N, K, group_size);
}
