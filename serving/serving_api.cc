// The C entry points of include/axrt/serving.h.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "axrt/serving.h"
#include "base/options_struct.h"
#include "base/status.h"
#include "serving/engine.h"

using axrt::guard;
using axrt::make_status;
using axrt::read_options_struct;
using axrt::serving::Engine;

struct axrt_engine_s {
  std::unique_ptr<Engine> engine;
};

extern "C" {

AXRT_API axrt_status_t axrt_engine_create(axrt_executable_t executable,
                                          const axrt_engine_options_t* options,
                                          axrt_engine_t* out_engine) {
  return guard("axrt_engine_create", [&]() -> axrt_status_t {
    if (executable == nullptr || out_engine == nullptr || options == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_create: executable, options and out_engine must not be "
                         "NULL");
    }
    axrt_engine_options_t opts;
    if (!read_options_struct(options, &opts, axrt_engine_options_t AXRT_ENGINE_OPTIONS_INIT)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_create: options.struct_size {} is too small",
                         options->struct_size);
    }
    auto handle = std::make_unique<axrt_engine_s>();
    AXRT_RETURN_IF_ERROR(Engine::create(executable, opts, &handle->engine));
    *out_engine = handle.release();
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_engine_add_request(axrt_engine_t engine,
                                               const axrt_request_t* request) {
  return guard("axrt_engine_add_request", [&]() -> axrt_status_t {
    if (engine == nullptr || request == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_add_request: engine and request must not be NULL");
    }
    axrt_request_t r;
    if (!read_options_struct(request, &r, axrt_request_t AXRT_REQUEST_INIT)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_add_request: request.struct_size {} is too small",
                         request->struct_size);
    }
    return engine->engine->add(r);
  });
}

AXRT_API axrt_status_t axrt_engine_cancel(axrt_engine_t engine, uint64_t id) {
  return guard("axrt_engine_cancel", [&]() -> axrt_status_t {
    if (engine == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "axrt_engine_cancel: engine is NULL");
    }
    return engine->engine->cancel(id);
  });
}

AXRT_API axrt_status_t axrt_engine_query_stats(axrt_engine_t engine,
                                               axrt_engine_stats_t* out_stats) {
  return guard("axrt_engine_query_stats", [&]() -> axrt_status_t {
    if (engine == nullptr || out_stats == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_query_stats: engine and out_stats must not be NULL");
    }
    if (out_stats->struct_size < offsetof(axrt_engine_stats_t, running)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_engine_query_stats: out_stats->struct_size {} is too small",
                         out_stats->struct_size);
    }
    engine->engine->stats(out_stats);
    return nullptr;
  });
}

AXRT_API void axrt_engine_destroy(axrt_engine_t engine) { delete engine; }

}  // extern "C"
