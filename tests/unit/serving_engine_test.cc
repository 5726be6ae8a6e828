// The serving engine's C API and threading (include/axrt/serving.h), over a
// stand-in model: `step` and `sample` with the serving contract's
// signatures whose commands are fills (every logit 0, every token 3), so
// that the engine's lifecycle runs fast here and under the sanitizers.
// The real model end to end is tests/python/test_serving_*.py.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/stand_in_model.h"
#include "tests/unit/status_check.h"

namespace {

using namespace axrt_test;

// What the callback saw, per request.
struct Seen {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> indices;
  int finishes = 0;
  axrt_finish_reason_t finish = AXRT_FINISH_NONE;
};

struct Recorder {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, Seen> seen;
  std::map<std::pair<uint64_t, uint32_t>, Seen> choices;  // by (request, choice)
  size_t finished = 0;
  // Set by a test: requests to add from inside the callback.
  axrt_engine_t engine = nullptr;
  bool chain = false;
  std::atomic<int> chained{0};

  static void on_event(void* user_data, const axrt_engine_event_t* e) {
    auto* r = static_cast<Recorder*>(user_data);
    bool add_follow_up = false;
    {
      std::lock_guard lock(r->mutex);
      Seen& s = r->seen[e->request_id];
      Seen& c = r->choices[{e->request_id, e->choice}];
      if (e->token >= 0) {
        s.tokens.push_back(e->token);
        s.indices.push_back(e->index);
        c.tokens.push_back(e->token);
        c.indices.push_back(e->index);
      }
      if (e->finish != AXRT_FINISH_NONE) {
        ++s.finishes;
        s.finish = e->finish;
        ++c.finishes;
        c.finish = e->finish;
        ++r->finished;
        add_follow_up = r->chain && e->request_id < 1000;
      }
    }
    if (add_follow_up) {
      // The callback may add requests (not under an engine lock).
      const int32_t prompt[] = {1, 2};
      axrt_request_t request = AXRT_REQUEST_INIT;
      request.id = e->request_id + 1000;
      request.prompt = prompt;
      request.prompt_length = 2;
      request.max_tokens = 2;
      if (axrt_status_t s = axrt_engine_add_request(r->engine, &request)) {
        axrt_status_free(s);
      } else {
        ++r->chained;
      }
    }
    r->changed.notify_all();
  }

  bool wait_for(size_t count) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(60), [&] { return finished >= count; });
  }
};

class StandIn {
 public:
  explicit StandIn(bool process = false) {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &device));
    const std::vector<uint8_t> file = StandInModel(process);
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(device, file.data(), file.size(), nullptr, &executable));
  }
  ~StandIn() {
    axrt_engine_destroy(engine);
    axrt_executable_release(executable);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  void Start(uint32_t num_blocks, uint32_t max_waiting = 0) {
    axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
    options.num_blocks = num_blocks;
    options.max_waiting = max_waiting;
    options.callback = &Recorder::on_event;
    options.user_data = &recorder;
    REQUIRE_CALL_OK(axrt_engine_create(executable, &options, &engine));
    recorder.engine = engine;
  }

  axrt_status_t Add(uint64_t id, uint32_t prompt_length, uint32_t max_tokens) {
    axrt_request_t request = AXRT_REQUEST_INIT;
    return Add(id, prompt_length, max_tokens, request);
  }

  // `request` with its id, a prompt and max_tokens filled in.
  axrt_status_t Add(uint64_t id, uint32_t prompt_length, uint32_t max_tokens,
                    axrt_request_t request) {
    std::vector<int32_t> prompt(prompt_length);
    for (uint32_t i = 0; i < prompt_length; ++i) prompt[i] = static_cast<int32_t>(i % kVocab);
    request.id = id;
    request.prompt = prompt.data();
    request.prompt_length = prompt.size();
    request.max_tokens = max_tokens;
    return axrt_engine_add_request(engine, &request);
  }

  axrt_engine_stats_t Stats() {
    axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
    REQUIRE_CALL_OK(axrt_engine_query_stats(engine, &stats));
    return stats;
  }

  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  axrt_executable_t executable = nullptr;
  axrt_engine_t engine = nullptr;
  Recorder recorder;
};

// The stand-in with `process_logits`.
class StandInProcessing : public StandIn {
 public:
  StandInProcessing() : StandIn(/*process=*/true) {}
};

}  // namespace

