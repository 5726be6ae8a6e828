// Fault injection, one failure point at a time (base/fault.h): for each path
// (instance creation and device enumeration, building and verifying an
// executable, loading it from memory and from a file, invoking, DLPack
// import and export, the serving engine), the N-th host allocation fails,
// then the N-th device allocation, for N = 1, 2, 3, ... until a run meets no
// failure. Each failing run must end in a clean status (RESOURCE_EXHAUSTED,
// or the one its kind documents), leave everything it had made releasable
// and the objects made before it usable, and leak nothing: the suite runs
// under AddressSanitizer, whose leak checker fails the program at exit.
//
// Host allocations are counted through this program's operator new
// (tests/support/counted_new.cc, which libstdc++ containers and every `new`
// of axrt reach) and axrt's own malloc sites; device allocations at the
// driver boundary, for every driver. The counts of each path are printed
// and quoted in docs/testing.md.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "base/fault.h"
#include "tests/support/axe_test_builder.h"
#include "tests/support/double_kernel.h"
#include "tests/unit/stand_in_model.h"
#include "tests/unit/status_check.h"

#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    if (axrt_status_t status_ = (expr)) return status_; \
  } while (0)

#define CHECK_CALL_OK(call)                                         \
  do {                                                              \
    ::axrt_test::Outcome check_outcome_ = ::axrt_test::Take(call);  \
    INFO(#call << ": " << check_outcome_.message);                  \
    CHECK(check_outcome_.code == AXRT_STATUS_CODE_OK);              \
  } while (0)

namespace {

using axrt::fault::Site;
using namespace axrt_test;

const char* SiteName(Site site) {
  switch (site) {
    case Site::kHostAllocation:
      return "host allocations";
    case Site::kDeviceAllocation:
      return "device allocations";
    case Site::kFileMap:
      return "file mappings";
    case Site::kFileRead:
      return "file reads (EIO)";
    case Site::kShortRead:
      return "file reads (short)";
    case Site::kThreadStart:
      return "thread starts";
  }
  return "?";
}

// A failure point: the status a run ended with.
struct Run {
  axrt_status_code_t code = AXRT_STATUS_CODE_OK;
  std::string message;
  bool test_code_failed = false;  // the failing allocation was this program's own
};

// Walks the failure points of one path. `Scenario` is made before arming
// (what the path needs but does not test), Act() runs armed and returns its
// first error (owned), Check() runs after, disarmed: it verifies the results
// of a run that succeeded, and that the objects made before still work;
// its destructor releases everything.
// With `persistent`, every event after the N-th fails too (memory that does
// not come back), which the error paths themselves must survive.
template <typename Scenario>
uint64_t Walk(const char* path, Site site, std::initializer_list<axrt_status_code_t> allowed,
              bool persistent = false) {
  constexpr uint64_t kLimit = 100000;
  uint64_t points = 0;
  for (uint64_t n = 1; n <= kLimit; ++n) {
    // Released inside the iteration, where its INFO names the failure.
    std::optional<Scenario> holder;
    Scenario& scenario = holder.emplace();
    Run run;
    axrt::fault::arm(site, n, persistent);
    axrt_status_t status = nullptr;
    try {
      status = scenario.Act();
    } catch (const std::bad_alloc&) {
      run.test_code_failed = true;  // an allocation of this program's own code
    } catch (const std::runtime_error& e) {
      // The test builder turns refusals into "CODE: message".
      const std::string what = e.what();
      status = axrt_status_create(what.rfind("RESOURCE_EXHAUSTED", 0) == 0
                                      ? AXRT_STATUS_CODE_RESOURCE_EXHAUSTED
                                      : AXRT_STATUS_CODE_INTERNAL,
                                  what.c_str());
    }
    const bool fired = axrt::fault::fired();
    const uint64_t seen = axrt::fault::disarm();
    const Outcome outcome = Take(status);
    run.code = outcome.code;
    run.message = outcome.message;
    INFO(path << ": " << SiteName(site) << ", failing number " << n << " of " << seen << ": "
              << axrt_status_code_name(run.code) << ": " << run.message);
    if (!fired) {
      REQUIRE(run.code == AXRT_STATUS_CODE_OK);
      REQUIRE_FALSE(run.test_code_failed);
      scenario.Check(/*succeeded=*/true);
      holder.reset();
      points = n - 1;
      break;
    }
    if (!run.test_code_failed) {
      const bool ok = run.code == AXRT_STATUS_CODE_OK ||
                      std::find(allowed.begin(), allowed.end(), run.code) != allowed.end();
      REQUIRE(ok);
    }
    scenario.Check(run.code == AXRT_STATUS_CODE_OK && !run.test_code_failed);
    holder.reset();
    REQUIRE(n < kLimit);
  }
  std::printf("fault injection: %-44s %-22s %5llu failure points%s\n", path, SiteName(site),
              static_cast<unsigned long long>(points), persistent ? ", each for good" : "");
  std::fflush(stdout);
  return points;
}

// ---------------------------------------------------------------------------
// What the paths share
// ---------------------------------------------------------------------------

constexpr uint64_t kN = 16;
constexpr uint64_t kConstantCount = 8;

// "f(x: f32[n<=64]) -> (y: f32[n], c: f32[8])": y = 4 x through the arena
// (two dispatches), c = a constant, copied; the constant also has a
// quantization-free second use so the loader allocates its segment once.
std::vector<uint8_t> BuildExecutable() {
  AxeBuilder b;
  const uint32_t library = b.AddLibrary(kDoubleLibraryName);
  const uint32_t kernel =
      b.AddKernel("double", library, "double",
                  {BufferParam("in"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                   ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  std::vector<uint8_t> constant(kConstantCount * sizeof(float));
  for (uint64_t i = 0; i < kConstantCount; ++i) {
    const float value = 0.5f + static_cast<float>(i);
    std::memcpy(constant.data() + i * sizeof(float), &value, sizeof(float));
  }
  const uint32_t c = b.AddConstant("table", AXRT_AXE_DTYPE_FLOAT32, {kConstantCount}, constant);
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t f =
      b.AddFunction("f", {{"n", 64}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, n}},
                    {{"y", AXRT_AXE_DTYPE_FLOAT32, n},
                     {"c", AXRT_AXE_DTYPE_FLOAT32, {Fixed(kConstantCount)}}},
                    /*arena_size=*/64 * sizeof(float));
  b.Dispatch(f, kernel, {Lit(1)},
             {BindInput(0), BindArena(0, 64 * sizeof(float)), BindScalar(Sym(0))});
  b.Dispatch(f, kernel, {Lit(1)},
             {BindArena(0, 64 * sizeof(float)), BindOutput(0), BindScalar(Sym(0))});
  b.Copy(f, BindConstant(c), Lit(0), BindOutput(1), Lit(0), Lit(kConstantCount * sizeof(float)));
  return b.Bytes();
}

const std::vector<uint8_t>& ExecutableBytes() {
  static const std::vector<uint8_t> bytes = BuildExecutable();
  return bytes;
}

// An instance of `driver` only, and its device 0.
axrt_status_t CreateInstance(const char* driver, axrt_instance_t* instance,
                             axrt_device_t* device) {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = driver;
  RETURN_IF_ERROR(axrt_instance_create(&options, instance));
  RETURN_IF_ERROR(axrt_instance_register_kernel_library(*instance, &kDoubleLibrary));
  return axrt_instance_get_device(*instance, 0, device);
}

// An instance with cpu:0 (or the device of `driver`), made before arming.
struct Cpu {
  explicit Cpu(const char* driver = "cpu") {
    REQUIRE_CALL_OK(CreateInstance(driver, &instance, &device));
    axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
    REQUIRE_CALL_OK(axrt_device_query_pool_statistics(device, &stats));
    bytes_in_use = stats.bytes_in_use;
  }
  ~Cpu() {
    // Whatever the run did, every byte it allocated on the device is back
    // once the device's streams are done.
    CHECK_CALL_OK(axrt_device_synchronize(device));
    axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
    CHECK_CALL_OK(axrt_device_query_pool_statistics(device, &stats));
    CHECK(stats.bytes_in_use == bytes_in_use);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  Cpu(const Cpu&) = delete;
  Cpu& operator=(const Cpu&) = delete;

  // The executable is usable: a call on a fresh stream gives the right values.
  void CheckCall(axrt_executable_t executable) const {
    axrt_function_t f = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(executable, "f", &f));
    axrt_stream_t stream = nullptr;
    REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
    axrt_tensor_t x = Input();
    axrt_tensor_t outputs[2] = {nullptr, nullptr};
    REQUIRE_CALL_OK(axrt_function_invoke(f, stream, &x, 1, outputs, 2, nullptr));
    std::vector<float> y(kN), c(kConstantCount);
    REQUIRE_CALL_OK(ReadBack(stream, outputs[0], y.data(), kN));
    REQUIRE_CALL_OK(ReadBack(stream, outputs[1], c.data(), kConstantCount));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CheckValues(y.data(), c.data());
    axrt_tensor_release(outputs[0]);
    axrt_tensor_release(outputs[1]);
    axrt_tensor_release(x);
    axrt_stream_release(stream);
  }

  // x[i] = i + 1, allocated on cpu:0.
  axrt_tensor_t Input() const {
    const int64_t shape[1] = {static_cast<int64_t>(kN)};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t x = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &x));
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(x, &buffer));
    void* pointer = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(buffer, &pointer));
    for (uint64_t i = 0; i < kN; ++i) static_cast<float*>(pointer)[i] = static_cast<float>(i + 1);
    axrt_buffer_release(buffer);
    return x;
  }

  static axrt_status_t ReadBack(axrt_stream_t stream, axrt_tensor_t tensor, float* out,
                                uint64_t count) {
    axrt_buffer_t buffer = nullptr;
    RETURN_IF_ERROR(axrt_tensor_get_buffer(tensor, &buffer));
    axrt_status_t status =
        axrt_stream_copy_to_host(stream, buffer, 0, out, count * sizeof(float));
    axrt_buffer_release(buffer);
    return status;
  }

  static void CheckValues(const float* y, const float* c) {
    for (uint64_t i = 0; i < kN; ++i) REQUIRE(y[i] == 4.0f * static_cast<float>(i + 1));
    for (uint64_t i = 0; i < kConstantCount; ++i) REQUIRE(c[i] == 0.5f + static_cast<float>(i));
  }

  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  uint64_t bytes_in_use = 0;
};

