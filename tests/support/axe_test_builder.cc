#include "tests/support/axe_test_builder.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

namespace axrt_test {

namespace {

// Throws a status the builder returned, with its code and message; frees it.
void Check(axrt_status_t status) {
  if (!status) return;
  std::string message = axrt_status_code_name(axrt_status_code(status));
  message += ": ";
  message += axrt_status_message(status);
  axrt_status_free(status);
  throw std::runtime_error(message);
}

Expr Apply(Expr a, const Expr& b, axrt_axe_expr_opcode_t opcode) {
  a.ops.insert(a.ops.end(), b.ops.begin(), b.ops.end());
  a.ops.push_back({opcode, 0});
  return a;
}

axrt_axe_binding_t ToC(const Binding& b) {
  axrt_axe_binding_t out = AXRT_AXE_BINDING_INIT;
  out.kind = b.kind;
  out.index = b.index;
  out.offset = b.offset;
  out.size = b.size;
  out.value = b.value.view();
  return out;
}

void SetDim3(uint32_t out[3], axrt_kernel_dim3_t dims) {
  out[0] = dims.x;
  out[1] = dims.y;
  out[2] = dims.z;
}

}  // namespace

Expr Lit(uint64_t value) {
  return Expr{{{AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(value)}}};
}
Expr Sym(uint32_t symbol) { return Expr{{{AXRT_AXE_EXPR_OPCODE_SYMBOL, symbol}}}; }
Expr operator+(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_ADD); }
Expr operator-(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_SUB); }
Expr operator*(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_MUL); }
Expr operator/(Expr a, const Expr& b) {
  return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_DIV_FLOOR);
}
Expr operator%(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_MOD); }
Expr Min(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_MINIMUM); }
Expr Max(Expr a, const Expr& b) { return Apply(std::move(a), b, AXRT_AXE_EXPR_OPCODE_MAXIMUM); }
Expr CeilDiv(Expr a, uint64_t b) {
  return Apply(std::move(a), Lit(b), AXRT_AXE_EXPR_OPCODE_DIV_CEIL);
}

Expr F32(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return Lit(bits);
}
Expr Int(int64_t value) { return Expr{{{AXRT_AXE_EXPR_OPCODE_CONST, value}}}; }
Expr F64(double value) {
  int64_t bits = 0;
  std::memcpy(&bits, &value, 8);
  return Int(bits);
}

Param BufferParam(std::string name, axrt_axe_access_t access,
                  const axrt_axe_quant_layout_t* layout) {
  Param p;
  p.name = std::move(name);
  p.access = access;
  p.layout = layout;
  return p;
}

Param ScalarParam(std::string name, axrt_axe_dtype_t type) {
  Param p;
  p.name = std::move(name);
  p.kind = AXRT_AXE_PARAM_KIND_SCALAR;
  p.scalar_type = type;
  p.access = AXRT_AXE_ACCESS_NONE;
  return p;
}

Binding BindInput(uint32_t index) { return Binding{AXRT_AXE_BINDING_KIND_INPUT, index, 0, 0, {}}; }
Binding BindOutput(uint32_t index) {
  return Binding{AXRT_AXE_BINDING_KIND_OUTPUT, index, 0, 0, {}};
}
Binding BindConstant(uint32_t index) {
  return Binding{AXRT_AXE_BINDING_KIND_CONSTANT, index, 0, 0, {}};
}
Binding BindArena(uint64_t offset, uint64_t size) {
  return Binding{AXRT_AXE_BINDING_KIND_ARENA, 0, offset, size, {}};
}
Binding BindScalar(Expr value) {
  return Binding{AXRT_AXE_BINDING_KIND_SCALAR, 0, 0, 0, std::move(value)};
}

Dim Fixed(uint64_t value) { return Dim{value, -1}; }
Dim Symbolic(int32_t symbol) { return Dim{0, symbol}; }

AxeBuilder::AxeBuilder(const char* producer_name, const char* producer_version) {
  axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  options.producer_name = producer_name;
  options.producer_version = producer_version;
  Check(axrt_axe_builder_create(&options, &builder_));
}

AxeBuilder::~AxeBuilder() { axrt_axe_builder_release(builder_); }

void AxeBuilder::AddRequiredFeature(const std::string& feature) {
  Check(axrt_axe_builder_add_required_feature(builder_, feature.c_str()));
}

void AxeBuilder::AddMetadata(const std::string& key, const std::string& value) {
  Check(axrt_axe_builder_add_metadata(builder_, key.c_str(), value.c_str()));
}

uint32_t AxeBuilder::AddLibrary(const std::string& name, uint32_t min_version,
                                const std::string& target) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  desc.target = target.c_str();
  desc.library_name = name.c_str();
  desc.library_min_version = min_version;
  uint32_t index = 0;
  Check(axrt_axe_builder_add_code_object(builder_, &desc, &index));
  return index;
}

