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

// ---------------------------------------------------------------------------
// Split decode (docs/kernels.md, "Split attention"). Block (b, g, s) covers
// chunk s of token b's context, whole KV blocks of it, for every query head
// of KV head g, and writes each head's record {m, l, acc} to `partials`.
// The chunk's keys and values pass through shared memory a tile at a time,
// read once for the whole group: the block's threads load a tile's rows 16
// bytes at a time (converting bf16 and fp8 to f32), then each warp scores
// the tile for one query head, a key a lane, and accumulates its values,
// four output elements a lane (eight past 128). Groups of more than eight
// query heads take a pass over the chunk per eight. Needs blocks of 256
// threads (a query row in shared memory per warp); others return without
// writing.
// ---------------------------------------------------------------------------

namespace axrt_cuda {
namespace {

constexpr unsigned kSplitTileKeys = 32;      // keys of a tile when head_dim <= 128
constexpr unsigned kSplitTileKeysWide = 16;  // when head_dim is in (128, 256]
// A key row in shared memory: head_dim rounded up to 4, plus 4 when that is
// a multiple of 8 floats, so that a lane per key reads 16 bytes without bank
// conflicts: max(32 x 132, 16 x 260) floats for the keys, and 32 x 128 (16 x
// 256) for the values, which every lane of a warp reads along a row.
constexpr unsigned kSplitKeyFloats = 4224;
constexpr unsigned kSplitValueFloats = 4096;

// Chunk `split` of the positions 0 .. last: [*begin, *end), ceil((last + 1)
// / splits) rounded up to whole blocks; empty past the context. In 32-bit
// arithmetic (positions are i32): a divisor past 2^31 divides any position
// as 2^31 does.
__device__ __forceinline__ uint32_t clamp31(uint64_t v) {
  return v > 0x80000000u ? 0x80000000u : static_cast<uint32_t>(v);
}

__device__ __forceinline__ void split_chunk(int64_t last, uint64_t splits, uint64_t block_size,
                                            uint64_t split, uint64_t* begin, uint64_t* end) {
  const uint32_t n = static_cast<uint32_t>(last) + 1;
  const uint32_t blocks = (n - 1) / clamp31(splits) / clamp31(block_size);
  const uint64_t chunk = (static_cast<uint64_t>(blocks) + 1) * block_size;
  if (split > (n - 1) / clamp31(chunk)) {
    *begin = *end = n;
    return;
  }
  *begin = split * chunk;
  *end = n - *begin <= chunk ? n : *begin + chunk;
}

// Where a tile's rows live: each row's byte offset in its plane, and (fp8)
// the scales of its key and value rows.
struct TileRows {
  uint64_t offset[kSplitTileKeys];
  float key_scale[kSplitTileKeys];
  float value_scale[kSplitTileKeys];
};

// 16 bytes of stored elements to f32 at `dst` (16-byte aligned shared memory).
template <KvKind kKind>
__device__ __forceinline__ void widen_unit(uint4 raw, float scale, float* dst) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (kKind == KvKind::kF32) {
    *reinterpret_cast<float4*>(dst) = make_float4(__uint_as_float(raw.x), __uint_as_float(raw.y),
                                                  __uint_as_float(raw.z), __uint_as_float(raw.w));
  } else if constexpr (kKind == KvKind::kBf16) {
#pragma unroll
    for (unsigned i = 0; i < 2; ++i) {
      *reinterpret_cast<float4*>(dst + 4 * i) = make_float4(
          __uint_as_float(words[2 * i] << 16), __uint_as_float(words[2 * i] & 0xffff0000u),
          __uint_as_float(words[2 * i + 1] << 16),
          __uint_as_float(words[2 * i + 1] & 0xffff0000u));
    }
  } else {
#pragma unroll
    for (unsigned i = 0; i < 4; ++i) {
      const uint32_t w = words[i];
      *reinterpret_cast<float4*>(dst + 4 * i) =
          make_float4(e4m3fn_to_float(w & 0xffu) * scale, e4m3fn_to_float((w >> 8) & 0xffu) * scale,
                      e4m3fn_to_float((w >> 16) & 0xffu) * scale, e4m3fn_to_float(w >> 24) * scale);
    }
  }
}

// Element d of a stored row at `row`, as f32 (kv_element's arithmetic).
template <KvKind kKind>
__device__ __forceinline__ float row_element(const uint8_t* row, uint64_t d, float scale) {
  if constexpr (kKind == KvKind::kF32) {
    return reinterpret_cast<const float*>(row)[d];
  } else if constexpr (kKind == KvKind::kBf16) {
    return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(row)[d]) << 16);
  } else {
    return e4m3fn_to_float(row[d]) * scale;
  }
}

