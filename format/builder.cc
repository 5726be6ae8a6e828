#include "format/builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "base/status.h"
#include "format/quant_layout.h"
#include "format/reader.h"
#include "format/writer.h"

namespace axrt::axe {
namespace {

constexpr uint32_t kMaxObjects = static_cast<uint32_t>(std::numeric_limits<int32_t>::max());

std::string quote_name(const std::string& name) { return fmt::format("'{}'", name); }

// Bits per element of the byte-sized types; 0 for sub-byte types, whose
// sizes depend on packing and are judged by the reader.
uint32_t whole_byte_bits(DType dtype) {
  const uint32_t bits = dtype_bits(dtype);
  return bits >= 8 ? bits : 0;
}

// The verifier reads the builder's bytes in place.
class BorrowedStorage final : public Storage {
 public:
  explicit BorrowedStorage(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::span<const uint8_t> bytes() const noexcept override { return bytes_; }

 private:
  std::span<const uint8_t> bytes_;
};

// Appends `bytes` to `segment` at the next multiple of `alignment` and
// returns the offset.
uint64_t append_aligned(std::vector<uint8_t>* segment, std::span<const uint8_t> bytes,
                        uint64_t alignment) {
  const uint64_t offset = align_up(segment->size(), alignment);
  segment->resize(offset + bytes.size(), 0);
  if (!bytes.empty()) std::memcpy(segment->data() + offset, bytes.data(), bytes.size());
  return offset;
}

bool is_memory_binding(BindingKind kind) {
  return kind == BindingKind::INPUT || kind == BindingKind::OUTPUT ||
         kind == BindingKind::CONSTANT || kind == BindingKind::ARENA;
}

// Inputs and constants are read-only.
bool is_writable_binding(BindingKind kind) {
  return kind == BindingKind::OUTPUT || kind == BindingKind::ARENA;
}

}  // namespace

Builder::Builder(std::string producer_name, std::string producer_version) {
  executable_.producer = std::make_unique<ProducerT>();
  executable_.producer->name = std::move(producer_name);
  executable_.producer->version = std::move(producer_version);
}

axrt_status_t Builder::add_required_feature(std::string feature) {
  if (feature.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "a required feature needs a name");
  }
  if (features_.count(feature)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "required feature '{}' was already added", feature);
  }
  features_.insert(feature);
  executable_.required_features.push_back(std::move(feature));
  return nullptr;
}

axrt_status_t Builder::add_metadata(std::string key, std::string value) {
  if (key.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "a metadata entry needs a key");
  }
  if (metadata_keys_.count(key)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "metadata key '{}' was already added",
                       key);
  }
  metadata_keys_.insert(key);
  auto entry = std::make_unique<KeyValueT>();
  entry->key = std::move(key);
  entry->value = std::move(value);
  executable_.metadata.push_back(std::move(entry));
  return nullptr;
}

