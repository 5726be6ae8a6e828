// The per-token transformer kernels of docs/llm.md: embedding lookups,
// rotary position embedding, the gated SiLU of the MLP and the paged KV
// cache write. Block r handles row (token) r with any whole number of warps
// (256 threads in the executables axrt writes). An index out of range (a
// token id, a position, a block id) makes the block return without writing:
// kernels have no error channel (common.cuh).
#include "common.cuh"

namespace axrt_cuda {
namespace {

// Sets `*row` to the row this block handles; false when there is none.
__device__ __forceinline__ bool token_of_block(uint64_t rows, uint64_t* row) {
  if (blockDim.y != 1 || blockDim.z != 1 || blockIdx.y != 0 || blockIdx.z != 0) return false;
  *row = blockIdx.x;
  return *row < rows;
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_embedding_f32(const int32_t* tokens, const float* table, float* out, uint64_t T,
                       uint64_t H, uint64_t V) {
  using namespace axrt_cuda;
  uint64_t t;
  if (!token_of_block(T, &t)) return;
  const int32_t token = tokens[t];
  if (token < 0 || static_cast<uint64_t>(token) >= V) return;
  const float* src = table + static_cast<uint64_t>(token) * H;
  float* dst = out + t * H;
  for (uint64_t i = threadIdx.x; i < H; i += blockDim.x) dst[i] = src[i];
}

// A bfloat16 is the high half of the float it widens to.
extern "C" __global__ void __launch_bounds__(256)
    axrt_embedding_bf16(const int32_t* tokens, const uint16_t* table, float* out, uint64_t T,
                        uint64_t H, uint64_t V) {
  using namespace axrt_cuda;
  uint64_t t;
  if (!token_of_block(T, &t)) return;
  const int32_t token = tokens[t];
  if (token < 0 || static_cast<uint64_t>(token) >= V) return;
  const uint16_t* src = table + static_cast<uint64_t>(token) * H;
  float* dst = out + t * H;
  for (uint64_t i = threadIdx.x; i < H; i += blockDim.x) {
    dst[i] = __uint_as_float(static_cast<uint32_t>(src[i]) << 16);
  }
}

namespace axrt_cuda {
namespace {

// Rotates the first `heads` heads of `row`: one thread per (head,
// frequency) pair. The angle is the f32 product; its cosine and sine are
// taken in double, as on the CPU.
__device__ __forceinline__ void rope_row(float* row, int32_t position_id, const float* inv_freq,
                                         uint64_t heads, uint64_t head_dim,
                                         float attention_scaling) {
  const uint64_t half = head_dim / 2;
  const float position = static_cast<float>(position_id);
  for (uint64_t k = threadIdx.x; k < heads * half; k += blockDim.x) {
    const uint64_t h = k / half;
    const uint64_t i = k % half;
    const float angle = __fmul_rn(position, inv_freq[i]);
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    const float cs = static_cast<float>(c) * attention_scaling;
    const float sn = static_cast<float>(s) * attention_scaling;
    float* x0 = row + h * head_dim + i;
    float* x1 = x0 + half;
    const float a = *x0;
    const float b = *x1;
    *x0 = a * cs - b * sn;
    *x1 = b * cs + a * sn;
  }
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_rope_f32(float* x, const int32_t* positions, const float* inv_freq, uint64_t T,
                  uint64_t heads, uint64_t head_dim, uint64_t row_stride, float attention_scaling) {
  using namespace axrt_cuda;
  uint64_t t;
  if (!token_of_block(T, &t)) return;
  if (head_dim == 0 || head_dim % 2 != 0 || heads > row_stride / head_dim) return;
  rope_row(x + t * row_stride, positions[t], inv_freq, heads, head_dim, attention_scaling);
}

extern "C" __global__ void __launch_bounds__(256)
    axrt_silu_mul_f32(const float* gate_up, float* out, uint64_t rows, uint64_t cols) {
  using namespace axrt_cuda;
  uint64_t r;
  if (!token_of_block(rows, &r)) return;
  const float* gate = gate_up + r * 2 * cols;
  const float* up = gate + cols;
  float* o = out + r * cols;
  for (uint64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = silu_mul(gate[c], up[c]);
}

namespace axrt_cuda {
namespace {

// Writes token t's keys and values into the cache as kKind (common.cuh):
// one warp a row of head_dim elements (an fp8 row's scale is its warp's
// maximum magnitude / 448).
// Whether token t has a cache slot (the shapes allow a write, its position
// lies in its block table, the block in the pool); its block and slot then.
template <KvKind kKind>
__device__ __forceinline__ bool kv_slot(const int32_t* positions, const int32_t* block_tables,
                                        uint64_t t, uint64_t tokens_per_seq, uint64_t num_blocks,
                                        uint64_t kv_heads, uint64_t block_size, uint64_t head_dim,
                                        uint64_t max_blocks, uint64_t row_stride,
                                        uint64_t k_offset, uint64_t* block_out,
                                        uint64_t* slot_out) {
  if (tokens_per_seq == 0 || head_dim == 0 || kv_heads == 0 || block_size == 0 || max_blocks == 0 ||
      k_offset > row_stride || kv_heads > (row_stride - k_offset) / (2 * head_dim) ||
      (kKind == KvKind::kFp8E4m3 && head_dim % 16 != 0) || blockDim.x % kWarpSize != 0) {
    return false;
  }
  const int32_t position = positions[t];
  if (position < 0 || static_cast<uint64_t>(position) / block_size >= max_blocks) return false;
  const uint64_t sequence = t / tokens_per_seq;
  const int32_t block =
      block_tables[sequence * max_blocks + static_cast<uint64_t>(position) / block_size];
  if (block < 0 || static_cast<uint64_t>(block) >= num_blocks) return false;
  *block_out = static_cast<uint64_t>(block);
  *slot_out = static_cast<uint64_t>(position) % block_size;
  return true;
}

// Stores token t's keys and values at `slot` of `block`.
template <KvKind kKind>
__device__ __forceinline__ void kv_store(const float* qkv, void* cache, uint64_t t,
                                         uint64_t layer, uint64_t num_blocks, uint64_t kv_heads,
                                         uint64_t block_size, uint64_t head_dim,
                                         uint64_t row_stride, uint64_t k_offset, uint64_t block,
                                         uint64_t slot) {
  const float* src = qkv + t * row_stride + k_offset;  // keys, then as many values
  const uint64_t run_bytes = kv_run_bytes(kKind, block_size, head_dim);
  const unsigned lane = threadIdx.x % kWarpSize;
  for (uint64_t r = threadIdx.x / kWarpSize; r < 2 * kv_heads; r += blockDim.x / kWarpSize) {
    const uint64_t plane = r / kv_heads;
    const uint64_t h = r % kv_heads;
    uint8_t* run = static_cast<uint8_t*>(cache) +
                   (((layer * 2 + plane) * num_blocks + block) * kv_heads + h) * run_bytes;
    const float* row = src + r * head_dim;
    if constexpr (kKind == KvKind::kF32) {
      float* dst = reinterpret_cast<float*>(run) + slot * head_dim;
      for (uint64_t d = lane; d < head_dim; d += kWarpSize) dst[d] = row[d];
    } else if constexpr (kKind == KvKind::kBf16) {
      uint16_t* dst = reinterpret_cast<uint16_t*>(run) + slot * head_dim;
      for (uint64_t d = lane; d < head_dim; d += kWarpSize) dst[d] = float_to_bf16_bits(row[d]);
    } else {
      float amax = 0.0f;
      int nan = 0;
      for (uint64_t d = lane; d < head_dim; d += kWarpSize) {
        nan |= isnan(row[d]);
        amax = fmaxf(amax, fabsf(row[d]));
      }
      amax = warp_reduce(amax, MaxOp{});
      nan = __any_sync(0xffffffffu, nan);
      const float scale = nan ? __int_as_float(0x7fc00000) : __fdiv_rn(amax, 448.0f);
      uint8_t* dst = run + slot * head_dim;
      for (uint64_t d = lane; d < head_dim; d += kWarpSize) {
        dst[d] = scale == 0.0f ? 0 : float_to_e4m3fn(__fdiv_rn(row[d], scale));
      }
      if (lane == 0) reinterpret_cast<float*>(run + block_size * head_dim)[slot] = scale;
    }
  }
}

template <KvKind kKind>
__device__ __forceinline__ void kv_cache_write(const float* qkv, const int32_t* positions,
                                               const int32_t* block_tables, void* cache,
                                               uint64_t T, uint64_t tokens_per_seq,
                                               uint64_t layer, uint64_t num_blocks,
                                               uint64_t kv_heads, uint64_t block_size,
                                               uint64_t head_dim, uint64_t max_blocks,
                                               uint64_t row_stride, uint64_t k_offset) {
  uint64_t t, block, slot;
  if (!token_of_block(T, &t) ||
      !kv_slot<kKind>(positions, block_tables, t, tokens_per_seq, num_blocks, kv_heads,
                      block_size, head_dim, max_blocks, row_stride, k_offset, &block, &slot)) {
    return;
  }
  kv_store<kKind>(qkv, cache, t, layer, num_blocks, kv_heads, block_size, head_dim, row_stride,
                  k_offset, block, slot);
}

// Rope on token t's row, then its keys and values into the cache; every
// check of both before either writes, and a barrier between the two (the
// warps that store a head are not those that rotated it).
template <KvKind kKind>
__device__ __forceinline__ void rope_kv_cache_write(
    float* qkv, const int32_t* positions, const float* inv_freq, const int32_t* block_tables,
    void* cache, uint64_t T, uint64_t tokens_per_seq, uint64_t heads, uint64_t layer,
    uint64_t num_blocks, uint64_t kv_heads, uint64_t block_size, uint64_t head_dim,
    uint64_t max_blocks, uint64_t row_stride, uint64_t k_offset, float attention_scaling) {
  uint64_t t, block, slot;
  if (!token_of_block(T, &t) || head_dim == 0 || head_dim % 2 != 0 ||
      heads > row_stride / head_dim ||
      !kv_slot<kKind>(positions, block_tables, t, tokens_per_seq, num_blocks, kv_heads,
                      block_size, head_dim, max_blocks, row_stride, k_offset, &block, &slot)) {
    return;
  }
  rope_row(qkv + t * row_stride, positions[t], inv_freq, heads, head_dim, attention_scaling);
  __syncthreads();
  kv_store<kKind>(qkv, cache, t, layer, num_blocks, kv_heads, block_size, head_dim, row_stride,
                  k_offset, block, slot);
}

}  // namespace
}  // namespace axrt_cuda

#define AXRT_KV_CACHE_WRITE(name, kind)                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                             \
      name(const float* qkv, const int32_t* positions, const int32_t* block_tables, void* cache, \
           uint64_t T, uint64_t tokens_per_seq, uint64_t layer, uint64_t num_blocks,            \
           uint64_t kv_heads, uint64_t block_size, uint64_t head_dim, uint64_t max_blocks,      \
           uint64_t row_stride, uint64_t k_offset) {                                            \
    axrt_cuda::kv_cache_write<axrt_cuda::KvKind::kind>(qkv, positions, block_tables, cache, T,  \
                                                       tokens_per_seq, layer, num_blocks,       \
                                                       kv_heads, block_size, head_dim,          \
                                                       max_blocks, row_stride, k_offset);       \
  }

AXRT_KV_CACHE_WRITE(axrt_kv_cache_write_f32, kF32)
AXRT_KV_CACHE_WRITE(axrt_kv_cache_write_bf16, kBf16)
AXRT_KV_CACHE_WRITE(axrt_kv_cache_write_fp8_e4m3, kFp8E4m3)

#define AXRT_ROPE_KV_CACHE_WRITE(name, kind)                                                       \
  extern "C" __global__ void __launch_bounds__(256)                                               \
      name(float* qkv, const int32_t* positions, const float* inv_freq,                           \
           const int32_t* block_tables, void* cache, uint64_t T, uint64_t tokens_per_seq,         \
           uint64_t heads, uint64_t layer, uint64_t num_blocks, uint64_t kv_heads,                \
           uint64_t block_size, uint64_t head_dim, uint64_t max_blocks, uint64_t row_stride,      \
           uint64_t k_offset, float attention_scaling) {                                          \
    axrt_cuda::rope_kv_cache_write<axrt_cuda::KvKind::kind>(                                      \
        qkv, positions, inv_freq, block_tables, cache, T, tokens_per_seq, heads, layer,           \
        num_blocks, kv_heads, block_size, head_dim, max_blocks, row_stride, k_offset,             \
        attention_scaling);                                                                       \
  }

AXRT_ROPE_KV_CACHE_WRITE(axrt_rope_kv_cache_write_f32, kF32)
AXRT_ROPE_KV_CACHE_WRITE(axrt_rope_kv_cache_write_bf16, kBf16)
AXRT_ROPE_KV_CACHE_WRITE(axrt_rope_kv_cache_write_fp8_e4m3, kFp8E4m3)