// ---------------------------------------------------------------------------
// The paths
// ---------------------------------------------------------------------------

// Instance creation with every built-in driver, device enumeration, a
// stream and an event, and their release.
struct InstancePath {
  axrt_status_t Act() {
    axrt_instance_t instance = nullptr;
    RETURN_IF_ERROR(axrt_instance_create(nullptr, &instance));
    axrt_status_t status = Enumerate(instance);
    axrt_instance_release(instance);
    return status;
  }
  static axrt_status_t Enumerate(axrt_instance_t instance) {
    size_t drivers = 0, devices = 0;
    RETURN_IF_ERROR(axrt_instance_driver_count(instance, &drivers));
    for (size_t i = 0; i < drivers; ++i) {
      axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
      RETURN_IF_ERROR(axrt_instance_query_driver_info(instance, i, &info));
    }
    RETURN_IF_ERROR(axrt_instance_device_count(instance, &devices));
    for (size_t i = 0; i < devices; ++i) {
      axrt_device_t device = nullptr;
      RETURN_IF_ERROR(axrt_instance_get_device(instance, i, &device));
      axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
      axrt_status_t status = axrt_device_query_properties(device, &properties);
      axrt_stream_t stream = nullptr;
      axrt_event_t event = nullptr;
      if (!status) status = axrt_stream_create(device, nullptr, &stream);
      if (!status) status = axrt_event_create(device, nullptr, &event);
      if (!status) status = axrt_stream_record_event(stream, event);
      if (!status) status = axrt_stream_synchronize(stream);
      axrt_event_release(event);
      axrt_stream_release(stream);
      axrt_device_release(device);
      RETURN_IF_ERROR(status);
    }
    axrt_device_t cpu = nullptr;
    RETURN_IF_ERROR(axrt_instance_find_device(instance, "cpu:0", &cpu));
    axrt_device_release(cpu);
    return nullptr;
  }
  void Check(bool) {}
};