// Loads the n rows of a tile into keys (rows of key_stride floats) and
// values (rows of padded floats), zero past head_dim. `wide`: every row is
// 16-byte aligned and a whole number of 16-byte units.
template <KvKind kKind>
__device__ __forceinline__ void load_tile(const PagedHead& head, const TileRows& rows, unsigned n,
                                          unsigned padded, unsigned key_stride, bool wide,
                                          float* keys, float* values) {
  const unsigned D = static_cast<unsigned>(head.head_dim);
  constexpr unsigned kBytes = kKind == KvKind::kF32 ? 4 : kKind == KvKind::kBf16 ? 2 : 1;
  if (wide) {
    constexpr unsigned kPerUnit = 16 / kBytes;
    const unsigned units = D / kPerUnit;
    for (unsigned i = threadIdx.x; i < n * units; i += blockDim.x) {
      const unsigned r = i / units;
      const unsigned u = i - r * units;
      const uint64_t offset = rows.offset[r] + u * 16;
      widen_unit<kKind>(__ldg(reinterpret_cast<const uint4*>(head.keys + offset)),
                        rows.key_scale[r], keys + r * key_stride + u * kPerUnit);
      widen_unit<kKind>(__ldg(reinterpret_cast<const uint4*>(head.values + offset)),
                        rows.value_scale[r], values + r * padded + u * kPerUnit);
    }
    return;
  }
  for (unsigned i = threadIdx.x; i < n * padded; i += blockDim.x) {
    const unsigned r = i / padded;
    const unsigned d = i - r * padded;
    float k = 0.0f;
    float v = 0.0f;
    if (d < D) {
      k = row_element<kKind>(head.keys + rows.offset[r], d, rows.key_scale[r]);
      v = row_element<kKind>(head.values + rows.offset[r], d, rows.value_scale[r]);
    }
    keys[r * key_stride + d] = k;
    values[r * padded + d] = v;
  }
}

