#include "format/describe.h"

#include <fmt/format.h>

#include <span>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "format/quant_layout.h"

namespace axrt::axe {

namespace {

template <typename Enum>
std::string unknown(std::string_view what, Enum value) {
  return fmt::format("{}({})", what, static_cast<int64_t>(value));
}

}  // namespace

std::string dtype_name(axe::DType dtype) {
  // The runtime's names (axrt_dtype_name), which share the format's numbers.
  const char* name = axrt::dtype_name(static_cast<axrt_dtype_t>(dtype));
  if (dtype == axe::DType::INVALID || std::string_view(name) != "invalid") return name;
  return unknown("dtype", dtype);
}

std::string code_object_kind_name(axe::CodeObjectKind kind) {
  using axe::CodeObjectKind;
  switch (kind) {
    case CodeObjectKind::INVALID: return "invalid";
    case CodeObjectKind::CUDA_CUBIN: return "cuda_cubin";
    case CodeObjectKind::CUDA_FATBIN: return "cuda_fatbin";
    case CodeObjectKind::CUDA_PTX: return "cuda_ptx";
    case CodeObjectKind::HOST_SHARED_OBJECT: return "host_shared_object";
    case CodeObjectKind::KERNEL_LIBRARY: return "kernel_library";
  }
  return unknown("kind", kind);
}

std::string segment_kind_name(uint32_t kind) {
  switch (static_cast<axe::SegmentKind>(kind)) {
    case axe::SegmentKind::kCode: return "code";
    case axe::SegmentKind::kConstant: return "constant";
    case axe::SegmentKind::kPrepacked: return "prepacked";
  }
  return unknown("kind", kind);
}

std::string param_kind_name(axe::ParamKind kind) {
  switch (kind) {
    case axe::ParamKind::INVALID: return "invalid";
    case axe::ParamKind::BUFFER: return "buffer";
    case axe::ParamKind::SCALAR: return "scalar";
  }
  return unknown("kind", kind);
}

std::string access_name(axe::Access access) {
  switch (access) {
    case axe::Access::NONE: return "none";
    case axe::Access::READ: return "read";
    case axe::Access::WRITE: return "write";
    case axe::Access::READ_WRITE: return "read_write";
  }
  return unknown("access", access);
}

std::string zero_point_kind_name(axe::ZeroPointKind kind) {
  switch (kind) {
    case axe::ZeroPointKind::NONE: return "none";
    case axe::ZeroPointKind::INTEGER: return "integer";
    case axe::ZeroPointKind::FLOAT: return "float";
  }
  return unknown("kind", kind);
}

std::string element_order_name(axe::ElementOrder order) {
  switch (order) {
    case axe::ElementOrder::SEQUENTIAL: return "sequential";
    case axe::ElementOrder::AWQ: return "awq";
  }
  return unknown("order", order);
}

std::string sign_encoding_name(axe::SignEncoding sign) {
  switch (sign) {
    case axe::SignEncoding::TWOS_COMPLEMENT: return "twos_complement";
    case axe::SignEncoding::OFFSET_BINARY: return "offset_binary";
  }
  return unknown("sign", sign);
}

std::string padding_rule_name(axe::PaddingRule padding) {
  switch (padding) {
    case axe::PaddingRule::EXACT: return "exact";
    case axe::PaddingRule::ZERO: return "zero";
  }
  return unknown("padding", padding);
}

std::string scale_layout_name(axe::ScaleLayout layout) {
  switch (layout) {
    case axe::ScaleLayout::GRID: return "grid";
    case axe::ScaleLayout::GRID_TRANSPOSED: return "grid_transposed";
    case axe::ScaleLayout::SWIZZLED_128X4: return "swizzled_128x4";
  }
  return unknown("layout", layout);
}

std::string binding_kind_name(axe::BindingKind kind) {
  switch (kind) {
    case axe::BindingKind::INVALID: return "invalid";
    case axe::BindingKind::INPUT: return "input";
    case axe::BindingKind::OUTPUT: return "output";
    case axe::BindingKind::CONSTANT: return "constant";
    case axe::BindingKind::ARENA: return "arena";
    case axe::BindingKind::SCALAR: return "scalar";
  }
  return unknown("kind", kind);
}

std::string command_kind_name(axe::Command kind) {
  switch (kind) {
    case axe::Command::NONE: return "none";
    case axe::Command::DispatchCommand: return "dispatch";
    case axe::Command::CopyCommand: return "copy";
    case axe::Command::FillCommand: return "fill";
    case axe::Command::CollectiveCommand: return "collective";
  }
  return unknown("command", kind);
}

std::string collective_kind_name(axe::CollectiveKind kind) {
  switch (kind) {
    case axe::CollectiveKind::INVALID: return "invalid";
    case axe::CollectiveKind::ALL_REDUCE: return "all_reduce";
    case axe::CollectiveKind::ALL_GATHER: return "all_gather";
    case axe::CollectiveKind::REDUCE_SCATTER: return "reduce_scatter";
    case axe::CollectiveKind::BROADCAST: return "broadcast";
  }
  return unknown("collective", kind);
}

std::string reduce_op_name(axe::ReduceOp op) {
  switch (op) {
    case axe::ReduceOp::SUM: return "sum";
    case axe::ReduceOp::MAXIMUM: return "max";
    case axe::ReduceOp::MINIMUM: return "min";
  }
  return unknown("op", op);
}

std::string_view str(const flatbuffers::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

std::string shape_string(const flatbuffers::Vector<uint64_t>* shape) {
  if (!shape) return "[]";
  return fmt::format("[{}]", fmt::join(shape->begin(), shape->end(), ", "));
}

std::string strides_string(const flatbuffers::Vector<int64_t>* strides) {
  if (!strides) return "[]";
  return fmt::format("[{}]", fmt::join(strides->begin(), strides->end(), ", "));
}

namespace {

const axe::Symbol* symbol_at(const axe::Function* function, int64_t index) {
  if (!function || !function->symbols() || index < 0 ||
      static_cast<uint64_t>(index) >= function->symbols()->size()) {
    return nullptr;
  }
  return function->symbols()->Get(static_cast<flatbuffers::uoffset_t>(index));
}

std::string symbol_name(const axe::Function* function, int64_t index) {
  const axe::Symbol* symbol = symbol_at(function, index);
  if (!symbol || !symbol->name() || symbol->name()->size() == 0) {
    return fmt::format("symbol#{}", index);
  }
  return std::string(str(symbol->name()));
}

const axe::TensorSig* sig_at(const flatbuffers::Vector<flatbuffers::Offset<axe::TensorSig>>* sigs,
                             uint32_t index) {
  if (!sigs || index >= sigs->size()) return nullptr;
  return sigs->Get(index);
}

}  // namespace

std::string dim_string(const axe::Dim* dim, const axe::Function* function) {
  if (!dim) return "?";
  if (dim->symbol() >= 0) return symbol_name(function, dim->symbol());
  return fmt::format("{}", dim->value());
}

std::string sig_shape_string(const axe::TensorSig* sig, const axe::Function* function) {
  std::vector<std::string> dims;
  if (sig && sig->shape()) {
    for (const axe::Dim* dim : *sig->shape()) dims.push_back(dim_string(dim, function));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

std::string tensor_sig_string(const axe::TensorSig* sig, const axe::Function* function) {
  if (!sig) return "?";
  return fmt::format("{}: {}{}{}", str(sig->name()), sig->mutable_() ? "mutable " : "",
                     dtype_name(sig->dtype()), sig_shape_string(sig, function));
}

std::string expr_string(const axe::Expr* expr, const axe::Function* function,
                        std::string_view absent_value) {
  if (!expr || !expr->ops()) return std::string(absent_value);
  // Operands with their binding strength: 3 atom, 2 multiplicative, 1 additive.
  std::vector<std::pair<std::string, int>> stack;
  const auto wrap = [](const std::pair<std::string, int>& operand, int needed) {
    return operand.second < needed ? fmt::format("({})", operand.first) : operand.first;
  };
  for (const axe::ExprOp* op : *expr->ops()) {
    using axe::ExprOpcode;
    const ExprOpcode opcode = op->opcode();
    if (opcode == ExprOpcode::CONST) {
      stack.emplace_back(fmt::format("{}", op->operand()), 3);
      continue;
    }
    if (opcode == ExprOpcode::SYMBOL) {
      stack.emplace_back(symbol_name(function, op->operand()), 3);
      continue;
    }
    if (stack.size() < 2) {
      return fmt::format("<invalid: {} needs two operands>", static_cast<int>(opcode));
    }
    auto rhs = std::move(stack.back());
    stack.pop_back();
    auto lhs = std::move(stack.back());
    stack.pop_back();
    switch (opcode) {
      case ExprOpcode::ADD:
        stack.emplace_back(fmt::format("{} + {}", wrap(lhs, 1), wrap(rhs, 1)), 1);
        break;
      case ExprOpcode::SUB:
        stack.emplace_back(fmt::format("{} - {}", wrap(lhs, 1), wrap(rhs, 2)), 1);
        break;
      case ExprOpcode::MUL:
        stack.emplace_back(fmt::format("{} * {}", wrap(lhs, 2), wrap(rhs, 2)), 2);
        break;
      case ExprOpcode::DIV_FLOOR:
        stack.emplace_back(fmt::format("{} / {}", wrap(lhs, 2), wrap(rhs, 3)), 2);
        break;
      case ExprOpcode::MOD:
        stack.emplace_back(fmt::format("{} % {}", wrap(lhs, 2), wrap(rhs, 3)), 2);
        break;
      case ExprOpcode::DIV_CEIL:
        stack.emplace_back(fmt::format("ceil({} / {})", wrap(lhs, 2), wrap(rhs, 3)), 3);
        break;
      case ExprOpcode::MINIMUM:
        stack.emplace_back(fmt::format("min({}, {})", lhs.first, rhs.first), 3);
        break;
      case ExprOpcode::MAXIMUM:
        stack.emplace_back(fmt::format("max({}, {})", lhs.first, rhs.first), 3);
        break;
      default:
        return fmt::format("<invalid: opcode {}>", static_cast<int>(opcode));
    }
  }
  if (stack.size() != 1) {
    return fmt::format("<invalid: {} values left on the stack>", stack.size());
  }
  return stack.back().first;
}

std::string_view constant_name(const axe::Executable& exe, int64_t index) {
  if (!exe.constants() || index < 0 || static_cast<uint64_t>(index) >= exe.constants()->size()) {
    return {};
  }
  return str(exe.constants()->Get(static_cast<flatbuffers::uoffset_t>(index))->name());
}

std::string binding_string(const axe::Binding* binding, const axe::Executable& exe,
                           const axe::Function* function) {
  if (!binding) return "none";
  switch (binding->kind()) {
    case axe::BindingKind::INPUT: {
      const axe::TensorSig* sig = sig_at(function ? function->inputs() : nullptr, binding->index());
      return fmt::format("input {} '{}'", binding->index(), sig ? str(sig->name()) : "?");
    }
    case axe::BindingKind::OUTPUT: {
      const axe::TensorSig* sig = sig_at(function ? function->outputs() : nullptr, binding->index());
      return fmt::format("output {} '{}'", binding->index(), sig ? str(sig->name()) : "?");
    }
    case axe::BindingKind::CONSTANT:
      return fmt::format("constant {} '{}'", binding->index(), constant_name(exe, binding->index()));
    case axe::BindingKind::ARENA:
      if (binding->size() > UINT64_MAX - binding->offset()) {
        return fmt::format("arena offset {} size {}", binding->offset(), binding->size());
      }
      return fmt::format("arena [{}, {})", binding->offset(), binding->offset() + binding->size());
    case axe::BindingKind::SCALAR:
      return fmt::format("scalar {}", expr_string(binding->value(), function));
    default:
      return binding_kind_name(binding->kind());
  }
}

namespace {

std::span<const uint64_t> as_span(const flatbuffers::Vector<uint64_t>* v) {
  return v ? std::span<const uint64_t>(v->data(), v->size()) : std::span<const uint64_t>();
}

// `shape` empty with a non-empty `block_shape` means unknown extents.
std::string describe_blocks(std::span<const uint64_t> block_shape, std::span<const uint64_t> shape) {
  if (block_shape.empty()) return "per-tensor";
  const size_t rank = block_shape.size();
  const bool resolved = shape.size() == rank;
  std::vector<std::string> extents;
  // Per axis: 0 whole dimension, 1 every element, 2 a proper group.
  std::vector<int> classes;
  for (size_t i = 0; i < rank; ++i) {
    const uint64_t block = block_shape[i];
    const uint64_t extent = resolved ? shape[i] : 0;
    if (block == 0) {
      extents.push_back(resolved ? fmt::format("{}", extent) : "*");
    } else {
      extents.push_back(fmt::format("{}", block));
    }
    if (block == 0 || (resolved && block >= extent)) {
      classes.push_back(0);
    } else if (block == 1) {
      classes.push_back(1);
    } else {
      classes.push_back(2);
    }
  }
  const std::string blocks = fmt::format("{}", fmt::join(extents, "x"));
  size_t whole = 0, single = 0, grouped = 0, single_axis = 0, group_axis = 0;
  // Axes whose block is exactly 0 or 1: a group along one axis leaves the
  // others at 0 or 1; anything else is a multi-dimensional block.
  size_t trivial = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (block_shape[i] <= 1) ++trivial;
    if (classes[i] == 0) ++whole;
    if (classes[i] == 1) ++single, single_axis = i;
    if (classes[i] == 2) ++grouped, group_axis = i;
  }
  if (whole == rank) return fmt::format("per-tensor (blocks {})", blocks);
  if (grouped == 0 && single == 1) {
    return fmt::format("per-channel along axis {} (blocks {})", single_axis, blocks);
  }
  if (grouped == 1 && trivial == rank - 1) {
    return fmt::format("groups {} along axis {}", blocks, group_axis);
  }
  return fmt::format("blocks {}", blocks);
}

}  // namespace

std::string block_description(const flatbuffers::Vector<uint64_t>* block_shape,
                              const flatbuffers::Vector<uint64_t>* shape) {
  return describe_blocks(as_span(block_shape), as_span(shape));
}

namespace {

std::string packing_description(const axe::Packing* packing) {
  std::vector<std::string> traits;
  if (packing->order() != axe::ElementOrder::SEQUENTIAL) {
    traits.push_back(packing->order() == axe::ElementOrder::AWQ
                         ? "AWQ order"
                         : element_order_name(packing->order()));
  }
  if (packing->sign() != axe::SignEncoding::TWOS_COMPLEMENT) {
    traits.push_back(packing->sign() == axe::SignEncoding::OFFSET_BINARY
                         ? "offset binary"
                         : sign_encoding_name(packing->sign()));
  }
  if (packing->padding() != axe::PaddingRule::EXACT) {
    traits.push_back(packing->padding() == axe::PaddingRule::ZERO
                         ? "zero-padded"
                         : padding_rule_name(packing->padding()));
  }
  std::string text;
  if (!traits.empty()) text = fmt::format(" ({})", fmt::join(traits, ", "));
  return text + fmt::format(" in u{} along axis {}", packing->container_bits(), packing->axis());
}

const flatbuffers::Vector<uint64_t>* constant_shape(const axe::Executable& exe, int64_t index) {
  if (!exe.constants() || index < 0 || static_cast<uint64_t>(index) >= exe.constants()->size()) {
    return nullptr;
  }
  return exe.constants()->Get(static_cast<flatbuffers::uoffset_t>(index))->shape();
}

std::string scale_description(const axe::ScaleRef* scale, const axe::Executable& exe) {
  std::string text = dtype_name(scale->dtype());
  if (scale->constant() >= 0) {
    text += fmt::format(" {} '{}'", shape_string(constant_shape(exe, scale->constant())),
                        constant_name(exe, scale->constant()));
  }
  if (scale->layout() != axe::ScaleLayout::GRID) {
    text += fmt::format(" ({})", scale_layout_name(scale->layout()));
  }
  return text;
}

}  // namespace

std::string quant_description(const axe::QuantLayout* layout, const axe::Executable& exe,
                              const flatbuffers::Vector<uint64_t>* shape) {
  if (!layout) return "none";
  std::vector<std::string> parts;
  std::string element = dtype_name(layout->element_type());
  if (layout->packing()) element += packing_description(layout->packing());
  parts.push_back(std::move(element));
  parts.push_back(block_description(layout->block_shape(), shape));
  if (layout->scale()) {
    parts.push_back("scales " + scale_description(layout->scale(), exe));
  } else {
    parts.push_back("no scales");
  }
  if (const axe::ZeroPoint* zp = layout->zero_point(); zp && zp->kind() != axe::ZeroPointKind::NONE) {
    std::string text;
    if (zp->kind() == axe::ZeroPointKind::INTEGER) {
      text = "integer zero points (q - zp) * s: ";
    } else if (zp->kind() == axe::ZeroPointKind::FLOAT) {
      text = "float zero points q * s + m: ";
    } else {
      text = zero_point_kind_name(zp->kind()) + " zero points: ";
    }
    text += dtype_name(zp->dtype());
    if (zp->packing()) text += packing_description(zp->packing());
    if (zp->constant() >= 0) {
      text += fmt::format(" {} '{}'", shape_string(constant_shape(exe, zp->constant())),
                          constant_name(exe, zp->constant()));
    }
    if (zp->stored_bias() != 0) text += fmt::format(", stored bias {}", zp->stored_bias());
    parts.push_back(std::move(text));
  }
  if (layout->second_level_scale()) {
    std::string text = "second-level scale " + scale_description(layout->second_level_scale(), exe);
    // The second level blocks the first level's scale grid.
    const flatbuffers::Vector<uint64_t>* block = layout->block_shape();
    if (shape && block && shape->size() == block->size()) {
      std::vector<uint64_t> grid;
      for (flatbuffers::uoffset_t d = 0; d < shape->size(); ++d) {
        const uint64_t extent = shape->Get(d);
        const uint64_t b = block->Get(d);
        grid.push_back(b == 0 ? 1 : extent / b + (extent % b != 0 ? 1 : 0));
      }
      text += fmt::format(", {} of the scale grid [{}]",
                          describe_blocks(as_span(layout->second_level_block_shape()), grid),
                          fmt::join(grid, ", "));
    } else if (layout->second_level_block_shape()) {
      text += fmt::format(", blocks {} of the scale grid", shape_string(layout->second_level_block_shape()));
    }
    parts.push_back(std::move(text));
  }
  parts.push_back("dequantized to " + dtype_name(layout->dequantized_type()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace axrt::axe
