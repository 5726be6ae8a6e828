// The CUDA driver against the mock Driver API (tests/mock_cuda): what the
// conformance suite cannot provoke on a healthy GPU. Sticky errors that lose
// the device, out-of-memory that does not, injected failures of single calls,
// JIT logs, parameter checks, copies staged through pinned chunks, host
// functions that release memory, cross-driver waits, native CUDA streams of
// other libraries waiting for axrt events, work held back behind host
// functions (skipped when they fail), pool allocations that never wait for
// the device, and a leak check of every CUDA object after teardown.
//
// The driver library is loaded once per process, so each configuration is
// its own ctest entry running this binary with a tag:
//   [mock]        AXRT_CUDA_DRIVER_LIBRARY = the mock
//   [no-driver]   AXRT_CUDA_DRIVER_LIBRARY = a path that does not exist
//   [init-error]  the mock, with cuInit failing with CUDA_ERROR_NO_DEVICE
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "axrt/axrt.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda.h"
#include "tests/mock_cuda/mock_cuda_table.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/mock_cuda_support.h"
#include "tests/unit/status_check.h"
#include "tests/unit/subprocess.h"

namespace {

using axrt_test::MockImage;
using axrt_test::RequireNoLiveObjects;

using axrt_test::AxeBuilder;
using axrt_test::Binding;
using axrt_test::BindArena;
using axrt_test::BindInput;
using axrt_test::BindOutput;
using axrt_test::BindScalar;
using axrt_test::BufferParam;
using axrt_test::CeilDiv;
using axrt_test::Fixed;
using axrt_test::Lit;
using axrt_test::Param;
using axrt_test::ScalarParam;
using axrt_test::Sig;
using axrt_test::Sym;
using axrt_test::Symbolic;

using StatusCheck = axrt_test::Outcome;
using axrt_test::Take;

struct Instance {
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  explicit Instance(const char* id = "cuda:0") {
    REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, id, &device));
  }
  ~Instance() {
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
};

axrt_buffer_t NewBuffer(axrt_device_t device, uint64_t size,
                        axrt_memory_type_t type = AXRT_MEMORY_TYPE_DEVICE_LOCAL) {
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = type;
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_allocate(device, size, &options, &buffer));
  return buffer;
}

axrt_stream_t NewStream(axrt_device_t device) {
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
  return stream;
}

// "add": out = x + y over n <= 2^24 floats, by axrt_add_f32 from `image`.
// `extra_param` declares a parameter the kernel does not have.
std::vector<uint8_t> AddFile(const std::vector<uint8_t>& image,
                             axrt_axe_code_object_kind_t kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX,
                             bool extra_param = false) {
  AxeBuilder b;
  const uint32_t code = b.AddCode(kind, "compute_80", image);
  std::vector<Param> params = {BufferParam("a"), BufferParam("b"),
                               BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                               ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
  if (extra_param) params.push_back(ScalarParam("extra", AXRT_AXE_DTYPE_UINT64));
  const uint32_t kernel = b.AddKernel("add", code, "axrt_add_f32", params, {256, 1, 1});
  const uint32_t fn = b.AddFunction("add", {{"n", uint64_t{1} << 24}},
                                    {Sig{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
                                     Sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                                    {Sig{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}});
  std::vector<Binding> bindings = {BindInput(0), BindInput(1), BindOutput(0), BindScalar(Sym(0))};
  if (extra_param) bindings.push_back(BindScalar(Sym(0)));
  b.Dispatch(fn, kernel, {CeilDiv(Sym(0), 4096)}, bindings);
  return b.Bytes();
}

axrt_executable_t Load(axrt_device_t device, const std::vector<uint8_t>& bytes) {
  axrt_executable_t exe = nullptr;
  REQUIRE_CALL_OK(axrt_executable_load_memory(device, bytes.data(), bytes.size(), nullptr, &exe));
  return exe;
}

axrt_tensor_t NewTensor(axrt_device_t device, axrt_stream_t stream, const std::vector<float>& data) {
  const int64_t shape[] = {static_cast<int64_t>(data.size())};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, data.data(), buffer, 0, data.size() * 4));
  axrt_buffer_release(buffer);
  return tensor;
}

std::vector<float> ReadTensor(axrt_stream_t stream, axrt_tensor_t tensor, size_t n) {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  std::vector<float> out(n);
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, out.data(), n * 4));
  axrt_buffer_release(buffer);
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  return out;
}

// Runs "add" once on n elements and checks the result.
void RunAdd(axrt_device_t device, axrt_stream_t stream, axrt_executable_t exe, size_t n) {
  axrt_function_t fn = nullptr;
  REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add", &fn));
  std::vector<float> x(n), y(n);
  std::iota(x.begin(), x.end(), 1.0f);
  std::iota(y.begin(), y.end(), -7.0f);
  axrt_tensor_t tx = NewTensor(device, stream, x), ty = NewTensor(device, stream, y);
  axrt_tensor_t inputs[] = {tx, ty};
  axrt_tensor_t outputs[] = {nullptr};
  REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
  const std::vector<float> got = ReadTensor(stream, outputs[0], n);
  for (size_t i = 0; i < n; ++i) REQUIRE(got[i] == x[i] + y[i]);
  axrt_tensor_release(outputs[0]);
  axrt_tensor_release(tx);
  axrt_tensor_release(ty);
  axrt_function_release(fn);
}

// Resets the mock's injections after each test, whatever happened.
struct MockScope {
  MockScope() { axrt_mock_cuda_reset(); }
  ~MockScope() { axrt_mock_cuda_reset(); }
};

}  // namespace

TEST_CASE("cuda: devices report the driver's properties", "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_CALL_OK(axrt_device_query_properties(in.device, &p));
    CHECK(std::string(p.id) == "cuda:0");
    CHECK(std::string(p.driver) == "cuda");
    CHECK(std::string(p.name).find("mock") != std::string::npos);
    CHECK(p.type == AXRT_DEVICE_TYPE_CUDA);
    CHECK(p.compute_capability_major == 9);
    CHECK(p.compute_capability_minor == 0);
    CHECK(p.compute_units == 4);
    CHECK(p.total_memory == uint64_t{1024} << 20);
    CHECK(p.max_workgroup_invocations == 1024);
    CHECK(p.max_shared_memory_per_workgroup == 232448);
    CHECK((p.flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY) == 0);
    CHECK((p.flags & AXRT_DEVICE_FLAG_EVENT_TIMING) != 0);
    size_t count = 0;
    REQUIRE_CALL_OK(axrt_instance_device_count(in.instance, &count));
    CHECK(count == 3);  // cpu:0, cuda:0, cuda:1
    // One primary context retained per device, never more.
    axrt_mock_cuda_objects_t live{};
    axrt_mock_cuda_live_objects(&live);
    CHECK(live.context_retains == 2);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: device memory comes from a stream-ordered pool that trim empties", "[mock]") {
  MockScope mock;
  {
    Instance in;
    for (int i = 0; i < 20; ++i) axrt_buffer_release(NewBuffer(in.device, 1 << 20));
    CHECK(axrt_mock_cuda_call_count("cuMemAllocFromPoolAsync") == 20);
    CHECK(axrt_mock_cuda_call_count("cuMemAlloc") == 0);
    axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &stats));
    CHECK(stats.allocation_count == 20);
    CHECK(stats.deallocation_count == 20);
    CHECK(stats.bytes_in_use == 0);
    CHECK(stats.peak_bytes_in_use >= (1 << 20));
    CHECK(stats.bytes_reserved >= (1 << 20));  // cached below the release threshold
    REQUIRE_CALL_OK(axrt_device_trim_pool(in.device, 0));
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &stats));
    CHECK(stats.bytes_reserved == 0);
    CHECK(axrt_mock_cuda_call_count("cuMemPoolTrimTo") >= 1);

    // Stream-ordered deallocation returns the block on the stream.
    axrt_stream_t stream = NewStream(in.device);
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_stream_allocate_buffer(stream, 4096, nullptr, &buffer));
    REQUIRE_CALL_OK(axrt_stream_deallocate_buffer(stream, buffer));
    CHECK(axrt_mock_cuda_call_count("cuMemFreeAsync") >= 21);
    axrt_buffer_release(buffer);
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: running out of memory is reported and is not sticky", "[mock]") {
  MockScope mock;
  {
    Instance in;
    REQUIRE(axrt_mock_cuda_set_memory_limit(0, 64 << 20) == 0);
    axrt_buffer_t buffer = nullptr;
    const StatusCheck failed = Take(axrt_buffer_allocate(in.device, 128 << 20, nullptr, &buffer));
    CHECK(failed.code == AXRT_STATUS_CODE_RESOURCE_EXHAUSTED);
    CHECK(failed.message.find("out of memory") != std::string::npos);
    CHECK(buffer == nullptr);
    // The device goes on working.
    axrt_stream_t stream = NewStream(in.device);
    buffer = NewBuffer(in.device, 1 << 20);
    const std::vector<uint8_t> pattern(1 << 20, 0x5a);
    std::vector<uint8_t> back(1 << 20);
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, pattern.data(), buffer, 0, pattern.size()));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, back.data(), back.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CHECK(back == pattern);
    axrt_buffer_release(buffer);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a failing call that is not sticky fails alone", "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_buffer_t a = NewBuffer(in.device, 4096), b = NewBuffer(in.device, 4096);
    REQUIRE(axrt_mock_cuda_inject_error("cuMemcpyAsync", 1 /* INVALID_VALUE */, 0) == 0);
    const StatusCheck failed = Take(axrt_stream_copy_buffer(stream, a, 0, b, 0, 4096));
    CHECK(failed.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(failed.message.find("cuMemcpyAsync") != std::string::npos);
    CHECK(failed.message.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, a, 0, b, 0, 4096));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_buffer_release(a);
    axrt_buffer_release(b);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

namespace {

struct HostCallRecord {
  std::atomic<int> runs{0};
  axrt_status_code_t told = AXRT_STATUS_CODE_OK;
  std::string message;
};

axrt_status_t RecordCall(void* user, axrt_status_t stream_status) {
  auto* record = static_cast<HostCallRecord*>(user);
  record->told = axrt_status_code(stream_status);
  record->message = stream_status ? axrt_status_message(stream_status) : "";
  record->runs.fetch_add(1);
  return nullptr;
}

}  // namespace

