// Device groups on CPU devices (ctest runs this with AXRT_CPU_DEVICES=4):
// every collective against a float64 / exact reference computed here, the
// checks of the arguments, and failure, abort and rebuilding on the members
// that remain. tests/python/test_group.py compares against numpy at every
// size; this file covers the C API's contract.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "base/float16.h"
#include "tests/unit/group_support.h"
#include "tests/unit/status_check.h"

namespace {

using Group = axrt_test::TestGroup;
using axrt_test::BlockUntilSet;
using axrt_test::FailStream;
using axrt_test::RandomFloats;
using axrt_test::SyncAll;

constexpr uint32_t kDevices = 4;

// Run alone, the program sets the variable itself (ctest sets it too).
const bool kDevicesSet = setenv("AXRT_CPU_DEVICES", "4", /*overwrite=*/0) == 0;

struct Instance : axrt_test::CpuInstance {
  Instance() : CpuInstance(kDevicesSet ? kDevices : 0) { REQUIRE(kDevicesSet); }
};

// A buffer of `bytes` on `device` with `data` in it.
struct HostBuffer {
  HostBuffer(axrt_device_t device, uint64_t bytes, const void* data = nullptr) : size(bytes) {
    REQUIRE_CALL_OK(axrt_buffer_allocate(device, bytes == 0 ? 1 : bytes, nullptr, &buffer));
    void* host = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(buffer, &host));
    pointer = static_cast<std::byte*>(host);
    if (data != nullptr && bytes != 0) std::memcpy(pointer, data, bytes);
  }
  ~HostBuffer() { axrt_buffer_release(buffer); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  template <typename T>
  std::vector<T> read() const {
    std::vector<T> out(size / sizeof(T));
    if (size != 0) std::memcpy(out.data(), pointer, size);
    return out;
  }
  axrt_buffer_t buffer = nullptr;
  std::byte* pointer = nullptr;
  uint64_t size;
};

// Counts the elements of a result that fail a check, so that a test makes
// one assertion per result rather than one per element.
struct Mismatches {
  uint64_t count = 0;
  uint64_t first = 0;
  void check(bool ok, uint64_t index) {
    if (!ok && count++ == 0) first = index;
  }
};
#define REQUIRE_NO_MISMATCH(m)                                         \
  do {                                                                 \
    INFO((m).count << " elements wrong, the first at " << (m).first); \
    REQUIRE((m).count == 0);                                           \
  } while (false)

// All-reduce of `n` float32 per member on the first `members` devices,
// checked against a float64 reference.
void check_all_reduce_f32(Instance& in, uint32_t members, uint64_t n, axrt_reduce_op_t op,
                          bool in_place) {
  std::vector<axrt_device_t> devices(in.devices.begin(), in.devices.begin() + members);
  Group g(devices);
  std::vector<std::vector<float>> inputs;
  std::vector<std::unique_ptr<HostBuffer>> send, recv;
  std::vector<axrt_collective_member_t> parts(members);
  for (uint32_t r = 0; r < members; ++r) {
    inputs.push_back(RandomFloats(n, 100 + r));
    send.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4, inputs[r].data()));
    recv.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4));
    parts[r] = {in.streams[r], send[r]->buffer, 0, in_place ? send[r]->buffer : recv[r]->buffer, 0};
  }
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), n, AXRT_DTYPE_FLOAT32, op));
  SyncAll(in.streams, members);
  std::vector<float> first;
  for (uint32_t r = 0; r < members; ++r) {
    std::vector<float> got = (in_place ? send[r] : recv[r])->read<float>();
    if (r == 0) first = got;
    REQUIRE(got == first);  // bit-identical on every member
  }
  Mismatches bad;
  for (uint64_t i = 0; i < n; ++i) {
    double expect = inputs[0][i];
    for (uint32_t r = 1; r < members; ++r) {
      const double x = inputs[r][i];
      expect = op == AXRT_REDUCE_SUM ? expect + x : op == AXRT_REDUCE_MAX ? std::max(expect, x) : std::min(expect, x);
    }
    bad.check(std::abs(first[i] - expect) <= 1e-5 * members * 4, i);
  }
  REQUIRE_NO_MISMATCH(bad);
}

}  // namespace

