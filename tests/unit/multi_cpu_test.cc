// Several CPU devices in one process (AXRT_CPU_DEVICES): ctest runs this
// with AXRT_CPU_DEVICES=4. Each device has its own id, pools, streams and
// threads; bad counts are refused naming the variable. Their topology (host
// memory between every pair) and copies between them, ordered with events
// across devices, and with the null driver's device.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

// The NUMA node CPU devices report: 0 on a host with one node, else -1.
int32_t ExpectedNumaNode() {
  std::ifstream online("/sys/devices/system/node/online");
  std::string line;
  return std::getline(online, line) && line == "0" ? 0 : -1;
}

axrt_device_peer_info_t QueryPeer(axrt_device_t device, axrt_device_t peer) {
  axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_device_query_peer(device, peer, &info));
  return info;
}

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

uint64_t Copies(axrt_device_t device) {
  axrt_stream_statistics_t stats = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(device, &stats));
  return stats.copies;
}

// `size` bytes that differ from one call to the next and from zero.
std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<unsigned char>((i * 131 + seed) % 251 + 1);
  }
  return bytes;
}

// Holds `stream` back for a while: work queued behind this runs late, so a
// reader on another stream that did not wait would see the old bytes.
axrt_status_t Dawdle(void*, axrt_status_t) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return nullptr;
}

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
  // A stream of cpu:1 copies to the host from its own buffers only; copies
  // between devices are axrt_stream_copy_buffer's (the peer copy cases
  // below).
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

TEST_CASE("four CPU devices reach each other's memory as host memory", "[multi][topology]") {
  Instance in;
  const int32_t numa = ExpectedNumaNode();
  for (uint32_t i = 0; i < kDevices; ++i) {
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_CALL_OK(axrt_device_query_properties(in.devices[i], &p));
    CHECK(p.numa_node == numa);
    // A caller whose struct stops before numa_node (an older header) gets
    // nothing written there.
    p.numa_node = 77;
    p.struct_size = offsetof(axrt_device_properties_t, numa_node);
    REQUIRE_CALL_OK(axrt_device_query_properties(in.devices[i], &p));
    CHECK(p.numa_node == 77);
    CHECK(std::string(p.id) == "cpu:" + std::to_string(i));
    for (uint32_t j = 0; j < kDevices; ++j) {
      INFO("cpu:" << i << " -> cpu:" << j);
      const axrt_device_peer_info_t info = QueryPeer(in.devices[i], in.devices[j]);
      CHECK(info.struct_size == sizeof(axrt_device_peer_info_t));
      CHECK(info.direct_access);
      CHECK(info.native_atomics);
      CHECK(info.link_count == 0);
      CHECK(info.performance_rank == 0);
      CHECK(info.link == (i == j ? AXRT_DEVICE_LINK_SELF : AXRT_DEVICE_LINK_HOST_MEMORY));
      CHECK(std::string(axrt_device_link_name(info.link)) == (i == j ? "self" : "host-memory"));
    }
  }
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_NONE)) == "none");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_PCIE)) == "pcie");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_NVLINK)) == "nvlink");
  CHECK(std::string(axrt_device_link_name(99)) == "unknown");
  // A struct from an older header that ends before `link` gets the two
  // booleans only.
  axrt_device_peer_info_t short_info = AXRT_DEVICE_PEER_INFO_INIT;
  short_info.link = 1234;
  short_info.struct_size = offsetof(axrt_device_peer_info_t, link);
  REQUIRE_CALL_OK(axrt_device_query_peer(in.devices[0], in.devices[1], &short_info));
  CHECK(short_info.direct_access);
  CHECK(short_info.link == 1234);
}

