// The tile engine of axrt_matmul_f32's tiles of many rows and of every fp8
// tile (the other kernels take the paths of skinny_matmul.h for every tile,
// which keep them batch-invariant). A workgroup computes one 64 x 64
// tile of y = x . W + bias: for each K panel of `kc` rows it copies the x
// rows into a contiguous panel, has its kernel's packer write the W panel as
// f32 strips of kNr columns (a copy for f32, a dequantisation otherwise),
// and runs a register-tile micro-kernel over every row block and strip
// group. The tile accumulates in a float scratch tile one K panel at a time,
// so a long K adds panel sums rather than extending one running sum.
//
// Everything here is AXRT_CPU_INLINE and takes kLanes, the floats per SIMD
// register of the build it is compiled into (matmul_isa.h), so that a
// kernel's body compiles all of it for that instruction set.
#ifndef AXRT_KERNELS_CPU_GEMM_H_
#define AXRT_KERNELS_CPU_GEMM_H_

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_isa.h"

namespace axrt::kernels::cpu {

inline constexpr int kTile = 64;  // output tile edge (docs/kernels.md)
inline constexpr int kMr = 6;     // micro-tile rows
inline constexpr int kNr = 16;    // micro-tile columns
inline constexpr int kKc = 256;   // the deepest K panel (GemmBlocking::kc <= kKc)
static_assert(kTile % kNr == 0);

// The next block of a tile's weight rows, where its rows lie back to back
// and follow the current block's in memory: [begin, end), fetched into L2 in
// memory order while the current block is multiplied, as many lines a step
// as the block reads (one sequential stream for the prefetchers and the
// DRAM pages, where fetching each row ahead of itself made many short
// ones). Empty (begin null) for a tile's last block.
struct NextBlock {
  const char* begin = nullptr;
  const char* end = nullptr;

  explicit operator bool() const { return begin != nullptr; }
  // The `lines` lines from byte `at` of the block (those before its end).
  template <int kLines>
  AXRT_CPU_INLINE void fetch(uint64_t at) const {
    const char* p = begin + at;
#pragma GCC unroll 8
    for (int j = 0; j < kLines; ++j) {
      if (p + 64 * j < end) __builtin_prefetch(p + 64 * j, 0, 2);
    }
  }
};

// The run-time blocking of the tile engine (matmul_tuning.h picks it).
struct GemmBlocking {
  int kc = kKc;   // K panel depth, a multiple of 8 in [8, kKc]
  int shape = 0;  // AVX-512 register tile: 0 = 6 rows x 64 columns, 1 = 12 rows x 32 columns
  int pack_x = 0;  // 1: copy each x panel into TileScratch::a; 0: read x where it is
};

// One thread's working memory for a tile (about 150 KiB, so not on the
// stack of whatever thread runs the workgroup).
struct TileScratch {
  // x panel, row-major with row stride kKc: element (row m, depth k) at
  // [m kKc + k]. A plain copy, since a transposing one costs as much as a
  // good part of the multiplication with a tile only 64 columns wide.
  alignas(64) float a[kTile * kKc];
  // W panel: strip j (columns [kNr j, kNr j + kNr)) at b + j kKc kNr, element
  // (depth k, column c) at [k kNr + c]; columns past the tile are zero.
  alignas(64) float b[kTile * kKc];
  // The accumulating output tile, [kTile][kTile].
  alignas(64) float c[kTile * kTile];
  // Per-column values a kernel keeps for its tile (scales, offsets).
  alignas(64) float column_scale[kTile];
  alignas(64) float column_offset[kTile];
};

// The calling thread's scratch.
TileScratch& tile_scratch() noexcept;

// The part of y one workgroup computes.
struct Tile {
  uint64_t m0;  // first row
  uint64_t n0;  // first column
  int rows;     // <= kTile
  int cols;     // <= kTile
  int strips;   // ceil(cols / kNr)
};

// The tile of workgroup (j, i) = (id.x, id.y) on a grid of `cols` columns
// by `rows` rows a workgroup (at most kTile each); false when it lies
// outside y.
inline bool locate_tile(const axrt_kernel_workgroup_t* workgroup, uint64_t M, uint64_t N,
                        uint64_t cols, uint64_t rows, Tile* tile) {
  const uint64_t m0 = static_cast<uint64_t>(workgroup->workgroup_id.y) * rows;
  const uint64_t n0 = static_cast<uint64_t>(workgroup->workgroup_id.x) * cols;
  if (workgroup->workgroup_id.z != 0 || m0 >= M || n0 >= N) return false;
  tile->m0 = m0;
  tile->n0 = n0;
  tile->rows = static_cast<int>(std::min<uint64_t>(rows, M - m0));
  tile->cols = static_cast<int>(std::min<uint64_t>(cols, N - n0));
  tile->strips = (tile->cols + kNr - 1) / kNr;
  return true;
}

// The matmuls' grid: kTile by kTile.
inline bool locate_tile(const axrt_kernel_workgroup_t* workgroup, uint64_t M, uint64_t N,
                        Tile* tile) {
  return locate_tile(workgroup, M, N, kTile, kTile, tile);
}

// A decode matmul's grid (docs/kernels.md, "Decode matmuls"): workgroup
// (j, i) has columns [8 j, 8 j + 8), rows [16 i, 16 i + 16).
constexpr uint64_t kDecodeCols = 8;
constexpr uint64_t kDecodeRows = 16;
inline bool locate_decode_tile(const axrt_kernel_workgroup_t* workgroup, uint64_t M, uint64_t N,
                               Tile* tile) {
  return locate_tile(workgroup, M, N, kDecodeCols, kDecodeRows, tile);
}

// ---------------------------------------------------------------------------
// SIMD registers as GCC/Clang generic vectors: the compiler lowers them to
// the registers of the build (one AVX register for 8 floats, one SSE or NEON
// register for 4). The hot loops use them where the loop vectoriser, left to
// itself, vectorises across the wrong loop or not at all.
// ---------------------------------------------------------------------------

template <int kLanes>
struct Simd;

template <>
struct Simd<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
  typedef uint32_t U __attribute__((vector_size(64)));
  typedef uint16_t H __attribute__((vector_size(32)));  // 16 halfwords
  typedef int16_t S __attribute__((vector_size(32)));   // 16 shorts
  typedef int8_t B __attribute__((vector_size(16)));    // 16 bytes
};