TEST_CASE("cuda: a sticky error loses the device; later calls fail fast and teardown completes",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_device_t other = nullptr;
    REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, "cuda:1", &other));
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddFile(MockImage({"axrt_add_f32"})));
    RunAdd(in.device, stream, exe, 5000);
    axrt_event_t recorded = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &recorded));
    REQUIRE_CALL_OK(axrt_stream_record_event(stream, recorded));

    REQUIRE(axrt_mock_cuda_fail_kernel("axrt_add_f32", 700 /* ILLEGAL_ADDRESS */) == 0);
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add", &fn));
    const std::vector<float> x(100, 1.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, x), ty = NewTensor(in.device, stream, x);
    axrt_tensor_t inputs[] = {tx, ty};
    axrt_tensor_t outputs[] = {nullptr};
    // The launch is accepted; the fault shows when the stream gets there,
    // which may be before the call returns (it then says so).
    const StatusCheck invoked = Take(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
    CHECK((invoked.code == AXRT_STATUS_CODE_OK || invoked.code == AXRT_STATUS_CODE_DEVICE_LOST));
    if (invoked.code == AXRT_STATUS_CODE_OK) axrt_tensor_release(outputs[0]);
    outputs[0] = nullptr;
    const StatusCheck lost = Take(axrt_stream_synchronize(stream));
    CHECK(lost.code == AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(lost.message.find("cuda:0 is lost") != std::string::npos);
    CHECK(lost.message.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);

    // Every later call on the device fails at once, naming the first error.
    const uint64_t calls_before = axrt_mock_cuda_call_count("cuMemAllocFromPoolAsync");
    axrt_buffer_t buffer = nullptr;
    const StatusCheck alloc = Take(axrt_buffer_allocate(in.device, 4096, nullptr, &buffer));
    CHECK(alloc.code == AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(alloc.message.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
    CHECK(axrt_mock_cuda_call_count("cuMemAllocFromPoolAsync") == calls_before);
    axrt_stream_t stream2 = nullptr;
    CHECK(Take(axrt_stream_create(in.device, nullptr, &stream2)).code ==
          AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(Take(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr)).code ==
          AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(Take(axrt_device_synchronize(in.device)).code == AXRT_STATUS_CODE_DEVICE_LOST);
    void* native = nullptr;
    CHECK(Take(axrt_stream_get_native_handle(stream, &native)).code ==
          AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(native == nullptr);
    const uint64_t waits_before = axrt_mock_cuda_call_count("cuStreamWaitEvent");
    CHECK(Take(axrt_event_enqueue_native_wait(recorded, AXRT_CU_STREAM_LEGACY)).code ==
          AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(axrt_mock_cuda_call_count("cuStreamWaitEvent") == waits_before);
    axrt_executable_t exe2 = nullptr;
    const std::vector<uint8_t> file = AddFile(MockImage({"axrt_add_f32"}));
    CHECK(Take(axrt_executable_load_memory(in.device, file.data(), file.size(), nullptr, &exe2))
              .code == AXRT_STATUS_CODE_DEVICE_LOST);
    // A host function still runs once, told why.
    HostCallRecord record;
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, RecordCall, &record));
    CHECK(record.runs.load() == 1);
    CHECK(record.told == AXRT_STATUS_CODE_DEVICE_LOST);

    // The other device is untouched.
    axrt_stream_t other_stream = NewStream(other);
    axrt_executable_t other_exe = Load(other, file);
    RunAdd(other, other_stream, other_exe, 3000);
    axrt_executable_release(other_exe);
    axrt_stream_release(other_stream);
    axrt_device_release(other);

    // Teardown of everything on the lost device completes.
    axrt_event_release(recorded);
    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

// "add_mul": t = x + y into the arena, then out = t * y: two kernels, so
// that the device can be lost between them.
std::vector<uint8_t> AddMulFile() {
  AxeBuilder b;
  const uint32_t code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_80",
                                  MockImage({"axrt_add_f32", "axrt_mul_f32"}));
  const std::vector<Param> params = {BufferParam("a"), BufferParam("b"),
                                     BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                     ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
  const uint32_t add = b.AddKernel("add", code, "axrt_add_f32", params, {256, 1, 1});
  const uint32_t mul = b.AddKernel("mul", code, "axrt_mul_f32", params, {256, 1, 1});
  constexpr uint64_t kMax = 1 << 16;
  const uint32_t fn = b.AddFunction("add_mul", {{"n", kMax}},
                                    {Sig{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
                                     Sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                                    {Sig{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                                    kMax * 4);
  b.Dispatch(fn, add, {CeilDiv(Sym(0), 4096)},
             {BindInput(0), BindInput(1), BindArena(0, kMax * 4), BindScalar(Sym(0))});
  b.Dispatch(fn, mul, {CeilDiv(Sym(0), 4096)},
             {BindArena(0, kMax * 4), BindInput(1), BindOutput(0), BindScalar(Sym(0))});
  return b.Bytes();
}

TEST_CASE("cuda: a device lost in the middle of a function fails the call's stream cleanly",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    const std::vector<float> x(1000, 2.0f), y(1000, 3.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, x), ty = NewTensor(in.device, stream, y);
    axrt_tensor_t inputs[] = {tx, ty};
    // Whole first: (2 + 3) * 3.
    axrt_tensor_t outputs[] = {nullptr};
    REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
    for (float v : ReadTensor(stream, outputs[0], x.size())) REQUIRE(v == 15.0f);
    axrt_tensor_release(outputs[0]);

    // The second kernel loses the device after the first ran.
    const uint64_t adds = axrt_mock_cuda_call_count("cuLaunchKernel");
    REQUIRE(axrt_mock_cuda_fail_kernel("axrt_mul_f32", 700 /* ILLEGAL_ADDRESS */) == 0);
    outputs[0] = nullptr;
    const StatusCheck invoked =
        Take(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
    CHECK((invoked.code == AXRT_STATUS_CODE_OK || invoked.code == AXRT_STATUS_CODE_DEVICE_LOST));
    if (invoked.code == AXRT_STATUS_CODE_OK) axrt_tensor_release(outputs[0]);
    CHECK(axrt_mock_cuda_call_count("cuLaunchKernel") > adds);
    const StatusCheck lost = Take(axrt_stream_synchronize(stream));
    CHECK(lost.code == AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(lost.message.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
    // Every later call fails at once; everything still releases.
    outputs[0] = nullptr;
    CHECK(Take(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr)).code ==
          AXRT_STATUS_CODE_DEVICE_LOST);
    CHECK(outputs[0] == nullptr);
    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  // The call's arena, outputs and every CUDA object are gone.
  RequireNoLiveObjects();
}

TEST_CASE("cuda: host functions run in order, may release memory, and fail their stream",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    // A host function dropping the last reference to a buffer: CUDA forbids
    // the free on its thread, so the driver does it at its next call.
    axrt_buffer_t doomed = NewBuffer(in.device, 1 << 16);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        stream,
        [](void* user, axrt_status_t) -> axrt_status_t {
          axrt_buffer_release(static_cast<axrt_buffer_t>(user));
          return nullptr;
        },
        doomed));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &stats));
    CHECK(stats.bytes_in_use == 0);

    // A failing host function fails the stream for what follows.
    axrt_event_t event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &event));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        stream,
        [](void*, axrt_status_t) -> axrt_status_t {
          return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "host step gave up");
        },
        nullptr));
    HostCallRecord after;
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, RecordCall, &after));
    REQUIRE_CALL_OK(axrt_stream_record_event(stream, event));
    const StatusCheck sync = Take(axrt_stream_synchronize(stream));
    CHECK(sync.code == AXRT_STATUS_CODE_ABORTED);
    CHECK(sync.message.find("host step gave up") != std::string::npos);
    CHECK(after.runs.load() == 1);
    CHECK(after.told == AXRT_STATUS_CODE_ABORTED);
    CHECK(Take(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE)).code == AXRT_STATUS_CODE_ABORTED);
    // A stream that waits for the failed event fails with it.
    axrt_stream_t waiter = NewStream(in.device);
    REQUIRE_CALL_OK(axrt_stream_wait_event(waiter, event));
    CHECK(Take(axrt_stream_synchronize(waiter)).code == AXRT_STATUS_CODE_ABORTED);
    axrt_stream_release(waiter);
    axrt_event_release(event);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a stream released with work queued finishes it, then frees everything",
          "[mock]") {
  MockScope mock;
  std::atomic<bool> open{false};
  std::vector<uint8_t> back(1 << 20, 0);  // written after the handles are gone
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_buffer_t buffer = NewBuffer(in.device, 1 << 20);
    // The stream waits behind a host function until the test opens it.
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        stream,
        [](void* user, axrt_status_t) -> axrt_status_t {
          auto* flag = static_cast<std::atomic<bool>*>(user);
          while (!flag->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return nullptr;
        },
        &open));
    const uint8_t pattern = 0x42;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, buffer, 0, 1 << 20, &pattern, 1));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, back.data(), back.size()));
    // Neither release waits for the work, and nothing is freed under it.
    axrt_buffer_release(buffer);
    axrt_stream_release(stream);
    axrt_mock_cuda_objects_t live{};
    axrt_mock_cuda_live_objects(&live);
    CHECK(live.streams >= 1);
    open.store(true);
    // The instance goes too: the device lives until the stream finished.
    // Releasing the instance does not wait either.
  }
  // The device's reaper finishes the stream, then the instance goes.
  RequireNoLiveObjects();
  CHECK(back == std::vector<uint8_t>(1 << 20, 0x42));
}

TEST_CASE("cuda: a stream released when no thread can start", "[.mock-release-without-threads]") {
  // The CUDA driver alone: the host function below starts the device's one
  // thread (the releaser), and the release would start the second (the
  // reaper). Where thread starts fail by fault injection, they are counted
  // from the start of the process (ThreadStartsEnvironment(1)).
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cuda";
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &device));
  axrt_stream_t stream = NewStream(device);
  std::atomic<bool> ran{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(
      stream,
      [](void* user, axrt_status_t) -> axrt_status_t {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        static_cast<std::atomic<bool>*>(user)->store(true);
        return nullptr;
      },
      &ran));
  // No room for the stack of the device's reaper thread.
  REQUIRE(axrt_test::ShortOfThreads(1 << 20));
  axrt_stream_release(stream);
  CHECK(ran.load());
  axrt_device_release(device);
  axrt_instance_release(instance);
}

