// The paged KV cache's element types (docs/kernels.md, "KV cache"): how a
// key or value row of head_dim elements is stored, written from f32 and read
// back as f32, shared by the cache write (transformer.cc) and attention
// (attention.cc).
//
// The cache is [L, 2, NB, KVH, <run>]: for each layer, keys then values, each
// block of each KV head one run of block_size rows:
//   f32:       rows of D floats;
//   bf16:      rows of D bf16 (round to nearest even);
//   fp8_e4m3:  block_size rows of D e4m3fn codes, then block_size f32
//              scales, one per row: a row's scale is its largest magnitude
//              / 448 (the largest e4m3fn), its codes round(x / scale) to
//              nearest even; a row of zeros has scale 0 and codes 0. D must
//              be a multiple of 16.
#ifndef AXRT_KERNELS_CPU_KV_CACHE_H_
#define AXRT_KERNELS_CPU_KV_CACHE_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/transformer_simd.h"

namespace axrt::kernels::cpu::kv {

enum class Kind { kF32, kBf16, kFp8E4m3 };

constexpr float kFp8Max = 448.0f;  // the largest finite e4m3fn
constexpr uint64_t kFp8HeadDimMultiple = 16;

// Bytes of one stored element.
constexpr uint64_t element_bytes(Kind kind) {
  return kind == Kind::kF32 ? 4 : kind == Kind::kBf16 ? 2 : 1;
}

// Bytes of one block of one KV head: block_size rows of head_dim elements
// (and, for fp8, a 4-byte scale a row).
constexpr uint64_t run_bytes(Kind kind, uint64_t block_size, uint64_t head_dim) {
  return block_size * (head_dim * element_bytes(kind) + (kind == Kind::kFp8E4m3 ? 4 : 0));
}

// Where (layer, plane: 0 keys / 1 values, block, KV head) starts.
inline uint64_t run_offset(Kind kind, uint64_t layer, uint64_t plane, uint64_t block,
                           uint64_t num_blocks, uint64_t kv_heads, uint64_t kv_head,
                           uint64_t block_size, uint64_t head_dim) {
  return (((layer * 2 + plane) * num_blocks + block) * kv_heads + kv_head) *
         run_bytes(kind, block_size, head_dim);
}

// f32 -> bf16, rounding to nearest even; NaN stays NaN.
inline uint16_t bf16_from_float(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

// |x| <= 448 (or NaN) -> e4m3fn, rounding to nearest even.
inline uint8_t fp8_e4m3_from_float(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  if (a >= kFp8Max) return sign | 0x7e;
  if (a < 0x1p-6f) {
    // Subnormal codes m 2^-9, m in [0, 8]; 8 is the smallest normal's code.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Round the f32 to 3 mantissa bits (a carry moves up the exponent), then
  // re-bias the exponent from 127 to 7.
  const uint32_t magnitude = bits & 0x7fffffff;
  const uint32_t rounded = (magnitude + 0x7ffff + ((magnitude >> 20) & 1)) >> 20;
  const uint32_t code = rounded - ((127 - 7) << 3);
  return sign | static_cast<uint8_t>(code > 0x7e ? 0x7e : code);
}

// Writes one row of D floats as `kind` at `row` (fp8: codes at `row`, the
// scale at `scale_at`).
inline void write_row(Kind kind, const float* src, uint64_t D, uint8_t* row, uint8_t* scale_at) {
  switch (kind) {
    case Kind::kF32:
      std::memcpy(row, src, D * 4);
      return;
    case Kind::kBf16:
      for (uint64_t d = 0; d < D; ++d) {
        const uint16_t h = bf16_from_float(src[d]);
        std::memcpy(row + 2 * d, &h, 2);
      }
      return;
    case Kind::kFp8E4m3: {
      float amax = 0.0f;
      bool nan = false;
      for (uint64_t d = 0; d < D; ++d) {
        nan |= std::isnan(src[d]);
        amax = std::fmax(amax, std::fabs(src[d]));
      }
      // A NaN makes the whole row NaN when read, as an f32 cache would carry it.
      const float scale = nan ? std::numeric_limits<float>::quiet_NaN() : amax / kFp8Max;
      for (uint64_t d = 0; d < D; ++d) {
        row[d] = scale == 0.0f ? 0 : fp8_e4m3_from_float(src[d] / scale);
      }
      std::memcpy(scale_at, &scale, 4);
      return;
    }
  }
}

// Reads `rows` consecutive rows of a run as f32 into out[rows][D]: bf16
// widened, fp8 codes decoded exactly and multiplied by their row's scale.
// Vectors of kLanes 8- and 16-bit integers, beside Floats<kLanes>.
template <int kLanes>
struct Narrow {
  typedef uint8_t B __attribute__((vector_size(kLanes)));
  typedef uint16_t H __attribute__((vector_size(2 * kLanes)));
};

// Reads `rows` consecutive rows of a run as f32 into out[rows][D]: bf16
// widened, fp8 codes decoded exactly and multiplied by their row's scale.
template <int kLanes, Kind kKind>
AXRT_CPU_INLINE void read_rows(const uint8_t* __restrict run, uint64_t first, int rows,
                               uint64_t block_size, uint64_t D, float* __restrict out) {
  using F = typename transformer::Floats<kLanes>::F;
  using I = typename transformer::Floats<kLanes>::I;
  using H = typename Narrow<kLanes>::H;
  if constexpr (kKind == Kind::kBf16) {
    const uint8_t* src = run + first * D * 2;
    const uint64_t n = static_cast<uint64_t>(rows) * D;
    uint64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      H h;
      __builtin_memcpy(&h, src + 2 * i, sizeof h);
      const I wide = __builtin_convertvector(h, I) << 16;
      __builtin_memcpy(out + i, &wide, sizeof wide);
    }
    for (; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
  } else if constexpr (kKind == Kind::kFp8E4m3) {
    using B = typename Narrow<kLanes>::B;
    const uint8_t* codes = run + first * D;
    const uint8_t* scales = run + block_size * D + first * 4;
    for (int r = 0; r < rows; ++r) {
      float scale;
      std::memcpy(&scale, scales + 4 * r, 4);
      const F s = transformer::splat<F>(scale);
      const uint8_t* row = codes + r * D;
      float* o = out + r * D;
      // D is a multiple of 16, so of every kLanes.
      for (uint64_t d = 0; d < D; d += kLanes) {
        B b;
        __builtin_memcpy(&b, row + d, sizeof b);
        // Through 16 bits: GCC makes scalar code of a direct 8-to-32-bit
        // conversion.
        const I c = __builtin_convertvector(__builtin_convertvector(b, H), I);
        const I magnitude = c & 0x7f;
        // Normal codes: exponent and mantissa moved into an f32's fields,
        // the exponent re-biased from 7 to 127; subnormal ones m 2^-9.
        const I normal = (magnitude << 20) + (120 << 23);
        const F subnormal = __builtin_convertvector(c & 7, F) * transformer::splat<F>(0x1p-9f);
        I subnormal_bits;
        __builtin_memcpy(&subnormal_bits, &subnormal, sizeof subnormal_bits);
        const I bits = ((magnitude >> 3) == 0 ? subnormal_bits : normal) | ((c & 0x80) << 24);
        F value;
        __builtin_memcpy(&value, &bits, sizeof value);
        transformer::store(o + d, value * s);
      }
    }
  }
}

}  // namespace axrt::kernels::cpu::kv

#endif  // AXRT_KERNELS_CPU_KV_CACHE_H_
