#include "tests/unit/copy_executable.h"

namespace axrt_test {

axrt_kernel_result_t CopyFloatsKernel(const void* args, const axrt_kernel_dispatch_t*,
                                      const axrt_kernel_workgroup_t*) {
  struct Args {
    const float* in;
    float* out;
    uint64_t n;
  };
  const auto* a = static_cast<const Args*>(args);
  for (uint64_t i = 0; i < a->n; ++i) a->out[i] = a->in[i];
  return AXRT_KERNEL_OK;
}

const axrt_kernel_param_info_t kCopyFloatsParams[3] = {
    {"in", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};

namespace {

axrt_status_t build(axrt_axe_builder_t b, const char* library_name, const char* entry_symbol,
                    std::vector<uint8_t>* out_bytes) {
  axrt_axe_code_object_desc_t co = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  co.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
#if defined(__aarch64__)
  co.target = "aarch64";
#else
  co.target = "x86_64";
#endif
  co.library_name = library_name;
  uint32_t index = 0;
  if (axrt_status_t s = axrt_axe_builder_add_code_object(b, &co, &index)) return s;
  axrt_axe_kernel_param_t params[3] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT,
                                       AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "in";
  params[1].name = "out";
  params[1].access = AXRT_AXE_ACCESS_WRITE;
  params[2].name = "n";
  params[2].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[2].scalar_type = AXRT_AXE_DTYPE_UINT64;
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "copy";
  kernel.entry_symbol = entry_symbol;
  kernel.params = params;
  kernel.param_count = 3;
  if (axrt_status_t s = axrt_axe_builder_add_kernel(b, &kernel, &index)) return s;
  axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
  symbol.name = "n";
  symbol.upper_bound = 64;
  const axrt_axe_dim_t dim = {0, 0};
  axrt_axe_tensor_sig_t x = AXRT_AXE_TENSOR_SIG_INIT;
  x.name = "x";
  x.dtype = AXRT_AXE_DTYPE_FLOAT32;
  x.rank = 1;
  x.dims = &dim;
  axrt_axe_tensor_sig_t y = x;
  y.name = "y";
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "copy";
  function.symbols = &symbol;
  function.symbol_count = 1;
  function.inputs = &x;
  function.input_count = 1;
  function.outputs = &y;
  function.output_count = 1;
  if (axrt_status_t s = axrt_axe_builder_add_function(b, &function, &index)) return s;
  const axrt_axe_expr_op_t one = {AXRT_AXE_EXPR_OPCODE_CONST, 1};
  const axrt_axe_expr_op_t n = {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0};
  axrt_axe_binding_t bindings[3] = {AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT,
                                    AXRT_AXE_BINDING_INIT};
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  bindings[1].kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  bindings[2].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[2].value = {&n, 1};
  axrt_axe_dispatch_desc_t dispatch = AXRT_AXE_DISPATCH_DESC_INIT;
  dispatch.workgroup_count_x = {&one, 1};
  dispatch.bindings = bindings;
  dispatch.binding_count = 3;
  if (axrt_status_t s = axrt_axe_builder_add_dispatch(b, 0, &dispatch)) return s;
  void* data = nullptr;
  size_t size = 0;
  if (axrt_status_t s = axrt_axe_builder_write_memory(b, &data, &size)) return s;
  out_bytes->assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  axrt_axe_memory_free(data);
  return nullptr;
}

}  // namespace

axrt_status_t BuildCopyExecutable(const char* library_name, const char* entry_symbol,
                                  std::vector<uint8_t>* out_bytes) {
  axrt_axe_builder_t b = nullptr;
  if (axrt_status_t s = axrt_axe_builder_create(nullptr, &b)) return s;
  axrt_status_t status = build(b, library_name, entry_symbol, out_bytes);
  axrt_axe_builder_release(b);
  return status;
}

}  // namespace axrt_test