TEST_CASE("cuda: releasing a stream when no thread can start waits for its work", "[mock]") {
  if (!axrt_test::kCanFailThreadStarts) {
    WARN("skipped: neither an address-space limit nor fault injection in this build");
    return;
  }
  INFO("run with \"[.mock-release-without-threads]\" (and the mock) for the child's report");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf("[.mock-release-without-threads]", 60,
                                                    axrt_test::ThreadStartsEnvironment(1))));
}

namespace {

// A host function that holds its stream back until the test `armed` it (ten
// seconds at most), and then a while longer, so that the test's next call
// finds the stream still holding its work.
struct LateGate {
  std::atomic<bool> armed{false};
  std::atomic<bool> ran{false};
};

axrt_status_t OpenLate(void* user, axrt_status_t) {
  auto* gate = static_cast<LateGate*>(user);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gate->armed.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gate->ran.store(true);
  return nullptr;
}

}  // namespace

TEST_CASE("cuda: a stream whose last reference an event record drops, when no thread can start",
          "[.mock-release-in-record-without-threads]") {
  // As above: the releaser is the one thread that starts, the reaper's start
  // fails. The stream the event was last recorded on is released while it
  // still holds that record back, so the event's reference is its last; the
  // record on another stream drops it, and the release waits for the work
  // on this thread. It must do that with no lock of the record held.
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cuda";
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &device));
  axrt_stream_t next = NewStream(device), released = NewStream(device);
  axrt_event_t event = nullptr;
  REQUIRE_CALL_OK(axrt_event_create(device, nullptr, &event));
  // The mock runs each CUDA stream on a thread of its own, started at its
  // first use: both start before threads run short.
  HostCallRecord warm;
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(next, RecordCall, &warm));
  REQUIRE_CALL_OK(axrt_stream_synchronize(next));
  LateGate gate;
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(released, OpenLate, &gate));
  REQUIRE_CALL_OK(axrt_stream_record_event(released, event));
  bool complete = true;
  REQUIRE_CALL_OK(axrt_event_query(event, &complete));
  REQUIRE(!complete);  // held back behind the gate
  REQUIRE(axrt_test::ShortOfThreads(1 << 20));
  axrt_mock_cuda_objects_t before{};
  axrt_mock_cuda_live_objects(&before);
  axrt_stream_release(released);
  gate.armed.store(true);
  REQUIRE_CALL_OK(axrt_stream_record_event(next, event));
  // The released stream was finished inside the record, after its work.
  CHECK(gate.ran.load());
  axrt_mock_cuda_objects_t after{};
  axrt_mock_cuda_live_objects(&after);
  CHECK(after.streams + 1 == before.streams);
  REQUIRE_CALL_OK(axrt_event_wait(event, uint64_t{10'000'000'000}));
  REQUIRE_CALL_OK(axrt_stream_synchronize(next));
  CHECK(warm.runs.load() == 1);
  axrt_event_release(event);
  axrt_stream_release(next);
  axrt_device_release(device);
  axrt_instance_release(instance);
}

TEST_CASE("cuda: a stream whose last reference an event record drops is finished without the "
          "record's locks",
          "[mock]") {
  if (!axrt_test::kCanFailThreadStarts) {
    WARN("skipped: neither an address-space limit nor fault injection in this build");
    return;
  }
  // Finished under them, the stream would take the event's lock again to
  // issue its held record: the child hangs until it is killed, or
  // ThreadSanitizer ends it.
  INFO("run with \"[.mock-release-in-record-without-threads]\" (and the mock) for the child's "
       "report; a child that hangs is killed after 60 s");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf("[.mock-release-in-record-without-threads]",
                                                    60, axrt_test::ThreadStartsEnvironment(1))));
}

TEST_CASE("cuda: pageable copies go through pinned chunks, pinned ones straight", "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    const size_t size = (10 << 20) + 123;  // three chunks and a bit
    std::vector<uint8_t> src(size), back(size, 0);
    for (size_t i = 0; i < size; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
    axrt_buffer_t buffer = NewBuffer(in.device, size);
    const uint64_t host_funcs = axrt_mock_cuda_call_count("cuLaunchHostFunc");
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, src.data(), buffer, 0, size));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, back.data(), size));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CHECK(back == src);
    CHECK(axrt_mock_cuda_call_count("cuLaunchHostFunc") - host_funcs == 6);

    // 2-D: every other 100-byte row of a pageable image.
    std::vector<uint8_t> image(64 * 256), rows(64 * 100, 0);
    for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i);
    axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
    copy.src.host_pointer = image.data();
    copy.src.pitch = 256;
    copy.dst.buffer = buffer;
    copy.dst.pitch = 100;
    copy.width = 100;
    copy.height = 64;
    REQUIRE_CALL_OK(axrt_stream_copy_2d(stream, &copy));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, rows.data(), rows.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    for (size_t r = 0; r < 64; ++r) {
      REQUIRE(std::memcmp(rows.data() + r * 100, image.data() + r * 256, 100) == 0);
    }

    // Pinned memory is reached directly: no host functions.
    axrt_buffer_t pinned = NewBuffer(in.device, 1 << 20, AXRT_MEMORY_TYPE_HOST_PINNED);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0x3c, 1 << 20);
    const uint64_t before = axrt_mock_cuda_call_count("cuLaunchHostFunc");
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, pinned, 0, buffer, 0, 1 << 20));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, mapped, 1 << 20));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CHECK(axrt_mock_cuda_call_count("cuLaunchHostFunc") == before);
    CHECK(static_cast<uint8_t*>(mapped)[12345] == 0x3c);
    axrt_buffer_release(pinned);
    axrt_buffer_release(buffer);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: code objects that do not load say why, with the JIT log", "[mock]") {
  MockScope mock;
  {
    Instance in;
    const std::string ptx =
        ".version 8.0\n.target sm_80\n// mock-jit-error: ptxas: line 3: unknown opcode 'fma.xyz'\n";
    const std::vector<uint8_t> bad = AddFile(std::vector<uint8_t>(ptx.begin(), ptx.end()),
                                             AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX);
    axrt_executable_t exe = nullptr;
    StatusCheck failed =
        Take(axrt_executable_load_memory(in.device, bad.data(), bad.size(), nullptr, &exe));
    CHECK(failed.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(failed.message.find("CUDA_ERROR_INVALID_PTX") != std::string::npos);
    CHECK(failed.message.find("unknown opcode 'fma.xyz'") != std::string::npos);

    // A symbol the image lacks.
    const std::vector<uint8_t> missing = AddFile(MockImage({"axrt_mul_f32"}));
    failed = Take(axrt_executable_load_memory(in.device, missing.data(), missing.size(), nullptr,
                                              &exe));
    CHECK(failed.code == AXRT_STATUS_CODE_NOT_FOUND);
    CHECK(failed.message.find("axrt_add_f32") != std::string::npos);

    // Parameters the kernel does not take.
    const std::vector<uint8_t> extra =
        AddFile(MockImage({"axrt_add_f32"}), AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, true);
    failed =
        Take(axrt_executable_load_memory(in.device, extra.data(), extra.size(), nullptr, &exe));
    CHECK(failed.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(failed.message.find("takes parameters") != std::string::npos);
    CHECK(exe == nullptr);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: streams wait for CPU events and CPU streams for CUDA events", "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_device_t cpu = nullptr;
    REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, "cpu:0", &cpu));
    axrt_stream_t cpu_stream = NewStream(cpu), cuda_stream = NewStream(in.device);
    axrt_event_t cpu_event = nullptr, cuda_event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(cpu, nullptr, &cpu_event));
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &cuda_event));

    // CPU writes a pinned buffer, CUDA copies it after waiting, CPU reads the
    // copy after waiting for CUDA.
    axrt_buffer_t pinned = NewBuffer(in.device, 4096, AXRT_MEMORY_TYPE_HOST_PINNED);
    axrt_buffer_t device = NewBuffer(in.device, 4096);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0, 4096);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        cpu_stream,
        [](void* user, axrt_status_t) -> axrt_status_t {
          std::memset(user, 0x77, 4096);
          return nullptr;
        },
        mapped));
    REQUIRE_CALL_OK(axrt_stream_record_event(cpu_stream, cpu_event));
    REQUIRE_CALL_OK(axrt_stream_wait_event(cuda_stream, cpu_event));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(cuda_stream, pinned, 0, device, 0, 4096));
    REQUIRE_CALL_OK(axrt_stream_record_event(cuda_stream, cuda_event));
    std::vector<uint8_t> back(4096, 0);
    REQUIRE_CALL_OK(axrt_stream_wait_event(cpu_stream, cuda_event));
    REQUIRE_CALL_OK(axrt_stream_synchronize(cpu_stream));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(cuda_stream, device, 0, back.data(), 4096));
    REQUIRE_CALL_OK(axrt_stream_synchronize(cuda_stream));
    CHECK(back == std::vector<uint8_t>(4096, 0x77));

    int64_t ns = -1;
    axrt_event_t start = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &start));
    REQUIRE_CALL_OK(axrt_stream_record_event(cuda_stream, start));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(cuda_stream, pinned, 0, device, 0, 4096));
    REQUIRE_CALL_OK(axrt_stream_record_event(cuda_stream, cuda_event));
    REQUIRE_CALL_OK(axrt_event_wait(cuda_event, AXRT_TIMEOUT_INFINITE));
    REQUIRE_CALL_OK(axrt_event_elapsed_time(start, cuda_event, &ns));
    CHECK(ns >= 0);

    axrt_event_release(start);
    axrt_buffer_release(pinned);
    axrt_buffer_release(device);
    axrt_event_release(cpu_event);
    axrt_event_release(cuda_event);
    axrt_stream_release(cpu_stream);
    axrt_stream_release(cuda_stream);
    axrt_device_release(cpu);
  }
  RequireNoLiveObjects();
}

