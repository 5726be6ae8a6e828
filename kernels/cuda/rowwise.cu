// Row-wise kernels (docs/kernels.md, "Row-wise"): block r handles row r of a
// [rows, cols] tensor with 256 threads, reducing through warp shuffles and
// shared memory. Sums are accumulated in double: the contract bounds the
// relative error of every element by 1e-5, and a long row summed in float
// loses that in the mean. Each element is written by the thread that read it
// last, so `out` may alias `x`.
#include "common.cuh"

namespace axrt_cuda {
namespace {

// Sets `*row` to the row this block handles; false when there is none (a grid
// larger than `rows`, an empty row, or a block shape the reductions were not
// written for).
__device__ __forceinline__ bool row_of_block(uint64_t rows, uint64_t cols, uint64_t* row) {
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return false;
  *row = blockIdx.x;
  return *row < rows && cols > 0;
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_softmax_f32(const float* x, float* out, uint64_t rows, uint64_t cols) {
  using namespace axrt_cuda;
  __shared__ float max_scratch[kBlockWarps];
  __shared__ double sum_scratch[kBlockWarps];
  uint64_t r;
  if (!row_of_block(rows, cols, &r)) return;
  const float* in = x + r * cols;
  float* o = out + r * cols;

  float m = -INFINITY;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) m = fmaxf(m, in[c]);
  m = block_reduce(m, max_scratch, MaxOp{});

  double s = 0.0;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) s += expf(in[c] - m);
  const float sum = static_cast<float>(block_reduce(s, sum_scratch, SumOp{}));

  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) o[c] = expf(in[c] - m) / sum;
}

// Population variance, computed from the mean in a second pass.
extern "C" __global__ void __launch_bounds__(256)
    axrt_layernorm_f32(const float* x, const float* gamma, const float* beta, float* out,
                       uint64_t rows, uint64_t cols, float epsilon) {
  using namespace axrt_cuda;
  __shared__ double scratch[kBlockWarps];
  uint64_t r;
  if (!row_of_block(rows, cols, &r)) return;
  const float* in = x + r * cols;
  float* o = out + r * cols;

  double s = 0.0;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) s += in[c];
  const double mean = block_reduce(s, scratch, SumOp{}) / static_cast<double>(cols);

  double ss = 0.0;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) {
    const double d = static_cast<double>(in[c]) - mean;
    ss += d * d;
  }
  const double var = block_reduce(ss, scratch, SumOp{}) / static_cast<double>(cols);
  const double inv_std = 1.0 / sqrt(var + static_cast<double>(epsilon));

  // x - mean in double: an element close to the mean keeps its digits.
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) {
    const float normalized = static_cast<float>((static_cast<double>(in[c]) - mean) * inv_std);
    o[c] = normalized * gamma[c] + beta[c];
  }
}

extern "C" __global__ void __launch_bounds__(256)
    axrt_rmsnorm_f32(const float* x, const float* gamma, float* out, uint64_t rows, uint64_t cols,
                     float epsilon) {
  using namespace axrt_cuda;
  __shared__ double scratch[kBlockWarps];
  uint64_t r;
  if (!row_of_block(rows, cols, &r)) return;
  const float* in = x + r * cols;
  float* o = out + r * cols;

  double ss = 0.0;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) {
    const double v = in[c];
    ss += v * v;
  }
  const double mean_square = block_reduce(ss, scratch, SumOp{}) / static_cast<double>(cols);
  const float inv_rms = static_cast<float>(1.0 / sqrt(mean_square + static_cast<double>(epsilon)));

  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) o[c] = in[c] * inv_rms * gamma[c];
}

// axrt_add_f32 then axrt_rmsnorm_f32 in one pass: each thread adds the
// elements it later reads, so the row needs no barrier before the sums.
extern "C" __global__ void __launch_bounds__(256)
    axrt_add_rmsnorm_f32(float* x, const float* residual, const float* gamma, float* out,
                         uint64_t rows, uint64_t cols, float epsilon) {
  using namespace axrt_cuda;
  __shared__ double scratch[kBlockWarps];
  uint64_t r;
  if (!row_of_block(rows, cols, &r)) return;
  float* in = x + r * cols;
  const float* add = residual + r * cols;
  float* o = out + r * cols;

  double ss = 0.0;
  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) {
    const float sum = in[c] + add[c];
    in[c] = sum;
    const double v = sum;
    ss += v * v;
  }
  const double mean_square = block_reduce(ss, scratch, SumOp{}) / static_cast<double>(cols);
  const float inv_rms = static_cast<float>(1.0 / sqrt(mean_square + static_cast<double>(epsilon)));

  for (uint64_t c = threadIdx.x; c < cols; c += kBlockThreads) o[c] = in[c] * inv_rms * gamma[c];
}
