// DLPack exchange (include/axrt/dlpack.h). An export is one allocation
// holding the managed tensor, its shape and strides and a reference to the
// tensor; its deleter frees it and drops the reference. An import validates
// everything first, then wraps the producer's memory as an external root
// buffer whose release calls the producer's deleter, and builds the tensor
// over it.
#include "axrt/dlpack.h"

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>

#include "runtime/api.h"
#include "runtime/buffer.h"
#include "runtime/driver.h"
#include "runtime/instance.h"
#include "runtime/tensor.h"

namespace axrt {
namespace {

// The layout this file relies on, the same in every DLPack header version.
static_assert(offsetof(DLManagedTensorVersioned, version) == 0);
static_assert(offsetof(DLManagedTensorVersioned, deleter) ==
              offsetof(DLManagedTensorVersioned, manager_ctx) + sizeof(void*));
static_assert(sizeof(DLDataType) == 4);

// Extents and strides stay below 2^62, as tensor_create wants them.
constexpr int64_t kMaxExtent = int64_t{1} << 62;

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------

struct DtypeMapping {
  axrt_dtype_t dtype;
  uint8_t code;
  uint8_t bits;
};

constexpr DtypeMapping kDtypes[] = {
    {AXRT_DTYPE_BOOL, AXRT_DL_BOOL, 8},
    {AXRT_DTYPE_INT2, kDLInt, 2},
    {AXRT_DTYPE_INT4, kDLInt, 4},
    {AXRT_DTYPE_INT8, kDLInt, 8},
    {AXRT_DTYPE_INT16, kDLInt, 16},
    {AXRT_DTYPE_INT32, kDLInt, 32},
    {AXRT_DTYPE_INT64, kDLInt, 64},
    {AXRT_DTYPE_UINT2, kDLUInt, 2},
    {AXRT_DTYPE_UINT4, kDLUInt, 4},
    {AXRT_DTYPE_UINT8, kDLUInt, 8},
    {AXRT_DTYPE_UINT16, kDLUInt, 16},
    {AXRT_DTYPE_UINT32, kDLUInt, 32},
    {AXRT_DTYPE_UINT64, kDLUInt, 64},
    {AXRT_DTYPE_FLOAT16, kDLFloat, 16},
    {AXRT_DTYPE_FLOAT32, kDLFloat, 32},
    {AXRT_DTYPE_FLOAT64, kDLFloat, 64},
    {AXRT_DTYPE_BFLOAT16, kDLBfloat, 16},
    {AXRT_DTYPE_FLOAT8_E4M3FN, AXRT_DL_FLOAT8_E4M3FN, 8},
    {AXRT_DTYPE_FLOAT8_E5M2, AXRT_DL_FLOAT8_E5M2, 8},
    {AXRT_DTYPE_FLOAT8_E4M3FNUZ, AXRT_DL_FLOAT8_E4M3FNUZ, 8},
    {AXRT_DTYPE_FLOAT8_E5M2FNUZ, AXRT_DL_FLOAT8_E5M2FNUZ, 8},
    {AXRT_DTYPE_FLOAT8_E8M0FNU, AXRT_DL_FLOAT8_E8M0FNU, 8},
    {AXRT_DTYPE_FLOAT4_E2M1, AXRT_DL_FLOAT4_E2M1FN, 4},
};

const char* dl_code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLOpaqueHandle: return "kDLOpaqueHandle";
    case kDLBfloat: return "kDLBfloat";
    case kDLComplex: return "kDLComplex";
    case AXRT_DL_BOOL: return "kDLBool";
    case AXRT_DL_FLOAT8_E3M4: return "kDLFloat8_e3m4";
    case AXRT_DL_FLOAT8_E4M3: return "kDLFloat8_e4m3";
    case AXRT_DL_FLOAT8_E4M3B11FNUZ: return "kDLFloat8_e4m3b11fnuz";
    case AXRT_DL_FLOAT8_E4M3FN: return "kDLFloat8_e4m3fn";
    case AXRT_DL_FLOAT8_E4M3FNUZ: return "kDLFloat8_e4m3fnuz";
    case AXRT_DL_FLOAT8_E5M2: return "kDLFloat8_e5m2";
    case AXRT_DL_FLOAT8_E5M2FNUZ: return "kDLFloat8_e5m2fnuz";
    case AXRT_DL_FLOAT8_E8M0FNU: return "kDLFloat8_e8m0fnu";
    case AXRT_DL_FLOAT6_E2M3FN: return "kDLFloat6_e2m3fn";
    case AXRT_DL_FLOAT6_E3M2FN: return "kDLFloat6_e3m2fn";
    case AXRT_DL_FLOAT4_E2M1FN: return "kDLFloat4_e2m1fn";
  }
  return "an unknown code";
}

