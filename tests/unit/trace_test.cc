// Tracing through the C API: many threads recording while a trace starts
// and stops (run under ThreadSanitizer), the event limit, failures as
// instants, and the file's framing. The file's full shape is checked with a
// JSON parser in tests/python/test_profile.py.
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "tests/unit/status_check.h"
#include "tests/unit/trace_files.h"

namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

struct Instance {
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  Instance() {
    REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
    REQUIRE_CALL_OK(axrt_instance_get_device(instance, 0, &device));
  }
  ~Instance() {
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  axrt_status_t Start(const std::string& path, uint64_t max_events = 0) {
    axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
    options.path = path.c_str();
    options.max_events = max_events;
    return axrt_instance_trace_start(instance, &options);
  }
};

axrt_status_t CountCall(void* counter, axrt_status_t) {
  static_cast<std::atomic<int>*>(counter)->fetch_add(1);
  return nullptr;
}

axrt_status_t FailCall(void*, axrt_status_t) {
  return axrt_status_create(AXRT_STATUS_CODE_DATA_LOSS, "the walk's host function gave up");
}

// Copies, fills, host functions, events and ranges on one stream until
// `stop` is set. Catch's assertions are not for other threads: failures
// are counted in `*errors` and checked by the test's thread.
void Work(axrt_device_t device, const std::atomic<bool>& stop, std::atomic<int>* calls,
          std::atomic<int>* errors) {
  auto ok = [&](axrt_status_t status) {
    if (!status) return true;
    std::fprintf(stderr, "worker: %s\n", axrt_status_message(status));
    axrt_status_free(status);
    errors->fetch_add(1);
    return false;
  };
  axrt_stream_t stream = nullptr;
  axrt_buffer_t buffer = nullptr;
  axrt_event_t event = nullptr;
  if (!ok(axrt_stream_create(device, nullptr, &stream)) ||
      !ok(axrt_buffer_allocate(device, 1 << 16, nullptr, &buffer)) ||
      !ok(axrt_event_create(device, nullptr, &event))) {
    return;
  }
  std::vector<char> host(1 << 16, 1);
  const uint32_t pattern = 7;
  while (!stop.load()) {
    axrt_buffer_t scratch = nullptr;
    const bool queued =
        ok(axrt_trace_range_begin("iteration")) &&
        ok(axrt_stream_copy_from_host(stream, host.data(), buffer, 0, host.size())) &&
        ok(axrt_stream_fill_buffer(stream, buffer, 0, 4096, &pattern, 4)) &&
        ok(axrt_stream_launch_host_func(stream, &CountCall, calls)) &&
        ok(axrt_stream_record_event(stream, event)) &&
        ok(axrt_stream_copy_to_host(stream, buffer, 0, host.data(), 1024)) &&
        ok(axrt_stream_allocate_buffer(stream, 4096, nullptr, &scratch)) &&
        ok(axrt_stream_deallocate_buffer(stream, scratch));
    axrt_buffer_release(scratch);
    axrt_trace_range_end();
    if (!queued || !ok(axrt_stream_synchronize(stream))) break;
  }
  axrt_event_release(event);
  axrt_buffer_release(buffer);
  axrt_stream_release(stream);
}

}  // namespace

