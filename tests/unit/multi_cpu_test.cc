// Several CPU devices in one process (AXRT_CPU_DEVICES): ctest runs this
// with AXRT_CPU_DEVICES=4. Each device has its own id, pools, streams and
// threads; bad counts are refused naming the variable.
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "tests/unit/status_check.h"

namespace {

using axrt_test::Outcome;
using axrt_test::Take;

constexpr uint32_t kDevices = 4;

// Run alone, the program sets the variable itself (ctest sets it too).
const bool kDevicesSet = setenv("AXRT_CPU_DEVICES", "4", /*overwrite=*/0) == 0;

struct Instance {
  Instance() {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    size_t count = 0;
    REQUIRE_CALL_OK(axrt_instance_device_count(instance, &count));
    REQUIRE(count == kDevices);
    for (size_t i = 0; i < count; ++i) {
      axrt_device_t device = nullptr;
      REQUIRE_CALL_OK(axrt_instance_get_device(instance, i, &device));
      devices.push_back(device);
    }
  }
  ~Instance() {
    for (axrt_device_t d : devices) axrt_device_release(d);
    axrt_instance_release(instance);
  }
  axrt_instance_t instance = nullptr;
  std::vector<axrt_device_t> devices;
};

uint64_t BytesInUse(axrt_device_t device) {
  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_pool_statistics(device, &stats));
  return stats.bytes_in_use;
}

}  // namespace

TEST_CASE("AXRT_CPU_DEVICES gives that many CPU devices, each its own", "[multi]") {
  REQUIRE(kDevicesSet);
  REQUIRE(std::string(std::getenv("AXRT_CPU_DEVICES")) == "4");
  Instance in;
  uint64_t memory = 0;
  for (uint32_t i = 0; i < kDevices; ++i) {
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_CALL_OK(axrt_device_query_properties(in.devices[i], &p));
    CHECK(std::string(p.id) == "cpu:" + std::to_string(i));
    CHECK(p.ordinal == i);
    CHECK(p.type == AXRT_DEVICE_TYPE_CPU);
    CHECK(p.compute_units >= 1);
    if (i == 0) memory = p.total_memory;
    CHECK(p.total_memory == memory);  // an equal share of the host's
    axrt_device_t found = nullptr;
    REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, p.id, &found));
    CHECK(found == in.devices[i]);
    axrt_device_release(found);
  }
  // Pools are per device: memory taken on cpu:2 shows there only.
  std::vector<uint64_t> before;
  for (axrt_device_t d : in.devices) before.push_back(BytesInUse(d));
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_allocate(in.devices[2], 1 << 20, nullptr, &buffer));
  for (uint32_t i = 0; i < kDevices; ++i) {
    if (i == 2) {
      CHECK(BytesInUse(in.devices[i]) >= before[i] + (1 << 20));
    } else {
      CHECK(BytesInUse(in.devices[i]) == before[i]);
    }
  }
  // A stream of cpu:1 does not take cpu:2's device memory (no peer
  // copies yet; docs/multi-device.md).
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(in.devices[1], nullptr, &stream));
  std::vector<unsigned char> host(16);
  REQUIRE_CALL_FAILS(axrt_stream_copy_to_host(stream, buffer, 0, host.data(), host.size()),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "cpu:2", "cannot reach");
  axrt_stream_release(stream);
  axrt_buffer_release(buffer);
  CHECK(BytesInUse(in.devices[2]) == before[2]);
}

TEST_CASE("every CPU device runs its own streams at once", "[multi]") {
  Instance in;
  constexpr size_t kBytes = 3 << 20;  // split across the device's threads
  std::vector<Outcome> outcomes(kDevices);
  std::vector<std::vector<unsigned char>> results(kDevices);
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < kDevices; ++i) {
    threads.emplace_back([&, i] {
      axrt_device_t device = in.devices[i];
      axrt_stream_t stream = nullptr;
      axrt_buffer_t buffer = nullptr;
      results[i].assign(kBytes, 0);
      const unsigned char pattern = static_cast<unsigned char>(0x10 + i);
      axrt_status_t s = axrt_stream_create(device, nullptr, &stream);
      if (!s) s = axrt_buffer_allocate(device, kBytes, nullptr, &buffer);
      for (int round = 0; round < 20 && !s; ++round) {
        s = axrt_stream_fill_buffer(stream, buffer, 0, kBytes, &pattern, 1);
        if (!s) s = axrt_stream_copy_to_host(stream, buffer, 0, results[i].data(), kBytes);
      }
      if (!s) s = axrt_stream_synchronize(stream);
      outcomes[i] = Take(s);
      axrt_buffer_release(buffer);
      axrt_stream_release(stream);
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint32_t i = 0; i < kDevices; ++i) {
    INFO("cpu:" << i << ": " << outcomes[i].message);
    REQUIRE(outcomes[i].code == AXRT_STATUS_CODE_OK);
    const std::vector<unsigned char> expected(kBytes, static_cast<unsigned char>(0x10 + i));
    CHECK(results[i] == expected);
  }
}

TEST_CASE("a bad AXRT_CPU_DEVICES is refused, naming it", "[multi]") {
  // Put back however the case ends: later cases read it.
  struct Restore {
    std::string saved = std::getenv("AXRT_CPU_DEVICES");
    ~Restore() { setenv("AXRT_CPU_DEVICES", saved.c_str(), 1); }
  } restore;
  for (const char* bad : {"0", "65", "-1", "two", "4x"}) {
    REQUIRE(setenv("AXRT_CPU_DEVICES", bad, 1) == 0);
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    axrt_instance_t instance = nullptr;
    REQUIRE_CALL_FAILS(axrt_instance_create(&options, &instance),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "AXRT_CPU_DEVICES", bad);
    CHECK(instance == nullptr);
  }
}