uint32_t AxeBuilder::AddCode(axrt_axe_code_object_kind_t kind, const std::string& target,
                             const std::vector<uint8_t>& bytes) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = kind;
  desc.target = target.c_str();
  desc.data = bytes.data();
  desc.size = bytes.size();
  uint32_t index = 0;
  Check(axrt_axe_builder_add_code_object(builder_, &desc, &index));
  return index;
}

uint32_t AxeBuilder::AddKernel(const std::string& name, uint32_t code_object,
                               const std::string& entry, const std::vector<Param>& params,
                               axrt_kernel_dim3_t workgroup_size, uint32_t dynamic_shared_memory,
                               axrt_kernel_dim3_t cluster_dims) {
  std::vector<axrt_axe_kernel_param_t> c_params;
  for (const Param& p : params) {
    axrt_axe_kernel_param_t param = AXRT_AXE_KERNEL_PARAM_INIT;
    param.name = p.name.c_str();
    param.kind = p.kind;
    param.scalar_type = p.scalar_type;
    param.access = p.access;
    param.layout = p.layout;
    c_params.push_back(param);
  }
  axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
  desc.name = name.c_str();
  desc.code_object = code_object;
  desc.entry_symbol = entry.c_str();
  desc.params = c_params.data();
  desc.param_count = c_params.size();
  SetDim3(desc.workgroup_size, workgroup_size);
  desc.dynamic_shared_memory = dynamic_shared_memory;
  SetDim3(desc.cluster_dims, cluster_dims);
  uint32_t index = 0;
  Check(axrt_axe_builder_add_kernel(builder_, &desc, &index));
  return index;
}

void AxeBuilder::AddVariant(uint32_t kernel, uint32_t code_object, const std::string& entry,
                            axrt_kernel_dim3_t workgroup_size, uint32_t dynamic_shared_memory,
                            axrt_kernel_dim3_t cluster_dims) {
  axrt_axe_kernel_variant_desc_t desc = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  desc.code_object = code_object;
  desc.entry_symbol = entry.c_str();
  SetDim3(desc.workgroup_size, workgroup_size);
  desc.dynamic_shared_memory = dynamic_shared_memory;
  SetDim3(desc.cluster_dims, cluster_dims);
  Check(axrt_axe_builder_add_kernel_variant(builder_, kernel, &desc));
}

uint32_t AxeBuilder::AddConstant(const std::string& name, axrt_axe_dtype_t dtype,
                                 const std::vector<uint64_t>& shape,
                                 const std::vector<uint8_t>& bytes,
                                 const axrt_axe_quant_layout_t* layout, uint64_t alignment,
                                 const std::vector<int64_t>& strides) {
  axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
  desc.name = name.c_str();
  desc.dtype = dtype;
  desc.rank = shape.size();
  desc.shape = shape.data();
  desc.strides = strides.empty() ? nullptr : strides.data();
  desc.alignment = alignment;
  desc.data = bytes.data();
  desc.size = bytes.size();
  desc.layout = layout;
  uint32_t index = 0;
  Check(axrt_axe_builder_add_constant(builder_, &desc, &index));
  return index;
}

void AxeBuilder::AddPrepackedCopy(uint32_t constant, const std::string& target,
                                  const std::string& layout_id, const std::vector<uint8_t>& bytes) {
  Check(axrt_axe_builder_add_prepacked_copy(builder_, constant, target.c_str(), layout_id.c_str(),
                                            bytes.data(), bytes.size()));
}

