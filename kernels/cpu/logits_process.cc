// The sampling options applied to a row of logits in place, before
// axrt_sample_f32 (docs/llm.md, "Logits processing"): a bias per listed
// token, the repetition, frequency and presence penalties of the tokens the
// row lists, then min_p's mask. The arithmetic is specified operation by
// operation so that the CUDA body and a float64 reference compute the same
// values: each listed logit in float64, every operation rounded on its own
// (this file is compiled without contraction), then rounded to f32 once.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/kernels.h"

using namespace axrt::kernels::cpu;

extern "C" axrt_kernel_result_t axrt_logits_process_f32(const void* args,
                                                        const axrt_kernel_dispatch_t*,
                                                        const axrt_kernel_workgroup_t* workgroup) {
  const auto* a = static_cast<const LogitsProcessArgs*>(args);
  const uint64_t b = workgroup->workgroup_id.x;
  if (workgroup->workgroup_id.y != 0 || workgroup->workgroup_id.z != 0 || b >= a->B) {
    return AXRT_KERNEL_OK;
  }
  const uint64_t V = a->V;
  const uint64_t E = a->E;
  if (V == 0 || V > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return invalid_argument(workgroup, "V is %" PRIu64 ", must be in [1, 2^31)", V);
  }
  float* row = a->logits + b * V;
  const int32_t* tokens = a->entry_tokens + b * E;
  const int32_t* counts = a->entry_counts + b * E;
  const int32_t* in_prompt = a->entry_in_prompt + b * E;
  const float* bias = a->entry_bias + b * E;
  // Every entry is checked before the row is written.
  for (uint64_t e = 0; e < E; ++e) {
    if (tokens[e] != -1 && (tokens[e] < 0 || static_cast<uint64_t>(tokens[e]) >= V)) {
      return invalid_argument(workgroup,
                              "row %" PRIu64 " entry %" PRIu64 ": token %d is outside [0, %" PRIu64
                              ") (-1: no entry)",
                              b, e, tokens[e], V);
    }
    if (counts[e] < 0) {
      return invalid_argument(workgroup, "row %" PRIu64 " entry %" PRIu64 ": count %d is negative",
                              b, e, counts[e]);
    }
  }

  // Step 1: bias, then the penalties, of every listed token.
  const double repetition = a->repetition_penalty[b];
  const double frequency = a->frequency_penalty[b];
  const double presence = a->presence_penalty[b];
  for (uint64_t e = 0; e < E; ++e) {
    const int32_t token = tokens[e];
    if (token < 0) continue;
    const int32_t count = counts[e];
    double x = static_cast<double>(row[token]) + static_cast<double>(bias[e]);
    if (count > 0 || in_prompt[e] != 0) x = x > 0.0 ? x / repetition : x * repetition;
    x = x - frequency * static_cast<double>(count);
    if (count > 0) x = x - presence;
    row[token] = static_cast<float>(x);
  }

  // Step 2: min_p, for a sampled row: tokens whose probability after
  // temperature is below min_p times the largest one's become -inf.
  const float min_p = a->min_p[b];
  const float temperature = a->temperature[b];
  if (!(min_p > 0.0f) || !(temperature > 0.0f)) return AXRT_KERNEL_OK;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float top = kNegInf;
  for (uint64_t i = 0; i < V; ++i) {
    const float v = row[i];
    if (v > top) top = v;  // NaN never is
  }
  if (!std::isfinite(top)) return AXRT_KERNEL_OK;
  const double log_min_p = min_p >= 1.0f ? 0.0 : std::log(static_cast<double>(min_p));
  const double threshold = static_cast<double>(top) + static_cast<double>(temperature) * log_min_p;
  for (uint64_t i = 0; i < V; ++i) {
    if (static_cast<double>(row[i]) < threshold) row[i] = kNegInf;
  }
  return AXRT_KERNEL_OK;
}
