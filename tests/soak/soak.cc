// The soak (`make soak`): several threads load, invoke, copy and release at
// random on every device of the CPU and null drivers for a stated time,
// while host and device allocations fail at random (base/fault.h). Every
// call must succeed or fail cleanly (RESOURCE_EXHAUSTED, or the failure a
// stream already had), every result of a call that succeeded must be right,
// nothing may deadlock (a watchdog ends the program when no thread makes
// progress for a minute), and once the threads are done and everything is
// released, each device's pool holds no bytes in use. Built in the sanitizer
// tree, whose leak checker then inspects the process at exit.
//
//   axrt_soak [seconds [threads [seed]]]
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "axrt/axrt.h"
#include "base/fault.h"
#include "tests/support/axe_test_builder.h"
#include "tests/support/double_kernel.h"

namespace {

using axrt::fault::Site;
using namespace axrt_test;

constexpr uint64_t kMaxN = 64;

// "f(x: f32[n<=64]) -> y: f32[n]": y = 4 x, through the arena.
std::vector<uint8_t> BuildExecutable() {
  AxeBuilder b;
  const uint32_t library = b.AddLibrary(kDoubleLibraryName);
  const uint32_t kernel =
      b.AddKernel("double", library, "double",
                  {BufferParam("in"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                   ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t f = b.AddFunction("f", {{"n", kMaxN}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, n}},
                                   {{"y", AXRT_AXE_DTYPE_FLOAT32, n}}, kMaxN * sizeof(float));
  b.Dispatch(f, kernel, {Lit(1)},
             {BindInput(0), BindArena(0, kMaxN * sizeof(float)), BindScalar(Sym(0))});
  b.Dispatch(f, kernel, {Lit(1)},
             {BindArena(0, kMaxN * sizeof(float)), BindOutput(0), BindScalar(Sym(0))});
  return b.Bytes();
}

std::atomic<uint64_t> progress{0};
std::atomic<bool> failed{false};
std::mutex report_mutex;

// A defect: reported once per kind, and the run fails.
void Defect(const char* what, axrt_status_t status = nullptr) {
  std::lock_guard lock(report_mutex);
  std::fprintf(stderr, "soak: %s%s%s\n", what, status ? ": " : "",
               status ? axrt_status_message(status) : "");
  failed.store(true);
}

// Takes `status`: true when it is OK; a failure other than the ones
// injected faults may cause is a defect.
bool Ok(axrt_status_t status, const char* call) {
  if (status == nullptr) return true;
  const axrt_status_code_t code = axrt_status_code(status);
  if (code != AXRT_STATUS_CODE_RESOURCE_EXHAUSTED) {
    std::string what = std::string(call) + " failed with " + axrt_status_code_name(code);
    Defect(what.c_str(), status);
  }
  axrt_status_free(status);
  return false;
}

struct Counts {
  std::atomic<uint64_t> loads{0}, invokes{0}, copies{0}, releases{0}, failures{0};
};
Counts counts;

struct Worker {
  axrt_device_t devices[2];
  const std::vector<uint8_t>* bytes;
  uint64_t seed;
  std::chrono::steady_clock::time_point deadline;

  uint64_t state = 0;
  uint64_t Next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }

  struct Loaded {
    axrt_executable_t exe;
    axrt_function_t f;
    size_t device;
  };
  std::vector<Loaded> loaded;
  axrt_stream_t streams[2] = {nullptr, nullptr};

  void Run() {
    state = seed | 1;
    loaded.reserve(8);
    while (std::chrono::steady_clock::now() < deadline && !failed.load()) {
      const uint64_t pick = Next() % 100;
      if (pick < 10 || loaded.empty()) {
        Load();
      } else if (pick < 20) {
        Release();
      } else if (pick < 70) {
        Invoke();
      } else {
        Copy();
      }
      progress.fetch_add(1, std::memory_order_relaxed);
    }
    while (!loaded.empty()) Release();
    for (axrt_stream_t& s : streams) {
      axrt_stream_release(s);
      s = nullptr;
    }
  }

  // The thread's stream on device `d`; a failed one is replaced.
  axrt_stream_t Stream(size_t d) {
    if (streams[d] == nullptr) {
      if (!Ok(axrt_stream_create(devices[d], nullptr, &streams[d]), "axrt_stream_create")) {
        ++counts.failures;
        return nullptr;
      }
    }
    return streams[d];
  }
  void DropStream(size_t d) {
    axrt_stream_release(streams[d]);
    streams[d] = nullptr;
  }

  void Load() {
    if (loaded.size() == loaded.capacity()) return Release();
    ++counts.loads;
    const size_t d = Next() % 2;
    Loaded l{nullptr, nullptr, d};
    if (!Ok(axrt_executable_load_memory(devices[d], bytes->data(), bytes->size(), nullptr,
                                        &l.exe),
            "axrt_executable_load_memory")) {
      ++counts.failures;
      return;
    }
    if (!Ok(axrt_executable_find_function(l.exe, "f", &l.f), "axrt_executable_find_function")) {
      ++counts.failures;
      axrt_executable_release(l.exe);
      return;
    }
    loaded.push_back(l);
  }

  void Release() {
    if (loaded.empty()) return;
    ++counts.releases;
    const size_t i = Next() % loaded.size();
    axrt_function_release(loaded[i].f);
    axrt_executable_release(loaded[i].exe);
    loaded[i] = loaded.back();
    loaded.pop_back();
  }

  // A tensor of `n` floats on device `d`, x[i] = i + 1 + base.
  axrt_tensor_t Input(size_t d, axrt_stream_t stream, uint64_t n, float base) {
    const int64_t shape[1] = {static_cast<int64_t>(n)};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t x = nullptr;
    if (!Ok(axrt_tensor_allocate(devices[d], &desc, nullptr, &x), "axrt_tensor_allocate")) {
      return nullptr;
    }
    float values[kMaxN];
    for (uint64_t i = 0; i < n; ++i) values[i] = base + static_cast<float>(i + 1);
    axrt_buffer_t buffer = nullptr;
    bool ok = Ok(axrt_tensor_get_buffer(x, &buffer), "axrt_tensor_get_buffer") &&
              Ok(axrt_stream_copy_from_host(stream, values, buffer, 0, n * sizeof(float)),
                 "axrt_stream_copy_from_host");
    axrt_buffer_release(buffer);
    if (!ok) {
      axrt_tensor_release(x);
      return nullptr;
    }
    return x;
  }

  void Invoke() {
    ++counts.invokes;
    const Loaded& l = loaded[Next() % loaded.size()];
    axrt_stream_t stream = Stream(l.device);
    if (stream == nullptr) return;
    const uint64_t n = 1 + Next() % kMaxN;
    const float base = static_cast<float>(Next() % 1000);
    axrt_tensor_t x = Input(l.device, stream, n, base);
    if (x == nullptr) {
      ++counts.failures;
      return DropStream(l.device);
    }
    axrt_tensor_t y = nullptr;
    float out[kMaxN];
    bool ok =
        Ok(axrt_function_invoke(l.f, stream, &x, 1, &y, 1, nullptr), "axrt_function_invoke");
    if (ok) {
      axrt_buffer_t buffer = nullptr;
      ok = Ok(axrt_tensor_get_buffer(y, &buffer), "axrt_tensor_get_buffer") &&
           Ok(axrt_stream_copy_to_host(stream, buffer, 0, out, n * sizeof(float)),
              "axrt_stream_copy_to_host");
      axrt_buffer_release(buffer);
    }
    // Released with work queued: the stream holds what it needs.
    axrt_tensor_release(y);
    axrt_tensor_release(x);
    if (ok) ok = Ok(axrt_stream_synchronize(stream), "axrt_stream_synchronize");
    if (!ok) {
      ++counts.failures;
      return DropStream(l.device);
    }
    for (uint64_t i = 0; i < n; ++i) {
      if (out[i] != 4.0f * (base + static_cast<float>(i + 1))) {
        return Defect("a call that succeeded gave a wrong value");
      }
    }
  }

  void Copy() {
    ++counts.copies;
    const size_t d = Next() % 2;
    axrt_stream_t stream = Stream(d);
    if (stream == nullptr) return;
    const uint64_t size = 1 + Next() % 4096;
    axrt_buffer_t a = nullptr, b = nullptr;
    unsigned char in[4096], out[4096];
    const unsigned char fill = static_cast<unsigned char>(Next());
    std::memset(in, fill, size);
    bool ok = Ok(axrt_buffer_allocate(devices[d], size, nullptr, &a), "axrt_buffer_allocate") &&
              Ok(axrt_buffer_allocate(devices[d], size, nullptr, &b), "axrt_buffer_allocate") &&
              Ok(axrt_stream_copy_from_host(stream, in, a, 0, size),
                 "axrt_stream_copy_from_host") &&
              Ok(axrt_stream_copy_buffer(stream, a, 0, b, 0, size), "axrt_stream_copy_buffer") &&
              Ok(axrt_stream_copy_to_host(stream, b, 0, out, size), "axrt_stream_copy_to_host");
    axrt_buffer_release(a);
    axrt_buffer_release(b);
    if (ok) ok = Ok(axrt_stream_synchronize(stream), "axrt_stream_synchronize");
    if (!ok) {
      ++counts.failures;
      return DropStream(d);
    }
    if (std::memcmp(in, out, size) != 0) Defect("a copy that succeeded moved the wrong bytes");
  }
};

uint64_t BytesInUse(axrt_device_t device) {
  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  axrt_status_t status = axrt_device_query_pool_statistics(device, &stats);
  if (status) {
    Defect("axrt_device_query_pool_statistics", status);
    axrt_status_free(status);
  }
  return stats.bytes_in_use;
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 60;
  const int thread_count = argc > 2 ? std::atoi(argv[2]) : 4;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 20261126;
  if (seconds <= 0 || thread_count <= 0) {
    std::fprintf(stderr, "usage: axrt_soak [seconds [threads [seed]]]\n");
    return 2;
  }
  const std::vector<uint8_t> bytes = BuildExecutable();

  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu,null";
  axrt_instance_t instance = nullptr;
  axrt_device_t devices[2] = {nullptr, nullptr};
  if (axrt_status_t s = axrt_instance_create(&options, &instance)) {
    std::fprintf(stderr, "soak: %s\n", axrt_status_message(s));
    return 1;
  }
  axrt_status_t s = axrt_instance_register_kernel_library(instance, &kDoubleLibrary);
  if (!s) s = axrt_instance_find_device(instance, "cpu:0", &devices[0]);
  if (!s) s = axrt_instance_find_device(instance, "null:0", &devices[1]);
  if (s) {
    std::fprintf(stderr, "soak: %s\n", axrt_status_message(s));
    return 1;
  }
  const uint64_t start_bytes[2] = {BytesInUse(devices[0]), BytesInUse(devices[1])};

  std::printf("soak: %d s, %d threads, seed %" PRIu64
              ", cpu:0 and null:0; one host allocation in 5000 and one device allocation in "
              "100 fail\n",
              seconds, thread_count, seed);
  std::fflush(stdout);
  axrt::fault::set_random(Site::kHostAllocation, 5000, seed);
  axrt::fault::set_random(Site::kDeviceAllocation, 100, seed);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<Worker> workers(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    workers[t] = Worker{{devices[0], devices[1]}, &bytes, seed + 7919 * (t + 1), deadline};
    threads.emplace_back([&w = workers[t]] { w.Run(); });
  }
  // The watchdog: the threads must keep moving.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    uint64_t last = progress.load();
    auto last_change = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const uint64_t now = progress.load();
      if (now != last) {
        last = now;
        last_change = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_change > std::chrono::seconds(60)) {
        std::fprintf(stderr, "soak: no thread made progress for 60 s: deadlock\n");
        _exit(3);
      }
    }
  });
  for (std::thread& t : threads) t.join();
  done.store(true);
  watchdog.join();
  axrt::fault::set_random(Site::kHostAllocation, 0, seed);
  axrt::fault::set_random(Site::kDeviceAllocation, 0, seed);

  for (axrt_device_t device : devices) {
    if (axrt_status_t sync = axrt_device_synchronize(device)) {
      Defect("axrt_device_synchronize", sync);
      axrt_status_free(sync);
    }
  }
  for (int d = 0; d < 2; ++d) {
    const uint64_t end = BytesInUse(devices[d]);
    if (end != start_bytes[d]) {
      std::fprintf(stderr,
                   "soak: device %d holds %" PRIu64 " bytes in use, %" PRIu64 " at the start\n",
                   d, end, start_bytes[d]);
      failed.store(true);
    }
  }
  std::printf("soak: %" PRIu64 " operations: %" PRIu64 " loads, %" PRIu64 " calls, %" PRIu64
              " copies, %" PRIu64 " releases; %" PRIu64 " ended in an injected failure\n",
              progress.load(), counts.loads.load(), counts.invokes.load(), counts.copies.load(),
              counts.releases.load(), counts.failures.load());
  axrt_device_release(devices[0]);
  axrt_device_release(devices[1]);
  axrt_instance_release(instance);
  if (failed.load()) {
    std::printf("soak: FAILED\n");
    return 1;
  }
  std::printf("soak: passed; device memory back to where it started\n");
  return 0;
}
