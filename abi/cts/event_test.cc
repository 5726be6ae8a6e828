// Events: record, query, host wait with timeout, elapsed time, cross-stream
// waits, native queues made to wait (event.h, stream.h).
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

using Clock = std::chrono::steady_clock;

axrt_status_t Sleep20ms(void*, axrt_status_t) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return nullptr;
}

TEST_CASE_METHOD(DeviceTest, "event: query and wait before any record are "
                 "FAILED_PRECONDITION", "[cts][event]") {
  Event event = NewEvent();
  bool complete = true;
  CHECK_STATUS(axrt_event_query(event.get(), &complete),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  CHECK(complete);
  CHECK_STATUS(axrt_event_wait(event.get(), 0),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  CHECK_STATUS(axrt_event_wait(event.get(), AXRT_TIMEOUT_INFINITE),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  Stream stream = NewStream();
  CHECK_STATUS(axrt_stream_wait_event(stream.get(), event.get()),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));

  Event recorded = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), recorded.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  int64_t nanoseconds = 12345;
  CHECK_STATUS(axrt_event_elapsed_time(event.get(), recorded.get(),
                                       &nanoseconds),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  CHECK_STATUS(axrt_event_elapsed_time(recorded.get(), event.get(),
                                       &nanoseconds),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  CHECK(nanoseconds == 12345);
}

TEST_CASE_METHOD(DeviceTest, "event: a pending event times out, then "
                 "completes", "[cts][event]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  Stream stream = NewStream();
  Event event = NewEvent();
  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), event.get()));

  bool complete = true;
  REQUIRE_OK(axrt_event_query(event.get(), &complete));
  CHECK(!complete);
  CHECK_STATUS(axrt_event_wait(event.get(), 0),
               AXRT_STATUS_CODE_DEADLINE_EXCEEDED, "");
  auto start = Clock::now();
  CHECK_STATUS(axrt_event_wait(event.get(), 20'000'000),
               AXRT_STATUS_CODE_DEADLINE_EXCEEDED, "");
  CHECK(Clock::now() - start >= std::chrono::milliseconds(15));
  REQUIRE_OK(axrt_stream_query(stream.get(), &complete));
  CHECK(!complete);

  gate.Open();
  REQUIRE_OK(axrt_event_wait(event.get(), AXRT_TIMEOUT_INFINITE));
  complete = false;
  REQUIRE_OK(axrt_event_query(event.get(), &complete));
  CHECK(complete);
  REQUIRE_OK(axrt_event_wait(event.get(), 0));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  bool idle = false;
  REQUIRE_OK(axrt_stream_query(stream.get(), &idle));
  CHECK(idle);
}

TEST_CASE_METHOD(DeviceTest, "event: many threads wait on one event",
                 "[cts][event][threads]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  Stream stream = NewStream();
  Event event = NewEvent();
  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), event.get()));
  constexpr int kThreads = 4;
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Describe(Status(
          axrt_event_wait(event.get(), AXRT_TIMEOUT_INFINITE)).get());
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  gate.Open();
  for (std::thread& thread : threads) thread.join();
  CHECK(results == std::vector<std::string>(kThreads, "OK"));
}

TEST_CASE_METHOD(DeviceTest, "event: elapsed time", "[cts][event][timing]") {
  CTS_REQUIRE_FEATURE(Feature::kEventTiming);
  Stream stream = NewStream();
  Event start = NewEvent();
  Event end = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), start.get()));
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Sleep20ms, nullptr));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), end.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));

  int64_t forward = 0;
  REQUIRE_OK(axrt_event_elapsed_time(start.get(), end.get(), &forward));
  CHECK(forward >= 15'000'000);
  CHECK(forward < 10'000'000'000);
  int64_t backward = 0;
  REQUIRE_OK(axrt_event_elapsed_time(end.get(), start.get(), &backward));
  CHECK(backward == -forward);
  int64_t same = 1;
  REQUIRE_OK(axrt_event_elapsed_time(start.get(), start.get(), &same));
  CHECK(same == 0);
}

