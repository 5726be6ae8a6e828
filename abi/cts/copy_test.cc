// Stream copies: buffer to buffer, host to buffer, buffer to host, 2-D, large
// copies and in-order execution (stream.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

constexpr axrt_memory_type_t kMemoryTypes[] = {AXRT_MEMORY_TYPE_DEVICE_LOCAL,
                                               AXRT_MEMORY_TYPE_HOST_PINNED};

// Bytes of `base` with `patch` written at `offset`.
std::vector<uint8_t> Patched(std::vector<uint8_t> base, size_t offset,
                             const std::vector<uint8_t>& patch) {
  std::copy(patch.begin(), patch.end(), base.begin() + offset);
  return base;
}

std::vector<uint8_t> Slice(const std::vector<uint8_t>& bytes, size_t offset,
                           size_t length) {
  return {bytes.begin() + offset, bytes.begin() + offset + length};
}

TEST_CASE_METHOD(DeviceTest, "copy: buffer to buffer between memory types",
                 "[cts][copy]") {
  constexpr uint64_t kSize = 4096;
  Stream stream = NewStream();
  for (axrt_memory_type_t src_type : kMemoryTypes) {
    for (axrt_memory_type_t dst_type : kMemoryTypes) {
      INFO("src type " << src_type << " dst type " << dst_type);
      std::vector<uint8_t> src_bytes = PatternBytes(kSize, 1);
      std::vector<uint8_t> dst_bytes = PatternBytes(kSize, 2);
      Buffer src = NewBuffer(kSize, src_type);
      Buffer dst = NewBuffer(kSize, dst_type);
      Write(src.get(), 0, src_bytes);
      Write(dst.get(), 0, dst_bytes);
      REQUIRE_OK(axrt_stream_copy_buffer(stream.get(), src.get(), 100,
                                         dst.get(), 2000, 1000));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      CHECK(Read(dst.get(), 0, kSize) ==
            Patched(dst_bytes, 2000, Slice(src_bytes, 100, 1000)));
      CHECK(Read(src.get(), 0, kSize) == src_bytes);

      // The whole buffer, with the edges included.
      REQUIRE_OK(axrt_stream_copy_buffer(stream.get(), src.get(), 0, dst.get(),
                                         0, kSize));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      CHECK(Read(dst.get(), 0, kSize) == src_bytes);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: host to buffer and buffer to host",
                 "[cts][copy]") {
  constexpr uint64_t kSize = 10000;
  Stream stream = NewStream();
  for (axrt_memory_type_t type : kMemoryTypes) {
    INFO("memory type " << type);
    std::vector<uint8_t> initial = PatternBytes(kSize, 3);
    Buffer buffer = NewBuffer(kSize, type);
    Write(buffer.get(), 0, initial);

    std::vector<uint8_t> patch = PatternBytes(777, 4);
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), patch.data(),
                                          buffer.get(), 1234, patch.size()));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    std::vector<uint8_t> expected = Patched(initial, 1234, patch);
    CHECK(Read(buffer.get(), 0, kSize) == expected);

    // Reading a window lands exactly in the destination, nothing around it.
    std::vector<uint8_t> host(1000, 0xEE);
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 1500,
                                        host.data() + 100, 800));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    std::vector<uint8_t> want(1000, 0xEE);
    std::copy_n(expected.begin() + 1500, 800, want.begin() + 100);
    CHECK(host == want);

    // Odd sizes and offsets, one byte at the end.
    uint8_t last = 0x5A;
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), &last, buffer.get(),
                                          kSize - 1, 1));
    uint8_t back = 0;
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), kSize - 1,
                                        &back, 1));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(back == 0x5A);
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: within one allocation", "[cts][copy]") {
  constexpr uint64_t kSize = 4096;
  Stream stream = NewStream();
  std::vector<uint8_t> bytes = PatternBytes(kSize, 5);
  Buffer buffer = NewBuffer(kSize);
  Write(buffer.get(), 0, bytes);

  // Disjoint ranges of the same buffer are fine.
  REQUIRE_OK(axrt_stream_copy_buffer(stream.get(), buffer.get(), 0,
                                     buffer.get(), 2048, 1024));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  std::vector<uint8_t> expected = Patched(bytes, 2048, Slice(bytes, 0, 1024));
  CHECK(Read(buffer.get(), 0, kSize) == expected);

  // Overlapping ranges are refused, through the buffer or through views.
  CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), buffer.get(), 0,
                                       buffer.get(), 512, 1024),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "overlap");
  Buffer a = NewView(buffer.get(), 0, 2048);
  Buffer b = NewView(buffer.get(), 1024, 2048);
  CHECK_STATUS(
      axrt_stream_copy_buffer(stream.get(), a.get(), 1024, b.get(), 0, 512),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "overlap");
  // Views that touch without overlapping are fine.
  REQUIRE_OK(
      axrt_stream_copy_buffer(stream.get(), a.get(), 0, b.get(), 1024, 1024));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(buffer.get(), 0, kSize) ==
        Patched(expected, 2048, Slice(expected, 0, 1024)));
}

