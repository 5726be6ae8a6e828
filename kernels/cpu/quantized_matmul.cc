// The quantized matmuls: each dequantises a K panel of its weight tile into
// the f32 strips of the shared tile engine (gemm.h) and reuses its
// micro-kernel. Layouts: docs/kernels.md and docs/format.md sections 5, 9.
#include <cinttypes>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels::cpu {
namespace {

// Writes strip[k][lane] = decode(lane, src[lane ld + k]) for k in
// [k_begin, k_end) and lanes [0, width), zero in the lanes past width: the
// transposing copy of the [N, K] layouts. The rows are first copied a cache
// line at a time into a small buffer, since kNr rows ld bytes apart collide
// in one L1 set whenever ld is a multiple of 4 KiB.
template <class T, class Decode>
AXRT_CPU_INLINE void transpose_rows(const T* __restrict src, uint64_t ld, int width, int k_begin,
                                    int k_end, float* __restrict strip, const Decode& decode) {
  constexpr int kBlock = 64 / sizeof(T);
  alignas(64) T buffer[kNr][kBlock];
  for (int kb = k_begin; kb < k_end; kb += kBlock) {
    const int count = std::min(kBlock, k_end - kb);
    for (int lane = 0; lane < width; ++lane) {
      std::memcpy(buffer[lane], src + lane * ld + kb, sizeof(T) * count);
      // Sixteen streams at once are more than the hardware prefetcher tracks.
      __builtin_prefetch(src + lane * ld + kb + 4 * kBlock);
    }
    float* __restrict dst = strip + kb * kNr;
    if (width == kNr) {
      for (int k = 0; k < count; ++k) {
#pragma GCC unroll 16
        for (int lane = 0; lane < kNr; ++lane) dst[k * kNr + lane] = decode(lane, buffer[lane][k]);
      }
    } else {
      for (int k = 0; k < count; ++k) {
        for (int lane = 0; lane < kNr; ++lane) {
          dst[k * kNr + lane] = lane < width ? decode(lane, buffer[lane][k]) : 0.0f;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// int8, per output channel: W[k][n] = w[n][k] x scale[n]. The strips hold the
// integer codes (exact in f32) and store_tile applies scale[n] once per
// output, so the dequantisation is exact.
// ---------------------------------------------------------------------------

struct PackInt8 {
  const int8_t* w;
  uint64_t K;
  const Tile& tile;

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    const auto decode = [](int, int8_t code) { return static_cast<float>(code); };
    for (int j = 0; j < tile.strips; ++j) {
      const int width = std::min(kNr, tile.cols - j * kNr);
      transpose_rows(w + (tile.n0 + j * kNr) * K + k0, K, width, 0, kc, b + j * kKc * kNr,
                     decode);
    }
  }
};

struct MatmulInt8Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt8Args* args, const Tile* tile,
                                  TileScratch* scratch) {
    for (int n = 0; n < tile->cols; ++n) scratch->column_scale[n] = args->scale[tile->n0 + n];
    const PackInt8 pack{args->w, args->K, *tile};
    accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch);
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

template <Int4Format kFormat>
AXRT_CPU_INLINE uint32_t zero_point_of(const uint32_t* qzeros_row, uint64_t n) {
  const uint32_t word = qzeros_row[n / 8];
  if constexpr (kFormat == Int4Format::kAwq) {
    return (word >> kAwqShift[n % 8]) & 0xfu;
  } else if constexpr (kFormat == Int4Format::kGptqV2) {
    return (word >> (4 * (n % 8))) & 0xfu;
  } else {
    return ((word >> (4 * (n % 8))) & 0xfu) + 1;  // v1 stores z - 1
  }
}

template <Int4Format kFormat>
struct PackInt4 {
  static constexpr uint64_t kPrefetchRows = 16;  // rows of K ahead
  const MatmulInt4Args& args;
  const Tile& tile;
  TileScratch& scratch;

  // column_scale[n] = s, column_offset[n] = -z s for group g.
  AXRT_CPU_INLINE void load_group(uint64_t g) const {
    const uint32_t* qzeros_row = args.qzeros + g * (args.N / 8);
    const uint16_t* scales_row = args.scales + g * args.N + tile.n0;
    for (int n = 0; n < tile.cols; ++n) {
      const float s = half_to_float(scales_row[n]);
      const float z = static_cast<float>(zero_point_of<kFormat>(qzeros_row, tile.n0 + n));
      scratch.column_scale[n] = s;
      scratch.column_offset[n] = -z * s;
    }
  }

  // The eight codes of tile columns [c, c + 8) in one row, dequantised.
  template <int kLanes>
  AXRT_CPU_INLINE void dequantize8(const uint32_t* __restrict codes, uint32_t shift, int c,
                                   float* __restrict dst) const {
    using F = typename Simd<kLanes>::F;
    using I = typename Simd<kLanes>::I;
    using U = typename Simd<kLanes>::U;
#pragma GCC unroll 2
    for (int part = 0; part < 8; part += kLanes) {
      U words;
      if constexpr (kFormat == Int4Format::kAwq) {
        words = (U{} + codes[0]) >> load_vector<U>(kAwqShift + part);  // one word holds all eight
      } else {
        words = load_vector<U>(codes + part) >> shift;  // a word per column
      }
      const F q = __builtin_convertvector(reinterpret_cast<I>(words & 0xfu), F);
      const F s = load_vector<F>(scratch.column_scale + c + part);
      const F offset = load_vector<F>(scratch.column_offset + c + part);
      store_vector(dst + part, q * s + offset);
    }
  }

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    const uint64_t group_size = args.group_size;
    int k = 0;
    while (k < kc) {
      const uint64_t g = (k0 + k) / group_size;
      const int k_end = static_cast<int>(std::min<uint64_t>(kc, (g + 1) * group_size - k0));
      load_group(g);
      for (; k < k_end; ++k) {
        const uint64_t row = k0 + k;
        const uint32_t* codes;
        uint32_t shift = 0;
        int words_per_8_columns;
        if constexpr (kFormat == Int4Format::kAwq) {
          codes = args.qweight + row * (args.N / 8) + tile.n0 / 8;
          words_per_8_columns = 1;
          // Each row contributes 32 bytes, N / 2 bytes apart: too far for
          // the hardware prefetcher.
          __builtin_prefetch(codes + kPrefetchRows * (args.N / 8));
        } else {
          codes = args.qweight + (row / 8) * args.N + tile.n0;
          shift = static_cast<uint32_t>(4 * (row % 8));
          words_per_8_columns = 8;
          if (row % 8 == 0) {
            for (int c = 0; c < tile.cols; c += 16) {
              __builtin_prefetch(codes + kPrefetchRows / 8 * args.N + c);
            }
          }
        }
        // N is a multiple of 8, so the tile's columns are whole groups of 8.
        for (int c = 0; c < tile.cols; c += 8) {
          float* dst = b + (c / kNr) * kKc * kNr + k * kNr + c % kNr;
          dequantize8<kLanes>(codes + (c / 8) * words_per_8_columns, shift, c, dst);
        }
        if (tile.cols % kNr != 0) {
          float* dst = b + (tile.cols / kNr) * kKc * kNr + k * kNr + 8;
          for (int n = 0; n < 8; ++n) dst[n] = 0.0f;
        }
      }
    }
  }
};

template <Int4Format kFormat>
struct MatmulInt4Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulInt4Args* args, const Tile* tile,
                                  TileScratch* scratch) {
    const PackInt4<kFormat> pack{*args, *tile, *scratch};
    accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

template <Int4Format kFormat>
axrt_kernel_result_t matmul_int4(const char* name, const void* raw_args,
                                 const axrt_kernel_workgroup_t* workgroup) {
  const auto* args = static_cast<const MatmulInt4Args*>(raw_args);
  if (args->N % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: N = %" PRIu64
                            " is not a multiple of 8 (int4 codes are packed 8 per u32 word)",
                            name, args->N);
  }
  if (args->group_size == 0) {
    return invalid_argument(workgroup, "%s: group_size is 0", name);
  }
  if (args->K % args->group_size != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64 " is not a multiple of group_size = %" PRIu64,
                            name, args->K, args->group_size);
  }
  if (kFormat != Int4Format::kAwq && args->K % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64
                            " is not a multiple of 8 (GPTQ packs 8 rows of K per u32 word)",
                            name, args->K);
  }
  Tile tile;
  if (!locate_tile(workgroup, args->M, args->N, &tile)) return AXRT_KERNEL_OK;
  run_dispatched<MatmulInt4Body<kFormat>>(args, &tile, &tile_scratch());
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
                                  TileScratch* scratch) {
    const PackFp8 pack{*args, *tile, args->block_n != 0 ? args->block_n : args->N,
                       args->block_k != 0 ? args->block_k : args->K};
    accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

axrt_kernel_result_t matmul_fp8(const void* raw_args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* args = static_cast<const MatmulFp8Args*>(raw_args);
  Tile tile;
  if (!locate_tile(workgroup, args->M, args->N, &tile)) return AXRT_KERNEL_OK;
  run_dispatched<MatmulFp8Body>(args, &tile, &tile_scratch());
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
  run_dispatched<MatmulInt8Body>(a, &tile, &tile_scratch());
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

extern "C" axrt_kernel_result_t axrt_matmul_gptq_v1_int4_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return matmul_int4<Int4Format::kGptqV1>("axrt_matmul_gptq_v1_int4_f32", args, workgroup);
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
