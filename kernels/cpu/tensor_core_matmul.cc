// axrt_matmul_bf16_tc_f32 on the CPU: the contract of the CUDA tensor-core
// matmul (docs/kernels.md, "Tensor-core matmul"), for the CPU driver and the
// mock CUDA driver, which runs a CUDA kernel through the CPU kernel of its
// name. y[M, N] = bf16(x)[M, K] . w[N, K]^T + bias[N] with x rounded to bf16
// (nearest even) and w widened exactly.
//
// Each output is 16 lane sums (lane l takes the products of k = l, l + 16,
// ... in order), added by a fixed halving tree, then the bias: the same
// operations whatever the row's tile, M and build, so batch-invariant.
// Products of two bf16 values are exact in f32 (8-bit significands) unless
// they leave f32's normal range; this file is built without contraction, so
// every product is rounded on its own and every build gives the same bits.
// Not the CUDA kernel's bits: the mma sums in its own order.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"

namespace axrt::kernels::cpu {
namespace {

constexpr uint64_t kTcTile = 128;  // the CUDA kernel's block tile (docs/kernels.md)
constexpr int kLanes = 16;
constexpr int kRowBlock = 8;  // rows of x rounded at a time

struct TcScratch {
  std::vector<float> x;  // kRowBlock rows of bf16(x), each padded with zeros to a multiple of 16
  std::vector<float> w;  // one widened weight row, padded likewise
};

TcScratch& tc_scratch() {
  static thread_local TcScratch scratch;
  return scratch;
}

float widen_bf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// Sum of x[k] w[k] over k < padded (a multiple of kLanes), in the fixed
// order above. Zero padding adds +0 to a lane, which leaves it as it is.
float dot(const float* x, const float* w, uint64_t padded) {
  float lanes[kLanes] = {};
  for (uint64_t k = 0; k < padded; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[k + l] * w[k + l];
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

}  // namespace
}  // namespace axrt::kernels::cpu

// Workgroup (j, i) computes rows [128 i, 128 i + 128) and columns
// [128 j, 128 j + 128), clipped to M and N, as the CUDA block does.
extern "C" axrt_kernel_result_t axrt_matmul_bf16_tc_f32(const void* args,
                                                        const axrt_kernel_dispatch_t*,
                                                        const axrt_kernel_workgroup_t* workgroup) {
  using namespace axrt::kernels::cpu;
  const auto* a = static_cast<const MatmulBf16Args*>(args);
  const uint64_t M = a->M, N = a->N, K = a->K;
  const uint64_t m0 = static_cast<uint64_t>(workgroup->workgroup_id.y) * kTcTile;
  const uint64_t n0 = static_cast<uint64_t>(workgroup->workgroup_id.x) * kTcTile;
  if (workgroup->workgroup_id.z != 0 || m0 >= M || n0 >= N) return AXRT_KERNEL_OK;
  const uint64_t m1 = std::min(M, m0 + kTcTile);
  const uint64_t n1 = std::min(N, n0 + kTcTile);
  const uint64_t padded = (K + kLanes - 1) / kLanes * kLanes;

  TcScratch& scratch = tc_scratch();
  scratch.x.assign(kRowBlock * padded, 0.0f);
  scratch.w.assign(padded, 0.0f);
  for (uint64_t mb = m0; mb < m1; mb += kRowBlock) {
    const uint64_t rows = std::min<uint64_t>(kRowBlock, m1 - mb);
    for (uint64_t r = 0; r < rows; ++r) {
      const float* src = a->x + (mb + r) * K;
      float* dst = scratch.x.data() + r * padded;
      for (uint64_t k = 0; k < K; ++k) dst[k] = widen_bf16(kv::bf16_from_float(src[k]));
    }
    for (uint64_t n = n0; n < n1; ++n) {
      const uint16_t* row = a->w + n * K;
      for (uint64_t k = 0; k < K; ++k) scratch.w[k] = widen_bf16(row[k]);
      for (uint64_t r = 0; r < rows; ++r) {
        a->y[(mb + r) * N + n] =
            dot(scratch.x.data() + r * padded, scratch.w.data(), padded) + a->bias[n];
      }
    }
  }
  return AXRT_KERNEL_OK;
}
