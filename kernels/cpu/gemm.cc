#include "kernels/cpu/gemm.h"

namespace axrt::kernels::cpu {

TileScratch& tile_scratch() noexcept {
  // Dynamic TLS, allocated on a thread's first tile: the pool's workers and
  // any thread that runs a dispatch inline each get their own.
  static thread_local TileScratch scratch;
  return scratch;
}

void multiply_panel_baseline(const float* a, const float* b, float* c, int rows, int strips,
                             int kc) noexcept {
  multiply_panel_body<4>(a, b, c, rows, strips, kc);
}

#if AXRT_CPU_HAVE_AVX2_BUILD
void multiply_panel_avx2(const float* a, const float* b, float* c, int rows, int strips,
                         int kc) noexcept {
  multiply_panel_body<8>(a, b, c, rows, strips, kc);
}
#endif

}  // namespace axrt::kernels::cpu
