// The kernel-library kit (kernel_library_kit.h) applied to the built-in
// library "axrt.cpu" (whose table the suite reaches by linking the kernels'
// objects, since the library is internal to libaxrt), to the suite's own
// "cts.kernels", and to the two example libraries of examples/custom_kernel;
// and the kit's self-tests: deliberately broken kernels it must fail.
#include "abi/cts/kernel_library_kit.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "abi/cts/cts_kernel_library.h"
#include "examples/custom_kernel/registered_library.h"
#include "kernels/cpu/library.h"

namespace axrt_cts {
namespace {

// ---------------------------------------------------------------------------
// Data and references
// ---------------------------------------------------------------------------

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(random);
  return values;
}

std::vector<int> RandomInts(size_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> values(n);
  for (int& v : values) v = dist(random);
  return values;
}

// Checks every got[i] within bound[i] of want[i]: one assertion, naming the
// first element outside and how many are.
void CheckNear(const std::vector<float>& got, const std::vector<double>& want,
               const std::vector<double>& bound, const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= bound[i])) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad != 0) {
    INFO(what << ": " << bad << " of " << got.size() << " elements are outside the bound; element "
              << first << " is " << got[first] << ", the reference " << want[first] << " (bound "
              << bound[first] << ")");
    CHECK(bad == 0u);
  } else {
    CHECK(bad == 0u);
  }
}

// Bounds |want| rel + abs.
std::vector<double> RelativeBound(const std::vector<double>& want, double rel, double abs) {
  std::vector<double> bound(want.size());
  for (size_t i = 0; i < want.size(); ++i) bound[i] = std::fabs(want[i]) * rel + abs;
  return bound;
}

uint32_t CeilDiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// IEEE binary16 bits of (1 + j / 8) 2^-6, j in [0, 8): exact halves.
uint16_t HalfScaleBits(int j) {
  return static_cast<uint16_t>((9u << 10) | (static_cast<uint32_t>(j) * 128u));
}
double HalfScaleValue(int j) { return (1.0 + j / 8.0) / 64.0; }

// OCP e4m3fn: bias 7, subnormals, S.1111.111 NaN (never generated here).
double E4m3Value(uint8_t code) {
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 0x7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

// y[M, N] = x[M, K] . W[K, N] + bias[N] in double, and the bound of
// docs/kernels.md: 1e-5 (sum_k |x W| + |bias|) + 1e-6.
struct MatmulReference {
  std::vector<double> y;
  std::vector<double> bound;
};

MatmulReference Matmul(const std::vector<float>& x, const std::vector<double>& w,
                       const std::vector<float>& bias, uint64_t M, uint64_t N, uint64_t K) {
  MatmulReference ref{std::vector<double>(M * N), std::vector<double>(M * N)};
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t n = 0; n < N; ++n) {
      double sum = bias[n];
      double magnitude = std::fabs(static_cast<double>(bias[n]));
      for (uint64_t k = 0; k < K; ++k) {
        const double term = static_cast<double>(x[m * K + k]) * w[k * N + n];
        sum += term;
        magnitude += std::fabs(term);
      }
      ref.y[m * N + n] = sum;
      ref.bound[m * N + n] = 1e-5 * magnitude + 1e-6;
    }
  }
  return ref;
}

// A matmul case: buffers x, the weight buffers, bias, y; scalars M, N, K
// and `extra`; the grid of 64 x 64 tiles.
KernelCase MatmulCase(const std::string& kernel, uint64_t M, uint64_t N, uint64_t K,
                      std::vector<CaseBuffer> weights, const std::vector<double>& w,
                      std::vector<uint64_t> extra, uint32_t seed) {
  const std::vector<float> x = RandomFloats(M * K, seed);
  const std::vector<float> bias = RandomFloats(N, seed + 1);
  KernelCase c;
  c.kernel = kernel;
  c.description =
      "M = " + std::to_string(M) + ", N = " + std::to_string(N) + ", K = " + std::to_string(K);
  c.grid = {CeilDiv(N, 64), CeilDiv(M, 64), 1};
  c.buffers.push_back(InputBuffer(BytesOf(x)));
  for (CaseBuffer& b : weights) c.buffers.push_back(std::move(b));
  c.buffers.push_back(InputBuffer(BytesOf(bias)));
  c.buffers.push_back(OutputBuffer(M * N * sizeof(float)));
  c.scalars = {M, N, K};
  c.scalars.insert(c.scalars.end(), extra.begin(), extra.end());
  const MatmulReference ref = Matmul(x, w, bias, M, N, K);
  c.check = [ref, kernel](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), ref.y, ref.bound, kernel);
  };
  return c;
}

// ---------------------------------------------------------------------------
// Quantization layouts the built-in kernels read (docs/kernels.md), as the
// executable's parameters declare them. Static: the kit borrows them.
// ---------------------------------------------------------------------------

const uint64_t kPerChannelBlock[] = {1, 0};
const uint64_t kInt4GroupBlock[] = {128, 1};
const uint64_t kInt4Group64Block[] = {64, 1};
const uint64_t kInt4Group32Block[] = {32, 1};
const uint64_t kWholeTensorBlock[] = {0, 0};
const uint64_t kBlock128x128[] = {128, 128};

axrt_axe_quant_layout_t Int8PerChannelLayout() {
  axrt_axe_quant_layout_t l = AXRT_AXE_QUANT_LAYOUT_INIT;
  l.layout_id = "int8.per_channel";
  l.element_type = AXRT_AXE_DTYPE_INT8;
  l.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  l.rank = 2;
  l.block_shape = kPerChannelBlock;
  l.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  return l;
}

axrt_axe_quant_layout_t Int4Layout(const char* id, axrt_axe_element_order_t order, int32_t axis,
                                   int32_t stored_bias, const uint64_t* block = kInt4GroupBlock) {
  axrt_axe_quant_layout_t l = AXRT_AXE_QUANT_LAYOUT_INIT;
  l.layout_id = id;
  l.element_type = AXRT_AXE_DTYPE_UINT4;
  l.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  l.rank = 2;
  l.block_shape = block;
  l.scale.dtype = AXRT_AXE_DTYPE_FLOAT16;
  l.zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_INTEGER;
  l.zero_point.dtype = AXRT_AXE_DTYPE_UINT4;
  l.zero_point.packing = {
      4, 32, 1, order, AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT, AXRT_AXE_PADDING_RULE_EXACT};
  l.zero_point.stored_bias = stored_bias;
  l.packing = {
      4, 32, axis, order, AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT, AXRT_AXE_PADDING_RULE_EXACT};
  return l;
}

axrt_axe_quant_layout_t Fp8Layout(const char* id, const uint64_t* block) {
  axrt_axe_quant_layout_t l = AXRT_AXE_QUANT_LAYOUT_INIT;
  l.layout_id = id;
  l.element_type = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  l.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  l.rank = 2;
  l.block_shape = block;
  l.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  return l;
}

const axrt_axe_quant_layout_t kInt8PerChannel = Int8PerChannelLayout();
const axrt_axe_quant_layout_t kAwq = Int4Layout("awq.int4.g128", AXRT_AXE_ELEMENT_ORDER_AWQ, 1, 0);
const axrt_axe_quant_layout_t kGptqV2 =
    Int4Layout("gptq_v2.int4.g128", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0);
const axrt_axe_quant_layout_t kGptqV1 =
    Int4Layout("gptq.int4.g128", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 1);
// Groups of 64 and 32 inputs, which the kernels' _g64 and _g32 names read.
const axrt_axe_quant_layout_t kAwqG64 =
    Int4Layout("awq.int4.g64", AXRT_AXE_ELEMENT_ORDER_AWQ, 1, 0, kInt4Group64Block);
const axrt_axe_quant_layout_t kAwqG32 =
    Int4Layout("awq.int4.g32", AXRT_AXE_ELEMENT_ORDER_AWQ, 1, 0, kInt4Group32Block);
const axrt_axe_quant_layout_t kGptqV2G64 =
    Int4Layout("gptq_v2.int4.g64", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0, kInt4Group64Block);
const axrt_axe_quant_layout_t kGptqV2G32 =
    Int4Layout("gptq_v2.int4.g32", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0, kInt4Group32Block);
const axrt_axe_quant_layout_t kGptqV1G64 =
    Int4Layout("gptq.int4.g64", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 1, kInt4Group64Block);
const axrt_axe_quant_layout_t kGptqV1G32 =
    Int4Layout("gptq.int4.g32", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 1, kInt4Group32Block);
// The built-in library's pre-packed forms read GPTQ v2's words tile by tile
// (docs/kernels.md, "Pre-packed weights"): the same fields, another id.
const axrt_axe_quant_layout_t kGptqV2Tile64 =
    Int4Layout("gptq_v2.int4.g128.tile64", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0);
const axrt_axe_quant_layout_t kGptqV2G64Tile64 = Int4Layout(
    "gptq_v2.int4.g64.tile64", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0, kInt4Group64Block);
const axrt_axe_quant_layout_t kGptqV2G32Tile64 = Int4Layout(
    "gptq_v2.int4.g32.tile64", AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL, 0, 0, kInt4Group32Block);
const axrt_axe_quant_layout_t kFp8PerTensor = Fp8Layout("fp8.e4m3fn.per_tensor", kWholeTensorBlock);
const axrt_axe_quant_layout_t kFp8B128 = Fp8Layout("fp8.e4m3fn.b128x128", kBlock128x128);
const axrt_axe_quant_layout_t kFp8PerChannel =
    Fp8Layout("fp8.e4m3fn.per_channel", kPerChannelBlock);

// ---------------------------------------------------------------------------
// Packers
// ---------------------------------------------------------------------------

// AWQ's order: element e of a group of eight sits in nibble e / 2 when even
// and 4 + e / 2 when odd (format §9.2).
uint32_t AwqShift(uint64_t e) {
  return static_cast<uint32_t>(4 * (e % 2 == 0 ? e / 2 : 4 + e / 2));
}

enum class Int4Format { kAwq, kGptqV2, kGptqV1 };

// Codes q [K, N] and zero points z [K/g, N] in the format's u32 words.
struct PackedInt4 {
  std::vector<uint32_t> qweight;
  std::vector<uint32_t> qzeros;
};

PackedInt4 PackInt4(Int4Format format, const std::vector<int>& q, const std::vector<int>& z,
                    uint64_t K, uint64_t N, uint64_t groups) {
  PackedInt4 packed;
  if (format == Int4Format::kAwq) {
    packed.qweight.assign(K * N / 8, 0);
    for (uint64_t k = 0; k < K; ++k) {
      for (uint64_t n = 0; n < N; ++n) {
        packed.qweight[k * (N / 8) + n / 8] |= static_cast<uint32_t>(q[k * N + n])
                                               << AwqShift(n % 8);
      }
    }
  } else {
    packed.qweight.assign(K / 8 * N, 0);
    for (uint64_t k = 0; k < K; ++k) {
      for (uint64_t n = 0; n < N; ++n) {
        packed.qweight[(k / 8) * N + n] |= static_cast<uint32_t>(q[k * N + n]) << (4 * (k % 8));
      }
    }
  }
  packed.qzeros.assign(groups * N / 8, 0);
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t n = 0; n < N; ++n) {
      const int stored = format == Int4Format::kGptqV1 ? z[g * N + n] - 1 : z[g * N + n];
      const uint32_t shift =
          format == Int4Format::kAwq ? AwqShift(n % 8) : static_cast<uint32_t>(4 * (n % 8));
      packed.qzeros[g * (N / 8) + n / 8] |= static_cast<uint32_t>(stored) << shift;
    }
  }
  return packed;
}

// ---------------------------------------------------------------------------
// Cases for "axrt.cpu"
// ---------------------------------------------------------------------------

KernelCase ElementwiseBinary(const std::string& kernel, bool multiply) {
  const uint64_t n = 9000;  // three workgroups of 4096, the last partial
  const std::vector<float> a = RandomFloats(n, 11), b = RandomFloats(n, 12);
  KernelCase c;
  c.kernel = kernel;
  c.description = "n = 9000";
  c.grid = {CeilDiv(n, 4096), 1, 1};
  c.buffers = {InputBuffer(BytesOf(a)), InputBuffer(BytesOf(b)), OutputBuffer(n * 4)};
  c.scalars = {n};
  std::vector<double> want(n);
  for (uint64_t i = 0; i < n; ++i) {
    want[i] = multiply ? double{a[i]} * b[i] : double{a[i]} + b[i];
  }
  c.check = [want, kernel](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[2]), want, RelativeBound(want, 1e-5, 0.0), kernel);
  };
  return c;
}

KernelCase ElementwiseUnary(const std::string& kernel, double (*reference)(double)) {
  const uint64_t n = 5000;
  const std::vector<float> x = RandomFloats(n, 13, -6.0f, 6.0f);
  KernelCase c;
  c.kernel = kernel;
  c.description = "n = 5000";
  c.grid = {CeilDiv(n, 4096), 1, 1};
  c.buffers = {InputBuffer(BytesOf(x)), OutputBuffer(n * 4)};
  c.scalars = {n};
  std::vector<double> want(n);
  for (uint64_t i = 0; i < n; ++i) want[i] = reference(x[i]);
  c.check = [want, kernel](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[1]), want, RelativeBound(want, 1e-5, 1e-6), kernel);
  };
  return c;
}

double Gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double Silu(double x) { return x / (1.0 + std::exp(-x)); }

constexpr uint64_t kRows = 5;
constexpr uint64_t kCols = 37;

