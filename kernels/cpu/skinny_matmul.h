// The dot-product and small-row paths of the matmul kernels.
//
// Two engines, by weight layout:
//   - k-major weights (f32 [K, N] in tiles of at most kSkinnyMaxRows rows:
//     language-model decode, small batches, where the weights are read
//     once and the work is bound by memory, not arithmetic; AWQ and GPTQ
//     int4 in every tile): W arrives a row of 64 columns at a time. f32 rows are read
//     in place; int4 rows are decoded in registers (up to 4 x rows,
//     quantized_matmul.cc) or into a small f32 panel in L1 first. A
//     register tile of up to 6 (or 12) rows x 64 (or 32) columns
//     accumulates x[m][k] W[k][:] over k.
//   - n-major weights (f32, bf16, int8 and fp8 e4m3 [N, K]), for every tile of those
//     kernels: each output is a dot product of an x row with a weight row.
//     Up to 8 weight rows are widened in registers and multiplied against
//     up to 4 x rows (6 in K blocks), one accumulator per (row, column)
//     pair, reduced across lanes at the end.
// Both accumulate in f32 in registers and write the 64-column f32 tile
// TileScratch::c, which store_tile turns into y.
//
// Both engines are batch-invariant: each row of y depends only on that
// row of x, the weights and the bias: the same bits whatever M and whatever
// the other rows (within one build: AVX-512, AVX2 or baseline). Every
// output takes the same operations in the same order whatever the tile's
// row count, the register block (MR x NC, or rows x columns) and the K
// blocks (DotSpan, or kb): one running sum over K for the k-major engine.
// (axrt_matmul_f32 is not: its tiles of more rows take the tile engine.)
#ifndef AXRT_KERNELS_CPU_SKINNY_MATMUL_H_
#define AXRT_KERNELS_CPU_SKINNY_MATMUL_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/gemm.h"

#if AXRT_CPU_HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

namespace axrt::kernels::cpu {

// Tiles with at most this many rows take the paths of this file in every
// kernel; the int4 and [N, K] kernels take them for tiles of every size.
inline constexpr int kSkinnyMaxRows = 16;

// The run-time blocking of the k-major engine (matmul_tuning.h picks it).
struct SkinnyBlocking {
  // k rows per block when the tile's rows need several register passes (or
  // the weights are decoded first): a multiple of 8 in [8, kKc].
  int kb = 64;
  // AVX-512 register passes: 0 = up to 6 rows x 64 columns, 1 = up to 12
  // rows x 32 columns (ignored by the narrower builds, which use 6 rows).
  int wide = 0;
  // How far ahead (in rows) a single pass prefetches f32 weight rows read in
  // place: they are N floats apart, beyond what the hardware prefetchers
  // follow. In [1, 128].
  int prefetch = 32;
};

// ---------------------------------------------------------------------------
// The k-major engine
// ---------------------------------------------------------------------------

// One call: c[rows][0, 64) (row stride kTile) = (accumulate ? c : 0) +
// a[rows][0, kb) (row stride lda) . b[0, kb)[0, 64) (row stride ldb).
struct SkinnyPanel {
  const float* a;
  uint64_t lda;
  const float* b;
  uint64_t ldb;
  int kb;
  float* c;
  int rows;
  bool accumulate;
  int prefetch_rows;  // prefetch b rows this far ahead; 0 for none
  int wide;           // SkinnyBlocking::wide
};

// Column vectors per register pass for a block of MR rows: every build keeps
// at most 24 (AVX-512, 32 registers) or 12 (16 registers) accumulators.
template <int kLanes>
constexpr int skinny_vectors(int rows) {
  if constexpr (kLanes == 16) {
    return rows <= 6 ? 4 : 2;
  } else {
    return rows == 1 ? 8 : rows <= 3 ? 4 : 2;
  }
}

template <int kLanes, int MR, int NV>
AXRT_CPU_INLINE void skinny_block(const float* __restrict a, uint64_t lda,
                                  const float* __restrict b, uint64_t ldb, int kb,
                                  float* __restrict c, bool accumulate, int prefetch_rows) {
  using F = typename Simd<kLanes>::F;
  constexpr int kFloatsPerLine = 16;
  F acc[MR][NV];
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      acc[m][v] = accumulate ? load_vector<F>(c + m * kTile + v * kLanes) : F{};
    }
  }
  const uint64_t ahead = static_cast<uint64_t>(prefetch_rows) * ldb;
  for (int k = 0; k < kb; ++k) {
    const float* __restrict row = b + static_cast<uint64_t>(k) * ldb;
    if (prefetch_rows != 0) {
      // Into L2: more of them can be in flight than into L1. The last float
      // too: a row that does not start a cache line spans one line more.
#pragma GCC unroll 8
      for (int f = 0; f < NV * kLanes; f += kFloatsPerLine) {
        __builtin_prefetch(row + ahead + f, 0, 2);
      }
      __builtin_prefetch(row + ahead + NV * kLanes - 1, 0, 2);
    }
    F bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = load_vector<F>(row + v * kLanes);
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      const float am = a[m * lda + k];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[m][v] += am * bv[v];
    }
  }
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store_vector(c + m * kTile + v * kLanes, acc[m][v]);
  }
}

