// Status objects: creation with fmt messages, the sticky failure record that
// streams share, and the guard that keeps C++ exceptions from crossing the C
// boundary. The C entry points over them (axrt_status_free, ...) are the
// runtime's (runtime/status_api.cc); base only makes and frees them.
#ifndef AXRT_BASE_STATUS_H_
#define AXRT_BASE_STATUS_H_

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "axrt/base.h"

struct axrt_status_s {
  axrt_status_code_t code;
  std::string message;
  // The out-of-memory status is static storage and never freed. A flag
  // rather than an address, so that a status made by one copy of this layer
  // (a tool linking the format statically) can be freed by another (libaxrt).
  bool is_static = false;
};

namespace axrt {

// Never fails: when memory runs out it returns the static out-of-memory
// status, which status_destroy() (and so axrt_status_free()) recognises.
axrt_status_t make_status(axrt_status_code_t code, std::string message) noexcept;

template <typename... Args>
axrt_status_t make_status(axrt_status_code_t code,
                          fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    return make_status(code, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, std::string());
  }
}

axrt_status_t out_of_memory_status() noexcept;

// Frees `status` (NULL and the static out-of-memory status are left alone).
void status_destroy(axrt_status_t status) noexcept;

// A failure that outlives the status it came from: streams keep one as their
// sticky error and hand out fresh copies of it.
struct Failure {
  axrt_status_code_t code;
  std::string message;
};
using FailurePtr = std::shared_ptr<const Failure>;

// Takes ownership of `status` (non-NULL) and turns it into a shared record.
FailurePtr make_failure(axrt_status_t status) noexcept;
// A fresh status object with the failure's code and message.
axrt_status_t status_from_failure(const FailurePtr& failure) noexcept;

struct StatusDeleter {
  void operator()(axrt_status_t status) const noexcept { status_destroy(status); }
};
using StatusPtr = std::unique_ptr<axrt_status_s, StatusDeleter>;

// Runs `body` (which returns axrt_status_t) and turns anything it throws into
// a status naming `function`.
template <typename Body>
axrt_status_t guard(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "{}: out of host memory", function);
  } catch (const std::exception& e) {
    return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: {}", function, e.what());
  } catch (...) {
    return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: unknown internal error", function);
  }
}

}  // namespace axrt

#define AXRT_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    axrt_status_t axrt_status_tmp_ = (expr);       \
    if (axrt_status_tmp_) return axrt_status_tmp_; \
  } while (0)

#endif  // AXRT_BASE_STATUS_H_
