// Stream-ordered allocation and deallocation (stream.h, memory.h).
#include <cstring>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

axrt_pool_statistics_t Statistics(axrt_device_t device) {
  REQUIRE_OK(axrt_device_synchronize(device));
  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  REQUIRE_OK(axrt_device_query_pool_statistics(device, &stats));
  return stats;
}

Buffer StreamAllocate(axrt_stream_t stream, uint64_t size,
                      const axrt_buffer_options_t* options = nullptr) {
  Buffer buffer;
  REQUIRE_OK(axrt_stream_allocate_buffer(stream, size, options, Out(buffer)));
  REQUIRE(buffer != nullptr);
  return buffer;
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: usable on its stream, "
                 "returned in stream order", "[cts][stream_allocation]") {
  constexpr uint64_t kSize = 100000;
  Stream stream = NewStream();
  axrt_pool_statistics_t before = Statistics(device());

  Buffer buffer = StreamAllocate(stream.get(), kSize);
  axrt_buffer_info_t info = Info(buffer.get());
  CHECK(info.size == kSize);
  CHECK(info.offset == 0);
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  CHECK(info.alignment >= properties().buffer_alignment);
  CHECK(info.device_address % properties().buffer_alignment == 0);
  CHECK(!info.deallocated);

  std::vector<uint8_t> data = PatternBytes(kSize, 91);
  std::vector<uint8_t> back(kSize, 0);
  const uint8_t zero = 0;
  REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kSize,
                                     &zero, 1));
  REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), data.data(),
                                        buffer.get(), 0, kSize));
  REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 0,
                                      back.data(), kSize));
  REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  CHECK(Info(buffer.get()).deallocated);
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(back == data);

  axrt_pool_statistics_t after = Statistics(device());
  CHECK(after.allocation_count == before.allocation_count + 1);
  CHECK(after.deallocation_count == before.deallocation_count + 1);
  // The memory went back although the caller still holds the handle.
  CHECK(after.bytes_in_use == before.bytes_in_use);
  axrt_buffer_info_t released = Info(buffer.get());
  CHECK(released.deallocated);
  CHECK(released.size == kSize);
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: a deallocated buffer is "
                 "refused", "[cts][stream_allocation]") {
  constexpr uint64_t kSize = 4096;
  Stream stream = NewStream();
  Buffer buffer = StreamAllocate(stream.get(), kSize);
  Buffer view = NewView(buffer.get(), 1024, 1024);
  Buffer other = NewBuffer(kSize);
  std::vector<uint8_t> host(kSize);
  const uint32_t pattern = 1;

  // A view is not an allocation and cannot be deallocated.
  CHECK_STATUS(axrt_stream_deallocate_buffer(stream.get(), view.get()),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "view");
  CHECK(!Info(buffer.get()).deallocated);

  REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  CHECK_STATUS_ANY(axrt_stream_deallocate_buffer(stream.get(), buffer.get()),
                   "deallocated", AXRT_STATUS_CODE_FAILED_PRECONDITION);
  for (axrt_buffer_t b : {buffer.get(), view.get()}) {
    CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(), b, 0, 16),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK_STATUS(axrt_stream_copy_to_host(stream.get(), b, 0, host.data(), 16),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), b, 0, other.get(), 0, 16),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), other.get(), 0, b, 0, 16),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), b, 0, 16, &pattern, 4),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
    copy.src = {b, nullptr, 0, 16};
    copy.dst = {nullptr, host.data(), 0, 16};
    copy.width = 16;
    copy.height = 2;
    CHECK_STATUS(axrt_stream_copy_2d(stream.get(), &copy),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    void* mapped = reinterpret_cast<void*>(0x1);
    CHECK_STATUS(axrt_buffer_map(b, &mapped),
                 AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK(mapped == reinterpret_cast<void*>(0x1));
    CHECK(Info(b).deallocated);
  }
  // Argument errors enqueue nothing and do not fail the stream.
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: any whole allocation can be "
                 "deallocated in stream order", "[cts][stream_allocation]") {
  Stream stream = NewStream();
  axrt_pool_statistics_t before = Statistics(device());
  Buffer buffer = NewBuffer(8192);
  REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  axrt_pool_statistics_t after = Statistics(device());
  CHECK(after.deallocation_count == before.deallocation_count + 1);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  // Releasing the handle afterwards does not return the memory twice.
  buffer.reset();
  axrt_pool_statistics_t released = Statistics(device());
  CHECK(released.deallocation_count == after.deallocation_count);
  CHECK(released.bytes_in_use == after.bytes_in_use);
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: memory reused in stream "
                 "order keeps earlier work intact", "[cts][stream_allocation]") {
  constexpr uint64_t kSize = 64 * 1024;
  constexpr int kRounds = 32;
  Stream stream = NewStream();
  std::vector<std::vector<uint8_t>> results(kRounds,
                                            std::vector<uint8_t>(kSize, 0));
  for (int round = 0; round < kRounds; ++round) {
    Buffer buffer = StreamAllocate(stream.get(), kSize);
    const uint8_t value = static_cast<uint8_t>(round + 1);
    REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kSize,
                                       &value, 1));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 0,
                                        results[round].data(), kSize));
    REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    CHECK(results[round] ==
          std::vector<uint8_t>(kSize, static_cast<uint8_t>(round + 1)));
  }
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: memory is not handed out "
                 "again before its stream reaches the deallocation",
                 "[cts][stream_allocation][order]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  // The stream is held while a copy still has to read the buffer; an
  // allocation made meanwhile must not get the same memory, or the copy
  // would read the newcomer's bytes.
  constexpr uint64_t kSize = 64 * 1024;
  Stream stream = NewStream();
  Buffer buffer = StreamAllocate(stream.get(), kSize);
  const std::vector<uint8_t> original(kSize, 0x11);
  Write(buffer.get(), 0, original);
  Gate gate;
  std::vector<uint8_t> seen(kSize, 0);
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 0,
                                      seen.data(), kSize));
  REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  buffer.reset();

  std::vector<Buffer> newcomers;
  for (int i = 0; i < 4; ++i) {
    newcomers.push_back(NewBuffer(kSize));
    Write(newcomers.back().get(), 0, std::vector<uint8_t>(kSize, 0x22));
  }
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(seen == original);
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: another stream uses the "
                 "buffer after waiting on an event",
                 "[cts][stream_allocation][event]") {
  constexpr uint64_t kSize = 4096;
  Stream owner = NewStream();
  Stream user = NewStream();
  Event allocated = NewEvent();
  Buffer buffer = StreamAllocate(owner.get(), kSize);
  const uint32_t pattern = 0xA5A5F00D;
  REQUIRE_OK(axrt_stream_fill_buffer(owner.get(), buffer.get(), 0, kSize,
                                     &pattern, sizeof(pattern)));
  REQUIRE_OK(axrt_stream_record_event(owner.get(), allocated.get()));
  REQUIRE_OK(axrt_stream_wait_event(user.get(), allocated.get()));
  std::vector<uint8_t> seen(kSize, 0);
  REQUIRE_OK(axrt_stream_copy_to_host(user.get(), buffer.get(), 0, seen.data(),
                                      kSize));
  REQUIRE_OK(axrt_stream_record_event(user.get(), allocated.get()));
  REQUIRE_OK(axrt_stream_wait_event(owner.get(), allocated.get()));
  REQUIRE_OK(axrt_stream_deallocate_buffer(owner.get(), buffer.get()));
  REQUIRE_OK(axrt_stream_synchronize(owner.get()));
  REQUIRE_OK(axrt_stream_synchronize(user.get()));
  std::vector<uint8_t> expected(kSize);
  for (uint64_t i = 0; i < kSize; i += 4) std::memcpy(&expected[i], &pattern, 4);
  CHECK(seen == expected);
}

TEST_CASE_METHOD(DeviceTest, "stream allocation: options", "[cts][stream_allocation]") {
  Stream stream = NewStream();
  const uint64_t alignment = properties().max_buffer_alignment;
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("cts-stream-allocated");
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.next = &label;
  options.memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
  options.alignment = alignment;
  Buffer buffer = StreamAllocate(stream.get(), 1000, &options);
  axrt_buffer_info_t info = Info(buffer.get());
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
  CHECK(info.host_visible);
  CHECK(info.alignment >= alignment);
  CHECK(info.device_address % alignment == 0);
  // The label names the buffer in errors about it.
  std::vector<uint8_t> host(2000);
  CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                          buffer.get(), 0, 2000),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "cts-stream-allocated");
  REQUIRE_OK(axrt_stream_deallocate_buffer(stream.get(), buffer.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));

  axrt_buffer_t out = nullptr;
  CHECK_STATUS(axrt_stream_allocate_buffer(stream.get(), 0, nullptr, &out),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "size");
  options.next = nullptr;
  options.alignment = 3;
  CHECK_STATUS(axrt_stream_allocate_buffer(stream.get(), 64, &options, &out),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "alignment");
  CHECK(out == nullptr);
}

}  // namespace
}  // namespace axrt_cts
