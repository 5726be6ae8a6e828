// The transformer kernels of "axrt.cpu" (docs/llm.md) under each of their
// builds (AVX-512, AVX2 + FMA, baseline; those the CPU runs): the vector
// exponentials against std::exp, and the kernels whose inner loops are
// vectorised against a double-precision reference, on shapes that reach
// every loop tail. tests/python/test_llm_kernels.py checks every kernel's
// contract through executables; this file covers the builds it cannot pick.
// The generic vectors of transformer_simd.h only pass between always-inline
// functions (kernels/cpu is built with -Wno-psabi for the same reason).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "axrt/base.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/transformer_simd.h"

namespace {

namespace tx = axrt::kernels::cpu::transformer;
using axrt::kernels::cpu::AttentionArgs;
using axrt::kernels::cpu::AttentionCombineArgs;
using axrt::kernels::cpu::AttentionSplitArgs;
using axrt::kernels::cpu::SampleArgs;
using axrt::kernels::cpu::SiluMulArgs;
using tx::Isa;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The builds this CPU runs, widest first.
std::vector<Isa> builds() {
  std::vector<Isa> all;
  for (int i = static_cast<int>(tx::transformer_cpu_isa()); i >= 0; --i) {
    all.push_back(static_cast<Isa>(i));
  }
  return all;
}

struct IsaLimit {
  explicit IsaLimit(Isa isa) { tx::transformer_isa_limit = static_cast<int>(isa); }
  ~IsaLimit() { tx::transformer_isa_limit = static_cast<int>(Isa::kAvx512); }
};

struct Outcome {
  axrt_kernel_result_t code = AXRT_KERNEL_OK;
  std::string message;
};

// Every workgroup of `grid` in a shuffled order, one thread.
Outcome dispatch(axrt_cpu_kernel_fn_t kernel, const void* args, axrt_kernel_dim3_t grid) {
  std::vector<uint64_t> ids(uint64_t{grid.x} * grid.y * grid.z);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  axrt_kernel_dispatch_t dispatch{};
  dispatch.struct_size = sizeof dispatch;
  dispatch.workgroup_count = grid;
  dispatch.workgroup_size = {1, 1, 1};
  dispatch.worker_count = 1;
  char message[256] = {};
  axrt_kernel_workgroup_t workgroup{};
  workgroup.struct_size = sizeof workgroup;
  workgroup.error_message = message;
  workgroup.error_message_capacity = sizeof message;
  for (uint64_t id : ids) {
    workgroup.workgroup_id = {static_cast<uint32_t>(id % grid.x),
                              static_cast<uint32_t>(id / grid.x % grid.y),
                              static_cast<uint32_t>(id / grid.x / grid.y)};
    if (const axrt_kernel_result_t code = kernel(args, &dispatch, &workgroup)) {
      return {code, message};
    }
  }
  return {};
}

// ---------------------------------------------------------------------------
// The vector exponentials

struct ExpBody {
  template <int kLanes>
  AXRT_CPU_INLINE static void run(const float* x, float* y, const double* xd, double* yd,
                                  size_t n) {
    using F = typename tx::Floats<kLanes>::F;
    using D = typename tx::Floats<kLanes>::D;
    constexpr size_t kDoubles = kLanes / 2;
    for (size_t i = 0; i + kLanes <= n; i += kLanes) {
      tx::store(y + i, tx::exp_floats<kLanes>(tx::load<F>(x + i)));
    }
    for (size_t i = 0; i + kDoubles <= n; i += kDoubles) {
      tx::store(yd + i, tx::exp_doubles<kLanes>(tx::load<D>(xd + i)));
    }
  }
};

TEST_CASE("exp_floats and exp_doubles are within a few ulp of exp in every build") {
  constexpr size_t n = 1 << 16;  // a multiple of every lane count
  std::vector<float> x(n);
  std::vector<double> xd(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(-87.0 + 175.0 * (uniform(rng) + 1.0) / 2.0);
    xd[i] = -708.0 + 1417.0 * (uniform(rng) + 1.0) / 2.0;
  }
  // The edges: below the range (0), the ends of the range, -inf, 0.
  const float edges[] = {-1000.0f, -87.5f, -87.0f, 88.0f, -std::numeric_limits<float>::infinity(),
                         0.0f,     -0.0f,  1e-8f};
  std::copy(std::begin(edges), std::end(edges), x.begin());
  const double edges_d[] = {
      -1000.0, -708.5, -708.0, 709.0, -std::numeric_limits<double>::infinity(), 0.0, -0.0, 1e-17};
  std::copy(std::begin(edges_d), std::end(edges_d), xd.begin());

  for (Isa isa : builds()) {
    IsaLimit limit(isa);
    INFO("build " << tx::transformer_isa_name());
    std::vector<float> y(n);
    std::vector<double> yd(n);
    tx::run_transformer_isa<ExpBody>(x.data(), y.data(), xd.data(), yd.data(), n);
    double worst = 0.0;
    double worst_d = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      if (x[i] < -87.0f) {
        REQUIRE(y[i] == 0.0f);
      } else {
        worst = std::max(worst, std::fabs(y[i] - want) / want);
      }
      if (xd[i] < -708.0) {
        REQUIRE(yd[i] == 0.0);
      } else {
        const long double want_d = std::exp(static_cast<long double>(xd[i]));
        worst_d = std::max(worst_d, static_cast<double>(std::fabs(yd[i] - want_d) / want_d));
      }
    }
    CHECK(worst < 4 * 0x1p-24);
    CHECK(worst_d < 8 * 0x1p-53);
    CHECK(y[5] == 1.0f);
    CHECK(yd[5] == 1.0);
  }
}

