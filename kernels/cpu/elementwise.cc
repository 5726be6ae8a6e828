// Elementwise kernels: workgroup i handles elements [4096 i, 4096 (i + 1))
// clipped to n. `out` may alias an input, so nothing here is restrict.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels::cpu {
namespace {

constexpr uint64_t kElementsPerWorkgroup = 4096;

struct Range {
  uint64_t begin;
  uint64_t end;
};

Range range_of(const axrt_kernel_workgroup_t* workgroup, uint64_t n) {
  const uint64_t i = workgroup->workgroup_id.x;
  if (workgroup->workgroup_id.y != 0 || workgroup->workgroup_id.z != 0 ||
      i >= (n + kElementsPerWorkgroup - 1) / kElementsPerWorkgroup) {
    return {0, 0};
  }
  const uint64_t begin = i * kElementsPerWorkgroup;
  return {begin, std::min(n, begin + kElementsPerWorkgroup)};
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_add_f32(const void* args, const axrt_kernel_dispatch_t*,
                                             const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const BinaryArgs*>(args);
  const Range r = range_of(workgroup, a->n);
  for (uint64_t i = r.begin; i < r.end; ++i) a->out[i] = a->a[i] + a->b[i];
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_mul_f32(const void* args, const axrt_kernel_dispatch_t*,
                                             const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const BinaryArgs*>(args);
  const Range r = range_of(workgroup, a->n);
  for (uint64_t i = r.begin; i < r.end; ++i) a->out[i] = a->a[i] * a->b[i];
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_gelu_f32(const void* args, const axrt_kernel_dispatch_t*,
                                              const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const UnaryArgs*>(args);
  const Range r = range_of(workgroup, a->n);
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  for (uint64_t i = r.begin; i < r.end; ++i) {
    const float x = a->x[i];
    // 1 + erf(t) = erfc(-t): no cancellation in the negative tail.
    a->out[i] = 0.5f * x * std::erfc(-x * kInvSqrt2);
  }
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_silu_f32(const void* args, const axrt_kernel_dispatch_t*,
                                              const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const UnaryArgs*>(args);
  const Range r = range_of(workgroup, a->n);
  for (uint64_t i = r.begin; i < r.end; ++i) {
    const float x = a->x[i];
    a->out[i] = x / (1.0f + std::exp(-x));
  }
  return AXRT_KERNEL_OK;
}