// The builder and its verifier: an executable built, written to memory.
struct BuildPath {
  axrt_status_t Act() {
    bytes = BuildExecutable();
    return nullptr;
  }
  void Check(bool succeeded) {
    if (succeeded) CHECK(bytes == ExecutableBytes());
  }
  std::vector<uint8_t> bytes;
};

// Loading from memory, then the first call.
struct LoadPath : Cpu {
  explicit LoadPath(const char* driver = "cpu") : Cpu(driver) { ExecutableBytes(); }
  axrt_status_t Act() {
    const std::vector<uint8_t>& bytes = ExecutableBytes();
    return axrt_executable_load_memory(device, bytes.data(), bytes.size(), nullptr, &executable);
  }
  void Check(bool succeeded) {
    if (succeeded) CheckCall(executable);
  }
  ~LoadPath() { axrt_executable_release(executable); }
  axrt_executable_t executable = nullptr;
};

// The executable written to a file once.
const std::string& ExecutablePath() {
  static const std::string path = [] {
    char name[] = "/tmp/axrt_fault_XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    const std::vector<uint8_t>& bytes = ExecutableBytes();
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    close(fd);
    std::atexit([] { unlink(ExecutablePath().c_str()); });
    return std::string(name);
  }();
  return path;
}

// Loading from a file: mapped, or read when it cannot be mapped.
struct LoadFilePath : Cpu {
  axrt_status_t Act() {
    return axrt_executable_load_file(device, path.c_str(), nullptr, &executable);
  }
  void Check(bool succeeded) {
    if (succeeded) CheckCall(executable);
  }
  ~LoadFilePath() { axrt_executable_release(executable); }
  const std::string& path = ExecutablePath();  // made before arming
  axrt_executable_t executable = nullptr;
};

