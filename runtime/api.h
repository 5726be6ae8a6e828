// Helpers for the C entry points: resolving handles, checking out-parameters,
// reading versioned options structs and extension chains. Every error they
// return names the API function and the parameter.
#ifndef AXRT_RUNTIME_API_H_
#define AXRT_RUNTIME_API_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "axrt/base.h"
#include "base/status.h"
#include "runtime/handle_table.h"

namespace axrt {

// The smallest struct_size any options or query struct may have: the
// `struct_size` and `next` members every one of them starts with.
inline constexpr size_t kStructHeaderSize = sizeof(size_t) + sizeof(void*);

template <typename Handle>
inline uint64_t handle_value(Handle handle) noexcept {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

template <typename Handle>
inline Handle to_handle(const Object* object) noexcept {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(object->handle));
}

// What an extension chain carried, for the extension types a caller takes.
struct Extensions {
  std::string label;
};

// Bits of the extension types a function accepts.
inline constexpr uint32_t kAcceptDebugLabel = 1u << AXRT_EXTENSION_TYPE_DEBUG_LABEL;

class ApiCall {
 public:
  explicit constexpr ApiCall(const char* function) : function_(function) {}
  const char* function() const noexcept { return function_; }

  template <typename... Args>
  axrt_status_t error(axrt_status_code_t code, fmt::format_string<Args...> format,
                      Args&&... args) const noexcept {
    try {
      return make_status(code, fmt::format("{}: {}", function_,
                                           fmt::format(format, std::forward<Args>(args)...)));
    } catch (...) {
      return out_of_memory_status();
    }
  }

  // Takes `status` (from deeper down; may be NULL) and puts the function's
  // name in front of its message.
  axrt_status_t prefix(axrt_status_t status) const noexcept {
    if (!status) return nullptr;
    StatusPtr owned(status);
    return error(status->code, "{}", status->message);
  }

  // Looks up `handle` (the parameter called `name`) as an object of type T.
  template <typename T, typename Handle>
  axrt_status_t resolve(Handle handle, const char* name, T** out) const noexcept {
    HandleTable::Lookup result;
    Object* object = HandleTable::global().find(handle_value(handle), &result);
    const char* expected = object_type_name(T::kType);
    switch (result) {
      case HandleTable::Lookup::kFound:
        break;
      case HandleTable::Lookup::kNull:
        return error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is NULL (expected a {} handle)", name,
                     expected);
      case HandleTable::Lookup::kReleased:
        return error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                     "`{}` is a released handle: the object it named was destroyed (expected a "
                     "live {} handle)",
                     name, expected);
      case HandleTable::Lookup::kNotAHandle:
        return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}` ({:#x}) is not a handle of this library (expected a {} handle)", name,
                     handle_value(handle), expected);
    }
    if (object->type != T::kType) {
      return error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is a {} handle, expected a {} handle",
                   name, object_type_name(object->type), expected);
    }
    *out = static_cast<T*>(object);
    return nullptr;
  }

  axrt_status_t require_pointer(const void* pointer, const char* name) const noexcept {
    if (pointer) return nullptr;
    return error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is NULL", name);
  }

  // Checks the struct_size of a caller-provided struct called `name` of type
  // `type_name`, and that fields beyond `known_size` (from a newer header)
  // are zero.
  axrt_status_t check_struct_size(const void* data, const char* name, const char* type_name,
                                  size_t known_size) const noexcept {
    const size_t size = *static_cast<const size_t*>(data);
    if (size < kStructHeaderSize) {
      return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   "`{}->struct_size` is {}, smaller than the {}-byte header every {} starts "
                   "with (use its AXRT_*_INIT macro)",
                   name, size, kStructHeaderSize, type_name);
    }
    // sizeof of every version of these structs is: a size that is not would
    // cut a field in two.
    if (size % alignof(size_t) != 0) {
      return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   "`{}->struct_size` is {}, which is not the size of any version of {} (not a "
                   "multiple of {}; use its AXRT_*_INIT macro)",
                   name, size, type_name, alignof(size_t));
    }
    if (size > known_size) {
      if (size - known_size > (1u << 16)) {
        return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}->struct_size` is {}, implausibly larger than this library's {} ({} "
                     "bytes)",
                     name, size, type_name, known_size);
      }
      const auto* bytes = static_cast<const unsigned char*>(data);
      for (size_t i = known_size; i < size; ++i) {
        if (bytes[i] != 0) {
          return error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "`{}` sets fields beyond the {} bytes of {} that library version {} "
                       "knows (struct_size {})",
                       name, known_size, type_name, axrt_version_string(), size);
        }
      }
    }
    return nullptr;
  }

  // Walks the extension chain starting at `next` of the struct `name`.
  axrt_status_t read_extensions(const void* next, const char* name, uint32_t accepted,
                                Extensions* out) const;

 private:
  const char* function_;
};

// _retain and _release of the C API: unknown, stale or mistyped handles are
// ignored, since these functions cannot report errors.
template <typename T, typename Handle>
void retain_handle(Handle handle) noexcept {
  HandleTable::Lookup result;
  Object* object = HandleTable::global().find(handle_value(handle), &result);
  if (object && object->type == T::kType) object_retain(object);
}

template <typename T, typename Handle>
void release_handle(Handle handle) noexcept {
  HandleTable::Lookup result;
  Object* object = HandleTable::global().find(handle_value(handle), &result);
  if (object && object->type == T::kType) object_release(object);
}

// Copies `field` from `in` to `out` when `in`'s struct_size covers it, so a
// struct from an older header leaves the missing fields at their defaults.
#define AXRT_READ_FIELD(in, out, field)                                            \
  do {                                                                             \
    if ((in)->struct_size >= offsetof(std::remove_cvref_t<decltype(*(in))>, field) + \
                                 sizeof((in)->field))                              \
      (out)->field = (in)->field;                                                  \
  } while (0)

// Writes `filled` into the caller's query struct `out`, up to the caller's
// struct_size and keeping the caller's `struct_size` and `next`.
template <typename T>
void write_query_struct(const T& filled, T* out) noexcept {
  const size_t size = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  std::memcpy(reinterpret_cast<unsigned char*>(out) + kStructHeaderSize,
              reinterpret_cast<const unsigned char*>(&filled) + kStructHeaderSize,
              size - kStructHeaderSize);
}

// For a query struct: `out` non-NULL and its struct_size at least the header.
axrt_status_t check_query_struct(const ApiCall& api, const void* out, const char* name,
                                 const char* type_name) noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_API_H_