axrt_status_t Builder::add_code_object(CodeObjectT code_object, std::span<const uint8_t> bytes,
                                       uint32_t* out_index) {
  const size_t index = executable_.code_objects.size();
  const std::string name = fmt::format("code object {} ({})", index,
                                       EnumNameCodeObjectKind(code_object.kind));
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many code objects ({})", index);
  }
  if (code_object.kind == CodeObjectKind::INVALID ||
      code_object.kind > CodeObjectKind::MAX) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "code object {}: kind {} is not known",
                       index, static_cast<uint32_t>(code_object.kind));
  }
  if (code_object.target.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the target is empty", name);
  }
  if (code_object.kind == CodeObjectKind::KERNEL_LIBRARY) {
    if (!bytes.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: a kernel-library reference carries no bytes, but {} were given",
                         name, bytes.size());
    }
    if (code_object.library_name.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: a kernel-library reference needs a library name", name);
    }
  } else {
    if (bytes.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: no bytes were given", name);
    }
    if (!code_object.library_name.empty() || code_object.library_min_version != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: only kernel-library references take a library name and version",
                         name);
    }
  }
  code_object.segment = -1;
  code_bytes_.emplace_back(bytes.begin(), bytes.end());
  executable_.code_objects.push_back(std::make_unique<CodeObjectT>(std::move(code_object)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::add_kernel(KernelT kernel, uint32_t* out_index) {
  const size_t index = executable_.kernels.size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many kernels ({})", index);
  }
  if (kernel.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "kernel {} needs a name", index);
  }
  const std::string name = "kernel " + quote_name(kernel.name);
  if (kernel_names_.count(kernel.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (kernel.code_object >= executable_.code_objects.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "{} names code object {}, but {} code object(s) were added", name,
                       kernel.code_object, executable_.code_objects.size());
  }
  if (kernel.entry_symbol.empty()) kernel.entry_symbol = kernel.name;
  if (!kernel.workgroup_size) kernel.workgroup_size = std::make_unique<Dim3>(1, 1, 1);
  const Dim3& wg = *kernel.workgroup_size;
  if (wg.x() == 0 || wg.y() == 0 || wg.z() == 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: workgroup size {}x{}x{} has a zero component", name, wg.x(), wg.y(),
                       wg.z());
  }
  if (!kernel.cluster_dims) kernel.cluster_dims = std::make_unique<Dim3>(0, 0, 0);
  const Dim3& cluster = *kernel.cluster_dims;
  const bool no_cluster = cluster.x() == 0 && cluster.y() == 0 && cluster.z() == 0;
  if (!no_cluster && (cluster.x() == 0 || cluster.y() == 0 || cluster.z() == 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: cluster dims {}x{}x{} must be all 0 (no clusters) or all at least 1",
                       name, cluster.x(), cluster.y(), cluster.z());
  }
  for (size_t v = 0; v < kernel.variants.size(); ++v) {
    if (!kernel.variants[v]) kernel.variants[v] = std::make_unique<KernelVariantT>();
    AXRT_RETURN_IF_ERROR(check_variant(kernel, v, kernel.variants[v].get()));
  }
  std::set<std::string> param_names;
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParamT* param = kernel.params[i].get();
    const std::string where = fmt::format("{} parameter {} '{}'", name, i, param->name);
    if (!param->name.empty() && !param_names.insert(param->name).second) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: the name is used twice", where);
    }
    switch (param->kind) {
      case ParamKind::BUFFER:
        if (param->scalar_type != DType::INVALID) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: a BUFFER parameter takes no scalar type (got {})", where,
                             EnumNameDType(param->scalar_type));
        }
        if (param->layout) AXRT_RETURN_IF_ERROR(check_layout(*param->layout, where, nullptr));
        break;
      case ParamKind::SCALAR:
        if (param->scalar_type == DType::INVALID || whole_byte_bits(param->scalar_type) == 0) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: a SCALAR parameter needs a whole-byte scalar type (got {})",
                             where, EnumNameDType(param->scalar_type));
        }
        if (param->layout) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: only BUFFER parameters take a layout", where);
        }
        break;
      default:
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kind {} is not known", where,
                           static_cast<uint32_t>(param->kind));
    }
  }
  kernel_names_.insert(kernel.name);
  executable_.kernels.push_back(std::make_unique<KernelT>(std::move(kernel)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::check_variant(const KernelT& kernel, size_t index,
                                     KernelVariantT* variant) const {
  const std::string name = fmt::format("kernel {} variant {}", quote_name(kernel.name), index);
  if (variant->code_object >= executable_.code_objects.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "{} names code object {}, but {} code object(s) were added", name,
                       variant->code_object, executable_.code_objects.size());
  }
  // One implementation per code object: a loader picks implementations by
  // the code object it can load.
  if (variant->code_object == kernel.code_object) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "{}: code object {} already holds the kernel's primary implementation",
                       name, variant->code_object);
  }
  for (size_t v = 0; v < index; ++v) {
    if (kernel.variants[v]->code_object == variant->code_object) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                         "{}: code object {} already holds variant {} of the kernel", name,
                         variant->code_object, v);
    }
  }
  if (variant->entry_symbol.empty()) variant->entry_symbol = kernel.entry_symbol;
  if (!variant->workgroup_size) variant->workgroup_size = std::make_unique<Dim3>(1, 1, 1);
  const Dim3& wg = *variant->workgroup_size;
  if (wg.x() == 0 || wg.y() == 0 || wg.z() == 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: workgroup size {}x{}x{} has a zero component", name, wg.x(), wg.y(),
                       wg.z());
  }
  if (!variant->cluster_dims) variant->cluster_dims = std::make_unique<Dim3>(0, 0, 0);
  const Dim3& cluster = *variant->cluster_dims;
  const bool no_cluster = cluster.x() == 0 && cluster.y() == 0 && cluster.z() == 0;
  if (!no_cluster && (cluster.x() == 0 || cluster.y() == 0 || cluster.z() == 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: cluster dims {}x{}x{} must be all 0 (no clusters) or all at least 1",
                       name, cluster.x(), cluster.y(), cluster.z());
  }
  return nullptr;
}

