// Benchmarks of the runtime's host-side costs, on the default device
// (AXRT_DEVICE, else cpu:0). Work that completes on a runtime thread is timed
// by wall clock (UseRealTime), since the calling thread's CPU time would
// leave it out. Bandwidth benchmarks report bytes/s beside a plain memcpy of
// the same size in the same run, so ratios can be read off directly; the
// allocation pairs and the small copies have a host-side anchor of their own
// (malloc + free, a 64-byte memcpy), the ratios `make bench-check` gates.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "axrt/axrt.h"
#include "tests/bench/bench_util.h"

namespace axrt_bench {
axrt_instance_t g_instance = nullptr;
}  // namespace axrt_bench

namespace {

using namespace axrt_bench;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kBandwidthBytes = 64 * kMiB;
constexpr uint64_t kSmallCopyBytes = 64;

// The default device (AXRT_DEVICE, else cpu:0).
axrt_device_t g_device = nullptr;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostMemory = std::unique_ptr<unsigned char, FreeDeleter>;

Buffer Allocate(benchmark::State& state, uint64_t size,
                axrt_memory_type_t type = AXRT_MEMORY_TYPE_DEVICE_LOCAL) {
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = type;
  axrt_buffer_t buffer = nullptr;
  if (Failed(state, axrt_buffer_allocate(g_device, size, &options, &buffer),
             "axrt_buffer_allocate")) {
    return nullptr;
  }
  return Buffer(buffer);
}

Stream CreateStream(benchmark::State& state) {
  axrt_stream_t stream = nullptr;
  if (Failed(state, axrt_stream_create(g_device, nullptr, &stream), "axrt_stream_create")) {
    return nullptr;
  }
  return Stream(stream);
}

// Page-aligned and touched, so first-touch page faults stay out of the loop.
HostMemory HostBytes(uint64_t size, unsigned char value) {
  HostMemory memory(static_cast<unsigned char*>(std::aligned_alloc(4096, size)));
  if (memory) std::memset(memory.get(), value, size);
  return memory;
}

// --- Pooled allocation ------------------------------------------------------

void BM_BufferAllocateRelease(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  // One round first, so the loop measures reuse of a cached block.
  if (!Allocate(state, size)) return;
  for (auto _ : state) {
    axrt_buffer_t buffer = nullptr;
    if (Failed(state, axrt_buffer_allocate(g_device, size, nullptr, &buffer),
               "axrt_buffer_allocate")) {
      break;
    }
    axrt_buffer_release(buffer);
  }
  state.SetLabel("pair");
}
BENCHMARK(BM_BufferAllocateRelease)->Arg(4 * kKiB)->Arg(1 * kMiB);

// Stream-ordered: allocate, deallocate at the stream's position, drop the
// handle. The stream is synchronised every 256 pairs inside the timed loop,
// so any work the deallocations queue is paid for in the figure.
void BM_StreamAllocateDeallocate(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  Stream stream = CreateStream(state);
  if (!stream) return;
  int64_t pairs = 0;
  for (auto _ : state) {
    axrt_buffer_t buffer = nullptr;
    if (Failed(state, axrt_stream_allocate_buffer(stream.get(), size, nullptr, &buffer),
               "axrt_stream_allocate_buffer")) {
      break;
    }
    axrt_status_t status = axrt_stream_deallocate_buffer(stream.get(), buffer);
    axrt_buffer_release(buffer);
    if (Failed(state, status, "axrt_stream_deallocate_buffer")) break;
    if (++pairs % 256 == 0 &&
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
  Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
  state.SetLabel("pair");
}
BENCHMARK(BM_StreamAllocateDeallocate)->Arg(4 * kKiB)->Arg(1 * kMiB)->UseRealTime();

// The anchor of the two above: the C library's malloc + free of the same
// size, what a host allocation costs without a pool of one's own.
void BM_HostMallocFree(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetLabel("pair");
}
BENCHMARK(BM_HostMallocFree)->Arg(4 * kKiB)->Arg(1 * kMiB);

// --- Events and host functions ---------------------------------------------

// Record + query on a stream that has nothing else to do. The counter
// `complete` is the share of queries that already saw the record done.
void BM_EventRecordQuery(benchmark::State& state) {
  Stream stream = CreateStream(state);
  if (!stream) return;
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  axrt_event_t raw_event = nullptr;
  if (Failed(state, axrt_event_create(g_device, &options, &raw_event), "axrt_event_create")) return;
  Event event(raw_event);
  int64_t complete_count = 0;
  for (auto _ : state) {
    if (Failed(state, axrt_stream_record_event(stream.get(), event.get()),
               "axrt_stream_record_event")) {
      break;
    }
    bool complete = false;
    if (Failed(state, axrt_event_query(event.get(), &complete), "axrt_event_query")) break;
    complete_count += complete ? 1 : 0;
  }
  Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
  state.counters["complete"] = benchmark::Counter(
      static_cast<double>(complete_count) / static_cast<double>(std::max<int64_t>(state.iterations(), 1)));
}
BENCHMARK(BM_EventRecordQuery)->UseRealTime();

axrt_status_t EmptyHostFunc(void*, axrt_status_t) { return nullptr; }

void BM_HostFuncLaunchSynchronize(benchmark::State& state) {
  Stream stream = CreateStream(state);
  if (!stream) return;
  for (auto _ : state) {
    if (Failed(state, axrt_stream_launch_host_func(stream.get(), EmptyHostFunc, nullptr),
               "axrt_stream_launch_host_func") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
}
BENCHMARK(BM_HostFuncLaunchSynchronize)->UseRealTime();

// The same after the stream has sat idle for a while (outside the timed
// part), so its worker has had time to go to sleep: what an occasional host
// function costs, as opposed to one in a back-to-back loop.
void BM_HostFuncLaunchSynchronizeAfterIdle(benchmark::State& state) {
  Stream stream = CreateStream(state);
  if (!stream) return;
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    state.ResumeTiming();
    if (Failed(state, axrt_stream_launch_host_func(stream.get(), EmptyHostFunc, nullptr),
               "axrt_stream_launch_host_func") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
}
// A fixed count: the untimed idle periods would otherwise stretch the run to
// many seconds.
BENCHMARK(BM_HostFuncLaunchSynchronizeAfterIdle)->Iterations(2000)->UseRealTime();

axrt_status_t SignalHostFunc(void* user_data, axrt_status_t) {
  static_cast<std::atomic<bool>*>(user_data)->store(true, std::memory_order_release);
  return nullptr;
}

// After the same idle gap, the time until the host function starts when no
// thread synchronizes with the stream (the caller polls a flag the function
// sets, yielding its CPU): what waking the stream's sleeping worker costs.
void BM_HostFuncStartAfterIdle(benchmark::State& state) {
  Stream stream = CreateStream(state);
  if (!stream) return;
  std::atomic<bool> ran{false};
  for (auto _ : state) {
    state.PauseTiming();
    ran.store(false);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    state.ResumeTiming();
    if (Failed(state, axrt_stream_launch_host_func(stream.get(), SignalHostFunc, &ran),
               "axrt_stream_launch_host_func")) {
      break;
    }
    // Yielding, so that a worker woken onto this CPU runs at once.
    while (!ran.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize");
}
BENCHMARK(BM_HostFuncStartAfterIdle)->Iterations(2000)->UseRealTime();

// --- Bandwidth (64 MiB) -------------------------------------------------------

// The reference: memcpy of the same size between two touched host
// allocations. With one thread it is what a plain host copy costs; with a
// thread per CPU (each copying its own 64 MiB, bytes summed) it approximates
// the machine's copy bandwidth, the ceiling for a runtime that splits large
// copies across threads.
void BM_Memcpy(benchmark::State& state) {
  HostMemory src = HostBytes(kBandwidthBytes, 0x5a);
  HostMemory dst = HostBytes(kBandwidthBytes, 0);
  if (!src || !dst) {
    state.SkipWithError("out of host memory");
    return;
  }
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), kBandwidthBytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBandwidthBytes));
}
BENCHMARK(BM_Memcpy)->Threads(1)->ThreadPerCpu()->UseRealTime();

// Pageable host memory -> device buffer, enqueue + synchronize.
void BM_CopyFromHost(benchmark::State& state) {
  HostMemory host = HostBytes(kBandwidthBytes, 0x5a);
  Buffer buffer = Allocate(state, kBandwidthBytes);
  Stream stream = CreateStream(state);
  if (!host || !buffer || !stream) return;
  // Write the buffer once so the loop never faults in fresh pages.
  if (Failed(state, axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kBandwidthBytes,
                                            "\0", 1),
             "axrt_stream_fill_buffer")) {
    return;
  }
  for (auto _ : state) {
    if (Failed(state, axrt_stream_copy_from_host(stream.get(), host.get(), buffer.get(), 0,
                                                 kBandwidthBytes),
               "axrt_stream_copy_from_host") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBandwidthBytes));
}
BENCHMARK(BM_CopyFromHost)->UseRealTime();

// Device buffer -> pageable host memory, enqueue + synchronize.
void BM_CopyToHost(benchmark::State& state) {
  HostMemory host = HostBytes(kBandwidthBytes, 0);
  Buffer buffer = Allocate(state, kBandwidthBytes);
  Stream stream = CreateStream(state);
  if (!host || !buffer || !stream) return;
  // Write the buffer once so the loop never faults in fresh pages.
  if (Failed(state, axrt_stream_fill_buffer(stream.get(), buffer.get(), 0, kBandwidthBytes,
                                            "\x5a", 1),
             "axrt_stream_fill_buffer")) {
    return;
  }
  for (auto _ : state) {
    if (Failed(state, axrt_stream_copy_to_host(stream.get(), buffer.get(), 0, host.get(),
                                               kBandwidthBytes),
               "axrt_stream_copy_to_host") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBandwidthBytes));
}
BENCHMARK(BM_CopyToHost)->UseRealTime();

// Buffer -> buffer on one stream. Arg 0: device -> device; arg 1: host-pinned
// -> device, the path the "host->device from pinned memory" target is about.
void BM_CopyBuffer(benchmark::State& state) {
  const bool from_pinned = state.range(0) != 0;
  Buffer src = Allocate(state, kBandwidthBytes,
                        from_pinned ? AXRT_MEMORY_TYPE_HOST_PINNED : AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  Buffer dst = Allocate(state, kBandwidthBytes);
  Stream stream = CreateStream(state);
  if (!src || !dst || !stream) return;
  if (Failed(state, axrt_stream_fill_buffer(stream.get(), src.get(), 0, kBandwidthBytes, "\x5a", 1),
             "axrt_stream_fill_buffer") ||
      Failed(state, axrt_stream_fill_buffer(stream.get(), dst.get(), 0, kBandwidthBytes, "\0", 1),
             "axrt_stream_fill_buffer")) {
    return;
  }
  for (auto _ : state) {
    if (Failed(state, axrt_stream_copy_buffer(stream.get(), src.get(), 0, dst.get(), 0,
                                              kBandwidthBytes),
               "axrt_stream_copy_buffer") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kBandwidthBytes));
  state.SetLabel(from_pinned ? "pinned->device" : "device->device");
}
BENCHMARK(BM_CopyBuffer)->ArgName("from_pinned")->Arg(0)->Arg(1)->UseRealTime();

// --- Small-copy latency ----------------------------------------------------------

// 64 bytes each way, enqueue + synchronize: what a tiny transfer costs end to
// end, dominated by queueing and completion rather than by bytes.
void BM_SmallCopySynchronize(benchmark::State& state) {
  const bool to_host = state.range(0) != 0;
  unsigned char host[kSmallCopyBytes] = {};
  Buffer buffer = Allocate(state, kSmallCopyBytes);
  Stream stream = CreateStream(state);
  if (!buffer || !stream) return;
  for (auto _ : state) {
    axrt_status_t status =
        to_host ? axrt_stream_copy_to_host(stream.get(), buffer.get(), 0, host, kSmallCopyBytes)
                : axrt_stream_copy_from_host(stream.get(), host, buffer.get(), 0, kSmallCopyBytes);
    if (Failed(state, status, to_host ? "axrt_stream_copy_to_host" : "axrt_stream_copy_from_host") ||
        Failed(state, axrt_stream_synchronize(stream.get()), "axrt_stream_synchronize")) {
      break;
    }
  }
  state.SetLabel(to_host ? "device->host" : "host->device");
}
BENCHMARK(BM_SmallCopySynchronize)->ArgName("to_host")->Arg(0)->Arg(1)->UseRealTime();

// The anchor of the small copies: memcpy of the same 64 bytes between two
// host arrays.
void BM_SmallMemcpy(benchmark::State& state) {
  unsigned char src[kSmallCopyBytes] = {0x5a};
  unsigned char dst[kSmallCopyBytes] = {};
  for (auto _ : state) {
    benchmark::DoNotOptimize(src);
    std::memcpy(dst, src, kSmallCopyBytes);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kSmallCopyBytes));
}
BENCHMARK(BM_SmallMemcpy)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  axrt_instance_t& instance = axrt_bench::g_instance;
  axrt_status_t status = axrt_instance_create(nullptr, &instance);
  if (status == nullptr) status = axrt_instance_find_device(instance, nullptr, &g_device);
  if (status != nullptr) {
    std::fprintf(stderr, "axrt_bench: no device: %s: %s\n",
                 axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
    axrt_status_free(status);
    axrt_instance_release(instance);
    return 1;
  }
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  status = axrt_device_query_properties(g_device, &properties);
  if (status == nullptr) {
    benchmark::AddCustomContext("axrt_device", std::string(properties.id) + " (" + properties.name + ")");
  }
  axrt_status_free(status);
  benchmark::AddCustomContext("axrt_version", axrt_version_string());

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  axrt_device_release(g_device);
  axrt_instance_release(instance);
  return 0;
}
