// The C entry points of include/axrt/format.h: argument checks and the
// translation of the C descriptions into the builder's object-API tables.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "axrt/format.h"
#include "format/builder.h"
#include "base/fault.h"
#include "runtime/api.h"
#include "runtime/object.h"

namespace axrt {
namespace {

struct AxeBuilderObject : Object {
  static constexpr ObjectType kType = ObjectType::kAxeBuilder;
  AxeBuilderObject() : Object(kType) {}
  axe::Builder builder;
};

void destroy_builder(Object* object) { delete static_cast<AxeBuilderObject*>(object); }

// Builder statuses name the objects; the C API adds the function.
axrt_status_t forward(const ApiCall& api, axrt_status_t status) {
  if (!status) return nullptr;
  StatusPtr owned(status);
  return api.error(axrt_status_code(status), "{}", axrt_status_message(status));
}

std::string read_string(const char* text) { return text ? std::string(text) : std::string(); }

std::span<const uint8_t> bytes_of(const void* data, size_t size) {
  return size == 0 ? std::span<const uint8_t>()
                   : std::span<const uint8_t>(static_cast<const uint8_t*>(data), size);
}

// Copies the fields of `in` that its struct_size covers over `*out`
// (defaults), keeping out's own struct_size and next.
template <typename T>
void copy_known_fields(const T* in, T* out) {
  const size_t size = in->struct_size < sizeof(T) ? in->struct_size : sizeof(T);
  std::memcpy(reinterpret_cast<unsigned char*>(out) + kStructHeaderSize,
              reinterpret_cast<const unsigned char*>(in) + kStructHeaderSize,
              size - kStructHeaderSize);
  out->next = in->next;
}

// Checks a caller struct called `name` and reads it over `defaults`.
template <typename T>
axrt_status_t read_struct(const ApiCall& api, const T* in, const std::string& name,
                          const char* type_name, const T& defaults, T* out) {
  AXRT_RETURN_IF_ERROR(api.require_pointer(in, name.c_str()));
  AXRT_RETURN_IF_ERROR(api.check_struct_size(in, name.c_str(), type_name, sizeof(T)));
  *out = defaults;
  copy_known_fields(in, out);
  Extensions extensions;
  return api.read_extensions(in->next, name.c_str(), 0, &extensions);
}

// Reads an array of `count` structs whose stride is the first element's
// struct_size (so arrays from older and newer headers both read right).
template <typename T>
axrt_status_t read_array(const ApiCall& api, const T* items, size_t count, const std::string& name,
                         const char* type_name, const T& defaults, std::vector<T>* out) {
  out->clear();
  if (count == 0) return nullptr;
  if (!items) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is NULL but its count is {}", name,
                     count);
  }
  const std::string first = name + "[0]";
  AXRT_RETURN_IF_ERROR(api.check_struct_size(items, first.c_str(), type_name, sizeof(T)));
  const size_t stride = items->struct_size;
  if (count > SIZE_MAX / stride) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` count {} is implausibly large",
                     name, count);
  }
  const auto* base = reinterpret_cast<const unsigned char*>(items);
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const auto* item = reinterpret_cast<const T*>(base + i * stride);
    const std::string element = fmt::format("{}[{}]", name, i);
    if (item->struct_size != stride) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`{}->struct_size` is {}, but `{}[0]` has {}: every element of an array "
                       "shares one struct_size",
                       element, item->struct_size, name, stride);
    }
    AXRT_RETURN_IF_ERROR(api.check_struct_size(item, element.c_str(), type_name, sizeof(T)));
    T value = defaults;
    copy_known_fields(item, &value);
    Extensions extensions;
    AXRT_RETURN_IF_ERROR(api.read_extensions(item->next, element.c_str(), 0, &extensions));
    out->push_back(value);
  }
  return nullptr;
}

// An enum value of the C API as the schema's enum class.
template <typename E>
axrt_status_t read_enum(const ApiCall& api, uint32_t value, const std::string& name,
                        const char* type_name, E* out) {
  if (value > static_cast<uint32_t>(E::MAX)) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is {}, not a known {}", name, value,
                     type_name);
  }
  *out = static_cast<E>(value);
  return nullptr;
}

axrt_status_t read_dtype(const ApiCall& api, axrt_axe_dtype_t value, const std::string& name,
                         axe::DType* out) {
  return read_enum(api, value, name, "axrt_axe_dtype_t", out);
}

axrt_status_t read_packing(const ApiCall& api, const axrt_axe_packing_t& in,
                           const std::string& name, std::unique_ptr<axe::PackingT>* out) {
  if (in.bits == 0 && in.container_bits == 0 && in.axis == 0 && in.order == 0 && in.sign == 0 &&
      in.padding == 0) {
    out->reset();
    return nullptr;
  }
  auto packing = std::make_unique<axe::PackingT>();
  if (in.bits > 255 || in.container_bits > 255) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}` has bits {} and container_bits {}; both must be below 256", name,
                     in.bits, in.container_bits);
  }
  packing->bits = static_cast<uint8_t>(in.bits);
  packing->container_bits = static_cast<uint8_t>(in.container_bits);
  packing->axis = in.axis;
  AXRT_RETURN_IF_ERROR(
      read_enum(api, in.order, name + ".order", "axrt_axe_element_order_t", &packing->order));
  AXRT_RETURN_IF_ERROR(
      read_enum(api, in.sign, name + ".sign", "axrt_axe_sign_encoding_t", &packing->sign));
  AXRT_RETURN_IF_ERROR(
      read_enum(api, in.padding, name + ".padding", "axrt_axe_padding_rule_t", &packing->padding));
  *out = std::move(packing);
  return nullptr;
}

