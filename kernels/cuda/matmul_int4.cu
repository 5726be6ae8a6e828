// Matmuls on 4-bit AWQ and GPTQ weights in groups along K (docs/kernels.md,
// "Matrix multiplication"; docs/format.md sections 5 and 9); the tiling is
// matmul_tile.cuh's. W[k][n] = (q[k][n] - z[k / g][n]) * s[k / g][n], exact
// in f32 (a 5-bit integer times an f16).
//
// Rules: N % 8 == 0 (whole u32 words), group_size > 0, K % group_size == 0,
// and for GPTQ K % 8 == 0. The CPU library refuses anything else with
// INVALID_ARGUMENT; a GPU kernel has no error channel in ABI version 1, so it
// returns without writing `y`.
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
