#include "serving/engine.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "axrt/axrt.h"
#include "base/thread.h"
#include "serving/contract.h"
#include "serving/set_link.h"
#include "trace/trace.h"

namespace axrt::serving {
namespace {

constexpr axrt_status_code_t kInvalid = AXRT_STATUS_CODE_INVALID_ARGUMENT;

}  // namespace

axrt_status_t Engine::create(axrt_executable_t executable, const axrt_engine_options_t& options,
                             std::unique_ptr<Engine>* out) {
  std::unique_ptr<Engine> engine(new Engine());
  AXRT_RETURN_IF_ERROR(engine->init(executable, options));
  engine->thread_ = start_thread([e = engine.get()] {
    // How debuggers, top and traces name the thread (at most 15 characters).
    pthread_setname_np(pthread_self(), "axrt engine");
    e->run();
  });
  *out = std::move(engine);
  return nullptr;
}

axrt_status_t Engine::init(axrt_executable_t executable, const axrt_engine_options_t& options) {
  if (options.callback == nullptr) {
    return make_status(kInvalid, "axrt_engine_create: options.callback is NULL; events need one");
  }
  callback_ = options.callback;
  user_data_ = options.user_data;
  max_waiting_ = options.max_waiting;
  axrt_executable_retain(executable);
  executable_ = executable;
  size_t members = options.group != nullptr ? options.executable_count : 0;
  size_t remote_members = 0;  // a group across processes: its size
  if (options.group != nullptr || options.executable_count != 0 ||
      options.executables != nullptr) {
    if (options.group == nullptr || options.executables == nullptr ||
        options.executable_count == 0) {
      return make_status(kInvalid,
                         "axrt_engine_create: a set needs options.group, options.executables "
                         "and options.executable_count together");
    }
    axrt_group_info_t group = AXRT_GROUP_INFO_INIT;
    AXRT_RETURN_IF_ERROR(axrt_group_query_info(options.group, &group));
    if (group.rank > 0) {
      return make_status(kInvalid,
                         "axrt_engine_create: this process is member {} of group '{}'; the head "
                         "(rank 0) creates the engine, and the others run axrt_engine_follow",
                         group.rank, group.label);
    }
    if (group.rank == 0 && options.executable_count != 1) {
      return make_status(kInvalid,
                         "axrt_engine_create: group '{}' spans processes: give this process's "
                         "executable only (executable_count 1, not {}); the others run "
                         "axrt_engine_follow with theirs",
                         group.label, options.executable_count);
    }
    if (group.rank < 0 && group.size != options.executable_count) {
      return make_status(kInvalid,
                         "axrt_engine_create: group '{}' has {} members, and {} executables "
                         "were given: one per member, in rank order",
                         group.label, group.size, options.executable_count);
    }
    if (options.executables[0] != executable) {
      return make_status(kInvalid,
                         "axrt_engine_create: `executable` must be options.executables[0], the "
                         "set's head rank");
    }
    group_ = options.group;
    remote_members = group.rank == 0 ? group.size : 0;
  }
  AXRT_RETURN_IF_ERROR(find_function(executable, "step", &step_));
  if (group_ != nullptr) {
    if (axrt_status_t s = axrt_executable_find_function(executable, "sample", &sample_)) {
      axrt_status_free(s);
      return make_status(kInvalid,
                         "axrt_engine_create: executables[0] has no `sample` function: it is not "
                         "the set's head rank (give the shards in rank order, rank 0 first)");
    }
  }
  if (group_ == nullptr) AXRT_RETURN_IF_ERROR(find_function(executable, "sample", &sample_));
  if (remote_members != 0) members = remote_members;
  AXRT_RETURN_IF_ERROR(check_channels(step_, 0, members));

  // The step's signature gives the model's sizes.
  constexpr axrt_argument_kind_t kIn = AXRT_ARGUMENT_KIND_INPUT;
  AXRT_RETURN_IF_ERROR(contract_arity(step_, "step", 5, 1));
  Argument tokens, positions, tables, rows, cache, logits;
  AXRT_RETURN_IF_ERROR(
      contract_argument(step_, "step", kIn, 0, "tokens", AXRT_DTYPE_INT32, "s", &tokens));
  AXRT_RETURN_IF_ERROR(
      contract_argument(step_, "step", kIn, 1, "positions", AXRT_DTYPE_INT32, "s", &positions));
  AXRT_RETURN_IF_ERROR(contract_argument(step_, "step", kIn, 2, "block_tables",
                                         AXRT_DTYPE_INT32, "sf", &tables));
  AXRT_RETURN_IF_ERROR(
      contract_argument(step_, "step", kIn, 3, "logit_rows", AXRT_DTYPE_INT32, "s", &rows));
  AXRT_RETURN_IF_ERROR(cache_dtype(step_, "step", &shape_.cache_dtype, &shape_.element_bytes));
  AXRT_RETURN_IF_ERROR(contract_argument(step_, "step", kIn, 4, "kv_cache", shape_.cache_dtype,
                                         "ffsfff", &cache));
  AXRT_RETURN_IF_ERROR(contract_argument(step_, "step", AXRT_ARGUMENT_KIND_OUTPUT, 0, "logits",
                                         AXRT_DTYPE_FLOAT32, "sf", &logits));
  shape_.layers = cache.bounds[0];
  shape_.kv_heads = cache.bounds[3];
  shape_.block_size = cache.bounds[4];
  shape_.row = cache.bounds[5];
  shape_.max_blocks = tables.bounds[1];
  shape_.vocab = logits.bounds[1];
  shape_.max_tokens = tokens.bounds[0];
  shape_.max_rows = std::min(rows.bounds[0], logits.bounds[0]);
  if (cache.bounds[1] != 2) {
    return make_status(kInvalid, "axrt_engine_create: `step`'s kv_cache is not [L, 2, ...]");
  }
  AXRT_RETURN_IF_ERROR(contract_arity(sample_, "sample", 6, 1));
  Argument sample_logits;
  AXRT_RETURN_IF_ERROR(contract_argument(sample_, "sample", kIn, 0, "logits", AXRT_DTYPE_FLOAT32,
                                         "sf", &sample_logits));
  if (sample_logits.bounds[1] != shape_.vocab) {
    return make_status(kInvalid,
                       "axrt_engine_create: `sample` takes logits of {} tokens, `step` makes {}",
                       sample_logits.bounds[1], shape_.vocab);
  }
  shape_.max_rows = std::min(shape_.max_rows, sample_logits.bounds[0]);
  // process_logits: files converted before it have none, and serve every
  // request but those with the options it applies.
  if (axrt_status_t s = axrt_executable_find_function(executable, "process_logits", &process_)) {
    if (axrt_status_code(s) != AXRT_STATUS_CODE_NOT_FOUND) return s;
    axrt_status_free(s);
    process_ = nullptr;
  } else {
    uint64_t process_rows = 0;
    AXRT_RETURN_IF_ERROR(
        check_process_logits(process_, shape_.vocab, &process_rows, &shape_.max_entries));
    shape_.max_rows = std::min(shape_.max_rows, process_rows);
  }

  // Limits: the options, within what the functions take.
  SchedulerLimits limits;
  // An option's value, or the function's bound when it is 0.
  auto within = [](const char* name, uint32_t value, uint64_t bound, const char* what,
                   uint32_t* out) -> axrt_status_t {
    if (value > bound) {
      return make_status(kInvalid, "axrt_engine_create: {} {} is more than {} ({})", name, value,
                         what, bound);
    }
    *out = value != 0 ? value : static_cast<uint32_t>(bound);
    return nullptr;
  };
  AXRT_RETURN_IF_ERROR(within("max_step_tokens", options.max_step_tokens, shape_.max_tokens,
                              "`step` takes", &limits.max_step_tokens));
  AXRT_RETURN_IF_ERROR(within("max_running", options.max_running, shape_.max_rows,
                              "a step samples", &limits.max_running));
  // Every running sequence's decode token fits one step.
  limits.max_running = std::min(limits.max_running, limits.max_step_tokens);
  limits.max_context = static_cast<uint32_t>(shape_.max_blocks * shape_.block_size);
  limits.chunked_prefill = (options.flags & AXRT_ENGINE_FLAG_NO_CHUNKED_PREFILL) == 0;

  uint64_t num_blocks = options.num_blocks;
  if (num_blocks == 0 && options.kv_cache_bytes != 0) {
    num_blocks = options.kv_cache_bytes / shape_.block_bytes();
    if (num_blocks == 0) {
      return make_status(kInvalid,
                         "axrt_engine_create: kv_cache_bytes {} holds no block of {} bytes",
                         options.kv_cache_bytes, shape_.block_bytes());
    }
  }
  if (num_blocks == 0) num_blocks = limits.max_running * shape_.max_blocks;
  // Graphs: buckets up to the bound (at most the running sequences), and
  // the padding tokens' blocks after the block manager's.
  const uint32_t graph_max_batch =
      group_ == nullptr ? std::min(options.graph_max_batch, limits.max_running) : 0;
  if (graph_max_batch > 0) {
    scratch_base_ = static_cast<int32_t>(std::min<uint64_t>(num_blocks, INT32_MAX));
    scratch_count_ = StepGraphs::scratch_blocks(graph_max_batch, shape_.block_size);
  }
  if (num_blocks + scratch_count_ > INT32_MAX) {
    return make_status(kInvalid, "axrt_engine_create: {} KV-cache blocks are too many",
                       num_blocks);
  }

  AXRT_RETURN_IF_ERROR(axrt_executable_get_device(executable, &device_));
  AXRT_RETURN_IF_ERROR(axrt_stream_create(device_, nullptr, &stream_));
  buffers_ = std::make_unique<Buffers>();
  Buffers& b = *buffers_;
  const uint64_t T = shape_.max_tokens;
  const uint64_t S = shape_.max_rows;
  struct Allocation {
    axrt_buffer_t* buffer;
    uint64_t bytes;
  };
  for (const Allocation& a : {
           Allocation{&b.tokens, T * 4}, Allocation{&b.positions, T * 4},
           Allocation{&b.tables, T * shape_.max_blocks * 4}, Allocation{&b.rows, S * 4},
           Allocation{&b.logits, S * shape_.vocab * 4}, Allocation{&b.temperature, S * 4},
           Allocation{&b.top_k, S * 4}, Allocation{&b.top_p, S * 4}, Allocation{&b.seeds, S * 8},
           Allocation{&b.sample_positions, S * 4}, Allocation{&b.sampled, S * 4},
           Allocation{&b.cache_buffer, (num_blocks + scratch_count_) * shape_.block_bytes()},
           Allocation{&b.repetition, process_ ? S * 4 : 0},
           Allocation{&b.frequency, process_ ? S * 4 : 0},
           Allocation{&b.presence, process_ ? S * 4 : 0},
           Allocation{&b.min_p, process_ ? S * 4 : 0}}) {
    if (a.bytes == 0) continue;
    if (axrt_status_t s = axrt_buffer_allocate(device_, a.bytes, nullptr, a.buffer)) {
      if (a.buffer != &b.cache_buffer) return s;
      const std::string message = axrt_status_message(s);
      const axrt_status_code_t code = axrt_status_code(s);
      axrt_status_free(s);
      return make_status(code, "axrt_engine_create: the KV cache of {} blocks ({} bytes): {}",
                         num_blocks + scratch_count_, a.bytes, message);
    }
  }
  if (group_ != nullptr && remote_members != 0) {
    AXRT_RETURN_IF_ERROR(init_remote(num_blocks));
  } else if (group_ != nullptr) {
    AXRT_RETURN_IF_ERROR(init_peers(options, num_blocks));
  }
  AXRT_RETURN_IF_ERROR(
      cache_tensor(shape_, b.cache_buffer, num_blocks + scratch_count_, shape_.kv_heads, &b.cache));
  if (graph_max_batch > 0) {
    StepGraphInputs in;
    in.step = step_;
    in.sample = sample_;
    in.stream = stream_;
    in.tokens = b.tokens;
    in.positions = b.positions;
    in.tables = b.tables;
    in.rows = b.rows;
    in.cache = b.cache;
    in.logits = b.logits;
    in.temperature = b.temperature;
    in.top_k = b.top_k;
    in.top_p = b.top_p;
    in.seeds = b.seeds;
    in.sample_positions = b.sample_positions;
    in.sampled = b.sampled;
    in.max_blocks = shape_.max_blocks;
    in.vocab = shape_.vocab;
    graphs_ = std::make_unique<StepGraphs>(in, graph_max_batch);
  }

  blocks_ = std::make_unique<BlockManager>(static_cast<uint32_t>(num_blocks),
                                           static_cast<uint32_t>(shape_.block_size),
                                           (options.flags & AXRT_ENGINE_FLAG_NO_PREFIX_CACHING) == 0);
  scheduler_ = std::make_unique<Scheduler>(*blocks_, limits);
  return nullptr;
}

Engine::~Engine() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  if (stream_ != nullptr) {
    if (axrt_status_t s = axrt_stream_synchronize(stream_)) axrt_status_free(s);
  }
  stop_remote();
  remote_.reset();
  peers_.clear();
  graphs_.reset();  // they hold tensors over the buffers
  buffers_.reset();
  axrt_stream_release(stream_);
  axrt_device_release(device_);
  axrt_function_release(step_);
  axrt_function_release(sample_);
  axrt_function_release(process_);
  axrt_executable_release(executable_);
}