TEST_CASE("all-reduce of float32 matches a float64 reference at every size", "[group]") {
  Instance in;
  const axrt_reduce_op_t op = GENERATE(as<axrt_reduce_op_t>(), AXRT_REDUCE_SUM, AXRT_REDUCE_MAX, AXRT_REDUCE_MIN);
  const uint32_t members = GENERATE(1u, 2u, 3u, 4u);
  // 0, fewer elements than members, uneven, and past one ring slice
  // (65536 float32) so that several rounds run.
  for (uint64_t n : {0ull, 1ull, 3ull, 5ull, 1000ull, 65536ull * 4 + 7}) {
    INFO(members << " members, " << n << " elements, op " << op);
    check_all_reduce_f32(in, members, n, op, /*in_place=*/n % 2 == 1);
  }
}

TEST_CASE("all-reduce of integers wraps exactly; 16-bit floats round each step", "[group]") {
  Instance in;
  Group g(in.devices);
  const uint64_t n = 1003;
  std::vector<std::unique_ptr<HostBuffer>> i32, i8, f16, bf16;
  std::vector<axrt_collective_member_t> p32(kDevices), p8(kDevices), p16(kDevices), pb16(kDevices);
  std::vector<std::vector<int32_t>> v32(kDevices);
  std::vector<std::vector<int8_t>> v8(kDevices);
  std::vector<std::vector<float>> vf(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    std::mt19937 rng(7 + r);
    v32[r].resize(n);
    v8[r].resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      v32[r][i] = static_cast<int32_t>(rng());  // sums overflow: they wrap
      v8[r][i] = static_cast<int8_t>(rng());
    }
    vf[r] = RandomFloats(n, 50 + r);
    std::vector<uint16_t> h(n), b(n);
    for (uint64_t i = 0; i < n; ++i) {
      h[i] = axrt::float_to_half(vf[r][i]);
      b[i] = axrt::float_to_bfloat16(vf[r][i]);
    }
    i32.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4, v32[r].data()));
    i8.push_back(std::make_unique<HostBuffer>(in.devices[r], n, v8[r].data()));
    f16.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 2, h.data()));
    bf16.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 2, b.data()));
    p32[r] = {in.streams[r], i32[r]->buffer, 0, i32[r]->buffer, 0};
    p8[r] = {in.streams[r], i8[r]->buffer, 0, i8[r]->buffer, 0};
    p16[r] = {in.streams[r], f16[r]->buffer, 0, f16[r]->buffer, 0};
    pb16[r] = {in.streams[r], bf16[r]->buffer, 0, bf16[r]->buffer, 0};
  }
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, p32.data(), n, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, p8.data(), n, AXRT_DTYPE_INT8, AXRT_REDUCE_MIN));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, p16.data(), n, AXRT_DTYPE_FLOAT16, AXRT_REDUCE_SUM));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, pb16.data(), n, AXRT_DTYPE_BFLOAT16, AXRT_REDUCE_MAX));
  SyncAll(in.streams, kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    const auto got32 = i32[r]->read<int32_t>();
    const auto got8 = i8[r]->read<int8_t>();
    const auto got16 = f16[r]->read<uint16_t>();
    const auto gotb = bf16[r]->read<uint16_t>();
    Mismatches bad;
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t sum = 0;
      int8_t low = 127;
      double fsum = 0, fmax = -1e30;
      for (uint32_t m = 0; m < kDevices; ++m) {
        sum += static_cast<uint32_t>(v32[m][i]);
        low = std::min(low, v8[m][i]);
        fsum += axrt::half_to_float(axrt::float_to_half(vf[m][i]));
        fmax = std::max<double>(fmax, axrt::bfloat16_to_float(axrt::float_to_bfloat16(vf[m][i])));
      }
      bad.check(got32[i] == static_cast<int32_t>(sum), i);
      bad.check(got8[i] == low, i);
      // Three roundings to half of partial sums below 16: each within 2^-7.
      bad.check(std::abs(axrt::half_to_float(got16[i]) - fsum) <= 3 * 0.0078125 + 1e-6, i);
      bad.check(axrt::bfloat16_to_float(gotb[i]) == fmax, i);  // max is exact
    }
    REQUIRE_NO_MISMATCH(bad);
  }
}

