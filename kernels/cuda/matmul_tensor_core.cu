// The tensor-core matmuls (docs/kernels.md, "Tensor-core matmul"):
// y[M, N] = bf16(x)[M, K] . w[N, K]^T + bias[N], x rounded to bf16 (nearest
// even) as it is staged, products and sums in f32 by mma.sync.m16n8k16 (sm_80
// and later), for bf16 weights and, widened to bf16 as they are staged, int8
// and fp8 e4m3fn per-channel and AWQ int4 ones.
//
// Block (j, i), 256 threads, computes rows [128 i, 128 i + 128) and columns
// [128 j, 128 j + 128), clipped to M and N. K is walked in tiles of 32 in
// order, through a 3-stage ring in shared memory (48 KiB: per stage 128 x 32
// bf16 of x and as many of w): bf16 weights arrive by cp.async 16 bytes at a
// time; x, and quantized weights, are read into registers one tile ahead of
// the stores, converted and stored after the current tile's products. The 8
// warps stand 2 (rows) by 4 (columns), each computing 64 x 32 outputs as 4 x 4
// mma tiles of 16 x 8 with fragments from ldmatrix.x4. Each output takes the
// mma's of k = 0, 16, 32 ... in that order whatever M and the block:
// batch-invariant.
#include <cuda_fp16.h>

#include "common.cuh"