namespace {

const axrt::mock_cuda::Table& cu() { return axrt::mock_cuda::table(); }

// Makes cuda:0's primary context current on this thread for the scope, as a
// library sharing the GPU with axrt would.
struct ForeignContext {
  ForeignContext() {
    REQUIRE(cu().cuDevicePrimaryCtxRetain(&context, 0) == CUDA_SUCCESS);
    REQUIRE(cu().cuCtxSetCurrent(context) == CUDA_SUCCESS);
  }
  ~ForeignContext() {
    cu().cuCtxSetCurrent(nullptr);
    cu().cuDevicePrimaryCtxRelease(0);
  }
  CUcontext context = nullptr;
};

// What a host function on a native stream saw when it ran.
struct Observation {
  std::atomic<bool> ran{false};
  const uint8_t* device_bytes = nullptr;  // mock device memory is host memory
  const uint8_t* pinned_bytes = nullptr;
  std::vector<uint8_t> device_seen;
  std::vector<uint8_t> pinned_seen;
};

void Observe(void* user) {
  auto* o = static_cast<Observation*>(user);
  if (o->device_bytes) o->device_seen.assign(o->device_bytes, o->device_bytes + 4096);
  if (o->pinned_bytes) o->pinned_seen.assign(o->pinned_bytes, o->pinned_bytes + 4096);
  o->ran.store(true);
}

axrt_status_t WaitForOpen(void* user, axrt_status_t) {
  auto* open = static_cast<std::atomic<bool>*>(user);
  while (!open->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return nullptr;
}

}  // namespace

TEST_CASE("cuda: native streams wait on the device for axrt events behind host work",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    ForeignContext foreign_context;
    const auto& c = cu();
    CUstream foreign = nullptr;
    REQUIRE(c.cuStreamCreate(&foreign, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

    // An axrt stream's handle is a CUstream of the driver, the same every
    // time; another library's work on it runs in order with axrt's, and
    // synchronising the axrt stream waits for it.
    axrt_stream_t consumer = NewStream(in.device);
    void* handle = nullptr;
    void* again = nullptr;
    REQUIRE_CALL_OK(axrt_stream_get_native_handle(consumer, &handle));
    REQUIRE_CALL_OK(axrt_stream_get_native_handle(consumer, &again));
    REQUIRE(handle != nullptr);
    CHECK(again == handle);
    CHECK(c.cuStreamQuery(static_cast<CUstream>(handle)) == CUDA_SUCCESS);
    std::atomic<bool> open{false};
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(consumer, WaitForOpen, &open));
    Observation after_axrt;
    REQUIRE(c.cuLaunchHostFunc(static_cast<CUstream>(handle), Observe, &after_axrt) ==
            CUDA_SUCCESS);
    open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(consumer));
    CHECK(after_axrt.ran.load());

    // The producer: a CUDA stream that waits for a CPU event held behind a
    // gated CPU stream, then fills device memory and writes pinned memory.
    axrt_device_t cpu = nullptr;
    REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, "cpu:0", &cpu));
    axrt_stream_t cpu_stream = NewStream(cpu);
    axrt_event_t cpu_event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(cpu, nullptr, &cpu_event));
    axrt_stream_t producer = NewStream(in.device);
    axrt_buffer_t device = NewBuffer(in.device, 4096);
    axrt_buffer_t pinned = NewBuffer(in.device, 4096, AXRT_MEMORY_TYPE_HOST_PINNED);
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(device, &info));
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0, 4096);
    const uint8_t zero = 0;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(producer, device, 0, 4096, &zero, 1));
    REQUIRE_CALL_OK(axrt_stream_synchronize(producer));

    axrt_event_t event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &event));
    const StatusCheck never = Take(axrt_event_enqueue_native_wait(event, foreign));
    CHECK(never.code == AXRT_STATUS_CODE_FAILED_PRECONDITION);
    CHECK(never.message.find("never recorded") != std::string::npos);

    std::atomic<bool> gate{false};
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(cpu_stream, WaitForOpen, &gate));
    REQUIRE_CALL_OK(axrt_stream_record_event(cpu_stream, cpu_event));
    REQUIRE_CALL_OK(axrt_stream_wait_event(producer, cpu_event));
    const uint8_t pattern = 0x5A;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(producer, device, 0, 4096, &pattern, 1));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        producer,
        [](void* user, axrt_status_t) -> axrt_status_t {
          std::memset(user, 0x77, 4096);
          return nullptr;
        },
        mapped));
    REQUIRE_CALL_OK(axrt_stream_record_event(producer, event));

    // Native streams of every kind wait for that record; the calls return at
    // once, and what is enqueued after them sees the producer's writes.
    const CUstream natives[] = {foreign, static_cast<CUstream>(handle), AXRT_CU_STREAM_LEGACY,
                                AXRT_CU_STREAM_PER_THREAD};
    Observation seen[4];
    const uint64_t waits_before = axrt_mock_cuda_call_count("cuStreamWaitEvent");
    for (int i = 0; i < 4; ++i) {
      REQUIRE_CALL_OK(axrt_event_enqueue_native_wait(event, natives[i]));
      seen[i].device_bytes = reinterpret_cast<const uint8_t*>(info.device_address);
      seen[i].pinned_bytes = static_cast<const uint8_t*>(mapped);
      REQUIRE(c.cuLaunchHostFunc(natives[i], Observe, &seen[i]) == CUDA_SUCCESS);
    }
    CHECK(axrt_mock_cuda_call_count("cuStreamWaitEvent") == waits_before + 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    for (const Observation& o : seen) CHECK(!o.ran.load());
    CHECK(c.cuStreamQuery(foreign) == CUDA_ERROR_NOT_READY);
    gate.store(true);
    REQUIRE(c.cuStreamSynchronize(foreign) == CUDA_SUCCESS);
    REQUIRE(c.cuStreamSynchronize(AXRT_CU_STREAM_LEGACY) == CUDA_SUCCESS);
    REQUIRE_CALL_OK(axrt_stream_synchronize(consumer));
    for (const Observation& o : seen) {
      REQUIRE(o.ran.load());
      CHECK(o.device_seen == std::vector<uint8_t>(4096, 0x5A));
      CHECK(o.pinned_seen == std::vector<uint8_t>(4096, 0x77));
    }

    // A handle CUDA does not know is the caller's mistake.
    CUstream gone = nullptr;
    REQUIRE(c.cuStreamCreate(&gone, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    REQUIRE(c.cuStreamDestroy(gone) == CUDA_SUCCESS);
    const StatusCheck unknown = Take(axrt_event_enqueue_native_wait(event, gone));
    CHECK(unknown.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(unknown.message.find("native_stream") != std::string::npos);
    CHECK(unknown.message.find("CUDA_ERROR_INVALID_HANDLE") != std::string::npos);

    // A failure known only after the wait was enqueued cannot fail the native
    // stream: it goes on once the record is reached, and the event reports
    // the failure. Once known, the failure is returned and nothing waits.
    std::atomic<bool> give_up{false};
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        producer,
        [](void* user, axrt_status_t) -> axrt_status_t {
          WaitForOpen(user, nullptr);
          return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "producer gave up");
        },
        &give_up));
    REQUIRE_CALL_OK(axrt_stream_record_event(producer, event));
    REQUIRE_CALL_OK(axrt_event_enqueue_native_wait(event, foreign));
    Observation late;
    REQUIRE(c.cuLaunchHostFunc(foreign, Observe, &late) == CUDA_SUCCESS);
    give_up.store(true);
    REQUIRE(c.cuStreamSynchronize(foreign) == CUDA_SUCCESS);
    CHECK(late.ran.load());
    CHECK(Take(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE)).code == AXRT_STATUS_CODE_ABORTED);
    const uint64_t waits_after = axrt_mock_cuda_call_count("cuStreamWaitEvent");
    const StatusCheck failed = Take(axrt_event_enqueue_native_wait(event, foreign));
    CHECK(failed.code == AXRT_STATUS_CODE_ABORTED);
    CHECK(failed.message.find("producer gave up") != std::string::npos);
    CHECK(axrt_mock_cuda_call_count("cuStreamWaitEvent") == waits_after);

    REQUIRE(c.cuStreamDestroy(foreign) == CUDA_SUCCESS);
    CHECK(Take(axrt_stream_synchronize(producer)).code == AXRT_STATUS_CODE_ABORTED);
    REQUIRE_CALL_OK(axrt_stream_synchronize(cpu_stream));
    axrt_event_release(event);
    axrt_event_release(cpu_event);
    axrt_buffer_release(device);
    axrt_buffer_release(pinned);
    axrt_stream_release(producer);
    axrt_stream_release(consumer);
    axrt_stream_release(cpu_stream);
    axrt_device_release(cpu);
  }
  RequireNoLiveObjects();
}

namespace {

axrt_status_t GiveUp(void*, axrt_status_t) {
  return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "host step gave up");
}

// Fills `buffer` with `value` and waits for it, on a stream of its own.
void FillNow(axrt_device_t device, axrt_buffer_t buffer, size_t size, uint8_t value) {
  axrt_stream_t stream = NewStream(device);
  REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, buffer, 0, size, &value, 1));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_stream_release(stream);
}

// The first `size` bytes of `buffer`, read on a stream of its own.
std::vector<uint8_t> ReadNow(axrt_device_t device, axrt_buffer_t buffer, size_t size) {
  axrt_stream_t stream = NewStream(device);
  std::vector<uint8_t> bytes(size);
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, bytes.data(), size));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_stream_release(stream);
  return bytes;
}

uint64_t DeviceAddress(axrt_buffer_t buffer) {
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_buffer_query_info(buffer, &info));
  return info.device_address;
}

axrt_pool_statistics_t PoolStatistics(axrt_device_t device) {
  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_pool_statistics(device, &stats));
  return stats;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A host function that appends its step to a log, after checking that the
// copy before it landed in pinned memory.
struct Step {
  std::mutex* mutex;
  std::vector<int>* log;
  const uint8_t* pinned;
  size_t size;
  int index;
  static axrt_status_t Run(void* user, axrt_status_t told) {
    auto* step = static_cast<Step*>(user);
    bool landed = !told;
    for (size_t i = 0; landed && i < step->size; ++i) {
      landed = step->pinned[i] == static_cast<uint8_t>(step->index);
    }
    std::lock_guard<std::mutex> lock(*step->mutex);
    step->log->push_back(landed ? step->index : -1 - step->index);
    return nullptr;
  }
};

}  // namespace

