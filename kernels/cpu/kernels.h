// The built-in CPU kernels (docs/kernels.md): their argument blocks as C
// structs and their entry points. Internal to the library; the runtime finds
// the kernels through cpu_kernel_library()'s table.
#ifndef AXRT_KERNELS_CPU_KERNELS_H_
#define AXRT_KERNELS_CPU_KERNELS_H_

#include <stdint.h>

#include <atomic>

#include "axrt/kernel_abi.h"
#include "kernels/cpu/library.h"

// A BUFFER parameter is an 8-byte address; on the CPU it is a host pointer,
// so the blocks below name it with its pointer type.
static_assert(sizeof(void*) == 8, "the CPU kernels need 64-bit host pointers");

namespace axrt::kernels::cpu {

// Elementwise, binary: a, b, out, n.
struct BinaryArgs {
  const float* a;
  const float* b;
  float* out;
  uint64_t n;
};
static_assert(sizeof(BinaryArgs) == 32);

// Elementwise, unary: x, out, n.
struct UnaryArgs {
  const float* x;
  float* out;
  uint64_t n;
};
static_assert(sizeof(UnaryArgs) == 24);

struct SoftmaxArgs {
  const float* x;
  float* out;
  uint64_t rows;
  uint64_t cols;
};
static_assert(sizeof(SoftmaxArgs) == 32);

struct LayerNormArgs {
  const float* x;
  const float* gamma;
  const float* beta;
  float* out;
  uint64_t rows;
  uint64_t cols;
  float epsilon;
};
static_assert(sizeof(LayerNormArgs) == 56);

struct RmsNormArgs {
  const float* x;
  const float* gamma;
  float* out;
  uint64_t rows;
  uint64_t cols;
  float epsilon;
};
static_assert(sizeof(RmsNormArgs) == 48);

// x[r] += residual[r], then out[r] = rmsnorm(x[r]) * gamma: axrt_add_f32 and
// axrt_rmsnorm_f32 in one pass, bit for bit (docs/kernels.md, "Fused kernels").
struct AddRmsNormArgs {
  float* x;
  const float* residual;
  const float* gamma;
  float* out;
  uint64_t rows;
  uint64_t cols;
  float epsilon;
};
static_assert(sizeof(AddRmsNormArgs) == 56);

// y[M, N] = x[M, K] . w[K, N] + bias[N].
struct MatmulF32Args {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulF32Args) == 56);

// y[M, N] = x[M, K] . w^T + bias[N], w bf16 [N, K] as raw 16-bit patterns.
struct MatmulBf16Args {
  const float* x;
  const uint16_t* w;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulBf16Args) == 56);

// y[M, N] = x[M, K] . w^T + bias[N], w f32 [N, K] (the [out, in] layout of
// checkpoints).
struct MatmulF32NkArgs {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulF32NkArgs) == 56);

// w int8 [N, K], scale f32 [N, 1].
struct MatmulInt8Args {
  const float* x;
  const int8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulInt8Args) == 64);

// w fp8 e4m3fn [N, K], scale f32 [N, 1].
struct MatmulFp8PcArgs {
  const float* x;
  const uint8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
};
static_assert(sizeof(MatmulFp8PcArgs) == 64);

// AWQ and GPTQ (v1, v2) int4: qweight u32, scales f16 [K/g, N], qzeros u32
// [K/g, N/8].
struct MatmulInt4Args {
  const float* x;
  const uint32_t* qweight;
  const uint16_t* scales;
  const uint32_t* qzeros;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
  uint64_t group_size;
};
static_assert(sizeof(MatmulInt4Args) == 80);

// Tests set this to run the AVX-512 builds of axrt_matmul_gptq_int4_q8_f32
// and axrt_matmul_int8_pc_q8_f32 as on a CPU without VNNI.
inline std::atomic<bool> q8_matmul_without_vnni{false};

