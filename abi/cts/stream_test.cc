// Stream lifetime, query and concurrent use (stream.h).
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

axrt_status_t SetFlag(void* flag, axrt_status_t) {
  static_cast<std::atomic<bool>*>(flag)->store(true);
  return nullptr;
}

TEST_CASE_METHOD(DeviceTest, "stream: query reports pending work",
                 "[cts][stream]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  Stream stream = NewStream();
  bool idle = false;
  REQUIRE_OK(axrt_stream_query(stream.get(), &idle));
  CHECK(idle);

  Gate gate;
  REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc, &gate));
  REQUIRE_OK(axrt_stream_query(stream.get(), &idle));
  CHECK(!idle);
  gate.Open();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  REQUIRE_OK(axrt_stream_query(stream.get(), &idle));
  CHECK(idle);
}

TEST_CASE_METHOD(DeviceTest, "stream: retain and release", "[cts][stream]") {
  Stream stream = NewStream();
  axrt_stream_retain(stream.get());
  axrt_stream_release(stream.get());
  Buffer buffer = NewBuffer(16);
  std::vector<uint8_t> data = PatternBytes(16, 101);
  REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), data.data(),
                                        buffer.get(), 0, 16));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(Read(buffer.get(), 0, 16) == data);
  axrt_stream_retain(nullptr);
  axrt_stream_release(nullptr);
}

TEST_CASE_METHOD(DeviceTest, "stream: releasing a stream lets its queued work "
                 "finish", "[cts][stream][lifetime]") {
  if (!RequireFeature(Feature::kAsynchronousExecution)) return;
  constexpr uint64_t kSize = 4096;
  std::vector<uint8_t> data = PatternBytes(kSize, 102);
  std::vector<uint8_t> back(kSize, 0);
  Gate gate;
  std::atomic<bool> done{false};
  {
    Stream stream = NewStream();
    Buffer buffer = NewBuffer(kSize);
    REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &Gate::HostFunc,
                                            &gate));
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), data.data(),
                                          buffer.get(), 0, kSize));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), 0,
                                        back.data(), kSize));
    REQUIRE_OK(axrt_stream_launch_host_func(stream.get(), &SetFlag, &done));
    // The stream and the buffer go before any of the work ran; the release
    // does not wait for the work.
  }
  CHECK(!done.load());
  gate.Open();
  REQUIRE(WaitForFlag(done, std::chrono::seconds(30)));
  CHECK(back == data);
}