namespace axrt_cuda {
namespace {

constexpr unsigned kTcTileM = 128;
constexpr unsigned kTcTileN = 128;
constexpr unsigned kTcTileK = 32;  // bf16 of a shared row: 64 bytes, 4 chunks of 16
constexpr unsigned kTcStages = 3;
constexpr unsigned kTcStageElements = kTcTileM * kTcTileK;  // one operand's stage
static_assert(kTcTileM == kTcTileN, "x and w stages share the row count and swizzle");
static_assert(2 * kTcStages * kTcStageElements * 2 <= 48 * 1024,
              "the ring fits in static shared memory");

// Offset (in bf16) of 16-byte chunk `chunk` (of 4) of row `row` in a stage.
// The chunk is XORed with (row / 2) % 4: the 8 consecutive rows one phase of
// an ldmatrix reads at one chunk then fall in 8 different 16-byte bank
// groups (two 64-byte rows share a 128-byte line), without padding.
__device__ __forceinline__ unsigned tc_offset(unsigned row, unsigned chunk) {
  return row * kTcTileK + ((chunk ^ ((row >> 1) & 3u)) * 8u);
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, or 16 zeros when !valid (nothing is
// read then).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const unsigned bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `kPending` of this thread's newest groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d += a . b for a 16 x 16 bf16 fragment of x and a 16 x 8 one of w.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(float_to_bf16_bits(lo)) |
         (static_cast<uint32_t>(float_to_bf16_bits(hi)) << 16);
}

// The weight-staging policies: each stages tile t of its weights, 128 rows
// of N by 32 of K, into a stage of w_ring as bf16 (16-byte chunks at
// tc_offset), and scales the sums. load() starts the tile (a cp.async, or
// reads into `Held` registers) and store() ends it after the current tile's
// products; finish(sum, n) is the output before the bias.

// bf16 [N, K]: cp.async of the rows as they are. kVector: K a multiple of 8
// and w 16-byte aligned, so that every 16-byte chunk of a row lies wholly
// inside or outside [0, K); otherwise each element is loaded on its own.
struct TcBf16Weights {
  const uint16_t* __restrict__ w;
  uint64_t N;
  uint64_t K;

  struct Held {};
  // 128 rows x 4 chunks of 8 bf16, 2 chunks a thread.
  static constexpr unsigned kLoads = kTcTileN * kTcTileK / 8 / kBlockThreads;

  template <bool kVector>
  __device__ __forceinline__ void load(Held&, uint64_t t, uint64_t n0, unsigned stage,
                                       uint16_t (*w_ring)[kTcStageElements]) const {
    const unsigned tid = threadIdx.x;
#pragma unroll
    for (unsigned l = 0; l < kLoads; ++l) {
      const unsigned q = tid + l * kBlockThreads;
      const unsigned r = q / 4;
      const unsigned c = q % 4;
      const uint64_t n = n0 + r;
      const uint64_t k = t * kTcTileK + 8 * c;
      uint16_t* dst = &w_ring[stage][tc_offset(r, c)];
      if constexpr (kVector) {
        const bool valid = n < N && k < K;
        cp_async_16(shared_address(dst), valid ? w + n * K + k : w, valid);
      } else {
        uint32_t words[4];
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) {
          const uint32_t lo = (n < N && k + 2 * e < K) ? w[n * K + k + 2 * e] : 0u;
          const uint32_t hi = (n < N && k + 2 * e + 1 < K) ? w[n * K + k + 2 * e + 1] : 0u;
          words[e] = lo | (hi << 16);
        }
        *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
  }
  __device__ __forceinline__ void store(const Held&, unsigned,
                                        uint16_t (*)[kTcStageElements]) const {}
  __device__ __forceinline__ float finish(float sum, uint64_t) const { return sum; }
};

// Byte codes staged by TcByteWeights: their storage type, and codes `i`
// and `i + 1` of a word of 4 as a pair of bf16, exactly.

// int8: at most 8 significant bits, so its f32 has 16 zero low bits.
struct Int8Codes {
  using Storage = int8_t;
  __device__ __forceinline__ static uint32_t pair_to_bf16(uint32_t word, unsigned i) {
    const float lo = static_cast<float>(static_cast<int8_t>((word >> (8 * i)) & 0xffu));
    const float hi = static_cast<float>(static_cast<int8_t>((word >> (8 * i + 8)) & 0xffu));
    return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
  }
};

// e4m3fn: a finite value has at most 4 significant bits and an exponent in
// [-9, 8], inside bf16's normal range, so its f32 (exact) has 20 zero low
// bits and its top 16 are the bf16; the NaN's f32 0x7fc00000 (sign kept)
// gives the bf16 NaN 0x7fc0.
struct E4m3fnCodes {
  using Storage = uint8_t;
  __device__ __forceinline__ static uint32_t pair_to_bf16(uint32_t word, unsigned i) {
    const float lo = e4m3fn_to_float(static_cast<uint8_t>(word >> (8 * i)));
    const float hi = e4m3fn_to_float(static_cast<uint8_t>(word >> (8 * i + 8)));
    return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
  }
};

// Byte codes [N, K] (int8 or e4m3fn) with f32 scale [N, 1]: the codes
// widened to bf16 (exact), the sum times scale[n]. A thread holds 2 chunks
// of 8 codes (the chunks TcBf16Weights copies). kVector: K a multiple of 8
// and w 8-byte aligned.
template <class Codes>
struct TcByteWeights {
  const typename Codes::Storage* __restrict__ w;
  const float* __restrict__ scale;
  uint64_t N;
  uint64_t K;

  static constexpr unsigned kLoads = kTcTileN * kTcTileK / 8 / kBlockThreads;
  struct Held {
    uint2 codes[kLoads];
  };

  template <bool kVector>
  __device__ __forceinline__ void load(Held& held, uint64_t t, uint64_t n0, unsigned,
                                       uint16_t (*)[kTcStageElements]) const {
    const unsigned tid = threadIdx.x;
#pragma unroll
    for (unsigned l = 0; l < kLoads; ++l) {
      const unsigned q = tid + l * kBlockThreads;
      const uint64_t n = n0 + q / 4;
      const uint64_t k = t * kTcTileK + 8 * (q % 4);
      if constexpr (kVector) {
        held.codes[l] = (n < N && k < K) ? *reinterpret_cast<const uint2*>(w + n * K + k)
                                         : make_uint2(0u, 0u);
      } else {
        uint32_t words[2] = {0u, 0u};
#pragma unroll
        for (unsigned e = 0; e < 8; ++e) {
          const uint32_t code =
              (n < N && k + e < K) ? static_cast<uint8_t>(w[n * K + k + e]) : 0u;
          words[e / 4] |= code << (8 * (e % 4));
        }
        held.codes[l] = make_uint2(words[0], words[1]);
      }
    }
  }
  __device__ __forceinline__ void store(const Held& held, unsigned stage,
                                        uint16_t (*w_ring)[kTcStageElements]) const {
    const unsigned tid = threadIdx.x;
#pragma unroll
    for (unsigned l = 0; l < kLoads; ++l) {
      const unsigned q = tid + l * kBlockThreads;
      const uint2 c = held.codes[l];
      *reinterpret_cast<uint4*>(&w_ring[stage][tc_offset(q / 4, q % 4)]) =
          make_uint4(Codes::pair_to_bf16(c.x, 0), Codes::pair_to_bf16(c.x, 2),
                     Codes::pair_to_bf16(c.y, 0), Codes::pair_to_bf16(c.y, 2));
    }
  }
  // Rounded on its own, as the contract writes it (never fused with the bias).
  __device__ __forceinline__ float finish(float sum, uint64_t n) const {
    return __fmul_rn(sum, scale[n]);
  }
};

// AWQ int4 (awq.int4.g128): qweight u32 [K, N / 8] and qzeros u32 [K / g,
// N / 8] packed along N, code i of a word in nibble (i % 2) 4 + i / 2;
// scales f16 [K / g, N]. Each weight is staged as bf16((q - z) s), the
// product exact in f32 (a 5-bit integer times an f16) and then rounded to
// nearest even. Rules: N % 8 == 0, group_size % 32 == 0 (a K tile lies in
// one group) and K % group_size == 0, so K tiles are whole. A thread takes
// rows k and k + 1 (lane % 16) of one word of 8 columns (2 a warp): 2 words,
// the group's zero word and its 8 scales. kVector: scales 16-byte aligned.
struct TcAwqWeights {
  const uint32_t* __restrict__ qweight;
  const uint16_t* __restrict__ scales;
  const uint32_t* __restrict__ qzeros;
  uint64_t N;
  uint64_t group_size;

  struct Held {
    uint32_t q[2];
    uint32_t z;
    uint32_t s[4];  // f16 pairs, columns 2 e and 2 e + 1 in word e
  };

  __device__ __forceinline__ static unsigned pair() { return threadIdx.x % 16; }
  __device__ __forceinline__ static unsigned word_column() { return threadIdx.x / 16; }

  template <bool kVector>
  __device__ __forceinline__ void load(Held& held, uint64_t t, uint64_t n0, unsigned,
                                       uint16_t (*)[kTcStageElements]) const {
    const uint64_t k = t * kTcTileK + 2 * pair();
    const uint64_t n = n0 + 8 * word_column();  // N % 8 == 0: all 8 columns or none
    const uint64_t group = t * kTcTileK / group_size;
    const uint64_t words_per_row = N / 8;
    if (n >= N) {
      held.q[0] = held.q[1] = held.z = 0u;
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) held.s[e] = 0u;
      return;
    }
    held.q[0] = qweight[k * words_per_row + n / 8];
    held.q[1] = qweight[(k + 1) * words_per_row + n / 8];
    held.z = qzeros[group * words_per_row + n / 8];
    const uint16_t* s = scales + group * N + n;
    if constexpr (kVector) {
      const uint4 v = *reinterpret_cast<const uint4*>(s);
      held.s[0] = v.x, held.s[1] = v.y, held.s[2] = v.z, held.s[3] = v.w;
    } else {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        held.s[e] = static_cast<uint32_t>(s[2 * e]) | (static_cast<uint32_t>(s[2 * e + 1]) << 16);
      }
    }
  }
  // Column i's pair (k, k + 1) as one 4-byte store into row 8 word + i.
  __device__ __forceinline__ void store(const Held& held, unsigned stage,
                                        uint16_t (*w_ring)[kTcStageElements]) const {
    const unsigned kk = 2 * pair();
#pragma unroll
    for (unsigned i = 0; i < 8; ++i) {
      const unsigned shift = 4 * ((i % 2) * 4 + i / 2);
      const int z = static_cast<int>((held.z >> shift) & 0xfu);
      const float s = __half2float(
          __ushort_as_half(static_cast<unsigned short>(held.s[i / 2] >> (16 * (i % 2)))));
      const float w0 = static_cast<float>(static_cast<int>((held.q[0] >> shift) & 0xfu) - z) * s;
      const float w1 = static_cast<float>(static_cast<int>((held.q[1] >> shift) & 0xfu) - z) * s;
      const unsigned row = 8 * word_column() + i;
      *reinterpret_cast<uint32_t*>(&w_ring[stage][tc_offset(row, kk / 8) + kk % 8]) =
          pack_bf16(w0, w1);
    }
  }
  __device__ __forceinline__ float finish(float sum, uint64_t) const { return sum; }
};

// kVector: K a multiple of 8 and x 16-byte aligned, so that every float4 of
// x lies wholly inside or outside [0, K), and the weights' own condition
// (above); otherwise each element is loaded on its own (the same values, so
// the same results).
template <bool kVector, class Weights>
__device__ __forceinline__ void matmul_tc(const float* __restrict__ x, const Weights& weights,
                                          const float* __restrict__ bias, float* __restrict__ y,
                                          uint64_t M, uint64_t N, uint64_t K,
                                          uint16_t (*x_ring)[kTcStageElements],
                                          uint16_t (*w_ring)[kTcStageElements]) {
  const unsigned tid = threadIdx.x;
  const unsigned lane = tid % kWarpSize;
  const unsigned warp = tid / kWarpSize;
  const unsigned warp_m = warp / 4;  // rows [64 warp_m, +64) of the block
  const unsigned warp_n = warp % 4;  // columns [32 warp_n, +32)
  const uint64_t m0 = static_cast<uint64_t>(blockIdx.y) * kTcTileM;
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kTcTileN;
  const uint64_t tiles = (K + kTcTileK - 1) / kTcTileK;

  // A tile of x: 128 rows x 8 float4, 4 float4 a thread; 8 threads read a
  // row's 128 bytes.
  constexpr unsigned kXLoads = kTcTileM * kTcTileK / 4 / kBlockThreads;
  float xs[kXLoads][4];
  auto load_x = [&](uint64_t t) {
#pragma unroll
    for (unsigned l = 0; l < kXLoads; ++l) {
      const unsigned q = tid + l * kBlockThreads;
      const uint64_t m = m0 + q / 8;
      const uint64_t k = t * kTcTileK + 4 * (q % 8);
      if constexpr (kVector) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (m < M && k < K) v = *reinterpret_cast<const float4*>(x + m * K + k);
        xs[l][0] = v.x, xs[l][1] = v.y, xs[l][2] = v.z, xs[l][3] = v.w;
      } else {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) xs[l][e] = (m < M && k + e < K) ? x[m * K + k + e] : 0.0f;
      }
    }
  };
  auto store_x = [&](unsigned stage) {
#pragma unroll
    for (unsigned l = 0; l < kXLoads; ++l) {
      const unsigned q = tid + l * kBlockThreads;
      const unsigned r = q / 8;
      const unsigned f = q % 8;
      const uint2 packed = make_uint2(pack_bf16(xs[l][0], xs[l][1]), pack_bf16(xs[l][2], xs[l][3]));
      *reinterpret_cast<uint2*>(&x_ring[stage][tc_offset(r, f / 2) + 4 * (f % 2)]) = packed;
    }
  };
  typename Weights::Held held;