TEST_CASE_METHOD(StandIn, "requests from many threads all end once, in order, blocks returned",
                 "[serving]") {
  Start(/*num_blocks=*/12);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 40;
  std::atomic<int> cancelled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kPerThread + i);
        const uint32_t prompt = 1 + static_cast<uint32_t>(id % 8);
        const uint32_t max_tokens = 1 + static_cast<uint32_t>((id * 7) % 8);
        axrt_status_t s = Add(id, prompt, max_tokens);
        if (s != nullptr) {
          FAIL(axrt_status_message(s));
        }
        if (id % 5 == 0) {
          if (axrt_status_t c = axrt_engine_cancel(engine, id)) {
            axrt_status_free(c);  // it may have finished already
          } else {
            ++cancelled;
          }
        }
        axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
        if (axrt_status_t q = axrt_engine_query_stats(engine, &stats)) axrt_status_free(q);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(recorder.wait_for(kThreads * kPerThread));
  std::lock_guard lock(recorder.mutex);
  int cancels_seen = 0;
  for (uint64_t id = 0; id < kThreads * kPerThread; ++id) {
    const Seen& s = recorder.seen[id];
    INFO("request " << id);
    CHECK(s.finishes == 1);
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      CHECK(s.tokens[i] == kToken);
      CHECK(s.indices[i] == i);
    }
    const uint32_t max_tokens = 1 + static_cast<uint32_t>((id * 7) % 8);
    if (s.finish == AXRT_FINISH_CANCELLED) {
      ++cancels_seen;
      CHECK(s.tokens.size() < max_tokens);
    } else {
      CHECK(s.finish == AXRT_FINISH_LENGTH);
      CHECK(s.tokens.size() == max_tokens);
    }
  }
  CHECK(cancels_seen == cancelled.load());
  const axrt_engine_stats_t stats = Stats();
  CHECK(stats.kv_blocks_used == 0);
  CHECK(stats.running == 0);
  CHECK(stats.waiting == 0);
  CHECK(stats.requests_cancelled == static_cast<uint64_t>(cancelled.load()));
  CHECK(stats.requests_finished + stats.requests_cancelled == kThreads * kPerThread);
}

TEST_CASE_METHOD(StandIn, "the callback may add requests", "[serving]") {
  Start(8);
  recorder.chain = true;
  for (uint64_t id = 0; id < 10; ++id) REQUIRE_CALL_OK(Add(id, 3, 2));
  REQUIRE(recorder.wait_for(20));
  CHECK(recorder.chained.load() == 10);
  std::lock_guard lock(recorder.mutex);
  for (uint64_t id = 1000; id < 1010; ++id) CHECK(recorder.seen[id].tokens.size() == 2);
}

TEST_CASE_METHOD(StandIn, "destroying the engine ends every live request as cancelled",
                 "[serving]") {
  Start(4);  // room for one or two sequences at a time: the rest wait
  for (uint64_t id = 0; id < 20; ++id) REQUIRE_CALL_OK(Add(id, 4, 8));
  axrt_engine_destroy(engine);
  engine = nullptr;
  // Every event was delivered before destroy returned.
  std::lock_guard lock(recorder.mutex);
  REQUIRE(recorder.finished == 20);
  int cancelled = 0;
  for (uint64_t id = 0; id < 20; ++id) {
    const Seen& s = recorder.seen[id];
    CHECK(s.finishes == 1);
    if (s.finish == AXRT_FINISH_CANCELLED) ++cancelled;
  }
  CHECK(cancelled > 0);
}