axrt_status_t Engine::add(const axrt_request_t& r) {
  const char* fn = "axrt_engine_add_request";
  if (r.prompt == nullptr || r.prompt_length == 0) {
    return make_status(kInvalid, "{}: request {}: the prompt is empty", fn, r.id);
  }
  if (r.max_tokens == 0) {
    return make_status(kInvalid, "{}: request {}: max_tokens must be at least 1", fn, r.id);
  }
  for (size_t i = 0; i < r.prompt_length; ++i) {
    if (r.prompt[i] < 0 || static_cast<uint64_t>(r.prompt[i]) >= shape_.vocab) {
      return make_status(kInvalid,
                         "{}: request {}: prompt token {} is {}, outside the vocabulary [0, {})",
                         fn, r.id, i, r.prompt[i], shape_.vocab);
    }
  }
  if (r.stop_id_count != 0 && r.stop_ids == nullptr) {
    return make_status(kInvalid, "{}: request {}: stop_ids is NULL", fn, r.id);
  }
  if (!(r.temperature >= 0.0f) || !std::isfinite(r.temperature)) {
    return make_status(kInvalid, "{}: request {}: temperature must be finite and >= 0, not {}",
                       fn, r.id, r.temperature);
  }
  if (r.top_k < 0) {
    return make_status(kInvalid, "{}: request {}: top_k must be >= 0 (0: all), not {}", fn, r.id,
                       r.top_k);
  }
  if (!(r.top_p > 0.0f && r.top_p <= 1.0f)) {
    return make_status(kInvalid, "{}: request {}: top_p must be in (0, 1], not {}", fn, r.id,
                       r.top_p);
  }
  if (r.top_logprobs > AXRT_ENGINE_MAX_TOP_LOGPROBS) {
    return make_status(kInvalid, "{}: request {}: top_logprobs {} is more than {}", fn, r.id,
                       r.top_logprobs, AXRT_ENGINE_MAX_TOP_LOGPROBS);
  }
  if ((r.flags & ~(AXRT_REQUEST_FLAG_LOGITS | AXRT_REQUEST_FLAG_LOGPROBS)) != 0) {
    return make_status(kInvalid, "{}: request {}: unknown flags {:#x}", fn, r.id, r.flags);
  }
  LogitOptions logit;
  AXRT_RETURN_IF_ERROR(check_sampling_options(r, shape_.vocab, process_ != nullptr, &logit));
  if (logit.listed()) {
    // A row lists every token at most once.
    const uint64_t most = std::min<uint64_t>(
        shape_.vocab, r.logit_bias_count + r.prompt_length + uint64_t{r.max_tokens});
    if (most > shape_.max_entries) {
      return make_status(kInvalid,
                         "{}: request {}: its logit bias and penalties may list {} tokens, more "
                         "than the {} of the model's `process_logits`",
                         fn, r.id, most, shape_.max_entries);
    }
  }
  auto s = std::make_unique<Sequence>();
  s->id = r.id;
  s->tokens.assign(r.prompt, r.prompt + r.prompt_length);
  s->prompt_length = static_cast<uint32_t>(r.prompt_length);
  s->max_tokens = r.max_tokens;
  if (r.stop_id_count != 0) s->stop_ids.assign(r.stop_ids, r.stop_ids + r.stop_id_count);
  s->sampling = {r.temperature, r.top_k, r.top_p, r.seed, logit};
  s->flags = r.flags;
  s->top_logprobs = r.top_logprobs;
  if (logit.listed()) {
    const bool penalized = logit.repetition_penalty != 1.0f || logit.frequency_penalty != 0.0f ||
                           logit.presence_penalty != 0.0f;
    s->logit_entries = std::make_unique<LogitEntries>(
        std::span(r.logit_bias_tokens, r.logit_bias_count),
        std::span(r.logit_bias_values, r.logit_bias_count), std::span(s->tokens),
        logit.repetition_penalty != 1.0f, penalized);
  }
  // The other choices wait in choice 0 until its prompt is in the cache.
  s->later_choices.reserve(r.n - 1);
  for (uint32_t c = 1; c < r.n; ++c) {
    auto later = std::make_unique<Sequence>();
    later->id = r.id;
    later->choice = c;
    later->tokens = s->tokens;
    later->prompt_length = s->prompt_length;
    later->max_tokens = s->max_tokens;
    later->stop_ids = s->stop_ids;
    later->sampling = s->sampling;
    later->sampling.seed = choice_seed(r.seed, c);
    later->flags = s->flags;
    later->top_logprobs = s->top_logprobs;
    if (s->logit_entries) later->logit_entries = std::make_unique<LogitEntries>(*s->logit_entries);
    s->later_choices.push_back(std::move(later));
  }
  {
    std::lock_guard lock(mutex_);
    const std::string why = scheduler_->refusal(r.prompt_length, r.max_tokens);
    if (!why.empty()) {
      ++counters_.requests_rejected;
      return make_status(kInvalid, "{}: request {}: {}", fn, r.id, why);
    }
    if (failure_) {
      return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                         "{}: the engine has failed and takes no more requests: {}", fn,
                         axrt_status_message(failure_.get()));
    }
    if (stopping_) {
      return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION, "{}: the engine is stopping", fn);
    }
    if (scheduler_->find(r.id) != nullptr) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: request id {} is in use", fn, r.id);
    }
    if (max_waiting_ != 0 && scheduler_->waiting_count() >= max_waiting_) {
      ++counters_.requests_rejected;
      return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                         "{}: request {}: {} requests are waiting, the most the engine queues", fn,
                         r.id, max_waiting_);
    }
    scheduler_->add(std::move(s));
  }
  wake_.notify_all();
  return nullptr;
}