TEST_CASE("all-gather, reduce-scatter and broadcast, in place and apart", "[group]") {
  Instance in;
  Group g(in.devices);
  const bool in_place = GENERATE(false, true);
  for (uint64_t n : {0ull, 1ull, 7ull, 70000ull}) {
    INFO(n << " elements per member, in place " << in_place);
    std::vector<std::vector<float>> values(kDevices);
    std::vector<std::unique_ptr<HostBuffer>> big, small;
    std::vector<axrt_collective_member_t> gather(kDevices), scatter(kDevices), bcast(kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      values[r] = RandomFloats(n * kDevices, 300 + r);
      big.push_back(std::make_unique<HostBuffer>(in.devices[r], n * kDevices * 4, values[r].data()));
      small.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4, values[r].data()));
    }
    // All-gather: member r's block r of `big` (in place) or `small`.
    for (uint32_t r = 0; r < kDevices; ++r) {
      gather[r] = {in.streams[r], in_place ? big[r]->buffer : small[r]->buffer,
                   in_place ? r * n * 4 : 0, big[r]->buffer, 0};
    }
    REQUIRE_CALL_OK(axrt_group_all_gather(g.group, gather.data(), n, AXRT_DTYPE_FLOAT32));
    SyncAll(in.streams, kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      const auto got = big[r]->read<float>();
      Mismatches bad;
      for (uint32_t b = 0; b < kDevices; ++b) {
        for (uint64_t i = 0; i < n; ++i) {
          // Block b came from member b: its big block b (in place) or its small's start.
          bad.check(got[b * n + i] == values[b][(in_place ? b * n : 0) + i], b * n + i);
        }
      }
      REQUIRE_NO_MISMATCH(bad);
    }
    // Reduce-scatter of fresh values: member r gets block r's sums.
    for (uint32_t r = 0; r < kDevices; ++r) {
      if (n != 0) std::memcpy(big[r]->pointer, values[r].data(), n * kDevices * 4);
      scatter[r] = {in.streams[r], big[r]->buffer, 0, in_place ? big[r]->buffer : small[r]->buffer,
                    in_place ? r * n * 4 : 0};
    }
    REQUIRE_CALL_OK(axrt_group_reduce_scatter(g.group, scatter.data(), n, AXRT_DTYPE_FLOAT32,
                                              AXRT_REDUCE_SUM));
    SyncAll(in.streams, kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      const auto got = (in_place ? big[r] : small[r])->read<float>();
      Mismatches bad;
      for (uint64_t i = 0; i < n; ++i) {
        double expect = 0;
        for (uint32_t m = 0; m < kDevices; ++m) expect += values[m][r * n + i];
        bad.check(std::abs(got[(in_place ? r * n : 0) + i] - expect) <= 1e-4, i);
      }
      REQUIRE_NO_MISMATCH(bad);
    }
    // Broadcast from member 2.
    for (uint32_t r = 0; r < kDevices; ++r) {
      if (n != 0) std::memcpy(small[r]->pointer, values[r].data(), n * 4);
      bcast[r] = {in.streams[r], r == 2 ? small[r]->buffer : nullptr, 0,
                  in_place || r != 2 ? small[r]->buffer : big[r]->buffer, 0};
    }
    REQUIRE_CALL_OK(axrt_group_broadcast(g.group, bcast.data(), n, AXRT_DTYPE_FLOAT32, 2));
    SyncAll(in.streams, kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      const auto got = (in_place || r != 2 ? small[r] : big[r])->read<float>();
      REQUIRE(std::equal(got.begin(), got.begin() + n, values[2].begin()));
    }
  }
}

