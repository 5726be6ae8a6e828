// The quantized matmuls. int8 and fp8 per channel take the dot products of
// skinny_matmul.h for every tile, widening the weights in registers
// (batch-invariant, as matmul.cc's [N, K] kinds). int4 tiles decode rows in registers (up to 4
// rows, Int4Rows::fused) or, whatever their row count, into a small panel
// for the k-major engine of skinny_matmul.h: one running sum per output
// over K either way, so they are batch-invariant too. fp8 tiles dequantise
// a K panel of their weight tile into the f32 strips of the shared tile
// engine (gemm.h) and reuse its micro-kernel.
// Layouts: docs/kernels.md and docs/format.md sections 5, 9.
#include <cinttypes>
#include <utility>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_tuning.h"
#include "kernels/cpu/skinny_matmul.h"

namespace axrt::kernels::cpu {
namespace {

// ---------------------------------------------------------------------------
// int8, per output channel: W[k][n] = w[n][k] x scale[n]. The dot products
// take the integer codes (exact in f32) and store_tile applies scale[n] once
// per output, so the dequantisation is exact.
// ---------------------------------------------------------------------------

// Every tile, whatever its row count, takes the dot products of
// skinny_nmajor_tile (one arithmetic for every output, as matmul.cc's
// [N, K] kinds), then the scale.
struct MatmulInt8Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt8Args* args, const Tile* tile,
                                  TileScratch* scratch) {
    for (int n = 0; n < tile->cols; ++n) scratch->column_scale[n] = args->scale[tile->n0 + n];
    skinny_nmajor_tile<kLanes>(args->x, args->w, args->K, *tile, *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/true);
  }
};

// fp8 e4m3fn per output channel: W[k][n] = e4m3(w[n][k]) x scale[n]. As
// int8: the dot products take the codes' values (exact in f32), then the
// scale once per output.
struct MatmulFp8PcBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulFp8PcArgs* args, const Tile* tile,
                                  TileScratch* scratch) {
    for (int n = 0; n < tile->cols; ++n) scratch->column_scale[n] = args->scale[tile->n0 + n];
    skinny_nmajor_tile<kLanes>(args->x, reinterpret_cast<const E4m3*>(args->w), args->K, *tile,
                               *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/true);
  }
};

// ---------------------------------------------------------------------------
// int4 with f16 group scales and packed u4 zero points:
// W[k][n] = (q[k][n] - z[k/g][n]) x s[k/g][n]. Every factor is exact in f32
// (|q - z| < 16, s has 11 significant bits), so q s - z s is too.
// ---------------------------------------------------------------------------

enum class Int4Format { kAwq, kGptqV2, kGptqV1 };

// AWQ order: elements 0, 2, 4, 6, 1, 3, 5, 7 sit in nibbles 0..7, so element
// e is at bit 4 (e / 2) when even and 16 + 4 (e / 2) when odd.
alignas(32) constexpr uint32_t kAwqShift[8] = {0, 16, 4, 20, 8, 24, 12, 28};

// Sequential order: element e of a word sits in nibble e.
alignas(32) constexpr uint32_t kSequentialShift[8] = {0, 4, 8, 12, 16, 20, 24, 28};