axrt_status_t read_scale(const ApiCall& api, const axrt_axe_scale_ref_t& in,
                         const std::string& name, std::unique_ptr<axe::ScaleRefT>* out) {
  if (in.constant == -1 && in.dtype == AXRT_AXE_DTYPE_INVALID &&
      in.layout == AXRT_AXE_SCALE_LAYOUT_GRID) {
    out->reset();
    return nullptr;
  }
  if (in.constant < -1) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}.constant` is {}: a constant index, or -1 for none", name, in.constant);
  }
  auto scale = std::make_unique<axe::ScaleRefT>();
  scale->constant = in.constant;
  AXRT_RETURN_IF_ERROR(read_dtype(api, in.dtype, name + ".dtype", &scale->dtype));
  AXRT_RETURN_IF_ERROR(
      read_enum(api, in.layout, name + ".layout", "axrt_axe_scale_layout_t", &scale->layout));
  *out = std::move(scale);
  return nullptr;
}

axrt_status_t read_shape(const ApiCall& api, const uint64_t* values, size_t count,
                         const std::string& name, std::vector<uint64_t>* out) {
  if (count > 0 && !values) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}` is NULL but its rank is {}", name,
                     count);
  }
  out->assign(values, values + count);
  return nullptr;
}

axrt_status_t read_layout(const ApiCall& api, const axrt_axe_quant_layout_t* in,
                          const std::string& name, std::unique_ptr<axe::QuantLayoutT>* out) {
  if (!in) {
    out->reset();
    return nullptr;
  }
  const axrt_axe_quant_layout_t defaults = AXRT_AXE_QUANT_LAYOUT_INIT;
  axrt_axe_quant_layout_t desc;
  AXRT_RETURN_IF_ERROR(read_struct(api, in, name, "axrt_axe_quant_layout_t", defaults, &desc));
  auto layout = std::make_unique<axe::QuantLayoutT>();
  layout->layout_id = read_string(desc.layout_id);
  AXRT_RETURN_IF_ERROR(read_dtype(api, desc.element_type, name + "->element_type",
                                  &layout->element_type));
  AXRT_RETURN_IF_ERROR(read_dtype(api, desc.dequantized_type, name + "->dequantized_type",
                                  &layout->dequantized_type));
  AXRT_RETURN_IF_ERROR(
      read_shape(api, desc.block_shape, desc.rank, name + "->block_shape", &layout->block_shape));
  AXRT_RETURN_IF_ERROR(read_scale(api, desc.scale, name + "->scale", &layout->scale));
  const axrt_axe_zero_point_t& zp = desc.zero_point;
  const axrt_axe_zero_point_t zp_default = defaults.zero_point;
  std::unique_ptr<axe::PackingT> zp_packing;
  AXRT_RETURN_IF_ERROR(read_packing(api, zp.packing, name + "->zero_point.packing", &zp_packing));
  if (zp.kind != zp_default.kind || zp.constant != zp_default.constant ||
      zp.dtype != zp_default.dtype || zp_packing || zp.stored_bias != 0) {
    auto zero_point = std::make_unique<axe::ZeroPointT>();
    AXRT_RETURN_IF_ERROR(read_enum(api, zp.kind, name + "->zero_point.kind",
                                   "axrt_axe_zero_point_kind_t", &zero_point->kind));
    if (zp.constant < -1) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`{}->zero_point.constant` is {}: a constant index, or -1 for none", name,
                       zp.constant);
    }
    zero_point->constant = zp.constant;
    AXRT_RETURN_IF_ERROR(read_dtype(api, zp.dtype, name + "->zero_point.dtype", &zero_point->dtype));
    zero_point->packing = std::move(zp_packing);
    zero_point->stored_bias = zp.stored_bias;
    layout->zero_point = std::move(zero_point);
  }
  AXRT_RETURN_IF_ERROR(read_scale(api, desc.second_level_scale, name + "->second_level_scale",
                                  &layout->second_level_scale));
  AXRT_RETURN_IF_ERROR(read_shape(api, desc.second_level_block_shape, desc.second_level_rank,
                                  name + "->second_level_block_shape",
                                  &layout->second_level_block_shape));
  AXRT_RETURN_IF_ERROR(read_packing(api, desc.packing, name + "->packing", &layout->packing));
  *out = std::move(layout);
  return nullptr;
}

