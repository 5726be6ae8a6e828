// A driver from outside the tree (tests/external_driver, named in
// AXRT_EXTERNAL_DRIVERS by the test build) is built into libaxrt and
// registered like the in-tree ones, after them.
#include <catch2/catch.hpp>

#include <string>

#include "axrt/axrt.h"
#include "tests/unit/status_check.h"

TEST_CASE("external driver: registered after the in-tree drivers, only when named") {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu,external_example";
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
  size_t count = 0;
  REQUIRE_CALL_OK(axrt_instance_driver_count(instance, &count));
  REQUIRE(count == 2);
  axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_instance_query_driver_info(instance, 1, &info));
  CHECK(std::string(info.name) == "external_example");
  CHECK(info.device_count == 0);
  CHECK(std::string(info.availability).find("outside the runtime's tree") != std::string::npos);
  axrt_instance_release(instance);

  // Not among the default drivers.
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  REQUIRE_CALL_OK(axrt_instance_driver_count(instance, &count));
  for (size_t i = 0; i < count; ++i) {
    REQUIRE_CALL_OK(axrt_instance_query_driver_info(instance, i, &info));
    CHECK(std::string(info.name) != "external_example");
  }
  axrt_instance_release(instance);
}
