// Words for the values of an .axe file, shared by the text and JSON output
// of format/inspect.h: enum names, dimensions, expressions, bindings and
// one-line descriptions of quantization layouts. Every function accepts out-of-range
// values and says so instead of failing, so it is safe on any metadata the
// FlatBuffers verifier accepted.
#ifndef AXRT_FORMAT_DESCRIBE_H_
#define AXRT_FORMAT_DESCRIBE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "format/axe_generated.h"
#include "format/container.h"

namespace axrt::axe {

// Short names: "int4", "bf16", "fp8_e4m3fn", "ue8m0"; "dtype(99)" if unknown.
std::string dtype_name(axe::DType dtype);
std::string code_object_kind_name(axe::CodeObjectKind kind);
std::string segment_kind_name(uint32_t kind);
std::string param_kind_name(axe::ParamKind kind);
std::string access_name(axe::Access access);
std::string zero_point_kind_name(axe::ZeroPointKind kind);
std::string element_order_name(axe::ElementOrder order);
std::string sign_encoding_name(axe::SignEncoding sign);
std::string padding_rule_name(axe::PaddingRule padding);
std::string scale_layout_name(axe::ScaleLayout layout);
std::string binding_kind_name(axe::BindingKind kind);
std::string command_kind_name(axe::Command kind);
// "all_reduce", "all_gather", "reduce_scatter", "broadcast".
std::string collective_kind_name(axe::CollectiveKind kind);
// "sum", "max", "min".
std::string reduce_op_name(axe::ReduceOp op);

// The string, or "" when absent.
std::string_view str(const flatbuffers::String* s);

// "[4096, 11008]"; "[]" when absent.
std::string shape_string(const flatbuffers::Vector<uint64_t>* shape);
std::string strides_string(const flatbuffers::Vector<int64_t>* strides);
// A signature dimension: its extent, or its symbol's name.
std::string dim_string(const axe::Dim* dim, const axe::Function* function);
// "[batch, 4096]".
std::string sig_shape_string(const axe::TensorSig* sig, const axe::Function* function);
// "x: bf16[batch, 4096]"; a mutable input (format 1.2) reads
// "kv: mutable f16[2, 4096]".
std::string tensor_sig_string(const axe::TensorSig* sig, const axe::Function* function);

// An expression in infix notation: "ceil(batch * 4096 / 64)". Absent
// expressions read as `absent_value`; malformed ones as "<invalid: ...>".
std::string expr_string(const axe::Expr* expr, const axe::Function* function,
                        std::string_view absent_value = "0");
// "input 0 'x'", "constant 2 'fc1.weight'", "arena [0, 4096)", "scalar batch".
std::string binding_string(const axe::Binding* binding, const axe::Executable& exe,
                           const axe::Function* function);

// The name of constant `index`, or "" if out of range.
std::string_view constant_name(const axe::Executable& exe, int64_t index);

// One line: "int4 (AWQ order) in u32 along axis 1, groups 1x128 along axis 1,
// scales bf16 [4, 2] 'w.scales', integer zero points uint4 in u32 [4, 2]
// 'w.zeros', dequantized to bf16". `shape` is the quantized constant's
// shape (absent for a kernel parameter's expected layout).
std::string quant_description(const axe::QuantLayout* layout, const axe::Executable& exe,
                              const flatbuffers::Vector<uint64_t>* shape);

// "1x128 (groups of 128 along axis 1)", resolving 0 against `shape`.
std::string block_description(const flatbuffers::Vector<uint64_t>* block_shape,
                              const flatbuffers::Vector<uint64_t>* shape);

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_DESCRIBE_H_
