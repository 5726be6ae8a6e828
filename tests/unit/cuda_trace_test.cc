// Traces of the CUDA driver against the mock Driver API (tests/mock_cuda):
// a CUDA stream's operations and a function call's commands are recorded
// with times from timing events, nested and in order on the stream's track;
// failures and a lost device show as instants and are counted; a CUDA graph
// replay is its function's slice without its commands; the bound on
// traced work waiting to be recorded holds; and no timing event outlives the
// instance, whether or not the trace was still running when work completed.
//
// Runs with AXRT_CUDA_DRIVER_LIBRARY set to the mock (tests/unit/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "axrt/axrt.h"
#include "tests/mock_cuda/mock_cuda.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/mock_cuda_support.h"
#include "tests/unit/status_check.h"
#include "tests/unit/trace_files.h"

namespace {

using axrt_test::MockImage;
using axrt_test::RequireNoLiveObjects;

using axrt_test::AxeBuilder;
using axrt_test::BindArena;
using axrt_test::BindInput;
using axrt_test::BindOutput;
using axrt_test::BindScalar;
using axrt_test::BufferParam;
using axrt_test::Fixed;
using axrt_test::Lit;
using axrt_test::ScalarParam;
using axrt_test::Sig;
using axrt_test::Take;

// Elements of the "pipeline" function's tensors: three workgroups of the
// mock's axrt_add_f32 (4096 elements each).
constexpr uint64_t kElements = 3 * 4096;
constexpr uint64_t kBytes = kElements * 4;

// One event of the file, which writes one event a line.
struct TraceEvent {
  std::string name, cat, ph, line;
  int64_t pid = -1;
  int64_t tid = -1;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
};

// The value of the first `"key":` in `line` from `from` on: a string's
// text, or a number's.
std::string Value(const std::string& line, const std::string& key, size_t from = 0) {
  const std::string needle = "\"" + key + "\":";
  size_t at = line.find(needle, from);
  if (at == std::string::npos) return "";
  at += needle.size();
  if (line[at] == '"') {
    std::string text;
    for (size_t i = at + 1; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      text += line[i];
    }
    return text;
  }
  return line.substr(at, line.find_first_of(",}]", at) - at);
}

double Number(const std::string& text) { return text.empty() ? -1 : std::stod(text); }

std::vector<TraceEvent> Events(const std::string& text) {
  std::vector<TraceEvent> events;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{\"name\":", 0) != 0) continue;
    TraceEvent e;
    e.name = Value(line, "name");
    e.cat = Value(line, "cat");
    e.ph = Value(line, "ph");
    e.pid = static_cast<int64_t>(Number(Value(line, "pid")));
    e.tid = static_cast<int64_t>(Number(Value(line, "tid")));
    e.ts = Number(Value(line, "ts"));
    e.dur = Number(Value(line, "dur"));
    e.line = line;
    events.push_back(std::move(e));
  }
  return events;
}

// The name a metadata event gives (its args' "name").
std::string MetadataName(const TraceEvent& e) {
  return Value(e.line, "name", e.line.find("\"args\""));
}

int64_t ProcessOf(const std::vector<TraceEvent>& events, const std::string& process) {
  for (const TraceEvent& e : events) {
    if (e.ph == "M" && e.name == "process_name" && MetadataName(e) == process) return e.pid;
  }
  return -1;
}

// The track of `pid` whose name contains `part`.
int64_t TrackOf(const std::vector<TraceEvent>& events, int64_t pid, const std::string& part) {
  for (const TraceEvent& e : events) {
    if (e.ph == "M" && e.name == "thread_name" && e.pid == pid &&
        MetadataName(e).find(part) != std::string::npos) {
      return e.tid;
    }
  }
  return -1;
}

