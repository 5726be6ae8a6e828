// Functions with collective commands (format 1.4) run by every member of a
// group, each on its own stream with its own rank: on four CPU devices (the
// "cpu" backend) and on four mock CUDA devices through the mock NCCL (the
// "nccl" backend), against a float64 reference; the commands around each
// collective ordered with it; a member whose stream failed failing every
// member by name. tests/python/test_collective_commands.py covers every
// kind and the channel bindings' refusals.
//
// Run with a tag, as ctest does, since each configuration sets the process
// up differently:
//   [cpu]   AXRT_CPU_DEVICES=4
//   [mock]  the mock CUDA driver and NCCL, AXRT_MOCK_CUDA_DEVICE_COUNT=4
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "axrt/axrt.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/group_support.h"
#include "tests/unit/status_check.h"

namespace {

using axrt_test::AxeBuilder;
using axrt_test::BindArena;
using axrt_test::BindInput;
using axrt_test::BindOutput;
using axrt_test::Fixed;
using axrt_test::Lit;
using Group = axrt_test::TestGroup;

constexpr uint32_t kMembers = 4;
constexpr uint64_t kCount = 3000;  // floats: past the cpu backend's 64 KiB flat reduction

// step(x: f32[kCount]) -> (y: f32[kCount]) over channel "tp" (any size):
// x into the arena, an all-reduce of the arena in place, the arena into y;
// so that the copies before and after must run in order with the part.
std::vector<uint8_t> StepFile() {
  AxeBuilder b("collective_commands_test", "1");
  const uint64_t bytes = kCount * 4;
  const uint32_t step = b.AddFunction("step", {}, {{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kCount)}}},
                                      {{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kCount)}}}, bytes,
                                      {{"tp", 0}});
  b.Copy(step, BindInput(0), {}, BindArena(0, bytes), {}, Lit(bytes));
  b.Collective(step, AXRT_AXE_COLLECTIVE_ALL_REDUCE, 0, AXRT_AXE_DTYPE_FLOAT32, Lit(kCount),
               BindArena(0, bytes), BindArena(0, bytes));
  b.Copy(step, BindArena(0, bytes), {}, BindOutput(0), {}, Lit(bytes));
  return b.Bytes();
}

// The devices of one driver, each with a stream, the step file loaded.
struct Members {
  explicit Members(const char* drivers, const char* prefix) {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = drivers;
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    const std::vector<uint8_t> file = StepFile();
    for (uint32_t r = 0; r < kMembers; ++r) {
      const std::string id = prefix + std::to_string(r);
      axrt_device_t device = nullptr;
      REQUIRE_CALL_OK(axrt_instance_find_device(instance, id.c_str(), &device));
      devices.push_back(device);
      axrt_stream_t stream = nullptr;
      REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
      streams.push_back(stream);
      axrt_executable_t exe = nullptr;
      REQUIRE_CALL_OK(axrt_executable_load_memory(device, file.data(), file.size(), nullptr, &exe));
      executables.push_back(exe);
      axrt_function_t step = nullptr;
      REQUIRE_CALL_OK(axrt_executable_find_function(exe, "step", &step));
      functions.push_back(step);
    }
  }
  ~Members() {
    for (axrt_function_t f : functions) axrt_function_release(f);
    for (axrt_executable_t e : executables) axrt_executable_release(e);
    for (axrt_stream_t s : streams) axrt_stream_release(s);
    for (axrt_device_t d : devices) axrt_device_release(d);
    axrt_instance_release(instance);
  }
  Members(const Members&) = delete;
  Members& operator=(const Members&) = delete;

  // A float32 [kCount] tensor on member `r`'s device holding `values`
  // (copied on its stream), or uninitialised.
  axrt_tensor_t Tensor(uint32_t r, const std::vector<float>* values = nullptr) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_allocate(devices[r], kCount * 4, nullptr, &buffer));
    if (values != nullptr) {
      REQUIRE_CALL_OK(
          axrt_stream_copy_from_host(streams[r], values->data(), buffer, 0, kCount * 4));
    }
    const int64_t shape[] = {static_cast<int64_t>(kCount)};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_create(buffer, &desc, &tensor));
    axrt_buffer_release(buffer);  // the tensor holds it
    return tensor;
  }

  std::vector<float> Read(uint32_t r, axrt_tensor_t tensor) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    std::vector<float> out(kCount);
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(streams[r], buffer, 0, out.data(), kCount * 4));
    REQUIRE_CALL_OK(axrt_stream_synchronize(streams[r]));
    axrt_buffer_release(buffer);
    return out;
  }

  axrt_instance_t instance = nullptr;
  std::vector<axrt_device_t> devices;
  std::vector<axrt_stream_t> streams;
  std::vector<axrt_executable_t> executables;
  std::vector<axrt_function_t> functions;
};