const DtypeMapping* mapping_for(axrt_dtype_t dtype) {
  for (const DtypeMapping& m : kDtypes) {
    if (m.dtype == dtype) return &m;
  }
  return nullptr;
}

const DtypeMapping* mapping_for(uint8_t code, uint8_t bits) {
  for (const DtypeMapping& m : kDtypes) {
    if (m.code == code && m.bits == bits) return &m;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------

// DLDeviceType values, read as integers: a producer may send a type the
// included header does not enumerate.
enum : int32_t {
  kTypeCpu = 1,
  kTypeCuda = 2,
  kTypeCudaHost = 3,
};

const char* dl_device_name(int32_t type) {
  switch (type) {
    case 1: return "kDLCPU";
    case 2: return "kDLCUDA";
    case 3: return "kDLCUDAHost";
    case 4: return "kDLOpenCL";
    case 7: return "kDLVulkan";
    case 8: return "kDLMetal";
    case 9: return "kDLVPI";
    case 10: return "kDLROCM";
    case 11: return "kDLROCMHost";
    case 12: return "kDLExtDev";
    case 13: return "kDLCUDAManaged";
    case 14: return "kDLOneAPI";
    case 15: return "kDLWebGPU";
    case 16: return "kDLHexagon";
    case 17: return "kDLMAIA";
    case 18: return "kDLTrn";
  }
  return "an unknown DLPack device type";
}

int32_t device_type_of(const DLDevice& device) {
  int32_t type = 0;
  static_assert(sizeof(device.device_type) == sizeof(type));
  std::memcpy(&type, &device.device_type, sizeof(type));
  return type;
}

DLDevice make_dl_device(int32_t type, int32_t id) {
  DLDevice device;
  std::memcpy(&device.device_type, &type, sizeof(type));
  device.device_id = id;
  return device;
}

std::string device_list(const Instance& instance) {
  std::string names;
  for (const Device* device : instance.devices) {
    if (!names.empty()) names += ", ";
    names += device->id();
  }
  return names.empty() ? "none" : names;
}

Device* find_device(const Instance& instance, axrt_device_type_t type, uint32_t ordinal) {
  for (Device* device : instance.devices) {
    if (device->properties.type == type && device->properties.ordinal == ordinal) return device;
  }
  return nullptr;
}

// Where an imported tensor lives in axrt terms.
struct ImportTarget {
  Device* device = nullptr;
  axrt_memory_type_t memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
  bool host_memory = true;  // `data` is a host address
};

axrt_status_t resolve_import_device(const ApiCall& api, const Instance& instance,
                                    const DLDevice& dl, ImportTarget* out) {
  const int32_t type = device_type_of(dl);
  const int32_t id = dl.device_id;
  axrt_device_type_t wanted = AXRT_DEVICE_TYPE_UNKNOWN;
  uint32_t ordinal = 0;
  const char* driver = "";
  switch (type) {
    case kTypeCpu:
      wanted = AXRT_DEVICE_TYPE_CPU;
      driver = "cpu";
      out->memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
      out->host_memory = true;
      break;
    case kTypeCuda:
      wanted = AXRT_DEVICE_TYPE_CUDA;
      driver = "cuda";
      out->memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
      out->host_memory = false;
      break;
    case kTypeCudaHost:
      // Page-locked host memory: a host tensor, on cpu:0 whatever the id.
      wanted = AXRT_DEVICE_TYPE_CPU;
      driver = "cpu";
      out->memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
      out->host_memory = true;
      break;
    default:
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "`managed->dl_tensor.device` is {} (device type {}, id {}), which no axrt "
                       "device type corresponds to (axrt takes kDLCPU, kDLCUDA and kDLCUDAHost)",
                       dl_device_name(type), type, id);
  }
  if (type != kTypeCudaHost) {
    if (id < 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`managed->dl_tensor.device` is {} with the negative id {}",
                       dl_device_name(type), id);
    }
    ordinal = static_cast<uint32_t>(id);
  }
  Device* device = find_device(instance, wanted, ordinal);
  if (device == nullptr) {
    return api.error(AXRT_STATUS_CODE_NOT_FOUND,
                     "`managed->dl_tensor.device` is {} id {}, which would be {}:{}; the instance "
                     "has no such device (devices: {})",
                     dl_device_name(type), id, driver, ordinal, device_list(instance));
  }
  out->device = device;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

// One allocation per export; the managed tensor comes first, so the deleter
// finds the rest from its argument.
template <typename Managed>
struct Export {
  Managed managed;
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> shape;
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> strides;
  Tensor* tensor;  // one reference
};

template <typename Managed>
void delete_export(Managed* self) noexcept {
  if (self == nullptr) return;
  auto* exported = reinterpret_cast<Export<Managed>*>(self);
  Tensor* tensor = exported->tensor;
  delete exported;
  object_release(tensor);
}

// Fills `*out` to describe `tensor` (whose buffer is live).
axrt_status_t describe_tensor(const ApiCall& api, const Tensor& tensor, int64_t* shape,
                              int64_t* strides, DLTensor* out) {
  const DtypeMapping* dtype = mapping_for(tensor.dtype);
  if (dtype == nullptr) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "`tensor` has element type {} ({}), which DLPack has no code for",
                     dtype_name(tensor.dtype), tensor.dtype);
  }
  const Buffer& buffer = *tensor.buffer;
  const Buffer& root = *buffer.allocation();
  const Device& device = *buffer.device;
  const uint32_t ordinal = device.properties.ordinal;
  bool host_memory = true;
  switch (device.properties.type) {
    case AXRT_DEVICE_TYPE_CPU:
      out->device = make_dl_device(kTypeCpu, static_cast<int32_t>(ordinal));
      break;
    case AXRT_DEVICE_TYPE_CUDA:
      if (root.memory_type == AXRT_MEMORY_TYPE_HOST_PINNED) {
        out->device = make_dl_device(kTypeCudaHost, 0);
      } else {
        out->device = make_dl_device(kTypeCuda, static_cast<int32_t>(ordinal));
        host_memory = false;
      }
      break;
    default:
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "`tensor` lives on {}, a device DLPack exchange does not cover (it covers "
                       "CPU and CUDA devices)",
                       device.id());
  }
  void* data = nullptr;
  if (host_memory) {
    if (!buffer.host_visible()) {
      return api.error(AXRT_STATUS_CODE_INTERNAL,
                       "`tensor` views {}, host memory without a host address", buffer.describe());
    }
    data = buffer.host_address(buffer.offset);
  } else {
    data = reinterpret_cast<void*>(static_cast<uintptr_t>(buffer.device_address(buffer.offset)));
  }
  for (uint32_t d = 0; d < tensor.rank; ++d) {
    shape[d] = tensor.shape[d];
    strides[d] = tensor.strides[d];
  }
  const bool empty = tensor.element_count() == 0;
  out->data = empty ? nullptr : data;
  out->byte_offset = empty ? 0 : tensor.byte_offset;
  out->ndim = static_cast<int32_t>(tensor.rank);
  out->dtype.code = dtype->code;
  out->dtype.bits = dtype->bits;
  out->dtype.lanes = 1;
  out->shape = shape;
  out->strides = strides;
  return nullptr;
}