std::vector<TraceEvent> Slices(const std::vector<TraceEvent>& events, int64_t pid, int64_t tid) {
  std::vector<TraceEvent> slices;
  for (const TraceEvent& e : events) {
    if (e.ph == "X" && e.pid == pid && e.tid == tid) slices.push_back(e);
  }
  std::sort(slices.begin(), slices.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  return slices;
}

size_t Count(const std::vector<TraceEvent>& slices, const std::string& name) {
  return std::count_if(slices.begin(), slices.end(),
                       [&](const TraceEvent& e) { return e.name == name; });
}

// Times are written to the nanosecond; parsing them as doubles may differ in
// the last bits.
constexpr double kTolerance = 0.0015;

// Slices of one track either nest or follow each other: what a stream that
// runs one operation at a time, with a function's commands inside it, shows.
void CheckNested(const std::vector<TraceEvent>& slices) {
  std::vector<const TraceEvent*> open;
  for (const TraceEvent& e : slices) {
    INFO(e.line);
    CHECK(e.dur >= 0);
    while (!open.empty() && open.back()->end() <= e.ts + kTolerance) open.pop_back();
    if (!open.empty()) CHECK(e.end() <= open.back()->end() + kTolerance);
    open.push_back(&e);
  }
}

struct Instance {
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  Instance() {
    REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:0", &device));
  }
  ~Instance() {
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  void Start(const std::string& path) {
    axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
    options.path = path.c_str();
    REQUIRE_CALL_OK(axrt_instance_trace_start(instance, &options));
  }
  void Stop() { REQUIRE_CALL_OK(axrt_instance_trace_stop(instance, nullptr)); }
  axrt_stream_statistics_t Statistics() const {
    axrt_stream_statistics_t stats = AXRT_STREAM_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_stream_statistics(device, &stats));
    return stats;
  }
};

axrt_stream_t NewStream(axrt_device_t device, const char* label) {
  axrt_debug_label_t name = AXRT_DEBUG_LABEL_INIT(label);
  axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
  options.next = &name;
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(device, &options, &stream));
  return stream;
}

axrt_buffer_t NewBuffer(axrt_device_t device, uint64_t size,
                        axrt_memory_type_t type = AXRT_MEMORY_TYPE_DEVICE_LOCAL) {
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = type;
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_allocate(device, size, &options, &buffer));
  return buffer;
}

