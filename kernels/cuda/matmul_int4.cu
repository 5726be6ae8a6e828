// Matmuls on 4-bit AWQ and GPTQ weights in groups along K (docs/kernels.md,
// "Matrix multiplication"; docs/format.md sections 5 and 9); the tiling is
// matmul_tile.cuh's. W[k][n] = (q[k][n] - z[k / g][n]) * s[k / g][n], exact
// in f32 (a 5-bit integer times an f16).
//
// Rules: N % 8 == 0 (whole u32 words), group_size > 0, K % group_size == 0,
// and for GPTQ K % 8 == 0. The CPU library refuses anything else with
// INVALID_ARGUMENT; a GPU kernel has no error channel in ABI version 1, so it
// returns without writing `y`.
//
// Every kernel here reads any group size its rules allow from `group_size`;
// each is also the CUDA entry point of its names for groups of 64 and 32
// (axrt_matmul_awq_int4_g64_f32 ...: kernels/contracts.json, cuda_entry).
#include <cuda_fp16.h>

#include "matmul_tile.cuh"

namespace axrt_cuda {
namespace {

constexpr unsigned kCodesPerWord = 8;

// Code `i` of a u32 in the AWQ order: codes 0, 2, 4, 6, 1, 3, 5, 7 occupy
// nibbles 0..7, so code i sits in nibble (i % 2) * 4 + i / 2.
__device__ __forceinline__ int awq_code(uint32_t word, unsigned i) {
  return static_cast<int>((word >> (4 * ((i % 2) * 4 + i / 2))) & 0xfu);
}

// Code `i` of a u32 in the sequential order: nibble i.
__device__ __forceinline__ int sequential_code(uint32_t word, unsigned i) {
  return static_cast<int>((word >> (4 * i)) & 0xfu);
}

__device__ __forceinline__ bool int4_rules_hold(uint64_t N, uint64_t K, uint64_t group_size,
                                                bool k_packed) {
  return N % kCodesPerWord == 0 && group_size != 0 && K % group_size == 0 &&
         (!k_packed || K % kCodesPerWord == 0);
}

// AWQ (awq.int4.g128): qweight u32 [K, N / 8] and qzeros u32 [K / g, N / 8],
// both packed along N in the AWQ order; scales f16 [K / g, N]. The tile's
// 16 x 64 codes are 16 x 8 words: threads 0..127 each expand one word.
struct AwqWeights {
  const uint32_t* __restrict__ qweight;
  const __half* __restrict__ scales;
  const uint32_t* __restrict__ qzeros;
  uint64_t N;
  uint64_t K;
  uint64_t group_size;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
    constexpr unsigned kWordsPerRow = kTileMN / kCodesPerWord;  // 8
    if (threadIdx.x >= kTileK * kWordsPerRow) return;
    const unsigned kk = threadIdx.x / kWordsPerRow;
    const unsigned wc = threadIdx.x % kWordsPerRow;
    const uint64_t k = k0 + kk;
    const uint64_t n = n0 + wc * kCodesPerWord;  // N % 8 == 0: all 8 columns or none
    float* out = &tile[kk][wc * kCodesPerWord];
    if (k >= K || n >= N) {
#pragma unroll
      for (unsigned i = 0; i < kCodesPerWord; ++i) out[i] = 0.0f;
      return;
    }
    const uint64_t words_per_row = N / kCodesPerWord;
    const uint64_t group = k / group_size;
    const uint32_t q = qweight[k * words_per_row + n / kCodesPerWord];
    const uint32_t z = qzeros[group * words_per_row + n / kCodesPerWord];
    const __half* s = scales + group * N + n;
#pragma unroll
    for (unsigned i = 0; i < kCodesPerWord; ++i) {
      out[i] = static_cast<float>(awq_code(q, i) - awq_code(z, i)) * __half2float(s[i]);
    }
  }
};

// GPTQ (gptq_v2.int4.g128, and gptq.int4.g128 with kZeroBias = 1 since v1
// stores z - 1): qweight u32 [K / 8, N] packed along K, sequential; qzeros
// u32 [K / g, N / 8] packed along N, sequential; scales f16 [K / g, N]. The
// tile's 16 x 64 codes are 2 x 64 words: threads 0..127 each expand one
// word into 8 rows of one column. A group may be shorter than a word, so
// the group is looked up per code.
template <int kZeroBias>
struct GptqWeights {
  const uint32_t* __restrict__ qweight;
  const __half* __restrict__ scales;
  const uint32_t* __restrict__ qzeros;
  uint64_t N;
  uint64_t K;
  uint64_t group_size;

