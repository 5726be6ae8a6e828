#include "serving/scheduler.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace axrt::serving {

Scheduler::Scheduler(BlockManager& blocks, const SchedulerLimits& limits)
    : blocks_(blocks), limits_(limits) {}

uint32_t Scheduler::blocks_for(uint64_t tokens) const {
  return static_cast<uint32_t>((tokens + blocks_.block_size() - 1) / blocks_.block_size());
}

std::string Scheduler::refusal(uint64_t prompt_length, uint64_t max_tokens) const {
  const uint64_t total = prompt_length + max_tokens;
  if (total > limits_.max_context) {
    return fmt::format(
        "the prompt ({} tokens) and max_tokens ({}) make {}, more than the model's context of {}",
        prompt_length, max_tokens, total, limits_.max_context);
  }
  if (!limits_.chunked_prefill && prompt_length > limits_.max_step_tokens) {
    return fmt::format(
        "the prompt ({} tokens) is longer than a step's {} tokens, and chunked prefill is off",
        prompt_length, limits_.max_step_tokens);
  }
  // The last token generated is never run through the model: its keys and
  // values are never needed.
  const uint32_t needed = blocks_for(total - 1);
  if (needed > blocks_.num_blocks()) {
    return fmt::format(
        "the prompt ({} tokens) and max_tokens ({}) need {} KV-cache blocks of {} tokens; the "
        "cache has {}",
        prompt_length, max_tokens, needed, blocks_.block_size(), blocks_.num_blocks());
  }
  return {};
}

Sequence* Scheduler::add(std::unique_ptr<Sequence> sequence) {
  Sequence* s = sequence.get();
  s->arrival = arrivals_++;
  sequences_.emplace(s->id, std::move(sequence));
  waiting_.push_back(s);
  return s;
}

void Scheduler::add_first(std::unique_ptr<Sequence>& sequence) {
  Sequence* s = sequence.get();
  // Room first: the node's allocation then fails before it takes the
  // sequence, and nothing rehashes.
  sequences_.reserve(sequences_.size() + 1);
  waiting_.push_front(s);
  try {
    sequences_.emplace(s->id, std::move(sequence));
  } catch (...) {
    waiting_.pop_front();
    throw;
  }
  s->arrival = arrivals_++;
}

