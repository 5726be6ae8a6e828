#include "base/status.h"

#include <cstring>

namespace axrt {
namespace {

// Handed out when a status cannot be allocated; never freed, and never
// destroyed: threads still running at process exit may hand it out or read
// it after exit() destroyed the statics.
axrt_status_s* oom_status() noexcept {
  static axrt_status_s* status =
      new axrt_status_s{AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "out of host memory", true};
  return status;
}

// The same as a shared failure record, for streams.
const FailurePtr& oom_failure() noexcept {
  static const FailurePtr* failure = new FailurePtr(std::make_shared<const Failure>(
      Failure{AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "out of host memory"}));
  return *failure;
}

// Both are made when the library loads, while there is memory: handing them
// out when there is none must not allocate.
[[maybe_unused]] const bool made_at_load = (oom_status(), oom_failure(), true);

}  // namespace

axrt_status_t out_of_memory_status() noexcept { return oom_status(); }

axrt_status_t make_status(axrt_status_code_t code, std::string message) noexcept {
  if (code == AXRT_STATUS_CODE_OK) return nullptr;
  auto* status = new (std::nothrow) axrt_status_s{code, std::string()};
  if (!status) return oom_status();
  status->message = std::move(message);
  return status;
}

void status_destroy(axrt_status_t status) noexcept {
  if (status && !status->is_static) delete status;
}

FailurePtr make_failure(axrt_status_t status) noexcept {
  StatusPtr owned(status);
  try {
    return std::make_shared<const Failure>(Failure{status->code, status->message});
  } catch (...) {
    return oom_failure();
  }
}

axrt_status_t status_from_failure(const FailurePtr& failure) noexcept {
  if (!failure) return nullptr;
  try {
    return make_status(failure->code, std::string(failure->message));
  } catch (...) {
    return oom_status();
  }
}

}  // namespace axrt

