// The tensor-core matmul for bf16 weights (docs/kernels.md, "Tensor-core
// matmul"): y[M, N] = bf16(x)[M, K] . w[N, K]^T + bias[N], x rounded to bf16
// (nearest even) as it is staged, products and sums in f32 by
// mma.sync.m16n8k16 (sm_80 and later).
//
// Block (j, i), 256 threads, computes rows [128 i, 128 i + 128) and columns
// [128 j, 128 j + 128), clipped to M and N. K is walked in tiles of 32 in
// order, through a 3-stage ring in shared memory (48 KiB: per stage 128 x 32
// bf16 of x and as many of w): the weights arrive by cp.async 16 bytes at a
// time; x is read as float4 into registers one tile ahead of the stores,
// rounded and stored after the current tile's products. The 8 warps stand 2
// (rows) by 4 (columns), each computing 64 x 32 outputs as 4 x 4 mma tiles
// of 16 x 8 with fragments from ldmatrix.x4. Each output takes the mma's of
// k = 0, 16, 32 ... in that order whatever M and the block: batch-invariant.
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

// kVector: K a multiple of 8 and x, w 16-byte aligned, so that every 16-byte
// chunk of a weight row and every float4 of x lies wholly inside or outside
// [0, K); otherwise each element is loaded on its own (the same values, so
// the same results).
template <bool kVector>
__device__ __forceinline__ void matmul_bf16_tc(const float* __restrict__ x,
                                               const uint16_t* __restrict__ w,
                                               const float* __restrict__ bias,
                                               float* __restrict__ y, uint64_t M, uint64_t N,
                                               uint64_t K, uint16_t (*x_ring)[kTcStageElements],
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
  // A tile of w: 128 rows x 4 chunks of 8 bf16, 2 chunks a thread.
  constexpr unsigned kWLoads = kTcTileN * kTcTileK / 8 / kBlockThreads;
  auto load_w = [&](uint64_t t, unsigned stage) {
#pragma unroll
    for (unsigned l = 0; l < kWLoads; ++l) {
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
  };

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

  // The ring: tile t sits in stage t % 3; its weights are cp.async group t.
#pragma unroll
  for (unsigned s = 0; s < kTcStages - 1; ++s) {
    if (s < tiles) {
      load_w(s, s);
      load_x(s);
      store_x(s);
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
      load_w(next, next_stage);
      load_x(next);
    }
    cp_async_commit();
    multiply(static_cast<unsigned>(t % kTcStages));
    if (next < tiles) store_x(next_stage);
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
        if (m < M && n < N) y[m * N + n] = acc[i][j][e] + bias[n];
      }
    }
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
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  if (blockIdx.z != 0 || static_cast<uint64_t>(blockIdx.y) * kTcTileM >= M ||
      static_cast<uint64_t>(blockIdx.x) * kTcTileN >= N) {
    return;
  }
  const bool vector = K % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (vector) {
    matmul_bf16_tc<true>(x, w, bias, y, M, N, K, x_ring, w_ring);
  } else {
    matmul_bf16_tc<false>(x, w, bias, y, M, N, K, x_ring, w_ring);
  }
}
