// Elementwise kernels (docs/kernels.md, "Elementwise"): block i handles
// elements [4096 i, min(n, 4096 (i + 1))). `out` may alias an input, so no
// pointer is __restrict__; each element is read and written by one thread.
// (A lambda written inside a __global__ function is a device lambda.)
#include "common.cuh"

namespace axrt_cuda {
namespace {

template <class Op>
__device__ __forceinline__ void for_each_element(uint64_t n, Op op) {
  const uint64_t begin = static_cast<uint64_t>(blockIdx.x) * kElementsPerBlock;
  if (begin >= n) return;
  const uint64_t end = n - begin < kElementsPerBlock ? n : begin + kElementsPerBlock;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) op(i);
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_add_f32(const float* a, const float* b, float* out, uint64_t n) {
  axrt_cuda::for_each_element(n, [=](uint64_t i) { out[i] = a[i] + b[i]; });
}

extern "C" __global__ void __launch_bounds__(256)
    axrt_mul_f32(const float* a, const float* b, float* out, uint64_t n) {
  axrt_cuda::for_each_element(n, [=](uint64_t i) { out[i] = a[i] * b[i]; });
}

// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
extern "C" __global__ void __launch_bounds__(256)
    axrt_gelu_f32(const float* x, float* out, uint64_t n) {
  axrt_cuda::for_each_element(n, [=](uint64_t i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  });
}

extern "C" __global__ void __launch_bounds__(256)
    axrt_silu_f32(const float* x, float* out, uint64_t n) {
  axrt_cuda::for_each_element(n, [=](uint64_t i) {
    const float v = x[i];
    out[i] = v / (1.0f + expf(-v));
  });
}
