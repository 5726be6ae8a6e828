// Attention over the paged KV cache (docs/llm.md): prefill, where a
// workgroup serves up to 16 consecutive queries of one head, and decode,
// where a workgroup serves every query head of one KV head of one sequence,
// so that the group's keys and values are read once.
//
// Both read the cache in place through the block table, a chunk of at most
// kKeyChunk keys at a time, and keep an online softmax per query in f32: the
// running maximum m, the running sum l of exp(s - m) and the output
// accumulated with the same weights, rescaled by exp(m_old - m_new) whenever
// the maximum grows. A query only ever touches the keys at or before its
// position, so slots a sequence has not written yet are never read.
//
// The cache holds f32, bf16 or fp8 e4m3 with a scale per row (kv_cache.h);
// a chunk of bf16 or fp8 keys and values is read as f32 into a buffer of the
// workgroup's, then scored and accumulated as f32 ones are.
//
// Split decode (docs/kernels.md, "Split attention") runs the same pass over
// one chunk of whole blocks of a token's context and writes the chunk's m, l
// and unnormalised output; the combine kernel merges a token's chunks.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/transformer_simd.h"

namespace axrt::kernels::cpu {
namespace {

using transformer::Floats;
using transformer::load;
using transformer::splat;
using transformer::store;

constexpr uint64_t kPrefillQueries = 16;  // queries of a prefill workgroup (grid x = ceil(T / 16))
constexpr int kMaxQueries = 16;           // queries one pass over the keys serves
constexpr uint64_t kMaxHeadDim = 256;
constexpr int kKeyChunk = 64;  // keys scored at a time; a multiple of every kLanes

// The cached keys and values of one KV head of one sequence.
struct PagedHead {
  const uint8_t* keys;    // block 0 of the head's key plane
  const uint8_t* values;  // block 0 of its value plane
  const int32_t* table;
  uint64_t block_stride;  // bytes from one block of the plane to the next
  uint64_t block_size;
  uint64_t head_dim;
};

PagedHead paged_head(kv::Kind kind, const AttentionArgs* a, const int32_t* table,
                     uint64_t kv_head) {
  const auto* cache = static_cast<const uint8_t*>(a->cache);
  const uint64_t run = kv::run_bytes(kind, a->block_size, a->head_dim);
  const uint8_t* keys =
      cache + kv::run_offset(kind, a->layer, 0, 0, a->num_blocks, a->kv_heads, kv_head,
                             a->block_size, a->head_dim);
  const uint8_t* values = keys + a->num_blocks * a->kv_heads * run;
  return {keys, values, table, a->kv_heads * run, a->block_size, a->head_dim};
}

// The queries one pass serves: row pointers into qkv and out, and each
// query's last key position. The pass reads the keys from position `start`
// (a multiple of block_size) on; `partial` makes out[q] the record {m, l,
// acc[0, D)} of the keys it read instead of acc / l.
struct Queries {
  const float* q[kMaxQueries];
  float* out[kMaxQueries];
  int64_t limit[kMaxQueries];
  int count;
  int64_t start = 0;
  bool partial = false;
};

axrt_kernel_result_t check_shapes(kv::Kind kind, const AttentionArgs* a,
                                  const axrt_kernel_workgroup_t* workgroup) {
  const uint64_t D = a->head_dim;
  if (D == 0 || D > kMaxHeadDim || a->heads == 0 || a->kv_heads == 0 ||
      a->heads % a->kv_heads != 0 || a->block_size == 0 || a->max_blocks == 0 ||
      a->heads > a->row_stride / D) {
    return invalid_argument(
        workgroup,
        "heads %" PRIu64 " must be a positive multiple of kv_heads %" PRIu64 ", head_dim %" PRIu64
        " in [1, %" PRIu64 "], block_size %" PRIu64 " and max_blocks %" PRIu64
        " positive, and the query heads must fit a row of %" PRIu64,
        a->heads, a->kv_heads, D, kMaxHeadDim, a->block_size, a->max_blocks, a->row_stride);
  }
  if (kind == kv::Kind::kFp8E4m3 && D % kv::kFp8HeadDimMultiple != 0) {
    return invalid_argument(workgroup,
                            "head_dim %" PRIu64 ": an fp8 KV cache needs a multiple of %" PRIu64, D,
                            kv::kFp8HeadDimMultiple);
  }
  return AXRT_KERNEL_OK;
}

// Checks that positions 0 .. `last` of a sequence lie in its block table and
// that the blocks holding them are in the pool.
axrt_kernel_result_t check_sequence(const AttentionArgs* a, const int32_t* table, int64_t last,
                                    const char* what, uint64_t index,
                                    const axrt_kernel_workgroup_t* workgroup) {
  if (last < 0 || static_cast<uint64_t>(last) / a->block_size >= a->max_blocks) {
    return invalid_argument(workgroup,
                            "%s %" PRIu64 " is at position %" PRId64
                            ", outside the block table's [0, %" PRIu64 ")",
                            what, index, last, a->max_blocks * a->block_size);
  }
  const uint64_t blocks = static_cast<uint64_t>(last) / a->block_size + 1;
  for (uint64_t i = 0; i < blocks; ++i) {
    if (table[i] < 0 || static_cast<uint64_t>(table[i]) >= a->num_blocks) {
      return invalid_argument(workgroup,
                              "%s %" PRIu64 ": block table entry %" PRIu64 " is %" PRId32
                              ", outside [0, %" PRIu64 ")",
                              what, index, i, table[i], a->num_blocks);
    }
  }
  return AXRT_KERNEL_OK;
}

template <int kLanes>
AXRT_CPU_INLINE float dot(const float* __restrict a, const float* __restrict b, uint64_t n) {
  using F = typename Floats<kLanes>::F;
  F s0 = {};
  F s1 = {};
  uint64_t d = 0;
  for (; d + 2 * kLanes <= n; d += 2 * kLanes) {
    s0 += load<F>(a + d) * load<F>(b + d);
    s1 += load<F>(a + d + kLanes) * load<F>(b + d + kLanes);
  }
  if (d + kLanes <= n) {
    s0 += load<F>(a + d) * load<F>(b + d);
    d += kLanes;
  }
  float s = transformer::hsum(s0 + s1);
  for (; d < n; ++d) s += a[d] * b[d];
  return s;
}

// ---------------------------------------------------------------------------
// Scores of kLanes keys at once: one accumulator vector per key, then a
// transposing reduction that folds the kLanes vectors into one whose lane j
// is the sum of accumulator j, in log2(kLanes) levels of two shuffles and an
// add per pair, instead of a horizontal sum per key.
// ---------------------------------------------------------------------------

// Folding x and y, each kLanes / kWidth segments of kWidth partial sums,
// gives segments of kWidth / 2: x's segments (each half added to the other)
// then y's. The shuffles take the low or the high half of every segment.
template <int kLanes, int kWidth, bool kHigh>
constexpr int fold_lane(int i) {
  constexpr int half = kWidth / 2;
  constexpr int segments = kLanes / kWidth;
  const bool from_y = i >= segments * half;
  const int k = from_y ? i - segments * half : i;
  return (from_y ? kLanes : 0) + (k / half) * kWidth + k % half + (kHigh ? half : 0);
}

template <int kLanes, int kWidth, class V, size_t... kIndex>
AXRT_CPU_INLINE V fold_pair(V x, V y, std::index_sequence<kIndex...>) {
  return __builtin_shufflevector(x, y, fold_lane<kLanes, kWidth, false>(kIndex)...) +
         __builtin_shufflevector(x, y, fold_lane<kLanes, kWidth, true>(kIndex)...);
}

// acc[0 .. kWidth) hold kLanes / kWidth keys each; leaves acc[0] with one
// key a lane, in order.
template <int kLanes, int kWidth, class V>
AXRT_CPU_INLINE void fold(V* acc) {
  if constexpr (kWidth > 1) {
#pragma GCC unroll 8
    for (int i = 0; i < kWidth / 2; ++i) {
      acc[i] =
          fold_pair<kLanes, kWidth>(acc[2 * i], acc[2 * i + 1], std::make_index_sequence<kLanes>{});
    }
    fold<kLanes, kWidth / 2>(acc);
  }
}

// s[j] = scale (q . keys[j D .. j D + D)) for j < kLanes.
template <int kLanes>
AXRT_CPU_INLINE void score_lanes(const float* __restrict q, const float* __restrict keys,
                                 uint64_t D, float scale, float* __restrict s) {
  using F = typename Floats<kLanes>::F;
  F acc[kLanes];
#pragma GCC unroll 16
  for (int j = 0; j < kLanes; ++j) acc[j] = F{};
  uint64_t d = 0;
  for (; d + kLanes <= D; d += kLanes) {
    const F qv = load<F>(q + d);
#pragma GCC unroll 16
    for (int j = 0; j < kLanes; ++j) acc[j] += qv * load<F>(keys + j * D + d);
  }
  fold<kLanes, kLanes>(acc);
  F result = acc[0];
  if (d < D) {
    for (int j = 0; j < kLanes; ++j) {
      float tail = 0.0f;
      for (uint64_t e = d; e < D; ++e) tail += q[e] * keys[j * D + e];
      result[j] += tail;
    }
  }
  store(s, result * splat<F>(scale));
}

// Asks for bytes [0, n) of `a` and of `b` to be brought into the cache, a
// line of each in turn.
AXRT_CPU_INLINE void prefetch(const uint8_t* a, const uint8_t* b, uint64_t n) {
  for (uint64_t offset = 0; offset < n; offset += 64) {
    __builtin_prefetch(a + offset);
    __builtin_prefetch(b + offset);
  }
}

// o[q][0, D) += sum over j < n of p[q][j] v[j D .. j D + D) for kQueries
// queries at once, so that each value row is loaded once for all of them.
template <int kLanes, int kQueries>
AXRT_CPU_INLINE void accumulate_values(float* const* __restrict o, const float* const* __restrict p,
                                       const float* __restrict v, int n, uint64_t D) {
  using F = typename Floats<kLanes>::F;
  constexpr int kVectors = 4;
  uint64_t d = 0;
  for (; d + kVectors * kLanes <= D; d += kVectors * kLanes) {
    F acc[kQueries][kVectors];
#pragma GCC unroll 4
    for (int q = 0; q < kQueries; ++q) {
#pragma GCC unroll 4
      for (int k = 0; k < kVectors; ++k) acc[q][k] = load<F>(o[q] + d + k * kLanes);
    }
    const float* vd = v + d;
    for (int j = 0; j < n; ++j, vd += D) {
      F row[kVectors];
#pragma GCC unroll 4
      for (int k = 0; k < kVectors; ++k) row[k] = load<F>(vd + k * kLanes);
#pragma GCC unroll 4
      for (int q = 0; q < kQueries; ++q) {
        const F pj = splat<F>(p[q][j]);
#pragma GCC unroll 4
        for (int k = 0; k < kVectors; ++k) acc[q][k] += pj * row[k];
      }
    }
#pragma GCC unroll 4
    for (int q = 0; q < kQueries; ++q) {
#pragma GCC unroll 4
      for (int k = 0; k < kVectors; ++k) store(o[q] + d + k * kLanes, acc[q][k]);
    }
  }
  for (; d + kLanes <= D; d += kLanes) {
    F acc[kQueries];
#pragma GCC unroll 4
    for (int q = 0; q < kQueries; ++q) acc[q] = load<F>(o[q] + d);
    const float* vd = v + d;
    for (int j = 0; j < n; ++j, vd += D) {
      const F row = load<F>(vd);
#pragma GCC unroll 4
      for (int q = 0; q < kQueries; ++q) acc[q] += splat<F>(p[q][j]) * row;
    }
#pragma GCC unroll 4
    for (int q = 0; q < kQueries; ++q) store(o[q] + d, acc[q]);
  }
  for (; d < D; ++d) {
    for (int q = 0; q < kQueries; ++q) {
      float s = o[q][d];
      for (int j = 0; j < n; ++j) s += p[q][j] * v[j * D + d];
      o[q][d] = s;
    }
  }
}

template <kv::Kind kKind>
struct AttendBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const Queries* queries, const PagedHead* head, float scale) {
    using F = typename Floats<kLanes>::F;
    static_assert(kKeyChunk % kLanes == 0);
    // Queries sharing each value row: as many as the registers hold.
    constexpr int kTile = kLanes == 16 ? 4 : 2;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const uint64_t D = head->head_dim;
    const uint64_t BS = head->block_size;
    const int count = queries->count;

