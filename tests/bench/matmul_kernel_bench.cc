// Times one built-in matmul kernel called directly: every workgroup of the
// grid, claimed one at a time by `threads` threads (the caller and
// threads - 1 others that spin between calls, as ONNX Runtime's intra-op
// pool does by default), with random data. No runtime, no dispatch cost: the kernel's
// own speed. tests/bench/matmul_vs_onnxruntime.py runs it beside the
// runtime and ONNX Runtime.
//
//   axrt_matmul_kernel_bench KIND M K N THREADS SECONDS
//
// KIND is f32, f32nk ([N, K] f32 weights), bf16, int8, int8q8 (int8 weights,
// int8 activations), awq (groups of 128) or q8 (GPTQ int4, groups of 128,
// int8 activations) or q8p (q8 with its weights pre-packed tile by tile,
// as the CPU device's loader packs them). Prints the median
// seconds per call over five rounds of about SECONDS / 5 each, the matmul
// build that ran, and the median process CPU seconds per call (every
// thread's, spinning included: with one thread, the kernel's own work).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/library.h"
#include "kernels/cpu/matmul_isa.h"

namespace {

// Buffers aligned as the CPU device aligns its buffers (256 bytes).
template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr size_t kAlignment = 256;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};
template <class T>
using Buffer = std::vector<T, AlignedAllocator<T>>;

axrt_cpu_kernel_fn_t find_kernel(const char* name, uint32_t args_size) {
  const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    const axrt_kernel_info_t& kernel = library->kernels[i];
    if (std::strcmp(kernel.name, name) == 0 && kernel.args_size == args_size) {
      return kernel.function;
    }
  }
  std::fprintf(stderr, "axrt_matmul_kernel_bench: no kernel %s of %u argument bytes\n", name,
               args_size);
  std::exit(1);
}

// The argument blocks of docs/kernels.md.
struct DenseArgs {
  const void* x;
  const void* w;
  const float* bias;
  float* y;
  uint64_t M, N, K;
};
struct Int8Args {
  const float* x;
  const int8_t* w;
  const float* scale;
  const float* bias;
  float* y;
  uint64_t M, N, K;
};
struct Int4Args {
  const float* x;
  const uint32_t* qweight;
  const uint16_t* scales;
  const uint32_t* qzeros;
  const float* bias;
  float* y;
  uint64_t M, N, K, group_size;
};

// Runs the grid on the caller and `threads - 1` other threads, which spin
// (yielding) between calls. A call ends when every workgroup has run, not
// when every thread has looked in, so a thread the OS preempts delays a
// call only by the workgroup it holds.
class Team {
 public:
  Team(uint32_t threads, axrt_cpu_kernel_fn_t kernel, const void* args, uint32_t gx, uint32_t gy)
      : threads_(threads),
        kernel_(kernel),
        args_(args),
        gx_(gx),
        gy_(gy),
        total_(uint64_t{gx} * gy) {
    for (uint32_t t = 1; t < threads; ++t) helpers_.emplace_back([this, t] { serve(t); });
  }
  ~Team() {
    stop_.store(true);
    for (auto& t : helpers_) t.join();
  }

  // Every call runs the same kernel on the same arguments, so a thread that
  // wakes late for one call can only help with the next.
  void run() {
    finished_.store(0);
    next_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
    work(0);
    while (finished_.load(std::memory_order_acquire) != total_) std::this_thread::yield();
  }

 private:
  void serve(uint32_t id) {
    uint64_t seen = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      const uint64_t generation = generation_.load(std::memory_order_acquire);
      if (generation == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = generation;
      work(id);
    }
  }

  void work(uint32_t id) {
    axrt_kernel_dispatch_t dispatch = {};
    dispatch.struct_size = sizeof dispatch;
    dispatch.workgroup_count = {gx_, gy_, 1};
    dispatch.workgroup_size = {1, 1, 1};
    dispatch.worker_count = threads_;
    char message[256] = "";
    axrt_kernel_workgroup_t workgroup = {};
    workgroup.struct_size = sizeof workgroup;
    workgroup.worker_id = id;
    workgroup.error_message = message;
    workgroup.error_message_capacity = sizeof message;
    for (uint64_t i; (i = next_.fetch_add(1)) < total_;) {
      workgroup.workgroup_id = {static_cast<uint32_t>(i % gx_), static_cast<uint32_t>(i / gx_),
                                0};
      if (kernel_(args_, &dispatch, &workgroup) != AXRT_KERNEL_OK) {
        std::fprintf(stderr, "axrt_matmul_kernel_bench: the kernel failed: %s\n", message);
        std::exit(1);
      }
      finished_.fetch_add(1, std::memory_order_release);
    }
  }