// The 4-bit fields of columns [V kLanes, V kLanes + kLanes) of 64 columns
// packed 8 to a word in `words`: each lane's word shifted by its element's
// position in `shifts` (8 entries).
template <int kLanes, int V>
AXRT_CPU_INLINE typename Simd<kLanes>::U nibbles(const uint32_t* __restrict words,
                                                 const uint32_t* __restrict shifts) {
  using U = typename Simd<kLanes>::U;
  if constexpr (kLanes == 16) {
    // Words 2V and 2V + 1, each spread over 8 lanes.
    using U8 = typename Simd<8>::U;
    const U8 w8 = load_vector<U8>(words);
    const U spread =
        __builtin_shufflevector(w8, w8, 2 * V, 2 * V, 2 * V, 2 * V, 2 * V, 2 * V, 2 * V, 2 * V,
                                2 * V + 1, 2 * V + 1, 2 * V + 1, 2 * V + 1, 2 * V + 1, 2 * V + 1,
                                2 * V + 1, 2 * V + 1);
    const U8 s8 = load_vector<U8>(shifts);
    const U shift =
        __builtin_shufflevector(s8, s8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    return (spread >> shift) & 0xfu;
  } else {
    // One word per vector (8 lanes) or half a word (4 lanes).
    return ((U{} + words[V * kLanes / 8]) >> load_vector<U>(shifts + (V * kLanes) % 8)) & 0xfu;
  }
}

// The skinny path's int4 weights. Up to 4 rows decode each weight row in
// registers and multiply it at once (fused); more rows decode blocks of
// rows into a small f32 panel, columns in order and zero past the tile's,
// for the k-major engine (rows()).
template <Int4Format kFormat>
struct Int4Rows {
  static constexpr bool kInPlace = false;
  static constexpr int kMaxFusedRows = 4;
  static constexpr uint64_t kPrefetchRows = 32;  // rows of K ahead
  const MatmulInt4Args& args;
  const Tile& tile;
  TileScratch& scratch;
  // GPTQ v2 only: qweight tile by tile (gptq_v2.int4.gNN.tile64, kernels.h).
  bool tiled = false;

  template <int kLanes, int V>
  AXRT_CPU_INLINE void group_vector(const uint16_t* __restrict scales,
                                    const uint32_t* __restrict zeros) const {
    using F = typename Simd<kLanes>::F;
    using H = typename Simd<kLanes>::H;
    using I = typename Simd<kLanes>::I;
    using U = typename Simd<kLanes>::U;
    const F s =
        halves_to_floats<kLanes>(__builtin_convertvector(load_vector<H>(scales + V * kLanes), U));
    U z = nibbles<kLanes, V>(zeros, kFormat == Int4Format::kAwq ? kAwqShift : kSequentialShift);
    if constexpr (kFormat == Int4Format::kGptqV1) z += 1u;  // v1 stores z - 1
    const F zf = __builtin_convertvector(reinterpret_cast<I>(z), F);
    store_vector(scratch.column_scale + V * kLanes, s);
    store_vector(scratch.column_offset + V * kLanes, -zf * s);
  }

  // column_scale[n] = s, column_offset[n] = -z s for group g; 0 past the
  // tile's columns.
  template <int kLanes, int... V>
  AXRT_CPU_INLINE void load_group(uint64_t g, std::integer_sequence<int, V...>) const {
    Int4GroupCopy copy;
    const Int4Group group = int4_group(args.scales, args.qzeros, args.N, tile, g, copy);
    (group_vector<kLanes, V>(group.scales, group.zeros), ...);
  }

  template <int kLanes>
  AXRT_CPU_INLINE void load_group(uint64_t g) const {
    load_group<kLanes>(g, std::make_integer_sequence<int, kTile / kLanes>{});
  }

  // The packed words of row `row` for the tile's columns (a zero-padded
  // copy in `padded` when the tile is narrower than 64) and, for GPTQ, the
  // row's shift within them.
  AXRT_CPU_INLINE const uint32_t* row_words(uint64_t row, uint32_t* shift,
                                            uint32_t* __restrict padded) const {
    const uint64_t N = args.N;
    const uint32_t* words;
    int count;
    if constexpr (kFormat == Int4Format::kAwq) {
      words = args.qweight + row * (N / 8) + tile.n0 / 8;
      count = tile.cols / 8;
      *shift = 0;
      // 32 bytes a row, N / 2 bytes apart: beyond the hardware prefetcher.
      __builtin_prefetch(words + kPrefetchRows * (N / 8));
    } else {
      // Word rows N apart, or kTile apart in a tile-by-tile copy (whose
      // columns past N are zero).
      const uint64_t stride = tiled ? kTile : N;
      words = tiled ? args.qweight + tile.n0 / kTile * (args.K / 8) * kTile + (row / 8) * kTile
                    : args.qweight + (row / 8) * N + tile.n0;
      count = tile.cols;
      *shift = static_cast<uint32_t>(4 * (row % 8));
      if (row % 8 == 0) {
        for (int c = 0; c < tile.cols; c += 16) {
          __builtin_prefetch(words + kPrefetchRows / 8 * stride + c);
        }
      }
    }
    if (tile.cols != kTile) {
      std::memset(padded, 0, sizeof(uint32_t) * kTile);
      std::memcpy(padded, words, sizeof(uint32_t) * count);
      words = padded;
    }
    return words;
  }

  // q s - z s of `codes` (0..15 a lane), with the columns' s (`scale`) and
  // -z s (`offset`): every path decodes a weight with these operations.
  template <int kLanes>
  AXRT_CPU_INLINE static typename Simd<kLanes>::F dequantize(typename Simd<kLanes>::U codes,
                                                             typename Simd<kLanes>::F scale,
                                                             typename Simd<kLanes>::F offset) {
    using F = typename Simd<kLanes>::F;
    using I = typename Simd<kLanes>::I;
    return __builtin_convertvector(reinterpret_cast<I>(codes), F) * scale + offset;
  }

  // W[row][V kLanes .. V kLanes + kLanes) of the tile = q s - z s.
  template <int kLanes, int V>
  AXRT_CPU_INLINE typename Simd<kLanes>::F weights(const uint32_t* __restrict words,
                                                   uint32_t shift) const {
    using F = typename Simd<kLanes>::F;
    using U = typename Simd<kLanes>::U;
    U codes;
    if constexpr (kFormat == Int4Format::kAwq) {
      codes = nibbles<kLanes, V>(words, kAwqShift);
    } else {
      codes = (load_vector<U>(words + V * kLanes) >> shift) & 0xfu;
    }
    return dequantize<kLanes>(codes, load_vector<F>(scratch.column_scale + V * kLanes),
                              load_vector<F>(scratch.column_offset + V * kLanes));
  }

  template <int kLanes, int... V>
  AXRT_CPU_INLINE void decode_row(const uint32_t* words, uint32_t shift, float* __restrict dst,
                                  std::integer_sequence<int, V...>) const {
    (store_vector(dst + V * kLanes, weights<kLanes, V>(words, shift)), ...);
  }

  // The k-major engine's source: rows [k0, k0 + kb) decoded into `panel`.
  template <int kLanes>
  AXRT_CPU_INLINE void rows(uint64_t k0, int kb, float* panel, const float** b,
                            uint64_t* ldb) const {
    alignas(64) uint32_t padded[kTile];
    int k = 0;
    while (k < kb) {
      const uint64_t g = (k0 + k) / args.group_size;
      const int k_end = static_cast<int>(std::min<uint64_t>(kb, (g + 1) * args.group_size - k0));
      load_group<kLanes>(g);
      for (; k < k_end; ++k) {
        uint32_t shift;
        const uint32_t* words = row_words(k0 + k, &shift, padded);
        decode_row<kLanes>(words, shift, panel + k * kTile,
                           std::make_integer_sequence<int, kTile / kLanes>{});
      }
    }
    *b = panel;
    *ldb = kTile;
  }

  // Fused: columns [V0 kLanes, (V0 + NV) kLanes) of scratch.c rows [0, MR)
  // = x rows . W, each weight row decoded in registers.
  template <int kLanes, int MR, int V0, int... J>
  AXRT_CPU_INLINE void fused_pass(const float* __restrict x, std::integer_sequence<int, J...>) const {
    using F = typename Simd<kLanes>::F;
    constexpr int NV = sizeof...(J);
    const uint64_t K = args.K;
    const uint64_t group_size = args.group_size;
    alignas(64) uint32_t padded[kTile];
    F acc[MR][NV];
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[m][j] = F{};
    }
    for (uint64_t g0 = 0; g0 < K; g0 += group_size) {
      load_group<kLanes>(g0 / group_size);
      if constexpr (kFormat != Int4Format::kAwq) {
        if (group_size % 8 == 0) {
          // GPTQ: a word row holds the group's next 8 rows of K. Each vector
          // of words is loaded once, with its columns' scale and offset, and
          // its 8 rows decoded and multiplied in K order: the operations and
          // order of the row-by-row loop below, without its 8 loads.
          for (uint64_t k0 = g0; k0 < g0 + group_size; k0 += 8) {
            uint32_t shift;
            const uint32_t* words = row_words(k0, &shift, padded);
            (
                [&] {
                  using U = typename Simd<kLanes>::U;
                  const U w = load_vector<U>(words + (V0 + J) * kLanes);
                  const F scale = load_vector<F>(scratch.column_scale + (V0 + J) * kLanes);
                  const F offset = load_vector<F>(scratch.column_offset + (V0 + J) * kLanes);
#pragma GCC unroll 8
                  for (int j = 0; j < 8; ++j) {
                    const F weight = dequantize<kLanes>(
                        (w >> static_cast<uint32_t>(4 * j)) & 0xfu, scale, offset);
#pragma GCC unroll 4
                    for (int m = 0; m < MR; ++m) acc[m][J] += x[m * K + k0 + j] * weight;
                  }
                }(),
                ...);
          }
          continue;
        }
      }
      for (uint64_t k = g0; k < g0 + group_size; ++k) {
        uint32_t shift;
        const uint32_t* words = row_words(k, &shift, padded);
        float xm[MR];
#pragma GCC unroll 4
        for (int m = 0; m < MR; ++m) xm[m] = x[m * K + k];
        // Each weight vector is multiplied as soon as it is decoded: holding
        // all NV of them beside the accumulators spilled AVX2's 16 registers.
        (
            [&] {
              const F w = weights<kLanes, V0 + J>(words, shift);
#pragma GCC unroll 4
              for (int m = 0; m < MR; ++m) acc[m][J] += xm[m] * w;
            }(),
            ...);
      }
    }
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) store_vector(scratch.c + m * kTile + (V0 + j) * kLanes, acc[m][j]);
    }
  }

  template <int kLanes, int MR, int... P>
  AXRT_CPU_INLINE void fused_passes(const float* x, std::integer_sequence<int, P...>) const {
    constexpr int NV = skinny_vectors<kLanes>(MR);
    (fused_pass<kLanes, MR, P * NV>(x, std::make_integer_sequence<int, NV>{}), ...);
  }

  template <int kLanes, int MR>
  AXRT_CPU_INLINE void fused(const float* x) const {
    constexpr int NV = skinny_vectors<kLanes>(MR);
    fused_passes<kLanes, MR>(x, std::make_integer_sequence<int, kTile / kLanes / NV>{});
  }
};

