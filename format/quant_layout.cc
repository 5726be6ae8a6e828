#include "format/quant_layout.h"

#include <fmt/format.h>

#include <string_view>

#include "base/dtype.h"
#include "format/enums.h"

namespace axrt::axe {

uint32_t dtype_bits(DType dtype) noexcept {
  return axrt::dtype_bits(static_cast<axrt_dtype_t>(dtype));
}

bool dtype_is_sub_byte(DType dtype) noexcept {
  const uint32_t bits = dtype_bits(dtype);
  return bits != 0 && bits < 8;
}

bool dtype_is_wide_float(DType dtype) noexcept {
  return dtype == DType::FLOAT16 || dtype == DType::BFLOAT16 || dtype == DType::FLOAT32 ||
         dtype == DType::FLOAT64;
}

bool dtype_is_float(DType dtype) noexcept {
  switch (dtype) {
    case DType::FLOAT16:
    case DType::BFLOAT16:
    case DType::FLOAT32:
    case DType::FLOAT64:
    case DType::FLOAT8_E4M3FN:
    case DType::FLOAT8_E5M2:
    case DType::FLOAT8_E4M3FNUZ:
    case DType::FLOAT8_E5M2FNUZ:
    case DType::FLOAT8_E8M0FNU:
    case DType::FLOAT4_E2M1:
      return true;
    default:
      return false;
  }
}

bool dtype_is_integer(DType dtype) noexcept {
  switch (dtype) {
    case DType::INT8:
    case DType::UINT8:
    case DType::INT16:
    case DType::UINT16:
    case DType::INT32:
    case DType::UINT32:
    case DType::INT64:
    case DType::UINT64:
    case DType::INT4:
    case DType::UINT4:
    case DType::INT2:
    case DType::UINT2:
      return true;
    default:
      return false;
  }
}

bool dtype_takes_negative_literal(DType dtype) noexcept {
  switch (dtype) {
    case DType::INT8:
    case DType::INT16:
    case DType::INT32:
    case DType::INT64:
      return true;
    default:
      return dtype_is_float(dtype);
  }
}

bool checked_add(uint64_t a, uint64_t b, uint64_t* out) noexcept {
  return !__builtin_add_overflow(a, b, out);
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) noexcept {
  return !__builtin_mul_overflow(a, b, out);
}

PackingRule default_packing(DType dtype, size_t rank) noexcept {
  PackingRule rule;
  rule.bits = dtype_bits(dtype);
  rule.container_bits = 8;
  rule.axis = rank == 0 ? 0 : rank - 1;
  rule.padding = PaddingRule::ZERO;
  return rule;
}

PackingRule packing_rule(const Packing& packing) noexcept {
  PackingRule rule;
  rule.bits = packing.bits();
  rule.container_bits = packing.container_bits();
  rule.axis = packing.axis() < 0 ? 0 : static_cast<uint64_t>(packing.axis());
  rule.padding = packing.padding();
  return rule;
}

bool element_count(std::span<const uint64_t> shape, uint64_t* out) noexcept {
  uint64_t count = 1;
  for (uint64_t extent : shape) {
    if (!checked_mul(count, extent, &count)) return false;
  }
  *out = count;
  return true;
}

SizeError packed_byte_size(std::span<const uint64_t> shape, const PackingRule& rule,
                           uint64_t* out) noexcept {
  if (rule.bits == 0 || rule.container_bits == 0 || rule.container_bits % 8 != 0) {
    return SizeError::kInexact;
  }
  const uint64_t container_bytes = rule.container_bits / 8;
  // A rank-0 tensor is one element in one word.
  uint64_t along = 1;
  uint64_t others = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d == rule.axis) {
      along = shape[d];
    } else if (!checked_mul(others, shape[d], &others)) {
      return SizeError::kOverflow;
    }
  }
  uint64_t row_bits;
  if (!checked_mul(along, rule.bits, &row_bits)) return SizeError::kOverflow;
  uint64_t words = row_bits / rule.container_bits;
  if (row_bits % rule.container_bits != 0) {
    if (rule.padding == PaddingRule::EXACT) return SizeError::kInexact;
    ++words;
  }
  uint64_t bytes;
  if (!checked_mul(others, words, &bytes) || !checked_mul(bytes, container_bytes, &bytes)) {
    return SizeError::kOverflow;
  }
  *out = bytes;
  return SizeError::kNone;
}

SizeError dense_byte_size(std::span<const uint64_t> shape, DType dtype, uint64_t* out) noexcept {
  const uint32_t bits = dtype_bits(dtype);
  if (bits == 0) return SizeError::kInexact;
  if (bits < 8) return packed_byte_size(shape, default_packing(dtype, shape.size()), out);
  uint64_t count;
  if (!element_count(shape, &count) || !checked_mul(count, bits / 8, out)) {
    return SizeError::kOverflow;
  }
  return SizeError::kNone;
}

std::vector<uint64_t> block_grid(std::span<const uint64_t> shape, std::span<const uint64_t> block) {
  std::vector<uint64_t> grid(shape.size(), 1);
  for (size_t d = 0; d < shape.size() && d < block.size(); ++d) {
    if (block[d] == 0) continue;
    // ceil without the overflow of shape + block - 1.
    grid[d] = shape[d] / block[d] + (shape[d] % block[d] != 0 ? 1 : 0);
  }
  return grid;
}

