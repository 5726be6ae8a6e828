// The built-in CPU kernel library "axrt.cpu" against docs/kernels.md: its
// table, and every kernel against a plain double-precision reference on
// random inputs, run one workgroup at a time through a small dispatcher in
// sequential, shuffled and multi-threaded order.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>
#include <catch2/catch.hpp>

#include "axrt/base.h"
#include "axrt/kernel_abi.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/library.h"
#include "tests/unit/sanitizer.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_tuning.h"
#include "tests/unit/subprocess.h"

namespace {

constexpr axrt_kernel_result_t kInvalidArgument = AXRT_STATUS_CODE_INVALID_ARGUMENT;

// ---------------------------------------------------------------------------
// The table and the argument block
// ---------------------------------------------------------------------------

const axrt_kernel_library_t& library() { return *axrt::kernels::cpu_kernel_library(); }

const axrt_kernel_info_t& find_kernel(std::string_view name) {
  const axrt_kernel_library_t& lib = library();
  for (uint32_t i = 0; i < lib.kernel_count; ++i) {
    if (name == lib.kernels[i].name) return lib.kernels[i];
  }
  FAIL("no kernel named " << name);
  std::abort();  // FAIL throws
}

// Offsets of the parameters and the block size under the ABI's C rules:
// buffers are 8-byte addresses, scalars their size at their alignment, the
// block rounded up to its largest alignment.
struct BlockLayout {
  std::vector<uint32_t> offsets;
  uint32_t size = 0;
};

BlockLayout c_layout(const axrt_kernel_info_t& kernel) {
  BlockLayout layout;
  uint32_t offset = 0;
  uint32_t max_align = 1;
  for (uint32_t i = 0; i < kernel.param_count; ++i) {
    const axrt_kernel_param_info_t& p = kernel.params[i];
    const uint32_t size =
        p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER ? 8u : axrt_kernel_scalar_size(p.scalar_type);
    REQUIRE(size != 0);
    offset = (offset + size - 1) / size * size;
    layout.offsets.push_back(offset);
    offset += size;
    max_align = std::max(max_align, size);
  }
  layout.size = (offset + max_align - 1) / max_align * max_align;
  return layout;
}

// An argument block built by parameter name from the kernel's own table, so
// that the test never shares the kernels' argument structs.
class ArgBlock {
 public:
  explicit ArgBlock(const axrt_kernel_info_t& kernel)
      : kernel_(kernel),
        layout_(c_layout(kernel)),
        words_((layout_.size + 7) / 8, 0),
        set_(kernel.param_count, false) {}

  ArgBlock& buffer(const char* name, const void* pointer) {
    const uint64_t address = reinterpret_cast<uintptr_t>(pointer);
    return put(name, AXRT_KERNEL_PARAM_KIND_BUFFER, 0, &address, sizeof address);
  }
  ArgBlock& u64(const char* name, uint64_t value) {
    return put(name, AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, &value, sizeof value);
  }
  ArgBlock& f32(const char* name, float value) {
    return put(name, AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT32, &value, sizeof value);
  }

  const void* data() const {
    for (uint32_t i = 0; i < kernel_.param_count; ++i) {
      INFO("kernel " << kernel_.name << " parameter " << kernel_.params[i].name);
      REQUIRE(set_[i]);
    }
    return words_.data();
  }
  const axrt_kernel_info_t& kernel() const { return kernel_; }

 private:
  ArgBlock& put(const char* name, uint32_t kind, uint32_t type, const void* value, size_t size) {
    for (uint32_t i = 0; i < kernel_.param_count; ++i) {
      const axrt_kernel_param_info_t& p = kernel_.params[i];
      if (std::string_view(p.name) != name) continue;
      INFO("kernel " << kernel_.name << " parameter " << name);
      REQUIRE(p.kind == kind);
      REQUIRE(p.scalar_type == type);
      std::memcpy(reinterpret_cast<char*>(words_.data()) + layout_.offsets[i], value, size);
      set_[i] = true;
      return *this;
    }
    FAIL("kernel " << kernel_.name << " has no parameter " << name);
    return *this;
  }

  const axrt_kernel_info_t& kernel_;
  BlockLayout layout_;
  std::vector<uint64_t> words_;  // 8-byte aligned, as the ABI promises
  std::vector<bool> set_;
};

// ---------------------------------------------------------------------------
// The dispatcher: every workgroup of the grid, one call each
// ---------------------------------------------------------------------------

enum class Order { kSequential, kShuffled, kThreaded };

struct Outcome {
  axrt_kernel_result_t code = AXRT_KERNEL_OK;
  std::string message;
};

Outcome dispatch(const ArgBlock& args, axrt_kernel_dim3_t grid, Order order = Order::kSequential,
                 size_t message_capacity = 256) {
  const void* block = args.data();
  const axrt_cpu_kernel_fn_t function = args.kernel().function;
  const uint64_t count = uint64_t{grid.x} * grid.y * grid.z;
  std::vector<uint64_t> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  if (order == Order::kShuffled) std::shuffle(ids.begin(), ids.end(), std::mt19937(1234));
  const uint32_t workers = order == Order::kThreaded ? 3 : 1;
  axrt_kernel_dispatch_t dispatch{};
  dispatch.struct_size = sizeof dispatch;
  dispatch.workgroup_count = grid;
  dispatch.workgroup_size = {1, 1, 1};
  dispatch.worker_count = workers;

  Outcome outcome;
  std::mutex mutex;
  std::atomic<uint64_t> next{0};
  auto worker = [&](uint32_t worker_id) {
    std::vector<char> message(message_capacity + 1, '\x7f');  // one canary byte past the end
    axrt_kernel_workgroup_t workgroup{};
    workgroup.struct_size = sizeof workgroup;
    workgroup.worker_id = worker_id;
    workgroup.error_message = message_capacity ? message.data() : nullptr;
    workgroup.error_message_capacity = message_capacity;
    for (uint64_t i; (i = next.fetch_add(1)) < count;) {
      const uint64_t id = ids[i];
      workgroup.workgroup_id = {static_cast<uint32_t>(id % grid.x),
                                static_cast<uint32_t>(id / grid.x % grid.y),
                                static_cast<uint32_t>(id / grid.x / grid.y)};
      const axrt_kernel_result_t code = function(block, &dispatch, &workgroup);
      if (code != AXRT_KERNEL_OK) {
        std::lock_guard<std::mutex> lock(mutex);
        if (outcome.code == AXRT_KERNEL_OK) {
          outcome.code = code;
          if (message_capacity > 0) {
            // NUL-terminated within the capacity, the canary untouched.
            const char* end =
                static_cast<const char*>(std::memchr(message.data(), '\0', message_capacity));
            outcome.message = end ? std::string(message.data()) : "<not terminated>";
            if (message[message_capacity] != '\x7f') outcome.message += "<overrun>";
          }
        }
        next.store(count);
      }
    }
  };
  if (workers == 1) {
    worker(0);
  } else {
    std::vector<std::thread> threads;
    for (uint32_t w = 0; w < workers; ++w) threads.emplace_back(worker, w);
    for (auto& t : threads) t.join();
  }
  return outcome;
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }
axrt_kernel_dim3_t elementwise_grid(uint64_t n) { return {ceil_div(n, 4096), 1, 1}; }
axrt_kernel_dim3_t rowwise_grid(uint64_t rows) { return {static_cast<uint32_t>(rows), 1, 1}; }
axrt_kernel_dim3_t matmul_grid(uint64_t M, uint64_t N) {
  return {ceil_div(N, 64), ceil_div(M, 64), 1};
}

// Runs the kernel in every order on fresh copies of `out` and requires the
// results to be bit-identical; leaves the sequential result in `out`.
// `prepare` restores the kernel's inputs before a run (for in-place calls).
template <class Prepare>
void run_all_orders(const ArgBlock& args, axrt_kernel_dim3_t grid, std::vector<float>& out,
                    Prepare prepare) {
  const std::vector<float> initial = out;
  std::vector<float> sequential;
  for (Order order : {Order::kSequential, Order::kShuffled, Order::kThreaded}) {
    out = initial;
    prepare();
    const Outcome outcome = dispatch(args, grid, order);
    INFO("kernel " << args.kernel().name << " message: " << outcome.message);
    REQUIRE(outcome.code == AXRT_KERNEL_OK);
    if (order == Order::kSequential) {
      sequential = out;
    } else {
      INFO("order " << static_cast<int>(order));
      REQUIRE(std::memcmp(sequential.data(), out.data(), sizeof(float) * out.size()) == 0);
    }
  }
  out = sequential;
}

void run_all_orders(const ArgBlock& args, axrt_kernel_dim3_t grid, std::vector<float>& out) {
  run_all_orders(args, grid, out, [] {});
}

// Output buffers start as NaN and carry kGuard sentinels past the end, so an
// element never written or a write past the end shows.
constexpr size_t kGuard = 16;
constexpr float kSentinel = -12345.0f;

std::vector<float> output_buffer(size_t n) {
  std::vector<float> out(n + kGuard, std::numeric_limits<float>::quiet_NaN());
  std::fill(out.begin() + n, out.end(), kSentinel);
  return out;
}

void check_guard(const std::vector<float>& out, size_t n) {
  for (size_t i = n; i < out.size(); ++i) REQUIRE(out[i] == kSentinel);
}

// Uniform in [lo, hi): the values std::uniform_real_distribution<float>
// gives with std::mt19937 (one 32-bit draw per value, scaled by 2^-32 in
// float), written out because the library's version works out log2 of the
// generator's range on every call in unoptimized builds, where it was a
// fifth of the float matmul tests' time under ASan.
std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    float unit = static_cast<float>(rng()) / 4294967296.0f;
    if (unit >= 1.0f) unit = std::nextafter(1.0f, 0.0f);
    x = unit * (hi - lo) + lo;
  }
  return v;
}

// |got - want| <= absolute + relative |want|, reported with its index.
void check_close(const std::vector<float>& got, const std::vector<double>& want, double absolute,
                 double relative) {
  size_t failures = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = absolute + relative * std::fabs(want[i]);
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= bound) && failures++ < 5) {
      INFO("element " << i << ": got " << got[i] << ", want " << want[i] << ", bound " << bound);
      CHECK(error <= bound);
    }
  }
  REQUIRE(failures == 0);
}

// Runs a test body under both builds of the hot loops (AVX2 + FMA and the
// baseline; on a CPU without AVX2 both runs take the baseline).
struct IsaScope {
  explicit IsaScope(bool baseline) { axrt::kernels::cpu::force_baseline_isa = baseline; }
  ~IsaScope() { axrt::kernels::cpu::force_baseline_isa = false; }
};

using axrt::kernels::cpu::MatmulIsa;

// The matmul kernels' builds this CPU runs (and AXRT_CPU_ISA allows),
// widest first (AVX-512, AVX2 + FMA, baseline).
std::vector<MatmulIsa> matmul_isas() {
  std::vector<MatmulIsa> isas;
  const int widest = std::min(static_cast<int>(axrt::kernels::cpu::matmul_cpu_isa()),
                              static_cast<int>(axrt::kernels::cpu::matmul_environment_isa_limit()));
  for (int isa = widest; isa >= 0; --isa) {
    isas.push_back(static_cast<MatmulIsa>(isa));
  }
  return isas;
}

// Runs the matmul kernels under one build (and the other kernels under the
// baseline when that build is).
struct MatmulIsaScope {
  explicit MatmulIsaScope(MatmulIsa isa) {
    axrt::kernels::cpu::matmul_isa_limit = static_cast<int>(isa);
    axrt::kernels::cpu::force_baseline_isa = isa == MatmulIsa::kBaseline;
  }
  ~MatmulIsaScope() {
    axrt::kernels::cpu::matmul_isa_limit = static_cast<int>(MatmulIsa::kAvx512);
    axrt::kernels::cpu::force_baseline_isa = false;
  }
};

const char* matmul_isa_name() {
  return axrt::kernels::cpu::matmul_isa_name(axrt::kernels::cpu::matmul_isa());
}

// The matmul tuner's cache lives in a directory of this process's own (the
// tuner tests point it elsewhere), so that the tests never read or write the
// user's cache.
struct TuningCacheForTests {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cpu_kernels_test." + std::to_string(getpid()));
  TuningCacheForTests() {
    setenv("AXRT_TUNING_CACHE", (dir / "matmul_tuning.txt").c_str(), 1);
    unsetenv("AXRT_TUNING");
  }
  ~TuningCacheForTests() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
} g_tuning_cache_for_tests;

// ---------------------------------------------------------------------------
// Test-side number formats, written independently of the kernels'
// ---------------------------------------------------------------------------

double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

// A positive normal value rounded to the nearest half.
uint16_t to_half(double v) {
  REQUIRE(v >= std::ldexp(1.0, -14));
  REQUIRE(v < 65504.0);
  int e;
  const double f = std::frexp(v, &e);  // v = f 2^e, f in [0.5, 1)
  int exponent = e - 1 + 15;
  int mantissa = static_cast<int>(std::nearbyint((2 * f - 1) * 1024));
  if (mantissa == 1024) {
    mantissa = 0;
    ++exponent;
  }
  return static_cast<uint16_t>((exponent << 10) | mantissa);
}

double e4m3fn_value(uint8_t code) {
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  double magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -9);
  } else {
    magnitude = std::ldexp(8 + mantissa, exponent - 10);
  }
  return (code & 0x80) ? -magnitude : magnitude;
}

// The values of the finite non-negative codes, 0 to 0x7e, worked out once:
// to_e4m3fn() searches them for every weight it quantizes.
const std::array<double, 0x7f>& e4m3fn_magnitudes() {
  static const std::array<double, 0x7f> values = [] {
    std::array<double, 0x7f> v{};
    for (int code = 0; code <= 0x7e; ++code) v[code] = e4m3fn_value(static_cast<uint8_t>(code));
    return v;
  }();
  return values;
}

