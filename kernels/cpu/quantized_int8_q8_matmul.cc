// axrt_matmul_int8_pc_q8_f32: int8 weights per output channel ([N, K],
// int8.per_channel) times activations quantized to int8 per group,
// multiplied as integers (docs/kernels.md, "Int8 activations").
//
// A workgroup quantizes its tile's rows of x once (q8_activations.h: codes,
// s_x and Z per group of G inputs; a thread reuses them for its next tile of
// the same rows when x's bytes are unchanged), then takes blocks of MR x
// rows by NR weight rows. A block walks K a group at a time: for every (x
// row, weight row) pair the integer sum I = sum_k w[n][k] xq[k] over the
// group, 32 inputs a step in 8 int32 lanes (AVX-512 VNNI vpdpbusd, AVX2
// vpmaddubsw + vpmaddwd, or plain integers), the lanes of 8 pairs reduced
// together; then the f32 update acc += s_x (float)I. Each weight row is one
// sequential stream, read once per block of x rows. The integer sums are
// exact and the f32 steps the same operations in the same order in every
// build and block shape, compiled without contraction (CMakeLists.txt), so
// every build gives the same bits and each row of y is independent of M.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "axrt/base.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/q8_activations.h"

#if AXRT_CPU_HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

namespace axrt::kernels::cpu {
namespace {

constexpr const char* kName = "axrt_matmul_int8_pc_q8_f32";

// The inputs a group of x holds: 128 when K is a multiple of 128, else 64
// when of 64, else 32 (K must be a multiple of 32).
uint64_t q8_group_size(uint64_t K) { return K % 128 == 0 ? 128 : K % 64 == 0 ? 64 : 32; }

// The tile's rows of x quantized, per row: K codes in order, and per group
// s_x and Z.
struct QuantizedX {
  std::vector<int8_t> codes;  // [rows][K]
  std::vector<float> scale;   // [rows][K / G]
  std::vector<int32_t> sum;   // [rows][K / G]
  // For tiles of at most kKeptRows rows, the x rows the codes are of: the
  // thread's next tile of the same rows (the next 64 columns) finds them
  // equal and skips quantizing.
  std::vector<float> kept;  // [rows][K]
  int kept_by = -1;         // the build that made the codes (Isa::kBuild); -1: none
  int kept_rows = 0;
  uint64_t kept_K = 0;
};

inline constexpr int kKeptRows = 16;

QuantizedX& quantized_x() {
  // Grown on demand, per thread (as tile_scratch()).
  static thread_local QuantizedX scratch;
  return scratch;
}

// The operands of a block of MR x rows by NR weight rows: the weight rows
// (row r of the block at w[r], K bytes each; past the tile's columns, its
// last row again), the x rows' codes (row m at codes + m K), their group
// scales and code sums (row m at + m groups).
template <int MR, int NR>
struct Block {
  const int8_t* w[NR];
  const int8_t* codes;
  const float* s_x;
  const int32_t* z;
  uint64_t K;
  uint64_t G;
  // Weights streamed from memory: the next block's rows (gemm.h); empty:
  // each row is fetched kPrefetchBytes ahead of itself instead.
  NextBlock next;
};

// Bytes ahead that a streamed weight row is prefetched when no next block
// is (the tile's last block).
inline constexpr uint64_t kPrefetchBytes = 512;

// ---------------------------------------------------------------------------
// The baseline build: plain integers. acc[m][r] (row stride NR) = sum over
// groups, in order, of s_x (float)I.
// ---------------------------------------------------------------------------

struct ScalarIsa {
  static constexpr int kBuild = 0;
  static constexpr int kWideRows = 2;  // blocks of 2 x rows by 4 weight rows
  template <int kLanes>
  AXRT_CPU_INLINE static void quantize(const float* x, uint64_t K, int rows, QuantizedX& q) {
    const uint64_t G = q8_group_size(K);
    const uint64_t groups = K / G;
    for (int m = 0; m < rows; ++m) {
      for (uint64_t g = 0; g < groups; ++g) {
        q8::quantize_group<kLanes, /*kNibbleOrder=*/false>(
            x + m * K + g * G, G, q.codes.data() + m * K + g * G, q.scale.data() + m * groups + g,
            q.sum.data() + m * groups + g);
      }
    }
  }

