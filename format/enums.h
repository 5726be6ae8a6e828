// Whether a schema enum value is one this reader knows, and its name for
// messages. A file from a newer minor may carry values added after this
// reader was built; the verifier refuses those by number instead of guessing.
#ifndef AXRT_FORMAT_ENUMS_H_
#define AXRT_FORMAT_ENUMS_H_

#include <cstddef>
#include <string>

#include "axrt/base.h"
#include "format/axe_generated.h"

namespace axrt::axe {

namespace enums_detail {
template <typename E, size_t N>
bool in_values(E value, const E (&values)[N]) noexcept {
  for (E known : values) {
    if (known == value) return true;
  }
  return false;
}
}  // namespace enums_detail

#define AXRT_AXE_ENUM_HELPERS(E)                                                                  \
  inline bool known(E value) noexcept { return enums_detail::in_values(value, EnumValues##E()); } \
  inline std::string enum_name(E value) {                                                         \
    const char* name = known(value) ? EnumName##E(value) : nullptr;                               \
    if (name != nullptr && *name != '\0') return name;                                            \
    return std::to_string(static_cast<unsigned>(value));                                          \
  }

AXRT_AXE_ENUM_HELPERS(DType)
AXRT_AXE_ENUM_HELPERS(CodeObjectKind)
AXRT_AXE_ENUM_HELPERS(ParamKind)
AXRT_AXE_ENUM_HELPERS(Access)
AXRT_AXE_ENUM_HELPERS(ZeroPointKind)
AXRT_AXE_ENUM_HELPERS(ElementOrder)
AXRT_AXE_ENUM_HELPERS(SignEncoding)
AXRT_AXE_ENUM_HELPERS(PaddingRule)
AXRT_AXE_ENUM_HELPERS(ScaleLayout)
AXRT_AXE_ENUM_HELPERS(ExprOpcode)
AXRT_AXE_ENUM_HELPERS(BindingKind)
AXRT_AXE_ENUM_HELPERS(Command)
AXRT_AXE_ENUM_HELPERS(CollectiveKind)
AXRT_AXE_ENUM_HELPERS(ReduceOp)

#undef AXRT_AXE_ENUM_HELPERS

// The schema's element types are the C API's, value for value, so that the
// dtype facts of base/dtype.h serve both.
#define AXRT_AXE_SAME_DTYPE(name) \
  static_assert(static_cast<uint32_t>(DType::name) == AXRT_DTYPE_##name, #name)
AXRT_AXE_SAME_DTYPE(INVALID);
AXRT_AXE_SAME_DTYPE(BOOL);
AXRT_AXE_SAME_DTYPE(INT8);
AXRT_AXE_SAME_DTYPE(UINT8);
AXRT_AXE_SAME_DTYPE(INT16);
AXRT_AXE_SAME_DTYPE(UINT16);
AXRT_AXE_SAME_DTYPE(INT32);
AXRT_AXE_SAME_DTYPE(UINT32);
AXRT_AXE_SAME_DTYPE(INT64);
AXRT_AXE_SAME_DTYPE(UINT64);
AXRT_AXE_SAME_DTYPE(FLOAT16);
AXRT_AXE_SAME_DTYPE(BFLOAT16);
AXRT_AXE_SAME_DTYPE(FLOAT32);
AXRT_AXE_SAME_DTYPE(FLOAT64);
AXRT_AXE_SAME_DTYPE(INT4);
AXRT_AXE_SAME_DTYPE(UINT4);
AXRT_AXE_SAME_DTYPE(INT2);
AXRT_AXE_SAME_DTYPE(UINT2);
AXRT_AXE_SAME_DTYPE(FLOAT8_E4M3FN);
AXRT_AXE_SAME_DTYPE(FLOAT8_E5M2);
AXRT_AXE_SAME_DTYPE(FLOAT8_E4M3FNUZ);
AXRT_AXE_SAME_DTYPE(FLOAT8_E5M2FNUZ);
AXRT_AXE_SAME_DTYPE(FLOAT4_E2M1);
AXRT_AXE_SAME_DTYPE(FLOAT8_E8M0FNU);
static_assert(DType::MAX == DType::FLOAT8_E8M0FNU, "a new DType needs a line above");
#undef AXRT_AXE_SAME_DTYPE

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_ENUMS_H_