TEST_CASE_METHOD(DeviceTest, "event: elapsed time needs complete events",
                 "[cts][event][timing]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  CTS_REQUIRE_FEATURE(Feature::kEventTiming);
  Stream stream = NewStream();
  Event start = NewEvent();
  Event end = NewEvent();
  Gate gate;
  REQUIRE_OK(axrt_stream_record_event(stream.get(), start.get()));
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), end.get()));
  REQUIRE_OK(axrt_event_wait(start.get(), AXRT_TIMEOUT_INFINITE));
  int64_t nanoseconds = 777;
  CHECK_STATUS(axrt_event_elapsed_time(start.get(), end.get(), &nanoseconds),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "");
  CHECK(nanoseconds == 777);
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  REQUIRE_OK(axrt_event_elapsed_time(start.get(), end.get(), &nanoseconds));
  CHECK(nanoseconds >= 0);
}

TEST_CASE_METHOD(DeviceTest, "event: DISABLE_TIMING events are not timed",
                 "[cts][event][timing]") {
  Stream stream = NewStream();
  Event untimed = NewEvent(AXRT_EVENT_FLAG_DISABLE_TIMING);
  Event untimed_end = NewEvent(AXRT_EVENT_FLAG_DISABLE_TIMING);
  Event timed = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), untimed.get()));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), timed.get()));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), untimed_end.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));

  // They still work as markers.
  bool complete = false;
  REQUIRE_OK(axrt_event_query(untimed.get(), &complete));
  CHECK(complete);
  REQUIRE_OK(axrt_event_wait(untimed_end.get(), 0));

  int64_t nanoseconds = 999;
  CHECK_STATUS_ANY(axrt_event_elapsed_time(untimed.get(), untimed_end.get(),
                                           &nanoseconds),
                   "timing", AXRT_STATUS_CODE_FAILED_PRECONDITION,
                   AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK_STATUS_ANY(
      axrt_event_elapsed_time(untimed.get(), timed.get(), &nanoseconds),
      "timing", AXRT_STATUS_CODE_FAILED_PRECONDITION,
      AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK_STATUS_ANY(
      axrt_event_elapsed_time(timed.get(), untimed_end.get(), &nanoseconds),
      "timing", AXRT_STATUS_CODE_FAILED_PRECONDITION,
      AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK(nanoseconds == 999);
}

TEST_CASE_METHOD(DeviceTest, "event: re-recording refers to the latest record",
                 "[cts][event]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  Stream stream = NewStream();
  Event event = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), event.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  REQUIRE_OK(axrt_event_wait(event.get(), 0));

  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), event.get()));
  bool complete = true;
  REQUIRE_OK(axrt_event_query(event.get(), &complete));
  CHECK(!complete);
  CHECK_STATUS(axrt_event_wait(event.get(), 0),
               AXRT_STATUS_CODE_DEADLINE_EXCEEDED, "");
  gate.Open();
  REQUIRE_OK(axrt_event_wait(event.get(), AXRT_TIMEOUT_INFINITE));
  REQUIRE_OK(axrt_event_query(event.get(), &complete));
  CHECK(complete);

  // Recorded on another stream next: the latest record is that one.
  Stream other = NewStream();
  Gate other_gate;
  REQUIRE_OK(axrt_stream_launch_host_func(other.get(), &Gate::HostFunc,
                                          &other_gate));
  REQUIRE_OK(axrt_stream_record_event(other.get(), event.get()));
  REQUIRE_OK(axrt_event_query(event.get(), &complete));
  CHECK(!complete);
  other_gate.Open();
  REQUIRE_OK(axrt_event_wait(event.get(), AXRT_TIMEOUT_INFINITE));
}