// An executable loaded before arming.
struct Loaded : Cpu {
  Loaded() {
    const std::vector<uint8_t>& bytes = ExecutableBytes();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(device, bytes.data(), bytes.size(), nullptr, &executable));
    REQUIRE_CALL_OK(axrt_executable_find_function(executable, "f", &function));
    x = Input();
    y.assign(kN, 0.0f);
    c.assign(kConstantCount, 0.0f);
  }
  ~Loaded() {
    axrt_tensor_release(x);
    axrt_executable_release(executable);
  }
  axrt_executable_t executable = nullptr;
  axrt_function_t function = nullptr;  // borrowed from the executable
  axrt_tensor_t x = nullptr;
  std::vector<float> y, c;  // sized before arming
};

// A call with outputs allocated by the runtime, read back and released, on
// a stream made for it.
struct InvokePath : Loaded {
  axrt_status_t Act() {
    axrt_stream_t stream = nullptr;
    RETURN_IF_ERROR(axrt_stream_create(device, nullptr, &stream));
    axrt_tensor_t outputs[2] = {nullptr, nullptr};
    axrt_status_t status = axrt_function_invoke(function, stream, &x, 1, outputs, 2, nullptr);
    if (!status) status = ReadBack(stream, outputs[0], y.data(), kN);
    if (!status) status = ReadBack(stream, outputs[1], c.data(), kConstantCount);
    if (!status) status = axrt_stream_synchronize(stream);
    axrt_tensor_release(outputs[0]);
    axrt_tensor_release(outputs[1]);
    axrt_stream_release(stream);
    return status;
  }
  void Check(bool succeeded) {
    if (succeeded) CheckValues(y.data(), c.data());
    CheckCall(executable);
  }
};

// A call into outputs the caller supplied, on a stream made before arming;
// the stream may be failed by the run, so the check uses a fresh one.
struct InvokeSuppliedPath : Loaded {
  InvokeSuppliedPath() {
    REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
    const int64_t shape_y[1] = {static_cast<int64_t>(kN)};
    const int64_t shape_c[1] = {static_cast<int64_t>(kConstantCount)};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape_y;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &outputs[0]));
    desc.shape = shape_c;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &outputs[1]));
  }
  ~InvokeSuppliedPath() {
    axrt_tensor_release(outputs[0]);
    axrt_tensor_release(outputs[1]);
    axrt_stream_release(stream);
  }
  axrt_status_t Act() {
    RETURN_IF_ERROR(axrt_function_invoke(function, stream, &x, 1, outputs, 2, nullptr));
    RETURN_IF_ERROR(ReadBack(stream, outputs[0], y.data(), kN));
    RETURN_IF_ERROR(ReadBack(stream, outputs[1], c.data(), kConstantCount));
    return axrt_stream_synchronize(stream);
  }
  void Check(bool succeeded) {
    if (succeeded) CheckValues(y.data(), c.data());
    CheckCall(executable);
  }
  axrt_stream_t stream = nullptr;
  axrt_tensor_t outputs[2] = {nullptr, nullptr};
};