// All 64 columns for a block of exactly MR rows.
template <int kLanes, int MR>
AXRT_CPU_INLINE void skinny_rows(const SkinnyPanel& p, int m0) {
  constexpr int NV = skinny_vectors<kLanes>(MR);
  constexpr int kVectors = kTile / kLanes;
  static_assert(kVectors % NV == 0);
#pragma GCC unroll 1
  for (int v0 = 0; v0 < kVectors; v0 += NV) {
    skinny_block<kLanes, MR, NV>(p.a + m0 * p.lda, p.lda, p.b + v0 * kLanes, p.ldb, p.kb,
                                 p.c + m0 * kTile + v0 * kLanes, p.accumulate, p.prefetch_rows);
  }
}

template <int kLanes>
AXRT_CPU_INLINE void skinny_panel_body(const SkinnyPanel& panel) {
  const int chunk = kLanes == 16 && panel.wide != 0 ? 12 : 6;
  SkinnyPanel p = panel;
  for (int m0 = 0; m0 < p.rows; m0 += chunk) {
    // Only the first pass over the block needs its rows fetched.
    if (m0 != 0) p.prefetch_rows = 0;
    switch (std::min(chunk, p.rows - m0)) {
      case 1: skinny_rows<kLanes, 1>(p, m0); break;
      case 2: skinny_rows<kLanes, 2>(p, m0); break;
      case 3: skinny_rows<kLanes, 3>(p, m0); break;
      case 4: skinny_rows<kLanes, 4>(p, m0); break;
      case 5: skinny_rows<kLanes, 5>(p, m0); break;
      case 6: skinny_rows<kLanes, 6>(p, m0); break;
      default:
        if constexpr (kLanes == 16) {
          switch (std::min(chunk, p.rows - m0)) {
            case 7: skinny_rows<kLanes, 7>(p, m0); break;
            case 8: skinny_rows<kLanes, 8>(p, m0); break;
            case 9: skinny_rows<kLanes, 9>(p, m0); break;
            case 10: skinny_rows<kLanes, 10>(p, m0); break;
            case 11: skinny_rows<kLanes, 11>(p, m0); break;
            default: skinny_rows<kLanes, 12>(p, m0); break;
          }
        }
        break;
    }
  }
}

// skinny_panel_body compiled once per build in gemm.cc.
void skinny_panel_baseline(const SkinnyPanel& p) noexcept;
#if AXRT_CPU_HAVE_AVX2_BUILD
[[gnu::target("avx2,fma")]] void skinny_panel_avx2(const SkinnyPanel& p) noexcept;
[[gnu::target(AXRT_CPU_AVX512_TARGET)]] void skinny_panel_avx512(const SkinnyPanel& p) noexcept;
#endif

template <int kLanes>
AXRT_CPU_INLINE void skinny_panel(const SkinnyPanel& p) {
#if AXRT_CPU_HAVE_AVX2_BUILD
  if constexpr (kLanes == 16) {
    skinny_panel_avx512(p);
    return;
  }
  if constexpr (kLanes == 8) {
    skinny_panel_avx2(p);
    return;
  }
#endif
  skinny_panel_baseline(p);
}