TEST_CASE("peer copies between CPU devices follow the events they wait for", "[multi][peer]") {
  Instance in;
  // cpu:1 writes, cpu:2's stream copies cpu:1's buffer into cpu:3's, and
  // cpu:3 reads the result back: each step waits for the one before with an
  // event recorded on another device.
  axrt_stream_t writer = NewStream(in.devices[1]);
  axrt_stream_t copier = NewStream(in.devices[2]);
  axrt_stream_t reader = NewStream(in.devices[3]);
  axrt_event_t written = NewEvent(in.devices[1]);
  axrt_event_t copied = NewEvent(in.devices[2]);
  const uint64_t copies_before = Copies(in.devices[2]);
  unsigned seed = 1;
  for (const size_t size : {size_t{0}, size_t{1}, size_t{4099}, size_t{(5u << 20) + 3}}) {
    INFO("size " << size);
    constexpr size_t kOffset = 5;  // away from the allocations' start
    axrt_buffer_t from = NewBuffer(in.devices[1], size + kOffset);
    axrt_buffer_t to = NewBuffer(in.devices[3], size + 2 * kOffset);
    const std::vector<unsigned char> old_bytes(size + 2 * kOffset, 0xEE);
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(reader, old_bytes.data(), to, 0, old_bytes.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(reader));
    // One byte more than copied: the empty vector has no data pointer.
    const std::vector<unsigned char> data = Pattern(size + 1, seed++);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(writer, Dawdle, nullptr));
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(writer, data.data(), from, kOffset, size));
    REQUIRE_CALL_OK(axrt_stream_record_event(writer, written));
    REQUIRE_CALL_OK(axrt_stream_wait_event(copier, written));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(copier, from, kOffset, to, 2 * kOffset, size));
    REQUIRE_CALL_OK(axrt_stream_record_event(copier, copied));
    REQUIRE_CALL_OK(axrt_stream_wait_event(reader, copied));
    std::vector<unsigned char> back(size + 2 * kOffset, 0);
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(reader, to, 0, back.data(), back.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(reader));
    CHECK(std::equal(back.begin(), back.begin() + 2 * kOffset, old_bytes.begin()));
    CHECK(std::equal(back.begin() + 2 * kOffset, back.end(), data.begin()));
    axrt_buffer_release(from);
    axrt_buffer_release(to);
  }
  // Peer copies count as copies of the copying stream's device; the empty
  // one does nothing and is not counted.
  CHECK(Copies(in.devices[2]) == copies_before + 3);
  axrt_event_release(copied);
  axrt_event_release(written);
  axrt_stream_release(reader);
  axrt_stream_release(copier);
  axrt_stream_release(writer);
}

TEST_CASE("a 2-D copy between CPU devices keeps rows and pitches", "[multi][peer]") {
  Instance in;
  constexpr uint64_t kWidth = 7, kHeight = 5, kSrcPitch = 16, kDstPitch = 11;
  axrt_buffer_t from = NewBuffer(in.devices[0], kSrcPitch * kHeight);
  axrt_buffer_t to = NewBuffer(in.devices[1], kDstPitch * kHeight + 3);
  axrt_stream_t stream = NewStream(in.devices[3]);  // neither buffer's device
  const std::vector<unsigned char> source = Pattern(kSrcPitch * kHeight, 9);
  std::vector<unsigned char> target(kDstPitch * kHeight + 3, 0);
  axrt_stream_t on_from = NewStream(in.devices[0]);
  axrt_stream_t on_to = NewStream(in.devices[1]);
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(on_from, source.data(), from, 0, source.size()));
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(on_to, target.data(), to, 0, target.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(on_from));
  REQUIRE_CALL_OK(axrt_stream_synchronize(on_to));
  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  copy.src.buffer = from;
  copy.src.pitch = kSrcPitch;
  copy.src.offset = 1;
  copy.dst.buffer = to;
  copy.dst.pitch = kDstPitch;
  copy.dst.offset = 3;
  copy.width = kWidth;
  copy.height = kHeight - 1;
  REQUIRE_CALL_OK(axrt_stream_copy_2d(stream, &copy));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  std::vector<unsigned char> back(target.size());
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(on_to, to, 0, back.data(), back.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(on_to));
  std::vector<unsigned char> expected = target;
  for (uint64_t row = 0; row + 1 < kHeight; ++row) {
    std::memcpy(&expected[3 + row * kDstPitch], &source[1 + row * kSrcPitch], kWidth);
  }
  CHECK(back == expected);
  // With host memory on one side, the buffer must be the stream's own (or
  // host-pinned), as before.
  copy.src.buffer = nullptr;
  copy.src.host_pointer = back.data();
  REQUIRE_CALL_FAILS(axrt_stream_copy_2d(stream, &copy), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "cpu:1", "cannot reach");
  axrt_stream_release(on_to);
  axrt_stream_release(on_from);
  axrt_stream_release(stream);
  axrt_buffer_release(to);
  axrt_buffer_release(from);
}

