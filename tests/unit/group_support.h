// What the device-group tests share (group_test.cc on CPU devices,
// nccl_group_test.cc on the mock CUDA and NCCL): a group owned for a test,
// random inputs, and the host functions that hold or fail a member's stream.
#ifndef AXRT_TESTS_UNIT_GROUP_SUPPORT_H_
#define AXRT_TESTS_UNIT_GROUP_SUPPORT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "axrt/axrt.h"
#include "tests/unit/status_check.h"

namespace axrt_test {

// An instance of the CPU driver with AXRT_CPU_DEVICES (set before it, as
// ctest does) CPU devices, a stream on each; `count` of them are used.
struct CpuInstance {
  explicit CpuInstance(size_t count) {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    for (size_t i = 0; i < count; ++i) {
      axrt_device_t device = nullptr;
      REQUIRE_CALL_OK(axrt_instance_get_device(instance, i, &device));
      devices.push_back(device);
      axrt_stream_t stream = nullptr;
      REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
      streams.push_back(stream);
    }
  }
  ~CpuInstance() {
    for (axrt_stream_t s : streams) axrt_stream_release(s);
    for (axrt_device_t d : devices) axrt_device_release(d);
    axrt_instance_release(instance);
  }
  CpuInstance(const CpuInstance&) = delete;
  CpuInstance& operator=(const CpuInstance&) = delete;
  // Replaces the streams (a failed stream stays failed).
  void new_streams() {
    for (size_t i = 0; i < streams.size(); ++i) {
      axrt_stream_release(streams[i]);
      REQUIRE_CALL_OK(axrt_stream_create(devices[i], nullptr, &streams[i]));
    }
  }
  axrt_instance_t instance = nullptr;
  std::vector<axrt_device_t> devices;
  std::vector<axrt_stream_t> streams;
};

// A group of `devices`, destroyed with the object.
struct TestGroup {
  explicit TestGroup(const std::vector<axrt_device_t>& devices, uint64_t timeout_ns = 0,
                     const char* label = "test") {
    axrt_group_options_t options = AXRT_GROUP_OPTIONS_INIT;
    options.label = label;
    options.timeout_ns = timeout_ns;
    REQUIRE_CALL_OK(axrt_group_create(devices.data(), devices.size(), &options, &group));
  }
  ~TestGroup() { axrt_group_destroy(group); }
  TestGroup(const TestGroup&) = delete;
  TestGroup& operator=(const TestGroup&) = delete;
  axrt_group_info_t info() const {
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    REQUIRE_CALL_OK(axrt_group_query_info(group, &info));
    return info;
  }
  axrt_group_t group = nullptr;
};

// A loopback TCP port nobody listens on now.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A TCP rendezvous for axrt_group_join on such a port.
inline std::string TcpId(const char* name = "") {
  return "tcp://127.0.0.1:" + std::to_string(FreePort()) + name;
}

// `n` floats in [-4, 4) from `seed`.
inline std::vector<float> RandomFloats(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Synchronizes the first `count` streams, each of which must succeed.
inline void SyncAll(const std::vector<axrt_stream_t>& streams, size_t count) {
  for (size_t i = 0; i < count; ++i) REQUIRE_CALL_OK(axrt_stream_synchronize(streams[i]));
}

// Host function: holds the stream until *flag (a std::atomic<bool>) is set.
inline axrt_status_t BlockUntilSet(void* flag, axrt_status_t) {
  auto* f = static_cast<std::atomic<bool>*>(flag);
  while (!f->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return nullptr;
}

// Host function: fails the stream, as a member that failed.
inline axrt_status_t FailStream(void*, axrt_status_t) {
  return axrt_status_create(AXRT_STATUS_CODE_INTERNAL, "injected failure of this member");
}

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_GROUP_SUPPORT_H_
