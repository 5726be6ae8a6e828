// Device properties, device synchronisation and the pooling allocator
// (device.h).
#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

constexpr uint32_t kKnownDeviceFlags = AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY |
                                       AXRT_DEVICE_FLAG_EVENT_TIMING |
                                       AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION;

bool Terminated(const char* text, size_t capacity) {
  return strnlen(text, capacity) < capacity;
}

TEST_CASE_METHOD(DeviceTest, "device: properties describe the device",
                 "[cts][device]") {
  const axrt_device_properties_t& p = properties();
  CHECK(p.struct_size == sizeof(axrt_device_properties_t));
  REQUIRE(Terminated(p.id, sizeof(p.id)));
  REQUIRE(Terminated(p.driver, sizeof(p.driver)));
  REQUIRE(Terminated(p.name, sizeof(p.name)));
  std::string id = DeviceUnderTestId();
  CHECK(std::string(p.id) == id);
  CHECK(std::string(p.driver) == driver());
  CHECK(std::string(p.name).size() > 0);
  CHECK(std::to_string(p.ordinal) == id.substr(id.find(':') + 1));

  if (driver() == "cpu") {
    CHECK(p.type == AXRT_DEVICE_TYPE_CPU);
    CHECK(p.compute_capability_major == 0);
    CHECK(p.compute_capability_minor == 0);
  } else if (driver() == "cuda") {
    CHECK(p.type == AXRT_DEVICE_TYPE_CUDA);
    CHECK(p.compute_capability_major >= 3);
  }
  CHECK(p.type != AXRT_DEVICE_TYPE_UNKNOWN);
  CHECK((p.flags & ~kKnownDeviceFlags) == 0);

  CHECK(p.compute_units >= 1);
  CHECK(p.total_memory > 0);
  CHECK(IsPowerOfTwo(p.buffer_alignment));
  CHECK(p.buffer_alignment >= 256);
  CHECK(IsPowerOfTwo(p.max_buffer_alignment));
  CHECK(p.max_buffer_alignment >= p.buffer_alignment);
  uint64_t product = 1;
  for (int i = 0; i < 3; ++i) {
    INFO("dimension " << i);
    CHECK(p.max_workgroup_size[i] >= 1);
    CHECK(p.max_workgroup_count[i] >= 1);
    product *= p.max_workgroup_size[i];
  }
  CHECK(p.max_workgroup_invocations >= 1);
  CHECK(p.max_workgroup_invocations <= product);
}

TEST_CASE_METHOD(DeviceTest, "device: properties are stable",
                 "[cts][device]") {
  axrt_device_properties_t again = AXRT_DEVICE_PROPERTIES_INIT;
  REQUIRE_OK(axrt_device_query_properties(device(), &again));
  CHECK(std::memcmp(&again, &properties(), sizeof(again)) == 0);

  // Another instance sees the same device the same way.
  Instance other = NewInstance();
  Device same;
  std::string id = DeviceUnderTestId();
  REQUIRE_OK(axrt_instance_find_device(other.get(), id.c_str(), Out(same)));
  axrt_device_properties_t from_other = AXRT_DEVICE_PROPERTIES_INIT;
  REQUIRE_OK(axrt_device_query_properties(same.get(), &from_other));
  CHECK(std::string(from_other.id) == properties().id);
  CHECK(std::string(from_other.name) == properties().name);
  CHECK(from_other.flags == properties().flags);
  CHECK(from_other.buffer_alignment == properties().buffer_alignment);
}

// A query struct from an older header: the library writes its first
// `struct_size` bytes and nothing after them.
TEST_CASE_METHOD(DeviceTest, "device: a smaller properties struct is filled "
                 "only up to its size", "[cts][device][struct_size]") {
  constexpr uint8_t kGuard = 0xA5;
  const size_t sizes[] = {
      offsetof(axrt_device_properties_t, id),
      offsetof(axrt_device_properties_t, name),
      offsetof(axrt_device_properties_t, type),
      offsetof(axrt_device_properties_t, flags) + sizeof(uint32_t),
      offsetof(axrt_device_properties_t, buffer_alignment) + 3,
      sizeof(axrt_device_properties_t) - 1,
  };
  for (size_t size : sizes) {
    INFO("struct_size " << size);
    alignas(axrt_device_properties_t) uint8_t
        storage[sizeof(axrt_device_properties_t) + 64];
    std::memset(storage, kGuard, sizeof(storage));
    axrt_device_properties_t header = AXRT_DEVICE_PROPERTIES_INIT;
    header.struct_size = size;
    std::memcpy(storage, &header, offsetof(axrt_device_properties_t, id));
    auto* truncated = reinterpret_cast<axrt_device_properties_t*>(storage);
    REQUIRE_OK(axrt_device_query_properties(device(), truncated));
    size_t untouched = 0;
    for (size_t i = size; i < sizeof(storage); ++i) {
      if (storage[i] == kGuard) ++untouched;
    }
    CHECK(untouched == sizeof(storage) - size);
    // Whole fields inside the size are filled as usual.
    if (size >= offsetof(axrt_device_properties_t, name)) {
      CHECK(std::string(truncated->id) == properties().id);
      CHECK(std::string(truncated->driver) == properties().driver);
    }
    if (size >= offsetof(axrt_device_properties_t, flags) + sizeof(uint32_t)) {
      CHECK(truncated->type == properties().type);
      CHECK(truncated->flags == properties().flags);
    }
  }
}