  float acc[4][4][4];  // [16-row tile][8-column tile][fragment]
#pragma unroll
  for (unsigned i = 0; i < 4; ++i) {
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }

  // The products of one stage: two k16 steps, in order.
  auto multiply = [&](unsigned stage) {
    const uint32_t x_base = shared_address(x_ring[stage]);
    const uint32_t w_base = shared_address(w_ring[stage]);
#pragma unroll
    for (unsigned ks = 0; ks < kTcTileK / 16; ++ks) {
      uint32_t a[4][4];
      uint32_t b[2][4];
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) {
        // Lanes 0-15: rows 0-15 at k 0; lanes 16-31: rows 0-15 at k 8.
        const unsigned row = warp_m * 64 + i * 16 + lane % 16;
        ldmatrix_x4(a[i], x_base + 2 * tc_offset(row, 2 * ks + lane / 16));
      }
#pragma unroll
      for (unsigned j = 0; j < 2; ++j) {
        // Matrices: columns 0-7 at k 0 and k 8, then columns 8-15 at k 0 and k 8.
        const unsigned row = warp_n * 32 + j * 16 + (lane / 16) * 8 + lane % 8;
        ldmatrix_x4(b[j], w_base + 2 * tc_offset(row, 2 * ks + (lane / 8) % 2));
      }
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) {
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
          mma_bf16(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
        }
      }
    }
  };

  // The ring: tile t sits in stage t % 3; cp.async group t holds its
  // asynchronous copies (none for weights staged through registers).
