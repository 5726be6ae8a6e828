// _axrt.Engine: the serving engine of axrt/serving.h. The engine's thread
// never touches Python: its callback copies each event into a queue, and
// Python takes them with poll(), which waits with the GIL released.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "binding.h"

namespace axrt_py {
namespace {

struct Event {
  uint64_t id = 0;
  int32_t token = -1;
  uint32_t index = 0;
  axrt_finish_reason_t finish = AXRT_FINISH_NONE;
  std::optional<std::string> error;
  std::optional<std::vector<float>> logits;
  std::optional<float> logprob;
  std::optional<std::vector<std::pair<int32_t, float>>> top;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  uint32_t choice = 0;
};

struct EventQueue {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Event> events;
  bool closed = false;
  // Live requests that asked for log-probabilities (their events carry
  // one), with the choices of each that have not ended.
  std::unordered_map<uint64_t, uint32_t> logprobs;
};

void on_event(void* user_data, const axrt_engine_event_t* e) {
  auto* queue = static_cast<EventQueue*>(user_data);
  Event event;
  event.id = e->request_id;
  event.token = e->token;
  event.index = e->index;
  event.finish = e->finish;
  if (e->status != nullptr) event.error = axrt_status_message(e->status);
  if (e->logits != nullptr) event.logits.emplace(e->logits, e->logits + e->vocab_size);
  if (e->token >= 0 && e->top_tokens != nullptr) {
    event.top.emplace();
    for (uint32_t i = 0; i < e->top_count; ++i) {
      event.top->emplace_back(e->top_tokens[i], e->top_logprobs[i]);
    }
  }
  event.prompt_tokens = e->prompt_tokens;
  event.cached_tokens = e->cached_tokens;
  if (e->struct_size >= offsetof(axrt_engine_event_t, choice) + sizeof e->choice) {
    event.choice = e->choice;
  }
  {
    std::lock_guard lock(queue->mutex);
    const auto marked = queue->logprobs.find(e->request_id);
    if (marked != queue->logprobs.end()) {
      if (e->token >= 0) event.logprob = e->logprob;
      if (e->finish != AXRT_FINISH_NONE && --marked->second == 0) queue->logprobs.erase(marked);
    }
    queue->events.push_back(std::move(event));
  }
  queue->ready.notify_all();
}

const char* finish_name(axrt_finish_reason_t finish) {
  switch (finish) {
    case AXRT_FINISH_STOP: return "stop";
    case AXRT_FINISH_LENGTH: return "length";
    case AXRT_FINISH_CANCELLED: return "cancelled";
    case AXRT_FINISH_ERROR: return "error";
    default: return nullptr;
  }
}

class Engine {
 public:
  Engine(py::object executable, uint32_t num_blocks, uint64_t kv_cache_bytes,
         uint32_t max_step_tokens, uint32_t max_running, uint32_t max_waiting,
         bool chunked_prefill, bool prefix_caching, py::object group, py::object members,
         uint32_t graph_max_batch)
      : executable_(std::move(executable)), queue_(std::make_shared<EventQueue>()) {
    axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
    options.num_blocks = num_blocks;
    options.kv_cache_bytes = kv_cache_bytes;
    options.max_step_tokens = max_step_tokens;
    options.max_running = max_running;
    options.max_waiting = max_waiting;
    options.graph_max_batch = graph_max_batch;
    options.flags = (chunked_prefill ? 0 : AXRT_ENGINE_FLAG_NO_CHUNKED_PREFILL) |
                    (prefix_caching ? 0 : AXRT_ENGINE_FLAG_NO_PREFIX_CACHING);
    options.callback = &on_event;
    options.user_data = queue_.get();
    axrt_executable_t handle = executable_handle(executable_);
    // A tensor-parallel set: its group and every member's executable, rank
    // order, the first being `executable`; kept alive with the engine.
    std::vector<axrt_executable_t> handles;
    if (!group.is_none()) {
      if (members.is_none()) throw py::value_error("group= needs members= (the set's executables)");
      for (py::handle member : members) {
        handles.push_back(executable_handle(py::reinterpret_borrow<py::object>(member)));
      }
      options.group = group_handle(group);
      options.executables = handles.data();
      options.executable_count = handles.size();
      group_ = group;
      members_ = members;
    } else if (!members.is_none()) {
      throw py::value_error("members= needs group= (the set's device group)");
    }
    axrt_status_t status;
    {
      GilRelease release;
      status = axrt_engine_create(handle, &options, &engine_);
    }
    check(status);
    axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
    check(axrt_engine_query_stats(engine_, &stats));
    block_size_ = stats.block_size;
    // The vocabulary and the longest sequence, from `step`'s signature.
    Handle<axrt_function_t> step;
    check(axrt_executable_find_function(handle, "step", step.out()));
    axrt_argument_info_t tables = AXRT_ARGUMENT_INFO_INIT;
    axrt_argument_info_t logits = AXRT_ARGUMENT_INFO_INIT;
    check(axrt_function_query_argument(step.get(), AXRT_ARGUMENT_KIND_INPUT, 2, &tables));
    check(axrt_function_query_argument(step.get(), AXRT_ARGUMENT_KIND_OUTPUT, 0, &logits));
    vocab_size_ = static_cast<uint64_t>(logits.dims[1]);
    max_context_ = static_cast<uint64_t>(tables.dims[1]) * block_size_;
  }

