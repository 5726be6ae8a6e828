// axrt_mlp_compiler: a tiny compiler from the weights of a 2-layer MLP to an
// .axe executable, written against the public C API only (axrt/format.h).
//
//   y = fc2(gelu(fc1(x))),  fc1: [hidden, in], fc2: [out, hidden]  (PyTorch's
//   nn.Linear layout: weight [out_features, in_features], bias [out_features])
//
// fc1 is quantized to int8 per output channel (symmetric, layout
// "int8.per_channel"), fc2 to AWQ int4 in groups of 128 along its input
// (asymmetric, fp16 scales, packed zero points, layout "awq.int4.g128"),
// exactly as docs/kernels.md and docs/format.md section 9 describe. The file
// holds one function
//
//   main(x: f32[batch, in]) -> y: f32[batch, out],  batch <= --batch-max
//
// of three dispatches: axrt_matmul_int8_pc_f32 into the arena, axrt_gelu_f32
// in place on the arena, axrt_matmul_awq_int4_f32 into the output. Each
// kernel's primary implementation is the built-in CPU library ("axrt.cpu",
// version 1); given the CUDA kernels' fatbin and PTX it also carries them as
// variants (format 1.1), so one file serves both kinds of device.
//
// The reference file (--reference) lets a runner check the result without
// recomputing anything. All numbers little-endian:
//
//   offset  type               what
//   0       char[8]            "AXRTMLPR"
//   8       u32                version, 1
//   12      u32                batch B (the rows of x)
//   16      u32                in
//   20      u32                out
//   24      f32[B][in]         x
//   ...     f64[B][out]        y from the dequantized weights, computed in double
//   ...     f64[B][out]        the bound on |y_runtime - y| per element (below)
//   ...     f64[B][out]        y from the original float weights, in double
//
// y against the dequantized weights measures the runtime alone (the
// dequantization is exact, docs/kernels.md); y against the float weights adds
// the quantization error. The bound chains the accuracy statements of
// docs/kernels.md through the three kernels, for each element:
//   fc1:  e_h = 1e-5 (sum_i |x_i W1[j][i]| + |b1_j|) + 1e-6
//   gelu: e_g = 1.13 e_h + 1e-6 + 1e-5 |gelu(h_j)|     (|gelu'| <= 1.129)
//   fc2:  e_y = 1e-5 (sum_j (|g_j| + e_g_j) |W2[j][n]| + |b2_n|) + 1e-6
//               + sum_j e_g_j |W2[j][n]|               (fc1's error carried)
// with the bias counted among the summed terms.
//
// Exit status: 0 written, 1 failed (bad weights, I/O, the builder refused),
// 2 bad command line.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <axrt/axrt.h>
#include <fmt/format.h>

#include "npz.h"

namespace mlpc {
namespace {

constexpr uint64_t kGroupSize = 128;  // awq.int4.g128
constexpr uint64_t kMaxExtent = 1 << 16;
constexpr uint64_t kMaxWeights = uint64_t{1} << 28;  // elements per matrix

// ---------------------------------------------------------------------------
// Errors: a failure of the run (exit 1) or of the command line (exit 2).
// ---------------------------------------------------------------------------

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StatusDeleter {
  void operator()(axrt_status_s* status) const { axrt_status_free(status); }
};

// Throws a Failure naming `what` for a failed axrt call.
void check(axrt_status_t status, std::string_view what) {
  if (!status) return;
  std::unique_ptr<axrt_status_s, StatusDeleter> owned(status);
  throw Failure(fmt::format("{} failed: {}: {}", what,
                            axrt_status_code_name(axrt_status_code(status)),
                            axrt_status_message(status)));
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

constexpr const char* kUsage = R"(usage: axrt_mlp_compiler [options] -o MODEL.axe

Emits a 2-layer MLP y = fc2(gelu(fc1(x))) as an .axe executable: fc1 int8
per channel, fc2 AWQ int4 (groups of 128), function main(x: f32[batch, in])
-> y: f32[batch, out] with batch symbolic.

weights (one of):
  --seed N            generate them from seed N (default 1), PyTorch-like
                      uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))
  --weights FILE.npz  read fc1.weight [hidden, in], fc1.bias [hidden],
                      fc2.weight [out, hidden], fc2.bias [out] (float32, as
                      np.savez writes them); the sizes come from the file
sizes (generated weights; with --weights they must match the file):
  --in N              input features (default 256)
  --hidden N          hidden features, a multiple of 128 (default 1024)
  --out N             output features, a multiple of 8 (default 256)
  --batch-max N       upper bound of the batch dimension (default 64)
outputs:
  -o, --output FILE   the .axe file (required)
  --reference FILE    x (4 rows from the seed) and y computed in double, for
                      axrt_mlp to check against (format: see the source)
  --save-weights FILE the float32 weights used, as an .npz np.load reads
CUDA variants (each optional; docs/kernels.md):
  --cuda-fatbin FILE  the kernels' fatbin, carried as target "sm_80,sm_90"
  --cuda-ptx FILE     the kernels' PTX, carried as target "compute_80"
Exit status: 0 written, 1 failed, 2 bad command line.
)";

struct Options {
  std::optional<uint64_t> in, hidden, out;
  uint64_t batch_max = 64;
  uint64_t seed = 1;
  uint64_t reference_batch = 4;
  std::string weights, output, reference, save_weights, cuda_fatbin, cuda_ptx;
};