TEST_CASE("traces start and stop while threads record", "[trace]") {
  Instance rt;
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] { Work(rt.device, stop, &calls, &errors); });
  }
  // Several traces back to back, each stopped while the streams are busy.
  for (int round = 0; round < 3; ++round) {
    const std::string path = axrt_test::TempTracePath("trace-round-" + std::to_string(round));
    REQUIRE_CALL_OK(rt.Start(path));
    CHECK(axrt_trace_is_active());
    const int before = calls.load();
    while (calls.load() < before + 40 && errors.load() == 0) std::this_thread::yield();
    REQUIRE(errors.load() == 0);
    axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
    REQUIRE_CALL_OK(axrt_instance_trace_stop(rt.instance, &result));
    CHECK_FALSE(axrt_trace_is_active());
    const std::string text = axrt_test::ReadWholeFile(path);
    CHECK(result.bytes_written == text.size());
    CHECK(result.dropped_events == 0);
    CHECK(result.events > 100);
    CHECK(text.rfind("{\"displayTimeUnit\":\"ns\"", 0) == 0);
    CHECK(text.size() > 4);
    CHECK(text.substr(text.size() - 4) == "\n]}\n");
    CHECK(Count(text, "\"cat\":\"api\"") > 10);
    CHECK(Count(text, "\"name\":\"copy HtoD\"") > 0);
    CHECK(Count(text, "\"name\":\"copy DtoH\"") > 0);
    CHECK(Count(text, "\"name\":\"fill\"") > 0);
    CHECK(Count(text, "\"name\":\"host function\"") > 0);
    CHECK(Count(text, "\"name\":\"iteration\"") > 0);
    CHECK(Count(text, "\"ph\":\"C\"") > 0);
    // Every flow that starts ends.
    CHECK(Count(text, "\"ph\":\"s\"") == Count(text, "\"ph\":\"f\""));
    std::remove(path.c_str());
  }
  stop.store(true);
  for (std::thread& t : workers) t.join();
  CHECK(errors.load() == 0);
}

TEST_CASE("a trace keeps at most max_events events and counts the rest", "[trace]") {
  Instance rt;
  const std::string path = axrt_test::TempTracePath("trace-limit");
  REQUIRE_CALL_OK(rt.Start(path, 1));  // rounded up to one buffer chunk
  for (int i = 0; i < 5000; ++i) {
    REQUIRE_CALL_OK(axrt_trace_range_begin("r"));
    axrt_trace_range_end();
  }
  axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
  REQUIRE_CALL_OK(axrt_instance_trace_stop(rt.instance, &result));
  CHECK(result.dropped_events >= 10000 - 1024);
  const std::string text = axrt_test::ReadWholeFile(path);
  CHECK(text.find("\"dropped_events\":" + std::to_string(result.dropped_events)) !=
        std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a failing stream is an instant event naming the failure", "[trace]") {
  Instance rt;
  axrt_stream_t stream = nullptr;
  axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("doomed");
  options.next = &label;
  REQUIRE_CALL_OK(axrt_stream_create(rt.device, &options, &stream));
  axrt_stream_statistics_t before = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(rt.device, &before));
  const std::string path = axrt_test::TempTracePath("trace-failure");
  REQUIRE_CALL_OK(rt.Start(path));
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &FailCall, nullptr));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS, "gave up");
  REQUIRE_CALL_OK(axrt_instance_trace_stop(rt.instance, nullptr));
  axrt_stream_statistics_t after = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(rt.device, &after));
  CHECK(after.stream_failures == before.stream_failures + 1);
  CHECK(after.host_functions == before.host_functions + 1);
  const std::string text = axrt_test::ReadWholeFile(path);
  CHECK(Count(text, "\"cat\":\"failure\",\"ph\":\"i\"") == 1);
  CHECK(text.find("the walk's host function gave up") != std::string::npos);
  CHECK(text.find("'doomed'") != std::string::npos);
  axrt_stream_release(stream);
  std::remove(path.c_str());
}

TEST_CASE("ranges nest per thread and unmatched ends are dropped", "[trace]") {
  Instance rt;
  const std::string path = axrt_test::TempTracePath("trace-ranges");
  axrt_trace_range_end();  // before the trace: nothing
  REQUIRE_CALL_OK(rt.Start(path));
  axrt_trace_range_end();  // unmatched: dropped
  REQUIRE_CALL_OK(axrt_trace_range_begin("outer"));
  REQUIRE_CALL_OK(axrt_trace_range_begin("inner \"quoted\"\n"));
  axrt_trace_range_end();
  REQUIRE_CALL_OK(axrt_trace_range_begin("left open"));
  axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
  REQUIRE_CALL_OK(axrt_instance_trace_stop(rt.instance, &result));
  axrt_trace_range_end();
  axrt_trace_range_end();
  const std::string text = axrt_test::ReadWholeFile(path);
  CHECK(Count(text, "\"cat\":\"range\"") == 3);
  CHECK(text.find("\"name\":\"inner \\\"quoted\\\"\\n\"") != std::string::npos);
  CHECK(Count(text, "\"unterminated\":true") == 2);  // "outer" and "left open"
  std::remove(path.c_str());
}
