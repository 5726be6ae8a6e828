// Handles used after their last release, or as the wrong kind of object, are
// reported as errors rather than followed (axrt.h, "Errors").
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

// The header allows either code for a released handle.
#define CHECK_RELEASED(expr, needle)                                  \
  CHECK_STATUS_ANY(expr, needle, AXRT_STATUS_CODE_FAILED_PRECONDITION, \
                   AXRT_STATUS_CODE_INVALID_ARGUMENT)

TEST_CASE_METHOD(DeviceTest, "released handle: buffer",
                 "[cts][released_handle]") {
  Stream stream = NewStream();
  Buffer live = NewBuffer(64);
  axrt_buffer_t stale = nullptr;
  REQUIRE_OK(axrt_buffer_allocate(device(), 64, nullptr, &stale));
  axrt_buffer_release(stale);

  // Objects created since may reuse the slot; the stale handle stays stale.
  std::vector<Buffer> newer;
  for (int i = 0; i < 4; ++i) newer.push_back(NewBuffer(64));

  std::vector<uint8_t> host(64);
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  CHECK_RELEASED(axrt_buffer_query_info(stale, &info), "buffer");
  CHECK(info.size == 0);
  void* mapped = nullptr;
  CHECK_RELEASED(axrt_buffer_map(stale, &mapped), "buffer");
  CHECK(mapped == nullptr);
  axrt_device_t owner = nullptr;
  CHECK_RELEASED(axrt_buffer_get_device(stale, &owner), "buffer");
  CHECK(owner == nullptr);
  axrt_buffer_t view = nullptr;
  CHECK_RELEASED(axrt_buffer_create_view(stale, 0, 16, &view), "buffer");
  CHECK(view == nullptr);
  CHECK_RELEASED(axrt_stream_copy_from_host(stream.get(), host.data(), stale,
                                            0, 16),
                 "dst");
  CHECK_RELEASED(axrt_stream_copy_to_host(stream.get(), stale, 0, host.data(),
                                          16),
                 "src");
  CHECK_RELEASED(
      axrt_stream_copy_buffer(stream.get(), stale, 0, live.get(), 0, 16),
      "src");
  CHECK_RELEASED(
      axrt_stream_copy_buffer(stream.get(), live.get(), 0, stale, 0, 16),
      "dst");
  const uint8_t pattern = 1;
  CHECK_RELEASED(
      axrt_stream_fill_buffer(stream.get(), stale, 0, 16, &pattern, 1),
      "buffer");
  CHECK_RELEASED(axrt_stream_deallocate_buffer(stream.get(), stale), "buffer");

  // Retaining or releasing it again is ignored and revives nothing.
  axrt_buffer_retain(stale);
  axrt_buffer_release(stale);
  CHECK_RELEASED(axrt_buffer_query_info(stale, &info), "buffer");

  // The live buffers were not disturbed.
  for (const Buffer& b : newer) CHECK(Info(b.get()).size == 64);
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

TEST_CASE_METHOD(DeviceTest, "released handle: stream",
                 "[cts][released_handle]") {
  Buffer buffer = NewBuffer(64);
  Event event = NewEvent();
  axrt_stream_t stale = nullptr;
  REQUIRE_OK(axrt_stream_create(device(), nullptr, &stale));
  axrt_stream_release(stale);
  Stream newer = NewStream();

  std::vector<uint8_t> host(64);
  CHECK_RELEASED(axrt_stream_synchronize(stale), "stream");
  bool idle = false;
  CHECK_RELEASED(axrt_stream_query(stale, &idle), "stream");
  CHECK(!idle);
  CHECK_RELEASED(
      axrt_stream_copy_from_host(stale, host.data(), buffer.get(), 0, 16),
      "stream");
  CHECK_RELEASED(
      axrt_stream_copy_to_host(stale, buffer.get(), 0, host.data(), 16),
      "stream");
  CHECK_RELEASED(axrt_stream_record_event(stale, event.get()), "stream");
  CHECK_RELEASED(axrt_stream_launch_host_func(
                     stale, [](void*, axrt_status_t) -> axrt_status_t {
                       return nullptr;
                     },
                     nullptr),
                 "stream");
  axrt_buffer_t allocated = nullptr;
  CHECK_RELEASED(axrt_stream_allocate_buffer(stale, 64, nullptr, &allocated),
                 "stream");
  CHECK(allocated == nullptr);
  axrt_stream_retain(stale);
  axrt_stream_release(stale);
  CHECK_RELEASED(axrt_stream_synchronize(stale), "stream");
  REQUIRE_OK(axrt_stream_synchronize(newer.get()));
}

TEST_CASE_METHOD(DeviceTest, "released handle: event",
                 "[cts][released_handle]") {
  Stream stream = NewStream();
  Event live = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), live.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  axrt_event_t stale = nullptr;
  REQUIRE_OK(axrt_event_create(device(), nullptr, &stale));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), stale));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  axrt_event_release(stale);
  Event newer = NewEvent();

  bool complete = false;
  CHECK_RELEASED(axrt_event_query(stale, &complete), "event");
  CHECK(!complete);
  CHECK_RELEASED(axrt_event_wait(stale, 0), "event");
  CHECK_RELEASED(axrt_stream_record_event(stream.get(), stale), "event");
  CHECK_RELEASED(axrt_stream_wait_event(stream.get(), stale), "event");
  int64_t nanoseconds = 5;
  CHECK_RELEASED(axrt_event_elapsed_time(stale, live.get(), &nanoseconds),
                 "start");
  CHECK_RELEASED(axrt_event_elapsed_time(live.get(), stale, &nanoseconds),
                 "end");
  CHECK(nanoseconds == 5);
  axrt_event_retain(stale);
  axrt_event_release(stale);
  CHECK_RELEASED(axrt_event_wait(stale, 0), "event");
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

TEST_CASE_METHOD(DeviceTest, "released handle: handles of the wrong kind",
                 "[cts][released_handle]") {
  Stream stream = NewStream();
  Buffer buffer = NewBuffer(64);
  Event event = NewEvent();
  auto as_buffer = reinterpret_cast<axrt_buffer_t>(stream.get());
  auto as_stream = reinterpret_cast<axrt_stream_t>(event.get());
  auto as_event = reinterpret_cast<axrt_event_t>(buffer.get());
  auto device_as_buffer = reinterpret_cast<axrt_buffer_t>(device());
  auto instance_as_device = reinterpret_cast<axrt_device_t>(instance());

  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  CHECK_STATUS(axrt_buffer_query_info(as_buffer, &info),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "stream");
  CHECK_STATUS(axrt_buffer_query_info(device_as_buffer, &info),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "device");
  CHECK_STATUS(axrt_stream_synchronize(as_stream),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "event");
  CHECK_STATUS(axrt_event_wait(as_event, 0),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "buffer");
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  CHECK_STATUS(axrt_device_query_properties(instance_as_device, &p),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "instance");
  // Retain and release of the wrong kind leave the real object alone.
  axrt_buffer_release(as_buffer);
  axrt_buffer_retain(as_buffer);
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

}  // namespace
}  // namespace axrt_cts