// w e4m3fn [N, K], scale f32 [ceil(N/bn), ceil(K/bk)].
struct MatmulFp8Args {
  const float* x;
  const uint8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M;
  uint64_t N;
  uint64_t K;
  uint64_t block_n;
  uint64_t block_k;
};
static_assert(sizeof(MatmulFp8Args) == 80);

// The transformer kernels of docs/llm.md. Token ids, positions and block ids
// are i32; the KV cache is [L, 2, num_blocks, kv_heads, block_size,
// head_dim] of f32 or bf16, or of fp8 e4m3 codes with a scale per row
// (kv_cache.h).
struct EmbeddingF32Args {
  const int32_t* tokens;
  const float* table;
  float* out;
  uint64_t T;
  uint64_t H;
  uint64_t V;
};
static_assert(sizeof(EmbeddingF32Args) == 48);

// table bf16 [V, H], as raw 16-bit patterns.
struct EmbeddingBf16Args {
  const int32_t* tokens;
  const uint16_t* table;
  float* out;
  uint64_t T;
  uint64_t H;
  uint64_t V;
};
static_assert(sizeof(EmbeddingBf16Args) == 48);

struct RopeArgs {
  float* x;
  const int32_t* positions;
  const float* inv_freq;
  uint64_t T;
  uint64_t heads;
  uint64_t head_dim;
  uint64_t row_stride;
  float attention_scaling;
};
static_assert(sizeof(RopeArgs) == 64);

struct SiluMulArgs {
  const float* gate_up;
  float* out;
  uint64_t rows;
  uint64_t cols;
};
static_assert(sizeof(SiluMulArgs) == 32);

// The cache's element type is the kernel's: f32, bf16 or fp8 e4m3 with a
// scale per row (kv_cache.h).
struct KvCacheWriteArgs {
  const float* qkv;
  const int32_t* positions;
  const int32_t* block_tables;
  void* cache;
  uint64_t T;
  uint64_t tokens_per_seq;
  uint64_t layer;
  uint64_t num_blocks;
  uint64_t kv_heads;
  uint64_t block_size;
  uint64_t head_dim;
  uint64_t max_blocks;
  uint64_t row_stride;
  uint64_t k_offset;
};
static_assert(sizeof(KvCacheWriteArgs) == 112);

// axrt_rope_f32 of each token's row (`heads` heads from column 0), then
// axrt_kv_cache_write_* of its keys and values: one pass, the same bits
// (docs/kernels.md, "Fused kernels").
struct RopeKvCacheWriteArgs {
  float* qkv;
  const int32_t* positions;
  const float* inv_freq;
  const int32_t* block_tables;
  void* cache;
  uint64_t T;
  uint64_t tokens_per_seq;
  uint64_t heads;
  uint64_t layer;
  uint64_t num_blocks;
  uint64_t kv_heads;
  uint64_t block_size;
  uint64_t head_dim;
  uint64_t max_blocks;
  uint64_t row_stride;
  uint64_t k_offset;
  float attention_scaling;
};
static_assert(sizeof(RopeKvCacheWriteArgs) == 136);

// Prefill (`count` = T, one block table) and decode (`count` = B, a block
// table per sequence) take the same block, and so does flash attention
// (`count` = T, a block table per token; docs/kernels.md, "Flash attention").
struct AttentionArgs {
  const float* qkv;
  const int32_t* positions;
  const int32_t* block_tables;
  const void* cache;  // of the kernel's element type, as KvCacheWriteArgs'
  float* out;
  uint64_t count;
  uint64_t heads;
  uint64_t kv_heads;
  uint64_t head_dim;
  uint64_t layer;
  uint64_t num_blocks;
  uint64_t block_size;
  uint64_t max_blocks;
  uint64_t row_stride;
  float scale;
};
static_assert(sizeof(AttentionArgs) == 120);