template <KvKind kKind>
__device__ __forceinline__ void attention_decode_split(
    const float* qkv, const int32_t* positions, const int32_t* block_tables, const void* cache,
    float* partials, uint64_t B, uint64_t heads, uint64_t kv_heads, uint64_t head_dim,
    uint64_t layer, uint64_t num_blocks, uint64_t block_size, uint64_t max_blocks,
    uint64_t row_stride, float scale, uint64_t splits) {
  __shared__ __align__(16) float keys[kSplitKeyFloats];
  __shared__ __align__(16) float values[kSplitValueFloats];
  __shared__ __align__(16) float queries[kBlockWarps][kAttentionMaxHeadDim];
  __shared__ TileRows rows;

  if (blockDim.x != kBlockThreads || splits == 0 ||
      !shapes_ok(heads, kv_heads, head_dim, block_size, max_blocks, row_stride)) {
    return;
  }
  if (kKind == KvKind::kFp8E4m3 && head_dim % 16 != 0) return;
  const uint64_t b = blockIdx.x;
  const uint64_t kv_head = blockIdx.y;
  const uint64_t split = blockIdx.z;
  if (b >= B || kv_head >= kv_heads || split >= splits) return;
  const int32_t* table = block_tables + b * max_blocks;
  const int64_t last = positions[b];
  if (!sequence_ok(table, last, block_size, max_blocks, num_blocks)) return;
  uint64_t begin, end;
  split_chunk(last, splits, block_size, split, &begin, &end);
  const PagedHead head =
      paged_head(kKind, cache, table, layer, num_blocks, kv_heads, kv_head, block_size, head_dim);

  const unsigned D = static_cast<unsigned>(head_dim);
  const unsigned padded = (D + 3) / 4 * 4;
  const unsigned key_stride = padded + (padded % 8 == 0 ? 4 : 0);
  const unsigned tile_keys = padded <= 128 ? kSplitTileKeys : kSplitTileKeysWide;
  constexpr unsigned kBytes = kKind == KvKind::kF32 ? 4 : kKind == KvKind::kBf16 ? 2 : 1;
  const uint64_t row_bytes = head_dim * kBytes;
  const bool wide = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(cache) % 16 == 0 &&
                    kv_run_bytes(kKind, block_size, head_dim) % 16 == 0;

  const unsigned warp = threadIdx.x / kWarpSize;
  const unsigned lane = threadIdx.x % kWarpSize;
  const uint64_t group = heads / kv_heads;
  for (uint64_t g0 = 0; g0 < group; g0 += kBlockWarps) {
    const bool active = g0 + warp < group;
    const uint64_t h = kv_head * group + g0 + warp;
    float* query = queries[warp];
    __syncwarp();
    if (active) {
      for (unsigned d = lane; d < padded; d += kWarpSize) {
        query[d] = d < D ? qkv[b * row_stride + h * head_dim + d] : 0.0f;
      }
    }
    float m = -INFINITY;
    float l = 0.0f;
    float acc[8];
#pragma unroll
    for (unsigned k = 0; k < 8; ++k) acc[k] = 0.0f;

    for (uint64_t first = begin; first < end; first += tile_keys) {
      const unsigned n = static_cast<unsigned>(end - first < tile_keys ? end - first : tile_keys);
      __syncthreads();  // the previous tile is consumed
      if (threadIdx.x < n) {
        const uint32_t p = static_cast<uint32_t>(first) + threadIdx.x;
        const uint32_t slot = p % clamp31(block_size);
        const uint64_t run =
            static_cast<uint64_t>(table[p / clamp31(block_size)]) * head.block_stride;
        rows.offset[threadIdx.x] = run + slot * row_bytes;
        float key_scale = 1.0f;
        float value_scale = 1.0f;
        if constexpr (kKind == KvKind::kFp8E4m3) {
          const uint64_t at = run + block_size * head_dim + slot * 4;
          key_scale = *reinterpret_cast<const float*>(head.keys + at);
          value_scale = *reinterpret_cast<const float*>(head.values + at);
        }
        rows.key_scale[threadIdx.x] = key_scale;
        rows.value_scale[threadIdx.x] = value_scale;
      }
      __syncthreads();
      load_tile<kKind>(head, rows, n, padded, key_stride, wide, keys, values);
      __syncthreads();
      if (!active) continue;

      // Key `lane` of the tile: its score, in d order over four sums.
      float s = -INFINITY;
      if (lane < n) {
        const float* key = keys + lane * key_stride;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (unsigned d = 0; d < padded; d += 4) {
          const float4 qv = *reinterpret_cast<const float4*>(query + d);
          const float4 kv = *reinterpret_cast<const float4*>(key + d);
          s0 = fmaf(qv.x, kv.x, s0);
          s1 = fmaf(qv.y, kv.y, s1);
          s2 = fmaf(qv.z, kv.z, s2);
          s3 = fmaf(qv.w, kv.w, s3);
        }
        s = ((s0 + s1) + (s2 + s3)) * scale;
      }
      const float m_new = fmaxf(m, warp_reduce(s, MaxOp{}));
      const float correction = expf(m - m_new);  // 0 for the first tile (m = -inf)
      const float weight = lane < n ? expf(s - m_new) : 0.0f;
      l = l * correction + warp_reduce(weight, FloatSumOp{});
#pragma unroll
      for (unsigned k = 0; k < 8; ++k) acc[k] *= correction;
      for (unsigned j = 0; j < n; ++j) {
        const float p = __shfl_sync(0xffffffffu, weight, j);
        const float* value = values + j * padded;
#pragma unroll
        for (unsigned half = 0; half < 2; ++half) {
          const unsigned d = 4 * lane + 128 * half;
          if (d < padded) {
            const float4 v = *reinterpret_cast<const float4*>(value + d);
            acc[4 * half] = fmaf(p, v.x, acc[4 * half]);
            acc[4 * half + 1] = fmaf(p, v.y, acc[4 * half + 1]);
            acc[4 * half + 2] = fmaf(p, v.z, acc[4 * half + 2]);
            acc[4 * half + 3] = fmaf(p, v.w, acc[4 * half + 3]);
          }
        }
      }
      m = m_new;
    }

    if (active) {
      float* record = partials + ((b * heads + h) * splits + split) * (head_dim + 2);
      if (lane == 0) {
        record[0] = m;
        record[1] = l;
      }
#pragma unroll
      for (unsigned k = 0; k < 8; ++k) {
        const unsigned d = 4 * lane + 128 * (k / 4) + k % 4;
        if (d < D) record[2 + d] = acc[k];
      }
    }
  }
}

}  // namespace
}  // namespace axrt_cuda

