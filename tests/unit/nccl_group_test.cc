// Device groups of CUDA devices through the "nccl" backend, against the mock
// NCCL (tests/mock_nccl) over the mock CUDA driver (tests/mock_cuda): every
// collective and element type against a reference computed here, in place
// and apart, at sizes 0, 1, odd and large; a group of one device; ordering
// with work the stream held back; a member's failed stream, a lost device, a
// hang, a member that never arrives and an asynchronous NCCL error, each
// aborting the group with the member named and no stream left hanging;
// rebuilding on the devices that remain; destroying with work queued; a
// missing or too old library; and members joining across processes (threads
// here) through ncclCommInitRank with rank 0's id.
//
// The CUDA driver and NCCL load once per process, so each configuration is
// its own ctest entry running this binary with a tag:
//   [mock]      AXRT_CUDA_DRIVER_LIBRARY and AXRT_NCCL_LIBRARY = the mocks
//   [no-nccl]   AXRT_NCCL_LIBRARY = a path that does not exist
//   [old-nccl]  the mock NCCL, answering NCCL 2.8.4
// ctest sets AXRT_MOCK_CUDA_DEVICE_COUNT=4.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "axrt/axrt.h"
#include "base/float16.h"
#include "tests/mock_cuda/mock_cuda.h"
#include "tests/mock_nccl/mock_nccl.h"
#include "tests/unit/mock_cuda_support.h"
#include "tests/unit/group_support.h"
#include "tests/unit/status_check.h"

namespace {

using Group = axrt_test::TestGroup;
using axrt_test::BlockUntilSet;
using axrt_test::FailStream;
using axrt_test::RandomFloats;
using axrt_test::SyncAll;

using axrt_test::Outcome;
using axrt_test::Take;

constexpr uint32_t kDevices = 4;

// Waits until `done()` holds, at most `seconds`.
bool WaitFor(const std::function<bool()>& done, double seconds = 5.0) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The four mock CUDA devices, a stream on each, mocks reset. Declared first
// in a test, it goes last: then it releases everything and, unless the test
// failed already, checks that nothing of CUDA or NCCL is left.
struct Devices {
  Devices() {
    axrt_mock_cuda_reset();
    axrt_mock_nccl_reset();
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu,cuda";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    for (uint32_t i = 0; i < kDevices; ++i) {
      const std::string id = "cuda:" + std::to_string(i);
      axrt_device_t device = nullptr;
      REQUIRE_CALL_OK(axrt_instance_find_device(instance, id.c_str(), &device));
      devices.push_back(device);
      axrt_stream_t stream = nullptr;
      REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
      streams.push_back(stream);
    }
  }
  ~Devices() {
    release();
    if (std::uncaught_exceptions() != 0) return;
    CHECK(WaitFor([] { return axrt_mock_nccl_live_comms() == 0; }));
    axrt_test::RequireNoLiveObjects();
  }
  void release() {
    for (axrt_stream_t s : streams) axrt_stream_release(s);
    for (axrt_device_t d : devices) axrt_device_release(d);
    axrt_instance_release(instance);
    streams.clear();
    devices.clear();
    instance = nullptr;
  }
  // Replaces the streams (a failed stream stays failed).
  void new_streams() {
    for (size_t i = 0; i < streams.size(); ++i) {
      axrt_stream_release(streams[i]);
      REQUIRE_CALL_OK(axrt_stream_create(devices[i], nullptr, &streams[i]));
    }
  }
  std::vector<axrt_device_t> first(uint32_t n) const {
    return std::vector<axrt_device_t>(devices.begin(), devices.begin() + n);
  }
  axrt_instance_t instance = nullptr;
  std::vector<axrt_device_t> devices;
  std::vector<axrt_stream_t> streams;
};

// A device-local buffer of `bytes` (at least 1) on `device`.
struct Buffer {
  Buffer(axrt_device_t device, uint64_t bytes) : size(bytes) {
    REQUIRE_CALL_OK(axrt_buffer_allocate(device, bytes == 0 ? 1 : bytes, nullptr, &buffer));
  }
  ~Buffer() { axrt_buffer_release(buffer); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // Queues a copy of `data` in; `data` must live until the stream ran it.
  template <typename T>
  void write(axrt_stream_t stream, const std::vector<T>& data, uint64_t offset = 0) {
    if (data.empty()) return;
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, data.data(), buffer, offset,
                                               data.size() * sizeof(T)));
  }
  // The whole buffer, read on `stream` once its work is done.
  template <typename T>
  std::vector<T> read(axrt_stream_t stream) const {
    std::vector<T> out(size / sizeof(T));
    if (!out.empty()) {
      REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, out.data(), size));
    }
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    return out;
  }
  axrt_buffer_t buffer = nullptr;
  uint64_t size;
};

// Host function: sets *flag.
axrt_status_t SetFlag(void* flag, axrt_status_t) {
  static_cast<std::atomic<bool>*>(flag)->store(true);
  return nullptr;
}

