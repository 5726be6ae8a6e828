// SIMD for the transformer kernels (transformer.cc, attention.cc,
// sampling.cc): vectors of floats and doubles as GCC/Clang generic vectors,
// exp over them, horizontal reductions, and the run-time choice of the widest
// build the CPU runs.
//
// A kernel's body is written once as `Body::run<kLanes>(...)`, a static
// member function template marked AXRT_CPU_INLINE like everything it calls,
// and started with run_transformer_isa<Body>(...). On x86-64 the body is
// compiled three times: baseline (SSE2, kLanes = 4 floats), AVX2 + FMA
// (kLanes = 8) and AVX-512 (kLanes = 16); elsewhere only the baseline build
// exists (NEON and similar take 4 floats a register too).
#ifndef AXRT_KERNELS_CPU_TRANSFORMER_SIMD_H_
#define AXRT_KERNELS_CPU_TRANSFORMER_SIMD_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul_isa.h"

namespace axrt::kernels::cpu::transformer {

// ---------------------------------------------------------------------------
// Instruction sets
// ---------------------------------------------------------------------------

// The builds are the matmuls' (matmul_isa.h): one check of the CPU, one
// reading of AXRT_CPU_ISA.
using Isa = MatmulIsa;

// The widest build run_transformer_isa may pick; tests lower it to run the
// narrower builds on a CPU that has more.
inline std::atomic<int> transformer_isa_limit{static_cast<int>(Isa::kAvx512)};

// The widest build this CPU runs.
inline Isa transformer_cpu_isa() { return matmul_cpu_isa(); }

// The build run_transformer_isa picks now: the widest the CPU runs, capped
// by the environment variable AXRT_CPU_ISA ("baseline", "avx2";
// docs/kernels.md), by force_baseline_isa (kernel_util.h) and by
// transformer_isa_limit.
inline Isa transformer_isa() {
  if (force_baseline_isa.load(std::memory_order_relaxed)) return Isa::kBaseline;
  int isa = static_cast<int>(transformer_cpu_isa());
  isa = std::min(isa, static_cast<int>(matmul_environment_isa_limit()));
  isa = std::min(isa, transformer_isa_limit.load(std::memory_order_relaxed));
  return static_cast<Isa>(isa);
}

inline const char* transformer_isa_name() {
  switch (transformer_isa()) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2+fma";
    default:
      return "baseline";
  }
}

template <class Body, class... Args>
[[gnu::noinline]] auto run_transformer_baseline(Args... args) {
  return Body::template run<4>(args...);
}

#if AXRT_CPU_HAVE_AVX2_BUILD
template <class Body, class... Args>
[[gnu::noinline, gnu::target("avx2,fma")]] auto run_transformer_avx2(Args... args) {
  return Body::template run<8>(args...);
}

template <class Body, class... Args>
[[gnu::noinline, gnu::target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]] auto
run_transformer_avx512(Args... args) {
  return Body::template run<16>(args...);
}
#endif

template <class Body, class... Args>
inline auto run_transformer_isa(Args... args) {
#if AXRT_CPU_HAVE_AVX2_BUILD
  switch (transformer_isa()) {
    case Isa::kAvx512:
      return run_transformer_avx512<Body>(args...);
    case Isa::kAvx2:
      return run_transformer_avx2<Body>(args...);
    default:
      break;
  }
#endif
  return run_transformer_baseline<Body>(args...);
}

// ---------------------------------------------------------------------------
// Vectors: Floats<kLanes>::F is kLanes floats, ::D as many doubles as fill
// the same width. The compiler lowers them to the registers of the build they
// are compiled into.
// ---------------------------------------------------------------------------

template <int kLanes>
struct Floats {
  typedef float F __attribute__((vector_size(4 * kLanes)));
  typedef int32_t I __attribute__((vector_size(4 * kLanes)));
  // Half as many doubles in the same register width.
  typedef double D __attribute__((vector_size(4 * kLanes)));
  typedef int64_t L __attribute__((vector_size(4 * kLanes)));
};

template <class V>
using Lane = std::remove_cvref_t<decltype(V{}[0])>;

template <class V, class T>
AXRT_CPU_INLINE V splat(T value) {
  return V{} + static_cast<Lane<V>>(value);
}