TEST_CASE("cuda: work queued behind a failing host function does not run", "[mock]") {
  MockScope mock;
  constexpr size_t kN = 1000;
  constexpr size_t kBytes = kN * sizeof(float);
  std::atomic<bool> open{false};
  std::vector<uint8_t> readback(kBytes, 0x55);  // a copy into it must not run
  {
    Instance in;
    axrt_device_t other = nullptr;
    REQUIRE_CALL_OK(axrt_instance_find_device(in.instance, "cuda:1", &other));
    axrt_executable_t exe = Load(in.device, AddFile(MockImage({"axrt_add_f32"})));
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add", &fn));
    axrt_stream_t setup = NewStream(in.device);
    const std::vector<float> ones(kN, 1.0f), old_sums(kN, -3.0f);
    axrt_tensor_t tx = NewTensor(in.device, setup, ones), ty = NewTensor(in.device, setup, ones);
    axrt_tensor_t sums = NewTensor(in.device, setup, old_sums);
    REQUIRE_CALL_OK(axrt_stream_synchronize(setup));
    axrt_buffer_t sums_buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(sums, &sums_buffer));
    axrt_buffer_t filled = NewBuffer(in.device, kBytes), copied = NewBuffer(in.device, kBytes);
    axrt_buffer_t from_pinned = NewBuffer(in.device, kBytes);
    axrt_buffer_t waited = NewBuffer(in.device, kBytes), waited_other = NewBuffer(other, kBytes);
    for (axrt_buffer_t b : {filled, copied, from_pinned, waited}) {
      FillNow(in.device, b, kBytes, 0x11);
    }
    FillNow(other, waited_other, kBytes, 0x11);
    axrt_buffer_t pinned = NewBuffer(in.device, kBytes, AXRT_MEMORY_TYPE_HOST_PINNED);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0x22, kBytes);
    axrt_buffer_t doomed = NewBuffer(in.device, 1 << 20);
    const uint64_t in_use = PoolStatistics(in.device).bytes_in_use;

    // Everything is enqueued while a first host function holds the stream,
    // so everything is enqueued before the failure.
    axrt_stream_t stream = NewStream(in.device);
    axrt_event_t event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &event));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &open));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, GiveUp, nullptr));
    const uint8_t pattern = 0xEE;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, filled, 0, kBytes, &pattern, 1));
    const std::vector<uint8_t> source(kBytes, 0x33);
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, source.data(), copied, 0, kBytes));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, pinned, 0, from_pinned, 0, kBytes));
    axrt_tensor_t inputs[] = {tx, ty};
    axrt_tensor_t outputs[] = {sums};
    REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, filled, 0, readback.data(), kBytes));
    HostCallRecord after;
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, RecordCall, &after));
    REQUIRE_CALL_OK(axrt_stream_record_event(stream, event));
    REQUIRE_CALL_OK(axrt_stream_deallocate_buffer(stream, doomed));
    axrt_buffer_release(doomed);
    // Streams of this device and of another wait for the event; their work
    // after the wait does not run either.
    axrt_stream_t waiter = NewStream(in.device), other_waiter = NewStream(other);
    REQUIRE_CALL_OK(axrt_stream_wait_event(waiter, event));
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(waiter, waited, 0, kBytes, &pattern, 1));
    REQUIRE_CALL_OK(axrt_stream_wait_event(other_waiter, event));
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(other_waiter, waited_other, 0, kBytes, &pattern, 1));
    bool complete = true;
    REQUIRE_CALL_OK(axrt_event_query(event, &complete));
    CHECK(!complete);
    open.store(true);

    StatusCheck sync = Take(axrt_stream_synchronize(stream));
    CHECK(sync.code == AXRT_STATUS_CODE_ABORTED);
    CHECK(sync.message.find("host step gave up") != std::string::npos);
    CHECK(Take(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(Take(axrt_event_query(event, &complete)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(Take(axrt_stream_synchronize(waiter)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(Take(axrt_stream_synchronize(other_waiter)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(after.runs.load() == 1);
    CHECK(after.told == AXRT_STATUS_CODE_ABORTED);

    // The buffers keep their old contents.
    const std::vector<uint8_t> old(kBytes, 0x11);
    CHECK(ReadNow(in.device, filled, kBytes) == old);
    CHECK(ReadNow(in.device, copied, kBytes) == old);
    CHECK(ReadNow(in.device, from_pinned, kBytes) == old);
    CHECK(ReadNow(in.device, sums_buffer, kBytes) == FloatBytes(old_sums));
    CHECK(ReadNow(in.device, waited, kBytes) == old);
    CHECK(ReadNow(other, waited_other, kBytes) == old);
    CHECK(readback == std::vector<uint8_t>(kBytes, 0x55));
    // The deallocation behind the failure still gave the memory back.
    CHECK(PoolStatistics(in.device).bytes_in_use + (1 << 20) <= in_use);

    for (axrt_buffer_t b :
         {filled, copied, from_pinned, waited, waited_other, pinned, sums_buffer}) {
      axrt_buffer_release(b);
    }
    axrt_event_release(event);
    axrt_stream_release(waiter);
    axrt_stream_release(other_waiter);
    axrt_stream_release(stream);
    axrt_stream_release(setup);
    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_tensor_release(sums);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_device_release(other);
  }
  // Nothing the skipped work held is left behind.
  RequireNoLiveObjects();
}

TEST_CASE("cuda: work queued behind host functions that succeed runs in order", "[mock]") {
  MockScope mock;
  constexpr size_t kSize = 1 << 12;
  constexpr int kSteps = 12;
  std::atomic<bool> open{false};
  {
    Instance in;
    axrt_executable_t exe = Load(in.device, AddFile(MockImage({"axrt_add_f32"})));
    axrt_stream_t stream = NewStream(in.device);
    axrt_buffer_t device = NewBuffer(in.device, kSize);
    axrt_buffer_t pinned = NewBuffer(in.device, kSize, AXRT_MEMORY_TYPE_HOST_PINNED);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0xFF, kSize);
    std::mutex mutex;
    std::vector<int> log;
    std::vector<Step> steps(kSteps);
    std::vector<std::vector<uint8_t>> sources(kSteps);
    // Each step: a pageable copy (staged through host calls of its own), a
    // pinned copy, then a host function that checks it and may fail the
    // stream, so each step's copies wait for the previous step's function.
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &open));
    for (int i = 0; i < kSteps; ++i) {
      sources[i].assign(kSize, static_cast<uint8_t>(i));
      steps[i] = {&mutex, &log, static_cast<const uint8_t*>(mapped), kSize, i};
      REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, sources[i].data(), device, 0, kSize));
      REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, device, 0, pinned, 0, kSize));
      REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &Step::Run, &steps[i]));
    }
    axrt_event_t event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &event));
    REQUIRE_CALL_OK(axrt_stream_record_event(stream, event));
    // Another stream reads the device buffer once the event says so.
    axrt_stream_t reader = NewStream(in.device);
    std::vector<uint8_t> seen(kSize, 0);
    REQUIRE_CALL_OK(axrt_stream_wait_event(reader, event));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(reader, device, 0, seen.data(), kSize));
    open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(reader));
    CHECK(seen == sources.back());
    REQUIRE_CALL_OK(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    std::vector<int> expected(kSteps);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(log == expected);
    // Kernels behind a host function run too, once it ran.
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &Step::Run, &steps.back()));
    RunAdd(in.device, stream, exe, 3000);

    axrt_event_release(event);
    axrt_buffer_release(device);
    axrt_buffer_release(pinned);
    axrt_stream_release(reader);
    axrt_stream_release(stream);
    axrt_executable_release(exe);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a stream whose native handle was handed out keeps its work in order with "
          "another library's",
          "[mock]") {
  MockScope mock;
  std::atomic<bool> open{false};
  {
    Instance in;
    ForeignContext foreign_context;
    axrt_stream_t stream = NewStream(in.device);
    void* handle = nullptr;
    REQUIRE_CALL_OK(axrt_stream_get_native_handle(stream, &handle));
    axrt_buffer_t device = NewBuffer(in.device, 4096);
    FillNow(in.device, device, 4096, 0);
    // The fill goes to CUDA behind the host function at once, so the other
    // library's work enqueued after it sees its bytes.
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &open));
    const uint8_t pattern = 0x77;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, device, 0, 4096, &pattern, 1));
    Observation seen;
    seen.device_bytes = reinterpret_cast<const uint8_t*>(DeviceAddress(device));
    REQUIRE(cu().cuLaunchHostFunc(static_cast<CUstream>(handle), Observe, &seen) ==
            CUDA_SUCCESS);
    open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    REQUIRE(seen.ran.load());
    CHECK(seen.device_seen == std::vector<uint8_t>(4096, 0x77));

    // Handed out while a host function queued before still runs (and holds
    // the stream's later work back): from the hand-out on, work enqueued
    // through axrt reaches CUDA at once, ahead of the other library's.
    axrt_stream_t late = NewStream(in.device);
    std::atomic<bool> late_open{false};
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(late, WaitForOpen, &late_open));
    const uint8_t first = 0x11;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(late, device, 0, 4096, &first, 1));  // held
    void* late_handle = nullptr;
    REQUIRE_CALL_OK(axrt_stream_get_native_handle(late, &late_handle));
    const uint8_t second = 0x22;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(late, device, 0, 4096, &second, 1));
    Observation late_seen;
    late_seen.device_bytes = seen.device_bytes;
    REQUIRE(cu().cuLaunchHostFunc(static_cast<CUstream>(late_handle), Observe, &late_seen) ==
            CUDA_SUCCESS);
    late_open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(late));
    REQUIRE(late_seen.ran.load());
    CHECK(late_seen.device_seen == std::vector<uint8_t>(4096, 0x22));
    axrt_stream_release(late);
    axrt_buffer_release(device);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: pool allocations never wait for the device", "[mock]") {
  MockScope mock;
  std::atomic<bool> open{false};
  {
    Instance in;
    // Device work that lasts as long as the test wants: no allocation may
    // wait for it, nor for the private allocation stream.
    axrt_stream_t busy = NewStream(in.device);
    axrt_buffer_t busy_buffer = NewBuffer(in.device, 1 << 16);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(busy, WaitForOpen, &open));
    const uint8_t pattern = 1;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(busy, busy_buffer, 0, 1 << 16, &pattern, 1));
    const axrt_pool_statistics_t before = PoolStatistics(in.device);
    const uint64_t waits = axrt_mock_cuda_host_waits();
    const uint64_t synchronizations = axrt_mock_cuda_call_count("cuStreamSynchronize");
    // Four threads at once, sizes that repeat so that blocks come back.
    constexpr int kThreads = 4;
    constexpr int kRounds = 64;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kRounds; ++i) {
          axrt_buffer_t buffer = nullptr;
          axrt_status_t status =
              axrt_buffer_allocate(in.device, uint64_t{4096} << (i % 4), nullptr, &buffer);
          if (status) {
            axrt_status_free(status);
            failures.fetch_add(1);
            continue;
          }
          axrt_buffer_release(buffer);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(failures.load() == 0);
    CHECK(axrt_mock_cuda_host_waits() == waits);
    CHECK(axrt_mock_cuda_call_count("cuStreamSynchronize") == synchronizations);
    const axrt_pool_statistics_t after = PoolStatistics(in.device);
    CHECK(after.allocation_count == before.allocation_count + kThreads * kRounds);
    CHECK(after.reuse_count > before.reuse_count);

    // Work on a new buffer waits for its allocation on the device instead.
    axrt_stream_t user = NewStream(in.device);
    axrt_buffer_t fresh = NewBuffer(in.device, 4096);
    const uint64_t device_waits = axrt_mock_cuda_call_count("cuStreamWaitEvent");
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(user, fresh, 0, 4096, &pattern, 1));
    CHECK(axrt_mock_cuda_call_count("cuStreamWaitEvent") == device_waits + 1);
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(user, fresh, 0, 4096, &pattern, 1));
    CHECK(axrt_mock_cuda_call_count("cuStreamWaitEvent") == device_waits + 1);
    REQUIRE_CALL_OK(axrt_stream_synchronize(user));
    CHECK(ReadNow(in.device, fresh, 4096) == std::vector<uint8_t>(4096, 1));

    open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(busy));
    axrt_buffer_release(fresh);
    axrt_buffer_release(busy_buffer);
    axrt_stream_release(user);
    axrt_stream_release(busy);
  }
  RequireNoLiveObjects();
}

