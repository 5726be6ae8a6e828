// Token sampling (docs/llm.md, "Sampling"): block b samples row b with 256
// threads, following the steps of docs/llm.md without sorting anything.
// Every token gets a 64-bit rank key, its logit's order bits above its
// complemented id, so that a larger key ranks first (larger logit, then lower
// id) and keys are distinct. The top-k set is then "key >= the k-th largest
// key" and the top-p set "key >= the largest threshold whose candidates still
// weigh top_p of the top-k weight", both found bit by bit with a block count
// or sum per bit. The draw scans the kept weights in token order: each
// thread sums a contiguous slice, a block scan gives each slice its start,
// and the thread whose slice crosses u W walks it.
#include "common.cuh"

namespace axrt_cuda {
namespace {

struct MinU64Op {
  __device__ __forceinline__ uint64_t operator()(uint64_t a, uint64_t b) const {
    return a < b ? a : b;
  }
};
struct MaxU64Op {
  __device__ __forceinline__ uint64_t operator()(uint64_t a, uint64_t b) const {
    return a > b ? a : b;
  }
};

__device__ __forceinline__ float logit_at(const float* row, uint64_t i) {
  const float v = row[i];
  return v == v ? v : -INFINITY;
}

// The rank key of token i: larger logit first, then lower id; -0 and +0
// rank alike, as they compare equal.
__device__ __forceinline__ uint64_t rank_key(float v, uint64_t i) {
  uint32_t bits = v == 0.0f ? 0u : __float_as_uint(v);
  bits = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ double uniform(uint64_t seed, int32_t position) {
  const uint64_t step = static_cast<uint64_t>(static_cast<uint32_t>(position)) + 1;
  const uint64_t bits = mix64(mix64(seed) + step * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

__device__ __forceinline__ double weight_of(float v, float l_max, float temperature) {
  return exp((static_cast<double>(v) - static_cast<double>(l_max)) /
             static_cast<double>(temperature));
}

// Tokens whose key is at least `threshold`, counted over the block.
__device__ double count_at_least(const float* row, uint64_t V, uint64_t threshold,
                                 double* scratch) {
  double n = 0.0;
  for (uint64_t i = threadIdx.x; i < V; i += kBlockThreads) {
    n += rank_key(logit_at(row, i), i) >= threshold ? 1.0 : 0.0;
  }
  return block_reduce(n, scratch, SumOp{});
}

// The weight of the tokens whose key is at least `threshold`.
__device__ double weight_at_least(const float* row, uint64_t V, uint64_t threshold, float l_max,
                                  float temperature, double* scratch) {
  double w = 0.0;
  for (uint64_t i = threadIdx.x; i < V; i += kBlockThreads) {
    const float v = logit_at(row, i);
    if (rank_key(v, i) >= threshold) w += weight_of(v, l_max, temperature);
  }
  return block_reduce(w, scratch, SumOp{});
}

}  // namespace
}  // namespace axrt_cuda

extern "C" __global__ void __launch_bounds__(256)
    axrt_sample_f32(const float* logits, const float* temperature, const int32_t* top_k,
                    const float* top_p, const uint64_t* seeds, const int32_t* positions,
                    int32_t* tokens, uint64_t B, uint64_t V) {
  using namespace axrt_cuda;
  __shared__ double scratch[kBlockWarps];
  __shared__ uint64_t key_scratch[kBlockWarps];
  __shared__ double slice_start[kBlockThreads];
  if (blockDim.x != kBlockThreads || blockDim.y != 1 || blockDim.z != 1) return;
  const uint64_t b = blockIdx.x;
  if (blockIdx.y != 0 || blockIdx.z != 0 || b >= B) return;
  if (V == 0 || V > 0x7FFFFFFFull) return;
  const float* row = logits + b * V;

  // Step 1: the largest key is the lowest token holding the maximum.
  uint64_t best = 0;
  for (uint64_t i = threadIdx.x; i < V; i += kBlockThreads) {
    const uint64_t key = rank_key(logit_at(row, i), i);
    best = key > best ? key : best;
  }
  best = block_reduce(best, key_scratch, MaxU64Op{});
  const uint64_t arg_max = 0xFFFFFFFFu - static_cast<uint32_t>(best);
  const float l_max = logit_at(row, arg_max);
  const float t = temperature[b];
  const int32_t k_request = top_k[b];
  if (!(t > 0.0f) || !isfinite(l_max) || k_request == 1) {
    if (threadIdx.x == 0) tokens[b] = static_cast<int32_t>(arg_max);
    return;
  }

  // Step 3: the k-th largest key, built from the top bit down.
  const uint64_t k =
      k_request > 0 && static_cast<uint64_t>(k_request) < V ? static_cast<uint64_t>(k_request) : V;
  uint64_t top_k_key = 0;
  if (k < V) {
    for (int bit = 63; bit >= 0; --bit) {
      const uint64_t candidate = top_k_key | (1ull << bit);
      if (count_at_least(row, V, candidate, scratch) >= static_cast<double>(k)) {
        top_k_key = candidate;
      }
    }
  }
  // Step 4: the largest threshold whose candidates weigh top_p of the top-k
  // weight; never above the first-ranked token.
  uint64_t threshold = top_k_key;
  const float p = top_p[b];
  if (p < 1.0f) {
    const double target =
        static_cast<double>(p) * weight_at_least(row, V, top_k_key, l_max, t, scratch);
    uint64_t found = 0;
    for (int bit = 63; bit >= 0; --bit) {
      const uint64_t candidate = found | (1ull << bit);
      const uint64_t at = candidate > top_k_key ? candidate : top_k_key;
      if (weight_at_least(row, V, at, l_max, t, scratch) >= target) found = candidate;
    }
    threshold = found > top_k_key ? found : top_k_key;
    threshold = threshold < best ? threshold : best;
  }

  // Step 5: thread j sums the kept weights of tokens [j s, j s + s).
  const uint64_t slice = (V + kBlockThreads - 1) / kBlockThreads;
  const uint64_t begin = threadIdx.x * slice < V ? threadIdx.x * slice : V;
  const uint64_t end = begin + slice < V ? begin + slice : V;
  double own = 0.0;
  for (uint64_t i = begin; i < end; ++i) {
    const float v = logit_at(row, i);
    if (rank_key(v, i) >= threshold) own += weight_of(v, l_max, t);
  }
  slice_start[threadIdx.x] = own;
  __syncthreads();
  if (threadIdx.x == 0) {
    double running = 0.0;
    for (unsigned j = 0; j < kBlockThreads; ++j) {
      const double w = slice_start[j];
      slice_start[j] = running;
      running += w;
    }
    scratch[0] = running;
  }
  __syncthreads();
  const double target = uniform(seeds[b], positions[b]) * scratch[0];
  __syncthreads();
  // The first slice whose end passes the target walks to the token; past
  // every slice (rounding), the last kept token.
  const bool crosses = begin < end && slice_start[threadIdx.x] + own > target;
  const uint64_t first = block_reduce(
      crosses ? static_cast<uint64_t>(threadIdx.x) : static_cast<uint64_t>(kBlockThreads),
      key_scratch, MinU64Op{});
  uint64_t last_kept = 0;
  for (uint64_t i = begin; i < end; ++i) {
    const float v = logit_at(row, i);
    if (rank_key(v, i) >= threshold && weight_of(v, l_max, t) > 0.0) last_kept = i;
  }
  last_kept = block_reduce(last_kept, key_scratch, MaxU64Op{});
  if (first == kBlockThreads) {
    if (threadIdx.x == 0) tokens[b] = static_cast<int32_t>(last_kept);
    return;
  }
  if (threadIdx.x != first) return;
  double running = slice_start[threadIdx.x];
  uint64_t token = begin;
  for (uint64_t i = begin; i < end; ++i) {
    const float v = logit_at(row, i);
    if (rank_key(v, i) < threshold) continue;
    const double w = weight_of(v, l_max, t);
    if (w > 0.0) token = i;
    running += w;
    if (running > target) break;
  }
  tokens[b] = static_cast<int32_t>(token);
}