axrt_status_t Engine::cancel(uint64_t id) {
  {
    std::lock_guard lock(mutex_);
    if (scheduler_->find(id) == nullptr || cancels_.contains(id)) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND, "axrt_engine_cancel: no live request {}",
                         id);
    }
    cancels_.insert(id);
  }
  wake_.notify_all();
  return nullptr;
}

void Engine::stats(axrt_engine_stats_t* out) {
  std::lock_guard lock(mutex_);
  axrt_engine_stats_t s = counters_;
  s.running = static_cast<uint32_t>(scheduler_->running_count());
  s.waiting = static_cast<uint32_t>(scheduler_->waiting_count());
  s.kv_blocks_total = blocks_->num_blocks();
  s.kv_blocks_used = blocks_->used_blocks();
  s.kv_blocks_cached = blocks_->cached_free_blocks();
  s.block_size = blocks_->block_size();
  s.kv_slots_used = scheduler_->filled_slots();
  s.preemptions = scheduler_->preemptions();
  s.failed = failure_ ? 1 : 0;
  s.graphs_captured = graphs_ ? graphs_->captured() : 0;
  // Copy what the caller's struct has room for.
  const size_t size = std::min(out->struct_size, sizeof s);
  const size_t header = offsetof(axrt_engine_stats_t, running);
  if (size > header) {
    std::memcpy(reinterpret_cast<char*>(out) + header, reinterpret_cast<const char*>(&s) + header,
                size - header);
  }
}

