// Topology and peer copies of the CUDA driver against the mock Driver API
// (tests/mock_cuda): what axrt_device_query_peer reports with peer access
// on and off, NVLinks from the NVML mock, and copies between cuda:0 and
// cuda:1 and between CUDA and CPU devices, each ordered with events.
//
// The driver and NVML load once per process, so each configuration is its
// own ctest entry running this binary with a tag:
//   [mock]     the mock, and no NVML (AXRT_NVML_LIBRARY names no file)
//   [nvml]     the mock, which also stands in for NVML
//   [no-p2p]   the mock, hiding every entry point the topology uses
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "axrt/axrt.h"
#include "tests/mock_cuda/mock_cuda.h"
#include "tests/unit/mock_cuda_support.h"
#include "tests/unit/status_check.h"

namespace {

using axrt_test::RequireNoLiveObjects;

struct MockScope {
  MockScope() { axrt_mock_cuda_reset(); }
  ~MockScope() { axrt_mock_cuda_reset(); }
};

// A default instance (CPU and CUDA drivers) and its devices cpu:0, cuda:0
// and cuda:1.
struct Instance {
  axrt_instance_t instance = nullptr;
  axrt_device_t cpu = nullptr;
  axrt_device_t cuda0 = nullptr;
  axrt_device_t cuda1 = nullptr;
  Instance() {
    REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &cpu));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &cuda0));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:1", &cuda1));
  }
  ~Instance() {
    axrt_device_release(cuda1);
    axrt_device_release(cuda0);
    axrt_device_release(cpu);
    axrt_instance_release(instance);
  }
};

axrt_buffer_t NewBuffer(axrt_device_t device, uint64_t size) {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_allocate(device, size, nullptr, &buffer));
  return buffer;
}

axrt_stream_t NewStream(axrt_device_t device) {
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
  return stream;
}

axrt_event_t NewEvent(axrt_device_t device) {
  axrt_event_t event = nullptr;
  REQUIRE_CALL_OK(axrt_event_create(device, nullptr, &event));
  return event;
}

axrt_device_peer_info_t QueryPeer(axrt_device_t device, axrt_device_t peer) {
  axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_device_query_peer(device, peer, &info));
  return info;
}

int32_t NumaNode(axrt_device_t device) {
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  REQUIRE_CALL_OK(axrt_device_query_properties(device, &p));
  return p.numa_node;
}

uint64_t Copies(axrt_device_t device) {
  axrt_stream_statistics_t stats = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(device, &stats));
  return stats.copies;
}

// An integer from the first line of `path`, or `fallback`.
int32_t ReadNode(const std::string& path, int32_t fallback) {
  std::ifstream file(path);
  std::string line;
  if (!std::getline(file, line) || line.empty()) return fallback;
  return static_cast<int32_t>(std::stol(line));
}

// What a CUDA device at the mock's PCI bus `bus` reports when its driver
// says `driver_node`: the kernel's node of that address where this host has
// one, else the driver's, else 0 on a single-node host.
int32_t ExpectedNumaNode(const char* bus, int32_t driver_node) {
  const int32_t sysfs =
      ReadNode(std::string("/sys/bus/pci/devices/0000:") + bus + ":00.0/numa_node", -1);
  if (sysfs >= 0) return sysfs;
  if (driver_node >= 0) return driver_node;
  std::ifstream online("/sys/devices/system/node/online");
  std::string line;
  return std::getline(online, line) && line == "0" ? 0 : -1;
}

std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<unsigned char>((i * 31 + seed) % 253 + 1);
  }
  return bytes;
}

// Fills `buffer` with `data` through a stream of `device` and waits.
void Upload(axrt_device_t device, axrt_buffer_t buffer, const std::vector<unsigned char>& data) {
  axrt_stream_t stream = NewStream(device);
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, data.data(), buffer, 0, data.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_stream_release(stream);
}

std::vector<unsigned char> Download(axrt_device_t device, axrt_buffer_t buffer, size_t size) {
  std::vector<unsigned char> back(size);
  axrt_stream_t stream = NewStream(device);
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, back.data(), size));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_stream_release(stream);
  return back;
}