// Split-K decode (docs/kernels.md, "Split attention"): the decode kernels'
// block with `out` as `partials`, then the number of chunks each token's
// context is cut into. `partials` is f32 [B, heads, splits, head_dim + 2]:
// for each chunk its running maximum m, its sum l and its unnormalised
// output.
struct AttentionSplitArgs {
  AttentionArgs attention;  // attention.out is `partials`
  uint64_t splits;
};
static_assert(sizeof(AttentionSplitArgs) == 128);

// The chunks of axrt_attention_decode_split_* combined into the output.
struct AttentionCombineArgs {
  const float* partials;
  float* out;
  uint64_t B;
  uint64_t heads;
  uint64_t head_dim;
  uint64_t splits;
};
static_assert(sizeof(AttentionCombineArgs) == 48);

struct SampleArgs {
  const float* logits;
  const float* temperature;
  const int32_t* top_k;
  const float* top_p;
  const uint64_t* seeds;
  const int32_t* positions;
  int32_t* tokens;
  uint64_t B;
  uint64_t V;
};
static_assert(sizeof(SampleArgs) == 72);

// The sampling options applied to the logits in place (docs/llm.md,
// "Logits processing"): per row b of `logits` [B, V], up to E entries
// (`entry_*` [B, E], token -1 for none) with their bias, their count among
// the generated tokens and whether the prompt holds them, and the row's
// penalties and min_p.
struct LogitsProcessArgs {
  float* logits;
  const float* temperature;
  const float* repetition_penalty;
  const float* frequency_penalty;
  const float* presence_penalty;
  const float* min_p;
  const int32_t* entry_tokens;
  const int32_t* entry_counts;
  const int32_t* entry_in_prompt;
  const float* entry_bias;
  uint64_t B;
  uint64_t V;
  uint64_t E;
};
static_assert(sizeof(LogitsProcessArgs) == 104);

// GPTQ's int4 qweight ([K/8, N] u32, gptq_v2.int4.gNN) laid out tile by
// tile for the CPU's int8-activation kernels (gptq_v2.int4.gNN.tile64):
// [ceil(N/64)][K/8][64] u32, tile t's word row r at (t K/8 + r) 64, columns
// past N zero. A 64-column tile reads one sequential run.
extern const CpuPacker gptq_int4_tile64_packer;

}  // namespace axrt::kernels::cpu

// The entry points, C symbols named as in docs/kernels.md. Hidden like
// every non-API symbol of libaxrt.
extern "C" {

axrt_kernel_result_t axrt_add_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_mul_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_gelu_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_silu_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                   const axrt_kernel_workgroup_t* workgroup);

axrt_kernel_result_t axrt_softmax_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_layernorm_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                        const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_add_rmsnorm_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                          const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rmsnorm_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                      const axrt_kernel_workgroup_t* workgroup);