// The nearest e4m3fn code (|v| <= 448; of two equally near, the smaller).
uint8_t to_e4m3fn(double v) {
  const double magnitude = std::fabs(v);
  const double* values = e4m3fn_magnitudes().data();
  uint8_t best = 0;
  for (int code = 1; code <= 0x7e; ++code) {
    if (std::fabs(values[code] - magnitude) < std::fabs(values[best] - magnitude)) {
      best = static_cast<uint8_t>(code);
    }
  }
  return v < 0 ? static_cast<uint8_t>(best | 0x80) : best;
}

// The bf16 nearest to a finite float (ties to even), as its bit pattern,
// and a pattern's value.
uint16_t to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

double bf16_value(uint16_t pattern) {
  const uint32_t bits = static_cast<uint32_t>(pattern) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// AWQ order: element e of a word's eight sits in nibble kAwqNibble[e].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

void put_nibble(uint32_t& word, int nibble, uint32_t value) {
  REQUIRE(value <= 15);
  word |= value << (4 * nibble);
}

// ---------------------------------------------------------------------------
// Matmul references
// ---------------------------------------------------------------------------

// y = x . W + bias in double, with the bound of docs/kernels.md per output:
// 1e-5 sum_k |x W| + 1e-6. W is [K, N] in double.
void check_matmul(const std::vector<float>& y, const std::vector<float>& x,
                  const std::vector<double>& w, const std::vector<float>& bias, uint64_t M,
                  uint64_t N, uint64_t K) {
  check_guard(y, M * N);
  size_t failures = 0;
  std::vector<double> ref_row(N), magnitude_row(N);
  // Raw pointers in the inner loop: unoptimized (sanitizer) builds call
  // vector's operator[] otherwise, and this loop is most of their time.
  double* ref = ref_row.data();
  double* magnitude = magnitude_row.data();
  for (uint64_t m = 0; m < M; ++m) {
    std::fill(ref_row.begin(), ref_row.end(), 0.0);
    std::fill(magnitude_row.begin(), magnitude_row.end(), 0.0);
    for (uint64_t k = 0; k < K; ++k) {
      const double xv = x[m * K + k];
      const double* wrow = w.data() + k * N;
      for (uint64_t n = 0; n < N; ++n) {
        ref[n] += xv * wrow[n];
        magnitude[n] += std::fabs(xv * wrow[n]);
      }
    }
    for (uint64_t n = 0; n < N; ++n) {
      const double want = ref[n] + bias[n];
      const double bound = 1e-5 * magnitude[n] + 1e-6;
      const double got = y[m * N + n];
      if (!(std::fabs(got - want) <= bound) && failures++ < 5) {
        INFO("y[" << m << "][" << n << "] = " << got << ", want " << want << ", bound " << bound);
        CHECK(std::fabs(got - want) <= bound);
      }
    }
  }
  REQUIRE(failures == 0);
}

struct Shape {
  uint64_t M, N, K;
};

std::string shape_name(const Shape& s) {
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
}

// Under ThreadSanitizer these tests are run for the races of the threaded
// order, which show at any size; the largest shapes, which take it tens of
// seconds, are left to the other builds. Under AddressSanitizer they are run
// for the reads and writes past a tile's edge, which every shape with a
// partial tile in each direction shows: the one shape of over 4 M products
// (128 x 192 x 512, half the work of them all) is left to the release build.
bool runs_in_this_build(const Shape& s) {
  if (axrt_test::kThreadSanitizer) return s.M * s.N * s.K <= (uint64_t{1} << 18);
  if (axrt_test::kAddressSanitizer) return s.M * s.N * s.K <= (uint64_t{1} << 22);
  return true;
}

// ---------------------------------------------------------------------------
// Quantizers into the exact packed layouts (docs/format.md section 9)
// ---------------------------------------------------------------------------

// int8 per output channel, symmetric: w8 [N, K], scale [N].
struct Int8Weights {
  std::vector<int8_t> w;
  std::vector<float> scale;
  std::vector<double> dequantized;  // [K, N]
};

Int8Weights quantize_int8(const std::vector<float>& w_kn, uint64_t N, uint64_t K) {
  Int8Weights q;
  q.w.resize(N * K);
  q.scale.resize(N);
  q.dequantized.resize(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    double amax = 0;
    for (uint64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(double(w_kn[k * N + n])));
    const float scale = amax > 0 ? static_cast<float>(amax / 127) : 1.0f;
    q.scale[n] = scale;
    for (uint64_t k = 0; k < K; ++k) {
      const double code = std::clamp(std::nearbyint(double(w_kn[k * N + n]) / scale), -127.0, 127.0);
      q.w[n * K + k] = static_cast<int8_t>(code);
      q.dequantized[k * N + n] = code * double(scale);
    }
  }
  return q;
}

// bf16 [N, K] (the [out, in] layout), rounded to nearest.
struct Bf16Weights {
  std::vector<uint16_t> w;
  std::vector<double> dequantized;  // [K, N]
};

Bf16Weights round_bf16(const std::vector<float>& w_kn, uint64_t N, uint64_t K) {
  Bf16Weights q;
  q.w.resize(std::max<uint64_t>(N * K, 1));
  q.dequantized.resize(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      q.w[n * K + k] = to_bf16(w_kn[k * N + n]);
      q.dequantized[k * N + n] = bf16_value(q.w[n * K + k]);
    }
  }
  return q;
}

enum class Int4Kind { kAwq, kGptqV2, kGptqV1 };

// int4 with groups of `group` along K, asymmetric: codes q [K, N], zero
// points z [K/g, N], f16 scales [K/g, N], packed per layout.
struct Int4Weights {
  std::vector<uint32_t> qweight;
  std::vector<uint16_t> scales;
  std::vector<uint32_t> qzeros;
  std::vector<double> dequantized;  // [K, N]
};

Int4Weights quantize_int4(const std::vector<float>& w_kn, uint64_t N, uint64_t K, uint64_t group,
                          Int4Kind kind) {
  const uint64_t groups = K / group;
  Int4Weights q;
  q.scales.resize(groups * N);
  q.qzeros.assign(groups * N / 8, 0);
  q.qweight.assign(K * N / 8, 0);
  q.dequantized.resize(K * N);
  // v1 stores z - 1, so its zero points start at 1.
  const double z_min = kind == Int4Kind::kGptqV1 ? 1 : 0;
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t n = 0; n < N; ++n) {
      double lo = 0, hi = 0;  // the range always holds 0
      for (uint64_t k = g * group; k < (g + 1) * group; ++k) {
        lo = std::min(lo, double(w_kn[k * N + n]));
        hi = std::max(hi, double(w_kn[k * N + n]));
      }
      const uint16_t scale_bits = to_half(hi > lo ? (hi - lo) / 15 : 1.0);
      const double s = half_value(scale_bits);
      const double z = std::clamp(std::nearbyint(-lo / s), z_min, 15.0);
      q.scales[g * N + n] = scale_bits;
      const uint32_t stored_z = static_cast<uint32_t>(kind == Int4Kind::kGptqV1 ? z - 1 : z);
      uint32_t& zword = q.qzeros[g * (N / 8) + n / 8];
      put_nibble(zword, kind == Int4Kind::kAwq ? kAwqNibble[n % 8] : static_cast<int>(n % 8),
                 stored_z);
      for (uint64_t k = g * group; k < (g + 1) * group; ++k) {
        const double code = std::clamp(std::nearbyint(w_kn[k * N + n] / s) + z, 0.0, 15.0);
        q.dequantized[k * N + n] = (code - z) * s;
        const uint32_t c = static_cast<uint32_t>(code);
        if (kind == Int4Kind::kAwq) {
          put_nibble(q.qweight[k * (N / 8) + n / 8], kAwqNibble[n % 8], c);
        } else {
          put_nibble(q.qweight[(k / 8) * N + n], static_cast<int>(k % 8), c);
        }
      }
    }
  }
  return q;
}

// fp8 e4m3fn with f32 scales per [bn, bk] block (0 = the whole dimension):
// w [N, K], scale [ceil(N/bn), ceil(K/bk)].
struct Fp8Weights {
  std::vector<uint8_t> w;
  std::vector<float> scale;
  std::vector<double> dequantized;  // [K, N]
};

Fp8Weights quantize_fp8(const std::vector<float>& w_kn, uint64_t N, uint64_t K, uint64_t block_n,
                        uint64_t block_k) {
  const uint64_t bn = block_n ? block_n : N;
  const uint64_t bk = block_k ? block_k : K;
  const uint64_t grid_n = (N + bn - 1) / bn, grid_k = (K + bk - 1) / bk;
  Fp8Weights q;
  q.w.resize(N * K);
  q.scale.resize(grid_n * grid_k);
  q.dequantized.resize(K * N);
  for (uint64_t gn = 0; gn < grid_n; ++gn) {
    for (uint64_t gk = 0; gk < grid_k; ++gk) {
      double amax = 0;
      for (uint64_t n = gn * bn; n < std::min(N, (gn + 1) * bn); ++n) {
        for (uint64_t k = gk * bk; k < std::min(K, (gk + 1) * bk); ++k) {
          amax = std::max(amax, std::fabs(double(w_kn[k * N + n])));
        }
      }
      const float scale = amax > 0 ? static_cast<float>(amax / 448) : 1.0f;
      q.scale[gn * grid_k + gk] = scale;
      for (uint64_t n = gn * bn; n < std::min(N, (gn + 1) * bn); ++n) {
        for (uint64_t k = gk * bk; k < std::min(K, (gk + 1) * bk); ++k) {
          const uint8_t code = to_e4m3fn(std::clamp(w_kn[k * N + n] / scale, -448.0f, 448.0f));
          q.w[n * K + k] = code;
          q.dequantized[k * N + n] = e4m3fn_value(code) * double(scale);
        }
      }
    }
  }
  return q;
}

// Random [K, N] weights with a few outliers per column, so quantization
// ranges differ between columns and groups.
std::vector<float> random_weights(uint64_t K, uint64_t N, uint32_t seed) {
  std::vector<float> w = random_floats(K * N, -1.0f, 1.0f, seed);
  std::mt19937 rng(seed + 1);
  for (size_t i = 0; i < w.size() / 37; ++i) w[rng() % w.size()] *= 4.0f;
  return w;
}

// The shared x, bias and output of a matmul case.
struct MatmulCase {
  Shape shape;
  std::vector<float> x, bias, y;

  explicit MatmulCase(Shape s, uint32_t seed)
      : shape(s),
        x(random_floats(s.M * s.K, -1.0f, 1.0f, seed)),
        bias(random_floats(s.N, -1.0f, 1.0f, seed + 7)),
        y(output_buffer(s.M * s.N)) {
    if (x.empty()) x.resize(1);  // a valid address even when M K = 0
  }
  ArgBlock& common(ArgBlock& args) {
    return args.buffer("x", x.data())
        .buffer("bias", bias.data())
        .buffer("y", y.data())
        .u64("M", shape.M)
        .u64("N", shape.N)
        .u64("K", shape.K);
  }
  void run(const ArgBlock& args) { run_all_orders(args, matmul_grid(shape.M, shape.N), y); }
};

}  // namespace

// ===========================================================================
// The table
// ===========================================================================

TEST_CASE("the library table describes axrt.cpu version 1") {
  const axrt_kernel_library_t& lib = library();
  CHECK(lib.struct_size == sizeof(axrt_kernel_library_t));
  CHECK(lib.abi_version == AXRT_KERNEL_ABI_VERSION);
  CHECK(lib.version == 1);
  CHECK(std::string_view(lib.name) == "axrt.cpu");
  CHECK(lib.init == nullptr);
  CHECK(lib.deinit == nullptr);
  REQUIRE(lib.kernels != nullptr);
}

TEST_CASE("every kernel of the contracts is in the table with its parameters") {
  // kernels/contracts.json as the build lists it (cmake/axrt_kernel_contracts.cmake):
  // a kernel a line, its name, then name:buffer[:layout] or name:scalar:type (and
  // cuda:<entry> after the name of a kernel whose CUDA entry point is another's, which
  // the CPU library does not see).
  std::ifstream listing(AXRT_KERNEL_CONTRACTS_LISTING);
  REQUIRE(listing.good());
  std::vector<std::vector<std::string>> contracts;
  for (std::string line; std::getline(listing, line);) {
    std::istringstream words(line);
    contracts.emplace_back();
    for (std::string word; words >> word;) {
      if (!word.starts_with("cuda:")) contracts.back().push_back(word);
    }
  }
  const axrt_kernel_library_t& lib = library();
  // The pre-packed forms (kernels/cpu/library.h) follow their kernels; the
  // next test checks them.
  const size_t prepacked = axrt::kernels::cpu_prepacks().size();
  REQUIRE(lib.kernel_count == contracts.size() + prepacked);
  std::set<std::string> names;
  size_t listed = 0;
  for (uint32_t i = 0; i < lib.kernel_count; ++i) {
    const axrt_kernel_info_t& kernel = lib.kernels[i];
    if (std::string_view(kernel.name).find('@') != std::string_view::npos) continue;
    REQUIRE(listed < contracts.size());
    const std::vector<std::string>& want = contracts[listed++];
    INFO("kernel " << kernel.name);
    CHECK(names.insert(kernel.name).second);  // unique
    CHECK(kernel.function != nullptr);
    CHECK(std::string_view(kernel.name) == want[0]);  // in the contracts' order
    REQUIRE(kernel.param_count + 1 == want.size());
    for (uint32_t p = 0; p < kernel.param_count; ++p) {
      const axrt_kernel_param_info_t& param = kernel.params[p];
      std::string expect = std::string(param.name);
      if (param.kind == AXRT_KERNEL_PARAM_KIND_BUFFER) {
        expect += ":buffer";
        CHECK(param.scalar_type == 0);
        if (param.layout_id != nullptr) expect += std::string(":") + param.layout_id;
      } else {
        REQUIRE(param.kind == AXRT_KERNEL_PARAM_KIND_SCALAR);
        CHECK(param.layout_id == nullptr);
        expect += param.scalar_type == AXRT_DTYPE_UINT64    ? ":scalar:uint64"
                  : param.scalar_type == AXRT_DTYPE_FLOAT32 ? ":scalar:float32"
                                                            : ":scalar:?";
      }
      CHECK(expect == want[p + 1]);
    }
  }
}