  template <int MR, int NR, bool kStream>
  AXRT_CPU_INLINE static void block(const Block<MR, NR>& b, float* __restrict acc) {
    const uint64_t groups = b.K / b.G;
    for (int i = 0; i < MR * NR; ++i) acc[i] = 0.0f;
    for (uint64_t g = 0; g < groups; ++g) {
      for (int m = 0; m < MR; ++m) {
        const int8_t* __restrict x = b.codes + m * b.K + g * b.G;
        const float s_x = b.s_x[m * groups + g];
        for (int r = 0; r < NR; ++r) {
          const int8_t* __restrict w = b.w[r] + g * b.G;
          int32_t I = 0;
          for (uint64_t k = 0; k < b.G; ++k) I += static_cast<int32_t>(w[k]) * x[k];
          acc[m * NR + r] = acc[m * NR + r] + s_x * static_cast<float>(I);
        }
      }
    }
  }
};

#if AXRT_CPU_HAVE_AVX2_BUILD

// Eight vectors of 8 int32 lanes to one whose lane i is the sum of v[i]'s:
// the two halves of v[i] and v[i + 4] added, then two rounds of pairwise
// sums.
[[gnu::always_inline, gnu::target("avx2")]] inline __m256i sum_lanes_x8(const __m256i* v) {
  __m256i t[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_add_epi32(_mm256_permute2x128_si256(v[i], v[i + 4], 0x20),
                            _mm256_permute2x128_si256(v[i], v[i + 4], 0x31));
  }
  return _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3]));
}

// The (x row, weight row) pairs of a block are (m, r) at m NR + r, summed in
// sets of 8: lane i of set s is x row (8 s + i) / NR. The value of each
// lane's row, from row 0's at p (rows `stride` apart).
template <int NR, class T>
[[gnu::always_inline, gnu::target("avx2")]] inline __m256i row_lanes(const T* p, uint64_t stride,
                                                                     int s) {
  static_assert(NR == 8 || NR == 4);
  int32_t lo, hi;
  if constexpr (NR == 8) {
    std::memcpy(&lo, p + s * stride, 4);
    hi = lo;
  } else {
    std::memcpy(&lo, p + 2 * s * stride, 4);
    std::memcpy(&hi, p + (2 * s + 1) * stride, 4);
  }
  return _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi);
}

// The codes of the block's x rows at k; when the weights stream from
// memory, the lines of this step's share of the next block (Block::next).
template <int MR, int NR, bool kStream>
[[gnu::always_inline, gnu::target("avx2")]] inline void load_codes(const Block<MR, NR>& b,
                                                                   uint64_t k, __m256i (&x)[MR]) {
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    x[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.codes + m * b.K + k));
  }
  if constexpr (kStream) {
    if (b.next) {
      b.next.template fetch<NR / 2>(k * NR);  // a step reads 32 bytes of each of NR rows
    } else if (k % 64 == 0) {
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(b.w[r] + k + kPrefetchBytes), _MM_HINT_T0);
      }
    }
  }
}

// After group g: acc[s] += s_x (float)(I - kWeightBias Z) for each set s,
// I the sum of the lanes of its pairs' sums (which hold I + kWeightBias Z).
template <int MR, int NR, int kWeightBias>
[[gnu::always_inline, gnu::target("avx2")]] inline void update_group(
    const __m256i (&sums)[MR * NR], const Block<MR, NR>& b, uint64_t g,
    __m256 (&acc)[MR * NR / 8]) {
  const uint64_t groups = b.K / b.G;
#pragma GCC unroll 2
  for (int s = 0; s < MR * NR / 8; ++s) {
    __m256i I = sum_lanes_x8(sums + 8 * s);
    if constexpr (kWeightBias != 0) {
      static_assert(kWeightBias == 128);
      I = _mm256_sub_epi32(I, _mm256_slli_epi32(row_lanes<NR>(b.z + g, groups, s), 7));
    }
    const __m256 s_x = _mm256_castsi256_ps(row_lanes<NR>(b.s_x + g, groups, s));
    acc[s] = _mm256_add_ps(acc[s], _mm256_mul_ps(s_x, _mm256_cvtepi32_ps(I)));
  }
}

// AVX2: vpmaddubsw multiplies |w| (unsigned: 128 for -128) by the x codes
// given w's sign (|xq| <= 127: a pair of products is at most 2 x 128 x 127,
// no saturation), vpmaddwd adds the pairs of pairs into 32 bits. Blocks of
// at most 8 pairs: 16 registers.
template <int MR, int NR, bool kStream>
[[gnu::noinline, gnu::target("avx2,fma")]] void avx2_block(const Block<MR, NR>& b, float* out) {
  static_assert(MR * NR == 8);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[1] = {_mm256_setzero_ps()};
  for (uint64_t g = 0; g < b.K / b.G; ++g) {
    __m256i sums[MR * NR] = {};
    for (uint64_t k = g * b.G; k < (g + 1) * b.G; k += 32) {
      __m256i x[MR];
      load_codes<MR, NR, kStream>(b, k, x);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.w[r] + k));
        const __m256i magnitude = _mm256_abs_epi8(w);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) {
          const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[m], w));
          sums[m * NR + r] = _mm256_add_epi32(sums[m * NR + r], _mm256_madd_epi16(pairs, ones));
        }
      }
    }
    update_group<MR, NR, 0>(sums, b, g, acc);
  }
  _mm256_storeu_ps(out, acc[0]);
}