KernelCase Softmax() {
  const std::vector<float> x = RandomFloats(kRows * kCols, 21, -3.0f, 3.0f);
  KernelCase c;
  c.kernel = "axrt_softmax_f32";
  c.description = "[5, 37]";
  c.grid = {static_cast<uint32_t>(kRows), 1, 1};
  c.buffers = {InputBuffer(BytesOf(x)), OutputBuffer(kRows * kCols * 4)};
  c.scalars = {kRows, kCols};
  std::vector<double> want(kRows * kCols);
  for (uint64_t r = 0; r < kRows; ++r) {
    double max = x[r * kCols];
    for (uint64_t j = 0; j < kCols; ++j) max = std::max(max, double{x[r * kCols + j]});
    double sum = 0.0;
    for (uint64_t j = 0; j < kCols; ++j) sum += std::exp(x[r * kCols + j] - max);
    for (uint64_t j = 0; j < kCols; ++j)
      want[r * kCols + j] = std::exp(x[r * kCols + j] - max) / sum;
  }
  c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[1]), want, RelativeBound(want, 1e-5, 0.0), "softmax");
  };
  return c;
}

KernelCase Norm(bool layer) {
  const std::vector<float> x = RandomFloats(kRows * kCols, 22, -3.0f, 3.0f);
  const std::vector<float> gamma = RandomFloats(kCols, 23, 0.5f, 1.5f);
  const std::vector<float> beta = RandomFloats(kCols, 24);
  const float epsilon = layer ? 1e-5f : 1e-6f;
  KernelCase c;
  c.kernel = layer ? "axrt_layernorm_f32" : "axrt_rmsnorm_f32";
  c.description = "[5, 37]";
  c.grid = {static_cast<uint32_t>(kRows), 1, 1};
  c.buffers.push_back(InputBuffer(BytesOf(x)));
  c.buffers.push_back(InputBuffer(BytesOf(gamma)));
  if (layer) c.buffers.push_back(InputBuffer(BytesOf(beta)));
  c.buffers.push_back(OutputBuffer(kRows * kCols * 4));
  c.scalars = {kRows, kCols, F32Bits(epsilon)};
  std::vector<double> want(kRows * kCols);
  for (uint64_t r = 0; r < kRows; ++r) {
    const float* row = x.data() + r * kCols;
    double mean = 0.0, squares = 0.0;
    for (uint64_t j = 0; j < kCols; ++j) mean += row[j];
    mean /= kCols;
    for (uint64_t j = 0; j < kCols; ++j) {
      const double d = layer ? row[j] - mean : row[j];
      squares += d * d;
    }
    const double inv = 1.0 / std::sqrt(squares / kCols + epsilon);
    for (uint64_t j = 0; j < kCols; ++j) {
      want[r * kCols + j] =
          layer ? (row[j] - mean) * inv * gamma[j] + beta[j] : row[j] * inv * gamma[j];
    }
  }
  const std::string name = c.kernel;
  c.check = [want, name](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), want, RelativeBound(want, 1e-5, 1e-6), name);
  };
  return c;
}

// x += residual (f32 sums, written back), then the RMSNorm of the sum.
KernelCase AddRmsNorm() {
  const std::vector<float> x = RandomFloats(kRows * kCols, 25, -3.0f, 3.0f);
  const std::vector<float> residual = RandomFloats(kRows * kCols, 26, -3.0f, 3.0f);
  const std::vector<float> gamma = RandomFloats(kCols, 27, 0.5f, 1.5f);
  const float epsilon = 1e-6f;
  KernelCase c;
  c.kernel = "axrt_add_rmsnorm_f32";
  c.description = "[5, 37]";
  c.grid = {static_cast<uint32_t>(kRows), 1, 1};
  c.buffers = {InputBuffer(BytesOf(x)), InputBuffer(BytesOf(residual)),
               InputBuffer(BytesOf(gamma)), OutputBuffer(kRows * kCols * 4)};
  // `x` is updated in place and `out` follows from it: the kit's coverage
  // runs, which start writable buffers from a sentinel, can only check that
  // each workgroup changes them.
  c.buffers[0].writable = true;
  c.buffers[0].fully_written = false;
  c.buffers[3].fully_written = false;
  c.scalars = {kRows, kCols, F32Bits(epsilon)};
  std::vector<double> sums(kRows * kCols), want(kRows * kCols);
  for (uint64_t i = 0; i < sums.size(); ++i) sums[i] = static_cast<float>(x[i] + residual[i]);
  for (uint64_t r = 0; r < kRows; ++r) {
    double squares = 0.0;
    for (uint64_t j = 0; j < kCols; ++j) squares += sums[r * kCols + j] * sums[r * kCols + j];
    const double inv = 1.0 / std::sqrt(squares / kCols + epsilon);
    for (uint64_t j = 0; j < kCols; ++j) want[r * kCols + j] = sums[r * kCols + j] * inv * gamma[j];
  }
  c.check = [sums, want](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[0]), sums, std::vector<double>(sums.size(), 0.0),
              "axrt_add_rmsnorm_f32 (x)");
    CheckNear(ValuesOf<float>(buffers[3]), want, RelativeBound(want, 1e-5, 1e-6),
              "axrt_add_rmsnorm_f32 (out)");
  };
  return c;
}

KernelCase MatmulF32() {
  const uint64_t M = 67, N = 72, K = 33;  // 2 x 2 tiles, both clipped
  const std::vector<float> w = RandomFloats(K * N, 31);
  return MatmulCase("axrt_matmul_f32", M, N, K, {InputBuffer(BytesOf(w))},
                    std::vector<double>(w.begin(), w.end()), {}, 32);
}

// f32 [N, K] weights.
KernelCase MatmulF32Nk() {
  const uint64_t M = 67, N = 72, K = 40;
  const std::vector<float> w = RandomFloats(N * K, 34);
  std::vector<double> transposed(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) transposed[k * N + n] = w[n * K + k];
  }
  return MatmulCase("axrt_matmul_f32_nk", M, N, K, {InputBuffer(BytesOf(w))}, transposed, {}, 35);
}

// bf16 [N, K] weights: the top halves of random f32 values, so the
// reference widens them exactly. `w` the stored bits, `widened` the values
// as the reference's [K, N].
struct Bf16Weights {
  std::vector<uint16_t> w;
  std::vector<double> widened;
};

Bf16Weights RandomBf16Weights(uint64_t N, uint64_t K, uint32_t seed) {
  const std::vector<float> values = RandomFloats(N * K, seed);
  Bf16Weights out{std::vector<uint16_t>(N * K), std::vector<double>(K * N)};
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      uint32_t bits;
      std::memcpy(&bits, &values[n * K + k], sizeof bits);
      out.w[n * K + k] = static_cast<uint16_t>(bits >> 16);
      bits &= 0xffff0000u;
      float top;
      std::memcpy(&top, &bits, sizeof top);
      out.widened[k * N + n] = top;
    }
  }
  return out;
}

// `decode`: axrt_matmul_bf16_f32_decode, on its grid of 8 columns by 16 rows.
KernelCase MatmulBf16(bool decode = false) {
  const uint64_t M = 67, N = 72, K = 40;
  const Bf16Weights weights = RandomBf16Weights(N, K, 36);
  if (!decode) {
    return MatmulCase("axrt_matmul_bf16_f32", M, N, K, {InputBuffer(BytesOf(weights.w))},
                      weights.widened, {}, 37);
  }
  KernelCase c = MatmulCase("axrt_matmul_bf16_f32_decode", M, N, K,
                            {InputBuffer(BytesOf(weights.w))}, weights.widened, {}, 37);
  c.grid = {CeilDiv(N, 8), CeilDiv(M, 16), 1};
  return c;
}

// axrt_matmul_bf16_f32_decode_silu: the rows of w are 4 gate rows, then
// their 4 up rows, a block of 8; act [M, N / 2] = silu(gate) * up. The
// reference is that of the double matmul; the bound is axrt_silu_mul_f32's
// plus each factor's matmul bound carried through (|silu'| < 1.1).
KernelCase MatmulBf16DecodeSilu() {
  const uint64_t M = 21, N = 72, K = 40, cols = N / 2;
  const uint32_t seed = 38;
  const Bf16Weights weights = RandomBf16Weights(N, K, 36);
  KernelCase c = MatmulCase("axrt_matmul_bf16_f32_decode_silu", M, N, K,
                            {InputBuffer(BytesOf(weights.w))}, weights.widened, {}, seed);
  c.grid = {CeilDiv(N, 8), CeilDiv(M, 16), 1};
  c.buffers.back() = OutputBuffer(M * cols * sizeof(float));
  // MatmulCase's x and bias.
  const MatmulReference h =
      Matmul(RandomFloats(M * K, seed), weights.widened, RandomFloats(N, seed + 1), M, N, K);
  std::vector<double> want(M * cols), bound(M * cols);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t gate = m * N + 8 * (j / 4) + j % 4, up = gate + 4;
      const double g = h.y[gate], u = h.y[up];
      want[m * cols + j] = Silu(g) * u;
      bound[m * cols + j] = 1.1e-5 * std::fabs(Silu(g) * u) + 1e-6 * std::fabs(u) +
                            1.1 * h.bound[gate] * (std::fabs(u) + h.bound[up]) +
                            std::fabs(Silu(g)) * h.bound[up];
    }
  }
  c.check = [want, bound](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), want, bound, "axrt_matmul_bf16_f32_decode_silu");
  };
  return c;
}

// `v` rounded to bf16 (nearest even) and widened back, as the tensor-core
// matmuls stage their operands.
float Bf16Rounded(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// A tensor-core matmul (docs/kernels.md, "Tensor-core matmul") on its grid
// of 128 x 128 tiles, its weights `weights`, whose values as the kernel
// multiplies them (after its own rounding) are `w` [K, N]: the reference
// rounds x to bf16 first, as the kernel does. M, N and K each end inside a
// tile.
KernelCase MatmulTensorCore(const std::string& kernel, uint64_t M, uint64_t N, uint64_t K,
                            std::vector<CaseBuffer> weights, const std::vector<double>& w,
                            std::vector<uint64_t> extra, uint32_t seed) {
  KernelCase c = MatmulCase(kernel, M, N, K, std::move(weights), w, std::move(extra), seed);
  c.grid = {CeilDiv(N, 128), CeilDiv(M, 128), 1};
  std::vector<float> x = RandomFloats(M * K, seed);  // MatmulCase's x and bias
  const std::vector<float> bias = RandomFloats(N, seed + 1);
  for (float& v : x) v = Bf16Rounded(v);
  const MatmulReference ref = Matmul(x, w, bias, M, N, K);
  c.check = [ref, kernel](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), ref.y, ref.bound, kernel);
  };
  return c;
}

// axrt_matmul_bf16_tc_f32: K a multiple of 8, not of the kernel's K tile of
// 32.
KernelCase MatmulBf16TensorCore() {
  const Bf16Weights weights = RandomBf16Weights(136, 40, 36);
  return MatmulTensorCore("axrt_matmul_bf16_tc_f32", 130, 136, 40,
                          {InputBuffer(BytesOf(weights.w))}, weights.widened, {}, 37);
}

// axrt_matmul_int8_pc_tc_f32: the codes are exact in bf16, the column's
// scale comes after the sum.
KernelCase MatmulInt8TensorCore() {
  const uint64_t M = 130, N = 136, K = 40;
  const std::vector<int> codes = RandomInts(N * K, 61, -127, 127);
  const std::vector<float> scale = RandomFloats(N, 62, 0.005f, 0.02f);
  std::vector<int8_t> w(N * K);
  std::vector<double> dequantized(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      w[n * K + k] = static_cast<int8_t>(codes[n * K + k]);
      dequantized[k * N + n] = codes[n * K + k] * double{scale[n]};
    }
  }
  return MatmulTensorCore(
      "axrt_matmul_int8_pc_tc_f32", M, N, K,
      {InputBuffer(BytesOf(w), &kInt8PerChannel), InputBuffer(BytesOf(scale))}, dequantized, {},
      63);
}

// axrt_matmul_fp8_e4m3_pc_tc_f32: every finite e4m3fn code is exact in bf16,
// the column's scale comes after the sum.
KernelCase MatmulFp8TensorCore() {
  const uint64_t M = 130, N = 136, K = 40;
  const std::vector<int> codes = RandomInts(N * K, 68, 0, 253);
  const std::vector<float> scale = RandomFloats(N, 69, 0.0005f, 0.002f);
  std::vector<uint8_t> w(N * K);
  std::vector<double> dequantized(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      const int code = codes[n * K + k];
      w[n * K + k] = static_cast<uint8_t>(code >= 0x7f ? code + 1 : code);  // no NaN
      dequantized[k * N + n] = E4m3Value(w[n * K + k]) * double{scale[n]};
    }
  }
  return MatmulTensorCore(
      "axrt_matmul_fp8_e4m3_pc_tc_f32", M, N, K,
      {InputBuffer(BytesOf(w), &kFp8PerChannel), InputBuffer(BytesOf(scale))}, dequantized, {},
      70);
}

// axrt_matmul_awq_int4_tc_f32 (or its name for `group`): each weight (q - z) s
// (exact in f32) rounded to bf16 as it is staged; K / group groups.
KernelCase MatmulAwqInt4TensorCore(const std::string& kernel = "axrt_matmul_awq_int4_tc_f32",
                                   const axrt_axe_quant_layout_t* layout = &kAwq,
                                   uint64_t group = 128) {
  const uint64_t M = 130, N = 136, K = 256, groups = K / group;
  const std::vector<int> q = RandomInts(K * N, 64, 0, 15);
  const std::vector<int> z = RandomInts(groups * N, 65, 0, 15);
  const std::vector<int> s = RandomInts(groups * N, 66, 0, 7);
  const PackedInt4 packed = PackInt4(Int4Format::kAwq, q, z, K, N, groups);
  std::vector<uint16_t> scales(groups * N);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = HalfScaleBits(s[i]);
  std::vector<double> rounded(K * N);
  for (uint64_t k = 0; k < K; ++k) {
    for (uint64_t n = 0; n < N; ++n) {
      const uint64_t g = k / group;
      const double w = (q[k * N + n] - z[g * N + n]) * HalfScaleValue(s[g * N + n]);
      rounded[k * N + n] = Bf16Rounded(static_cast<float>(w));
    }
  }
  return MatmulTensorCore(kernel, M, N, K,
                          {InputBuffer(BytesOf(packed.qweight), layout),
                           InputBuffer(BytesOf(scales)), InputBuffer(BytesOf(packed.qzeros))},
                          rounded, {group}, 67);
}

