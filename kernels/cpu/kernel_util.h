// Internal helpers of the built-in CPU kernels: argument-rule failures,
// fp16 (base/float16.h) and fp8 e4m3fn decoding, and the choice between the AVX2 + FMA and
// the baseline build of a hot loop.
#ifndef AXRT_KERNELS_CPU_KERNEL_UTIL_H_
#define AXRT_KERNELS_CPU_KERNEL_UTIL_H_

#include <array>
#include <atomic>
#include <bit>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "axrt/kernel_abi.h"
#include "base/float16.h"

namespace axrt::kernels::cpu {

// axrt_status_code_t numbers a kernel returns.
inline constexpr axrt_kernel_result_t kStatusInvalidArgument = 3;

// Writes `format` into the workgroup's error message (truncated to its
// capacity) and returns INVALID_ARGUMENT.
[[gnu::format(printf, 2, 3)]] inline axrt_kernel_result_t invalid_argument(
    const axrt_kernel_workgroup_t* workgroup, const char* format, ...) {
  if (workgroup != nullptr && workgroup->error_message != nullptr &&
      workgroup->error_message_capacity > 0) {
    va_list list;
    va_start(list, format);
    std::vsnprintf(workgroup->error_message, workgroup->error_message_capacity, format, list);
    va_end(list);
  }
  return kStatusInvalidArgument;
}

// IEEE binary16 to binary32 (base/float16.h), as the kernels call it.
using ::axrt::half_to_float;

namespace detail {

constexpr float pow2(int e) {
  float v = 1.0f;
  for (; e > 0; --e) v *= 2.0f;
  for (; e < 0; ++e) v *= 0.5f;
  return v;
}

// OCP e4m3fn: bias 7, subnormals, no infinities, S.1111.111 is NaN.
constexpr std::array<float, 256> make_e4m3fn_table() {
  std::array<float, 256> table{};
  for (int code = 0; code < 256; ++code) {
    const int exponent = (code >> 3) & 0xf;
    const int mantissa = code & 0x7;
    float magnitude;
    if (exponent == 0xf && mantissa == 0x7) {
      magnitude = std::numeric_limits<float>::quiet_NaN();
    } else if (exponent == 0) {
      magnitude = static_cast<float>(mantissa) * pow2(-9);
    } else {
      magnitude = static_cast<float>(8 + mantissa) * pow2(exponent - 10);
    }
    table[code] = (code & 0x80) != 0 ? -magnitude : magnitude;
  }
  return table;
}

}  // namespace detail

// Every e4m3fn code's value.
inline constexpr std::array<float, 256> kE4m3fnValues = detail::make_e4m3fn_table();

// ---------------------------------------------------------------------------
// Instruction-set dispatch
//
// A hot loop is written once as `Body::run<kLanes>`, a static member
// function template marked AXRT_CPU_INLINE (as is everything it calls), and
// started through run_dispatched<Body>(args...). On x86-64 the body is
// compiled twice, for the baseline (SSE2, kLanes = 4 floats per register)
// and for AVX2 + FMA (kLanes = 8), and the call picks the build the CPU can
// run; elsewhere there is only the baseline build (kLanes = 4: NEON and
// similar). Nothing else in the tree is compiled for more than the baseline.
// ---------------------------------------------------------------------------

#define AXRT_CPU_INLINE [[gnu::always_inline]] inline

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AXRT_CPU_HAVE_AVX2_BUILD 1
#else
#define AXRT_CPU_HAVE_AVX2_BUILD 0
#endif

// Tests set this to run the baseline build on a CPU that has AVX2.
inline std::atomic<bool> force_baseline_isa{false};

inline bool cpu_has_avx2_fma() {
#if AXRT_CPU_HAVE_AVX2_BUILD
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

// The name of the build run_dispatched picks now ("avx2+fma" or "baseline").
inline const char* dispatched_isa_name() {
  return cpu_has_avx2_fma() && !force_baseline_isa.load(std::memory_order_relaxed) ? "avx2+fma"
                                                                                  : "baseline";
}

template <class Body, class... Args>
[[gnu::noinline]] void run_baseline(Args... args) {
  Body::template run<4>(args...);
}

#if AXRT_CPU_HAVE_AVX2_BUILD
template <class Body, class... Args>
[[gnu::noinline, gnu::target("avx2,fma")]] void run_avx2(Args... args) {
  Body::template run<8>(args...);
}
#endif

template <class Body, class... Args>
inline void run_dispatched(Args... args) {
#if AXRT_CPU_HAVE_AVX2_BUILD
  if (cpu_has_avx2_fma() && !force_baseline_isa.load(std::memory_order_relaxed)) {
    run_avx2<Body>(args...);
    return;
  }
#endif
  run_baseline<Body>(args...);
}

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_KERNEL_UTIL_H_