TEST_CASE("a copy between buffers of two instances is refused", "[multi][peer]") {
  Instance first;
  Instance second;
  axrt_buffer_t mine = NewBuffer(first.devices[0], 64);
  axrt_buffer_t theirs = NewBuffer(second.devices[1], 64);
  axrt_stream_t stream = NewStream(first.devices[1]);
  const uint64_t copies_before = Copies(first.devices[1]);
  REQUIRE_CALL_FAILS(axrt_stream_copy_buffer(stream, theirs, 0, mine, 0, 64),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "`src`", "another instance");
  REQUIRE_CALL_FAILS(axrt_stream_copy_buffer(stream, mine, 0, theirs, 0, 64),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "`dst`", "another instance");
  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  copy.src.buffer = mine;
  copy.dst.buffer = theirs;
  copy.width = 8;
  copy.height = 1;
  REQUIRE_CALL_FAILS(axrt_stream_copy_2d(stream, &copy), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "another instance");
  // Nor do devices of two instances have a topology.
  axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
  REQUIRE_CALL_FAILS(axrt_device_query_peer(first.devices[0], second.devices[0], &info),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "another instance");
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(Copies(first.devices[1]) == copies_before);
  axrt_stream_release(stream);
  axrt_buffer_release(theirs);
  axrt_buffer_release(mine);
}

TEST_CASE("the null driver's device and CPU devices reach each other through host memory",
          "[multi][peer]") {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu,null";
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
  axrt_device_t cpu0 = nullptr, cpu1 = nullptr, null0 = nullptr;
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &cpu0));
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:1", &cpu1));
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "null:0", &null0));
  for (const auto& [a, b] : {std::pair{cpu0, null0}, std::pair{null0, cpu1}}) {
    const axrt_device_peer_info_t info = QueryPeer(a, b);
    CHECK(info.link == AXRT_DEVICE_LINK_HOST_MEMORY);
    CHECK(info.direct_access);
    CHECK(info.native_atomics);
  }
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  REQUIRE_CALL_OK(axrt_device_query_properties(null0, &p));
  CHECK(p.numa_node == -1);  // the null driver does not say

  const std::vector<unsigned char> data = Pattern(3000, 4);
  axrt_buffer_t on_null = NewBuffer(null0, data.size());
  axrt_buffer_t on_cpu0 = NewBuffer(cpu0, data.size());
  axrt_buffer_t on_cpu1 = NewBuffer(cpu1, data.size());
  axrt_stream_t null_stream = NewStream(null0);
  axrt_stream_t cpu_stream = NewStream(cpu0);
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(null_stream, data.data(), on_null, 0, data.size()));
  // A CPU stream reads the null device's memory through its host pointer...
  REQUIRE_CALL_OK(axrt_stream_copy_buffer(cpu_stream, on_null, 0, on_cpu0, 0, data.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(cpu_stream));
  // ...and the null device's stream copies between two CPU devices, host
  // memory on both sides, which neither of its buffers is.
  REQUIRE_CALL_OK(axrt_stream_copy_buffer(null_stream, on_cpu0, 0, on_cpu1, 0, data.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(null_stream));
  std::vector<unsigned char> back(data.size());
  axrt_stream_t cpu1_stream = NewStream(cpu1);
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(cpu1_stream, on_cpu1, 0, back.data(), back.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(cpu1_stream));
  CHECK(back == data);
  // A failed stream copies nothing more, host memory on both sides included.
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(
      null_stream,
      [](void*, axrt_status_t) {
        return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "stopped on purpose");
      },
      nullptr));
  const std::vector<unsigned char> other = Pattern(data.size(), 8);
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(cpu_stream, other.data(), on_cpu0, 0, other.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(cpu_stream));
  REQUIRE_CALL_OK(axrt_stream_copy_buffer(null_stream, on_cpu0, 0, on_cpu1, 0, data.size()));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(null_stream), AXRT_STATUS_CODE_ABORTED,
                     "stopped on purpose");
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(cpu1_stream, on_cpu1, 0, back.data(), back.size()));
  REQUIRE_CALL_OK(axrt_stream_synchronize(cpu1_stream));
  CHECK(back == data);
  axrt_stream_release(cpu1_stream);
  axrt_stream_release(cpu_stream);
  axrt_stream_release(null_stream);
  axrt_buffer_release(on_cpu1);
  axrt_buffer_release(on_cpu0);
  axrt_buffer_release(on_null);
  axrt_device_release(null0);
  axrt_device_release(cpu1);
  axrt_device_release(cpu0);
  axrt_instance_release(instance);
}