#pragma unroll
  for (unsigned s = 0; s < kTcStages - 1; ++s) {
    if (s < tiles) {
      weights.template load<kVector>(held, s, n0, s, w_ring);
      load_x(s);
      store_x(s);
      weights.store(held, s, w_ring);
    }
    cp_async_commit();
  }
  for (uint64_t t = 0; t < tiles; ++t) {
    cp_async_wait<kTcStages - 2>();  // this thread's group t has landed
    // Every thread's tile t is in place, and every thread is done with the
    // stage tile t - 1 used, which tile t + 2 takes.
    __syncthreads();
    const uint64_t next = t + kTcStages - 1;
    const unsigned next_stage = static_cast<unsigned>(next % kTcStages);
    if (next < tiles) {
      weights.template load<kVector>(held, next, n0, next_stage, w_ring);
      load_x(next);
    }
    cp_async_commit();
    multiply(static_cast<unsigned>(t % kTcStages));
    if (next < tiles) {
      store_x(next_stage);
      weights.store(held, next_stage, w_ring);
    }
  }
  cp_async_wait<0>();

  // Fragment e of tile (i, j): row g (+ 8 for e >= 2), columns 2 t4 + e % 2.
  const unsigned g = lane / 4;
  const unsigned t4 = lane % 4;
