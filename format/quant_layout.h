// The arithmetic of element types, packed storage and quantization layouts,
// shared by the verifying reader and the builder so that both agree on how
// many bytes a tensor takes and when two layouts are the same.
//
// Byte sizes (docs/format.md, "Constants"):
//  - Whole-byte types: product(shape) x element bytes; a rank-0 shape is one
//    element.
//  - Packed storage (sub-byte types, and any constant whose quantization
//    layout has a `packing`): elements are packed `bits` at a time into
//    `container_bits` words along `axis`. A row of n elements along the axis
//    takes words = ceil(n * bits / container_bits) (padding ZERO) or exactly
//    n * bits / container_bits (padding EXACT, which must divide), and
//    bytes = product(other dims) x words x container_bits / 8.
//  - Sub-byte types without an explicit packing use the default packing:
//    along the last axis into 8-bit words, padding ZERO (each row starts on a
//    byte). A rank-0 sub-byte tensor takes one byte.
//
// Block grids: grid[d] = ceil(shape[d] / block[d]), where block 0 means the
// whole dimension (grid 1). The scale tensor of a layout has the grid's shape
// (GRID), the grid with its last two dimensions swapped (GRID_TRANSPOSED), or
// is the grid padded to tiles of 128 rows x 4 columns (SWIZZLED_128X4, rows
// being the second-to-last grid dimension, leading dimensions multiplying).
#ifndef AXRT_FORMAT_QUANT_LAYOUT_H_
#define AXRT_FORMAT_QUANT_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format/axe_generated.h"

namespace axrt::axe {

// Bits per element; 0 for INVALID and for values this reader does not know.
uint32_t dtype_bits(DType dtype) noexcept;
// True for types narrower than a byte (INT4, UINT4, INT2, UINT2, FLOAT4_E2M1).
bool dtype_is_sub_byte(DType dtype) noexcept;
// FLOAT16, BFLOAT16, FLOAT32, FLOAT64: what quantized values stand for.
bool dtype_is_wide_float(DType dtype) noexcept;
// Any floating-point type, fp8 / fp4 / e8m0 included: what scales may be.
bool dtype_is_float(DType dtype) noexcept;
// Signed and unsigned integers of every width (BOOL excluded).
bool dtype_is_integer(DType dtype) noexcept;
// Signed integers of whole bytes (INT8 to INT64) and floating-point types:
// the scalar parameter types that take a negative literal (format 1.3), as
// their value or, for floating point, as their bit pattern.
bool dtype_takes_negative_literal(DType dtype) noexcept;

// Overflow-checked u64 arithmetic: false when the result does not fit.
bool checked_add(uint64_t a, uint64_t b, uint64_t* out) noexcept;
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) noexcept;

struct PackingRule {
  uint32_t bits = 8;
  uint32_t container_bits = 8;
  // The packed dimension; ignored for rank 0.
  uint64_t axis = 0;
  PaddingRule padding = PaddingRule::ZERO;
};

enum class SizeError {
  kNone,
  kOverflow,  // the byte count does not fit in 64 bits
  kInexact,   // EXACT padding, but a row does not fill whole words
};

// The default packing of a sub-byte tensor of `rank` dimensions.
PackingRule default_packing(DType dtype, size_t rank) noexcept;
// The packing a Packing table describes (which the caller has validated).
PackingRule packing_rule(const Packing& packing) noexcept;

SizeError packed_byte_size(std::span<const uint64_t> shape, const PackingRule& rule,
                           uint64_t* out) noexcept;
// The bytes of a dense tensor: whole-byte types row-major, sub-byte types with
// the default packing.
SizeError dense_byte_size(std::span<const uint64_t> shape, DType dtype, uint64_t* out) noexcept;
// Product of `shape`; false on overflow.
bool element_count(std::span<const uint64_t> shape, uint64_t* out) noexcept;

// grid[d] = ceil(shape[d] / block[d]), block 0 = whole dimension. Same size as
// `shape`; the caller checks `block` has one entry per dimension.
std::vector<uint64_t> block_grid(std::span<const uint64_t> shape, std::span<const uint64_t> block);
// Elements of the SWIZZLED_128X4 scale storage of `grid`; false on overflow.
bool swizzled_128x4_elements(std::span<const uint64_t> grid, uint64_t* out) noexcept;

// The first difference between two layouts as "field: X vs Y" (expected
// first), or nothing when they are identical. Constant indices (scale,
// zero point, second-level scale) are not compared: they say where one
// constant's data lives, not how it is laid out, and a kernel parameter used
// by several layers sees a different scale constant for each. Absent tables
// compare as different from present ones.
std::optional<std::string> first_layout_difference(const QuantLayout& expected,
                                                   const QuantLayout& actual);

std::string format_shape(std::span<const uint64_t> shape);

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_QUANT_LAYOUT_H_