axrt_status_t Builder::add_kernel_variant(uint32_t kernel_index, KernelVariantT variant) {
  if (kernel_index >= executable_.kernels.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "kernel {} was not added ({} kernel(s) so far)", kernel_index,
                       executable_.kernels.size());
  }
  KernelT& kernel = *executable_.kernels[kernel_index];
  AXRT_RETURN_IF_ERROR(check_variant(kernel, kernel.variants.size(), &variant));
  kernel.variants.push_back(std::make_unique<KernelVariantT>(std::move(variant)));
  return nullptr;
}

axrt_status_t Builder::check_layout(const QuantLayoutT& layout, const std::string& owner,
                                    const ConstantT* constant) const {
  const std::string where = owner + " layout '" + layout.layout_id + "'";
  if (layout.element_type == DType::INVALID) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the element type is INVALID",
                       where);
  }
  if (constant && layout.block_shape.size() != constant->shape.size()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the block shape has {} entries, the constant's rank is {}", where,
                       layout.block_shape.size(), constant->shape.size());
  }
  if (!constant) return nullptr;
  // Constants a layout refers to must be added first, and agree with it.
  auto check_ref = [&](int32_t index, DType dtype, const char* what) -> axrt_status_t {
    if (index == -1) return nullptr;
    if (index < 0 || static_cast<size_t>(index) >= executable_.constants.size()) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                         "{}: the {} names constant {}, but {} constant(s) were added before it",
                         where, what, index, executable_.constants.size());
    }
    const ConstantT& ref = *executable_.constants[static_cast<size_t>(index)];
    if (dtype != DType::INVALID && ref.dtype != dtype) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the {} is declared {}, but constant {} '{}' holds {}", where, what,
                         EnumNameDType(dtype), index, ref.name, EnumNameDType(ref.dtype));
    }
    return nullptr;
  };
  if (layout.scale) AXRT_RETURN_IF_ERROR(check_ref(layout.scale->constant, layout.scale->dtype, "scale"));
  if (layout.zero_point) {
    // Packed zero points are stored as container words (an integer constant
    // of container_bits), so their dtype names the element, not the words.
    const DType dtype = layout.zero_point->packing ? DType::INVALID : layout.zero_point->dtype;
    AXRT_RETURN_IF_ERROR(check_ref(layout.zero_point->constant, dtype, "zero point"));
  }
  if (layout.second_level_scale) {
    AXRT_RETURN_IF_ERROR(check_ref(layout.second_level_scale->constant,
                                   layout.second_level_scale->dtype, "second-level scale"));
  }
  return nullptr;
}

