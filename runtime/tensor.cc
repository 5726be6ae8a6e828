#include "runtime/tensor.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "runtime/api.h"

namespace axrt {
namespace {

void destroy_tensor(Object* object) { delete static_cast<Tensor*>(object); }

void fill_row_major_strides(Tensor* tensor) {
  int64_t stride = 1;
  for (uint32_t d = tensor->rank; d-- > 0;) {
    tensor->strides[d] = stride;
    stride *= tensor->shape[d] > 0 ? tensor->shape[d] : 1;
  }
}

Ref<Tensor> new_tensor(Ref<Buffer> buffer) {
  auto* tensor = new Tensor();
  tensor->destroy = destroy_tensor;
  tensor->buffer = std::move(buffer);
  return Ref<Tensor>::adopt(tensor);
}

}  // namespace

std::string format_shape(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

uint64_t Tensor::element_count() const noexcept {
  uint64_t count = 1;
  for (uint32_t d = 0; d < rank; ++d) count *= static_cast<uint64_t>(shape[d]);
  return count;
}

bool Tensor::contiguous() const noexcept {
  int64_t expected = 1;
  for (uint32_t d = rank; d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

uint64_t Tensor::contiguous_bytes() const noexcept { return dtype_bytes(dtype, element_count()); }

uint64_t Tensor::device_address() const noexcept {
  return buffer->device_address(buffer->offset + byte_offset);
}

axrt_status_t tensor_create(const ApiCall& api, Ref<Buffer> buffer, const axrt_tensor_desc_t& desc,
                            Ref<Tensor>* out_tensor) {
  const uint32_t bits = dtype_bits(desc.dtype);
  if (bits == 0) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`desc->dtype` {} is not a tensor element type", desc.dtype);
  }
  if (desc.rank > AXRT_TENSOR_MAX_RANK) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->rank` {} exceeds the largest rank {}",
                     desc.rank, AXRT_TENSOR_MAX_RANK);
  }
  if (desc.rank > 0 && desc.shape == nullptr) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->shape` is NULL for rank {}",
                     desc.rank);
  }
  Ref<Tensor> tensor = new_tensor(std::move(buffer));
  tensor->dtype = desc.dtype;
  tensor->rank = desc.rank;
  tensor->byte_offset = desc.byte_offset;
  // The span of the elements in bytes, with overflow checks: every extent
  // and stride is below 2^62, and products are checked.
  uint64_t count = 1;
  bool empty = false;
  for (uint32_t d = 0; d < desc.rank; ++d) {
    const int64_t extent = desc.shape[d];
    if (extent < 0 || extent > (int64_t{1} << 62)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->shape[{}]` is {}", d, extent);
    }
    tensor->shape[d] = extent;
    if (extent == 0) empty = true;
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(extent), &count)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->shape` {} has too many elements",
                       format_shape(tensor->dims()));
    }
  }
  uint64_t last_element = 0;  // index of the furthest element, in elements
  if (desc.strides) {
    for (uint32_t d = 0; d < desc.rank; ++d) {
      const int64_t stride = desc.strides[d];
      if (stride < 0 || stride > (int64_t{1} << 62)) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`desc->strides[{}]` is {}; strides are non-negative", d, stride);
      }
      tensor->strides[d] = stride;
      uint64_t reach = 0;
      if (!empty && (__builtin_mul_overflow(static_cast<uint64_t>(tensor->shape[d] - 1),
                                            static_cast<uint64_t>(stride), &reach) ||
                     __builtin_add_overflow(last_element, reach, &last_element))) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`desc->strides` {} reach too far for shape {}",
                         format_shape(tensor->dims()), format_shape({desc.strides, desc.rank}));
      }
    }
    if (bits < 8 && !tensor->contiguous()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "a tensor of {} must be contiguous; strides {} for shape {} are not",
                       dtype_name(desc.dtype), format_shape({desc.strides, desc.rank}),
                       format_shape(tensor->dims()));
    }
  } else {
    fill_row_major_strides(tensor.get());
    last_element = empty ? 0 : count - 1;
  }
  // No buffer holds 2^58 elements; refusing beyond keeps the byte count
  // below from overflowing.
  if (last_element >= (uint64_t{1} << 58)) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "a {} tensor of shape {} reaches element {}, beyond {}",
                     dtype_name(desc.dtype), format_shape(tensor->dims()), last_element,
                     tensor->buffer->describe());
  }
  const uint64_t span = empty ? 0 : dtype_bytes(desc.dtype, last_element + 1);
  const Buffer& buf = *tensor->buffer;
  if (desc.byte_offset > buf.size || span > buf.size - desc.byte_offset) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "a {} tensor of shape {} at byte offset {} needs {} bytes, beyond {}",
                     dtype_name(desc.dtype), format_shape(tensor->dims()), desc.byte_offset, span,
                     buf.describe());
  }
  object_register(tensor.get());
  *out_tensor = std::move(tensor);
  return nullptr;
}

Ref<Tensor> tensor_wrap(Ref<Buffer> buffer, axrt_dtype_t dtype, std::span<const int64_t> shape) {
  Ref<Tensor> tensor = new_tensor(std::move(buffer));
  tensor->dtype = dtype;
  tensor->rank = static_cast<uint32_t>(shape.size());
  for (uint32_t d = 0; d < tensor->rank; ++d) tensor->shape[d] = shape[d];
  fill_row_major_strides(tensor.get());
  object_register(tensor.get());
  return tensor;
}