// A query struct from a newer header: the fields this library knows are
// filled as usual.
TEST_CASE_METHOD(DeviceTest, "device: a larger properties struct is accepted",
                 "[cts][device][struct_size]") {
  struct Newer {
    axrt_device_properties_t known;
    uint64_t future[4];
  } newer;
  std::memset(&newer, 0, sizeof(newer));
  newer.known.struct_size = sizeof(newer);
  REQUIRE_OK(axrt_device_query_properties(device(), &newer.known));
  CHECK(std::string(newer.known.id) == properties().id);
  CHECK(newer.known.flags == properties().flags);
  CHECK(newer.known.buffer_alignment == properties().buffer_alignment);
  CHECK(newer.known.max_workgroup_invocations ==
        properties().max_workgroup_invocations);
}

struct SlowWork {
  std::atomic<bool> done{false};
  static axrt_status_t Run(void* user_data, axrt_status_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    static_cast<SlowWork*>(user_data)->done.store(true);
    return nullptr;
  }
};

TEST_CASE_METHOD(DeviceTest, "device: synchronize waits for every stream",
                 "[cts][device]") {
  std::array<SlowWork, 3> work;
  std::array<Stream, 3> streams;
  for (size_t i = 0; i < streams.size(); ++i) {
    streams[i] = NewStream();
    REQUIRE_OK(axrt_stream_launch_host_func(streams[i].get(), &SlowWork::Run,
                                            &work[i]));
  }
  REQUIRE_OK(axrt_device_synchronize(device()));
  for (SlowWork& w : work) CHECK(w.done.load());
}

TEST_CASE_METHOD(DeviceTest, "device: synchronize succeeds beside a failed "
                 "stream", "[cts][device]") {
  Stream failing = NewStream();
  REQUIRE_OK(axrt_stream_launch_host_func(
      failing.get(),
      [](void*, axrt_status_t) {
        return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "cts failure");
      },
      nullptr));
  SlowWork work;
  Stream healthy = NewStream();
  REQUIRE_OK(
      axrt_stream_launch_host_func(healthy.get(), &SlowWork::Run, &work));
  REQUIRE_OK(axrt_device_synchronize(device()));
  CHECK(work.done.load());
  CHECK_STATUS(axrt_stream_synchronize(failing.get()),
               AXRT_STATUS_CODE_ABORTED, "cts failure");
}

axrt_pool_statistics_t PoolStatistics(axrt_device_t device) {
  REQUIRE_OK(axrt_device_synchronize(device));
  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  REQUIRE_OK(axrt_device_query_pool_statistics(device, &stats));
  INFO("in_use " << stats.bytes_in_use << " reserved " << stats.bytes_reserved
                 << " peak " << stats.peak_bytes_in_use);
  CHECK(stats.struct_size == sizeof(stats));
  CHECK(stats.bytes_reserved >= stats.bytes_in_use);
  CHECK(stats.peak_bytes_in_use >= stats.bytes_in_use);
  CHECK(stats.reuse_count <= stats.allocation_count);
  CHECK(stats.deallocation_count <= stats.allocation_count);
  return stats;
}