template <typename Managed>
axrt_status_t export_tensor(const ApiCall& api, Tensor* tensor, Managed** out,
                            uint64_t* out_flags) {
  if (tensor->buffer->is_deallocated()) {
    return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                     "`tensor` views {}, which was deallocated (axrt_stream_deallocate_buffer)",
                     tensor->buffer->describe());
  }
  auto exported = std::make_unique<Export<Managed>>();
  AXRT_RETURN_IF_ERROR(describe_tensor(api, *tensor, exported->shape.data(),
                                       exported->strides.data(), &exported->managed.dl_tensor));
  object_retain(tensor);
  exported->tensor = tensor;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = &delete_export<Managed>;
  if (out_flags) *out_flags = tensor->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  *out = &exported.release()->managed;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

// As Tensor::contiguous().
bool row_major_contiguous(uint32_t rank, const int64_t* shape, const int64_t* strides) {
  int64_t expected = 1;
  for (uint32_t d = rank; d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

void release_nothing(void*) {}

void release_versioned(void* context) {
  auto* managed = static_cast<DLManagedTensorVersioned*>(context);
  if (managed->deleter) managed->deleter(managed);
}

void release_legacy(void* context) {
  auto* managed = static_cast<DLManagedTensor*>(context);
  if (managed->deleter) managed->deleter(managed);
}

// What an empty host tensor without a data pointer points at: a buffer of 0
// bytes that is still host-visible.
std::byte empty_host_memory[1];

// Validates `dl` and builds the tensor over the producer's memory. The
// buffer's release does nothing until the caller commits the import.
axrt_status_t import_tensor(const ApiCall& api, const Instance& instance, const DLTensor& dl,
                            uint64_t dl_flags, Ref<Tensor>* out) {
  // Element type.
  const DLDataType dt = dl.dtype;
  if (dt.lanes != 1) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "`managed->dl_tensor.dtype` ({}, {} bits) has {} lanes; axrt tensors take "
                     "lanes 1 only",
                     dl_code_name(dt.code), dt.bits, dt.lanes);
  }
  const DtypeMapping* dtype = mapping_for(dt.code, dt.bits);
  if (dtype == nullptr) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "`managed->dl_tensor.dtype` (code {} = {}, bits {}, lanes {}) is no axrt "
                     "element type",
                     dt.code, dl_code_name(dt.code), dt.bits, dt.lanes);
  }
  const uint32_t bits = dtype_bits(dtype->dtype);
  if (bits < 8 && (dl_flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "`managed->flags` marks the {} elements padded to a byte each; axrt takes "
                     "sub-byte elements packed only",
                     dtype_name(dtype->dtype));
  }

  // Rank and shape.
  if (dl.ndim < 0) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`managed->dl_tensor.ndim` is {}",
                     dl.ndim);
  }
  if (dl.ndim > AXRT_TENSOR_MAX_RANK) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "`managed->dl_tensor.ndim` is {}; axrt tensors have at most {} dimensions",
                     dl.ndim, AXRT_TENSOR_MAX_RANK);
  }
  const auto rank = static_cast<uint32_t>(dl.ndim);
  if (rank > 0 && dl.shape == nullptr) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`managed->dl_tensor.shape` is NULL for ndim {}", rank);
  }
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> shape{};
  std::array<int64_t, AXRT_TENSOR_MAX_RANK> strides{};
  bool empty = false;
  for (uint32_t d = 0; d < rank; ++d) {
    const int64_t extent = dl.shape[d];
    if (extent < 0 || extent > kMaxExtent) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`managed->dl_tensor.shape[{}]` is {}",
                       d, extent);
    }
    shape[d] = extent;
    if (extent == 0) empty = true;
  }
  uint64_t count = empty ? 0 : 1;
  for (uint32_t d = 0; d < rank && !empty; ++d) {
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(shape[d]), &count)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`managed->dl_tensor.shape` {} has too many elements",
                       format_shape({shape.data(), rank}));
    }
  }

  // Strides: NULL is compact row-major. Strides that address nothing (of
  // dimensions of extent 1, and all of an empty tensor) may be anything and
  // are replaced by row-major ones.
  uint64_t last_element = 0;  // the furthest element, in elements from element 0
  if (!empty) {
    int64_t row_major = 1;
    for (uint32_t d = rank; d-- > 0;) {
      int64_t stride = dl.strides ? dl.strides[d] : row_major;
      if (shape[d] == 1 && (stride < 0 || stride > kMaxExtent)) {
        stride = row_major;
      } else if (stride < 0) {
        return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "`managed->dl_tensor.strides[{}]` is {}; axrt tensors take non-negative "
                         "strides only (strides {} for shape {})",
                         d, stride, format_shape({dl.strides, rank}),
                         format_shape({shape.data(), rank}));
      } else if (stride > kMaxExtent) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`managed->dl_tensor.strides[{}]` is {}", d, stride);
      }
      strides[d] = stride;
      row_major *= shape[d];
    }
    for (uint32_t d = 0; d < rank; ++d) {
      uint64_t reach = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(shape[d] - 1),
                                 static_cast<uint64_t>(strides[d]), &reach) ||
          __builtin_add_overflow(last_element, reach, &last_element)) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`managed->dl_tensor.strides` {} reach too far for shape {}",
                         format_shape({strides.data(), rank}), format_shape({shape.data(), rank}));
      }
    }
    if (last_element >= (uint64_t{1} << 58)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "a {} tensor of shape {} and strides {} spans {} elements, more than any "
                       "memory holds",
                       dtype_name(dtype->dtype), format_shape({shape.data(), rank}),
                       format_shape({strides.data(), rank}), last_element + 1);
    }
    if (bits < 8 && !row_major_contiguous(rank, shape.data(), strides.data())) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "a {} tensor must be contiguous; strides {} for shape {} are not",
                       dtype_name(dtype->dtype), format_shape({strides.data(), rank}),
                       format_shape({shape.data(), rank}));
    }
  }
  const uint64_t span = empty ? 0 : dtype_bytes(dtype->dtype, last_element + 1);

  // Device and memory.
  ImportTarget target;
  AXRT_RETURN_IF_ERROR(resolve_import_device(api, instance, dl.device, &target));
  uint64_t address = 0;
  if (dl.data == nullptr) {
    if (!empty) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`managed->dl_tensor.data` is NULL for a tensor of {} elements", count);
    }
  } else {
    const auto base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(dl.data));
    uint64_t end = 0;
    if (__builtin_add_overflow(base, dl.byte_offset, &address) ||
        __builtin_add_overflow(address, span, &end)) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`managed->dl_tensor.data` {:#x} plus byte_offset {} and {} bytes of "
                       "elements overflows the address space",
                       base, dl.byte_offset, span);
    }
  }
  std::byte* host_pointer = nullptr;
  if (target.host_memory) {
    if (address == 0) address = reinterpret_cast<uintptr_t>(empty_host_memory);
    host_pointer = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(address));
  }

  Ref<Buffer> buffer =
      buffer_wrap_external(target.device, host_pointer, address, span, target.memory_type,
                           "imported from DLPack", &release_nothing, nullptr);
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype->dtype;
  desc.rank = rank;
  desc.shape = shape.data();
  desc.strides = empty ? nullptr : strides.data();
  AXRT_RETURN_IF_ERROR(tensor_create(api, std::move(buffer), desc, out));
  (*out)->read_only = (dl_flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return nullptr;
}