Engine::PendingEvent Engine::end_event(Sequence* s, axrt_finish_reason_t finish,
                                       axrt_status_t status) {
  PendingEvent e{};
  e.event.struct_size = sizeof e.event;
  e.event.request_id = s->id;
  e.event.token = -1;
  e.event.index = s->generated();
  e.event.finish = finish;
  e.event.choice = s->choice;
  if (status != nullptr) {
    e.status.reset(axrt_status_create(axrt_status_code(status), axrt_status_message(status)));
  }
  if (s->generated() == 0) {
    e.event.prompt_tokens = s->prompt_length;
    e.event.cached_tokens = s->cached_tokens;
  }
  if (finish == AXRT_FINISH_CANCELLED) ++counters_.requests_cancelled;
  return e;
}

void Engine::token_event(Sequence* s, uint32_t row, bool have_logits,
                         std::vector<PendingEvent>& out) {
  if (cancels_.contains(s->id)) {
    // Cancelled while its step ran: the token is dropped, cancel wins. The
    // id stays marked while other choices of the request live.
    const uint64_t id = s->id;
    end_sequence(s, AXRT_FINISH_CANCELLED, nullptr, out);
    if (scheduler_->find(id) == nullptr) cancels_.erase(id);
    return;
  }
  const int32_t token = staging_.sampled[row];
  PendingEvent e{};
  e.event.struct_size = sizeof e.event;
  e.event.request_id = s->id;
  e.event.token = token;
  e.event.index = s->generated();
  e.event.choice = s->choice;
  if (s->generated() == 0) {
    e.event.prompt_tokens = s->prompt_length;
    e.event.cached_tokens = s->cached_tokens;
  }
  const float* logits = have_logits ? staging_.logits.data() + row * shape_.vocab : nullptr;
  if (logits != nullptr && (s->flags & AXRT_REQUEST_FLAG_LOGITS) != 0) {
    e.event.logits = logits;
    e.event.vocab_size = static_cast<uint32_t>(shape_.vocab);
  }
  if (logits != nullptr && (s->flags & AXRT_REQUEST_FLAG_LOGPROBS) != 0) {
    // log_softmax in double: x - max - log(sum exp(x - max)).
    const uint64_t V = shape_.vocab;
    const float top = *std::max_element(logits, logits + V);
    double sum = 0.0;
    for (uint64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(logits[v]) - top);
    const double log_z = static_cast<double>(top) + std::log(sum);
    if (token >= 0 && static_cast<uint64_t>(token) < V) {
      e.event.logprob = static_cast<float>(logits[token] - log_z);
    }
    const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(s->top_logprobs, V));
    if (k > 0) {
      std::vector<int32_t> ids(V);
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      e.top_tokens.assign(ids.begin(), ids.begin() + k);
      for (const int32_t id : e.top_tokens) {
        e.top_logprobs.push_back(static_cast<float>(logits[id] - log_z));
      }
    }
  }
  s->tokens.push_back(token);
  if (s->logit_entries) s->logit_entries->generated(token);
  ++counters_.generated_tokens;
  const bool stop =
      std::find(s->stop_ids.begin(), s->stop_ids.end(), token) != s->stop_ids.end();
  if (stop || s->generated() >= s->max_tokens) {
    e.event.finish = stop ? AXRT_FINISH_STOP : AXRT_FINISH_LENGTH;
    ++counters_.requests_finished;
    scheduler_->finish(s);
  }
  out.push_back(std::move(e));
}