template <>
struct Simd<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int32_t I __attribute__((vector_size(32)));
  typedef uint32_t U __attribute__((vector_size(32)));
  typedef uint16_t H __attribute__((vector_size(16)));  // 8 halfwords
  typedef int16_t S __attribute__((vector_size(16)));   // 8 shorts
  typedef int8_t B __attribute__((vector_size(8)));    // 8 bytes
};

template <>
struct Simd<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef int32_t I __attribute__((vector_size(16)));
  typedef uint32_t U __attribute__((vector_size(16)));
  typedef uint16_t H __attribute__((vector_size(8)));  // 4 halfwords
  typedef int16_t S __attribute__((vector_size(8)));   // 4 shorts
  typedef int8_t B __attribute__((vector_size(4)));    // 4 bytes
};

template <class V, class T>
AXRT_CPU_INLINE V load_vector(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <class V, class T>
AXRT_CPU_INLINE void store_vector(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// ---------------------------------------------------------------------------
// Group-quantised int4 weights (quantized_matmul.cc, quantized_q8_matmul.cc)
// ---------------------------------------------------------------------------

// IEEE binary16 bit patterns (in 32-bit lanes) to binary32, exactly.
template <int kLanes>
AXRT_CPU_INLINE typename Simd<kLanes>::F halves_to_floats(typename Simd<kLanes>::U h) {
  using F = typename Simd<kLanes>::F;
  using I = typename Simd<kLanes>::I;
  using U = typename Simd<kLanes>::U;
  const U sign = (h & 0x8000u) << 16;
  const U exponent = (h >> 10) & 0x1fu;
  const U mantissa = h & 0x3ffu;
  const U normal = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  const U special = sign | 0x7f800000u | (mantissa << 13);  // infinities and NaNs
  // Zero and subnormals: mantissa x 2^-24, exact in f32.
  const F tiny = __builtin_convertvector(reinterpret_cast<I>(mantissa), F) * 0x1p-24f;
  const U subnormal = sign | reinterpret_cast<U>(tiny);
  const U bits = exponent == 0u ? subnormal : (exponent == 0x1fu ? special : normal);
  return reinterpret_cast<F>(bits);
}

// Checks the shape rules of the int4 kernels (`name` in the messages): N a
// multiple of 8 (codes packed 8 to a word), group_size positive and a
// divisor of K; with `group_multiple_of_8`, group_size a multiple of 8, and
// with `k_multiple_of_8`, K (GPTQ packs 8 rows of K to a word).
inline axrt_kernel_result_t check_int4_shape(const char* name, const MatmulInt4Args& a,
                                             bool group_multiple_of_8, bool k_multiple_of_8,
                                             const axrt_kernel_workgroup_t* workgroup) {
  if (a.N % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: N = %" PRIu64
                            " is not a multiple of 8 (int4 codes are packed 8 per u32 word)",
                            name, a.N);
  }
  if (a.group_size == 0) return invalid_argument(workgroup, "%s: group_size is 0", name);
  if (group_multiple_of_8 && a.group_size % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: group_size = %" PRIu64
                            " is not a multiple of 8 (GPTQ packs 8 rows of K per u32 word)",
                            name, a.group_size);
  }
  if (a.K % a.group_size != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64 " is not a multiple of group_size = %" PRIu64, name,
                            a.K, a.group_size);
  }
  if (k_multiple_of_8 && a.K % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64
                            " is not a multiple of 8 (GPTQ packs 8 rows of K per u32 word)",
                            name, a.K);
  }
  return AXRT_KERNEL_OK;
}