// Holds a stream back, so that work queued behind it runs late.
axrt_status_t Dawdle(void*, axrt_status_t) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return nullptr;
}

axrt_status_t Fail(void*, axrt_status_t) {
  return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "stopped on purpose");
}

// A stream of `from_device` writes `data` into a buffer behind a slow host
// function; a stream of `copier_device` waits for that with an event,
// copies the buffer into one of `to_device` and is waited for in turn; the
// bytes are read back on `to_device`. The copy counts as one copy of the
// copier's device, and of no other.
void CheckOrderedCopy(axrt_device_t copier_device, axrt_device_t from_device,
                      axrt_device_t to_device, const std::vector<unsigned char>& data) {
  axrt_buffer_t from = NewBuffer(from_device, data.size());
  axrt_buffer_t to = NewBuffer(to_device, data.size());
  Upload(to_device, to, std::vector<unsigned char>(data.size(), 0xEE));
  axrt_stream_t writer = NewStream(from_device);
  axrt_stream_t copier = NewStream(copier_device);
  axrt_event_t written = NewEvent(from_device);
  axrt_event_t copied = NewEvent(copier_device);
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(writer, Dawdle, nullptr));
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(writer, data.data(), from, 0, data.size()));
  REQUIRE_CALL_OK(axrt_stream_record_event(writer, written));
  REQUIRE_CALL_OK(axrt_stream_wait_event(copier, written));
  const uint64_t copier_copies = Copies(copier_device);
  const uint64_t from_copies = Copies(from_device);
  const uint64_t to_copies = Copies(to_device);
  REQUIRE_CALL_OK(axrt_stream_copy_buffer(copier, from, 0, to, 0, data.size()));
  CHECK(Copies(copier_device) == copier_copies + 1);
  if (from_device != copier_device) CHECK(Copies(from_device) == from_copies);
  if (to_device != copier_device) CHECK(Copies(to_device) == to_copies);
  REQUIRE_CALL_OK(axrt_stream_record_event(copier, copied));
  REQUIRE_CALL_OK(axrt_event_wait(copied, AXRT_TIMEOUT_INFINITE));
  CHECK(Download(to_device, to, data.size()) == data);
  REQUIRE_CALL_OK(axrt_stream_synchronize(writer));
  REQUIRE_CALL_OK(axrt_stream_synchronize(copier));
  axrt_event_release(copied);
  axrt_event_release(written);
  axrt_stream_release(copier);
  axrt_stream_release(writer);
  axrt_buffer_release(to);
  axrt_buffer_release(from);
}

}  // namespace

