// x to int8 codes per group, as the int8-activation matmuls quantize it
// (docs/kernels.md, "Int8 activations"): per group of G values a = max |x|,
// xq = rint(x * (127 / a)) (half to even, the lone product never
// contracted), s_x = a / 127, and Z = the codes' sum. Every build writes the
// same codes: the generic vectors of any width (kLanes 4, 8, 16) and the
// AVX-512 form, whose rounding and narrowing are one instruction each.
//
// The codes go out either in order or, for GPTQ's int4 words, each run of 8
// in the order 0, 2, 4, 6, 1, 3, 5, 7 (the even nibbles of a word, then the
// odd ones): `kNibbleOrder`.
#ifndef AXRT_KERNELS_CPU_Q8_ACTIVATIONS_H_
#define AXRT_KERNELS_CPU_Q8_ACTIVATIONS_H_

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "kernels/cpu/gemm.h"

#if AXRT_CPU_HAVE_AVX2_BUILD
#include <immintrin.h>
#endif

namespace axrt::kernels::cpu::q8 {

// Adding and subtracting 1.5 x 2^23 rounds |v| < 2^22 to an integer, ties to
// even, as rintf does in the default rounding mode.
inline constexpr float kRoundingBias = 0x1.8p23f;

typedef int8_t Bytes8 __attribute__((vector_size(8)));
typedef int8_t Bytes16 __attribute__((vector_size(16)));
typedef int8_t Bytes32 __attribute__((vector_size(32)));
typedef int8_t Bytes64 __attribute__((vector_size(64)));

// Codes of x[0, W) (W = 8 or 16) into dst; returns them as 32-bit lanes.
template <int W, bool kNibbleOrder>
AXRT_CPU_INLINE typename Simd<W>::I quantize_run(const float* __restrict x, float inv,
                                                 int8_t* __restrict dst) {
  using F = typename Simd<W>::F;
  using I = typename Simd<W>::I;
  F v = load_vector<F>(x) * inv;  // a lone product: the includers build without contraction
  v = (v + kRoundingBias) - kRoundingBias;
  const I q = __builtin_convertvector(v, I);
  // The low byte of each lane (|q| <= 127), picked by a byte shuffle: GCC
  // narrows a vector conversion to 8 bits an element at a time.
  if constexpr (W == 16 && kNibbleOrder) {
    const auto b = reinterpret_cast<Bytes64>(q);
    store_vector(dst, Bytes16{__builtin_shufflevector(b, b, 0, 8, 16, 24, 4, 12, 20, 28, 32, 40, 48,
                                                      56, 36, 44, 52, 60)});
  } else if constexpr (W == 16) {
    const auto b = reinterpret_cast<Bytes64>(q);
    store_vector(dst, Bytes16{__builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28, 32, 36,
                                                      40, 44, 48, 52, 56, 60)});
  } else if constexpr (kNibbleOrder) {
    const auto b = reinterpret_cast<Bytes32>(q);
    store_vector(dst, Bytes8{__builtin_shufflevector(b, b, 0, 8, 16, 24, 4, 12, 20, 28)});
  } else {
    const auto b = reinterpret_cast<Bytes32>(q);
    store_vector(dst, Bytes8{__builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28)});
  }
  return q;
}

// How a group whose max |x| has the bits `a_bits` is quantized.
struct GroupScale {
  bool coded;   // false: every code is 0
  float inv;    // 127 / a
  float scale;  // s_x
};

AXRT_CPU_INLINE GroupScale group_scale(uint32_t a_bits) {
  const float a = std::bit_cast<float>(a_bits);
  const float inv = 127.0f / a;
  if (a_bits == 0 || a_bits >= 0x7f800000u || inv > std::numeric_limits<float>::max()) {
    // a = 0 as the contract says; a below 127 / FLT_MAX (where 127 / a
    // overflows) likewise; Inf or NaN in the group makes the row's y NaN.
    return {false, 0.0f, a_bits < 0x7f800000u ? 0.0f : std::numeric_limits<float>::quiet_NaN()};
  }
  return {true, inv, a / 127.0f};
}

// The codes of the G values at x into dst, their scale s_x and sum Z. G is
// a multiple of 8.
template <int kLanes, bool kNibbleOrder>
AXRT_CPU_INLINE void quantize_group(const float* __restrict x, uint64_t G, int8_t* __restrict dst,
                                    float* scale, int32_t* sum) {
  using U = typename Simd<kLanes>::U;
  // max |x| as the bits of |x|: unsigned order is float order for |x|, with
  // NaN above infinity, and any order of the maxima gives the same answer.
  U top{};
  uint64_t k = 0;
  for (; k + kLanes <= G; k += kLanes) {
    const U bits = load_vector<U>(x + k) & 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  uint32_t a_bits = 0;
  for (int lane = 0; lane < kLanes; ++lane) a_bits = std::max<uint32_t>(a_bits, top[lane]);
  for (; k < G; ++k) {
    a_bits = std::max<uint32_t>(a_bits, std::bit_cast<uint32_t>(x[k]) & 0x7fffffffu);
  }
  const GroupScale group = group_scale(a_bits);
  *scale = group.scale;
  if (!group.coded) {
    std::memset(dst, 0, G);
    *sum = 0;
    return;
  }
  constexpr int W = kLanes == 16 ? 16 : 8;
  typename Simd<W>::I lanes{};
  k = 0;
  for (; k + W <= G; k += W) lanes += quantize_run<W, kNibbleOrder>(x + k, group.inv, dst + k);
  int32_t total = 0;
  if constexpr (W == 16) {
    if (k < G) {  // G is a multiple of 8
      const typename Simd<8>::I tail = quantize_run<8, kNibbleOrder>(x + k, group.inv, dst + k);
      for (int lane = 0; lane < 8; ++lane) total += tail[lane];
    }
  }
  for (int lane = 0; lane < W; ++lane) total += lanes[lane];
  *sum = total;
}

#if AXRT_CPU_HAVE_AVX2_BUILD

#define AXRT_CPU_AVX512_VNNI_TARGET AXRT_CPU_AVX512_TARGET ",avx512vnni"

inline bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
  }();
  return has;
}