void Engine::end_all(axrt_finish_reason_t finish, axrt_status_t status,
                     std::vector<PendingEvent>& out) {
  // One at a time, copying nothing: an event that does not fit in memory
  // leaves its sequence for the next try.
  while (Sequence* s = scheduler_->any()) end_sequence(s, finish, status, out);
}

void Engine::end_sequence(Sequence* s, axrt_finish_reason_t finish, axrt_status_t status,
                          std::vector<PendingEvent>& out) {
  // The choices it holds never started; each ends with its own event, and
  // leaves only once that event is out (an event that does not fit in
  // memory leaves it for the next try).
  auto& later = s->later_choices;
  while (!later.empty()) {
    out.push_back(end_event(later.front().get(), finish, status));
    later.erase(later.begin());
  }
  out.push_back(end_event(s, finish, status));
  scheduler_->finish(s);
}

void Engine::release_choices(Sequence* s) {
  // Last first, each to the front of the queue: choice 1 ends up first.
  auto& later = s->later_choices;
  while (!later.empty()) {
    scheduler_->add_first(later.back());
    later.pop_back();
  }
}

void Engine::fail_out_of_memory(std::unique_lock<std::mutex>& lock,
                                std::vector<PendingEvent>& events) {
  const StatusPtr status(
      make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "axrt engine: out of host memory"));
  for (;;) {
    try {
      end_all(AXRT_FINISH_ERROR, status.get(), events);
      return;
    } catch (const std::bad_alloc&) {
      // Not even the events fit: wait for memory to come back.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }
}

void Engine::deliver(std::vector<PendingEvent>& events) {
  for (PendingEvent& e : events) {
    e.event.status = e.status.get();
    if (!e.top_tokens.empty()) {
      e.event.top_count = static_cast<uint32_t>(e.top_tokens.size());
      e.event.top_tokens = e.top_tokens.data();
      e.event.top_logprobs = e.top_logprobs.data();
    }
    callback_(user_data_, &e.event);
  }
  events.clear();
}

axrt_status_t Engine::execute(const StepPlan& plan, bool want_logits) {
  Buffers& b = *buffers_;
  const uint64_t T = plan.tokens;
  const uint64_t MB = shape_.max_blocks;
  uint64_t S = 0;
  for (const ScheduledSequence& e : plan.entries) S += e.sample ? 1 : 0;

  // Copy-on-write first.
  // The cache holds the graphs' scratch blocks after the scheduler's, in
  // every plane.
  AXRT_RETURN_IF_ERROR(copy_blocks(shape_, plan.copies.data(), plan.copies.size(),
                                   blocks_->num_blocks() + scratch_count_, stream_, b.cache_buffer,
                                   shape_.kv_heads));

  // A step of decode tokens only may replay its bucket's graphs: padded
  // to the bucket, it runs P tokens and samples P rows, of which the first
  // T (= S) are the plan's.
  last_step_graphed_ = false;
  const bool decode_only = S == T && std::all_of(plan.entries.begin(), plan.entries.end(),
                                                 [](const ScheduledSequence& e) {
                                                   return e.count == 1 && e.sample;
                                                 });
  const uint64_t bucket = graphs_ && decode_only ? graphs_->bucket(T) : 0;
  const uint64_t P = bucket != 0 ? bucket : T;
  const uint64_t PS = bucket != 0 ? bucket : S;

  // The inputs, on the host.
  Staging& h = staging_;
  h.tokens.assign(P, 0);
  h.positions.assign(P, 0);
  h.tables.assign(P * MB, 0);
  h.rows.assign(std::max<uint64_t>(PS, 1), 0);
  h.temperature.assign(PS, 0.0f);
  h.top_k.assign(PS, 0);
  h.top_p.assign(PS, 1.0f);
  h.seeds.assign(PS, 0);
  h.sample_positions.assign(PS, 0);
  // Padding token j writes slot j of the scratch blocks, and its row is
  // sampled greedily and dropped.
  for (uint64_t t = T; t < P; ++t) {
    h.positions[t] = static_cast<int32_t>(t - T);
    StepGraphs::pad_table(h.tables.data() + t * MB, MB, scratch_base_, scratch_count_);
    h.rows[t] = static_cast<int32_t>(t);
  }
  uint64_t t = 0;
  uint64_t row = 0;
  for (const ScheduledSequence& e : plan.entries) {
    const Sequence& s = *e.sequence;
    for (uint32_t i = 0; i < e.count; ++i, ++t) {
      h.tokens[t] = s.tokens[e.start + i];
      h.positions[t] = static_cast<int32_t>(e.start + i);
      std::copy(s.blocks.begin(), s.blocks.end(), h.tables.begin() + t * MB);
    }
    if (e.sample) {
      h.rows[row] = static_cast<int32_t>(t - 1);
      h.temperature[row] = s.sampling.temperature;
      h.top_k[row] = s.sampling.top_k;
      h.top_p[row] = s.sampling.top_p;
      h.seeds[row] = s.sampling.seed;
      h.sample_positions[row] = static_cast<int32_t>(s.tokens.size());
      ++row;
    }
  }
  const uint64_t R = std::max<uint64_t>(PS, 1);  // rows the step computes
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.tokens.data(), b.tokens, 0, P * 4));
  AXRT_RETURN_IF_ERROR(
      axrt_stream_copy_from_host(stream_, h.positions.data(), b.positions, 0, P * 4));
  AXRT_RETURN_IF_ERROR(
      axrt_stream_copy_from_host(stream_, h.tables.data(), b.tables, 0, P * MB * 4));
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.rows.data(), b.rows, 0, R * 4));
  if (PS > 0) {
    AXRT_RETURN_IF_ERROR(
        axrt_stream_copy_from_host(stream_, h.temperature.data(), b.temperature, 0, PS * 4));
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.top_k.data(), b.top_k, 0, PS * 4));
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.top_p.data(), b.top_p, 0, PS * 4));
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.seeds.data(), b.seeds, 0, PS * 8));
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(stream_, h.sample_positions.data(),
                                                    b.sample_positions, 0, PS * 4));
  }
  // Logits processing, only in the steps where a sampled row has options:
  // process_logits runs between `step` and `sample` (as a call, between the
  // replays of a graphed step), after the events' logits were copied out.
  const uint64_t entries = entries_per_row(plan);
  std::function<axrt_status_t()> process;  // empty (and nothing allocated) without options
  if (entries > 0) {
    AXRT_RETURN_IF_ERROR(stage_processing(plan, PS, entries));
    process = [&]() -> axrt_status_t {
      if (want_logits) {
        h.logits.resize(S * shape_.vocab);
        AXRT_RETURN_IF_ERROR(axrt_stream_copy_to_host(stream_, b.logits, 0, h.logits.data(),
                                                      S * shape_.vocab * 4));
      }
      return call_process(PS, entries);
    };
  }
  const std::function<axrt_status_t()>* between = process ? &process : nullptr;
  if (bucket != 0) {
    AXRT_RETURN_IF_ERROR(
        graphs_->run(static_cast<uint32_t>(bucket), between, &last_step_graphed_));
  }

  if (!last_step_graphed_) AXRT_RETURN_IF_ERROR(call_step(plan, P, R, PS, between));
  if (S > 0) {
    h.sampled.assign(S, -1);
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_to_host(stream_, b.sampled, 0, h.sampled.data(), S * 4));
    if (want_logits && between == nullptr) {
      h.logits.resize(S * shape_.vocab);
      AXRT_RETURN_IF_ERROR(axrt_stream_copy_to_host(stream_, b.logits, 0, h.logits.data(),
                                                    S * shape_.vocab * 4));
    }
  }
  // The members' streams too: the next step's inputs go into their buffers.
  axrt_status_t head = axrt_stream_synchronize(stream_);
  for (const auto& peer : peers_) {
    axrt_status_t s = axrt_stream_synchronize(peer->stream);
    if (s == nullptr) continue;
    if (head == nullptr) {
      head = s;
    } else {
      axrt_status_free(s);  // the head's failure names the member (the group's)
    }
  }
  return head;
}