// The first `members` devices all-reduce `n` float32 each, in place or
// apart; checked against a float64 reference on every member.
void CheckAllReduceF32(Devices& in, uint32_t members, uint64_t n, axrt_reduce_op_t op,
                       bool in_place) {
  Group g(in.first(members));
  std::vector<std::vector<float>> inputs;
  std::vector<std::unique_ptr<Buffer>> send, recv;
  std::vector<axrt_collective_member_t> parts(members);
  for (uint32_t r = 0; r < members; ++r) {
    inputs.push_back(RandomFloats(n, 100 + r));
    send.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    recv.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    send[r]->write(in.streams[r], inputs[r]);
    parts[r] = {in.streams[r], send[r]->buffer, 0, in_place ? send[r]->buffer : recv[r]->buffer, 0};
  }
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), n, AXRT_DTYPE_FLOAT32, op));
  std::vector<float> first;
  for (uint32_t r = 0; r < members; ++r) {
    const std::vector<float> got = (in_place ? send[r] : recv[r])->read<float>(in.streams[r]);
    if (r == 0) first = got;
    REQUIRE(got == first);  // the same on every member
  }
  double worst = 0;  // the largest error, over every element
  for (uint64_t i = 0; i < n; ++i) {
    double expect = inputs[0][i];
    for (uint32_t r = 1; r < members; ++r) {
      const double x = inputs[r][i];
      expect = op == AXRT_REDUCE_SUM   ? expect + x
               : op == AXRT_REDUCE_MAX ? std::max(expect, x)
                                       : std::min(expect, x);
    }
    worst = std::max(worst, std::abs(first[i] - expect));
  }
  REQUIRE(worst <= 1e-5 * members * 4);
}

}  // namespace

TEST_CASE("nccl: all-reduce of float32 matches a float64 reference at every size", "[mock]") {
  Devices in;
  const axrt_reduce_op_t op =
      GENERATE(as<axrt_reduce_op_t>(), AXRT_REDUCE_SUM, AXRT_REDUCE_MAX, AXRT_REDUCE_MIN);
  const uint32_t members = GENERATE(2u, 3u, 4u);
  for (uint64_t n : {0ull, 1ull, 7ull, 100003ull}) {
    INFO(members << " members, " << n << " elements, op " << op);
    CheckAllReduceF32(in, members, n, op, /*in_place=*/n % 2 == 1);
    CheckAllReduceF32(in, members, n, op, /*in_place=*/n % 2 == 0);
  }
}

TEST_CASE("nccl: every element type reaches NCCL as its own type", "[mock]") {
  Devices in;
  Group g(in.devices);
  const uint64_t n = 1001;
  // Signed and unsigned types are told apart by maxima and minima of values
  // whose top bit is set; float types by their sums.
  std::vector<std::vector<int8_t>> i8(kDevices);
  std::vector<std::vector<uint8_t>> u8(kDevices);
  std::vector<std::vector<int32_t>> i32(kDevices);
  std::vector<std::vector<uint32_t>> u32(kDevices);
  std::vector<std::vector<int64_t>> i64(kDevices);
  std::vector<std::vector<uint64_t>> u64(kDevices);
  std::vector<std::vector<uint16_t>> f16(kDevices), bf16(kDevices);
  std::vector<std::vector<float>> values(kDevices);
  std::vector<std::vector<double>> f64(kDevices);
  std::vector<std::unique_ptr<Buffer>> buffers;
  struct Job {
    axrt_dtype_t dtype;
    axrt_reduce_op_t op;
    size_t element;
  };
  const std::vector<Job> jobs = {
      {AXRT_DTYPE_INT8, AXRT_REDUCE_MIN, 1},     {AXRT_DTYPE_UINT8, AXRT_REDUCE_MAX, 1},
      {AXRT_DTYPE_INT32, AXRT_REDUCE_MAX, 4},    {AXRT_DTYPE_UINT32, AXRT_REDUCE_MAX, 4},
      {AXRT_DTYPE_INT64, AXRT_REDUCE_MIN, 8},    {AXRT_DTYPE_UINT64, AXRT_REDUCE_MAX, 8},
      {AXRT_DTYPE_FLOAT16, AXRT_REDUCE_SUM, 2},  {AXRT_DTYPE_BFLOAT16, AXRT_REDUCE_MAX, 2},
      {AXRT_DTYPE_INT32, AXRT_REDUCE_SUM, 4},    {AXRT_DTYPE_FLOAT64, AXRT_REDUCE_SUM, 8},
  };
  for (uint32_t r = 0; r < kDevices; ++r) {
    std::mt19937_64 rng(11 + r);
    values[r] = RandomFloats(n, 70 + r);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = rng();
      i8[r].push_back(static_cast<int8_t>(x));
      u8[r].push_back(static_cast<uint8_t>(x >> 8));
      i32[r].push_back(static_cast<int32_t>(x >> 16));
      u32[r].push_back(static_cast<uint32_t>(x >> 24));
      i64[r].push_back(static_cast<int64_t>(x));
      u64[r].push_back(rng());
      f16[r].push_back(axrt::float_to_half(values[r][i]));
      bf16[r].push_back(axrt::float_to_bfloat16(values[r][i]));
      f64[r].push_back(static_cast<double>(values[r][i]) * (1.0 + 1e-12 * static_cast<double>(i)));
    }
  }
  auto write = [&](uint32_t r, size_t job, axrt_buffer_t buffer) {
    axrt_stream_t s = in.streams[r];
    switch (job) {
      case 0: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, i8[r].data(), buffer, 0, n)); break;
      case 1: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, u8[r].data(), buffer, 0, n)); break;
      case 2: case 8: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, i32[r].data(), buffer, 0, n * 4)); break;
      case 3: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, u32[r].data(), buffer, 0, n * 4)); break;
      case 4: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, i64[r].data(), buffer, 0, n * 8)); break;
      case 5: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, u64[r].data(), buffer, 0, n * 8)); break;
      case 6: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, f16[r].data(), buffer, 0, n * 2)); break;
      case 7: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, bf16[r].data(), buffer, 0, n * 2)); break;
      case 9: REQUIRE_CALL_OK(axrt_stream_copy_from_host(s, f64[r].data(), buffer, 0, n * 8)); break;
    }
  };
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::vector<axrt_collective_member_t> parts(kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      buffers.push_back(std::make_unique<Buffer>(in.devices[r], n * jobs[j].element));
      write(r, j, buffers.back()->buffer);
      parts[r] = {in.streams[r], buffers.back()->buffer, 0, buffers.back()->buffer, 0};
    }
    REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), n, jobs[j].dtype, jobs[j].op));
  }
  for (uint32_t r = 0; r < kDevices; ++r) {
    axrt_stream_t s = in.streams[r];
    auto at = [&](size_t job) -> Buffer& { return *buffers[job * kDevices + r]; };
    const auto got_i8 = at(0).read<int8_t>(s);
    const auto got_u8 = at(1).read<uint8_t>(s);
    const auto got_i32 = at(2).read<int32_t>(s);
    const auto got_u32 = at(3).read<uint32_t>(s);
    const auto got_i64 = at(4).read<int64_t>(s);
    const auto got_u64 = at(5).read<uint64_t>(s);
    const auto got_f16 = at(6).read<uint16_t>(s);
    const auto got_bf16 = at(7).read<uint16_t>(s);
    const auto got_sum32 = at(8).read<int32_t>(s);
    const auto got_f64 = at(9).read<double>(s);
    // Elements that differ from the reference, by type.
    std::vector<uint64_t> wrong(jobs.size(), 0);
    for (uint64_t i = 0; i < n; ++i) {
      int8_t min8 = 127;
      uint8_t max8 = 0;
      int32_t max32 = std::numeric_limits<int32_t>::min();
      uint32_t maxu32 = 0, sum32 = 0;
      int64_t min64 = std::numeric_limits<int64_t>::max();
      uint64_t maxu64 = 0;
      double half_sum = 0, bf_max = -1e30, sum64 = 0;
      for (uint32_t m = 0; m < kDevices; ++m) {
        min8 = std::min(min8, i8[m][i]);
        max8 = std::max(max8, u8[m][i]);
        max32 = std::max(max32, i32[m][i]);
        maxu32 = std::max(maxu32, u32[m][i]);
        sum32 += static_cast<uint32_t>(i32[m][i]);
        min64 = std::min(min64, i64[m][i]);
        maxu64 = std::max(maxu64, u64[m][i]);
        half_sum += axrt::half_to_float(f16[m][i]);
        bf_max = std::max<double>(bf_max, axrt::bfloat16_to_float(bf16[m][i]));
        sum64 += f64[m][i];
      }
      wrong[0] += got_i8[i] != min8;
      wrong[1] += got_u8[i] != max8;
      wrong[2] += got_i32[i] != max32;
      wrong[3] += got_u32[i] != maxu32;
      wrong[4] += got_i64[i] != min64;
      wrong[5] += got_u64[i] != maxu64;
      // Three roundings to half of partial sums below 16: each within 2^-7.
      wrong[6] += std::abs(axrt::half_to_float(got_f16[i]) - half_sum) > 3 * 0.0078125 + 1e-6;
      wrong[7] += axrt::bfloat16_to_float(got_bf16[i]) != bf_max;
      wrong[8] += got_sum32[i] != static_cast<int32_t>(sum32);  // wrapped
      wrong[9] += std::abs(got_f64[i] - sum64) > 1e-12;  // far below float32's precision
    }
    INFO("member " << r);
    CHECK(wrong == std::vector<uint64_t>(jobs.size(), 0));
  }
  // One group call per collective, one NCCL call per member.
  CHECK(axrt_mock_nccl_call_count("ncclGroupStart") == jobs.size());
  CHECK(axrt_mock_nccl_call_count("ncclGroupEnd") == jobs.size());
  CHECK(axrt_mock_nccl_call_count("ncclAllReduce") == jobs.size() * kDevices);
  CHECK(g.info().collectives == jobs.size());
  CHECK(std::string(g.info().backend) == "nccl");
}