TEST_CASE("cuda: peers report peer access, its atomics and rank, and NUMA nodes", "[mock]") {
  MockScope mock;
  REQUIRE(axrt_mock_cuda_set_host_numa_node(1, 3) == 0);
  {
    Instance in;
    CHECK(NumaNode(in.cuda0) == ExpectedNumaNode("10", -1));
    CHECK(NumaNode(in.cuda1) == ExpectedNumaNode("11", 3));

    axrt_device_peer_info_t info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_PCIE);  // no NVML: P2P is PCIe
    CHECK(info.direct_access);
    CHECK(info.native_atomics);
    CHECK(info.link_count == 0);
    CHECK(info.performance_rank == 0);
    info = QueryPeer(in.cuda0, in.cuda0);
    CHECK(info.link == AXRT_DEVICE_LINK_SELF);
    CHECK(info.direct_access);

    REQUIRE(axrt_mock_cuda_set_peer_attributes(0, 1, 0, 2) == 0);
    info = QueryPeer(in.cuda1, in.cuda0);
    CHECK(info.link == AXRT_DEVICE_LINK_PCIE);
    CHECK(info.direct_access);
    CHECK_FALSE(info.native_atomics);
    CHECK(info.performance_rank == 2);

    REQUIRE(axrt_mock_cuda_set_peer_access(0, 1, 0) == 0);
    for (const auto& [a, b] : {std::pair{in.cuda0, in.cuda1}, std::pair{in.cuda1, in.cuda0}}) {
      info = QueryPeer(a, b);
      CHECK(info.link == AXRT_DEVICE_LINK_NONE);
      CHECK_FALSE(info.direct_access);
      CHECK_FALSE(info.native_atomics);
      CHECK(info.performance_rank == 0);
    }
    // A CUDA device and the CPU device reach each other through host memory
    // only.
    for (const auto& [a, b] : {std::pair{in.cuda0, in.cpu}, std::pair{in.cpu, in.cuda1}}) {
      info = QueryPeer(a, b);
      CHECK(info.link == AXRT_DEVICE_LINK_NONE);
      CHECK_FALSE(info.direct_access);
      CHECK_FALSE(info.native_atomics);
    }
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: peer copies between cuda:0 and cuda:1, with peer access", "[mock]") {
  MockScope mock;
  {
    Instance in;
    unsigned seed = 1;
    for (const size_t size : {size_t{1}, size_t{4097}, size_t{(3u << 20) + 5}}) {
      INFO("size " << size);
      // cuda:0's stream reads cuda:1's memory, then writes it.
      CheckOrderedCopy(in.cuda0, in.cuda1, in.cuda0, Pattern(size, seed++));
      CheckOrderedCopy(in.cuda0, in.cuda0, in.cuda1, Pattern(size, seed++));
    }
    // Access was enabled once, and every copy went peer to peer.
    CHECK(axrt_mock_cuda_call_count("cuCtxEnablePeerAccess") == 1);
    CHECK(axrt_mock_cuda_call_count("cuMemPoolSetAccess") == 1);
    CHECK(axrt_mock_cuda_peer_copies(1) == 6);
    CHECK(axrt_mock_cuda_peer_copies(0) == 0);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: peer copies between cuda:0 and cuda:1 without peer access", "[mock]") {
  MockScope mock;
  REQUIRE(axrt_mock_cuda_set_peer_access(0, 1, 0) == 0);
  {
    Instance in;
    CheckOrderedCopy(in.cuda1, in.cuda0, in.cuda1, Pattern(70001, 3));
    CheckOrderedCopy(in.cuda1, in.cuda1, in.cuda0, Pattern(70001, 4));
    // Nothing to enable: CUDA stages the copies itself.
    CHECK(axrt_mock_cuda_call_count("cuCtxEnablePeerAccess") == 0);
    CHECK(axrt_mock_cuda_peer_copies(1) == 0);
    CHECK(axrt_mock_cuda_peer_copies(0) == 2);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a strided copy between cuda:0 and cuda:1 keeps rows and pitches", "[mock]") {
  MockScope mock;
  {
    Instance in;
    constexpr uint64_t kWidth = 100, kHeight = 9, kSrcPitch = 128, kDstPitch = 160;
    const std::vector<unsigned char> source = Pattern(kSrcPitch * kHeight, 5);
    const std::vector<unsigned char> target(kDstPitch * kHeight, 0x11);
    axrt_buffer_t from = NewBuffer(in.cuda1, source.size());
    axrt_buffer_t to = NewBuffer(in.cuda0, target.size());
    Upload(in.cuda1, from, source);
    Upload(in.cuda0, to, target);
    axrt_stream_t stream = NewStream(in.cuda0);
    axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
    copy.src.buffer = from;
    copy.src.pitch = kSrcPitch;
    copy.dst.buffer = to;
    copy.dst.pitch = kDstPitch;
    copy.dst.offset = 8;
    copy.width = kWidth;
    copy.height = kHeight - 1;
    REQUIRE_CALL_OK(axrt_stream_copy_2d(stream, &copy));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    std::vector<unsigned char> expected = target;
    for (uint64_t row = 0; row + 1 < kHeight; ++row) {
      std::memcpy(&expected[8 + row * kDstPitch], &source[row * kSrcPitch], kWidth);
    }
    CHECK(Download(in.cuda0, to, expected.size()) == expected);
    axrt_stream_release(stream);
    axrt_buffer_release(to);
    axrt_buffer_release(from);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: copies between CUDA and CPU devices run from either side's stream", "[mock]") {
  MockScope mock;
  {
    Instance in;
    const std::vector<unsigned char> data = Pattern(200003, 6);
    // A CPU stream copies out of and into CUDA memory (the copy runs on a
    // stream of the CUDA device, between events of the CPU stream, and
    // counts as the CPU device's copy only)...
    CheckOrderedCopy(in.cpu, in.cuda1, in.cpu, data);
    CheckOrderedCopy(in.cpu, in.cpu, in.cuda0, data);
    // ...and between two CUDA devices, neither of them its own.
    CheckOrderedCopy(in.cpu, in.cuda1, in.cuda0, data);
    // CUDA streams reach CPU memory through its host pointer, their own
    // device's and the other GPU's alike.
    CheckOrderedCopy(in.cuda0, in.cpu, in.cuda0, data);
    CheckOrderedCopy(in.cuda0, in.cuda0, in.cpu, data);
    CheckOrderedCopy(in.cuda0, in.cpu, in.cuda1, data);
    CheckOrderedCopy(in.cuda0, in.cuda1, in.cpu, data);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a CPU stream that failed copies nothing into CUDA memory", "[mock]") {
  MockScope mock;
  {
    Instance in;
    const std::vector<unsigned char> old_bytes(4096, 0x5A);
    axrt_buffer_t from = NewBuffer(in.cpu, 4096);
    axrt_buffer_t to = NewBuffer(in.cuda0, 4096);
    Upload(in.cpu, from, Pattern(4096, 7));
    Upload(in.cuda0, to, old_bytes);
    axrt_stream_t stream = NewStream(in.cpu);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, Fail, nullptr));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, from, 0, to, 0, 4096));
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_ABORTED,
                       "stopped on purpose");
    REQUIRE_CALL_OK(axrt_device_synchronize(in.cuda0));
    CHECK(Download(in.cuda0, to, 4096) == old_bytes);
    axrt_stream_release(stream);
    axrt_buffer_release(to);
    axrt_buffer_release(from);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: NVLinks come from NVML, to the peer or through NVSwitches", "[nvml]") {
  MockScope mock;
  {
    Instance in;
    REQUIRE(axrt_mock_cuda_set_nvlinks(0, 1, 4) == 0);
    axrt_device_peer_info_t info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_NVLINK);
    CHECK(info.link_count == 4);
    CHECK(info.direct_access);
    info = QueryPeer(in.cuda1, in.cuda0);
    CHECK(info.link == AXRT_DEVICE_LINK_NVLINK);
    CHECK(info.link_count == 4);

    // Both GPUs on NVSwitches and none to each other: the fewer switch links.
    axrt_mock_cuda_reset();
    REQUIRE(axrt_mock_cuda_set_nvlinks(0, -1, 18) == 0);
    REQUIRE(axrt_mock_cuda_set_nvlinks(1, -1, 12) == 0);
    info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_NVLINK);
    CHECK(info.link_count == 12);

    // Only one GPU on a switch, or no links: NVML says nothing of the pair.
    axrt_mock_cuda_reset();
    REQUIRE(axrt_mock_cuda_set_nvlinks(0, -1, 18) == 0);
    info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_PCIE);
    CHECK(info.link_count == 0);
    REQUIRE(axrt_mock_cuda_set_peer_access(0, 1, 0) == 0);
    info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_NONE);
    CHECK(QueryPeer(in.cuda0, in.cpu).link == AXRT_DEVICE_LINK_NONE);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a driver without the peer entry points reports no path and still copies",
          "[no-p2p]") {
  MockScope mock;
  {
    Instance in;
    const axrt_device_peer_info_t info = QueryPeer(in.cuda0, in.cuda1);
    CHECK(info.link == AXRT_DEVICE_LINK_NONE);
    CHECK_FALSE(info.direct_access);
    CHECK_FALSE(info.native_atomics);
    CHECK(info.link_count == 0);
    // No PCI address: the node is the driver's, else the host's only one.
    CHECK(NumaNode(in.cuda0) == ExpectedNumaNode("no-such-bus", -1));
    // Unified addressing makes plain copies between the devices legal.
    CheckOrderedCopy(in.cuda0, in.cuda1, in.cuda0, Pattern(10007, 8));
    CheckOrderedCopy(in.cuda1, in.cuda1, in.cuda0, Pattern(10007, 9));
    CHECK(axrt_mock_cuda_call_count("cuMemcpyAsync") >= 2);
  }
  RequireNoLiveObjects();
}