struct Avx2Isa {
  static constexpr int kBuild = 1;
  static constexpr int kWideRows = 2;  // blocks of 2 x rows by 4 weight rows
  template <int kLanes>
  AXRT_CPU_INLINE static void quantize(const float* x, uint64_t K, int rows, QuantizedX& q) {
    ScalarIsa::quantize<kLanes>(x, K, rows, q);
  }
  template <int MR, int NR, bool kStream>
  AXRT_CPU_INLINE static void block(const Block<MR, NR>& b, float* acc) {
    avx2_block<MR, NR, kStream>(b, acc);
  }
};

// acc += the unsigned bytes of a times the signed bytes of b, 4 to a lane.
// In place: GCC copies the accumulator of the intrinsic's form.
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] inline __m256i dpbusd(
    __m256i acc, __m256i a, __m256i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// AVX-512 VNNI, in 256-bit registers (32 of them): vpdpbusd adds 4
// products of unsigned by signed bytes a lane; with the weights made
// unsigned (w ^ 0x80 = w + 128) a pair sums I + 128 Z, corrected per group.
template <int MR, int NR, bool kStream>
[[gnu::noinline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] void vnni_block(const Block<MR, NR>& b,
                                                                            float* out) {
  static_assert(MR * NR == 8 || MR * NR == 16);
  constexpr int kSets = MR * NR / 8;
  const __m256i flip = _mm256_set1_epi8(-128);
  __m256 acc[kSets] = {};
  for (uint64_t g = 0; g < b.K / b.G; ++g) {
    __m256i sums[MR * NR] = {};
    for (uint64_t k = g * b.G; k < (g + 1) * b.G; k += 32) {
      __m256i x[MR];
      load_codes<MR, NR, kStream>(b, k, x);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const __m256i w = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.w[r] + k)), flip);
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) sums[m * NR + r] = dpbusd(sums[m * NR + r], w, x[m]);
      }
    }
    update_group<MR, NR, 128>(sums, b, g, acc);
  }
#pragma GCC unroll 2
  for (int s = 0; s < kSets; ++s) _mm256_storeu_ps(out + 8 * s, acc[s]);
}