TEST_CASE_METHOD(DeviceTest, "copy: out-of-range copies are OUT_OF_RANGE and "
                 "enqueue nothing", "[cts][copy]") {
  constexpr uint64_t kSize = 1024;
  Stream stream = NewStream();
  std::vector<uint8_t> bytes = PatternBytes(kSize, 6);
  Buffer src = NewBuffer(kSize);
  Buffer dst = NewBuffer(kSize);
  Buffer dst_view = NewView(dst.get(), 256, 256);
  Write(src.get(), 0, bytes);
  Write(dst.get(), 0, bytes);
  std::vector<uint8_t> host(2 * kSize, 0);

  struct Range {
    uint64_t offset;
    uint64_t length;
  };
  const Range bad[] = {{0, kSize + 1},     {1, kSize},
                       {kSize, 1},         {UINT64_MAX, 1},
                       {1, UINT64_MAX},    {UINT64_MAX - 10, 20},
                       {512, UINT64_MAX - 500}};
  for (const Range& r : bad) {
    INFO("offset " << r.offset << " length " << r.length);
    uint64_t length = r.length;
    CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), src.get(), r.offset,
                                         dst.get(), 0, length),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), src.get(), 0, dst.get(),
                                         r.offset, length),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                            dst.get(), r.offset, length),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    CHECK_STATUS(axrt_stream_copy_to_host(stream.get(), src.get(), r.offset,
                                          host.data(), length),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  }
  // A view bounds copies by its own size, not by its allocation's.
  CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), src.get(), 0,
                                       dst_view.get(), 200, 100),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                          dst_view.get(), 0, 257),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "");

  // Nothing ran and the stream did not fail.
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(dst.get(), 0, kSize) == bytes);
}

// Fills a host image of `rows` rows `pitch` apart, `offset` bytes in.
struct Image {
  std::vector<uint8_t> bytes;
  uint64_t offset;
  uint64_t pitch;
};

std::vector<uint8_t> Copy2dOnHost(const Image& src, Image dst, uint64_t width,
                                  uint64_t height) {
  for (uint64_t row = 0; row < height; ++row) {
    std::memcpy(dst.bytes.data() + dst.offset + row * dst.pitch,
                src.bytes.data() + src.offset + row * src.pitch, width);
  }
  return dst.bytes;
}