// The tile's rows of x times K rows of weights into scratch.c. `source`
// gives the weights a block of k rows at a time:
//   static constexpr bool kInPlace;  // rows can be read where they are
//   template <int kLanes>
//   void rows(uint64_t k0, int kb, float* panel, const float** b, uint64_t*
//   ldb) const;
// which points *b at W[k0 .. k0 + kb) x the tile's 64 columns (zero past
// them), in place or decoded into `panel` (kb x 64 floats, ldb = 64).
//
// Rows that fit one register pass stream the weights once, over all of K
// when they are in place. More rows go through blocks of kb weight rows,
// which every pass reads; in place, the first pass of a block prefetches the
// next one.
template <int kLanes, class Source>
AXRT_CPU_INLINE void skinny_kmajor_tile(const float* x, uint64_t K, const Tile& tile,
                                        const Source& source, TileScratch& scratch,
                                        const SkinnyBlocking& blocking) {
  const int chunk = kLanes == 16 && blocking.wide != 0 ? 12 : 6;
  if (K == 0) {
    std::memset(scratch.c, 0, sizeof(float) * tile.rows * kTile);
    return;
  }
  const bool one_pass = tile.rows <= chunk;
  const uint64_t kb = Source::kInPlace && one_pass
                          ? K
                          : static_cast<uint64_t>(std::clamp(blocking.kb, 8, kKc));
  for (uint64_t k0 = 0; k0 < K; k0 += kb) {
    const int depth = static_cast<int>(std::min<uint64_t>(kb, K - k0));
    const float* b = nullptr;
    uint64_t ldb = 0;
    source.template rows<kLanes>(k0, depth, scratch.b, &b, &ldb);
    int prefetch_rows = 0;
    if (Source::kInPlace) {
      prefetch_rows = one_pass ? std::clamp(blocking.prefetch, 1, 128) : static_cast<int>(kb);
    }
    const SkinnyPanel panel{x + tile.m0 * K + k0, K,        b,     ldb, depth, scratch.c,
                            tile.rows,            k0 != 0, prefetch_rows, blocking.wide};
    skinny_panel<kLanes>(panel);
  }
}

// f32 weights [K, N] read in place: a tile of 64 whole columns.
struct F32Rows {
  static constexpr bool kInPlace = true;
  const float* w;
  uint64_t N;
  uint64_t n0;

  template <int kLanes>
  AXRT_CPU_INLINE void rows(uint64_t k0, int, float*, const float** b, uint64_t* ldb) const {
    *b = w + k0 * N + n0;
    *ldb = N;
  }
};

// f32 weights [K, N] of a tile narrower than 64 columns, copied with zeros
// past its columns.
struct F32RowsCopied {
  static constexpr bool kInPlace = false;
  const float* w;
  uint64_t N;
  uint64_t n0;
  int cols;

  template <int kLanes>
  AXRT_CPU_INLINE void rows(uint64_t k0, int kb, float* panel, const float** b,
                            uint64_t* ldb) const {
    for (int k = 0; k < kb; ++k) {
      float* dst = panel + k * kTile;
      std::memcpy(dst, w + (k0 + k) * N + n0, sizeof(float) * cols);
      std::memset(dst + cols, 0, sizeof(float) * (kTile - cols));
    }
    *b = panel;
    *ldb = kTile;
  }
};

// ---------------------------------------------------------------------------
// The n-major engine
// ---------------------------------------------------------------------------

// Loads kLanes weights of type T as floats, exactly.
template <int kLanes, class T>
struct Widen;

template <int kLanes>
struct Widen<kLanes, float> {
  using F = typename Simd<kLanes>::F;
  AXRT_CPU_INLINE static F load(const float* p) { return load_vector<F>(p); }
  AXRT_CPU_INLINE static float scalar(float v) { return v; }
};

template <int kLanes>
struct Widen<kLanes, uint16_t> {  // bf16 bit patterns
  using F = typename Simd<kLanes>::F;
  using H = typename Simd<kLanes>::H;
  using U = typename Simd<kLanes>::U;
  AXRT_CPU_INLINE static F load(const uint16_t* p) {
    return reinterpret_cast<F>(__builtin_convertvector(load_vector<H>(p), U) << 16);
  }
  AXRT_CPU_INLINE static float scalar(uint16_t v) {
    return std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
  }
};

template <int kLanes>
struct Widen<kLanes, int8_t> {
  using F = typename Simd<kLanes>::F;
  using B = typename Simd<kLanes>::B;
  using S = typename Simd<kLanes>::S;
  using I = typename Simd<kLanes>::I;
  // Through 16 bits: GCC turns a direct 8-to-32-bit conversion into scalar
  // code.
  AXRT_CPU_INLINE static F load(const int8_t* p) {
    return __builtin_convertvector(
        __builtin_convertvector(__builtin_convertvector(load_vector<B>(p), S), I), F);
  }
  AXRT_CPU_INLINE static float scalar(int8_t v) { return static_cast<float>(v); }
};

// An fp8 e4m3fn code, as its own type so that the dot products widen it
// through kE4m3fnValues (exact) rather than as an integer.
struct E4m3 {
  uint8_t code;
};
static_assert(sizeof(E4m3) == 1);