struct VnniIsa {
  static constexpr int kBuild = 2;
  static constexpr int kWideRows = 4;  // blocks of 4 x rows by 4 weight rows
  // ScalarIsa::quantize with AVX-512's one-instruction rounding and
  // narrowing (q8::quantize_group_x16).
  template <int kLanes>
  [[gnu::noinline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static void quantize(
      const float* x, uint64_t K, int rows, QuantizedX& q) {
    const uint64_t G = q8_group_size(K);
    const uint64_t groups = K / G;
    for (int m = 0; m < rows; ++m) {
      for (uint64_t g = 0; g < groups; ++g) {
        q8::quantize_group_x16</*kNibbleOrder=*/false>(x + m * K + g * G, G,
                                                        q.codes.data() + m * K + g * G,
                                                        &q.scale[m * groups + g],
                                                        &q.sum[m * groups + g]);
      }
    }
  }
  template <int MR, int NR, bool kStream>
  AXRT_CPU_INLINE static void block(const Block<MR, NR>& b, float* acc) {
    vnni_block<MR, NR, kStream>(b, acc);
  }
};

#endif  // AXRT_CPU_HAVE_AVX2_BUILD

// ---------------------------------------------------------------------------
// The tile
// ---------------------------------------------------------------------------

// y rows [m0, m0 + MR) x the tile's columns, NR weight rows a block; the
// weights stream from memory for the first block of x rows (kStream) and
// come from cache for the others.
template <class Isa, int MR, int NR, bool kStream>
AXRT_CPU_INLINE void block_rows(const MatmulInt8Args& args, const Tile& tile, const QuantizedX& q,
                                int m0) {
  const uint64_t K = args.K;
  const uint64_t groups = K / q8_group_size(K);
  Block<MR, NR> b;
  b.codes = q.codes.data() + m0 * K;
  b.s_x = q.scale.data() + m0 * groups;
  b.z = q.sum.data() + m0 * groups;
  b.K = K;
  b.G = q8_group_size(K);
  for (int n = 0; n < tile.cols; n += NR) {
    // Past the tile's columns the last weight row again (not stored).
    for (int r = 0; r < NR; ++r) b.w[r] = args.w + (tile.n0 + std::min(n + r, tile.cols - 1)) * K;
    // The rows are back to back: the next block follows this one.
    if (n + NR < tile.cols) {
      const auto* next = reinterpret_cast<const char*>(args.w + (tile.n0 + n + NR) * K);
      b.next = {next, next + std::min(NR, tile.cols - n - NR) * K};
    } else {
      b.next = {};
    }
    alignas(32) float acc[MR * NR];
    Isa::template block<MR, NR, kStream>(b, acc);
    const int width = std::min(NR, tile.cols - n);
    for (int m = 0; m < MR; ++m) {
      float* __restrict y = args.y + (tile.m0 + m0 + m) * args.N + tile.n0 + n;
      const float* __restrict scale = args.scale + tile.n0 + n;
      const float* __restrict bias = args.bias + tile.n0 + n;
      for (int r = 0; r < width; ++r) y[r] = acc[m * NR + r] * scale[r] + bias[r];
    }
  }
}

template <class Isa, int kLanes>
AXRT_CPU_INLINE void q8_tile(const MatmulInt8Args& args, const Tile& tile, QuantizedX& q) {
  const uint64_t K = args.K;
  const float* x = args.x + tile.m0 * K;
  const size_t x_bytes = sizeof(float) * tile.rows * K;
  // The codes are a function of the bytes of x (every build makes the same;
  // the build is compared so that the tests run each quantizer).
  // (memcmp and memcpy of 0 bytes still need valid pointers: K may be 0.)
  if (q.kept_by != Isa::kBuild || q.kept_rows != tile.rows || q.kept_K != K ||
      (x_bytes != 0 && std::memcmp(q.kept.data(), x, x_bytes) != 0)) {
    Isa::template quantize<kLanes>(x, K, tile.rows, q);
    q.kept_by = -1;
    if (tile.rows <= kKeptRows) {
      if (x_bytes != 0) std::memcpy(q.kept.data(), x, x_bytes);
      q.kept_by = Isa::kBuild;
      q.kept_rows = tile.rows;
      q.kept_K = K;
    }
  }
  // Blocks of Isa::kWideRows x rows by 4 weight rows, then of 2 by 4, then
  // a last row by 8 weight rows. Only the first block of x rows streams
  // the weights from memory; the others find them in cache.
  constexpr int kWide = Isa::kWideRows;
  int m0 = 0;
  for (; m0 + kWide <= tile.rows; m0 += kWide) {
    if (m0 == 0) {
      block_rows<Isa, kWide, 4, true>(args, tile, q, m0);
    } else {
      block_rows<Isa, kWide, 4, false>(args, tile, q, m0);
    }
  }
  if (m0 + 2 <= tile.rows) {
    if (m0 == 0) {
      block_rows<Isa, 2, 4, true>(args, tile, q, m0);
    } else {
      block_rows<Isa, 2, 4, false>(args, tile, q, m0);
    }
    m0 += 2;
  }
  if (m0 < tile.rows) {
    if (m0 == 0) {
      block_rows<Isa, 1, 8, true>(args, tile, q, m0);
    } else {
      block_rows<Isa, 1, 8, false>(args, tile, q, m0);
    }
  }
}

struct MatmulInt8Q8Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt8Args* args, const Tile* tile, QuantizedX* q) {
#if AXRT_CPU_HAVE_AVX2_BUILD
    if constexpr (kLanes == 16) {
      if (q8::cpu_has_avx512_vnni() && !q8_matmul_without_vnni.load(std::memory_order_relaxed)) {
        q8_tile<VnniIsa, kLanes>(*args, *tile, *q);
      } else {
        q8_tile<Avx2Isa, kLanes>(*args, *tile, *q);  // AVX-512 without VNNI
      }
    } else if constexpr (kLanes == 8) {
      q8_tile<Avx2Isa, kLanes>(*args, *tile, *q);
    } else {
      q8_tile<ScalarIsa, kLanes>(*args, *tile, *q);
    }
#else
    q8_tile<ScalarIsa, kLanes>(*args, *tile, *q);
#endif
  }
};

axrt_kernel_result_t matmul_int8_q8(const void* raw_args,
                                    const axrt_kernel_workgroup_t* workgroup) {
  const auto* args = static_cast<const MatmulInt8Args*>(raw_args);
  if (args->K % 32 != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64
                            " is not a multiple of 32 (x is quantized in groups of 128, 64 or 32 "
                            "inputs)",
                            kName, args->K);
  }
  Tile tile;
  if (!locate_tile(workgroup, args->M, args->N, &tile)) return AXRT_KERNEL_OK;
  QuantizedX& q = quantized_x();
  if (const axrt_kernel_result_t r = q8::reserve_rows(q, tile.rows, args->K,
                                                      q8_group_size(args->K), kKeptRows, kName,
                                                      workgroup)) {
    return r;
  }
  run_matmul_isa<MatmulInt8Q8Body>(matmul_isa(), args, &tile, &q);
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_matmul_int8_pc_q8_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int8_q8(args, workgroup);
}
