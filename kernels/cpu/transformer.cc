// The per-token transformer kernels of docs/llm.md: embedding lookups,
// rotary position embedding, the gated SiLU of the MLP and the paged KV
// cache write (f32, bf16 or fp8 e4m3, kv_cache.h). Every kernel checks the indices it is given (token ids,
// positions, block ids) before it writes anything and refuses one out of
// range with INVALID_ARGUMENT.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/silu_mul.h"
#include "kernels/cpu/transformer_simd.h"

namespace axrt::kernels::cpu {
namespace {

using transformer::Floats;
using transformer::load;
using transformer::run_transformer_isa;
using transformer::splat;
using transformer::store;

// The row this workgroup handles (grid x = rows), or false when it has none.
bool row_of(const axrt_kernel_workgroup_t* workgroup, uint64_t rows, uint64_t* row) {
  *row = workgroup->workgroup_id.x;
  return workgroup->workgroup_id.y == 0 && workgroup->workgroup_id.z == 0 && *row < rows;
}

// Checks token t's id against the vocabulary; its row of the table on success.
axrt_kernel_result_t embedding_row(const int32_t* tokens, uint64_t t, uint64_t V,
                                   const axrt_kernel_workgroup_t* workgroup, uint64_t* row) {
  const int32_t token = tokens[t];
  if (token < 0 || static_cast<uint64_t>(token) >= V) {
    return invalid_argument(workgroup, "token %" PRIu64 " is %" PRId32 ", outside [0, %" PRIu64 ")",
                            t, token, V);
  }
  *row = static_cast<uint64_t>(token);
  return AXRT_KERNEL_OK;
}

// out = silu(gate) * up over one row, the exponential by exp_floats.
struct SiluMulBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const float* gate, const float* up, float* out, uint64_t cols) {
    using F = typename Floats<kLanes>::F;
    const F one = splat<F>(1.0f);
    uint64_t c = 0;
    for (; c + kLanes <= cols; c += kLanes) {
      const F g = load<F>(gate + c);
      const F e = transformer::exp_floats<kLanes>(-g);
      store(out + c, g / (one + e) * load<F>(up + c));
    }
    for (; c < cols; ++c) {
      const float g = gate[c];
      out[c] = g / (1.0f + std::exp(-g)) * up[c];
    }
  }
};

// silu_mul_columns: SiluMulBody's arithmetic for each column, a vector's
// lane at a time (exp_floats works lane by lane) up to the last whole
// vector of the row, its scalar tail after.
struct SiluMulColumnsBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const float* gate, const float* up, float* out, uint64_t first,
                                  uint64_t count, uint64_t cols) {
    using F = typename Floats<kLanes>::F;
    const F one = splat<F>(1.0f);
    const uint64_t vector_end = cols - cols % kLanes;
    for (uint64_t i = 0; i < count; ++i) {
      const float g = gate[i];
      if (first + i < vector_end) {
        const F gv = splat<F>(g);
        const F e = transformer::exp_floats<kLanes>(-gv);
        alignas(64) float lanes[kLanes];
        store(lanes, gv / (one + e) * splat<F>(up[i]));
        out[i] = lanes[0];
      } else {
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
      }
    }
  }
};

}  // namespace

void silu_mul_columns(const float* gate, const float* up, float* out, uint64_t first,
                      uint64_t count, uint64_t cols) noexcept {
  run_transformer_isa<SiluMulColumnsBody>(gate, up, out, first, count, cols);
}

