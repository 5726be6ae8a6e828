// Decode attention over the paged KV cache (docs/llm.md):
// axrt_attention_decode_f32 called directly over all workgroups of a decode
// step on one thread, 8 query heads over 2 KV heads of 64, blocks of 16
// tokens scattered over the pool. Each iteration reads another layer's
// cache, and the layers together are larger than any CPU cache, so the
// counter "bytes" (the keys and values the step reads, per second) is the
// memory bandwidth the kernel draws from DRAM.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/library.h"

namespace {

constexpr uint64_t kHeads = 8;
constexpr uint64_t kKvHeads = 2;
constexpr uint64_t kHeadDim = 64;
constexpr uint64_t kBlockSize = 16;
constexpr uint64_t kCacheBytes = 512ull << 20;  // all layers together

// The argument block of axrt_attention_decode_f32 (docs/kernels.md).
struct AttentionDecodeArgs {
  const float* qkv;
  const int32_t* positions;
  const int32_t* block_tables;
  const float* cache;
  float* out;
  uint64_t B, heads, kv_heads, head_dim, layer, num_blocks, block_size, max_blocks, row_stride;
  float scale;
};
static_assert(sizeof(AttentionDecodeArgs) == 120);

axrt_cpu_kernel_fn_t DecodeKernel(std::string* error) {
  const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    const axrt_kernel_info_t& kernel = library->kernels[i];
    if (std::strcmp(kernel.name, "axrt_attention_decode_f32") != 0) continue;
    if (kernel.args_size != sizeof(AttentionDecodeArgs)) {
      *error = "axrt_attention_decode_f32: the library's argument block is " +
               std::to_string(kernel.args_size) + " bytes";
      return nullptr;
    }
    return kernel.function;
  }
  *error = "the built-in library has no axrt_attention_decode_f32";
  return nullptr;
}

// Args: context (tokens each sequence has cached), batch (sequences).
void BM_AttentionDecode(benchmark::State& state) {
  const uint64_t context = static_cast<uint64_t>(state.range(0));
  const uint64_t batch = static_cast<uint64_t>(state.range(1));
  std::string error;
  const axrt_cpu_kernel_fn_t kernel = DecodeKernel(&error);
  if (kernel == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const uint64_t max_blocks = (context + kBlockSize - 1) / kBlockSize;
  const uint64_t num_blocks = batch * max_blocks;
  const uint64_t layer_floats = 2 * num_blocks * kKvHeads * kBlockSize * kHeadDim;
  const uint64_t layers = std::max<uint64_t>(2, kCacheBytes / (layer_floats * sizeof(float)));

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> cache(layers * layer_floats);
  for (float& v : cache) v = normal(rng);
  std::vector<int32_t> tables(num_blocks);
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);
  const std::vector<int32_t> positions(batch, static_cast<int32_t>(context - 1));
  const uint64_t row_stride = (kHeads + 2 * kKvHeads) * kHeadDim;
  std::vector<float> qkv(batch * row_stride);
  for (float& v : qkv) v = normal(rng);
  std::vector<float> out(batch * kHeads * kHeadDim);

  AttentionDecodeArgs args{
      qkv.data(), positions.data(), tables.data(), cache.data(), out.data(),
      batch,      kHeads,           kKvHeads,      kHeadDim,     0,
      num_blocks, kBlockSize,       max_blocks,    row_stride,   1.0f / std::sqrt(float{kHeadDim})};
  axrt_kernel_dispatch_t dispatch = {};
  dispatch.struct_size = sizeof(dispatch);
  dispatch.workgroup_count = {static_cast<uint32_t>(batch), kKvHeads, 1};
  dispatch.workgroup_size = {1, 1, 1};
  dispatch.worker_count = 1;
  char message[256] = "";
  axrt_kernel_workgroup_t workgroup = {};
  workgroup.struct_size = sizeof(workgroup);
  workgroup.error_message = message;
  workgroup.error_message_capacity = sizeof(message);

  uint64_t layer = 0;
  for (auto _ : state) {
    args.layer = layer;
    layer = layer + 1 == layers ? 0 : layer + 1;
    for (uint32_t g = 0; g < kKvHeads; ++g) {
      for (uint32_t b = 0; b < batch; ++b) {
        workgroup.workgroup_id = {b, g, 0};
        if (kernel(&args, &dispatch, &workgroup) != AXRT_KERNEL_OK) {
          state.SkipWithError(message);
          return;
        }
      }
    }
    benchmark::ClobberMemory();
  }
  const double bytes =
      static_cast<double>(batch * context * 2 * kKvHeads * kHeadDim * sizeof(float));
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1024);
  state.counters["threads"] = 1;
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"context", "batch"})
    ->ArgsProduct({{512, 2048}, {1, 8}})
    ->UseRealTime();

}  // namespace