// DLPack: a tensor exported, imported back (versioned and legacy), and the
// imports released, which runs the producer's deleter.
struct DlpackPath : Cpu {
  DlpackPath() { x = Input(); }
  ~DlpackPath() { axrt_tensor_release(x); }
  axrt_status_t Act() {
    DLManagedTensorVersioned* versioned = nullptr;
    RETURN_IF_ERROR(axrt_tensor_export_dlpack_versioned(x, AXRT_DLPACK_FLAG_NONE, &versioned));
    axrt_tensor_t imported = nullptr;
    axrt_status_t status = axrt_tensor_import_dlpack_versioned(instance, versioned, &imported);
    if (status) {
      versioned->deleter(versioned);  // a failed import leaves it to the caller
      return status;
    }
    status = Sum(imported, &sum_versioned);
    axrt_tensor_release(imported);
    RETURN_IF_ERROR(status);

    DLManagedTensor* legacy = nullptr;
    RETURN_IF_ERROR(axrt_tensor_export_dlpack(x, &legacy));
    status = axrt_tensor_import_dlpack(instance, legacy, &imported);
    if (status) {
      legacy->deleter(legacy);
      return status;
    }
    status = Sum(imported, &sum_legacy);
    axrt_tensor_release(imported);
    return status;
  }
  static axrt_status_t Sum(axrt_tensor_t tensor, float* out) {
    axrt_buffer_t buffer = nullptr;
    RETURN_IF_ERROR(axrt_tensor_get_buffer(tensor, &buffer));
    void* pointer = nullptr;
    axrt_status_t status = axrt_buffer_map(buffer, &pointer);
    if (!status) {
      for (uint64_t i = 0; i < kN; ++i) *out += static_cast<const float*>(pointer)[i];
    }
    axrt_buffer_release(buffer);
    return status;
  }
  void Check(bool succeeded) {
    if (succeeded) {
      CHECK(sum_versioned == kN * (kN + 1) / 2);
      CHECK(sum_legacy == kN * (kN + 1) / 2);
    }
  }
  axrt_tensor_t x = nullptr;
  float sum_versioned = 0, sum_legacy = 0;
};

// ---------------------------------------------------------------------------
// The serving engine, over the stand-in model (tests/unit/stand_in_model.h).
// ---------------------------------------------------------------------------

// What the engine told, per request; written by the engine thread.
struct Events {
  static constexpr int kRequests = 3;
  std::mutex mutex;
  std::condition_variable changed;
  int tokens[kRequests] = {};
  axrt_finish_reason_t finish[kRequests] = {};
  int finished = 0;

  static void On(void* user_data, const axrt_engine_event_t* e) {
    auto* self = static_cast<Events*>(user_data);
    {
      std::lock_guard lock(self->mutex);
      if (e->request_id >= kRequests) return;
      if (e->token >= 0) ++self->tokens[e->request_id];
      if (e->finish != AXRT_FINISH_NONE) {
        self->finish[e->request_id] = e->finish;
        ++self->finished;
      }
    }
    self->changed.notify_all();
  }
};

// Engine creation, three requests to their end, the engine destroyed.
struct ServingPath : Cpu {
  ServingPath() {
    static const std::vector<uint8_t> model = StandInModel();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(device, model.data(), model.size(), nullptr, &executable));
  }
  ~ServingPath() {
    axrt_engine_destroy(engine);
    axrt_executable_release(executable);
  }
  axrt_status_t Act() {
    axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
    options.num_blocks = 8;
    options.callback = &Events::On;
    options.user_data = &events;
    RETURN_IF_ERROR(axrt_engine_create(executable, &options, &engine));
    static const int32_t prompt[5] = {1, 2, 3, 4, 5};
    axrt_status_t status = nullptr;
    for (uint64_t id = 0; id < Events::kRequests && !status; ++id) {
      axrt_request_t request = AXRT_REQUEST_INIT;
      request.id = id;
      request.prompt = prompt;
      request.prompt_length = 2 + id;
      request.max_tokens = 3;
      status = axrt_engine_add_request(engine, &request);
      if (!status) ++added;
    }
    // Every request that was added ends (the wait allocates nothing).
    std::unique_lock lock(events.mutex);
    events.changed.wait_for(lock, std::chrono::seconds(60),
                            [&] { return events.finished == added; });
    return status;
  }
  void Check(bool succeeded) {
    {
      std::lock_guard lock(events.mutex);
      REQUIRE(events.finished == added);
      for (int id = 0; id < added; ++id) {
        // An injected failure on the engine thread ends requests with ERROR.
        const axrt_finish_reason_t f = events.finish[id];
        REQUIRE((f == AXRT_FINISH_LENGTH || f == AXRT_FINISH_ERROR));
        if (succeeded && f == AXRT_FINISH_LENGTH) CHECK(events.tokens[id] == 3);
      }
    }
    if (engine != nullptr) {
      // Every KV block is back, and memory that ran short did not stop the
      // engine: a request after it runs to its end.
      axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
      REQUIRE_CALL_OK(axrt_engine_query_stats(engine, &stats));
      CHECK(stats.kv_blocks_used == 0);
      CHECK(stats.running == 0);
      CHECK(stats.waiting == 0);
      static const int32_t prompt[2] = {1, 2};
      axrt_request_t request = AXRT_REQUEST_INIT;
      request.id = Events::kRequests - 1;
      request.prompt = prompt;
      request.prompt_length = 2;
      request.max_tokens = 3;
      {
        std::lock_guard lock(events.mutex);
        events.finish[request.id] = AXRT_FINISH_NONE;
        events.tokens[request.id] = 0;
        events.finished = 0;
      }
      REQUIRE_CALL_OK(axrt_engine_add_request(engine, &request));
      std::unique_lock lock(events.mutex);
      REQUIRE(events.changed.wait_for(lock, std::chrono::seconds(60),
                                      [&] { return events.finished == 1; }));
      CHECK(events.finish[request.id] == AXRT_FINISH_LENGTH);
      CHECK(events.tokens[request.id] == 3);
    }
    axrt_engine_destroy(engine);
    engine = nullptr;
  }
  axrt_executable_t executable = nullptr;
  axrt_engine_t engine = nullptr;
  Events events;
  int added = 0;
};