TEST_CASE("nccl: all-gather, reduce-scatter and broadcast, in place and apart", "[mock]") {
  Devices in;
  Group g(in.devices);
  const bool in_place = GENERATE(false, true);
  for (uint64_t n : {0ull, 1ull, 7ull, 70001ull}) {
    INFO(n << " elements per member, in place " << in_place);
    std::vector<std::vector<float>> values(kDevices), firsts(kDevices);
    std::vector<std::unique_ptr<Buffer>> big, small;
    std::vector<axrt_collective_member_t> gather(kDevices), scatter(kDevices), bcast(kDevices);
    for (uint32_t r = 0; r < kDevices; ++r) {
      values[r] = RandomFloats(n * kDevices, 300 + r);
      firsts[r].assign(values[r].begin(), values[r].begin() + n);
      big.push_back(std::make_unique<Buffer>(in.devices[r], n * kDevices * 4));
      small.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
      big[r]->write(in.streams[r], values[r]);
      small[r]->write(in.streams[r], firsts[r]);
    }
    // All-gather: member r's block r of `big` (in place) or `small`.
    for (uint32_t r = 0; r < kDevices; ++r) {
      gather[r] = {in.streams[r], in_place ? big[r]->buffer : small[r]->buffer,
                   in_place ? r * n * 4 : 0, big[r]->buffer, 0};
    }
    REQUIRE_CALL_OK(axrt_group_all_gather(g.group, gather.data(), n, AXRT_DTYPE_FLOAT32));
    std::vector<float> gathered;  // block b from member b
    for (uint32_t b = 0; b < kDevices; ++b) {
      const auto from = values[b].begin() + (in_place ? b * n : 0);
      gathered.insert(gathered.end(), from, from + n);
    }
    for (uint32_t r = 0; r < kDevices; ++r) REQUIRE(big[r]->read<float>(in.streams[r]) == gathered);
    // Reduce-scatter of fresh values: member r gets block r's sums.
    for (uint32_t r = 0; r < kDevices; ++r) {
      big[r]->write(in.streams[r], values[r]);
      scatter[r] = {in.streams[r], big[r]->buffer, 0, in_place ? big[r]->buffer : small[r]->buffer,
                    in_place ? r * n * 4 : 0};
    }
    REQUIRE_CALL_OK(axrt_group_reduce_scatter(g.group, scatter.data(), n, AXRT_DTYPE_FLOAT32,
                                              AXRT_REDUCE_SUM));
    for (uint32_t r = 0; r < kDevices; ++r) {
      const auto got = (in_place ? big[r] : small[r])->read<float>(in.streams[r]);
      double worst = 0;
      for (uint64_t i = 0; i < n; ++i) {
        double expect = 0;
        for (uint32_t m = 0; m < kDevices; ++m) expect += values[m][r * n + i];
        worst = std::max(worst, std::abs(got[(in_place ? r * n : 0) + i] - expect));
      }
      REQUIRE(worst <= 1e-4);
    }
    // Broadcast from member 2.
    for (uint32_t r = 0; r < kDevices; ++r) {
      small[r]->write(in.streams[r], firsts[r]);
      bcast[r] = {in.streams[r], r == 2 ? small[r]->buffer : nullptr, 0,
                  in_place || r != 2 ? small[r]->buffer : big[r]->buffer, 0};
    }
    REQUIRE_CALL_OK(axrt_group_broadcast(g.group, bcast.data(), n, AXRT_DTYPE_FLOAT32, 2));
    for (uint32_t r = 0; r < kDevices; ++r) {
      std::vector<float> got = (in_place || r != 2 ? small[r] : big[r])->read<float>(in.streams[r]);
      got.resize(n);
      REQUIRE(got == firsts[2]);
    }
  }
}