TEST_CASE_METHOD(DeviceTest, "event: elapsed time uses the latest records",
                 "[cts][event][timing]") {
  CTS_REQUIRE_FEATURE(Feature::kEventTiming);
  Stream stream = NewStream();
  Event first = NewEvent();
  Event second = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(stream.get(), first.get()));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), second.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  int64_t nanoseconds = -1;
  REQUIRE_OK(axrt_event_elapsed_time(first.get(), second.get(), &nanoseconds));
  CHECK(nanoseconds >= 0);

  // Recording `first` again, later: `second` now completed first.
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Sleep20ms, nullptr));
  REQUIRE_OK(axrt_stream_record_event(stream.get(), first.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  REQUIRE_OK(axrt_event_elapsed_time(first.get(), second.get(), &nanoseconds));
  CHECK(nanoseconds <= -15'000'000);
}

TEST_CASE_METHOD(DeviceTest, "event: a stream waits for another stream's "
                 "record", "[cts][event][order]") {
  constexpr uint64_t kSize = 1 << 20;
  std::vector<uint8_t> data = PatternBytes(kSize, 81);
  std::vector<uint8_t> stale(kSize, 0);
  Buffer buffer = NewBuffer(kSize);
  Write(buffer.get(), 0, stale);

  Stream producer = NewStream();
  Stream consumer = NewStream();
  Event ready = NewEvent();
  // The producer is slow on purpose: without the wait, the consumer's copy
  // would run first and see the stale bytes.
  REQUIRE_OK(axrt_stream_launch_host_func(producer.get(), &Sleep20ms, nullptr));
  REQUIRE_OK(axrt_stream_copy_from_host(producer.get(), data.data(),
                                        buffer.get(), 0, kSize));
  REQUIRE_OK(axrt_stream_record_event(producer.get(), ready.get()));

  std::vector<uint8_t> seen(kSize, 0xFF);
  REQUIRE_OK(axrt_stream_wait_event(consumer.get(), ready.get()));
  REQUIRE_OK(axrt_stream_copy_to_host(consumer.get(), buffer.get(), 0,
                                      seen.data(), kSize));
  REQUIRE_OK(axrt_stream_synchronize(consumer.get()));
  CHECK(seen == data);
  REQUIRE_OK(axrt_stream_synchronize(producer.get()));
}

TEST_CASE_METHOD(DeviceTest, "event: a wait refers to the record enqueued "
                 "before it", "[cts][event][order]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  // The consumer waits on the first record; recording the event again on a
  // held stream afterwards must not make the consumer wait for the gate.
  Stream producer = NewStream();
  Stream consumer = NewStream();
  Event event = NewEvent();
  REQUIRE_OK(axrt_stream_record_event(producer.get(), event.get()));
  REQUIRE_OK(axrt_stream_synchronize(producer.get()));
  REQUIRE_OK(axrt_stream_wait_event(consumer.get(), event.get()));
  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(producer.get(), &Gate::HostFunc,
                                          &gate));
  REQUIRE_OK(axrt_stream_record_event(producer.get(), event.get()));
  std::atomic<bool> ran{false};
  REQUIRE_OK(axrt_stream_launch_host_func(
      consumer.get(),
      [](void* flag, axrt_status_t) -> axrt_status_t {
        static_cast<std::atomic<bool>*>(flag)->store(true);
        return nullptr;
      },
      &ran));
  CHECK(WaitForFlag(ran, std::chrono::seconds(10)));
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(consumer.get()));
  REQUIRE_OK(axrt_stream_synchronize(producer.get()));
}

TEST_CASE_METHOD(DeviceTest, "event: queued records and waits keep their "
                 "event alive", "[cts][event][lifetime]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  constexpr uint64_t kSize = 4096;
  const std::vector<uint8_t> data = PatternBytes(kSize, 83);
  Buffer buffer = NewBuffer(kSize);
  Stream producer = NewStream();
  Stream consumer = NewStream();
  Gate gate;
  std::vector<uint8_t> seen(kSize, 0);
  {
    Event event = NewEvent();
    REQUIRE_OK(axrt_stream_launch_host_func(producer.get(), &Gate::HostFunc,
                                            &gate));
    REQUIRE_OK(axrt_stream_copy_from_host(producer.get(), data.data(),
                                          buffer.get(), 0, kSize));
    REQUIRE_OK(axrt_stream_record_event(producer.get(), event.get()));
    REQUIRE_OK(axrt_stream_wait_event(consumer.get(), event.get()));
    REQUIRE_OK(axrt_stream_copy_to_host(consumer.get(), buffer.get(), 0,
                                        seen.data(), kSize));
  }
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(consumer.get()));
  CHECK(seen == data);
}