TEST_CASE_METHOD(DeviceTest, "device: pool statistics follow allocations",
                 "[cts][device][pool]") {
  constexpr uint64_t kSize = 256 * 1024;
  axrt_pool_statistics_t before = PoolStatistics(device());

  Buffer buffer = NewBuffer(kSize);
  axrt_pool_statistics_t allocated = PoolStatistics(device());
  CHECK(allocated.bytes_in_use >= before.bytes_in_use + kSize);
  CHECK(allocated.bytes_reserved >= before.bytes_reserved);
  CHECK(allocated.peak_bytes_in_use >= allocated.bytes_in_use);
  CHECK(allocated.allocation_count == before.allocation_count + 1);
  CHECK(allocated.deallocation_count == before.deallocation_count);

  // A view is not an allocation.
  Buffer view = NewView(buffer.get(), 0, 1024);
  axrt_pool_statistics_t with_view = PoolStatistics(device());
  CHECK(with_view.allocation_count == allocated.allocation_count);
  CHECK(with_view.bytes_in_use == allocated.bytes_in_use);

  // Memory goes back to the pool only when the last reference goes.
  buffer.reset();
  axrt_pool_statistics_t view_only = PoolStatistics(device());
  CHECK(view_only.bytes_in_use == allocated.bytes_in_use);
  CHECK(view_only.deallocation_count == before.deallocation_count);
  view.reset();

  axrt_pool_statistics_t released = PoolStatistics(device());
  CHECK(released.bytes_in_use == before.bytes_in_use);
  CHECK(released.deallocation_count == before.deallocation_count + 1);
  CHECK(released.peak_bytes_in_use >= allocated.bytes_in_use);
  // The block stays cached for the next allocation.
  CHECK(released.bytes_reserved == allocated.bytes_reserved);

  Buffer again = NewBuffer(kSize);
  axrt_pool_statistics_t reused = PoolStatistics(device());
  CHECK(reused.allocation_count == released.allocation_count + 1);
  CHECK(reused.reuse_count == released.reuse_count + 1);
  CHECK(reused.bytes_reserved == released.bytes_reserved);
  CHECK(reused.bytes_in_use == allocated.bytes_in_use);
}

TEST_CASE_METHOD(DeviceTest, "device: trim hands cached blocks back",
                 "[cts][device][pool]") {
  constexpr uint64_t kSize = 256 * 1024;
  REQUIRE_OK(axrt_device_trim_pool(device(), 0));
  axrt_pool_statistics_t clean = PoolStatistics(device());
  CHECK(clean.bytes_reserved == clean.bytes_in_use);

  {
    Buffer a = NewBuffer(kSize);
    Buffer b = NewBuffer(kSize);
  }
  axrt_pool_statistics_t cached = PoolStatistics(device());
  uint64_t cached_bytes = cached.bytes_reserved - cached.bytes_in_use;
  CHECK(cached.bytes_in_use == clean.bytes_in_use);
  CHECK(cached_bytes >= 2 * kSize);

  // Nothing to do when everything cached may stay.
  REQUIRE_OK(axrt_device_trim_pool(device(), cached_bytes));
  axrt_pool_statistics_t kept = PoolStatistics(device());
  CHECK(kept.trim_count == cached.trim_count);
  CHECK(kept.bytes_reserved == cached.bytes_reserved);

  REQUIRE_OK(axrt_device_trim_pool(device(), kSize));
  axrt_pool_statistics_t partly = PoolStatistics(device());
  CHECK(partly.bytes_reserved - partly.bytes_in_use <= kSize);
  CHECK(partly.trim_count > cached.trim_count);
  CHECK(partly.bytes_in_use == cached.bytes_in_use);

  REQUIRE_OK(axrt_device_trim_pool(device(), 0));
  axrt_pool_statistics_t trimmed = PoolStatistics(device());
  CHECK(trimmed.bytes_reserved == trimmed.bytes_in_use);
  CHECK(trimmed.trim_count >= partly.trim_count);
  CHECK(trimmed.allocation_count == cached.allocation_count);
}

TEST_CASE_METHOD(DeviceTest, "device: trim never touches memory in use",
                 "[cts][device][pool]") {
  constexpr uint64_t kSize = 256 * 1024;
  std::vector<uint8_t> bytes = PatternBytes(kSize, 7);
  Buffer held = NewBuffer(kSize);
  Write(held.get(), 0, bytes);
  { Buffer freed = NewBuffer(kSize); }
  axrt_pool_statistics_t before = PoolStatistics(device());

  REQUIRE_OK(axrt_device_trim_pool(device(), 0));
  axrt_pool_statistics_t after = PoolStatistics(device());
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.bytes_reserved <= before.bytes_reserved);
  CHECK(Read(held.get(), 0, kSize) == bytes);

  // A trimmed pool still serves allocations.
  Buffer fresh = NewBuffer(kSize);
  Write(fresh.get(), 0, bytes);
  CHECK(Read(fresh.get(), 0, kSize) == bytes);
  CHECK(Read(held.get(), 0, kSize) == bytes);
}

}  // namespace
}  // namespace axrt_cts
