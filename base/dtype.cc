#include "base/dtype.h"

namespace axrt {

uint32_t dtype_bits(axrt_dtype_t dtype) noexcept {
  switch (dtype) {
    case AXRT_DTYPE_BOOL: case AXRT_DTYPE_INT8: case AXRT_DTYPE_UINT8:
    case AXRT_DTYPE_FLOAT8_E4M3FN: case AXRT_DTYPE_FLOAT8_E5M2:
    case AXRT_DTYPE_FLOAT8_E4M3FNUZ: case AXRT_DTYPE_FLOAT8_E5M2FNUZ:
    case AXRT_DTYPE_FLOAT8_E8M0FNU:
      return 8;
    case AXRT_DTYPE_INT16: case AXRT_DTYPE_UINT16: case AXRT_DTYPE_FLOAT16:
    case AXRT_DTYPE_BFLOAT16:
      return 16;
    case AXRT_DTYPE_INT32: case AXRT_DTYPE_UINT32: case AXRT_DTYPE_FLOAT32:
      return 32;
    case AXRT_DTYPE_INT64: case AXRT_DTYPE_UINT64: case AXRT_DTYPE_FLOAT64:
      return 64;
    case AXRT_DTYPE_INT4: case AXRT_DTYPE_UINT4: case AXRT_DTYPE_FLOAT4_E2M1:
      return 4;
    case AXRT_DTYPE_INT2: case AXRT_DTYPE_UINT2:
      return 2;
  }
  return 0;
}

const char* dtype_name(axrt_dtype_t dtype) noexcept {
  switch (dtype) {
    case AXRT_DTYPE_BOOL: return "bool";
    case AXRT_DTYPE_INT8: return "int8";
    case AXRT_DTYPE_UINT8: return "uint8";
    case AXRT_DTYPE_INT16: return "int16";
    case AXRT_DTYPE_UINT16: return "uint16";
    case AXRT_DTYPE_INT32: return "int32";
    case AXRT_DTYPE_UINT32: return "uint32";
    case AXRT_DTYPE_INT64: return "int64";
    case AXRT_DTYPE_UINT64: return "uint64";
    case AXRT_DTYPE_FLOAT16: return "f16";
    case AXRT_DTYPE_BFLOAT16: return "bf16";
    case AXRT_DTYPE_FLOAT32: return "f32";
    case AXRT_DTYPE_FLOAT64: return "f64";
    case AXRT_DTYPE_INT4: return "int4";
    case AXRT_DTYPE_UINT4: return "uint4";
    case AXRT_DTYPE_INT2: return "int2";
    case AXRT_DTYPE_UINT2: return "uint2";
    case AXRT_DTYPE_FLOAT8_E4M3FN: return "fp8_e4m3fn";
    case AXRT_DTYPE_FLOAT8_E5M2: return "fp8_e5m2";
    case AXRT_DTYPE_FLOAT8_E4M3FNUZ: return "fp8_e4m3fnuz";
    case AXRT_DTYPE_FLOAT8_E5M2FNUZ: return "fp8_e5m2fnuz";
    case AXRT_DTYPE_FLOAT4_E2M1: return "fp4_e2m1";
    case AXRT_DTYPE_FLOAT8_E8M0FNU: return "ue8m0";
  }
  return "invalid";
}

uint64_t dtype_bytes(axrt_dtype_t dtype, uint64_t count) noexcept {
  const uint64_t bits = dtype_bits(dtype);
  return (count * bits + 7) / 8;
}

}  // namespace axrt