// ---------------------------------------------------------------------------
// A device group of two CPU devices: creation, an all-reduce, an all-gather
// and a send/recv, run to their end.
// ---------------------------------------------------------------------------

struct GroupPath {
  static constexpr uint32_t kMembers = 2;
  static constexpr uint64_t kCount = 1000;

  GroupPath() {
    // Two CPU devices for this instance only; the other paths keep one.
    const char* before = std::getenv("AXRT_CPU_DEVICES");
    const std::string saved = before ? before : "";
    setenv("AXRT_CPU_DEVICES", "2", 1);
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    axrt_status_t status = axrt_instance_create(&options, &instance);
    if (before) {
      setenv("AXRT_CPU_DEVICES", saved.c_str(), 1);
    } else {
      unsetenv("AXRT_CPU_DEVICES");
    }
    REQUIRE_CALL_OK(status);
    for (uint32_t r = 0; r < kMembers; ++r) {
      REQUIRE_CALL_OK(axrt_instance_get_device(instance, r, &devices[r]));
      REQUIRE_CALL_OK(axrt_stream_create(devices[r], nullptr, &streams[r]));
      REQUIRE_CALL_OK(axrt_buffer_allocate(devices[r], kCount * kMembers * 4, nullptr, &buffers[r]));
    }
    Fill();
  }
  ~GroupPath() {
    axrt_group_destroy(group);
    for (uint32_t r = 0; r < kMembers; ++r) {
      axrt_buffer_release(buffers[r]);
      axrt_stream_release(streams[r]);
      axrt_device_release(devices[r]);
    }
    axrt_instance_release(instance);
  }
  // Member r's buffer: block r (kCount values) holds r + 1, the rest zeros.
  void Fill() {
    for (uint32_t r = 0; r < kMembers; ++r) {
      void* host = nullptr;
      REQUIRE_CALL_OK(axrt_buffer_map(buffers[r], &host));
      auto* f = static_cast<float*>(host);
      for (uint64_t i = 0; i < kCount * kMembers; ++i) f[i] = i / kCount == r ? static_cast<float>(r + 1) : 0;
    }
  }
  std::vector<float> Read(uint32_t r) {
    void* host = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(buffers[r], &host));
    auto* f = static_cast<float*>(host);
    return std::vector<float>(f, f + kCount * kMembers);
  }
  axrt_status_t Run(axrt_group_t g) {
    axrt_collective_member_t members[kMembers];
    // Block r of member r's buffer, reduced in place, then gathered into the
    // whole buffers, in place.
    for (uint32_t r = 0; r < kMembers; ++r) {
      members[r] = {streams[r], buffers[r], r * kCount * 4, buffers[r], r * kCount * 4};
    }
    RETURN_IF_ERROR(axrt_group_all_reduce(g, members, kCount, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM));
    for (uint32_t r = 0; r < kMembers; ++r) members[r].recv_offset = 0;
    RETURN_IF_ERROR(axrt_group_all_gather(g, members, kCount, AXRT_DTYPE_FLOAT32));
    axrt_group_transfer_t transfer = {0, streams[0], buffers[0], 0, 1, streams[1], buffers[1], 0,
                                      kCount, AXRT_DTYPE_FLOAT32};
    RETURN_IF_ERROR(axrt_group_send_recv(g, &transfer, 1));
    axrt_status_t first = nullptr;
    for (uint32_t r = 0; r < kMembers; ++r) {
      axrt_status_t s = axrt_stream_synchronize(streams[r]);
      if (first == nullptr) {
        first = s;
      } else {
        axrt_status_free(s);
      }
    }
    return first;
  }
  axrt_status_t Act() {
    RETURN_IF_ERROR(axrt_group_create(devices, kMembers, nullptr, &group));
    return Run(group);
  }
  void Check(bool succeeded) {
    const float sum = kMembers * (kMembers + 1) / 2.0f;
    if (succeeded) {
      for (uint32_t r = 0; r < kMembers; ++r) REQUIRE(Read(r) == std::vector<float>(kCount * kMembers, sum));
    }
    // Whatever failed, the devices go on: a new group on new streams works
    // (once what the run queued has ended).
    for (uint32_t r = 0; r < kMembers; ++r) axrt_status_free(axrt_stream_synchronize(streams[r]));
    axrt_group_destroy(group);
    group = nullptr;
    for (uint32_t r = 0; r < kMembers; ++r) {
      axrt_stream_release(streams[r]);
      streams[r] = nullptr;
      REQUIRE_CALL_OK(axrt_stream_create(devices[r], nullptr, &streams[r]));
    }
    Fill();
    REQUIRE_CALL_OK(axrt_group_create(devices, kMembers, nullptr, &group));
    REQUIRE_CALL_OK(Run(group));
    for (uint32_t r = 0; r < kMembers; ++r) REQUIRE(Read(r) == std::vector<float>(kCount * kMembers, sum));
  }
  axrt_instance_t instance = nullptr;
  axrt_device_t devices[kMembers] = {};
  axrt_stream_t streams[kMembers] = {};
  axrt_buffer_t buffers[kMembers] = {};
  axrt_group_t group = nullptr;
};