#define AXRT_ATTENTION_DECODE_SPLIT(name, kind)                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      name(const float* qkv, const int32_t* positions, const int32_t* block_tables,               \
           const void* cache, float* partials, uint64_t B, uint64_t heads, uint64_t kv_heads,     \
           uint64_t head_dim, uint64_t layer, uint64_t num_blocks, uint64_t block_size,           \
           uint64_t max_blocks, uint64_t row_stride, float scale, uint64_t splits) {              \
    axrt_cuda::attention_decode_split<axrt_cuda::KvKind::kind>(                                   \
        qkv, positions, block_tables, cache, partials, B, heads, kv_heads, head_dim, layer,       \
        num_blocks, block_size, max_blocks, row_stride, scale, splits);                           \
  }

AXRT_ATTENTION_DECODE_SPLIT(axrt_attention_decode_split_f32, kF32)
AXRT_ATTENTION_DECODE_SPLIT(axrt_attention_decode_split_kv_bf16, kBf16)
AXRT_ATTENTION_DECODE_SPLIT(axrt_attention_decode_split_kv_fp8_e4m3, kFp8E4m3)

// Block (b, h): out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M),
// M = max_s m_s, each sum in split order; a thread per output element.
extern "C" __global__ void __launch_bounds__(256)
    axrt_attention_combine_f32(const float* partials, float* out, uint64_t B, uint64_t heads,
                               uint64_t head_dim, uint64_t splits) {
  if (head_dim == 0 || splits == 0) return;
  const uint64_t b = blockIdx.x;
  const uint64_t h = blockIdx.y;
  if (blockIdx.z != 0 || b >= B || h >= heads) return;
  const uint64_t stride = head_dim + 2;
  const float* records = partials + (b * heads + h) * splits * stride;
  float top = -INFINITY;
  for (uint64_t s = 0; s < splits; ++s) top = fmaxf(top, records[s * stride]);
  float sum = 0.0f;
  for (uint64_t s = 0; s < splits; ++s) {
    sum = fmaf(records[s * stride + 1], expf(records[s * stride] - top), sum);
  }
  for (uint64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (uint64_t s = 0; s < splits; ++s) {
      o = fmaf(records[s * stride + 2 + d], expf(records[s * stride] - top), o);
    }
    out[(b * heads + h) * head_dim + d] = o / sum;
  }
}