TEST_CASE("every pre-packed form is its kernel with one parameter in the packed layout") {
  const auto prepacks = axrt::kernels::cpu_prepacks();
  REQUIRE(prepacks.size() == 6);  // the GPTQ v2 int4 kernels, exact and q8, at g128/g64/g32
  std::set<std::string> seen;
  for (const axrt::kernels::CpuPrepack& prepack : prepacks) {
    INFO("pre-packed form of " << prepack.entry);
    const axrt_kernel_info_t& base = find_kernel(prepack.entry);
    const axrt_kernel_info_t& packed = find_kernel(prepack.packed_entry);
    CHECK(std::string(prepack.packed_entry) ==
          std::string(prepack.entry) + "@" + prepack.to_layout);
    CHECK(seen.insert(prepack.entry).second);
    CHECK(packed.function != base.function);
    CHECK(packed.args_size == base.args_size);
    REQUIRE(packed.param_count == base.param_count);
    REQUIRE(prepack.param < base.param_count);
    for (uint32_t p = 0; p < base.param_count; ++p) {
      CHECK(std::string_view(packed.params[p].name) == base.params[p].name);
      CHECK(packed.params[p].kind == base.params[p].kind);
      CHECK(packed.params[p].scalar_type == base.params[p].scalar_type);
      const char* want = p == prepack.param ? prepack.to_layout : base.params[p].layout_id;
      CHECK(std::string(packed.params[p].layout_id ? packed.params[p].layout_id : "") ==
            std::string(want ? want : ""));
    }
    CHECK(std::string(base.params[prepack.param].layout_id) == prepack.from_layout);
    CHECK(prepack.packer != nullptr);
  }
}

TEST_CASE("every args_size is the C layout of its parameter table") {
  const axrt_kernel_library_t& lib = library();
  for (uint32_t i = 0; i < lib.kernel_count; ++i) {
    INFO("kernel " << lib.kernels[i].name);
    CHECK(lib.kernels[i].args_size == c_layout(lib.kernels[i]).size);
  }
  // The rules themselves, on the two shapes of block the table has.
  CHECK(c_layout(find_kernel("axrt_layernorm_f32")).size == 56);  // 6 x 8 + 4, rounded to 8
  CHECK(c_layout(find_kernel("axrt_matmul_awq_int4_f32")).size == 80);
}

// ===========================================================================
// Number formats
// ===========================================================================

TEST_CASE("half_to_float decodes every binary16 value") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = axrt::kernels::cpu::half_to_float(static_cast<uint16_t>(h));
    const double want = half_value(static_cast<uint16_t>(h));
    INFO("half 0x" << std::hex << h);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(static_cast<double>(got) == want);
      REQUIRE(std::signbit(got) == std::signbit(want));
    }
  }
}

TEST_CASE("the e4m3fn table holds every code's value") {
  for (int code = 0; code < 256; ++code) {
    const float got = axrt::kernels::cpu::kE4m3fnValues[code];
    const double want = e4m3fn_value(static_cast<uint8_t>(code));
    INFO("code 0x" << std::hex << code);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(static_cast<double>(got) == want);
    }
  }
  CHECK(e4m3fn_value(0x7e) == 448.0);
  CHECK(e4m3fn_value(0x01) == std::ldexp(1.0, -9));
}

TEST_CASE("the test's AWQ packing matches the worked example of docs/format.md") {
  uint32_t word = 0;
  for (int n = 0; n < 8; ++n) put_nibble(word, kAwqNibble[n], static_cast<uint32_t>(n + 1));
  CHECK(word == 0x86427531u);
}

// ===========================================================================
// Elementwise
// ===========================================================================

namespace {

const uint64_t kElementwiseSizes[] = {1, 100, 4095, 4096, 4097, 3 * 4096 + 5, 20000};

void check_binary(const char* name, double (*op)(double, double)) {
  for (uint64_t n : kElementwiseSizes) {
    INFO(name << " n = " << n);
    const auto a = random_floats(n, -8.0f, 8.0f, 11 + static_cast<uint32_t>(n));
    const auto b = random_floats(n, -8.0f, 8.0f, 12 + static_cast<uint32_t>(n));
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; ++i) want[i] = op(a[i], b[i]);

    std::vector<float> out = output_buffer(n);
    ArgBlock args(find_kernel(name));
    args.buffer("a", a.data()).buffer("b", b.data()).buffer("out", out.data()).u64("n", n);
    run_all_orders(args, elementwise_grid(n), out);
    check_guard(out, n);
    check_close(out, want, 0.0, 1e-5);

    // In place: out aliases a.
    std::vector<float> in_place = a;
    in_place.resize(n + kGuard, kSentinel);
    ArgBlock alias(find_kernel(name));
    alias.buffer("a", in_place.data())
        .buffer("b", b.data())
        .buffer("out", in_place.data())
        .u64("n", n);
    REQUIRE(dispatch(alias, elementwise_grid(n), Order::kShuffled).code == AXRT_KERNEL_OK);
    check_guard(in_place, n);
    check_close(in_place, want, 0.0, 1e-5);
  }
}

void check_unary(const char* name, double (*op)(double)) {
  for (uint64_t n : kElementwiseSizes) {
    INFO(name << " n = " << n);
    auto x = random_floats(n, -8.0f, 8.0f, 21 + static_cast<uint32_t>(n));
    // Zeros, tiny values and both tails, spread over the workgroups.
    const float extremes[] = {0.0f,   -0.0f, 1e-30f, -1e-30f, 20.0f,
                              -20.0f, 90.0f, -90.0f, 1e6f,    -1e6f};
    for (size_t i = 0; i < std::size(extremes) && i < n; ++i) {
      x[i * (n / std::size(extremes))] = extremes[i];
    }
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; ++i) want[i] = op(x[i]);

    std::vector<float> out = output_buffer(n);
    ArgBlock args(find_kernel(name));
    args.buffer("x", x.data()).buffer("out", out.data()).u64("n", n);
    run_all_orders(args, elementwise_grid(n), out);
    check_guard(out, n);
    check_close(out, want, 1e-6, 1e-5);

    std::vector<float> in_place = x;
    in_place.resize(n + kGuard, kSentinel);
    ArgBlock alias(find_kernel(name));
    alias.buffer("x", in_place.data()).buffer("out", in_place.data()).u64("n", n);
    REQUIRE(dispatch(alias, elementwise_grid(n), Order::kThreaded).code == AXRT_KERNEL_OK);
    check_guard(in_place, n);
    check_close(in_place, want, 1e-6, 1e-5);
  }
}

}  // namespace