  ~Engine() {
    if (engine_ != nullptr) {
      GilRelease release;
      close_engine();
    }
  }

  void add_request(uint64_t id, py::array_t<int32_t, py::array::c_style | py::array::forcecast> prompt,
                   uint32_t max_tokens, std::vector<int32_t> stop_ids, float temperature,
                   int32_t top_k, float top_p, uint64_t seed, bool logits, bool logprobs,
                   uint32_t top_logprobs, float presence_penalty, float frequency_penalty,
                   float repetition_penalty, float min_p,
                   std::vector<std::pair<int32_t, float>> logit_bias, uint32_t n) {
    live();
    if (prompt.ndim() != 1) throw py::value_error("the prompt must be a 1-D array of token ids");
    axrt_request_t r = AXRT_REQUEST_INIT;
    r.id = id;
    r.prompt = prompt.data();
    r.prompt_length = static_cast<size_t>(prompt.size());
    r.max_tokens = max_tokens;
    r.stop_ids = stop_ids.data();
    r.stop_id_count = stop_ids.size();
    r.temperature = temperature;
    r.top_k = top_k;
    r.top_p = top_p;
    r.seed = seed;
    r.flags = (logits ? AXRT_REQUEST_FLAG_LOGITS : 0) | (logprobs ? AXRT_REQUEST_FLAG_LOGPROBS : 0);
    r.top_logprobs = top_logprobs;
    r.presence_penalty = presence_penalty;
    r.frequency_penalty = frequency_penalty;
    r.repetition_penalty = repetition_penalty;
    r.min_p = min_p;
    std::vector<int32_t> bias_tokens;
    std::vector<float> bias_values;
    for (const auto& [token, value] : logit_bias) {
      bias_tokens.push_back(token);
      bias_values.push_back(value);
    }
    r.logit_bias_tokens = bias_tokens.data();
    r.logit_bias_values = bias_values.data();
    r.logit_bias_count = bias_tokens.size();
    r.n = n;
    bool marked = false;  // by this call (an id in use keeps its own mark)
    if (logprobs) {
      std::lock_guard lock(queue_->mutex);
      marked = queue_->logprobs.emplace(id, n).second;
    }
    axrt_status_t status;
    {
      GilRelease release;
      status = axrt_engine_add_request(engine_, &r);
    }
    if (status != nullptr && marked) {
      std::lock_guard lock(queue_->mutex);
      queue_->logprobs.erase(id);
    }
    check(status);
  }

  bool cancel(uint64_t id) {
    live();
    axrt_status_t status;
    {
      GilRelease release;
      status = axrt_engine_cancel(engine_, id);
    }
    if (status != nullptr && axrt_status_code(status) == AXRT_STATUS_CODE_NOT_FOUND) {
      axrt_status_free(status);
      return false;
    }
    check(status);
    return true;
  }

  py::list poll(std::optional<double> timeout) {
    std::deque<Event> taken;
    {
      GilRelease release;
      std::unique_lock lock(queue_->mutex);
      auto ready = [&] { return !queue_->events.empty() || queue_->closed; };
      if (!timeout) {
        queue_->ready.wait(lock, ready);
      } else if (*timeout > 0) {
        queue_->ready.wait_for(lock, std::chrono::duration<double>(*timeout), ready);
      }
      taken.swap(queue_->events);
    }
    py::list out;
    for (Event& e : taken) {
      py::object logits = py::none();
      if (e.logits) logits = py::array_t<float>(e.logits->size(), e.logits->data());
      py::object top = py::none();
      if (e.top) top = py::cast(*e.top);
      const char* finish = finish_name(e.finish);
      out.append(py::make_tuple(
          e.id, e.token, e.index, finish ? py::object(py::str(finish)) : py::object(py::none()),
          e.error ? py::object(py::str(*e.error)) : py::object(py::none()), logits,
          e.logprob ? py::object(py::float_(*e.logprob)) : py::object(py::none()), top,
          e.prompt_tokens, e.cached_tokens, e.choice));
    }
    return out;
  }