#pragma unroll
  for (unsigned i = 0; i < 4; ++i) {
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) {
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const uint64_t m = m0 + warp_m * 64 + i * 16 + g + 8 * (e / 2);
        const uint64_t n = n0 + warp_n * 32 + j * 8 + 2 * t4 + e % 2;
        if (m < M && n < N) y[m * N + n] = weights.finish(acc[i][j][e], n) + bias[n];
      }
    }
  }
}

// Whether this block has outputs to compute (the block shape is the
// kernels', and the grid covers M and N in tiles of 128).
__device__ __forceinline__ bool tc_block_has_work(uint64_t M, uint64_t N) {
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return false;
  return blockIdx.z == 0 && static_cast<uint64_t>(blockIdx.y) * kTcTileM < M &&
         static_cast<uint64_t>(blockIdx.x) * kTcTileN < N;
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The byte-code kernels' body: vector loads when K is a multiple of 8, x
// 16-byte and w 8-byte aligned.
template <class Codes>
__device__ __forceinline__ void matmul_tc_byte_codes(
    const float* __restrict__ x, const TcByteWeights<Codes>& weights,
    const float* __restrict__ bias, float* __restrict__ y, uint64_t M, uint64_t N, uint64_t K,
    uint16_t (*x_ring)[kTcStageElements], uint16_t (*w_ring)[kTcStageElements]) {
  if (K % 8 == 0 && aligned16(x) && reinterpret_cast<uintptr_t>(weights.w) % 8 == 0) {
    matmul_tc<true>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  } else {
    matmul_tc<false>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  }
}

}  // namespace
}  // namespace axrt_cuda