template <Int4Format kFormat>
struct MatmulInt4Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt4Args* args, const Tile* tile,
                                  TileScratch* scratch, const MatmulTuning* tuning, bool tiled) {
    const Int4Rows<kFormat> source{*args, *tile, *scratch, tiled};
    const float* x = args->x + tile->m0 * args->K;
    if (args->K == 0 && tile->rows <= kSkinnyMaxRows) {
      std::memset(scratch->c, 0, sizeof(float) * tile->rows * kTile);
    } else if (tile->rows <= Int4Rows<kFormat>::kMaxFusedRows) {
      switch (tile->rows) {
        case 1: source.template fused<kLanes, 1>(x); break;
        case 2: source.template fused<kLanes, 2>(x); break;
        case 3: source.template fused<kLanes, 3>(x); break;
        default: source.template fused<kLanes, 4>(x); break;
      }
    } else {
      skinny_kmajor_tile<kLanes>(args->x, args->K, *tile, source, *scratch, tuning->skinny);
    }
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

// The int4 decode matmul's grid (docs/kernels.md, "Decode matmuls"):
// workgroup (j, i) has columns [16 j, 16 j + 16), rows [16 i, 16 i + 16).
constexpr uint64_t kInt4DecodeCols = 16;

// `decode`: on the decode grid, where GPTQ's groups must also be whole
// words (group_size % 8 == 0), as the CUDA body needs. `tiled`: GPTQ v2's
// qweight tile by tile (the pre-packed form, on the 64-column grid).
template <Int4Format kFormat>
axrt_kernel_result_t matmul_int4(const char* name, const void* raw_args,
                                 const axrt_kernel_workgroup_t* workgroup, bool decode = false,
                                 bool tiled = false) {
  const auto* args = static_cast<const MatmulInt4Args*>(raw_args);
  if (const axrt_kernel_result_t r = check_int4_shape(
          name, *args, /*group_multiple_of_8=*/decode,
          /*k_multiple_of_8=*/kFormat != Int4Format::kAwq, workgroup)) {
    return r;
  }
  Tile tile;
  const bool located = decode ? locate_tile(workgroup, args->M, args->N, kInt4DecodeCols,
                                            kDecodeRows, &tile)
                              : locate_tile(workgroup, args->M, args->N, &tile);
  if (!located) return AXRT_KERNEL_OK;
  const MatmulIsa isa = matmul_isa();
  run_matmul_isa<MatmulInt4Body<kFormat>>(isa, args, &tile, &tile_scratch(), &matmul_tuning(isa),
                                          tiled);
  return AXRT_KERNEL_OK;
}

// ---------------------------------------------------------------------------
// fp8 e4m3fn with f32 block scales:
// W[k][n] = e4m3(w[n][k]) x scale[n / bn][k / bk], bn = block_n or N when 0,
// bk likewise.
// ---------------------------------------------------------------------------

struct PackFp8 {
  const MatmulFp8Args& args;
  const Tile& tile;
  uint64_t block_n;
  uint64_t block_k;

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    const uint64_t K = args.K;
    const uint64_t scale_cols = K / block_k + (K % block_k != 0 ? 1 : 0);
    const float* __restrict values = kE4m3fnValues.data();
    for (int j = 0; j < tile.strips; ++j) {
      const int width = std::min(kNr, tile.cols - j * kNr);
      const uint64_t n = tile.n0 + j * kNr;
      float* strip = b + j * kKc * kNr;
      // Runs of k inside one scale block.
      int k = 0;
      while (k < kc) {
        const uint64_t kb = (k0 + k) / block_k;
        const int k_end = static_cast<int>(std::min<uint64_t>(kc, (kb + 1) * block_k - k0));
        float lane_scale[kNr];
        for (int lane = 0; lane < width; ++lane) {
          lane_scale[lane] = args.scale[((n + lane) / block_n) * scale_cols + kb];
        }
        const auto decode = [&](int lane, uint8_t code) { return values[code] * lane_scale[lane]; };
        transpose_rows(args.w + n * K + k0, K, width, k, k_end, strip, decode);
        k = k_end;
      }
    }
  }
};

