// axrt_matmul_gptq_int4_q8_f32: GPTQ v2 int4 weights times activations
// quantized to int8 per group, multiplied as integers (docs/kernels.md).
//
// A workgroup quantizes its tile's rows of x once (each group of `G` values
// to int8 codes with a scale s_x = a / 127 and the codes' sum Z; a thread
// reuses them for its next tile of the same rows when x's bytes are
// unchanged), then walks the groups: for each, the integer sums I[n] =
// sum_k q[k][n] xq[k] of blocks of up to 2 rows (AVX-512 VNNI vpdpbusd,
// AVX2 vpmaddubsw + vpmaddwd, or scalar), and the f32 update acc[n] +=
// s[n] s_x (I[n] - z[n] Z). The integer sums are exact and the f32 steps
// the same operations in every build, compiled without contraction
// (CMakeLists.txt), so every build gives the same bits.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
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

// The tile's rows of x quantized, per row: K codes, each run of 8 stored in
// the order 0, 2, 4, 6, 1, 3, 5, 7 (the order of the even and odd nibbles
// of a weight word), and per group s_x and Z.
struct QuantizedRows {
  std::vector<int8_t> codes;  // [rows][K]
  std::vector<float> scale;   // [rows][K / G]
  std::vector<int32_t> sum;   // [rows][K / G]
  // For tiles of at most kKeptRows rows, the x rows the codes are of: the
  // thread's next tile of the same rows (the next 64 columns) finds them
  // equal and skips quantizing, a tenth of a decode tile's time.
  std::vector<float> kept;  // [rows][K]
  int kept_by = -1;         // the build (Group::kBuild) that made the codes; -1: none
  int kept_rows = 0;
  uint64_t kept_K = 0;
  uint64_t kept_G = 0;
  // The f32 sums over groups, [kTile][kTile].
  alignas(64) float acc[kTile * kTile];
};

inline constexpr int kKeptRows = 16;

QuantizedRows& quantized_rows() {
  // Grown on demand, per thread (as tile_scratch()).
  static thread_local QuantizedRows scratch;
  return scratch;
}

// ---------------------------------------------------------------------------
// x to int8, per group (q8_activations.h), in the nibble order.
// ---------------------------------------------------------------------------

template <int kLanes>
AXRT_CPU_INLINE void quantize_rows(const float* x, uint64_t K, uint64_t G, int rows,
                                   QuantizedRows& q) {
  const uint64_t groups = K / G;
  for (int m = 0; m < rows; ++m) {
    for (uint64_t g = 0; g < groups; ++g) {
      q8::quantize_group<kLanes, /*kNibbleOrder=*/true>(
          x + m * K + g * G, G, q.codes.data() + m * K + g * G, q.scale.data() + m * groups + g,
          q.sum.data() + m * groups + g);
    }
  }
}

// ---------------------------------------------------------------------------
// A group's f16 scales and u4 zero points for the tile's columns, and the
// f32 update. The same code in every build, so that the f32 results are.
// ---------------------------------------------------------------------------

// s[n] and z[n] of group g for the tile's columns, 0 past them.
template <int kLanes>
AXRT_CPU_INLINE void load_group(const MatmulInt4Args& args, const Tile& tile, uint64_t g,
                                float* __restrict s, int32_t* __restrict z) {
  using H = typename Simd<kLanes>::H;
  using I = typename Simd<kLanes>::I;
  using U = typename Simd<kLanes>::U;
  Int4GroupCopy copy;
  const Int4Group group = int4_group(args.scales, args.qzeros, args.N, tile, g, copy);
  const uint16_t* scales = group.scales;
  const uint32_t* zeros = group.zeros;
  U lane{};
  for (int i = 0; i < kLanes; ++i) lane[i] = static_cast<uint32_t>(i);
#pragma GCC unroll 16
  for (int n = 0; n < kTile; n += kLanes) {
    store_vector(s + n,
                 halves_to_floats<kLanes>(__builtin_convertvector(load_vector<H>(scales + n), U)));
    // Column n + i: nibble (n + i) % 8 of word (n + i) / 8.
    const U column = lane + static_cast<uint32_t>(n);
    U words;
    if constexpr (kLanes == 8) {
      words = U{} + zeros[n / 8];  // one word: a broadcast, not 8 inserts
    } else {
      for (int i = 0; i < kLanes; ++i) words[i] = zeros[(n + i) / 8];
    }
    store_vector(z + n, reinterpret_cast<I>((words >> ((column & 7u) * 4u)) & 0xfu));
  }
}