TEST_CASE_METHOD(DeviceTest, "event: a native queue waits on the device for "
                 "a record", "[cts][event][native]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  void* const legacy = reinterpret_cast<void*>(uintptr_t{1});  // CU_STREAM_LEGACY
  Stream producer = NewStream();
  Stream consumer = NewStream();
  Event event = NewEvent();
  if (!Supports(Feature::kNativeQueues)) {
    void* handle = nullptr;
    CHECK_STATUS(axrt_stream_get_native_handle(consumer.get(), &handle),
                 AXRT_STATUS_CODE_UNIMPLEMENTED, "native queue");
    CHECK(handle == nullptr);
    REQUIRE_OK(axrt_stream_record_event(producer.get(), event.get()));
    CHECK_STATUS(axrt_event_enqueue_native_wait(event.get(), legacy),
                 AXRT_STATUS_CODE_UNIMPLEMENTED, "native queues");
    CTS_REQUIRE_FEATURE(Feature::kNativeQueues);
    return;
  }
  // One handle per stream, the same on every call.
  void* native = nullptr;
  void* again = nullptr;
  void* other = nullptr;
  REQUIRE_OK(axrt_stream_get_native_handle(consumer.get(), &native));
  REQUIRE_OK(axrt_stream_get_native_handle(consumer.get(), &again));
  REQUIRE_OK(axrt_stream_get_native_handle(producer.get(), &other));
  CHECK(native != nullptr);
  CHECK(again == native);
  CHECK(other != native);
  CHECK_STATUS(axrt_event_enqueue_native_wait(event.get(), native),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");

  // The producer writes behind a gate; the consumer's native queue is made to
  // wait for that, and the consumer's later work must see the bytes.
  constexpr uint64_t kSize = 1 << 16;
  const std::vector<uint8_t> data = PatternBytes(kSize, 87);
  Buffer buffer = NewBuffer(kSize);
  Write(buffer.get(), 0, std::vector<uint8_t>(kSize, 0));
  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(producer.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_copy_from_host(producer.get(), data.data(), buffer.get(),
                                        0, kSize));
  REQUIRE_OK(axrt_stream_record_event(producer.get(), event.get()));
  REQUIRE_OK(axrt_event_enqueue_native_wait(event.get(), native));
  std::vector<uint8_t> seen(kSize, 0xFF);
  REQUIRE_OK(axrt_stream_copy_to_host(consumer.get(), buffer.get(), 0, seen.data(),
                                      kSize));
  // The wait refers to the record current at the call: recording the event
  // again on an idle stream, and releasing it, does not let the consumer go.
  Stream idle_stream = NewStream();
  REQUIRE_OK(axrt_stream_record_event(idle_stream.get(), event.get()));
  REQUIRE_OK(axrt_stream_synchronize(idle_stream.get()));
  event.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool idle = true;
  REQUIRE_OK(axrt_stream_query(consumer.get(), &idle));
  CHECK(!idle);
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(consumer.get()));
  CHECK(seen == data);
  REQUIRE_OK(axrt_stream_synchronize(producer.get()));

  // A record known to fail is refused: a native queue cannot fail with it.
  Stream failing = NewStream();
  Event failed = NewEvent();
  REQUIRE_OK(axrt_stream_launch_host_func(
      failing.get(),
      [](void*, axrt_status_t) -> axrt_status_t {
        return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "producer gave up");
      },
      nullptr));
  REQUIRE_OK(axrt_stream_record_event(failing.get(), failed.get()));
  CHECK_STATUS(axrt_stream_synchronize(failing.get()), AXRT_STATUS_CODE_ABORTED,
               "producer gave up");
  CHECK_STATUS(axrt_event_enqueue_native_wait(failed.get(), native),
               AXRT_STATUS_CODE_ABORTED, "producer gave up");
  REQUIRE_OK(axrt_stream_synchronize(consumer.get()));
}

TEST_CASE_METHOD(DeviceTest, "event: events of another device",
                 "[cts][event][multi_device]") {
  CTS_REQUIRE_FEATURE(Feature::kMultipleDevices);
  size_t count = 0;
  REQUIRE_OK(axrt_instance_device_count(instance(), &count));
  Device other;
  for (size_t i = 0; i < count && other == nullptr; ++i) {
    Device candidate;
    REQUIRE_OK(axrt_instance_get_device(instance(), i, Out(candidate)));
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_OK(axrt_device_query_properties(candidate.get(), &p));
    if (std::string(p.id) != properties().id) other = std::move(candidate);
  }
  REQUIRE(other != nullptr);
  Event foreign;
  REQUIRE_OK(axrt_event_create(other.get(), nullptr, Out(foreign)));
  Stream stream = NewStream();
  // Recording needs an event of the stream's device ...
  CHECK_STATUS(axrt_stream_record_event(stream.get(), foreign.get()),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "device");
  // ... but waiting works across devices of one instance.
  Stream foreign_stream;
  REQUIRE_OK(axrt_stream_create(other.get(), nullptr, Out(foreign_stream)));
  REQUIRE_OK(axrt_stream_record_event(foreign_stream.get(), foreign.get()));
  REQUIRE_OK(axrt_stream_wait_event(stream.get(), foreign.get()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
}

}  // namespace
}  // namespace axrt_cts