// A group's f16 scales and packed u4 zero points (8 columns a word) for a
// tile's columns.
struct Int4Group {
  const uint16_t* scales;
  const uint32_t* zeros;
};

// Room for an Int4Group's zero-padded copy.
struct Int4GroupCopy {
  alignas(64) uint16_t scales[kTile];
  alignas(64) uint32_t zeros[kTile / 8];
};

// Group g of `scales` (rows of N) and `qzeros` (rows of N / 8 words) for the
// tile's columns: where they are for a whole tile, else copied into `copy`
// with zeros past its columns, so that whole vectors can be read.
AXRT_CPU_INLINE Int4Group int4_group(const uint16_t* scales, const uint32_t* qzeros, uint64_t N,
                                     const Tile& tile, uint64_t g, Int4GroupCopy& copy) {
  Int4Group group{scales + g * N + tile.n0, qzeros + g * (N / 8) + tile.n0 / 8};
  if (tile.cols != kTile) {
    std::memset(copy.scales, 0, sizeof copy.scales);
    std::memset(copy.zeros, 0, sizeof copy.zeros);
    std::memcpy(copy.scales, group.scales, sizeof(uint16_t) * tile.cols);
    std::memcpy(copy.zeros, group.zeros, sizeof(uint32_t) * (tile.cols / 8));
    group = {copy.scales, copy.zeros};
  }
  return group;
}

