#include "abi/cts/axe_test_builder.h"

#include <cstring>

namespace axrt_cts {

const char* HostTarget() { return AXRT_HOST_CODE_TARGET; }

Expr Lit(uint64_t value) { return Expr{{{AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(value)}}}; }

Expr Sym(uint32_t symbol) { return Expr{{{AXRT_AXE_EXPR_OPCODE_SYMBOL, symbol}}}; }

Expr CeilDiv(Expr a, uint64_t b) {
  a.ops.push_back({AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(b)});
  a.ops.push_back({AXRT_AXE_EXPR_OPCODE_DIV_CEIL, 0});
  return a;
}

Expr F32(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return Lit(bits);
}

Param BufferParam(std::string name, axrt_axe_access_t access) {
  Param p;
  p.name = std::move(name);
  p.access = access;
  return p;
}

Param ScalarParam(std::string name, axrt_axe_dtype_t type) {
  Param p;
  p.name = std::move(name);
  p.kind = AXRT_AXE_PARAM_KIND_SCALAR;
  p.scalar_type = type;
  return p;
}

Binding BindInput(uint32_t index) { return Binding{AXRT_AXE_BINDING_KIND_INPUT, index, 0, 0, {}}; }
Binding BindOutput(uint32_t index) { return Binding{AXRT_AXE_BINDING_KIND_OUTPUT, index, 0, 0, {}}; }
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

namespace {

axrt_axe_binding_t to_c(const Binding& b) {
  axrt_axe_binding_t out = AXRT_AXE_BINDING_INIT;
  out.kind = b.kind;
  out.index = b.index;
  out.offset = b.offset;
  out.size = b.size;
  out.value = b.value.view();
  return out;
}

}  // namespace

AxeBuilder::AxeBuilder() {
  axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  options.producer_name = "axrt conformance suite";
  options.producer_version = "1";
  REQUIRE_OK(axrt_axe_builder_create(&options, &builder_));
}

AxeBuilder::~AxeBuilder() { axrt_axe_builder_release(builder_); }

uint32_t AxeBuilder::AddLibrary(const std::string& name, uint32_t min_version,
                                const std::string& target) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  desc.target = target.c_str();
  desc.library_name = name.c_str();
  desc.library_min_version = min_version;
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_code_object(builder_, &desc, &index));
  return index;
}

uint32_t AxeBuilder::AddHostCode(const std::vector<uint8_t>& bytes) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT;
  desc.target = HostTarget();
  desc.data = bytes.data();
  desc.size = bytes.size();
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_code_object(builder_, &desc, &index));
  return index;
}

uint32_t AxeBuilder::AddCudaCode(axrt_axe_code_object_kind_t kind, const std::string& target,
                                 const std::vector<uint8_t>& bytes) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = kind;
  desc.target = target.c_str();
  desc.data = bytes.data();
  desc.size = bytes.size();
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_code_object(builder_, &desc, &index));
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
    param.access = p.kind == AXRT_AXE_PARAM_KIND_BUFFER ? p.access : axrt_axe_access_t{AXRT_AXE_ACCESS_READ};
    param.layout = p.layout;
    c_params.push_back(param);
  }
  axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
  desc.name = name.c_str();
  desc.code_object = code_object;
  desc.entry_symbol = entry.c_str();
  desc.params = c_params.data();
  desc.param_count = c_params.size();
  desc.workgroup_size[0] = workgroup_size.x;
  desc.workgroup_size[1] = workgroup_size.y;
  desc.workgroup_size[2] = workgroup_size.z;
  desc.dynamic_shared_memory = dynamic_shared_memory;
  desc.cluster_dims[0] = cluster_dims.x;
  desc.cluster_dims[1] = cluster_dims.y;
  desc.cluster_dims[2] = cluster_dims.z;
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_kernel(builder_, &desc, &index));
  return index;
}

void AxeBuilder::AddVariant(uint32_t kernel, uint32_t code_object, const std::string& entry,
                            axrt_kernel_dim3_t workgroup_size, uint32_t dynamic_shared_memory,
                            axrt_kernel_dim3_t cluster_dims) {
  axrt_axe_kernel_variant_desc_t desc = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  desc.code_object = code_object;
  desc.entry_symbol = entry.c_str();
  desc.workgroup_size[0] = workgroup_size.x;
  desc.workgroup_size[1] = workgroup_size.y;
  desc.workgroup_size[2] = workgroup_size.z;
  desc.dynamic_shared_memory = dynamic_shared_memory;
  desc.cluster_dims[0] = cluster_dims.x;
  desc.cluster_dims[1] = cluster_dims.y;
  desc.cluster_dims[2] = cluster_dims.z;
  REQUIRE_OK(axrt_axe_builder_add_kernel_variant(builder_, kernel, &desc));
}

uint32_t AxeBuilder::AddConstant(const std::string& name, axrt_axe_dtype_t dtype,
                                 const std::vector<uint64_t>& shape,
                                 const std::vector<uint8_t>& bytes,
                                 const axrt_axe_quant_layout_t* layout) {
  axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
  desc.name = name.c_str();
  desc.dtype = dtype;
  desc.rank = shape.size();
  desc.shape = shape.data();
  desc.data = bytes.data();
  desc.size = bytes.size();
  desc.layout = layout;
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_constant(builder_, &desc, &index));
  return index;
}