TEST_CASE("axrt_add_f32") {
  check_binary("axrt_add_f32", [](double a, double b) { return a + b; });
}
TEST_CASE("axrt_mul_f32") {
  check_binary("axrt_mul_f32", [](double a, double b) { return a * b; });
}
TEST_CASE("axrt_gelu_f32") {
  check_unary("axrt_gelu_f32", [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
}
TEST_CASE("axrt_silu_f32") {
  check_unary("axrt_silu_f32", [](double x) { return x / (1.0 + std::exp(-x)); });
}

TEST_CASE("an elementwise dispatch of n = 0 has no workgroups and a grid of 1 touches nothing") {
  std::vector<float> out = output_buffer(0);
  const float a = 1.0f, b = 2.0f;
  ArgBlock args(find_kernel("axrt_add_f32"));
  args.buffer("a", &a).buffer("b", &b).buffer("out", out.data()).u64("n", 0);
  CHECK(elementwise_grid(0).x == 0);
  REQUIRE(dispatch(args, {1, 1, 1}).code == AXRT_KERNEL_OK);
  check_guard(out, 0);
}

// ===========================================================================
// Row-wise
// ===========================================================================

namespace {

struct Rows {
  uint64_t rows, cols;
};
const Rows kRowShapes[] = {{1, 1}, {3, 7}, {4, 1000}, {2, 4097}, {17, 64}, {5, 333}};

}  // namespace

TEST_CASE("axrt_softmax_f32") {
  for (const Rows s : kRowShapes) {
    INFO("rows " << s.rows << " cols " << s.cols);
    const uint64_t n = s.rows * s.cols;
    auto x = random_floats(n, -10.0f, 10.0f, 31 + static_cast<uint32_t>(n));
    // A row far from 0 checks that the kernel subtracts the maximum.
    for (uint64_t c = 0; c < s.cols; ++c) x[c] += 1000.0f;
    std::vector<double> want(n);
    for (uint64_t r = 0; r < s.rows; ++r) {
      const float* row = x.data() + r * s.cols;
      const double max = *std::max_element(row, row + s.cols);
      double sum = 0;
      for (uint64_t c = 0; c < s.cols; ++c) sum += std::exp(double(row[c]) - max);
      for (uint64_t c = 0; c < s.cols; ++c) {
        want[r * s.cols + c] = std::exp(double(row[c]) - max) / sum;
      }
    }
    std::vector<float> out = output_buffer(n);
    ArgBlock args(find_kernel("axrt_softmax_f32"));
    args.buffer("x", x.data()).buffer("out", out.data()).u64("rows", s.rows).u64("cols", s.cols);
    run_all_orders(args, rowwise_grid(s.rows), out);
    check_guard(out, n);
    check_close(out, want, 0.0, 1e-5);

    std::vector<float> in_place = x;
    in_place.resize(n + kGuard, kSentinel);
    ArgBlock alias(find_kernel("axrt_softmax_f32"));
    alias.buffer("x", in_place.data())
        .buffer("out", in_place.data())
        .u64("rows", s.rows)
        .u64("cols", s.cols);
    REQUIRE(dispatch(alias, rowwise_grid(s.rows), Order::kShuffled).code == AXRT_KERNEL_OK);
    check_close(in_place, want, 0.0, 1e-5);
  }
}

TEST_CASE("axrt_layernorm_f32") {
  for (const Rows s : kRowShapes) {
    INFO("rows " << s.rows << " cols " << s.cols);
    const uint64_t n = s.rows * s.cols;
    auto x = random_floats(n, -3.0f, 5.0f, 41 + static_cast<uint32_t>(n));
    for (uint64_t c = 0; c < s.cols; ++c) x[c] = 100.0f + x[c] * 0.01f;  // mean >> spread
    const auto gamma = random_floats(s.cols, 0.5f, 1.5f, 42);
    const auto beta = random_floats(s.cols, -1.0f, 1.0f, 43);
    const float epsilon = 1e-5f;
    std::vector<double> want(n);
    for (uint64_t r = 0; r < s.rows; ++r) {
      const float* row = x.data() + r * s.cols;
      double mean = 0, var = 0;
      for (uint64_t c = 0; c < s.cols; ++c) mean += row[c];
      mean /= double(s.cols);
      for (uint64_t c = 0; c < s.cols; ++c) var += (row[c] - mean) * (row[c] - mean);
      var /= double(s.cols);
      for (uint64_t c = 0; c < s.cols; ++c) {
        want[r * s.cols + c] =
            (row[c] - mean) / std::sqrt(var + double(epsilon)) * gamma[c] + beta[c];
      }
    }
    std::vector<float> out = output_buffer(n);
    ArgBlock args(find_kernel("axrt_layernorm_f32"));
    args.buffer("x", x.data())
        .buffer("gamma", gamma.data())
        .buffer("beta", beta.data())
        .buffer("out", out.data())
        .u64("rows", s.rows)
        .u64("cols", s.cols)
        .f32("epsilon", epsilon);
    run_all_orders(args, rowwise_grid(s.rows), out);
    check_guard(out, n);
    check_close(out, want, 0.0, 1e-5);
  }
}

TEST_CASE("axrt_rmsnorm_f32") {
  for (const Rows s : kRowShapes) {
    INFO("rows " << s.rows << " cols " << s.cols);
    const uint64_t n = s.rows * s.cols;
    const auto x = random_floats(n, -4.0f, 4.0f, 51 + static_cast<uint32_t>(n));
    const auto gamma = random_floats(s.cols, -1.5f, 1.5f, 52);
    const float epsilon = 1e-6f;
    std::vector<double> want(n);
    for (uint64_t r = 0; r < s.rows; ++r) {
      const float* row = x.data() + r * s.cols;
      double sum_squares = 0;
      for (uint64_t c = 0; c < s.cols; ++c) sum_squares += double(row[c]) * row[c];
      const double inv = 1.0 / std::sqrt(sum_squares / double(s.cols) + double(epsilon));
      for (uint64_t c = 0; c < s.cols; ++c) want[r * s.cols + c] = row[c] * inv * gamma[c];
    }
    std::vector<float> out = output_buffer(n);
    ArgBlock args(find_kernel("axrt_rmsnorm_f32"));
    args.buffer("x", x.data())
        .buffer("gamma", gamma.data())
        .buffer("out", out.data())
        .u64("rows", s.rows)
        .u64("cols", s.cols)
        .f32("epsilon", epsilon);
    run_all_orders(args, rowwise_grid(s.rows), out);
    check_guard(out, n);
    check_close(out, want, 0.0, 1e-5);
  }
}

// ===========================================================================
// Matmuls
// ===========================================================================

namespace {

// Shapes for every path of the f32 and n-major kernels: the small-row paths
// (M = 1 .. 16: one register pass, several passes, tails of N and K that
// are not multiples of 16 or 64), the many-row tile engine, and empty K.
const Shape kMatmulShapes[] = {
    {1, 1, 1},     {1, 64, 64},    {1, 300, 700},  {1, 1024, 96},  {2, 72, 257},
    {3, 5, 7},     {3, 130, 33},   {4, 64, 512},   {5, 100, 300},  {6, 17, 1000},
    {7, 64, 129},  {8, 200, 64},   {9, 192, 600},  {11, 80, 31},   {12, 130, 257},
    {13, 64, 1024}, {16, 200, 333}, {16, 1024, 64}, {17, 64, 64},  {33, 70, 90},
    {64, 64, 64},  {65, 130, 257}, {100, 72, 300}, {128, 192, 512}, {2, 3, 0},
    {20, 7, 0}};

template <class Body>
void for_each_matmul_case(Body&& body) {
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    for (const Shape& s : kMatmulShapes) {
      if (!runs_in_this_build(s)) continue;
      INFO(matmul_isa_name() << " " << shape_name(s));
      body(s);
    }
  }
}

void check_f32_matmul(const Shape& s) {
  MatmulCase c(s, 61 + static_cast<uint32_t>(s.M * 7 + s.N * 3 + s.K));
  const auto w = random_weights(s.K, s.N, 62 + static_cast<uint32_t>(s.K));
  const std::vector<float> w_storage = w.empty() ? std::vector<float>(1) : w;
  ArgBlock args(find_kernel("axrt_matmul_f32"));
  c.common(args).buffer("w", w_storage.data());
  c.run(args);
  check_matmul(c.y, c.x, std::vector<double>(w.begin(), w.end()), c.bias, s.M, s.N, s.K);
}

// The same weights as check_f32_matmul, stored [N, K].
void check_f32_nk_matmul(const Shape& s) {
  MatmulCase c(s, 141 + static_cast<uint32_t>(s.M * 5 + s.N + s.K));
  const auto w = random_weights(s.K, s.N, 142 + static_cast<uint32_t>(s.K));
  std::vector<float> w_nk(std::max<uint64_t>(s.N * s.K, 1));
  for (uint64_t k = 0; k < s.K; ++k) {
    for (uint64_t n = 0; n < s.N; ++n) w_nk[n * s.K + k] = w[k * s.N + n];
  }
  ArgBlock args(find_kernel("axrt_matmul_f32_nk"));
  c.common(args).buffer("w", w_nk.data());
  c.run(args);
  check_matmul(c.y, c.x, std::vector<double>(w.begin(), w.end()), c.bias, s.M, s.N, s.K);
}

void check_bf16_matmul(const Shape& s) {
  MatmulCase c(s, 131 + static_cast<uint32_t>(s.M + s.N + s.K));
  const Bf16Weights q = round_bf16(random_weights(s.K, s.N, 132), s.N, s.K);
  ArgBlock args(find_kernel("axrt_matmul_bf16_f32"));
  c.common(args).buffer("w", q.w.data());
  c.run(args);
  check_matmul(c.y, c.x, q.dequantized, c.bias, s.M, s.N, s.K);
}

void check_int8_matmul(const Shape& s) {
  MatmulCase c(s, 71 + static_cast<uint32_t>(s.M + s.N + s.K));
  const Int8Weights q = quantize_int8(random_weights(s.K, s.N, 72), s.N, s.K);
  const std::vector<int8_t> w = q.w.empty() ? std::vector<int8_t>(1) : q.w;
  ArgBlock args(find_kernel("axrt_matmul_int8_pc_f32"));
  c.common(args).buffer("w", w.data()).buffer("scale", q.scale.data());
  c.run(args);
  check_matmul(c.y, c.x, q.dequantized, c.bias, s.M, s.N, s.K);
}

struct Int4Case {
  Shape shape;
  uint64_t group;
};

// M = 1 .. 4 decode each weight row in registers, more through a panel; N a multiple of 8 but not of 64, groups of
// 8 to 128 (the converter's 32, 64 and 128 among them), K spanning one or several groups and kb blocks.
const Int4Case kInt4Cases[] = {
    {{1, 8, 128}, 128},    {{1, 4096 / 8, 256}, 128}, {{1, 200, 640}, 128},
    {{2, 72, 256}, 128},   {{3, 200, 640}, 128},      {{4, 64, 128}, 128},
    {{4, 136, 96}, 32},    {{5, 72, 256}, 128},       {{7, 40, 512}, 128},
    {{9, 24, 96}, 32},     {{12, 8, 64}, 8},          {{13, 200, 384}, 128},
    {{16, 136, 1024}, 128}, {{17, 64, 128}, 128},     {{64, 64, 128}, 128},
    {{66, 80, 64}, 8},     {{70, 136, 384}, 128},     {{2, 16, 0}, 128},
    {{1, 200, 576}, 64},   {{3, 72, 192}, 64},        {{21, 136, 576}, 64},
    {{2, 200, 544}, 32},   {{21, 72, 288}, 32}};

void check_int4_case(const char* name, Int4Kind kind, const Int4Case& t) {
  const Shape& s = t.shape;
  MatmulCase c(s, 81 + static_cast<uint32_t>(s.M + s.N + s.K));
  const Int4Weights q = quantize_int4(random_weights(s.K, s.N, 82), s.N, s.K, t.group, kind);
  const std::vector<uint32_t> qweight = q.qweight.empty() ? std::vector<uint32_t>(1) : q.qweight;
  const std::vector<uint16_t> scales = q.scales.empty() ? std::vector<uint16_t>(1) : q.scales;
  const std::vector<uint32_t> qzeros = q.qzeros.empty() ? std::vector<uint32_t>(1) : q.qzeros;
  ArgBlock args(find_kernel(name));
  c.common(args)
      .buffer("qweight", qweight.data())
      .buffer("scales", scales.data())
      .buffer("qzeros", qzeros.data())
      .u64("group_size", t.group);
  c.run(args);
  check_matmul(c.y, c.x, q.dequantized, c.bias, s.M, s.N, s.K);
}

// `qweight` ([K/8, N] words) as the CPU device's loader packs it for the
// pre-packed form of kernel `entry` (kernels/cpu/library.h); empty when the
// packer does not take the shape.
std::vector<uint32_t> prepacked_qweight(const char* entry, const std::vector<uint32_t>& qweight,
                                        uint64_t K, uint64_t N) {
  for (const axrt::kernels::CpuPrepack& prepack : axrt::kernels::cpu_prepacks()) {
    if (std::string(prepack.entry) != entry) continue;
    const uint64_t shape[2] = {K, N};
    const uint64_t bytes = prepack.packer->packed_size(shape, 2, K / 8 * N * 4);
    std::vector<uint32_t> packed(bytes / 4);
    if (bytes != 0) prepack.packer->pack(qweight.data(), shape, 2, packed.data());
    return packed;
  }
  FAIL("the CPU library has no pre-packed form of " << entry);
  return {};
}

void check_int4_kernel(const char* name, Int4Kind kind) {
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    for (const Int4Case& t : kInt4Cases) {
      if (!runs_in_this_build(t.shape)) continue;
      INFO(name << " " << matmul_isa_name() << " " << shape_name(t.shape) << " group "
                << t.group);
      check_int4_case(name, kind, t);
    }
  }
}

}  // namespace

TEST_CASE("axrt_matmul_f32") { for_each_matmul_case(check_f32_matmul); }

TEST_CASE("axrt_matmul_bf16_f32") { for_each_matmul_case(check_bf16_matmul); }

TEST_CASE("axrt_matmul_f32_nk") { for_each_matmul_case(check_f32_nk_matmul); }

TEST_CASE("axrt_matmul_int8_pc_f32") { for_each_matmul_case(check_int8_matmul); }

TEST_CASE("axrt_matmul_awq_int4_f32") {
  check_int4_kernel("axrt_matmul_awq_int4_f32", Int4Kind::kAwq);
}
TEST_CASE("axrt_matmul_gptq_int4_f32") {
  check_int4_kernel("axrt_matmul_gptq_int4_f32", Int4Kind::kGptqV2);
}
TEST_CASE("axrt_matmul_gptq_v1_int4_f32") {
  check_int4_kernel("axrt_matmul_gptq_v1_int4_f32", Int4Kind::kGptqV1);
}

TEST_CASE("axrt_matmul_gptq_int4_f32's pre-packed form gives its bits") {
  // The same code reading the same words from the tile-by-tile copy.
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    for (const Int4Case& t : kInt4Cases) {
      const Shape& s = t.shape;
      if (!runs_in_this_build(s) || s.K == 0 || s.K % 8 != 0) continue;
      INFO(matmul_isa_name() << " " << shape_name(s) << " group " << t.group);
      const Int4Weights q =
          quantize_int4(random_weights(s.K, s.N, 82), s.N, s.K, t.group, Int4Kind::kGptqV2);
      const std::vector<uint32_t> packed =
          prepacked_qweight("axrt_matmul_gptq_int4_f32", q.qweight, s.K, s.N);
      REQUIRE(!packed.empty());
      std::vector<float> y[2];
      for (const bool tiles : {false, true}) {
        MatmulCase c(s, 81 + static_cast<uint32_t>(s.M + s.N + s.K));
        ArgBlock args(find_kernel(tiles ? "axrt_matmul_gptq_int4_f32@gptq_v2.int4.g128.tile64"
                                        : "axrt_matmul_gptq_int4_f32"));
        c.common(args)
            .buffer("qweight", tiles ? packed.data() : q.qweight.data())
            .buffer("scales", q.scales.data())
            .buffer("qzeros", q.qzeros.data())
            .u64("group_size", t.group);
        c.run(args);
        y[tiles] = c.y;
      }
      CHECK(std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size()) == 0);
    }
  }
}

TEST_CASE("the bf16 matmul widens every bf16 value exactly") {
  // Row m of x is e_(m mod K), so y[m][n] = bf16(w[n][m mod K]) exactly:
  // normals, subnormals, zeros of both signs, the largest finite values.
  const uint16_t patterns[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x3f80,
                               0xbf80, 0x7f7f, 0xff7f, 0x4049, 0x3c23, 0x1234};
  const uint64_t K = std::size(patterns), N = 3;
  std::vector<uint16_t> w(N * K);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) w[n * K + k] = patterns[(k + n) % K];
  }
  const std::vector<float> bias(N, 0.0f);
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    for (uint64_t M : {K, 3 * K}) {  // tiles of 12 and of 36 rows
      INFO(matmul_isa_name() << " M = " << M);
      std::vector<float> x(M * K, 0.0f);
      for (uint64_t m = 0; m < M; ++m) x[m * K + m % K] = 1.0f;
      std::vector<float> y = output_buffer(M * N);
      ArgBlock args(find_kernel("axrt_matmul_bf16_f32"));
      args.buffer("x", x.data())
          .buffer("w", w.data())
          .buffer("bias", bias.data())
          .buffer("y", y.data())
          .u64("M", M)
          .u64("N", N)
          .u64("K", K);
      REQUIRE(dispatch(args, matmul_grid(M, N)).code == AXRT_KERNEL_OK);
      for (uint64_t m = 0; m < M; ++m) {
        for (uint64_t n = 0; n < N; ++n) {
          INFO("y[" << m << "][" << n << "]");
          CHECK(static_cast<double>(y[m * N + n]) == bf16_value(w[n * K + m % K]));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Batch invariance of the [N, K] matmuls (docs/kernels.md): each row of y
// has the same bits whatever M and whatever the other rows, within a build
// ---------------------------------------------------------------------------

namespace {

// y (M rows) of an [N, K] matmul whose weight arguments `weights` sets,
// every workgroup of the grid run on several threads.
std::vector<float> run_nk_matmul(const char* kernel,
                                 const std::function<void(ArgBlock&)>& weights,
                                 const std::vector<float>& x, const std::vector<float>& bias,
                                 uint64_t M, uint64_t N, uint64_t K) {
  std::vector<float> y = output_buffer(M * N);
  ArgBlock args(find_kernel(kernel));
  args.buffer("x", x.data())
      .buffer("bias", bias.data())
      .buffer("y", y.data())
      .u64("M", M)
      .u64("N", N)
      .u64("K", K);
  weights(args);
  const Outcome outcome = dispatch(args, matmul_grid(M, N), Order::kThreaded);
  INFO("message: " << outcome.message);
  REQUIRE(outcome.code == AXRT_KERNEL_OK);
  check_guard(y, M * N);
  return y;
}

// One x row alone (M = 1), then copies of it among random rows at several
// positions (different tiles, row groups within a tile, last partial
// tiles) for each M of `Ms`: every copy's row of y must have the bits of
// the M = 1 row.
void check_batch_invariance(const char* kernel, const std::function<void(ArgBlock&)>& weights,
                            uint64_t N, uint64_t K, std::initializer_list<uint64_t> Ms) {
  const std::vector<float> bias = random_floats(N, -1.0f, 1.0f, 301);
  const std::vector<float> row = random_floats(K, -1.0f, 1.0f, 302 + static_cast<uint32_t>(K));
  const std::vector<float> alone = run_nk_matmul(kernel, weights, row, bias, 1, N, K);
  for (uint64_t M : Ms) {
    if (!runs_in_this_build(Shape{M, N, K})) continue;
    std::vector<float> x = random_floats(M * K, -1.0f, 1.0f, 303 + static_cast<uint32_t>(M));
    std::set<uint64_t> positions;
    for (uint64_t p : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4},
                       uint64_t{5}, M / 2, M * 5 / 7, uint64_t{64}, uint64_t{65},
                       uint64_t{130}, M - 1}) {
      if (p < M) positions.insert(p);
    }
    for (uint64_t p : positions) std::copy(row.begin(), row.end(), x.begin() + p * K);
    const std::vector<float> y = run_nk_matmul(kernel, weights, x, bias, M, N, K);
    for (uint64_t p : positions) {
      INFO(kernel << " " << matmul_isa_name() << " N = " << N << " K = " << K << " M = " << M
                  << ": row " << p);
      REQUIRE(std::memcmp(y.data() + p * N, alone.data(), sizeof(float) * N) == 0);
    }
  }
}

// Every build; N not a multiple of 64; K with a tail past its last 16 (200,
// 1100, `long_k`) or without (768). `long_k` makes every build's tiles of
// more than 16 rows take K in blocks (a block of 8 or 4 weight rows over
// all of K above 32 KiB), with fewer M.
template <class Body>
void for_each_invariance_case(uint64_t long_k, Body&& body) {
  const std::initializer_list<uint64_t> all = {2, 5, 16, 17, 63, 64, 65, 200, 512};
  const std::initializer_list<uint64_t> some = {5, 17, 64, 65};
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    body(100, 200, all);
    body(72, 768, all);
    body(100, 1100, all);
    body(72, long_k, some);
  }
}

}  // namespace

