// The serving engine behind include/axrt/serving.h: a thread that runs the
// scheduler's steps through the executable's `step` and `sample`
// functions, over a KV cache it allocates on the executable's device, and
// hands each request's tokens to the callback.
#ifndef AXRT_SERVING_ENGINE_H_
#define AXRT_SERVING_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "axrt/executable.h"
#include "axrt/memory.h"
#include "axrt/serving.h"
#include "axrt/stream.h"
#include "base/status.h"
#include "serving/block_manager.h"
#include "serving/member_thread.h"
#include "serving/scheduler.h"
#include "serving/step_graphs.h"

namespace axrt::serving {

// The sizes of the model, read from the `step` and `sample` signatures.
struct ModelShape {
  uint64_t layers = 0;
  uint64_t kv_heads = 0;
  uint64_t block_size = 0;
  uint64_t row = 0;  // the cache's last dimension: head_dim, or head_dim + 4 bytes (fp8)
  uint64_t max_blocks = 0;  // per sequence
  uint64_t vocab = 0;
  uint64_t max_tokens = 0;  // bound of T
  uint64_t max_rows = 0;    // bound of S (and of the sampler's B)
  uint64_t max_entries = 0;  // process_logits' bound of E (0: no process_logits)
  axrt_dtype_t cache_dtype = AXRT_DTYPE_FLOAT32;  // f32, bf16, or u8 (fp8 codes and scales)
  uint64_t element_bytes = 4;                      // of cache_dtype
  // Bytes of one block of one (layer, keys or values) plane of `heads` KV heads.
  uint64_t plane_block_bytes(uint64_t heads) const {
    return heads * block_size * row * element_bytes;
  }
  uint64_t block_bytes() const { return layers * 2 * plane_block_bytes(kv_heads); }
};

class Engine;
class SetLink;

// Tensors over the engine's buffers, shaped for one step, released together
// when this goes away.
class StepTensors {
 public:
  explicit StepTensors(size_t count);  // room for `count` without reallocating
  ~StepTensors();
  StepTensors(const StepTensors&) = delete;
  StepTensors& operator=(const StepTensors&) = delete;
  // A tensor of `dtype` and `dims` over `buffer` (retained by the tensor),
  // held here; `*out` is borrowed from this.
  axrt_status_t make(axrt_buffer_t buffer, axrt_dtype_t dtype,
                     std::initializer_list<int64_t> dims, axrt_tensor_t* out);

 private:
  std::vector<axrt_tensor_t> tensors_;
};

// A member of a tensor-parallel set other than the head (rank 0): its
// `step`, on a stream of its device, over its buffers and its KV-cache
// shard, queued by a thread of its own (serving/member_thread.h).
struct Peer {
  uint32_t rank = 0;
  std::unique_ptr<MemberThread> thread;
  // The step the thread queues: the engine's, sized T tokens and R rows.
  Engine* engine = nullptr;
  const StepPlan* plan = nullptr;
  uint64_t T = 0, R = 0;
  axrt_executable_t executable = nullptr;
  axrt_function_t step = nullptr;
  axrt_device_t device = nullptr;
  axrt_stream_t stream = nullptr;
  uint64_t kv_heads = 0;
  axrt_buffer_t tokens = nullptr, positions = nullptr, tables = nullptr, rows = nullptr;
  axrt_buffer_t cache_buffer = nullptr;
  axrt_tensor_t cache = nullptr;
  uint64_t num_blocks = 0;  // of its KV-cache shard
  ~Peer();
};

// One step of a member other than the head, in host memory.
struct MemberStep {
  const int32_t* tokens = nullptr;     // [T]
  const int32_t* positions = nullptr;  // [T]
  const int32_t* tables = nullptr;     // [T, max_blocks]
  const int32_t* rows = nullptr;       // [R]
  const std::pair<int32_t, int32_t>* copies = nullptr;  // copy-on-write (from, to)
  size_t copy_count = 0;
  uint64_t T = 0, R = 0;
};

// A tensor over `buffer`: a KV cache (or a member's shard of it) of
// `num_blocks` blocks and `kv_heads` heads.
axrt_status_t cache_tensor(const ModelShape& shape, axrt_buffer_t buffer, uint64_t num_blocks,
                           uint64_t kv_heads, axrt_tensor_t* out);
// Queues the copy-on-write `copies` in a cache of `num_blocks` blocks (per
// plane) and `kv_heads` heads.
axrt_status_t copy_blocks(const ModelShape& shape, const std::pair<int32_t, int32_t>* copies,
                          size_t copy_count, uint64_t num_blocks, axrt_stream_t stream,
                          axrt_buffer_t cache, uint64_t kv_heads);
// Member `rank` (of `members`) running `executable`: checks its `step`
// against the head's `shape`, and makes its stream, buffers and KV-cache
// shard of `num_blocks` blocks into `out` (serving/engine_set.cc).
axrt_status_t setup_member(const ModelShape& shape, uint64_t num_blocks, uint32_t rank,
                           size_t members, axrt_executable_t executable, Peer* out);
// Queues member `p`'s step over `in` on its stream, its channel bound to
// `group`.
axrt_status_t queue_member_step(const ModelShape& shape, axrt_group_t group, Peer& p,
                                const MemberStep& in);

class Engine {
 public:
  static axrt_status_t create(axrt_executable_t executable, const axrt_engine_options_t& options,
                              std::unique_ptr<Engine>* out);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  axrt_status_t add(const axrt_request_t& request);
  axrt_status_t cancel(uint64_t id);
  void stats(axrt_engine_stats_t* out);