namespace {

void HoldUntilOpen(void* user) {
  auto* open = static_cast<std::atomic<bool>*>(user);
  while (!open->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

TEST_CASE("cuda: a block freed in one stream's order goes to another allocation only after it",
          "[mock]") {
  MockScope mock;
  constexpr size_t kSize = 1 << 16;
  std::atomic<bool> open{false};
  std::atomic<bool> done{false};
  // Should an allocation wait for the stream that frees the block, it would
  // wait forever: this lets the stream go after a while instead.
  std::thread watchdog([&] {
    for (int i = 0; i < 5000 && !done.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    open.store(true);
  });
  {
    Instance in;
    ForeignContext foreign_context;
    axrt_stream_t freeing = NewStream(in.device), writing = NewStream(in.device);
    axrt_buffer_t x = NewBuffer(in.device, kSize);
    FillNow(in.device, x, kSize, 0x11);
    const uint64_t x_address = DeviceAddress(x);
    axrt_buffer_t pinned = NewBuffer(in.device, kSize, AXRT_MEMORY_TYPE_HOST_PINNED);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &mapped));
    std::memset(mapped, 0, kSize);
    // The freeing stream is busy with another library's work; behind it, it
    // reads x, then frees x in its order.
    void* handle = nullptr;
    REQUIRE_CALL_OK(axrt_stream_get_native_handle(freeing, &handle));
    REQUIRE(cu().cuLaunchHostFunc(static_cast<CUstream>(handle), HoldUntilOpen, &open) ==
            CUDA_SUCCESS);
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(freeing, x, 0, pinned, 0, kSize));
    REQUIRE_CALL_OK(axrt_stream_deallocate_buffer(freeing, x));
    axrt_buffer_release(x);

    // A buffer of the same size, written by another stream at once: it is
    // not x's block, and neither its allocation nor the write waits for the
    // freeing stream.
    axrt_buffer_t y = NewBuffer(in.device, kSize);
    CHECK(DeviceAddress(y) != x_address);
    const uint8_t pattern = 0xEE;
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(writing, y, 0, kSize, &pattern, 1));
    bool idle = false;
    for (int i = 0; i < 2000 && !idle; ++i) {
      REQUIRE_CALL_OK(axrt_stream_query(writing, &idle));
      if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(idle);
    CHECK(!open.load());

    open.store(true);
    REQUIRE_CALL_OK(axrt_stream_synchronize(freeing));
    // The freeing stream read x's bytes, untouched.
    const auto* read = static_cast<const uint8_t*>(mapped);
    CHECK(std::vector<uint8_t>(read, read + kSize) == std::vector<uint8_t>(kSize, 0x11));
    // Once the stream got to the free, the pool hands the block out again.
    const uint64_t reused = PoolStatistics(in.device).reuse_count;
    axrt_buffer_t z = NewBuffer(in.device, kSize);
    CHECK(DeviceAddress(z) == x_address);
    CHECK(PoolStatistics(in.device).reuse_count == reused + 1);

    REQUIRE_CALL_OK(axrt_stream_synchronize(writing));
    axrt_buffer_release(z);
    axrt_buffer_release(y);
    axrt_buffer_release(pinned);
    axrt_stream_release(writing);
    axrt_stream_release(freeing);
  }
  done.store(true);
  watchdog.join();
  RequireNoLiveObjects();
}

// --- Graphs -------------------------------------------------------------------

namespace {

// A tensor of `n` elements of `dtype`, its memory as allocated.
axrt_tensor_t NewTensorOf(axrt_device_t device, axrt_dtype_t dtype, size_t n) {
  const int64_t shape[] = {static_cast<int64_t>(n)};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = 1;
  desc.shape = shape;
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
  return tensor;
}

// Queues a copy of `bytes` bytes from `data` into `tensor` on `stream`.
void WriteTensor(axrt_stream_t stream, axrt_tensor_t tensor, const void* data, size_t bytes) {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, data, buffer, 0, bytes));
  axrt_buffer_release(buffer);
}

// `tensor`'s first `n` values of T, once `stream` got there.
template <class T>
std::vector<T> ReadAs(axrt_stream_t stream, axrt_tensor_t tensor, size_t n) {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  std::vector<T> out(n);
  REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, out.data(), n * sizeof(T)));
  axrt_buffer_release(buffer);
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  return out;
}

axrt_graph_info_t GraphInfo(axrt_graph_t graph) {
  axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
  REQUIRE_CALL_OK(axrt_graph_query_info(graph, &info));
  return info;
}

axrt_graph_t Capture(axrt_function_t fn, axrt_stream_t stream,
                     std::initializer_list<axrt_tensor_t> inputs,
                     std::initializer_list<axrt_tensor_t> outputs) {
  axrt_graph_t graph = nullptr;
  REQUIRE_CALL_OK(axrt_function_capture(fn, stream, inputs.begin(), inputs.size(),
                                        outputs.begin(), outputs.size(), nullptr, &graph));
  return graph;
}

constexpr uint64_t kMixedMax = 1 << 12;

// "mixed": ones = 1.0f (a 4-byte fill into the arena), sum = x + ones (a
// kernel), out = sum (a copy), marks = 0xBEEF (a 2-byte fill): every kind of
// command a CUDA graph takes. "wide": out = 2.5 by an 8-byte fill pattern.
// "clustered": out = x + y by a kernel launched in 2x1x1 clusters.
std::vector<uint8_t> MixedFile() {
  AxeBuilder b;
  const uint32_t code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_80",
                                  MockImage({"axrt_add_f32"}));
  const std::vector<Param> params = {BufferParam("a"), BufferParam("b"),
                                     BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                     ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
  const uint32_t add = b.AddKernel("add", code, "axrt_add_f32", params, {256, 1, 1});
  const uint32_t clustered_add =
      b.AddKernel("clustered_add", code, "axrt_add_f32", params, {256, 1, 1}, 0, {2, 1, 1});
  const Sig x{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}};
  const uint32_t mixed = b.AddFunction(
      "mixed", {{"n", kMixedMax}}, {x},
      {Sig{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
       Sig{"marks", AXRT_AXE_DTYPE_UINT16, {Symbolic(0)}}},
      2 * kMixedMax * 4);
  b.Fill(mixed, BindArena(0, kMixedMax * 4), {}, Sym(0) * Lit(4), 0x3f800000, 4);
  b.Dispatch(mixed, add, {CeilDiv(Sym(0), 4096)},
             {BindInput(0), BindArena(0, kMixedMax * 4), BindArena(kMixedMax * 4, kMixedMax * 4),
              BindScalar(Sym(0))});
  b.Copy(mixed, BindArena(kMixedMax * 4, kMixedMax * 4), {}, BindOutput(0), {}, Sym(0) * Lit(4));
  b.Fill(mixed, BindOutput(1), {}, Sym(0) * Lit(2), 0xBEEF, 2);
  const uint32_t wide = b.AddFunction("wide", {{"n", kMixedMax}}, {x},
                                      {Sig{"out", AXRT_AXE_DTYPE_FLOAT64, {Symbolic(0)}}});
  uint64_t bits = 0;
  const double value = 2.5;
  std::memcpy(&bits, &value, 8);
  b.Fill(wide, BindOutput(0), {}, Sym(0) * Lit(8), bits, 8);
  const uint32_t clustered = b.AddFunction(
      "clustered", {{"n", kMixedMax}}, {x, Sig{"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
      {Sig{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}});
  b.Dispatch(clustered, clustered_add, {Lit(2)},
             {BindInput(0), BindInput(1), BindOutput(0), BindScalar(Sym(0))});
  return b.Bytes();
}

// The floats i * scale + offset, i < n.
std::vector<float> Ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale + offset;
  return v;
}

}  // namespace