namespace {

axrt_status_t read_tensor_desc(const ApiCall& api, const axrt_tensor_desc_t* desc,
                               axrt_tensor_desc_t* out) {
  AXRT_RETURN_IF_ERROR(api.require_pointer(desc, "desc"));
  AXRT_RETURN_IF_ERROR(
      api.check_struct_size(desc, "desc", "axrt_tensor_desc_t", sizeof(axrt_tensor_desc_t)));
  AXRT_READ_FIELD(desc, out, dtype);
  AXRT_READ_FIELD(desc, out, rank);
  AXRT_READ_FIELD(desc, out, shape);
  AXRT_READ_FIELD(desc, out, strides);
  AXRT_READ_FIELD(desc, out, byte_offset);
  Extensions ignored;
  return api.read_extensions(desc->next, "desc", 0, &ignored);
}

}  // namespace

}  // namespace axrt

using namespace axrt;

AXRT_API axrt_status_t axrt_tensor_create(axrt_buffer_t buffer, const axrt_tensor_desc_t* desc,
                                          axrt_tensor_t* out_tensor) {
  static constexpr ApiCall api("axrt_tensor_create");
  return guard(api.function(), [&]() -> axrt_status_t {
    Buffer* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(buffer, "buffer", &target));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_tensor, "out_tensor"));
    axrt_tensor_desc_t d = AXRT_TENSOR_DESC_INIT;
    AXRT_RETURN_IF_ERROR(read_tensor_desc(api, desc, &d));
    Ref<Tensor> tensor;
    AXRT_RETURN_IF_ERROR(tensor_create(api, Ref<Buffer>(target), d, &tensor));
    *out_tensor = to_handle<axrt_tensor_t>(tensor.release());
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_tensor_allocate(axrt_device_t device, const axrt_tensor_desc_t* desc,
                                            const axrt_buffer_options_t* buffer_options,
                                            axrt_tensor_t* out_tensor) {
  static constexpr ApiCall api("axrt_tensor_allocate");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &target));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_tensor, "out_tensor"));
    axrt_tensor_desc_t d = AXRT_TENSOR_DESC_INIT;
    AXRT_RETURN_IF_ERROR(read_tensor_desc(api, desc, &d));
    if (d.strides != nullptr || d.byte_offset != 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc` must describe a contiguous tensor: NULL strides and byte_offset 0");
    }
    if (dtype_bits(d.dtype) == 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc->dtype` {} is not a tensor element type", d.dtype);
    }
    if (d.rank > AXRT_TENSOR_MAX_RANK || (d.rank > 0 && d.shape == nullptr)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc` has rank {} and shape {}", d.rank,
                       d.shape ? "set" : "NULL");
    }
    uint64_t count = 1;
    for (uint32_t i = 0; i < d.rank; ++i) {
      if (d.shape[i] < 0 ||
          __builtin_mul_overflow(count, static_cast<uint64_t>(d.shape[i]), &count) ||
          count > (uint64_t{1} << 60)) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->shape` {} is not allocatable",
                         format_shape({d.shape, d.rank}));
      }
    }
    const uint64_t bytes = std::max<uint64_t>(1, dtype_bytes(d.dtype, count));
    BufferParams params;
    AXRT_RETURN_IF_ERROR(read_buffer_options(api, target, bytes, buffer_options, &params));
    Ref<Buffer> buffer;
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, target, bytes, std::move(params), &buffer));
    Ref<Tensor> tensor;
    AXRT_RETURN_IF_ERROR(tensor_create(api, std::move(buffer), d, &tensor));
    *out_tensor = to_handle<axrt_tensor_t>(tensor.release());
    return nullptr;
  });
}

AXRT_API void axrt_tensor_retain(axrt_tensor_t tensor) { retain_handle<Tensor>(tensor); }

AXRT_API void axrt_tensor_release(axrt_tensor_t tensor) { release_handle<Tensor>(tensor); }

AXRT_API axrt_status_t axrt_tensor_query_info(axrt_tensor_t tensor, axrt_tensor_info_t* out_info) {
  static constexpr ApiCall api("axrt_tensor_query_info");
  return guard(api.function(), [&]() -> axrt_status_t {
    Tensor* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(tensor, "tensor", &self));
    AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_tensor_info_t"));
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    info.dtype = self->dtype;
    info.rank = self->rank;
    info.shape = self->shape.data();
    info.strides = self->strides.data();
    info.byte_offset = self->byte_offset;
    info.element_count = self->element_count();
    info.byte_size = self->contiguous_bytes();
    info.contiguous = self->contiguous();
    info.flags = self->read_only ? AXRT_TENSOR_FLAG_READ_ONLY : 0;
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_tensor_get_buffer(axrt_tensor_t tensor, axrt_buffer_t* out_buffer) {
  static constexpr ApiCall api("axrt_tensor_get_buffer");
  return guard(api.function(), [&]() -> axrt_status_t {
    Tensor* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(tensor, "tensor", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_buffer, "out_buffer"));
    object_retain(self->buffer.get());
    *out_buffer = to_handle<axrt_buffer_t>(self->buffer.get());
    return nullptr;
  });
}

AXRT_API uint32_t axrt_dtype_bit_width(axrt_dtype_t dtype) { return dtype_bits(dtype); }

AXRT_API const char* axrt_dtype_name(axrt_dtype_t dtype) { return dtype_name(dtype); }