    // A chunk of bf16 or fp8 keys and values, read as f32.
    constexpr size_t kConverted = kKind == kv::Kind::kF32 ? 1 : kKeyChunk * kMaxHeadDim;
    alignas(64) float converted_keys[kConverted];
    alignas(64) float converted_values[kConverted];
    constexpr uint64_t kElement = kv::element_bytes(kKind);
    alignas(64) float acc[kMaxQueries][kMaxHeadDim];
    alignas(64) float scores[kMaxQueries][kKeyChunk];
    float m[kMaxQueries];
    float l[kMaxQueries];
    float* outputs[kMaxQueries];
    const float* weights[kMaxQueries];
    int64_t last = 0;
    for (int q = 0; q < count; ++q) {
      std::fill_n(acc[q], D, 0.0f);
      m[q] = kNegInf;
      l[q] = 0.0f;
      outputs[q] = acc[q];
      weights[q] = scores[q];
      last = std::max(last, queries->limit[q]);
    }

    const uint64_t blocks = static_cast<uint64_t>(last) / BS + 1;
    for (uint64_t logical = static_cast<uint64_t>(queries->start) / BS; logical < blocks;
         ++logical) {
      if (logical + 1 < blocks) {
        // The next block's keys and values, while this one is computed:
        // blocks lie anywhere in the pool, and the hardware prefetchers
        // only follow a stream within a page.
        const uint64_t rows =
            std::min<uint64_t>(BS, static_cast<uint64_t>(last) + 1 - (logical + 1) * BS);
        const uint64_t next = static_cast<uint64_t>(head->table[logical + 1]) * head->block_stride;
        prefetch(head->keys + next, head->values + next, rows * D * kElement);
      }
      const uint64_t block_offset =
          static_cast<uint64_t>(head->table[logical]) * head->block_stride;
      for (uint64_t r0 = 0; r0 < BS; r0 += kKeyChunk) {
        const int64_t first = static_cast<int64_t>(logical * BS + r0);
        if (first > last) break;
        const int n = static_cast<int>(
            std::min<int64_t>({kKeyChunk, static_cast<int64_t>(BS - r0), last - first + 1}));
        const float* keys;
        const float* values;
        if constexpr (kKind == kv::Kind::kF32) {
          keys = reinterpret_cast<const float*>(head->keys + block_offset) + r0 * D;
          values = reinterpret_cast<const float*>(head->values + block_offset) + r0 * D;
        } else {
          kv::read_rows<kLanes, kKind>(head->keys + block_offset, r0, n, BS, D, converted_keys);
          kv::read_rows<kLanes, kKind>(head->values + block_offset, r0, n, BS, D,
                                       converted_values);
          keys = converted_keys;
          values = converted_values;
        }
        // Query q sees the first visible[q] keys of the chunk; `common` of
        // them every query sees.
        int visible[kMaxQueries];
        int common = n;
        for (int q = 0; q < count; ++q) {
          visible[q] = static_cast<int>(std::clamp<int64_t>(queries->limit[q] - first + 1, 0, n));
          common = std::min(common, visible[q]);
        }

        for (int q = 0; q < count; ++q) {
          const int nq = visible[q];
          if (nq == 0) continue;
          float* s = scores[q];
          int j = 0;
          for (; j + kLanes <= nq; j += kLanes) {
            score_lanes<kLanes>(queries->q[q], keys + j * D, D, scale, s + j);
          }
          for (; j < nq; ++j) s[j] = dot<kLanes>(queries->q[q], keys + j * D, D) * scale;

          const int padded = (nq + kLanes - 1) / kLanes * kLanes;
          std::fill(s + nq, s + padded, kNegInf);
          F vmax = splat<F>(kNegInf);
          for (j = 0; j < padded; j += kLanes) {
            const F x = load<F>(s + j);
            vmax = x > vmax ? x : vmax;
          }
          const float chunk_max = transformer::hmax(vmax);
          if (chunk_max > m[q]) {
            // exp(-inf) is 0: the first chunk finds l and acc zero anyway.
            const float correction = std::exp(m[q] - chunk_max);
            m[q] = chunk_max;
            if (l[q] != 0.0f) {
              l[q] *= correction;
              for (uint64_t d = 0; d < D; ++d) acc[q][d] *= correction;
            }
          }
          const F shift = splat<F>(m[q]);
          F sum = {};
          for (j = 0; j < padded; j += kLanes) {
            const F p = transformer::exp_floats<kLanes>(load<F>(s + j) - shift);
            store(s + j, p);
            sum += p;
          }
          l[q] += transformer::hsum(sum);
        }

        // The keys every query sees, kTile queries per pass over the
        // values; then each query's own rest.
        int q = 0;
        if (common > 0) {
          for (; q + kTile <= count; q += kTile) {
            accumulate_values<kLanes, kTile>(outputs + q, weights + q, values, common, D);
          }
          for (; q < count; ++q) {
            accumulate_values<kLanes, 1>(outputs + q, weights + q, values, common, D);
          }
        }
        for (q = 0; q < count; ++q) {
          if (visible[q] > common) {
            float* o = acc[q];
            const float* p = scores[q] + common;
            accumulate_values<kLanes, 1>(&o, &p, values + common * D, visible[q] - common, D);
          }
        }
      }
    }