// Hands `context` to the tensor's buffer: from here on its release calls
// the producer's deleter. Nothing can fail after this.
axrt_tensor_t commit_import(Ref<Tensor> tensor, void (*release)(void*), void* context) {
  Buffer* root = tensor->buffer->allocation();
  root->external_context = context;
  root->release_external = release;
  return to_handle<axrt_tensor_t>(tensor.release());
}

}  // namespace
}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_tensor_export_dlpack_versioned(axrt_tensor_t tensor,
                                                           axrt_dlpack_flags_t flags,
                                                           DLManagedTensorVersioned** out) {
  static constexpr ApiCall api("axrt_tensor_export_dlpack_versioned");
  return guard(api.function(), [&]() -> axrt_status_t {
    Tensor* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(tensor, "tensor", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out, "out"));
    if (flags & ~axrt_dlpack_flags_t{AXRT_DLPACK_FLAG_READ_ONLY}) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED, "`flags` sets unknown bits {:#x}",
                       flags & ~axrt_dlpack_flags_t{AXRT_DLPACK_FLAG_READ_ONLY});
    }
    DLManagedTensorVersioned* managed = nullptr;
    uint64_t dl_flags = 0;
    AXRT_RETURN_IF_ERROR(export_tensor(api, self, &managed, &dl_flags));
    if (flags & AXRT_DLPACK_FLAG_READ_ONLY) dl_flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    managed->version.major = AXRT_DLPACK_MAJOR_VERSION;
    managed->version.minor = AXRT_DLPACK_MINOR_VERSION;
    managed->flags = dl_flags;
    *out = managed;
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_dtype_to_dlpack(axrt_dtype_t dtype, DLDataType* out_dtype) {
  static constexpr ApiCall api("axrt_dtype_to_dlpack");
  return guard(api.function(), [&]() -> axrt_status_t {
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_dtype, "out_dtype"));
    const DtypeMapping* mapping = mapping_for(dtype);
    if (!mapping) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`dtype` {} is not a tensor element type", dtype);
    }
    *out_dtype = DLDataType{mapping->code, mapping->bits, 1};
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_tensor_export_dlpack(axrt_tensor_t tensor, DLManagedTensor** out) {
  static constexpr ApiCall api("axrt_tensor_export_dlpack");
  return guard(api.function(), [&]() -> axrt_status_t {
    Tensor* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(tensor, "tensor", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out, "out"));
    return export_tensor(api, self, out, nullptr);
  });
}

