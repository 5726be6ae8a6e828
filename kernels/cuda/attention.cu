// Attention over the paged KV cache (docs/llm.md). One warp computes one
// query: its lanes split head_dim (at most 256, eight elements a lane), and
// it walks the keys at positions 0 .. its own position one at a time through
// the block table, with an online softmax in f32 (running maximum m, running
// sum l, output rescaled by exp(m_old - m_new)). A block of any whole number
// of warps (256 threads in the executables axrt writes) serves:
//   prefill: the up to 16 queries of one head in block (i, h), t in
//            [16 i, 16 i + 16);
//   decode:  every query head of KV head g of sequence b in block (b, g).
// The block checks every position and block id it will use before any warp
// reads the cache, and returns without writing when one is out of range.
// The decode kernels read an f32, bf16 or fp8 cache (common.cuh, KvKind).
#include "common.cuh"

namespace axrt_cuda {
namespace {

constexpr uint64_t kAttentionMaxHeadDim = 256;
constexpr unsigned kAttentionPerLane = kAttentionMaxHeadDim / kWarpSize;
constexpr uint64_t kPrefillQueries = 16;

struct FloatSumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// The cache of one KV head of one sequence.
struct PagedHead {
  const uint8_t* keys;    // block 0 of the head's key plane
  const uint8_t* values;  // block 0 of its value plane
  const int32_t* table;
  uint64_t block_stride;  // bytes from one block of a plane to the next
  uint64_t block_size;
  uint64_t head_dim;
};

__device__ __forceinline__ PagedHead paged_head(KvKind kind, const void* cache,
                                                const int32_t* table, uint64_t layer,
                                                uint64_t num_blocks, uint64_t kv_heads,
                                                uint64_t kv_head, uint64_t block_size,
                                                uint64_t head_dim) {
  const uint64_t run = kv_run_bytes(kind, block_size, head_dim);
  const uint64_t plane = num_blocks * kv_heads * run;
  const uint8_t* keys = static_cast<const uint8_t*>(cache) + layer * 2 * plane + kv_head * run;
  return {keys, keys + plane, table, kv_heads * run, block_size, head_dim};
}

// The shapes every block needs, and a block of whole warps.
__device__ __forceinline__ bool shapes_ok(uint64_t heads, uint64_t kv_heads, uint64_t head_dim,
                                          uint64_t block_size, uint64_t max_blocks,
                                          uint64_t row_stride) {
  return blockDim.x % kWarpSize == 0 && blockDim.y == 1 && blockDim.z == 1 && head_dim > 0 &&
         head_dim <= kAttentionMaxHeadDim && heads > 0 && kv_heads > 0 && heads % kv_heads == 0 &&
         block_size > 0 && max_blocks > 0 && heads <= row_stride / head_dim;
}

// Whether positions 0 .. `last` lie in the block table and their blocks in
// the pool; every thread of the block gets the same answer.
__device__ __forceinline__ bool sequence_ok(const int32_t* table, int64_t last, uint64_t block_size,
                                            uint64_t max_blocks, uint64_t num_blocks) {
  if (last < 0 || static_cast<uint64_t>(last) / block_size >= max_blocks) return false;
  const uint64_t blocks = static_cast<uint64_t>(last) / block_size + 1;
  int bad = 0;
  for (uint64_t i = threadIdx.x; i < blocks; i += blockDim.x) {
    bad |= table[i] < 0 || static_cast<uint64_t>(table[i]) >= num_blocks;
  }
  return __syncthreads_or(bad) == 0;
}

// out[0, D) = softmax(scale q . K^T) V over the keys at positions 0 .. last,
// computed by the calling warp.
template <KvKind kKind>
__device__ void attend_warp(const float* q, float* out, int64_t last, const PagedHead& head,
                            float scale) {
  const unsigned lane = threadIdx.x % kWarpSize;
  const uint64_t D = head.head_dim;
  float query[kAttentionPerLane];
  float acc[kAttentionPerLane];
#pragma unroll
  for (unsigned k = 0; k < kAttentionPerLane; ++k) {
    const uint64_t d = lane + k * kWarpSize;
    query[k] = d < D ? q[d] : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY;
  float l = 0.0f;
  for (int64_t p = 0; p <= last; ++p) {
    const uint64_t block = static_cast<uint64_t>(head.table[p / head.block_size]);
    const uint64_t slot = p % head.block_size;
    const uint8_t* key = head.keys + block * head.block_stride;
    const uint8_t* value = head.values + block * head.block_stride;
    float s = 0.0f;
#pragma unroll
    for (unsigned k = 0; k < kAttentionPerLane; ++k) {
      const uint64_t d = lane + k * kWarpSize;
      if (d < D) s += query[k] * kv_element<kKind>(key, slot, d, head.block_size, D);
    }
    s = warp_reduce(s, FloatSumOp{}) * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float weight = expf(s - m_new);
    l = l * correction + weight;
#pragma unroll
    for (unsigned k = 0; k < kAttentionPerLane; ++k) {
      const uint64_t d = lane + k * kWarpSize;
      if (d < D) {
        acc[k] = acc[k] * correction +
                 weight * kv_element<kKind>(value, slot, d, head.block_size, D);
      }
    }
    m = m_new;
  }
#pragma unroll
  for (unsigned k = 0; k < kAttentionPerLane; ++k) {
    const uint64_t d = lane + k * kWarpSize;
    if (d < D) out[d] = acc[k] / l;
  }
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_attention_prefill_f32(const float* qkv, const int32_t* positions,
                               const int32_t* block_table, const float* cache, float* out,
                               uint64_t T, uint64_t heads, uint64_t kv_heads, uint64_t head_dim,
                               uint64_t layer, uint64_t num_blocks, uint64_t block_size,
                               uint64_t max_blocks, uint64_t row_stride, float scale) {
  using namespace axrt_cuda;
  if (!shapes_ok(heads, kv_heads, head_dim, block_size, max_blocks, row_stride)) return;
  const uint64_t t0 = static_cast<uint64_t>(blockIdx.x) * kPrefillQueries;
  const uint64_t h = blockIdx.y;
  if (blockIdx.z != 0 || t0 >= T || h >= heads) return;
  const uint64_t count = T - t0 < kPrefillQueries ? T - t0 : kPrefillQueries;
  int64_t last = 0;
  for (uint64_t q = 0; q < count; ++q) {
    const int32_t position = positions[t0 + q];
    if (position < 0) return;
    last = position > last ? position : last;
  }
  if (!sequence_ok(block_table, last, block_size, max_blocks, num_blocks)) return;
  const PagedHead head = paged_head(KvKind::kF32, cache, block_table, layer, num_blocks, kv_heads,
                                    h / (heads / kv_heads), block_size, head_dim);
  const unsigned warps = blockDim.x / kWarpSize;
  for (uint64_t q = threadIdx.x / kWarpSize; q < count; q += warps) {
    const uint64_t t = t0 + q;
    attend_warp<KvKind::kF32>(qkv + t * row_stride + h * head_dim, out + (t * heads + h) * head_dim, positions[t],
                head, scale);
  }
}

namespace axrt_cuda {
namespace {

template <KvKind kKind>
__device__ __forceinline__ void attention_decode(const float* qkv, const int32_t* positions,
                                                 const int32_t* block_tables, const void* cache,
                                                 float* out, uint64_t B, uint64_t heads,
                                                 uint64_t kv_heads, uint64_t head_dim,
                                                 uint64_t layer, uint64_t num_blocks,
                                                 uint64_t block_size, uint64_t max_blocks,
                                                 uint64_t row_stride, float scale) {
  if (!shapes_ok(heads, kv_heads, head_dim, block_size, max_blocks, row_stride)) return;
  if (kKind == KvKind::kFp8E4m3 && head_dim % 16 != 0) return;
  const uint64_t b = blockIdx.x;
  const uint64_t kv_head = blockIdx.y;
  if (blockIdx.z != 0 || b >= B || kv_head >= kv_heads) return;
  const int32_t* table = block_tables + b * max_blocks;
  const int64_t last = positions[b];
  if (!sequence_ok(table, last, block_size, max_blocks, num_blocks)) return;
  const PagedHead head =
      paged_head(kKind, cache, table, layer, num_blocks, kv_heads, kv_head, block_size, head_dim);
  const uint64_t group = heads / kv_heads;
  const unsigned warps = blockDim.x / kWarpSize;
  for (uint64_t g = threadIdx.x / kWarpSize; g < group; g += warps) {
    const uint64_t h = kv_head * group + g;
    attend_warp<kKind>(qkv + b * row_stride + h * head_dim, out + (b * heads + h) * head_dim,
                       last, head, scale);
  }
}

}  // namespace
}  // namespace axrt_cuda

#define AXRT_ATTENTION_DECODE(name, kind)                                                         \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      name(const float* qkv, const int32_t* positions, const int32_t* block_tables,               \
           const void* cache, float* out, uint64_t B, uint64_t heads, uint64_t kv_heads,          \
           uint64_t head_dim, uint64_t layer, uint64_t num_blocks, uint64_t block_size,           \
           uint64_t max_blocks, uint64_t row_stride, float scale) {                               \
    axrt_cuda::attention_decode<axrt_cuda::KvKind::kind>(qkv, positions, block_tables, cache,    \
                                                         out, B, heads, kv_heads, head_dim,       \
                                                         layer, num_blocks, block_size,           \
                                                         max_blocks, row_stride, scale);          \
  }

AXRT_ATTENTION_DECODE(axrt_attention_decode_f32, kF32)
AXRT_ATTENTION_DECODE(axrt_attention_decode_kv_bf16, kBf16)
AXRT_ATTENTION_DECODE(axrt_attention_decode_kv_fp8_e4m3, kFp8E4m3)