// acc[m][n] += s[n] s_x (I[m][n] - z[n] Z) for rows [m0, m0 + mr).
AXRT_CPU_INLINE void update_rows(const int32_t* __restrict sums, const float* __restrict s,
                                 const int32_t* __restrict z, QuantizedRows& q, uint64_t groups,
                                 uint64_t g, int m0, int mr) {
  for (int m = 0; m < mr; ++m) {
    const float s_x = q.scale[(m0 + m) * groups + g];
    const int32_t Z = q.sum[(m0 + m) * groups + g];
    float* __restrict acc = q.acc + (m0 + m) * kTile;
    const int32_t* __restrict I = sums + m * kTile;
    for (int n = 0; n < kTile; ++n) acc[n] += s[n] * s_x * static_cast<float>(I[n] - z[n] * Z);
  }
}

// Word rows (of 8 k) ahead that the weights are prefetched into L2: the rows
// are N words apart, beyond what the hardware prefetchers follow from
// memory. (Weights that L3 holds gain nothing; from memory it halves the
// time of a decode-sized tile.)
inline constexpr int kPrefetchWordRows = 16;
// Groups ahead that their scales and zero points are prefetched.
inline constexpr int kPrefetchGroups = 2;

// Where a tile's word rows are: GPTQ's [K/8, N] (rows N words apart, the
// tile's 64 columns at n0 in each), or the tile-major copy the loader packs
// for the CPU (gptq_v2.int4.gNN.tile64: [ceil(N/64)][K/8][64], a tile's rows
// back to back, 256 bytes each).
struct WordRows {
  const uint32_t* first;  // the tile's first word row
  uint64_t stride;        // words from one word row to the next
  const uint32_t* group(uint64_t g, int word_rows) const { return first + g * word_rows * stride; }
};

inline WordRows word_rows_of(const MatmulInt4Args& args, const Tile& tile, bool tiled) {
  if (tiled) return {args.qweight + tile.n0 / kTile * (args.K / 8) * kTile, kTile};
  return {args.qweight + tile.n0, args.N};
}

// ---------------------------------------------------------------------------
// One group of the tile, every row: acc[m][n] += s[n] s_x (I[m][n] - z[n] Z)
// with the integer sums I[m][n] = sum over the group's k of q[k][n] xq[m][k].
// `Sums` computes them for MR rows into sums[m][n] (row stride kTile; 0 past
// the tile's columns) from `w`, the group's first word row of the tile (u32
// rows N apart), and `x`, row 0's codes of the group (rows K apart).
// ---------------------------------------------------------------------------

template <class Sums, int kLanes>
AXRT_CPU_INLINE void group_step(const MatmulInt4Args& args, const Tile& tile, const WordRows& rows,
                                uint64_t g, QuantizedRows& q) {
  const uint64_t K = args.K;
  const uint64_t G = args.group_size;
  const int word_rows = static_cast<int>(G / 8);
  alignas(64) float s[kTile];
  alignas(64) int32_t z[kTile];
  alignas(64) int32_t sums[Sums::kMaxRows * kTile];
  load_group<kLanes>(args, tile, g, s, z);
  const uint32_t* w = rows.group(g, word_rows);
  // Every block of rows reads the group's weights, from L1 after the first.
  for (int m0 = 0; m0 < tile.rows; m0 += Sums::kMaxRows) {
    const int mr = std::min(Sums::kMaxRows, tile.rows - m0);
    const int8_t* x = q.codes.data() + m0 * K + g * G;
    if (mr == 1) {
      Sums::template run<1>(w, rows.stride, word_rows, x, K, tile.cols, sums);
    } else {
      Sums::template run<2>(w, rows.stride, word_rows, x, K, tile.cols, sums);
    }
    update_rows(sums, s, z, q, K / G, g, m0, mr);
  }
}

