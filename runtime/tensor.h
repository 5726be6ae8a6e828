// Tensors: a dtype, shape and strides over a buffer. What functions take and
// return, and what DLPack exchange describes.
#ifndef AXRT_RUNTIME_TENSOR_H_
#define AXRT_RUNTIME_TENSOR_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "axrt/executable.h"
#include "base/dtype.h"
#include "runtime/buffer.h"
#include "runtime/object.h"

namespace axrt {

class ApiCall;

struct Tensor : Object {
  static constexpr ObjectType kType = ObjectType::kTensor;
  Tensor() : Object(kType) {}

  Ref<Buffer> buffer;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  uint32_t rank = 0;
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> shape{};
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> strides{};  // in elements
  uint64_t byte_offset = 0;  // of element 0 within `buffer`
  // Must not be written through (AXRT_TENSOR_FLAG_READ_ONLY): imported from
  // a read-only DLPack tensor. Invocations refuse it as an output.
  bool read_only = false;

  std::span<const int64_t> dims() const noexcept { return {shape.data(), rank}; }
  uint64_t element_count() const noexcept;
  bool contiguous() const noexcept;
  // Bytes of the elements of a contiguous tensor (sub-byte types rounded up).
  uint64_t contiguous_bytes() const noexcept;
  // The device address of element 0.
  uint64_t device_address() const noexcept;
};

// "[2, 3, 4]"
std::string format_shape(std::span<const int64_t> shape);

// Creates a registered tensor over `buffer` after checking `desc` (its
// struct_size already checked by the caller).
axrt_status_t tensor_create(const ApiCall& api, Ref<Buffer> buffer, const axrt_tensor_desc_t& desc,
                            Ref<Tensor>* out_tensor);

// A contiguous tensor of `dtype` and `shape` over `buffer` (no checks).
Ref<Tensor> tensor_wrap(Ref<Buffer> buffer, axrt_dtype_t dtype, std::span<const int64_t> shape);

}  // namespace axrt

#endif  // AXRT_RUNTIME_TENSOR_H_
