// The serving engine's block manager and scheduler, deterministically: no
// device, no thread, no model (the engine end to end is
// tests/python/test_serving_engine.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "serving/block_manager.h"
#include "serving/scheduler.h"

using namespace axrt::serving;

namespace {

std::vector<int32_t> iota(int32_t first, size_t count) {
  std::vector<int32_t> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::unique_ptr<Sequence> sequence(uint64_t id, std::vector<int32_t> prompt, uint32_t max_tokens) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->prompt_length = static_cast<uint32_t>(prompt.size());
  s->tokens = std::move(prompt);
  s->max_tokens = max_tokens;
  return s;
}

// A step as the test sees it after the fact (finished sequences are gone).
struct Step {
  struct Entry {
    uint64_t id;
    uint32_t count;
    bool sample;
  };
  std::vector<Entry> entries;
  std::vector<std::pair<int32_t, int32_t>> copies;
  uint32_t tokens = 0;
  uint32_t preempted = 0;
};

// What the engine does around a step: schedule, "run" (complete), append a
// token to every sampled sequence, finish those at max_tokens.
Step run_step(Scheduler& scheduler, std::vector<uint64_t>* finished = nullptr) {
  StepPlan plan = scheduler.schedule();
  Step step{{}, plan.copies, plan.tokens, plan.preempted};
  for (const ScheduledSequence& e : plan.entries) {
    step.entries.push_back({e.sequence->id, e.count, e.sample});
  }
  scheduler.complete(plan);
  for (const ScheduledSequence& e : plan.entries) {
    if (!e.sample) continue;
    Sequence* s = e.sequence;
    s->tokens.push_back(static_cast<int32_t>(1000 + s->generated()));
    if (s->generated() >= s->max_tokens) {
      if (finished) finished->push_back(s->id);
      scheduler.finish(s);
    }
  }
  REQUIRE(scheduler.blocks().check().empty());
  return step;
}

uint32_t count_of(const Step& step, uint64_t id) {
  for (const Step::Entry& e : step.entries) {
    if (e.id == id) return e.count;
  }
  return 0;
}

}  // namespace

