// The "axrt.cpu" table: every built-in kernel with its parameter table, as
// docs/kernels.md specifies them.
#include "kernels/cpu/library.h"

#include <array>
#include <cstddef>

#include "axrt/base.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels {
namespace {

using cpu::BinaryArgs;
using cpu::LayerNormArgs;
using cpu::MatmulBf16Args;
using cpu::MatmulF32NkArgs;
using cpu::MatmulF32Args;
using cpu::MatmulFp8Args;
using cpu::MatmulInt4Args;
using cpu::MatmulInt8Args;
using cpu::RmsNormArgs;
using cpu::SoftmaxArgs;
using cpu::UnaryArgs;
using cpu::AttentionArgs;
using cpu::EmbeddingBf16Args;
using cpu::EmbeddingF32Args;
using cpu::KvCacheWriteArgs;
using cpu::RopeArgs;
using cpu::SampleArgs;
using cpu::SiluMulArgs;

constexpr axrt_kernel_param_info_t buffer(const char* name, const char* layout_id = nullptr) {
  return {name, AXRT_KERNEL_PARAM_KIND_BUFFER, 0, layout_id};
}

constexpr axrt_kernel_param_info_t scalar(const char* name, uint32_t dtype) {
  return {name, AXRT_KERNEL_PARAM_KIND_SCALAR, dtype, nullptr};
}

constexpr axrt_kernel_param_info_t u64(const char* name) { return scalar(name, AXRT_DTYPE_UINT64); }

template <class... Params>
constexpr auto params(Params... p) {
  return std::array<axrt_kernel_param_info_t, sizeof...(Params)>{p...};
}

// The argument block's size by the ABI's C rules, for checking the structs
// against the tables at compile time. Only the scalar types used here.
template <size_t kCount>
constexpr uint32_t block_size(const std::array<axrt_kernel_param_info_t, kCount>& params) {
  uint32_t offset = 0;
  uint32_t max_align = 1;
  for (const auto& p : params) {
    uint32_t size = 8;
    if (p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR) {
      size = p.scalar_type == AXRT_DTYPE_UINT64 ? 8 : p.scalar_type == AXRT_DTYPE_FLOAT32 ? 4 : 0;
    }
    if (size == 0) return 0;
    offset = (offset + size - 1) / size * size + size;
    max_align = size > max_align ? size : max_align;
  }
  return (offset + max_align - 1) / max_align * max_align;
}

constexpr auto kBinaryParams = params(buffer("a"), buffer("b"), buffer("out"), u64("n"));
constexpr auto kUnaryParams = params(buffer("x"), buffer("out"), u64("n"));
constexpr auto kSoftmaxParams = params(buffer("x"), buffer("out"), u64("rows"), u64("cols"));
constexpr auto kLayerNormParams =
    params(buffer("x"), buffer("gamma"), buffer("beta"), buffer("out"), u64("rows"), u64("cols"),
           scalar("epsilon", AXRT_DTYPE_FLOAT32));
constexpr auto kRmsNormParams = params(buffer("x"), buffer("gamma"), buffer("out"), u64("rows"),
                                       u64("cols"), scalar("epsilon", AXRT_DTYPE_FLOAT32));

constexpr auto kMatmulF32Params =
    params(buffer("x"), buffer("w"), buffer("bias"), buffer("y"), u64("M"), u64("N"), u64("K"));
constexpr auto kMatmulBf16Params = kMatmulF32Params;
constexpr auto kMatmulInt8Params =
    params(buffer("x"), buffer("w", "int8.per_channel"), buffer("scale"), buffer("bias"),
           buffer("y"), u64("M"), u64("N"), u64("K"));

constexpr auto int4_params(const char* layout_id) {
  return params(buffer("x"), buffer("qweight", layout_id), buffer("scales"), buffer("qzeros"),
                buffer("bias"), buffer("y"), u64("M"), u64("N"), u64("K"), u64("group_size"));
}
constexpr auto kMatmulAwqParams = int4_params("awq.int4.g128");
constexpr auto kMatmulGptqParams = int4_params("gptq_v2.int4.g128");
constexpr auto kMatmulGptqV1Params = int4_params("gptq.int4.g128");

constexpr auto fp8_params(const char* layout_id) {
  return params(buffer("x"), buffer("w", layout_id), buffer("scale"), buffer("bias"),
                buffer("y"), u64("M"), u64("N"), u64("K"), u64("block_n"), u64("block_k"));
}
constexpr auto kMatmulFp8Params = fp8_params("fp8.e4m3fn.per_tensor");
constexpr auto kMatmulFp8B128Params = fp8_params("fp8.e4m3fn.b128x128");

// The transformer kernels (docs/llm.md).
constexpr auto kEmbeddingParams =
    params(buffer("tokens"), buffer("table"), buffer("out"), u64("T"), u64("H"), u64("V"));
constexpr auto kRopeParams =
    params(buffer("x"), buffer("positions"), buffer("inv_freq"), u64("T"), u64("heads"),
           u64("head_dim"), u64("row_stride"), scalar("attention_scaling", AXRT_DTYPE_FLOAT32));
constexpr auto kSiluMulParams = params(buffer("gate_up"), buffer("out"), u64("rows"), u64("cols"));
constexpr auto kKvCacheWriteParams =
    params(buffer("qkv"), buffer("positions"), buffer("block_tables"), buffer("cache"), u64("T"),
           u64("tokens_per_seq"), u64("layer"), u64("num_blocks"), u64("kv_heads"),
           u64("block_size"), u64("head_dim"), u64("max_blocks"), u64("row_stride"),
           u64("k_offset"));
constexpr auto attention_params(const char* table, const char* count) {
  return params(buffer("qkv"), buffer("positions"), buffer(table), buffer("cache"), buffer("out"),
                u64(count), u64("heads"), u64("kv_heads"), u64("head_dim"), u64("layer"),
                u64("num_blocks"), u64("block_size"), u64("max_blocks"), u64("row_stride"),
                scalar("scale", AXRT_DTYPE_FLOAT32));
}
constexpr auto kAttentionPrefillParams = attention_params("block_table", "T");
constexpr auto kAttentionDecodeParams = attention_params("block_tables", "B");
constexpr auto kSampleParams =
    params(buffer("logits"), buffer("temperature"), buffer("top_k"), buffer("top_p"),
           buffer("seeds"), buffer("positions"), buffer("tokens"), u64("B"), u64("V"));

// A kernel's entry, its args_size the size of its argument struct, which
// must be the block its parameter table describes.
template <class Args, size_t kCount>
constexpr axrt_kernel_info_t kernel(const char* name, axrt_cpu_kernel_fn_t function,
                                    const std::array<axrt_kernel_param_info_t, kCount>& params) {
  return {name, function, params.data(), static_cast<uint32_t>(kCount),
          static_cast<uint32_t>(sizeof(Args))};
}

static_assert(block_size(kBinaryParams) == sizeof(BinaryArgs));
static_assert(block_size(kUnaryParams) == sizeof(UnaryArgs));
static_assert(block_size(kSoftmaxParams) == sizeof(SoftmaxArgs));
static_assert(block_size(kLayerNormParams) == sizeof(LayerNormArgs));
static_assert(block_size(kRmsNormParams) == sizeof(RmsNormArgs));
static_assert(block_size(kMatmulF32Params) == sizeof(MatmulF32Args));
static_assert(block_size(kMatmulBf16Params) == sizeof(MatmulBf16Args));
static_assert(block_size(kMatmulF32Params) == sizeof(MatmulF32NkArgs));
static_assert(block_size(kMatmulInt8Params) == sizeof(MatmulInt8Args));
static_assert(block_size(kMatmulAwqParams) == sizeof(MatmulInt4Args));
static_assert(block_size(kMatmulGptqParams) == sizeof(MatmulInt4Args));
static_assert(block_size(kMatmulGptqV1Params) == sizeof(MatmulInt4Args));
static_assert(block_size(kMatmulFp8Params) == sizeof(MatmulFp8Args));
static_assert(block_size(kMatmulFp8B128Params) == sizeof(MatmulFp8Args));
static_assert(block_size(kEmbeddingParams) == sizeof(EmbeddingF32Args));
static_assert(block_size(kEmbeddingParams) == sizeof(EmbeddingBf16Args));
static_assert(block_size(kRopeParams) == sizeof(RopeArgs));
static_assert(block_size(kSiluMulParams) == sizeof(SiluMulArgs));
static_assert(block_size(kKvCacheWriteParams) == sizeof(KvCacheWriteArgs));
static_assert(block_size(kAttentionPrefillParams) == sizeof(AttentionArgs));
static_assert(block_size(kAttentionDecodeParams) == sizeof(AttentionArgs));
static_assert(block_size(kSampleParams) == sizeof(SampleArgs));

constexpr axrt_kernel_info_t kKernels[] = {
    kernel<BinaryArgs>("axrt_add_f32", axrt_add_f32, kBinaryParams),
    kernel<BinaryArgs>("axrt_mul_f32", axrt_mul_f32, kBinaryParams),
    kernel<UnaryArgs>("axrt_gelu_f32", axrt_gelu_f32, kUnaryParams),
    kernel<UnaryArgs>("axrt_silu_f32", axrt_silu_f32, kUnaryParams),
    kernel<SoftmaxArgs>("axrt_softmax_f32", axrt_softmax_f32, kSoftmaxParams),
    kernel<LayerNormArgs>("axrt_layernorm_f32", axrt_layernorm_f32, kLayerNormParams),
    kernel<RmsNormArgs>("axrt_rmsnorm_f32", axrt_rmsnorm_f32, kRmsNormParams),
    kernel<MatmulF32Args>("axrt_matmul_f32", axrt_matmul_f32, kMatmulF32Params),
    kernel<MatmulBf16Args>("axrt_matmul_bf16_f32", axrt_matmul_bf16_f32, kMatmulBf16Params),
    kernel<MatmulF32NkArgs>("axrt_matmul_f32_nk", axrt_matmul_f32_nk, kMatmulF32Params),
    kernel<MatmulInt8Args>("axrt_matmul_int8_pc_f32", axrt_matmul_int8_pc_f32,
                           kMatmulInt8Params),
    kernel<MatmulInt4Args>("axrt_matmul_awq_int4_f32", axrt_matmul_awq_int4_f32,
                           kMatmulAwqParams),
    kernel<MatmulInt4Args>("axrt_matmul_gptq_int4_f32", axrt_matmul_gptq_int4_f32,
                           kMatmulGptqParams),
    kernel<MatmulInt4Args>("axrt_matmul_gptq_int4_q8_f32", axrt_matmul_gptq_int4_q8_f32,
                           kMatmulGptqParams),
    kernel<MatmulInt4Args>("axrt_matmul_gptq_v1_int4_f32", axrt_matmul_gptq_v1_int4_f32,
                           kMatmulGptqV1Params),
    kernel<MatmulFp8Args>("axrt_matmul_fp8_e4m3_f32", axrt_matmul_fp8_e4m3_f32,
                          kMatmulFp8Params),
    kernel<MatmulFp8Args>("axrt_matmul_fp8_e4m3_b128_f32", axrt_matmul_fp8_e4m3_b128_f32,
                          kMatmulFp8B128Params),
    kernel<EmbeddingF32Args>("axrt_embedding_f32", axrt_embedding_f32, kEmbeddingParams),
    kernel<EmbeddingBf16Args>("axrt_embedding_bf16", axrt_embedding_bf16, kEmbeddingParams),
    kernel<RopeArgs>("axrt_rope_f32", axrt_rope_f32, kRopeParams),
    kernel<SiluMulArgs>("axrt_silu_mul_f32", axrt_silu_mul_f32, kSiluMulParams),
    kernel<KvCacheWriteArgs>("axrt_kv_cache_write_f32", axrt_kv_cache_write_f32,
                             kKvCacheWriteParams),
    kernel<AttentionArgs>("axrt_attention_prefill_f32", axrt_attention_prefill_f32,
                          kAttentionPrefillParams),
    kernel<AttentionArgs>("axrt_attention_decode_f32", axrt_attention_decode_f32,
                          kAttentionDecodeParams),
    kernel<SampleArgs>("axrt_sample_f32", axrt_sample_f32, kSampleParams),
};

}  // namespace

const axrt_kernel_library_t* cpu_kernel_library() noexcept {
  static const axrt_kernel_library_t library = {
      sizeof(axrt_kernel_library_t),
      AXRT_KERNEL_ABI_VERSION,
      kCpuLibraryVersion,
      kCpuLibraryName,
      kKernels,
      static_cast<uint32_t>(sizeof(kKernels) / sizeof(kKernels[0])),
      nullptr,  // init: the built-in kernels keep no per-device state
      nullptr,  // deinit
  };
  return &library;
}

}  // namespace axrt::kernels