struct ScalarSums {
  static constexpr int kMaxRows = 2;
  template <int MR>
  AXRT_CPU_INLINE static void run(const uint32_t* __restrict w, uint64_t N, int word_rows,
                                  const int8_t* __restrict x, uint64_t K, int cols,
                                  int32_t* __restrict sums) {
    std::memset(sums, 0, sizeof(int32_t) * MR * kTile);
    for (int r = 0; r < word_rows; ++r) {
      const uint32_t* __restrict words = w + r * N;
      for (int m = 0; m < MR; ++m) {
        const int8_t* __restrict xr = x + m * K + 8 * r;
        int32_t* __restrict out = sums + m * kTile;
        for (int n = 0; n < cols; ++n) {
          const uint32_t word = words[n];
          int32_t sum = 0;
          // Byte j of the word holds codes 2j (low nibble) and 2j + 1.
          for (int j = 0; j < 4; ++j) {
            sum += static_cast<int32_t>((word >> (8 * j)) & 0xfu) * xr[j];
            sum += static_cast<int32_t>((word >> (8 * j + 4)) & 0xfu) * xr[4 + j];
          }
          out[n] += sum;
        }
      }
    }
  }
};

struct ScalarGroup {
  static constexpr int kBuild = 0;
  AXRT_CPU_INLINE static void quantize(const float* x, uint64_t K, uint64_t G, int rows,
                                       QuantizedRows& q) {
    quantize_rows<4>(x, K, G, rows, q);
  }
  AXRT_CPU_INLINE static void step(const MatmulInt4Args& args, const Tile& tile,
                                   const WordRows& rows, uint64_t g, QuantizedRows& q) {
    group_step<ScalarSums, 4>(args, tile, rows, g, q);
  }
};

#if AXRT_CPU_HAVE_AVX2_BUILD

// AVX2: vpmaddubsw multiplies the unsigned codes by the signed x codes and
// adds pairs (at most 2 x 15 x 127, no saturation), vpmaddwd adds the pairs
// of pairs into 32 bits. Up to 2 rows x 16 columns per pass.
struct Avx2Sums {
  static constexpr int kMaxRows = 2;
  template <int MR>
  [[gnu::noinline, gnu::target("avx2,fma")]] static void run(const uint32_t* __restrict w,
                                                             uint64_t N, int word_rows,
                                                             const int8_t* __restrict x, uint64_t K,
                                                             int cols, int32_t* __restrict sums) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int c = 0; c < kTile; c += 16) {
      if (c >= cols) {
        for (int m = 0; m < MR; ++m) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + m * kTile + c),
                              _mm256_setzero_si256());
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + m * kTile + c + 8),
                              _mm256_setzero_si256());
        }
        continue;
      }
      // cols is a multiple of 8: the second vector is whole or absent.
      const __m256i second = c + 8 < cols ? _mm256_set1_epi32(-1) : _mm256_setzero_si256();
      __m256i acc[MR][2];
      for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
      for (int r = 0; r < word_rows; ++r) {
        const uint32_t* words = w + r * N + c;
        _mm_prefetch(reinterpret_cast<const char*>(words + kPrefetchWordRows * N), _MM_HINT_T1);
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words));
        const __m256i w1 = _mm256_maskload_epi32(reinterpret_cast<const int*>(words + 8), second);
        const __m256i lo[2] = {_mm256_and_si256(w0, nibble), _mm256_and_si256(w1, nibble)};
        const __m256i hi[2] = {_mm256_and_si256(_mm256_srli_epi32(w0, 4), nibble),
                               _mm256_and_si256(_mm256_srli_epi32(w1, 4), nibble)};
        for (int m = 0; m < MR; ++m) {
          int32_t even, odd;
          std::memcpy(&even, x + m * K + 8 * r, 4);
          std::memcpy(&odd, x + m * K + 8 * r + 4, 4);
          const __m256i xe = _mm256_set1_epi32(even);
          const __m256i xo = _mm256_set1_epi32(odd);
          for (int v = 0; v < 2; ++v) {
            const __m256i pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo[v], xe), _mm256_maddubs_epi16(hi[v], xo));
            acc[m][v] = _mm256_add_epi32(acc[m][v], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
      for (int m = 0; m < MR; ++m) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + m * kTile + c), acc[m][0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + m * kTile + c + 8), acc[m][1]);
      }
    }
  }
};