axrt_kernel_result_t axrt_matmul_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_bf16_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                          const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_bf16_f32_decode(const void* args,
                                                 const axrt_kernel_dispatch_t* dispatch,
                                                 const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_bf16_tc_f32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_int8_pc_tc_f32(const void* args,
                                                const axrt_kernel_dispatch_t* dispatch,
                                                const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_tc_f32(const void* args,
                                                    const axrt_kernel_dispatch_t* dispatch,
                                                    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_tc_f32(const void* args,
                                                 const axrt_kernel_dispatch_t* dispatch,
                                                 const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_bf16_f32_decode_silu(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_int8_pc_f32_decode(const void* args,
                                                    const axrt_kernel_dispatch_t* dispatch,
                                                    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_f32(const void* args,
                                                 const axrt_kernel_dispatch_t* dispatch,
                                                 const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_pc_f32_decode(const void* args,
                                                        const axrt_kernel_dispatch_t* dispatch,
                                                        const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_f32_decode(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_f32_nk(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                        const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_int8_pc_f32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup);
// int8 weights per output channel times x quantized to int8 per group
// (MatmulInt8Args).
axrt_kernel_result_t axrt_matmul_int8_pc_q8_f32(const void* args,
                                                const axrt_kernel_dispatch_t* dispatch,
                                                const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_f32(const void* args,
                                               const axrt_kernel_dispatch_t* dispatch,
                                               const axrt_kernel_workgroup_t* workgroup);
// GPTQ v2 weights times x quantized to int8 per group (MatmulInt4Args).
axrt_kernel_result_t axrt_matmul_gptq_int4_q8_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_v1_int4_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
// The int4 kernels above under the names that declare the layouts of groups
// of 64 and 32 inputs (awq.int4.g64, ...): the same code each, bound with
// group_size 64 or 32 (MatmulInt4Args).
axrt_kernel_result_t axrt_matmul_awq_int4_g64_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_g64_tc_f32(const void* args,
                                                     const axrt_kernel_dispatch_t* dispatch,
                                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32_decode(const void* args,
                                                          const axrt_kernel_dispatch_t* dispatch,
                                                          const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_v1_int4_g64_f32(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g64_q8_f32(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_g32_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_awq_int4_g32_tc_f32(const void* args,
                                                     const axrt_kernel_dispatch_t* dispatch,
                                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32_decode(const void* args,
                                                          const axrt_kernel_dispatch_t* dispatch,
                                                          const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_v1_int4_g32_f32(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g32_q8_f32(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_fp8_e4m3_b128_f32(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);

axrt_kernel_result_t axrt_embedding_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                        const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_embedding_bf16(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                         const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rope_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_silu_mul_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                       const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_kv_cache_write_f32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_kv_cache_write_bf16(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_kv_cache_write_fp8_e4m3(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rope_kv_cache_write_f32(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rope_kv_cache_write_bf16(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_rope_kv_cache_write_fp8_e4m3(const void* args,
                                                       const axrt_kernel_dispatch_t* dispatch,
                                                       const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_prefill_f32(const void* args,
                                                const axrt_kernel_dispatch_t* dispatch,
                                                const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_f32(const void* args,
                                               const axrt_kernel_dispatch_t* dispatch,
                                               const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_kv_bf16(const void* args,
                                                   const axrt_kernel_dispatch_t* dispatch,
                                                   const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_kv_fp8_e4m3(const void* args,
                                                       const axrt_kernel_dispatch_t* dispatch,
                                                       const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_flash_f32(const void* args,
                                              const axrt_kernel_dispatch_t* dispatch,
                                              const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_flash_kv_bf16(const void* args,
                                                  const axrt_kernel_dispatch_t* dispatch,
                                                  const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_flash_kv_fp8_e4m3(const void* args,
                                                      const axrt_kernel_dispatch_t* dispatch,
                                                      const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_split_f32(const void* args,
                                                     const axrt_kernel_dispatch_t* dispatch,
                                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_split_kv_bf16(const void* args,
                                                         const axrt_kernel_dispatch_t* dispatch,
                                                         const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_decode_split_kv_fp8_e4m3(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_attention_combine_f32(const void* args,
                                                const axrt_kernel_dispatch_t* dispatch,
                                                const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_sample_f32(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                     const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_logits_process_f32(const void* args,
                                             const axrt_kernel_dispatch_t* dispatch,
                                             const axrt_kernel_workgroup_t* workgroup);

// The pre-packed forms (library.h CpuPrepack) of the GPTQ v2 kernels on the
// 64-column grid, exact and with int8 activations: the same code reading
// qweight as gptq_v2.int4.gNN.tile64, listed in the table as
// "<name>@gptq_v2.int4.gNN.tile64".
axrt_kernel_result_t axrt_matmul_gptq_int4_f32_prepacked(const void* args,
                                                         const axrt_kernel_dispatch_t* dispatch,
                                                         const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g64_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g32_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g64_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);
axrt_kernel_result_t axrt_matmul_gptq_int4_g32_q8_f32_prepacked(
    const void* args, const axrt_kernel_dispatch_t* dispatch,
    const axrt_kernel_workgroup_t* workgroup);

}  // extern "C"

#endif  // AXRT_KERNELS_CPU_KERNELS_H_