  __device__ __forceinline__ void operator()(WeightTile& tile, uint64_t k0, uint64_t n0) const {
    constexpr unsigned kWordRows = kTileK / kCodesPerWord;  // 2
    if (threadIdx.x >= kWordRows * kTileMN) return;
    const unsigned kw = threadIdx.x / kTileMN;
    const unsigned c = threadIdx.x % kTileMN;
    const uint64_t k = k0 + kw * kCodesPerWord;  // K % 8 == 0: all 8 rows or none
    const uint64_t n = n0 + c;
    if (k >= K || n >= N) {
#pragma unroll
      for (unsigned i = 0; i < kCodesPerWord; ++i) tile[kw * kCodesPerWord + i][c] = 0.0f;
      return;
    }
    const uint64_t zero_words_per_row = N / kCodesPerWord;
    const uint32_t q = qweight[(k / kCodesPerWord) * N + n];
#pragma unroll
    for (unsigned i = 0; i < kCodesPerWord; ++i) {
      const uint64_t group = (k + i) / group_size;
      const uint32_t z_word = qzeros[group * zero_words_per_row + n / kCodesPerWord];
      const int z = sequential_code(z_word, static_cast<unsigned>(n % kCodesPerWord)) + kZeroBias;
      const float s = __half2float(scales[group * N + n]);
      tile[kw * kCodesPerWord + i][c] = static_cast<float>(sequential_code(q, i) - z) * s;
    }
  }
};

// axrt_matmul_gptq_int4_q8_f32: GPTQ v2 weights times x quantized to int8
// per row and group, multiplied with __dp4a. The block shape and thread
// mapping are matmul_tile's (thread (tx, ty) owns rows ty + 16 a and columns
// tx + 16 b), but K is walked a group at a time, in chunks of up to 64.
// Both operands are staged in shared memory as pairs of 4-byte vectors, in
// the order a u32 of GPTQ codes splits into: the even codes of 8 rows of K
// (nibbles 0, 2, 4, 6, masked with 0x0f0f0f0f) and the odd ones (shifted 4).
// A word's 8 codes share a group (group_size % 8 == 0), so the zero point is
// subtracted bytewise on load: (q - z) in [-15, 15] is a signed byte, and
// sum (q - z) xq is the contract's I - z Z, the same int32.
constexpr unsigned kQ8ChunkWords = 8;  // 64 rows of K per chunk

__device__ __forceinline__ bool q8_rules_hold(uint64_t N, uint64_t K, uint64_t group_size) {
  return N % kCodesPerWord == 0 && group_size != 0 && group_size % kCodesPerWord == 0 &&
         K % group_size == 0;
}

// Packs 8 quantized values as the even (`lo`) and odd (`hi`) bytes.
__device__ __forceinline__ int2 pack_q8(const int (&v)[kCodesPerWord]) {
  int2 packed;
  packed.x = (v[0] & 0xff) | (v[2] & 0xff) << 8 | (v[4] & 0xff) << 16 | (v[6] & 0xff) << 24;
  packed.y = (v[1] & 0xff) | (v[3] & 0xff) << 8 | (v[5] & 0xff) << 16 | (v[7] & 0xff) << 24;
  return packed;
}

__device__ __forceinline__ void matmul_gptq_int4_q8(
    const float* __restrict__ x, const uint32_t* __restrict__ qweight,
    const __half* __restrict__ scales, const uint32_t* __restrict__ qzeros,
    const float* __restrict__ bias, float* __restrict__ y, uint64_t M, uint64_t N, uint64_t K,
    uint64_t group_size) {
  __shared__ int2 x_q8[kQ8ChunkWords][kTileMN];  // x_q8[word][r]
  __shared__ int2 w_q8[kQ8ChunkWords][kTileMN];  // w_q8[word][c]: q - z
  __shared__ float row_inv[kTileMN];             // 127 / a, or 0 when a == 0
  __shared__ float row_scale[kTileMN];           // s_x = a / 127, or 0

  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kTileMN;
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kTileMN;
  if (m0 >= M || n0 >= N) return;

  const unsigned tid = threadIdx.x;
  const unsigned tx = tid % kThreadsPerRow;
  const unsigned ty = tid / kThreadsPerRow;
  const unsigned lane = tid % kWarpSize;
  const unsigned warp = tid / kWarpSize;
  const uint64_t zero_words_per_row = N / kCodesPerWord;

  float acc[kThreadTile][kThreadTile];
#pragma unroll
  for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) acc[a][b] = 0.0f;
  }

  for (uint64_t g0 = 0; g0 < K; g0 += group_size) {
    const uint64_t group = g0 / group_size;

    // a = max |x| over the group, one row at a time per warp. The previous
    // group's last barrier orders these writes after its reads.
    for (unsigned r = warp; r < kTileMN; r += kBlockWarps) {
      const uint64_t m = m0 + r;
      if (m >= M) continue;  // the same for the whole warp
      const float* row = x + m * K + g0;
      float a = 0.0f;
      for (uint64_t k = lane; k < group_size; k += kWarpSize) a = fmaxf(a, fabsf(row[k]));
      a = warp_reduce(a, MaxOp{});
      if (lane == 0) {
        row_inv[r] = a == 0.0f ? 0.0f : __fdiv_rn(127.0f, a);
        row_scale[r] = a == 0.0f ? 0.0f : __fdiv_rn(a, 127.0f);
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

    const uint64_t group_end = g0 + group_size;
    for (uint64_t k0 = g0; k0 < group_end; k0 += kQ8ChunkWords * kCodesPerWord) {
      const unsigned words = static_cast<unsigned>(
          min(static_cast<uint64_t>(kQ8ChunkWords), (group_end - k0) / kCodesPerWord));

      // 64 rows x `words` words of x and 64 columns x `words` words of W,
      // two of each per thread; consecutive threads take consecutive rows
      // (columns), so the shared stores do not conflict.
#pragma unroll
      for (unsigned l = 0; l < kQ8ChunkWords * kTileMN / kBlockThreads; ++l) {
        const unsigned idx = tid + l * kBlockThreads;
        const unsigned w = idx / kTileMN;
        const unsigned rc = idx % kTileMN;
        if (w >= words) continue;
        const uint64_t k = k0 + w * kCodesPerWord;

        const uint64_t m = m0 + rc;
        int v[kCodesPerWord] = {};
        if (m < M) {
          // The contract rounds x * inv on its own: __fmul_rn is never contracted.
          const float inv = row_inv[rc];
#pragma unroll
          for (unsigned i = 0; i < kCodesPerWord; ++i) {
            v[i] = static_cast<int>(rintf(__fmul_rn(x[m * K + k + i], inv)));
          }
        }
        x_q8[w][rc] = pack_q8(v);

        const uint64_t n = n0 + rc;
        int2 wq = make_int2(0, 0);
        if (n < N) {
          const uint32_t q = qweight[(k / kCodesPerWord) * N + n];
          const uint32_t z_word = qzeros[group * zero_words_per_row + n / kCodesPerWord];
          const auto z = static_cast<uint32_t>(
              sequential_code(z_word, static_cast<unsigned>(n % kCodesPerWord)));
          const uint32_t z4 = z * 0x01010101u;
          wq.x = static_cast<int>(__vsub4(q & 0x0f0f0f0fu, z4));
          wq.y = static_cast<int>(__vsub4((q >> 4) & 0x0f0f0f0fu, z4));
        }
        w_q8[w][rc] = wq;
      }
      __syncthreads();

      for (unsigned w = 0; w < words; ++w) {
        int2 xv[kThreadTile];
        int2 wv[kThreadTile];
#pragma unroll
        for (unsigned a = 0; a < kThreadTile; ++a) xv[a] = x_q8[w][ty + a * kThreadsPerRow];
#pragma unroll
        for (unsigned b = 0; b < kThreadTile; ++b) wv[b] = w_q8[w][tx + b * kThreadsPerRow];
#pragma unroll
        for (unsigned a = 0; a < kThreadTile; ++a) {
#pragma unroll
          for (unsigned b = 0; b < kThreadTile; ++b) {
            dot[a][b] = __dp4a(wv[b].x, xv[a].x, dot[a][b]);
            dot[a][b] = __dp4a(wv[b].y, xv[a].y, dot[a][b]);
          }
        }
      }
      __syncthreads();
    }

    // y += s[g][n] * s_x * (float)(I - z Z), rounded as written.
#pragma unroll
    for (unsigned b = 0; b < kThreadTile; ++b) {
      const uint64_t n = n0 + tx + b * kThreadsPerRow;
      const float s = n < N ? __half2float(scales[group * N + n]) : 0.0f;
#pragma unroll
      for (unsigned a = 0; a < kThreadTile; ++a) {
        const float term = __fmul_rn(__fmul_rn(s, s_x[a]), static_cast<float>(dot[a][b]));
        acc[a][b] = __fadd_rn(acc[a][b], term);
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
      if (n < N) y[m * N + n] = acc[a][b] + bias[n];
    }
  }
}

}  // namespace
}  // namespace axrt_cuda