axrt_status_t Builder::add_constant(ConstantT constant, std::span<const uint8_t> bytes,
                                    uint32_t* out_index) {
  const size_t index = executable_.constants.size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many constants ({})", index);
  }
  if (constant.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "constant {} needs a name", index);
  }
  const std::string name = "constant " + quote_name(constant.name);
  if (constant_names_.count(constant.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (constant.dtype == DType::INVALID) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the dtype is INVALID", name);
  }
  if (!constant.strides.empty() && constant.strides.size() != constant.shape.size()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: {} strides for a shape of rank {}", name, constant.strides.size(),
                       constant.shape.size());
  }
  if (constant.alignment == 0) constant.alignment = 64;
  if (!std::has_single_bit(constant.alignment) || constant.alignment > kSegmentAlignment) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: alignment {} is not a power of two at most {}", name,
                       constant.alignment, kSegmentAlignment);
  }
  // Dense whole-byte tensors must hold exactly shape x dtype bytes; the
  // reader judges packed and strided ones.
  const uint32_t bits = whole_byte_bits(constant.dtype);
  if (bits != 0 && constant.strides.empty()) {
    unsigned __int128 expected = bits / 8;
    bool overflow = false;
    for (uint64_t extent : constant.shape) {
      expected *= extent;
      if (expected > std::numeric_limits<uint64_t>::max()) overflow = true;
      if (overflow) break;
    }
    if (overflow || expected != bytes.size()) {
      std::string shape;
      for (uint64_t extent : constant.shape) shape += (shape.empty() ? "" : "x") + std::to_string(extent);
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: shape [{}] of {} needs {} bytes, but {} were given", name, shape,
                         EnumNameDType(constant.dtype),
                         overflow ? std::string("more than 2^64")
                                  : std::to_string(static_cast<uint64_t>(expected)),
                         bytes.size());
    }
  }
  if (constant.quantization) {
    AXRT_RETURN_IF_ERROR(check_layout(*constant.quantization, name, &constant));
  }
  constant.prepacked.clear();
  constant.data = std::make_unique<SegmentRangeT>();
  constant.data->offset = append_aligned(&constant_bytes_, bytes, constant.alignment);
  constant.data->size = bytes.size();
  constant_names_.insert(constant.name);
  executable_.constants.push_back(std::make_unique<ConstantT>(std::move(constant)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::add_prepacked_copy(uint32_t constant, std::string target,
                                          std::string layout_id, std::span<const uint8_t> bytes) {
  if (constant >= executable_.constants.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "a pre-packed copy names constant {}, but {} constant(s) were added",
                       constant, executable_.constants.size());
  }
  ConstantT& owner = *executable_.constants[constant];
  const std::string where = fmt::format("pre-packed copy of constant '{}'", owner.name);
  if (target.empty() || layout_id.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: needs a target and a layout id",
                       where);
  }
  if (bytes.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{} for ({}, {}): no bytes were given",
                       where, target, layout_id);
  }
  auto key = std::make_pair(constant, std::make_pair(target, layout_id));
  if (prepacked_keys_.count(key)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "{} for target '{}' and layout '{}' was already added", where, target,
                       layout_id);
  }
  auto copy = std::make_unique<PrepackedCopyT>();
  copy->target = std::move(target);
  copy->layout_id = std::move(layout_id);
  copy->data = std::make_unique<SegmentRangeT>();
  copy->data->offset = append_aligned(&prepacked_bytes_, bytes, owner.alignment);
  copy->data->size = bytes.size();
  owner.prepacked.push_back(std::move(copy));
  prepacked_keys_.insert(std::move(key));
  return nullptr;
}

