// Decode steps replayed from graphs (axrt_engine_options_t.graph_max_batch,
// docs/serving.md "Graphs"): the batch-size buckets, the padding of a step
// to its bucket, and the `step` and `sample` graphs of each bucket,
// captured over the engine's buffers at the bucket's first use.
#ifndef AXRT_SERVING_STEP_GRAPHS_H_
#define AXRT_SERVING_STEP_GRAPHS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "axrt/executable.h"
#include "axrt/stream.h"

namespace axrt::serving {

// What the graphs are captured over: the engine's functions, stream and
// buffers (borrowed; they outlive the graphs), and the model's sizes.
struct StepGraphInputs {
  axrt_function_t step = nullptr, sample = nullptr;
  axrt_stream_t stream = nullptr;
  axrt_buffer_t tokens = nullptr, positions = nullptr, tables = nullptr, rows = nullptr;
  axrt_tensor_t cache = nullptr;
  axrt_buffer_t logits = nullptr, temperature = nullptr, top_k = nullptr, top_p = nullptr;
  axrt_buffer_t seeds = nullptr, sample_positions = nullptr, sampled = nullptr;
  uint64_t max_blocks = 0;  // per sequence: the block table's width
  uint64_t vocab = 0;
};

class StepGraphs {
 public:
  // Buckets 1, 2, 4, ... up to `max_batch` (itself the last).
  StepGraphs(const StepGraphInputs& inputs, uint32_t max_batch);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Scratch blocks that padding tokens write into, one slot each: enough
  // for the largest padding (fewer than the largest bucket).
  static uint32_t scratch_blocks(uint32_t max_batch, uint64_t block_size);

  // The bucket a step of `sequences` decode tokens pads to; 0 when none
  // holds it.
  uint32_t bucket(uint64_t sequences) const;

  // Fills padding token t (from 0) of a step: its table row points at the
  // scratch blocks from `scratch_base` (`scratch_count` of them) so that
  // every padding token writes a slot of its own.
  static void pad_table(int32_t* table_row, uint64_t max_blocks, int32_t scratch_base,
                        uint32_t scratch_count);

  // Queues `step` and `sample` for a step padded to `batch` (a bucket)
  // on the stream, capturing the bucket's graphs first if need be, and
  // `between` (when not null) between the two replays: the work queued
  // there (`process_logits`, as a call) is not captured. `*out_replayed`
  // false: the device cannot capture them (the engine then calls the
  // functions, with the same padded inputs); errors are the capture's, the
  // replay's or `between`'s.
  axrt_status_t run(uint32_t batch, const std::function<axrt_status_t()>* between,
                    bool* out_replayed);

  // Graphs captured so far (read from any thread).
  uint32_t captured() const { return captured_.load(std::memory_order_relaxed); }

 private:
  struct Bucket {
    uint32_t size = 0;
    axrt_graph_t step = nullptr, sample = nullptr;
    bool refused = false;  // a capture was refused: calls from now on
  };
  axrt_status_t capture(Bucket& b);

  StepGraphInputs in_;
  std::vector<Bucket> buckets_;
  std::atomic<uint32_t> captured_{0};
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_STEP_GRAPHS_H_