// `decode`: axrt_matmul_int8_pc_f32_decode, on its grid of 8 columns by 16 rows.
KernelCase MatmulInt8(bool decode = false) {
  const uint64_t M = 67, N = 72, K = 40;
  const std::vector<int> codes = RandomInts(N * K, 41, -127, 127);
  const std::vector<float> scale = RandomFloats(N, 42, 0.005f, 0.02f);
  std::vector<int8_t> w(N * K);
  std::vector<double> dequantized(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      w[n * K + k] = static_cast<int8_t>(codes[n * K + k]);
      dequantized[k * N + n] = codes[n * K + k] * double{scale[n]};
    }
  }
  KernelCase c = MatmulCase(decode ? "axrt_matmul_int8_pc_f32_decode" : "axrt_matmul_int8_pc_f32",
                            M, N, K,
                            {InputBuffer(BytesOf(w), &kInt8PerChannel), InputBuffer(BytesOf(scale))},
                            dequantized, {}, 43);
  if (decode) c.grid = {CeilDiv(N, 8), CeilDiv(M, 16), 1};
  return c;
}

// `decode_cols` > 0: on a decode grid of that many columns by 16 rows.
KernelCase MatmulInt4(const std::string& kernel, Int4Format format,
                      const axrt_axe_quant_layout_t* layout, uint64_t decode_cols = 0,
                      uint64_t group = 128) {
  const uint64_t M = 5, N = 72, K = 256, groups = K / group;
  const std::vector<int> q = RandomInts(K * N, 51, 0, 15);
  // GPTQ v1 stores z - 1, so its zero points start at 1.
  const std::vector<int> z = RandomInts(groups * N, 52, format == Int4Format::kGptqV1 ? 1 : 0, 15);
  const std::vector<int> s = RandomInts(groups * N, 53, 0, 7);
  const PackedInt4 packed = PackInt4(format, q, z, K, N, groups);
  std::vector<uint16_t> scales(groups * N);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = HalfScaleBits(s[i]);
  std::vector<double> dequantized(K * N);
  for (uint64_t k = 0; k < K; ++k) {
    for (uint64_t n = 0; n < N; ++n) {
      const uint64_t g = k / group;
      dequantized[k * N + n] = (q[k * N + n] - z[g * N + n]) * HalfScaleValue(s[g * N + n]);
    }
  }
  KernelCase c = MatmulCase(kernel, M, N, K,
                            {InputBuffer(BytesOf(packed.qweight), layout),
                             InputBuffer(BytesOf(scales)), InputBuffer(BytesOf(packed.qzeros))},
                            dequantized, {group}, 54);
  if (decode_cols != 0) c.grid = {CeilDiv(N, decode_cols), CeilDiv(M, 16), 1};
  return c;
}

// x of the int8-activation cases, [M, K] (M >= 2, K >= 2 group): random,
// but row 0's first group has a = 127, so 127 / a = 1 and its .5 values
// are ties, and row 1's second group is zeros (s_x = 0). Seeds `seed` and
// seed + 1.
std::vector<float> Q8CaseX(uint64_t M, uint64_t K, uint64_t group, uint32_t seed) {
  std::vector<float> x = RandomFloats(M * K, seed, -2.0f, 2.0f);
  const std::vector<int> ties = RandomInts(group, seed + 1, -127, 126);
  for (uint64_t k = 0; k < group; ++k) x[k] = static_cast<float>(ties[k]) + 0.5f;
  x[0] = 127.0f;
  std::fill_n(x.begin() + K + group, group, 0.0f);
  return x;
}

// x quantized as the contract says (f32 operations, half to even), as
// xq s_x in double, [M, K].
std::vector<double> QuantizedQ8(const std::vector<float>& x, uint64_t M, uint64_t K,
                                uint64_t group) {
  std::vector<double> xq(M * K, 0.0);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t g0 = 0; g0 < K; g0 += group) {
      float a = 0.0f;
      for (uint64_t k = g0; k < g0 + group; ++k) a = std::max(a, std::fabs(x[m * K + k]));
      if (a == 0.0f) continue;
      const float inv = 127.0f / a;
      const float s_x = a / 127.0f;
      for (uint64_t k = g0; k < g0 + group; ++k) {
        const float product = x[m * K + k] * inv;
        xq[m * K + k] = std::nearbyint(product) * static_cast<double>(s_x);
      }
    }
  }
  return xq;
}

// GPTQ v2 weights times x quantized to int8 per group. The reference
// quantizes x as the contract says (f32 operations, half to even) and
// multiplies in double; the bound is 1e-5 (|xq| . |W| + |bias|) + 1e-6. Row
// 0's first group has a = 127, so 127 / a = 1 and its .5 values are ties;
// row 1's second group is zeros (s_x = 0). `kernel` binds group_size `group`.
KernelCase MatmulInt4Q8(const std::string& kernel = "axrt_matmul_gptq_int4_q8_f32",
                        const axrt_axe_quant_layout_t* layout = &kGptqV2, uint64_t group = 64) {
  const uint64_t M = 5, N = 72, K = 256, groups = K / group;
  const std::vector<int> q = RandomInts(K * N, 55, 0, 15);
  const std::vector<int> z = RandomInts(groups * N, 56, 0, 15);
  const std::vector<int> s = RandomInts(groups * N, 57, 0, 7);
  const PackedInt4 packed = PackInt4(Int4Format::kGptqV2, q, z, K, N, groups);
  std::vector<uint16_t> scales(groups * N);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = HalfScaleBits(s[i]);
  std::vector<double> w(K * N);
  for (uint64_t k = 0; k < K; ++k) {
    for (uint64_t n = 0; n < N; ++n) {
      const uint64_t g = k / group;
      w[k * N + n] = (q[k * N + n] - z[g * N + n]) * HalfScaleValue(s[g * N + n]);
    }
  }
  const std::vector<float> x = Q8CaseX(M, K, group, 58);
  const std::vector<float> bias = RandomFloats(N, 60);

  const std::vector<double> xq = QuantizedQ8(x, M, K, group);
  std::vector<double> want(M * N), bound(M * N);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t n = 0; n < N; ++n) {
      double sum = bias[n];
      double magnitude = std::fabs(static_cast<double>(bias[n]));
      for (uint64_t k = 0; k < K; ++k) {
        const double term = xq[m * K + k] * w[k * N + n];
        sum += term;
        magnitude += std::fabs(term);
      }
      want[m * N + n] = sum;
      bound[m * N + n] = 1e-5 * magnitude + 1e-6;
    }
  }

  KernelCase c;
  c.kernel = kernel;
  c.description = "M = 5, N = 72, K = 256, group_size = " + std::to_string(group);
  c.grid = {CeilDiv(N, 64), CeilDiv(M, 64), 1};
  c.buffers = {InputBuffer(BytesOf(x)),      InputBuffer(BytesOf(packed.qweight), layout),
               InputBuffer(BytesOf(scales)), InputBuffer(BytesOf(packed.qzeros)),
               InputBuffer(BytesOf(bias)),   OutputBuffer(M * N * sizeof(float))};
  c.scalars = {M, N, K, group};
  c.check = [want, bound, kernel](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), want, bound, kernel);
  };
  return c;
}

// A GPTQ v2 case (scalars M, N, K, group_size; buffer 1 the [K/8, N] words)
// for the pre-packed form of its kernel: the words tile by tile,
// [ceil(N/64)][K/8][64] with columns past N zero, read as `layout`; the
// same reference.
KernelCase PrepackedTile64(KernelCase c, const axrt_axe_quant_layout_t* layout) {
  const uint64_t N = c.scalars[1], K = c.scalars[2], word_rows = K / 8;
  const std::vector<uint32_t> words = ValuesOf<uint32_t>(c.buffers[1].bytes);
  const uint64_t tiles = CeilDiv(N, 64);
  std::vector<uint32_t> packed(tiles * word_rows * 64, 0);
  for (uint64_t t = 0; t < tiles; ++t) {
    for (uint64_t r = 0; r < word_rows; ++r) {
      for (uint64_t j = 0; j < 64 && t * 64 + j < N; ++j) {
        packed[(t * word_rows + r) * 64 + j] = words[r * N + t * 64 + j];
      }
    }
  }
  c.kernel += std::string("@") + layout->layout_id;
  c.buffers[1] = InputBuffer(BytesOf(packed), layout);
  return c;
}

// int8 weights per output channel times x quantized to int8 per group
// (axrt_matmul_int8_pc_q8_f32; K = 192: groups of 64). The reference
// quantizes x as the contract says and multiplies in double, the codes of
// -128 to 127 included; the bound is 1e-5 (|xq| . |W| + |bias|) + 1e-6. Row
// 0's first group has a = 127, so its .5 values are ties; row 1's second
// group is zeros (s_x = 0).
KernelCase MatmulInt8Q8() {
  const uint64_t M = 5, N = 71, K = 192, group = 64;
  const std::vector<int> codes = RandomInts(N * K, 68, -128, 127);
  const std::vector<float> scale = RandomFloats(N, 69, 0.005f, 0.02f);
  std::vector<int8_t> w(N * K);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(codes[i]);
  const std::vector<float> x = Q8CaseX(M, K, group, 70);
  const std::vector<float> bias = RandomFloats(N, 72);

  const std::vector<double> xq = QuantizedQ8(x, M, K, group);
  std::vector<double> want(M * N), bound(M * N);
  for (uint64_t m = 0; m < M; ++m) {
    for (uint64_t n = 0; n < N; ++n) {
      double sum = bias[n];
      double magnitude = std::fabs(static_cast<double>(bias[n]));
      for (uint64_t k = 0; k < K; ++k) {
        const double term = xq[m * K + k] * codes[n * K + k] * double{scale[n]};
        sum += term;
        magnitude += std::fabs(term);
      }
      want[m * N + n] = sum;
      bound[m * N + n] = 1e-5 * magnitude + 1e-6;
    }
  }

  KernelCase c;
  c.kernel = "axrt_matmul_int8_pc_q8_f32";
  c.description = "M = 5, N = 71, K = 192 (groups of 64)";
  c.grid = {CeilDiv(N, 64), CeilDiv(M, 64), 1};
  c.buffers = {InputBuffer(BytesOf(x)), InputBuffer(BytesOf(w), &kInt8PerChannel),
               InputBuffer(BytesOf(scale)), InputBuffer(BytesOf(bias)),
               OutputBuffer(M * N * sizeof(float))};
  c.scalars = {M, N, K};
  c.check = [want, bound](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers.back()), want, bound, "axrt_matmul_int8_pc_q8_f32");
  };
  return c;
}

KernelCase MatmulFp8(const std::string& kernel, uint64_t M, uint64_t N, uint64_t K, uint64_t block,
                     const axrt_axe_quant_layout_t* layout) {
  const uint64_t bn = block != 0 ? block : N, bk = block != 0 ? block : K;
  const uint64_t scale_rows = CeilDiv(N, bn), scale_cols = CeilDiv(K, bk);
  std::vector<int> codes = RandomInts(N * K, 61, 0, 253);
  std::vector<uint8_t> w(N * K);
  for (size_t i = 0; i < w.size(); ++i) {
    // Skip the NaN codes 0x7f and 0xff.
    int code = codes[i];
    if (code >= 0x7f) ++code;
    w[i] = static_cast<uint8_t>(code);
  }
  const std::vector<float> scale = RandomFloats(scale_rows * scale_cols, 62, 0.005f, 0.02f);
  std::vector<double> dequantized(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      dequantized[k * N + n] =
          E4m3Value(w[n * K + k]) * double{scale[(n / bn) * scale_cols + k / bk]};
    }
  }
  return MatmulCase(kernel, M, N, K, {InputBuffer(BytesOf(w), layout), InputBuffer(BytesOf(scale))},
                    dequantized, {block, block}, 63);
}

// fp8 e4m3fn [N, K] with a scale per output channel; `decode`:
// axrt_matmul_fp8_e4m3_pc_f32_decode, on its grid of 8 columns by 16 rows.
KernelCase MatmulFp8PerChannel(bool decode) {
  const uint64_t M = 67, N = 72, K = 40;
  std::vector<int> codes = RandomInts(N * K, 64, 0, 253);
  std::vector<uint8_t> w(N * K);
  for (size_t i = 0; i < w.size(); ++i) {
    // Skip the NaN codes 0x7f and 0xff.
    w[i] = static_cast<uint8_t>(codes[i] >= 0x7f ? codes[i] + 1 : codes[i]);
  }
  const std::vector<float> scale = RandomFloats(N, 65, 0.005f, 0.02f);
  std::vector<double> dequantized(K * N);
  for (uint64_t n = 0; n < N; ++n) {
    for (uint64_t k = 0; k < K; ++k) {
      dequantized[k * N + n] = E4m3Value(w[n * K + k]) * double{scale[n]};
    }
  }
  KernelCase c = MatmulCase(
      decode ? "axrt_matmul_fp8_e4m3_pc_f32_decode" : "axrt_matmul_fp8_e4m3_pc_f32", M, N, K,
      {InputBuffer(BytesOf(w), &kFp8PerChannel), InputBuffer(BytesOf(scale))}, dequantized, {},
      66);
  if (decode) c.grid = {CeilDiv(N, 8), CeilDiv(M, 16), 1};
  return c;
}