// "pipeline": out = x + y through the arena, in four commands: kernel
// "first" (x + y into the arena), a copy of the arena to `out`, a fill of
// the arena, kernel "second" (x + y into `out`).
std::vector<uint8_t> PipelineFile() {
  AxeBuilder b;
  const uint32_t code =
      b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_80", MockImage({"axrt_add_f32"}));
  const std::vector<axrt_test::Param> params = {
      BufferParam("a"), BufferParam("b"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
      ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
  const uint32_t first = b.AddKernel("first", code, "axrt_add_f32", params, {256, 1, 1});
  const uint32_t second = b.AddKernel("second", code, "axrt_add_f32", params, {256, 1, 1});
  const Sig x{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};
  const Sig y{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};
  const Sig out{"out", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};
  const uint32_t fn = b.AddFunction("pipeline", {}, {x, y}, {out}, kBytes);
  b.Dispatch(fn, first, {Lit(3)},
             {BindInput(0), BindInput(1), BindArena(0, kBytes), BindScalar(Lit(kElements))});
  b.Copy(fn, BindArena(0, kBytes), Lit(0), BindOutput(0), Lit(0), Lit(kBytes));
  b.Fill(fn, BindArena(0, kBytes), Lit(0), Lit(kBytes), 0, 4);
  b.Dispatch(fn, second, {Lit(3)},
             {BindInput(0), BindInput(1), BindOutput(0), BindScalar(Lit(kElements))});
  return b.Bytes();
}

axrt_tensor_t NewTensor(axrt_device_t device) {
  const int64_t shape[] = {static_cast<int64_t>(kElements)};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
  return tensor;
}

axrt_buffer_t BufferOf(axrt_tensor_t tensor) {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  return buffer;
}

axrt_status_t Nothing(void*, axrt_status_t) { return nullptr; }

// Holds its stream until `open` is set.
axrt_status_t Gate(void* open, axrt_status_t) {
  while (!static_cast<std::atomic<bool>*>(open)->load()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return nullptr;
}

// Resets the mock's injections around each test.
struct MockScope {
  MockScope() { axrt_mock_cuda_reset(); }
  ~MockScope() { axrt_mock_cuda_reset(); }
};

}  // namespace

TEST_CASE("cuda traces: operations and a function's commands on the stream's track", "[mock]") {
  MockScope mock;
  const std::string path = axrt_test::TempTracePath("axrt-cuda-trace");
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device, "traced");
    axrt_executable_t exe = nullptr;
    const std::vector<uint8_t> file = PipelineFile();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(in.device, file.data(), file.size(), nullptr, &exe));
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "pipeline", &fn));
    axrt_tensor_t tx = NewTensor(in.device), ty = NewTensor(in.device);
    axrt_buffer_t bx = BufferOf(tx), by = BufferOf(ty);
    axrt_buffer_t pinned = NewBuffer(in.device, kBytes, AXRT_MEMORY_TYPE_HOST_PINNED);
    axrt_event_t event = nullptr;
    REQUIRE_CALL_OK(axrt_event_create(in.device, nullptr, &event));
    std::vector<float> x(kElements), y(kElements), got(kElements);
    std::iota(x.begin(), x.end(), 1.0f);
    std::iota(y.begin(), y.end(), -7.0f);

    in.Start(path);
    // Pageable memory (staged) and pinned memory (direct) to the device.
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, x.data(), bx, 0, kBytes));
    REQUIRE_CALL_OK(axrt_stream_copy_buffer(stream, pinned, 0, by, 0, kBytes));
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, y.data(), by, 0, kBytes));
    const uint32_t zero = 0;
    axrt_buffer_t scratch = nullptr;
    REQUIRE_CALL_OK(axrt_stream_allocate_buffer(stream, 4096, nullptr, &scratch));
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, scratch, 0, 4096, &zero, 4));
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &Nothing, nullptr));
    REQUIRE_CALL_OK(axrt_stream_record_event(stream, event));
    REQUIRE_CALL_OK(axrt_stream_wait_event(stream, event));
    axrt_tensor_t inputs[] = {tx, ty};
    for (int call = 0; call < 2; ++call) {
      axrt_tensor_t outputs[] = {nullptr};
      REQUIRE_CALL_OK(axrt_function_invoke(fn, stream, inputs, 2, outputs, 1, nullptr));
      axrt_buffer_t out = BufferOf(outputs[0]);
      REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, out, 0, got.data(), kBytes));
      axrt_buffer_release(out);
      axrt_tensor_release(outputs[0]);
    }
    REQUIRE_CALL_OK(axrt_stream_deallocate_buffer(stream, scratch));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    in.Stop();
    for (size_t i = 0; i < kElements; ++i) REQUIRE(got[i] == x[i] + y[i]);

    axrt_buffer_release(scratch);
    axrt_event_release(event);
    axrt_buffer_release(pinned);
    axrt_buffer_release(bx);
    axrt_buffer_release(by);
    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();

  const std::string text = axrt_test::ReadWholeFile(path);
  std::remove(path.c_str());
  const std::vector<TraceEvent> events = Events(text);
  const int64_t pid = ProcessOf(events, "cuda:0");
  REQUIRE(pid >= 0);
  const int64_t tid = TrackOf(events, pid, "'traced'");
  REQUIRE(tid >= 0);
  const std::vector<TraceEvent> slices = Slices(events, pid, tid);
  CHECK(Count(slices, "copy HtoD") == 3);  // two pageable, one pinned
  CHECK(Count(slices, "copy DtoH") == 2);
  CHECK(Count(slices, "fill") == 3);  // one on the stream, one in each call
  CHECK(Count(slices, "host function") == 1);
  CHECK(Count(slices, "event record") == 1);
  CHECK(Count(slices, "event wait") == 1);
  CHECK(Count(slices, "deallocate") == 1);
  CHECK(Count(slices, "pipeline") == 2);
  CHECK(Count(slices, "first") == 2);
  CHECK(Count(slices, "second") == 2);
  CHECK(Count(slices, "copy DtoD") == 2);
  CheckNested(slices);

  // Each call's commands lie inside its slice, in order, with their kernels'
  // names, code and launch shape.
  size_t calls = 0;
  for (const TraceEvent& call : slices) {
    if (call.name != "pipeline") continue;
    ++calls;
    CHECK(call.cat == "function");
    CHECK(call.line.find("\"commands\":4") != std::string::npos);
    std::vector<std::string> inside;
    for (const TraceEvent& e : slices) {
      if (&e == &call || e.ts + kTolerance < call.ts || e.end() > call.end() + kTolerance) continue;
      inside.push_back(e.name);
      if (e.cat == "kernel") {
        INFO(e.line);
        CHECK(e.line.find("\"workgroup_count\":[3,1,1]") != std::string::npos);
        CHECK(e.line.find("\"workgroup_size\":[256,1,1]") != std::string::npos);
      }
    }
    CHECK(inside == std::vector<std::string>{"first", "copy DtoD", "fill", "second"});
  }
  CHECK(calls == 2);
  // Device times are converted to the host's: no operation starts on the
  // GPU before it was queued.
  for (const TraceEvent& e : slices) {
    if (e.cat == "kernel" || Value(e.line, "queued").empty()) continue;
    INFO(e.line);
    CHECK(Number(Value(e.line, "queued")) <= e.ts + 1.0);
  }
}