template <int kLanes>
struct Avx2Group {
  static constexpr int kBuild = kLanes;  // 8, or 16 in the AVX-512 build
  AXRT_CPU_INLINE static void quantize(const float* x, uint64_t K, uint64_t G, int rows,
                                       QuantizedRows& q) {
    quantize_rows<kLanes>(x, K, G, rows, q);
  }
  AXRT_CPU_INLINE static void step(const MatmulInt4Args& args, const Tile& tile,
                                   const WordRows& rows, uint64_t g, QuantizedRows& q) {
    group_step<Avx2Sums, kLanes>(args, tile, rows, g, q);
  }
};

// AVX-512 VNNI: a register of 16 words of one word row holds 16 columns x
// 8 k; w & 0x0f0f0f0f gives per column the codes of k = 0, 2, 4, 6 and
// w & 0xf0f0f0f0 16 times those of 1, 3, 5, 7, so two vpdpbusd against the
// broadcast x codes in that order add the 8 products (the second set 16
// times over, shifted back at the end). Up to 2 rows x 64 columns, the f32
// update in registers too.
struct VnniGroup {
  static constexpr int kBuild = 1;
  static constexpr int kMaxRows = 2;
  // Word rows summed before the x16 set is shifted back: |sum| stays below
  // 4096 x 4 x 240 x 127 < 2^31.
  static constexpr int kChunk = 4096;