template <int kLanes>
struct Widen<kLanes, E4m3> {
  using F = typename Simd<kLanes>::F;
  AXRT_CPU_INLINE static F load(const E4m3* p) {
    F v;
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) v[i] = kE4m3fnValues[p[i].code];
    return v;
  }
  AXRT_CPU_INLINE static float scalar(E4m3 v) { return kE4m3fnValues[v.code]; }
};

// The sum of a vector's lanes, halving it each step.
template <int kLanes>
AXRT_CPU_INLINE float lane_sum(typename Simd<kLanes>::F v) {
  float lanes[kLanes];
  store_vector(lanes, v);
#pragma GCC unroll 4
  for (int width = kLanes / 2; width > 0; width /= 2) {
#pragma GCC unroll 8
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  }
  return lanes[0];
}

// Weight rows per register block for MR x rows: at most 24 (AVX-512) or 12
// (16 registers) accumulators, leaving room for the widened weights.
template <int kLanes>
constexpr int dot_columns(int rows) {
  if constexpr (kLanes == 16) {
    return rows <= 2 ? 8 : 4;
  } else {
    return rows <= 2 ? 4 : 2;
  }
}
inline constexpr int kDotMaxRows = 4;

// Tiles of up to kSkinnyMaxRows rows, and those whose block of weight rows
// (8 or 4) over all of K is at most this size, read x and the weights in
// place, over all of K at once; the others take K in blocks (below).
inline constexpr uint64_t kDotInPlaceBytes = 32 * 1024;

// The other tiles take K in blocks of kDotDepth values. The block's x rows
// (128 KiB, for L2) and a few weight rows at a time (for L1) are copied
// first: rows whose stride is a multiple of 4 KiB would share cache sets.
inline constexpr uint64_t kDotDepth = 512;
static_assert(kDotDepth % 64 == 0);

// One thread's working memory for those tiles (400 KiB).
struct DotScratch {
  // Each output's lane accumulators between K blocks: (row m, column n) at
  // lanes + (m kTile + n) kLanes.
  alignas(64) float lanes[kTile * kTile * 16];
  // The K block of the tile's x rows, row stride kDotDepth.
  alignas(64) float x[kTile * kDotDepth];
  // The K block of up to 8 weight rows (of any T), row stride kDotDepth.
  alignas(64) unsigned char w[8 * kDotDepth * sizeof(float)];
};

// The calling thread's DotScratch (allocated on its first use).
DotScratch& dot_scratch() noexcept;

// The run of K that one call of the dot products covers: `count` values
// from where the row pointers point. Only the last run of an output may
// end off a multiple of 16; the others leave their lane accumulators in
// `saved`, where the next run picks them up. Each output's arithmetic is
// thus the same as in one run over all of K: the same fused multiply-adds
// into the same lanes in the same order, then the same reduction and the
// same scalar tail.
struct DotSpan {
  uint64_t count;
  bool first;    // the accumulators start at zero, else from `saved`
  bool last;     // reduce them, else leave them in `saved`
  float* saved;  // (row m, column c) of a block at saved + (m kTile + c) kLanes
  // Streamed blocks whose weight rows lie back to back (over all of K): the
  // next block (gemm.h); empty: each row is fetched 8 lines ahead of itself.
  NextBlock next;
};

// The streamed loops' prefetch for the lines of step `line` (of 64 bytes a
// weight row): NC lines of the next block, else each row's line 8 ahead.
template <int NC, class T>
AXRT_CPU_INLINE void dot_prefetch(const T* const* wr, const DotSpan& span, uint64_t k,
                                  uint64_t line) {
  if (span.next) {
    span.next.template fetch<NC>(line * NC * 64);
    return;
  }
  constexpr uint64_t kLine = 64 / sizeof(T);
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) __builtin_prefetch(wr[c] + k + 8 * kLine);
}

// acc[m][c] += x rows [at, at + kLanes) x widened w rows [at, at + kLanes).
template <int kLanes, int MR, int NC, class T>
AXRT_CPU_INLINE void dot_step(typename Simd<kLanes>::F (&acc)[MR][NC], const float* const* xr,
                              const T* const* wr, uint64_t at) {
  using F = typename Simd<kLanes>::F;
  F wv[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) wv[c] = Widen<kLanes, T>::load(wr[c] + at);
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    const F xv = load_vector<F>(xr[m] + at);
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[m][c] += xv * wv[c];
  }
}

#if AXRT_CPU_HAVE_AVX2_BUILD
// The dot products of the AVX2 and AVX-512 builds, with the widening loads
// the generic vectors do not produce (GCC splits those conversions into
// several instructions, or into scalar code for int8). Out of line, so
// that their instruction set is their own. Every multiply-add is fused,
// the scalar tail's too, whatever the contraction flags.