uint64_t parse_count(std::string_view option, std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw UsageError(fmt::format("{} takes a non-negative integer, not '{}'", option, text));
  }
  return value;
}

// Returns nullopt for --help.
std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") return std::nullopt;
    std::string_view value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto next = [&]() -> std::string_view {
      if (has_value) return value;
      if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "--in") {
      o.in = parse_count(arg, next());
    } else if (arg == "--hidden") {
      o.hidden = parse_count(arg, next());
    } else if (arg == "--out") {
      o.out = parse_count(arg, next());
    } else if (arg == "--batch-max") {
      o.batch_max = parse_count(arg, next());
    } else if (arg == "--seed") {
      o.seed = parse_count(arg, next());
    } else if (arg == "--weights") {
      o.weights = next();
    } else if (arg == "-o" || arg == "--output") {
      o.output = next();
    } else if (arg == "--reference") {
      o.reference = next();
    } else if (arg == "--save-weights") {
      o.save_weights = next();
    } else if (arg == "--cuda-fatbin") {
      o.cuda_fatbin = next();
    } else if (arg == "--cuda-ptx") {
      o.cuda_ptx = next();
    } else if (arg.starts_with("-")) {
      throw UsageError(fmt::format("unknown option '{}'", arg));
    } else {
      throw UsageError(fmt::format("unexpected argument '{}'", arg));
    }
    if (has_value && value.empty()) throw UsageError(fmt::format("{} needs a value", arg));
  }
  if (o.output.empty()) throw UsageError("no output file: give -o MODEL.axe");
  if (o.batch_max < o.reference_batch) {
    throw UsageError(fmt::format("--batch-max {} is below the reference batch of {}", o.batch_max,
                                 o.reference_batch));
  }
  if (o.batch_max > kMaxExtent) {
    throw UsageError(fmt::format("--batch-max {} is over {}", o.batch_max, kMaxExtent));
  }
  return o;
}

// ---------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------

struct Weights {
  uint64_t in = 0, hidden = 0, out = 0;
  std::vector<float> w1;  // [hidden, in]
  std::vector<float> b1;  // [hidden]
  std::vector<float> w2;  // [out, hidden]
  std::vector<float> b2;  // [out]
};

// splitmix64: small, fast, and the same sequence everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-bound, bound).
  float uniform(double bound) {
    const double unit = static_cast<double>(next() >> 11) * 0x1p-53;
    return static_cast<float>((2 * unit - 1) * bound);
  }

 private:
  uint64_t state_;
};

// Checks the sizes the kernels and layouts need. `Error` is UsageError for
// sizes from the command line, Failure for those of a weights file.
template <class Error>
void check_sizes(uint64_t in, uint64_t hidden, uint64_t out, std::string_view source) {
  const std::pair<const char*, uint64_t> extents[] = {{"in", in}, {"hidden", hidden}, {"out", out}};
  for (const auto& [name, value] : extents) {
    if (value == 0 || value > kMaxExtent) {
      throw Error(fmt::format("{}: {} = {} is outside [1, {}]", source, name, value, kMaxExtent));
    }
  }
  if (hidden % kGroupSize != 0) {
    throw Error(fmt::format("{}: hidden = {} is not a multiple of {}: fc2's AWQ groups of {} run "
                              "along its input",
                              source, hidden, kGroupSize, kGroupSize));
  }
  if (out % 8 != 0) {
    throw Error(fmt::format("{}: out = {} is not a multiple of 8: fc2's int4 codes are packed 8 "
                              "to a 32-bit word along its output",
                              source, out));
  }
  if (in * hidden > kMaxWeights || hidden * out > kMaxWeights) {
    throw Error(fmt::format("{}: a weight matrix is over {} elements", source, kMaxWeights));
  }
}