// c[MR][kNr] (row stride kTile) += a rows [0, MR) (row stride lda) . b-strip
// over depth kc. The
// register tile is MR rows by two vectors; a narrow build covers the kNr
// columns in several passes. Short strips split k over kSplit accumulator
// sets so that the FMA latency does not serialise the loop.
template <int MR, int kLanes>
AXRT_CPU_INLINE void micro_kernel(const float* __restrict a, uint64_t lda,
                                  const float* __restrict b, float* __restrict c, int kc) {
  using F = typename Simd<kLanes>::F;
  constexpr int kWidth = 2 * kLanes;  // columns per pass
  constexpr int kSplit = MR == 1 ? 4 : MR == 2 ? 2 : 1;
  static_assert(kNr % kWidth == 0);
#pragma GCC unroll 2
  for (int column = 0; column < kNr; column += kWidth) {
    F acc[kSplit][MR][2];
#pragma GCC unroll 4
    for (int s = 0; s < kSplit; ++s) {
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) acc[s][m][0] = acc[s][m][1] = F{};
    }
    const float* __restrict bc = b + column;
    int k = 0;
    for (; k + kSplit <= kc; k += kSplit) {
#pragma GCC unroll 4
      for (int s = 0; s < kSplit; ++s) {
        const F b0 = load_vector<F>(bc + (k + s) * kNr);
        const F b1 = load_vector<F>(bc + (k + s) * kNr + kLanes);
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) {
          const float am = a[m * lda + k + s];
          acc[s][m][0] += am * b0;
          acc[s][m][1] += am * b1;
        }
      }
    }
    for (; k < kc; ++k) {
      const F b0 = load_vector<F>(bc + k * kNr);
      const F b1 = load_vector<F>(bc + k * kNr + kLanes);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        const float am = a[m * lda + k];
        acc[0][m][0] += am * b0;
        acc[0][m][1] += am * b1;
      }
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
      for (int s = 1; s < kSplit; ++s) {
        acc[0][m][0] += acc[s][m][0];
        acc[0][m][1] += acc[s][m][1];
      }
      float* row = c + m * kTile + column;
      store_vector(row, load_vector<F>(row) + acc[0][m][0]);
      store_vector(row + kLanes, load_vector<F>(row + kLanes) + acc[0][m][1]);
    }
  }
}

// Copies rows [0, rows) x depth [0, kc) of x (row stride ldx) into
// TileScratch::a, a register at a time (a memcpy of a run-time length
// becomes `rep movs`, slow to start for rows this short).
template <int kLanes>
AXRT_CPU_INLINE void pack_x_panel(const float* __restrict x, uint64_t ldx, int rows, int kc,
                                  float* __restrict a) {
  using F = typename Simd<kLanes>::F;
  for (int m = 0; m < rows; ++m) {
    const float* __restrict src = x + static_cast<uint64_t>(m) * ldx;
    float* __restrict dst = a + m * kKc;
    int k = 0;
    for (; k + kLanes <= kc; k += kLanes) store_vector(dst + k, load_vector<F>(src + k));
    for (; k < kc; ++k) dst[k] = src[k];
  }
}

// c += a-panel . b-panel for the whole tile. Each b strip (kc x kNr, at most
// 16 KiB) stays in L1 while the a strips stream past it.
template <int kLanes>
AXRT_CPU_INLINE void multiply_panel_body(const float* a, uint64_t lda, const float* b, float* c,
                                         int rows, int strips, int kc) {
  static_assert(kMr == 6, "multiply_panel's switch lists the strip heights");
  for (int j = 0; j < strips; ++j) {
    const float* b_strip = b + j * kKc * kNr;
    for (int m0 = 0; m0 < rows; m0 += kMr) {
      const float* a_strip = a + m0 * lda;
      float* c_tile = c + m0 * kTile + j * kNr;
      switch (std::min(kMr, rows - m0)) {
        case 6: micro_kernel<6, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
        case 5: micro_kernel<5, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
        case 4: micro_kernel<4, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
        case 3: micro_kernel<3, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
        case 2: micro_kernel<2, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
        default: micro_kernel<1, kLanes>(a_strip, lda, b_strip, c_tile, kc); break;
      }
    }
  }
}

// multiply_panel_body, compiled once per build in gemm.cc. Kept out of line
// so that the register tile is allocated on its own and not next to a
// packer's loop-invariant constants (which made GCC spill an accumulator).
void multiply_panel_baseline(const float* a, uint64_t lda, const float* b, float* c, int rows,
                             int strips, int kc) noexcept;
#if AXRT_CPU_HAVE_AVX2_BUILD
[[gnu::target("avx2,fma")]] void multiply_panel_avx2(const float* a, uint64_t lda,
                                                     const float* b, float* c, int rows,
                                                     int strips, int kc) noexcept;
// The AVX-512 build: register tiles of up to 6 rows x 4 strips (shape 0) or
// 12 rows x 2 strips (shape 1), 24 accumulators either way.
[[gnu::target(AXRT_CPU_AVX512_TARGET)]] void multiply_panel_avx512(const float* a, uint64_t lda,
                                                                   const float* b, float* c,
                                                                   int rows, int strips, int kc,
                                                                   int shape) noexcept;
#endif

