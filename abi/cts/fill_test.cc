// Stream fills (stream.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

constexpr axrt_memory_type_t kMemoryTypes[] = {AXRT_MEMORY_TYPE_DEVICE_LOCAL,
                                               AXRT_MEMORY_TYPE_HOST_PINNED};

TEST_CASE_METHOD(DeviceTest, "fill: 1, 2, 4 and 8-byte patterns",
                 "[cts][fill]") {
  constexpr uint64_t kSize = 4096;
  const uint8_t pattern[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  Stream stream = NewStream();
  for (axrt_memory_type_t type : kMemoryTypes) {
    for (size_t pattern_size : {1u, 2u, 4u, 8u}) {
      INFO("memory type " << type << " pattern size " << pattern_size);
      std::vector<uint8_t> initial = PatternBytes(kSize, 61);
      Buffer buffer = NewBuffer(kSize, type);
      Write(buffer.get(), 0, initial);
      const uint64_t offset = 8 * pattern_size;
      const uint64_t length = 100 * pattern_size;
      std::vector<uint8_t> local(pattern, pattern + pattern_size);
      REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), buffer.get(), offset,
                                         length, local.data(), pattern_size));
      // The pattern is copied at the call.
      std::fill(local.begin(), local.end(), 0);
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));

      std::vector<uint8_t> expected = initial;
      for (uint64_t i = 0; i < length; ++i) {
        expected[offset + i] = pattern[i % pattern_size];
      }
      CHECK(Read(buffer.get(), 0, kSize) == expected);

      // The whole buffer.
      REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kSize,
                                         pattern, pattern_size));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      for (uint64_t i = 0; i < kSize; ++i) expected[i] = pattern[i % pattern_size];
      CHECK(Read(buffer.get(), 0, kSize) == expected);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "fill: through a view", "[cts][fill]") {
  constexpr uint64_t kSize = 1024;
  Stream stream = NewStream();
  std::vector<uint8_t> initial = PatternBytes(kSize, 62);
  Buffer buffer = NewBuffer(kSize);
  Write(buffer.get(), 0, initial);
  Buffer view = NewView(buffer.get(), 256, 512);
  const uint32_t pattern = 0xDEADBEEF;
  REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), view.get(), 8, 64, &pattern,
                                     sizeof(pattern)));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  std::vector<uint8_t> expected = initial;
  for (uint64_t i = 0; i < 64; i += 4) {
    std::memcpy(&expected[256 + 8 + i], &pattern, 4);
  }
  CHECK(Read(buffer.get(), 0, kSize) == expected);

  // The view's end bounds the fill.
  CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), view.get(), 0, 516,
                                       &pattern, sizeof(pattern)),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "");
}

TEST_CASE_METHOD(DeviceTest, "fill: misaligned offset or length is "
                 "INVALID_ARGUMENT", "[cts][fill]") {
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(1024);
  std::vector<uint8_t> initial = PatternBytes(1024, 63);
  Write(buffer.get(), 0, initial);
  const uint64_t pattern = 0x0123456789ABCDEFull;
  for (size_t pattern_size : {2u, 4u, 8u}) {
    INFO("pattern size " << pattern_size);
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(), 1,
                                         pattern_size * 4, &pattern,
                                         pattern_size),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "offset");
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(),
                                         pattern_size, pattern_size * 4 + 1,
                                         &pattern, pattern_size),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "length");
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(),
                                         pattern_size / 2 + pattern_size,
                                         pattern_size, &pattern, pattern_size),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "offset");
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(buffer.get(), 0, 1024) == initial);
}

TEST_CASE_METHOD(DeviceTest, "fill: bad pattern sizes are INVALID_ARGUMENT",
                 "[cts][fill]") {
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(1024);
  const uint8_t pattern[16] = {};
  for (size_t pattern_size : {0u, 3u, 5u, 6u, 7u, 16u, 64u}) {
    INFO("pattern size " << pattern_size);
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, 960,
                                         pattern, pattern_size),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "pattern_size");
  }
  CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, 64,
                                       nullptr, 4),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "pattern");
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

TEST_CASE_METHOD(DeviceTest, "fill: out of range is OUT_OF_RANGE",
                 "[cts][fill]") {
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(1024);
  std::vector<uint8_t> initial = PatternBytes(1024, 64);
  Write(buffer.get(), 0, initial);
  const uint32_t pattern = 7;
  struct Range {
    uint64_t offset;
    uint64_t length;
  };
  const Range bad[] = {{0, 1028},
                       {1024, 4},
                       {1020, 8},
                       {UINT64_MAX - 3, 8},
                       {4, UINT64_MAX - 3},
                       {1ull << 62, 1ull << 62}};
  for (const Range& r : bad) {
    INFO("offset " << r.offset << " length " << r.length);
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), buffer.get(), r.offset,
                                         r.length, &pattern, sizeof(pattern)),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(buffer.get(), 0, 1024) == initial);
}

TEST_CASE_METHOD(DeviceTest, "fill: 64 MiB", "[cts][fill][large]") {
  constexpr uint64_t kSize = 64ull << 20;
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(kSize);
  const uint8_t pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kSize,
                                     pattern, sizeof(pattern)));
  std::vector<uint8_t> back(kSize);
  REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 0,
                                      back.data(), kSize));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  // Compared in bulk (memcmp) against the pattern repeated: the sanitizer
  // runs check 64 MiB byte by byte slowly.
  std::vector<uint8_t> expected(kSize);
  std::memcpy(expected.data(), pattern, sizeof(pattern));
  for (uint64_t filled = sizeof(pattern); filled < kSize; filled *= 2) {
    std::memcpy(expected.data() + filled, expected.data(), std::min(filled, kSize - filled));
  }
  CHECK(std::memcmp(back.data(), expected.data(), kSize) == 0);
}

}  // namespace
}  // namespace axrt_cts