uint32_t AxeBuilder::AddFunction(const std::string& name, const std::vector<SymbolDecl>& symbols,
                                 const std::vector<Sig>& inputs, const std::vector<Sig>& outputs,
                                 uint64_t arena_size,
                                 const std::vector<std::pair<std::string, uint32_t>>& channels) {
  std::vector<axrt_axe_symbol_t> c_symbols;
  for (const SymbolDecl& s : symbols) {
    axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
    symbol.name = s.name.c_str();
    symbol.upper_bound = s.upper_bound;
    c_symbols.push_back(symbol);
  }
  // One list of dims per signature, reserved up front so that the pointers
  // into it stay valid.
  std::vector<std::vector<axrt_axe_dim_t>> dims;
  dims.reserve(inputs.size() + outputs.size());
  auto sigs = [&](const std::vector<Sig>& list) {
    std::vector<axrt_axe_tensor_sig_t> out;
    for (const Sig& sig : list) {
      dims.emplace_back();
      for (const Dim& d : sig.dims) dims.back().push_back({d.value, d.symbol});
      axrt_axe_tensor_sig_t c = AXRT_AXE_TENSOR_SIG_INIT;
      c.name = sig.name.c_str();
      c.dtype = sig.dtype;
      c.rank = sig.dims.size();
      c.dims = dims.back().data();
      c.flags = sig.is_mutable ? AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE : 0;
      out.push_back(c);
    }
    return out;
  };
  const std::vector<axrt_axe_tensor_sig_t> c_inputs = sigs(inputs);
  const std::vector<axrt_axe_tensor_sig_t> c_outputs = sigs(outputs);
  axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
  desc.name = name.c_str();
  desc.symbols = c_symbols.data();
  desc.symbol_count = c_symbols.size();
  desc.inputs = c_inputs.data();
  desc.input_count = c_inputs.size();
  desc.outputs = c_outputs.data();
  desc.output_count = c_outputs.size();
  desc.arena_size = arena_size;
  std::vector<axrt_axe_channel_t> c_channels;
  for (const auto& [channel_name, size] : channels) {
    axrt_axe_channel_t channel = AXRT_AXE_CHANNEL_INIT;
    channel.name = channel_name.c_str();
    channel.size = size;
    c_channels.push_back(channel);
  }
  desc.channels = c_channels.data();
  desc.channel_count = c_channels.size();
  uint32_t index = 0;
  Check(axrt_axe_builder_add_function(builder_, &desc, &index));
  return index;
}

void AxeBuilder::Dispatch(uint32_t function, uint32_t kernel, std::initializer_list<Expr> grid,
                          const std::vector<Binding>& bindings) {
  const std::vector<Expr> counts(grid);
  std::vector<axrt_axe_binding_t> c_bindings;
  for (const Binding& b : bindings) c_bindings.push_back(ToC(b));
  axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
  desc.kernel = kernel;
  if (counts.size() > 0) desc.workgroup_count_x = counts[0].view();
  if (counts.size() > 1) desc.workgroup_count_y = counts[1].view();
  if (counts.size() > 2) desc.workgroup_count_z = counts[2].view();
  desc.bindings = c_bindings.data();
  desc.binding_count = c_bindings.size();
  Check(axrt_axe_builder_add_dispatch(builder_, function, &desc));
}

void AxeBuilder::Copy(uint32_t function, const Binding& src, const Expr& src_offset,
                      const Binding& dst, const Expr& dst_offset, const Expr& length) {
  const axrt_axe_binding_t c_src = ToC(src);
  const axrt_axe_binding_t c_dst = ToC(dst);
  axrt_axe_copy_desc_t desc = AXRT_AXE_COPY_DESC_INIT;
  desc.src = &c_src;
  desc.src_offset = src_offset.view();
  desc.dst = &c_dst;
  desc.dst_offset = dst_offset.view();
  desc.length = length.view();
  Check(axrt_axe_builder_add_copy(builder_, function, &desc));
}

void AxeBuilder::Fill(uint32_t function, const Binding& target, const Expr& offset,
                      const Expr& length, uint64_t pattern, uint32_t pattern_size) {
  const axrt_axe_binding_t c_target = ToC(target);
  axrt_axe_fill_desc_t desc = AXRT_AXE_FILL_DESC_INIT;
  desc.target = &c_target;
  desc.offset = offset.view();
  desc.length = length.view();
  desc.pattern = pattern;
  desc.pattern_size = pattern_size;
  Check(axrt_axe_builder_add_fill(builder_, function, &desc));
}

std::vector<uint8_t> AxeBuilder::Bytes() const {
  void* data = nullptr;
  size_t size = 0;
  Check(axrt_axe_builder_write_memory(builder_, &data, &size));
  const std::unique_ptr<void, void (*)(void*)> owned(data, axrt_axe_memory_free);
  return std::vector<uint8_t>(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

void AxeBuilder::WriteFile(const std::string& path) const {
  Check(axrt_axe_builder_write_file(builder_, path.c_str()));
}

void AxeBuilder::Collective(uint32_t function, axrt_axe_collective_kind_t kind, uint32_t channel,
                            axrt_axe_dtype_t dtype, const Expr& count, const Binding& send,
                            const Binding& recv, axrt_axe_reduce_op_t op, uint32_t root,
                            const Expr& send_offset, const Expr& recv_offset) {
  const axrt_axe_binding_t c_send = ToC(send);
  const axrt_axe_binding_t c_recv = ToC(recv);
  axrt_axe_collective_desc_t desc = AXRT_AXE_COLLECTIVE_DESC_INIT;
  desc.kind = kind;
  desc.channel = channel;
  desc.dtype = dtype;
  desc.count = count.view();
  desc.op = op;
  desc.root = root;
  desc.send = &c_send;
  desc.send_offset = send_offset.view();
  desc.recv = &c_recv;
  desc.recv_offset = recv_offset.view();
  Check(axrt_axe_builder_add_collective(builder_, function, &desc));
}

}  // namespace axrt_test
