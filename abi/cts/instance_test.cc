// Instances, drivers and device enumeration (device.h).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

std::string DeviceId(axrt_device_t device) {
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  REQUIRE_OK(axrt_device_query_properties(device, &properties));
  return properties.id;
}

std::vector<std::string> DriverNames(axrt_instance_t instance) {
  size_t count = 0;
  REQUIRE_OK(axrt_instance_driver_count(instance, &count));
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    REQUIRE_OK(axrt_instance_query_driver_info(instance, i, &info));
    names.emplace_back(info.name, strnlen(info.name, sizeof(info.name)));
  }
  return names;
}

// Sets or clears an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_CASE("instance: create with NULL options enables every driver",
          "[cts][instance]") {
  Instance instance;
  REQUIRE_OK(axrt_instance_create(nullptr, Out(instance)));
  REQUIRE(instance != nullptr);
  std::vector<std::string> names = DriverNames(instance.get());
  // The CPU driver is always built in; the driver under test must be too,
  // and among the defaults unless it takes part only when named.
  CHECK(std::count(names.begin(), names.end(), "cpu") == 1);
  const bool by_default =
      UnsupportedReason(DriverUnderTest(), Feature::kDefaultInstance).empty();
  CHECK(std::count(names.begin(), names.end(), DriverUnderTest()) == (by_default ? 1 : 0));
  std::set<std::string> unique(names.begin(), names.end());
  CHECK(unique.size() == names.size());

  // NULL and "" in the options mean the same as NULL options.
  for (const char* drivers : {static_cast<const char*>(nullptr), ""}) {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = drivers;
    Instance other;
    REQUIRE_OK(axrt_instance_create(&options, Out(other)));
    CHECK(DriverNames(other.get()) == names);
  }
}

TEST_CASE("instance: the drivers option filters", "[cts][instance]") {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu";
  Instance instance;
  REQUIRE_OK(axrt_instance_create(&options, Out(instance)));
  CHECK(DriverNames(instance.get()) == std::vector<std::string>{"cpu"});

  size_t device_count = 0;
  REQUIRE_OK(axrt_instance_device_count(instance.get(), &device_count));
  REQUIRE(device_count >= 1);
  for (size_t i = 0; i < device_count; ++i) {
    Device device;
    REQUIRE_OK(axrt_instance_get_device(instance.get(), i, Out(device)));
    CHECK(DeviceId(device.get()).rfind("cpu:", 0) == 0);
  }

  std::string under_test = DriverUnderTest();
  options.drivers = under_test.c_str();
  Instance only;
  REQUIRE_OK(axrt_instance_create(&options, Out(only)));
  CHECK(DriverNames(only.get()) == std::vector<std::string>{under_test});
}

TEST_CASE("instance: an unknown driver name is NOT_FOUND", "[cts][instance]") {
  for (const char* drivers : {"nosuchdriver", "cpu,nosuchdriver"}) {
    INFO(drivers);
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = drivers;
    axrt_instance_t sentinel = reinterpret_cast<axrt_instance_t>(0x1);
    axrt_instance_t instance = sentinel;
    CHECK_STATUS(axrt_instance_create(&options, &instance),
                 AXRT_STATUS_CODE_NOT_FOUND, "nosuchdriver");
    CHECK(instance == sentinel);
  }
}