TEST_CASE("send/recv moves each member's buffer to the next, as one operation", "[group]") {
  Instance in;
  Group g(in.devices);
  const uint64_t n = 4099;
  std::vector<std::vector<int64_t>> values(kDevices);
  std::vector<std::unique_ptr<HostBuffer>> src, dst;
  std::vector<axrt_group_transfer_t> transfers;
  for (uint32_t r = 0; r < kDevices; ++r) {
    values[r].resize(n);
    for (uint64_t i = 0; i < n; ++i) values[r][i] = static_cast<int64_t>(r * 1000000 + i);
    src.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 8, values[r].data()));
    dst.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 8));
  }
  for (uint32_t r = 0; r < kDevices; ++r) {
    const uint32_t to = (r + 1) % kDevices;
    transfers.push_back({r, in.streams[r], src[r]->buffer, 0, to, in.streams[to], dst[to]->buffer, 0,
                         n, AXRT_DTYPE_INT64});
  }
  REQUIRE_CALL_OK(axrt_group_send_recv(g.group, transfers.data(), transfers.size()));
  SyncAll(in.streams, kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE(dst[r]->read<int64_t>() == values[(r + kDevices - 1) % kDevices]);
  }
  // A pair: only members 1 and 3 take part; the others' streams are not involved.
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[0], BlockUntilSet, &release));
  axrt_group_transfer_t pair = {3, in.streams[3], src[3]->buffer, 8, 1, in.streams[1], dst[1]->buffer,
                                0, 10, AXRT_DTYPE_INT64};
  REQUIRE_CALL_OK(axrt_group_send_recv(g.group, &pair, 1));
  REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[1]));
  REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[3]));
  const auto got = dst[1]->read<int64_t>();
  for (uint64_t i = 0; i < 10; ++i) REQUIRE(got[i] == values[3][i + 1]);
  release = true;
  REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[0]));
}

TEST_CASE("collectives check their arguments and queue nothing on an error", "[group]") {
  Instance in;
  Group g(in.devices);
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, parts.data(), 17, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_OUT_OF_RANGE, "member 0", "64 bytes");
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, parts.data(), 4, AXRT_DTYPE_INT4, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "element type");
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, parts.data(), 4, AXRT_DTYPE_FLOAT32, 7),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "not a reduction");
  REQUIRE_CALL_FAILS(axrt_group_broadcast(g.group, parts.data(), 4, AXRT_DTYPE_FLOAT32, 4),
                     AXRT_STATUS_CODE_OUT_OF_RANGE, "root 4");
  std::vector<axrt_collective_member_t> wrong = parts;
  wrong[2].stream = in.streams[1];
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, wrong.data(), 4, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "member 2's stream", "cpu:2");
  wrong = parts;
  wrong[1].recv_buffer = bufs[0]->buffer;
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, wrong.data(), 4, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "member 1's receive buffer is on cpu:0");
  wrong = parts;
  wrong[3].recv_offset = 4;  // overlaps the send range without being in place
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, wrong.data(), 4, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "overlap");
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, nullptr, 4, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "members is NULL");
  axrt_group_transfer_t self = {1, in.streams[1], bufs[1]->buffer, 0, 1, in.streams[1], bufs[1]->buffer, 0,
                                1, AXRT_DTYPE_FLOAT32};
  REQUIRE_CALL_FAILS(axrt_group_send_recv(g.group, &self, 1), AXRT_STATUS_CODE_INVALID_ARGUMENT, "itself");
  REQUIRE(g.info().collectives == 0);
  REQUIRE(g.info().state == AXRT_GROUP_STATE_ACTIVE);

  // Groups themselves.
  axrt_group_t group = nullptr;
  std::vector<axrt_device_t> twice = {in.devices[0], in.devices[1], in.devices[0]};
  REQUIRE_CALL_FAILS(axrt_group_create(twice.data(), twice.size(), nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "cpu:0 is both member 0 and member 2");
  REQUIRE_CALL_FAILS(axrt_group_create(in.devices.data(), 0, nullptr, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "at least one device");
  axrt_group_options_t options = AXRT_GROUP_OPTIONS_INIT;
  options.backend = "nccl";
  REQUIRE_CALL_FAILS(axrt_group_create(in.devices.data(), 2, &options, &group),
                     AXRT_STATUS_CODE_UNIMPLEMENTED, "nccl");
  options.backend = "mpi";
  REQUIRE_CALL_FAILS(axrt_group_create(in.devices.data(), 2, &options, &group),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "unknown backend 'mpi'");
  REQUIRE(group == nullptr);
  {
    Instance other;
    std::vector<axrt_device_t> mixed = {in.devices[0], other.devices[1]};
    REQUIRE_CALL_FAILS(axrt_group_create(mixed.data(), mixed.size(), nullptr, &group),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "member 1 (cpu:1) cannot join member 0 (cpu:0)");
  }
  axrt_device_t device = nullptr;
  REQUIRE_CALL_FAILS(axrt_group_get_device(g.group, 4, &device), AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 4");
  REQUIRE_CALL_OK(axrt_group_get_device(g.group, 3, &device));
  REQUIRE(device == in.devices[3]);
  axrt_device_release(device);
  const axrt_group_info_t info = g.info();
  REQUIRE(std::string(info.label) == "test");
  REQUIRE(std::string(info.backend) == "cpu");
  REQUIRE(info.size == kDevices);
  REQUIRE(info.failed_rank == -1);
}

TEST_CASE("a member whose stream failed aborts the group; the rest rebuild and go on", "[group]") {
  Instance in;
  auto g = std::make_unique<Group>(in.devices, 0, "tp");
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  const uint64_t n = 1000;
  for (uint32_t r = 0; r < kDevices; ++r) {
    std::vector<float> ones(n, 1.0f);
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4, ones.data()));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  // Member 2 fails before the collective reaches it; three more are queued
  // (while member 2 is held, so that the group is still active then).
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[2], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[2], FailStream, nullptr));
  for (int i = 0; i < 4; ++i) {
    REQUIRE_CALL_OK(axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  }
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[2]), AXRT_STATUS_CODE_INTERNAL, "injected failure");
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED, "group 'tp'",
                       "member 2 (cpu:2) failed", "injected failure");
  }
  const axrt_group_info_t info = g->info();
  REQUIRE(info.state == AXRT_GROUP_STATE_ABORTED);
  REQUIRE(info.failed_rank == 2);
  REQUIRE(info.failure_code == AXRT_STATUS_CODE_INTERNAL);
  REQUIRE(std::string(info.failure).find("injected failure") != std::string::npos);
  REQUIRE(info.collectives == 4);
  // A new collective on the aborted group is refused at once.
  in.new_streams();
  for (uint32_t r = 0; r < kDevices; ++r) parts[r].stream = in.streams[r];
  REQUIRE_CALL_FAILS(axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                     AXRT_STATUS_CODE_ABORTED, "member 2 (cpu:2) failed");
  // Stop, restructure, resume: a group of the three that remain.
  g.reset();
  std::vector<axrt_device_t> rest = {in.devices[0], in.devices[1], in.devices[3]};
  Group again(rest, 0, "tp-3");
  std::vector<axrt_collective_member_t> three = {parts[0], parts[1], parts[3]};
  for (uint32_t r : {0u, 1u, 3u}) {
    std::vector<float> v(n, static_cast<float>(r));
    std::memcpy(bufs[r]->pointer, v.data(), n * 4);
  }
  REQUIRE_CALL_OK(axrt_group_all_reduce(again.group, three.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[r]));
    REQUIRE(bufs[r]->read<float>() == std::vector<float>(n, 4.0f));
  }
}

