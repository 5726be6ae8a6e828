// axrt_matmul_f32: y[M, N] = x[M, K] . w[K, N] + bias[N], and the [N, K]
// kinds y = x . w^T + bias: axrt_matmul_f32_nk (w f32) and
// axrt_matmul_bf16_f32 (w bf16), and the latter on the decode grid
// (axrt_matmul_bf16_f32_decode).
//
// The [N, K] kinds are batch-invariant: each row of y depends only on that
// row of x, the weights and the bias: the same bits whatever M and whatever
// the other rows (within one build: AVX-512, AVX2 or baseline). Every tile
// takes the dot products of skinny_matmul.h. axrt_matmul_f32 is not: its
// tiles of more than 16 rows take the tile engine (docs/kernels.md, "Batch
// invariance").
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_tuning.h"
#include "kernels/cpu/silu_mul.h"
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

// The [N, K] kinds: every tile, whatever its row count, takes the dot
// products of skinny_nmajor_tile, one arithmetic for every output.
struct MatmulNkBody {
  template <int kLanes, class Args>
  AXRT_CPU_INLINE static void run(const Args* args, const Tile* tile, TileScratch* scratch) {
    skinny_nmajor_tile<kLanes>(args->x, args->w, args->K, *tile, *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

template <class Args, bool kDecodeGrid = false>
axrt_kernel_result_t run_matmul_nk(const void* args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const Args*>(args);
  Tile tile;
  const bool located = kDecodeGrid ? locate_decode_tile(workgroup, a->M, a->N, &tile)
                                   : locate_tile(workgroup, a->M, a->N, &tile);
  if (!located) return AXRT_KERNEL_OK;
  run_matmul_isa<MatmulNkBody>(matmul_isa(), a, &tile, &tile_scratch());
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

// The same products on the decode grid (8 columns by 16 rows a workgroup),
// which suits a GPU's decode: the same bits as axrt_matmul_bf16_f32.
extern "C" axrt_kernel_result_t axrt_matmul_bf16_f32_decode(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return run_matmul_nk<MatmulBf16Args, true>(args, workgroup);
}

// The decode matmul with the gated SiLU in its epilogue (docs/kernels.md,
// "Decode matmuls"): workgroup j's 8 columns are 4 gate rows and their 4 up
// rows, computed as axrt_matmul_bf16_f32_decode computes them (a column's
// products do not depend on the others), then act[m][4 j + i] as
// axrt_silu_mul_f32 computes it for that column of a row of N / 2.
extern "C" axrt_kernel_result_t axrt_matmul_bf16_f32_decode_silu(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulBf16Args*>(args);
  if (a->N % kDecodeCols != 0) {
    return invalid_argument(workgroup,
                            "axrt_matmul_bf16_f32_decode_silu: N = %" PRIu64
                            " is not a multiple of 8 (4 gate and 4 up rows a workgroup)",
                            a->N);
  }
  Tile tile;
  if (!locate_decode_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  float h[kDecodeRows * kDecodeCols];
  const MatmulBf16Args part{a->x + tile.m0 * a->K, a->w + tile.n0 * a->K, a->bias + tile.n0,
                            h, static_cast<uint64_t>(tile.rows), kDecodeCols, a->K};
  Tile local = tile;
  local.m0 = 0;
  local.n0 = 0;
  run_matmul_isa<MatmulNkBody>(matmul_isa(), &part, &local, &tile_scratch());
  const uint64_t half = kDecodeCols / 2;
  const uint64_t cols = a->N / 2;
  for (int r = 0; r < tile.rows; ++r) {
    silu_mul_columns(h + r * kDecodeCols, h + r * kDecodeCols + half,
                     a->y + (tile.m0 + r) * cols + tile.n0 / 2, tile.n0 / 2, half, cols);
  }
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_matmul_f32_nk(const void* args, const axrt_kernel_dispatch_t*,
                                                   const axrt_kernel_workgroup_t* workgroup) {
  return run_matmul_nk<MatmulF32NkArgs>(args, workgroup);
}
