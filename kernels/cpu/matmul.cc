// axrt_matmul_f32: y[M, N] = x[M, K] . w[K, N] + bias[N].
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels::cpu {
namespace {

// Copies the tile's columns of w rows [k0, k0 + kc) into f32 strips, a row
// at a time (one pass over each row's pages).
struct PackF32 {
  static constexpr int kPrefetchRows = 8;
  const float* w;
  uint64_t N;
  const Tile& tile;

  template <int kLanes>
  AXRT_CPU_INLINE void pack(uint64_t k0, int kc, float* __restrict b) const {
    const int full_strips = tile.cols / kNr;
    const int tail = tile.cols % kNr;
    for (int k = 0; k < kc; ++k) {
      const float* __restrict src = w + (k0 + k) * N + tile.n0;
      float* __restrict dst = b + k * kNr;
      // Rows are N apart, too far for the hardware prefetcher to follow.
      if (k + kPrefetchRows < kc) {
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
};

struct MatmulF32Body {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const MatmulF32Args* args, const Tile* tile,
                                  TileScratch* scratch) {
    const PackF32 pack{args->w, args->N, *tile};
    accumulate_tile<kLanes>(args->x, args->K, *tile, pack, *scratch);
    store_tile(*tile, *scratch, args->bias, args->y, args->N, /*scaled=*/false);
  }
};

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_matmul_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const MatmulF32Args*>(args);
  Tile tile;
  if (!locate_tile(workgroup, a->M, a->N, &tile)) return AXRT_KERNEL_OK;
  run_dispatched<MatmulF32Body>(a, &tile, &tile_scratch());
  return AXRT_KERNEL_OK;
}