TEST_CASE("a member that never arrives times the group out; nobody hangs", "[group]") {
  Instance in;
  Group g(in.devices, /*timeout_ns=*/200'000'000, "slow");
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[3], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  std::vector<axrt_collective_member_t> gather = parts;
  for (uint32_t r = 0; r < kDevices; ++r) gather[r].send_offset = r * 16;  // in place
  REQUIRE_CALL_OK(axrt_group_all_gather(g.group, gather.data(), 4, AXRT_DTYPE_FLOAT32));
  // Members 0-2 finish (with failures) while member 3 is still held.
  std::vector<axrt_status_code_t> codes;
  for (uint32_t r = 0; r < 3; ++r) {
    axrt_test::Outcome o = axrt_test::Take(axrt_stream_synchronize(in.streams[r]));
    INFO(o.message);
    REQUIRE((o.code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED || o.code == AXRT_STATUS_CODE_ABORTED));
    REQUIRE(o.message.find("member 3 (cpu:3) did not reach all_reduce #1") != std::string::npos);
    codes.push_back(o.code);
  }
  REQUIRE(std::count(codes.begin(), codes.end(), AXRT_STATUS_CODE_DEADLINE_EXCEEDED) >= 1);
  REQUIRE_FALSE(release.load());
  const axrt_group_info_t info = g.info();
  REQUIRE(info.failed_rank == 3);
  REQUIRE(info.failure_code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
  // Member 3 arrives late: its collectives fail at once too.
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[3]), AXRT_STATUS_CODE_ABORTED, "member 3");
}