TEST_CASE_METHOD(StandIn, "a full waiting queue refuses at once, and bad calls are refused",
                 "[serving]") {
  Start(4, /*max_waiting=*/2);
  // The engine's thread may take requests off the queue at any time: add
  // until one is refused.
  bool refused = false;
  for (uint64_t id = 0; id < 200 && !refused; ++id) {
    axrt_status_t s = Add(id, 4, 8);
    if (s != nullptr) {
      CHECK(axrt_status_code(s) == AXRT_STATUS_CODE_UNAVAILABLE);
      CHECK(std::string(axrt_status_message(s)).find("waiting") != std::string::npos);
      axrt_status_free(s);
      refused = true;
    }
  }
  CHECK(refused);
  CHECK(Stats().requests_rejected >= 1);

  REQUIRE_CALL_FAILS(Add(1000, 12, 8), AXRT_STATUS_CODE_INVALID_ARGUMENT, "context of 16");
  REQUIRE_CALL_FAILS(axrt_engine_add_request(engine, nullptr), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "NULL");
  REQUIRE_CALL_FAILS(axrt_engine_cancel(engine, 123456), AXRT_STATUS_CODE_NOT_FOUND, "123456");
  REQUIRE_CALL_FAILS(axrt_engine_cancel(nullptr, 1), AXRT_STATUS_CODE_INVALID_ARGUMENT, "NULL");
  axrt_engine_stats_t small = AXRT_ENGINE_STATS_INIT;
  small.struct_size = 4;
  REQUIRE_CALL_FAILS(axrt_engine_query_stats(engine, &small), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "struct_size");
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.struct_size = 8;
  REQUIRE_CALL_FAILS(axrt_engine_add_request(engine, &request),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "struct_size");
  axrt_engine_destroy(nullptr);
}