template <class V, class T>
AXRT_CPU_INLINE V load(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <class T, class V>
AXRT_CPU_INLINE void store(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// The sum of the lanes, halving the vector each step.
template <class V>
AXRT_CPU_INLINE auto hsum(V v) {
  using T = decltype(v[0] + v[0]);
  if constexpr (sizeof(V) == 2 * sizeof(T)) {
    return v[0] + v[1];
  } else {
    typedef T Half __attribute__((vector_size(sizeof(V) / 2)));
    Half lo, hi;
    __builtin_memcpy(&lo, &v, sizeof lo);
    __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return hsum(lo + hi);
  }
}

template <class V>
AXRT_CPU_INLINE auto hmax(V v) {
  using T = decltype(v[0] + v[0]);
  if constexpr (sizeof(V) == 2 * sizeof(T)) {
    return v[0] > v[1] ? v[0] : v[1];
  } else {
    typedef T Half __attribute__((vector_size(sizeof(V) / 2)));
    Half lo, hi;
    __builtin_memcpy(&lo, &v, sizeof lo);
    __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return hmax(lo > hi ? lo : hi);
  }
}

// exp of every lane of a float vector: x = n ln 2 + r with |r| <= ln 2 / 2,
// exp(r) by its Taylor polynomial to r^7 (relative error below 1e-8 on that
// interval), times 2^n built in the exponent bits. Within 2 ulp of exp for
// x in [-87, 88]; 0 below -87 (and for -inf); 88 and above give exp(88).
// NaN stays NaN.
template <int kLanes>
AXRT_CPU_INLINE typename Floats<kLanes>::F exp_floats(typename Floats<kLanes>::F x) {
  using F = typename Floats<kLanes>::F;
  using I = typename Floats<kLanes>::I;
  const F lo = splat<F>(-87.0f);
  const F hi = splat<F>(88.0f);
  const F xc = x < lo ? lo : (x > hi ? hi : x);
  // Adding 1.5 x 2^23 rounds x log2(e) to an integer, which lands in the low
  // mantissa bits.
  const F shifter = splat<F>(12582912.0f);
  const F t = xc * splat<F>(1.44269504088896341f) + shifter;
  const F n = t - shifter;
  const F r = xc - n * splat<F>(0.693359375f) - n * splat<F>(-2.12194440e-4f);
  F p = splat<F>(1.0f / 5040.0f);
  p = p * r + splat<F>(1.0f / 720.0f);
  p = p * r + splat<F>(1.0f / 120.0f);
  p = p * r + splat<F>(1.0f / 24.0f);
  p = p * r + splat<F>(1.0f / 6.0f);
  p = p * r + splat<F>(0.5f);
  p = p * r + splat<F>(1.0f);
  p = p * r + splat<F>(1.0f);
  const I n_int = __builtin_bit_cast(I, t) - splat<I>(0x4B400000);
  const I scale_bits = (n_int + splat<I>(127)) << 23;
  const F result = p * __builtin_bit_cast(F, scale_bits);
  return x < lo ? splat<F>(0.0f) : result;
}

// exp of every lane of a double vector, the same way with the Taylor
// polynomial to r^13 (relative error below 1e-17 on the interval): within a
// few ulp of exp for x in [-708, 709]; 0 below -708 (and for -inf).
template <int kLanes>
AXRT_CPU_INLINE typename Floats<kLanes>::D exp_doubles(typename Floats<kLanes>::D x) {
  using D = typename Floats<kLanes>::D;
  using L = typename Floats<kLanes>::L;
  const D lo = splat<D>(-708.0);
  const D hi = splat<D>(709.0);
  const D xc = x < lo ? lo : (x > hi ? hi : x);
  const D shifter = splat<D>(6755399441055744.0);  // 1.5 x 2^52
  const D t = xc * splat<D>(1.4426950408889634074) + shifter;
  const D n = t - shifter;
  const D r =
      xc - n * splat<D>(6.93147180369123816490e-01) - n * splat<D>(1.90821492927058770002e-10);
  constexpr double kInverseFactorial[14] = {
      1.0,
      1.0,
      1.0 / 2,
      1.0 / 6,
      1.0 / 24,
      1.0 / 120,
      1.0 / 720,
      1.0 / 5040,
      1.0 / 40320,
      1.0 / 362880,
      1.0 / 3628800,
      1.0 / 39916800,
      1.0 / 479001600,
      1.0 / 6227020800.0,
  };
  D p = splat<D>(kInverseFactorial[13]);
#pragma GCC unroll 13
  for (int k = 12; k >= 0; --k) p = p * r + splat<D>(kInverseFactorial[k]);
  const L n_int = __builtin_bit_cast(L, t) - splat<L>(0x4338000000000000LL);
  const L scale_bits = (n_int + splat<L>(1023)) << 52;
  const D result = p * __builtin_bit_cast(D, scale_bits);
  return x < lo ? splat<D>(0.0) : result;
}

}  // namespace axrt::kernels::cpu::transformer

#endif  // AXRT_KERNELS_CPU_TRANSFORMER_SIMD_H_