axrt_status_t Engine::call_step(const StepPlan& plan, uint64_t T, uint64_t R, uint64_t S,
                                const std::function<axrt_status_t()>* between) {
  Buffers& b = *buffers_;
  const uint64_t MB = shape_.max_blocks;
  // Tensors over the buffers, shaped for this step.
  StepTensors tensors(13);
  const auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  axrt_tensor_t step_in[5];
  axrt_tensor_t logits = nullptr;
  AXRT_RETURN_IF_ERROR(tensors.make(b.tokens, AXRT_DTYPE_INT32, {i64(T)}, &step_in[0]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.positions, AXRT_DTYPE_INT32, {i64(T)}, &step_in[1]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.tables, AXRT_DTYPE_INT32, {i64(T), i64(MB)}, &step_in[2]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.rows, AXRT_DTYPE_INT32, {i64(R)}, &step_in[3]));
  step_in[4] = b.cache;
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.logits, AXRT_DTYPE_FLOAT32, {i64(R), i64(shape_.vocab)}, &logits));
  if (group_ != nullptr) {
    AXRT_RETURN_IF_ERROR(execute_set(step_in, logits, plan, T, R));
  } else {
    AXRT_RETURN_IF_ERROR(axrt_function_invoke(step_, stream_, step_in, 5, &logits, 1, nullptr));
  }
  if (S == 0) return nullptr;
  if (between != nullptr) AXRT_RETURN_IF_ERROR((*between)());
  axrt_tensor_t sample_in[6];
  axrt_tensor_t sampled = nullptr;
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.logits, AXRT_DTYPE_FLOAT32, {i64(S), i64(shape_.vocab)}, &sample_in[0]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.temperature, AXRT_DTYPE_FLOAT32, {i64(S)}, &sample_in[1]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.top_k, AXRT_DTYPE_INT32, {i64(S)}, &sample_in[2]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.top_p, AXRT_DTYPE_FLOAT32, {i64(S)}, &sample_in[3]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.seeds, AXRT_DTYPE_UINT64, {i64(S)}, &sample_in[4]));
  AXRT_RETURN_IF_ERROR(
      tensors.make(b.sample_positions, AXRT_DTYPE_INT32, {i64(S)}, &sample_in[5]));
  AXRT_RETURN_IF_ERROR(tensors.make(b.sampled, AXRT_DTYPE_INT32, {i64(S)}, &sampled));
  return axrt_function_invoke(sample_, stream_, sample_in, 6, &sampled, 1, nullptr);
}

