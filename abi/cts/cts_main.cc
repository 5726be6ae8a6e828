// The conformance suite's entry point: says which device it tests before the
// tests run, so a log always tells which driver a failure belongs to. With
// AXRT_CTS_SKIP_ABSENT=1, a device under test this machine does not have
// (no GPU, no driver) skips the whole suite with the driver's reason, exit
// code 77; otherwise its absence fails every test.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "abi/cts/cts_fixture.h"
#include "tests/support/catch_session.h"

namespace {

constexpr int kSkipped = 77;

// The reason the device under test is absent, or "" when it is there.
std::string AbsenceReason() {
  const std::string driver = axrt_cts::DriverUnderTest();
  const std::string id = axrt_cts::DeviceUnderTestId();
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = driver.c_str();
  axrt_instance_t instance = nullptr;
  if (axrt_status_t status = axrt_instance_create(&options, &instance)) {
    std::string reason = axrt_status_message(status);
    axrt_status_free(status);
    return reason;
  }
  std::string reason;
  axrt_device_t device = nullptr;
  if (axrt_status_t status = axrt_instance_find_device(instance, id.c_str(), &device)) {
    axrt_status_free(status);
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    reason = "no device " + id;
    if (axrt_instance_query_driver_info(instance, 0, &info) == nullptr && info.availability[0]) {
      reason += std::string(": ") + info.availability;
    }
  }
  axrt_device_release(device);
  axrt_instance_release(instance);
  return reason;
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("axrt conformance suite: device under test '%s' (driver '%s'), "
              "library %s\n",
              axrt_cts::DeviceUnderTestId().c_str(),
              axrt_cts::DriverUnderTest().c_str(), axrt_version_string());
  const char* skip_absent = std::getenv("AXRT_CTS_SKIP_ABSENT");
  if (skip_absent && std::strcmp(skip_absent, "1") == 0) {
    const std::string reason = AbsenceReason();
    if (!reason.empty()) {
      std::printf("skipped: %s\n", reason.c_str());
      return kSkipped;
    }
  }
  return axrt_test::run_catch_session(argc, argv);
}