uint32_t AxeBuilder::AddFunction(const std::string& name, const std::vector<SymbolDecl>& symbols,
                                 const std::vector<Sig>& inputs, const std::vector<Sig>& outputs,
                                 uint64_t arena_size) {
  std::vector<axrt_axe_symbol_t> c_symbols;
  for (const SymbolDecl& s : symbols) {
    axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
    symbol.name = s.name.c_str();
    symbol.upper_bound = s.upper_bound;
    c_symbols.push_back(symbol);
  }
  std::vector<std::vector<axrt_axe_dim_t>> dims;
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
      out.push_back(c);
    }
    return out;
  };
  dims.reserve(inputs.size() + outputs.size());
  std::vector<axrt_axe_tensor_sig_t> c_inputs = sigs(inputs);
  std::vector<axrt_axe_tensor_sig_t> c_outputs = sigs(outputs);
  axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
  desc.name = name.c_str();
  desc.symbols = c_symbols.data();
  desc.symbol_count = c_symbols.size();
  desc.inputs = c_inputs.data();
  desc.input_count = c_inputs.size();
  desc.outputs = c_outputs.data();
  desc.output_count = c_outputs.size();
  desc.arena_size = arena_size;
  uint32_t index = 0;
  REQUIRE_OK(axrt_axe_builder_add_function(builder_, &desc, &index));
  return index;
}

void AxeBuilder::Dispatch(uint32_t function, uint32_t kernel, std::initializer_list<Expr> grid,
                          const std::vector<Binding>& bindings) {
  std::vector<Expr> counts(grid);
  std::vector<axrt_axe_binding_t> c_bindings;
  for (const Binding& b : bindings) c_bindings.push_back(to_c(b));
  axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
  desc.kernel = kernel;
  if (counts.size() > 0) desc.workgroup_count_x = counts[0].view();
  if (counts.size() > 1) desc.workgroup_count_y = counts[1].view();
  if (counts.size() > 2) desc.workgroup_count_z = counts[2].view();
  desc.bindings = c_bindings.data();
  desc.binding_count = c_bindings.size();
  REQUIRE_OK(axrt_axe_builder_add_dispatch(builder_, function, &desc));
}

void AxeBuilder::Copy(uint32_t function, const Binding& src, Expr src_offset, const Binding& dst,
                      Expr dst_offset, Expr length) {
  const axrt_axe_binding_t c_src = to_c(src);
  const axrt_axe_binding_t c_dst = to_c(dst);
  axrt_axe_copy_desc_t desc = AXRT_AXE_COPY_DESC_INIT;
  desc.src = &c_src;
  desc.src_offset = src_offset.view();
  desc.dst = &c_dst;
  desc.dst_offset = dst_offset.view();
  desc.length = length.view();
  REQUIRE_OK(axrt_axe_builder_add_copy(builder_, function, &desc));
}

void AxeBuilder::Fill(uint32_t function, const Binding& target, Expr offset, Expr length,
                      uint64_t pattern, uint32_t pattern_size) {
  const axrt_axe_binding_t c_target = to_c(target);
  axrt_axe_fill_desc_t desc = AXRT_AXE_FILL_DESC_INIT;
  desc.target = &c_target;
  desc.offset = offset.view();
  desc.length = length.view();
  desc.pattern = pattern;
  desc.pattern_size = pattern_size;
  REQUIRE_OK(axrt_axe_builder_add_fill(builder_, function, &desc));
}

std::vector<uint8_t> AxeBuilder::Bytes() const {
  void* data = nullptr;
  size_t size = 0;
  REQUIRE_OK(axrt_axe_builder_write_memory(builder_, &data, &size));
  std::vector<uint8_t> bytes(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  axrt_axe_memory_free(data);
  return bytes;
}

axrt_status_t LoadBytes(axrt_device_t device, const std::vector<uint8_t>& bytes,
                        axrt_executable_load_flags_t flags, axrt_executable_t* out) {
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.flags = flags;
  return axrt_executable_load_memory(device, bytes.data(), bytes.size(), &options, out);
}

Tensor NewTensor(const DeviceTest& test, axrt_dtype_t dtype, const std::vector<int64_t>& shape,
                 const void* data) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  Tensor tensor;
  REQUIRE_OK(axrt_tensor_allocate(test.device(), &desc, nullptr, Out(tensor)));
  if (data) {
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    REQUIRE_OK(axrt_tensor_query_info(tensor.get(), &info));
    Buffer buffer;
    REQUIRE_OK(axrt_tensor_get_buffer(tensor.get(), Out(buffer)));
    test.Write(buffer.get(), 0,
               std::span<const uint8_t>(static_cast<const uint8_t*>(data), info.byte_size));
  }
  return tensor;
}

std::vector<uint8_t> ReadTensor(const DeviceTest& test, axrt_tensor_t tensor) {
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  REQUIRE_OK(axrt_tensor_query_info(tensor, &info));
  Buffer buffer;
  REQUIRE_OK(axrt_tensor_get_buffer(tensor, Out(buffer)));
  return test.Read(buffer.get(), info.byte_offset, info.byte_size);
}

}  // namespace axrt_cts
