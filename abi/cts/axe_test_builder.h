// Building small .axe executables in tests, through the public builder C
// API: one RAII class with the few shapes the suite needs.
#ifndef AXRT_ABI_CTS_AXE_TEST_BUILDER_H_
#define AXRT_ABI_CTS_AXE_TEST_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {

// The host architecture as code-object targets spell it.
const char* HostTarget();

// An expression in reverse Polish notation.
struct Expr {
  std::vector<axrt_axe_expr_op_t> ops;
  axrt_axe_expr_t view() const { return {ops.empty() ? nullptr : ops.data(), ops.size()}; }
};
Expr Lit(uint64_t value);
Expr Sym(uint32_t symbol);
// ceil(a / b)
Expr CeilDiv(Expr a, uint64_t b);
// The bit pattern of a float, for f32 scalar parameters.
Expr F32(float value);

struct Param {
  std::string name;
  axrt_axe_param_kind_t kind = AXRT_AXE_PARAM_KIND_BUFFER;
  axrt_axe_dtype_t scalar_type = AXRT_AXE_DTYPE_INVALID;
  axrt_axe_access_t access = AXRT_AXE_ACCESS_READ;
  const axrt_axe_quant_layout_t* layout = nullptr;
};
Param BufferParam(std::string name, axrt_axe_access_t access = AXRT_AXE_ACCESS_READ);
Param ScalarParam(std::string name, axrt_axe_dtype_t type);

struct Binding {
  axrt_axe_binding_kind_t kind = AXRT_AXE_BINDING_KIND_INVALID;
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  Expr value;
};
Binding BindInput(uint32_t index);
Binding BindOutput(uint32_t index);
Binding BindConstant(uint32_t index);
Binding BindArena(uint64_t offset, uint64_t size);
Binding BindScalar(Expr value);

// A signature dimension: a fixed extent or a symbol.
struct Dim {
  uint64_t value = 0;
  int32_t symbol = -1;
};
Dim Fixed(uint64_t value);
Dim Symbolic(int32_t symbol);

struct Sig {
  std::string name;
  axrt_axe_dtype_t dtype = AXRT_AXE_DTYPE_FLOAT32;
  std::vector<Dim> dims;
};

struct SymbolDecl {
  std::string name;
  uint64_t upper_bound = 1;
};

class AxeBuilder {
 public:
  AxeBuilder();
  ~AxeBuilder();
  AxeBuilder(const AxeBuilder&) = delete;
  AxeBuilder& operator=(const AxeBuilder&) = delete;

  axrt_axe_builder_t get() const { return builder_; }

  // A KERNEL_LIBRARY code object for the host.
  uint32_t AddLibrary(const std::string& name, uint32_t min_version = 0,
                      const std::string& target = HostTarget());
  // A HOST_SHARED_OBJECT code object holding `bytes`.
  uint32_t AddHostCode(const std::vector<uint8_t>& bytes);
  // A CUDA_CUBIN, CUDA_FATBIN or CUDA_PTX code object for `target` ("sm_90",
  // "sm_80,sm_90", "compute_80") holding `bytes`.
  uint32_t AddCudaCode(axrt_axe_code_object_kind_t kind, const std::string& target,
                       const std::vector<uint8_t>& bytes);
  // Cluster dims all 0: no clusters.
  uint32_t AddKernel(const std::string& name, uint32_t code_object, const std::string& entry,
                     const std::vector<Param>& params, axrt_kernel_dim3_t workgroup_size = {1, 1, 1},
                     uint32_t dynamic_shared_memory = 0, axrt_kernel_dim3_t cluster_dims = {0, 0, 0});
  // Another implementation of `kernel` in `code_object`, preferred after
  // those added before; an empty `entry` means the kernel's.
  void AddVariant(uint32_t kernel, uint32_t code_object, const std::string& entry = "",
                  axrt_kernel_dim3_t workgroup_size = {1, 1, 1}, uint32_t dynamic_shared_memory = 0,
                  axrt_kernel_dim3_t cluster_dims = {0, 0, 0});
  uint32_t AddConstant(const std::string& name, axrt_axe_dtype_t dtype,
                       const std::vector<uint64_t>& shape, const std::vector<uint8_t>& bytes,
                       const axrt_axe_quant_layout_t* layout = nullptr);
  uint32_t AddFunction(const std::string& name, const std::vector<SymbolDecl>& symbols,
                       const std::vector<Sig>& inputs, const std::vector<Sig>& outputs,
                       uint64_t arena_size = 0);
  void Dispatch(uint32_t function, uint32_t kernel, std::initializer_list<Expr> grid,
                const std::vector<Binding>& bindings);
  void Copy(uint32_t function, const Binding& src, Expr src_offset, const Binding& dst,
            Expr dst_offset, Expr length);
  void Fill(uint32_t function, const Binding& target, Expr offset, Expr length, uint64_t pattern,
            uint32_t pattern_size);

  // The verified file.
  std::vector<uint8_t> Bytes() const;

 private:
  axrt_axe_builder_t builder_ = nullptr;
};

// Loads `bytes` onto `device`.
using Executable = std::unique_ptr<axrt_executable_s, Releaser<&axrt_executable_release>>;
using Function = std::unique_ptr<axrt_function_s, Releaser<&axrt_function_release>>;
using Tensor = std::unique_ptr<axrt_tensor_s, Releaser<&axrt_tensor_release>>;

axrt_status_t LoadBytes(axrt_device_t device, const std::vector<uint8_t>& bytes,
                        axrt_executable_load_flags_t flags, axrt_executable_t* out);

// A contiguous f32 tensor on `device` holding `values`, written through a
// private stream.
Tensor NewTensor(const DeviceTest& test, axrt_dtype_t dtype, const std::vector<int64_t>& shape,
                 const void* data = nullptr);
// The bytes of contiguous `tensor`.
std::vector<uint8_t> ReadTensor(const DeviceTest& test, axrt_tensor_t tensor);
template <typename T>
std::vector<T> ReadAs(const DeviceTest& test, axrt_tensor_t tensor) {
  std::vector<uint8_t> bytes = ReadTensor(test, tensor);
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

}  // namespace axrt_cts

#endif  // AXRT_ABI_CTS_AXE_TEST_BUILDER_H_