// ---------------------------------------------------------------------------
// Transformer kernels (docs/llm.md, "Kernels"). The cache is
// f32 [L, 2, num_blocks, kv_heads, block_size, head_dim].
// ---------------------------------------------------------------------------

struct PagedShape {
  uint64_t layers = 2, layer = 1, num_blocks = 9, kv_heads = 2, block_size = 4, head_dim = 8,
           max_blocks = 7, heads = 4;
  uint64_t k_offset() const { return heads * head_dim; }
  // Queries, then keys, then values, then three columns no kernel reads.
  uint64_t row_stride() const { return (heads + 2 * kv_heads) * head_dim + 3; }
  uint64_t cache_size() const { return layers * 2 * num_blocks * kv_heads * block_size * head_dim; }
  // Index of element d of KV head g at `position` of the sequence whose
  // block table row is `table`: kind 0 keys, 1 values.
  uint64_t Slot(const std::vector<int32_t>& table, uint64_t row, uint64_t position, uint64_t kind,
                uint64_t g, uint64_t d) const {
    const uint64_t block = static_cast<uint64_t>(table[row * max_blocks + position / block_size]);
    return ((((layer * 2 + kind) * num_blocks + block) * kv_heads + g) * block_size +
            position % block_size) *
               head_dim +
           d;
  }
};

// `rows` block-table rows of `shape.max_blocks` distinct blocks each, as
// far as the pool allows, in a shuffled order.
std::vector<int32_t> BlockTables(const PagedShape& shape, uint64_t rows, uint32_t seed) {
  std::vector<int32_t> pool(shape.num_blocks);
  for (uint64_t i = 0; i < shape.num_blocks; ++i) pool[i] = static_cast<int32_t>(i);
  std::mt19937 random(seed);
  std::vector<int32_t> tables;
  for (uint64_t r = 0; r < rows; ++r) {
    std::shuffle(pool.begin(), pool.end(), random);
    tables.insert(tables.end(), pool.begin(), pool.begin() + static_cast<long>(shape.max_blocks));
  }
  return tables;
}

KernelCase Embedding(bool bf16) {
  const uint64_t T = 7, H = 40, V = 50;
  const std::vector<int> ids = RandomInts(T, 81, 0, static_cast<int>(V) - 1);
  const std::vector<int32_t> tokens(ids.begin(), ids.end());
  const std::vector<float> values = RandomFloats(V * H, 82);
  std::vector<uint16_t> halves(V * H);
  std::vector<double> table(V * H);
  for (uint64_t i = 0; i < V * H; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    halves[i] = static_cast<uint16_t>(bits >> 16);
    bits &= 0xffff0000u;
    float top;
    std::memcpy(&top, &bits, sizeof top);
    table[i] = bf16 ? top : values[i];
  }
  KernelCase c;
  c.kernel = bf16 ? "axrt_embedding_bf16" : "axrt_embedding_f32";
  c.description = "T = 7, H = 40, V = 50";
  c.grid = {static_cast<uint32_t>(T), 1, 1};
  c.buffers = {InputBuffer(BytesOf(tokens)),
               bf16 ? InputBuffer(BytesOf(halves)) : InputBuffer(BytesOf(values)),
               OutputBuffer(T * H * 4)};
  c.scalars = {T, H, V};
  std::vector<double> want(T * H);
  for (uint64_t t = 0; t < T; ++t) {
    for (uint64_t h = 0; h < H; ++h) want[t * H + h] = table[tokens[t] * H + h];
  }
  const std::string name = c.kernel;
  c.check = [want, name](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[2]), want, std::vector<double>(want.size(), 0.0), name);
  };
  return c;
}

// Rotates the first `heads` heads of every row; the last column of each row
// lies past them and must keep its value.
KernelCase Rope() {
  const uint64_t T = 5, heads = 3, D = 16, row_stride = heads * D + 5;
  const float scaling = 1.25f;
  const std::vector<float> x = RandomFloats(T * row_stride, 91);
  const std::vector<int32_t> positions = {1, 7, 300, 4095, 12};
  std::vector<float> inv_freq(D / 2);
  for (uint64_t i = 0; i < D / 2; ++i) {
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / D));
  }
  KernelCase c;
  c.kernel = "axrt_rope_f32";
  c.description = "T = 5, 3 heads of 16 in rows of 53, attention_scaling = 1.25";
  c.grid = {static_cast<uint32_t>(T), 1, 1};
  c.buffers = {InputBuffer(BytesOf(x)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(inv_freq))};
  c.buffers[0].writable = true;
  c.buffers[0].fully_written = false;
  c.scalars = {T, heads, D, row_stride, F32Bits(scaling)};
  std::vector<double> want(x.begin(), x.end());
  std::vector<double> bound(x.size(), 0.0);
  for (uint64_t t = 0; t < T; ++t) {
    for (uint64_t h = 0; h < heads; ++h) {
      const uint64_t base = t * row_stride + h * D;
      for (uint64_t i = 0; i < D / 2; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        const double cosine = std::cos(static_cast<double>(angle)) * scaling;
        const double sine = std::sin(static_cast<double>(angle)) * scaling;
        const double a = x[base + i], b = x[base + i + D / 2];
        want[base + i] = a * cosine - b * sine;
        want[base + i + D / 2] = b * cosine + a * sine;
        bound[base + i] = bound[base + i + D / 2] =
            1e-6 * scaling * (std::fabs(a) + std::fabs(b)) + 1e-7;
      }
    }
  }
  c.check = [want, bound](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[0]), want, bound, "axrt_rope_f32");
  };
  return c;
}

KernelCase SiluMul() {
  const uint64_t rows = 6, cols = 37;
  const std::vector<float> gate_up = RandomFloats(rows * 2 * cols, 101, -6.0f, 6.0f);
  KernelCase c;
  c.kernel = "axrt_silu_mul_f32";
  c.description = "[6, 2 x 37]";
  c.grid = {static_cast<uint32_t>(rows), 1, 1};
  c.buffers = {InputBuffer(BytesOf(gate_up)), OutputBuffer(rows * cols * 4)};
  c.scalars = {rows, cols};
  std::vector<double> want(rows * cols), bound(rows * cols);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t j = 0; j < cols; ++j) {
      const double u = gate_up[r * 2 * cols + cols + j];
      want[r * cols + j] = Silu(gate_up[r * 2 * cols + j]) * u;
      bound[r * cols + j] = 1.1e-5 * std::fabs(want[r * cols + j]) + 1e-6 * std::fabs(u);
    }
  }
  c.check = [want, bound](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[1]), want, bound, "axrt_silu_mul_f32");
  };
  return c;
}

// Two sequences of four tokens each (a chunk of prefill at positions 5..8
// and 17..20); the rest of the cache keeps its random contents.
KernelCase KvCacheWrite() {
  const PagedShape s;
  const uint64_t T = 8, per_seq = 4;
  const std::vector<float> qkv = RandomFloats(T * s.row_stride(), 111);
  const std::vector<int32_t> positions = {5, 6, 7, 8, 17, 18, 19, 20};
  const std::vector<int32_t> tables = BlockTables(s, 2, 112);
  const std::vector<float> cache = RandomFloats(s.cache_size(), 113);
  KernelCase c;
  c.kernel = "axrt_kv_cache_write_f32";
  c.description = "2 sequences of 4 tokens, 2 KV heads of 8, blocks of 4";
  c.grid = {static_cast<uint32_t>(T), 1, 1};
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(BytesOf(cache))};
  c.buffers[3].writable = true;
  c.buffers[3].fully_written = false;
  c.scalars = {T,          per_seq,      s.layer,        s.num_blocks, s.kv_heads, s.block_size,
               s.head_dim, s.max_blocks, s.row_stride(), s.k_offset()};
  std::vector<double> want(cache.begin(), cache.end());
  const uint64_t width = s.kv_heads * s.head_dim;
  for (uint64_t t = 0; t < T; ++t) {
    for (uint64_t g = 0; g < s.kv_heads; ++g) {
      for (uint64_t d = 0; d < s.head_dim; ++d) {
        const uint64_t column = t * s.row_stride() + s.k_offset() + g * s.head_dim + d;
        const uint64_t p = static_cast<uint64_t>(positions[t]);
        want[s.Slot(tables, t / per_seq, p, 0, g, d)] = qkv[column];
        want[s.Slot(tables, t / per_seq, p, 1, g, d)] = qkv[column + width];
      }
    }
  }
  c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[3]), want, std::vector<double>(want.size(), 0.0),
              "axrt_kv_cache_write_f32");
  };
  return c;
}

// Attention of query row `row` (positions[row]) of the sequence whose block
// table row is `table_row`, every head, into want/bound [heads x head_dim].
void AttentionReference(const PagedShape& s, const std::vector<float>& qkv,
                        const std::vector<float>& cache, const std::vector<int32_t>& tables,
                        uint64_t table_row, uint64_t row, uint64_t position, float scale,
                        double* want, double* bound) {
  const uint64_t group = s.heads / s.kv_heads;
  for (uint64_t h = 0; h < s.heads; ++h) {
    const uint64_t g = h / group;
    const float* q = qkv.data() + row * s.row_stride() + h * s.head_dim;
    std::vector<double> scores(position + 1);
    double max = -INFINITY;
    for (uint64_t j = 0; j <= position; ++j) {
      double dot = 0.0;
      for (uint64_t d = 0; d < s.head_dim; ++d) {
        dot += double{q[d]} * cache[s.Slot(tables, table_row, j, 0, g, d)];
      }
      scores[j] = dot * scale;
      max = std::max(max, scores[j]);
    }
    double sum = 0.0;
    for (double& score : scores) sum += (score = std::exp(score - max));
    for (uint64_t d = 0; d < s.head_dim; ++d) {
      double out = 0.0, weighted = 0.0, largest = 0.0;
      for (uint64_t j = 0; j <= position; ++j) {
        const double v = cache[s.Slot(tables, table_row, j, 1, g, d)];
        out += scores[j] / sum * v;
        weighted += scores[j] / sum * std::fabs(v);
        largest = std::max(largest, std::fabs(v));
      }
      want[h * s.head_dim + d] = out;
      bound[h * s.head_dim + d] = 1e-5 * (weighted + largest) + 1e-6;
    }
  }
}

// Prefill: 20 queries at positions 5..24 (two query tiles, the second
// partial) over a cache whose earlier positions hold random keys and
// values. Decode: three sequences at positions 0, 9 and 22.
KernelCase Attention(bool prefill) {
  const PagedShape s;
  const uint64_t rows = prefill ? 20 : 3;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> qkv = RandomFloats(rows * s.row_stride(), prefill ? 121 : 131);
  const std::vector<float> cache = RandomFloats(s.cache_size(), prefill ? 122 : 132, -2.0f, 2.0f);
  std::vector<int32_t> positions;
  if (prefill) {
    for (uint64_t t = 0; t < rows; ++t) positions.push_back(static_cast<int32_t>(5 + t));
  } else {
    positions = {0, 9, 22};
  }
  const std::vector<int32_t> tables = BlockTables(s, prefill ? 1 : rows, prefill ? 123 : 133);
  KernelCase c;
  c.kernel = prefill ? "axrt_attention_prefill_f32" : "axrt_attention_decode_f32";
  c.description = prefill ? "20 queries at positions 5..24, 4 heads over 2 KV heads of 8"
                          : "3 sequences at positions 0, 9, 22, 4 heads over 2 KV heads of 8";
  c.grid = prefill ? axrt_kernel_dim3_t{CeilDiv(rows, 16), static_cast<uint32_t>(s.heads), 1}
                   : axrt_kernel_dim3_t{static_cast<uint32_t>(rows),
                                        static_cast<uint32_t>(s.kv_heads), 1};
  const uint64_t width = s.heads * s.head_dim;
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(BytesOf(cache)),
               OutputBuffer(rows * width * 4)};
  c.scalars = {rows,         s.heads,      s.kv_heads,   s.head_dim,     s.layer,
               s.num_blocks, s.block_size, s.max_blocks, s.row_stride(), F32Bits(scale)};
  std::vector<double> want(rows * width), bound(rows * width);
  for (uint64_t r = 0; r < rows; ++r) {
    AttentionReference(s, qkv, cache, tables, prefill ? 0 : r, r,
                       static_cast<uint64_t>(positions[r]), scale, &want[r * width],
                       &bound[r * width]);
  }
  const std::string name = c.kernel;
  c.check = [want, bound, name](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[4]), want, bound, name);
  };
  return c;
}

// The bf16 and fp8 e4m3 KV caches (docs/kernels.md, "KV cache"), with the
// suite's own rounding: bf16 to nearest even from the two neighbours, fp8 the
// nearest of the 127 finite magnitudes (ties to the even code).
enum class LowKv { kBf16, kFp8 };

