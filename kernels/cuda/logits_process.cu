// The sampling options applied to a row of logits in place (docs/llm.md,
// "Logits processing"): block b serves row b with 256 threads. Each thread
// takes entries e = tid, tid + 256, ... of the row's list (the tokens of a
// row are distinct, so no two threads write one logit); then, for min_p, a
// block-wide maximum of the row and a strided pass that masks. The float64
// steps are the CPU body's, each rounded on its own (explicit _rn
// intrinsics: nothing contracted).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
    axrt_logits_process_f32(float* logits, const float* temperature,
                            const float* repetition_penalty, const float* frequency_penalty,
                            const float* presence_penalty, const float* min_p,
                            const int32_t* entry_tokens, const int32_t* entry_counts,
                            const int32_t* entry_in_prompt, const float* entry_bias, uint64_t B,
                            uint64_t V, uint64_t E) {
  using namespace axrt_cuda;
  __shared__ float max_scratch[kBlockWarps];
  __shared__ double bad_scratch[kBlockWarps];
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t b = blockIdx.x;
  if (blockIdx.y != 0 || blockIdx.z != 0 || b >= B) return;
  if (V == 0 || V > 0x7FFFFFFFull) return;
  float* row = logits + b * V;
  const int32_t* tokens = entry_tokens + b * E;
  const int32_t* counts = entry_counts + b * E;

  // A row with a bad entry is left as it is.
  double bad = 0.0;
  for (uint64_t e = threadIdx.x; e < E; e += kBlockThreads) {
    const int32_t token = tokens[e];
    if ((token != -1 && (token < 0 || static_cast<uint64_t>(token) >= V)) || counts[e] < 0) {
      bad = 1.0;
    }
  }
  if (block_reduce(bad, bad_scratch, SumOp{}) != 0.0) return;

  // Step 1: bias, then the penalties, of every listed token.
  const double repetition = repetition_penalty[b];
  const double frequency = frequency_penalty[b];
  const double presence = presence_penalty[b];
  for (uint64_t e = threadIdx.x; e < E; e += kBlockThreads) {
    const int32_t token = tokens[e];
    if (token < 0) continue;
    const int32_t count = counts[e];
    double x =
        __dadd_rn(static_cast<double>(row[token]), static_cast<double>(entry_bias[b * E + e]));
    if (count > 0 || entry_in_prompt[b * E + e] != 0) {
      x = x > 0.0 ? __ddiv_rn(x, repetition) : __dmul_rn(x, repetition);
    }
    x = __dsub_rn(x, __dmul_rn(frequency, static_cast<double>(count)));
    if (count > 0) x = __dsub_rn(x, presence);
    row[token] = __double2float_rn(x);
  }

  // Step 2: min_p, for a sampled row.
  const float p = min_p[b];
  const float t = temperature[b];
  if (!(p > 0.0f) || !(t > 0.0f)) return;
  __syncthreads();  // step 1's writes, before the maximum reads them
  float top = -INFINITY;
  for (uint64_t i = threadIdx.x; i < V; i += kBlockThreads) {
    const float v = row[i];
    if (v > top) top = v;  // NaN never is
  }
  top = block_reduce(top, max_scratch, MaxOp{});
  if (!isfinite(top)) return;
  const double log_p = p >= 1.0f ? 0.0 : log(static_cast<double>(p));
  const double threshold =
      __dadd_rn(static_cast<double>(top), __dmul_rn(static_cast<double>(t), log_p));
  for (uint64_t i = threadIdx.x; i < V; i += kBlockThreads) {
    if (static_cast<double>(row[i]) < threshold) row[i] = -INFINITY;
  }
}
