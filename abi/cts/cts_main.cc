// The conformance suite's entry point: says which device it tests before the
// tests run, so a log always tells which driver a failure belongs to.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "abi/cts/cts_fixture.h"

int main(int argc, char** argv) {
  std::printf("axrt conformance suite: device under test '%s' (driver '%s'), "
              "library %s\n",
              axrt_cts::DeviceUnderTestId().c_str(),
              axrt_cts::DriverUnderTest().c_str(), axrt_version_string());
  return Catch::Session().run(argc, argv);
}
