// Placeholder table until the kernels land.
#include "kernels/cpu/library.h"

namespace axrt::kernels {

const axrt_kernel_library_t* cpu_kernel_library() noexcept {
  static const axrt_kernel_library_t library = {
      sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, kCpuLibraryVersion, kCpuLibraryName,
      nullptr, 0, nullptr, nullptr};
  return &library;
}

}  // namespace axrt::kernels
