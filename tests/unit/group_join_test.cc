// Groups across processes through the C API (axrt_group_join), with the
// members as threads of this process on CPU devices of their own (ctest
// sets AXRT_CPU_DEVICES=4): the argument checks, the collectives against
// references computed here (so ASan and TSan see the transport's paths),
// the rendezvous' refusals, and a member that leaves. Separate processes,
// kill -9 and hangs: tests/python/test_group_processes.py.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "tests/unit/group_support.h"
#include "tests/unit/status_check.h"

namespace {

// What the members' threads found wrong (Catch's assertions are for the
// main thread only): checked there once they joined.
struct Findings {
  std::mutex mutex;
  std::vector<std::string> errors;
  void add(std::string text) {
    std::lock_guard lock(mutex);
    errors.push_back(std::move(text));
  }
};
Findings* g_findings = nullptr;

bool Expect(bool ok, const std::string& what) {
  if (!ok) g_findings->add(what);
  return ok;
}

bool ExpectStatus(axrt_status_t status, axrt_status_code_t code, const char* call,
                  std::initializer_list<const char*> needles = {}) {
  axrt_test::Outcome o = axrt_test::Take(status);
  bool ok = o.code == code;
  for (const char* needle : needles) ok = ok && o.message.find(needle) != std::string::npos;
  return Expect(ok, std::string(call) + " gave " + axrt_status_code_name(o.code) + ": " + o.message);
}

}  // namespace

#define T_OK(call) \
  if (!ExpectStatus((call), AXRT_STATUS_CODE_OK, #call)) return
#define T_FAILS(call, code, ...) ExpectStatus((call), (code), #call, {__VA_ARGS__})
#define T_CHECK(cond) Expect((cond), #cond)

namespace {

const bool kDevicesSet = setenv("AXRT_CPU_DEVICES", "4", /*overwrite=*/0) == 0;

struct Instance : axrt_test::CpuInstance {
  Instance() : CpuInstance(kDevicesSet ? 4 : 0) { REQUIRE(kDevicesSet); }
};

using axrt_test::TcpId;

// Whether this build has the transport between processes.
bool HaveTransport(Instance& instance) {
  axrt_group_t group = nullptr;
  const std::string id = TcpId();
  axrt_test::Outcome outcome = axrt_test::Take(axrt_group_join(id.c_str(), 1, 0, instance.devices[0], nullptr, &group));
  axrt_group_destroy(group);
  if (outcome.code == AXRT_STATUS_CODE_UNAVAILABLE) {
    WARN("skipped: " << outcome.message);
    return false;
  }
  REQUIRE(outcome.code == AXRT_STATUS_CODE_OK);
  return true;
}

// Joins `size` members, one a thread, rank r with device r; runs
// `body(rank, group)` in each; returns each member's join outcome.
std::vector<axrt_test::Outcome> RunMembers(Instance& instance, const std::string& id, uint32_t size,
                                           const std::function<void(uint32_t, axrt_group_t)>& body,
                                           uint64_t rendezvous_timeout_ns = 20'000'000'000ull) {
  std::vector<axrt_test::Outcome> outcomes(size);
  std::vector<std::thread> threads;
  Findings findings;
  g_findings = &findings;
  for (uint32_t r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
      options.rendezvous_timeout_ns = rendezvous_timeout_ns;
      options.timeout_ns = 20'000'000'000ull;
      axrt_group_t group = nullptr;
      outcomes[r] = axrt_test::Take(axrt_group_join(id.c_str(), size, r, instance.devices[r], &options, &group));
      if (group != nullptr) {
        body(r, group);
        axrt_group_destroy(group);
      }
    });
  }
  for (auto& t : threads) t.join();
  g_findings = nullptr;
  for (const std::string& e : findings.errors) FAIL_CHECK(e);
  return outcomes;
}

// A host buffer of the member's device holding `values`.
struct Vector {
  Vector(axrt_device_t device, const std::vector<float>& values, size_t capacity = 0) {
    capacity = std::max(capacity, values.size());
    axrt_status_free(axrt_buffer_allocate(device, std::max<size_t>(capacity, 1) * 4, nullptr, &buffer));
    void* data = nullptr;
    axrt_status_free(axrt_buffer_map(buffer, &data));
    host = static_cast<float*>(data);
    std::copy(values.begin(), values.end(), host);
  }
  ~Vector() { axrt_buffer_release(buffer); }
  axrt_buffer_t buffer = nullptr;
  float* host = nullptr;
};

std::vector<float> Input(uint32_t rank, size_t n) { return axrt_test::RandomFloats(n, 100 + rank); }


}  // namespace

