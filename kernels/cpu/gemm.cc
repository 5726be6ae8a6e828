#include "kernels/cpu/gemm.h"

#include "kernels/cpu/skinny_matmul.h"

namespace axrt::kernels::cpu {

TileScratch& tile_scratch() noexcept {
  // Dynamic TLS, allocated on a thread's first tile: the pool's workers and
  // any thread that runs a dispatch inline each get their own.
  static thread_local TileScratch scratch;
  return scratch;
}

DotScratch& dot_scratch() noexcept {
  static thread_local DotScratch scratch;
  return scratch;
}

void multiply_panel_baseline(const float* a, uint64_t lda, const float* b, float* c, int rows,
                             int strips, int kc) noexcept {
  multiply_panel_body<4>(a, lda, b, c, rows, strips, kc);
}

void skinny_panel_baseline(const SkinnyPanel& p) noexcept { skinny_panel_body<4>(p); }

#if AXRT_CPU_HAVE_AVX2_BUILD
void multiply_panel_avx2(const float* a, uint64_t lda, const float* b, float* c, int rows,
                         int strips, int kc) noexcept {
  multiply_panel_body<8>(a, lda, b, c, rows, strips, kc);
}

void skinny_panel_avx2(const SkinnyPanel& p) noexcept { skinny_panel_body<8>(p); }
void skinny_panel_avx512(const SkinnyPanel& p) noexcept { skinny_panel_body<16>(p); }

namespace {

// c[MR][NS strips] (row stride kTile) += a rows [0, MR) (row stride lda) . NS b strips over
// depth kc, one 16-float register per strip and row. The strips are read
// where the packer wrote them (kKc kNr floats apart).
template <int MR, int NS>
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_TARGET)]] inline void micro_kernel_x16(
    const float* __restrict a, uint64_t lda, const float* __restrict b, float* __restrict c,
    int kc) {
  using F = Simd<16>::F;
  static_assert(kNr == 16);
  // 512-bit vectors pass by value only between functions built for
  // AVX-512 (clang refuses even an always-inline helper without the target,
  // such as load_vector): loads and stores are spelled out here.
  F acc[MR][NS];
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) acc[m][s] = F{};
  }
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k) {
    F bv[NS];
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) __builtin_memcpy(&bv[s], b + s * kKc * kNr + k * kNr, sizeof(F));
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      const float am = a[m * lda + k];
#pragma GCC unroll 4
      for (int s = 0; s < NS; ++s) acc[m][s] += am * bv[s];
    }
  }
#pragma GCC unroll 12
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int s = 0; s < NS; ++s) {
      float* row = c + m * kTile + s * kNr;
      F sum;
      __builtin_memcpy(&sum, row, sizeof sum);
      sum += acc[m][s];
      __builtin_memcpy(row, &sum, sizeof sum);
    }
  }
}

template <int MR, int NS>
[[gnu::noinline, gnu::target(AXRT_CPU_AVX512_TARGET)]] void micro_kernel_x16_call(
    const float* a, uint64_t lda, const float* b, float* c, int kc) {
  micro_kernel_x16<MR, NS>(a, lda, b, c, kc);
}

using MicroKernel = void (*)(const float*, uint64_t, const float*, float*, int);

// kernels[rows - 1][strips - 1] for blocks up to kMaxRows x kMaxStrips.
template <int kMaxRows, int kMaxStrips>
struct MicroKernelTable {
  MicroKernel kernels[kMaxRows][kMaxStrips];
  template <int R, int S>
  constexpr void fill() {
    kernels[R - 1][S - 1] = &micro_kernel_x16_call<R, S>;
    if constexpr (S > 1) {
      fill<R, S - 1>();
    } else if constexpr (R > 1) {
      fill<R - 1, kMaxStrips>();
    }
  }
  constexpr MicroKernelTable() : kernels{} { fill<kMaxRows, kMaxStrips>(); }
};

template <int kMaxRows, int kMaxStrips>
[[gnu::target(AXRT_CPU_AVX512_TARGET)]] void multiply_panel_x16(const float* a, uint64_t lda,
                                                                const float* b, float* c,
                                                                int rows, int strips, int kc) {
  static constexpr MicroKernelTable<kMaxRows, kMaxStrips> table;
  // One strip group at a time: its kc x 64 floats stay in L1 (kc <= 128) or
  // L2 while the row blocks of x stream past.
  for (int j = 0; j < strips; j += kMaxStrips) {
    const int ns = std::min(kMaxStrips, strips - j);
    const float* b_group = b + j * kKc * kNr;
    for (int m0 = 0; m0 < rows; m0 += kMaxRows) {
      const int mr = std::min(kMaxRows, rows - m0);
      float* c_block = c + m0 * kTile + j * kNr;
      const float* a_block = a + m0 * lda;
      if (mr == kMaxRows && ns == kMaxStrips) {
        micro_kernel_x16<kMaxRows, kMaxStrips>(a_block, lda, b_group, c_block, kc);
      } else {
        table.kernels[mr - 1][ns - 1](a_block, lda, b_group, c_block, kc);
      }
    }
  }
}

}  // namespace

void multiply_panel_avx512(const float* a, uint64_t lda, const float* b, float* c, int rows,
                           int strips, int kc, int shape) noexcept {
  if (shape == 1) {
    multiply_panel_x16<12, 2>(a, lda, b, c, rows, strips, kc);
  } else {
    multiply_panel_x16<6, 4>(a, lda, b, c, rows, strips, kc);
  }
}
#endif

}  // namespace axrt::kernels::cpu