TEST_CASE("nccl: send/recv moves each member's buffer to the next, as one group call", "[mock]") {
  Devices in;
  Group g(in.devices);
  const uint64_t n = 4099;
  std::vector<std::vector<int64_t>> values(kDevices);
  std::vector<std::unique_ptr<Buffer>> src, dst;
  std::vector<axrt_group_transfer_t> transfers;
  for (uint32_t r = 0; r < kDevices; ++r) {
    for (uint64_t i = 0; i < n; ++i) values[r].push_back(static_cast<int64_t>(r * 1000000 + i));
    src.push_back(std::make_unique<Buffer>(in.devices[r], n * 8));
    dst.push_back(std::make_unique<Buffer>(in.devices[r], n * 8));
    src[r]->write(in.streams[r], values[r]);
  }
  for (uint32_t r = 0; r < kDevices; ++r) {
    const uint32_t to = (r + 1) % kDevices;
    transfers.push_back({r, in.streams[r], src[r]->buffer, 0, to, in.streams[to], dst[to]->buffer,
                         0, n, AXRT_DTYPE_INT64});
  }
  // And a transfer of nothing, which still orders its two streams.
  transfers.push_back({0, in.streams[0], src[0]->buffer, 0, 2, in.streams[2], dst[2]->buffer, 0, 0,
                       AXRT_DTYPE_INT64});
  REQUIRE_CALL_OK(axrt_group_send_recv(g.group, transfers.data(), transfers.size()));
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE(dst[r]->read<int64_t>(in.streams[r]) == values[(r + kDevices - 1) % kDevices]);
  }
  CHECK(axrt_mock_nccl_call_count("ncclSend") == kDevices + 1);
  CHECK(axrt_mock_nccl_call_count("ncclRecv") == kDevices + 1);
  CHECK(axrt_mock_nccl_call_count("ncclGroupEnd") == 1);
  // A pair: only members 1 and 3 take part; member 0's blocked stream is
  // not involved.
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[0], BlockUntilSet, &release));
  axrt_group_transfer_t pair = {3, in.streams[3], src[3]->buffer, 8, 1, in.streams[1],
                                dst[1]->buffer, 0, 10, AXRT_DTYPE_INT64};
  REQUIRE_CALL_OK(axrt_group_send_recv(g.group, &pair, 1));
  REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[3]));
  std::vector<int64_t> got = dst[1]->read<int64_t>(in.streams[1]);
  got.resize(10);
  REQUIRE(got == std::vector<int64_t>(values[3].begin() + 1, values[3].begin() + 11));
  release = true;
  REQUIRE_CALL_OK(axrt_stream_synchronize(in.streams[0]));
}

TEST_CASE("nccl: a group of cuda:0 alone is a single rank", "[mock]") {
  Devices in;
  Group g(in.first(1));
  const uint64_t n = 12345;
  const std::vector<float> v = RandomFloats(n, 5);
  Buffer a(in.devices[0], n * 4), b(in.devices[0], n * 4);
  a.write(in.streams[0], v);
  axrt_collective_member_t part = {in.streams[0], a.buffer, 0, b.buffer, 0};
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, &part, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  REQUIRE(b.read<float>(in.streams[0]) == v);
  part = {in.streams[0], a.buffer, 0, a.buffer, 0};
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, &part, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_MAX));
  REQUIRE_CALL_OK(axrt_group_all_gather(g.group, &part, n, AXRT_DTYPE_FLOAT32));
  REQUIRE_CALL_OK(axrt_group_broadcast(g.group, &part, n, AXRT_DTYPE_FLOAT32, 0));
  REQUIRE(a.read<float>(in.streams[0]) == v);
  const axrt_group_info_t info = g.info();
  CHECK(info.size == 1);
  CHECK(info.collectives == 4);
  CHECK(info.state == AXRT_GROUP_STATE_ACTIVE);
}

