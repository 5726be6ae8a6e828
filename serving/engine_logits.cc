// The serving engine's logits processing (docs/serving.md, "Sampling
// options"): which steps need `process_logits`, its inputs staged from the
// sampled sequences' options and entry lists, and its call between `step`
// and `sample`.
#include <algorithm>
#include <tuple>

#include "axrt/axrt.h"
#include "base/status.h"
#include "serving/engine.h"

namespace axrt::serving {

uint64_t Engine::entries_per_row(const StepPlan& plan) const {
  if (process_ == nullptr) return 0;
  uint64_t entries = 0;
  for (const ScheduledSequence& e : plan.entries) {
    const Sequence& s = *e.sequence;
    if (!e.sample || !s.sampling.logit.processes(s.sampling.temperature)) continue;
    // At least one: a row with min_p alone lists nothing.
    entries = std::max<uint64_t>({entries, 1, s.logit_entries ? s.logit_entries->size() : 0});
  }
  return entries;
}

axrt_status_t Engine::stage_processing(const StepPlan& plan, uint64_t rows, uint64_t entries) {
  Buffers& b = *buffers_;
  Staging& h = staging_;
  if (entries > b.entry_capacity) {
    // Grown by doubling, within the function's bound; nothing is queued on
    // the old buffers (every step ends synchronized).
    const uint64_t capacity =
        std::min(shape_.max_entries, std::max({entries, 2 * b.entry_capacity, uint64_t{64}}));
    const uint64_t bytes = shape_.max_rows * capacity * 4;
    for (axrt_buffer_t* buffer :
         {&b.entry_tokens, &b.entry_counts, &b.entry_in_prompt, &b.entry_bias}) {
      axrt_buffer_release(*buffer);
      *buffer = nullptr;
    }
    b.entry_capacity = 0;
    for (axrt_buffer_t* buffer :
         {&b.entry_tokens, &b.entry_counts, &b.entry_in_prompt, &b.entry_bias}) {
      AXRT_RETURN_IF_ERROR(axrt_buffer_allocate(device_, bytes, nullptr, buffer));
    }
    b.entry_capacity = capacity;
  }
  // Rows without options (and padding rows) are neutral: nothing listed,
  // min_p 0, which process_logits leaves untouched.
  h.repetition.assign(rows, 1.0f);
  h.frequency.assign(rows, 0.0f);
  h.presence.assign(rows, 0.0f);
  h.min_p.assign(rows, 0.0f);
  h.entry_tokens.assign(rows * entries, -1);
  h.entry_counts.assign(rows * entries, 0);
  h.entry_in_prompt.assign(rows * entries, 0);
  h.entry_bias.assign(rows * entries, 0.0f);
  uint64_t row = 0;
  for (const ScheduledSequence& e : plan.entries) {
    if (!e.sample) continue;
    const Sequence& s = *e.sequence;
    const LogitOptions& o = s.sampling.logit;
    if (o.processes(s.sampling.temperature)) {
      h.repetition[row] = o.repetition_penalty;
      h.frequency[row] = o.frequency_penalty;
      h.presence[row] = o.presence_penalty;
      h.min_p[row] = o.min_p;
      if (const LogitEntries* list = s.logit_entries.get()) {
        const uint64_t at = row * entries;
        std::copy(list->tokens().begin(), list->tokens().end(), h.entry_tokens.begin() + at);
        std::copy(list->counts().begin(), list->counts().end(), h.entry_counts.begin() + at);
        std::copy(list->in_prompt().begin(), list->in_prompt().end(),
                  h.entry_in_prompt.begin() + at);
        std::copy(list->bias().begin(), list->bias().end(), h.entry_bias.begin() + at);
      }
    }
    ++row;
  }
  const uint64_t n = rows * entries * 4;
  for (const auto& [data, buffer, bytes] : {std::tuple<const void*, axrt_buffer_t, uint64_t>{
                                                h.repetition.data(), b.repetition, rows * 4},
                                            {h.frequency.data(), b.frequency, rows * 4},
                                            {h.presence.data(), b.presence, rows * 4},
                                            {h.min_p.data(), b.min_p, rows * 4},
                                            {h.entry_tokens.data(), b.entry_tokens, n},
                                            {h.entry_counts.data(), b.entry_counts, n},
                                            {h.entry_in_prompt.data(), b.entry_in_prompt, n},
                                            {h.entry_bias.data(), b.entry_bias, n}}) {
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, data, buffer, 0, bytes));
  }
  return nullptr;
}

axrt_status_t Engine::call_process(uint64_t rows, uint64_t entries) {
  Buffers& b = *buffers_;
  StepTensors tensors(10);
  const auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  axrt_tensor_t in[10];
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.logits, AXRT_DTYPE_FLOAT32, {i64(rows), i64(shape_.vocab)}, &in[0]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.temperature, AXRT_DTYPE_FLOAT32, {i64(rows)}, &in[1]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.repetition, AXRT_DTYPE_FLOAT32, {i64(rows)}, &in[2]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.frequency, AXRT_DTYPE_FLOAT32, {i64(rows)}, &in[3]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.presence, AXRT_DTYPE_FLOAT32, {i64(rows)}, &in[4]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.min_p, AXRT_DTYPE_FLOAT32, {i64(rows)}, &in[5]));
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.entry_tokens, AXRT_DTYPE_INT32, {i64(rows), i64(entries)}, &in[6]));
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.entry_counts, AXRT_DTYPE_INT32, {i64(rows), i64(entries)}, &in[7]));
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.entry_in_prompt, AXRT_DTYPE_INT32, {i64(rows), i64(entries)}, &in[8]));
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.entry_bias, AXRT_DTYPE_FLOAT32, {i64(rows), i64(entries)}, &in[9]));
  return axrt_function_invoke(process_, stream_, in, 10, nullptr, 0, nullptr);
}

}  // namespace axrt::serving