axrt_status_t Builder::add_function(FunctionT function, uint32_t* out_index) {
  const size_t index = executable_.functions.size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many functions ({})", index);
  }
  if (function.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "function {} needs a name", index);
  }
  const std::string name = "function " + quote_name(function.name);
  if (function_names_.count(function.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (!function.commands.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: commands are added one by one after the function", name);
  }
  std::set<std::string> symbol_names;
  for (size_t i = 0; i < function.symbols.size(); ++i) {
    const SymbolT& symbol = *function.symbols[i];
    if (symbol.name.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: symbol {} needs a name", name,
                         i);
    }
    if (!symbol_names.insert(symbol.name).second) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: symbol '{}' is declared twice",
                         name, symbol.name);
    }
    if (symbol.upper_bound == 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: symbol '{}' has upper bound 0 (at least 1)", name, symbol.name);
    }
  }
  std::set<std::string> tensor_names;
  for (int side = 0; side < 2; ++side) {
    const auto& sigs = side == 0 ? function.inputs : function.outputs;
    const char* what = side == 0 ? "input" : "output";
    for (size_t i = 0; i < sigs.size(); ++i) {
      const TensorSigT& sig = *sigs[i];
      const std::string where = fmt::format("{} {} {} '{}'", name, what, i, sig.name);
      if (sig.name.empty()) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: needs a name", where);
      }
      if (!tensor_names.insert(sig.name).second) {
        return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                           "{}: the name is already used by another input or output", where);
      }
      if (sig.dtype == DType::INVALID) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the dtype is INVALID", where);
      }
      for (size_t d = 0; d < sig.shape.size(); ++d) {
        const DimT& dim = *sig.shape[d];
        if (dim.symbol == -1) continue;
        if (dim.symbol < 0 || static_cast<size_t>(dim.symbol) >= function.symbols.size()) {
          return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                             "{}: dimension {} names symbol {}, but the function declares {}",
                             where, d, dim.symbol, function.symbols.size());
        }
        if (dim.value != 0) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: dimension {} is symbol {} and also has value {}", where, d,
                             dim.symbol, dim.value);
        }
      }
    }
  }
  function_names_.insert(function.name);
  executable_.functions.push_back(std::make_unique<FunctionT>(std::move(function)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::check_expr(const ExprT* expr, const FunctionT& function,
                                  const std::string& where, bool required) const {
  if (!expr || expr->ops.empty()) {
    if (!required) return nullptr;
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the expression is required",
                       where);
  }
  size_t depth = 0;
  for (size_t i = 0; i < expr->ops.size(); ++i) {
    const ExprOp& op = expr->ops[i];
    switch (op.opcode()) {
      case ExprOpcode::CONST:
        ++depth;
        break;
      case ExprOpcode::SYMBOL:
        if (op.operand() < 0 || static_cast<uint64_t>(op.operand()) >= function.symbols.size()) {
          return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                             "{}: op {} reads symbol {}, but function '{}' declares {}", where, i,
                             op.operand(), function.name, function.symbols.size());
        }
        ++depth;
        break;
      case ExprOpcode::ADD:
      case ExprOpcode::SUB:
      case ExprOpcode::MUL:
      case ExprOpcode::DIV_FLOOR:
      case ExprOpcode::DIV_CEIL:
      case ExprOpcode::MOD:
      case ExprOpcode::MINIMUM:
      case ExprOpcode::MAXIMUM:
        if (depth < 2) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: op {} ({}) needs two values, the stack holds {}", where, i,
                             EnumNameExprOpcode(op.opcode()), depth);
        }
        --depth;
        break;
      default:
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: op {} has opcode {}, not known",
                           where, i, static_cast<uint32_t>(op.opcode()));
    }
  }
  if (depth != 1) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the expression leaves {} values on its stack, expected 1", where,
                       depth);
  }
  return nullptr;
}