TEST_CASE("axrt_matmul_f32_nk is batch-invariant") {
  for_each_invariance_case(2100, [](uint64_t N, uint64_t K, auto Ms) {
    const std::vector<float> w = random_floats(N * K, -1.0f, 1.0f, 311);
    check_batch_invariance(
        "axrt_matmul_f32_nk", [&](ArgBlock& args) { args.buffer("w", w.data()); }, N, K, Ms);
  });
}

TEST_CASE("axrt_matmul_bf16_f32 is batch-invariant") {
  for_each_invariance_case(4200, [](uint64_t N, uint64_t K, auto Ms) {
    const Bf16Weights q = round_bf16(random_weights(K, N, 312), N, K);
    check_batch_invariance(
        "axrt_matmul_bf16_f32", [&](ArgBlock& args) { args.buffer("w", q.w.data()); }, N, K, Ms);
  });
}

TEST_CASE("axrt_matmul_int8_pc_f32 is batch-invariant") {
  for_each_invariance_case(8300, [](uint64_t N, uint64_t K, auto Ms) {
    const Int8Weights q = quantize_int8(random_weights(K, N, 313), N, K);
    check_batch_invariance(
        "axrt_matmul_int8_pc_f32",
        [&](ArgBlock& args) { args.buffer("w", q.w.data()).buffer("scale", q.scale.data()); }, N,
        K, Ms);
  });
}

// The int4 kernels: every tile takes the small-row engine (one running sum
// per output over K), N a multiple of 8, K of the group.
TEST_CASE("the int4 kernels with f32 activations are batch-invariant") {
  const std::pair<const char*, Int4Kind> kernels[] = {
      {"axrt_matmul_awq_int4_f32", Int4Kind::kAwq},
      {"axrt_matmul_gptq_int4_f32", Int4Kind::kGptqV2},
      {"axrt_matmul_gptq_v1_int4_f32", Int4Kind::kGptqV1}};
  for (const auto& [name, kind] : kernels) {
    for (MatmulIsa isa : matmul_isas()) {
      MatmulIsaScope scope(isa);
      for (const auto& [N, K, group] : {std::tuple<uint64_t, uint64_t, uint64_t>{72, 256, 128},
                                        {136, 768, 128},
                                        {72, 576, 64},
                                        {40, 96, 32}}) {
        const Int4Weights q = quantize_int4(random_weights(K, N, 314), N, K, group, kind);
        const uint64_t group_size = group;  // clang before 16 captures no structured binding
        check_batch_invariance(
            name,
            [&](ArgBlock& args) {
              args.buffer("qweight", q.qweight.data())
                  .buffer("scales", q.scales.data())
                  .buffer("qzeros", q.qzeros.data())
                  .u64("group_size", group_size);
            },
            N, K, {2, 5, 16, 17, 63, 64, 65, 200});
      }
    }
  }
}

TEST_CASE("GPTQ v1 stores z - 1 where v2 stores z") {
  // Symmetric zero points (z = 8) are the words 0x77777777 in v1 and
  // 0x88888888 in v2 (docs/format.md 9.3); with the same codes and scales the
  // two kernels must agree exactly.
  const Shape s{2, 16, 128};
  const std::vector<uint32_t> qweight(s.K / 8 * s.N, 0x3c5a96f0u);
  const std::vector<uint16_t> scales(s.N, to_half(0.125));
  const std::vector<float> x = random_floats(s.M * s.K, -1.0f, 1.0f, 91);
  const std::vector<float> bias(s.N, 0.0f);
  std::vector<std::vector<float>> results;
  for (const auto& [name, zero_word] : {std::pair{"axrt_matmul_gptq_int4_f32", 0x88888888u},
                                        std::pair{"axrt_matmul_gptq_v1_int4_f32", 0x77777777u}}) {
    const std::vector<uint32_t> qzeros(s.N / 8, zero_word);
    std::vector<float> y = output_buffer(s.M * s.N);
    ArgBlock args(find_kernel(name));
    args.buffer("x", x.data())
        .buffer("qweight", qweight.data())
        .buffer("scales", scales.data())
        .buffer("qzeros", qzeros.data())
        .buffer("bias", bias.data())
        .buffer("y", y.data())
        .u64("M", s.M)
        .u64("N", s.N)
        .u64("K", s.K)
        .u64("group_size", 128);
    REQUIRE(dispatch(args, matmul_grid(s.M, s.N)).code == AXRT_KERNEL_OK);
    results.push_back(y);
  }
  CHECK(results[0] == results[1]);
}

// ---------------------------------------------------------------------------
// axrt_matmul_gptq_int4_q8_f32: GPTQ weights times x quantized to int8 per
// group, against the contract of docs/kernels.md
// ---------------------------------------------------------------------------

namespace {

// x quantized as the kernel's contract says, in f32 operations: per row and
// group a = max |x|, xq = rint(x * (127 / a)) (half to even), s_x = a / 127;
// returned as xq s_x in double, [M, K].
std::vector<double> quantize_x_q8(const std::vector<float>& x, uint64_t M, uint64_t K,
                                  uint64_t group) {
  std::vector<double> dequantized(M * K, 0.0);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t g0 = 0; g0 < K; g0 += group) {
      const float* v = x.data() + m * K + g0;
      float a = 0.0f;
      for (uint64_t k = 0; k < group; ++k) a = std::max(a, std::fabs(v[k]));
      if (a == 0.0f) continue;
      const float inv = 127.0f / a;
      const float s_x = a / 127.0f;
      for (uint64_t k = 0; k < group; ++k) {
        const float product = v[k] * inv;
        const double code = std::nearbyint(product);
        REQUIRE(std::fabs(code) <= 127.0);
        dequantized[m * K + g0 + k] = code * static_cast<double>(s_x);
      }
    }
  }
  return dequantized;
}

// y against xq . W + bias in double, xq from quantize_x_q8, with the
// contract's bound `relative` (|xq| . |W| + |bias|) + `absolute` (1e-5 and
// 1e-6 for the int4 kernel); and against the unquantized x . W + bias with
// that bound plus half a step of each group, sum over g of (a_g / 254)
// sum_{k in g} |W[k][n]| (docs/kernels.md).
void check_q8_matmul(const std::vector<float>& y, const std::vector<float>& x, uint64_t group,
                     const std::vector<double>& w, const std::vector<float>& bias, uint64_t M,
                     uint64_t N, uint64_t K, double relative = 1e-5, double absolute = 1e-6) {
  check_guard(y, M * N);
  const std::vector<double> xq = quantize_x_q8(x, M, K, group);
  size_t failures = 0;
  std::vector<double> ref(N), magnitude(N), exact(N), half_steps(N), column(N);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t n = 0; n < N; ++n) {
      ref[n] = exact[n] = bias[n];
      magnitude[n] = std::fabs(static_cast<double>(bias[n]));
      half_steps[n] = 0.0;
    }
    for (uint64_t g0 = 0; g0 < K; g0 += group) {
      double a = 0.0;
      std::fill(column.begin(), column.end(), 0.0);
      for (uint64_t k = g0; k < g0 + group; ++k) {
        const double xv = xq[m * K + k];
        const double xe = x[m * K + k];
        a = std::max(a, std::fabs(xe));
        const double* wrow = w.data() + k * N;
        for (uint64_t n = 0; n < N; ++n) {
          ref[n] += xv * wrow[n];
          magnitude[n] += std::fabs(xv * wrow[n]);
          exact[n] += xe * wrow[n];
          column[n] += std::fabs(wrow[n]);
        }
      }
      for (uint64_t n = 0; n < N; ++n) half_steps[n] += a / 254 * column[n];
    }
    for (uint64_t n = 0; n < N; ++n) {
      const double bound = relative * magnitude[n] + absolute;
      const double got = y[m * N + n];
      if (!(std::fabs(got - ref[n]) <= bound) && failures++ < 5) {
        INFO("y[" << m << "][" << n << "] = " << got << ", want " << ref[n] << ", bound " << bound);
        CHECK(std::fabs(got - ref[n]) <= bound);
      }
      if (!(std::fabs(got - exact[n]) <= half_steps[n] + bound) && failures++ < 5) {
        INFO("y[" << m << "][" << n << "] = " << got << ", x . W + bias " << exact[n] << ", bound "
                  << half_steps[n] + bound);
        CHECK(std::fabs(got - exact[n]) <= half_steps[n] + bound);
      }
    }
  }
  REQUIRE(failures == 0);
}

// The int4 cases plus groups of 24 and 40 (the AVX-512 build quantizes x 16
// values at a time) and one group spanning K.
const Int4Case kQ8Cases[] = {
    {{1, 8, 128}, 128},    {{1, 512, 256}, 128},  {{1, 200, 640}, 128},   {{2, 72, 256}, 128},
    {{3, 200, 640}, 128},  {{4, 64, 128}, 128},   {{4, 136, 96}, 32},     {{1, 40, 96}, 24},
    {{2, 24, 120}, 40},    {{5, 72, 256}, 128},   {{7, 40, 512}, 128},    {{9, 24, 96}, 32},
    {{12, 8, 64}, 8},      {{13, 200, 384}, 128}, {{16, 136, 1024}, 128}, {{16, 64, 72}, 24},
    {{17, 64, 128}, 128},  {{64, 64, 128}, 128},  {{66, 80, 64}, 8},      {{70, 136, 384}, 128},
    {{3, 72, 1024}, 1024}, {{2, 16, 0}, 128},    {{1, 200, 576}, 64},    {{21, 136, 576}, 64},
    {{2, 200, 544}, 32}};

// The packed GPTQ v2 weights of a case.
struct Q8Weights {
  Int4Weights q;
  std::vector<uint32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
  explicit Q8Weights(const Int4Case& t)
      : q(quantize_int4(random_weights(t.shape.K, t.shape.N, 152), t.shape.N, t.shape.K, t.group,
                        Int4Kind::kGptqV2)),
        qweight(q.qweight.empty() ? std::vector<uint32_t>(1) : q.qweight),
        qzeros(q.qzeros.empty() ? std::vector<uint32_t>(1) : q.qzeros),
        scales(q.scales.empty() ? std::vector<uint16_t>(1) : q.scales) {}
};

// The builds of axrt_matmul_gptq_int4_q8_f32: those of matmul_isas() and,
// where the AVX-512 build uses VNNI, that build without it.
struct Q8Build {
  MatmulIsa isa;
  bool without_vnni;
};

std::vector<Q8Build> q8_builds() {
  std::vector<Q8Build> builds;
  for (MatmulIsa isa : matmul_isas()) {
    builds.push_back({isa, false});
#if defined(__x86_64__)
    if (isa == MatmulIsa::kAvx512 && __builtin_cpu_supports("avx512vnni")) {
      builds.push_back({isa, true});
    }
#endif
  }
  return builds;
}

struct Q8BuildScope {
  MatmulIsaScope isa;
  explicit Q8BuildScope(const Q8Build& build) : isa(build.isa) {
    axrt::kernels::cpu::q8_matmul_without_vnni = build.without_vnni;
  }
  ~Q8BuildScope() { axrt::kernels::cpu::q8_matmul_without_vnni = false; }
};

const char* q8_build_name(const Q8Build& build) {
  return build.without_vnni ? "avx512 without VNNI" : matmul_isa_name();
}

// The weights' qweight as the CPU device's loader packs it for the kernel's
// pre-packed form (gptq_v2.int4.g128.tile64, kernels/cpu/library.h); empty
// when the packer does not take the shape.
std::vector<uint32_t> tile64_qweight(const Q8Weights& w, const Shape& s) {
  return prepacked_qweight("axrt_matmul_gptq_int4_q8_f32", w.qweight, s.K, s.N);
}

// Runs the kernel on `c` in every order under the current build and checks
// it against the contract; leaves y in c.y. With `packed`, runs the
// pre-packed form on those words instead.
void run_q8_case(MatmulCase& c, const Q8Weights& w, uint64_t group,
                 const std::vector<uint32_t>* packed = nullptr) {
  const Shape& s = c.shape;
  c.y = output_buffer(s.M * s.N);
  ArgBlock args(find_kernel(packed ? "axrt_matmul_gptq_int4_q8_f32@gptq_v2.int4.g128.tile64"
                                   : "axrt_matmul_gptq_int4_q8_f32"));
  c.common(args)
      .buffer("qweight", packed ? packed->data() : w.qweight.data())
      .buffer("scales", w.scales.data())
      .buffer("qzeros", w.qzeros.data())
      .u64("group_size", group);
  c.run(args);
  check_q8_matmul(c.y, c.x, group, w.q.dequantized, c.bias, s.M, s.N, s.K);
}

