// Versioning and status objects (base.h).
#include <cstdio>
#include <string>
#include <utility>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

TEST_CASE("version: the library matches the headers", "[cts][version]") {
  CHECK(AXRT_VERSION == AXRT_MAKE_VERSION(AXRT_VERSION_MAJOR,
                                          AXRT_VERSION_MINOR,
                                          AXRT_VERSION_PATCH));
  CHECK(AXRT_MAKE_VERSION(1, 2, 3) == 1002003u);
  CHECK(axrt_version() == AXRT_VERSION);
  CHECK(axrt_version() / 1000000u == AXRT_VERSION_MAJOR);

  const char* text = axrt_version_string();
  REQUIRE(text != nullptr);
  char expected[64];
  std::snprintf(expected, sizeof(expected), "%u.%u.%u",
                static_cast<unsigned>(AXRT_VERSION_MAJOR),
                static_cast<unsigned>(AXRT_VERSION_MINOR),
                static_cast<unsigned>(AXRT_VERSION_PATCH));
  CHECK(std::string(text) == expected);
  // A static string: the same pointer every time.
  CHECK(axrt_version_string() == text);
}

const std::pair<axrt_status_code_t, const char*> kCodes[] = {
    {AXRT_STATUS_CODE_OK, "OK"},
    {AXRT_STATUS_CODE_CANCELLED, "CANCELLED"},
    {AXRT_STATUS_CODE_UNKNOWN, "UNKNOWN"},
    {AXRT_STATUS_CODE_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
    {AXRT_STATUS_CODE_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
    {AXRT_STATUS_CODE_NOT_FOUND, "NOT_FOUND"},
    {AXRT_STATUS_CODE_ALREADY_EXISTS, "ALREADY_EXISTS"},
    {AXRT_STATUS_CODE_PERMISSION_DENIED, "PERMISSION_DENIED"},
    {AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
    {AXRT_STATUS_CODE_FAILED_PRECONDITION, "FAILED_PRECONDITION"},
    {AXRT_STATUS_CODE_ABORTED, "ABORTED"},
    {AXRT_STATUS_CODE_OUT_OF_RANGE, "OUT_OF_RANGE"},
    {AXRT_STATUS_CODE_UNIMPLEMENTED, "UNIMPLEMENTED"},
    {AXRT_STATUS_CODE_INTERNAL, "INTERNAL"},
    {AXRT_STATUS_CODE_UNAVAILABLE, "UNAVAILABLE"},
    {AXRT_STATUS_CODE_DATA_LOSS, "DATA_LOSS"},
    {AXRT_STATUS_CODE_UNAUTHENTICATED, "UNAUTHENTICATED"},
    {AXRT_STATUS_CODE_DEVICE_LOST, "DEVICE_LOST"},
};

TEST_CASE("status: every code has its name", "[cts][status]") {
  for (const auto& [code, name] : kCodes) {
    INFO("code " << code);
    const char* got = axrt_status_code_name(code);
    REQUIRE(got != nullptr);
    CHECK(std::string(got) == name);
  }
  for (axrt_status_code_t unknown : {18u, 99u, 1000u, 0x7fffffffu, 0xffffffffu}) {
    INFO("code " << unknown);
    const char* got = axrt_status_code_name(unknown);
    REQUIRE(got != nullptr);
    CHECK(std::string(got) == "UNRECOGNIZED");
  }
}

TEST_CASE("status: create keeps code and a copy of the message",
          "[cts][status]") {
  for (const auto& [code, name] : kCodes) {
    if (code == AXRT_STATUS_CODE_OK) continue;
    INFO(name);
    std::string message = std::string("cts message for ") + name;
    Status status(axrt_status_create(code, message.c_str()));
    REQUIRE(status != nullptr);
    // The status owns a copy: scribbling over the original changes nothing.
    std::string expected = message;
    message.assign(message.size(), 'x');
    CHECK(axrt_status_code(status.get()) == code);
    REQUIRE(axrt_status_message(status.get()) != nullptr);
    CHECK(std::string(axrt_status_message(status.get())) == expected);
  }
}

TEST_CASE("status: OK, NULL and empty messages", "[cts][status]") {
  CHECK(axrt_status_create(AXRT_STATUS_CODE_OK, "ignored") == nullptr);
  CHECK(axrt_status_create(AXRT_STATUS_CODE_OK, nullptr) == nullptr);

  CHECK(axrt_status_code(nullptr) == AXRT_STATUS_CODE_OK);
  REQUIRE(axrt_status_message(nullptr) != nullptr);
  CHECK(std::string(axrt_status_message(nullptr)) == "OK");
  axrt_status_free(nullptr);

  Status null_message(axrt_status_create(AXRT_STATUS_CODE_INTERNAL, nullptr));
  REQUIRE(null_message != nullptr);
  CHECK(axrt_status_code(null_message.get()) == AXRT_STATUS_CODE_INTERNAL);
  REQUIRE(axrt_status_message(null_message.get()) != nullptr);
  CHECK(std::string(axrt_status_message(null_message.get())).empty());

  Status empty(axrt_status_create(AXRT_STATUS_CODE_ABORTED, ""));
  REQUIRE(empty != nullptr);
  CHECK(std::string(axrt_status_message(empty.get())).empty());
}

TEST_CASE("status: long messages are kept whole", "[cts][status]") {
  std::string message(100000, 'm');
  message.back() = 'z';
  Status status(axrt_status_create(AXRT_STATUS_CODE_DATA_LOSS, message.c_str()));
  REQUIRE(status != nullptr);
  CHECK(std::string(axrt_status_message(status.get())) == message);
}

}  // namespace
}  // namespace axrt_cts