    for (int q = 0; q < count; ++q) {
      float* __restrict out = queries->out[q];
      if (queries->partial) {
        out[0] = m[q];
        out[1] = l[q];
        std::copy_n(acc[q], D, out + 2);
        continue;
      }
      const float inverse = 1.0f / l[q];
      for (uint64_t d = 0; d < D; ++d) out[d] = acc[q][d] * inverse;
    }
  }
};

}  // namespace

axrt_kernel_result_t check_attention_shapes(kv::Kind kind, const AttentionArgs* a,
                                            const axrt_kernel_workgroup_t* workgroup) {
  return check_shapes(kind, a, workgroup);
}

axrt_kernel_result_t check_attention_sequence(const AttentionArgs* a, const int32_t* table,
                                              int64_t last, const char* what, uint64_t index,
                                              const axrt_kernel_workgroup_t* workgroup) {
  return check_sequence(a, table, last, what, index, workgroup);
}

}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_attention_prefill_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const AttentionArgs*>(args);
  const uint64_t t0 = static_cast<uint64_t>(workgroup->workgroup_id.x) * kPrefillQueries;
  const uint64_t h = workgroup->workgroup_id.y;
  if (workgroup->workgroup_id.z != 0 || t0 >= a->count || h >= a->heads) return AXRT_KERNEL_OK;
  if (const axrt_kernel_result_t r = check_shapes(kv::Kind::kF32, a, workgroup)) return r;
  const uint64_t D = a->head_dim;
  const uint64_t kv_head = h / (a->heads / a->kv_heads);

  Queries queries;
  queries.count = static_cast<int>(std::min<uint64_t>(kPrefillQueries, a->count - t0));
  int64_t last = 0;
  uint64_t last_token = t0;
  for (int q = 0; q < queries.count; ++q) {
    const uint64_t t = t0 + q;
    const int32_t position = a->positions[t];
    if (position < 0) return check_sequence(a, a->block_tables, position, "token", t, workgroup);
    queries.q[q] = a->qkv + t * a->row_stride + h * D;
    queries.out[q] = a->out + (t * a->heads + h) * D;
    queries.limit[q] = position;
    if (position > last) {
      last = position;
      last_token = t;
    }
  }
  // The positions of every query of the workgroup, before any is computed.
  if (const axrt_kernel_result_t r =
          check_sequence(a, a->block_tables, last, "token", last_token, workgroup)) {
    return r;
  }
  const PagedHead head = paged_head(kv::Kind::kF32, a, a->block_tables, kv_head);
  transformer::run_transformer_isa<AttendBody<kv::Kind::kF32>>(&queries, &head, a->scale);
  return AXRT_KERNEL_OK;
}