constexpr std::initializer_list<axrt_status_code_t> kOutOfMemory = {
    AXRT_STATUS_CODE_RESOURCE_EXHAUSTED};

}  // namespace

TEST_CASE("instance creation and device enumeration survive every failed allocation",
          "[fault]") {
  CHECK(Walk<InstancePath>("instance creation, device enumeration", Site::kHostAllocation,
                           kOutOfMemory) > 0);
  Walk<InstancePath>("instance creation, device enumeration", Site::kDeviceAllocation,
                     kOutOfMemory);
  CHECK(Walk<InstancePath>("instance creation, device enumeration", Site::kHostAllocation,
                           kOutOfMemory, /*persistent=*/true) > 0);
}

TEST_CASE("the builder and its verifier survive every failed allocation", "[fault]") {
  CHECK(Walk<BuildPath>("executable build and verification", Site::kHostAllocation,
                        kOutOfMemory) > 0);
  CHECK(Walk<BuildPath>("executable build and verification", Site::kHostAllocation,
                        kOutOfMemory, /*persistent=*/true) > 0);
}

TEST_CASE("loading survives every failed allocation, mapping and read", "[fault]") {
  CHECK(Walk<LoadPath>("executable load from memory", Site::kHostAllocation, kOutOfMemory) > 0);
  CHECK(Walk<LoadPath>("executable load from memory", Site::kHostAllocation, kOutOfMemory,
                       /*persistent=*/true) > 0);
  // Host devices read constants where the executable lies: no device
  // memory is allocated (devices that do not are uploaded to, on CUDA).
  CHECK(Walk<LoadPath>("executable load from memory", Site::kDeviceAllocation, {}) == 0);
  CHECK(Walk<LoadFilePath>("executable load from a file", Site::kHostAllocation, kOutOfMemory) >
        0);
  // A file that cannot be mapped is read instead; reads that fail end in a
  // clean error, reads that come back short are resumed.
  CHECK(Walk<LoadFilePath>("executable load from a file", Site::kFileMap, {}) == 1);
  axrt::fault::set_always(Site::kFileMap, true);
  CHECK(Walk<LoadFilePath>("executable load from a file, unmappable", Site::kHostAllocation,
                           kOutOfMemory) > 0);
  CHECK(Walk<LoadFilePath>("executable load from a file, unmappable", Site::kFileRead,
                           {AXRT_STATUS_CODE_UNAVAILABLE}) == 1);
  axrt::fault::set_always(Site::kShortRead, true);
  CHECK(Walk<LoadFilePath>("executable load from a file, one byte a read",
                           Site::kHostAllocation, kOutOfMemory) > 0);
  axrt::fault::set_always(Site::kShortRead, false);
  axrt::fault::set_always(Site::kFileMap, false);
}