struct MatmulFp8Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulFp8Args* args, const Tile* tile,
                                  TileScratch* scratch, const MatmulTuning* tuning) {
    const PackFp8 pack{*args, *tile, args->block_n != 0 ? args->block_n : args->N,
                       args->block_k != 0 ? args->block_k : args->K};
    accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch, tuning->gemm);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

axrt_kernel_result_t matmul_fp8(const void* raw_args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* args = static_cast<const MatmulFp8Args*>(raw_args);
  Tile tile;
  if (!locate_tile(workgroup, args->M, args->N, &tile)) return AXRT_KERNEL_OK;
  const MatmulIsa isa = matmul_isa();
  run_matmul_isa<MatmulFp8Body>(isa, args, &tile, &tile_scratch(), &matmul_tuning(isa));
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_matmul_int8_pc_f32(const void* args,
                                                        const axrt_kernel_dispatch_t*,
                                                        const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulInt8Args*>(args);
  Tile tile;
  if (!locate_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  run_matmul_isa<MatmulInt8Body>(matmul_isa(), a, &tile, &tile_scratch());
  return AXRT_KERNEL_OK;
}

// The same on the decode grid (8 columns by 16 rows a workgroup): the same
// bits.
extern "C" axrt_kernel_result_t axrt_matmul_int8_pc_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulInt8Args*>(args);
  Tile tile;
  if (!locate_decode_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  run_matmul_isa<MatmulInt8Body>(matmul_isa(), a, &tile, &tile_scratch());
  return AXRT_KERNEL_OK;
}

// fp8 e4m3fn per output channel, and the same on the decode grid (8
// columns by 16 rows a workgroup): the same bits.
extern "C" axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulFp8PcArgs*>(args);
  Tile tile;
  if (!locate_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  run_matmul_isa<MatmulFp8PcBody>(matmul_isa(), a, &tile, &tile_scratch());
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulFp8PcArgs*>(args);
  Tile tile;
  if (!locate_decode_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  run_matmul_isa<MatmulFp8PcBody>(matmul_isa(), a, &tile, &tile_scratch());
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_f32(const void* args,
                                                         const axrt_kernel_dispatch_t*,
                                                         const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kAwq>("axrt_matmul_awq_int4_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_f32(const void* args,
                                                          const axrt_kernel_dispatch_t*,
                                                          const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_f32", args, workgroup);
}

// GPTQ v2 on the int4 decode grid (16 columns by 16 rows a workgroup): the
// same bits as axrt_matmul_gptq_int4_f32.
extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_f32_decode", args, workgroup,
                                          /*decode=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_v1_int4_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV1>("axrt_matmul_gptq_v1_int4_f32", args, workgroup);
}

// The same four kernels under the names that declare the layouts of groups of
// 64 and 32 inputs (awq.int4.g64, gptq_v2.int4.g64, gptq.int4.g64, and g32):
// bound with group_size 64 or 32, the same code and bits.

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_g64_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kAwq>("axrt_matmul_awq_int4_g64_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g64_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g64_f32_decode", args, workgroup,
                                          /*decode=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_v1_int4_g64_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV1>("axrt_matmul_gptq_v1_int4_g64_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_g32_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kAwq>("axrt_matmul_awq_int4_g32_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g32_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g32_f32_decode", args, workgroup,
                                          /*decode=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_v1_int4_g32_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV1>("axrt_matmul_gptq_v1_int4_g32_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_fp8_e4m3_f32(const void* args,
                                                         const axrt_kernel_dispatch_t*,
                                                         const axrt_kernel_workgroup_t* workgroup) {
  return matmul_fp8(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_fp8_e4m3_b128_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_fp8(args, workgroup);
}

// The pre-packed forms (library.h CpuPrepack) of the GPTQ v2 kernels on the
// 64-column grid: qweight as gptq_v2.int4.gNN.tile64, the same bits.
extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_f32", args, workgroup,
                                          /*decode=*/false, /*tiled=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g64_f32", args, workgroup,
                                          /*decode=*/false, /*tiled=*/true);
}

extern "C" axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV2>("axrt_matmul_gptq_int4_g32_f32", args, workgroup,
                                          /*decode=*/false, /*tiled=*/true);
}