TEST_CASE("instance: driver info", "[cts][instance]") {
  Instance instance;
  REQUIRE_OK(axrt_instance_create(OptionsWithDriverUnderTest(), Out(instance)));
  size_t driver_count = 0;
  REQUIRE_OK(axrt_instance_driver_count(instance.get(), &driver_count));
  REQUIRE(driver_count >= 1);
  size_t device_count = 0;
  REQUIRE_OK(axrt_instance_device_count(instance.get(), &device_count));

  uint64_t devices_by_driver = 0;
  bool saw_under_test = false;
  for (size_t i = 0; i < driver_count; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    REQUIRE_OK(axrt_instance_query_driver_info(instance.get(), i, &info));
    std::string name(info.name, strnlen(info.name, sizeof(info.name)));
    std::string availability(
        info.availability,
        strnlen(info.availability, sizeof(info.availability)));
    INFO("driver " << name << ": " << availability);
    CHECK(!name.empty());
    CHECK(name.size() < sizeof(info.name));
    CHECK(availability.size() < sizeof(info.availability));
    // A driver explains why it has no devices, and only then.
    CHECK(availability.empty() == (info.device_count > 0));
    devices_by_driver += info.device_count;
    if (name == DriverUnderTest()) {
      saw_under_test = true;
      CHECK(info.device_count >= 1);
    }
    if (name == "cpu") CHECK(info.device_count >= 1);
  }
  CHECK(saw_under_test);
  CHECK(devices_by_driver == device_count);

  axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
  CHECK_STATUS(
      axrt_instance_query_driver_info(instance.get(), driver_count, &info),
      AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
}

TEST_CASE("instance: devices are enumerated, named and found",
          "[cts][instance]") {
  Instance instance;
  REQUIRE_OK(axrt_instance_create(OptionsWithDriverUnderTest(), Out(instance)));
  size_t count = 0;
  REQUIRE_OK(axrt_instance_device_count(instance.get(), &count));
  REQUIRE(count >= 1);

  std::vector<std::string> ids;
  for (size_t i = 0; i < count; ++i) {
    Device device;
    REQUIRE_OK(axrt_instance_get_device(instance.get(), i, Out(device)));
    REQUIRE(device != nullptr);
    ids.push_back(DeviceId(device.get()));

    // Finding by name gives the same device.
    Device found;
    REQUIRE_OK(axrt_instance_find_device(instance.get(), ids.back().c_str(),
                                         Out(found)));
    CHECK(DeviceId(found.get()) == ids.back());
  }
  std::set<std::string> unique(ids.begin(), ids.end());
  CHECK(unique.size() == ids.size());
  CHECK(unique.count(DeviceUnderTestId()) == 1);
  CHECK(unique.count("cpu:0") == 1);

  // Ordered by driver, then ordinal: the devices of one driver are
  // contiguous and numbered from 0.
  std::vector<std::string> drivers = DriverNames(instance.get());
  size_t next = 0;
  for (const std::string& driver : drivers) {
    uint32_t ordinal = 0;
    while (next < ids.size() && ids[next].rfind(driver + ":", 0) == 0) {
      CHECK(ids[next] == driver + ":" + std::to_string(ordinal));
      ++ordinal;
      ++next;
    }
  }
  CHECK(next == ids.size());

  axrt_device_t sentinel = reinterpret_cast<axrt_device_t>(0x1);
  axrt_device_t device = sentinel;
  CHECK_STATUS(axrt_instance_get_device(instance.get(), count, &device),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  CHECK(device == sentinel);
}

TEST_CASE("instance: find_device NOT_FOUND names the devices that exist",
          "[cts][instance]") {
  Instance instance;
  REQUIRE_OK(axrt_instance_create(nullptr, Out(instance)));
  for (const char* name : {"cpu:999", "nosuch:0", "cpu:0x"}) {
    INFO(name);
    axrt_device_t sentinel = reinterpret_cast<axrt_device_t>(0x1);
    axrt_device_t device = sentinel;
    CHECK_STATUS(axrt_instance_find_device(instance.get(), name, &device),
                 AXRT_STATUS_CODE_NOT_FOUND, "cpu:0");
    CHECK(device == sentinel);
  }
}

TEST_CASE("instance: the default device", "[cts][instance]") {
  SECTION("without AXRT_DEVICE it is cpu:0") {
    ScopedEnv env("AXRT_DEVICE", nullptr);
    Instance instance;
    REQUIRE_OK(axrt_instance_create(nullptr, Out(instance)));
    for (const char* name : {static_cast<const char*>(nullptr), ""}) {
      Device device;
      REQUIRE_OK(axrt_instance_find_device(instance.get(), name, Out(device)));
      CHECK(DeviceId(device.get()) == "cpu:0");
    }
  }
  SECTION("AXRT_DEVICE names it") {
    std::string id = DeviceUnderTestId();
    ScopedEnv env("AXRT_DEVICE", id.c_str());
    Instance instance;
    REQUIRE_OK(axrt_instance_create(OptionsWithDriverUnderTest(), Out(instance)));
    for (const char* name : {static_cast<const char*>(nullptr), ""}) {
      Device device;
      REQUIRE_OK(axrt_instance_find_device(instance.get(), name, Out(device)));
      CHECK(DeviceId(device.get()) == id);
    }
    // An explicit name still wins.
    Device cpu;
    REQUIRE_OK(axrt_instance_find_device(instance.get(), "cpu:0", Out(cpu)));
    CHECK(DeviceId(cpu.get()) == "cpu:0");
  }
  SECTION("AXRT_DEVICE naming no device is NOT_FOUND") {
    ScopedEnv env("AXRT_DEVICE", "nosuch:7");
    Instance instance;
    REQUIRE_OK(axrt_instance_create(nullptr, Out(instance)));
    axrt_device_t device = nullptr;
    CHECK_STATUS(axrt_instance_find_device(instance.get(), nullptr, &device),
                 AXRT_STATUS_CODE_NOT_FOUND, "nosuch:7");
    CHECK(device == nullptr);
  }
}

TEST_CASE("instance: retain and release", "[cts][instance]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_OK(axrt_instance_create(nullptr, &instance));
  axrt_instance_retain(instance);
  axrt_instance_release(instance);
  // Still alive: one reference left.
  size_t count = 0;
  REQUIRE_OK(axrt_instance_driver_count(instance, &count));
  CHECK(count >= 1);
  axrt_instance_release(instance);

  axrt_instance_retain(nullptr);
  axrt_instance_release(nullptr);
  axrt_device_retain(nullptr);
  axrt_device_release(nullptr);
}

// Runs a copy and an event through whatever handles are still held, to
// prove that the objects behind them are alive.
void ExerciseSurvivors(axrt_buffer_t buffer, axrt_stream_t stream,
                       axrt_event_t event, axrt_device_t device,
                       uint8_t value) {
  if (device != nullptr) {
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_OK(axrt_device_query_properties(device, &properties));
    CHECK(std::string(properties.id) == DeviceUnderTestId());
  }
  if (buffer != nullptr && stream != nullptr) {
    std::array<uint8_t, 64> in;
    in.fill(value);
    std::array<uint8_t, 64> out{};
    REQUIRE_OK(axrt_stream_copy_from_host(stream, in.data(), buffer, 0, 64));
    REQUIRE_OK(axrt_stream_copy_to_host(stream, buffer, 0, out.data(), 64));
    if (event != nullptr) {
      REQUIRE_OK(axrt_stream_record_event(stream, event));
      REQUIRE_OK(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE));
    }
    REQUIRE_OK(axrt_stream_synchronize(stream));
    CHECK(out == in);
  } else if (stream != nullptr) {
    if (event != nullptr) REQUIRE_OK(axrt_stream_record_event(stream, event));
    REQUIRE_OK(axrt_stream_synchronize(stream));
  } else if (buffer != nullptr) {
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_OK(axrt_buffer_query_info(buffer, &info));
    CHECK(info.size == 64);
  }
  if (event != nullptr && stream == nullptr) {
    REQUIRE_OK(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE));
    bool complete = false;
    REQUIRE_OK(axrt_event_query(event, &complete));
    CHECK(complete);
  }
}

