// axrt_matmul_f32: y[M, N] = x[M, K] . w[K, N] + bias[N], and the [N, K]
// kinds y = x . w^T + bias: axrt_matmul_f32_nk (w f32) and
// axrt_matmul_bf16_f32 (w bf16).
#include <bit>
#include <type_traits>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_tuning.h"
#include "kernels/cpu/skinny_matmul.h"

namespace axrt::kernels::cpu {
namespace {

// Copies the tile's columns of w rows [k0, k0 + kc) into f32 strips, a row
// at a time (one pass over each row's pages).
struct PackF32 {
  static constexpr int kPrefetchRows = 16;
  const float* w;
  uint64_t N;
  uint64_t K;
  const Tile& tile;

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    const int full_strips = tile.cols / kNr;
    const int tail = tile.cols % kNr;
    for (int k = 0; k < kc; ++k) {
      const float* __restrict src = w + (k0 + k) * N + tile.n0;
      float* __restrict dst = b + k * kNr;
      // Rows are N apart, too far for the hardware prefetcher to follow;
      // the last rows of a panel fetch the first of the next.
      if (k0 + k + kPrefetchRows < K) {
        for (int n = 0; n < tile.cols; n += 16) __builtin_prefetch(src + kPrefetchRows * N + n);
      }
      for (int j = 0; j < full_strips; ++j) {
        std::memcpy(dst + j * kKc * kNr, src + j * kNr, sizeof(float) * kNr);
      }
      if (tail != 0) {
        float* __restrict last = dst + full_strips * kKc * kNr;
        for (int n = 0; n < kNr; ++n) last[n] = n < tail ? src[full_strips * kNr + n] : 0.0f;
      }
    }
  }

  // Rows [k_begin, k_end) of the tile's columns into L2, ahead of pack().
  AXRT_CPU_INLINE void prefetch(uint64_t k_begin, uint64_t k_end) const {
    for (uint64_t k = k_begin; k < k_end; ++k) {
      const float* src = w + k * N + tile.n0;
      for (int n = 0; n < tile.cols; n += 16) __builtin_prefetch(src + n, 0, 2);
    }
  }
};

struct MatmulF32Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulF32Args* args, const Tile* tile,
                                  TileScratch* scratch, const MatmulTuning* tuning) {
    if (tile->rows <= kSkinnyMaxRows) {
      if (tile->cols == kTile) {
        const F32Rows source{args->w, args->N, tile->n0};
        skinny_kmajor_tile<kLanes>(args->x, args->K, *tile, source, *scratch, tuning->skinny);
      } else {
        const F32RowsCopied source{args->w, args->N, tile->n0, tile->cols};
        skinny_kmajor_tile<kLanes>(args->x, args->K, *tile, source, *scratch, tuning->skinny);
      }
    } else {
      const PackF32 pack{args->w, args->N, args->K, *tile};
      accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch, tuning->gemm);
    }
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

#if AXRT_CPU_HAVE_AVX2_BUILD
// strip[k][lane] = src[lane ld + k] for 16 full lanes and k in [0, kc): the
// f32 [N, K] transposing copy, 16 x 16 blocks transposed in registers (each
// row's 64 bytes of a block are one cache line, read once). The zero-masked
// forms of the shuffles: GCC's unmasked ones warn about their unused merge
// operand.
[[gnu::noinline, gnu::target(AXRT_CPU_AVX512_TARGET)]] void transpose_f32_x16(
    const float* __restrict src, uint64_t ld, int kc, float* __restrict strip) {
  int k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      r[i] = _mm512_loadu_ps(src + i * ld + k);
      __builtin_prefetch(src + i * ld + k + 64);
    }
    // Pairs of rows interleaved, then quadruples: u[4 g + c] holds, in its
    // 128-bit lane L, rows 4 g .. 4 g + 3 of column 4 L + c.
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      t[2 * p] = _mm512_maskz_unpacklo_ps(0xffff, r[2 * p], r[2 * p + 1]);
      t[2 * p + 1] = _mm512_maskz_unpackhi_ps(0xffff, r[2 * p], r[2 * p + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      u[4 * g + 0] = _mm512_maskz_shuffle_ps(0xffff, t[4 * g], t[4 * g + 2], 0x44);
      u[4 * g + 1] = _mm512_maskz_shuffle_ps(0xffff, t[4 * g], t[4 * g + 2], 0xEE);
      u[4 * g + 2] = _mm512_maskz_shuffle_ps(0xffff, t[4 * g + 1], t[4 * g + 3], 0x44);
      u[4 * g + 3] = _mm512_maskz_shuffle_ps(0xffff, t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    // Then the 128-bit lanes: column c gathers lane c / 4 of u[c % 4],
    // u[4 + c % 4], u[8 + c % 4] and u[12 + c % 4].
    float* __restrict out = strip + k * kNr;
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512 a = _mm512_maskz_shuffle_f32x4(0xffff, u[c], u[4 + c],
                                                  0x88);  // columns c, 8 + c
      const __m512 b = _mm512_maskz_shuffle_f32x4(0xffff, u[c], u[4 + c],
                                                  0xDD);  // 4 + c, 12 + c
      const __m512 e = _mm512_maskz_shuffle_f32x4(0xffff, u[8 + c], u[12 + c], 0x88);
      const __m512 f = _mm512_maskz_shuffle_f32x4(0xffff, u[8 + c], u[12 + c], 0xDD);
      _mm512_storeu_ps(out + c * kNr, _mm512_maskz_shuffle_f32x4(0xffff, a, e, 0x88));
      _mm512_storeu_ps(out + (8 + c) * kNr, _mm512_maskz_shuffle_f32x4(0xffff, a, e, 0xDD));
      _mm512_storeu_ps(out + (4 + c) * kNr, _mm512_maskz_shuffle_f32x4(0xffff, b, f, 0x88));
      _mm512_storeu_ps(out + (12 + c) * kNr, _mm512_maskz_shuffle_f32x4(0xffff, b, f, 0xDD));
    }
  }
  for (; k < kc; ++k) {
    for (int lane = 0; lane < 16; ++lane) strip[k * kNr + lane] = src[lane * ld + k];
  }
}
#endif

