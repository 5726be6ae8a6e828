// The suite's own kernel library, "cts.kernels": registered by the
// executable tests to exercise the load and call paths without the built-in
// kernels, and checked by the kernel-library kit like any other library.
#ifndef AXRT_ABI_CTS_CTS_KERNEL_LIBRARY_H_
#define AXRT_ABI_CTS_CTS_KERNEL_LIBRARY_H_

#include <atomic>
#include <cstdint>

#include "axrt/axrt.h"

namespace axrt_cts {

// Kernels (entry symbols):
//   cts_axpy(x, y, out, n: u64, alpha: f32): out = alpha x + y, 64
//     elements per workgroup.
//   cts_fail(out, failing_workgroup: u32): out[wg] = 1 (u32), except that
//     workgroup `failing_workgroup` fails with INVALID_ARGUMENT.
//   cts_coverage(counts, shape): counts[linear wg] += 1 (u32); workgroup 0
//     writes the grid, workgroup size and shared memory size as 7 u32.
//   cts_dequant_rows(w: layout "cts.int8.rows", out): does nothing; for
//     layout matching.
//   cts_affine(x, out, n: u64, scale: f32, shift: i32, bias: f64, step: i64):
//     out[i] = f32(f64(scale x[i] + f32(shift)) + bias + f64(step i)), 64
//     elements per workgroup; its signed scalars take negative literals
//     (format 1.3).
// init hands out CtsLibraryStateToken() as the library state.
const axrt_kernel_library_t* CtsKernelLibrary();

inline constexpr uint32_t kCtsElementsPerWorkgroup = 64;

// What the library records, for the tests that watch it.
struct CtsLibraryCounters {
  std::atomic<int> init_count{0};
  std::atomic<int> deinit_count{0};
  // Set by a test to make init fail (UNAVAILABLE).
  std::atomic<bool> init_fails{false};
  // Set when a dispatch or deinit saw another state than init's.
  std::atomic<bool> state_mismatch{false};
};
CtsLibraryCounters& CtsLibrary();

}  // namespace axrt_cts

#endif  // AXRT_ABI_CTS_CTS_KERNEL_LIBRARY_H_