// An int8-activation kernel on x (5 rows, K >= 201) with a NaN in row 1,
// -Inf in row 3 and row 4 scaled below 127 / FLT_MAX, in every build, the
// weights bound by `bind`: rows 1 and 3 come out NaN, row 4 the bias.
template <class Bind>
void check_q8_nonfinite_rows(const char* kernel, const Shape& s, uint32_t seed, Bind bind) {
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    INFO(kernel << " " << q8_build_name(build));
    MatmulCase c(s, seed);
    c.x[1 * s.K + 70] = std::numeric_limits<float>::quiet_NaN();
    c.x[3 * s.K + 200] = -std::numeric_limits<float>::infinity();
    for (uint64_t k = 0; k < s.K; ++k) c.x[4 * s.K + k] *= 1e-37f;
    ArgBlock args(find_kernel(kernel));
    c.common(args);
    bind(args);
    REQUIRE(dispatch(args, matmul_grid(s.M, s.N), Order::kShuffled).code == AXRT_KERNEL_OK);
    for (uint64_t m = 0; m < s.M; ++m) {
      for (uint64_t n = 0; n < s.N; ++n) {
        INFO("y[" << m << "][" << n << "] = " << c.y[m * s.N + n]);
        CHECK(std::isnan(c.y[m * s.N + n]) == (m == 1 || m == 3));
        if (m == 4) CHECK(c.y[m * s.N + n] == c.bias[n]);
      }
    }
  }
}

}  // namespace

TEST_CASE("axrt_matmul_gptq_int4_q8_f32") {
  for (const Int4Case& t : kQ8Cases) {
    const Shape& s = t.shape;
    if (!runs_in_this_build(s)) continue;
    MatmulCase c(s, 151 + static_cast<uint32_t>(s.M + s.N + s.K));
    // Rows of different magnitudes, and in the last row a group of zeros
    // (a = 0: codes 0, s_x = 0).
    for (uint64_t m = 0; m < s.M; ++m) {
      for (uint64_t k = 0; k < s.K; ++k) c.x[m * s.K + k] *= static_cast<float>(1 << (m % 5)) / 4;
    }
    if (s.K >= 2 * t.group) {
      std::fill_n(c.x.begin() + static_cast<ptrdiff_t>((s.M - 1) * s.K + t.group), t.group, 0.0f);
    }
    const Q8Weights w(t);
    const std::vector<uint32_t> packed = tile64_qweight(w, s);
    CHECK(packed.empty() == (s.K == 0));
    // Every build gives the same bits: the integer sums are exact and the f32
    // steps the same operations in the same order. The pre-packed form reads
    // the same words from other places, so it gives them too.
    std::vector<float> first;
    for (const Q8Build& build : q8_builds()) {
      Q8BuildScope scope(build);
      for (const bool tiles : {false, true}) {
        if (tiles && packed.empty()) continue;
        INFO(q8_build_name(build) << " " << shape_name(s) << " group " << t.group
                                  << (tiles ? " pre-packed" : ""));
        run_q8_case(c, w, t.group, tiles ? &packed : nullptr);
        if (first.empty()) {
          first = c.y;
        } else {
          CHECK(std::memcmp(first.data(), c.y.data(), sizeof(float) * first.size()) == 0);
        }
      }
    }
  }
}

TEST_CASE("The tile-by-tile packer takes GPTQ's [K, N] words and refuses other shapes") {
  const axrt::kernels::CpuPacker* packer = nullptr;
  for (const axrt::kernels::CpuPrepack& prepack : axrt::kernels::cpu_prepacks()) {
    packer = prepack.packer;
  }
  REQUIRE(packer != nullptr);
  const uint64_t shape[2] = {16, 72};  // two word rows, a tile and 8 columns
  CHECK(packer->packed_size(shape, 2, 2 * 72 * 4) == 2 * 2 * 64 * 4);
  CHECK(packer->packed_size(shape, 2, 2 * 72 * 4 - 4) == 0);  // bytes not the shape's
  CHECK(packer->packed_size(shape, 1, 2 * 72 * 4) == 0);      // rank
  const uint64_t odd_k[2] = {12, 72};
  CHECK(packer->packed_size(odd_k, 2, 2 * 72 * 4) == 0);
  std::vector<uint32_t> words(2 * 72);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i + 1);
  std::vector<uint32_t> packed(2 * 2 * 64, 0xdeadbeef);
  packer->pack(words.data(), shape, 2, packed.data());
  // Tile 0: word rows 0 and 1, columns 0..63; tile 1: columns 64..71, then 0.
  CHECK(packed[0] == words[0]);
  CHECK(packed[63] == words[63]);
  CHECK(packed[64] == words[72]);
  CHECK(packed[128] == words[64]);
  CHECK(packed[135] == words[71]);
  CHECK(packed[136] == 0);
  CHECK(packed[192] == words[72 + 64]);
  CHECK(packed[255] == 0);
}

TEST_CASE("axrt_matmul_gptq_int4_q8_f32 rounds x half to even") {
  // a = 127 / 8 makes 127 / a = 8 and a = 127 makes it 1, exactly, so
  // x * (127 / a) is exact and every value below ends in .5: a tie.
  const Int4Case t{{3, 72, 256}, 32};
  const Shape& s = t.shape;
  MatmulCase c(s, 161);
  float* row0 = c.x.data();
  row0[0] = 127.0f / 8;
  for (uint64_t k = 1; k < t.group; ++k) {
    row0[k] = static_cast<float>(2 * (k % 100) + 1) / 16 * (k % 3 == 0 ? -1.0f : 1.0f);
  }
  float* row2 = c.x.data() + 2 * s.K + 3 * t.group;
  row2[5] = -127.0f;
  for (uint64_t k = 0; k < t.group; ++k) {
    if (k != 5) row2[k] = static_cast<float>(k * 7 % 126) + (k % 2 == 0 ? 0.5f : -0.5f);
  }
  // The reference's codes are the even neighbours.
  const std::vector<double> xq = quantize_x_q8(c.x, s.M, s.K, t.group);
  for (uint64_t k = 1; k < t.group; ++k) {
    const double code = xq[k] * 8;  // s_x = 1/8
    CHECK(std::fmod(code, 2.0) == 0.0);
    CHECK(std::fabs(code - static_cast<double>(row0[k]) * 8) == 0.5);
  }
  const Q8Weights w(t);
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    INFO(q8_build_name(build));
    run_q8_case(c, w, t.group);
  }
}

TEST_CASE("axrt_matmul_gptq_int4_q8_f32 reuses a thread's quantized x only for the same x") {
  // A thread keeps the codes of its last tile's x rows for its next tile of
  // the same rows. Each dispatch below runs on one thread, tile after tile,
  // on the same buffers: a changed value of x, another group size or
  // another row count must be quantized afresh.
  const Shape s{3, 136, 256};
  MatmulCase c(s, 181);
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    INFO(q8_build_name(build));
    for (uint64_t group : {64, 64, 32, 32, 256}) {
      const Int4Case t{s, group};
      const Q8Weights w(t);
      run_q8_case(c, w, group);
      c.x[2 * s.K + group / 2] += 0.25f;  // the same buffer, one value changed
      run_q8_case(c, w, group);
      // Fewer rows: the first rows of the same buffer.
      MatmulCase fewer(Shape{2, s.N, s.K}, 182);
      fewer.x.assign(c.x.begin(), c.x.begin() + static_cast<ptrdiff_t>(2 * s.K));
      run_q8_case(fewer, w, group);
    }
  }
}

TEST_CASE("axrt_matmul_gptq_int4_q8_f32: NaN or Inf in x make the row NaN, tiny groups count 0") {
  // Both are outside the contract; the CPU kernel defines them. Groups of
  // values below 127 / FLT_MAX, where 127 / a overflows, count as zeros.
  const Int4Case t{{5, 72, 256}, 64};
  const Q8Weights w(t);
  check_q8_nonfinite_rows("axrt_matmul_gptq_int4_q8_f32", t.shape, 171, [&](ArgBlock& args) {
    args.buffer("qweight", w.qweight.data())
        .buffer("scales", w.scales.data())
        .buffer("qzeros", w.qzeros.data())
        .u64("group_size", t.group);
  });
}

TEST_CASE("axrt_matmul_gptq_int4_q8_f32 refuses scalars that break its rules, writing nothing") {
  std::vector<float> x(4096, 1.0f), bias(4096, 0.0f);
  std::vector<uint32_t> words(1 << 16, 0);
  std::vector<uint16_t> scales(1 << 16, 0x3c00);
  struct Bad {
    uint64_t N, K, group;
    const char* fragment;  // what the message must say
  };
  const Bad cases[] = {
      {20, 128, 128, "N = 20 is not a multiple of 8"},
      {16, 128, 0, "group_size is 0"},
      {16, 48, 12, "group_size = 12 is not a multiple of 8"},
      {16, 48, 4, "group_size = 4 is not a multiple of 8"},
      {16, 200, 64, "K = 200 is not a multiple of group_size = 64"},
      {16, 0, 0, "group_size is 0"},
  };
  for (const Bad& bad : cases) {
    INFO("N " << bad.N << " K " << bad.K << " group " << bad.group);
    std::vector<float> y(4 * bad.N, kSentinel);
    ArgBlock args(find_kernel("axrt_matmul_gptq_int4_q8_f32"));
    args.buffer("x", x.data())
        .buffer("qweight", words.data())
        .buffer("scales", scales.data())
        .buffer("qzeros", words.data())
        .buffer("bias", bias.data())
        .buffer("y", y.data())
        .u64("M", 4)
        .u64("N", bad.N)
        .u64("K", bad.K)
        .u64("group_size", bad.group);
    for (Order order : {Order::kSequential, Order::kShuffled, Order::kThreaded}) {
      const Outcome outcome = dispatch(args, matmul_grid(4, bad.N), order);
      CHECK(outcome.code == kInvalidArgument);
      CHECK_THAT(outcome.message, Catch::Contains(bad.fragment));
      CHECK_THAT(outcome.message, Catch::Contains("axrt_matmul_gptq_int4_q8_f32"));
    }
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == kSentinel; }));
    CHECK(dispatch(args, matmul_grid(4, bad.N), Order::kSequential, 0).code == kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------
// axrt_matmul_int8_pc_q8_f32: int8 weights per output channel times x
// quantized to int8 per group of G = 128, 64 or 32 inputs (the largest that
// divides K), against the contract of docs/kernels.md
// ---------------------------------------------------------------------------

namespace {

constexpr const char* kInt8Q8 = "axrt_matmul_int8_pc_q8_f32";

uint64_t int8_q8_group(uint64_t K) { return K % 128 == 0 ? 128 : K % 64 == 0 ? 64 : 32; }

// The contract's bound for the f32 steps: (ceil(K / G) + 3) 2^-24 of
// |xq s_x| . |W| + |bias| (docs/kernels.md).
double int8_q8_relative_bound(uint64_t K) {
  return static_cast<double>(K / int8_q8_group(K) + 3) * std::ldexp(1.0, -24);
}

// int8 weights with some codes of -128 (the converter writes none; the
// layout allows them, and AVX2's sign trick must take them).
Int8Weights int8_q8_weights(uint64_t N, uint64_t K, uint32_t seed) {
  Int8Weights q = quantize_int8(random_weights(K, N, seed), N, K);
  for (uint64_t i = 0; i < N * K; i += 37) {
    q.w[i] = -128;
    q.dequantized[(i % K) * N + i / K] = -128.0 * q.scale[i / K];
  }
  if (q.w.empty()) q.w.resize(1);
  return q;
}

// Runs the kernel on `c` in every order under the current build and checks
// it against the contract; leaves y in c.y.
void run_int8_q8_case(MatmulCase& c, const Int8Weights& q) {
  const Shape& s = c.shape;
  c.y = output_buffer(s.M * s.N);
  ArgBlock args(find_kernel(kInt8Q8));
  c.common(args).buffer("w", q.w.data()).buffer("scale", q.scale.data());
  c.run(args);
  check_q8_matmul(c.y, c.x, int8_q8_group(s.K), q.dequantized, c.bias, s.M, s.N, s.K,
                  int8_q8_relative_bound(s.K), 0.0);
}

// Decode (M = 1) and every block shape (4 or 2 x rows by 4 weight rows, a
// last row by 8) with their partial blocks; N odd and short of a tile;
// groups of 128, 64 (K = 192, 320, 576) and 32 (K = 96, 224, 2080: 65
// groups); K = 0.
const Shape kInt8Q8Shapes[] = {
    {1, 8, 128},   {1, 200, 640},  {1, 67, 96},    {1, 72, 5632}, {2, 1, 32},
    {3, 130, 192}, {4, 64, 256},   {5, 71, 320},   {6, 9, 224},   {7, 40, 512},
    {9, 24, 96},   {13, 200, 384}, {16, 136, 576}, {17, 65, 128}, {3, 33, 2080},
    {66, 80, 64},  {70, 131, 384}, {2, 16, 0}};

}  // namespace

TEST_CASE("axrt_matmul_int8_pc_q8_f32") {
  for (size_t i = 0; i < std::size(kInt8Q8Shapes); ++i) {
    const Shape& s = kInt8Q8Shapes[i];
    if (!runs_in_this_build(s)) continue;
    MatmulCase c(s, 191 + static_cast<uint32_t>(s.M + s.N + s.K));
    // Rows of different magnitudes; in the last row a group of zeros (a = 0:
    // codes 0, s_x = 0); every other case without a bias (zeros, as the
    // converter binds for projections without one).
    for (uint64_t m = 0; m < s.M; ++m) {
      for (uint64_t k = 0; k < s.K; ++k) c.x[m * s.K + k] *= static_cast<float>(1 << (m % 5)) / 4;
    }
    const uint64_t G = int8_q8_group(s.K);
    if (s.K >= 2 * G) {
      std::fill_n(c.x.begin() + static_cast<ptrdiff_t>((s.M - 1) * s.K + G), G, 0.0f);
    }
    if (i % 2 == 1) std::fill(c.bias.begin(), c.bias.end(), 0.0f);
    const Int8Weights q = int8_q8_weights(s.N, s.K, 192);
    // Every build gives the same bits: the integer sums are exact and the f32
    // steps the same operations in the same order.
    std::vector<float> first;
    for (const Q8Build& build : q8_builds()) {
      Q8BuildScope scope(build);
      INFO(q8_build_name(build) << " " << shape_name(s));
      run_int8_q8_case(c, q);
      if (first.empty()) {
        first = c.y;
      } else {
        CHECK(std::memcmp(first.data(), c.y.data(), sizeof(float) * first.size()) == 0);
      }
    }
  }
}

TEST_CASE("axrt_matmul_int8_pc_q8_f32 takes codes at the ends of both ranges exactly") {
  // x codes of +-127 (every |x| = a) against weights of -128 and 127: the
  // largest products (128 x 127), many pairs of them of one sign, the most
  // that AVX2's vpmaddubsw adds into 16 bits.
  const Shape s{3, 16, 256};
  MatmulCase c(s, 193);
  for (uint64_t m = 0; m < s.M; ++m) {
    for (uint64_t k = 0; k < s.K; ++k) c.x[m * s.K + k] = (k + m) % 3 == 0 ? -2.0f : 2.0f;
  }
  Int8Weights q;
  q.w.resize(s.N * s.K);
  q.scale.assign(s.N, 0.25f);
  q.dequantized.resize(s.K * s.N);
  for (uint64_t n = 0; n < s.N; ++n) {
    for (uint64_t k = 0; k < s.K; ++k) {
      const int code = n % 2 == 0 ? -128 : 127;
      q.w[n * s.K + k] = static_cast<int8_t>(code);
      q.dequantized[k * s.N + n] = code * 0.25;
    }
  }
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    INFO(q8_build_name(build));
    run_int8_q8_case(c, q);
  }
}