TEST_CASE_METHOD(DeviceTest, "stream: many streams from several threads",
                 "[cts][stream][threads]") {
  constexpr int kThreads = 4;
  constexpr int kStreamsPerThread = 3;
  constexpr int kRounds = 20;
  constexpr uint64_t kSize = 16 * 1024;
  std::vector<std::string> errors(kThreads);
  auto worker = [&](int index) {
    std::string& error = errors[index];
    auto ok = [&](axrt_status_t raw, const char* what) {
      Status status(raw);
      if (status != nullptr && error.empty()) {
        error = std::string(what) + ": " + Describe(status.get());
      }
      return status == nullptr;
    };
    for (int s = 0; s < kStreamsPerThread && error.empty(); ++s) {
      axrt_stream_t raw_stream = nullptr;
      if (!ok(axrt_stream_create(device(), nullptr, &raw_stream), "create")) {
        return;
      }
      Stream stream(raw_stream);
      axrt_buffer_t raw_a = nullptr;
      axrt_buffer_t raw_b = nullptr;
      if (!ok(axrt_buffer_allocate(device(), kSize, nullptr, &raw_a), "a") ||
          !ok(axrt_stream_allocate_buffer(stream.get(), kSize, nullptr, &raw_b),
              "b")) {
        axrt_buffer_release(raw_a);
        return;
      }
      Buffer a(raw_a);
      Buffer b(raw_b);
      for (int round = 0; round < kRounds && error.empty(); ++round) {
        uint32_t seed = static_cast<uint32_t>(index * 10000 + s * 100 + round);
        std::vector<uint8_t> data = PatternBytes(kSize, seed);
        std::vector<uint8_t> back(kSize, 0);
        const uint16_t pattern = static_cast<uint16_t>(seed);
        ok(axrt_stream_fill_buffer(stream.get(), b.get(), 0, kSize, &pattern,
                                   2),
           "fill");
        ok(axrt_stream_copy_from_host(stream.get(), data.data(), a.get(), 0,
                                      kSize),
           "copy_from_host");
        ok(axrt_stream_copy_buffer(stream.get(), a.get(), 0, b.get(), 0,
                                   kSize / 2),
           "copy_buffer");
        ok(axrt_stream_copy_to_host(stream.get(), b.get(), 0, back.data(),
                                    kSize),
           "copy_to_host");
        ok(axrt_stream_synchronize(stream.get()), "synchronize");
        for (uint64_t i = 0; i < kSize && error.empty(); ++i) {
          uint8_t expected =
              i < kSize / 2 ? data[i]
                            : static_cast<uint8_t>(pattern >> (8 * (i % 2)));
          if (back[i] != expected) {
            error = "thread " + std::to_string(index) + " stream " +
                    std::to_string(s) + " round " + std::to_string(round) +
                    ": wrong byte at " + std::to_string(i);
          }
        }
      }
      ok(axrt_stream_deallocate_buffer(stream.get(), b.get()), "deallocate");
      ok(axrt_stream_synchronize(stream.get()), "final synchronize");
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    CHECK(errors[i].empty());
    if (!errors[i].empty()) WARN(errors[i]);
  }
}

TEST_CASE_METHOD(DeviceTest, "stream: one stream fed from several threads",
                 "[cts][stream][threads]") {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100;
  Stream stream = NewStream();
  struct Record {
    std::mutex mutex;
    std::vector<std::vector<int>> seen{kThreads};
  } record;
  struct Item {
    Record* record;
    int thread;
    int index;
  };
  std::vector<std::vector<Item>> items(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) items[t].push_back({&record, t, i});
  }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (Item& item : items[t]) {
        Status status(axrt_stream_launch_host_func(
            stream.get(),
            [](void* user_data, axrt_status_t) -> axrt_status_t {
              auto* it = static_cast<Item*>(user_data);
              std::lock_guard<std::mutex> lock(it->record->mutex);
              it->record->seen[it->thread].push_back(it->index);
              return nullptr;
            },
            &item));
        if (status != nullptr && errors[t].empty()) {
          errors[t] = Describe(status.get());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  std::vector<int> expected(kPerThread);
  for (int i = 0; i < kPerThread; ++i) expected[i] = i;
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(errors[t].empty());
    // Each thread's calls happened in its order, so they ran in it.
    CHECK(record.seen[t] == expected);
  }
}

TEST_CASE_METHOD(DeviceTest, "stream: buffers and events of another "
                 "instance's device are refused", "[cts][stream]") {
  // The same device opened through a second instance is another device
  // object: its device-local buffers and its events are not this stream's.
  Instance other_instance = NewInstance();
  Device other_device;
  std::string id = DeviceUnderTestId();
  REQUIRE_OK(axrt_instance_find_device(other_instance.get(), id.c_str(),
                                       Out(other_device)));
  Buffer foreign;
  REQUIRE_OK(axrt_buffer_allocate(other_device.get(), 64, nullptr,
                                  Out(foreign)));
  Event foreign_event;
  REQUIRE_OK(axrt_event_create(other_device.get(), nullptr, Out(foreign_event)));
  Stream foreign_stream;
  REQUIRE_OK(axrt_stream_create(other_device.get(), nullptr,
                                Out(foreign_stream)));
  REQUIRE_OK(axrt_stream_record_event(foreign_stream.get(),
                                      foreign_event.get()));
  REQUIRE_OK(axrt_stream_synchronize(foreign_stream.get()));

  Stream stream = NewStream();
  Buffer local = NewBuffer(64);
  std::vector<uint8_t> host(64);
  const uint8_t pattern = 1;
  CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), foreign.get(), 0,
                                       local.get(), 0, 16),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "src");
  CHECK_STATUS(axrt_stream_copy_buffer(stream.get(), local.get(), 0,
                                       foreign.get(), 0, 16),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "dst");
  CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                          foreign.get(), 0, 16),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "dst");
  CHECK_STATUS(axrt_stream_fill_buffer(stream.get(), foreign.get(), 0, 16,
                                       &pattern, 1),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "buffer");
  CHECK_STATUS(axrt_stream_deallocate_buffer(stream.get(), foreign.get()),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "buffer");
  CHECK_STATUS(axrt_stream_record_event(stream.get(), foreign_event.get()),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "event");
  CHECK_STATUS(axrt_stream_wait_event(stream.get(), foreign_event.get()),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "event");
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(!Info(foreign.get()).deallocated);
}

}  // namespace
}  // namespace axrt_cts