// bf16 weights [N, K] on tensor cores, x rounded to bf16 (opt-in:
// docs/kernels.md, "Tensor-core matmul"). Grid x = ceil(N / 128),
// y = ceil(M / 128).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_bf16_tc_f32(const float* x, const uint16_t* w, const float* bias, float* y,
                            uint64_t M, uint64_t N, uint64_t K) {
  using namespace axrt_cuda;
  __shared__ __align__(128) uint16_t x_ring[kTcStages][kTcStageElements];
  __shared__ __align__(128) uint16_t w_ring[kTcStages][kTcStageElements];
  if (!tc_block_has_work(M, N)) return;
  const TcBf16Weights weights{w, N, K};
  if (K % 8 == 0 && aligned16(x) && aligned16(w)) {
    matmul_tc<true>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  } else {
    matmul_tc<false>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  }
}

// int8 per-channel weights [N, K] (int8.per_channel) on tensor cores, the
// codes widened to bf16 and each sum times its column's scale (opt-in). Grid
// as above. Capped at 128 registers (161 on sm_80 otherwise), without
// spilling, so that two blocks fit an SM as the other two kernels' do.
extern "C" __global__ void __launch_bounds__(256, 2)
    axrt_matmul_int8_pc_tc_f32(const float* x, const int8_t* w, const float* scale,
                               const float* bias, float* y, uint64_t M, uint64_t N, uint64_t K) {
  using namespace axrt_cuda;
  __shared__ __align__(128) uint16_t x_ring[kTcStages][kTcStageElements];
  __shared__ __align__(128) uint16_t w_ring[kTcStages][kTcStageElements];
  if (!tc_block_has_work(M, N)) return;
  matmul_tc_byte_codes(x, TcByteWeights<Int8Codes>{w, scale, N, K}, bias, y, M, N, K, x_ring,
                       w_ring);
}

// fp8 per-channel weights [N, K] (fp8.e4m3fn.per_channel) on tensor cores:
// the body above with e4m3fn codes, widened to bf16 exactly (a NaN code
// stays NaN) (opt-in). Grid and register cap as above.
extern "C" __global__ void __launch_bounds__(256, 2)
    axrt_matmul_fp8_e4m3_pc_tc_f32(const float* x, const uint8_t* w, const float* scale,
                                   const float* bias, float* y, uint64_t M, uint64_t N,
                                   uint64_t K) {
  using namespace axrt_cuda;
  __shared__ __align__(128) uint16_t x_ring[kTcStages][kTcStageElements];
  __shared__ __align__(128) uint16_t w_ring[kTcStages][kTcStageElements];
  if (!tc_block_has_work(M, N)) return;
  matmul_tc_byte_codes(x, TcByteWeights<E4m3fnCodes>{w, scale, N, K}, bias, y, M, N, K, x_ring,
                       w_ring);
}

// AWQ int4 weights (awq.int4.g128) on tensor cores, each weight rounded to
// bf16 as it is staged (opt-in). Grid as above. Returns without writing on
// broken rules: N % 8 == 0, group_size % 32 == 0, K % group_size == 0. Also
// the CUDA entry point of axrt_matmul_awq_int4_g64_tc_f32 and _g32_tc_f32
// (awq.int4.g64 and .g32: kernels/contracts.json, cuda_entry).
extern "C" __global__ void __launch_bounds__(256)
    axrt_matmul_awq_int4_tc_f32(const float* x, const uint32_t* qweight, const uint16_t* scales,
                                const uint32_t* qzeros, const float* bias, float* y, uint64_t M,
                                uint64_t N, uint64_t K, uint64_t group_size) {
  using namespace axrt_cuda;
  __shared__ __align__(128) uint16_t x_ring[kTcStages][kTcStageElements];
  __shared__ __align__(128) uint16_t w_ring[kTcStages][kTcStageElements];
  if (N % 8 != 0 || group_size == 0 || group_size % kTcTileK != 0 || K % group_size != 0) return;
  if (!tc_block_has_work(M, N)) return;
  const TcAwqWeights weights{qweight, scales, qzeros, N, group_size};
  if (aligned16(x) && aligned16(scales)) {  // K % 32 == 0
    matmul_tc<true>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  } else {
    matmul_tc<false>(x, weights, bias, y, M, N, K, x_ring, w_ring);
  }
}
