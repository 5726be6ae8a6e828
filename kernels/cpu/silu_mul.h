// The gated SiLU of axrt_silu_mul_f32 for a few columns of a row, for the
// kernels that fuse it into a matmul's epilogue (transformer.cc).
#ifndef AXRT_KERNELS_CPU_SILU_MUL_H_
#define AXRT_KERNELS_CPU_SILU_MUL_H_

#include <cstdint>

namespace axrt::kernels::cpu {

// out[i] = silu(gate[i]) * up[i] for i < count, the values of columns
// [first, first + count) of a row of `cols`: each with the arithmetic
// axrt_silu_mul_f32 gives that column in this build (its vector loop's, or
// its scalar tail's past the last whole vector), so the same bits.
void silu_mul_columns(const float* gate, const float* up, float* out, uint64_t first,
                      uint64_t count, uint64_t cols) noexcept;

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_SILU_MUL_H_
