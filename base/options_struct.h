// Reading a caller's options struct of the public API by the
// struct_size convention (include/axrt/base.h): the fields its struct_size
// covers, the defaults for the rest.
#ifndef AXRT_BASE_OPTIONS_STRUCT_H_
#define AXRT_BASE_OPTIONS_STRUCT_H_

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace axrt {

// `*out` becomes `defaults` overwritten by as much of `*in` as its
// struct_size covers (all defaults when `in` is null), with `out`'s
// struct_size set to sizeof(T). False, leaving `*out` at the defaults, when
// `in->struct_size` does not reach past `next`.
template <class T>
bool read_options_struct(const T* in, T* out, const T& defaults) {
  *out = defaults;
  if (in == nullptr) return true;
  if (in->struct_size < offsetof(T, next) + sizeof(void*)) return false;
  std::memcpy(out, in, std::min(in->struct_size, sizeof(T)));
  out->struct_size = sizeof(T);
  return true;
}

}  // namespace axrt

#endif  // AXRT_BASE_OPTIONS_STRUCT_H_