double E4m3Value(int code) {
  const int exponent = (code >> 3) & 0xf, mantissa = code & 7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

uint8_t E4m3Nearest(float x) {
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  for (int code = 1; code <= 0x7e; ++code) {
    const double d = std::fabs(E4m3Value(code) - a), b = std::fabs(E4m3Value(best) - a);
    if (d < b || (d == b && code % 2 == 0)) best = code;
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

uint16_t Bf16Nearest(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t low = bits & 0xffff0000u, high = low + 0x10000u;
  float below, above;
  std::memcpy(&below, &low, 4);
  std::memcpy(&above, &high, 4);
  const double d_low = std::fabs(double{x} - below), d_high = std::fabs(double{x} - above);
  const bool up = d_high < d_low || (d_high == d_low && ((low >> 16) & 1) != 0);
  return static_cast<uint16_t>((up ? high : low) >> 16);
}

// Bytes of one (layer, keys or values, block, KV head) run, and where element
// d of row `slot` (fp8: and the row's scale) lives in the cache.
struct LowLayout {
  PagedShape s;
  LowKv kind;
  uint64_t run() const {
    return kind == LowKv::kBf16 ? s.block_size * s.head_dim * 2
                                : s.block_size * (s.head_dim + 4);
  }
  uint64_t bytes() const { return s.layers * 2 * s.num_blocks * s.kv_heads * run(); }
  uint64_t Base(uint64_t layer, uint64_t kv, uint64_t block, uint64_t g) const {
    return (((layer * 2 + kv) * s.num_blocks + block) * s.kv_heads + g) * run();
  }
  uint64_t Element(uint64_t base, uint64_t slot, uint64_t d) const {
    return base + (slot * s.head_dim + d) * (kind == LowKv::kBf16 ? 2 : 1);
  }
  uint64_t Scale(uint64_t base, uint64_t slot) const {
    return base + s.block_size * s.head_dim + slot * 4;
  }
};

// `cache` with the keys and values of every token of `qkv` stored at its
// position's slot as `kind` stores them (nullopt: f32, as they are), for
// `per_seq` tokens a block-table row.
std::vector<uint8_t> StoredCache(const LowLayout& layout, std::optional<LowKv> kind,
                                 std::vector<uint8_t> cache, const std::vector<float>& qkv,
                                 const std::vector<int32_t>& positions,
                                 const std::vector<int32_t>& tables, uint64_t per_seq) {
  const PagedShape& s = layout.s;
  for (uint64_t t = 0; t < positions.size(); ++t) {
    const uint64_t p = static_cast<uint64_t>(positions[t]);
    const uint64_t block =
        static_cast<uint64_t>(tables[(t / per_seq) * s.max_blocks + p / s.block_size]);
    const uint64_t slot = p % s.block_size;
    for (uint64_t kv = 0; kv < 2; ++kv) {
      for (uint64_t g = 0; g < s.kv_heads; ++g) {
        const float* row = qkv.data() + t * s.row_stride() + s.k_offset() +
                           (kv * s.kv_heads + g) * s.head_dim;
        if (!kind) {
          for (uint64_t d = 0; d < s.head_dim; ++d) {
            std::memcpy(&cache[s.Slot(tables, t / per_seq, p, kv, g, d) * 4], &row[d], 4);
          }
          continue;
        }
        const uint64_t base = layout.Base(s.layer, kv, block, g);
        if (*kind == LowKv::kBf16) {
          for (uint64_t d = 0; d < s.head_dim; ++d) {
            const uint16_t h = Bf16Nearest(row[d]);
            std::memcpy(&cache[layout.Element(base, slot, d)], &h, 2);
          }
          continue;
        }
        float amax = 0.0f;
        for (uint64_t d = 0; d < s.head_dim; ++d) amax = std::max(amax, std::fabs(row[d]));
        const float scale = amax / 448.0f;
        for (uint64_t d = 0; d < s.head_dim; ++d) {
          cache[layout.Element(base, slot, d)] = scale == 0.0f ? 0 : E4m3Nearest(row[d] / scale);
        }
        std::memcpy(&cache[layout.Scale(base, slot)], &scale, 4);
      }
    }
  }
  return cache;
}

// Two sequences of four tokens into a cache of random bytes; the rows
// written must be the rounded keys and values, every other byte kept.
KernelCase KvCacheWriteLow(LowKv kind) {
  LowLayout layout{PagedShape{}, kind};
  PagedShape& s = layout.s;
  s.head_dim = 16;
  const uint64_t T = 8, per_seq = 4;
  std::vector<float> qkv = RandomFloats(T * s.row_stride(), 151, -30.0f, 30.0f);
  // A row of zeros (scale 0, codes 0).
  std::fill_n(qkv.begin() + static_cast<long>(s.k_offset()), s.head_dim, 0.0f);
  const std::vector<int32_t> positions = {5, 6, 7, 8, 17, 18, 19, 20};
  const std::vector<int32_t> tables = BlockTables(s, 2, 152);
  std::vector<uint8_t> cache(layout.bytes());
  std::mt19937 random(153);
  for (uint8_t& b : cache) b = static_cast<uint8_t>(random());
  KernelCase c;
  c.kernel = kind == LowKv::kBf16 ? "axrt_kv_cache_write_bf16" : "axrt_kv_cache_write_fp8_e4m3";
  c.description = "2 sequences of 4 tokens, 2 KV heads of 16, blocks of 4";
  c.grid = {static_cast<uint32_t>(T), 1, 1};
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(cache)};
  c.buffers[3].writable = true;
  c.buffers[3].fully_written = false;
  c.scalars = {T,          per_seq,      s.layer,        s.num_blocks, s.kv_heads, s.block_size,
               s.head_dim, s.max_blocks, s.row_stride(), s.k_offset()};
  const std::vector<uint8_t> want =
      StoredCache(layout, kind, cache, qkv, positions, tables, per_seq);
  c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
    CHECK(buffers[3] == want);
  };
  return c;
}

// Rope then the cache write, fused: the rotated row within rope's bound of
// the double-precision rotation, and the cache rows exactly the rotated keys
// and the values as the cache's element type stores them (f32 as they are),
// every other byte of the cache kept.
KernelCase RopeKvCacheWrite(std::optional<LowKv> kind) {
  LowLayout layout{PagedShape{}, kind.value_or(LowKv::kBf16)};
  PagedShape& s = layout.s;
  s.head_dim = 16;
  const uint64_t T = 8, per_seq = 4, rotated = s.heads + s.kv_heads;
  const float scaling = 1.25f;
  const std::vector<float> qkv = RandomFloats(T * s.row_stride(), 171, -3.0f, 3.0f);
  const std::vector<int32_t> positions = {5, 6, 7, 8, 17, 18, 19, 20};
  const std::vector<int32_t> tables = BlockTables(s, 2, 172);
  std::vector<float> inv_freq(s.head_dim / 2);
  for (uint64_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) /
                                                           static_cast<double>(s.head_dim)));
  }
  std::vector<uint8_t> cache(kind ? layout.bytes() : s.cache_size() * 4);
  std::mt19937 random(173);
  for (uint8_t& b : cache) b = static_cast<uint8_t>(random());
  KernelCase c;
  c.kernel = !kind                  ? "axrt_rope_kv_cache_write_f32"
             : *kind == LowKv::kBf16 ? "axrt_rope_kv_cache_write_bf16"
                                     : "axrt_rope_kv_cache_write_fp8_e4m3";
  c.description = "2 sequences of 4 tokens, 4 + 2 heads of 16 rotated, blocks of 4";
  c.grid = {static_cast<uint32_t>(T), 1, 1};
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(inv_freq)), InputBuffer(BytesOf(tables)), InputBuffer(cache)};
  c.buffers[0].writable = true;
  c.buffers[0].fully_written = false;
  c.buffers[4].writable = true;
  c.buffers[4].fully_written = false;
  c.scalars = {T,          per_seq,      rotated,        s.layer,      s.num_blocks,
               s.kv_heads, s.block_size, s.head_dim,     s.max_blocks, s.row_stride(),
               s.k_offset(), F32Bits(scaling)};
  std::vector<double> want(qkv.begin(), qkv.end()), bound(qkv.size(), 0.0);
  const uint64_t half = s.head_dim / 2;
  for (uint64_t t = 0; t < T; ++t) {
    for (uint64_t h = 0; h < rotated; ++h) {
      const uint64_t base = t * s.row_stride() + h * s.head_dim;
      for (uint64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        const double cosine = std::cos(static_cast<double>(angle)) * scaling;
        const double sine = std::sin(static_cast<double>(angle)) * scaling;
        const double a = qkv[base + i], b = qkv[base + i + half];
        want[base + i] = a * cosine - b * sine;
        want[base + i + half] = b * cosine + a * sine;
        bound[base + i] = bound[base + i + half] =
            1e-6 * scaling * (std::fabs(a) + std::fabs(b)) + 1e-7;
      }
    }
  }
  c.check = [=](std::span<const std::vector<uint8_t>> buffers) {
    const std::vector<float> rows = ValuesOf<float>(buffers[0]);
    CheckNear(rows, want, bound, c.kernel + " (qkv)");
    // What the cache must hold: `cache` with each token's rotated keys and
    // its values (from the kernel's own qkv) stored at its slot.
    CHECK(buffers[4] == StoredCache(layout, kind, cache, rows, positions, tables, per_seq));
  };
  return c;
}

// A cache of random bf16 patterns or fp8 codes and scales (`bytes`), and the
// f32 values they stand for, indexed as PagedShape::Slot indexes an f32 cache.
struct LowCache {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

LowCache RandomLowCache(const LowLayout& layout, uint32_t seed) {
  const PagedShape& s = layout.s;
  const LowKv kind = layout.kind;
  LowCache cache{std::vector<uint8_t>(layout.bytes()), std::vector<float>(s.cache_size())};
  std::mt19937 random(seed);
  for (uint64_t layer = 0; layer < s.layers; ++layer) {
    for (uint64_t kv = 0; kv < 2; ++kv) {
      for (uint64_t block = 0; block < s.num_blocks; ++block) {
        for (uint64_t g = 0; g < s.kv_heads; ++g) {
          const uint64_t base = layout.Base(layer, kv, block, g);
          for (uint64_t slot = 0; slot < s.block_size; ++slot) {
            const float row_scale = 0.001f + 0.01f * static_cast<float>(random() % 100);
            if (kind == LowKv::kFp8) {
              std::memcpy(&cache.bytes[layout.Scale(base, slot)], &row_scale, 4);
            }
            for (uint64_t d = 0; d < s.head_dim; ++d) {
              const uint64_t at = ((((layer * 2 + kv) * s.num_blocks + block) * s.kv_heads + g) *
                                       s.block_size + slot) * s.head_dim + d;
              if (kind == LowKv::kBf16) {
                // Magnitudes in [2^-3, 2^2), either sign.
                const uint16_t h = static_cast<uint16_t>(((random() % 2) << 15) |
                                                         ((124 + random() % 5) << 7) |
                                                         (random() % 128));
                std::memcpy(&cache.bytes[layout.Element(base, slot, d)], &h, 2);
                const uint32_t bits = static_cast<uint32_t>(h) << 16;
                std::memcpy(&cache.values[at], &bits, 4);
              } else {
                int code = static_cast<int>(random() % 254);
                code += code >= 0x7f ? 1 : 0;  // no NaN code
                cache.bytes[layout.Element(base, slot, d)] = static_cast<uint8_t>(code);
                cache.values[at] = static_cast<float>(E4m3Value(code)) * row_scale;
              }
            }
          }
        }
      }
    }
  }
  return cache;
}

// Decode over a cache of random bf16 patterns or fp8 codes and scales: the
// f32 bound of attention over the values they stand for.
KernelCase AttentionLow(LowKv kind) {
  LowLayout layout{PagedShape{}, kind};
  PagedShape& s = layout.s;
  s.head_dim = 16;
  const uint64_t rows = 3;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> qkv = RandomFloats(rows * s.row_stride(), 161);
  const std::vector<int32_t> positions = {0, 9, 22};
  const std::vector<int32_t> tables = BlockTables(s, rows, 162);
  const LowCache cache = RandomLowCache(layout, 163);
  KernelCase c;
  c.kernel = kind == LowKv::kBf16 ? "axrt_attention_decode_kv_bf16"
                                  : "axrt_attention_decode_kv_fp8_e4m3";
  c.description = "3 sequences at positions 0, 9, 22, 4 heads over 2 KV heads of 16";
  c.grid = {static_cast<uint32_t>(rows), static_cast<uint32_t>(s.kv_heads), 1};
  const uint64_t width = s.heads * s.head_dim;
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(cache.bytes),
               OutputBuffer(rows * width * 4)};
  c.scalars = {rows,         s.heads,      s.kv_heads,   s.head_dim,     s.layer,
               s.num_blocks, s.block_size, s.max_blocks, s.row_stride(), F32Bits(scale)};
  std::vector<double> want(rows * width), bound(rows * width);
  for (uint64_t r = 0; r < rows; ++r) {
    AttentionReference(s, qkv, cache.values, tables, r, r, static_cast<uint64_t>(positions[r]),
                       scale, &want[r * width], &bound[r * width]);
  }
  const std::string name = c.kernel;
  c.check = [want, bound, name](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[4]), want, bound, name);
  };
  return c;
}

