#include "abi/cts/cts_kernel_library.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace axrt_cts {
namespace {

int g_state_token = 0;  // what init hands out as the library state

struct AxpyArgs {
  const float* x;
  const float* y;
  float* out;
  uint64_t n;
  float alpha;
};
static_assert(sizeof(AxpyArgs) == 40);

axrt_kernel_result_t axpy(const void* args, const axrt_kernel_dispatch_t* dispatch,
                          const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const AxpyArgs*>(args);
  if (dispatch->library_state != &g_state_token) CtsLibrary().state_mismatch = true;
  const uint64_t begin = uint64_t{workgroup->workgroup_id.x} * kCtsElementsPerWorkgroup;
  const uint64_t end = std::min<uint64_t>(a.n, begin + kCtsElementsPerWorkgroup);
  for (uint64_t i = begin; i < end; ++i) a.out[i] = a.alpha * a.x[i] + a.y[i];
  return AXRT_KERNEL_OK;
}

struct FailArgs {
  uint32_t* out;
  uint32_t failing_workgroup;
};

axrt_kernel_result_t fail_one(const void* args, const axrt_kernel_dispatch_t*,
                              const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const FailArgs*>(args);
  if (workgroup->workgroup_id.x == a.failing_workgroup) {
    std::snprintf(workgroup->error_message, workgroup->error_message_capacity,
                  "workgroup %u was told to fail", workgroup->workgroup_id.x);
    return AXRT_STATUS_CODE_INVALID_ARGUMENT;
  }
  a.out[workgroup->workgroup_id.x] = 1;
  return AXRT_KERNEL_OK;
}

// Records, for every workgroup of a 3-D grid, how often it ran and what the
// dispatch state said.
struct CoverageArgs {
  uint32_t* counts;  // one per workgroup, linear x fastest
  uint32_t* shape;   // 7 words: grid xyz, size xyz, shared memory
};

axrt_kernel_result_t coverage(const void* args, const axrt_kernel_dispatch_t* dispatch,
                              const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const CoverageArgs*>(args);
  const axrt_kernel_dim3_t& n = dispatch->workgroup_count;
  const axrt_kernel_dim3_t& id = workgroup->workgroup_id;
  if (id.x >= n.x || id.y >= n.y || id.z >= n.z || workgroup->worker_id >= dispatch->worker_count) {
    std::snprintf(workgroup->error_message, workgroup->error_message_capacity, "bad id");
    return AXRT_STATUS_CODE_INTERNAL;
  }
  if (dispatch->dynamic_shared_memory_size > 0) {
    auto* shared = static_cast<uint8_t*>(workgroup->dynamic_shared_memory);
    if (!shared || reinterpret_cast<uintptr_t>(shared) % 64 != 0) {
      std::snprintf(workgroup->error_message, workgroup->error_message_capacity,
                    "shared memory missing or misaligned");
      return AXRT_STATUS_CODE_INTERNAL;
    }
    std::memset(shared, static_cast<int>(id.x), dispatch->dynamic_shared_memory_size);
  }
  const uint64_t linear = (uint64_t{id.z} * n.y + id.y) * n.x + id.x;
  __atomic_fetch_add(&a.counts[linear], 1u, __ATOMIC_RELAXED);
  if (linear == 0) {
    const uint32_t shape[7] = {n.x,
                               n.y,
                               n.z,
                               dispatch->workgroup_size.x,
                               dispatch->workgroup_size.y,
                               dispatch->workgroup_size.z,
                               dispatch->dynamic_shared_memory_size};
    std::memcpy(a.shape, shape, sizeof(shape));
  }
  return AXRT_KERNEL_OK;
}

struct AffineArgs {
  const float* x;
  float* out;
  uint64_t n;
  float scale;
  int32_t shift;
  double bias;
  int64_t step;
};
static_assert(sizeof(AffineArgs) == 48);

axrt_kernel_result_t affine(const void* args, const axrt_kernel_dispatch_t*,
                            const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const AffineArgs*>(args);
  const uint64_t begin = uint64_t{workgroup->workgroup_id.x} * kCtsElementsPerWorkgroup;
  const uint64_t end = std::min<uint64_t>(a.n, begin + kCtsElementsPerWorkgroup);
  for (uint64_t i = begin; i < end; ++i) {
    const double value = static_cast<double>(a.scale * a.x[i] + static_cast<float>(a.shift)) +
                         a.bias + static_cast<double>(a.step * static_cast<int64_t>(i));
    a.out[i] = static_cast<float>(value);
  }
  return AXRT_KERNEL_OK;
}

// Reads int8 weights in a layout it names, to test layout matching.
axrt_kernel_result_t dequant_rows(const void*, const axrt_kernel_dispatch_t*,
                                  const axrt_kernel_workgroup_t*) {
  return AXRT_KERNEL_OK;
}

axrt_kernel_result_t library_init(const axrt_kernel_library_context_t* context, void** out_state) {
  if (CtsLibrary().init_fails) {
    std::snprintf(context->error_message, context->error_message_capacity,
                  "the test asked init to fail on %s", context->device_id);
    return AXRT_STATUS_CODE_UNAVAILABLE;
  }
  ++CtsLibrary().init_count;
  *out_state = &g_state_token;
  return AXRT_KERNEL_OK;
}

void library_deinit(void* state) {
  if (state != &g_state_token) CtsLibrary().state_mismatch = true;
  ++CtsLibrary().deinit_count;
}

const axrt_kernel_param_info_t kAxpyParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
    {"alpha", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT32, nullptr},
};
const axrt_kernel_param_info_t kFailParams[] = {
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"failing_workgroup", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT32, nullptr},
};
const axrt_kernel_param_info_t kCoverageParams[] = {
    {"counts", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"shape", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
};
const axrt_kernel_param_info_t kDequantParams[] = {
    {"w", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, "cts.int8.rows"},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
};
const axrt_kernel_param_info_t kAffineParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
    {"scale", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT32, nullptr},
    {"shift", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_INT32, nullptr},
    {"bias", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT64, nullptr},
    {"step", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_INT64, nullptr},
};

const axrt_kernel_info_t kKernels[] = {
    {"cts_axpy", axpy, kAxpyParams, 5, 40},
    {"cts_fail", fail_one, kFailParams, 2, 16},
    {"cts_coverage", coverage, kCoverageParams, 2, 16},
    {"cts_dequant_rows", dequant_rows, kDequantParams, 2, 16},
    {"cts_affine", affine, kAffineParams, 7, 48},
};

const axrt_kernel_library_t kLibrary = {sizeof(axrt_kernel_library_t),
                                        AXRT_KERNEL_ABI_VERSION,
                                        3,
                                        "cts.kernels",
                                        kKernels,
                                        5,
                                        library_init,
                                        library_deinit};

}  // namespace

const axrt_kernel_library_t* CtsKernelLibrary() { return &kLibrary; }

CtsLibraryCounters& CtsLibrary() {
  static CtsLibraryCounters counters;
  return counters;
}

}  // namespace axrt_cts