  // acc += the unsigned bytes of a times the signed bytes of b, 4 to a
  // lane. In place: GCC copies the accumulator of the intrinsic's form.
  [[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static inline __m512i dpbusd(
      __m512i acc, __m512i a, __m512i b) {
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
  }

  template <int MR>
  [[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static inline void sums(
      const uint32_t* __restrict w, uint64_t N, int word_rows, const int8_t* __restrict x,
      uint64_t K, const __mmask16* mask, __m512i (&total)[MR][4]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i high = _mm512_set1_epi8(static_cast<char>(0xf0));
#pragma GCC unroll 2
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) total[m][v] = _mm512_setzero_si512();
    }
    for (int r0 = 0; r0 < word_rows; r0 += kChunk) {
      const int r_end = std::min(word_rows, r0 + kChunk);
      __m512i even[MR][4], odd[MR][4];
#pragma GCC unroll 2
      for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) even[m][v] = odd[m][v] = _mm512_setzero_si512();
      }
      for (int r = r0; r < r_end; ++r) {
        const uint32_t* words = w + r * N;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          _mm_prefetch(reinterpret_cast<const char*>(words + kPrefetchWordRows * N + 16 * v),
                       _MM_HINT_T1);
        }
        __m512i xe[MR], xo[MR];
#pragma GCC unroll 2
        for (int m = 0; m < MR; ++m) {
          int32_t e, o;
          std::memcpy(&e, x + m * K + 8 * r, 4);
          std::memcpy(&o, x + m * K + 8 * r + 4, 4);
          xe[m] = _mm512_set1_epi32(e);
          xo[m] = _mm512_set1_epi32(o);
        }
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m512i word = _mm512_maskz_loadu_epi32(mask[v], words + 16 * v);
          const __m512i lo = _mm512_and_si512(word, low);
          const __m512i hi = _mm512_and_si512(word, high);
#pragma GCC unroll 2
          for (int m = 0; m < MR; ++m) {
            even[m][v] = dpbusd(even[m][v], lo, xe[m]);
            odd[m][v] = dpbusd(odd[m][v], hi, xo[m]);
          }
        }
      }
#pragma GCC unroll 2
      for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          // The zero-masked shift: GCC warns about the unmasked one's merge operand.
          total[m][v] = _mm512_add_epi32(
              total[m][v],
              _mm512_add_epi32(even[m][v], _mm512_maskz_srai_epi32(0xffff, odd[m][v], 4)));
        }
      }
    }
  }

  // quantize_rows with the rounding and narrowing in one instruction each
  // (q8::quantize_group_x16).
  [[gnu::noinline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static void quantize(
      const float* x, uint64_t K, uint64_t G, int rows, QuantizedRows& q) {
    const uint64_t groups = K / G;
    for (int m = 0; m < rows; ++m) {
      for (uint64_t g = 0; g < groups; ++g) {
        q8::quantize_group_x16</*kNibbleOrder=*/true>(x + m * K + g * G, G,
                                                     q.codes.data() + m * K + g * G,
                                                     &q.scale[m * groups + g],
                                                     &q.sum[m * groups + g]);
      }
    }
  }

  [[gnu::noinline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static void step(
      const MatmulInt4Args& args, const Tile& tile, const WordRows& rows, uint64_t g,
      QuantizedRows& q) {
    const uint64_t K = args.K;
    const uint64_t G = args.group_size;
    const uint64_t groups = K / G;
    const int word_rows = static_cast<int>(G / 8);
    __mmask16 mask[4];
    for (int v = 0; v < 4; ++v) {
      const int width = std::clamp(tile.cols - 16 * v, 0, 16);
      mask[v] = static_cast<__mmask16>((1u << width) - 1);
    }
    // s (exact f16 to f32 conversion) and z of the group, 0 past the tile.
    // The zero-masked forms: GCC warns about the unmasked ones' merge operand.
    const uint16_t* scales = args.scales + g * args.N + tile.n0;
    const uint32_t* zeros = args.qzeros + g * (args.N / 8) + tile.n0 / 8;
    // A group's 160 bytes of scales and zero points are rows of N apart: the
    // hardware does not fetch them ahead.
    const uint16_t* next_scales = scales + kPrefetchGroups * args.N;
    _mm_prefetch(reinterpret_cast<const char*>(next_scales), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next_scales + 32), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(zeros + kPrefetchGroups * (args.N / 8)),
                 _MM_HINT_T0);
    const __m512i zero_words = _mm512_castsi256_si512(
        _mm256_maskz_loadu_epi32(static_cast<__mmask8>((1u << (tile.cols / 8)) - 1), zeros));
    const __m512i shifts =
        _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    __m512 s[4];
    __m512i z[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      s[v] = _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(mask[v], scales + 16 * v));
      const __m512i pair = _mm512_setr_epi32(2 * v, 2 * v, 2 * v, 2 * v, 2 * v, 2 * v, 2 * v, 2 * v,
                                             2 * v + 1, 2 * v + 1, 2 * v + 1, 2 * v + 1, 2 * v + 1,
                                             2 * v + 1, 2 * v + 1, 2 * v + 1);
      z[v] = _mm512_and_si512(
          _mm512_maskz_srlv_epi32(0xffff, _mm512_maskz_permutexvar_epi32(0xffff, pair, zero_words),
                                  shifts),
          _mm512_set1_epi32(0xf));
    }
    const uint32_t* w = rows.group(g, word_rows);
    for (int m0 = 0; m0 < tile.rows; m0 += kMaxRows) {
      const int8_t* x = q.codes.data() + m0 * K + g * G;
      if (tile.rows - m0 == 1) {
        __m512i total[1][4];
        sums<1>(w, rows.stride, word_rows, x, K, mask, total);
        update<1>(total, s, z, q, groups, g, m0);
      } else {
        __m512i total[2][4];
        sums<2>(w, rows.stride, word_rows, x, K, mask, total);
        update<2>(total, s, z, q, groups, g, m0);
      }
    }
  }

  // update_rows in registers: the same operations in the same order.
  template <int MR>
  [[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] static inline void update(
      const __m512i (&total)[MR][4], const __m512 (&s)[4], const __m512i (&z)[4], QuantizedRows& q,
      uint64_t groups, uint64_t g, int m0) {
#pragma GCC unroll 2
    for (int m = 0; m < MR; ++m) {
      const __m512 s_x = _mm512_set1_ps(q.scale[(m0 + m) * groups + g]);
      const __m512i Z = _mm512_set1_epi32(q.sum[(m0 + m) * groups + g]);
      float* acc = q.acc + (m0 + m) * kTile;
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512 f = _mm512_maskz_cvtepi32_ps(
            0xffff, _mm512_sub_epi32(total[m][v], _mm512_mullo_epi32(z[v], Z)));
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(s[v], s_x), f);
        _mm512_storeu_ps(acc + 16 * v, _mm512_add_ps(_mm512_loadu_ps(acc + 16 * v), t));
      }
    }
  }
};