TEST_CASE("nccl: collectives run in order with the streams' own work, held work included",
          "[mock]") {
  Devices in;
  // Before the group hands the streams' CUstreams out, each stream holds
  // work back behind a host function: the input copy waits on the host.
  std::atomic<bool> release{false};
  const uint64_t n = 5000;
  std::vector<std::vector<int32_t>> inputs(kDevices);
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<std::vector<int32_t>> outputs(kDevices, std::vector<int32_t>(n));
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[r], BlockUntilSet, &release));
    inputs[r].assign(n, static_cast<int32_t>(r + 1));
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    bufs[r]->write(in.streams[r], inputs[r]);
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  Group g(in.devices);
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), n, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM));
  // A second one on the result, then copies out, all queued while held.
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), n, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM));
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE_CALL_OK(
        axrt_stream_copy_to_host(in.streams[r], bufs[r]->buffer, 0, outputs[r].data(), n * 4));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(g.info().state == AXRT_GROUP_STATE_ACTIVE);
  release = true;
  SyncAll(in.streams, kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE(outputs[r] == std::vector<int32_t>(n, 40));  // (1+2+3+4) * 4
  }
  // A collective of nothing still orders the members' streams: member 0's
  // later work waits for member 3 to reach it.
  std::atomic<bool> hold3{false}, after0{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[3], BlockUntilSet, &hold3));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 0, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM));
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[0], SetFlag, &after0));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_FALSE(after0.load());
  hold3 = true;
  SyncAll(in.streams, kDevices);
  CHECK(after0.load());
}

TEST_CASE("nccl: a member whose stream failed aborts the group; the rest rebuild and go on",
          "[mock]") {
  Devices in;
  auto g = std::make_unique<Group>(in.devices, 0, "tp");
  const uint64_t n = 1000;
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  const std::vector<float> ones(n, 1.0f);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    bufs[r]->write(in.streams[r], ones);
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  // Member 2 fails before the first of four collectives reaches it (held
  // until all four are queued).
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[2], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[2], FailStream, nullptr));
  for (int i = 0; i < 4; ++i) {
    REQUIRE_CALL_OK(
        axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  }
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[2]), AXRT_STATUS_CODE_INTERNAL,
                     "injected failure");
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "group 'tp'", "member 2 (cuda:2) failed", "injected failure");
  }
  const axrt_group_info_t info = g->info();
  REQUIRE(info.state == AXRT_GROUP_STATE_ABORTED);
  REQUIRE(info.failed_rank == 2);
  REQUIRE(info.failure_code == AXRT_STATUS_CODE_INTERNAL);
  REQUIRE(info.collectives == 4);
  // The communicators were aborted, so that nothing waits for member 2.
  CHECK(WaitFor([] { return axrt_mock_nccl_call_count("ncclCommAbort") == kDevices; }));
  CHECK(axrt_mock_nccl_live_comms() == 0);
  // A new collective on the aborted group is refused at once.
  in.new_streams();
  for (uint32_t r = 0; r < kDevices; ++r) parts[r].stream = in.streams[r];
  REQUIRE_CALL_FAILS(
      axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
      AXRT_STATUS_CODE_ABORTED, "member 2 (cuda:2) failed");
  // Stop, restructure, resume: a group of the three that remain.
  g.reset();
  Group again({in.devices[0], in.devices[1], in.devices[3]}, 0, "tp-3");
  std::vector<axrt_collective_member_t> three = {parts[0], parts[1], parts[3]};
  std::vector<std::vector<float>> v(kDevices);
  for (uint32_t r : {0u, 1u, 3u}) {
    v[r].assign(n, static_cast<float>(r));
    bufs[r]->write(in.streams[r], v[r]);
  }
  REQUIRE_CALL_OK(
      axrt_group_all_reduce(again.group, three.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE(bufs[r]->read<float>(in.streams[r]) == std::vector<float>(n, 4.0f));
  }
}

