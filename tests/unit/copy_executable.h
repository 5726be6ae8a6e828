// A minimal executable for tests that need to invoke something: one host
// kernel copying `n` floats, and an .axe whose function
// "copy(x: f32[n<=64]) -> y: f32[n]" dispatches it once.
#ifndef AXRT_TESTS_UNIT_COPY_EXECUTABLE_H_
#define AXRT_TESTS_UNIT_COPY_EXECUTABLE_H_

#include <cstdint>
#include <vector>

#include "axrt/axrt.h"

namespace axrt_test {

// out[i] = in[i] for i < n; its parameters are kCopyFloatsParams.
axrt_kernel_result_t CopyFloatsKernel(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                      const axrt_kernel_workgroup_t* workgroup);
// in, out (buffers) and n (u64 scalar): a 24-byte argument block.
extern const axrt_kernel_param_info_t kCopyFloatsParams[3];

// An .axe for the host whose function "copy" runs kernel `entry_symbol` of
// kernel library `library_name` (which the caller registers) over one
// workgroup. Throws what the builder refuses (tests/support/axe_test_builder.h).
std::vector<uint8_t> BuildCopyExecutable(const char* library_name, const char* entry_symbol);

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_COPY_EXECUTABLE_H_
