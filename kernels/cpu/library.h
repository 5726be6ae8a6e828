// The built-in CPU kernel library, "axrt.cpu" (docs/kernels.md). The runtime
// registers it in every instance; tests and benchmarks call its kernels
// directly through the table.
#ifndef AXRT_KERNELS_CPU_LIBRARY_H_
#define AXRT_KERNELS_CPU_LIBRARY_H_

#include "axrt/kernel_abi.h"

namespace axrt::kernels {

inline constexpr const char kCpuLibraryName[] = "axrt.cpu";
inline constexpr uint32_t kCpuLibraryVersion = 1;

// The library's table; static, valid for the life of the process.
const axrt_kernel_library_t* cpu_kernel_library() noexcept;

}  // namespace axrt::kernels

#endif  // AXRT_KERNELS_CPU_LIBRARY_H_