TEST_CASE("instance: objects stay alive in any release order",
          "[cts][instance][lifetime]") {
  enum Object { kInstance, kDevice, kBuffer, kStream, kEvent };
  std::array<int, 5> order = {kInstance, kDevice, kBuffer, kStream, kEvent};
  int permutations = 0;
  do {
    ++permutations;
    std::string id = DeviceUnderTestId();
    axrt_instance_t instance = nullptr;
    axrt_device_t device = nullptr;
    axrt_buffer_t buffer = nullptr;
    axrt_stream_t stream = nullptr;
    axrt_event_t event = nullptr;
    REQUIRE_OK(axrt_instance_create(OptionsWithDriverUnderTest(), &instance));
    REQUIRE_OK(axrt_instance_find_device(instance, id.c_str(), &device));
    REQUIRE_OK(axrt_buffer_allocate(device, 64, nullptr, &buffer));
    REQUIRE_OK(axrt_stream_create(device, nullptr, &stream));
    REQUIRE_OK(axrt_event_create(device, nullptr, &event));
    // Record once up front so that a later query has something to ask about.
    REQUIRE_OK(axrt_stream_record_event(stream, event));
    for (int object : order) {
      switch (object) {
        case kInstance: axrt_instance_release(instance); instance = nullptr; break;
        case kDevice: axrt_device_release(device); device = nullptr; break;
        case kBuffer: axrt_buffer_release(buffer); buffer = nullptr; break;
        case kStream: axrt_stream_release(stream); stream = nullptr; break;
        case kEvent: axrt_event_release(event); event = nullptr; break;
      }
      ExerciseSurvivors(buffer, stream, event, device,
                        static_cast<uint8_t>(permutations));
    }
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(permutations == 120);
}

}  // namespace
}  // namespace axrt_cts
