// IEEE binary16 and bfloat16 to and from binary32, without relying on the
// host's conversion instructions. Narrowing rounds to nearest, ties to even;
// NaNs stay NaNs (quiet), infinities and signed zeros are kept.
#ifndef AXRT_BASE_FLOAT16_H_
#define AXRT_BASE_FLOAT16_H_

#include <bit>
#include <cstdint>

namespace axrt {

inline float half_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  const uint32_t bits = exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)
                                         : sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half(float f) noexcept {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN
    return magnitude == 0x7f800000u ? static_cast<uint16_t>(sign | 0x7c00u)
                                    : static_cast<uint16_t>(sign | 0x7e00u);
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal, in units of 2^-24.
    // The float's value times 2^24, rounded to nearest even.
    const float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    const uint32_t whole = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(whole);
    uint32_t units = whole;
    if (rest > 0.5f || (rest == 0.5f && (whole & 1u) != 0)) ++units;
    return static_cast<uint16_t>(sign | units);
  }
  // Normal: re-bias the exponent, round the 13 dropped mantissa bits.
  const uint32_t rebased = magnitude - ((127u - 15u) << 23);
  const uint32_t round = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + round) >> 13));
}

inline float bfloat16_to_float(uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bfloat16(float f) noexcept {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t round = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + round) >> 16);
}

}  // namespace axrt

#endif  // AXRT_BASE_FLOAT16_H_