// Flash attention (docs/kernels.md, "Flash attention"): a prefill chunk of 17
// tokens at positions 3..19 of one sequence (two workgroups, the second of
// one token) and three decode tokens at positions 0, 9, 22 of others, a
// block-table row a token, over an f32 cache or one of random bf16 or fp8
// contents. Against double over bf16(q) and the keys and values as the
// kernel reads them (an f32 cache's rounded to bf16): within 2^-8 sum_j w_j
// |v_j| plus the f32 attention bound, taken here as the f32 bound times
// 1 + 2^-8 / 1e-5, which covers it.
KernelCase AttentionFlash(std::optional<LowKv> kind) {
  LowLayout layout{PagedShape{}, kind.value_or(LowKv::kBf16)};
  PagedShape& s = layout.s;
  s.head_dim = 16;
  const uint64_t rows = 20;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> qkv = RandomFloats(rows * s.row_stride(), 171, -2.0f, 2.0f);
  std::vector<int32_t> positions;
  for (int32_t t = 0; t < 17; ++t) positions.push_back(3 + t);
  for (const int32_t p : {0, 9, 22}) positions.push_back(p);
  const std::vector<int32_t> sequences = BlockTables(s, 4, 172);
  std::vector<int32_t> tables;
  for (uint64_t t = 0; t < rows; ++t) {
    const uint64_t sequence = t < 17 ? 0 : t - 16;
    tables.insert(tables.end(), sequences.begin() + sequence * s.max_blocks,
                  sequences.begin() + (sequence + 1) * s.max_blocks);
  }
  const auto bf16 = [](float x) {
    const uint32_t bits = uint32_t{Bf16Nearest(x)} << 16;
    float widened;
    std::memcpy(&widened, &bits, 4);
    return widened;
  };
  std::vector<uint8_t> bytes;
  std::vector<float> read;
  if (kind) {
    LowCache cache = RandomLowCache(layout, 173);
    bytes = std::move(cache.bytes);
    read = std::move(cache.values);
  } else {
    const std::vector<float> cache = RandomFloats(s.cache_size(), 173, -2.0f, 2.0f);
    bytes = BytesOf(cache);
    read = cache;
    for (float& x : read) x = bf16(x);
  }
  std::vector<float> rounded_q = qkv;
  for (float& x : rounded_q) x = bf16(x);
  KernelCase c;
  c.kernel = !kind                  ? "axrt_attention_flash_f32"
             : *kind == LowKv::kBf16 ? "axrt_attention_flash_kv_bf16"
                                     : "axrt_attention_flash_kv_fp8_e4m3";
  c.description = "17 tokens at positions 3..19 and 3 at 0, 9, 22, 4 heads over 2 KV heads of 16";
  c.grid = {CeilDiv(rows, 16), static_cast<uint32_t>(s.kv_heads), 1};
  const uint64_t width = s.heads * s.head_dim;
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(bytes), OutputBuffer(rows * width * 4)};
  c.scalars = {rows,         s.heads,      s.kv_heads,   s.head_dim,     s.layer,
               s.num_blocks, s.block_size, s.max_blocks, s.row_stride(), F32Bits(scale)};
  std::vector<double> want(rows * width), bound(rows * width);
  for (uint64_t r = 0; r < rows; ++r) {
    AttentionReference(s, rounded_q, read, tables, r, r, static_cast<uint64_t>(positions[r]),
                       scale, &want[r * width], &bound[r * width]);
  }
  for (double& b : bound) b *= 1.0 + 0x1p-8 / 1e-5;
  const std::string name = c.kernel;
  c.check = [want, bound, name](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[4]), want, bound, name);
  };
  return c;
}

// Split decode (docs/kernels.md, "Split attention"): three sequences at
// positions 0, 9 and 22 in 3 chunks each (chunks of 4, 4 and 8 positions:
// empty chunks, and one ending mid-block), over an f32 cache or one of
// random bf16 or fp8 contents. Each record {m, l, acc} against double over
// its chunk: an empty one exactly {-inf, 0, 0 ...}; m within the scores'
// f32 bound E, l within a factor exp(+-2E) (and rounding) of its value, and
// acc / l within the attention bound of the chunk.
KernelCase AttentionSplit(std::optional<LowKv> kind) {
  LowLayout layout{PagedShape{}, kind.value_or(LowKv::kBf16)};
  PagedShape& s = layout.s;
  if (kind) s.head_dim = 16;
  const uint64_t rows = 3, splits = 3, stride = s.head_dim + 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> qkv = RandomFloats(rows * s.row_stride(), 181);
  const std::vector<int32_t> positions = {0, 9, 22};
  const std::vector<int32_t> tables = BlockTables(s, rows, 182);
  LowCache cache;
  if (kind) {
    cache = RandomLowCache(layout, 183);
  } else {
    cache.values = RandomFloats(s.cache_size(), 183, -2.0f, 2.0f);
    cache.bytes = BytesOf(cache.values);
  }
  KernelCase c;
  c.kernel = !kind                  ? "axrt_attention_decode_split_f32"
             : *kind == LowKv::kBf16 ? "axrt_attention_decode_split_kv_bf16"
                                     : "axrt_attention_decode_split_kv_fp8_e4m3";
  c.description = "3 sequences at positions 0, 9, 22 in 3 chunks, 4 heads over 2 KV heads of " +
                  std::to_string(s.head_dim) + ", blocks of 4";
  c.grid = {static_cast<uint32_t>(rows), static_cast<uint32_t>(s.kv_heads),
            static_cast<uint32_t>(splits)};
  c.buffers = {InputBuffer(BytesOf(qkv)), InputBuffer(BytesOf(positions)),
               InputBuffer(BytesOf(tables)), InputBuffer(cache.bytes),
               OutputBuffer(rows * s.heads * splits * stride * 4)};
  c.scalars = {rows,         s.heads,        s.kv_heads,     s.head_dim,
               s.layer,      s.num_blocks,   s.block_size,   s.max_blocks,
               s.row_stride(), F32Bits(scale), splits};
  const std::vector<float> values = cache.values;
  const std::string name = c.kernel;
  c.check = [=](std::span<const std::vector<uint8_t>> buffers) {
    const std::vector<float> got = ValuesOf<float>(buffers[4]);
    const uint64_t group = s.heads / s.kv_heads;
    size_t bad = 0;
    std::string first;
    auto fail = [&](uint64_t r, uint64_t h, uint64_t split, const std::string& what) {
      if (bad++ == 0) {
        first = "sequence " + std::to_string(r) + ", head " + std::to_string(h) + ", chunk " +
                std::to_string(split) + ": " + what;
      }
    };
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t n = static_cast<uint64_t>(positions[r]) + 1;
      const uint64_t chunk = ((n + splits - 1) / splits + s.block_size - 1) / s.block_size *
                             s.block_size;
      for (uint64_t h = 0; h < s.heads; ++h) {
        const float* q = qkv.data() + r * s.row_stride() + h * s.head_dim;
        for (uint64_t split = 0; split < splits; ++split) {
          const float* record = got.data() + ((r * s.heads + h) * splits + split) * stride;
          const uint64_t begin = std::min(split * chunk, n), end = std::min(begin + chunk, n);
          if (begin == end) {
            bool empty = record[0] == -INFINITY;
            for (uint64_t i = 1; i < stride; ++i) empty = empty && record[i] == 0.0f;
            if (!empty) fail(r, h, split, "an empty chunk's record is not {-inf, 0, 0 ...}");
            continue;
          }
          std::vector<double> scores;
          double m = -INFINITY, spread = 0.0;
          for (uint64_t j = begin; j < end; ++j) {
            double dot = 0.0, magnitude = 0.0;
            for (uint64_t d = 0; d < s.head_dim; ++d) {
              const double k = values[s.Slot(tables, r, j, 0, h / group, d)];
              dot += double{q[d]} * k;
              magnitude += std::fabs(double{q[d]} * k);
            }
            scores.push_back(dot * scale);
            m = std::max(m, dot * scale);
            spread = std::max(spread, 1e-5 * scale * magnitude + 1e-7);
          }
          double l = 0.0;
          for (double& score : scores) l += (score = std::exp(score - m));
          if (!(std::fabs(record[0] - m) <= spread)) fail(r, h, split, "m is off");
          if (!(std::fabs(record[1] / l - 1.0) <= std::expm1(2 * spread) + 1e-5)) {
            fail(r, h, split, "l is off");
          }
          for (uint64_t d = 0; d < s.head_dim; ++d) {
            double out = 0.0, weighted = 0.0, largest = 0.0;
            for (uint64_t j = begin; j < end; ++j) {
              const double v = values[s.Slot(tables, r, j, 1, h / group, d)];
              out += scores[j - begin] / l * v;
              weighted += scores[j - begin] / l * std::fabs(v);
              largest = std::max(largest, std::fabs(v));
            }
            const double normalised = double{record[2 + d]} / record[1];
            if (!(std::fabs(normalised - out) <= 1e-5 * (weighted + largest) + 1e-6)) {
              fail(r, h, split, "acc / l is off at element " + std::to_string(d));
            }
          }
        }
      }
    }
    INFO(name << ": " << bad << " checks of the records fail; the first: " << first);
    CHECK(bad == 0u);
  };
  return c;
}

// Records of 5 chunks, 2 of them empty, for 2 tokens of 3 heads of 24: the
// combine within f32 rounding of the double one.
KernelCase AttentionCombine() {
  const uint64_t B = 2, heads = 3, splits = 5, D = 24, stride = D + 2;
  std::vector<float> records = RandomFloats(B * heads * splits * stride, 191, -8.0f, 8.0f);
  for (uint64_t i = 0; i < B * heads * splits; ++i) {
    float* record = records.data() + i * stride;
    record[1] = std::fabs(record[1]) + 1.0f;
    if (i % splits == 1 || i % splits == 4) {  // empty
      record[0] = -INFINITY;
      std::fill_n(record + 1, D + 1, 0.0f);
    }
  }
  KernelCase c;
  c.kernel = "axrt_attention_combine_f32";
  c.description = "2 tokens, 3 heads of 24, 5 chunks (2 empty)";
  c.grid = {static_cast<uint32_t>(B), static_cast<uint32_t>(heads), 1};
  c.buffers = {InputBuffer(BytesOf(records)), OutputBuffer(B * heads * D * 4)};
  c.scalars = {B, heads, D, splits};
  std::vector<double> want(B * heads * D), bound(B * heads * D);
  for (uint64_t t = 0; t < B * heads; ++t) {
    const float* r = records.data() + t * splits * stride;
    double top = -INFINITY, sum = 0.0;
    for (uint64_t s = 0; s < splits; ++s) top = std::max(top, double{r[s * stride]});
    for (uint64_t s = 0; s < splits; ++s) sum += r[s * stride + 1] * std::exp(r[s * stride] - top);
    for (uint64_t d = 0; d < D; ++d) {
      double out = 0.0, magnitude = 0.0;
      for (uint64_t s = 0; s < splits; ++s) {
        const double term = r[s * stride + 2 + d] * std::exp(r[s * stride] - top);
        out += term;
        magnitude += std::fabs(term);
      }
      want[t * D + d] = out / sum;
      bound[t * D + d] = 1e-5 * magnitude / sum + 1e-6;
    }
  }
  c.check = [want, bound](std::span<const std::vector<uint8_t>> buffers) {
    CheckNear(ValuesOf<float>(buffers[1]), want, bound, "axrt_attention_combine_f32");
  };
  return c;
}

uint64_t Mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The sampling steps of docs/llm.md ("Sampling") in double.
int32_t SampleReference(const float* logits, uint64_t V, float temperature, int32_t top_k,
                        float top_p, uint64_t seed, int32_t position) {
  uint64_t greedy = 0;
  for (uint64_t i = 1; i < V; ++i) {
    if (logits[i] > logits[greedy]) greedy = i;
  }
  const double l_max = logits[greedy];
  if (!(temperature > 0.0f) || top_k == 1) return static_cast<int32_t>(greedy);
  std::vector<double> w(V);
  for (uint64_t i = 0; i < V; ++i) w[i] = std::exp((logits[i] - l_max) / double{temperature});
  std::vector<uint64_t> ranked(V);
  for (uint64_t i = 0; i < V; ++i) ranked[i] = i;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](uint64_t a, uint64_t b) { return logits[a] > logits[b]; });
  uint64_t k = top_k > 0 && static_cast<uint64_t>(top_k) < V ? static_cast<uint64_t>(top_k) : V;
  if (top_p < 1.0f) {
    double total = 0.0;
    for (uint64_t i = 0; i < k; ++i) total += w[ranked[i]];
    double running = 0.0;
    for (uint64_t i = 0; i < k; ++i) {
      running += w[ranked[i]];
      if (running >= double{top_p} * total) {
        k = i + 1;
        break;
      }
    }
  }
  std::vector<double> kept(V, 0.0);
  for (uint64_t i = 0; i < k; ++i) kept[ranked[i]] = w[ranked[i]];
  double sum = 0.0;
  for (double& value : kept) sum = value += sum;
  const uint64_t step = static_cast<uint64_t>(static_cast<uint32_t>(position)) + 1;
  const double u =
      static_cast<double>(Mix64(Mix64(seed) + step * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
  for (uint64_t i = 0; i < V; ++i) {
    if (kept[i] > u * sum) return static_cast<int32_t>(i);
  }
  return -1;  // never for these inputs: the case checks it
}

// Greedy, top-k = 1, full sampling, top-k with top-p, and top-p alone.
KernelCase Sample() {
  const uint64_t B = 5, V = 300;
  const std::vector<float> logits = RandomFloats(B * V, 141, -4.0f, 4.0f);
  const std::vector<float> temperature = {0.0f, 0.7f, 0.8f, 1.2f, 0.5f};
  const std::vector<int32_t> top_k = {0, 1, 0, 20, 0};
  const std::vector<float> top_p = {1.0f, 1.0f, 1.0f, 0.9f, 0.6f};
  const std::vector<uint64_t> seeds = {1, 2, 0x0123456789abcdefull, 42, 7};
  const std::vector<int32_t> positions = {0, 3, 17, 1000, 5};
  KernelCase c;
  c.kernel = "axrt_sample_f32";
  c.description = "B = 5, V = 300";
  c.grid = {static_cast<uint32_t>(B), 1, 1};
  c.buffers = {InputBuffer(BytesOf(logits)), InputBuffer(BytesOf(temperature)),
               InputBuffer(BytesOf(top_k)),  InputBuffer(BytesOf(top_p)),
               InputBuffer(BytesOf(seeds)),  InputBuffer(BytesOf(positions)),
               OutputBuffer(B * sizeof(int32_t))};
  c.scalars = {B, V};
  std::vector<int32_t> want(B);
  for (uint64_t b = 0; b < B; ++b) {
    want[b] = SampleReference(logits.data() + b * V, V, temperature[b], top_k[b], top_p[b],
                              seeds[b], positions[b]);
  }
  c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
    CHECK(std::find(want.begin(), want.end(), -1) == want.end());
    CHECK(ValuesOf<int32_t>(buffers[6]) == want);
  };
  return c;
}