namespace {

// Frequencies a rope workgroup turns into cosines and sines at a time.
constexpr uint64_t kRopeChunk = 64;

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_embedding_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                   const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const EmbeddingF32Args*>(args);
  uint64_t t;
  if (!row_of(workgroup, a->T, &t)) return AXRT_KERNEL_OK;
  uint64_t row = 0;
  if (const axrt_kernel_result_t r = embedding_row(a->tokens, t, a->V, workgroup, &row)) return r;
  std::memcpy(a->out + t * a->H, a->table + row * a->H, sizeof(float) * a->H);
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_embedding_bf16(const void* args, const axrt_kernel_dispatch_t*,
                                                    const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const EmbeddingBf16Args*>(args);
  uint64_t t;
  if (!row_of(workgroup, a->T, &t)) return AXRT_KERNEL_OK;
  uint64_t row = 0;
  if (const axrt_kernel_result_t r = embedding_row(a->tokens, t, a->V, workgroup, &row)) return r;
  const uint16_t* __restrict src = a->table + row * a->H;
  float* __restrict dst = a->out + t * a->H;
  // A bfloat16 is the high half of the float it widens to, exactly.
  for (uint64_t i = 0; i < a->H; ++i) {
    dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
  }
  return AXRT_KERNEL_OK;
}

namespace axrt::kernels::cpu {
namespace {

axrt_kernel_result_t rope_check(uint64_t heads, uint64_t D, uint64_t row_stride,
                                const axrt_kernel_workgroup_t* workgroup) {
  if (D == 0 || D % 2 != 0 || heads > row_stride / D) {
    return invalid_argument(workgroup,
                            "head_dim %" PRIu64 " must be even and positive, and %" PRIu64
                            " heads must fit a row of %" PRIu64,
                            D, heads, row_stride);
  }
  return AXRT_KERNEL_OK;
}

// Rotates the first `heads` heads of `row` for `position`.
void rope_row(float* row, int32_t position_id, const float* inv_freq, uint64_t heads, uint64_t D,
              float s) {
  const uint64_t half = D / 2;
  const float position = static_cast<float>(position_id);
  for (uint64_t i0 = 0; i0 < half; i0 += kRopeChunk) {
    const uint64_t n = std::min(kRopeChunk, half - i0);
    float c[kRopeChunk];
    float sn[kRopeChunk];
    for (uint64_t i = 0; i < n; ++i) {
      // The angle is the f32 product, as the contract says; its cosine and
      // sine in double, so that large angles keep every digit f32 can hold.
      const float angle = position * inv_freq[i0 + i];
      c[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * s;
      sn[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * s;
    }
    for (uint64_t h = 0; h < heads; ++h) {
      float* __restrict x0 = row + h * D + i0;
      float* __restrict x1 = x0 + half;
      for (uint64_t i = 0; i < n; ++i) {
        const float u = x0[i];
        const float v = x1[i];
        x0[i] = u * c[i] - v * sn[i];
        x1[i] = v * c[i] + u * sn[i];
      }
    }
  }
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_rope_f32(const void* args, const axrt_kernel_dispatch_t*,
                                              const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const RopeArgs*>(args);
  uint64_t t;
  if (!row_of(workgroup, a->T, &t)) return AXRT_KERNEL_OK;
  if (const axrt_kernel_result_t r = rope_check(a->heads, a->head_dim, a->row_stride, workgroup)) {
    return r;
  }
  rope_row(a->x + t * a->row_stride, a->positions[t], a->inv_freq, a->heads, a->head_dim,
           a->attention_scaling);
  return AXRT_KERNEL_OK;
}

extern "C" axrt_kernel_result_t axrt_silu_mul_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                  const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const SiluMulArgs*>(args);
  uint64_t r;
  if (!row_of(workgroup, a->rows, &r)) return AXRT_KERNEL_OK;
  const float* gate = a->gate_up + r * 2 * a->cols;
  run_transformer_isa<SiluMulBody>(gate, gate + a->cols, a->out + r * a->cols, a->cols);
  return AXRT_KERNEL_OK;
}

namespace axrt::kernels::cpu {
namespace {

// Checks that token t of `a` has a cache slot (its block in the pool); the
// block and the slot in it on success.
axrt_kernel_result_t kv_slot(kv::Kind kind, const KvCacheWriteArgs* a, uint64_t t,
                             const axrt_kernel_workgroup_t* workgroup, uint64_t* block_out,
                             uint64_t* slot_out) {
  const uint64_t D = a->head_dim;
  const uint64_t KVH = a->kv_heads;
  const uint64_t BS = a->block_size;
  if (a->tokens_per_seq == 0 || D == 0 || KVH == 0 || BS == 0 || a->max_blocks == 0 ||
      a->k_offset > a->row_stride || KVH > (a->row_stride - a->k_offset) / (2 * D)) {
    return invalid_argument(
        workgroup,
        "tokens_per_seq %" PRIu64 ", kv_heads %" PRIu64 ", head_dim %" PRIu64
        ", block_size %" PRIu64 ", max_blocks %" PRIu64
        " must be positive and keys and values must fit a row of %" PRIu64 " from column %" PRIu64,
        a->tokens_per_seq, KVH, D, BS, a->max_blocks, a->row_stride, a->k_offset);
  }
  if (kind == kv::Kind::kFp8E4m3 && D % kv::kFp8HeadDimMultiple != 0) {
    return invalid_argument(workgroup,
                            "head_dim %" PRIu64 ": an fp8 KV cache needs a multiple of %" PRIu64, D,
                            kv::kFp8HeadDimMultiple);
  }
  const int32_t position = a->positions[t];
  if (position < 0 || static_cast<uint64_t>(position) / BS >= a->max_blocks) {
    return invalid_argument(workgroup,
                            "token %" PRIu64 " is at position %" PRId32
                            ", outside the block table's [0, %" PRIu64 ")",
                            t, position, a->max_blocks * BS);
  }
  const uint64_t sequence = t / a->tokens_per_seq;
  const uint64_t logical = static_cast<uint64_t>(position) / BS;
  const int32_t block = a->block_tables[sequence * a->max_blocks + logical];
  if (block < 0 || static_cast<uint64_t>(block) >= a->num_blocks) {
    return invalid_argument(workgroup,
                            "token %" PRIu64 " (sequence %" PRIu64 ", position %" PRId32
                            "): block table entry %" PRIu64 " is %" PRId32 ", outside [0, %" PRIu64
                            ")",
                            t, sequence, position, logical, block, a->num_blocks);
  }
  *block_out = static_cast<uint64_t>(block);
  *slot_out = static_cast<uint64_t>(position) % BS;
  return AXRT_KERNEL_OK;
}

// Stores token t's keys and values at `slot` of `block` as `kind` (kv_cache.h).
void kv_store(kv::Kind kind, const KvCacheWriteArgs* a, uint64_t t, uint64_t block,
              uint64_t slot) {
  const uint64_t D = a->head_dim;
  const uint64_t KVH = a->kv_heads;
  const uint64_t BS = a->block_size;
  const float* keys = a->qkv + t * a->row_stride + a->k_offset;
  const float* values = keys + KVH * D;
  auto* cache = static_cast<uint8_t*>(a->cache);
  const uint64_t element = kv::element_bytes(kind);
  for (uint64_t plane = 0; plane < 2; ++plane) {
    const float* src = plane == 0 ? keys : values;
    for (uint64_t h = 0; h < KVH; ++h) {
      uint8_t* run = cache + kv::run_offset(kind, a->layer, plane, block, a->num_blocks, KVH, h, BS, D);
      kv::write_row(kind, src + h * D, D, run + slot * D * element,
                    run + BS * D * element + slot * 4);
    }
  }
}

axrt_kernel_result_t kv_cache_write(kv::Kind kind, const void* args,
                                    const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const KvCacheWriteArgs*>(args);
  uint64_t t;
  if (!row_of(workgroup, a->T, &t)) return AXRT_KERNEL_OK;
  uint64_t block = 0;
  uint64_t slot = 0;
  if (const axrt_kernel_result_t r = kv_slot(kind, a, t, workgroup, &block, &slot)) return r;
  kv_store(kind, a, t, block, slot);
  return AXRT_KERNEL_OK;
}

// Rope on token t's row, then its keys and values into the cache: every
// check of both before either writes.
axrt_kernel_result_t rope_kv_cache_write(kv::Kind kind, const void* args,
                                         const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const RopeKvCacheWriteArgs*>(args);
  uint64_t t;
  if (!row_of(workgroup, a->T, &t)) return AXRT_KERNEL_OK;
  if (const axrt_kernel_result_t r = rope_check(a->heads, a->head_dim, a->row_stride, workgroup)) {
    return r;
  }
  const KvCacheWriteArgs write{a->qkv,        a->positions,  a->block_tables, a->cache,
                               a->T,          a->tokens_per_seq, a->layer,    a->num_blocks,
                               a->kv_heads,   a->block_size, a->head_dim,     a->max_blocks,
                               a->row_stride, a->k_offset};
  uint64_t block = 0;
  uint64_t slot = 0;
  if (const axrt_kernel_result_t r = kv_slot(kind, &write, t, workgroup, &block, &slot)) return r;
  rope_row(a->qkv + t * a->row_stride, a->positions[t], a->inv_freq, a->heads, a->head_dim,
           a->attention_scaling);
  kv_store(kind, &write, t, block, slot);
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_kv_cache_write_f32(const void* args,
                                                        const axrt_kernel_dispatch_t*,
                                                        const axrt_kernel_workgroup_t* workgroup) {
  return kv_cache_write(kv::Kind::kF32, args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_kv_cache_write_bf16(const void* args,
                                                         const axrt_kernel_dispatch_t*,
                                                         const axrt_kernel_workgroup_t* workgroup) {
  return kv_cache_write(kv::Kind::kBf16, args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_kv_cache_write_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return kv_cache_write(kv::Kind::kFp8E4m3, args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_rope_kv_cache_write_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return rope_kv_cache_write(kv::Kind::kF32, args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_rope_kv_cache_write_bf16(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return rope_kv_cache_write(kv::Kind::kBf16, args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_rope_kv_cache_write_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return rope_kv_cache_write(kv::Kind::kFp8E4m3, args, workgroup);
}