  const uint32_t threads_;
  const axrt_cpu_kernel_fn_t kernel_;
  const void* const args_;
  const uint32_t gx_, gy_;
  const uint64_t total_;
  std::vector<std::thread> helpers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> finished_{0};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s f32|f32nk|bf16|int8|int8q8|awq|q8|q8p M K N THREADS SECONDS\n",
                 argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const uint64_t M = std::strtoull(argv[2], nullptr, 10);
  const uint64_t K = std::strtoull(argv[3], nullptr, 10);
  const uint64_t N = std::strtoull(argv[4], nullptr, 10);
  const uint32_t threads = static_cast<uint32_t>(std::max(1, std::atoi(argv[5])));
  const double seconds = std::atof(argv[6]);
  constexpr uint64_t kGroup = 128;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Buffer<float> x(M * K), bias(N), y(M * N);
  for (float& v : x) v = uniform(rng);
  for (float& v : bias) v = uniform(rng);
  Buffer<float> w32;
  Buffer<uint16_t> w16, scales;
  Buffer<int8_t> w8;
  Buffer<float> scale8;
  Buffer<uint32_t> qweight, qzeros;
  DenseArgs dense{};
  Int8Args int8{};
  Int4Args int4{};
  const void* args = nullptr;
  axrt_cpu_kernel_fn_t kernel = nullptr;
  if (kind == "f32") {
    w32.resize(K * N);
    for (float& v : w32) v = uniform(rng);
    dense = {x.data(), w32.data(), bias.data(), y.data(), M, N, K};
    args = &dense;
    kernel = find_kernel("axrt_matmul_f32", sizeof dense);
  } else if (kind == "f32nk") {
    w32.resize(N * K);
    for (float& v : w32) v = uniform(rng);
    dense = {x.data(), w32.data(), bias.data(), y.data(), M, N, K};
    args = &dense;
    kernel = find_kernel("axrt_matmul_f32_nk", sizeof dense);
  } else if (kind == "bf16") {
    w16.resize(N * K);
    for (uint16_t& v : w16) {
      const float f = uniform(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      v = static_cast<uint16_t>(bits >> 16);
    }
    dense = {x.data(), w16.data(), bias.data(), y.data(), M, N, K};
    args = &dense;
    kernel = find_kernel("axrt_matmul_bf16_f32", sizeof dense);
  } else if (kind == "int8" || kind == "int8q8") {
    w8.resize(N * K);
    for (int8_t& v : w8) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    scale8.assign(N, 0.01f);
    int8 = {x.data(), w8.data(), scale8.data(), bias.data(), y.data(), M, N, K};
    args = &int8;
    kernel = find_kernel(kind == "int8" ? "axrt_matmul_int8_pc_f32" : "axrt_matmul_int8_pc_q8_f32",
                         sizeof int8);
  } else if (kind == "awq" || kind == "q8" || kind == "q8p") {
    // Any words are valid codes in either packing (AWQ: [K, N/8]; GPTQ:
    // [K/8, N]; the same count).
    qweight.resize(K * N / 8);
    for (uint32_t& v : qweight) v = static_cast<uint32_t>(rng());
    qzeros.resize(K / kGroup * N / 8);
    for (uint32_t& v : qzeros) v = static_cast<uint32_t>(rng());
    scales.assign(K / kGroup * N, 0x2000);  // 2^-7 in f16
    int4 = {x.data(), qweight.data(), scales.data(), qzeros.data(), bias.data(), y.data(),
            M,        N,              K,             kGroup};
    args = &int4;
    kernel = find_kernel(kind == "awq"  ? "axrt_matmul_awq_int4_f32"
                         : kind == "q8" ? "axrt_matmul_gptq_int4_q8_f32"
                                        : "axrt_matmul_gptq_int4_q8_f32@gptq_v2.int4.g128.tile64",
                         sizeof int4);
    if (kind == "q8p") {
      for (const axrt::kernels::CpuPrepack& prepack : axrt::kernels::cpu_prepacks()) {
        if (std::string(prepack.entry) != "axrt_matmul_gptq_int4_q8_f32") continue;
        const uint64_t shape[2] = {K, N};
        Buffer<uint32_t> packed(prepack.packer->packed_size(shape, 2, qweight.size() * 4) / 4);
        prepack.packer->pack(qweight.data(), shape, 2, packed.data());
        qweight.swap(packed);
      }
      int4.qweight = qweight.data();
    }
  } else {
    std::fprintf(stderr, "axrt_matmul_kernel_bench: unknown kind %s\n", kind.c_str());
    return 2;
  }

  const uint32_t gx = static_cast<uint32_t>((N + 63) / 64);
  const uint32_t gy = static_cast<uint32_t>((M + 63) / 64);
  Team team(threads, kernel, args, gx, gy);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  team.run();  // first use: tuning, page faults
  team.run();
  const double once =
      std::max(1e-7, std::chrono::duration<double>(Clock::now() - start).count() / 2);
  const int calls = std::max(1, static_cast<int>(seconds / 5 / once));
  std::vector<double> rounds, cpu_rounds;
  for (int round = 0; round < 5; ++round) {
    const auto begin = Clock::now();
    const std::clock_t cpu_begin = std::clock();
    for (int i = 0; i < calls; ++i) team.run();
    cpu_rounds.push_back(static_cast<double>(std::clock() - cpu_begin) / CLOCKS_PER_SEC / calls);
    rounds.push_back(std::chrono::duration<double>(Clock::now() - begin).count() / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  std::sort(cpu_rounds.begin(), cpu_rounds.end());
  const auto isa = axrt::kernels::cpu::matmul_isa();
  std::printf("%.9f %s %.9f\n", rounds[2], axrt::kernels::cpu::matmul_isa_name(isa),
              cpu_rounds[2]);
  return 0;
}