TEST_CASE("cuda: a captured call replays as one CUDA graph launch", "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    constexpr size_t kN = 3000;
    // Copies from host memory read it when they run: it stays until then.
    const std::vector<float> x0 = Ramp(kN, 1.0f, 0.0f), y = Ramp(kN, 0.5f, -2.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, x0);
    axrt_tensor_t ty = NewTensor(in.device, stream, y);
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    const uint64_t nodes = axrt_mock_cuda_call_count("cuGraphAddKernelNode");
    axrt_graph_t graph = Capture(fn, stream, {tx, ty}, {out});
    const axrt_graph_info_t info = GraphInfo(graph);
    CHECK(info.native == 1);
    CHECK(info.command_count == 2);
    CHECK(std::string(info.label).find("add_mul") != std::string::npos);
    CHECK(info.arena_bytes > 0);
    CHECK(axrt_mock_cuda_call_count("cuGraphAddKernelNode") == nodes + 2);
    CHECK(axrt_mock_cuda_call_count("cuGraphInstantiateWithFlags") == 1);
    axrt_mock_cuda_objects_t live{};
    axrt_mock_cuda_live_objects(&live);
    CHECK(live.graphs == 0);  // the template went once instantiated
    CHECK(live.graph_execs == 1);

    // Each replay sees the inputs written before it in stream order, and
    // gives what an invoke gives.
    constexpr int kReplays = 5;
    const uint64_t launches = axrt_mock_cuda_call_count("cuLaunchKernel");
    const uint64_t graph_launches = axrt_mock_cuda_call_count("cuGraphLaunch");
    std::vector<std::vector<float>> replayed;
    for (int r = 0; r < kReplays; ++r) {
      const std::vector<float> x = Ramp(kN, 1.0f + r, static_cast<float>(r));
      WriteTensor(stream, tx, x.data(), kN * sizeof(float));
      REQUIRE_CALL_OK(axrt_graph_replay(graph));
      replayed.push_back(ReadAs<float>(stream, out, kN));
    }
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == graph_launches + kReplays);
    CHECK(axrt_mock_cuda_call_count("cuLaunchKernel") == launches);
    for (int r = 0; r < kReplays; ++r) {
      const std::vector<float> x = Ramp(kN, 1.0f + r, static_cast<float>(r));
      WriteTensor(stream, tx, x.data(), kN * sizeof(float));
      axrt_tensor_t inputs[] = {tx, ty};
      axrt_tensor_t outputs[] = {nullptr};
      REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
      CHECK(ReadAs<float>(stream, outputs[0], kN) == replayed[r]);
      axrt_tensor_release(outputs[0]);
      for (size_t i : {size_t{0}, size_t{7}, kN - 1}) {
        CHECK(replayed[r][i] == (x[i] + y[i]) * y[i]);
      }
    }
    axrt_graph_release(graph);
    axrt_tensor_release(out);
    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: fills and copies become memset and memcpy nodes; what graphs lack is resubmitted",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, MixedFile());
    constexpr size_t kN = 2500;
    const std::vector<float> y = Ramp(kN, -1.0f, 4.0f);
    axrt_tensor_t tx = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_tensor_t ty = NewTensor(in.device, stream, y);

    axrt_function_t mixed = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "mixed", &mixed));
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_tensor_t marks = NewTensorOf(in.device, AXRT_DTYPE_UINT16, kN);
    axrt_graph_t graph = Capture(mixed, stream, {tx}, {out, marks});
    CHECK(GraphInfo(graph).native == 1);
    CHECK(GraphInfo(graph).command_count == 4);
    CHECK(axrt_mock_cuda_call_count("cuGraphAddMemsetNode") == 2);
    CHECK(axrt_mock_cuda_call_count("cuGraphAddMemcpyNode") == 1);
    CHECK(axrt_mock_cuda_call_count("cuGraphAddKernelNode") == 1);
    for (int r = 0; r < 3; ++r) {
      const std::vector<float> x = Ramp(kN, 2.0f, static_cast<float>(-r));
      WriteTensor(stream, tx, x.data(), kN * sizeof(float));
      REQUIRE_CALL_OK(axrt_graph_replay(graph));
      const std::vector<float> got = ReadAs<float>(stream, out, kN);
      for (size_t i : {size_t{0}, size_t{1}, kN - 1}) CHECK(got[i] == x[i] + 1.0f);
      CHECK(ReadAs<uint16_t>(stream, marks, kN) == std::vector<uint16_t>(kN, 0xBEEF));
    }
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == 3);
    axrt_graph_release(graph);

    // An 8-byte fill pattern and a launch in clusters are not CUDA graph
    // nodes here: their graphs replay by resubmitting the call's commands.
    axrt_function_t wide = nullptr, clustered = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "wide", &wide));
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "clustered", &clustered));
    axrt_tensor_t doubles = NewTensorOf(in.device, AXRT_DTYPE_FLOAT64, kN);
    axrt_graph_t wide_graph = Capture(wide, stream, {tx}, {doubles});
    CHECK(GraphInfo(wide_graph).native == 0);
    axrt_graph_t clustered_graph = Capture(clustered, stream, {tx, ty}, {out});
    CHECK(GraphInfo(clustered_graph).native == 0);
    const std::vector<float> x = Ramp(kN, 3.0f, 1.0f);
    WriteTensor(stream, tx, x.data(), kN * sizeof(float));
    const uint64_t cluster_launches = axrt_mock_cuda_call_count("cuLaunchKernelEx");
    REQUIRE_CALL_OK(axrt_graph_replay(wide_graph));
    REQUIRE_CALL_OK(axrt_graph_replay(clustered_graph));
    CHECK(ReadAs<double>(stream, doubles, kN) == std::vector<double>(kN, 2.5));
    const std::vector<float> sums = ReadAs<float>(stream, out, kN);
    for (size_t i : {size_t{0}, kN / 2, kN - 1}) CHECK(sums[i] == x[i] + y[i]);
    CHECK(axrt_mock_cuda_call_count("cuLaunchKernelEx") == cluster_launches + 1);
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == 3);
    CHECK(axrt_mock_cuda_call_count("cuGraphInstantiateWithFlags") == 1);

    axrt_graph_release(wide_graph);
    axrt_graph_release(clustered_graph);
    for (axrt_tensor_t t : {tx, ty, out, marks, doubles}) axrt_tensor_release(t);
    for (axrt_function_t f : {mixed, wide, clustered}) axrt_function_release(f);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a CUDA error while building a graph fails the capture or falls back",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, MixedFile());
    axrt_function_t mixed = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "mixed", &mixed));
    constexpr size_t kN = 100;
    axrt_tensor_t tx = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_tensor_t marks = NewTensorOf(in.device, AXRT_DTYPE_UINT16, kN);
    const axrt_tensor_t inputs[] = {tx};
    const axrt_tensor_t outputs[] = {out, marks};
    axrt_graph_t graph = nullptr;
    // A node CUDA refuses fails the capture, naming the command; the
    // template graph goes.
    REQUIRE(axrt_mock_cuda_inject_error("cuGraphAddMemcpyNode", 1 /* INVALID_VALUE */, 0) == 0);
    const StatusCheck refused =
        Take(axrt_function_capture(mixed, stream, inputs, 1, outputs, 2, nullptr, &graph));
    CHECK(refused.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
    CHECK(refused.message.find("command 2") != std::string::npos);
    CHECK(refused.message.find("cuGraphAddMemcpyNode") != std::string::npos);
    CHECK(graph == nullptr);
    CHECK(axrt_mock_cuda_call_count("cuGraphDestroy") == 1);
    // What CUDA does not support (CUDA_ERROR_NOT_SUPPORTED) falls back.
    REQUIRE(axrt_mock_cuda_inject_error("cuGraphInstantiateWithFlags", 801, 0) == 0);
    REQUIRE_CALL_OK(axrt_function_capture(mixed, stream, inputs, 1, outputs, 2, nullptr, &graph));
    CHECK(GraphInfo(graph).native == 0);
    const std::vector<float> x = Ramp(kN, 1.0f, 0.5f);
    WriteTensor(stream, tx, x.data(), kN * sizeof(float));
    REQUIRE_CALL_OK(axrt_graph_replay(graph));
    const std::vector<float> got = ReadAs<float>(stream, out, kN);
    for (size_t i : {size_t{0}, kN - 1}) CHECK(got[i] == x[i] + 1.0f);
    CHECK(axrt_mock_cuda_call_count("cuGraphDestroy") == 2);
    axrt_graph_release(graph);
    for (axrt_tensor_t t : {tx, out, marks}) axrt_tensor_release(t);
    axrt_function_release(mixed);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: replays wait behind host functions; a released graph finishes its replays",
          "[mock]") {
  MockScope mock;
  std::atomic<bool> open{false};
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddFile(MockImage({"axrt_add_f32"})));
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add", &fn));
    constexpr size_t kN = 2000;
    constexpr int kReplays = 6;
    const std::vector<float> start = Ramp(kN, 1.0f, 0.0f), quarters(kN, 0.25f);
    axrt_tensor_t acc = NewTensor(in.device, stream, start);
    axrt_tensor_t step = NewTensor(in.device, stream, quarters);
    axrt_tensor_t sum = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_buffer_t acc_buffer = nullptr, sum_buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(acc, &acc_buffer));
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(sum, &sum_buffer));
    axrt_graph_t graph = Capture(fn, stream, {acc, step}, {sum});
    REQUIRE(GraphInfo(graph).native == 1);
    // Everything below is held back behind the host function: replays, each
    // followed by sum -> acc, in order; the graph goes before any ran.
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &open));
    for (int r = 0; r < kReplays; ++r) {
      REQUIRE_CALL_OK(axrt_graph_replay(graph));
      REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, sum_buffer, 0, acc_buffer, 0, kN * 4));
    }
    const uint64_t launched = axrt_mock_cuda_call_count("cuGraphLaunch");
    axrt_graph_release(graph);
    CHECK(launched == 0);  // still held
    open.store(true);
    const std::vector<float> got = ReadAs<float>(stream, acc, kN);
    for (size_t i : {size_t{0}, size_t{5}, kN - 1}) {
      CHECK(got[i] == static_cast<float>(i) + 0.25f * kReplays);
    }
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == kReplays);

    // Behind a host function that fails, replays are skipped, and the stream
    // reports the failure. (The first host function holds the stream until
    // the replay was enqueued.)
    graph = Capture(fn, stream, {acc, step}, {sum});
    const std::vector<float> before = ReadAs<float>(stream, sum, kN);
    std::atomic<bool> reopen{false};
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &reopen));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, GiveUp, nullptr));
    REQUIRE_CALL_OK(axrt_graph_replay(graph));
    reopen.store(true);
    CHECK(Take(axrt_stream_synchronize(stream)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == kReplays);
    CHECK(ReadNow(in.device, sum_buffer, kN * 4) == FloatBytes(before));
    CHECK(Take(axrt_graph_replay(graph)).code == AXRT_STATUS_CODE_ABORTED);

    axrt_graph_release(graph);
    axrt_buffer_release(acc_buffer);
    axrt_buffer_release(sum_buffer);
    for (axrt_tensor_t t : {acc, step, sum}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a graph and its stream released with replays in flight",
          "[.mock-graph-released-with-stream]") {
  // The replays keep the graph until they ran, and the graph keeps its
  // stream: once both are released, nothing may keep the other alive.
  MockScope mock;
  std::atomic<bool> open{false};
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    constexpr size_t kN = 1000;
    const std::vector<float> ones(kN, 1.0f), twos(kN, 2.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, ones);
    axrt_tensor_t ty = NewTensor(in.device, stream, twos);
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_graph_t graph = Capture(fn, stream, {tx, ty}, {out});
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    // Replays in CUDA, and replays held back behind a host function.
    for (int r = 0; r < 4; ++r) REQUIRE_CALL_OK(axrt_graph_replay(graph));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, WaitForOpen, &open));
    for (int r = 0; r < 4; ++r) REQUIRE_CALL_OK(axrt_graph_replay(graph));
    axrt_graph_release(graph);
    axrt_stream_release(stream);
    for (axrt_tensor_t t : {tx, ty, out}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    open.store(true);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a graph and its stream released with replays in flight leave nothing behind",
          "[mock]") {
  // In a process of its own: what leaks there stays there.
  INFO("run with \"[.mock-graph-released-with-stream]\" (and the mock) for the child's report");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf("[.mock-graph-released-with-stream]", 60)));
}

