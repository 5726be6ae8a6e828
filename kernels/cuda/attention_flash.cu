// Flash attention over the paged KV cache on tensor cores (docs/kernels.md,
// "Flash attention"): the decode kernels' contract, with q, keys, values and
// probabilities rounded to bf16 for mma.sync.m16n8k16 (sm_80 and later),
// scores, the online softmax and the sums in f32.
//
// Block (i, g), 256 threads, serves tokens [16 i, 16 i + 16) and the query
// heads of KV group g, warp w one query head (groups of more than 8 heads
// take a pass per 8): the warp's 16 mma rows are the 16 tokens. Tokens whose
// block-table rows agree with a leader's on every block they read share a
// pass over the leader's keys up to their largest position; the others take
// passes of their own. A pass walks keys 0, 64, 128 ... a tile of 64 at a
// time: the block stages the tile's key and value rows in shared memory as
// bf16 (cp.async from a bf16 cache, converted through registers from f32 and
// fp8), each warp multiplies its Q fragments (registers, loaded once a pass)
// by the keys (ldmatrix), masks the keys past each row's position, updates
// the running maximum and sum on the accumulator fragments, and multiplies
// the bf16 probabilities, still in registers, by the values (ldmatrix.trans).
// Tiles are staged one ahead: the next keys arrive during the products with
// the values, the next values during the next scores.
// Keys past the pass's last position are staged as zeros, so a masked key
// adds an exact zero; a row's arithmetic is the same in any pass.
//
// The mma, ldmatrix and cp.async helpers are matmul_tensor_core.cu's, and
// PagedHead, paged_head and sequence_ok attention.cu's (one translation unit).
#include "common.cuh"

