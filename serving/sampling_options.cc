#include "serving/sampling_options.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/status.h"

namespace axrt::serving {
namespace {

constexpr const char* kFn = "axrt_engine_add_request";
constexpr axrt_status_code_t kInvalid = AXRT_STATUS_CODE_INVALID_ARGUMENT;

// SplitMix64's output function (docs/llm.md, "Sampling").
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

axrt_status_t check_sampling_options(const axrt_request_t& r, uint64_t vocab, bool can_process,
                                     LogitOptions* out) {
  if (r.n == 0 || r.n > AXRT_ENGINE_MAX_CHOICES) {
    return make_status(kInvalid, "{}: request {}: n must be in [1, {}], not {}", kFn, r.id,
                       AXRT_ENGINE_MAX_CHOICES, r.n);
  }
  for (const auto& [name, value] : {std::pair{"presence_penalty", r.presence_penalty},
                                    std::pair{"frequency_penalty", r.frequency_penalty},
                                    std::pair{"repetition_penalty", r.repetition_penalty}}) {
    if (!std::isfinite(value)) {
      return make_status(kInvalid, "{}: request {}: {} must be finite, not {}", kFn, r.id, name,
                         value);
    }
  }
  if (!(r.repetition_penalty > 0.0f)) {
    return make_status(kInvalid, "{}: request {}: repetition_penalty must be > 0 (1: none), not {}",
                       kFn, r.id, r.repetition_penalty);
  }
  if (!(r.min_p >= 0.0f && r.min_p <= 1.0f)) {
    return make_status(kInvalid, "{}: request {}: min_p must be in [0, 1], not {}", kFn, r.id,
                       r.min_p);
  }
  if (r.logit_bias_count > AXRT_ENGINE_MAX_LOGIT_BIAS) {
    return make_status(kInvalid, "{}: request {}: logit_bias has {} entries, more than {}", kFn,
                       r.id, r.logit_bias_count, AXRT_ENGINE_MAX_LOGIT_BIAS);
  }
  if (r.logit_bias_count != 0 &&
      (r.logit_bias_tokens == nullptr || r.logit_bias_values == nullptr)) {
    return make_status(kInvalid, "{}: request {}: logit_bias_tokens or logit_bias_values is NULL",
                       kFn, r.id);
  }
  std::vector<int32_t> seen(r.logit_bias_tokens, r.logit_bias_tokens + r.logit_bias_count);
  for (size_t i = 0; i < r.logit_bias_count; ++i) {
    const int32_t token = r.logit_bias_tokens[i];
    const float value = r.logit_bias_values[i];
    if (token < 0 || static_cast<uint64_t>(token) >= vocab) {
      return make_status(kInvalid,
                         "{}: request {}: logit_bias_tokens[{}] is {}, outside the vocabulary "
                         "[0, {})",
                         kFn, r.id, i, token, vocab);
    }
    if (!(std::fabs(value) <= AXRT_ENGINE_LOGIT_BIAS_BOUND)) {
      return make_status(kInvalid,
                         "{}: request {}: logit_bias_values[{}] (token {}) is {}, outside [-{}, "
                         "{}]",
                         kFn, r.id, i, token, value, AXRT_ENGINE_LOGIT_BIAS_BOUND,
                         AXRT_ENGINE_LOGIT_BIAS_BOUND);
    }
  }
  std::sort(seen.begin(), seen.end());
  const auto twice = std::adjacent_find(seen.begin(), seen.end());
  if (twice != seen.end()) {
    return make_status(kInvalid, "{}: request {}: logit_bias_tokens holds token {} twice", kFn,
                       r.id, *twice);
  }
  LogitOptions options;
  options.presence_penalty = r.presence_penalty;
  options.frequency_penalty = r.frequency_penalty;
  options.repetition_penalty = r.repetition_penalty;
  options.min_p = r.min_p;
  options.bias = r.logit_bias_count != 0;
  if (!can_process && (options.listed() || options.min_p != 0.0f)) {
    const char* name = options.bias                         ? "logit_bias"
                       : options.repetition_penalty != 1.0f ? "repetition_penalty"
                       : options.frequency_penalty != 0.0f  ? "frequency_penalty"
                       : options.presence_penalty != 0.0f   ? "presence_penalty"
                                                            : "min_p";
    return make_status(kInvalid,
                       "{}: request {}: {} needs the model's `process_logits` function, which "
                       "this file predates: convert the model again with `axrt.llm convert`",
                       kFn, r.id, name);
  }
  *out = options;
  return nullptr;
}

uint64_t choice_seed(uint64_t seed, uint32_t choice) {
  return choice == 0 ? seed : mix64(seed + choice * 0x9E3779B97F4A7C15ull);
}

LogitEntries::LogitEntries(std::span<const int32_t> bias_tokens, std::span<const float> bias_values,
                           std::span<const int32_t> prompt, bool prompt_penalized,
                           bool count_generated)
    : count_generated_(count_generated) {
  for (size_t i = 0; i < bias_tokens.size(); ++i) bias_[entry(bias_tokens[i])] = bias_values[i];
  if (prompt_penalized) {
    for (const int32_t token : prompt) in_prompt_[entry(token)] = 1;
  }
}

size_t LogitEntries::entry(int32_t token) {
  const auto [it, added] = index_.try_emplace(token, static_cast<uint32_t>(tokens_.size()));
  if (added) {
    try {
      tokens_.push_back(token);
      counts_.push_back(0);
      in_prompt_.push_back(0);
      bias_.push_back(0.0f);
    } catch (...) {
      // Out of memory: the arrays keep one size, the index only what they hold.
      tokens_.resize(it->second);
      counts_.resize(it->second);
      in_prompt_.resize(it->second);
      bias_.resize(it->second);
      index_.erase(it);
      throw;
    }
  }
  return it->second;
}

void LogitEntries::generated(int32_t token) {
  if (!count_generated_) return;
  int32_t& count = counts_[entry(token)];
  if (count < std::numeric_limits<int32_t>::max()) ++count;
}

}  // namespace axrt::serving