TEST_CASE("cuda: a replay's kernel fault loses the device; a failed graph launch fails the stream",
          "[mock]") {
  MockScope mock;
  constexpr size_t kN = 1000;
  for (const bool fault : {false, true}) {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    const std::vector<float> twos(kN, 2.0f), threes(kN, 3.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, twos);
    axrt_tensor_t ty = NewTensor(in.device, stream, threes);
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_graph_t graph = Capture(fn, stream, {tx, ty}, {out});
    REQUIRE_CALL_OK(axrt_graph_replay(graph));
    CHECK(ReadAs<float>(stream, out, kN) == std::vector<float>(kN, 15.0f));
    if (fault) {
      // The second kernel of the replay faults: the device is lost, as for a
      // call (the mock reports the sticky error, not the kernel).
      REQUIRE(axrt_mock_cuda_fail_kernel("axrt_mul_f32", 700 /* ILLEGAL_ADDRESS */) == 0);
      const StatusCheck replayed = Take(axrt_graph_replay(graph));
      CHECK((replayed.code == AXRT_STATUS_CODE_OK ||
             replayed.code == AXRT_STATUS_CODE_DEVICE_LOST));
      const StatusCheck lost = Take(axrt_stream_synchronize(stream));
      CHECK(lost.code == AXRT_STATUS_CODE_DEVICE_LOST);
      CHECK(lost.message.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
      CHECK(Take(axrt_graph_replay(graph)).code == AXRT_STATUS_CODE_DEVICE_LOST);
    } else {
      // The launch itself fails: the replay says so, naming the function,
      // and the stream fails with it.
      REQUIRE(axrt_mock_cuda_inject_error("cuGraphLaunch", 701 /* LAUNCH_OUT_OF_RESOURCES */,
                                          0) == 0);
      const StatusCheck failed = Take(axrt_graph_replay(graph));
      CHECK(failed.code != AXRT_STATUS_CODE_OK);
      CHECK(failed.message.find("function 'add_mul'") != std::string::npos);
      CHECK(failed.message.find("cuGraphLaunch") != std::string::npos);
      CHECK(failed.message.find("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") != std::string::npos);
      const StatusCheck sync = Take(axrt_stream_synchronize(stream));
      CHECK(sync.code == failed.code);
      CHECK(sync.message.find("cuGraphLaunch") != std::string::npos);
    }
    axrt_graph_release(graph);
    for (axrt_tensor_t t : {tx, ty, out}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: without CUDA graphs a captured call replays by resubmission",
          "[.mock-no-graphs]") {
  // Run with AXRT_MOCK_CUDA_HIDE=cuGraphInstantiateWithFlags: the driver
  // loads without graphs, which create_graph answers UNIMPLEMENTED.
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    constexpr size_t kN = 1500;
    const std::vector<float> y(kN, 3.0f);
    axrt_tensor_t tx = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_tensor_t ty = NewTensor(in.device, stream, y);
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_graph_t graph = Capture(fn, stream, {tx, ty}, {out});
    CHECK(GraphInfo(graph).native == 0);
    CHECK(GraphInfo(graph).command_count == 2);
    const uint64_t launches = axrt_mock_cuda_call_count("cuLaunchKernel");
    for (int r = 0; r < 3; ++r) {
      const std::vector<float> x = Ramp(kN, 1.0f, static_cast<float>(r));
      WriteTensor(stream, tx, x.data(), kN * sizeof(float));
      REQUIRE_CALL_OK(axrt_graph_replay(graph));
      const std::vector<float> got = ReadAs<float>(stream, out, kN);
      for (size_t i : {size_t{0}, kN - 1}) CHECK(got[i] == (x[i] + 3.0f) * 3.0f);
    }
    CHECK(axrt_mock_cuda_call_count("cuLaunchKernel") == launches + 6);
    CHECK(axrt_mock_cuda_call_count("cuGraphCreate") == 0);
    CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == 0);
    axrt_graph_release(graph);
    for (axrt_tensor_t t : {tx, ty, out}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: calls share fence events, and what they keep goes once the stream is idle",
          "[mock]") {
  MockScope mock;
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device);
    axrt_executable_t exe = Load(in.device, AddMulFile());
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "add_mul", &fn));
    constexpr size_t kN = 1000;
    const std::vector<float> x(kN, 2.0f), y(kN, 3.0f);
    axrt_tensor_t tx = NewTensor(in.device, stream, x), ty = NewTensor(in.device, stream, y);
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_pool_statistics_t before = AXRT_POOL_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &before));
    // 64 replays of a graph: one fence event per kCoalescedFences of them.
    constexpr int kCalls = 64;
    axrt_tensor_t out = NewTensorOf(in.device, AXRT_DTYPE_FLOAT32, kN);
    axrt_graph_t graph = Capture(fn, stream, {tx, ty}, {out});
    const uint64_t records = axrt_mock_cuda_call_count("cuEventRecord");
    for (int c = 0; c < kCalls; ++c) REQUIRE_CALL_OK(axrt_graph_replay(graph));
    CHECK(axrt_mock_cuda_call_count("cuEventRecord") - records <= kCalls / 8 + 1);
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_graph_release(graph);
    axrt_tensor_release(out);
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &before));
    // 61 calls, each output released at once: the calls keep them, the
    // last few unfenced.
    axrt_tensor_t last = nullptr;
    for (int c = 0; c < kCalls - 3; ++c) {
      axrt_tensor_t inputs[] = {tx, ty};
      axrt_tensor_t outputs[] = {nullptr};
      REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
      if (c + 1 < kCalls - 3) {
        axrt_tensor_release(outputs[0]);
      } else {
        last = outputs[0];
      }
    }
    // Idle, the stream lets go of everything its calls kept.
    bool idle = false;
    for (int spin = 0; spin < 100000 && !idle; ++spin) {
      REQUIRE_CALL_OK(axrt_stream_query(stream, &idle));
    }
    REQUIRE(idle);
    axrt_tensor_release(last);
    axrt_pool_statistics_t after = AXRT_POOL_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(in.device, &after));
    CHECK(after.bytes_in_use == before.bytes_in_use);
    for (axrt_tensor_t t : {tx, ty}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();
}

TEST_CASE("cuda: a driver without graphs replays captured calls by resubmission", "[mock]") {
  INFO("run with \"[.mock-no-graphs]\", the mock and "
       "AXRT_MOCK_CUDA_HIDE=cuGraphInstantiateWithFlags for the child's report");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf(
      "[.mock-no-graphs]", 60, "AXRT_MOCK_CUDA_HIDE=cuGraphInstantiateWithFlags")));
}

namespace {

// The CUDA driver's entry in `instance`.
axrt_driver_info_t CudaDriverInfo(axrt_instance_t instance) {
  size_t drivers = 0;
  REQUIRE_CALL_OK(axrt_instance_driver_count(instance, &drivers));
  for (size_t i = 0; i < drivers; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_instance_query_driver_info(instance, i, &info));
    if (std::string(info.name) == "cuda") return info;
  }
  FAIL("the instance has no CUDA driver");
  return AXRT_DRIVER_INFO_INIT;
}

}  // namespace

TEST_CASE("cuda: without a driver library there are no CUDA devices and the CPU works",
          "[no-driver]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  const axrt_driver_info_t info = CudaDriverInfo(instance);
  CHECK(info.device_count == 0);
  CHECK(std::string(info.availability).find("could not be loaded") != std::string::npos);
  axrt_device_t device = nullptr;
  const StatusCheck missing = Take(axrt_instance_find_device(instance, "cuda:0", &device));
  CHECK(missing.code == AXRT_STATUS_CODE_NOT_FOUND);
  CHECK(missing.message.find("could not be loaded") != std::string::npos);
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &device));
  axrt_stream_t stream = NewStream(device);
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_stream_release(stream);
  axrt_device_release(device);
  axrt_instance_release(instance);
}

TEST_CASE("cuda: a driver that finds no GPU gives zero devices and its reason", "[init-error]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  const axrt_driver_info_t info = CudaDriverInfo(instance);
  CHECK(info.device_count == 0);
  CHECK(std::string(info.availability).find("no CUDA device") != std::string::npos);
  axrt_instance_release(instance);
  RequireNoLiveObjects();
}
