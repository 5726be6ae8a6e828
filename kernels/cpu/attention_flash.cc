// Flash attention over the paged KV cache (docs/kernels.md, "Flash
// attention"): the contract of the tensor-core body (kernels/cuda/
// attention_flash.cu) on the same grid, with its roundings: q, keys, values
// and probabilities rounded to bf16, scores, the online softmax and the sums
// in f32, keys visited in tiles of 64 from key 0 upward. The sums run in
// their own order, not the mma's, so the two bodies agree within the bound
// docs/kernels.md states, not bit for bit.
//
// Workgroup (i, g) serves tokens [16 i, 16 i + 16) and the query heads of KV
// group g. As on the GPU, tokens whose block-table rows agree with a
// leader's on every block they read share one pass over the leader's keys
// (each tile converted once for all of them and all of the group's heads);
// a token's arithmetic is the same in whichever pass serves it.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"

namespace axrt::kernels::cpu {
namespace {

constexpr uint64_t kFlashTokens = 16;  // tokens of a workgroup (grid x = ceil(T / 16))
constexpr int64_t kFlashKeys = 64;     // keys of a tile
constexpr uint64_t kFlashMaxHeadDim = 128;
constexpr uint64_t kFlashHeads = 4;  // query heads a pass over the keys serves here

float widen_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
float round_bf16(float x) { return widen_bf16(kv::bf16_from_float(x)); }

// The dot product of two rows of D (a multiple of 16) in 8 interleaved f32
// sums, then those added pairwise.
float dot(const float* __restrict a, const float* __restrict b, uint64_t D) {
  float part[8] = {};
  for (uint64_t d = 0; d < D; d += 8) {
    for (int i = 0; i < 8; ++i) part[i] += a[d + i] * b[d + i];
  }
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// A tile of keys and values as bf16 values in f32, and each key's score
// factor and value's probability factor.
struct Tile {
  alignas(64) float keys[kFlashKeys * kFlashMaxHeadDim];
  alignas(64) float values[kFlashKeys * kFlashMaxHeadDim];
  float key_factor[kFlashKeys];
  float value_factor[kFlashKeys];
};

// Row `slot` of the run at `run` as bf16 values into `out`; its fp8 scale
// into *row_scale (1 otherwise).
template <kv::Kind kKind>
void read_row(const uint8_t* run, uint64_t slot, uint64_t block_size, uint64_t D, float* out,
              float* row_scale) {
  *row_scale = 1.0f;
  if constexpr (kKind == kv::Kind::kF32) {
    const uint8_t* row = run + slot * D * 4;
    for (uint64_t d = 0; d < D; ++d) {
      float x;
      std::memcpy(&x, row + 4 * d, 4);
      out[d] = round_bf16(x);
    }
  } else if constexpr (kKind == kv::Kind::kBf16) {
    const uint8_t* row = run + slot * D * 2;
    for (uint64_t d = 0; d < D; ++d) {
      uint16_t h;
      std::memcpy(&h, row + 2 * d, 2);
      out[d] = widen_bf16(h);
    }
  } else {
    const uint8_t* row = run + slot * D;
    for (uint64_t d = 0; d < D; ++d) out[d] = kE4m3fnValues[row[d]];
    std::memcpy(row_scale, run + block_size * D + slot * 4, 4);
  }
}

// The online softmax state of one (token, query head).
struct Row {
  float q[kFlashMaxHeadDim];  // bf16(q)
  float acc[kFlashMaxHeadDim];
  float m;
  float l;
};

template <kv::Kind kKind>
axrt_kernel_result_t attention_flash(const void* args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const AttentionArgs*>(args);
  const uint64_t t0 = static_cast<uint64_t>(workgroup->workgroup_id.x) * kFlashTokens;
  const uint64_t kv_head = workgroup->workgroup_id.y;
  if (workgroup->workgroup_id.z != 0 || t0 >= a->count || kv_head >= a->kv_heads) {
    return AXRT_KERNEL_OK;
  }
  if (const axrt_kernel_result_t r = check_attention_shapes(kKind, a, workgroup)) return r;
  const uint64_t D = a->head_dim;
  if (D % 16 != 0 || D > kFlashMaxHeadDim) {
    return invalid_argument(workgroup,
                            "head_dim %" PRIu64
                            ": the flash attention kernels need a multiple of 16 up to %" PRIu64,
                            D, kFlashMaxHeadDim);
  }
  const uint64_t count = std::min(kFlashTokens, a->count - t0);
  for (uint64_t t = t0; t < t0 + count; ++t) {
    if (const axrt_kernel_result_t r = check_attention_sequence(
            a, a->block_tables + t * a->max_blocks, a->positions[t], "sequence", t, workgroup)) {
      return r;
    }
  }

  const uint64_t BS = a->block_size;
  const uint64_t run = kv::run_bytes(kKind, BS, D);
  const auto* cache = static_cast<const uint8_t*>(a->cache);
  const uint8_t* key_plane = cache + kv::run_offset(kKind, a->layer, 0, 0, a->num_blocks,
                                                    a->kv_heads, kv_head, BS, D);
  const uint8_t* value_plane = key_plane + a->num_blocks * a->kv_heads * run;
  const uint64_t block_stride = a->kv_heads * run;
  const uint64_t group = a->heads / a->kv_heads;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  Tile tile;
  Row state[kFlashHeads][kFlashTokens];
  float scores[kFlashKeys];

  uint32_t remaining = (1u << count) - 1u;
  while (remaining != 0) {
    const uint64_t leader = static_cast<uint64_t>(std::countr_zero(remaining));
    const int32_t* leader_table = a->block_tables + (t0 + leader) * a->max_blocks;
    uint32_t members = 0;
    int64_t last = 0;
    for (uint64_t r = 0; r < count; ++r) {
      if (((remaining >> r) & 1u) == 0) continue;
      const int32_t* table = a->block_tables + (t0 + r) * a->max_blocks;
      const uint64_t blocks = static_cast<uint64_t>(a->positions[t0 + r]) / BS + 1;
      if (std::equal(table, table + blocks, leader_table)) {
        members |= 1u << r;
        last = std::max<int64_t>(last, a->positions[t0 + r]);
      }
    }
    remaining &= ~members;

    for (uint64_t h0 = 0; h0 < group; h0 += kFlashHeads) {
      const uint64_t heads = std::min(kFlashHeads, group - h0);
      for (uint64_t hh = 0; hh < heads; ++hh) {
        const uint64_t h = kv_head * group + h0 + hh;
        for (uint64_t r = 0; r < count; ++r) {
          if (((members >> r) & 1u) == 0) continue;
          Row& row = state[hh][r];
          const float* q = a->qkv + (t0 + r) * a->row_stride + h * D;
          for (uint64_t d = 0; d < D; ++d) row.q[d] = round_bf16(q[d]);
          std::fill_n(row.acc, D, 0.0f);
          row.m = kNegInf;
          row.l = 0.0f;
        }
      }

      for (int64_t k0 = 0; k0 <= last; k0 += kFlashKeys) {
        const int64_t n = std::min(kFlashKeys, last - k0 + 1);
        for (int64_t j = 0; j < n; ++j) {
          const uint64_t p = static_cast<uint64_t>(k0 + j);
          const uint64_t offset = static_cast<uint64_t>(leader_table[p / BS]) * block_stride;
          float key_scale, value_scale;
          read_row<kKind>(key_plane + offset, p % BS, BS, D, tile.keys + j * D, &key_scale);
          read_row<kKind>(value_plane + offset, p % BS, BS, D, tile.values + j * D, &value_scale);
          tile.key_factor[j] = kKind == kv::Kind::kFp8E4m3 ? a->scale * key_scale : a->scale;
          tile.value_factor[j] = value_scale;
        }
        for (uint64_t hh = 0; hh < heads; ++hh) {
          for (uint64_t r = 0; r < count; ++r) {
            if (((members >> r) & 1u) == 0) continue;
            // The keys of the tile at or before the token's position; a
            // tile with none leaves its state as it is.
            const int64_t visible = std::min<int64_t>(n, a->positions[t0 + r] - k0 + 1);
            if (visible <= 0) continue;
            Row& row = state[hh][r];
            float top = kNegInf;
            for (int64_t j = 0; j < visible; ++j) {
              scores[j] = dot(row.q, tile.keys + j * D, D) * tile.key_factor[j];
              top = std::fmax(top, scores[j]);
            }
            const float m_new = std::fmax(row.m, top);
            const float shift = m_new == kNegInf ? 0.0f : m_new;
            const float alpha = std::exp(row.m - shift);
            float sum = 0.0f;
            for (int64_t j = 0; j < visible; ++j) {
              scores[j] = std::exp(scores[j] - shift);
              sum += scores[j];
            }
            row.l = row.l * alpha + sum;
            row.m = m_new;
            float* __restrict acc = row.acc;
            for (uint64_t d = 0; d < D; ++d) acc[d] *= alpha;
            for (int64_t j = 0; j < visible; ++j) {
              const float w = round_bf16(kKind == kv::Kind::kFp8E4m3
                                             ? scores[j] * tile.value_factor[j]
                                             : scores[j]);
              const float* __restrict v = tile.values + j * D;
              for (uint64_t d = 0; d < D; ++d) acc[d] += w * v[d];
            }
          }
        }
      }

      for (uint64_t hh = 0; hh < heads; ++hh) {
        const uint64_t h = kv_head * group + h0 + hh;
        for (uint64_t r = 0; r < count; ++r) {
          if (((members >> r) & 1u) == 0) continue;
          const Row& row = state[hh][r];
          float* __restrict out = a->out + ((t0 + r) * a->heads + h) * D;
          for (uint64_t d = 0; d < D; ++d) out[d] = row.acc[d] / row.l;
        }
      }
    }
  }
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_attention_flash_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_flash<kv::Kind::kF32>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_flash_kv_bf16(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_flash<kv::Kind::kBf16>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_flash_kv_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_flash<kv::Kind::kFp8E4m3>(args, workgroup);
}