Weights generate_weights(uint64_t in, uint64_t hidden, uint64_t out, uint64_t seed) {
  check_sizes<UsageError>(in, hidden, out, "--in/--hidden/--out");
  Weights w{in, hidden, out, {}, {}, {}, {}};
  Random random(seed);
  const auto fill = [&](std::vector<float>& v, uint64_t count, uint64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    v.resize(count);
    for (float& value : v) value = random.uniform(bound);
  };
  fill(w.w1, hidden * in, in);
  fill(w.b1, hidden, in);
  fill(w.w2, out * hidden, hidden);
  fill(w.b2, out, hidden);
  return w;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

Weights load_weights(const std::string& path) {
  std::map<std::string, Array> arrays;
  try {
    arrays = read_npz(path);
  } catch (const NpzError& e) {
    throw Failure(e.what());
  }
  const auto take = [&](const char* name, size_t rank) -> Array& {
    auto it = arrays.find(name);
    if (it == arrays.end()) {
      std::string names;
      for (const auto& [key, array] : arrays) names += fmt::format("{}{}", names.empty() ? "" : ", ", key);
      throw Failure(fmt::format("'{}': no array '{}' (the archive holds: {})", path, name,
                                names.empty() ? "nothing" : names));
    }
    if (it->second.shape.size() != rank) {
      throw Failure(fmt::format("'{}': array '{}' has shape {}; expected rank {}", path, name,
                                shape_text(it->second.shape), rank));
    }
    return it->second;
  };
  Array& w1 = take("fc1.weight", 2);
  Array& b1 = take("fc1.bias", 1);
  Array& w2 = take("fc2.weight", 2);
  Array& b2 = take("fc2.bias", 1);
  Weights w;
  w.hidden = w1.shape[0];
  w.in = w1.shape[1];
  w.out = w2.shape[0];
  const auto expect = [&](const char* name, const Array& a, std::vector<uint64_t> shape) {
    if (a.shape != shape) {
      throw Failure(fmt::format("'{}': array '{}' has shape {}, but fc1.weight {} and fc2.weight "
                                "{} need {}",
                                path, name, shape_text(a.shape), shape_text(w1.shape),
                                shape_text(w2.shape), shape_text(shape)));
    }
  };
  expect("fc1.bias", b1, {w.hidden});
  expect("fc2.weight", w2, {w.out, w.hidden});
  expect("fc2.bias", b2, {w.out});
  check_sizes<Failure>(w.in, w.hidden, w.out, fmt::format("'{}'", path));
  const std::pair<const char*, const Array*> all[] = {
      {"fc1.weight", &w1}, {"fc1.bias", &b1}, {"fc2.weight", &w2}, {"fc2.bias", &b2}};
  for (const auto& [name, array] : all) {
    for (size_t i = 0; i < array->data.size(); ++i) {
      if (!std::isfinite(array->data[i])) {
        throw Failure(fmt::format("'{}': array '{}' element {} is {}; weights must be finite", path,
                                  name, i, array->data[i]));
      }
    }
  }
  w.w1 = std::move(w1.data);
  w.b1 = std::move(b1.data);
  w.w2 = std::move(w2.data);
  w.b2 = std::move(b2.data);
  return w;
}

// ---------------------------------------------------------------------------
// Quantization
// ---------------------------------------------------------------------------

// IEEE binary16, round to nearest even, subnormals included.
uint16_t float_to_half(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < 0x1p-14f) {
    // Subnormal: a multiple of 2^-24. The scaling is exact; nearbyint rounds
    // to even in the default mode. 1024 carries into the smallest normal.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 0x1p24f));
  }
  const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
  const uint32_t mantissa = bits & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent
  return sign | static_cast<uint16_t>(half);
}

float half_to_float(uint16_t half) {
  const float sign = (half & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (half >> 10) & 0x1f;
  const int mantissa = half & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

// fc1: int8 [N = hidden, K = in], one f32 scale per output row:
// W[k][n] = q[n][k] x scale[n] (docs/format.md 9.1).
struct Int8Layer {
  std::vector<int8_t> q;
  std::vector<float> scale;      // [N, 1]
  std::vector<double> dequant;   // [N, K], exact
};

Int8Layer quantize_int8(const std::vector<float>& w, uint64_t rows, uint64_t cols) {
  Int8Layer layer;
  layer.q.resize(rows * cols);
  layer.scale.resize(rows);
  layer.dequant.resize(rows * cols);
  for (uint64_t r = 0; r < rows; ++r) {
    float absmax = 0;
    for (uint64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(w[r * cols + c]));
    const float scale = absmax > 0 ? absmax / 127.0f : 1.0f;
    layer.scale[r] = scale;
    for (uint64_t c = 0; c < cols; ++c) {
      const double q = std::clamp(std::nearbyint(double{w[r * cols + c]} / scale), -127.0, 127.0);
      layer.q[r * cols + c] = static_cast<int8_t>(q);
      layer.dequant[r * cols + c] = q * double{scale};
    }
  }
  return layer;
}

// AWQ's order in a 32-bit word: elements 0, 2, 4, 6, 1, 3, 5, 7 occupy
// nibbles 0..7, so element e sits in nibble kAwqNibble[e].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

constexpr uint32_t pack_awq(const uint8_t (&codes)[8]) {
  uint32_t word = 0;
  for (int e = 0; e < 8; ++e) word |= uint32_t{codes[e]} << (4 * kAwqNibble[e]);
  return word;
}
constexpr uint8_t kDocCodes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static_assert(pack_awq(kDocCodes) == 0x86427531u, "docs/format.md 9.2's worked example");

constexpr uint8_t unpack_awq(uint32_t word, int element) {
  return static_cast<uint8_t>((word >> (4 * kAwqNibble[element])) & 0xf);
}

// fc2: AWQ int4 over W[K = hidden][N = out] (the transpose of PyTorch's
// weight), groups of 128 along K: W[k][n] = (q[k][n] - z[k/g][n]) x s[k/g][n].
struct AwqLayer {
  std::vector<uint32_t> qweight;  // [K, N/8]
  std::vector<uint16_t> scales;   // [K/g, N], fp16
  std::vector<uint32_t> qzeros;   // [K/g, N/8]
  std::vector<double> dequant;    // [K, N], exact
};

// `w` is PyTorch's [N, K].
AwqLayer quantize_awq(const std::vector<float>& w, uint64_t N, uint64_t K) {
  const uint64_t groups = K / kGroupSize;
  AwqLayer layer;
  layer.qweight.assign(K * N / 8, 0);
  layer.scales.resize(groups * N);
  layer.qzeros.assign(groups * N / 8, 0);
  layer.dequant.resize(K * N);
  std::vector<uint8_t> codes(K * N);
  std::vector<uint8_t> zeros(groups * N);
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t n = 0; n < N; ++n) {
      const float* column = &w[n * K + g * kGroupSize];  // W[k][n] for k in the group
      const auto [lo_it, hi_it] = std::minmax_element(column, column + kGroupSize);
      // Asymmetric, as AutoAWQ quantizes: the group's range onto codes
      // 0..15. The range is widened to hold 0, so that the zero point is a
      // code, and the scale is rounded to fp16 upwards, so that the codes
      // cover the range with the scale actually stored.
      const float lo = std::min(*lo_it, 0.0f);
      const float hi = std::max(*hi_it, 0.0f);
      const float wanted = std::max(hi - lo, 1e-5f) / 15.0f;
      uint16_t scale_half = float_to_half(wanted);
      if (half_to_float(scale_half) < wanted) ++scale_half;  // the next fp16 up
      const float scale = half_to_float(scale_half);
      if (!std::isfinite(scale)) {
        throw Failure(fmt::format("fc2.weight: group {} of output {} spans [{}, {}], whose scale "
                                  "{} is beyond fp16",
                                  g, n, lo, hi, wanted));
      }
      const double zero = std::clamp(std::nearbyint(-double{lo} / scale), 0.0, 15.0);
      layer.scales[g * N + n] = scale_half;
      zeros[g * N + n] = static_cast<uint8_t>(zero);
      for (uint64_t i = 0; i < kGroupSize; ++i) {
        const uint64_t k = g * kGroupSize + i;
        const double q = std::clamp(std::nearbyint(double{column[i]} / scale) + zero, 0.0, 15.0);
        codes[k * N + n] = static_cast<uint8_t>(q);
        layer.dequant[k * N + n] = (q - zero) * double{scale};
      }
    }
  }
  const auto pack_rows = [N](const std::vector<uint8_t>& in, std::vector<uint32_t>& out, uint64_t rows) {
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t word = 0; word < N / 8; ++word) {
        uint8_t eight[8];
        for (int e = 0; e < 8; ++e) eight[e] = in[r * N + word * 8 + e];
        out[r * (N / 8) + word] = pack_awq(eight);
      }
    }
  };
  pack_rows(codes, layer.qweight, K);
  pack_rows(zeros, layer.qzeros, groups);
  // The packing read back the way a kernel reads it.
  for (uint64_t k = 0; k < K; ++k) {
    for (uint64_t n = 0; n < N; ++n) {
      if (unpack_awq(layer.qweight[k * (N / 8) + n / 8], static_cast<int>(n % 8)) != codes[k * N + n]) {
        throw Failure(fmt::format("internal: AWQ packing of fc2 code [{}, {}] does not read back", k, n));
      }
    }
  }
  return layer;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<double>& b,
                          bool transpose_b, uint64_t rows, uint64_t cols) {
  // a is [rows, cols]; b is the same, or [cols, rows] when transposed.
  double worst = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t c = 0; c < cols; ++c) {
      const double other = transpose_b ? b[c * rows + r] : b[r * cols + c];
      worst = std::max(worst, std::fabs(double{a[r * cols + c]} - other));
    }
  }
  return worst;
}