namespace {

// Member `rank` all-reduces (sum) `mine` on a stream of its own; its
// element `at` must then be `want`.
void AllReduceSum(Instance& instance, uint32_t rank, axrt_group_t group,
                  const std::vector<float>& mine, size_t at, float want) {
  axrt_stream_t stream = nullptr;
  T_OK(axrt_stream_create(instance.devices[rank], nullptr, &stream));
  Vector v(instance.devices[rank], mine);
  axrt_collective_member_t me = {stream, v.buffer, 0, v.buffer, 0};
  T_OK(axrt_group_all_reduce(group, &me, mine.size(), AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  T_OK(axrt_stream_synchronize(stream));
  T_CHECK(v.host[at] == want);
  axrt_stream_release(stream);
}

}  // namespace

TEST_CASE("axrt_group_join refuses bad arguments, naming them", "[group_join]") {
  Instance instance;
  axrt_group_t group = nullptr;
  axrt_device_t cpu = instance.devices[0];
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 1, 0, cpu, nullptr, nullptr),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "out_group");
  REQUIRE_CALL_FAILS(axrt_group_join(nullptr, 1, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "id is empty");
  REQUIRE_CALL_FAILS(axrt_group_join("", 1, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "id is empty");
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 0, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "world of 0");
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 2, 2, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "rank 2 of a world of 2");
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 2, 0, nullptr, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "device is NULL");
  axrt_group_join_options_t small = AXRT_GROUP_JOIN_OPTIONS_INIT;
  small.struct_size = 4;
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 1, 0, cpu, &small, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "struct_size");
  axrt_group_join_options_t nccl = AXRT_GROUP_JOIN_OPTIONS_INIT;
  nccl.backend = "nccl";
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1:1", 1, 0, cpu, &nccl, &group),
                     AXRT_STATUS_CODE_UNIMPLEMENTED, "nccl");
  REQUIRE(group == nullptr);
  if (!HaveTransport(instance)) return;
  REQUIRE_CALL_FAILS(axrt_group_join("udp://127.0.0.1:1", 1, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "tcp://HOST:PORT");
  REQUIRE_CALL_FAILS(axrt_group_join("tcp://127.0.0.1", 1, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "port of 1-65535");
  REQUIRE_CALL_FAILS(axrt_group_join("file://", 1, 0, cpu, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "file://DIR");
  REQUIRE(group == nullptr);

  // One member: its own collectives, and what it cannot do.
  const std::string id = TcpId("/alone");
  REQUIRE_CALL_OK(axrt_group_join(id.c_str(), 1, 0, cpu, nullptr, &group));
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  REQUIRE_CALL_OK(axrt_group_query_info(group, &info));
  CHECK(info.rank == 0);
  CHECK(info.size == 1);
  CHECK(std::string(info.backend) == "cpu");
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(cpu, nullptr, &stream));
  Vector v(cpu, {1, 2, 3});
  axrt_collective_member_t me = {stream, v.buffer, 0, v.buffer, 0};
  REQUIRE_CALL_OK(axrt_group_all_reduce(group, &me, 3, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(v.host[2] == 3.0f);
  REQUIRE_CALL_FAILS(axrt_group_enqueue_part(group, 1, AXRT_COLLECTIVE_ALL_REDUCE, &me, 3,
                                             AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                     AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 1");
  axrt_group_transfer_t transfer = {};
  REQUIRE_CALL_FAILS(axrt_group_send_recv(group, &transfer, 1), AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "spans processes");
  axrt_device_t device = nullptr;
  REQUIRE_CALL_OK(axrt_group_get_device(group, 0, &device));
  CHECK(device == cpu);
  axrt_device_release(device);
  axrt_stream_release(stream);
  axrt_group_destroy(group);
}

TEST_CASE("Members in separate threads run every collective", "[group_join]") {
  Instance instance;
  if (!HaveTransport(instance)) return;
  constexpr uint32_t kSize = 3;
  // Small (every vector to every member) and large (in blocks), uneven.
  for (const size_t n : {size_t{7}, size_t{40001}}) {
    std::array<std::vector<float>, kSize> inputs;
    for (uint32_t r = 0; r < kSize; ++r) inputs[r] = Input(r, n * kSize);
    const std::string id = TcpId();
    auto outcomes = RunMembers(instance, id, kSize, [&](uint32_t rank, axrt_group_t group) {
      axrt_device_t device = instance.devices[rank];
      axrt_stream_t stream = nullptr;
      T_OK(axrt_stream_create(device, nullptr, &stream));
      const std::vector<float> mine(inputs[rank].begin(), inputs[rank].begin() + n);
      Vector reduced(device, mine), gathered(device, {}, n * kSize), scattered(device, {}, n),
          whole(device, inputs[rank]), broadcast(device, mine);
      axrt_collective_member_t in_place = {stream, reduced.buffer, 0, reduced.buffer, 0};
      T_OK(axrt_group_all_reduce(group, &in_place, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
      axrt_collective_member_t gather = {stream, reduced.buffer, 0, gathered.buffer, 0};
      // Gathers the reduced vectors: every block is the same.
      T_OK(axrt_group_all_gather(group, &gather, n, AXRT_DTYPE_FLOAT32));
      axrt_collective_member_t scatter = {stream, whole.buffer, 0, scattered.buffer, 0};
      T_OK(axrt_group_reduce_scatter(group, &scatter, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_MAX));
      axrt_collective_member_t bcast = {stream, broadcast.buffer, 0, broadcast.buffer, 0};
      T_OK(axrt_group_enqueue_part(group, rank, AXRT_COLLECTIVE_BROADCAST, &bcast, n,
                                              AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 2));
      T_OK(axrt_stream_synchronize(stream));
      for (size_t i = 0; i < n; ++i) {
        const float sum = (inputs[0][i] + inputs[1][i]) + inputs[2][i];  // rank order
        bool ok = T_CHECK(reduced.host[i] == sum);
        for (uint32_t b = 0; b < kSize; ++b) ok = ok && T_CHECK(gathered.host[b * n + i] == sum);
        const size_t at = rank * n + i;
        ok = ok && T_CHECK(scattered.host[i] == std::max({inputs[0][at], inputs[1][at], inputs[2][at]}));
        ok = ok && T_CHECK(broadcast.host[i] == inputs[2][i]);
        if (!ok) break;
      }
      axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
      T_OK(axrt_group_query_info(group, &info));
      T_CHECK(info.collectives == 4);
      T_CHECK(info.rank == static_cast<int32_t>(rank));
      axrt_device_t other = nullptr;
      T_FAILS(axrt_group_get_device(group, (rank + 1) % kSize, &other),
                         AXRT_STATUS_CODE_FAILED_PRECONDITION, "another process");
      axrt_collective_member_t entry = in_place;
      T_FAILS(axrt_group_enqueue_part(group, (rank + 1) % kSize, AXRT_COLLECTIVE_ALL_REDUCE,
                                                 &entry, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                         AXRT_STATUS_CODE_INVALID_ARGUMENT, "another process");
      axrt_stream_release(stream);
    });
    for (const auto& o : outcomes) {
      INFO(o.message);
      REQUIRE(o.code == AXRT_STATUS_CODE_OK);
    }
  }
}

TEST_CASE("A file rendezvous meets the members too", "[group_join]") {
  Instance instance;
  if (!HaveTransport(instance)) return;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("axrt_group_join_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string id = "file://" + dir.string() + "#first";
  auto outcomes = RunMembers(instance, id, 2, [&](uint32_t rank, axrt_group_t group) {
    AllReduceSum(instance, rank, group, {float(rank + 1)}, 0, 3.0f);
  });
  for (const auto& o : outcomes) {
    INFO(o.message);
    CHECK(o.code == AXRT_STATUS_CODE_OK);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("The rendezvous names a missing member and a different world size", "[group_join]") {
  Instance instance;
  if (!HaveTransport(instance)) return;
  // Three expected, two come.
  const std::string id = TcpId();
  std::vector<axrt_test::Outcome> outcomes(2);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
      options.rendezvous_timeout_ns = 1'000'000'000ull;
      axrt_group_t group = nullptr;
      outcomes[r] = axrt_test::Take(axrt_group_join(id.c_str(), 3, r, instance.devices[r], &options, &group));
      axrt_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(outcomes[0].code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
  CHECK(outcomes[0].message.find("member(s) 2 of 3 did not arrive") != std::string::npos);
  CHECK(outcomes[1].code != AXRT_STATUS_CODE_OK);

  const std::string sizes = TcpId();
  threads.clear();
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
      options.rendezvous_timeout_ns = 5'000'000'000ull;
      axrt_group_t group = nullptr;
      outcomes[r] = axrt_test::Take(axrt_group_join(sizes.c_str(), 2 + r, r, instance.devices[r], &options, &group));
      axrt_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& o : outcomes) {
    INFO(o.message);
    CHECK(o.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(o.message.find("world size") != std::string::npos);
  }
}

TEST_CASE("A member that leaves fails the others' collectives, naming it", "[group_join]") {
  Instance instance;
  if (!HaveTransport(instance)) return;
  const std::string id = TcpId();
  std::atomic<bool> left{false};
  auto outcomes = RunMembers(instance, id, 2, [&](uint32_t rank, axrt_group_t group) {
    if (rank == 1) {
      left = true;
      return;  // destroyed at once: its connections close
    }
    while (!left) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    axrt_stream_t stream = nullptr;
    T_OK(axrt_stream_create(instance.devices[0], nullptr, &stream));
    Vector v(instance.devices[0], {1.0f});
    axrt_collective_member_t me = {stream, v.buffer, 0, v.buffer, 0};
    const auto start = std::chrono::steady_clock::now();
    T_OK(axrt_group_all_reduce(group, &me, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    T_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_ABORTED, "member 1",
                       "is gone");
    T_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    T_OK(axrt_group_query_info(group, &info));
    T_CHECK(info.state == AXRT_GROUP_STATE_ABORTED);
    T_CHECK(info.failed_rank == 1);
    T_CHECK(info.failure_code == AXRT_STATUS_CODE_UNAVAILABLE);
    // Later collectives fail at once.
    axrt_stream_t fresh = nullptr;
    T_OK(axrt_stream_create(instance.devices[0], nullptr, &fresh));
    me.stream = fresh;
    T_FAILS(axrt_group_all_reduce(group, &me, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                       AXRT_STATUS_CODE_ABORTED, "member 1");
    axrt_stream_release(fresh);
    axrt_stream_release(stream);
  });
  for (const auto& o : outcomes) {
    INFO(o.message);
    REQUIRE(o.code == AXRT_STATUS_CODE_OK);
  }
}

namespace {

size_t CountEntries(const char* dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("Joining the same id again and again leaks no thread and no socket", "[group_join]") {
  Instance instance;
  if (!HaveTransport(instance)) return;
  const std::string id = TcpId();
  // The first round starts rank 0's rendezvous server, which stays.
  auto run_round = [&] {
    auto outcomes = RunMembers(instance, id, 2, [&](uint32_t rank, axrt_group_t group) {
      AllReduceSum(instance, rank, group, {1.0f, 2.0f}, 1, 4.0f);
    });
    for (const auto& o : outcomes) {
      INFO(o.message);
      REQUIRE(o.code == AXRT_STATUS_CODE_OK);
    }
  };
  run_round();
  const size_t threads = CountEntries("/proc/self/task");
  const size_t fds = CountEntries("/proc/self/fd");
  for (int round = 0; round < 10; ++round) run_round();
  // Each round's group opened the id's next epoch, and left nothing behind.
  CHECK(CountEntries("/proc/self/task") == threads);
  CHECK(CountEntries("/proc/self/fd") == fds);
}
