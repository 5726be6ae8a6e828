// The built-in CPU kernel library, "axrt.cpu" (docs/kernels.md). The runtime
// registers it in every instance; tests and benchmarks call its kernels
// directly through the table.
#ifndef AXRT_KERNELS_CPU_LIBRARY_H_
#define AXRT_KERNELS_CPU_LIBRARY_H_

#include <cstdint>
#include <span>

#include "axrt/kernel_abi.h"

namespace axrt::kernels {

inline constexpr const char kCpuLibraryName[] = "axrt.cpu";
inline constexpr uint32_t kCpuLibraryVersion = 1;

// The library's table; static, valid for the life of the process.
const axrt_kernel_library_t* cpu_kernel_library() noexcept;

// Makes a constant's copy in a pre-packed layout from its canonical bytes.
// Both functions are pure (they read only their arguments, keep nothing)
// and may run on any thread.
struct CpuPacker {
  // Bytes of the copy of a constant of logical `shape` (`rank` extents)
  // stored in `bytes` bytes; 0 when the layout does not take that shape.
  uint64_t (*packed_size)(const uint64_t* shape, uint32_t rank, uint64_t bytes);
  // Writes the copy (packed_size bytes) of `src` to `dst`.
  void (*pack)(const void* src, const uint64_t* shape, uint32_t rank, void* dst);
};

// A pre-packed form of a kernel (docs/kernels.md, "Pre-packed weights"):
// the table's entry `packed_entry` ("<entry>@<to_layout>") is `entry` with
// parameter `param` reading `to_layout`, which `packer` makes from a
// constant in `from_layout`. The CPU device's loader packs the constants a
// kernel is bound to and runs the packed entry instead, when it can
// (runtime/loader_prepack.cc).
struct CpuPrepack {
  const char* entry;
  uint32_t param;
  const char* from_layout;
  const char* to_layout;
  const char* packed_entry;
  const CpuPacker* packer;
};

// Every pre-packed form of the table's kernels; static.
std::span<const CpuPrepack> cpu_prepacks() noexcept;

}  // namespace axrt::kernels

#endif  // AXRT_KERNELS_CPU_LIBRARY_H_