// 16 weights as floats, exactly: f32 as they are, int8 sign-extended, e4m3
// looked up in kE4m3fnValues, bf16 shifted into the top half (the
// zero-masked forms: GCC's unmasked ones warn about their unused merge
// operand).
template <class T>
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_TARGET)]] inline __m512 widen_x16(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, bytes));
  } else if constexpr (std::is_same_v<T, E4m3>) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff,
                                    _mm512_maskz_cvtepu8_epi32(0xffff, bytes),
                                    kE4m3fnValues.data(), 4);
  } else {
    const __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, halves), 16));
  }
}

template <class T>
[[gnu::always_inline, gnu::target("avx2,fma")]] inline __m256 widen_x8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  } else if constexpr (std::is_same_v<T, E4m3>) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_i32gather_ps(kE4m3fnValues.data(), _mm256_cvtepu8_epi32(bytes), 4);
  } else {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
  }
}

template <int MR, int NC, class T>
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_TARGET)]] inline void dot_step_x16(
    __m512 (&acc)[MR][NC], const float* const* xr, const T* const* wr, uint64_t at) {
  __m512 wv[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) wv[c] = widen_x16(wr[c] + at);
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    const __m512 xv = _mm512_loadu_ps(xr[m] + at);
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[m][c] = _mm512_fmadd_ps(xv, wv[c], acc[m][c]);
  }
}

template <int MR, int NC, bool kStream, class T>
[[gnu::noinline, gnu::target(AXRT_CPU_AVX512_TARGET)]] void dot_x16(const float* const* xr,
                                                                    const T* const* wr,
                                                                    const DotSpan& span,
                                                                    float* out) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(T));  // elements per cache line
  __m512 acc[MR][NC];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      acc[m][c] =
          span.first ? _mm512_setzero_ps() : _mm512_load_ps(span.saved + (m * kTile + c) * 16);
    }
  }
  const uint64_t K = span.count;
  uint64_t k = 0;
  if constexpr (kStream) {
    for (; k + kLine <= K; k += kLine) {
      dot_prefetch<NC>(wr, span, k, k / kLine);
#pragma GCC unroll 4
      for (int s = 0; s < kLine; s += 16) dot_step_x16<MR, NC>(acc, xr, wr, k + s);
    }
  }
  for (; k + 16 <= K; k += 16) dot_step_x16<MR, NC>(acc, xr, wr, k);
  if (!span.last) {
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) _mm512_store_ps(span.saved + (m * kTile + c) * 16, acc[m][c]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      // The same halving order as lane_sum.
      const __m256 half = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, acc[m][c], 0),
                                        _mm512_maskz_extractf32x8_ps(0xff, acc[m][c], 1));
      const __m128 quarter =
          _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
      const __m128 eighth = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
      float sum = _mm_cvtss_f32(_mm_add_ss(eighth, _mm_shuffle_ps(eighth, eighth, 1)));
      for (uint64_t t = k; t < K; ++t) {
        sum = __builtin_fmaf(xr[m][t], Widen<16, T>::scalar(wr[c][t]), sum);
      }
      out[m * NC + c] = sum;
    }
  }
}

template <int MR, int NC, class T>
[[gnu::always_inline, gnu::target("avx2,fma")]] inline void dot_step_x8(
    __m256 (&acc)[MR][NC], const float* const* xr, const T* const* wr, uint64_t at) {
  __m256 wv[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) wv[c] = widen_x8(wr[c] + at);
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    const __m256 xv = _mm256_loadu_ps(xr[m] + at);
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) acc[m][c] = _mm256_fmadd_ps(xv, wv[c], acc[m][c]);
  }
}

