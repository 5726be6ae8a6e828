// Starting a thread. Every thread of axrt starts here, so that the tests can
// make a start fail (base/fault.h, kThreadStart) exactly as the system does
// when it has no room for one: std::system_error with
// resource_unavailable_try_again, which each caller handles.
#ifndef AXRT_BASE_THREAD_H_
#define AXRT_BASE_THREAD_H_

#include <system_error>
#include <thread>
#include <utility>

#include "base/fault.h"

namespace axrt {

template <class Fn>
std::thread start_thread(Fn&& fn) {
  if (fault::should_fail(fault::Site::kThreadStart)) {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "thread start (fault injection)");
  }
  return std::thread(std::forward<Fn>(fn));
}

}  // namespace axrt

#endif  // AXRT_BASE_THREAD_H_