TEST_CASE("axrt_matmul_int8_pc_q8_f32 is batch-invariant in every build") {
  // A row's bits alone (M = 1) and among others at several positions (M = 3,
  // 17, 65: blocks of 4, 2 and 1 rows, a second tile of rows).
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    for (const auto& [N, K] : {std::pair<uint64_t, uint64_t>{100, 224},
                               {72, 768},
                               {67, 1216}}) {
      const Int8Weights q = int8_q8_weights(N, K, 194);
      check_batch_invariance(
          kInt8Q8,
          [&](ArgBlock& args) { args.buffer("w", q.w.data()).buffer("scale", q.scale.data()); }, N,
          K, {3, 17, 65});
    }
  }
}

TEST_CASE("axrt_matmul_int8_pc_q8_f32 reuses a thread's quantized x only for the same x") {
  // A thread keeps the codes of its last tile's x rows for its next tile of
  // the same rows: a changed value, another K or fewer rows are quantized
  // afresh (each dispatch runs tile after tile on one thread).
  for (const Q8Build& build : q8_builds()) {
    Q8BuildScope scope(build);
    INFO(q8_build_name(build));
    for (uint64_t K : {256, 192, 96}) {
      const Shape s{3, 136, K};
      MatmulCase c(s, 195);
      const Int8Weights q = int8_q8_weights(s.N, s.K, 196);
      run_int8_q8_case(c, q);
      c.x[2 * s.K + K / 2] += 0.25f;  // the same buffer, one value changed
      run_int8_q8_case(c, q);
      MatmulCase fewer(Shape{2, s.N, s.K}, 197);
      fewer.x.assign(c.x.begin(), c.x.begin() + static_cast<ptrdiff_t>(2 * s.K));
      run_int8_q8_case(fewer, q);
    }
  }
}

TEST_CASE("axrt_matmul_int8_pc_q8_f32: NaN or Inf in x make the row NaN, tiny groups count 0") {
  const Shape s{5, 72, 256};
  const Int8Weights q = int8_q8_weights(s.N, s.K, 198);
  check_q8_nonfinite_rows(kInt8Q8, s, 199, [&](ArgBlock& args) {
    args.buffer("w", q.w.data()).buffer("scale", q.scale.data());
  });
}

TEST_CASE("axrt_matmul_int8_pc_q8_f32 refuses K that is not a multiple of 32, writing nothing") {
  std::vector<float> x(4096, 1.0f), bias(64, 0.0f), scale(64, 1.0f);
  std::vector<int8_t> w(1 << 16, 1);
  for (const uint64_t K : {uint64_t{200}, uint64_t{48}, uint64_t{1}, uint64_t{16}}) {
    INFO("K " << K);
    std::vector<float> y(4 * 64, kSentinel);
    ArgBlock args(find_kernel(kInt8Q8));
    args.buffer("x", x.data())
        .buffer("w", w.data())
        .buffer("scale", scale.data())
        .buffer("bias", bias.data())
        .buffer("y", y.data())
        .u64("M", 4)
        .u64("N", 64)
        .u64("K", K);
    for (Order order : {Order::kSequential, Order::kShuffled, Order::kThreaded}) {
      const Outcome outcome = dispatch(args, matmul_grid(4, 64), order);
      CHECK(outcome.code == kInvalidArgument);
      CHECK_THAT(outcome.message,
                 Catch::Contains("K = " + std::to_string(K) + " is not a multiple of 32"));
      CHECK_THAT(outcome.message, Catch::Contains(kInt8Q8));
    }
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == kSentinel; }));
    CHECK(dispatch(args, matmul_grid(4, 64), Order::kSequential, 0).code == kInvalidArgument);
  }
}

namespace {

void check_fp8_kernel(const char* name, uint64_t block_n, uint64_t block_k,
                      std::initializer_list<Shape> shapes) {
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    for (const Shape& s : shapes) {
      if (!runs_in_this_build(s)) continue;
      INFO(name << " " << matmul_isa_name() << " " << shape_name(s) << " blocks " << block_n
                << "x" << block_k);
      MatmulCase c(s, 101 + static_cast<uint32_t>(s.M + s.N + s.K));
      const Fp8Weights q = quantize_fp8(random_weights(s.K, s.N, 102), s.N, s.K, block_n, block_k);
      ArgBlock args(find_kernel(name));
      c.common(args)
          .buffer("w", q.w.data())
          .buffer("scale", q.scale.data())
          .u64("block_n", block_n)
          .u64("block_k", block_k);
      c.run(args);
      check_matmul(c.y, c.x, q.dequantized, c.bias, s.M, s.N, s.K);
    }
  }
}

}  // namespace

TEST_CASE("axrt_matmul_fp8_e4m3_f32, per tensor") {
  check_fp8_kernel("axrt_matmul_fp8_e4m3_f32", 0, 0,
                   {{1, 7, 5}, {3, 300, 200}, {65, 130, 257}, {1, 128, 1024}});
}

TEST_CASE("axrt_matmul_fp8_e4m3_b128_f32, 128x128 blocks") {
  check_fp8_kernel("axrt_matmul_fp8_e4m3_b128_f32", 128, 128,
                   {{3, 300, 200}, {65, 130, 257}, {130, 256, 384}, {1, 1000, 300}});
}

TEST_CASE("the fp8 kernels take any block shape") {
  check_fp8_kernel("axrt_matmul_fp8_e4m3_f32", 24, 48, {{10, 100, 150}, {70, 70, 70}});
  check_fp8_kernel("axrt_matmul_fp8_e4m3_b128_f32", 1, 0, {{5, 40, 33}});
}

TEST_CASE("a matmul workgroup outside the grid writes nothing") {
  const Shape s{3, 5, 7};
  MatmulCase c(s, 111);
  const auto w = random_weights(s.K, s.N, 112);
  ArgBlock args(find_kernel("axrt_matmul_f32"));
  c.common(args).buffer("w", w.data());
  // A grid larger than ceil(N/64) x ceil(M/64): the extra workgroups do nothing.
  REQUIRE(dispatch(args, {3, 2, 2}, Order::kShuffled).code == AXRT_KERNEL_OK);
  check_matmul(c.y, c.x, std::vector<double>(w.begin(), w.end()), c.bias, s.M, s.N, s.K);
}

// ===========================================================================
// Instruction sets and the tuner
// ===========================================================================

namespace {

namespace cpu = axrt::kernels::cpu;

// Sets (or, with nullptr, unsets) an environment variable for a scope.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvScope() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A directory of the test's own, removed at the end of the scope.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const char* name)
      : path(std::filesystem::temp_directory_path() /
             (std::string(name) + "." + std::to_string(getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool same_tuning(const cpu::MatmulTuning& a, const cpu::MatmulTuning& b) {
  return a.skinny.kb == b.skinny.kb && a.skinny.wide == b.skinny.wide &&
         a.skinny.prefetch == b.skinny.prefetch && a.gemm.kc == b.gemm.kc &&
         a.gemm.shape == b.gemm.shape && a.gemm.pack_x == b.gemm.pack_x;
}

// A first use of the f32 matmul from several workgroups at once (threaded
// order), checked against the reference: whatever the tuner does, the
// results stay within the bound.
void use_matmul_from_threads() {
  const Shape s{70, 200, 300};
  MatmulCase c(s, 141);
  const auto w = random_weights(s.K, s.N, 142);
  ArgBlock args(find_kernel("axrt_matmul_f32"));
  c.common(args).buffer("w", w.data());
  REQUIRE(dispatch(args, matmul_grid(s.M, s.N), Order::kThreaded).code == AXRT_KERNEL_OK);
  check_matmul(c.y, c.x, std::vector<double>(w.begin(), w.end()), c.bias, s.M, s.N, s.K);
}

const char kCacheHeader[] = "# axrt matmul tuning cache, format 1\n";

}  // namespace

TEST_CASE("the matmul builds follow the ISA limit") {
  const MatmulIsa widest = cpu::matmul_cpu_isa();
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    CHECK(cpu::matmul_isa() == isa);
  }
  CHECK(cpu::matmul_isa() == matmul_isas().front());
  CHECK(matmul_isas().front() <= widest);
  {
    IsaScope baseline(true);  // the switch the other kernels' tests use
    CHECK(cpu::matmul_isa() == MatmulIsa::kBaseline);
  }
}

// Runs in a process of its own with AXRT_CPU_ISA set (see below).
TEST_CASE("AXRT_CPU_ISA caps the matmul build", "[.isa-environment]") {
  const char* value = std::getenv("AXRT_CPU_ISA");
  REQUIRE(value != nullptr);
  const MatmulIsa cap = std::string(value) == "baseline" ? MatmulIsa::kBaseline
                        : std::string(value) == "avx2"   ? MatmulIsa::kAvx2
                                                         : MatmulIsa::kAvx512;
  REQUIRE(cpu::matmul_isa() == std::min(cap, cpu::matmul_cpu_isa()));
  check_f32_matmul({5, 70, 90});
}

TEST_CASE("AXRT_CPU_ISA is read at first use") {
  for (const char* value : {"avx2", "baseline"}) {
    INFO("AXRT_CPU_ISA=" << value);
    EnvScope isa("AXRT_CPU_ISA", value);
    const int status = axrt_test::RunSelf("[.isa-environment]");
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

// One timed round per candidate while it lives: the tests of the cache need a
// measurement, not a good one (a sanitizer's build times the candidates slowly).
class QuickTuning {
 public:
  QuickTuning() : previous_(cpu::set_matmul_tuning_rounds_for_testing(1)) {}
  ~QuickTuning() { cpu::set_matmul_tuning_rounds_for_testing(previous_); }
  QuickTuning(const QuickTuning&) = delete;
  QuickTuning& operator=(const QuickTuning&) = delete;

 private:
  int previous_;
};

TEST_CASE("the tuner writes its choice to the cache and reads it back") {
  QuickTuning quick;
  TempDir dir("cpu_kernels_tuning");
  // In a directory that does not exist yet: the tuner creates it.
  const std::filesystem::path cache = dir.path / "nested" / "matmul_tuning.txt";
  EnvScope path("AXRT_TUNING_CACHE", cache.c_str());
  EnvScope on("AXRT_TUNING", nullptr);
  const MatmulIsa isa = cpu::matmul_isa();

  cpu::reset_matmul_tuning_for_testing();
  CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kNotYet);
  use_matmul_from_threads();
  CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kMeasured);
  const cpu::MatmulTuning measured = cpu::matmul_tuning(isa);

  // One entry, under this CPU's key, holding what was chosen.
  const std::string text = read_file(cache);
  REQUIRE(text.rfind(kCacheHeader, 0) == 0);
  const std::string key = cpu::matmul_tuning_key(isa) + "\t";
  const size_t at = text.find("\n" + key);
  REQUIRE(at != std::string::npos);
  const size_t value_at = at + 1 + key.size();
  const std::string value = text.substr(value_at, text.find('\n', value_at) - value_at);
  cpu::MatmulTuning parsed;
  REQUIRE(cpu::parse_matmul_tuning(value, &parsed));
  CHECK(same_tuning(parsed, measured));
  CHECK(cpu::matmul_tuning_key(isa).find(cpu::matmul_isa_name(isa)) != std::string::npos);

  // A new process (here: a reset) reads it back instead of timing again.
  cpu::reset_matmul_tuning_for_testing();
  use_matmul_from_threads();
  CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kCache);
  CHECK(same_tuning(cpu::matmul_tuning(isa), measured));

  // A cached blocking other than the measured one is taken as it is.
  cpu::MatmulTuning chosen = cpu::default_matmul_tuning(isa);
  chosen.skinny.kb = 64;
  chosen.skinny.prefetch = 7;
  chosen.gemm.kc = 200;
  write_file(cache, std::string(kCacheHeader) + "another CPU|avx2|v1\t" +
                        cpu::format_matmul_tuning(cpu::default_matmul_tuning(isa)) + "\n" +
                        cpu::matmul_tuning_key(isa) + "\t" + cpu::format_matmul_tuning(chosen) +
                        "\n");
  cpu::reset_matmul_tuning_for_testing();
  use_matmul_from_threads();
  CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kCache);
  CHECK(same_tuning(cpu::matmul_tuning(isa), chosen));
  cpu::reset_matmul_tuning_for_testing();
}