StepTensors::StepTensors(size_t count) { tensors_.reserve(count); }

StepTensors::~StepTensors() {
  for (axrt_tensor_t t : tensors_) axrt_tensor_release(t);
}

axrt_status_t StepTensors::make(axrt_buffer_t buffer, axrt_dtype_t dtype,
                                std::initializer_list<int64_t> dims, axrt_tensor_t* out) {
  const std::vector<int64_t> shape(dims);
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  tensors_.push_back(nullptr);  // room first, so that no tensor is made and then lost
  axrt_status_t status = axrt_tensor_create(buffer, &desc, &tensors_.back());
  if (status != nullptr) {
    tensors_.pop_back();
    return status;
  }
  *out = tensors_.back();
  return nullptr;
}

axrt_status_t cache_tensor(const ModelShape& shape, axrt_buffer_t buffer, uint64_t num_blocks,
                           uint64_t kv_heads, axrt_tensor_t* out) {
  const int64_t dims[6] = {static_cast<int64_t>(shape.layers),     2,
                           static_cast<int64_t>(num_blocks),       static_cast<int64_t>(kv_heads),
                           static_cast<int64_t>(shape.block_size), static_cast<int64_t>(shape.row)};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = shape.cache_dtype;
  desc.rank = 6;
  desc.shape = dims;
  return axrt_tensor_create(buffer, &desc, out);
}

axrt_status_t copy_blocks(const ModelShape& shape, const std::pair<int32_t, int32_t>* copies,
                          size_t copy_count, uint64_t num_blocks, axrt_stream_t stream,
                          axrt_buffer_t cache, uint64_t kv_heads) {
  // Each block is one run of bytes in every (layer, key or value) plane.
  const uint64_t block_bytes = shape.plane_block_bytes(kv_heads);
  const uint64_t plane_bytes = num_blocks * block_bytes;
  for (size_t c = 0; c < copy_count; ++c) {
    const auto [from, to] = copies[c];
    for (uint64_t plane = 0; plane < shape.layers * 2; ++plane) {
      AXRT_RETURN_IF_ERROR(axrt_stream_copy_buffer(
          stream, cache, plane * plane_bytes + static_cast<uint64_t>(from) * block_bytes, cache,
          plane * plane_bytes + static_cast<uint64_t>(to) * block_bytes, block_bytes));
    }
  }
  return nullptr;
}