axrt_status_t Builder::check_binding(const BindingT* binding, const FunctionT& function,
                                     const std::string& where) const {
  if (!binding) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the binding is missing", where);
  }
  const BindingT& b = *binding;
  const bool uses_index = b.kind == BindingKind::INPUT || b.kind == BindingKind::OUTPUT ||
                          b.kind == BindingKind::CONSTANT;
  const bool has_value = b.value && !b.value->ops.empty();
  if (!uses_index && b.index != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: a {} binding takes no index ({})",
                       where, EnumNameBindingKind(b.kind), b.index);
  }
  if (b.kind != BindingKind::ARENA && (b.offset != 0 || b.size != 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: only ARENA bindings take an offset and size", where);
  }
  if (b.kind != BindingKind::SCALAR && has_value) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: only SCALAR bindings take a value", where);
  }
  switch (b.kind) {
    case BindingKind::INPUT:
    case BindingKind::OUTPUT: {
      const bool input = b.kind == BindingKind::INPUT;
      const size_t count = input ? function.inputs.size() : function.outputs.size();
      if (b.index >= count) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{}: {} index {} is out of range: function '{}' has {} {}(s)", where,
                           input ? "input" : "output", b.index, function.name, count,
                           input ? "input" : "output");
      }
      return nullptr;
    }
    case BindingKind::CONSTANT:
      if (b.index >= executable_.constants.size()) {
        return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                           "{}: names constant {}, but {} constant(s) were added", where, b.index,
                           executable_.constants.size());
      }
      return nullptr;
    case BindingKind::ARENA:
      if (b.size == 0) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: an ARENA binding covers at least 1 byte", where);
      }
      if (b.offset > function.arena_size || b.size > function.arena_size - b.offset) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{}: arena bytes [{}, {} + {}) do not fit in the {}-byte arena of "
                           "function '{}'",
                           where, b.offset, b.offset, b.size, function.arena_size, function.name);
      }
      return nullptr;
    case BindingKind::SCALAR:
      return check_expr(b.value.get(), function, where + " value", /*required=*/true);
    default:
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: binding kind {} is not known",
                         where, static_cast<uint32_t>(b.kind));
  }
}

axrt_status_t Builder::add_command(uint32_t function_index, CommandUnion command) {
  if (function_index >= executable_.functions.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "function {} was not added ({} function(s) so far)", function_index,
                       executable_.functions.size());
  }
  FunctionT& function = *executable_.functions[function_index];
  const std::string where =
      fmt::format("function '{}' command {}", function.name, function.commands.size());
  if (auto* dispatch = command.AsDispatchCommand()) {
    if (dispatch->kernel >= executable_.kernels.size()) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                         "{} (dispatch): names kernel {}, but {} kernel(s) were added", where,
                         dispatch->kernel, executable_.kernels.size());
    }
    const KernelT& kernel = *executable_.kernels[dispatch->kernel];
    const std::string here = fmt::format("{} (dispatch of kernel '{}')", where, kernel.name);
    if (dispatch->bindings.size() != kernel.params.size()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: {} binding(s) for {} kernel parameter(s)", here,
                         dispatch->bindings.size(), kernel.params.size());
    }
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_x.get(), function,
                                    here + " workgroup_count_x", true));
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_y.get(), function,
                                    here + " workgroup_count_y", false));
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_z.get(), function,
                                    here + " workgroup_count_z", false));
    for (size_t i = 0; i < dispatch->bindings.size(); ++i) {
      const KernelParamT& param = *kernel.params[i];
      const std::string at = fmt::format("{} binding {} (parameter '{}')", here, i, param.name);
      AXRT_RETURN_IF_ERROR(check_binding(dispatch->bindings[i].get(), function, at));
      const BindingKind kind = dispatch->bindings[i]->kind;
      if ((param.kind == ParamKind::SCALAR) != (kind == BindingKind::SCALAR)) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: a {} binding cannot serve a {} parameter", at,
                           EnumNameBindingKind(kind), EnumNameParamKind(param.kind));
      }
    }
  } else if (auto* copy = command.AsCopyCommand()) {
    const std::string here = where + " (copy)";
    AXRT_RETURN_IF_ERROR(check_binding(copy->src.get(), function, here + " src"));
    AXRT_RETURN_IF_ERROR(check_binding(copy->dst.get(), function, here + " dst"));
    if (!is_memory_binding(copy->src->kind)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the source must be memory, not a {} binding", here,
                         EnumNameBindingKind(copy->src->kind));
    }
    if (!is_writable_binding(copy->dst->kind)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the destination must be an OUTPUT or ARENA binding, not {}",
                         here, EnumNameBindingKind(copy->dst->kind));
    }
    AXRT_RETURN_IF_ERROR(check_expr(copy->src_offset.get(), function, here + " src_offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(copy->dst_offset.get(), function, here + " dst_offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(copy->length.get(), function, here + " length", true));
  } else if (auto* fill = command.AsFillCommand()) {
    const std::string here = where + " (fill)";
    AXRT_RETURN_IF_ERROR(check_binding(fill->target.get(), function, here + " target"));
    if (!is_writable_binding(fill->target->kind)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the target must be an OUTPUT or ARENA binding, not {}", here,
                         EnumNameBindingKind(fill->target->kind));
    }
    AXRT_RETURN_IF_ERROR(check_expr(fill->offset.get(), function, here + " offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(fill->length.get(), function, here + " length", true));
    const uint32_t size = fill->pattern_size;
    if (size != 1 && size != 2 && size != 4 && size != 8) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: pattern size {} is not 1, 2, 4 or 8", here, size);
    }
    if (size < 8 && (fill->pattern >> (8 * size)) != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: pattern {:#x} does not fit in {} byte(s)", here, fill->pattern, size);
    }
  } else {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: no command was given", where);
  }
  function.commands.push_back(std::move(command));
  return nullptr;
}