TEST_CASE("a corrupt, foreign or unwritable tuning cache is ignored") {
  QuickTuning quick;
  TempDir dir("cpu_kernels_tuning_bad");
  const std::filesystem::path cache = dir.path / "matmul_tuning.txt";
  EnvScope path("AXRT_TUNING_CACHE", cache.c_str());
  EnvScope on("AXRT_TUNING", nullptr);
  const MatmulIsa isa = cpu::matmul_isa();
  const std::string key = cpu::matmul_tuning_key(isa);
  const std::string good = cpu::format_matmul_tuning(cpu::default_matmul_tuning(isa));
  static const char kJunk[] = "\x7f" "ELF not a cache\0\xff\xfe";
  const std::string bad_files[] = {
      std::string(kJunk, sizeof kJunk - 1),                              // binary junk
      key + "\t" + good + "\n",                                      // no header
      std::string(kCacheHeader) + key + " " + good + "\n",           // no tab
      std::string(kCacheHeader) + key + "\t" + good + "\textra\n",    // two tabs
      std::string(kCacheHeader) + key + "\tskinny_kb=7 skinny_wide=0 skinny_prefetch=16 "
                                        "gemm_kc=128 gemm_shape=0 gemm_pack_x=1\n",  // kb not a multiple of 8
      std::string(kCacheHeader) + key + "\tskinny_kb=64\n",             // fields missing
      std::string(kCacheHeader) + key + "\t" + good + " gemm_kc=128\n",  // a field twice
      std::string(kCacheHeader) + key + "\t" + good + " more=1\n",       // an unknown field
      std::string(kCacheHeader) + key + "\tskinny_kb=64 skinny_wide=0 skinny_prefetch=-3 "
                                        "gemm_kc=128 gemm_shape=0 gemm_pack_x=1\n",  // negative
      std::string(kCacheHeader) + key + "\tskinny_kb=99999999999 skinny_wide=0 "
                                        "skinny_prefetch=1 gemm_kc=128 gemm_shape=0 gemm_pack_x=1\n",
      std::string(kCacheHeader) + key + "\tskinny_kb=64 skinny_wide=2 skinny_prefetch=16 "
                                        "gemm_kc=128 gemm_shape=0 gemm_pack_x=1\n",
      std::string(kCacheHeader) + key + "\tskinny_kb=64 skinny_wide=0 skinny_prefetch=16 "
                                        "gemm_kc=512 gemm_shape=0 gemm_pack_x=1\n",  // deeper than a panel
      std::string(kCacheHeader) + key + "\tskinny_kb=64 skinny_wide=0 skinny_prefetch=16 "
                                        "gemm_kc=128 gemm_shape=0 gemm_pack_x=2\n",
      std::string(kCacheHeader) + "another CPU|" + cpu::matmul_isa_name(isa) + "|v1\t" + good +
          "\n",  // no entry for this CPU
      std::string(1 << 17, 'x'),  // too large to be a cache
  };
  for (const std::string& content : bad_files) {
    INFO("cache file: " << content.substr(0, 120));
    write_file(cache, content);
    cpu::reset_matmul_tuning_for_testing();
    use_matmul_from_threads();
    CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kMeasured);
    // Rewritten with this CPU's entry.
    const std::string text = read_file(cache);
    CHECK(text.rfind(kCacheHeader, 0) == 0);
    CHECK(text.find("\n" + key + "\t") != std::string::npos);
  }

  // A path that cannot be a file: the kernels run, nothing is written.
  write_file(dir.path / "a_file", "");
  for (const std::filesystem::path& unusable :
       {dir.path / "a_file" / "matmul_tuning.txt", dir.path}) {
    INFO("cache path: " << unusable);
    EnvScope elsewhere("AXRT_TUNING_CACHE", unusable.c_str());
    cpu::reset_matmul_tuning_for_testing();
    use_matmul_from_threads();
    CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kMeasured);
  }
  CHECK(std::filesystem::is_regular_file(dir.path / "a_file"));
  cpu::reset_matmul_tuning_for_testing();
}

TEST_CASE("AXRT_TUNING=off uses the default blocking and touches no file") {
  TempDir dir("cpu_kernels_tuning_off");
  const std::filesystem::path cache = dir.path / "matmul_tuning.txt";
  EnvScope path("AXRT_TUNING_CACHE", cache.c_str());
  for (const char* off : {"off", "OFF", "0", "false", "no"}) {
    INFO("AXRT_TUNING=" << off);
    EnvScope tuning("AXRT_TUNING", off);
    for (MatmulIsa isa : matmul_isas()) {
      MatmulIsaScope scope(isa);
      cpu::reset_matmul_tuning_for_testing();
      use_matmul_from_threads();
      CHECK(cpu::matmul_tuning_source(isa) == cpu::MatmulTuningSource::kDefaults);
      CHECK(same_tuning(cpu::matmul_tuning(isa), cpu::default_matmul_tuning(isa)));
    }
    CHECK_FALSE(std::filesystem::exists(cache));
  }
  cpu::reset_matmul_tuning_for_testing();
}

TEST_CASE("a tuning cache entry round-trips") {
  for (MatmulIsa isa : matmul_isas()) {
    for (const cpu::SkinnyBlocking& skinny : cpu::skinny_blocking_candidates(isa)) {
      for (const cpu::GemmBlocking& gemm : cpu::gemm_blocking_candidates(isa)) {
        cpu::MatmulTuning tuning;
        tuning.skinny = skinny;
        tuning.gemm = gemm;
        cpu::MatmulTuning back;
        REQUIRE(cpu::parse_matmul_tuning(cpu::format_matmul_tuning(tuning), &back));
        CHECK(same_tuning(back, tuning));
      }
    }
  }
}

TEST_CASE("every blocking the tuner may choose stays within the bound") {
  // The shapes reach the one-pass and several-pass small-row paths (M = 1,
  // 7, 16) and the tile engine (M = 40, K over several panels).
  const Shape shapes[] = {{1, 130, 300}, {7, 64, 520}, {16, 72, 700}, {40, 80, 600}};
  for (MatmulIsa isa : matmul_isas()) {
    MatmulIsaScope scope(isa);
    const auto skinny = cpu::skinny_blocking_candidates(isa);
    const auto gemm = cpu::gemm_blocking_candidates(isa);
    for (size_t i = 0; i < std::max(skinny.size(), gemm.size()); ++i) {
      cpu::MatmulTuning tuning;
      tuning.skinny = skinny[i % skinny.size()];
      tuning.gemm = gemm[i % gemm.size()];
      cpu::set_matmul_tuning_for_testing(isa, tuning);
      for (const Shape& s : shapes) {
        if (!runs_in_this_build(s)) continue;
        INFO(matmul_isa_name() << " " << cpu::format_matmul_tuning(tuning) << " "
                               << shape_name(s));
        check_f32_matmul(s);
        check_bf16_matmul(s);
        check_int8_matmul(s);
        check_int4_case("axrt_matmul_awq_int4_f32", Int4Kind::kAwq, {{s.M, 64, 512}, 128});
        check_int4_case("axrt_matmul_gptq_int4_f32", Int4Kind::kGptqV2, {{s.M, 72, 256}, 64});
      }
    }
  }
  cpu::reset_matmul_tuning_for_testing();
}

// ===========================================================================
// Scalar rules
// ===========================================================================

TEST_CASE("the int4 kernels refuse scalars that break their rules") {
  std::vector<float> x(4096, 0.0f), bias(4096, 0.0f), y(4096 * 4, 0.0f);
  std::vector<uint32_t> words(1 << 16, 0);
  std::vector<uint16_t> scales(1 << 16, 0x3c00);
  struct Bad {
    const char* kernel;
    uint64_t N, K, group;
    const char* fragment;  // what the message must say
  };
  const Bad cases[] = {
      {"axrt_matmul_awq_int4_f32", 12, 128, 128, "N = 12"},
      {"axrt_matmul_gptq_int4_f32", 20, 128, 128, "N = 20"},
      {"axrt_matmul_awq_int4_f32", 16, 200, 128, "K = 200 is not a multiple of group_size = 128"},
      {"axrt_matmul_gptq_v1_int4_f32", 16, 100, 0, "group_size is 0"},
      {"axrt_matmul_gptq_int4_f32", 16, 12, 4, "K = 12 is not a multiple of 8"},
      {"axrt_matmul_gptq_v1_int4_f32", 16, 12, 4, "K = 12 is not a multiple of 8"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.kernel << " N " << bad.N << " K " << bad.K << " group " << bad.group);
    ArgBlock args(find_kernel(bad.kernel));
    args.buffer("x", x.data())
        .buffer("qweight", words.data())
        .buffer("scales", scales.data())
        .buffer("qzeros", words.data())
        .buffer("bias", bias.data())
        .buffer("y", y.data())
        .u64("M", 1)
        .u64("N", bad.N)
        .u64("K", bad.K)
        .u64("group_size", bad.group);
    const Outcome outcome = dispatch(args, matmul_grid(1, bad.N));
    CHECK(outcome.code == kInvalidArgument);
    CHECK_THAT(outcome.message, Catch::Contains(bad.fragment));
    CHECK_THAT(outcome.message, Catch::Contains(bad.kernel));
    // A short buffer gets a truncated, terminated message; none is fine too.
    const Outcome short_message = dispatch(args, matmul_grid(1, bad.N), Order::kSequential, 8);
    CHECK(short_message.code == kInvalidArgument);
    CHECK(short_message.message.size() == 7);
    CHECK(dispatch(args, matmul_grid(1, bad.N), Order::kSequential, 0).code == kInvalidArgument);
  }
  // AWQ has no rule on K beyond the group size.
  ArgBlock ok(find_kernel("axrt_matmul_awq_int4_f32"));
  ok.buffer("x", x.data())
      .buffer("qweight", words.data())
      .buffer("scales", scales.data())
      .buffer("qzeros", words.data())
      .buffer("bias", bias.data())
      .buffer("y", y.data())
      .u64("M", 1)
      .u64("N", 16)
      .u64("K", 12)
      .u64("group_size", 4);
  CHECK(dispatch(ok, matmul_grid(1, 16)).code == AXRT_KERNEL_OK);
}

// ===========================================================================
// Timing (hidden: run with "[.bench]")
// ===========================================================================

TEST_CASE("matmul throughput, one thread", "[.bench]") {
  const Shape s{512, 512, 512};
  MatmulCase c(s, 121);
  const auto w = random_weights(s.K, s.N, 122);
  const Int8Weights q8 = quantize_int8(w, s.N, s.K);
  const Int4Weights q4 = quantize_int4(w, s.N, s.K, 128, Int4Kind::kAwq);
  const Fp8Weights qf = quantize_fp8(w, s.N, s.K, 128, 128);
  ArgBlock f32(find_kernel("axrt_matmul_f32"));
  c.common(f32).buffer("w", w.data());
  const Bf16Weights qb = round_bf16(w, s.N, s.K);
  ArgBlock bf16(find_kernel("axrt_matmul_bf16_f32"));
  c.common(bf16).buffer("w", qb.w.data());
  ArgBlock int8(find_kernel("axrt_matmul_int8_pc_f32"));
  c.common(int8).buffer("w", q8.w.data()).buffer("scale", q8.scale.data());
  ArgBlock awq(find_kernel("axrt_matmul_awq_int4_f32"));
  c.common(awq)
      .buffer("qweight", q4.qweight.data())
      .buffer("scales", q4.scales.data())
      .buffer("qzeros", q4.qzeros.data())
      .u64("group_size", 128);
  ArgBlock fp8(find_kernel("axrt_matmul_fp8_e4m3_b128_f32"));
  c.common(fp8)
      .buffer("w", qf.w.data())
      .buffer("scale", qf.scale.data())
      .u64("block_n", 128)
      .u64("block_k", 128);
  for (MatmulIsa level : matmul_isas()) {
    MatmulIsaScope isa(level);
    for (const ArgBlock* args : {&f32, &bf16, &int8, &awq, &fp8}) {
      double best = 1e30;
      for (int rep = 0; rep < 10; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        REQUIRE(dispatch(*args, matmul_grid(s.M, s.N)).code == AXRT_KERNEL_OK);
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::printf("%-32s %-9s %s: %7.3f ms, %6.1f GFLOP/s\n", args->kernel().name,
                  matmul_isa_name(), shape_name(s).c_str(), best * 1e3,
                  2.0 * s.M * s.N * s.K / best * 1e-9);
    }
  }
}
