// RAII owners of axrt handles. `Handle<T>::steal(h)` takes over a reference
// the caller owned (what every axrt_*_create and get function writes);
// `Handle<T>::borrow(h)` adds one of its own.
#ifndef AXRT_PYTHON_HANDLES_H_
#define AXRT_PYTHON_HANDLES_H_

#include <utility>

#include "axrt/axrt.h"

namespace axrt_py {

template <typename T>
struct HandleTraits;

#define AXRT_PY_HANDLE_TRAITS(type, retain_fn, release_fn)  \
  template <>                                               \
  struct HandleTraits<type> {                               \
    static void retain(type h) { retain_fn(h); }            \
    static void release(type h) { release_fn(h); }          \
  };

AXRT_PY_HANDLE_TRAITS(axrt_instance_t, axrt_instance_retain, axrt_instance_release)
AXRT_PY_HANDLE_TRAITS(axrt_device_t, axrt_device_retain, axrt_device_release)
AXRT_PY_HANDLE_TRAITS(axrt_buffer_t, axrt_buffer_retain, axrt_buffer_release)
AXRT_PY_HANDLE_TRAITS(axrt_stream_t, axrt_stream_retain, axrt_stream_release)
AXRT_PY_HANDLE_TRAITS(axrt_event_t, axrt_event_retain, axrt_event_release)
AXRT_PY_HANDLE_TRAITS(axrt_tensor_t, axrt_tensor_retain, axrt_tensor_release)
AXRT_PY_HANDLE_TRAITS(axrt_executable_t, axrt_executable_retain, axrt_executable_release)
AXRT_PY_HANDLE_TRAITS(axrt_function_t, axrt_function_retain, axrt_function_release)
AXRT_PY_HANDLE_TRAITS(axrt_axe_builder_t, axrt_axe_builder_retain, axrt_axe_builder_release)

#undef AXRT_PY_HANDLE_TRAITS

template <typename T>
class Handle {
 public:
  Handle() = default;
  static Handle steal(T h) { return Handle(h); }
  static Handle borrow(T h) {
    HandleTraits<T>::retain(h);
    return Handle(h);
  }
  Handle(const Handle& other) : h_(other.h_) {
    if (h_) HandleTraits<T>::retain(h_);
  }
  Handle(Handle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Handle& operator=(Handle other) noexcept {
    std::swap(h_, other.h_);
    return *this;
  }
  ~Handle() {
    if (h_) HandleTraits<T>::release(h_);
  }

  T get() const { return h_; }
  // For out-parameters: releases what is held and returns the slot.
  T* out() {
    *this = Handle();
    return &h_;
  }
  T release() { return std::exchange(h_, nullptr); }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  explicit Handle(T h) : h_(h) {}
  T h_ = nullptr;
};

}  // namespace axrt_py

#endif  // AXRT_PYTHON_HANDLES_H_