// Layout awq.int4.g128. Returns without writing on broken rules (above).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_awq_int4_f32(const float* x, const uint32_t* qweight, const __half* scales,
                             const uint32_t* qzeros, const float* bias, float* y, uint64_t M,
                             uint64_t N, uint64_t K, uint64_t group_size) {
  using namespace axrt_cuda;
  if (!int4_rules_hold(N, K, group_size, /*k_packed=*/false)) return;
  matmul_tile(x, bias, y, M, N, K, AwqWeights{qweight, scales, qzeros, N, K, group_size});
}

// Layout gptq_v2.int4.g128. Returns without writing on broken rules (above).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_gptq_int4_f32(const float* x, const uint32_t* qweight, const __half* scales,
                              const uint32_t* qzeros, const float* bias, float* y, uint64_t M,
                              uint64_t N, uint64_t K, uint64_t group_size) {
  using namespace axrt_cuda;
  if (!int4_rules_hold(N, K, group_size, /*k_packed=*/true)) return;
  matmul_tile(x, bias, y, M, N, K, GptqWeights<0>{qweight, scales, qzeros, N, K, group_size});
}

// Layout gptq.int4.g128 (v1: qzeros holds z - 1). Returns without writing on
// broken rules (above).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_gptq_v1_int4_f32(const float* x, const uint32_t* qweight, const __half* scales,
                                 const uint32_t* qzeros, const float* bias, float* y, uint64_t M,
                                 uint64_t N, uint64_t K, uint64_t group_size) {
  using namespace axrt_cuda;
  if (!int4_rules_hold(N, K, group_size, /*k_packed=*/true)) return;
  matmul_tile(x, bias, y, M, N, K, GptqWeights<1>{qweight, scales, qzeros, N, K, group_size});
}

// Layout gptq_v2.int4.g128, x quantized to int8 per row and group
// (docs/kernels.md). Returns without writing on broken rules: those above,
// and group_size % 8 == 0.
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_gptq_int4_q8_f32(const float* x, const uint32_t* qweight, const __half* scales,
                                 const uint32_t* qzeros, const float* bias, float* y, uint64_t M,
                                 uint64_t N, uint64_t K, uint64_t group_size) {
  using namespace axrt_cuda;
  if (!q8_rules_hold(N, K, group_size)) return;
  matmul_gptq_int4_q8(x, qweight, scales, qzeros, bias, y, M, N, K, group_size);
}