TEST_CASE("cuda traces: failures and a lost device are instants and counted", "[mock]") {
  MockScope mock;
  const std::string path = axrt_test::TempTracePath("axrt-cuda-trace-failures");
  {
    Instance in;
    axrt_stream_t failing = NewStream(in.device, "failing");
    axrt_stream_t other = NewStream(in.device, "other");
    axrt_executable_t exe = nullptr;
    const std::vector<uint8_t> file = PipelineFile();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(in.device, file.data(), file.size(), nullptr, &exe));
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "pipeline", &fn));
    axrt_tensor_t tx = NewTensor(in.device), ty = NewTensor(in.device);
    const uint64_t failures_before = in.Statistics().stream_failures;

    in.Start(path);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(
        failing,
        [](void*, axrt_status_t) -> axrt_status_t {
          return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "host step gave up");
        },
        nullptr));
    CHECK(Take(axrt_stream_synchronize(failing)).code == AXRT_STATUS_CODE_ABORTED);
    CHECK(in.Statistics().stream_failures == failures_before + 1);

    // A kernel fault loses the device: every live stream of it fails, the
    // one that failed already is not counted twice.
    REQUIRE(axrt_mock_cuda_fail_kernel("axrt_add_f32", 700 /* ILLEGAL_ADDRESS */) == 0);
    axrt_tensor_t inputs[] = {tx, ty};
    axrt_tensor_t outputs[] = {nullptr};
    const axrt_test::Outcome invoked =
        Take(axrt_function_invoke(fn, other, inputs, 2, outputs, 1, nullptr));
    CHECK((invoked.code == AXRT_STATUS_CODE_OK || invoked.code == AXRT_STATUS_CODE_DEVICE_LOST));
    axrt_tensor_release(outputs[0]);
    CHECK(Take(axrt_stream_synchronize(other)).code == AXRT_STATUS_CODE_DEVICE_LOST);
    in.Stop();
    CHECK(in.Statistics().stream_failures == failures_before + 2);

    axrt_tensor_release(tx);
    axrt_tensor_release(ty);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(other);
    axrt_stream_release(failing);
  }
  RequireNoLiveObjects();

  const std::string text = axrt_test::ReadWholeFile(path);
  std::remove(path.c_str());
  const std::vector<TraceEvent> events = Events(text);
  const int64_t pid = ProcessOf(events, "cuda:0");
  REQUIRE(pid >= 0);
  std::vector<std::string> instants;
  for (const TraceEvent& e : events) {
    if (e.ph == "i" && e.pid == pid) instants.push_back(e.name + " / " + Value(e.line, "object"));
  }
  INFO(text);
  REQUIRE(instants.size() == 2);
  std::sort(instants.begin(), instants.end());
  CHECK(instants[0].rfind("device lost: ", 0) == 0);
  CHECK(instants[0].find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
  CHECK(instants[0].find("stream 'other' on cuda:0") != std::string::npos);
  CHECK(instants[1].find("host step gave up") != std::string::npos);
  CHECK(instants[1].find("stream 'failing' on cuda:0") != std::string::npos);
}

