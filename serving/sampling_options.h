// The sampling options beyond temperature, top-k and top-p
// (docs/serving.md, "Sampling options"): a request's logit bias, penalties,
// min_p and choices, their checks, the seed of each choice, and each
// sequence's list of the tokens whose logits its options change.
//
// Pure host logic; the engine's thread (and add_request) use it.
#ifndef AXRT_SERVING_SAMPLING_OPTIONS_H_
#define AXRT_SERVING_SAMPLING_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "axrt/serving.h"

namespace axrt::serving {

// The options of a request that `process_logits` applies.
struct LogitOptions {
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  float min_p = 0.0f;
  bool bias = false;  // the request has a logit bias
  // Whether a sequence lists tokens (a bias or a penalty).
  bool listed() const {
    return bias || repetition_penalty != 1.0f || frequency_penalty != 0.0f ||
           presence_penalty != 0.0f;
  }
  // Whether a sampled row of the sequence needs `process_logits`.
  bool processes(float temperature) const {
    return listed() || (min_p > 0.0f && temperature > 0.0f);
  }
};

// Checks the request's logit bias, penalties, min_p and n (INVALID_ARGUMENT
// naming the field), and that the model can apply them (`can_process`: it
// has `process_logits`); writes the options on success.
axrt_status_t check_sampling_options(const axrt_request_t& request, uint64_t vocab,
                                     bool can_process, LogitOptions* out);

// The seed choice `choice` of a request seeded `seed` samples with
// (axrt_request_t.n).
uint64_t choice_seed(uint64_t seed, uint32_t choice);

// The tokens whose logits a sequence's options change: those with a logit
// bias, those of the prompt (under a repetition penalty) and those
// generated (under any penalty), each with its count among the generated
// tokens, whether the prompt holds it and its bias. Built when the request
// is added and kept up to date as tokens are generated (a hash look-up a
// token), so that a step copies the list as it is into `process_logits`'
// entry rows.
class LogitEntries {
 public:
  // The bias of `bias_tokens[i]` is `bias_values[i]` (distinct tokens);
  // with `prompt_penalized`, every distinct token of `prompt` is listed;
  // with `count_generated`, generated() lists and counts the tokens.
  LogitEntries(std::span<const int32_t> bias_tokens, std::span<const float> bias_values,
               std::span<const int32_t> prompt, bool prompt_penalized, bool count_generated);

  // Token `token` was generated.
  void generated(int32_t token);

  // The list, in the order tokens joined it: parallel arrays of size().
  size_t size() const { return tokens_.size(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& counts() const { return counts_; }
  const std::vector<int32_t>& in_prompt() const { return in_prompt_; }
  const std::vector<float>& bias() const { return bias_; }

 private:
  // The entry of `token`, added (no bias, count 0, not in the prompt) when
  // it has none.
  size_t entry(int32_t token);

  bool count_generated_;
  std::vector<int32_t> tokens_, counts_, in_prompt_;
  std::vector<float> bias_;
  std::unordered_map<int32_t, uint32_t> index_;  // token -> its entry
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_SAMPLING_OPTIONS_H_
