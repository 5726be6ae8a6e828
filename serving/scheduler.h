// The serving engine's scheduler (docs/serving.md): which tokens of which
// sequences the next step runs.
//
// Iteration-level (continuous) batching under a token budget per step:
// every running sequence gets its next token (decode) or the next chunk of
// its prompt, oldest first; then waiting requests are admitted first come,
// first served while the budget, the running limit and the free blocks
// allow, each starting with the blocks the prefix cache already holds for
// its prompt. When a running sequence needs a block and none is free, the
// newest running sequence is preempted: its blocks are freed and it waits
// again at the front of the queue, to be recomputed from its tokens (the
// prefix cache usually still holds most of them).
//
// Pure host logic over a BlockManager; not thread-safe (the engine's lock).
#ifndef AXRT_SERVING_SCHEDULER_H_
#define AXRT_SERVING_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serving/block_manager.h"
#include "serving/sampling_options.h"

namespace axrt::serving {

struct SamplingParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;  // this choice's (choice_seed)
  LogitOptions logit;  // what `process_logits` applies
};

struct Sequence {
  uint64_t id = 0;
  uint32_t choice = 0;          // which of the request's choices (axrt_request_t.n)
  uint64_t arrival = 0;         // order of add(): the first-come-first-served key
  std::vector<int32_t> tokens;  // the prompt, then every generated token
  uint32_t prompt_length = 0;
  uint32_t max_tokens = 0;
  std::vector<int32_t> stop_ids;
  SamplingParams sampling;
  uint32_t flags = 0;        // axrt_request_flags_t
  uint32_t top_logprobs = 0;
  // The tokens its logit options change; null when it lists none.
  std::unique_ptr<LogitEntries> logit_entries;
  // Choice 0 of a request of n > 1 choices holds the others here until its
  // prompt is in the cache (the engine's; the scheduler never sees them).
  std::vector<std::unique_ptr<Sequence>> later_choices;
  // Tokens whose keys and values are in the cache; the blocks holding them
  // (and room for what is scheduled); the chain hashes of the full blocks
  // registered or found in the prefix cache, blocks [0, hashes.size()).
  uint32_t computed = 0;
  uint32_t in_flight = 0;  // tokens after `computed` the step being run writes
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;
  uint32_t cached_tokens = 0;  // of the prompt, found in the prefix cache at first admission
  bool admitted_once = false;
  bool counted = false;  // the engine's: in its prompt-token counters
  bool running = false;
  uint32_t generated() const { return static_cast<uint32_t>(tokens.size()) - prompt_length; }
};

// One sequence's part of a step: tokens [start, start + count) of it; with
// `sample`, the step ends at its last token and samples the next.
struct ScheduledSequence {
  Sequence* sequence;
  uint32_t start;
  uint32_t count;
  bool sample;
};

struct StepPlan {
  std::vector<ScheduledSequence> entries;
  // Blocks to copy before the step (copy-on-write): (from, to).
  std::vector<std::pair<int32_t, int32_t>> copies;
  uint32_t tokens = 0;
  uint32_t preempted = 0;
};

struct SchedulerLimits {
  uint32_t max_step_tokens = 512;
  uint32_t max_running = 64;
  uint32_t max_context = 0;  // the longest sequence, in tokens
  bool chunked_prefill = true;
};

class Scheduler {
 public:
  Scheduler(BlockManager& blocks, const SchedulerLimits& limits);

  const SchedulerLimits& limits() const { return limits_; }
  BlockManager& blocks() { return blocks_; }

  // Why a request of this size can never run, or empty when it can.
  std::string refusal(uint64_t prompt_length, uint64_t max_tokens) const;
  // Queues a sequence (its tokens the prompt); the scheduler owns it.
  Sequence* add(std::unique_ptr<Sequence> sequence);
  // Queues `sequence` first in the waiting queue (a request's later
  // choices, which arrived with it). On failure (out of memory) nothing
  // changed and `sequence` still holds it.
  void add_first(std::unique_ptr<Sequence>& sequence);
  // A live sequence of request `id` (any of its choices); null when none.
  Sequence* find(uint64_t id);
  // The next step: what runs, what is copied first. Empty when nothing can
  // run.
  StepPlan schedule();
  // After the step ran: the scheduled tokens are in the cache; registers
  // the blocks they filled with the prefix cache.
  void complete(const StepPlan& plan);
  // Ends a sequence (finished, cancelled, failed): frees its blocks,
  // forgets it.
  void finish(Sequence* sequence);

  size_t running_count() const { return running_.size(); }
  size_t waiting_count() const { return waiting_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  // One sequence, running or waiting; null when there is none. Allocates
  // nothing (for ending them all when memory is short).
  Sequence* any() const;
  uint64_t preemptions() const { return preemptions_; }
  // Token slots of held blocks that hold a token or are being written by
  // the step in flight (each block once).
  uint64_t filled_slots() const;

 private:
  uint32_t blocks_for(uint64_t tokens) const;
  // Makes room for tokens [start, start + count) of `s`: copies shared
  // blocks it would write into (recorded in `plan`) and allocates the rest.
  // False, with nothing changed, when too few blocks are free.
  bool reserve(Sequence* s, uint32_t start, uint32_t count, StepPlan& plan);
  void preempt(Sequence* s);
  void match_prefix(Sequence* s);
  void release_blocks(Sequence* s);

  BlockManager& blocks_;
  SchedulerLimits limits_;
  // By request id: the choices of a request share it.
  std::unordered_multimap<uint64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<Sequence*> running_;  // in admission order
  std::deque<Sequence*> waiting_;
  uint64_t arrivals_ = 0;
  uint64_t preemptions_ = 0;
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_SCHEDULER_H_