// ---------------------------------------------------------------------------
// The reference
// ---------------------------------------------------------------------------

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

struct Reference {
  uint64_t batch = 0;
  std::vector<float> x;          // [batch, in]
  std::vector<double> y;         // [batch, out], dequantized weights
  std::vector<double> bound;     // [batch, out]
  std::vector<double> y_float;   // [batch, out], original weights
};

// y = fc2(gelu(fc1(x))) in double with W1 [hidden, in] and W2 [hidden, out]
// (the matmul orientation), and the per-element bound when `bound` is set.
std::vector<double> forward(const Weights& w, const std::vector<float>& x, uint64_t batch,
                            const std::vector<double>& w1, const std::vector<double>& w2,
                            std::vector<double>* bound) {
  std::vector<double> y(batch * w.out);
  std::vector<double> g(w.hidden), e_g(w.hidden);
  if (bound) bound->resize(batch * w.out);
  for (uint64_t b = 0; b < batch; ++b) {
    const float* xb = &x[b * w.in];
    for (uint64_t j = 0; j < w.hidden; ++j) {
      double h = w.b1[j];
      double magnitude = std::fabs(double{w.b1[j]});
      for (uint64_t i = 0; i < w.in; ++i) {
        const double term = double{xb[i]} * w1[j * w.in + i];
        h += term;
        magnitude += std::fabs(term);
      }
      g[j] = gelu(h);
      const double e_h = 1e-5 * magnitude + 1e-6;
      e_g[j] = 1.13 * e_h + 1e-6 + 1e-5 * std::fabs(g[j]);
    }
    for (uint64_t n = 0; n < w.out; ++n) {
      double sum = w.b2[n];
      double magnitude = std::fabs(double{w.b2[n]});
      double carried = 0;
      for (uint64_t j = 0; j < w.hidden; ++j) {
        const double weight = w2[j * w.out + n];
        sum += g[j] * weight;
        magnitude += (std::fabs(g[j]) + e_g[j]) * std::fabs(weight);
        carried += e_g[j] * std::fabs(weight);
      }
      y[b * w.out + n] = sum;
      if (bound) (*bound)[b * w.out + n] = 1e-5 * magnitude + 1e-6 + carried;
    }
  }
  return y;
}