AXRT_API axrt_status_t axrt_tensor_import_dlpack_versioned(axrt_instance_t instance,
                                                           DLManagedTensorVersioned* managed,
                                                           axrt_tensor_t* out) {
  static constexpr ApiCall api("axrt_tensor_import_dlpack_versioned");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(managed, "managed"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out, "out"));
    // Past `flags` the layout of another major is unknown: read nothing more.
    if (managed->version.major != AXRT_DLPACK_MAJOR_VERSION) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "`managed->version` is {}.{}; axrt takes DLPack {}.x managed tensors "
                       "(the caller keeps `managed`)",
                       managed->version.major, managed->version.minor, AXRT_DLPACK_MAJOR_VERSION);
    }
    Ref<Tensor> tensor;
    AXRT_RETURN_IF_ERROR(import_tensor(api, *self, managed->dl_tensor, managed->flags, &tensor));
    *out = commit_import(std::move(tensor), &release_versioned, managed);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_tensor_import_dlpack(axrt_instance_t instance, DLManagedTensor* managed,
                                                 axrt_tensor_t* out) {
  static constexpr ApiCall api("axrt_tensor_import_dlpack");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(managed, "managed"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out, "out"));
    Ref<Tensor> tensor;
    AXRT_RETURN_IF_ERROR(import_tensor(api, *self, managed->dl_tensor, 0, &tensor));
    *out = commit_import(std::move(tensor), &release_legacy, managed);
    return nullptr;
  });
}

}  // extern "C"