  py::dict stats() {
    live();
    axrt_engine_stats_t s = AXRT_ENGINE_STATS_INIT;
    check(axrt_engine_query_stats(engine_, &s));
    py::dict d;
    d["running"] = s.running;
    d["waiting"] = s.waiting;
    d["kv_blocks_total"] = s.kv_blocks_total;
    d["kv_blocks_used"] = s.kv_blocks_used;
    d["kv_blocks_cached"] = s.kv_blocks_cached;
    d["block_size"] = s.block_size;
    d["kv_slots_used"] = s.kv_slots_used;
    d["steps"] = s.steps;
    d["prompt_tokens"] = s.prompt_tokens;
    d["cached_prompt_tokens"] = s.cached_prompt_tokens;
    d["computed_tokens"] = s.computed_tokens;
    d["generated_tokens"] = s.generated_tokens;
    d["preemptions"] = s.preemptions;
    d["requests_finished"] = s.requests_finished;
    d["requests_cancelled"] = s.requests_cancelled;
    d["requests_rejected"] = s.requests_rejected;
    d["failed"] = s.failed != 0;
    d["graph_steps"] = s.graph_steps;
    d["graphs_captured"] = s.graphs_captured;
    return d;
  }

  void close() {
    if (engine_ == nullptr) return;
    GilRelease release;
    close_engine();
  }

  bool closed() const { return engine_ == nullptr; }
  uint32_t block_size() const { return block_size_; }
  uint64_t vocab_size() const { return vocab_size_; }
  uint64_t max_context() const { return max_context_; }

 private:
  void live() const {
    if (engine_ == nullptr) {
      PyErr_SetString(error_class(AXRT_STATUS_CODE_FAILED_PRECONDITION).ptr(),
                      "the engine is closed");
      throw PythonError();
    }
  }

  // Without the GIL: the engine's thread delivers its last events (every
  // live request cancelled) into the queue, which then closes.
  void close_engine() {
    axrt_engine_destroy(engine_);
    engine_ = nullptr;
    {
      std::lock_guard lock(queue_->mutex);
      queue_->closed = true;
    }
    queue_->ready.notify_all();
  }

  py::object executable_;
  // A set's group and executables, alive while the engine is (destroyed
  // after it, by the destructor's body).
  py::object group_ = py::none();
  py::object members_ = py::none();
  std::shared_ptr<EventQueue> queue_;
  axrt_engine_t engine_ = nullptr;
  uint32_t block_size_ = 0;
  uint64_t vocab_size_ = 0;
  uint64_t max_context_ = 0;
};

}  // namespace

void init_serving(py::module_& m) {
  py::class_<Engine>(m, "Engine", R"doc(
The serving engine (axrt/serving.h) over an executable following the serving
contract. Low level: use axrt.llm.Engine. Events come from poll() as tuples
(request_id, token, index, finish, error, logits, logprob, top, prompt_tokens,
cached_tokens, choice).)doc")
      .def(py::init<py::object, uint32_t, uint64_t, uint32_t, uint32_t, uint32_t, bool, bool,
                    py::object, py::object, uint32_t>(),
           py::arg("executable"), py::kw_only(), py::arg("num_blocks") = 0,
           py::arg("kv_cache_bytes") = 0, py::arg("max_step_tokens") = 0,
           py::arg("max_running") = 0, py::arg("max_waiting") = 0,
           py::arg("chunked_prefill") = true, py::arg("prefix_caching") = true,
           py::arg("group") = py::none(), py::arg("members") = py::none(),
           py::arg("graph_max_batch") = 0)
      .def("add_request", &Engine::add_request, py::arg("id"), py::arg("prompt"),
           py::arg("max_tokens"), py::kw_only(), py::arg("stop_ids") = std::vector<int32_t>{},
           py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("seed") = 0, py::arg("logits") = false, py::arg("logprobs") = false,
           py::arg("top_logprobs") = 0, py::arg("presence_penalty") = 0.0f,
           py::arg("frequency_penalty") = 0.0f, py::arg("repetition_penalty") = 1.0f,
           py::arg("min_p") = 0.0f,
           py::arg("logit_bias") = std::vector<std::pair<int32_t, float>>{},
           py::arg("n") = 1)
      .def("cancel", &Engine::cancel, py::arg("id"))
      .def("poll", &Engine::poll, py::arg("timeout") = py::none())
      .def("stats", &Engine::stats)
      .def("close", &Engine::close)
      .def_property_readonly("closed", &Engine::closed)
      .def_property_readonly("block_size", &Engine::block_size)
      .def_property_readonly("vocab_size", &Engine::vocab_size)
      .def_property_readonly("max_context", &Engine::max_context);
}

}  // namespace axrt_py