TEST_CASE_METHOD(DeviceTest, "copy: 2-D copies in every direction",
                 "[cts][copy][2d]") {
  constexpr uint64_t kWidth = 100;
  constexpr uint64_t kHeight = 37;
  Stream stream = NewStream();
  const Image src_image{PatternBytes(64 + 37 * 160, 41), 64, 160};
  const Image dst_image{PatternBytes(8 + 37 * 128, 42), 8, 128};
  const std::vector<uint8_t> expected =
      Copy2dOnHost(src_image, dst_image, kWidth, kHeight);

  for (axrt_memory_type_t type : kMemoryTypes) {
    INFO("memory type " << type);
    SECTION("buffer to buffer") {
      Buffer src = NewBuffer(src_image.bytes.size(), type);
      Buffer dst = NewBuffer(dst_image.bytes.size(), type);
      Write(src.get(), 0, src_image.bytes);
      Write(dst.get(), 0, dst_image.bytes);
      axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
      copy.src = {src.get(), nullptr, src_image.offset, src_image.pitch};
      copy.dst = {dst.get(), nullptr, dst_image.offset, dst_image.pitch};
      copy.width = kWidth;
      copy.height = kHeight;
      REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      CHECK(Read(dst.get(), 0, dst_image.bytes.size()) == expected);
    }
    SECTION("host to buffer") {
      std::vector<uint8_t> host = src_image.bytes;
      Buffer dst = NewBuffer(dst_image.bytes.size(), type);
      Write(dst.get(), 0, dst_image.bytes);
      axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
      copy.src = {nullptr, host.data(), src_image.offset, src_image.pitch};
      copy.dst = {dst.get(), nullptr, dst_image.offset, dst_image.pitch};
      copy.width = kWidth;
      copy.height = kHeight;
      REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      CHECK(Read(dst.get(), 0, dst_image.bytes.size()) == expected);
    }
    SECTION("buffer to host") {
      Buffer src = NewBuffer(src_image.bytes.size(), type);
      Write(src.get(), 0, src_image.bytes);
      std::vector<uint8_t> host = dst_image.bytes;
      axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
      copy.src = {src.get(), nullptr, src_image.offset, src_image.pitch};
      copy.dst = {nullptr, host.data(), dst_image.offset, dst_image.pitch};
      copy.width = kWidth;
      copy.height = kHeight;
      REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
      REQUIRE_OK(axrt_stream_synchronize(stream.get()));
      CHECK(host == expected);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: 2-D edge cases", "[cts][copy][2d]") {
  constexpr uint64_t kSize = 1000;
  Stream stream = NewStream();
  std::vector<uint8_t> src_bytes = PatternBytes(kSize, 43);
  std::vector<uint8_t> dst_bytes = PatternBytes(kSize, 44);
  Buffer src = NewBuffer(kSize);
  Buffer dst = NewBuffer(kSize);
  Write(src.get(), 0, src_bytes);
  Write(dst.get(), 0, dst_bytes);
  auto make = [&](uint64_t src_pitch, uint64_t dst_pitch, uint64_t width,
                  uint64_t height) {
    axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
    copy.src = {src.get(), nullptr, 0, src_pitch};
    copy.dst = {dst.get(), nullptr, 0, dst_pitch};
    copy.width = width;
    copy.height = height;
    return copy;
  };

  SECTION("zero width or height copies nothing") {
    for (auto [width, height] : {std::pair<uint64_t, uint64_t>{0, 10},
                                 {10, 0},
                                 {0, 0}}) {
      INFO("width " << width << " height " << height);
      axrt_copy_2d_t copy = make(100, 100, width, height);
      REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
    }
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(Read(dst.get(), 0, kSize) == dst_bytes);
  }
  SECTION("the last row needs only its width, not a whole pitch") {
    // Rows at 0, 300, 600, 900; the last ends exactly at the end.
    axrt_copy_2d_t copy = make(300, 300, 100, 4);
    REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    std::vector<uint8_t> expected = dst_bytes;
    for (size_t row = 0; row < 4; ++row) {
      std::copy_n(src_bytes.begin() + row * 300, 100,
                  expected.begin() + row * 300);
    }
    CHECK(Read(dst.get(), 0, kSize) == expected);
  }
  SECTION("a pitch equal to the width is one contiguous block") {
    axrt_copy_2d_t copy = make(100, 100, 100, 10);
    REQUIRE_OK(axrt_stream_copy_2d(stream.get(), &copy));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(Read(dst.get(), 0, kSize) == src_bytes);
  }
  SECTION("rows outside a buffer are OUT_OF_RANGE") {
    axrt_copy_2d_t past_end = make(300, 300, 101, 4);
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &past_end),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    axrt_copy_2d_t too_tall = make(100, 200, 100, 6);
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &too_tall),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    axrt_copy_2d_t offset = make(100, 100, 100, 10);
    offset.dst.offset = 1;
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &offset),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    // offset + (height - 1) * pitch + width overflows 64 bits.
    axrt_copy_2d_t overflow = make(UINT64_MAX / 2, 100, 10, 3);
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &overflow),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    axrt_copy_2d_t huge_offset = make(100, 100, 10, 2);
    huge_offset.src.offset = UINT64_MAX - 50;
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &huge_offset),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(Read(dst.get(), 0, kSize) == dst_bytes);
  }
  SECTION("a pitch below the width is INVALID_ARGUMENT") {
    axrt_copy_2d_t copy = make(99, 100, 100, 2);
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &copy),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "pitch");
    copy = make(100, 50, 100, 2);
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &copy),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "pitch");
  }
  SECTION("each side is a buffer or host memory, and one is a buffer") {
    std::vector<uint8_t> host(kSize);
    axrt_copy_2d_t host_to_host = make(100, 100, 10, 2);
    host_to_host.src = {nullptr, host.data(), 0, 100};
    host_to_host.dst = {nullptr, host.data() + 500, 0, 100};
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &host_to_host),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "buffer");
    axrt_copy_2d_t both = make(100, 100, 10, 2);
    both.dst.host_pointer = host.data();
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &both),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "dst");
    axrt_copy_2d_t neither = make(100, 100, 10, 2);
    neither.src.buffer = nullptr;
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &neither),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "src");
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    CHECK(Read(dst.get(), 0, kSize) == dst_bytes);
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: 64 MiB copies are byte-exact",
                 "[cts][copy][large]") {
  constexpr uint64_t kSize = 64ull << 20;
  Stream stream = NewStream();
  const std::vector<uint8_t> bytes = PatternBytes(kSize, 51);
  for (axrt_memory_type_t type : kMemoryTypes) {
    INFO("memory type " << type);
    Buffer a = NewBuffer(kSize, type);
    Buffer b = NewBuffer(kSize, AXRT_MEMORY_TYPE_DEVICE_LOCAL);
    std::vector<uint8_t> back(kSize, 0);
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), bytes.data(), a.get(),
                                          0, kSize));
    REQUIRE_OK(axrt_stream_copy_buffer(stream.get(), a.get(), 0, b.get(), 0,
                                       kSize));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), b.get(), 0, back.data(),
                                        kSize));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    // One comparison, so a mismatch does not print 64 Mi lines; memcmp, so
    // that the sanitizer runs check 64 MiB in bulk rather than byte by byte.
    if (std::memcmp(bytes.data(), back.data(), kSize) != 0) {
      auto mismatch = std::mismatch(bytes.begin(), bytes.end(), back.begin());
      FAIL_CHECK("the copy differs, first at byte " << (mismatch.first - bytes.begin()));
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: a stream runs its operations in order",
                 "[cts][copy][order]") {
  // Each round overwrites the whole source and then copies one chunk of it
  // out; a copy that ran early or late would see another round's value.
  constexpr uint64_t kChunk = 256;
  constexpr uint64_t kChunks = 16;
  constexpr int kRounds = 256;
  Stream stream = NewStream();
  Buffer source = NewBuffer(kChunk * kChunks);
  Buffer target = NewBuffer(kChunk * kChunks);
  std::vector<std::vector<uint8_t>> values(kRounds);
  std::vector<std::vector<uint8_t>> snapshots(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    values[round].assign(kChunk * kChunks, static_cast<uint8_t>(round));
    snapshots[round].assign(16, 0);
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), values[round].data(),
                                          source.get(), 0,
                                          values[round].size()));
    uint64_t chunk = round % kChunks;
    REQUIRE_OK(axrt_stream_copy_buffer(stream.get(), source.get(),
                                       chunk * kChunk, target.get(),
                                       chunk * kChunk, kChunk));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), source.get(),
                                        kChunk * kChunks - 16,
                                        snapshots[round].data(), 16));
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    CHECK(snapshots[round] ==
          std::vector<uint8_t>(16, static_cast<uint8_t>(round)));
  }
  std::vector<uint8_t> result = Read(target.get(), 0, kChunk * kChunks);
  for (uint64_t chunk = 0; chunk < kChunks; ++chunk) {
    INFO("chunk " << chunk);
    uint8_t last_round = static_cast<uint8_t>(kRounds - kChunks + chunk);
    CHECK(std::count(result.begin() + chunk * kChunk,
                     result.begin() + (chunk + 1) * kChunk,
                     last_round) == static_cast<long>(kChunk));
  }
}

TEST_CASE_METHOD(DeviceTest, "copy: host memory is read when the copy runs",
                 "[cts][copy][order]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  // Behind a gate, the copy has not run yet when the host changes its
  // source; the bytes that arrive are those present when it runs.
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(64);
  std::vector<uint8_t> host(64, 1);
  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), host.data(),
                                        buffer.get(), 0, 64));
  std::fill(host.begin(), host.end(), 2);
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(buffer.get(), 0, 64) == std::vector<uint8_t>(64, 2));
}

}  // namespace
}  // namespace axrt_cts
