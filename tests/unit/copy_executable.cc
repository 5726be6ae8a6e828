#include "tests/unit/copy_executable.h"

#include "tests/support/axe_test_builder.h"

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

std::vector<uint8_t> BuildCopyExecutable(const char* library_name, const char* entry_symbol) {
  AxeBuilder b;
  const uint32_t library = b.AddLibrary(library_name);
  const uint32_t kernel = b.AddKernel("copy", library, entry_symbol,
                                      {BufferParam("in"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                       ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t copy = b.AddFunction("copy", {{"n", 64}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, n}},
                                      {{"y", AXRT_AXE_DTYPE_FLOAT32, n}});
  b.Dispatch(copy, kernel, {Lit(1)}, {BindInput(0), BindOutput(0), BindScalar(Sym(0))});
  return b.Bytes();
}

}  // namespace axrt_test