// The unsigned maximum (kMax) or the sum of the 16 lanes.
template <bool kMax>
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] inline int32_t reduce_x16(
    __m512i v) {
  const __m256i a = _mm512_maskz_extracti64x4_epi64(0xf, v, 0);
  const __m256i b = _mm512_maskz_extracti64x4_epi64(0xf, v, 1);
  const __m256i half = kMax ? _mm256_max_epu32(a, b) : _mm256_add_epi32(a, b);
  const __m128i c = _mm256_castsi256_si128(half);
  const __m128i d = _mm256_extracti128_si256(half, 1);
  __m128i r = kMax ? _mm_max_epu32(c, d) : _mm_add_epi32(c, d);
  __m128i t = _mm_shuffle_epi32(r, 0x4e);
  r = kMax ? _mm_max_epu32(r, t) : _mm_add_epi32(r, t);
  t = _mm_shuffle_epi32(r, 0xb1);
  r = kMax ? _mm_max_epu32(r, t) : _mm_add_epi32(r, t);
  return _mm_cvtsi128_si32(r);
}

// The codes of 16 values, in `order`; lanes += the codes.
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] inline __m128i codes_x16(
    __m512 values, __m512 inv, __m128i order, __m512i& lanes) {
  const __m512i codes = _mm512_maskz_cvt_roundps_epi32(
      0xffff, _mm512_mul_ps(values, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  lanes = _mm512_add_epi32(lanes, codes);
  return _mm_shuffle_epi8(_mm512_maskz_cvtepi32_epi8(0xffff, codes), order);
}

// quantize_group with the rounding and narrowing in one instruction each:
// vcvtps2dq rounding to nearest even, as the generic code's rounding bias
// in the default rounding mode; vpmovdb; vpshufb into the order. The
// zero-masked forms: GCC warns about the unmasked ones' merge operand.
template <bool kNibbleOrder>
[[gnu::always_inline, gnu::target(AXRT_CPU_AVX512_VNNI_TARGET)]] inline void quantize_group_x16(
    const float* x, uint64_t G, int8_t* dst, float* scale, int32_t* sum) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m128i order = kNibbleOrder
                            ? _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)
                            : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // G is a multiple of 8: a tail of 8 reads through a mask.
  const __mmask16 tail = G % 16 != 0 ? 0xff : 0;
  const uint64_t whole = G / 16 * 16;
  __m512i top = _mm512_setzero_si512();
  for (uint64_t k = 0; k < whole; k += 16) {
    top = _mm512_maskz_max_epu32(0xffff, top,
                                 _mm512_and_si512(_mm512_loadu_si512(x + k), magnitude));
  }
  top = _mm512_maskz_max_epu32(
      0xffff, top, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, x + whole), magnitude));
  const GroupScale group = group_scale(static_cast<uint32_t>(reduce_x16<true>(top)));
  *scale = group.scale;
  if (!group.coded) {
    std::memset(dst, 0, G);
    *sum = 0;
    return;
  }
  const __m512 inv = _mm512_set1_ps(group.inv);
  __m512i lanes = _mm512_setzero_si512();
  for (uint64_t k = 0; k < whole; k += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                     codes_x16(_mm512_loadu_ps(x + k), inv, order, lanes));
  }
  if (tail != 0) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + whole),
                     codes_x16(_mm512_maskz_loadu_ps(tail, x + whole), inv, order, lanes));
  }
  *sum = reduce_x16<false>(lanes);
}

#endif  // AXRT_CPU_HAVE_AVX2_BUILD

// Grows a thread's quantized rows (`codes`, `scale`, `sum` and `kept`
// vectors, as the int8-activation matmuls keep them) for a tile of `rows`
// rows of K values in groups of G, keeping copies of x for tiles of at most
// `kept_rows` rows; RESOURCE_EXHAUSTED with a message naming `kernel` when
// memory runs out.
template <class Rows>
axrt_kernel_result_t reserve_rows(Rows& q, int rows, uint64_t K, uint64_t G, int kept_rows,
                                  const char* kernel,
                                  const axrt_kernel_workgroup_t* workgroup) noexcept {
  const uint64_t codes = static_cast<uint64_t>(rows) * K;
  const uint64_t groups = static_cast<uint64_t>(rows) * (K / G);
  const uint64_t kept = rows <= kept_rows ? codes : 0;
  if (q.codes.size() >= codes && q.scale.size() >= groups && q.kept.size() >= kept) {
    return AXRT_KERNEL_OK;
  }
  try {
    q.codes.resize(std::max<uint64_t>(codes, q.codes.size()));
    q.scale.resize(std::max<uint64_t>(groups, q.scale.size()));
    q.sum.resize(q.scale.size());
    q.kept.resize(std::max<uint64_t>(kept, q.kept.size()));
  } catch (const std::bad_alloc&) {
    if (workgroup->error_message != nullptr && workgroup->error_message_capacity > 0) {
      std::snprintf(workgroup->error_message, workgroup->error_message_capacity,
                    "%s: no memory for the %" PRIu64 " bytes of a tile's quantized x", kernel,
                    codes);
    }
    return AXRT_STATUS_CODE_RESOURCE_EXHAUSTED;
  }
  return AXRT_KERNEL_OK;
}

}  // namespace axrt::kernels::cpu::q8

#endif  // AXRT_KERNELS_CPU_Q8_ACTIVATIONS_H_