TEST_CASE("nccl: a lost device aborts the group naming the member; no stream hangs", "[mock]") {
  Devices in;
  auto g = std::make_unique<Group>(in.first(3), 0, "tp");
  const uint64_t n = 256;
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(3);
  const std::vector<float> ones(n, 1.0f);
  for (uint32_t r = 0; r < 3; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    bufs[r]->write(in.streams[r], ones);
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  REQUIRE_CALL_OK(
      axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  SyncAll(in.streams, 3);
  // Member 1's part of the next collective faults and loses its device
  // while members 0 and 2 wait for it inside NCCL. That call was queued
  // whole; the next one may find the device lost (DEVICE_LOST) or the group
  // aborted already (ABORTED), and then queues nothing.
  REQUIRE(axrt_mock_nccl_inject_fault(1, AXRT_MOCK_NCCL_DEVICE_FAULT, 700) == 0);
  REQUIRE_CALL_OK(
      axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  const Outcome next =
      Take(axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  INFO(next.message);
  CHECK((next.code == AXRT_STATUS_CODE_OK || next.code == AXRT_STATUS_CODE_DEVICE_LOST ||
         next.code == AXRT_STATUS_CODE_ABORTED));
  if (next.code != AXRT_STATUS_CODE_OK) CHECK(next.message.find("member 1 (cuda:1)") != std::string::npos);
  for (uint32_t r : {0u, 2u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "group 'tp' aborted before all_reduce #2",
                       "member 1 (cuda:1) failed: its device was lost", "ILLEGAL_ADDRESS");
  }
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[1]), AXRT_STATUS_CODE_DEVICE_LOST, "cuda:1");
  const axrt_group_info_t info = g->info();
  CHECK(info.state == AXRT_GROUP_STATE_ABORTED);
  CHECK(info.failed_rank == 1);
  CHECK(info.failure_code == AXRT_STATUS_CODE_DEVICE_LOST);
  CHECK(WaitFor([] { return axrt_mock_nccl_live_comms() == 0; }));
  g.reset();
  // The devices that remain form a new group, with new streams (cuda:1's
  // refuses new work until the instance is made again).
  for (uint32_t r : {0u, 2u, 3u}) {
    axrt_stream_release(in.streams[r]);
    REQUIRE_CALL_OK(axrt_stream_create(in.devices[r], nullptr, &in.streams[r]));
  }
  axrt_stream_t refused = nullptr;
  REQUIRE_CALL_FAILS(axrt_stream_create(in.devices[1], nullptr, &refused),
                     AXRT_STATUS_CODE_DEVICE_LOST, "cuda:1");
  std::vector<axrt_device_t> rest = {in.devices[0], in.devices[2], in.devices[3]};
  Group again(rest, 0, "tp-rest");
  std::vector<std::unique_ptr<Buffer>> fresh;
  std::vector<axrt_collective_member_t> three;
  std::vector<std::vector<float>> v;
  for (uint32_t r : {0u, 2u, 3u}) {
    fresh.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    v.emplace_back(n, static_cast<float>(r));
    fresh.back()->write(in.streams[r], v.back());
    three.push_back({in.streams[r], fresh.back()->buffer, 0, fresh.back()->buffer, 0});
  }
  REQUIRE_CALL_OK(
      axrt_group_all_reduce(again.group, three.data(), n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  size_t i = 0;
  for (uint32_t r : {0u, 2u, 3u}) {
    REQUIRE(fresh[i++]->read<float>(in.streams[r]) == std::vector<float>(n, 5.0f));
  }
}

TEST_CASE("nccl: a hung collective is found by the timeout; every stream fails", "[mock]") {
  Devices in;
  const auto started = std::chrono::steady_clock::now();
  Group g(in.devices, /*timeout_ns=*/200'000'000, "hung");
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  // Member 2's NCCL kernel never finishes: every member reached the
  // collective, so nobody is to blame but NCCL.
  REQUIRE(axrt_mock_nccl_inject_fault(2, AXRT_MOCK_NCCL_HANG, 0) == 0);
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  REQUIRE_CALL_OK(axrt_group_broadcast(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, 0));
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                       "group 'hung'", "all_reduce #1 did not complete within the group's timeout",
                       "every member reached it");
  }
  const axrt_group_info_t info = g.info();
  CHECK(info.failed_rank == -1);
  CHECK(info.failure_code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
}

TEST_CASE("nccl: a member that never reaches a collective is named by the timeout", "[mock]") {
  Devices in;
  Group g(in.devices, /*timeout_ns=*/200'000'000, "slow");
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[3], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  for (uint32_t r = 0; r < 3; ++r) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                       "member 3 (cuda:3) did not reach all_reduce #1 within the group's timeout");
  }
  REQUIRE_FALSE(release.load());
  const axrt_group_info_t info = g.info();
  CHECK(info.failed_rank == 3);
  CHECK(info.failure_code == AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
  // Member 3 arrives late: its part fails at once.
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[3]), AXRT_STATUS_CODE_ABORTED, "member 3");
}

TEST_CASE("nccl: members queue their parts alone; a missing part is named by the timeout",
          "[mock]") {
  Devices in;
  const uint64_t n = 1001;
  std::vector<std::vector<float>> inputs;
  std::vector<std::unique_ptr<Buffer>> bufs;
  for (uint32_t r = 0; r < kDevices; ++r) {
    inputs.push_back(RandomFloats(n, 40 + r));
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    bufs[r]->write(in.streams[r], inputs[r]);
  }
  {
    Group g(in.devices, 0, "parts");
    // Members 2, 0, 3, 1, one NCCL call each (no group call around them).
    const uint64_t calls = axrt_mock_nccl_call_count("ncclAllReduce");
    for (uint32_t r : {2u, 0u, 3u, 1u}) {
      axrt_collective_member_t part = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
      REQUIRE_CALL_OK(axrt_group_enqueue_part(g.group, r, AXRT_COLLECTIVE_ALL_REDUCE, &part, n,
                                              AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
    }
    CHECK(axrt_mock_nccl_call_count("ncclAllReduce") == calls + kDevices);
    std::vector<float> first;
    for (uint32_t r = 0; r < kDevices; ++r) {
      const std::vector<float> got = bufs[r]->read<float>(in.streams[r]);
      if (r == 0) first = got;
      REQUIRE(got == first);
    }
    double worst = 0;
    for (uint64_t i = 0; i < n; ++i) {
      double expect = 0;
      for (uint32_t r = 0; r < kDevices; ++r) expect += inputs[r][i];
      worst = std::max(worst, std::abs(first[i] - expect));
    }
    REQUIRE(worst <= 1e-5 * 16);
  }
  Group g(in.devices, /*timeout_ns=*/200'000'000, "late");
  for (uint32_t r : {0u, 1u, 3u}) {
    axrt_collective_member_t part = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
    REQUIRE_CALL_OK(axrt_group_enqueue_part(g.group, r, AXRT_COLLECTIVE_BROADCAST, &part, 16,
                                            AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0));
  }
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                       "member 2 (cuda:2) did not reach broadcast #1 within the group's timeout");
  }
  CHECK(g.info().failed_rank == 2);
}

TEST_CASE("nccl: an asynchronous NCCL error aborts the group naming the member", "[mock]") {
  Devices in;
  Group g(in.first(2), UINT64_MAX, "async");
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(2);
  for (uint32_t r = 0; r < 2; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  REQUIRE(axrt_mock_nccl_inject_fault(0, AXRT_MOCK_NCCL_ASYNC_ERROR, 6 /* ncclRemoteError */) == 0);
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  for (uint32_t r = 0; r < 2; ++r) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "member 0 (cuda:0) failed: NCCL reported an asynchronous error",
                       "remote process exited", "injected asynchronous error");
  }
  const axrt_group_info_t info = g.info();
  CHECK(info.failed_rank == 0);
  CHECK(info.failure_code == AXRT_STATUS_CODE_UNAVAILABLE);
}