namespace axrt_cuda {
namespace {

constexpr unsigned kFlashTokens = 16;  // mma rows: tokens of a block
constexpr unsigned kFlashKeys = 64;    // keys of a tile
constexpr unsigned kFlashMaxHeadDim = 128;
// A staged row: head_dim bf16 and 16 bytes of padding, so that the 8 rows
// one ldmatrix phase reads (an odd number of 16-byte units apart) fall in 8
// different bank groups for every head_dim.
constexpr unsigned kFlashTileBytes = kFlashKeys * (kFlashMaxHeadDim * 2 + 16);
constexpr uint64_t kFlashNoRow = ~uint64_t{0};

// Where a tile's rows live: each row's byte offset in its plane (kFlashNoRow
// past the pass's last position), the factor its score takes (scale, times
// the key row's scale for fp8) and the factor its probability takes (the
// value row's scale for fp8, else 1).
struct FlashTileRows {
  uint64_t offset[kFlashKeys];
  float key_factor[kFlashKeys];
  float value_factor[kFlashKeys];
};

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Stages the 64 rows of `rows` from `plane` into `tile` (rows of `stride`
// bytes) as bf16, 8 elements (16 bytes of the tile) a step: by cp.async from
// a bf16 cache whose rows are 16-byte aligned (`wide`), else through
// registers; zeros for a row past the pass.
template <KvKind kKind>
__device__ __forceinline__ void flash_stage(const uint8_t* plane, const FlashTileRows& rows,
                                            unsigned D, unsigned stride, bool wide,
                                            uint8_t* tile) {
  constexpr unsigned kBytes = kKind == KvKind::kF32 ? 4 : kKind == KvKind::kBf16 ? 2 : 1;
  const unsigned units = D / 8;
  for (unsigned i = threadIdx.x; i < kFlashKeys * units; i += kBlockThreads) {
    const unsigned row = i / units;
    const unsigned unit = i % units;
    uint8_t* dst = tile + row * stride + unit * 16;
    const uint64_t at = rows.offset[row];
    const bool valid = at != kFlashNoRow;
    const uint8_t* src = plane + (valid ? at : 0) + unit * 8 * kBytes;
    if constexpr (kKind == KvKind::kBf16) {
      if (wide) {
        cp_async_16(shared_address(dst), src, valid);
        continue;
      }
    }
    uint32_t words[4] = {0u, 0u, 0u, 0u};
    if (valid) {
      if constexpr (kKind == KvKind::kBf16) {
        const uint16_t* e = reinterpret_cast<const uint16_t*>(src);
#pragma unroll
        for (unsigned k = 0; k < 4; ++k) {
          words[k] = static_cast<uint32_t>(e[2 * k]) | (static_cast<uint32_t>(e[2 * k + 1]) << 16);
        }
      } else if constexpr (kKind == KvKind::kF32) {
        float f[8];
        if (wide) {
          const float4 lo = *reinterpret_cast<const float4*>(src);
          const float4 hi = *reinterpret_cast<const float4*>(src + 16);
          f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w;
          f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
        } else {
#pragma unroll
          for (unsigned k = 0; k < 8; ++k) f[k] = reinterpret_cast<const float*>(src)[k];
        }
#pragma unroll
        for (unsigned k = 0; k < 4; ++k) words[k] = pack_bf16(f[2 * k], f[2 * k + 1]);
      } else {
        uint8_t c[8];
        if (wide) {
          const uint2 raw = *reinterpret_cast<const uint2*>(src);
#pragma unroll
          for (unsigned k = 0; k < 4; ++k) {
            c[k] = static_cast<uint8_t>(raw.x >> (8 * k));
            c[4 + k] = static_cast<uint8_t>(raw.y >> (8 * k));
          }
        } else {
#pragma unroll
          for (unsigned k = 0; k < 8; ++k) c[k] = src[k];
        }
        // e4m3 values are exact in bf16.
#pragma unroll
        for (unsigned k = 0; k < 4; ++k) {
          words[k] = pack_bf16(e4m3fn_to_float(c[2 * k]), e4m3fn_to_float(c[2 * k + 1]));
        }
      }
    }
    *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

template <KvKind kKind>
__device__ __forceinline__ void attention_flash(const float* qkv, const int32_t* positions,
                                                const int32_t* block_tables, const void* cache,
                                                float* out, uint64_t T, uint64_t heads,
                                                uint64_t kv_heads, uint64_t head_dim,
                                                uint64_t layer, uint64_t num_blocks,
                                                uint64_t block_size, uint64_t max_blocks,
                                                uint64_t row_stride, float scale) {
  __shared__ __align__(128) uint8_t key_tile[kFlashTileBytes];
  __shared__ __align__(128) uint8_t value_tile[kFlashTileBytes];
  __shared__ FlashTileRows rows[2];  // the current tile's and the next one's
  __shared__ uint32_t agree[kFlashTokens];

  if (blockDim.x != kBlockThreads ||
      !shapes_ok(heads, kv_heads, head_dim, block_size, max_blocks, row_stride) ||
      head_dim % 16 != 0 || head_dim > kFlashMaxHeadDim) {
    return;
  }
  const uint64_t t0 = static_cast<uint64_t>(blockIdx.x) * kFlashTokens;
  const uint64_t kv_head = blockIdx.y;
  if (blockIdx.z != 0 || t0 >= T || kv_head >= kv_heads) return;
  const unsigned count = static_cast<unsigned>(T - t0 < kFlashTokens ? T - t0 : kFlashTokens);
  // Every token of the block, before any reads the cache.
  bool ok = true;
  for (unsigned r = 0; r < count; ++r) {
    ok = sequence_ok(block_tables + (t0 + r) * max_blocks, positions[t0 + r], block_size,
                     max_blocks, num_blocks) &&
         ok;
  }
  if (!ok) return;

  const PagedHead head = paged_head(kKind, cache, nullptr, layer, num_blocks, kv_heads, kv_head,
                                    block_size, head_dim);
  const unsigned D = static_cast<unsigned>(head_dim);
  const unsigned ksteps = D / 16;
  const unsigned stride = 2 * D + 16;
  constexpr unsigned kBytes = kKind == KvKind::kF32 ? 4 : kKind == KvKind::kBf16 ? 2 : 1;
  const uint64_t row_bytes = head_dim * kBytes;
  const bool wide = reinterpret_cast<uintptr_t>(cache) % 16 == 0 &&
                    kv_run_bytes(kKind, block_size, head_dim) % 16 == 0;
  const unsigned warp = threadIdx.x / kWarpSize;
  const unsigned lane = threadIdx.x % kWarpSize;
  const unsigned g = lane / 4;  // the fragment rows g and g + 8
  const unsigned tq = lane % 4;
  // ldmatrix: the row this lane addresses in its 8 x 8 matrix, and which.
  const unsigned lrow = lane % 8;
  const unsigned lmat = lane / 8;
  // The shared address this lane gives ldmatrix for keys 0 .. 15 of the
  // tile, dimensions 0 .. 15 (its matrix's row); the others are 16 rows
  // (`rows16` bytes) or 32 bytes on.
  const uint32_t key_lane =
      shared_address(key_tile) + (lrow + (lmat / 2) * 8) * stride + (lmat % 2) * 16;
  const uint32_t value_lane =
      shared_address(value_tile) + (lrow + (lmat % 2) * 8) * stride + (lmat / 2) * 16;
  const uint32_t rows16 = 16 * stride;
  const uint64_t group = heads / kv_heads;

  // Threads 0 .. 63: where the rows of the tile from key k0 of the pass
  // (keys past `last` none) live, and their factors.
  auto fill_rows = [&](const int32_t* leader_table, int32_t k0, int32_t last,
                       FlashTileRows& tile_rows) {
    if (threadIdx.x >= kFlashKeys) return;
    const int32_t p = k0 + static_cast<int32_t>(threadIdx.x);
    uint64_t at = kFlashNoRow;
    float key_factor = scale;
    float value_factor = 1.0f;
    if (p <= last) {
      const uint64_t run =
          static_cast<uint64_t>(leader_table[static_cast<uint64_t>(p) / block_size]) *
          head.block_stride;
      const uint64_t slot = static_cast<uint64_t>(p) % block_size;
      at = run + slot * row_bytes;
      if constexpr (kKind == KvKind::kFp8E4m3) {
        const uint64_t scale_at = run + block_size * head_dim + slot * 4;
        key_factor = scale * *reinterpret_cast<const float*>(head.keys + scale_at);
        value_factor = *reinterpret_cast<const float*>(head.values + scale_at);
      }
    }
    tile_rows.offset[threadIdx.x] = at;
    tile_rows.key_factor[threadIdx.x] = key_factor;
    tile_rows.value_factor[threadIdx.x] = value_factor;
  };

  uint32_t remaining = (1u << count) - 1u;
  while (remaining != 0) {
    const unsigned leader = __ffs(remaining) - 1;
    const int32_t* leader_table = block_tables + (t0 + leader) * max_blocks;
    for (unsigned r = warp; r < kFlashTokens; r += kBlockWarps) {
      bool same = false;
      if ((remaining >> r) & 1u) {
        const int32_t* table = block_tables + (t0 + r) * max_blocks;
        const uint64_t blocks = static_cast<uint64_t>(positions[t0 + r]) / block_size + 1;
        bool differ = false;
        for (uint64_t i = lane; i < blocks; i += kWarpSize) differ |= table[i] != leader_table[i];
        same = !__any_sync(0xffffffffu, differ);
      }
      if (lane == 0) agree[r] = same;
    }
    __syncthreads();
    uint32_t members = 0;
    int32_t last = 0;
    for (unsigned r = 0; r < kFlashTokens; ++r) {
      if (agree[r]) {
        members |= 1u << r;
        last = positions[t0 + r] > last ? positions[t0 + r] : last;
      }
    }
    remaining &= ~members;
    __syncthreads();  // agree is rewritten by the next pass

    for (uint64_t h0 = 0; h0 < group; h0 += kBlockWarps) {
      const bool active = h0 + warp < group;
      const uint64_t h = kv_head * group + h0 + warp;
      const bool member0 = active && ((members >> g) & 1u);
      const bool member1 = active && ((members >> (g + 8)) & 1u);
      const int32_t limit0 = member0 ? positions[t0 + g] : -1;
      const int32_t limit1 = member1 ? positions[t0 + g + 8] : -1;
      const float* q0 = qkv + (t0 + g) * row_stride + h * head_dim;
      const float* q1 = qkv + (t0 + g + 8) * row_stride + h * head_dim;

      // Q fragments, rows g and g + 8, rounded to bf16; zeros for the rows
      // this pass does not serve.
      uint32_t qa[kFlashMaxHeadDim / 16][4];
#pragma unroll
      for (unsigned kk = 0; kk < kFlashMaxHeadDim / 16; ++kk) {
        const unsigned d = 16 * kk + 2 * tq;
        const bool in = kk < ksteps;
        qa[kk][0] = in && member0 ? pack_bf16(q0[d], q0[d + 1]) : 0u;
        qa[kk][1] = in && member1 ? pack_bf16(q1[d], q1[d + 1]) : 0u;
        qa[kk][2] = in && member0 ? pack_bf16(q0[d + 8], q0[d + 9]) : 0u;
        qa[kk][3] = in && member1 ? pack_bf16(q1[d + 8], q1[d + 9]) : 0u;
      }
      float acc[kFlashMaxHeadDim / 8][4];
#pragma unroll
      for (unsigned n = 0; n < kFlashMaxHeadDim / 8; ++n) {
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
      }
      float m0 = -INFINITY, m1 = -INFINITY;
      float l0 = 0.0f, l1 = 0.0f;

      // The first tile's keys and values in flight. Then per tile: its keys
      // arrive, the scores; the next tile's keys are sent for while its
      // values arrive and are multiplied; then the next tile's values.
      __syncthreads();  // the previous pass is done with the tiles
      fill_rows(leader_table, 0, last, rows[0]);
      __syncthreads();
      flash_stage<kKind>(head.keys, rows[0], D, stride, wide, key_tile);
      cp_async_commit();
      flash_stage<kKind>(head.values, rows[0], D, stride, wide, value_tile);
      cp_async_commit();
      for (int32_t k0 = 0; k0 <= last; k0 += kFlashKeys) {
        const FlashTileRows& tile_rows = rows[(k0 / kFlashKeys) % 2];
        FlashTileRows& next_rows = rows[(k0 / kFlashKeys + 1) % 2];
        const bool next = last - k0 >= static_cast<int32_t>(kFlashKeys);
        cp_async_wait<1>();  // this tile's keys
        __syncthreads();

        uint32_t pa[kFlashKeys / 16][4];
        if (active) {
          // S = Q K^T: 8 fragments of 8 keys, rows g and g + 8.
          float s[kFlashKeys / 8][4];
#pragma unroll
          for (unsigned n = 0; n < kFlashKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
          for (unsigned kk = 0; kk < kFlashMaxHeadDim / 16; ++kk) {
            if (kk < ksteps) {
#pragma unroll
              for (unsigned np = 0; np < kFlashKeys / 16; ++np) {
                uint32_t b[4];
                ldmatrix_x4(b, key_lane + np * rows16 + kk * 32);
                mma_bf16(s[2 * np], qa[kk], b[0], b[1]);
                mma_bf16(s[2 * np + 1], qa[kk], b[2], b[3]);
              }
            }
          }
          // Scaled scores, -inf past each row's position; the tile's maxima.
          float top0 = -INFINITY, top1 = -INFINITY;
#pragma unroll
          for (unsigned n = 0; n < kFlashKeys / 8; ++n) {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) {
              const int32_t j = static_cast<int32_t>(8 * n + 2 * tq + (e & 1u));
              const int32_t limit = e < 2 ? limit0 : limit1;
              s[n][e] = k0 + j <= limit ? s[n][e] * tile_rows.key_factor[j] : -INFINITY;
            }
            top0 = fmaxf(top0, fmaxf(s[n][0], s[n][1]));
            top1 = fmaxf(top1, fmaxf(s[n][2], s[n][3]));
          }
          top0 = fmaxf(top0, __shfl_xor_sync(0xffffffffu, top0, 1));
          top0 = fmaxf(top0, __shfl_xor_sync(0xffffffffu, top0, 2));
          top1 = fmaxf(top1, __shfl_xor_sync(0xffffffffu, top1, 1));
          top1 = fmaxf(top1, __shfl_xor_sync(0xffffffffu, top1, 2));
          const float new0 = fmaxf(m0, top0);
          const float new1 = fmaxf(m1, top1);
          // A row with no key yet shifts by 0: exp(-inf) = 0 everywhere.
          const float shift0 = new0 == -INFINITY ? 0.0f : new0;
          const float shift1 = new1 == -INFINITY ? 0.0f : new1;
          const float alpha0 = expf(m0 - shift0);
          const float alpha1 = expf(m1 - shift1);
          float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
          for (unsigned n = 0; n < kFlashKeys / 8; ++n) {
            s[n][0] = expf(s[n][0] - shift0);
            s[n][1] = expf(s[n][1] - shift0);
            s[n][2] = expf(s[n][2] - shift1);
            s[n][3] = expf(s[n][3] - shift1);
            sum0 += s[n][0] + s[n][1];
            sum1 += s[n][2] + s[n][3];
          }
          sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
          sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
          sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
          sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
          l0 = l0 * alpha0 + sum0;
          l1 = l1 * alpha1 + sum1;
          m0 = new0;
          m1 = new1;
#pragma unroll
          for (unsigned n = 0; n < kFlashMaxHeadDim / 8; ++n) {
            acc[n][0] *= alpha0;
            acc[n][1] *= alpha0;
            acc[n][2] *= alpha1;
            acc[n][3] *= alpha1;
          }
          // The probabilities as the A fragments of P V (keys 16 kk ..).
#pragma unroll
          for (unsigned kk = 0; kk < kFlashKeys / 16; ++kk) {
#pragma unroll
            for (unsigned half = 0; half < 2; ++half) {
              float* p = s[2 * kk + half];
              if constexpr (kKind == KvKind::kFp8E4m3) {
                const unsigned j = 16 * kk + 8 * half + 2 * tq;
                const float v0 = tile_rows.value_factor[j];
                const float v1 = tile_rows.value_factor[j + 1];
                p[0] *= v0, p[1] *= v1, p[2] *= v0, p[3] *= v1;
              }
              pa[kk][2 * half] = pack_bf16(p[0], p[1]);
              pa[kk][2 * half + 1] = pack_bf16(p[2], p[3]);
            }
          }
        }
        __syncthreads();  // every warp is done with the keys
        if (next) {
          fill_rows(leader_table, k0 + static_cast<int32_t>(kFlashKeys), last, next_rows);
          __syncthreads();
          flash_stage<kKind>(head.keys, next_rows, D, stride, wide, key_tile);
          cp_async_commit();
          cp_async_wait<1>();  // this tile's values
        } else {
          cp_async_wait<0>();
        }
        __syncthreads();
        if (active) {
#pragma unroll
          for (unsigned kk = 0; kk < kFlashKeys / 16; ++kk) {
#pragma unroll
            for (unsigned dp = 0; dp < kFlashMaxHeadDim / 16; ++dp) {
              if (dp < ksteps) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, value_lane + kk * rows16 + dp * 32);
                mma_bf16(acc[2 * dp], pa[kk], b[0], b[1]);
                mma_bf16(acc[2 * dp + 1], pa[kk], b[2], b[3]);
              }
            }
          }
        }
        if (next) {
          __syncthreads();  // every warp is done with the values
          flash_stage<kKind>(head.values, next_rows, D, stride, wide, value_tile);
          cp_async_commit();
        }
      }

      if (member0 || member1) {
        float* o0 = out + ((t0 + g) * heads + h) * head_dim;
        float* o1 = out + ((t0 + g + 8) * heads + h) * head_dim;
#pragma unroll
        for (unsigned n = 0; n < kFlashMaxHeadDim / 8; ++n) {
          const unsigned d = 8 * n + 2 * tq;
          if (d < D) {
            if (member0) {
              o0[d] = acc[n][0] / l0;
              o0[d + 1] = acc[n][1] / l0;
            }
            if (member1) {
              o1[d] = acc[n][2] / l1;
              o1[d + 1] = acc[n][3] / l1;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace axrt_cuda

#define AXRT_ATTENTION_FLASH(name, kind)                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      name(const float* qkv, const int32_t* positions, const int32_t* block_tables,               \
           const void* cache, float* out, uint64_t B, uint64_t heads, uint64_t kv_heads,          \
           uint64_t head_dim, uint64_t layer, uint64_t num_blocks, uint64_t block_size,           \
           uint64_t max_blocks, uint64_t row_stride, float scale) {                               \
    axrt_cuda::attention_flash<axrt_cuda::KvKind::kind>(qkv, positions, block_tables, cache,     \
                                                        out, B, heads, kv_heads, head_dim, layer, \
                                                        num_blocks, block_size, max_blocks,       \
                                                        row_stride, scale);                       \
  }

AXRT_ATTENTION_FLASH(axrt_attention_flash_f32, kF32)
AXRT_ATTENTION_FLASH(axrt_attention_flash_kv_bf16, kBf16)
AXRT_ATTENTION_FLASH(axrt_attention_flash_kv_fp8_e4m3, kFp8E4m3)