TEST_CASE_METHOD(StandIn, "creation refuses missing callbacks, options and functions",
                 "[serving]") {
  axrt_engine_t e = nullptr;
  axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
  REQUIRE_CALL_FAILS(axrt_engine_create(executable, &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "callback");
  options.callback = &Recorder::on_event;
  options.user_data = &recorder;
  REQUIRE_CALL_FAILS(axrt_engine_create(nullptr, &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "NULL");
  options.max_running = 9;
  REQUIRE_CALL_FAILS(axrt_engine_create(executable, &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "max_running");
  options.max_running = 0;
  options.num_blocks = 1u << 31;
  REQUIRE_CALL_FAILS(axrt_engine_create(executable, &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "too many");
  options.num_blocks = 0;
  options.kv_cache_bytes = 1ull << 39;  // 2^30 blocks of 512 bytes: more than the device
  REQUIRE_CALL_FAILS(axrt_engine_create(executable, &options, &e),
                     AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "KV cache");
  CHECK(e == nullptr);
}

// ---------------------------------------------------------------------------
// Sampling options (docs/serving.md, "Sampling options"): the fields at the
// end of axrt_request_t and the choices of the events.

TEST_CASE_METHOD(StandInProcessing, "sampling options are checked field by field, nothing queued",
                 "[serving]") {
  Start(16);
  static const int32_t kTwice[] = {3, 3};
  static const int32_t kOutside[] = {16};
  static const float kValues[] = {1.0f, 2.0f};
  static const float kTooBig[] = {100.5f};
  static const float kNan[] = {NAN};
  struct Bad {
    const char* field;
    void (*set)(axrt_request_t&);
  };
  const Bad bad[] = {
      {"presence_penalty", [](axrt_request_t& r) { r.presence_penalty = NAN; }},
      {"frequency_penalty", [](axrt_request_t& r) { r.frequency_penalty = INFINITY; }},
      {"repetition_penalty", [](axrt_request_t& r) { r.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](axrt_request_t& r) { r.repetition_penalty = -2.0f; }},
      {"repetition_penalty", [](axrt_request_t& r) { r.repetition_penalty = -INFINITY; }},
      {"min_p", [](axrt_request_t& r) { r.min_p = 1.5f; }},
      {"min_p", [](axrt_request_t& r) { r.min_p = NAN; }},
      {"logit_bias has 301", [](axrt_request_t& r) { r.logit_bias_count = 301; }},
      {"NULL", [](axrt_request_t& r) { r.logit_bias_count = 1; }},
      {"logit_bias_values[0]",
       [](axrt_request_t& r) {
         r.logit_bias_tokens = kTwice;
         r.logit_bias_values = kTooBig;
         r.logit_bias_count = 1;
       }},
      {"logit_bias_values[0]",
       [](axrt_request_t& r) {
         r.logit_bias_tokens = kTwice;
         r.logit_bias_values = kNan;
         r.logit_bias_count = 1;
       }},
      {"logit_bias_tokens[0] is 16",
       [](axrt_request_t& r) {
         r.logit_bias_tokens = kOutside;
         r.logit_bias_values = kValues;
         r.logit_bias_count = 1;
       }},
      {"token 3 twice",
       [](axrt_request_t& r) {
         r.logit_bias_tokens = kTwice;
         r.logit_bias_values = kValues;
         r.logit_bias_count = 2;
       }},
      {"n must be", [](axrt_request_t& r) { r.n = 0; }},
      {"n must be", [](axrt_request_t& r) { r.n = AXRT_ENGINE_MAX_CHOICES + 1; }},
  };
  for (const Bad& b : bad) {
    axrt_request_t request = AXRT_REQUEST_INIT;
    b.set(request);
    INFO(b.field);
    REQUIRE_CALL_FAILS(Add(1, 2, 2, request), AXRT_STATUS_CODE_INVALID_ARGUMENT, b.field);
  }
  const axrt_engine_stats_t stats = Stats();
  CHECK(stats.waiting == 0);
  CHECK(stats.running == 0);
  CHECK(stats.steps == 0);

  // Every option at once runs through process_logits to the end.
  const int32_t tokens[] = {5, 3};
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.temperature = 0.8f;
  request.presence_penalty = 0.5f;
  request.frequency_penalty = -0.5f;
  request.repetition_penalty = 1.3f;
  request.min_p = 0.1f;
  request.logit_bias_tokens = tokens;
  request.logit_bias_values = kValues;
  request.logit_bias_count = 2;
  REQUIRE_CALL_OK(Add(2, 3, 4, request));
  REQUIRE(recorder.wait_for(1));
  std::lock_guard lock(recorder.mutex);
  CHECK(recorder.seen[2].tokens == std::vector<int32_t>(4, kToken));
  CHECK(recorder.seen[2].finish == AXRT_FINISH_LENGTH);
}

TEST_CASE_METHOD(StandInProcessing, "an older, smaller request struct takes the defaults",
                 "[serving]") {
  Start(16);
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.struct_size = offsetof(axrt_request_t, presence_penalty);
  // Past its struct_size: never read.
  request.presence_penalty = NAN;
  request.repetition_penalty = 0.0f;
  request.n = 0;
  REQUIRE_CALL_OK(Add(7, 2, 3, request));
  REQUIRE(recorder.wait_for(1));
  std::lock_guard lock(recorder.mutex);
  CHECK(recorder.seen[7].tokens.size() == 3);
  CHECK(recorder.choices.size() == 1);
}

TEST_CASE_METHOD(StandIn, "a file without process_logits refuses those options by name",
                 "[serving]") {
  Start(16);
  static const int32_t kToken1[] = {1};
  static const float kValue[] = {1.0f};
  struct Option {
    const char* field;
    void (*set)(axrt_request_t&);
  };
  const Option options[] = {
      {"presence_penalty", [](axrt_request_t& r) { r.presence_penalty = 0.5f; }},
      {"frequency_penalty", [](axrt_request_t& r) { r.frequency_penalty = 0.5f; }},
      {"repetition_penalty", [](axrt_request_t& r) { r.repetition_penalty = 1.5f; }},
      {"min_p", [](axrt_request_t& r) { r.min_p = 0.5f; }},
      {"logit_bias",
       [](axrt_request_t& r) {
         r.logit_bias_tokens = kToken1;
         r.logit_bias_values = kValue;
         r.logit_bias_count = 1;
       }},
  };
  for (const Option& o : options) {
    axrt_request_t request = AXRT_REQUEST_INIT;
    o.set(request);
    REQUIRE_CALL_FAILS(Add(1, 2, 2, request), AXRT_STATUS_CODE_INVALID_ARGUMENT, o.field,
                       "process_logits", "convert");
  }
  // Everything else works as before, choices included.
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.n = 2;
  REQUIRE_CALL_OK(Add(3, 2, 2, request));
  REQUIRE(recorder.wait_for(2));
  std::lock_guard lock(recorder.mutex);
  CHECK(recorder.choices[{3, 0}].tokens.size() == 2);
  CHECK(recorder.choices[{3, 1}].tokens.size() == 2);
}

TEST_CASE_METHOD(StandInProcessing, "choices each have their events; a request ends with its last",
                 "[serving]") {
  Start(16);
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.n = 3;
  request.temperature = 1.0f;
  request.presence_penalty = 1.0f;  // each choice counts its own tokens
  REQUIRE_CALL_OK(Add(9, 6, 3, request));
  REQUIRE(recorder.wait_for(3));
  {
    std::lock_guard lock(recorder.mutex);
    CHECK(recorder.seen[9].finishes == 3);
    for (uint32_t c = 0; c < 3; ++c) {
      INFO("choice " << c);
      const Seen& s = recorder.choices[{9, c}];
      CHECK(s.tokens == std::vector<int32_t>(3, kToken));
      CHECK(s.indices == std::vector<uint32_t>{0, 1, 2});
      CHECK(s.finishes == 1);
      CHECK(s.finish == AXRT_FINISH_LENGTH);
    }
  }
  axrt_engine_stats_t stats = Stats();
  CHECK(stats.requests_finished == 3);
  CHECK(stats.kv_blocks_used == 0);
  // The prompt's full block (4 of its 6 tokens) came from the cache, twice.
  CHECK(stats.cached_prompt_tokens == 2 * kBlockSize);
  // Once every choice has ended, the id is free again.
  REQUIRE_CALL_OK(Add(9, 2, 1));
  REQUIRE(recorder.wait_for(4));

  // Cancelling ends every choice still running, each with its own last event.
  request.n = 4;
  REQUIRE_CALL_OK(Add(10, 2, 12, request));
  axrt_status_t cancel = axrt_engine_cancel(engine, 10);
  const bool cancelled = cancel == nullptr;
  axrt_status_free(cancel);  // NOT_FOUND when every choice had ended already
  REQUIRE(recorder.wait_for(8));
  std::lock_guard lock(recorder.mutex);
  int ended_cancelled = 0;
  for (uint32_t c = 0; c < 4; ++c) {
    const Seen& s = recorder.choices[{10, c}];
    CHECK(s.finishes == 1);
    if (s.finish == AXRT_FINISH_CANCELLED) ++ended_cancelled;
  }
  CHECK((ended_cancelled > 0) == cancelled);
  CHECK(Stats().kv_blocks_used == 0);
}

// ---------------------------------------------------------------------------
// A tensor-parallel set (axrt_engine_options_t.group): the stand-in shards
// on cpu:0 and cpu:1 (ctest sets AXRT_CPU_DEVICES=2).

namespace {

class StandInSet {
 public:
  StandInSet() {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    for (uint32_t r = 0; r < 2; ++r) {
      axrt_device_t device = nullptr;
      const std::string id = "cpu:" + std::to_string(r);
      REQUIRE_CALL_OK(axrt_instance_find_device(instance, id.c_str(), &device));
      devices.push_back(device);
      const std::vector<uint8_t> file = StandInShard(r, 2);
      axrt_executable_t exe = nullptr;
      REQUIRE_CALL_OK(axrt_executable_load_memory(device, file.data(), file.size(), nullptr, &exe));
      executables.push_back(exe);
    }
    axrt_group_options_t group_options = AXRT_GROUP_OPTIONS_INIT;
    group_options.label = "set";
    group_options.timeout_ns = 30'000'000'000ull;
    REQUIRE_CALL_OK(axrt_group_create(devices.data(), 2, &group_options, &group));
  }
  ~StandInSet() {
    axrt_engine_destroy(engine);
    axrt_group_destroy(group);
    for (axrt_executable_t e : executables) axrt_executable_release(e);
    for (axrt_device_t d : devices) axrt_device_release(d);
    axrt_instance_release(instance);
  }
  StandInSet(const StandInSet&) = delete;
  StandInSet& operator=(const StandInSet&) = delete;

  axrt_engine_options_t Options() {
    axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
    options.num_blocks = 32;
    options.callback = &Recorder::on_event;
    options.user_data = &recorder;
    options.group = group;
    options.executables = executables.data();
    options.executable_count = executables.size();
    return options;
  }

  axrt_instance_t instance = nullptr;
  std::vector<axrt_device_t> devices;
  std::vector<axrt_executable_t> executables;
  axrt_group_t group = nullptr;
  axrt_engine_t engine = nullptr;
  Recorder recorder;
};

// Logits' first element, per request, of requests asking for them.
struct LogitsSeen {
  std::mutex mutex;
  std::vector<float> first;
  static void on_event(void* user_data, const axrt_engine_event_t* e) {
    auto* self = static_cast<LogitsSeen*>(user_data);
    if (e->logits == nullptr) return;
    std::lock_guard lock(self->mutex);
    self->first.push_back(e->logits[0]);
  }
};

}  // namespace

TEST_CASE_METHOD(StandInSet, "a set runs every step on every member; requests from many threads end",
                 "[serving][set]") {
  axrt_engine_options_t options = Options();
  REQUIRE_CALL_OK(axrt_engine_create(executables[0], &options, &engine));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 8; ++i) {
        const int32_t prompt[] = {1, 2, 3};
        axrt_request_t request = AXRT_REQUEST_INIT;
        request.id = static_cast<uint64_t>(t * 100 + i);
        request.prompt = prompt;
        request.prompt_length = 3;
        request.max_tokens = 5;
        if (axrt_status_t s = axrt_engine_add_request(engine, &request)) axrt_status_free(s);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(recorder.wait_for(32));
  for (const auto& [id, seen] : recorder.seen) {
    INFO("request " << id);
    CHECK(seen.tokens == std::vector<int32_t>(5, kToken));
    CHECK(seen.finishes == 1);
  }
  axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
  REQUIRE_CALL_OK(axrt_engine_query_stats(engine, &stats));
  CHECK(stats.kv_blocks_used == 0);
  CHECK(stats.failed == 0);
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  REQUIRE_CALL_OK(axrt_group_query_info(group, &info));
  CHECK(info.collectives == stats.steps);  // one all-reduce per step, on both members
}

TEST_CASE_METHOD(StandInSet, "the logits are the head's, reduced over the set", "[serving][set]") {
  LogitsSeen logits;
  axrt_engine_options_t options = Options();
  options.callback = &LogitsSeen::on_event;
  options.user_data = &logits;
  REQUIRE_CALL_OK(axrt_engine_create(executables[0], &options, &engine));
  const int32_t prompt[] = {1, 2};
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.id = 1;
  request.prompt = prompt;
  request.prompt_length = 2;
  request.max_tokens = 3;
  request.flags = AXRT_REQUEST_FLAG_LOGITS;
  REQUIRE_CALL_OK(axrt_engine_add_request(engine, &request));
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard lock(logits.mutex);
      if (logits.first.size() == 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard lock(logits.mutex);
  CHECK(logits.first == std::vector<float>(3, 3.0f));  // rank 0's 1 + rank 1's 2
}

TEST_CASE_METHOD(StandInSet, "a member failing mid-serving fails the engine, naming it",
                 "[serving][set]") {
  axrt_engine_options_t options = Options();
  REQUIRE_CALL_OK(axrt_engine_create(executables[0], &options, &engine));
  REQUIRE_CALL_OK(axrt_group_abort(group, 1, "its host went away"));
  const int32_t prompt[] = {1, 2, 3};
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.id = 7;
  request.prompt = prompt;
  request.prompt_length = 3;
  request.max_tokens = 5;
  REQUIRE_CALL_OK(axrt_engine_add_request(engine, &request));
  REQUIRE(recorder.wait_for(1));
  CHECK(recorder.seen[7].finish == AXRT_FINISH_ERROR);
  axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
  REQUIRE_CALL_OK(axrt_engine_query_stats(engine, &stats));
  CHECK(stats.failed == 1);
  request.id = 8;
  REQUIRE_CALL_FAILS(axrt_engine_add_request(engine, &request),
                     AXRT_STATUS_CODE_FAILED_PRECONDITION, "has failed",
                     "member 1 (cpu:1) failed: its host went away");
}

TEST_CASE_METHOD(StandInSet, "creation refuses sets that do not fit together", "[serving][set]") {
  axrt_engine_t e = nullptr;
  axrt_engine_options_t options = Options();
  // A shard alone, on one device.
  axrt_engine_options_t alone = options;
  alone.group = nullptr;
  alone.executables = nullptr;
  alone.executable_count = 0;
  REQUIRE_CALL_FAILS(axrt_engine_create(executables[0], &alone, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "runs on a set of devices");
  options.executable_count = 1;
  REQUIRE_CALL_FAILS(axrt_engine_create(executables[0], &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "has 2 members, and 1 executables");
  options.executable_count = 2;
  REQUIRE_CALL_FAILS(axrt_engine_create(executables[1], &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "must be options.executables[0]");
  std::vector<axrt_executable_t> swapped = {executables[1], executables[0]};
  options.executables = swapped.data();
  REQUIRE_CALL_FAILS(axrt_engine_create(executables[1], &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "not the set's head rank");
  options = Options();
  options.group = nullptr;
  REQUIRE_CALL_FAILS(axrt_engine_create(executables[0], &options, &e),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "together");
  CHECK(e == nullptr);
}