bool swizzled_128x4_elements(std::span<const uint64_t> grid, uint64_t* out) noexcept {
  uint64_t rows = 1;
  uint64_t cols = 1;
  uint64_t batch = 1;
  const size_t rank = grid.size();
  if (rank >= 1) cols = grid[rank - 1];
  if (rank >= 2) rows = grid[rank - 2];
  for (size_t d = 0; d + 2 < rank; ++d) {
    if (!checked_mul(batch, grid[d], &batch)) return false;
  }
  // Pad rows to 128 and columns to 4 without overflowing.
  const uint64_t padded_rows = rows / 128 + (rows % 128 != 0 ? 1 : 0);
  const uint64_t padded_cols = cols / 4 + (cols % 4 != 0 ? 1 : 0);
  uint64_t total;
  return checked_mul(padded_rows, 128, &total) && checked_mul(total, padded_cols, &total) &&
         checked_mul(total, 4, &total) && checked_mul(total, batch, out);
}

std::string format_shape(std::span<const uint64_t> shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != 0) text += ", ";
    text += std::to_string(shape[d]);
  }
  text += "]";
  return text;
}

namespace {

std::span<const uint64_t> as_span(const flatbuffers::Vector<uint64_t>* v) {
  if (v == nullptr) return {};
  return std::span<const uint64_t>(v->data(), v->size());
}

std::string_view as_view(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

std::string shape_of(const flatbuffers::Vector<uint64_t>* v) { return format_shape(as_span(v)); }

bool same_vector(const flatbuffers::Vector<uint64_t>* a, const flatbuffers::Vector<uint64_t>* b) {
  const size_t na = a ? a->size() : 0;
  const size_t nb = b ? b->size() : 0;
  if (na != nb) return false;
  for (size_t i = 0; i < na; ++i) {
    if (a->Get(static_cast<flatbuffers::uoffset_t>(i)) !=
        b->Get(static_cast<flatbuffers::uoffset_t>(i))) {
      return false;
    }
  }
  return true;
}

template <typename T>
std::optional<std::string> differ(std::string_view field, const T& expected, const T& actual) {
  if (expected == actual) return std::nullopt;
  return fmt::format("{}: {} vs {}", field, expected, actual);
}

template <typename E>
std::optional<std::string> differ_enum(std::string_view field, E expected, E actual) {
  if (expected == actual) return std::nullopt;
  return fmt::format("{}: {} vs {}", field, enum_name(expected), enum_name(actual));
}

std::optional<std::string> differ_presence(std::string_view field, const void* expected,
                                           const void* actual) {
  if ((expected == nullptr) == (actual == nullptr)) return std::nullopt;
  return fmt::format("{}: {} vs {}", field, expected ? "present" : "absent",
                     actual ? "present" : "absent");
}

std::optional<std::string> packing_difference(std::string_view prefix, const Packing* e,
                                              const Packing* a) {
  if (auto d = differ_presence(prefix, e, a)) return d;
  if (e == nullptr) return std::nullopt;
  const std::string p(prefix);
  if (auto d = differ(p + ".bits", unsigned{e->bits()}, unsigned{a->bits()})) return d;
  if (auto d = differ(p + ".container_bits", unsigned{e->container_bits()},
                      unsigned{a->container_bits()})) {
    return d;
  }
  if (auto d = differ(p + ".axis", e->axis(), a->axis())) return d;
  if (auto d = differ_enum(p + ".order", e->order(), a->order())) return d;
  if (auto d = differ_enum(p + ".sign", e->sign(), a->sign())) return d;
  if (auto d = differ_enum(p + ".padding", e->padding(), a->padding())) return d;
  return std::nullopt;
}

std::optional<std::string> scale_difference(std::string_view prefix, const ScaleRef* e,
                                            const ScaleRef* a) {
  if (auto d = differ_presence(prefix, e, a)) return d;
  if (e == nullptr) return std::nullopt;
  const std::string p(prefix);
  if (auto d = differ_enum(p + ".dtype", e->dtype(), a->dtype())) return d;
  if (auto d = differ_enum(p + ".layout", e->layout(), a->layout())) return d;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_layout_difference(const QuantLayout& e, const QuantLayout& a) {
  if (as_view(e.layout_id()) != as_view(a.layout_id())) {
    return fmt::format("layout_id: '{}' vs '{}'", as_view(e.layout_id()), as_view(a.layout_id()));
  }
  if (auto d = differ_enum("element_type", e.element_type(), a.element_type())) return d;
  if (auto d = differ_enum("dequantized_type", e.dequantized_type(), a.dequantized_type())) {
    return d;
  }
  if (!same_vector(e.block_shape(), a.block_shape())) {
    return fmt::format("block_shape: {} vs {}", shape_of(e.block_shape()),
                       shape_of(a.block_shape()));
  }
  if (auto d = scale_difference("scale", e.scale(), a.scale())) return d;
  // An absent zero point is the same as kind NONE.
  const ZeroPoint* ez = e.zero_point();
  const ZeroPoint* az = a.zero_point();
  const ZeroPointKind ek = ez ? ez->kind() : ZeroPointKind::NONE;
  const ZeroPointKind ak = az ? az->kind() : ZeroPointKind::NONE;
  if (auto d = differ_enum("zero_point.kind", ek, ak)) return d;
  if (ek != ZeroPointKind::NONE) {
    if (auto d = differ_enum("zero_point.dtype", ez->dtype(), az->dtype())) return d;
    if (auto d = differ("zero_point.stored_bias", ez->stored_bias(), az->stored_bias())) return d;
    if (auto d = packing_difference("zero_point.packing", ez->packing(), az->packing())) return d;
  }
  if (auto d =
          scale_difference("second_level_scale", e.second_level_scale(), a.second_level_scale())) {
    return d;
  }
  if (!same_vector(e.second_level_block_shape(), a.second_level_block_shape())) {
    return fmt::format("second_level_block_shape: {} vs {}", shape_of(e.second_level_block_shape()),
                       shape_of(a.second_level_block_shape()));
  }
  if (auto d = packing_difference("packing", e.packing(), a.packing())) return d;
  return std::nullopt;
}

}  // namespace axrt::axe