 private:
  // An event and what it points to, kept until delivered.
  struct PendingEvent {
    axrt_engine_event_t event;
    std::vector<int32_t> top_tokens;
    std::vector<float> top_logprobs;
    StatusPtr status;
  };
  // Device buffers of the step's inputs and outputs, at their largest
  // (defined below).
  struct Buffers;
  // Host copies of one step's inputs and outputs.
  struct Staging {
    std::vector<int32_t> tokens, positions, tables, rows, top_k, sample_positions, sampled;
    std::vector<float> temperature, top_p, logits;
    std::vector<uint64_t> seeds;
    // process_logits' inputs: per row, then the rows' entries [rows, E].
    std::vector<float> repetition, frequency, presence, min_p;
    std::vector<int32_t> entry_tokens, entry_counts, entry_in_prompt;
    std::vector<float> entry_bias;
  };

  Engine() = default;
  axrt_status_t init(axrt_executable_t executable, const axrt_engine_options_t& options);
  // Checks and sets up the set's other members (options.executables[1..]).
  axrt_status_t init_peers(const axrt_engine_options_t& options, uint64_t num_blocks);
  // Queues member `peer`'s step over what the head's staging holds.
  axrt_status_t execute_peer(Peer& peer, const StepPlan& plan, uint64_t T, uint64_t R);
  // Queues the step on every member of the set at once: the head's from
  // this thread (`inputs`, `logits`), the others' from their threads.
  axrt_status_t execute_set(axrt_tensor_t* inputs, axrt_tensor_t logits, const StepPlan& plan,
                            uint64_t T, uint64_t R);
  // The same when the others run in other processes (serving/engine_remote.cc):
  // the step's inputs go to them through the group, then the head's step.
  axrt_status_t execute_remote(axrt_tensor_t* inputs, axrt_tensor_t logits, const StepPlan& plan,
                               uint64_t T, uint64_t R);
  // Tells the members in other processes the set's shape (at creation).
  axrt_status_t init_remote(uint64_t num_blocks);
  // Tells them the set ends (their axrt_engine_follow returns), unless the
  // group failed.
  void stop_remote() noexcept;
  // Aborts the set's group (naming no member: the first failure stays the
  // one named) once a step went wrong, so that no member waits for the
  // others until the group's timeout. Nothing on one device.
  void abort_group(const char* why);
  void run();
  // One turn of the engine thread's loop, under `lock`; false once stopped.
  bool run_once(std::unique_lock<std::mutex>& lock, std::vector<PendingEvent>& events);
  // Ends every request in flight with RESOURCE_EXHAUSTED, however short
  // memory stays.
  void fail_out_of_memory(std::unique_lock<std::mutex>& lock, std::vector<PendingEvent>& events);
  // Records the step that ran `plan` from `begin` into a running trace.
  void trace_step(const StepPlan& plan, int64_t begin) const;
  // Runs `plan` on the device; the sampled tokens (and logits, when
  // `want_logits`) land in staging_.
  axrt_status_t execute(const StepPlan& plan, bool want_logits);
  // Calls `step` over the staged inputs (T tokens, R rows), then `sample`
  // over S rows when there are any, queuing `between` (when not null)
  // between the two.
  axrt_status_t call_step(const StepPlan& plan, uint64_t T, uint64_t R, uint64_t S,
                          const std::function<axrt_status_t()>* between);
  // The entries a row of the plan's sampled rows needs in process_logits
  // (docs/serving.md, "Sampling options"); 0 when no row needs it.
  uint64_t entries_per_row(const StepPlan& plan) const;
  // Fills process_logits' staging for `rows` rows (the plan's sampled
  // rows first, the rest neutral) of `entries` entries each, and queues
  // its uploads.
  axrt_status_t stage_processing(const StepPlan& plan, uint64_t rows, uint64_t entries);
  // Calls process_logits over the staged rows.
  axrt_status_t call_process(uint64_t rows, uint64_t entries);
  // Ends `s` (and the choices it still holds) with `finish`, and frees it.
  void end_sequence(Sequence* s, axrt_finish_reason_t finish, axrt_status_t status,
                    std::vector<PendingEvent>& out);
  // Queues the request's other choices, which `s` (choice 0) held until its
  // prompt was in the cache.
  void release_choices(Sequence* s);
  void deliver(std::vector<PendingEvent>& events);
  PendingEvent end_event(Sequence* s, axrt_finish_reason_t finish, axrt_status_t status);
  void token_event(Sequence* s, uint32_t row, bool have_logits, std::vector<PendingEvent>& out);
  // Ends every request in flight with `finish` (and `status`, borrowed).
  void end_all(axrt_finish_reason_t finish, axrt_status_t status,
               std::vector<PendingEvent>& out);