template <int kLanes>
AXRT_CPU_INLINE void multiply_panel(const float* a, uint64_t lda, const float* b, float* c,
                                    int rows, int strips, int kc, const GemmBlocking& blocking) {
#if AXRT_CPU_HAVE_AVX2_BUILD
  if constexpr (kLanes == 16) {
    multiply_panel_avx512(a, lda, b, c, rows, strips, kc, blocking.shape);
    return;
  }
  if constexpr (kLanes == 8) {
    multiply_panel_avx2(a, lda, b, c, rows, strips, kc);
    return;
  }
#endif
  static_assert(kLanes == 4 || AXRT_CPU_HAVE_AVX2_BUILD);
  (void)blocking;
  multiply_panel_baseline(a, lda, b, c, rows, strips, kc);
}

// Accumulates x[m0 .. m0 + rows, 0 .. K) . W[0 .. K, n0 .. n0 + cols) into
// scratch.c. `pack_w.template pack<kLanes>(k0, kc, b)` writes
// W[k0 .. k0 + kc, tile columns] into b in the TileScratch::b layout, zero
// past the tile's columns.
// A packer may also offer `prefetch(k_begin, k_end)`, which starts fetching
// W rows [k_begin, k_end) into L2: the tile engine spreads the next panel's
// rows over the multiplication of the current one.
template <class PackW>
concept PrefetchingPacker = requires(const PackW& p) { p.prefetch(uint64_t{0}, uint64_t{0}); };

template <int kLanes, class PackW>
AXRT_CPU_INLINE void accumulate_tile(const float* x, uint64_t K, const Tile& tile,
                                     const PackW& pack_w, TileScratch& scratch,
                                     const GemmBlocking& blocking) {
  std::memset(scratch.c, 0, sizeof(float) * tile.rows * kTile);
  const uint64_t depth = static_cast<uint64_t>(std::clamp(blocking.kc, 8, kKc));
  // Rows per part of the multiplication: a multiple of every register
  // tile's height.
  constexpr int kPartRows = 24;
  const int parts = (tile.rows + kPartRows - 1) / kPartRows;
  for (uint64_t k0 = 0; k0 < K; k0 += depth) {
    const int kc = static_cast<int>(std::min<uint64_t>(depth, K - k0));
    const float* a = x + tile.m0 * K + k0;
    uint64_t lda = K;
    if (blocking.pack_x != 0) {
      pack_x_panel<kLanes>(a, K, tile.rows, kc, scratch.a);
      a = scratch.a;
      lda = kKc;
    }
    pack_w.template pack<kLanes>(k0, kc, scratch.b);
    const uint64_t next = k0 + static_cast<uint64_t>(kc);
    const uint64_t next_end = std::min<uint64_t>(K, next + depth);
    for (int part = 0; part < parts; ++part) {
      if constexpr (PrefetchingPacker<PackW>) {
        if (next < K) {
          const uint64_t per_part = (next_end - next + parts - 1) / parts;
          const uint64_t from = next + per_part * part;
          pack_w.prefetch(from, std::min(next_end, from + per_part));
        }
      }
      const int m0 = part * kPartRows;
      multiply_panel<kLanes>(a + m0 * lda, lda, scratch.b, scratch.c + m0 * kTile,
                             std::min(kPartRows, tile.rows - m0), tile.strips, kc, blocking);
    }
  }
}

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

// y tile = scratch.c (x column_scale when `scaled`) + bias.
AXRT_CPU_INLINE void store_tile(const Tile& tile, const TileScratch& scratch, const float* bias,
                                float* y, uint64_t N, bool scaled) {
  const float* __restrict b = bias + tile.n0;
  const float* __restrict scale = scratch.column_scale;
  for (int m = 0; m < tile.rows; ++m) {
    const float* __restrict c = scratch.c + m * kTile;
    float* __restrict out = y + (tile.m0 + m) * N + tile.n0;
    if (scaled) {
      for (int n = 0; n < tile.cols; ++n) out[n] = c[n] * scale[n] + b[n];
    } else {
      for (int n = 0; n < tile.cols; ++n) out[n] = c[n] + b[n];
    }
  }
}

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_GEMM_H_
