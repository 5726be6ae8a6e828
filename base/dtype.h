// Facts about element types that every layer shares: width and name. The
// .axe schema's DType has the same values as axrt_dtype_t (format/enums.h
// checks it), so the format layer asks here too.
#ifndef AXRT_BASE_DTYPE_H_
#define AXRT_BASE_DTYPE_H_

#include <cstdint>

#include "axrt/base.h"

namespace axrt {

// Bits per element; 0 for AXRT_DTYPE_INVALID and values this library does
// not know.
uint32_t dtype_bits(axrt_dtype_t dtype) noexcept;
// The runtime's name ("f32", "bf16", "fp8_e4m3fn"); "invalid" when unknown.
const char* dtype_name(axrt_dtype_t dtype) noexcept;
// Bytes of `count` contiguous elements (rounded up to whole bytes).
uint64_t dtype_bytes(axrt_dtype_t dtype, uint64_t count) noexcept;

}  // namespace axrt

#endif  // AXRT_BASE_DTYPE_H_
