// Small .axe executables for the tests and the golden-file generator, built
// through the public builder C API only: one RAII class over
// axrt_axe_builder_t and the few value types its calls take.
//
// A call the builder refuses throws std::runtime_error carrying the status's
// code and message: a Catch2 test reports it as the test case's failure, and
// a plain program can catch it in main().
#ifndef AXRT_TESTS_SUPPORT_AXE_TEST_BUILDER_H_
#define AXRT_TESTS_SUPPORT_AXE_TEST_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "axrt/format.h"
#include "axrt/kernel_abi.h"

namespace axrt_test {

// An expression in reverse Polish notation; no operations means absent.
struct Expr {
  std::vector<axrt_axe_expr_op_t> ops;
  axrt_axe_expr_t view() const { return {ops.empty() ? nullptr : ops.data(), ops.size()}; }
};
Expr Lit(uint64_t value);
Expr Sym(uint32_t symbol);
// `a`'s operations, then `b`'s, then the operator's: nested calls read as
// the formula they compute. `/` rounds down.
Expr operator+(Expr a, const Expr& b);
Expr operator-(Expr a, const Expr& b);
Expr operator*(Expr a, const Expr& b);
Expr operator/(Expr a, const Expr& b);
Expr operator%(Expr a, const Expr& b);
Expr Min(Expr a, const Expr& b);
Expr Max(Expr a, const Expr& b);
// ceil(a / b)
Expr CeilDiv(Expr a, uint64_t b);
// The bit pattern of a float, for f32 scalar parameters.
Expr F32(float value);
// A literal of a signed value: negative only for the scalar parameters of
// signed types (format 1.3; the file then requires "signed-scalars.v1").
Expr Int(int64_t value);
// The bit pattern of a double, for f64 scalar parameters: a negative
// literal for a negative value (format 1.3).
Expr F64(double value);

struct Param {
  std::string name;
  axrt_axe_param_kind_t kind = AXRT_AXE_PARAM_KIND_BUFFER;
  axrt_axe_dtype_t scalar_type = AXRT_AXE_DTYPE_INVALID;
  axrt_axe_access_t access = AXRT_AXE_ACCESS_READ;
  const axrt_axe_quant_layout_t* layout = nullptr;
};
// `layout`, when given, is the one the kernel expects (borrowed until the
// kernel is added).
Param BufferParam(std::string name, axrt_axe_access_t access = AXRT_AXE_ACCESS_READ,
                  const axrt_axe_quant_layout_t* layout = nullptr);
// Access is a buffer's property: a scalar says NONE.
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
  // Format 1.2, inputs only: written in place by the function.
  bool is_mutable = false;
};

struct SymbolDecl {
  std::string name;
  uint64_t upper_bound = 1;
};

class AxeBuilder {
 public:
  // The file names `producer_name` `producer_version` as its producer.
  explicit AxeBuilder(const char* producer_name = "axrt tests", const char* producer_version = "1");
  ~AxeBuilder();
  AxeBuilder(const AxeBuilder&) = delete;
  AxeBuilder& operator=(const AxeBuilder&) = delete;

  // For calls this class does not wrap; still owned here.
  axrt_axe_builder_t get() const { return builder_; }

  void AddRequiredFeature(const std::string& feature);
  void AddMetadata(const std::string& key, const std::string& value);
  // A KERNEL_LIBRARY code object.
  uint32_t AddLibrary(const std::string& name, uint32_t min_version = 0,
                      const std::string& target = AXRT_HOST_CODE_TARGET);
  // A code object of `kind` for `target` holding `bytes`: CUDA_CUBIN "sm_90",
  // CUDA_FATBIN "sm_80,sm_90", CUDA_PTX "compute_90", HOST_SHARED_OBJECT
  // AXRT_HOST_CODE_TARGET ...
  uint32_t AddCode(axrt_axe_code_object_kind_t kind, const std::string& target,
                   const std::vector<uint8_t>& bytes);
  // Cluster dims all 0: no clusters.
  uint32_t AddKernel(const std::string& name, uint32_t code_object, const std::string& entry,
                     const std::vector<Param>& params,
                     axrt_kernel_dim3_t workgroup_size = {1, 1, 1},
                     uint32_t dynamic_shared_memory = 0,
                     axrt_kernel_dim3_t cluster_dims = {0, 0, 0});
  // Another implementation of `kernel` in `code_object`, preferred after
  // those added before; an empty `entry` means the kernel's.
  void AddVariant(uint32_t kernel, uint32_t code_object, const std::string& entry = "",
                  axrt_kernel_dim3_t workgroup_size = {1, 1, 1}, uint32_t dynamic_shared_memory = 0,
                  axrt_kernel_dim3_t cluster_dims = {0, 0, 0});
  // Alignment 0 means the default (64); no strides means dense row-major.
  uint32_t AddConstant(const std::string& name, axrt_axe_dtype_t dtype,
                       const std::vector<uint64_t>& shape, const std::vector<uint8_t>& bytes,
                       const axrt_axe_quant_layout_t* layout = nullptr, uint64_t alignment = 0,
                       const std::vector<int64_t>& strides = {});
  void AddPrepackedCopy(uint32_t constant, const std::string& target, const std::string& layout_id,
                        const std::vector<uint8_t>& bytes);
  // `channels` (format 1.4): name and members needed (0: any), in order.
  uint32_t AddFunction(const std::string& name, const std::vector<SymbolDecl>& symbols,
                       const std::vector<Sig>& inputs, const std::vector<Sig>& outputs,
                       uint64_t arena_size = 0,
                       const std::vector<std::pair<std::string, uint32_t>>& channels = {});
  // `grid` lists the workgroup counts x, y, z; those left out (or absent)
  // are 1.
  void Dispatch(uint32_t function, uint32_t kernel, std::initializer_list<Expr> grid,
                const std::vector<Binding>& bindings);
  // Absent offsets are 0.
  void Copy(uint32_t function, const Binding& src, const Expr& src_offset, const Binding& dst,
            const Expr& dst_offset, const Expr& length);
  void Fill(uint32_t function, const Binding& target, const Expr& offset, const Expr& length,
            uint64_t pattern, uint32_t pattern_size);
  // Format 1.4: a collective of `kind` over channel `channel`; absent
  // offsets are 0.
  void Collective(uint32_t function, axrt_axe_collective_kind_t kind, uint32_t channel,
                  axrt_axe_dtype_t dtype, const Expr& count, const Binding& send,
                  const Binding& recv, axrt_axe_reduce_op_t op = AXRT_AXE_REDUCE_SUM,
                  uint32_t root = 0, const Expr& send_offset = {},
                  const Expr& recv_offset = {});

  // The verified file.
  std::vector<uint8_t> Bytes() const;
  void WriteFile(const std::string& path) const;

 private:
  axrt_axe_builder_t builder_ = nullptr;
};

}  // namespace axrt_test

#endif  // AXRT_TESTS_SUPPORT_AXE_TEST_BUILDER_H_
