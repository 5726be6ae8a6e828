// Token sampling (docs/llm.md, "Sampling"): greedy, or temperature, top-k
// and top-p (nucleus) over one row of logits with a uniform number drawn
// from (seed, position) alone. The algorithm is specified step by step in
// docs/llm.md so that a reference can reproduce it; the comments below name
// the steps.
//
// Weights are float64: w_i = exp((l_i - l_max) / T). Only the candidates are
// ever sorted: top-k is a selection (nth_element), and the top-p prefix is
// sorted a growing slice at a time until it holds the probability asked for.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/transformer_simd.h"

namespace axrt::kernels::cpu {
namespace {

using transformer::Floats;
using transformer::load;
using transformer::splat;
using transformer::store;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The SplitMix64 output function (a bijection of 64-bit words).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The uniform number in [0, 1) of (seed, position): the (position + 1)-th
// output of a SplitMix64 stream whose state starts at mix64(seed), in 53 bits.
inline double uniform(uint64_t seed, int32_t position) {
  const uint64_t step = static_cast<uint64_t>(static_cast<uint32_t>(position)) + 1;
  const uint64_t bits = mix64(mix64(seed) + step * 0x9E3779B97F4A7C15ull);
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

// A logit with NaN read as -inf, so that every comparison below is a total
// order.
inline float logit_at(const float* row, uint64_t i) {
  const float v = row[i];
  return v == v ? v : kNegInf;
}

struct Candidate {
  float logit;
  int32_t index;
};

// The order of the candidates: larger logit first, then lower token id.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.index < b.index);
}

// A workgroup thread's working memory, grown to the vocabulary once.
struct SampleScratch {
  std::vector<Candidate> candidates;
  std::vector<double> weights;  // w_i of every token
  std::vector<double> kept;     // w_i of the kept tokens, 0 elsewhere
};

SampleScratch& sample_scratch() {
  static thread_local SampleScratch scratch;
  return scratch;
}

// weights[i] = exp((l_i - l_max) / T) for every token, in float64.
struct WeightsBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const float* row, uint64_t V, float l_max, float temperature,
                                  double* weights) {
    using D = typename Floats<kLanes>::D;
    constexpr int kDoubles = kLanes / 2;
    const D shift = splat<D>(static_cast<double>(l_max));
    const D t = splat<D>(static_cast<double>(temperature));
    uint64_t i = 0;
    for (; i + kDoubles <= V; i += kDoubles) {
      D l;
      for (int k = 0; k < kDoubles; ++k) l[k] = static_cast<double>(logit_at(row, i + k));
      store(weights + i, transformer::exp_doubles<kLanes>((l - shift) / t));
    }
    for (; i < V; ++i) {
      weights[i] = std::exp((static_cast<double>(logit_at(row, i)) - static_cast<double>(l_max)) /
                            static_cast<double>(temperature));
    }
  }
};

// Step 5: the first token whose running sum of kept weights, in increasing
// token id, exceeds u times their total; the last kept one if rounding
// leaves none.
int32_t draw(const double* kept, uint64_t V, double u) {
  double total = 0.0;
  int32_t last = 0;
  for (uint64_t i = 0; i < V; ++i) {
    total += kept[i];
    if (kept[i] > 0.0) last = static_cast<int32_t>(i);
  }
  const double target = u * total;
  double running = 0.0;
  for (uint64_t i = 0; i < V; ++i) {
    running += kept[i];
    if (running > target) return static_cast<int32_t>(i);
  }
  return last;
}

}  // namespace
}  // namespace axrt::kernels::cpu

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_sample_f32(const void* args, const axrt_kernel_dispatch_t*,
                                                const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const SampleArgs*>(args);
  const uint64_t b = workgroup->workgroup_id.x;
  if (workgroup->workgroup_id.y != 0 || workgroup->workgroup_id.z != 0 || b >= a->B) {
    return AXRT_KERNEL_OK;
  }
  const uint64_t V = a->V;
  if (V == 0 || V > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return invalid_argument(workgroup, "V is %" PRIu64 ", must be in [1, 2^31)", V);
  }
  const float* row = a->logits + b * V;

  // Step 1: the maximum and the lowest token holding it (greedy's answer).
  float l_max = logit_at(row, 0);
  uint64_t arg_max = 0;
  for (uint64_t i = 1; i < V; ++i) {
    const float v = logit_at(row, i);
    if (v > l_max) {
      l_max = v;
      arg_max = i;
    }
  }
  const float temperature = a->temperature[b];
  const int32_t top_k = a->top_k[b];
  if (!(temperature > 0.0f) || !std::isfinite(l_max) || top_k == 1) {
    a->tokens[b] = static_cast<int32_t>(arg_max);
    return AXRT_KERNEL_OK;
  }

  SampleScratch& scratch = sample_scratch();
  if (scratch.weights.size() < V) {
    scratch.candidates.resize(V);
    scratch.weights.resize(V);
    scratch.kept.resize(V);
  }
  // Step 2: the weights.
  double* weights = scratch.weights.data();
  transformer::run_transformer_isa<WeightsBody>(row, V, l_max, temperature, weights);

  const uint64_t k =
      top_k > 0 && static_cast<uint64_t>(top_k) < V ? static_cast<uint64_t>(top_k) : V;
  const float top_p = a->top_p[b];
  const bool nucleus = top_p < 1.0f;  // NaN: no nucleus
  double* kept = scratch.kept.data();
  if (k == V && !nucleus) {
    std::memcpy(kept, weights, sizeof(double) * V);
  } else {
    // Step 3: the k candidates that rank first.
    Candidate* c = scratch.candidates.data();
    for (uint64_t i = 0; i < V; ++i) c[i] = {logit_at(row, i), static_cast<int32_t>(i)};
    if (k < V) std::nth_element(c, c + k, c + V, ranks_before);
    uint64_t n = k;
    if (nucleus) {
      // Step 4: the shortest prefix of the ranked candidates whose weight
      // reaches top_p of theirs, at least one token.
      double candidate_total = 0.0;
      for (uint64_t i = 0; i < k; ++i) candidate_total += weights[c[i].index];
      const double target = static_cast<double>(top_p) * candidate_total;
      double running = 0.0;
      uint64_t sorted = 0;
      n = 0;
      while (n == 0 && sorted < k) {
        const uint64_t end = std::min(k, std::max<uint64_t>(64, 4 * sorted));
        if (end < k) std::nth_element(c + sorted, c + end, c + k, ranks_before);
        std::sort(c + sorted, c + end, ranks_before);
        for (uint64_t i = sorted; i < end; ++i) {
          running += weights[c[i].index];
          if (running >= target) {
            n = i + 1;
            break;
          }
        }
        sorted = end;
      }
      if (n == 0) n = k;  // rounding kept the total short of the target
    }
    std::memset(kept, 0, sizeof(double) * V);
    for (uint64_t i = 0; i < n; ++i) kept[c[i].index] = weights[c[i].index];
  }
  // Step 5.
  a->tokens[b] = draw(kept, V, uniform(a->seeds[b], a->positions[b]));
  return AXRT_KERNEL_OK;
}