// Member `r` calls step on its stream as rank `r` of `group`.
axrt_status_t Step(Members& m, axrt_group_t group, uint32_t r, axrt_tensor_t x, axrt_tensor_t y) {
  axrt_invoke_channel_t channel = {group, r};
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.channels = &channel;
  options.channel_count = 1;
  return axrt_function_invoke(m.functions[r], m.streams[r], &x, 1, &y, 1, &options);
}

void EveryMemberSums(Members& m) {
  Group group(m.devices, 0, "tp");
  std::vector<std::vector<float>> inputs;
  std::vector<axrt_tensor_t> xs, ys;
  for (uint32_t r = 0; r < kMembers; ++r) {
    inputs.push_back(axrt_test::RandomFloats(kCount, 70 + r));
    xs.push_back(m.Tensor(r, &inputs[r]));
    ys.push_back(m.Tensor(r));
  }
  // Twice, members in another order the second time.
  for (const std::vector<uint32_t>& order :
       {std::vector<uint32_t>{0, 1, 2, 3}, std::vector<uint32_t>{3, 1, 0, 2}}) {
    for (uint32_t r : order) REQUIRE_CALL_OK(Step(m, group.group, r, xs[r], ys[r]));
    std::vector<float> first;
    for (uint32_t r = 0; r < kMembers; ++r) {
      const std::vector<float> y = m.Read(r, ys[r]);
      if (r == 0) first = y;
      REQUIRE(y == first);
    }
    double worst = 0;
    for (uint64_t i = 0; i < kCount; ++i) {
      double sum = 0;
      for (uint32_t r = 0; r < kMembers; ++r) sum += inputs[r][i];
      worst = std::max(worst, std::abs(first[i] - sum));
    }
    REQUIRE(worst <= 1e-5 * 16);
  }
  CHECK(group.info().collectives == 2);
  for (uint32_t r = 0; r < kMembers; ++r) {
    axrt_tensor_release(xs[r]);
    axrt_tensor_release(ys[r]);
  }
}

void AFailedMemberFailsEveryMember(Members& m) {
  Group group(m.devices, 0, "doomed");
  std::vector<axrt_tensor_t> xs, ys;
  const std::vector<float> ones(kCount, 1.0f);
  for (uint32_t r = 0; r < kMembers; ++r) {
    xs.push_back(m.Tensor(r, &ones));
    ys.push_back(m.Tensor(r));
  }
  REQUIRE_CALL_OK(axrt_stream_synchronize(m.streams[2]));
  // Member 2's stream fails while its call is queued, before the call
  // reaches the all-reduce (held until every member has called).
  std::atomic<bool> release{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(m.streams[2], axrt_test::BlockUntilSet, &release));
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(m.streams[2], axrt_test::FailStream, nullptr));
  for (uint32_t r = 0; r < kMembers; ++r) REQUIRE_CALL_OK(Step(m, group.group, r, xs[r], ys[r]));
  release = true;
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(m.streams[2]), AXRT_STATUS_CODE_INTERNAL,
                     "injected failure");
  for (uint32_t r : {0u, 1u, 3u}) {
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(m.streams[r]), AXRT_STATUS_CODE_ABORTED,
                       "group 'doomed'", "member 2", "injected failure");
  }
  CHECK(group.info().failed_rank == 2);
  // A member whose stream has failed cannot take part: its next call fails
  // (by the stream's failure, or by the group's, which names it).
  const axrt_test::Outcome again = axrt_test::Take(Step(m, group.group, 2, xs[2], ys[2]));
  INFO(again.message);
  CHECK(again.code != AXRT_STATUS_CODE_OK);
  CHECK(again.message.find("injected failure") != std::string::npos);
  // The next call is refused at once, naming the member.
  REQUIRE_CALL_FAILS(Step(m, group.group, 0, xs[0], ys[0]), AXRT_STATUS_CODE_ABORTED, "member 2");
  for (uint32_t r = 0; r < kMembers; ++r) {
    axrt_tensor_release(xs[r]);
    axrt_tensor_release(ys[r]);
  }
}

}  // namespace

TEST_CASE("cpu: every member's step reduces with the others, in order with its copies", "[cpu]") {
  Members m("cpu", "cpu:");
  EveryMemberSums(m);
}

TEST_CASE("cpu: a member whose stream failed fails every member's step by name", "[cpu]") {
  Members m("cpu", "cpu:");
  AFailedMemberFailsEveryMember(m);
}

TEST_CASE("nccl: every member's step reduces with the others, in order with its copies",
          "[mock]") {
  Members m("cpu,cuda", "cuda:");
  EveryMemberSums(m);
}

TEST_CASE("nccl: a member whose stream failed fails every member's step by name", "[mock]") {
  Members m("cpu,cuda", "cuda:");
  AFailedMemberFailsEveryMember(m);
}
