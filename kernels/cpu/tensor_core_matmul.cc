// The tensor-core matmuls on the CPU: the contracts of the CUDA kernels
// (docs/kernels.md, "Tensor-core matmul"), for the CPU driver and the mock
// CUDA driver, which runs a CUDA kernel through the CPU kernel of its name.
// y[M, N] = bf16(x)[M, K] . w[N, K]^T + bias[N] with x rounded to bf16
// (nearest even) and w as the kernel stages it in bf16: bf16 weights, int8
// and fp8 e4m3fn codes widened exactly (the codes' sum then times its
// column's scale), AWQ int4 weights as bf16((q - z) s), rounded to nearest
// even.
//
// Each output is 16 lane sums (lane l takes the products of k = l, l + 16,
// ... in order), added by a fixed halving tree, then the bias: the same
// operations whatever the row's tile, M and build, so batch-invariant.
// Products of two bf16 values are exact in f32 (8-bit significands) unless
// they leave f32's normal range; this file is built without contraction, so
// every product is rounded on its own and every build gives the same bits.
// Not the CUDA kernels' bits: the mma sums in its own order.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"

namespace axrt::kernels::cpu {
namespace {

constexpr uint64_t kTcTile = 128;  // the CUDA kernel's block tile (docs/kernels.md)
constexpr int kLanes = 16;
constexpr int kRowBlock = 8;  // rows of x rounded at a time
constexpr uint64_t kTcGroupMultiple = 32;  // the CUDA kernel's K tile

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

// Workgroup (j, i) computes rows [128 i, 128 i + 128) and columns
// [128 j, 128 j + 128), clipped to M and N, as the CUDA block does.
// `widen(n, row)` writes weight row n as the kernel stages it (K values);
// `finish(n, sum)` is the output before the bias.
template <class Widen, class Finish>
axrt_kernel_result_t tc_workgroup(const float* x, const float* bias, float* y, uint64_t M,
                                  uint64_t N, uint64_t K, const axrt_kernel_workgroup_t* workgroup,
                                  Widen widen, Finish finish) {
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
      const float* src = x + (mb + r) * K;
      float* dst = scratch.x.data() + r * padded;
      for (uint64_t k = 0; k < K; ++k) dst[k] = widen_bf16(kv::bf16_from_float(src[k]));
    }
    for (uint64_t n = n0; n < n1; ++n) {
      widen(n, scratch.w.data());
      for (uint64_t r = 0; r < rows; ++r) {
        y[(mb + r) * N + n] =
            finish(n, dot(scratch.x.data() + r * padded, scratch.w.data(), padded)) + bias[n];
      }
    }
  }
  return AXRT_KERNEL_OK;
}

// AWQ order: code i of a u32 sits in nibble (i % 2) 4 + i / 2.
uint32_t awq_code(uint32_t word, uint64_t i) {
  return (word >> (4 * ((i % 2) * 4 + i / 2))) & 0xfu;
}

// Byte codes [N, K] with a scale per output channel, each code widened
// exactly by `value`; y = (sum) scale[n] + bias[n], two roundings.
template <class Args, class Value>
axrt_kernel_result_t tc_per_channel(const Args* a, const axrt_kernel_workgroup_t* workgroup,
                                    Value value) {
  const uint64_t K = a->K;
  const auto widen = [a, K, value](uint64_t n, float* row) {
    const auto* src = a->w + n * K;
    for (uint64_t k = 0; k < K; ++k) row[k] = value(src[k]);
  };
  const auto finish = [a](uint64_t n, float sum) { return sum * a->scale[n]; };
  return tc_workgroup(a->x, a->bias, a->y, a->M, a->N, K, workgroup, widen, finish);
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_matmul_bf16_tc_f32(const void* args,
                                                        const axrt_kernel_dispatch_t*,
                                                        const axrt_kernel_workgroup_t* workgroup) {
  using namespace axrt::kernels::cpu;
  const auto* a = static_cast<const MatmulBf16Args*>(args);
  const uint64_t K = a->K;
  const auto widen = [a, K](uint64_t n, float* row) {
    const uint16_t* src = a->w + n * K;
    for (uint64_t k = 0; k < K; ++k) row[k] = widen_bf16(src[k]);
  };
  const auto finish = [](uint64_t, float sum) { return sum; };
  return tc_workgroup(a->x, a->bias, a->y, a->M, a->N, K, workgroup, widen, finish);
}

// int8 codes, exact in f32 (and bf16).
extern "C" axrt_kernel_result_t axrt_matmul_int8_pc_tc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  using namespace axrt::kernels::cpu;
  return tc_per_channel(static_cast<const MatmulInt8Args*>(args), workgroup,
                        [](int8_t code) { return static_cast<float>(code); });
}

// e4m3fn codes, exact in bf16 (4 significant bits, exponents inside bf16's
// range); the NaN codes 0x7f and 0xff widen to NaN.
extern "C" axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_tc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  using namespace axrt::kernels::cpu;
  return tc_per_channel(static_cast<const MatmulFp8PcArgs*>(args), workgroup,
                        [](uint8_t code) { return kE4m3fnValues[code]; });
}

// AWQ int4 (awq.int4.g128, and .g64, .g32 under the names that declare
// them): W[n][k] = bf16((q - z) s), the product exact in f32. Rules: N % 8 ==
// 0, group_size a multiple of 32 (the CUDA kernel's K tile lies in one
// group), K % group_size == 0.
static axrt_kernel_result_t awq_int4_tc(const char* name, const void* args,
                                        const axrt_kernel_workgroup_t* workgroup) {
  using namespace axrt::kernels::cpu;
  const auto* a = static_cast<const MatmulInt4Args*>(args);
  const uint64_t N = a->N, K = a->K, group_size = a->group_size;
  if (N % 8 != 0) {
    return invalid_argument(workgroup,
                            "%s: N = %" PRIu64
                            " is not a multiple of 8 (int4 codes are packed 8 per u32 word)",
                            name, N);
  }
  if (group_size == 0 || group_size % kTcGroupMultiple != 0) {
    return invalid_argument(workgroup,
                            "%s: group_size = %" PRIu64
                            " is not a positive multiple of %" PRIu64
                            " (the kernel's K tile must lie in one group)",
                            name, group_size, kTcGroupMultiple);
  }
  if (K % group_size != 0) {
    return invalid_argument(workgroup,
                            "%s: K = %" PRIu64 " is not a multiple of group_size = %" PRIu64,
                            name, K, group_size);
  }
  const auto widen = [a, N, K, group_size](uint64_t n, float* row) {
    const uint64_t words_per_row = N / 8;
    const uint32_t* column = a->qweight + n / 8;
    for (uint64_t g = 0; g < K / group_size; ++g) {
      const int z = static_cast<int>(awq_code(a->qzeros[g * words_per_row + n / 8], n % 8));
      const float s = half_to_float(a->scales[g * N + n]);
      for (uint64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
        const int q = static_cast<int>(awq_code(column[k * words_per_row], n % 8));
        row[k] = widen_bf16(kv::bf16_from_float(static_cast<float>(q - z) * s));
      }
    }
  };
  const auto finish = [](uint64_t, float sum) { return sum; };
  return tc_workgroup(a->x, a->bias, a->y, a->M, N, K, workgroup, widen, finish);
}

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_tc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return awq_int4_tc("axrt_matmul_awq_int4_tc_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_g64_tc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return awq_int4_tc("axrt_matmul_awq_int4_g64_tc_f32", args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_matmul_awq_int4_g32_tc_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return awq_int4_tc("axrt_matmul_awq_int4_g32_tc_f32", args, workgroup);
}