TEST_CASE("cuda traces: traced work waiting to be recorded is bounded and never leaks", "[mock]") {
  MockScope mock;
  const std::string path = axrt_test::TempTracePath("axrt-cuda-trace-bound");
  // Outlive the streams whose host functions read them.
  std::atomic<bool> open{false};
  std::atomic<bool> open_released{false};
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device, "busy");
    axrt_buffer_t buffer = NewBuffer(in.device, 4096);
    const uint32_t pattern = 7;

    // Work stuck behind a host function: it and 4095 fills wait for their
    // events; the fills after them are not traced.
    in.Start(path);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &Gate, &open));
    for (int i = 0; i < 5000; ++i) {
      REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, buffer, 0, 4096, &pattern, 4));
    }
    open = true;
    REQUIRE_CALL_OK(axrt_device_synchronize(in.device));
    in.Stop();
    {
      const std::vector<TraceEvent> events = Events(axrt_test::ReadWholeFile(path));
      const int64_t pid = ProcessOf(events, "cuda:0");
      const std::vector<TraceEvent> slices = Slices(events, pid, TrackOf(events, pid, "'busy'"));
      CHECK(Count(slices, "host function") == 1);
      CHECK(Count(slices, "fill") == 4095);  // the bound of cuda_trace.h
      CheckNested(slices);
    }

    // Work still queued when a trace stops is given back at the stream's
    // next call, so none of it shows in the next trace.
    open = false;
    in.Start(path);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(stream, &Gate, &open));
    for (int i = 0; i < 100; ++i) {
      REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, buffer, 0, 4096, &pattern, 4));
    }
    in.Stop();
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(stream, buffer, 0, 4096, &pattern, 4));
    in.Start(path);
    // A stream released with traced work queued gives it back when it
    // finishes in the background.
    axrt_stream_t released = NewStream(in.device, "released");
    axrt_buffer_t its_own = NewBuffer(in.device, 4096);
    REQUIRE_CALL_OK(axrt_stream_launch_host_func(released, &Gate, &open_released));
    REQUIRE_CALL_OK(axrt_stream_fill_buffer(released, its_own, 0, 4096, &pattern, 4));
    axrt_buffer_release(its_own);
    axrt_stream_release(released);
    open = true;
    open_released = true;
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    in.Stop();
    {
      const std::vector<TraceEvent> events = Events(axrt_test::ReadWholeFile(path));
      const int64_t pid = ProcessOf(events, "cuda:0");
      CHECK(Slices(events, pid, TrackOf(events, pid, "'busy'")).empty());
    }
    axrt_buffer_release(buffer);
    axrt_stream_release(stream);
  }
  std::remove(path.c_str());
  RequireNoLiveObjects();
}

TEST_CASE("cuda traces: a graph replay is its function's slice, without commands", "[mock]") {
  MockScope mock;
  const std::string path = axrt_test::TempTracePath("axrt-cuda-trace-graph");
  {
    Instance in;
    axrt_stream_t stream = NewStream(in.device, "replays");
    axrt_executable_t exe = nullptr;
    const std::vector<uint8_t> file = PipelineFile();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(in.device, file.data(), file.size(), nullptr, &exe));
    axrt_function_t fn = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(exe, "pipeline", &fn));
    axrt_tensor_t tx = NewTensor(in.device), ty = NewTensor(in.device), out = NewTensor(in.device);
    axrt_buffer_t bx = BufferOf(tx), by = BufferOf(ty), bout = BufferOf(out);
    std::vector<float> x(kElements), y(kElements), got(kElements);
    std::iota(x.begin(), x.end(), 1.0f);
    std::iota(y.begin(), y.end(), -7.0f);
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, x.data(), bx, 0, kBytes));
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, y.data(), by, 0, kBytes));
    const axrt_tensor_t inputs[] = {tx, ty};
    const axrt_tensor_t outputs[] = {out};
    axrt_graph_t graph = nullptr;
    REQUIRE_CALL_OK(axrt_function_capture(fn, stream, inputs, 2, outputs, 1, nullptr, &graph));
    axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
    REQUIRE_CALL_OK(axrt_graph_query_info(graph, &info));
    REQUIRE(info.native == 1);

    in.Start(path);
    for (int replay = 0; replay < 2; ++replay) REQUIRE_CALL_OK(axrt_graph_replay(graph));
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, bout, 0, got.data(), kBytes));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    in.Stop();
    for (size_t i = 0; i < kElements; ++i) REQUIRE(got[i] == x[i] + y[i]);

    axrt_graph_release(graph);
    for (axrt_buffer_t b : {bx, by, bout}) axrt_buffer_release(b);
    for (axrt_tensor_t t : {tx, ty, out}) axrt_tensor_release(t);
    axrt_function_release(fn);
    axrt_executable_release(exe);
    axrt_stream_release(stream);
  }
  RequireNoLiveObjects();

  const std::vector<TraceEvent> events = Events(axrt_test::ReadWholeFile(path));
  std::remove(path.c_str());
  const int64_t pid = ProcessOf(events, "cuda:0");
  REQUIRE(pid >= 0);
  const std::vector<TraceEvent> slices = Slices(events, pid, TrackOf(events, pid, "'replays'"));
  // The graph runs its commands unseen: only the function's slices.
  CHECK(Count(slices, "pipeline") == 2);
  CHECK(Count(slices, "first") == 0);
  CHECK(Count(slices, "copy DtoD") == 0);
  CHECK(Count(slices, "copy DtoH") == 1);
  for (const TraceEvent& e : slices) {
    if (e.name != "pipeline") continue;
    INFO(e.line);
    CHECK(e.cat == "function");
    CHECK(e.line.find("\"commands\":4") != std::string::npos);
  }
  CheckNested(slices);
}
