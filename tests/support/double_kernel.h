// A kernel library of one host kernel, "double": out[i] = 2 in[i] for
// i < n, for the test programs that build executables around it (the fault
// injection walks, the soak). Register kDoubleLibrary, then name library
// `kDoubleLibraryName` and entry "double" in an executable.
#ifndef AXRT_TESTS_SUPPORT_DOUBLE_KERNEL_H_
#define AXRT_TESTS_SUPPORT_DOUBLE_KERNEL_H_

#include <cstdint>

#include "axrt/axrt.h"

namespace axrt_test {

inline axrt_kernel_result_t DoubleKernel(const void* args, const axrt_kernel_dispatch_t*,
                                         const axrt_kernel_workgroup_t*) {
  struct Args {
    const float* in;
    float* out;
    uint64_t n;
  };
  const auto* a = static_cast<const Args*>(args);
  for (uint64_t i = 0; i < a->n; ++i) a->out[i] = a->in[i] * 2.0f;
  return AXRT_KERNEL_OK;
}

inline constexpr axrt_kernel_param_info_t kDoubleParams[3] = {
    {"in", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
inline constexpr const char* kDoubleLibraryName = "tests.double";
inline constexpr axrt_kernel_info_t kDoubleKernels[1] = {
    {"double", DoubleKernel, kDoubleParams, 3, 24}};
inline constexpr axrt_kernel_library_t kDoubleLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, kDoubleLibraryName,
    kDoubleKernels, 1, nullptr, nullptr};

}  // namespace axrt_test

#endif  // AXRT_TESTS_SUPPORT_DOUBLE_KERNEL_H_