Reference make_reference(const Weights& w, const Int8Layer& fc1, const AwqLayer& fc2,
                         uint64_t batch, uint64_t seed) {
  Reference ref;
  ref.batch = batch;
  // x from a stream of its own, so that it depends on the seed only, never
  // on where the weights came from.
  Random random(seed ^ 0x5851F42D4C957F2Dull);
  ref.x.resize(batch * w.in);
  for (float& value : ref.x) value = random.uniform(1.0);
  ref.y = forward(w, ref.x, batch, fc1.dequant, fc2.dequant, &ref.bound);
  std::vector<double> w1(w.w1.begin(), w.w1.end());
  std::vector<double> w2(w.hidden * w.out);
  for (uint64_t n = 0; n < w.out; ++n) {
    for (uint64_t j = 0; j < w.hidden; ++j) w2[j * w.out + n] = w.w2[n * w.hidden + j];
  }
  ref.y_float = forward(w, ref.x, batch, w1, w2, nullptr);
  return ref;
}

void write_reference(const std::string& path, const Weights& w, const Reference& ref) {
  Bytes out = {'A', 'X', 'R', 'T', 'M', 'L', 'P', 'R'};
  const auto put = [&out](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
  };
  put(1, 4);
  put(ref.batch, 4);
  put(w.in, 4);
  put(w.out, 4);
  for (float v : ref.x) put(std::bit_cast<uint32_t>(v), 4);
  for (const std::vector<double>* part : {&ref.y, &ref.bound, &ref.y_float}) {
    for (double v : *part) put(std::bit_cast<uint64_t>(v), 8);
  }
  try {
    write_file(path, out);
  } catch (const NpzError& e) {
    throw Failure(e.what());
  }
}

// ---------------------------------------------------------------------------
// Emitting the .axe
// ---------------------------------------------------------------------------

// The host architecture, named as the runtime names it when it matches a
// KERNEL_LIBRARY code object's target.
const char* host_target() { return AXRT_HOST_CODE_TARGET; }

using Expr = std::vector<axrt_axe_expr_op_t>;

Expr literal(uint64_t value) { return {{AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(value)}}; }
// batch, the function's symbol 0.
Expr batch() { return {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0}}; }
Expr batch_times(uint64_t factor) {
  return {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
          {AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(factor)},
          {AXRT_AXE_EXPR_OPCODE_MUL, 0}};
}
Expr ceil_div(Expr a, uint64_t b) {
  a.push_back({AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(b)});
  a.push_back({AXRT_AXE_EXPR_OPCODE_DIV_CEIL, 0});
  return a;
}
axrt_axe_expr_t view(const Expr& e) { return {e.data(), e.size()}; }

struct BuilderDeleter {
  void operator()(axrt_axe_builder_s* builder) const { axrt_axe_builder_release(builder); }
};
using Builder = std::unique_ptr<axrt_axe_builder_s, BuilderDeleter>;

// One binding of a dispatch; `value` holds a SCALAR's expression.
struct Bind {
  axrt_axe_binding_kind_t kind;
  uint32_t index = 0;
  uint64_t offset = 0, size = 0;
  Expr value = {};
};

class Emitter {
 public:
  Emitter(const Options& options, const Weights& w, const Int8Layer& fc1, const AwqLayer& fc2)
      : options_(options), w_(w), fc1_(fc1), fc2_(fc2) {
    axrt_axe_builder_options_t builder_options = AXRT_AXE_BUILDER_OPTIONS_INIT;
    builder_options.producer_name = "axrt_mlp_compiler";
    builder_options.producer_version = "1";
    axrt_axe_builder_t builder = nullptr;
    check(axrt_axe_builder_create(&builder_options, &builder), "axrt_axe_builder_create");
    builder_.reset(builder);
  }

  // Returns the names of the implementations each kernel has.
  std::string emit() {
    check(axrt_axe_builder_add_metadata(
              b(), "model",
              fmt::format("mlp {}-{}-{}: fc1 int8.per_channel, gelu, fc2 awq.int4.g128", w_.in,
                          w_.hidden, w_.out)
                  .c_str()),
          "axrt_axe_builder_add_metadata");
    std::string implementations = add_code_objects();
    add_constants();
    add_kernels();
    add_function();
    check(axrt_axe_builder_write_file(b(), options_.output.c_str()),
          fmt::format("writing '{}' (axrt_axe_builder_write_file)", options_.output));
    return implementations;
  }

 private:
  axrt_axe_builder_t b() const { return builder_.get(); }

  uint32_t add_code_object(axrt_axe_code_object_kind_t kind, const char* target, const Bytes& data,
                           const char* what) {
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = kind;
    desc.target = target;
    desc.data = data.data();
    desc.size = data.size();
    uint32_t index = 0;
    check(axrt_axe_builder_add_code_object(b(), &desc, &index),
          fmt::format("adding the {} (axrt_axe_builder_add_code_object)", what));
    return index;
  }

  static Bytes read(const std::string& path, const char* what) {
    try {
      Bytes bytes = read_file(path);
      if (bytes.empty()) throw Failure(fmt::format("{} '{}' is empty", what, path));
      return bytes;
    } catch (const NpzError& e) {
      throw Failure(fmt::format("{}: {}", what, e.what()));
    }
  }

