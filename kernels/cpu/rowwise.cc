// Row-wise kernels: workgroup r handles row r of a [rows, cols] tensor.
// Sums and the normalisation run in double, so each output is within a few
// float roundings of the exact value whatever the row length; `out` may
// alias `x` (each pass reads an element before the last pass writes it).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels::cpu {
namespace {

// Four partial sums keep the additions independent (and vectorisable).
template <class Term>
double row_sum(uint64_t cols, Term term) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint64_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    s0 += term(c);
    s1 += term(c + 1);
    s2 += term(c + 2);
    s3 += term(c + 3);
  }
  for (; c < cols; ++c) s0 += term(c);
  return (s0 + s1) + (s2 + s3);
}

// The row this workgroup handles, or false when it has none.
bool row_of(const axrt_kernel_workgroup_t* workgroup, uint64_t rows, uint64_t* row) {
  *row = workgroup->workgroup_id.x;
  return workgroup->workgroup_id.y == 0 && workgroup->workgroup_id.z == 0 && *row < rows;
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_softmax_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                 const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const SoftmaxArgs*>(args);
  uint64_t r;
  if (!row_of(workgroup, a->rows, &r) || a->cols == 0) return AXRT_KERNEL_OK;
  const float* x = a->x + r * a->cols;
  float* out = a->out + r * a->cols;
  const uint64_t cols = a->cols;

  float max = x[0];
  for (uint64_t c = 1; c < cols; ++c) max = std::max(max, x[c]);
  const double shift = max;
  // exp(x - max) in double (the subtraction is exact there), kept in `out`.
  const double sum = row_sum(cols, [&](uint64_t c) {
    const double e = std::exp(static_cast<double>(x[c]) - shift);
    out[c] = static_cast<float>(e);
    return e;
  });
  const double inverse = 1.0 / sum;
  for (uint64_t c = 0; c < cols; ++c) {
    out[c] = static_cast<float>(static_cast<double>(out[c]) * inverse);
  }
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_layernorm_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                   const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const LayerNormArgs*>(args);
  uint64_t r;
  if (!row_of(workgroup, a->rows, &r) || a->cols == 0) return AXRT_KERNEL_OK;
  const float* x = a->x + r * a->cols;
  float* out = a->out + r * a->cols;
  const uint64_t cols = a->cols;
  const double n = static_cast<double>(cols);

  const double mean = row_sum(cols, [&](uint64_t c) { return static_cast<double>(x[c]); }) / n;
  // Two passes: the centred sum of squares has no cancellation.
  const double variance = row_sum(cols, [&](uint64_t c) {
                            const double d = static_cast<double>(x[c]) - mean;
                            return d * d;
                          }) / n;
  const double inv_std = 1.0 / std::sqrt(variance + static_cast<double>(a->epsilon));
  for (uint64_t c = 0; c < cols; ++c) {
    const double centred = static_cast<double>(x[c]) - mean;
    out[c] = static_cast<float>(centred * inv_std * static_cast<double>(a->gamma[c]) +
                                static_cast<double>(a->beta[c]));
  }
  return AXRT_KERNEL_OK;
}

namespace axrt::kernels::cpu {
namespace {

// out[0, cols) = x * gamma / sqrt(mean(x^2) + epsilon), in double.
void rmsnorm_row(const float* x, const float* gamma, float* out, uint64_t cols, float epsilon) {
  const double mean_square = row_sum(cols, [&](uint64_t c) {
                               const double v = x[c];
                               return v * v;
                             }) / static_cast<double>(cols);
  const double inv_rms = 1.0 / std::sqrt(mean_square + static_cast<double>(epsilon));
  for (uint64_t c = 0; c < cols; ++c) {
    out[c] = static_cast<float>(static_cast<double>(x[c]) * inv_rms *
                                static_cast<double>(gamma[c]));
  }
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_rmsnorm_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                 const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const RmsNormArgs*>(args);
  uint64_t r;
  if (!row_of(workgroup, a->rows, &r) || a->cols == 0) return AXRT_KERNEL_OK;
  rmsnorm_row(a->x + r * a->cols, a->gamma, a->out + r * a->cols, a->cols, a->epsilon);
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_add_rmsnorm_f32(const void* args,
                                                     const axrt_kernel_dispatch_t*,
                                                     const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const AddRmsNormArgs*>(args);
  uint64_t r;
  if (!row_of(workgroup, a->rows, &r) || a->cols == 0) return AXRT_KERNEL_OK;
  float* x = a->x + r * a->cols;
  const float* residual = a->residual + r * a->cols;
  for (uint64_t c = 0; c < a->cols; ++c) x[c] = x[c] + residual[c];
  rmsnorm_row(x, a->gamma, a->out + r * a->cols, a->cols, a->epsilon);
  return AXRT_KERNEL_OK;
}
