#include "serving/step_graphs.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "axrt/memory.h"
#include "base/status.h"

namespace axrt::serving {
namespace {

// A tensor over `buffer`, released by the holder.
struct OwnedTensor {
  axrt_tensor_t t = nullptr;
  ~OwnedTensor() { axrt_tensor_release(t); }
};

axrt_status_t make(axrt_buffer_t buffer, axrt_dtype_t dtype, std::initializer_list<int64_t> dims,
                   OwnedTensor* out) {
  const std::vector<int64_t> shape(dims);
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  return axrt_tensor_create(buffer, &desc, &out->t);
}

// Whether a capture's refusal means "this device or function takes no
// graphs" rather than a failure.
bool refusal(axrt_status_t status) {
  const axrt_status_code_t code = axrt_status_code(status);
  return code == AXRT_STATUS_CODE_UNIMPLEMENTED || code == AXRT_STATUS_CODE_FAILED_PRECONDITION;
}

}  // namespace

StepGraphs::StepGraphs(const StepGraphInputs& inputs, uint32_t max_batch) : in_(inputs) {
  for (uint32_t size = 1; size < max_batch; size *= 2) buckets_.push_back(Bucket{size});
  buckets_.push_back(Bucket{max_batch});
}

StepGraphs::~StepGraphs() {
  for (Bucket& b : buckets_) {
    axrt_graph_release(b.step);
    axrt_graph_release(b.sample);
  }
}

uint32_t StepGraphs::scratch_blocks(uint32_t max_batch, uint64_t block_size) {
  return static_cast<uint32_t>((max_batch + block_size - 1) / block_size);
}

uint32_t StepGraphs::bucket(uint64_t sequences) const {
  for (const Bucket& b : buckets_) {
    if (sequences <= b.size) return b.refused ? 0 : b.size;
  }
  return 0;
}

void StepGraphs::pad_table(int32_t* table_row, uint64_t max_blocks, int32_t scratch_base,
                           uint32_t scratch_count) {
  for (uint64_t i = 0; i < max_blocks; ++i) {
    table_row[i] = scratch_base + static_cast<int32_t>(i % scratch_count);
  }
}

axrt_status_t StepGraphs::capture(Bucket& b) {
  const int64_t B = b.size;
  const int64_t MB = static_cast<int64_t>(in_.max_blocks);
  OwnedTensor tokens, positions, tables, rows, logits;
  AXRT_RETURN_IF_ERROR(make(in_.tokens, AXRT_DTYPE_INT32, {B}, &tokens));
  AXRT_RETURN_IF_ERROR(make(in_.positions, AXRT_DTYPE_INT32, {B}, &positions));
  AXRT_RETURN_IF_ERROR(make(in_.tables, AXRT_DTYPE_INT32, {B, MB}, &tables));
  AXRT_RETURN_IF_ERROR(make(in_.rows, AXRT_DTYPE_INT32, {B}, &rows));
  AXRT_RETURN_IF_ERROR(
      make(in_.logits, AXRT_DTYPE_FLOAT32, {B, static_cast<int64_t>(in_.vocab)}, &logits));
  const axrt_tensor_t step_in[] = {tokens.t, positions.t, tables.t, rows.t, in_.cache};
  axrt_status_t status =
      axrt_function_capture(in_.step, in_.stream, step_in, 5, &logits.t, 1, nullptr, &b.step);
  if (status != nullptr) {
    if (!refusal(status)) return status;
    axrt_status_free(status);
    b.refused = true;
    return nullptr;
  }
  captured_.fetch_add(1, std::memory_order_relaxed);
  OwnedTensor temperature, top_k, top_p, seeds, sample_positions, sampled;
  AXRT_RETURN_IF_ERROR(make(in_.temperature, AXRT_DTYPE_FLOAT32, {B}, &temperature));
  AXRT_RETURN_IF_ERROR(make(in_.top_k, AXRT_DTYPE_INT32, {B}, &top_k));
  AXRT_RETURN_IF_ERROR(make(in_.top_p, AXRT_DTYPE_FLOAT32, {B}, &top_p));
  AXRT_RETURN_IF_ERROR(make(in_.seeds, AXRT_DTYPE_UINT64, {B}, &seeds));
  AXRT_RETURN_IF_ERROR(make(in_.sample_positions, AXRT_DTYPE_INT32, {B}, &sample_positions));
  AXRT_RETURN_IF_ERROR(make(in_.sampled, AXRT_DTYPE_INT32, {B}, &sampled));
  const axrt_tensor_t sample_in[] = {logits.t, temperature.t, top_k.t,
                                     top_p.t,  seeds.t,       sample_positions.t};
  status = axrt_function_capture(in_.sample, in_.stream, sample_in, 6, &sampled.t, 1, nullptr,
                                 &b.sample);
  if (status != nullptr) {
    if (!refusal(status)) return status;
    axrt_status_free(status);
    axrt_graph_release(std::exchange(b.step, nullptr));
    b.refused = true;
    return nullptr;
  }
  captured_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

axrt_status_t StepGraphs::run(uint32_t batch, const std::function<axrt_status_t()>* between,
                              bool* out_replayed) {
  *out_replayed = false;
  auto it = std::find_if(buckets_.begin(), buckets_.end(),
                         [batch](const Bucket& b) { return b.size == batch; });
  if (it == buckets_.end() || it->refused) return nullptr;
  if (it->step == nullptr) {
    AXRT_RETURN_IF_ERROR(capture(*it));
    if (it->refused) return nullptr;
  }
  AXRT_RETURN_IF_ERROR(axrt_graph_replay(it->step));
  if (between != nullptr) AXRT_RETURN_IF_ERROR((*between)());
  AXRT_RETURN_IF_ERROR(axrt_graph_replay(it->sample));
  *out_replayed = true;
  return nullptr;
}

}  // namespace axrt::serving