TEST_CASE("invocations survive every failed allocation", "[fault]") {
  CHECK(Walk<InvokePath>("invoke, outputs allocated", Site::kHostAllocation, kOutOfMemory) > 0);
  CHECK(Walk<InvokePath>("invoke, outputs allocated", Site::kDeviceAllocation, kOutOfMemory) > 0);
  CHECK(Walk<InvokeSuppliedPath>("invoke, outputs supplied", Site::kHostAllocation,
                                 kOutOfMemory) > 0);
  CHECK(Walk<InvokeSuppliedPath>("invoke, outputs supplied", Site::kDeviceAllocation,
                                 kOutOfMemory) > 0);
  CHECK(Walk<InvokePath>("invoke, outputs allocated", Site::kHostAllocation, kOutOfMemory,
                         /*persistent=*/true) > 0);
  CHECK(Walk<InvokePath>("invoke, outputs allocated", Site::kDeviceAllocation, kOutOfMemory,
                         /*persistent=*/true) > 0);
}

TEST_CASE("DLPack export and import survive every failed allocation", "[fault]") {
  CHECK(Walk<DlpackPath>("DLPack export and import", Site::kHostAllocation, kOutOfMemory) > 0);
  CHECK(Walk<DlpackPath>("DLPack export and import", Site::kHostAllocation, kOutOfMemory,
                         /*persistent=*/true) > 0);
}

TEST_CASE("the serving engine survives every failed allocation", "[fault]") {
  CHECK(Walk<ServingPath>("serving engine", Site::kHostAllocation, kOutOfMemory) > 0);
  CHECK(Walk<ServingPath>("serving engine", Site::kDeviceAllocation, kOutOfMemory) > 0);
}

TEST_CASE("device groups survive every failed allocation", "[fault]") {
  // A failure on a member's stream thread fails the group (RESOURCE_EXHAUSTED
  // there, ABORTED on the other member).
  const std::initializer_list<axrt_status_code_t> allowed = {AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                                                             AXRT_STATUS_CODE_ABORTED};
  CHECK(Walk<GroupPath>("device group collectives", Site::kHostAllocation, allowed) > 0);
  CHECK(Walk<GroupPath>("device group collectives", Site::kHostAllocation, allowed,
                        /*persistent=*/true) > 0);
}

// The hot path allocates nothing: once warm, a call into outputs the caller
// supplied, on a stream that exists, takes no host memory, on the calling
// thread or the stream's (the counter sees every thread).
TEST_CASE("a call into supplied outputs allocates no host memory once warm", "[alloc]") {
  InvokeSuppliedPath call;
  auto invoke = [&] {
    return axrt_function_invoke(call.function, call.stream, &call.x, 1, call.outputs, 2, nullptr);
  };
  // Warm both ways a call can take: run on the calling thread, and queued
  // for the stream's worker (behind a host function that holds the stream
  // until the calls are queued), which grows the stream's queue once.
  for (int i = 0; i < 10; ++i) REQUIRE_CALL_OK(invoke());
  std::atomic<bool> open{false};
  REQUIRE_CALL_OK(axrt_stream_launch_host_func(
      call.stream,
      [](void* user, axrt_status_t) -> axrt_status_t {
        while (!static_cast<std::atomic<bool>*>(user)->load()) std::this_thread::yield();
        return nullptr;
      },
      &open));
  for (int i = 0; i < 4; ++i) REQUIRE_CALL_OK(invoke());
  open.store(true);
  REQUIRE_CALL_OK(axrt_stream_synchronize(call.stream));
  // The steady state: a call, then its results awaited, whichever thread
  // runs it (a loaded machine sends some to the worker).
  constexpr int kCalls = 100;
  axrt::fault::arm(Site::kHostAllocation, UINT64_MAX);
  axrt_status_t failed = nullptr;
  for (int i = 0; i < kCalls && !failed; ++i) {
    failed = invoke();
    if (!failed) failed = axrt_stream_synchronize(call.stream);
  }
  const uint64_t allocations = axrt::fault::disarm();
  REQUIRE_CALL_OK(failed);
  INFO(allocations << " host allocations in " << kCalls << " calls");
  CHECK(allocations == 0);
  call.Check(false);
}