axrt_status_t read_expr(const ApiCall& api, const axrt_axe_expr_t& in, const std::string& name,
                        std::unique_ptr<axe::ExprT>* out) {
  out->reset();
  if (in.op_count == 0) return nullptr;
  if (!in.ops) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}.ops` is NULL but op_count is {}",
                     name, in.op_count);
  }
  auto expr = std::make_unique<axe::ExprT>();
  expr->ops.reserve(in.op_count);
  for (size_t i = 0; i < in.op_count; ++i) {
    axe::ExprOpcode opcode = axe::ExprOpcode::INVALID;
    AXRT_RETURN_IF_ERROR(read_enum(api, in.ops[i].opcode, fmt::format("{}.ops[{}].opcode", name, i),
                                   "axrt_axe_expr_opcode_t", &opcode));
    if (opcode == axe::ExprOpcode::INVALID) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}.ops[{}].opcode` is INVALID", name,
                       i);
    }
    expr->ops.emplace_back(opcode, in.ops[i].operand);
  }
  *out = std::move(expr);
  return nullptr;
}

axrt_status_t convert_binding(const ApiCall& api, const axrt_axe_binding_t& in,
                              const std::string& name, std::unique_ptr<axe::BindingT>* out) {
  auto binding = std::make_unique<axe::BindingT>();
  AXRT_RETURN_IF_ERROR(
      read_enum(api, in.kind, name + ".kind", "axrt_axe_binding_kind_t", &binding->kind));
  if (binding->kind == axe::BindingKind::INVALID) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}.kind` is INVALID", name);
  }
  binding->index = in.index;
  binding->offset = in.offset;
  binding->size = in.size;
  AXRT_RETURN_IF_ERROR(read_expr(api, in.value, name + ".value", &binding->value));
  *out = std::move(binding);
  return nullptr;
}

// A binding passed by pointer (copy and fill sides).
axrt_status_t read_binding(const ApiCall& api, const axrt_axe_binding_t* in,
                           const std::string& name, std::unique_ptr<axe::BindingT>* out) {
  const axrt_axe_binding_t defaults = AXRT_AXE_BINDING_INIT;
  axrt_axe_binding_t desc;
  AXRT_RETURN_IF_ERROR(read_struct(api, in, name, "axrt_axe_binding_t", defaults, &desc));
  return convert_binding(api, desc, name, out);
}

axrt_status_t read_sigs(const ApiCall& api, const axrt_axe_tensor_sig_t* items, size_t count,
                        const std::string& name,
                        std::vector<std::unique_ptr<axe::TensorSigT>>* out) {
  const axrt_axe_tensor_sig_t defaults = AXRT_AXE_TENSOR_SIG_INIT;
  std::vector<axrt_axe_tensor_sig_t> sigs;
  AXRT_RETURN_IF_ERROR(
      read_array(api, items, count, name, "axrt_axe_tensor_sig_t", defaults, &sigs));
  for (size_t i = 0; i < sigs.size(); ++i) {
    const std::string element = fmt::format("{}[{}]", name, i);
    auto sig = std::make_unique<axe::TensorSigT>();
    sig->name = read_string(sigs[i].name);
    AXRT_RETURN_IF_ERROR(read_dtype(api, sigs[i].dtype, element + ".dtype", &sig->dtype));
    if (sigs[i].rank > 0 && !sigs[i].dims) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`{}.dims` is NULL but rank is {}",
                       element, sigs[i].rank);
    }
    for (size_t d = 0; d < sigs[i].rank; ++d) {
      auto dim = std::make_unique<axe::DimT>();
      dim->value = sigs[i].dims[d].value;
      dim->symbol = sigs[i].dims[d].symbol;
      sig->shape.push_back(std::move(dim));
    }
    const axrt_axe_tensor_sig_flags_t unknown =
        sigs[i].flags & ~axrt_axe_tensor_sig_flags_t{AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE};
    if (unknown != 0) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED, "`{}.flags` sets unknown bits {:#x}",
                       element, unknown);
    }
    sig->mutable_ = (sigs[i].flags & AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE) != 0;
    out->push_back(std::move(sig));
  }
  return nullptr;
}

axrt_status_t resolve_builder(const ApiCall& api, axrt_axe_builder_t handle,
                              AxeBuilderObject** out) {
  return api.resolve(handle, "builder", out);
}

// A constant's data read through the caller's callback while the file is
// written; `release` runs when the builder drops the source.
class CallbackSource final : public axe::ByteSource {
 public:
  explicit CallbackSource(const axrt_axe_data_source_t& source) : source_(source) {}
  ~CallbackSource() override {
    if (source_.release) source_.release(source_.user_data);
  }
  CallbackSource(const CallbackSource&) = delete;
  CallbackSource& operator=(const CallbackSource&) = delete;

  // From here on, the source's release callback runs when it is dropped.
  void adopt_release(void (*release)(void*)) { source_.release = release; }

  uint64_t size() const noexcept override { return source_.size; }
  axrt_status_t read(uint64_t offset, std::span<uint8_t> out) override {
    return source_.read(source_.user_data, offset, out.data(), out.size());
  }

 private:
  axrt_axe_data_source_t source_;
};

// The fields of a constant description but its data.
axrt_status_t read_constant(const ApiCall& api, const axrt_axe_constant_desc_t& d,
                            axe::ConstantT* constant) {
  AXRT_RETURN_IF_ERROR(api.require_pointer(d.name, "desc->name"));
  constant->name = d.name;
  AXRT_RETURN_IF_ERROR(read_dtype(api, d.dtype, "desc->dtype", &constant->dtype));
  AXRT_RETURN_IF_ERROR(read_shape(api, d.shape, d.rank, "desc->shape", &constant->shape));
  if (d.strides) constant->strides.assign(d.strides, d.strides + d.rank);
  constant->alignment = d.alignment;
  return read_layout(api, d.layout, "desc->layout", &constant->quantization);
}

}  // namespace
}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_axe_builder_create(const axrt_axe_builder_options_t* options,
                                               axrt_axe_builder_t* out_builder) {
  static constexpr ApiCall api("axrt_axe_builder_create");
  return guard(api.function(), [&]() -> axrt_status_t {
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_builder, "out_builder"));
    const axrt_axe_builder_options_t defaults = AXRT_AXE_BUILDER_OPTIONS_INIT;
    axrt_axe_builder_options_t opts = defaults;
    if (options) {
      AXRT_RETURN_IF_ERROR(read_struct(api, options, "options", "axrt_axe_builder_options_t",
                                       defaults, &opts));
    }
    auto* object = new AxeBuilderObject();
    object->destroy = destroy_builder;
    auto ref = Ref<AxeBuilderObject>::adopt(object);
    object->builder =
        axe::Builder(read_string(opts.producer_name), read_string(opts.producer_version));
    object_register(object);
    *out_builder = to_handle<axrt_axe_builder_t>(ref.release());
    return nullptr;
  });
}

AXRT_API void axrt_axe_builder_retain(axrt_axe_builder_t builder) {
  retain_handle<AxeBuilderObject>(builder);
}

AXRT_API void axrt_axe_builder_release(axrt_axe_builder_t builder) {
  release_handle<AxeBuilderObject>(builder);
}

AXRT_API axrt_status_t axrt_axe_builder_add_required_feature(axrt_axe_builder_t builder,
                                                             const char* feature) {
  static constexpr ApiCall api("axrt_axe_builder_add_required_feature");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(feature, "feature"));
    return forward(api, self->builder.add_required_feature(feature));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_metadata(axrt_axe_builder_t builder, const char* key,
                                                     const char* value) {
  static constexpr ApiCall api("axrt_axe_builder_add_metadata");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(key, "key"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(value, "value"));
    return forward(api, self->builder.add_metadata(key, value));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_code_object(axrt_axe_builder_t builder,
                                                        const axrt_axe_code_object_desc_t* desc,
                                                        uint32_t* out_index) {
  static constexpr ApiCall api("axrt_axe_builder_add_code_object");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_index, "out_index"));
    const axrt_axe_code_object_desc_t defaults = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    axrt_axe_code_object_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_code_object_desc_t", defaults, &d));
    axe::CodeObjectT code_object;
    AXRT_RETURN_IF_ERROR(read_enum(api, d.kind, "desc->kind", "axrt_axe_code_object_kind_t",
                                   &code_object.kind));
    if (code_object.kind == axe::CodeObjectKind::INVALID) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`desc->kind` is INVALID");
    }
    AXRT_RETURN_IF_ERROR(api.require_pointer(d.target, "desc->target"));
    if (d.size > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(d.data, "desc->data"));
    code_object.target = d.target;
    code_object.library_name = read_string(d.library_name);
    code_object.library_min_version = d.library_min_version;
    return forward(api, self->builder.add_code_object(std::move(code_object),
                                                      bytes_of(d.data, d.size), out_index));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_kernel(axrt_axe_builder_t builder,
                                                   const axrt_axe_kernel_desc_t* desc,
                                                   uint32_t* out_index) {
  static constexpr ApiCall api("axrt_axe_builder_add_kernel");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_index, "out_index"));
    const axrt_axe_kernel_desc_t defaults = AXRT_AXE_KERNEL_DESC_INIT;
    axrt_axe_kernel_desc_t d;
    AXRT_RETURN_IF_ERROR(read_struct(api, desc, "desc", "axrt_axe_kernel_desc_t", defaults, &d));
    AXRT_RETURN_IF_ERROR(api.require_pointer(d.name, "desc->name"));
    axe::KernelT kernel;
    kernel.name = d.name;
    kernel.code_object = d.code_object;
    kernel.entry_symbol = read_string(d.entry_symbol);
    kernel.workgroup_size = std::make_unique<axe::Dim3>(d.workgroup_size[0], d.workgroup_size[1],
                                                        d.workgroup_size[2]);
    kernel.dynamic_shared_memory = d.dynamic_shared_memory;
    kernel.cluster_dims =
        std::make_unique<axe::Dim3>(d.cluster_dims[0], d.cluster_dims[1], d.cluster_dims[2]);
    const axrt_axe_kernel_param_t param_defaults = AXRT_AXE_KERNEL_PARAM_INIT;
    std::vector<axrt_axe_kernel_param_t> params;
    AXRT_RETURN_IF_ERROR(read_array(api, d.params, d.param_count, "desc->params",
                                    "axrt_axe_kernel_param_t", param_defaults, &params));
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string name = fmt::format("desc->params[{}]", i);
      auto param = std::make_unique<axe::KernelParamT>();
      param->name = read_string(params[i].name);
      AXRT_RETURN_IF_ERROR(read_enum(api, params[i].kind, name + ".kind",
                                     "axrt_axe_param_kind_t", &param->kind));
      AXRT_RETURN_IF_ERROR(
          read_dtype(api, params[i].scalar_type, name + ".scalar_type", &param->scalar_type));
      AXRT_RETURN_IF_ERROR(read_enum(api, params[i].access, name + ".access",
                                     "axrt_axe_access_t", &param->access));
      AXRT_RETURN_IF_ERROR(read_layout(api, params[i].layout, name + ".layout", &param->layout));
      kernel.params.push_back(std::move(param));
    }
    return forward(api, self->builder.add_kernel(std::move(kernel), out_index));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_kernel_variant(
    axrt_axe_builder_t builder, uint32_t kernel, const axrt_axe_kernel_variant_desc_t* desc) {
  static constexpr ApiCall api("axrt_axe_builder_add_kernel_variant");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    const axrt_axe_kernel_variant_desc_t defaults = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
    axrt_axe_kernel_variant_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_kernel_variant_desc_t", defaults, &d));
    axe::KernelVariantT variant;
    variant.code_object = d.code_object;
    variant.entry_symbol = read_string(d.entry_symbol);
    variant.workgroup_size = std::make_unique<axe::Dim3>(d.workgroup_size[0],
                                                         d.workgroup_size[1], d.workgroup_size[2]);
    variant.dynamic_shared_memory = d.dynamic_shared_memory;
    variant.cluster_dims =
        std::make_unique<axe::Dim3>(d.cluster_dims[0], d.cluster_dims[1], d.cluster_dims[2]);
    return forward(api, self->builder.add_kernel_variant(kernel, std::move(variant)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_constant(axrt_axe_builder_t builder,
                                                     const axrt_axe_constant_desc_t* desc,
                                                     uint32_t* out_index) {
  static constexpr ApiCall api("axrt_axe_builder_add_constant");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_index, "out_index"));
    const axrt_axe_constant_desc_t defaults = AXRT_AXE_CONSTANT_DESC_INIT;
    axrt_axe_constant_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_constant_desc_t", defaults, &d));
    AXRT_RETURN_IF_ERROR(api.require_pointer(d.name, "desc->name"));
    if (d.size > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(d.data, "desc->data"));
    axe::ConstantT constant;
    AXRT_RETURN_IF_ERROR(read_constant(api, d, &constant));
    return forward(api, self->builder.add_constant(std::move(constant), bytes_of(d.data, d.size),
                                                   out_index));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_constant_from_source(
    axrt_axe_builder_t builder, const axrt_axe_constant_desc_t* desc,
    const axrt_axe_data_source_t* source, uint32_t* out_index) {
  static constexpr ApiCall api("axrt_axe_builder_add_constant_from_source");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_index, "out_index"));
    const axrt_axe_constant_desc_t defaults = AXRT_AXE_CONSTANT_DESC_INIT;
    axrt_axe_constant_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_constant_desc_t", defaults, &d));
    if (d.data != nullptr || d.size != 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc->data` and `desc->size` must be NULL and 0: the data comes from "
                       "`source` ({} bytes)",
                       source ? source->size : 0);
    }
    const axrt_axe_data_source_t source_defaults = AXRT_AXE_DATA_SOURCE_INIT;
    axrt_axe_data_source_t src;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, source, "source", "axrt_axe_data_source_t", source_defaults, &src));
    if (src.read == nullptr) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`source->read` is NULL");
    }
    axe::ConstantT constant;
    AXRT_RETURN_IF_ERROR(read_constant(api, d, &constant));
    // The release callback belongs to the caller until the builder keeps
    // the source: a refused constant leaves it unreleased.
    const auto release = src.release;
    src.release = nullptr;
    auto callback = std::make_shared<CallbackSource>(src);
    uint32_t index = 0;
    AXRT_RETURN_IF_ERROR(
        forward(api, self->builder.add_constant(std::move(constant), callback, &index)));
    callback->adopt_release(release);
    *out_index = index;
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_prepacked_copy(axrt_axe_builder_t builder,
                                                           uint32_t constant, const char* target,
                                                           const char* layout_id,
                                                           const void* data, size_t size) {
  static constexpr ApiCall api("axrt_axe_builder_add_prepacked_copy");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(target, "target"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(layout_id, "layout_id"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(data, "data"));
    if (size == 0) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`size` is 0; a pre-packed copy holds at least 1 byte");
    }
    return forward(api, self->builder.add_prepacked_copy(constant, target, layout_id,
                                                         bytes_of(data, size)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_function(axrt_axe_builder_t builder,
                                                     const axrt_axe_function_desc_t* desc,
                                                     uint32_t* out_index) {
  static constexpr ApiCall api("axrt_axe_builder_add_function");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_index, "out_index"));
    const axrt_axe_function_desc_t defaults = AXRT_AXE_FUNCTION_DESC_INIT;
    axrt_axe_function_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_function_desc_t", defaults, &d));
    AXRT_RETURN_IF_ERROR(api.require_pointer(d.name, "desc->name"));
    axe::FunctionT function;
    function.name = d.name;
    function.arena_size = d.arena_size;
    const axrt_axe_symbol_t symbol_defaults = AXRT_AXE_SYMBOL_INIT;
    std::vector<axrt_axe_symbol_t> symbols;
    AXRT_RETURN_IF_ERROR(read_array(api, d.symbols, d.symbol_count, "desc->symbols",
                                    "axrt_axe_symbol_t", symbol_defaults, &symbols));
    for (const axrt_axe_symbol_t& s : symbols) {
      auto symbol = std::make_unique<axe::SymbolT>();
      symbol->name = read_string(s.name);
      symbol->upper_bound = s.upper_bound;
      function.symbols.push_back(std::move(symbol));
    }
    AXRT_RETURN_IF_ERROR(read_sigs(api, d.inputs, d.input_count, "desc->inputs", &function.inputs));
    AXRT_RETURN_IF_ERROR(
        read_sigs(api, d.outputs, d.output_count, "desc->outputs", &function.outputs));
    const axrt_axe_channel_t channel_defaults = AXRT_AXE_CHANNEL_INIT;
    std::vector<axrt_axe_channel_t> channels;
    AXRT_RETURN_IF_ERROR(read_array(api, d.channels, d.channel_count, "desc->channels",
                                    "axrt_axe_channel_t", channel_defaults, &channels));
    for (const axrt_axe_channel_t& c : channels) {
      auto channel = std::make_unique<axe::ChannelT>();
      channel->name = read_string(c.name);
      channel->size = c.size;
      function.channels.push_back(std::move(channel));
    }
    return forward(api, self->builder.add_function(std::move(function), out_index));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_dispatch(axrt_axe_builder_t builder, uint32_t function,
                                                     const axrt_axe_dispatch_desc_t* desc) {
  static constexpr ApiCall api("axrt_axe_builder_add_dispatch");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    const axrt_axe_dispatch_desc_t defaults = AXRT_AXE_DISPATCH_DESC_INIT;
    axrt_axe_dispatch_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_dispatch_desc_t", defaults, &d));
    axe::DispatchCommandT dispatch;
    dispatch.kernel = d.kernel;
    AXRT_RETURN_IF_ERROR(
        read_expr(api, d.workgroup_count_x, "desc->workgroup_count_x", &dispatch.workgroup_count_x));
    AXRT_RETURN_IF_ERROR(
        read_expr(api, d.workgroup_count_y, "desc->workgroup_count_y", &dispatch.workgroup_count_y));
    AXRT_RETURN_IF_ERROR(
        read_expr(api, d.workgroup_count_z, "desc->workgroup_count_z", &dispatch.workgroup_count_z));
    const axrt_axe_binding_t binding_defaults = AXRT_AXE_BINDING_INIT;
    std::vector<axrt_axe_binding_t> bindings;
    AXRT_RETURN_IF_ERROR(read_array(api, d.bindings, d.binding_count, "desc->bindings",
                                    "axrt_axe_binding_t", binding_defaults, &bindings));
    for (size_t i = 0; i < bindings.size(); ++i) {
      std::unique_ptr<axe::BindingT> binding;
      AXRT_RETURN_IF_ERROR(
          convert_binding(api, bindings[i], fmt::format("desc->bindings[{}]", i), &binding));
      dispatch.bindings.push_back(std::move(binding));
    }
    axe::CommandUnion command;
    command.Set(std::move(dispatch));
    return forward(api, self->builder.add_command(function, std::move(command)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_copy(axrt_axe_builder_t builder, uint32_t function,
                                                 const axrt_axe_copy_desc_t* desc) {
  static constexpr ApiCall api("axrt_axe_builder_add_copy");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    const axrt_axe_copy_desc_t defaults = AXRT_AXE_COPY_DESC_INIT;
    axrt_axe_copy_desc_t d;
    AXRT_RETURN_IF_ERROR(read_struct(api, desc, "desc", "axrt_axe_copy_desc_t", defaults, &d));
    axe::CopyCommandT copy;
    AXRT_RETURN_IF_ERROR(read_binding(api, d.src, "desc->src", &copy.src));
    AXRT_RETURN_IF_ERROR(read_binding(api, d.dst, "desc->dst", &copy.dst));
    AXRT_RETURN_IF_ERROR(read_expr(api, d.src_offset, "desc->src_offset", &copy.src_offset));
    AXRT_RETURN_IF_ERROR(read_expr(api, d.dst_offset, "desc->dst_offset", &copy.dst_offset));
    AXRT_RETURN_IF_ERROR(read_expr(api, d.length, "desc->length", &copy.length));
    axe::CommandUnion command;
    command.Set(std::move(copy));
    return forward(api, self->builder.add_command(function, std::move(command)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_fill(axrt_axe_builder_t builder, uint32_t function,
                                                 const axrt_axe_fill_desc_t* desc) {
  static constexpr ApiCall api("axrt_axe_builder_add_fill");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    const axrt_axe_fill_desc_t defaults = AXRT_AXE_FILL_DESC_INIT;
    axrt_axe_fill_desc_t d;
    AXRT_RETURN_IF_ERROR(read_struct(api, desc, "desc", "axrt_axe_fill_desc_t", defaults, &d));
    axe::FillCommandT fill;
    AXRT_RETURN_IF_ERROR(read_binding(api, d.target, "desc->target", &fill.target));
    AXRT_RETURN_IF_ERROR(read_expr(api, d.offset, "desc->offset", &fill.offset));
    AXRT_RETURN_IF_ERROR(read_expr(api, d.length, "desc->length", &fill.length));
    if (d.pattern_size > 255) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc->pattern_size` is {}, not 1, 2, 4 or 8", d.pattern_size);
    }
    fill.pattern = d.pattern;
    fill.pattern_size = static_cast<uint8_t>(d.pattern_size);
    axe::CommandUnion command;
    command.Set(std::move(fill));
    return forward(api, self->builder.add_command(function, std::move(command)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_add_collective(axrt_axe_builder_t builder,
                                                       uint32_t function,
                                                       const axrt_axe_collective_desc_t* desc) {
  static constexpr ApiCall api("axrt_axe_builder_add_collective");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    const axrt_axe_collective_desc_t defaults = AXRT_AXE_COLLECTIVE_DESC_INIT;
    axrt_axe_collective_desc_t d;
    AXRT_RETURN_IF_ERROR(
        read_struct(api, desc, "desc", "axrt_axe_collective_desc_t", defaults, &d));
    if (d.kind > 255 || d.op > 255 || d.dtype > 255) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`desc->kind` {}, `desc->op` {} or `desc->dtype` {} is not a value the "
                       "format knows",
                       d.kind, d.op, d.dtype);
    }
    axe::CollectiveCommandT collective;
    collective.kind = static_cast<axe::CollectiveKind>(d.kind);
    collective.channel = d.channel;
    collective.dtype = static_cast<axe::DType>(d.dtype);
    collective.op = static_cast<axe::ReduceOp>(d.op);
    collective.root = d.root;
    AXRT_RETURN_IF_ERROR(read_expr(api, d.count, "desc->count", &collective.count));
    AXRT_RETURN_IF_ERROR(read_binding(api, d.send, "desc->send", &collective.send));
    AXRT_RETURN_IF_ERROR(read_binding(api, d.recv, "desc->recv", &collective.recv));
    AXRT_RETURN_IF_ERROR(
        read_expr(api, d.send_offset, "desc->send_offset", &collective.send_offset));
    AXRT_RETURN_IF_ERROR(
        read_expr(api, d.recv_offset, "desc->recv_offset", &collective.recv_offset));
    axe::CommandUnion command;
    command.Set(std::move(collective));
    return forward(api, self->builder.add_command(function, std::move(command)));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_write_file(axrt_axe_builder_t builder, const char* path) {
  static constexpr ApiCall api("axrt_axe_builder_write_file");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(path, "path"));
    return forward(api, self->builder.write_file(path));
  });
}

AXRT_API axrt_status_t axrt_axe_builder_write_memory(axrt_axe_builder_t builder, void** out_data,
                                                     size_t* out_size) {
  static constexpr ApiCall api("axrt_axe_builder_write_memory");
  return guard(api.function(), [&]() -> axrt_status_t {
    AxeBuilderObject* self = nullptr;
    AXRT_RETURN_IF_ERROR(resolve_builder(api, builder, &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_data, "out_data"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_size, "out_size"));
    std::vector<uint8_t> file;
    AXRT_RETURN_IF_ERROR(forward(api, self->builder.finish(&file)));
    void* data =
        fault::should_fail(fault::Site::kHostAllocation) ? nullptr : std::malloc(file.size());
    if (!data) {
      return api.error(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "cannot allocate {} bytes for the file",
                       file.size());
    }
    std::memcpy(data, file.data(), file.size());
    *out_data = data;
    *out_size = file.size();
    return nullptr;
  });
}

AXRT_API void axrt_axe_memory_free(void* data) { std::free(data); }

}  // extern "C"