namespace {

// Members of a group across processes, as threads here, each joining with
// its CUDA device through ncclCommInitRank; `body(rank, group, stream)`
// runs in each and returns what it found wrong ("" when nothing).
std::vector<std::string> RunNcclMembers(
    Devices& in, uint32_t size, uint64_t timeout_ns,
    const std::function<std::string(uint32_t, axrt_group_t, axrt_stream_t)>& body) {
  const std::string id = axrt_test::TcpId("/nccl");
  std::vector<std::string> found(size);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
      options.timeout_ns = timeout_ns;
      options.rendezvous_timeout_ns = 20'000'000'000ull;
      axrt_group_t group = nullptr;
      Outcome joined = Take(axrt_group_join(id.c_str(), size, r, in.devices[r], &options, &group));
      if (joined.code != AXRT_STATUS_CODE_OK) {
        found[r] = "join: " + joined.message;
        return;
      }
      found[r] = body(r, group, in.streams[r]);
      axrt_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
  return found;
}

}  // namespace

TEST_CASE("nccl: members in separate processes join through ncclCommInitRank with rank 0's id",
          "[mock]") {
  Devices in;
  constexpr uint64_t n = 1000;
  std::vector<std::vector<float>> inputs;
  for (uint32_t r = 0; r < 3; ++r) inputs.push_back(RandomFloats(n, 300 + r));
  const auto found = RunNcclMembers(in, 3, 0, [&](uint32_t r, axrt_group_t group, axrt_stream_t stream) {
    axrt_buffer_t buffer = nullptr;
    if (Take(axrt_buffer_allocate(in.devices[r], n * 4, nullptr, &buffer)).code != 0) return std::string("alloc");
    std::vector<float> got(n);
    Outcome a = Take(axrt_stream_copy_from_host(stream, inputs[r].data(), buffer, 0, n * 4));
    axrt_collective_member_t me = {stream, buffer, 0, buffer, 0};
    Outcome b = Take(axrt_group_all_reduce(group, &me, n, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    Outcome c = Take(axrt_stream_copy_to_host(stream, buffer, 0, got.data(), n * 4));
    Outcome d = Take(axrt_stream_synchronize(stream));
    axrt_buffer_release(buffer);
    for (const Outcome* o : {&a, &b, &c, &d}) {
      if (o->code != AXRT_STATUS_CODE_OK) return o->message;
    }
    for (uint64_t i = 0; i < n; ++i) {
      // The mock reduces in rank order in float32.
      if (got[i] != (inputs[0][i] + inputs[1][i]) + inputs[2][i]) return std::string("wrong sum");
    }
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    Take(axrt_group_query_info(group, &info));
    if (std::string(info.backend) != "nccl" || info.rank != static_cast<int32_t>(r)) {
      return std::string("info");
    }
    return std::string();
  });
  for (const std::string& f : found) CHECK(f == "");
  CHECK(axrt_mock_nccl_call_count("ncclGetUniqueId") == 1);
  CHECK(axrt_mock_nccl_call_count("ncclCommInitRank") == 3);
  CHECK(axrt_mock_nccl_call_count("ncclCommInitAll") == 0);
}

TEST_CASE("nccl: across processes, an asynchronous error fails its member's group; the others' "
          "time out, and an abort ends their wait",
          "[mock]") {
  Devices in;
  REQUIRE(axrt_mock_nccl_inject_fault(0, AXRT_MOCK_NCCL_ASYNC_ERROR, 6 /* ncclRemoteError */) == 0);
  const auto found = RunNcclMembers(in, 2, 500'000'000ull, [&](uint32_t r, axrt_group_t group,
                                                              axrt_stream_t stream) {
    axrt_buffer_t buffer = nullptr;
    Take(axrt_buffer_allocate(in.devices[r], 64, nullptr, &buffer));
    axrt_collective_member_t me = {stream, buffer, 0, buffer, 0};
    Outcome queued = Take(axrt_group_all_reduce(group, &me, 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    Outcome waited = Take(axrt_stream_synchronize(stream));
    struct Release {
      axrt_buffer_t b;
      ~Release() { axrt_buffer_release(b); }
    } release{buffer};
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    Take(axrt_group_query_info(group, &info));
    if (queued.code != AXRT_STATUS_CODE_OK) return "queued: " + queued.message;
    if (r == 0) {
      // Its own communicator's error, named.
      if (waited.code != AXRT_STATUS_CODE_ABORTED ||
          waited.message.find("NCCL reported an asynchronous error") == std::string::npos ||
          info.failed_rank != 0) {
        return "member 0: " + waited.message;
      }
    } else if (waited.code != AXRT_STATUS_CODE_DEADLINE_EXCEEDED ||
               waited.message.find("within the group's timeout") == std::string::npos) {
      // Its peer never completed the collective: the group's timeout ends it.
      return "member 1: " + waited.message;
    }
    // Later collectives fail at once; the application's abort is a no-op now.
    Outcome later = Take(axrt_group_all_reduce(group, &me, 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    if (later.code != AXRT_STATUS_CODE_ABORTED) return "later: " + later.message;
    Outcome aborted = Take(axrt_group_abort(group, -1, "test"));
    return aborted.code == AXRT_STATUS_CODE_OK ? std::string() : aborted.message;
  });
  for (const std::string& f : found) CHECK(f == "");
  in.new_streams();
}

TEST_CASE("nccl: across processes, the application's abort ends a member waiting with no time "
          "limit",
          "[mock]") {
  Devices in;
  // Member 0's part hangs (its communicator is never aborted by itself).
  REQUIRE(axrt_mock_nccl_inject_fault(0, AXRT_MOCK_NCCL_HANG, 0) == 0);
  std::atomic<axrt_group_t> groups[2] = {nullptr, nullptr};
  std::atomic<bool> aborted{false};
  std::thread aborter([&] {
    // Once both members wait, each process's application aborts its group.
    WaitFor([&] { return groups[0].load() != nullptr && groups[1].load() != nullptr; }, 20.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (auto& g : groups) Take(axrt_group_abort(g.load(), -1, "the operator stopped it"));
    aborted = true;
  });
  const auto found = RunNcclMembers(in, 2, UINT64_MAX, [&](uint32_t r, axrt_group_t group,
                                                          axrt_stream_t stream) {
    axrt_buffer_t buffer = nullptr;
    Take(axrt_buffer_allocate(in.devices[r], 64, nullptr, &buffer));
    axrt_collective_member_t me = {stream, buffer, 0, buffer, 0};
    Outcome queued = Take(axrt_group_all_reduce(group, &me, 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    groups[r] = group;
    Outcome waited = Take(axrt_stream_synchronize(stream));
    // The aborter is done with the group before it goes.
    WaitFor([&] { return aborted.load(); }, 20.0);
    axrt_buffer_release(buffer);
    if (queued.code != AXRT_STATUS_CODE_OK) return "queued: " + queued.message;
    if (waited.code != AXRT_STATUS_CODE_ABORTED ||
        waited.message.find("the operator stopped it") == std::string::npos) {
      return "waited: " + waited.message;
    }
    return std::string();
  });
  aborter.join();
  for (const std::string& f : found) CHECK(f == "");
  in.new_streams();
}

TEST_CASE("nccl: the application aborts a group whose members wait for a lost one", "[mock]") {
  Devices in;
  Group g(in.devices, UINT64_MAX, "waiting");
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], 64));
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[1], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_group_broadcast(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, 0));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g.group, parts.data(), 16, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
  // Members 0, 2 and 3 wait inside NCCL, with no time limit, until the abort.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(g.info().state == AXRT_GROUP_STATE_ACTIVE);
  REQUIRE_CALL_OK(axrt_group_abort(g.group, 1, "its host stopped answering"));
  REQUIRE_CALL_OK(axrt_group_abort(g.group, 2, "a second failure"));  // the first stays
  for (uint32_t r : {0u, 2u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "member 1 (cuda:1) failed: its host stopped answering");
  }
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(in.streams[1]), AXRT_STATUS_CODE_ABORTED, "member 1");
  CHECK(g.info().failed_rank == 1);
}

TEST_CASE("nccl: destroying a group never waits; its communicators go once the work ran",
          "[mock]") {
  Devices in;
  auto g = std::make_unique<Group>(in.devices);
  const uint64_t n = 333;
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<axrt_collective_member_t> parts(kDevices);
  std::vector<std::vector<int32_t>> inputs(kDevices);
  for (uint32_t r = 0; r < kDevices; ++r) {
    inputs[r].assign(n, 1);
    bufs.push_back(std::make_unique<Buffer>(in.devices[r], n * 4));
    bufs[r]->write(in.streams[r], inputs[r]);
    parts[r] = {in.streams[r], bufs[r]->buffer, 0, bufs[r]->buffer, 0};
  }
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(in.streams[0], BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_group_all_reduce(g->group, parts.data(), n, AXRT_DTYPE_INT32, AXRT_REDUCE_SUM));
  g.reset();  // returns while member 0 is held
  CHECK_FALSE(release.load());
  CHECK(axrt_mock_nccl_live_comms() == kDevices);
  release = true;
  for (uint32_t r = 0; r < kDevices; ++r) {
    REQUIRE(bufs[r]->read<int32_t>(in.streams[r]) == std::vector<int32_t>(n, 4));
  }
  CHECK(WaitFor([] { return axrt_mock_nccl_live_comms() == 0; }));
  CHECK(axrt_mock_nccl_call_count("ncclCommDestroy") == kDevices);
  CHECK(axrt_mock_nccl_call_count("ncclCommAbort") == 0);
}

TEST_CASE("nccl: a bad argument queues nothing; CPU devices are not NCCL's", "[mock]") {
  Devices in;
  Group g(in.first(2));
  Buffer a(in.devices[0], 64);
  std::vector<axrt_collective_member_t> parts = {{in.streams[0], a.buffer, 0, a.buffer, 0},
                                                 {in.streams[1], a.buffer, 0, a.buffer, 0}};
  REQUIRE_CALL_FAILS(
      axrt_group_all_reduce(g.group, parts.data(), 4, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "member 1's send buffer is on cuda:0");
  CHECK(axrt_mock_nccl_call_count("ncclGroupStart") == 0);
  CHECK(g.info().collectives == 0);
  axrt_device_t cpu = nullptr;
  REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, "cpu:0", &cpu));
  axrt_group_options_t options = AXRT_GROUP_OPTIONS_INIT;
  options.backend = "nccl";
  axrt_group_t group = nullptr;
  REQUIRE_CALL_FAILS(axrt_group_create(&cpu, 1, &options, &group), AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "the nccl backend runs on CUDA devices", "cpu:0");
  axrt_device_release(cpu);
}

TEST_CASE("nccl: without the library, a group of CUDA devices says how to get it",
          "[no-nccl]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  axrt_device_t device = nullptr;
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &device));
  axrt_group_t group = nullptr;
  REQUIRE_CALL_FAILS(axrt_group_create(&device, 1, nullptr, &group), AXRT_STATUS_CODE_UNAVAILABLE,
                     "the nccl backend is unavailable", "libnccl.so.2 not found",
                     "nvidia-nccl-cu12", "AXRT_NCCL_LIBRARY");
  CHECK(group == nullptr);
  axrt_device_release(device);
  axrt_instance_release(instance);
}

TEST_CASE("nccl: an NCCL older than 2.10 is refused", "[old-nccl]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  axrt_device_t device = nullptr;
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &device));
  axrt_group_t group = nullptr;
  REQUIRE_CALL_FAILS(axrt_group_create(&device, 1, nullptr, &group), AXRT_STATUS_CODE_UNAVAILABLE,
                     "is NCCL 2.8.4; axrt needs NCCL 2.10.0 or later");
  axrt_device_release(device);
  axrt_instance_release(instance);
}