template <int MR, int NC, bool kStream, class T>
[[gnu::noinline, gnu::target("avx2,fma")]] void dot_x8(const float* const* xr, const T* const* wr,
                                                       const DotSpan& span, float* out) {
  constexpr int kLine = 64 / static_cast<int>(sizeof(T));
  __m256 acc[MR][NC];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      acc[m][c] =
          span.first ? _mm256_setzero_ps() : _mm256_load_ps(span.saved + (m * kTile + c) * 8);
    }
  }
  const uint64_t K = span.count;
  uint64_t k = 0;
  if constexpr (kStream) {
    for (; k + kLine <= K; k += kLine) {
      dot_prefetch<NC>(wr, span, k, k / kLine);
#pragma GCC unroll 8
      for (int s = 0; s < kLine; s += 8) dot_step_x8<MR, NC>(acc, xr, wr, k + s);
    }
  }
  for (; k + 8 <= K; k += 8) dot_step_x8<MR, NC>(acc, xr, wr, k);
  if (!span.last) {
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) _mm256_store_ps(span.saved + (m * kTile + c) * 8, acc[m][c]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      // The same halving order as lane_sum.
      const __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc[m][c]),
                                     _mm256_extractf128_ps(acc[m][c], 1));
      const __m128 quarter = _mm_add_ps(half, _mm_movehl_ps(half, half));
      float sum = _mm_cvtss_f32(_mm_add_ss(quarter, _mm_shuffle_ps(quarter, quarter, 1)));
      for (uint64_t t = k; t < K; ++t) {
        sum = __builtin_fmaf(xr[m][t], Widen<8, T>::scalar(wr[c][t]), sum);
      }
      out[m * NC + c] = sum;
    }
  }
}
#endif

// out[m][c] = sum_k x_rows[m][k] w_rows[c][k] over the span, in generic
// vectors: the baseline build (no FMA on x86-64, so nothing to contract;
// elsewhere the vector and the scalar multiply-adds are contracted alike).
template <int kLanes, int MR, int NC, bool kStream, class T>
AXRT_CPU_INLINE void dot_block_generic(const float* const* xr, const T* const* wr,
                                       const DotSpan& span, float (&out)[MR][NC]) {
  using F = typename Simd<kLanes>::F;
  // Each pass of the outer loop reads one cache line of every weight row.
  constexpr int kLine = 64 / static_cast<int>(sizeof(T)) > kLanes ? 64 / static_cast<int>(sizeof(T))
                                                                  : kLanes;
  constexpr uint64_t kAhead = 8 * kLine;  // prefetch distance, in elements
  F acc[MR][NC];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      acc[m][c] = span.first ? F{} : load_vector<F>(span.saved + (m * kTile + c) * kLanes);
    }
  }
  const uint64_t K = span.count;
  uint64_t k = 0;
  if constexpr (kStream) {
    for (; k + kLine <= K; k += kLine) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) __builtin_prefetch(wr[c] + k + kAhead);
#pragma GCC unroll 16
      for (int s = 0; s < kLine; s += kLanes) dot_step<kLanes, MR, NC, T>(acc, xr, wr, k + s);
    }
  }
  for (; k + kLanes <= K; k += kLanes) dot_step<kLanes, MR, NC, T>(acc, xr, wr, k);
  if (!span.last) {
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int c = 0; c < NC; ++c) store_vector(span.saved + (m * kTile + c) * kLanes, acc[m][c]);
    }
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      float sum = lane_sum<kLanes>(acc[m][c]);
      for (uint64_t t = k; t < K; ++t) sum += xr[m][t] * Widen<kLanes, T>::scalar(wr[c][t]);
      out[m][c] = sum;
    }
  }
}

// out[m][c] = sum_k x_rows[m][k] w_rows[c][k] over the span (written by
// the last span only). kStream: the weight rows come from memory, so they
// are prefetched ahead (the instructions cost load slots where the rows
// are in L1 already).
template <int kLanes, int MR, int NC, bool kStream, class T>
AXRT_CPU_INLINE void dot_block(const float* const* xr, const T* const* wr, const DotSpan& span,
                               float (&out)[MR][NC]) {
#if AXRT_CPU_HAVE_AVX2_BUILD
  if constexpr (kLanes == 16) {
    dot_x16<MR, NC, kStream>(xr, wr, span, &out[0][0]);
  } else if constexpr (kLanes == 8) {
    dot_x8<MR, NC, kStream>(xr, wr, span, &out[0][0]);
  } else {
    dot_block_generic<kLanes, MR, NC, kStream>(xr, wr, span, out);
  }
#else
  dot_block_generic<kLanes, MR, NC, kStream>(xr, wr, span, out);
#endif
}

// Rows of x and weight rows (columns) of a span, each at the span's first k.
template <class T>
struct DotOperands {
  const float* x;  // row 0
  uint64_t ldx;
  const T* w;  // the weight row of column 0
  uint64_t ldw;
  int cols;  // weight rows [0, cols)
};