namespace axrt::kernels::cpu {
namespace {

// The query heads of KV head `kv_head` of token `b` over the token's
// positions [begin, end] of `head`, into `out(h)` for query head h: softmax
// times V, or with `partial` the record {m, l, acc} (docs/kernels.md).
template <kv::Kind kKind, typename Out>
void attend_group(const AttentionArgs* a, uint64_t b, uint64_t kv_head, const PagedHead& head,
                  int64_t begin, int64_t end, bool partial, Out out) {
  const uint64_t group = a->heads / a->kv_heads;
  // Groups of more than kMaxQueries heads take several passes over the keys.
  for (uint64_t h0 = kv_head * group; h0 < (kv_head + 1) * group; h0 += kMaxQueries) {
    Queries queries;
    queries.count = static_cast<int>(std::min<uint64_t>(kMaxQueries, (kv_head + 1) * group - h0));
    queries.start = begin;
    queries.partial = partial;
    for (int q = 0; q < queries.count; ++q) {
      queries.q[q] = a->qkv + b * a->row_stride + (h0 + q) * a->head_dim;
      queries.out[q] = out(h0 + q);
      queries.limit[q] = end;
    }
    transformer::run_transformer_isa<AttendBody<kKind>>(&queries, &head, a->scale);
  }
}

template <kv::Kind kKind>
axrt_kernel_result_t attention_decode(const void* args, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const AttentionArgs*>(args);
  const uint64_t b = workgroup->workgroup_id.x;
  const uint64_t kv_head = workgroup->workgroup_id.y;
  if (workgroup->workgroup_id.z != 0 || b >= a->count || kv_head >= a->kv_heads) {
    return AXRT_KERNEL_OK;
  }
  if (const axrt_kernel_result_t r = check_shapes(kKind, a, workgroup)) return r;
  const int32_t* table = a->block_tables + b * a->max_blocks;
  const int32_t position = a->positions[b];
  if (const axrt_kernel_result_t r = check_sequence(a, table, position, "sequence", b, workgroup)) {
    return r;
  }
  attend_group<kKind>(a, b, kv_head, paged_head(kKind, a, table, kv_head), 0, position, false,
                      [&](uint64_t h) { return a->out + (b * a->heads + h) * a->head_dim; });
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_attention_decode_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode<kv::Kind::kF32>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_decode_kv_bf16(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode<kv::Kind::kBf16>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_decode_kv_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode<kv::Kind::kFp8E4m3>(args, workgroup);
}

// ---------------------------------------------------------------------------
// Split decode and its combine (docs/kernels.md, "Split attention")
// ---------------------------------------------------------------------------

namespace axrt::kernels::cpu {
namespace {

// Positions [begin, end) of chunk `split` of a context of positions 0 ..
// `last`: chunks of ceil((last + 1) / splits) rounded up to whole blocks, so
// they depend on the token's own position alone; a chunk past the context is
// empty (begin == end).
struct Chunk {
  uint64_t begin;
  uint64_t end;
};

Chunk split_chunk(int64_t last, uint64_t splits, uint64_t block_size, uint64_t split) {
  const uint64_t n = static_cast<uint64_t>(last) + 1;
  const uint64_t chunk = ((n - 1) / splits / block_size + 1) * block_size;
  if (split > (n - 1) / chunk) return {n, n};
  const uint64_t begin = split * chunk;
  return {begin, n - begin <= chunk ? n : begin + chunk};
}

template <kv::Kind kKind>
axrt_kernel_result_t attention_decode_split(const void* args,
                                            const axrt_kernel_workgroup_t* workgroup) {
  const auto* split_args = static_cast<const AttentionSplitArgs*>(args);
  const AttentionArgs* a = &split_args->attention;
  const uint64_t splits = split_args->splits;
  if (splits == 0) return invalid_argument(workgroup, "splits must be at least 1");
  const uint64_t b = workgroup->workgroup_id.x;
  const uint64_t kv_head = workgroup->workgroup_id.y;
  const uint64_t split = workgroup->workgroup_id.z;
  if (b >= a->count || kv_head >= a->kv_heads || split >= splits) return AXRT_KERNEL_OK;
  if (const axrt_kernel_result_t r = check_shapes(kKind, a, workgroup)) return r;
  const uint64_t D = a->head_dim;
  const int32_t* table = a->block_tables + b * a->max_blocks;
  const int32_t position = a->positions[b];
  // The whole context, as the decode kernels check it: a token with a bad
  // index gets no record from any workgroup.
  if (const axrt_kernel_result_t r = check_sequence(a, table, position, "sequence", b, workgroup)) {
    return r;
  }
  const Chunk chunk = split_chunk(position, splits, a->block_size, split);
  auto record = [&](uint64_t h) {
    return a->out + ((b * a->heads + h) * splits + split) * (D + 2);
  };
  if (chunk.begin == chunk.end) {
    const uint64_t group = a->heads / a->kv_heads;
    for (uint64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
      float* r = record(h);
      r[0] = -std::numeric_limits<float>::infinity();
      std::fill_n(r + 1, D + 1, 0.0f);
    }
    return AXRT_KERNEL_OK;
  }
  attend_group<kKind>(a, b, kv_head, paged_head(kKind, a, table, kv_head),
                      static_cast<int64_t>(chunk.begin), static_cast<int64_t>(chunk.end) - 1,
                      true, record);
  return AXRT_KERNEL_OK;
}

}  // namespace
}  // namespace axrt::kernels::cpu

extern "C" axrt_kernel_result_t axrt_attention_decode_split_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode_split<kv::Kind::kF32>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_decode_split_kv_bf16(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode_split<kv::Kind::kBf16>(args, workgroup);
}

extern "C" axrt_kernel_result_t axrt_attention_decode_split_kv_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  return attention_decode_split<kv::Kind::kFp8E4m3>(args, workgroup);
}

// out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M), M = max_s m_s,
// each sum in split order.
extern "C" axrt_kernel_result_t axrt_attention_combine_f32(
    const void* args, const axrt_kernel_dispatch_t*, const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const AttentionCombineArgs*>(args);
  const uint64_t b = workgroup->workgroup_id.x;
  const uint64_t h = workgroup->workgroup_id.y;
  if (workgroup->workgroup_id.z != 0 || b >= a->B || h >= a->heads) return AXRT_KERNEL_OK;
  const uint64_t D = a->head_dim;
  if (D == 0 || a->splits == 0) {
    return invalid_argument(workgroup,
                            "head_dim %" PRIu64 " and splits %" PRIu64 " must be positive", D,
                            a->splits);
  }
  const uint64_t stride = D + 2;
  const float* records = a->partials + (b * a->heads + h) * a->splits * stride;
  float top = -std::numeric_limits<float>::infinity();
  for (uint64_t s = 0; s < a->splits; ++s) top = std::fmax(top, records[s * stride]);
  float* __restrict out = a->out + (b * a->heads + h) * D;
  std::fill_n(out, D, 0.0f);
  float sum = 0.0f;
  for (uint64_t s = 0; s < a->splits; ++s) {
    const float* __restrict r = records + s * stride;
    const float weight = std::exp(r[0] - top);  // 0 for an empty chunk (m = -inf)
    sum += r[1] * weight;
    for (uint64_t d = 0; d < D; ++d) out[d] += r[2 + d] * weight;
  }
  for (uint64_t d = 0; d < D; ++d) out[d] /= sum;
  return AXRT_KERNEL_OK;
}