TEST_CASE("the application aborts a group whose members wait for a lost one", "[group]") {
  Instance in;
  Group g(in.devices, UINT64_MAX, "waiting");
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[1], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_group_broadcast(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, 0));
  // Members 0, 2 and 3 wait with no time limit until the abort.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE_CALL_FAILS(axrt_group_abort(g.group, 4, nullptr), AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 4");
  REQUIRE_CALL_OK(axrt_group_abort(g.group, 1, "its host stopped answering"));
  REQUIRE_CALL_OK(axrt_group_abort(g.group, 2, "a second failure"));  // the first stays
  for (uint32_t r : {0u, 2u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "member 1 (cpu:1) failed: its host stopped answering");
  }
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[1]), AXRT_STATUS_CODE_ABORTED, "member 1");
  REQUIRE(g.info().failed_rank == 1);
}

TEST_CASE("many collectives from several threads on one group stay in one order", "[group]") {
  Instance in;
  Group g(in.devices);
  const uint64_t n = 257;
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  for (uint32_t r = 0; r < kDevices; ++r) {
    std::vector<int32_t> v(n * 8, 1);
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 8 * 4, v.data()));
  }
  // Four threads, each on its own slice of the buffers, five all-reduces each.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<axrt_collective_member_t> parts(kDevices);
      for (uint32_t r = 0; r < kDevices; ++r) {
        parts[r] = {in.streams[r], bufs[r]->buffer, t * n * 4, bufs[r]->buffer, t * n * 4};
      }
      for (int i = 0; i < 5; ++i) {
        axrt_status_t s = axrt_group_all_reduce(g.group, parts.data(), n, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM);
        if (s) ++failures;
        axrt_status_free(s);
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(failures == 0);
  SyncAll(in.streams, kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    const auto got = bufs[r]->read<int32_t>();
    Mismatches bad;
    for (uint64_t i = 0; i < n * 4; ++i) bad.check(got[i] == 1024, i);  // 4^5
    for (uint64_t i = n * 4; i < n * 8; ++i) bad.check(got[i] == 1, i);
    REQUIRE_NO_MISMATCH(bad);
  }
  REQUIRE(g.info().collectives == 20);
}