  axrt_executable_t executable_ = nullptr;
  axrt_function_t step_ = nullptr;
  axrt_function_t sample_ = nullptr;
  axrt_function_t process_ = nullptr;  // process_logits; null in files that predate it
  axrt_device_t device_ = nullptr;
  axrt_stream_t stream_ = nullptr;
  std::unique_ptr<Buffers> buffers_;
  // A tensor-parallel set: its group (borrowed) and the members after the
  // head; none on one device. Members in other processes: `remote_`, the
  // link that sends them each step.
  axrt_group_t group_ = nullptr;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::unique_ptr<SetLink> remote_;
  ModelShape shape_;
  axrt_engine_callback_t callback_ = nullptr;
  void* user_data_ = nullptr;
  uint32_t max_waiting_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_set<uint64_t> cancels_;  // ids to cancel before the next step
  bool stopping_ = false;
  StatusPtr failure_;  // set when a step failed: the engine takes no more work
  axrt_engine_stats_t counters_ = AXRT_ENGINE_STATS_INIT;
  Staging staging_;  // the engine thread's alone
  // Decode steps from graphs (options.graph_max_batch); null: calls only.
  // The padding tokens' blocks follow the block manager's.
  std::unique_ptr<StepGraphs> graphs_;
  int32_t scratch_base_ = 0;
  uint32_t scratch_count_ = 0;
  bool last_step_graphed_ = false;  // the engine thread's
  std::thread thread_;
};

struct Engine::Buffers {
  axrt_buffer_t tokens = nullptr, positions = nullptr, tables = nullptr, rows = nullptr;
  axrt_buffer_t logits = nullptr, temperature = nullptr, top_k = nullptr, top_p = nullptr;
  axrt_buffer_t seeds = nullptr, sample_positions = nullptr, sampled = nullptr;
  axrt_tensor_t cache = nullptr;
  axrt_buffer_t cache_buffer = nullptr;
  // process_logits' (with the function): per row, and the entries, grown
  // to `entry_capacity` a row when a step needs more.
  axrt_buffer_t repetition = nullptr, frequency = nullptr, presence = nullptr, min_p = nullptr;
  axrt_buffer_t entry_tokens = nullptr, entry_counts = nullptr, entry_in_prompt = nullptr;
  axrt_buffer_t entry_bias = nullptr;
  uint64_t entry_capacity = 0;
  ~Buffers() {
    for (axrt_buffer_t b : {tokens, positions, tables, rows, logits, temperature, top_k, top_p,
                            seeds, sample_positions, sampled, cache_buffer, repetition, frequency,
                            presence, min_p, entry_tokens, entry_counts, entry_in_prompt,
                            entry_bias}) {
      axrt_buffer_release(b);
    }
    axrt_tensor_release(cache);
  }
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_ENGINE_H_