// ---------------------------------------------------------------------------
// SiLU and multiply

TEST_CASE("axrt_silu_mul_f32 in every build") {
  const uint64_t rows = 3;
  const uint64_t cols = 16 * 5 + 13;  // every vector width and a tail
  std::vector<float> gate_up(rows * 2 * cols);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  for (float& v : gate_up) v = normal(rng);
  for (Isa isa : builds()) {
    IsaLimit limit(isa);
    INFO("build " << tx::transformer_isa_name());
    std::vector<float> out(rows * cols, kNaN);
    const SiluMulArgs args{gate_up.data(), out.data(), rows, cols};
    REQUIRE(dispatch(axrt_silu_mul_f32, &args, {static_cast<uint32_t>(rows), 1, 1}).code == 0);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t c = 0; c < cols; ++c) {
        const double g = gate_up[r * 2 * cols + c];
        const double u = gate_up[r * 2 * cols + cols + c];
        const double silu = g / (1.0 + std::exp(-g));
        const double bound = (1e-6 + 1e-5 * std::fabs(silu)) * std::fabs(u) + 1e-7;
        INFO("row " << r << " column " << c);
        REQUIRE(std::fabs(out[r * cols + c] - silu * u) <= bound);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Attention

struct AttentionCase {
  uint64_t heads, kv_heads, head_dim, block_size;
};

// A paged cache of one layer, NaN except positions [0, lengths[s]) of each
// sequence, whose blocks are the tables' (disjoint, shuffled).
struct PagedCache {
  uint64_t kv_heads, head_dim, block_size, num_blocks, max_blocks;
  std::vector<int32_t> tables;  // [S, max_blocks]
  std::vector<float> cache;     // [1, 2, num_blocks, kv_heads, block_size, head_dim]

  float* at(int kv, int32_t block, uint64_t head, uint64_t row) {
    return cache.data() +
           ((((kv * num_blocks + block) * kv_heads + head) * block_size + row) * head_dim);
  }
  const float* slot(int kv, uint64_t sequence, uint64_t head, uint64_t position) {
    return at(kv, tables[sequence * max_blocks + position / block_size], head,
              position % block_size);
  }
};

PagedCache make_cache(const AttentionCase& c, const std::vector<int32_t>& lengths,
                      uint64_t max_blocks, std::mt19937& rng) {
  PagedCache p{c.kv_heads, c.head_dim, c.block_size, lengths.size() * max_blocks + 2, max_blocks,
               {},         {}};
  std::vector<int32_t> blocks(p.num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  p.tables.assign(blocks.begin(), blocks.begin() + lengths.size() * max_blocks);
  p.cache.assign(2 * p.num_blocks * c.kv_heads * c.block_size * c.head_dim, kNaN);
  std::normal_distribution<float> normal;
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int32_t pos = 0; pos < lengths[s]; ++pos) {
      for (int kv = 0; kv < 2; ++kv) {
        for (uint64_t h = 0; h < c.kv_heads; ++h) {
          float* row =
              p.at(kv, p.tables[s * max_blocks + pos / c.block_size], h, pos % c.block_size);
          for (uint64_t d = 0; d < c.head_dim; ++d) row[d] = normal(rng);
        }
      }
    }
  }
  return p;
}

// Checks out[D] against softmax(scale q . K^T) V over positions 0 .. last.
void check_query(const float* q, const float* out, PagedCache& cache, uint64_t sequence,
                 uint64_t kv_head, int64_t last, float scale) {
  const uint64_t D = cache.head_dim;
  std::vector<double> s(last + 1);
  double max = -INFINITY;
  for (int64_t p = 0; p <= last; ++p) {
    const float* key = cache.slot(0, sequence, kv_head, p);
    double dot = 0.0;
    for (uint64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * key[d];
    s[p] = dot * scale;
    max = std::max(max, s[p]);
  }
  double total = 0.0;
  for (double& v : s) total += (v = std::exp(v - max));
  for (uint64_t d = 0; d < D; ++d) {
    double want = 0.0;
    double magnitude = 0.0;
    double largest = 0.0;
    for (int64_t p = 0; p <= last; ++p) {
      const double v = cache.slot(1, sequence, kv_head, p)[d];
      want += s[p] / total * v;
      magnitude += s[p] / total * std::fabs(v);
      largest = std::max(largest, std::fabs(v));
    }
    INFO("element " << d << " of " << D << ": got " << out[d] << ", want " << want);
    REQUIRE(std::fabs(out[d] - want) <= 1e-5 * (magnitude + largest) + 1e-6);
  }
}

const AttentionCase kCases[] = {
    {20, 1, 72, 16},   // a group wider than one pass, head_dim off every vector width
    {8, 2, 128, 100},  // blocks longer than a key chunk
    {4, 4, 36, 7},
};

TEST_CASE("axrt_attention_decode_f32 in every build") {
  for (const AttentionCase& c : kCases) {
    INFO("heads " << c.heads << ", kv_heads " << c.kv_heads << ", head_dim " << c.head_dim
                  << ", block_size " << c.block_size);
    std::mt19937 rng(3);
    const std::vector<int32_t> positions = {0, 6, 99, 100, 250};
    std::vector<int32_t> lengths;
    for (int32_t p : positions) lengths.push_back(p + 1);
    const uint64_t B = positions.size();
    const uint64_t max_blocks = 300 / c.block_size + 1;
    PagedCache cache = make_cache(c, lengths, max_blocks, rng);
    const uint64_t row_stride = (c.heads + 2 * c.kv_heads) * c.head_dim + 1;
    std::vector<float> qkv(B * row_stride);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& v : qkv) v = normal(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    for (Isa isa : builds()) {
      IsaLimit limit(isa);
      INFO("build " << tx::transformer_isa_name());
      std::vector<float> out(B * c.heads * c.head_dim, kNaN);
      const AttentionArgs args{qkv.data(),
                               positions.data(),
                               cache.tables.data(),
                               cache.cache.data(),
                               out.data(),
                               B,
                               c.heads,
                               c.kv_heads,
                               c.head_dim,
                               0,
                               cache.num_blocks,
                               c.block_size,
                               max_blocks,
                               row_stride,
                               scale};
      const Outcome outcome =
          dispatch(axrt_attention_decode_f32, &args,
                   {static_cast<uint32_t>(B), static_cast<uint32_t>(c.kv_heads), 1});
      INFO(outcome.message);
      REQUIRE(outcome.code == AXRT_KERNEL_OK);
      for (uint64_t b = 0; b < B; ++b) {
        for (uint64_t h = 0; h < c.heads; ++h) {
          INFO("sequence " << b << " head " << h);
          check_query(qkv.data() + b * row_stride + h * c.head_dim,
                      out.data() + (b * c.heads + h) * c.head_dim, cache, b,
                      h / (c.heads / c.kv_heads), positions[b], scale);
        }
      }
    }
  }
}

TEST_CASE("axrt_attention_prefill_f32 in every build") {
  for (const AttentionCase& c : kCases) {
    INFO("heads " << c.heads << ", kv_heads " << c.kv_heads << ", head_dim " << c.head_dim
                  << ", block_size " << c.block_size);
    std::mt19937 rng(4);
    const int32_t start = 90;
    const uint64_t T = 41;
    std::vector<int32_t> positions(T);
    std::iota(positions.begin(), positions.end(), start);
    const uint64_t max_blocks = (start + T) / c.block_size + 1;
    PagedCache cache = make_cache(c, {static_cast<int32_t>(start + T)}, max_blocks, rng);
    const uint64_t row_stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
    std::vector<float> qkv(T * row_stride);
    std::normal_distribution<float> normal;
    for (float& v : qkv) v = normal(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    for (Isa isa : builds()) {
      IsaLimit limit(isa);
      INFO("build " << tx::transformer_isa_name());
      std::vector<float> out(T * c.heads * c.head_dim, kNaN);
      const AttentionArgs args{qkv.data(),
                               positions.data(),
                               cache.tables.data(),
                               cache.cache.data(),
                               out.data(),
                               T,
                               c.heads,
                               c.kv_heads,
                               c.head_dim,
                               0,
                               cache.num_blocks,
                               c.block_size,
                               max_blocks,
                               row_stride,
                               scale};
      const Outcome outcome =
          dispatch(axrt_attention_prefill_f32, &args,
                   {static_cast<uint32_t>((T + 15) / 16), static_cast<uint32_t>(c.heads), 1});
      INFO(outcome.message);
      REQUIRE(outcome.code == AXRT_KERNEL_OK);
      for (uint64_t t = 0; t < T; ++t) {
        for (uint64_t h = 0; h < c.heads; ++h) {
          INFO("token " << t << " head " << h);
          check_query(qkv.data() + t * row_stride + h * c.head_dim,
                      out.data() + (t * c.heads + h) * c.head_dim, cache, 0,
                      h / (c.heads / c.kv_heads), positions[t], scale);
        }
      }
    }
  }
}

// The cache of `p` in bf16 or fp8 e4m3 (kernels/cpu/kv_cache.h's layout),
// made from random bit patterns rather than by rounding, and `p`'s owned
// rows replaced by what those bytes decode to, exactly, so that check_query
// against `p` checks the kernel's reading of them. Rows no sequence owns stay
// NaN in both (NaN bf16, NaN fp8 codes and scales).
enum class Stored { kBf16, kFp8 };

float decode_e4m3(uint8_t code) {
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9)
                                         : std::ldexp(8 + mantissa, exponent - 10);
  return static_cast<float>(code & 0x80 ? -magnitude : magnitude);
}

std::vector<uint8_t> stored_cache(Stored kind, PagedCache& p, std::mt19937& rng) {
  const uint64_t D = p.head_dim;
  const uint64_t BS = p.block_size;
  const uint64_t run = kind == Stored::kBf16 ? BS * D * 2 : BS * (D + 4);
  std::vector<uint8_t> bytes(2 * p.num_blocks * p.kv_heads * run);
  std::uniform_int_distribution<int> code(0, 253);  // 254 finite codes (0x7f, 0xff are NaN)
  std::uniform_real_distribution<float> scale_of(0.002f, 0.02f);
  for (int kv = 0; kv < 2; ++kv) {
    for (uint64_t block = 0; block < p.num_blocks; ++block) {
      for (uint64_t h = 0; h < p.kv_heads; ++h) {
        uint8_t* base = bytes.data() + ((kv * p.num_blocks + block) * p.kv_heads + h) * run;
        for (uint64_t r = 0; r < BS; ++r) {
          float* row = p.at(kv, static_cast<int32_t>(block), h, r);
          const bool owned = !std::isnan(row[0]);
          if (kind == Stored::kBf16) {
            for (uint64_t d = 0; d < D; ++d) {
              const uint16_t bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(row[d]) >> 16);
              std::memcpy(base + (r * D + d) * 2, &bits, 2);
              row[d] = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
            }
            continue;
          }
          const float scale = owned ? scale_of(rng) : kNaN;
          std::memcpy(base + BS * D + r * 4, &scale, 4);
          for (uint64_t d = 0; d < D; ++d) {
            int c = code(rng);
            c = c >= 0x7f ? c + 1 : c;  // skip the positive NaN code
            base[r * D + d] = owned ? static_cast<uint8_t>(c) : 0x7f;
            if (owned) row[d] = decode_e4m3(static_cast<uint8_t>(c)) * scale;
          }
        }
      }
    }
  }
  return bytes;
}

TEST_CASE("axrt_attention_decode_kv_bf16 and _kv_fp8_e4m3 in every build") {
  const AttentionCase cases[] = {{20, 1, 80, 16}, {8, 2, 128, 100}, {4, 4, 32, 7}, {6, 2, 48, 64}};
  for (Stored kind : {Stored::kBf16, Stored::kFp8}) {
    for (const AttentionCase& c : cases) {
      INFO((kind == Stored::kBf16 ? "bf16" : "fp8") << " heads " << c.heads << ", kv_heads "
                                                     << c.kv_heads << ", head_dim " << c.head_dim
                                                     << ", block_size " << c.block_size);
      std::mt19937 rng(11);
      const std::vector<int32_t> positions = {0, 6, 99, 100, 250};
      std::vector<int32_t> lengths;
      for (int32_t p : positions) lengths.push_back(p + 1);
      const uint64_t B = positions.size();
      const uint64_t max_blocks = 300 / c.block_size + 1;
      PagedCache cache = make_cache(c, lengths, max_blocks, rng);
      const std::vector<uint8_t> stored = stored_cache(kind, cache, rng);
      const uint64_t row_stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
      std::vector<float> qkv(B * row_stride);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      for (float& v : qkv) v = normal(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      for (Isa isa : builds()) {
        IsaLimit limit(isa);
        INFO("build " << tx::transformer_isa_name());
        std::vector<float> out(B * c.heads * c.head_dim, kNaN);
        const AttentionArgs args{qkv.data(), positions.data(), cache.tables.data(),
                                 stored.data(), out.data(), B, c.heads, c.kv_heads, c.head_dim,
                                 0, cache.num_blocks, c.block_size, max_blocks, row_stride,
                                 scale};
        const Outcome outcome = dispatch(
            kind == Stored::kBf16 ? axrt_attention_decode_kv_bf16
                                  : axrt_attention_decode_kv_fp8_e4m3,
            &args, {static_cast<uint32_t>(B), static_cast<uint32_t>(c.kv_heads), 1});
        INFO(outcome.message);
        REQUIRE(outcome.code == AXRT_KERNEL_OK);
        for (uint64_t b = 0; b < B; ++b) {
          for (uint64_t h = 0; h < c.heads; ++h) {
            INFO("sequence " << b << " head " << h);
            check_query(qkv.data() + b * row_stride + h * c.head_dim,
                        out.data() + (b * c.heads + h) * c.head_dim, cache, b,
                        h / (c.heads / c.kv_heads), positions[b], scale);
          }
        }
      }
    }
  }
}

// Split decode then the combine (docs/kernels.md, "Split attention"), over
// an f32, bf16 or fp8 cache: the combined output against the double
// reference of the whole context. Blocks of 7 make chunks of odd lengths,
// blocks of 100 chunks that start past a key chunk of the first block.
TEST_CASE("axrt_attention_decode_split_* and axrt_attention_combine_f32 in every build") {
  enum class Kind { kF32, kBf16, kFp8 };
  const AttentionCase cases[] = {{20, 1, 80, 16}, {8, 2, 128, 100}, {4, 4, 32, 7}};
  for (Kind kind : {Kind::kF32, Kind::kBf16, Kind::kFp8}) {
    for (const AttentionCase& c : cases) {
      for (uint64_t splits : {3, 8}) {
        INFO("kind " << static_cast<int>(kind) << ", heads " << c.heads << ", kv_heads "
                     << c.kv_heads << ", head_dim " << c.head_dim << ", block_size "
                     << c.block_size << ", splits " << splits);
        std::mt19937 rng(12);
        const std::vector<int32_t> positions = {0, 6, 99, 100, 250};
        std::vector<int32_t> lengths;
        for (int32_t p : positions) lengths.push_back(p + 1);
        const uint64_t B = positions.size();
        const uint64_t max_blocks = 300 / c.block_size + 1;
        PagedCache cache = make_cache(c, lengths, max_blocks, rng);
        std::vector<uint8_t> stored;
        if (kind != Kind::kF32) {
          stored = stored_cache(kind == Kind::kBf16 ? Stored::kBf16 : Stored::kFp8, cache, rng);
        }
        const void* bytes = kind == Kind::kF32 ? static_cast<const void*>(cache.cache.data())
                                               : stored.data();
        const uint64_t row_stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
        std::vector<float> qkv(B * row_stride);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        for (float& v : qkv) v = normal(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        const axrt_cpu_kernel_fn_t split =
            kind == Kind::kF32    ? axrt_attention_decode_split_f32
            : kind == Kind::kBf16 ? axrt_attention_decode_split_kv_bf16
                                  : axrt_attention_decode_split_kv_fp8_e4m3;
        for (Isa isa : builds()) {
          IsaLimit limit(isa);
          INFO("build " << tx::transformer_isa_name());
          std::vector<float> partials(B * c.heads * splits * (c.head_dim + 2), kNaN);
          std::vector<float> out(B * c.heads * c.head_dim, kNaN);
          const AttentionSplitArgs args{{qkv.data(), positions.data(), cache.tables.data(), bytes,
                                         partials.data(), B, c.heads, c.kv_heads, c.head_dim, 0,
                                         cache.num_blocks, c.block_size, max_blocks, row_stride,
                                         scale},
                                        splits};
          Outcome outcome = dispatch(split, &args,
                                     {static_cast<uint32_t>(B), static_cast<uint32_t>(c.kv_heads),
                                      static_cast<uint32_t>(splits)});
          INFO(outcome.message);
          REQUIRE(outcome.code == AXRT_KERNEL_OK);
          const AttentionCombineArgs combine{partials.data(), out.data(), B, c.heads,
                                             c.head_dim, splits};
          outcome = dispatch(axrt_attention_combine_f32, &combine,
                             {static_cast<uint32_t>(B), static_cast<uint32_t>(c.heads), 1});
          REQUIRE(outcome.code == AXRT_KERNEL_OK);
          for (uint64_t b = 0; b < B; ++b) {
            for (uint64_t h = 0; h < c.heads; ++h) {
              INFO("sequence " << b << " head " << h);
              check_query(qkv.data() + b * row_stride + h * c.head_dim,
                          out.data() + (b * c.heads + h) * c.head_dim, cache, b,
                          h / (c.heads / c.kv_heads), positions[b], scale);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("attention refuses shapes it does not serve") {
  std::vector<float> buffer(64, 0.0f);
  const int32_t position = 0;
  const int32_t table = 0;
  AttentionArgs args{
      buffer.data(), &position, &table, buffer.data(), buffer.data(), 1, 3, 2, 8, 0, 1, 8, 1, 64,
      1.0f};
  Outcome outcome = dispatch(axrt_attention_decode_f32, &args, {1, 2, 1});
  CHECK(outcome.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK(outcome.message.find("multiple of kv_heads 2") != std::string::npos);
  args.heads = 2;
  args.head_dim = 257;
  args.row_stride = 1024;
  outcome = dispatch(axrt_attention_prefill_f32, &args, {1, 2, 1});
  CHECK(outcome.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK(outcome.message.find("head_dim 257 in [1, 256]") != std::string::npos);
  args.head_dim = 8;
  outcome = dispatch(axrt_attention_decode_kv_fp8_e4m3, &args, {1, 2, 1});
  CHECK(outcome.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
  CHECK(outcome.message.find("head_dim 8: an fp8 KV cache needs a multiple of 16") !=
        std::string::npos);
}

// ---------------------------------------------------------------------------
// Sampling

TEST_CASE("axrt_sample_f32 draws the same tokens in every build") {
  const uint64_t B = 64;
  const uint64_t V = 1001;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(B * V);
  for (float& v : logits) v = normal(rng);
  std::vector<float> temperature(B);
  std::vector<int32_t> top_k(B);
  std::vector<float> top_p(B);
  std::vector<uint64_t> seeds(B);
  std::vector<int32_t> positions(B);
  for (uint64_t b = 0; b < B; ++b) {
    temperature[b] = 0.25f + 0.05f * static_cast<float>(b % 31);
    top_k[b] = static_cast<int32_t>(b % 4 == 0 ? 0 : b * 7);
    top_p[b] = b % 3 == 0 ? 1.0f : 0.5f + 0.01f * static_cast<float>(b);
    seeds[b] = rng();
    positions[b] = static_cast<int32_t>(b * 1000);
  }
  std::vector<int32_t> first;
  for (Isa isa : builds()) {
    IsaLimit limit(isa);
    INFO("build " << tx::transformer_isa_name());
    std::vector<int32_t> tokens(B, -1);
    const SampleArgs args{logits.data(),
                          temperature.data(),
                          top_k.data(),
                          top_p.data(),
                          seeds.data(),
                          positions.data(),
                          tokens.data(),
                          B,
                          V};
    REQUIRE(dispatch(axrt_sample_f32, &args, {static_cast<uint32_t>(B), 1, 1}).code == 0);
    for (int32_t token : tokens) REQUIRE((token >= 0 && static_cast<uint64_t>(token) < V));
    if (first.empty()) {
      first = tokens;
    } else {
      CHECK(tokens == first);
    }
  }
}

}  // namespace