TEST_CASE("blocks are handed out least recently freed first and counted") {
  BlockManager blocks(4, 16, true);
  REQUIRE(blocks.free_blocks() == 4);
  std::vector<int32_t> held;
  for (int i = 0; i < 4; ++i) held.push_back(blocks.allocate());
  CHECK(held == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(blocks.allocate() == -1);
  CHECK(blocks.used_blocks() == 4);
  blocks.release(2);
  blocks.release(0);
  CHECK(blocks.free_blocks() == 2);
  CHECK(blocks.allocate() == 2);  // freed first
  CHECK(blocks.allocate() == 0);
  blocks.retain(1);
  CHECK(blocks.ref_count(1) == 2);
  blocks.release(1);
  CHECK(blocks.ref_count(1) == 1);
  CHECK(blocks.free_blocks() == 0);
  CHECK(blocks.check().empty());
}

TEST_CASE("a registered block is found again by its prefix, shared, and evicted last-used first") {
  BlockManager blocks(3, 4, true);
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {5, 6, 7, 8};
  const uint64_t ha = BlockManager::chain_hash(0, a);
  const uint64_t hb = BlockManager::chain_hash(ha, b);
  CHECK(ha != hb);
  CHECK(BlockManager::chain_hash(0, b) != hb);  // the same tokens after another prefix

  const int32_t x = blocks.allocate();
  const int32_t y = blocks.allocate();
  blocks.register_block(x, ha, 0, a);
  blocks.register_block(y, hb, ha, b);
  // Held: a lookup shares it.
  CHECK(blocks.lookup(ha, 0, a) == x);
  CHECK(blocks.ref_count(x) == 2);
  // Wrong parent or tokens: no.
  CHECK(blocks.lookup(hb, 0, b) == -1);
  CHECK(blocks.lookup(ha, 0, b) == -1);
  blocks.release(x);
  blocks.release(x);
  blocks.release(y);
  CHECK(blocks.free_blocks() == 3);
  CHECK(blocks.cached_free_blocks() == 2);
  // Free but registered: a lookup takes it back off the free list.
  CHECK(blocks.lookup(ha, 0, a) == x);
  CHECK(blocks.free_blocks() == 2);
  CHECK(blocks.cached_free_blocks() == 1);
  blocks.release(x);
  // Allocation takes the never-used block first, then evicts y (freed
  // before x), keeping x.
  const int32_t z = blocks.allocate();
  CHECK(z != x);
  CHECK(z != y);
  CHECK(blocks.allocate() == y);
  CHECK(blocks.evictions() == 1);
  CHECK(blocks.lookup(hb, ha, b) == -1);
  CHECK(blocks.lookup(ha, 0, a) == x);
  CHECK(blocks.hits() == 3);
  CHECK(blocks.check().empty());
}

TEST_CASE("without prefix caching nothing is registered or found") {
  BlockManager blocks(2, 4, false);
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const int32_t x = blocks.allocate();
  blocks.register_block(x, BlockManager::chain_hash(0, a), 0, a);
  CHECK_FALSE(blocks.registered(x));
  CHECK(blocks.lookup(BlockManager::chain_hash(0, a), 0, a) == -1);
}

TEST_CASE("steps keep the token budget: decode first, then chunks of prompts, first come first served") {
  BlockManager blocks(64, 16, false);
  Scheduler scheduler(blocks, {16, 8, 256, true});
  std::vector<uint64_t> finished;
  scheduler.add(sequence(1, iota(1, 10), 3));
  scheduler.add(sequence(2, iota(1, 30), 3));
  scheduler.add(sequence(3, iota(1, 5), 3));

  Step p = run_step(scheduler, &finished);
  CHECK(p.tokens == 16);
  CHECK(count_of(p, 1) == 10);
  CHECK(count_of(p, 2) == 6);  // a chunk
  CHECK(count_of(p, 3) == 0);  // no budget left
  CHECK(p.entries[0].sample);
  CHECK_FALSE(p.entries[1].sample);

  p = run_step(scheduler, &finished);
  CHECK(count_of(p, 1) == 1);   // its decode token
  CHECK(count_of(p, 2) == 15);  // the rest of the budget
  CHECK(count_of(p, 3) == 0);
  p = run_step(scheduler, &finished);
  CHECK(count_of(p, 1) == 1);
  CHECK(count_of(p, 2) == 9);  // the prompt's end: it samples
  CHECK(count_of(p, 3) == 5);
  CHECK(p.tokens == 15);
  while (scheduler.running_count() + scheduler.waiting_count() > 0) run_step(scheduler, &finished);
  CHECK(finished == std::vector<uint64_t>{1, 2, 3});
  CHECK(blocks.used_blocks() == 0);
}

TEST_CASE("without chunked prefill a prompt runs whole, and one longer than a step is refused") {
  BlockManager blocks(64, 16, false);
  Scheduler scheduler(blocks, {16, 8, 256, false});
  CHECK_FALSE(scheduler.refusal(17, 1).empty());
  CHECK(scheduler.refusal(16, 1).empty());
  scheduler.add(sequence(1, iota(1, 10), 2));
  scheduler.add(sequence(2, iota(1, 12), 2));
  Step p = run_step(scheduler);
  CHECK(count_of(p, 1) == 10);
  CHECK(count_of(p, 2) == 0);  // 12 > the 6 left: it waits, whole
  p = run_step(scheduler);
  CHECK(count_of(p, 1) == 1);
  CHECK(count_of(p, 2) == 12);
}

TEST_CASE("the running limit and first come first served hold") {
  BlockManager blocks(64, 16, false);
  Scheduler scheduler(blocks, {64, 2, 256, true});
  for (uint64_t id = 1; id <= 4; ++id) scheduler.add(sequence(id, iota(1, 4), 5));
  Step p = run_step(scheduler);
  CHECK(p.entries.size() == 2);
  CHECK(count_of(p, 1) == 4);
  CHECK(count_of(p, 2) == 4);
  CHECK(scheduler.waiting_count() == 2);
  CHECK(scheduler.waiting().front()->id == 3);
}

TEST_CASE("requests that can never fit are refused by name") {
  BlockManager blocks(8, 16, false);
  Scheduler scheduler(blocks, {64, 8, 128, true});
  CHECK(scheduler.refusal(100, 28).empty());
  CHECK(scheduler.refusal(100, 29).find("context of 128") != std::string::npos);
  BlockManager small(2, 16, false);
  Scheduler tight(small, {64, 8, 128, true});
  CHECK(tight.refusal(20, 13).empty());  // 32 tokens stored: 2 blocks
  CHECK(tight.refusal(20, 14).find("cache has 2") != std::string::npos);
}

TEST_CASE("when blocks run out the newest sequence is preempted and recomputed later") {
  // 6 blocks of 4 tokens; three sequences of 4-token prompts growing to 12.
  BlockManager blocks(6, 4, false);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  for (uint64_t id = 1; id <= 3; ++id) scheduler.add(sequence(id, iota(10 * id, 4), 8));
  std::vector<uint64_t> finished;
  uint64_t preempted = 0;
  for (int step = 0; step < 100 && scheduler.running_count() + scheduler.waiting_count() > 0;
       ++step) {
    const Step p = run_step(scheduler, &finished);
    preempted += p.preempted;
    CHECK(blocks.used_blocks() <= 6);
  }
  CHECK(preempted > 0);
  CHECK(scheduler.preemptions() == preempted);
  // Every sequence ran to its end, the oldest first.
  REQUIRE(finished.size() == 3);
  CHECK(finished[0] == 1);
  CHECK(blocks.used_blocks() == 0);
}

TEST_CASE("the preempted sequence is the newest, and it waits at the front") {
  BlockManager blocks(3, 4, false);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  scheduler.add(sequence(1, iota(1, 4), 8));
  scheduler.add(sequence(2, iota(1, 4), 8));
  scheduler.add(sequence(3, iota(1, 4), 8));
  run_step(scheduler);  // three prompts, a block each
  CHECK(blocks.free_blocks() == 0);
  // Each needs a second block now and none is free: the newest (3) gives
  // its block up for 1; then 2, the newest left, preempts itself.
  Step p = run_step(scheduler);
  CHECK(p.preempted == 2);
  CHECK(count_of(p, 1) == 1);
  CHECK(count_of(p, 2) == 0);
  REQUIRE(scheduler.waiting_count() == 2);
  CHECK(scheduler.waiting().front()->id == 2);
  CHECK(scheduler.waiting().back()->id == 3);
  CHECK(scheduler.waiting().front()->computed == 0);
}

TEST_CASE("a shared prefix is found, counted, and written only after copy-on-write") {
  BlockManager blocks(16, 4, true);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  const std::vector<int32_t> prompt = iota(1, 10);  // two full blocks and two tokens
  scheduler.add(sequence(1, prompt, 4));
  run_step(scheduler);  // prefill: blocks 0 and 1 registered
  CHECK(blocks.used_blocks() == 3);

  scheduler.add(sequence(2, prompt, 4));
  Step p = run_step(scheduler);
  Sequence* second = scheduler.find(2);
  REQUIRE(second != nullptr);
  CHECK(second->cached_tokens == 8);
  CHECK(count_of(p, 2) == 2);  // only the partial block's tokens run
  CHECK(blocks.ref_count(second->blocks[0]) == 2);
  CHECK(blocks.ref_count(second->blocks[1]) == 2);
  CHECK(p.copies.empty());

  // A prompt that is exactly the two shared blocks: its last token must run
  // (for its logits), into a block others hold: copied first.
  scheduler.add(sequence(3, iota(1, 8), 4));
  p = run_step(scheduler);
  Sequence* third = scheduler.find(3);
  REQUIRE(third != nullptr);
  CHECK(third->cached_tokens == 7);
  CHECK(count_of(p, 3) == 1);
  REQUIRE(p.copies.size() == 1);
  CHECK(p.copies[0].first == second->blocks[1]);
  CHECK(p.copies[0].second == third->blocks[1]);
  CHECK(third->blocks[0] == second->blocks[0]);
  CHECK(third->blocks[1] != second->blocks[1]);
  std::vector<uint64_t> finished;
  while (scheduler.running_count() + scheduler.waiting_count() > 0) run_step(scheduler, &finished);
  CHECK(blocks.used_blocks() == 0);
  CHECK(blocks.cached_free_blocks() > 0);
}

TEST_CASE("a finished or cancelled sequence gives its blocks back at once") {
  BlockManager blocks(8, 4, false);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  Sequence* s = scheduler.add(sequence(1, iota(1, 9), 4));
  scheduler.add(sequence(2, iota(1, 3), 4));
  run_step(scheduler);
  CHECK(blocks.used_blocks() == 4);
  scheduler.finish(s);
  CHECK(blocks.used_blocks() == 1);
  CHECK(scheduler.find(1) == nullptr);
  scheduler.finish(scheduler.find(2));
  CHECK(blocks.used_blocks() == 0);
  CHECK(blocks.check().empty());
}

TEST_CASE("filled slots count the tokens in the cache and those the step in flight writes") {
  BlockManager blocks(8, 4, false);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  scheduler.add(sequence(1, iota(1, 6), 4));
  const StepPlan plan = scheduler.schedule();
  CHECK(blocks.used_blocks() == 2);
  CHECK(scheduler.filled_slots() == 6);  // being written
  scheduler.complete(plan);
  CHECK(scheduler.filled_slots() == 6);
  plan.entries[0].sequence->tokens.push_back(7);
  scheduler.schedule();
  CHECK(scheduler.filled_slots() == 7);
}

TEST_CASE("a request's later choices share its id, wait first, and take its prompt from the cache") {
  BlockManager blocks(16, 4, true);
  Scheduler scheduler(blocks, {64, 8, 64, true});
  scheduler.add(sequence(1, iota(1, 10), 2));  // the prompt: two full blocks and 2 tokens
  run_step(scheduler);                         // prefilled; its full blocks registered
  scheduler.add(sequence(2, iota(50, 3), 2));  // another request, waiting behind
  for (uint32_t c = 2; c >= 1; --c) {
    auto later = sequence(1, iota(1, 10), 2);
    later->choice = c;
    scheduler.add_first(later);
    CHECK(later == nullptr);
  }
  CHECK(scheduler.waiting().front()->choice == 1);
  CHECK(scheduler.waiting()[1]->choice == 2);
  CHECK(scheduler.waiting().back()->id == 2);
  std::vector<uint64_t> finished;
  const Step step = run_step(scheduler, &finished);
  // Choice 0 decodes (its last token); choices 1 and 2 compute only the
  // prompt's last 2 tokens; then the other request.
  REQUIRE(step.entries.size() == 4);
  CHECK(step.entries[1].id == 1);
  CHECK(step.entries[1].count == 2);
  CHECK(step.entries[2].count == 2);
  CHECK(step.entries[3].id == 2);
  for (const Sequence* s : scheduler.running()) {
    if (s->id == 1 && s->choice > 0) CHECK(s->cached_tokens == 8);
  }
  // The id is found while any choice lives; finishing one leaves the others.
  CHECK(finished == std::vector<uint64_t>{1});
  REQUIRE(scheduler.find(1) != nullptr);
  while (scheduler.find(1) != nullptr) run_step(scheduler, &finished);
  CHECK(std::count(finished.begin(), finished.end(), 1) == 3);
  CHECK(blocks.check().empty());
}