#endif  // AXRT_CPU_HAVE_AVX2_BUILD

// ---------------------------------------------------------------------------
// The tile
// ---------------------------------------------------------------------------

template <class Group, int kLanes>
AXRT_CPU_INLINE void q8_tile(const MatmulInt4Args& args, const Tile& tile, bool tiled,
                             QuantizedRows& q) {
  const uint64_t K = args.K;
  const uint64_t G = args.group_size;
  const float* x = args.x + tile.m0 * K;
  const size_t x_bytes = sizeof(float) * tile.rows * K;
  // The codes are a function of the bytes of x (every build makes the same;
  // the build is compared so that the tests run each quantizer).
  // (memcmp and memcpy of 0 bytes still need valid pointers: K may be 0.)
  if (q.kept_by != Group::kBuild || q.kept_rows != tile.rows || q.kept_K != K || q.kept_G != G ||
      (x_bytes != 0 && std::memcmp(q.kept.data(), x, x_bytes) != 0)) {
    Group::quantize(x, K, G, tile.rows, q);
    q.kept_by = -1;
    if (tile.rows <= kKeptRows) {
      if (x_bytes != 0) std::memcpy(q.kept.data(), x, x_bytes);
      q.kept_by = Group::kBuild;
      q.kept_rows = tile.rows;
      q.kept_K = K;
      q.kept_G = G;
    }
  }
  std::memset(q.acc, 0, sizeof(float) * tile.rows * kTile);
  const WordRows rows = word_rows_of(args, tile, tiled);
  for (uint64_t g = 0; g < K / G; ++g) Group::step(args, tile, rows, g, q);
  const float* __restrict bias = args.bias + tile.n0;
  for (int m = 0; m < tile.rows; ++m) {
    const float* __restrict acc = q.acc + m * kTile;
    float* __restrict y = args.y + (tile.m0 + m) * args.N + tile.n0;
    for (int n = 0; n < tile.cols; ++n) y[n] = acc[n] + bias[n];
  }
}