TEST_CASE("a trace shows each member's part of a collective", "[group][trace]") {
  Instance in;
  Group g(in.devices, 0, "traced");
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 4096));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  const std::string path = "group_test_trace_" + std::to_string(getpid()) + ".json";
  axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
  options.path = path.c_str();
  REQUIRE_CALL_OK(axrt_instance_trace_start(in.instance, &options));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 1024, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  SyncAll(in.streams, kDevices);
  REQUIRE_CALL_OK(axrt_instance_trace_stop(in.instance, nullptr));
  std::FILE* file = std::fopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::string text;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, file)) > 0;) text.append(chunk, n);
  std::fclose(file);
  std::remove(path.c_str());
  size_t slices = 0;
  for (size_t at = 0; (at = text.find("\"cat\":\"collective\"", at)) != std::string::npos; ++at) ++slices;
  REQUIRE(slices == kDevices);
  REQUIRE(text.find("\"group\":\"traced\"") != std::string::npos);
  REQUIRE(text.find("\"bytes\":4096") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Parts queued by each member alone (axrt_group_enqueue_part), as a
// function's collective commands queue them.

namespace {

// Member `r`'s part of a collective over its own buffers.
axrt_collective_member_t Part(Instance& in, uint32_t r, const HostBuffer& send, const HostBuffer& recv,
                              uint64_t send_offset = 0, uint64_t recv_offset = 0) {
  return {in.streams[r], send.buffer, send_offset, recv.buffer, recv_offset};
}

}  // namespace

TEST_CASE("members queue their parts alone, in any order; each collective meets by its number",
          "[group][part]") {
  Instance in;
  Group g(in.devices, 0, "parts");
  const uint64_t n = 3000;  // a ring for the all-reduce (over 64 KiB per member), direct below
  std::vector<std::vector<float>> inputs;
  std::vector<std::unique_ptr<HostBuffer>> data, gathered, scattered, small;
  for (uint32_t r = 0; r < kDevices; ++r) {
    inputs.push_back(RandomFloats(n * kDevices, 500 + r));
    data.push_back(std::make_unique<HostBuffer>(in.devices[r], n * kDevices * 4, inputs[r].data()));
    gathered.push_back(std::make_unique<HostBuffer>(in.devices[r], n * kDevices * 4));
    scattered.push_back(std::make_unique<HostBuffer>(in.devices[r], n * 4));
    const float mine = static_cast<float>(r + 1);
    small.push_back(std::make_unique<HostBuffer>(in.devices[r], 16 * 4));
    std::vector<float> v(16, mine);
    std::memcpy(small[r]->pointer, v.data(), 16 * 4);
  }
  // Each member queues, in its own order of ranks, the same four
  // collectives: reduce-scatter of `data`, all-gather of its first n
  // elements, a broadcast from member 2, an all-reduce (max) of `small`.
  // (Called on other threads too: no assertion inside; the statuses are
  // checked by the caller.)
  auto queue = [&](uint32_t r) {
    std::vector<axrt_status_t> statuses;
    statuses.push_back(axrt_group_enqueue_part(
        g.group, r, AXRT_COLLECTIVE_REDUCE_SCATTER, std::array{Part(in, r, *data[r], *scattered[r])}.data(),
        n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
    statuses.push_back(axrt_group_enqueue_part(
        g.group, r, AXRT_COLLECTIVE_ALL_GATHER, std::array{Part(in, r, *data[r], *gathered[r])}.data(),
        n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
    statuses.push_back(axrt_group_enqueue_part(
        g.group, r, AXRT_COLLECTIVE_BROADCAST, std::array{Part(in, r, *small[r], *small[r])}.data(), 16,
        AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 2));
    statuses.push_back(axrt_group_enqueue_part(
        g.group, r, AXRT_COLLECTIVE_ALL_REDUCE, std::array{Part(in, r, *data[r], *data[r])}.data(),
        n * kDevices, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_MAX, 0));
    return statuses;
  };
  auto require_ok = [](std::vector<axrt_status_t> statuses) {
    for (axrt_status_t status : statuses) REQUIRE_CALL_OK(status);
  };
  // Member 3 first, all four; then 1 and 0 from threads of their own; 2 last.
  require_ok(queue(3));
  std::vector<axrt_status_t> from_one, from_zero;
  std::thread one([&] { from_one = queue(1); }), zero([&] { from_zero = queue(0); });
  one.join();
  zero.join();
  require_ok(from_one);
  require_ok(from_zero);
  REQUIRE(g.info().collectives == 4);
  require_ok(queue(2));
  SyncAll(in.streams, kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    INFO("member " << r);
    // Reduce-scatter: block r of the sum, in float64.
    const std::vector<float> block = scattered[r]->read<float>();
    Mismatches bad;
    for (uint64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (uint32_t m = 0; m < kDevices; ++m) sum += inputs[m][r * n + i];
      bad.check(std::abs(block[i] - sum) <= 1e-5 * 16, i);
    }
    REQUIRE_NO_MISMATCH(bad);
    // All-gather: every member's first n inputs, rank 0 first.
    const std::vector<float> all = gathered[r]->read<float>();
    for (uint32_t m = 0; m < kDevices; ++m) {
      REQUIRE(std::equal(all.begin() + m * n, all.begin() + (m + 1) * n, inputs[m].begin()));
    }
    REQUIRE(small[r]->read<float>() == std::vector<float>(16, 3.0f));  // member 2's
    const std::vector<float> most = data[r]->read<float>();
    for (uint64_t i = 0; i < n * kDevices; i += 997) {
      float expect = inputs[0][i];
      for (uint32_t m = 1; m < kDevices; ++m) expect = std::max(expect, inputs[m][i]);
      REQUIRE(most[i] == expect);
    }
  }
  // Every part queued: a whole-group call is welcome again.
  std::vector<axrt_collective_member_t> parts;
  for (uint32_t r = 0; r < kDevices; ++r) parts.push_back(Part(in, r, *small[r], *small[r]));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  SyncAll(in.streams, kDevices);
  REQUIRE(small[0]->read<float>() == std::vector<float>(16, 12.0f));
  REQUIRE(g.info().collectives == 5);
}

TEST_CASE("parts that disagree abort the group, naming the member; bad parts queue nothing",
          "[group][part]") {
  Instance in;
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  for (uint32_t r = 0; r < kDevices; ++r) bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 256));
  {
    Group g(in.devices, 0, "odd");
    auto part = Part(in, 1, *bufs[1], *bufs[1]);
    REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 4, AXRT_COLLECTIVE_ALL_REDUCE, &part, 8,
                                               AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                       AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 4 is not a member");
    REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 1, 9, &part, 8, AXRT_DTYPE_FLOAT32,
                                               AXRT_REDUCE_SUM, 0),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "9 is not a collective");
    part.stream = in.streams[0];
    REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 1, AXRT_COLLECTIVE_ALL_REDUCE, &part, 8,
                                               AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "not a stream of the member's device");
    part = Part(in, 2, *bufs[2], *bufs[2]);
    REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 2, AXRT_COLLECTIVE_ALL_REDUCE, &part, 100,
                                               AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                       AXRT_STATUS_CODE_OUT_OF_RANGE, "member 2's send range");
    REQUIRE(g.info().collectives == 0);
    // Members 0 and 1 agree; member 2 asks for 16 elements.
    for (uint32_t r : {0u, 1u}) {
      part = Part(in, r, *bufs[r], *bufs[r]);
      REQUIRE_CALL_OK(axrt_group_enqueue_part(g.group, r, AXRT_COLLECTIVE_ALL_REDUCE, &part, 8,
                                              AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
    }
    part = Part(in, 2, *bufs[2], *bufs[2]);
    REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 2, AXRT_COLLECTIVE_ALL_REDUCE, &part, 16,
                                               AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "member 2 (cpu:2)'s part of collective #1 is all_reduce of 16 f32 (sum), "
                       "but member 0 (cpu:0) queued all_reduce of 8 f32 (sum)");
    REQUIRE(g.info().failed_rank == 2);
    for (uint32_t r : {0u, 1u}) {
      REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                         "group 'odd' aborted", "member 2 (cpu:2)'s part");
    }
    REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[2]));  // nothing of it was queued
  }
  in.new_streams();
  {
    // A whole-group call while a part is missing; then the group goes with
    // that part still missing: what was queued ends, aborted.
    Group g(in.devices, UINT64_MAX, "waiting");
    auto part = Part(in, 3, *bufs[3], *bufs[3]);
    REQUIRE_CALL_OK(axrt_group_enqueue_part(g.group, 3, AXRT_COLLECTIVE_BROADCAST, &part, 8,
                                            AXRT_DTYPE_INT32, AXRT_REDUCE_SUM, 3));
    std::vector<axrt_collective_member_t> parts;
    for (uint32_t r = 0; r < kDevices; ++r) parts.push_back(Part(in, r, *bufs[r], *bufs[r]));
    REQUIRE_CALL_FAILS(axrt_group_all_reduce(g.group, parts.data(), 8, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM),
                       AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "member 0 (cpu:0) has not queued its part of broadcast #1");
  }
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[3]), AXRT_STATUS_CODE_ABORTED,
                     "destroyed before every member queued its part of broadcast #1");
}