void Engine::abort_group(const char* why) {
  if (group_ == nullptr) return;
  // The first failure stays the group's: this one only ends what waits.
  if (axrt_status_t s = axrt_group_abort(group_, -1, why)) axrt_status_free(s);
}

void Engine::trace_step(const StepPlan& plan, int64_t begin) const {
  trace::Record r;
  r.kind = trace::Kind::kEngineStep;
  r.begin = begin;
  r.end = trace::now();
  int64_t decode = 0;
  for (const ScheduledSequence& e : plan.entries) {
    if (e.start >= e.sequence->prompt_length) decode += e.count;
  }
  r.a[0] = static_cast<int64_t>(plan.entries.size());
  r.a[1] = static_cast<int64_t>(plan.tokens) - decode;
  r.a[2] = decode;
  r.a[3] = static_cast<int64_t>(blocks_->used_blocks());
  trace::emit(r);
}

void Engine::run() {
  std::vector<PendingEvent> events;
  std::unique_lock lock(mutex_);
  for (;;) {
    try {
      if (!run_once(lock, events)) return;
    } catch (const std::bad_alloc&) {
      // Host memory ran out in the engine's own bookkeeping (the scheduler,
      // the events): the requests in flight end with RESOURCE_EXHAUSTED and
      // the engine goes on with the next ones.
      if (!lock.owns_lock()) lock.lock();
      fail_out_of_memory(lock, events);
    }
  }
}

bool Engine::run_once(std::unique_lock<std::mutex>& lock, std::vector<PendingEvent>& events) {
  // Cancellations first: their blocks go back before anything is scheduled.
  for (const uint64_t id : cancels_) {
    while (Sequence* s = scheduler_->find(id)) {
      end_sequence(s, AXRT_FINISH_CANCELLED, nullptr, events);
    }
  }
  cancels_.clear();
  if (stopping_) {
    end_all(AXRT_FINISH_CANCELLED, nullptr, events);
    lock.unlock();
    deliver(events);
    return false;
  }
  StepPlan plan;
  if (!failure_) plan = scheduler_->schedule();
  if (plan.entries.empty()) {
    if (!events.empty()) {
      lock.unlock();
      deliver(events);
      lock.lock();
      return true;
    }
    wake_.wait(lock, [&] { return stopping_ || !cancels_.empty() || (!failure_ &&
                                  scheduler_->waiting_count() + scheduler_->running_count() > 0); });
    return true;
  }
  bool want_logits = false;
  for (const ScheduledSequence& e : plan.entries) {
    if (e.sample && (e.sequence->flags &
                     (AXRT_REQUEST_FLAG_LOGITS | AXRT_REQUEST_FLAG_LOGPROBS)) != 0) {
      want_logits = true;
    }
  }
  for (const ScheduledSequence& e : plan.entries) {
    Sequence* s = e.sequence;
    if (!s->counted) {
      // Counted when a request first runs.
      s->counted = true;
      counters_.prompt_tokens += s->prompt_length;
      counters_.cached_prompt_tokens += s->cached_tokens;
    }
  }
  lock.unlock();
  // The device work runs unlocked: add, cancel and stats go on meanwhile
  // (cancels wait for the step to end; the plan's sequences stay).
  const int64_t step_begin = trace::active() ? trace::now() : 0;
  StatusPtr status;
  try {
    status.reset(execute(plan, want_logits));
  } catch (const std::bad_alloc&) {
    status.reset(make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                             "axrt engine: out of host memory for a step"));
  }
  // A step that failed part-way may have left copies into the staging
  // buffers queued: they finish before anything touches those again. What
  // that says is whether the stream itself failed (it stays failed).
  if (status) abort_group(axrt_status_message(status.get()));
  const StatusPtr stream_failure(status ? axrt_stream_synchronize(stream_) : nullptr);
  if (status) {
    for (const auto& peer : peers_) {
      if (axrt_status_t s = axrt_stream_synchronize(peer->stream)) axrt_status_free(s);
    }
  }
  lock.lock();
  if (step_begin) trace_step(plan, step_begin);
  ++counters_.steps;
  if (last_step_graphed_) ++counters_.graph_steps;
  counters_.computed_tokens += plan.tokens;
  if (status) {
    // Memory that ran short fails the step's requests only; anything
    // else, or a stream that failed, fails the engine.
    // In a set the group aborted with it: nothing runs there any more.
    if (axrt_status_code(status.get()) != AXRT_STATUS_CODE_RESOURCE_EXHAUSTED ||
        stream_failure || group_ != nullptr) {
      failure_.reset(axrt_status_create(axrt_status_code(status.get()),
                                        axrt_status_message(status.get())));
    }
    end_all(AXRT_FINISH_ERROR, status.get(), events);
    return true;
  }
  scheduler_->complete(plan);
  uint32_t row = 0;
  for (const ScheduledSequence& e : plan.entries) {
    if (!e.sample) continue;
    // Its prompt is in the cache now: the request's other choices join.
    Sequence* s = e.sequence;
    if (!s->later_choices.empty() && !cancels_.contains(s->id)) release_choices(s);
    token_event(s, row++, want_logits, events);
  }
  lock.unlock();
  deliver(events);
  lock.lock();
  return true;
}

}  // namespace axrt::serving