  std::string add_code_objects() {
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
    desc.target = host_target();
    desc.library_name = "axrt.cpu";
    desc.library_min_version = 1;
    check(axrt_axe_builder_add_code_object(b(), &desc, &cpu_), "axrt_axe_builder_add_code_object");
    std::string names = fmt::format("axrt.cpu ({})", host_target());
    if (!options_.cuda_fatbin.empty()) {
      fatbin_ = add_code_object(AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN, "sm_80,sm_90",
                                read(options_.cuda_fatbin, "CUDA fatbin"), "CUDA fatbin");
      names += ", CUDA fatbin (sm_80,sm_90)";
    }
    if (!options_.cuda_ptx.empty()) {
      Bytes ptx = read(options_.cuda_ptx, "CUDA PTX");
      if (ptx.back() != 0) ptx.push_back(0);  // cuModuleLoadData takes a C string
      ptx_ = add_code_object(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_80", ptx, "CUDA PTX");
      names += ", CUDA PTX (compute_80)";
    }
    return names;
  }

  template <class T>
  uint32_t add_constant(const char* name, axrt_axe_dtype_t dtype, std::vector<uint64_t> shape,
                        const std::vector<T>& data, const axrt_axe_quant_layout_t* layout = nullptr) {
    axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
    desc.name = name;
    desc.dtype = dtype;
    desc.rank = shape.size();
    desc.shape = shape.data();
    desc.data = data.data();
    desc.size = data.size() * sizeof(T);
    desc.layout = layout;
    uint32_t index = 0;
    check(axrt_axe_builder_add_constant(b(), &desc, &index),
          fmt::format("adding constant '{}' (axrt_axe_builder_add_constant)", name));
    return index;
  }

  void add_constants() {
    // docs/kernels.md: int8.per_channel, for w int8 [N, K], scale f32 [N, 1].
    fc1_scale_ = add_constant("fc1.weight.scale", AXRT_AXE_DTYPE_FLOAT32, {w_.hidden, 1}, fc1_.scale);
    int8_layout_ = AXRT_AXE_QUANT_LAYOUT_INIT;
    int8_layout_.layout_id = "int8.per_channel";
    int8_layout_.element_type = AXRT_AXE_DTYPE_INT8;
    int8_layout_.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
    int8_layout_.rank = 2;
    int8_layout_.block_shape = kInt8Blocks;
    int8_layout_.scale = {static_cast<int32_t>(fc1_scale_), AXRT_AXE_DTYPE_FLOAT32,
                          AXRT_AXE_SCALE_LAYOUT_GRID};
    fc1_weight_ = add_constant("fc1.weight", AXRT_AXE_DTYPE_INT8, {w_.hidden, w_.in}, fc1_.q,
                               &int8_layout_);
    fc1_bias_ = add_constant("fc1.bias", AXRT_AXE_DTYPE_FLOAT32, {w_.hidden}, w_.b1);

    // docs/format.md 9.2: qweight uint4 [K, N] as u32 [K, N/8], scales f16
    // [K/g, N], qzeros int32 [K/g, N/8], both packings AWQ-ordered along N.
    const uint64_t groups = w_.hidden / kGroupSize;
    fc2_scales_ = add_constant("fc2.scales", AXRT_AXE_DTYPE_FLOAT16, {groups, w_.out}, fc2_.scales);
    fc2_qzeros_ = add_constant("fc2.qzeros", AXRT_AXE_DTYPE_INT32, {groups, w_.out / 8}, fc2_.qzeros);
    const axrt_axe_packing_t awq_packing = {4, 32, 1, AXRT_AXE_ELEMENT_ORDER_AWQ,
                                            AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT,
                                            AXRT_AXE_PADDING_RULE_EXACT};
    awq_layout_ = AXRT_AXE_QUANT_LAYOUT_INIT;
    awq_layout_.layout_id = "awq.int4.g128";
    awq_layout_.element_type = AXRT_AXE_DTYPE_UINT4;
    awq_layout_.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
    awq_layout_.rank = 2;
    awq_layout_.block_shape = kAwqBlocks;
    awq_layout_.scale = {static_cast<int32_t>(fc2_scales_), AXRT_AXE_DTYPE_FLOAT16,
                         AXRT_AXE_SCALE_LAYOUT_GRID};
    awq_layout_.zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_INTEGER;
    awq_layout_.zero_point.constant = static_cast<int32_t>(fc2_qzeros_);
    awq_layout_.zero_point.dtype = AXRT_AXE_DTYPE_UINT4;
    awq_layout_.zero_point.packing = awq_packing;
    awq_layout_.zero_point.stored_bias = 0;
    awq_layout_.packing = awq_packing;
    fc2_qweight_ = add_constant("fc2.qweight", AXRT_AXE_DTYPE_UINT4, {w_.hidden, w_.out},
                                fc2_.qweight, &awq_layout_);
    fc2_bias_ = add_constant("fc2.bias", AXRT_AXE_DTYPE_FLOAT32, {w_.out}, w_.b2);
  }

  // A kernel named after its symbol, with the CPU library as its primary
  // implementation and the CUDA code objects, when given, as variants.
  struct Param {
    const char* name;
    axrt_axe_param_kind_t kind;
    axrt_axe_access_t access;
    const axrt_axe_quant_layout_t* layout;
  };
  uint32_t add_kernel(const char* symbol, std::initializer_list<Param> params) {
    std::vector<axrt_axe_kernel_param_t> c_params;
    for (const Param& p : params) {
      axrt_axe_kernel_param_t param = AXRT_AXE_KERNEL_PARAM_INIT;
      param.name = p.name;
      param.kind = p.kind;
      param.access = p.access;
      param.layout = p.layout;
      if (p.kind == AXRT_AXE_PARAM_KIND_SCALAR) param.scalar_type = AXRT_AXE_DTYPE_UINT64;
      c_params.push_back(param);
    }
    axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
    desc.name = symbol;
    desc.code_object = cpu_;
    desc.params = c_params.data();
    desc.param_count = c_params.size();
    // Informational on the CPU (docs/kernel-abi.md section 2).
    desc.workgroup_size[0] = 1;
    uint32_t kernel = 0;
    check(axrt_axe_builder_add_kernel(b(), &desc, &kernel),
          fmt::format("adding kernel '{}' (axrt_axe_builder_add_kernel)", symbol));
    for (const std::optional<uint32_t>& code_object : {fatbin_, ptx_}) {
      if (!code_object) continue;
      axrt_axe_kernel_variant_desc_t variant = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
      variant.code_object = *code_object;
      variant.workgroup_size[0] = 256;  // the CUDA block of every built-in kernel
      check(axrt_axe_builder_add_kernel_variant(b(), kernel, &variant),
            fmt::format("adding a CUDA variant of kernel '{}' "
                        "(axrt_axe_builder_add_kernel_variant)",
                        symbol));
    }
    return kernel;
  }

  void add_kernels() {
    constexpr auto R = AXRT_AXE_ACCESS_READ;
    constexpr auto W = AXRT_AXE_ACCESS_WRITE;
    constexpr auto kBuffer = AXRT_AXE_PARAM_KIND_BUFFER;
    const auto u64 = [](const char* name) {
      return Param{name, AXRT_AXE_PARAM_KIND_SCALAR, AXRT_AXE_ACCESS_NONE, nullptr};
    };
    // The parameter tables of docs/kernels.md; the weights' parameters
    // declare their layout, or the runtime refuses the kernel.
    matmul_int8_ = add_kernel("axrt_matmul_int8_pc_f32",
                              {{"x", kBuffer, R, nullptr},
                               {"w", kBuffer, R, &int8_layout_},
                               {"scale", kBuffer, R, nullptr},
                               {"bias", kBuffer, R, nullptr},
                               {"y", kBuffer, W, nullptr},
                               u64("M"), u64("N"), u64("K")});
    gelu_ = add_kernel("axrt_gelu_f32",
                       {{"x", kBuffer, R, nullptr}, {"out", kBuffer, W, nullptr}, u64("n")});
    matmul_awq_ = add_kernel("axrt_matmul_awq_int4_f32",
                             {{"x", kBuffer, R, nullptr},
                              {"qweight", kBuffer, R, &awq_layout_},
                              {"scales", kBuffer, R, nullptr},
                              {"qzeros", kBuffer, R, nullptr},
                              {"bias", kBuffer, R, nullptr},
                              {"y", kBuffer, W, nullptr},
                              u64("M"), u64("N"), u64("K"), u64("group_size")});
  }

  void dispatch(uint32_t function, uint32_t kernel, const Expr& x, const Expr& y,
                const std::vector<Bind>& binds, const char* what) {
    std::vector<axrt_axe_binding_t> bindings;
    for (const Bind& bind : binds) {
      axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
      binding.kind = bind.kind;
      binding.index = bind.index;
      binding.offset = bind.offset;
      binding.size = bind.size;
      binding.value = view(bind.value);
      bindings.push_back(binding);
    }
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = kernel;
    desc.workgroup_count_x = view(x);
    desc.workgroup_count_y = view(y);
    desc.bindings = bindings.data();
    desc.binding_count = bindings.size();
    check(axrt_axe_builder_add_dispatch(b(), function, &desc),
          fmt::format("adding the {} dispatch (axrt_axe_builder_add_dispatch)", what));
  }

  void add_function() {
    axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
    symbol.name = "batch";
    symbol.upper_bound = options_.batch_max;
    const axrt_axe_dim_t x_dims[] = {{0, 0}, {w_.in, -1}};
    const axrt_axe_dim_t y_dims[] = {{0, 0}, {w_.out, -1}};
    axrt_axe_tensor_sig_t x = AXRT_AXE_TENSOR_SIG_INIT;
    x.name = "x";
    x.dtype = AXRT_AXE_DTYPE_FLOAT32;
    x.rank = 2;
    x.dims = x_dims;
    axrt_axe_tensor_sig_t y = x;
    y.name = "y";
    y.dims = y_dims;
    // The hidden activations [batch, hidden] f32, sized for the bound.
    const uint64_t arena = options_.batch_max * w_.hidden * sizeof(float);
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = "main";
    desc.symbols = &symbol;
    desc.symbol_count = 1;
    desc.inputs = &x;
    desc.input_count = 1;
    desc.outputs = &y;
    desc.output_count = 1;
    desc.arena_size = arena;
    uint32_t function = 0;
    check(axrt_axe_builder_add_function(b(), &desc, &function), "axrt_axe_builder_add_function");

    const auto constant = [](uint32_t index) { return Bind{AXRT_AXE_BINDING_KIND_CONSTANT, index}; };
    const auto scalar = [](Expr value) { return Bind{AXRT_AXE_BINDING_KIND_SCALAR, 0, 0, 0, std::move(value)}; };
    const Bind input{AXRT_AXE_BINDING_KIND_INPUT, 0};
    const Bind output{AXRT_AXE_BINDING_KIND_OUTPUT, 0};
    const Bind hidden{AXRT_AXE_BINDING_KIND_ARENA, 0, 0, arena};
    // Matmul grids: x = ceil(N / 64), y = ceil(M / 64); elementwise:
    // x = ceil(n / 4096) (docs/kernels.md).
    dispatch(function, matmul_int8_, literal((w_.hidden + 63) / 64), ceil_div(batch(), 64),
             {input, constant(fc1_weight_), constant(fc1_scale_),
              constant(fc1_bias_), hidden, scalar(batch()), scalar(literal(w_.hidden)),
              scalar(literal(w_.in))},
             "fc1");
    dispatch(function, gelu_, ceil_div(batch_times(w_.hidden), 4096), {},
             {hidden, hidden, scalar(batch_times(w_.hidden))}, "gelu");
    dispatch(function, matmul_awq_, literal((w_.out + 63) / 64), ceil_div(batch(), 64),
             {hidden, constant(fc2_qweight_), constant(fc2_scales_), constant(fc2_qzeros_),
              constant(fc2_bias_), output, scalar(batch()), scalar(literal(w_.out)),
              scalar(literal(w_.hidden)), scalar(literal(kGroupSize))},
             "fc2");
  }

  static constexpr uint64_t kInt8Blocks[2] = {1, 0};
  static constexpr uint64_t kAwqBlocks[2] = {kGroupSize, 1};

  const Options& options_;
  const Weights& w_;
  const Int8Layer& fc1_;
  const AwqLayer& fc2_;
  Builder builder_;
  uint32_t cpu_ = 0;
  std::optional<uint32_t> fatbin_, ptx_;
  axrt_axe_quant_layout_t int8_layout_ = AXRT_AXE_QUANT_LAYOUT_INIT;
  axrt_axe_quant_layout_t awq_layout_ = AXRT_AXE_QUANT_LAYOUT_INIT;
  uint32_t fc1_scale_ = 0, fc1_weight_ = 0, fc1_bias_ = 0, fc2_scales_ = 0, fc2_qzeros_ = 0, fc2_qweight_ = 0,
           fc2_bias_ = 0;
  uint32_t matmul_int8_ = 0, gelu_ = 0, matmul_awq_ = 0;
};

int run(const Options& o) {
  Weights w;
  std::string source;
  if (!o.weights.empty()) {
    w = load_weights(o.weights);
    const std::tuple<const char*, std::optional<uint64_t>, uint64_t> extents[] = {
        {"--in", o.in, w.in}, {"--hidden", o.hidden, w.hidden}, {"--out", o.out, w.out}};
    for (const auto& [name, given, actual] : extents) {
      if (given && *given != actual) {
        throw UsageError(fmt::format("{} {} disagrees with the weights in '{}' ({})", name, *given,
                                     o.weights, actual));
      }
    }
    source = fmt::format("'{}'", o.weights);
  } else {
    w = generate_weights(o.in.value_or(256), o.hidden.value_or(1024), o.out.value_or(256), o.seed);
    source = fmt::format("seed {}", o.seed);
  }
  if (!o.save_weights.empty()) {
    const auto array = [](std::vector<uint64_t> shape, const std::vector<float>& data) {
      return Array{std::move(shape), data};
    };
    try {
      write_file(o.save_weights, npz_bytes({{"fc1.weight", array({w.hidden, w.in}, w.w1)},
                                            {"fc1.bias", array({w.hidden}, w.b1)},
                                            {"fc2.weight", array({w.out, w.hidden}, w.w2)},
                                            {"fc2.bias", array({w.out}, w.b2)}}));
    } catch (const NpzError& e) {
      throw Failure(e.what());
    }
  }

  const Int8Layer fc1 = quantize_int8(w.w1, w.hidden, w.in);
  const AwqLayer fc2 = quantize_awq(w.w2, w.out, w.hidden);
  Emitter emitter(o, w, fc1, fc2);
  const std::string implementations = emitter.emit();

  fmt::print("axrt_mlp_compiler: wrote {}: main(x: f32[batch, {}]) -> y: f32[batch, {}], "
             "batch <= {}\n",
             o.output, w.in, w.out, o.batch_max);
  fmt::print("  weights   {} ({} -> {} -> {})\n", source, w.in, w.hidden, w.out);
  fmt::print("  fc1       int8.per_channel  axrt_matmul_int8_pc_f32   max |w - dequant(w)| = {:.3g}\n",
             max_abs_difference(w.w1, fc1.dequant, false, w.hidden, w.in));
  fmt::print("  gelu      in place          axrt_gelu_f32             on the arena, {} KiB\n",
             o.batch_max * w.hidden * 4 / 1024);
  fmt::print("  fc2       awq.int4.g128     axrt_matmul_awq_int4_f32  max |w - dequant(w)| = {:.3g}\n",
             max_abs_difference(w.w2, fc2.dequant, true, w.out, w.hidden));
  fmt::print("  kernels   {}\n", implementations);
  if (!o.reference.empty()) {
    const Reference ref = make_reference(w, fc1, fc2, o.reference_batch, o.seed);
    write_reference(o.reference, w, ref);
    fmt::print("  reference {} (x: {} rows from seed {}, y in double)\n", o.reference,
               ref.batch, o.seed);
  }
  if (!o.save_weights.empty()) fmt::print("  weights   saved to {}\n", o.save_weights);
  return 0;
}

}  // namespace
}  // namespace mlpc

int main(int argc, char** argv) {
  try {
    const std::optional<mlpc::Options> options = mlpc::parse_options(argc, argv);
    if (!options) {
      std::fputs(mlpc::kUsage, stdout);
      return 0;
    }
    return mlpc::run(*options);
  } catch (const mlpc::UsageError& e) {
    std::fprintf(stderr, "axrt_mlp_compiler: %s\n(axrt_mlp_compiler --help for the options)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "axrt_mlp_compiler: %s\n", e.what());
    return 1;
  }
}