TEST_CASE("a member that never queues its part times the others out, naming it", "[group][part]") {
  Instance in;
  Group g(in.devices, /*timeout_ns=*/200'000'000, "late");
  std::vector<std::unique_ptr<HostBuffer>> bufs;
  for (uint32_t r = 0; r < kDevices; ++r) bufs.push_back(std::make_unique<HostBuffer>(in.devices[r], 64));
  for (uint32_t r : {0u, 2u, 3u}) {
    auto part = Part(in, r, *bufs[r], *bufs[r]);
    REQUIRE_CALL_OK(axrt_group_enqueue_part(g.group, r, AXRT_COLLECTIVE_ALL_REDUCE, &part, 16,
                                            AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
  }
  for (uint32_t r : {0u, 2u, 3u}) {
    axrt_test::Outcome o = axrt_test::Take(axrt_stream_synchronize(in.streams[r]));
    INFO(o.message);
    REQUIRE((o.code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED || o.code == AXRT_STATUS_CODE_ABORTED));
    REQUIRE(o.message.find("member 1 (cpu:1) did not reach all_reduce #1") != std::string::npos);
  }
  REQUIRE(g.info().failed_rank == 1);
  auto part = Part(in, 1, *bufs[1], *bufs[1]);
  REQUIRE_CALL_FAILS(axrt_group_enqueue_part(g.group, 1, AXRT_COLLECTIVE_ALL_REDUCE, &part, 16,
                                             AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                     AXRT_STATUS_CODE_ABORTED, "member 1 (cpu:1) did not reach");
}
