// axrt_matmul_int8_pc_q8_f32: int8 weights per output channel (w [N, K],
// scale [N, 1]; int8.per_channel) times x quantized to int8 per row and
// group of G inputs (128 when K % 128 == 0, else 64, else 32), multiplied
// with __dp4a (docs/kernels.md, "Int8 activations").
//
// The block shape and thread mapping are matmul_tile's (thread (tx, ty) owns
// rows ty + 16 a and columns tx + 16 b), but K is walked a group at a time,
// in chunks of 32: the chunk's codes of x and its weights are staged in
// shared memory as 4-byte vectors of 4 consecutive k. The arithmetic is the
// CPU kernel's, operation for operation (each rounded on its own): the
// group's scale from max |x| taken on the bits of |x| (NaN above infinity),
// I exact in int32, acc = acc + s_x * (float)I in group order, then y = acc *
// scale + bias: the same bits.
//
// Rule: K % 32 == 0. The CPU library refuses anything else with
// INVALID_ARGUMENT; this kernel returns without writing `y`.
#include "matmul_tile.cuh"

namespace axrt_cuda {
namespace {

constexpr unsigned kInt8Q8ChunkWords = 8;  // 32 values of K per chunk, 4 a word

struct UnsignedMaxOp {
  __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
    return a > b ? a : b;
  }
};

__device__ __forceinline__ uint64_t int8_q8_group_size(uint64_t K) {
  return K % 128 == 0 ? 128 : K % 64 == 0 ? 64 : 32;
}

// Bytes 0..3 of a 32-bit vector from 4 values (their low bytes).
__device__ __forceinline__ int pack_bytes(int b0, int b1, int b2, int b3) {
  return (b0 & 0xff) | (b1 & 0xff) << 8 | (b2 & 0xff) << 16 | (b3 & 0xff) << 24;
}

__device__ __forceinline__ void matmul_int8_q8(const float* __restrict__ x,
                                               const int8_t* __restrict__ w,
                                               const float* __restrict__ scale,
                                               const float* __restrict__ bias,
                                               float* __restrict__ y, uint64_t M, uint64_t N,
                                               uint64_t K) {
  __shared__ int x_q8[kInt8Q8ChunkWords][kTileMN];  // x_q8[word][r]
  __shared__ int w_q8[kInt8Q8ChunkWords][kTileMN];  // w_q8[word][c]
  __shared__ float row_inv[kTileMN];                // 127 / a, or 0: codes 0
  __shared__ float row_scale[kTileMN];              // s_x = a / 127, 0, or NaN

  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kTileMN;
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kTileMN;
  if (m0 >= M || n0 >= N) return;

  const unsigned tid = threadIdx.x;
  const unsigned tx = tid % kThreadsPerRow;
  const unsigned ty = tid / kThreadsPerRow;
  const unsigned lane = tid % kWarpSize;
  const unsigned warp = tid / kWarpSize;
  const uint64_t group_size = int8_q8_group_size(K);

  float acc[kThreadTile][kThreadTile];
#pragma unroll
  for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) acc[a][b] = 0.0f;
  }

  for (uint64_t g0 = 0; g0 < K; g0 += group_size) {
    // a = max |x| over the group, one row at a time per warp, as the bits of
    // |x|. The previous group's last barrier orders these writes after its
    // reads.
    for (unsigned r = warp; r < kTileMN; r += kBlockWarps) {
      const uint64_t m = m0 + r;
      if (m >= M) continue;  // the same for the whole warp
      const float* row = x + m * K + g0;
      uint32_t a_bits = 0;
      for (uint64_t k = lane; k < group_size; k += kWarpSize) {
        a_bits = max(a_bits, __float_as_uint(row[k]) & 0x7fffffffu);
      }
      a_bits = warp_reduce(a_bits, UnsignedMaxOp{});
      if (lane == 0) {
        const float a = __uint_as_float(a_bits);
        const float inv = __fdiv_rn(127.0f, a);
        // a = 0, or so small that 127 / a overflows: codes 0, s_x = 0; Inf or
        // NaN in the group: s_x = NaN, which makes the row's y NaN.
        const bool coded = a_bits != 0 && a_bits < 0x7f800000u && inv <= __int_as_float(0x7f7fffff);
        const float not_coded = a_bits < 0x7f800000u ? 0.0f : __int_as_float(0x7fc00000);
        row_inv[r] = coded ? inv : 0.0f;
        row_scale[r] = coded ? __fdiv_rn(a, 127.0f) : not_coded;
      }
    }
    __syncthreads();
    float s_x[kThreadTile];
#pragma unroll
    for (unsigned a = 0; a < kThreadTile; ++a) s_x[a] = row_scale[ty + a * kThreadsPerRow];

    int dot[kThreadTile][kThreadTile];
#pragma unroll
    for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
      for (unsigned b = 0; b < kThreadTile; ++b) dot[a][b] = 0;
    }

    for (uint64_t k0 = g0; k0 < g0 + group_size; k0 += 4 * kInt8Q8ChunkWords) {
      // 64 rows x 8 words of x and 64 columns x 8 words of W, two of each
      // per thread; consecutive threads take consecutive rows (columns).
#pragma unroll
      for (unsigned l = 0; l < kInt8Q8ChunkWords * kTileMN / kBlockThreads; ++l) {
        const unsigned idx = tid + l * kBlockThreads;
        const unsigned word = idx / kTileMN;
        const unsigned rc = idx % kTileMN;
        const uint64_t k = k0 + 4 * word;

        const uint64_t m = m0 + rc;
        int v[4] = {};
        if (m < M) {
          // The contract rounds x * inv on its own: __fmul_rn is never contracted.
          const float inv = row_inv[rc];
#pragma unroll
          for (unsigned i = 0; i < 4; ++i) {
            v[i] = inv == 0.0f ? 0 : static_cast<int>(rintf(__fmul_rn(x[m * K + k + i], inv)));
          }
        }
        x_q8[word][rc] = pack_bytes(v[0], v[1], v[2], v[3]);

        const uint64_t n = n0 + rc;
        int wv = 0;
        if (n < N) {
          const int8_t* row = w + n * K + k;
          wv = pack_bytes(row[0], row[1], row[2], row[3]);
        }
        w_q8[word][rc] = wv;
      }
      __syncthreads();

#pragma unroll
      for (unsigned word = 0; word < kInt8Q8ChunkWords; ++word) {
        int xv[kThreadTile];
        int wv[kThreadTile];
#pragma unroll
        for (unsigned a = 0; a < kThreadTile; ++a) xv[a] = x_q8[word][ty + a * kThreadsPerRow];
#pragma unroll
        for (unsigned b = 0; b < kThreadTile; ++b) wv[b] = w_q8[word][tx + b * kThreadsPerRow];
#pragma unroll
        for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
          for (unsigned b = 0; b < kThreadTile; ++b) dot[a][b] = __dp4a(wv[b], xv[a], dot[a][b]);
        }
      }
      __syncthreads();
    }

    // acc += s_x * (float)I, rounded as written.
#pragma unroll
    for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
      for (unsigned b = 0; b < kThreadTile; ++b) {
        acc[a][b] = __fadd_rn(acc[a][b], __fmul_rn(s_x[a], static_cast<float>(dot[a][b])));
      }
    }
  }

#pragma unroll
  for (unsigned a = 0; a < kThreadTile; ++a) {
    const uint64_t m = m0 + ty + a * kThreadsPerRow;
    if (m >= M) continue;
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) {
      const uint64_t n = n0 + tx + b * kThreadsPerRow;
      if (n < N) y[m * N + n] = __fadd_rn(__fmul_rn(acc[a][b], scale[n]), bias[n]);
    }
  }
}

}  // namespace
}  // namespace axrt_cuda

// Layout int8.per_channel, x quantized to int8 per row and group
// (docs/kernels.md). Returns without writing on a K that is not a multiple
// of 32.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_int8_pc_q8_f32(const float* x, const int8_t* w, const float* scale,
                               const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K) {
  if (K % 32 != 0) return;
  axrt_cuda::matmul_int8_q8(x, w, scale, bias, y, M, N, K);
}