Sequence* Scheduler::find(uint64_t id) {
  const auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

Sequence* Scheduler::any() const {
  if (!running_.empty()) return running_.back();
  return waiting_.empty() ? nullptr : waiting_.front();
}

void Scheduler::release_blocks(Sequence* s) {
  // Last block first: the free list then evicts a sequence's tail before
  // its head, which more requests share.
  for (auto it = s->blocks.rbegin(); it != s->blocks.rend(); ++it) blocks_.release(*it);
  s->blocks.clear();
  s->hashes.clear();
  s->computed = 0;
  s->in_flight = 0;
}

void Scheduler::match_prefix(Sequence* s) {
  if (!blocks_.prefix_caching() || s->computed != 0 || !s->blocks.empty()) return;
  const uint32_t size = blocks_.block_size();
  const std::span<const int32_t> tokens(s->tokens);
  s->blocks.reserve(tokens.size() / size);
  s->hashes.reserve(tokens.size() / size);
  uint64_t parent = 0;
  for (uint32_t i = 0; (i + 1) * static_cast<uint64_t>(size) <= tokens.size(); ++i) {
    const auto part = tokens.subspan(i * size, size);
    const uint64_t hash = BlockManager::chain_hash(parent, part);
    const int32_t block = blocks_.lookup(hash, parent, part);
    if (block < 0) break;
    s->blocks.push_back(block);
    s->hashes.push_back(hash);
    parent = hash;
  }
  // The last token always runs: its logits are what the step is for.
  s->computed = std::min<uint32_t>(static_cast<uint32_t>(s->blocks.size()) * size,
                                   static_cast<uint32_t>(s->tokens.size()) - 1);
}

bool Scheduler::reserve(Sequence* s, uint32_t start, uint32_t count, StepPlan& plan) {
  const uint32_t size = blocks_.block_size();
  const uint32_t first = start / size;
  const uint32_t held = static_cast<uint32_t>(s->blocks.size());
  const uint32_t needed = blocks_for(static_cast<uint64_t>(start) + count);
  uint32_t shared = 0;
  for (uint32_t i = first; i < std::min(held, needed); ++i) {
    if (blocks_.ref_count(s->blocks[i]) > 1) ++shared;
  }
  const uint32_t fresh = needed > held ? needed - held : 0;
  if (blocks_.free_blocks() < fresh + shared) return false;
  // Room first, so that no block is taken and then lost to an allocation
  // that fails.
  plan.copies.reserve(plan.copies.size() + shared);
  s->blocks.reserve(needed);
  for (uint32_t i = first; i < std::min(held, needed); ++i) {
    const int32_t old = s->blocks[i];
    if (blocks_.ref_count(old) <= 1) continue;
    // Copy-on-write: this sequence writes into a block others read.
    const int32_t copy = blocks_.allocate();
    plan.copies.emplace_back(old, copy);
    blocks_.release(old);
    s->blocks[i] = copy;
    // The copy is this sequence's alone and about to change: not
    // registered, and the chain from here on is recomputed.
    s->hashes.resize(std::min<size_t>(s->hashes.size(), i));
  }
  for (uint32_t i = held; i < needed; ++i) s->blocks.push_back(blocks_.allocate());
  return true;
}

void Scheduler::preempt(Sequence* s) {
  waiting_.push_front(s);  // first: the one step that can fail
  release_blocks(s);
  s->running = false;
  running_.erase(std::find(running_.begin(), running_.end(), s));
  ++preemptions_;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  uint32_t budget = limits_.max_step_tokens;
  // Running sequences, oldest first. A copy: preemption edits running_.
  const std::vector<Sequence*> order = running_;
  std::unordered_set<Sequence*> preempted;
  for (Sequence* s : order) {
    if (preempted.contains(s)) continue;
    if (budget == 0) break;
    const uint32_t remaining = static_cast<uint32_t>(s->tokens.size()) - s->computed;
    const uint32_t count = std::min(remaining, budget);
    bool fits = reserve(s, s->computed, count, plan);
    while (!fits) {
      // The newest running sequence not yet scheduled gives its blocks back.
      Sequence* victim = running_.back();
      preempted.insert(victim);
      preempt(victim);
      ++plan.preempted;
      if (victim == s) break;
      fits = reserve(s, s->computed, count, plan);
    }
    if (!fits) break;
    plan.entries.push_back({s, s->computed, count, s->computed + count == s->tokens.size()});
    budget -= count;
  }
  // Then the waiting, first come first served, unless this step had to
  // preempt (blocks are short: admitting more would only preempt again).
  while (plan.preempted == 0 && budget > 0 && !waiting_.empty() &&
         running_.size() < limits_.max_running) {
    Sequence* s = waiting_.front();
    match_prefix(s);
    const uint32_t remaining = static_cast<uint32_t>(s->tokens.size()) - s->computed;
    // Without chunked prefill a prompt runs whole; a preempted sequence
    // longer than a step is still split (it could never run otherwise).
    const bool whole =
        !limits_.chunked_prefill && remaining <= limits_.max_step_tokens;
    if (whole && remaining > budget) {
      release_blocks(s);
      break;
    }
    const uint32_t count = std::min(remaining, budget);
    if (!reserve(s, s->computed, count, plan)) {
      release_blocks(s);
      break;
    }
    running_.push_back(s);  // first: the one step that can fail
    waiting_.pop_front();
    if (!s->admitted_once) {
      s->admitted_once = true;
      s->cached_tokens = s->computed;
    }
    s->running = true;
    plan.entries.push_back({s, s->computed, count, s->computed + count == s->tokens.size()});
    budget -= count;
  }
  for (const ScheduledSequence& e : plan.entries) {
    plan.tokens += e.count;
    e.sequence->in_flight = e.count;
  }
  return plan;
}

void Scheduler::complete(const StepPlan& plan) {
  const uint32_t size = blocks_.block_size();
  for (const ScheduledSequence& e : plan.entries) {
    Sequence* s = e.sequence;
    s->computed = e.start + e.count;
    s->in_flight = 0;
    if (!blocks_.prefix_caching()) continue;
    const std::span<const int32_t> tokens(s->tokens);
    s->hashes.reserve(s->computed / size);
    while ((s->hashes.size() + 1) * size <= s->computed) {
      const size_t i = s->hashes.size();
      const uint64_t parent = i == 0 ? 0 : s->hashes[i - 1];
      const auto part = tokens.subspan(i * size, size);
      const uint64_t hash = BlockManager::chain_hash(parent, part);
      blocks_.register_block(s->blocks[i], hash, parent, part);
      s->hashes.push_back(hash);
    }
  }
}

void Scheduler::finish(Sequence* s) {
  release_blocks(s);
  if (s->running) {
    running_.erase(std::find(running_.begin(), running_.end(), s));
  } else {
    const auto it = std::find(waiting_.begin(), waiting_.end(), s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  const auto [begin, end] = sequences_.equal_range(s->id);
  for (auto it = begin; it != end; ++it) {
    if (it->second.get() == s) {
      sequences_.erase(it);
      break;
    }
  }
}

uint64_t Scheduler::filled_slots() const {
  const uint32_t size = blocks_.block_size();
  std::unordered_map<int32_t, uint32_t> filled;
  for (const Sequence* s : running_) {
    const uint64_t end = s->computed + s->in_flight;
    for (size_t i = 0; i < s->blocks.size(); ++i) {
      const uint64_t begin = i * size;
      const uint32_t n =
          end > begin ? static_cast<uint32_t>(std::min<uint64_t>(size, end - begin)) : 0;
      uint32_t& slot = filled[s->blocks[i]];
      slot = std::max(slot, n);
    }
  }
  uint64_t total = 0;
  for (const auto& [block, n] : filled) total += n;
  return total;
}

}  // namespace axrt::serving