// The logit bias, the repetition, frequency and presence penalties and min_p,
// in place (docs/llm.md, "Logits processing"): every row lists tokens (so
// that each workgroup changes its row), one with min_p.
KernelCase LogitsProcess() {
  const uint64_t B = 4, V = 200, E = 6;
  const std::vector<float> logits = RandomFloats(B * V, 151, -4.0f, 4.0f);
  const std::vector<float> temperature = {1.0f, 0.0f, 0.7f, 1.3f};
  const std::vector<float> repetition = {1.0f, 1.5f, 0.8f, 2.0f};
  const std::vector<float> frequency = {0.0f, 0.5f, -0.3f, 1.0f};
  const std::vector<float> presence = {0.0f, 1.0f, 0.2f, -0.5f};
  const std::vector<float> min_p = {0.0f, 0.5f, 0.0f, 0.2f};  // row 1 is greedy: no mask
  std::vector<int32_t> tokens(B * E, -1), counts(B * E, 0), in_prompt(B * E, 0);
  std::vector<float> bias(B * E, 0.0f);
  for (uint64_t b = 0; b < B; ++b) {
    for (uint64_t e = 0; e < E - b; ++e) {  // row b lists E - b tokens
      const uint64_t i = b * E + e;
      tokens[i] = static_cast<int32_t>((37 * b + 29 * e + 3) % V);
      counts[i] = static_cast<int32_t>((b + e) % 3);
      in_prompt[i] = static_cast<int32_t>(e % 2);
      bias[i] = 5.0f - 2.5f * static_cast<float>(e);
    }
  }
  KernelCase c;
  c.kernel = "axrt_logits_process_f32";
  c.description = "B = 4, V = 200, E = 6";
  c.grid = {static_cast<uint32_t>(B), 1, 1};
  c.buffers = {InputBuffer(BytesOf(logits)),     InputBuffer(BytesOf(temperature)),
               InputBuffer(BytesOf(repetition)), InputBuffer(BytesOf(frequency)),
               InputBuffer(BytesOf(presence)),   InputBuffer(BytesOf(min_p)),
               InputBuffer(BytesOf(tokens)),     InputBuffer(BytesOf(counts)),
               InputBuffer(BytesOf(in_prompt)),  InputBuffer(BytesOf(bias))};
  // The logits change in place, and only where a row says so.
  c.buffers[0].writable = true;
  c.buffers[0].fully_written = false;
  c.scalars = {B, V, E};
  // The documented steps, in double, each listed logit rounded to f32 once.
  std::vector<float> want = logits;
  for (uint64_t b = 0; b < B; ++b) {
    float* row = want.data() + b * V;
    for (uint64_t e = 0; e < E; ++e) {
      const uint64_t i = b * E + e;
      if (tokens[i] < 0) continue;
      double x = static_cast<double>(row[tokens[i]]) + static_cast<double>(bias[i]);
      const double rp = repetition[b];
      if (counts[i] > 0 || in_prompt[i] != 0) x = x > 0.0 ? x / rp : x * rp;
      const double penalty = static_cast<double>(frequency[b]) * counts[i];
      x = x - penalty;
      if (counts[i] > 0) x = x - static_cast<double>(presence[b]);
      row[tokens[i]] = static_cast<float>(x);
    }
    if (min_p[b] > 0.0f && temperature[b] > 0.0f) {
      const float top = *std::max_element(row, row + V);
      const double log_min_p = std::log(static_cast<double>(min_p[b]));
      const double threshold = static_cast<double>(top) + temperature[b] * log_min_p;
      for (uint64_t v = 0; v < V; ++v) {
        if (static_cast<double>(row[v]) < threshold) row[v] = -INFINITY;
      }
    }
  }
  c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
    const std::vector<float> got = ValuesOf<float>(buffers[0]);
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    // Row 3's min_p masked some of it; row 1 (greedy) none.
    CHECK(std::count(got.begin() + 3 * 200, got.end(), -INFINITY) > 0);
    CHECK(std::count(got.begin() + 200, got.begin() + 400, -INFINITY) == 0);
  };
  return c;
}

std::vector<KernelCase> BuiltinCases() {
  std::vector<KernelCase> cases;
  cases.push_back(ElementwiseBinary("axrt_add_f32", false));
  cases.push_back(ElementwiseBinary("axrt_mul_f32", true));
  cases.push_back(ElementwiseUnary("axrt_gelu_f32", Gelu));
  cases.push_back(ElementwiseUnary("axrt_silu_f32", Silu));
  cases.push_back(Softmax());
  cases.push_back(Norm(true));
  cases.push_back(Norm(false));
  cases.push_back(AddRmsNorm());
  cases.push_back(MatmulF32());
  cases.push_back(MatmulF32Nk());
  cases.push_back(MatmulBf16());
  cases.push_back(MatmulBf16(/*decode=*/true));
  cases.push_back(MatmulBf16DecodeSilu());
  cases.push_back(MatmulBf16TensorCore());
  cases.push_back(MatmulInt8TensorCore());
  cases.push_back(MatmulFp8TensorCore());
  cases.push_back(MatmulAwqInt4TensorCore());
  cases.push_back(MatmulInt8());
  cases.push_back(MatmulInt8(/*decode=*/true));
  cases.push_back(MatmulInt8Q8());
  cases.push_back(MatmulInt4("axrt_matmul_awq_int4_f32", Int4Format::kAwq, &kAwq));
  cases.push_back(MatmulInt4("axrt_matmul_gptq_int4_f32", Int4Format::kGptqV2, &kGptqV2));
  cases.push_back(MatmulInt4("axrt_matmul_gptq_int4_f32_decode", Int4Format::kGptqV2, &kGptqV2,
                             /*decode_cols=*/16));
  cases.push_back(MatmulInt4("axrt_matmul_gptq_v1_int4_f32", Int4Format::kGptqV1, &kGptqV1));
  cases.push_back(MatmulInt4Q8());
  cases.push_back(PrepackedTile64(
      MatmulInt4("axrt_matmul_gptq_int4_f32", Int4Format::kGptqV2, &kGptqV2), &kGptqV2Tile64));
  cases.push_back(PrepackedTile64(MatmulInt4Q8("axrt_matmul_gptq_int4_q8_f32", &kGptqV2, 128),
                                  &kGptqV2Tile64));
  // The same kernels under the names of groups of 64 and 32, each at its group size.
  const struct {
    uint64_t group;
    const axrt_axe_quant_layout_t* awq;
    const axrt_axe_quant_layout_t* gptq_v2;
    const axrt_axe_quant_layout_t* gptq_v1;
  } sizes[] = {{64, &kAwqG64, &kGptqV2G64, &kGptqV1G64}, {32, &kAwqG32, &kGptqV2G32, &kGptqV1G32}};
  for (const auto& size : sizes) {
    const std::string g = "_g" + std::to_string(size.group);
    cases.push_back(MatmulInt4("axrt_matmul_awq_int4" + g + "_f32", Int4Format::kAwq, size.awq,
                               0, size.group));
    cases.push_back(MatmulInt4("axrt_matmul_gptq_int4" + g + "_f32", Int4Format::kGptqV2,
                               size.gptq_v2, 0, size.group));
    cases.push_back(MatmulInt4("axrt_matmul_gptq_int4" + g + "_f32_decode", Int4Format::kGptqV2,
                               size.gptq_v2, /*decode_cols=*/16, size.group));
    cases.push_back(MatmulInt4("axrt_matmul_gptq_v1_int4" + g + "_f32", Int4Format::kGptqV1,
                               size.gptq_v1, 0, size.group));
    cases.push_back(
        MatmulAwqInt4TensorCore("axrt_matmul_awq_int4" + g + "_tc_f32", size.awq, size.group));
    cases.push_back(
        MatmulInt4Q8("axrt_matmul_gptq_int4" + g + "_q8_f32", size.gptq_v2, size.group));
    const axrt_axe_quant_layout_t* tile64 = size.group == 64 ? &kGptqV2G64Tile64 : &kGptqV2G32Tile64;
    cases.push_back(PrepackedTile64(MatmulInt4("axrt_matmul_gptq_int4" + g + "_f32",
                                               Int4Format::kGptqV2, size.gptq_v2, 0, size.group),
                                    tile64));
    cases.push_back(PrepackedTile64(
        MatmulInt4Q8("axrt_matmul_gptq_int4" + g + "_q8_f32", size.gptq_v2, size.group), tile64));
  }
  // Per tensor: one scale. 128 x 128 blocks: N and K past one block, so the
  // scale grid is [2, 2] and both edges are partial.
  cases.push_back(MatmulFp8("axrt_matmul_fp8_e4m3_f32", 67, 72, 40, 0, &kFp8PerTensor));
  cases.push_back(MatmulFp8("axrt_matmul_fp8_e4m3_b128_f32", 5, 136, 200, 128, &kFp8B128));
  cases.push_back(MatmulFp8PerChannel(/*decode=*/false));
  cases.push_back(MatmulFp8PerChannel(/*decode=*/true));
  cases.push_back(Embedding(false));
  cases.push_back(Embedding(true));
  cases.push_back(Rope());
  cases.push_back(SiluMul());
  cases.push_back(KvCacheWrite());
  cases.push_back(Attention(true));
  cases.push_back(Attention(false));
  cases.push_back(KvCacheWriteLow(LowKv::kBf16));
  cases.push_back(KvCacheWriteLow(LowKv::kFp8));
  cases.push_back(AttentionLow(LowKv::kBf16));
  cases.push_back(AttentionLow(LowKv::kFp8));
  cases.push_back(AttentionSplit(std::nullopt));
  cases.push_back(AttentionSplit(LowKv::kBf16));
  cases.push_back(AttentionSplit(LowKv::kFp8));
  cases.push_back(AttentionCombine());
  cases.push_back(AttentionFlash(std::nullopt));
  cases.push_back(AttentionFlash(LowKv::kBf16));
  cases.push_back(AttentionFlash(LowKv::kFp8));
  cases.push_back(RopeKvCacheWrite(std::nullopt));
  cases.push_back(RopeKvCacheWrite(LowKv::kBf16));
  cases.push_back(RopeKvCacheWrite(LowKv::kFp8));
  cases.push_back(Sample());
  cases.push_back(LogitsProcess());
  return cases;
}

TEST_CASE("kernel library kit: the AWQ packer matches the format's worked example", "[cts][kit]") {
  // Codes 1..8 for n = 0..7 give the word 0x86427531 (format §9.2).
  const std::vector<int> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int> z(8, 0);
  CHECK(PackInt4(Int4Format::kAwq, q, z, 1, 8, 1).qweight == std::vector<uint32_t>{0x86427531u});
  // GPTQ packs eight rows of K per word, sequentially: column 0 of rows
  // 0..7 holding 1..8 gives 0x87654321 in word 0.
  std::vector<int> column(64, 0);
  for (int k = 0; k < 8; ++k) column[k * 8] = k + 1;
  CHECK(PackInt4(Int4Format::kGptqV2, column, std::vector<int>(8, 0), 8, 8, 1).qweight[0] ==
        0x87654321u);
  // v1 stores z - 1: symmetric zero points of 8 give 0x77777777.
  CHECK(PackInt4(Int4Format::kGptqV1, std::vector<int>(64, 0), std::vector<int>(8, 8), 8, 8, 1)
            .qzeros == std::vector<uint32_t>{0x77777777u});
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit: the built-in library 'axrt.cpu'", "[cts][kit]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  const axrt_kernel_library_t* library = axrt::kernels::cpu_kernel_library();
  const std::vector<KernelCase> cases = BuiltinCases();
  for (uint32_t k = 0; k < library->kernel_count; ++k) {
    const std::string name = library->kernels[k].name;
    INFO("every built-in kernel has a case: '" << name << "' has none");
    CHECK(std::any_of(cases.begin(), cases.end(),
                      [&](const KernelCase& c) { return c.kernel == name; }));
  }
  KitOptions options;
  options.reach = KitOptions::Reach::kAlreadyRegistered;  // in every instance
  RunKernelLibraryKit(*this, library, cases, options);
}

// ---------------------------------------------------------------------------
// "cts.kernels"
// ---------------------------------------------------------------------------

