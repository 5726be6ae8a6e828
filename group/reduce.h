// Element-wise reductions of collectives: out[i] = a[i] (op) b[i], `out`
// may be `a` or `b`. Both CPU backends (in one process and across
// processes) combine a vector's members in rank order with these, so that
// their results agree bit for bit.
#ifndef AXRT_GROUP_REDUCE_H_
#define AXRT_GROUP_REDUCE_H_

#include <cstdint>
#include <type_traits>

#include "axrt/group.h"
#include "base/float16.h"

namespace axrt::group {

using ReduceFn = void (*)(void* out, const void* a, const void* b, uint64_t n);

template <typename T, axrt_reduce_op_t Op>
inline T combine(T a, T b) {
  if constexpr (Op == AXRT_REDUCE_SUM) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wraps, as the header says
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  } else if constexpr (Op == AXRT_REDUCE_MAX) {
    return b > a ? b : a;
  } else {
    return b < a ? b : a;
  }
}

template <typename T, axrt_reduce_op_t Op>
void reduce_plain(void* out, const void* a, const void* b, uint64_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  // `out` is `a`, `b` or apart from both, never shifted against them: each
  // element depends on its own index only, so the loop may be vectorized.
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#else
#pragma GCC ivdep
#endif
  for (uint64_t i = 0; i < n; ++i) o[i] = combine<T, Op>(x[i], y[i]);
}

template <float (*Widen)(uint16_t) noexcept, uint16_t (*Narrow)(float) noexcept, axrt_reduce_op_t Op>
void reduce_16(void* out, const void* a, const void* b, uint64_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (uint64_t i = 0; i < n; ++i) o[i] = Narrow(combine<float, Op>(Widen(x[i]), Widen(y[i])));
}

template <axrt_reduce_op_t Op>
ReduceFn reduce_for(axrt_dtype_t dtype) {
  switch (dtype) {
    case AXRT_DTYPE_INT8: return reduce_plain<int8_t, Op>;
    case AXRT_DTYPE_UINT8: return reduce_plain<uint8_t, Op>;
    case AXRT_DTYPE_INT32: return reduce_plain<int32_t, Op>;
    case AXRT_DTYPE_UINT32: return reduce_plain<uint32_t, Op>;
    case AXRT_DTYPE_INT64: return reduce_plain<int64_t, Op>;
    case AXRT_DTYPE_UINT64: return reduce_plain<uint64_t, Op>;
    case AXRT_DTYPE_FLOAT16: return reduce_16<half_to_float, float_to_half, Op>;
    case AXRT_DTYPE_BFLOAT16: return reduce_16<bfloat16_to_float, float_to_bfloat16, Op>;
    case AXRT_DTYPE_FLOAT32: return reduce_plain<float, Op>;
    case AXRT_DTYPE_FLOAT64: return reduce_plain<double, Op>;
    default: return nullptr;
  }
}

inline ReduceFn reduce_function(axrt_dtype_t dtype, axrt_reduce_op_t op) {
  switch (op) {
    case AXRT_REDUCE_SUM: return reduce_for<AXRT_REDUCE_SUM>(dtype);
    case AXRT_REDUCE_MAX: return reduce_for<AXRT_REDUCE_MAX>(dtype);
    case AXRT_REDUCE_MIN: return reduce_for<AXRT_REDUCE_MIN>(dtype);
    default: return nullptr;
  }
}

}  // namespace axrt::group

#endif  // AXRT_GROUP_REDUCE_H_
