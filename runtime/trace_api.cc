// The C entry points of include/axrt/trace.h over the recorder (trace/),
// and the instance's part in tracing: the AXRT_TRACE environment variable
// and the trace an instance stops when it is destroyed.
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "axrt/trace.h"
#include "runtime/api.h"
#include "runtime/instance.h"
#include "trace/trace.h"

namespace axrt {
namespace {

// The instance that started the AXRT_TRACE trace; its stop at process exit
// covers applications that never destroy their instance.
std::atomic<const Instance*> g_environment_owner{nullptr};

void stop_environment_trace_at_exit() {
  if (const Instance* owner = g_environment_owner.exchange(nullptr)) {
    trace::StopResult result;
    if (axrt_status_t status = trace::stop(owner, &result)) {
      std::fprintf(stderr, "axrt: AXRT_TRACE: %s\n", axrt_status_message(status));
      axrt_status_free(status);
    }
  }
}

// Stops the trace `instance` runs; it is no longer the AXRT_TRACE trace that
// the exit hook would stop.
axrt_status_t stop_trace(const Instance* instance, trace::StopResult* result) {
  const Instance* expected = instance;
  g_environment_owner.compare_exchange_strong(expected, nullptr);
  return trace::stop(instance, result);
}

}  // namespace

void start_environment_trace(const Instance* instance) noexcept {
  static std::once_flag once;
  const char* path = std::getenv("AXRT_TRACE");
  if (!path || !*path) return;
  std::call_once(once, [&] {
    if (axrt_status_t status = trace::start(instance, path, 0)) {
      // Nothing to return it to: the instance works untraced.
      std::fprintf(stderr, "axrt: AXRT_TRACE: %s\n", axrt_status_message(status));
      axrt_status_free(status);
      return;
    }
    g_environment_owner.store(instance);
    std::atexit(stop_environment_trace_at_exit);
  });
}

void stop_instance_trace(const Instance* instance) noexcept {
  if (!trace::owns(instance)) return;
  trace::StopResult result;
  if (axrt_status_t status = stop_trace(instance, &result)) {
    // The instance is being destroyed: there is no caller to tell.
    std::fprintf(stderr, "axrt: trace: %s\n", axrt_status_message(status));
    axrt_status_free(status);
  }
}

}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_instance_trace_start(axrt_instance_t instance,
                                                 const axrt_trace_options_t* options) {
  static constexpr ApiCall api("axrt_instance_trace_start");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(options, "options"));
    AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_trace_options_t",
                                               sizeof(axrt_trace_options_t)));
    axrt_trace_options_t opts = AXRT_TRACE_OPTIONS_INIT;
    AXRT_READ_FIELD(options, &opts, path);
    AXRT_READ_FIELD(options, &opts, max_events);
    Extensions ignored;
    AXRT_RETURN_IF_ERROR(api.read_extensions(options->next, "options", 0, &ignored));
    if (!opts.path || !*opts.path) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`options->path` is NULL or empty");
    }
    return api.prefix(trace::start(self, opts.path, opts.max_events));
  });
}

AXRT_API axrt_status_t axrt_instance_trace_stop(axrt_instance_t instance,
                                                axrt_trace_result_t* out_result) {
  static constexpr ApiCall api("axrt_instance_trace_stop");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    if (out_result) {
      AXRT_RETURN_IF_ERROR(
          check_query_struct(api, out_result, "out_result", "axrt_trace_result_t"));
    }
    if (!trace::owns(self)) {
      return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION, "{}",
                       axrt_trace_is_active() ? "the running trace was started by another instance"
                                              : "no trace is running");
    }
    trace::StopResult result;
    AXRT_RETURN_IF_ERROR(api.prefix(stop_trace(self, &result)));
    if (out_result) {
      axrt_trace_result_t filled = AXRT_TRACE_RESULT_INIT;
      filled.events = result.events;
      filled.dropped_events = result.dropped;
      filled.bytes_written = result.bytes;
      write_query_struct(filled, out_result);
    }
    return nullptr;
  });
}

AXRT_API bool axrt_trace_is_active(void) { return trace::active(); }

AXRT_API axrt_status_t axrt_trace_range_begin(const char* name) {
  static constexpr ApiCall api("axrt_trace_range_begin");
  AXRT_RETURN_IF_ERROR(api.require_pointer(name, "name"));
  trace::range_begin(name);
  return nullptr;
}

AXRT_API void axrt_trace_range_end(void) { trace::range_end(); }

}  // extern "C"
