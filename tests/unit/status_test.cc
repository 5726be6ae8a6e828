#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "base/status.h"
#include "tests/unit/subprocess.h"

using namespace axrt;

TEST_CASE("make_status formats and OK is NULL") {
  StatusPtr status(make_status(AXRT_STATUS_CODE_OUT_OF_RANGE, "index {} of {}", 7, 3));
  REQUIRE(status);
  CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_OUT_OF_RANGE);
  CHECK(std::string(axrt_status_message(status.get())) == "index 7 of 3");
  CHECK(make_status(AXRT_STATUS_CODE_OK, "ignored") == nullptr);
}

TEST_CASE("failures survive their status and copy out unchanged") {
  FailurePtr failure = make_failure(make_status(AXRT_STATUS_CODE_DEVICE_LOST, "gone"));
  StatusPtr a(status_from_failure(failure));
  StatusPtr b(status_from_failure(failure));
  CHECK(a.get() != b.get());
  CHECK(axrt_status_code(a.get()) == AXRT_STATUS_CODE_DEVICE_LOST);
  CHECK(std::string(axrt_status_message(b.get())) == "gone");
  CHECK(status_from_failure(nullptr) == nullptr);
}

TEST_CASE("guard turns exceptions into statuses naming the function") {
  StatusPtr oom(guard("axrt_f", []() -> axrt_status_t { throw std::bad_alloc(); }));
  CHECK(axrt_status_code(oom.get()) == AXRT_STATUS_CODE_RESOURCE_EXHAUSTED);
  CHECK(std::string(axrt_status_message(oom.get())).find("axrt_f") != std::string::npos);
  StatusPtr other(guard("axrt_g", []() -> axrt_status_t { throw std::runtime_error("boom"); }));
  CHECK(axrt_status_code(other.get()) == AXRT_STATUS_CODE_INTERNAL);
  CHECK(std::string(axrt_status_message(other.get())) == "axrt_g: boom");
}

TEST_CASE("the static out-of-memory status may be freed any number of times") {
  axrt_status_t oom = out_of_memory_status();
  axrt_status_free(oom);
  axrt_status_free(oom);
  CHECK(axrt_status_code(oom) == AXRT_STATUS_CODE_RESOURCE_EXHAUSTED);
}

// exit() destroys the statics made after an exit handler was registered
// before it runs the handler, which reads the status as a runtime thread
// still running at exit may.
TEST_CASE("exit handler reading the out-of-memory status", "[.oom-status-at-exit]") {
  std::atexit([] {
    const std::string message = axrt_status_message(out_of_memory_status());
    if (message != "out of host memory") std::_Exit(3);
  });
  axrt_status_free(out_of_memory_status());
}

TEST_CASE("the out-of-memory status outlives the statics at exit") {
  INFO("run with \"[.oom-status-at-exit]\" for the child's report");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf("[.oom-status-at-exit]")));
}
