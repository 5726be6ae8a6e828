// The report of `axrt devices` for drivers this machine may not have: a
// driver without devices is listed with why, in text and in JSON.
#include "tools/axrt/devices.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

using axrt::tools::devices_report;

namespace {

axrt_driver_info_t driver(const char* name, uint32_t device_count, const char* availability) {
  axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
  std::snprintf(info.name, sizeof info.name, "%s", name);
  std::snprintf(info.availability, sizeof info.availability, "%s", availability);
  info.device_count = device_count;
  return info;
}

axrt_device_properties_t cpu_device() {
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  std::snprintf(p.id, sizeof p.id, "cpu:0");
  std::snprintf(p.driver, sizeof p.driver, "cpu");
  std::snprintf(p.name, sizeof p.name, "Test CPU");
  p.type = AXRT_DEVICE_TYPE_CPU;
  p.compute_units = 4;
  p.total_memory = 1ull << 30;
  p.buffer_alignment = 256;
  p.max_workgroup_invocations = 1024;
  p.flags = AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("devices: every driver is listed, one without devices with why") {
  const std::vector<axrt_driver_info_t> drivers = {
      driver("cpu", 1, ""),
      driver("cuda", 0, "libcuda.so.1 not found: cannot open shared object file"),
  };
  const std::vector<axrt_device_properties_t> devices = {cpu_device()};
  const std::string text = devices_report(drivers, devices, false);
  INFO(text);
  CHECK(contains(text, "drivers (2):\n"));
  CHECK(contains(text, "  cpu    available, 1 device(s)\n"));
  CHECK(contains(text, "  cuda   unavailable: libcuda.so.1 not found: cannot open shared object file\n"));
  CHECK(contains(text, "devices (1):\n  cpu:0    Test CPU\n"));
  CHECK(contains(text, "4 compute units, 1024 MiB, buffers aligned to 256 bytes"));
  CHECK(contains(text, "host-visible memory\n"));
}

TEST_CASE("devices: a driver that gives no reason, several lines or a note is still readable") {
  const std::vector<axrt_driver_info_t> drivers = {
      driver("cuda", 0, ""),
      driver("rocm", 0, "libamdhip64.so not found\nset LD_LIBRARY_PATH\n"),
      driver("vk", 2, "1 more device skipped: too old"),
  };
  const std::string text = devices_report(drivers, {}, false);
  INFO(text);
  CHECK(contains(text, "drivers (3):\n"));
  CHECK(contains(text, "  cuda   unavailable: no devices found (the driver gave no reason)\n"));
  CHECK(contains(text, "  rocm   unavailable: libamdhip64.so not found\n         set LD_LIBRARY_PATH\n"));
  CHECK(contains(text, "  vk     available, 2 device(s); 1 more device skipped: too old\n"));
  CHECK(contains(text, "devices (0):\n"));
}

TEST_CASE("devices: a name or reason that fills its array is not read past") {
  axrt_driver_info_t full = driver("x", 0, "");
  std::fill(std::begin(full.name), std::end(full.name), 'n');
  std::fill(std::begin(full.availability), std::end(full.availability), 'r');
  const std::string text = devices_report(std::vector<axrt_driver_info_t>{full}, {}, false);
  CHECK(contains(text, "  " + std::string(32, 'n') + " unavailable: " + std::string(256, 'r') + "\n"));
}

TEST_CASE("devices: --json lists drivers without devices with their availability") {
  const std::vector<axrt_driver_info_t> drivers = {
      driver("cpu", 1, ""),
      driver("cuda", 0, "no \"CUDA\" devices"),
  };
  const std::vector<axrt_device_properties_t> devices = {cpu_device()};
  const std::string json = devices_report(drivers, devices, true);
  INFO(json);
  CHECK(contains(json, "\"name\": \"cuda\",\n      \"device_count\": 0,\n      \"available\": false,\n"
                       "      \"availability\": \"no \\\"CUDA\\\" devices\""));
  CHECK(contains(json, "\"name\": \"cpu\",\n      \"device_count\": 1,\n      \"available\": true,\n"
                       "      \"availability\": \"\""));
  CHECK(contains(json, "\"id\": \"cpu:0\""));
}

namespace {

axrt_device_properties_t cuda_device(int ordinal, int32_t numa_node) {
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  std::snprintf(p.id, sizeof p.id, "cuda:%d", ordinal);
  std::snprintf(p.driver, sizeof p.driver, "cuda");
  std::snprintf(p.name, sizeof p.name, "Test GPU");
  p.type = AXRT_DEVICE_TYPE_CUDA;
  p.numa_node = numa_node;
  return p;
}

axrt_device_peer_info_t link(axrt_device_link_t kind, uint32_t count = 0, bool direct = false) {
  axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
  info.link = kind;
  info.link_count = count;
  info.direct_access = direct;
  info.native_atomics = direct;
  return info;
}

}  // namespace

TEST_CASE("devices: --topology prints the matrix of links and each device's NUMA node") {
  axrt_device_properties_t cpu = cpu_device();
  cpu.numa_node = 0;
  const std::vector<axrt_device_properties_t> devices = {cpu, cuda_device(0, 1),
                                                         cuda_device(1, -1)};
  const std::vector<axrt_device_peer_info_t> topology = {
      link(AXRT_DEVICE_LINK_SELF, 0, true), link(AXRT_DEVICE_LINK_NONE),
      link(AXRT_DEVICE_LINK_NONE),
      link(AXRT_DEVICE_LINK_NONE), link(AXRT_DEVICE_LINK_SELF, 0, true),
      link(AXRT_DEVICE_LINK_NVLINK, 4, true),
      link(AXRT_DEVICE_LINK_NONE), link(AXRT_DEVICE_LINK_PCIE, 0, true),
      link(AXRT_DEVICE_LINK_SELF, 0, true)};
  const std::string text = devices_report({}, devices, false, topology);
  INFO(text);
  CHECK(contains(text, "topology (each row's device reaching the memory of each column's):\n"));
  // Columns as wide as the widest cell ("nvlink x4") and two spaces.
  CHECK(contains(text, "             cpu:0      cuda:0     cuda:1     numa node\n"));
  CHECK(contains(text, "  cpu:0      self       none       none       0\n"));
  CHECK(contains(text, "  cuda:0     none       self       nvlink x4  1\n"));
  CHECK(contains(text, "  cuda:1     none       pcie       self       unknown\n"));
  // Without --topology there is no matrix.
  CHECK_FALSE(contains(devices_report({}, devices, false), "topology"));
}

TEST_CASE("devices: --topology --json carries every link and NUMA node") {
  axrt_device_properties_t cpu = cpu_device();
  cpu.numa_node = 0;
  const std::vector<axrt_device_properties_t> devices = {cpu, cuda_device(0, -1)};
  std::vector<axrt_device_peer_info_t> topology = {
      link(AXRT_DEVICE_LINK_SELF, 0, true), link(AXRT_DEVICE_LINK_NONE),
      link(AXRT_DEVICE_LINK_NONE), link(AXRT_DEVICE_LINK_SELF, 0, true)};
  topology[1].performance_rank = 3;
  const std::string json = devices_report({}, devices, true, topology);
  INFO(json);
  CHECK(contains(json, "\"numa_node\": 0"));
  CHECK(contains(json, "\"numa_node\": -1"));
  CHECK(contains(json, "\"topology\": [\n"));
  CHECK(contains(json, "\"device\": \"cpu:0\",\n      \"numa_node\": 0,\n      \"peers\": [\n"));
  CHECK(contains(json, "\"peer\": \"cuda:0\",\n          \"link\": \"none\",\n"
                       "          \"link_count\": 0,\n          \"direct_access\": false,\n"
                       "          \"native_atomics\": false,\n          \"performance_rank\": 3\n"));
  CHECK(contains(json, "\"peer\": \"cpu:0\",\n          \"link\": \"self\",\n"));
  CHECK_FALSE(contains(devices_report({}, devices, true), "\"topology\""));
}

TEST_CASE("devices: an NVLink cell names its link count") {
  CHECK(axrt::tools::link_text(link(AXRT_DEVICE_LINK_NVLINK, 18, true)) == "nvlink x18");
  CHECK(axrt::tools::link_text(link(AXRT_DEVICE_LINK_NVLINK, 0, true)) == "nvlink");
  CHECK(axrt::tools::link_text(link(AXRT_DEVICE_LINK_HOST_MEMORY, 0, true)) == "host-memory");
  CHECK(axrt::tools::link_text(link(99)) == "unknown");
}
