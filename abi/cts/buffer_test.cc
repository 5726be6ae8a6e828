// Buffers: allocation, alignment, views, info, device and host mapping
// (memory.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

constexpr axrt_memory_type_t kMemoryTypes[] = {AXRT_MEMORY_TYPE_DEVICE_LOCAL,
                                               AXRT_MEMORY_TYPE_HOST_PINNED};

const char* MemoryTypeName(axrt_memory_type_t type) {
  return type == AXRT_MEMORY_TYPE_HOST_PINNED ? "host-pinned" : "device-local";
}

uint64_t AddressOf(void* pointer) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer));
}

TEST_CASE_METHOD(DeviceTest, "buffer: allocate sizes from 1 byte to 64 MiB",
                 "[cts][buffer]") {
  const uint64_t sizes[] = {1,        3,          255,         256,
                            257,      4095,       4096,        4097,
                            65537,    1ull << 20, (16ull << 20) + 7,
                            64ull << 20};
  const bool device_local_visible =
      (properties().flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY) != 0;
  for (axrt_memory_type_t type : kMemoryTypes) {
    for (uint64_t size : sizes) {
      INFO(MemoryTypeName(type) << " buffer of " << size << " bytes");
      Buffer buffer = NewBuffer(size, type);
      axrt_buffer_info_t info = Info(buffer.get());
      CHECK(info.struct_size == sizeof(info));
      CHECK(info.size == size);
      CHECK(info.offset == 0);
      CHECK(info.allocation_size >= size);
      CHECK(info.memory_type == type);
      CHECK(IsPowerOfTwo(info.alignment));
      CHECK(info.alignment >= properties().buffer_alignment);
      CHECK(info.device_address % properties().buffer_alignment == 0);
      CHECK(!info.deallocated);
      CHECK(info.host_visible ==
            (type == AXRT_MEMORY_TYPE_HOST_PINNED || device_local_visible));

      // The whole range holds data: both ends round-trip.
      uint64_t edge = std::min<uint64_t>(size, 4096);
      std::vector<uint8_t> head = PatternBytes(edge, 1);
      std::vector<uint8_t> tail = PatternBytes(edge, 2);
      Write(buffer.get(), 0, head);
      Write(buffer.get(), size - edge, tail);
      if (size >= 2 * edge) CHECK(Read(buffer.get(), 0, edge) == head);
      CHECK(Read(buffer.get(), size - edge, edge) == tail);

      if (info.host_visible) {
        void* host = nullptr;
        REQUIRE_OK(axrt_buffer_map(buffer.get(), &host));
        REQUIRE(host != nullptr);
        CHECK(AddressOf(host) % properties().buffer_alignment == 0);
        CHECK(std::memcmp(static_cast<uint8_t*>(host) + size - edge,
                          tail.data(), edge) == 0);
      }
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: alignments up to max_buffer_alignment",
                 "[cts][buffer][alignment]") {
  const uint64_t base = properties().buffer_alignment;
  const uint64_t max = properties().max_buffer_alignment;
  for (axrt_memory_type_t type : kMemoryTypes) {
    for (uint64_t alignment = 1; alignment != 0 && alignment <= max;
         alignment <<= 1) {
      INFO(MemoryTypeName(type) << " buffer aligned to " << alignment);
      const uint64_t expected = std::max(alignment, base);
      // Several at once, so that a lucky first block proves nothing.
      std::vector<Buffer> buffers;
      for (uint64_t size : {1ull, 100ull, 5000ull}) {
        buffers.push_back(NewBuffer(size, type, alignment));
        axrt_buffer_info_t info = Info(buffers.back().get());
        CHECK(IsPowerOfTwo(info.alignment));
        CHECK(info.alignment >= expected);
        CHECK(info.device_address % expected == 0);
        if (info.host_visible) {
          void* host = nullptr;
          REQUIRE_OK(axrt_buffer_map(buffers.back().get(), &host));
          CHECK(AddressOf(host) % expected == 0);
        }
      }
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: size 0 is INVALID_ARGUMENT",
                 "[cts][buffer]") {
  for (axrt_memory_type_t type : kMemoryTypes) {
    axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
    options.memory_type = type;
    axrt_buffer_t sentinel = reinterpret_cast<axrt_buffer_t>(0x1);
    axrt_buffer_t buffer = sentinel;
    CHECK_STATUS(axrt_buffer_allocate(device(), 0, &options, &buffer),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "size");
    CHECK(buffer == sentinel);
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: bad alignments are INVALID_ARGUMENT",
                 "[cts][buffer][alignment]") {
  const uint64_t max = properties().max_buffer_alignment;
  std::vector<uint64_t> bad = {3, 6, 384, 4097, (1ull << 63) + 1, UINT64_MAX};
  if (max <= (1ull << 62)) bad.push_back(max * 2);
  for (axrt_memory_type_t type : kMemoryTypes) {
    for (uint64_t alignment : bad) {
      INFO(MemoryTypeName(type) << " alignment " << alignment);
      axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
      options.memory_type = type;
      options.alignment = alignment;
      axrt_buffer_t buffer = nullptr;
      CHECK_STATUS(axrt_buffer_allocate(device(), 64, &options, &buffer),
                   AXRT_STATUS_CODE_INVALID_ARGUMENT, "alignment");
      CHECK(buffer == nullptr);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: unknown memory types are "
                 "INVALID_ARGUMENT", "[cts][buffer]") {
  for (axrt_memory_type_t type : {0u, 3u, 77u, 0xffffffffu}) {
    INFO("memory type " << type);
    axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
    options.memory_type = type;
    axrt_buffer_t buffer = nullptr;
    CHECK_STATUS(axrt_buffer_allocate(device(), 64, &options, &buffer),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "memory_type");
    CHECK(buffer == nullptr);
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: more than the device has is "
                 "RESOURCE_EXHAUSTED", "[cts][buffer]") {
  const uint64_t total = properties().total_memory;
  for (uint64_t size : {total + (1ull << 30), 1ull << 62}) {
    INFO("size " << size);
    axrt_buffer_t buffer = nullptr;
    CHECK_STATUS(axrt_buffer_allocate(device(), size, nullptr, &buffer),
                 AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "");
    CHECK(buffer == nullptr);
  }
  // The device is still usable afterwards.
  Buffer small = NewBuffer(64);
  std::vector<uint8_t> bytes = PatternBytes(64, 3);
  Write(small.get(), 0, bytes);
  CHECK(Read(small.get(), 0, 64) == bytes);
}

TEST_CASE_METHOD(DeviceTest, "buffer: NULL options take the defaults",
                 "[cts][buffer]") {
  Buffer buffer;
  REQUIRE_OK(axrt_buffer_allocate(device(), 1000, nullptr, Out(buffer)));
  axrt_buffer_info_t info = Info(buffer.get());
  CHECK(info.size == 1000);
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  CHECK(info.alignment >= properties().buffer_alignment);
}

TEST_CASE_METHOD(DeviceTest, "buffer: views share their buffer's bytes",
                 "[cts][buffer][view]") {
  for (axrt_memory_type_t type : kMemoryTypes) {
    INFO(MemoryTypeName(type));
    constexpr uint64_t kSize = 1024;
    Buffer buffer = NewBuffer(kSize, type);
    axrt_buffer_info_t parent = Info(buffer.get());
    std::vector<uint8_t> bytes = PatternBytes(kSize, 11);
    Write(buffer.get(), 0, bytes);

    Buffer view = NewView(buffer.get(), 100, 200);
    axrt_buffer_info_t info = Info(view.get());
    CHECK(info.size == 200);
    CHECK(info.offset == 100);
    CHECK(info.allocation_size == parent.allocation_size);
    CHECK(info.memory_type == type);
    CHECK(info.host_visible == parent.host_visible);
    CHECK(info.device_address == parent.device_address + 100);
    REQUIRE(IsPowerOfTwo(info.alignment));
    // 100 = 4 * 25: the view start is aligned to 4 and no more.
    CHECK(info.alignment <= 4);
    CHECK(info.device_address % info.alignment == 0);
    CHECK(Read(view.get(), 0, 200) ==
          std::vector<uint8_t>(bytes.begin() + 100, bytes.begin() + 300));

    // A view of a view adds up the offsets.
    Buffer nested = NewView(view.get(), 50, 100);
    axrt_buffer_info_t nested_info = Info(nested.get());
    CHECK(nested_info.size == 100);
    CHECK(nested_info.offset == 150);
    CHECK(nested_info.allocation_size == parent.allocation_size);
    CHECK(nested_info.device_address == parent.device_address + 150);
    CHECK(nested_info.device_address % nested_info.alignment == 0);
    CHECK(Read(nested.get(), 0, 100) ==
          std::vector<uint8_t>(bytes.begin() + 150, bytes.begin() + 250));

    // Writes through a view land in the buffer.
    std::vector<uint8_t> patch = PatternBytes(100, 12);
    Write(nested.get(), 0, patch);
    std::copy(patch.begin(), patch.end(), bytes.begin() + 150);
    CHECK(Read(buffer.get(), 0, kSize) == bytes);

    if (parent.host_visible) {
      void* base = nullptr;
      void* nested_host = nullptr;
      REQUIRE_OK(axrt_buffer_map(buffer.get(), &base));
      REQUIRE_OK(axrt_buffer_map(nested.get(), &nested_host));
      CHECK(static_cast<uint8_t*>(nested_host) ==
            static_cast<uint8_t*>(base) + 150);
    }

    // A view of the whole buffer, and a one-byte view at the very end.
    Buffer whole = NewView(buffer.get(), 0, kSize);
    CHECK(Info(whole.get()).size == kSize);
    CHECK(Read(whole.get(), 0, kSize) == bytes);
    Buffer last = NewView(buffer.get(), kSize - 1, 1);
    CHECK(Read(last.get(), 0, 1) == std::vector<uint8_t>{bytes.back()});
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: views out of range are OUT_OF_RANGE",
                 "[cts][buffer][view]") {
  constexpr uint64_t kSize = 1024;
  Buffer buffer = NewBuffer(kSize);
  Buffer view = NewView(buffer.get(), 256, 256);
  struct Case {
    axrt_buffer_t of;
    uint64_t offset;
    uint64_t length;
  };
  const Case cases[] = {
      {buffer.get(), 1000, 100},
      {buffer.get(), 0, kSize + 1},
      {buffer.get(), kSize, 1},
      {buffer.get(), UINT64_MAX, 1},
      {buffer.get(), 1, UINT64_MAX},
      {buffer.get(), UINT64_MAX, UINT64_MAX},
      {buffer.get(), 512, UINT64_MAX - 100},
      {buffer.get(), UINT64_MAX - 100, 512},
      // Inside the allocation but outside the view it is cut from.
      {view.get(), 200, 100},
      {view.get(), 0, 257},
      {view.get(), UINT64_MAX - 255, 256},
  };
  for (const Case& c : cases) {
    INFO("offset " << c.offset << " length " << c.length);
    axrt_buffer_t sentinel = reinterpret_cast<axrt_buffer_t>(0x1);
    axrt_buffer_t out = sentinel;
    CHECK_STATUS(axrt_buffer_create_view(c.of, c.offset, c.length, &out),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    CHECK(out == sentinel);
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: a view keeps its allocation alive",
                 "[cts][buffer][view][lifetime]") {
  constexpr uint64_t kSize = 4096;
  std::vector<uint8_t> bytes = PatternBytes(kSize, 21);
  Buffer buffer = NewBuffer(kSize);
  Write(buffer.get(), 0, bytes);
  Buffer view = NewView(buffer.get(), 1024, 2048);
  Buffer nested = NewView(view.get(), 1024, 512);
  buffer.reset();
  view.reset();
  axrt_buffer_info_t info = Info(nested.get());
  CHECK(info.offset == 2048);
  CHECK(info.size == 512);
  CHECK(Read(nested.get(), 0, 512) ==
        std::vector<uint8_t>(bytes.begin() + 2048, bytes.begin() + 2560));
}

TEST_CASE_METHOD(DeviceTest, "buffer: get_device", "[cts][buffer]") {
  for (axrt_memory_type_t type : kMemoryTypes) {
    Buffer buffer = NewBuffer(64, type);
    Buffer view = NewView(buffer.get(), 32, 32);
    for (axrt_buffer_t b : {buffer.get(), view.get()}) {
      Device owner;
      REQUIRE_OK(axrt_buffer_get_device(b, Out(owner)));
      REQUIRE(owner != nullptr);
      axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
      REQUIRE_OK(axrt_device_query_properties(owner.get(), &p));
      CHECK(std::string(p.id) == properties().id);
      // The reference is the caller's: the device works after the buffer
      // is gone.
      Stream stream;
      REQUIRE_OK(axrt_stream_create(owner.get(), nullptr, Out(stream)));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "buffer: host mapping", "[cts][buffer][map]") {
  for (axrt_memory_type_t type : kMemoryTypes) {
    INFO(MemoryTypeName(type));
    if (type == AXRT_MEMORY_TYPE_DEVICE_LOCAL &&
        !Supports(Feature::kHostVisibleDeviceMemory)) {
      // Where device memory is not host-visible, mapping it is refused.
      Buffer buffer = NewBuffer(64, type);
      CHECK(!Info(buffer.get()).host_visible);
      void* host = reinterpret_cast<void*>(0x1);
      CHECK_STATUS(axrt_buffer_map(buffer.get(), &host),
                   AXRT_STATUS_CODE_FAILED_PRECONDITION, "");
      CHECK(host == reinterpret_cast<void*>(0x1));
      RequireFeature(Feature::kHostVisibleDeviceMemory);
      continue;
    }
    constexpr uint64_t kSize = 8192;
    Buffer buffer = NewBuffer(kSize, type);
    void* host = nullptr;
    REQUIRE_OK(axrt_buffer_map(buffer.get(), &host));
    REQUIRE(host != nullptr);
    void* again = nullptr;
    REQUIRE_OK(axrt_buffer_map(buffer.get(), &again));
    CHECK(again == host);

    // Host writes are seen by device copies, and device copies by the host.
    std::vector<uint8_t> bytes = PatternBytes(kSize, 31);
    std::memcpy(host, bytes.data(), kSize);
    CHECK(Read(buffer.get(), 0, kSize) == bytes);
    std::vector<uint8_t> other = PatternBytes(kSize, 32);
    Write(buffer.get(), 0, other);
    CHECK(std::memcmp(host, other.data(), kSize) == 0);
  }
}

}  // namespace
}  // namespace axrt_cts