// c rows [m0, m0 + MR) x columns [n_begin, n_end) (row stride kTile) =
// x rows . weight rows over the span; span.saved points at the
// accumulators of (row 0, column 0).
template <int kLanes, int MR, bool kStream, class T>
AXRT_CPU_INLINE void dot_rows(const DotOperands<T>& op, int m0, int n_begin, int n_end,
                              const DotSpan& span, float* c) {
  constexpr int NC = dot_columns<kLanes>(MR);
  const float* x_rows[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) x_rows[m] = op.x + (m0 + m) * op.ldx;
  for (int n = n_begin; n < n_end; n += NC) {
    // A last block past the columns repeats the last one.
    const T* w_rows[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) w_rows[j] = op.w + std::min(n + j, op.cols - 1) * op.ldw;
    DotSpan block = span;
    if (!(span.first && span.last)) block.saved = span.saved + (m0 * kTile + n) * kLanes;
    if (kStream && m0 == 0 && span.first && span.last && op.ldw == span.count &&
        n + NC < op.cols) {
      // Rows back to back: the next block follows this one in memory (the
      // first group of rows streams it; the others find it in cache).
      block.next = {reinterpret_cast<const char*>(op.w + (n + NC) * op.ldw),
                    reinterpret_cast<const char*>(op.w + op.cols * op.ldw)};
    }
    float out[MR][NC];
    dot_block<kLanes, MR, NC, kStream>(x_rows, w_rows, block, out);
    if (!span.last) continue;
    const int width = std::min(NC, op.cols - n);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      for (int j = 0; j < width; ++j) c[(m0 + m) * kTile + n + j] = out[m][j];
    }
  }
}

// c rows [m0, m0 + rows) x columns [n_begin, n_end) over the span, rows
// at most kGroup (4: weight rows streamed from memory; 6: blocks in L1,
// where the loads per multiply-add decide).
template <int kLanes, int kGroup, bool kStream, class T>
AXRT_CPU_INLINE void dot_group(const DotOperands<T>& op, int m0, int rows, int n_begin, int n_end,
                               const DotSpan& span, float* c) {
  static_assert(kGroup == 4 || kGroup == 6);
  switch (rows) {
    case 1: dot_rows<kLanes, 1, kStream>(op, m0, n_begin, n_end, span, c); break;
    case 2: dot_rows<kLanes, 2, kStream>(op, m0, n_begin, n_end, span, c); break;
    case 3: dot_rows<kLanes, 3, kStream>(op, m0, n_begin, n_end, span, c); break;
    case 4: dot_rows<kLanes, 4, kStream>(op, m0, n_begin, n_end, span, c); break;
    default:
      if constexpr (kGroup == 6) {
        if (rows == 5) {
          dot_rows<kLanes, 5, kStream>(op, m0, n_begin, n_end, span, c);
        } else {
          dot_rows<kLanes, 6, kStream>(op, m0, n_begin, n_end, span, c);
        }
      }
      break;
  }
}

// Rows of lines to fetch into L2 a few at a time, in row order: `rows`
// rows of `bytes` bytes, `stride` bytes apart.
struct LinePrefetch {
  const char* base = nullptr;
  uint64_t stride = 0;
  uint64_t bytes = 0;
  int rows = 0;
  int row = 0;
  uint64_t offset = 0;

  // The next `lines` lines (fewer at the end).
  AXRT_CPU_INLINE void issue(int lines) {
    for (; lines > 0 && row < rows; --lines) {
      __builtin_prefetch(base + row * stride + offset, 0, 2);
      offset += 64;
      if (offset >= bytes) {
        offset = 0;
        ++row;
      }
    }
  }
  AXRT_CPU_INLINE int lines() const { return rows * static_cast<int>((bytes + 63) / 64); }
};

// Copies `bytes` bytes a 64-byte line at a time (a memcpy of a run-time
// length becomes a slow generic loop here).
AXRT_CPU_INLINE void copy_lines(void* __restrict dst, const void* __restrict src,
                                uint64_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  uint64_t i = 0;
  for (; i + 64 <= bytes; i += 64) std::memcpy(d + i, s + i, 64);
  for (; i < bytes; ++i) d[i] = s[i];
}