TEST_CASE_METHOD(DeviceTest, "kernel library kit: the suite's library 'cts.kernels'",
                 "[cts][kit]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  CtsLibrary().init_fails = false;
  CtsLibrary().state_mismatch = false;
  std::vector<KernelCase> cases;
  {
    const uint64_t n = 200;
    const std::vector<float> x = RandomFloats(n, 71), y = RandomFloats(n, 72);
    KernelCase c;
    c.kernel = "cts_axpy";
    c.description = "n = 200, alpha = 2";
    c.grid = {CeilDiv(n, kCtsElementsPerWorkgroup), 1, 1};
    c.buffers = {InputBuffer(BytesOf(x)), InputBuffer(BytesOf(y)), OutputBuffer(n * 4)};
    c.scalars = {n, F32Bits(2.0f)};
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; ++i) want[i] = 2.0 * x[i] + y[i];
    c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
      CheckNear(ValuesOf<float>(buffers[2]), want, RelativeBound(want, 1e-6, 1e-7), "cts_axpy");
    };
    cases.push_back(std::move(c));
  }
  {
    KernelCase c;
    c.kernel = "cts_fail";
    c.description = "no failing workgroup";
    c.grid = {8, 1, 1};
    c.buffers = {OutputBuffer(8 * 4)};
    c.scalars = {1000};
    c.check = [](std::span<const std::vector<uint8_t>> buffers) {
      CHECK(ValuesOf<uint32_t>(buffers[0]) == std::vector<uint32_t>(8, 1));
    };
    cases.push_back(std::move(c));
  }
  {
    // counts[wg] += 1 depends on what the buffer held: not fully written.
    KernelCase c;
    c.kernel = "cts_coverage";
    c.description = "grid (3, 2, 2), 256 bytes of shared memory";
    c.grid = {3, 2, 2};
    c.buffers = {OutputBuffer(12 * 4), OutputBuffer(7 * 4)};
    c.buffers[0].fully_written = false;
    c.dynamic_shared_memory = 256;
    c.check = [](std::span<const std::vector<uint8_t>> buffers) {
      CHECK(ValuesOf<uint32_t>(buffers[0]) == std::vector<uint32_t>(12, 1));
      CHECK(ValuesOf<uint32_t>(buffers[1]) == std::vector<uint32_t>{3, 2, 2, 1, 1, 1, 256});
    };
    cases.push_back(std::move(c));
  }
  // cts_dequant_rows does nothing (it exists for layout matching), so it has
  // no case: the kit warns and checks its table entry only.
  RunKernelLibraryKit(*this, CtsKernelLibrary(), cases);
  CHECK_FALSE(CtsLibrary().state_mismatch);
}

// ---------------------------------------------------------------------------
// The example libraries of examples/custom_kernel
// ---------------------------------------------------------------------------

TEST_CASE_METHOD(DeviceTest,
                 "kernel library kit: the registered example library "
                 "'example.registered'",
                 "[cts][kit]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  std::vector<KernelCase> cases;
  {
    const uint64_t n = 1000;
    const std::vector<float> x = RandomFloats(n, 81), y = RandomFloats(n, 82);
    KernelCase c;
    c.kernel = "example_saxpy_f32";
    c.description = "n = 1000, alpha = -1.5";
    c.grid = {CeilDiv(n, EXAMPLE_ELEMENTS_PER_WORKGROUP), 1, 1};
    c.buffers = {InputBuffer(BytesOf(x)), InputBuffer(BytesOf(y)), OutputBuffer(n * 4)};
    c.scalars = {n, F32Bits(-1.5f)};
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; ++i) want[i] = -1.5 * x[i] + y[i];
    c.check = [want](std::span<const std::vector<uint8_t>> buffers) {
      CheckNear(ValuesOf<float>(buffers[2]), want, RelativeBound(want, 1e-6, 1e-7), "saxpy");
    };
    cases.push_back(std::move(c));
  }
  {
    const uint64_t n = 700;
    const std::vector<float> x = RandomFloats(n, 83);
    KernelCase c;
    c.kernel = "example_clamp_f32";
    c.description = "n = 700, [-0.5, 0.25]";
    c.grid = {CeilDiv(n, EXAMPLE_ELEMENTS_PER_WORKGROUP), 1, 1};
    c.buffers = {InputBuffer(BytesOf(x)), OutputBuffer(n * 4)};
    c.scalars = {n, F32Bits(-0.5f), F32Bits(0.25f)};
    c.check = [x](std::span<const std::vector<uint8_t>> buffers) {
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = std::min(std::max(x[i], -0.5f), 0.25f);
      CHECK(ValuesOf<float>(buffers[1]) == want);
    };
    cases.push_back(std::move(c));
  }
  RunKernelLibraryKit(*this, example_registered_library(), cases);
}

#ifdef AXRT_KIT_EXAMPLE_HOST_LIBRARY
struct DlCloser {
  void operator()(void* handle) const { dlclose(handle); }
};
#endif

TEST_CASE_METHOD(DeviceTest,
                 "kernel library kit: the embedded example library "
                 "'example.embedded'",
                 "[cts][kit]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
#ifndef AXRT_KIT_EXAMPLE_HOST_LIBRARY
  WARN("skipped: the examples are not built (AXRT_BUILD_EXAMPLES=OFF)");
#else
  const char* path = AXRT_KIT_EXAMPLE_HOST_LIBRARY;
  // The direct calls need the table: open the built shared object here too.
  // The runtime loads its own copy from the bytes embedded in the .axe.
  std::unique_ptr<void, DlCloser> handle(dlopen(path, RTLD_NOW | RTLD_LOCAL));
  INFO(path << ": " << (handle ? "" : dlerror()));
  REQUIRE(handle != nullptr);
  auto query = reinterpret_cast<axrt_kernel_library_query_fn_t>(
      dlsym(handle.get(), AXRT_KERNEL_LIBRARY_QUERY_SYMBOL));
  REQUIRE(query != nullptr);
  const axrt_kernel_library_t* library = query(AXRT_KERNEL_ABI_VERSION);
  REQUIRE(library != nullptr);
  CHECK(std::string(library->name) == "example.embedded");

  KitOptions options;
  options.reach = KitOptions::Reach::kEmbedded;
  std::ifstream file(path, std::ios::binary);
  options.host_shared_object.assign(std::istreambuf_iterator<char>(file),
                                    std::istreambuf_iterator<char>());
  REQUIRE(!options.host_shared_object.empty());

  std::vector<KernelCase> cases;
  {
    const uint64_t rows = 37, cols = 50;
    const std::vector<float> in = RandomFloats(rows * cols, 91);
    KernelCase c;
    c.kernel = "example_transpose_f32";
    c.description = "[37, 50]";
    c.grid = {CeilDiv(cols, 16), CeilDiv(rows, 16), 1};
    c.buffers = {InputBuffer(BytesOf(in)), OutputBuffer(rows * cols * 4)};
    c.scalars = {rows, cols};
    c.check = [=](std::span<const std::vector<uint8_t>> buffers) {
      std::vector<float> want(rows * cols);
      for (uint64_t r = 0; r < rows; ++r) {
        for (uint64_t j = 0; j < cols; ++j) want[j * rows + r] = in[r * cols + j];
      }
      CHECK(ValuesOf<float>(buffers[1]) == want);
    };
    cases.push_back(std::move(c));
  }
  {
    const uint32_t n = 1000;
    KernelCase c;
    c.kernel = "example_iota_u32";
    c.description = "n = 1000, start 7, step 5";
    c.grid = {CeilDiv(n, 256), 1, 1};
    c.buffers = {OutputBuffer(n * 4)};
    c.scalars = {n, 7, 5};
    c.check = [=](std::span<const std::vector<uint8_t>> buffers) {
      std::vector<uint32_t> want(n);
      for (uint32_t i = 0; i < n; ++i) want[i] = 7 + 5 * i;
      CHECK(ValuesOf<uint32_t>(buffers[0]) == want);
    };
    cases.push_back(std::move(c));
  }
  RunKernelLibraryKit(*this, library, cases, options);
#endif
}

// ---------------------------------------------------------------------------
// Self-tests: kernels with one defect each, which the kit must fail
// ([!shouldfail]: the test passes when an assertion fails). The broken
// kernels run only as direct calls, into the kit's guarded buffers.
// ---------------------------------------------------------------------------

constexpr uint64_t kBrokenPerWorkgroup = 16;

struct BrokenArgs {
  const float* x;
  float* out;
  uint64_t n;
};

void Range(const axrt_kernel_workgroup_t* workgroup, uint64_t n, uint64_t* begin, uint64_t* end) {
  *begin = workgroup->workgroup_id.x * kBrokenPerWorkgroup;
  *end = std::min(n, *begin + kBrokenPerWorkgroup);
}

// Copies x to out, then writes one element past the end of out.
axrt_kernel_result_t BrokenOutOfBounds(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                       const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const BrokenArgs*>(args);
  uint64_t begin, end;
  Range(workgroup, a.n, &begin, &end);
  for (uint64_t i = begin; i < end; ++i) a.out[i] = a.x[i];
  if (workgroup->workgroup_id.x + 1 == dispatch->workgroup_count.x) a.out[a.n] = 1.0f;
  return AXRT_KERNEL_OK;
}

// Workgroup 1 does nothing.
axrt_kernel_result_t BrokenLazy(const void* args, const axrt_kernel_dispatch_t*,
                                const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const BrokenArgs*>(args);
  if (workgroup->workgroup_id.x == 1) return AXRT_KERNEL_OK;
  uint64_t begin, end;
  Range(workgroup, a.n, &begin, &end);
  for (uint64_t i = begin; i < end; ++i) a.out[i] = a.x[i];
  return AXRT_KERNEL_OK;
}

// Numbers its outputs in the order the workgroups run.
axrt_kernel_result_t BrokenOrder(const void* args, const axrt_kernel_dispatch_t*,
                                 const axrt_kernel_workgroup_t* workgroup) {
  static std::atomic<uint32_t> calls{0};
  const auto& a = *static_cast<const BrokenArgs*>(args);
  uint64_t begin, end;
  Range(workgroup, a.n, &begin, &end);
  const float call = static_cast<float>(calls++ % 1000);
  for (uint64_t i = begin; i < end; ++i) a.out[i] = a.x[i] + call;
  return AXRT_KERNEL_OK;
}

// Uses x as scratch.
axrt_kernel_result_t BrokenWritesInput(const void* args, const axrt_kernel_dispatch_t*,
                                       const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const BrokenArgs*>(args);
  uint64_t begin, end;
  Range(workgroup, a.n, &begin, &end);
  float* x = const_cast<float*>(a.x);
  for (uint64_t i = begin; i < end; ++i) {
    x[i] *= 2.0f;
    a.out[i] = x[i];
  }
  return AXRT_KERNEL_OK;
}

// Writes only the even elements of its range.
axrt_kernel_result_t BrokenSparse(const void* args, const axrt_kernel_dispatch_t*,
                                  const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const BrokenArgs*>(args);
  uint64_t begin, end;
  Range(workgroup, a.n, &begin, &end);
  for (uint64_t i = begin; i < end; i += 2) a.out[i] = a.x[i];
  return AXRT_KERNEL_OK;
}

const axrt_kernel_param_info_t kBrokenParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
const axrt_kernel_param_info_t kBadScalarParams[] = {
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT32, "a.layout"},
};

const axrt_kernel_info_t kBrokenKernels[] = {
    {"out_of_bounds", BrokenOutOfBounds, kBrokenParams, 3, 24},
    {"lazy", BrokenLazy, kBrokenParams, 3, 24},
    {"order", BrokenOrder, kBrokenParams, 3, 24},
    {"writes_input", BrokenWritesInput, kBrokenParams, 3, 24},
    {"sparse", BrokenSparse, kBrokenParams, 3, 24},
};
const axrt_kernel_library_t kBrokenLibrary = {sizeof(axrt_kernel_library_t),
                                              AXRT_KERNEL_ABI_VERSION,
                                              1,
                                              "kit.broken",
                                              kBrokenKernels,
                                              5,
                                              nullptr,
                                              nullptr};

void RunBroken(const DeviceTest& test, const std::string& kernel) {
  const uint64_t n = 40;
  KernelCase c;
  c.kernel = kernel;
  c.grid = {CeilDiv(n, kBrokenPerWorkgroup), 1, 1};
  c.buffers = {InputBuffer(BytesOf(RandomFloats(n, 99))), OutputBuffer(n * 4)};
  c.scalars = {n};
  KitOptions options;
  options.run_through_runtime = false;
  options.check_lifecycle = false;
  RunKernelCase(test, &kBrokenLibrary, c, options);
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: the broken library's table passes",
                 "[cts][kit]") {
  CheckLibraryTable(&kBrokenLibrary);
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: a write past a buffer fails",
                 "[cts][kit][!shouldfail]") {
  RunBroken(*this, "out_of_bounds");
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: a workgroup that writes nothing fails",
                 "[cts][kit][!shouldfail]") {
  RunBroken(*this, "lazy");
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: order-dependent results fail",
                 "[cts][kit][!shouldfail]") {
  RunBroken(*this, "order");
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: a write to a read-only buffer fails",
                 "[cts][kit][!shouldfail]") {
  RunBroken(*this, "writes_input");
}

TEST_CASE_METHOD(DeviceTest, "kernel library kit self-test: output bytes no workgroup writes fail",
                 "[cts][kit][!shouldfail]") {
  RunBroken(*this, "sparse");
}

TEST_CASE("kernel library kit self-test: a wrong args_size fails the table check",
          "[cts][kit][!shouldfail]") {
  axrt_kernel_info_t kernels[1] = {kBrokenKernels[0]};
  kernels[0].args_size = 20;
  axrt_kernel_library_t library = kBrokenLibrary;
  library.kernels = kernels;
  library.kernel_count = 1;
  CheckLibraryTable(&library);
}

TEST_CASE("kernel library kit self-test: a layout_id on a scalar fails the table check",
          "[cts][kit][!shouldfail]") {
  axrt_kernel_info_t kernels[1] = {{"bad_scalar", BrokenLazy, kBadScalarParams, 2, 16}};
  axrt_kernel_library_t library = kBrokenLibrary;
  library.kernels = kernels;
  library.kernel_count = 1;
  CheckLibraryTable(&library);
}

TEST_CASE("kernel library kit self-test: a duplicate kernel name fails the table check",
          "[cts][kit][!shouldfail]") {
  axrt_kernel_info_t kernels[2] = {kBrokenKernels[1], kBrokenKernels[1]};
  axrt_kernel_library_t library = kBrokenLibrary;
  library.kernels = kernels;
  library.kernel_count = 2;
  CheckLibraryTable(&library);
}

}  // namespace
}  // namespace axrt_cts