struct MatmulQ8Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt4Args* args, const Tile* tile, bool tiled,
                                  QuantizedRows* q) {
#if AXRT_CPU_HAVE_AVX2_BUILD
    if constexpr (kLanes == 16) {
      if (q8::cpu_has_avx512_vnni() && !q8_matmul_without_vnni.load(std::memory_order_relaxed)) {
        q8_tile<VnniGroup, kLanes>(*args, *tile, tiled, *q);
      } else {
        q8_tile<Avx2Group<kLanes>, kLanes>(*args, *tile, tiled, *q);  // AVX-512 without VNNI
      }
    } else if constexpr (kLanes == 8) {
      q8_tile<Avx2Group<kLanes>, kLanes>(*args, *tile, tiled, *q);
    } else {
      q8_tile<ScalarGroup, kLanes>(*args, *tile, tiled, *q);
    }
#else
    q8_tile<ScalarGroup, kLanes>(*args, *tile, tiled, *q);
#endif
  }
};

axrt_kernel_result_t matmul_q8(const char* name, const void* raw_args,
                               const axrt_kernel_workgroup_t* workgroup, bool tiled) {
  const auto* args = static_cast<const MatmulInt4Args*>(raw_args);
  if (const axrt_kernel_result_t r = check_int4_shape(name, *args, /*group_multiple_of_8=*/true,
                                                     /*k_multiple_of_8=*/false, workgroup)) {
    return r;
  }
  Tile tile;
  if (!locate_tile(workgroup, args->M, args->N, &tile)) return AXRT_KERNEL_OK;
  QuantizedRows& q = quantized_rows();
  if (const axrt_kernel_result_t r = q8::reserve_rows(q, tile.rows, args->K, args->group_size,
                                                      kKeptRows, name, workgroup)) {
    return r;
  }
  run_matmul_isa<MatmulQ8Body>(matmul_isa(), args, &tile, tiled, &q);
  return AXRT_KERNEL_OK;
}

// gptq_v2.int4.gNN.tile64 from gptq_v2.int4.gNN: a [K, N] uint4 constant
// with K a multiple of 8, stored as [K/8, N] u32.
uint64_t tile64_size(const uint64_t* shape, uint32_t rank, uint64_t bytes) {
  if (rank != 2 || shape[0] % 8 != 0 || shape[0] == 0 || shape[1] == 0) return 0;
  const uint64_t word_rows = shape[0] / 8;
  const uint64_t N = shape[1];
  if (N > bytes || bytes / 4 / N != word_rows || bytes != word_rows * N * 4) return 0;
  const uint64_t tiles = (N + kTile - 1) / kTile;
  return tiles * word_rows * kTile * 4;
}

void tile64_pack(const void* src, const uint64_t* shape, uint32_t, void* dst) {
  const uint64_t word_rows = shape[0] / 8;
  const uint64_t N = shape[1];
  const auto* in = static_cast<const uint32_t*>(src);
  auto* out = static_cast<uint32_t*>(dst);
  for (uint64_t n0 = 0; n0 < N; n0 += kTile) {
    const uint64_t cols = std::min<uint64_t>(kTile, N - n0);
    for (uint64_t r = 0; r < word_rows; ++r, out += kTile) {
      std::memcpy(out, in + r * N + n0, cols * 4);
      std::memset(out + cols, 0, (kTile - cols) * 4);
    }
  }
}

}  // namespace

const CpuPacker gptq_int4_tile64_packer = {tile64_size, tile64_pack};

}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_q8_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_q8_f32", args, workgroup, /*tiled=*/false);
}

// The same kernel under the names that declare the layouts of groups of 64
// and 32 inputs (gptq_v2.int4.g64, gptq_v2.int4.g32), bound with group_size
// 64 or 32: x is quantized per group of that many values.
extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g64_q8_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_g64_q8_f32", args, workgroup, /*tiled=*/false);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g32_q8_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_g32_q8_f32", args, workgroup, /*tiled=*/false);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_q8_f32", args, workgroup, /*tiled=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g64_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_g64_q8_f32", args, workgroup, /*tiled=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g32_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_q8("axrt_matmul_gptq_int4_g32_q8_f32", args, workgroup, /*tiled=*/true);
}