// scratch.c = the tile's rows of x times w^T, w [N, K] of T: every output a
// dot product of its x row and its weight row, computed the same way
// whatever the tile's row count and wherever the row lies in it (DotSpan),
// so that a row's result does not depend on M.
//
// Up to kDotMaxRows rows stream every weight row once, over all of K. More
// rows take a block of weight rows at a time (8 on AVX-512, 4 otherwise),
// which every group of x rows uses before the next: over all of K for up
// to kSkinnyMaxRows rows or when the block fits L1 (kDotInPlaceBytes; the
// first group, 4 rows, streams it from memory, the others take 6 from L1), else
// a K block of kDotDepth at a time, with the K block's x rows and weight
// rows copied first and groups of 6 x rows. The weights are read from
// memory once either way.
template <int kLanes, class T>
AXRT_CPU_INLINE void skinny_nmajor_tile(const float* x, const T* w, uint64_t K, const Tile& tile,
                                        TileScratch& scratch) {
  // A multiple of every dot_columns().
  constexpr int kBlock = dot_columns<kLanes>(1);
  const DotOperands<T> in_place{x + tile.m0 * K, K, w + tile.n0 * K, K, tile.cols};
  const DotSpan all_of_k{K, true, true, nullptr};
  if (tile.rows <= kDotMaxRows) {
    dot_group<kLanes, kDotMaxRows, true>(in_place, 0, tile.rows, 0, tile.cols, all_of_k,
                                         scratch.c);
    return;
  }
  if (tile.rows <= kSkinnyMaxRows || kBlock * K * sizeof(T) <= kDotInPlaceBytes) {
    for (int n = 0; n < tile.cols; n += kBlock) {
      // The first group of rows streams the block of weight rows from
      // memory, the others find it in L1: meanwhile the next block comes
      // into L2, a share before each of those groups, so that the reads
      // from memory overlap the multiply-adds.
      LinePrefetch next;
      if (n + kBlock < tile.cols) {
        next = {reinterpret_cast<const char*>(w + (tile.n0 + n + kBlock) * K), sizeof(T) * K,
                sizeof(T) * K, std::min(kBlock, tile.cols - n - kBlock)};
      }
      // The first group streams the block from memory; the others read it
      // from L1 in groups of 6 rows, where the loads per multiply-add decide.
      const int later = tile.rows > kDotMaxRows ? (tile.rows - kDotMaxRows + 5) / 6 : 0;
      const int share = later > 0 ? (next.lines() + later - 1) / later : 0;
      dot_group<kLanes, kDotMaxRows, true>(in_place, 0, std::min(kDotMaxRows, tile.rows), n,
                                           std::min(tile.cols, n + kBlock), all_of_k, scratch.c);
      for (int m0 = kDotMaxRows; m0 < tile.rows; m0 += 6) {
        next.issue(share);
        dot_group<kLanes, 6, false>(in_place, m0, std::min(6, tile.rows - m0), n,
                                    std::min(tile.cols, n + kBlock), all_of_k, scratch.c);
      }
    }
    return;
  }
  static_assert(sizeof(DotScratch::w) >= kBlock * kDotDepth * sizeof(T));
  DotScratch& dot = dot_scratch();
  T* const w_block = reinterpret_cast<T*>(dot.w);
  const int blocks = (tile.cols + kBlock - 1) / kBlock;
  constexpr int kGroup = 6;
  const int groups = (tile.rows + kGroup - 1) / kGroup;
  for (uint64_t k0 = 0; k0 < K; k0 += kDotDepth) {
    const uint64_t depth = std::min(kDotDepth, K - k0);
    const bool last = k0 + depth == K;
    for (int m = 0; m < tile.rows; ++m) {
      copy_lines(dot.x + m * kDotDepth, x + (tile.m0 + m) * K + k0, sizeof(float) * depth);
    }
    for (int b = 0; b < blocks; ++b) {
      const int n = b * kBlock;
      const int width = std::min(kBlock, tile.cols - n);
      for (int j = 0; j < width; ++j) {
        copy_lines(w_block + j * kDotDepth, w + (tile.n0 + n + j) * K + k0, sizeof(T) * depth);
      }
      // The next block of weight rows into L2 while this one is multiplied,
      // a share before each group of rows (more at once stall on the misses
      // in flight).
      LinePrefetch next;
      if (b + 1 < blocks || !last) {
        const uint64_t k_next = b + 1 < blocks ? k0 : k0 + kDotDepth;
        const int n_next = b + 1 < blocks ? n + kBlock : 0;
        next = {reinterpret_cast<const char*>(w + (tile.n0 + n_next) * K + k_next),
                sizeof(T) * K, sizeof(T) * std::min(kDotDepth, K - k_next),
                std::min(kBlock, tile.cols - n_next)};
      }
      const int share = (next.lines() + groups - 1) / groups;
      const DotOperands<T> op{dot.x, kDotDepth, w_block, kDotDepth, width};
      const DotSpan span{depth, k0 == 0, last, dot.lanes + n * kLanes};
      for (int m0 = 0; m0 < tile.rows; m0 += kGroup) {
        next.issue(share);
        dot_group<kLanes, kGroup, false>(op, m0, std::min(kGroup, tile.rows - m0), 0, width,
                                         span, scratch.c + n);
      }
    }
  }
}

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_SKINNY_MATMUL_H_