// [N, K] rows of T (f32, or bf16 widened exactly: bf16 is the top half of
// an f32) transposed into the f32 strips of the tile engine.
template <class T>
struct PackNk {
  const T* w;
  uint64_t K;
  const Tile& tile;

  static float decode(int, T value) {
    if constexpr (std::is_same_v<T, float>) {
      return value;
    } else {
      return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
    }
  }

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    for (int j = 0; j < tile.strips; ++j) {
      const int width = std::min(kNr, tile.cols - j * kNr);
      const T* rows = w + (tile.n0 + j * kNr) * K + k0;
#if AXRT_CPU_HAVE_AVX2_BUILD
      if constexpr (kLanes == 16 && std::is_same_v<T, float>) {
        if (width == kNr) {
          transpose_f32_x16(rows, K, kc, b + j * kKc * kNr);
          continue;
        }
      }
#endif
      transpose_rows(rows, K, width, 0, kc, b + j * kKc * kNr, decode);
    }
  }
};

// The [N, K] kinds: small row counts take dot products along K, each weight
// row read front to back; more rows the tile engine.
template <class Args>
struct MatmulNkBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const Args* args, const Tile* tile, TileScratch* scratch,
                                  const MatmulTuning* tuning) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(args->w)>>;
    if (tile->rows <= kSkinnyMaxRows) {
      skinny_nmajor_tile<kLanes>(args->x, args->w, args->K, *tile, *scratch);
    } else {
      const PackNk<T> pack{args->w, args->K, *tile};
      accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch, tuning->gemm);
    }
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

template <class Args>
axrt_kernel_result_t run_matmul_nk(const void* args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const Args*>(args);
  Tile tile;
  if (!locate_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  const MatmulIsa isa = matmul_isa();
  run_matmul_isa<MatmulNkBody<Args>>(isa, a, &tile, &tile_scratch(), &matmul_tuning(isa));
  return AXRT_KERNEL_OK;
}

}  // namespace

void matmul_f32_tile(MatmulIsa isa, const MatmulF32Args& args, const Tile& tile,
                     TileScratch& scratch, const MatmulTuning& tuning) noexcept {
  run_matmul_isa<MatmulF32Body>(isa, &args, &tile, &scratch, &tuning);
}

}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_matmul_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulF32Args*>(args);
  Tile tile;
  if (!locate_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  const MatmulIsa isa = matmul_isa();
  run_matmul_isa<MatmulF32Body>(isa, a, &tile, &tile_scratch(), &matmul_tuning(isa));
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_matmul_bf16_f32(const void* args,
                                                     const axrt_kernel_dispatch_t*,
                                                     const axrt_kernel_workgroup_t* workgroup) {
  return run_matmul_nk<MatmulBf16Args>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_f32_nk(const void* args, const axrt_kernel_dispatch_t*,
                                                   const axrt_kernel_workgroup_t* workgroup) {
  return run_matmul_nk<MatmulF32NkArgs>(args, workgroup);
}
