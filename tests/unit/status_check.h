// Status assertions shared by the unit tests that call the C API directly
// (the conformance suite has its own, in abi/cts/cts_fixture.h).
#ifndef AXRT_TESTS_UNIT_STATUS_CHECK_H_
#define AXRT_TESTS_UNIT_STATUS_CHECK_H_

#include <catch2/catch.hpp>

#include <string>

#include "axrt/axrt.h"

namespace axrt_test {

struct Outcome {
  axrt_status_code_t code;
  std::string message;
};

// Takes ownership of `status`.
inline Outcome Take(axrt_status_t status) {
  Outcome outcome{axrt_status_code(status), status ? axrt_status_message(status) : ""};
  axrt_status_free(status);
  return outcome;
}

}  // namespace axrt_test

// The call succeeds; its message is shown when it does not.
#define REQUIRE_CALL_OK(call)                                    \
  do {                                                           \
    ::axrt_test::Outcome ok_outcome_ = ::axrt_test::Take(call);  \
    INFO(#call << ": " << ok_outcome_.message);                  \
    REQUIRE(ok_outcome_.code == AXRT_STATUS_CODE_OK);            \
  } while (0)

// The call fails with `expected_code` and a message containing each needle.
#define REQUIRE_CALL_FAILS(call, expected_code, ...)                          \
  do {                                                                        \
    ::axrt_test::Outcome error_outcome_ = ::axrt_test::Take(call);            \
    INFO(#call << " gave " << axrt_status_code_name(error_outcome_.code)      \
               << ": " << error_outcome_.message);                            \
    REQUIRE(error_outcome_.code == (expected_code));                          \
    for (const char* needle_ : {__VA_ARGS__}) {                               \
      INFO("expected the message to mention '" << needle_ << "'");            \
      CHECK(error_outcome_.message.find(needle_) != std::string::npos);       \
    }                                                                         \
  } while (0)

#endif  // AXRT_TESTS_UNIT_STATUS_CHECK_H_