axrt_status_t Builder::finish(std::vector<uint8_t>* out) const {
  ExecutableT executable(executable_);
  if (!executable.producer) executable.producer = std::make_unique<ProducerT>();
  std::vector<SegmentPayload> segments;
  for (size_t i = 0; i < executable.code_objects.size(); ++i) {
    if (executable.code_objects[i]->kind == CodeObjectKind::KERNEL_LIBRARY) continue;
    executable.code_objects[i]->segment = static_cast<int32_t>(segments.size());
    segments.push_back({SegmentKind::kCode, code_bytes_[i]});
  }
  if (!executable.constants.empty()) {
    const auto segment = static_cast<uint32_t>(segments.size());
    for (auto& constant : executable.constants) constant->data->segment = segment;
    segments.push_back({SegmentKind::kConstant, constant_bytes_});
  }
  if (!prepacked_keys_.empty()) {
    const auto segment = static_cast<uint32_t>(segments.size());
    for (auto& constant : executable.constants) {
      for (auto& copy : constant->prepacked) copy->data->segment = segment;
    }
    segments.push_back({SegmentKind::kPrepacked, prepacked_bytes_});
  }
  const std::vector<uint8_t> metadata = pack_metadata(executable);
  std::vector<uint8_t> file = assemble_container(metadata, segments);

  ReadOptions options;
  options.verify_checksums = true;
  options.allow_host_code = true;
  options.extra_features = executable.required_features;
  std::unique_ptr<AxeFile> verified;
  axrt_status_t status = AxeFile::open_storage(std::make_shared<BorrowedStorage>(file),
                                               "<builder output>", options, &verified);
  if (status) {
    StatusPtr owned(status);
    return make_status(status->code, "the reader refuses the file built: {}", status->message);
  }
  *out = std::move(file);
  return nullptr;
}

axrt_status_t Builder::write_file(const std::string& path) const {
  if (path.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "the output path is empty");
  }
  std::vector<uint8_t> file;
  AXRT_RETURN_IF_ERROR(finish(&file));

  const std::filesystem::path target(path);
  std::string temp = (target.has_parent_path() ? target.parent_path() / "" : std::filesystem::path())
                         .string() +
                     "." + target.filename().string() + ".tmp.XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "cannot create a temporary file beside '{}': {}",
                       path, std::strerror(errno));
  }
  auto fail = [&](const char* what) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return make_status(error == ENOSPC ? AXRT_STATUS_CODE_RESOURCE_EXHAUSTED
                                       : AXRT_STATUS_CODE_UNAVAILABLE,
                       "cannot write '{}': {} failed: {}", path, what, std::strerror(error));
  };
  // mkstemp makes the file 0600; give it the permissions a new file gets.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return fail("fchmod");
  size_t written = 0;
  while (written < file.size()) {
    const ssize_t n = ::write(fd, file.data() + written, file.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "cannot write '{}': close failed: {}", path,
                       std::strerror(error));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "cannot rename '{}' to '{}': {}", temp, path,
                       std::strerror(error));
  }
  return nullptr;
}

}  // namespace axrt::axe
