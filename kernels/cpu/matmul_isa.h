// The instruction-set builds of the matmul kernels, chosen at run time.
//
// A matmul body is written once as `Body::run<kLanes>(...)` (floats per
// vector register) and started with run_matmul_isa<Body>(isa, ...). On x86-64
// it is compiled three times: baseline (SSE2, 4 lanes), AVX2 + FMA (8 lanes)
// and AVX-512 F/BW/VL/DQ (16 lanes); elsewhere only the baseline build
// exists. matmul_isa() names the build to run: the widest this CPU has,
// lowered by the environment variable AXRT_CPU_ISA ("baseline", "avx2",
// "avx512"; read once, on first use), by force_baseline_isa
// (kernel_util.h) and by matmul_isa_limit (tests). A tree configured with
// AXRT_CPU_AVX512_BODIES=OFF (the sanitizer trees of `make test`: their
// compile time, on machines that mostly lack AVX-512) leaves the AVX-512
// builds of the bodies started here out; its widest build is AVX2.
#ifndef AXRT_KERNELS_CPU_MATMUL_ISA_H_
#define AXRT_KERNELS_CPU_MATMUL_ISA_H_

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/kernel_util.h"

#ifndef AXRT_CPU_AVX512_BODIES
#define AXRT_CPU_AVX512_BODIES AXRT_CPU_HAVE_AVX2_BUILD
#endif

namespace axrt::kernels::cpu {

enum class MatmulIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kMatmulIsaCount = 3;

// Tests lower this to run a narrower build on a CPU that has a wider one.
inline std::atomic<int> matmul_isa_limit{static_cast<int>(MatmulIsa::kAvx512)};

// The widest build this CPU runs.
inline MatmulIsa matmul_cpu_isa() {
#if AXRT_CPU_HAVE_AVX2_BUILD
  static const MatmulIsa isa = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (AXRT_CPU_AVX512_BODIES && avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      return MatmulIsa::kAvx512;
    }
    return avx2 ? MatmulIsa::kAvx2 : MatmulIsa::kBaseline;
  }();
  return isa;
#else
  return MatmulIsa::kBaseline;
#endif
}

// The cap AXRT_CPU_ISA sets; unset or unknown values set none.
inline MatmulIsa matmul_environment_isa_limit() {
  static const MatmulIsa limit = [] {
    const char* value = std::getenv("AXRT_CPU_ISA");
    if (value == nullptr) return MatmulIsa::kAvx512;
    if (std::strcmp(value, "baseline") == 0) return MatmulIsa::kBaseline;
    if (std::strcmp(value, "avx2") == 0) return MatmulIsa::kAvx2;
    return MatmulIsa::kAvx512;
  }();
  return limit;
}

inline MatmulIsa matmul_isa() {
  if (force_baseline_isa.load(std::memory_order_relaxed)) return MatmulIsa::kBaseline;
  int isa = static_cast<int>(matmul_cpu_isa());
  const int environment = static_cast<int>(matmul_environment_isa_limit());
  const int limit = matmul_isa_limit.load(std::memory_order_relaxed);
  if (environment < isa) isa = environment;
  if (limit < isa) isa = limit;
  return static_cast<MatmulIsa>(isa < 0 ? 0 : isa);
}

inline const char* matmul_isa_name(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::kAvx512: return "avx512";
    case MatmulIsa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

#define AXRT_CPU_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"

template <class Body, class... Args>
[[gnu::noinline]] void run_matmul_baseline(Args... args) {
  Body::template run<4>(args...);
}

#if AXRT_CPU_HAVE_AVX2_BUILD
template <class Body, class... Args>
[[gnu::noinline, gnu::target("avx2,fma")]] void run_matmul_avx2(Args... args) {
  Body::template run<8>(args...);
}

#if AXRT_CPU_AVX512_BODIES
template <class Body, class... Args>
[[gnu::noinline, gnu::target(AXRT_CPU_AVX512_TARGET)]] void run_matmul_avx512(Args... args) {
  Body::template run<16>(args...);
}
#endif
#endif

template <class Body, class... Args>
inline void run_matmul_isa(MatmulIsa isa, Args... args) {
#if AXRT_CPU_AVX512_BODIES
  if (isa == MatmulIsa::kAvx512) {
    run_matmul_avx512<Body>(args...);
    return;
  }
#endif
#if AXRT_CPU_HAVE_AVX2_BUILD
  if (isa == MatmulIsa::kAvx2) {
    run_matmul_avx2<Body>(args...);
    return;
  }
#endif
  (void)isa;
  run_matmul_baseline<Body>(args...);
}

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_MATMUL_ISA_H_
