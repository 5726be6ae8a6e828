// What the benchmark executables share: owned handles, turning a status into
// a skipped benchmark, and a small wrapper over the .axe builder C API for
// building executables in process (the benchmarks depend on no compiler).
#ifndef AXRT_TESTS_BENCH_BENCH_UTIL_H_
#define AXRT_TESTS_BENCH_BENCH_UTIL_H_

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "axrt/axrt.h"

namespace axrt_bench {

// The instance of the running benchmark executable, created by its main().
extern axrt_instance_t g_instance;

template <typename T, void (*Release)(T)>
struct Releaser {
  void operator()(T handle) const { Release(handle); }
};
template <typename Handle, void (*Release)(Handle)>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Releaser<Handle, Release>>;
using Buffer = Owned<axrt_buffer_t, axrt_buffer_release>;
using Stream = Owned<axrt_stream_t, axrt_stream_release>;
using Event = Owned<axrt_event_t, axrt_event_release>;
using Device = Owned<axrt_device_t, axrt_device_release>;
using Executable = Owned<axrt_executable_t, axrt_executable_release>;
using Function = Owned<axrt_function_t, axrt_function_release>;
using Tensor = Owned<axrt_tensor_t, axrt_tensor_release>;

// Turns a failure into a skipped benchmark that names the call. Returns true
// on failure so callers can `if (Failed(...)) return;` or break their loop.
inline bool Failed(benchmark::State& state, axrt_status_t status, const char* what) {
  if (status == nullptr) return false;
  std::string message = std::string(what) + ": " +
                        axrt_status_code_name(axrt_status_code(status)) + ": " +
                        axrt_status_message(status);
  axrt_status_free(status);
  state.SkipWithError(message.c_str());
  return true;
}

// A failure while setting a benchmark up (building or loading an
// executable); the benchmark catches it and skips with its message.
class SetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void Check(axrt_status_t status, const std::string& what) {
  if (status == nullptr) return;
  std::string message = what + ": " + axrt_status_code_name(axrt_status_code(status)) + ": " +
                        axrt_status_message(status);
  axrt_status_free(status);
  throw SetupError(message);
}

// --- Tensors ------------------------------------------------------------------

// A contiguous tensor on `device`, holding `data` when given. CPU device only
// (the bytes are written through axrt_buffer_map).
inline Tensor NewTensor(axrt_device_t device, axrt_dtype_t dtype, std::vector<int64_t> shape,
                        const void* data = nullptr) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  axrt_tensor_t raw = nullptr;
  Check(axrt_tensor_allocate(device, &desc, nullptr, &raw), "axrt_tensor_allocate");
  Tensor tensor(raw);
  if (data != nullptr) {
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    Check(axrt_tensor_query_info(tensor.get(), &info), "axrt_tensor_query_info");
    axrt_buffer_t raw_buffer = nullptr;
    Check(axrt_tensor_get_buffer(tensor.get(), &raw_buffer), "axrt_tensor_get_buffer");
    Buffer buffer(raw_buffer);
    void* host = nullptr;
    Check(axrt_buffer_map(buffer.get(), &host), "axrt_buffer_map");
    std::memcpy(static_cast<unsigned char*>(host) + info.byte_offset, data, info.byte_size);
  }
  return tensor;
}

// The host address of element 0 of `tensor` (CPU device).
inline void* TensorData(axrt_tensor_t tensor) {
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  Check(axrt_tensor_query_info(tensor, &info), "axrt_tensor_query_info");
  axrt_buffer_t raw_buffer = nullptr;
  Check(axrt_tensor_get_buffer(tensor, &raw_buffer), "axrt_tensor_get_buffer");
  Buffer buffer(raw_buffer);
  void* host = nullptr;
  Check(axrt_buffer_map(buffer.get(), &host), "axrt_buffer_map");
  return static_cast<unsigned char*>(host) + info.byte_offset;
}

// --- Building executables ---------------------------------------------------------

// An expression in reverse Polish notation.
struct Expr {
  std::vector<axrt_axe_expr_op_t> ops;
  axrt_axe_expr_t view() const { return {ops.empty() ? nullptr : ops.data(), ops.size()}; }
};
inline Expr Lit(uint64_t value) {
  return Expr{{{AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(value)}}};
}
inline Expr Sym(uint32_t symbol) { return Expr{{{AXRT_AXE_EXPR_OPCODE_SYMBOL, symbol}}}; }
// `a` op `literal`.
inline Expr Apply(Expr a, axrt_axe_expr_opcode_t opcode, uint64_t literal) {
  a.ops.push_back({AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(literal)});
  a.ops.push_back({opcode, 0});
  return a;
}
inline Expr CeilDiv(Expr a, uint64_t b) { return Apply(std::move(a), AXRT_AXE_EXPR_OPCODE_DIV_CEIL, b); }
inline Expr Mul(Expr a, uint64_t b) { return Apply(std::move(a), AXRT_AXE_EXPR_OPCODE_MUL, b); }
inline Expr Sub(Expr a, uint64_t b) { return Apply(std::move(a), AXRT_AXE_EXPR_OPCODE_SUB, b); }

// A kernel parameter as the executable declares it.
struct Param {
  const char* name;
  axrt_axe_param_kind_t kind;
  axrt_axe_access_t access;
  const axrt_axe_quant_layout_t* layout;
};
inline Param Read(const char* name, const axrt_axe_quant_layout_t* layout = nullptr) {
  return {name, AXRT_AXE_PARAM_KIND_BUFFER, AXRT_AXE_ACCESS_READ, layout};
}
inline Param Write(const char* name) {
  return {name, AXRT_AXE_PARAM_KIND_BUFFER, AXRT_AXE_ACCESS_WRITE, nullptr};
}
inline Param U64(const char* name) {
  return {name, AXRT_AXE_PARAM_KIND_SCALAR, AXRT_AXE_ACCESS_NONE, nullptr};
}

struct Bind {
  axrt_axe_binding_kind_t kind;
  uint32_t index = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  Expr value = {};
};
inline Bind Input(uint32_t index) { return {AXRT_AXE_BINDING_KIND_INPUT, index}; }
inline Bind Output(uint32_t index) { return {AXRT_AXE_BINDING_KIND_OUTPUT, index}; }
inline Bind Constant(uint32_t index) { return {AXRT_AXE_BINDING_KIND_CONSTANT, index}; }
inline Bind Arena(uint64_t offset, uint64_t size) {
  return {AXRT_AXE_BINDING_KIND_ARENA, 0, offset, size};
}
inline Bind Scalar(Expr value) { return {AXRT_AXE_BINDING_KIND_SCALAR, 0, 0, 0, std::move(value)}; }

inline axrt_axe_dim_t Fixed(uint64_t value) { return {value, -1}; }
inline axrt_axe_dim_t Symbolic(int32_t symbol) { return {0, symbol}; }

// A function input or output.
struct Sig {
  const char* name;
  axrt_axe_dtype_t dtype;
  std::vector<axrt_axe_dim_t> dims;
};

// The builder C API with every failure thrown as a SetupError.
class AxeBuilder {
 public:
  AxeBuilder() {
    axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
    options.producer_name = "axrt benchmarks";
    options.producer_version = "1";
    Check(axrt_axe_builder_create(&options, &builder_), "axrt_axe_builder_create");
  }
  ~AxeBuilder() { axrt_axe_builder_release(builder_); }
  AxeBuilder(const AxeBuilder&) = delete;
  AxeBuilder& operator=(const AxeBuilder&) = delete;

  // A KERNEL_LIBRARY code object naming a library the instance has.
  uint32_t AddLibrary(const char* name, uint32_t min_version) {
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
#if defined(__x86_64__)
    desc.target = "x86_64";
#elif defined(__aarch64__)
    desc.target = "aarch64";
#else
    desc.target = "unknown";
#endif
    desc.library_name = name;
    desc.library_min_version = min_version;
    uint32_t index = 0;
    Check(axrt_axe_builder_add_code_object(builder_, &desc, &index),
          std::string("adding library ") + name);
    return index;
  }

  // A code object carrying `size` bytes of device code (a CUDA fatbin,
  // cubin or PTX) built for `target` ("sm_80,sm_90").
  uint32_t AddCode(axrt_axe_code_object_kind_t kind, const char* target, const void* data,
                   size_t size) {
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = kind;
    desc.target = target;
    desc.data = data;
    desc.size = size;
    uint32_t index = 0;
    Check(axrt_axe_builder_add_code_object(builder_, &desc, &index),
          std::string("adding code object for ") + target);
    return index;
  }

  // A kernel whose entry symbol is its name unless `entry_symbol` is given;
  // scalars are u64. `workgroup_size` is the CUDA block (1 for CPU kernels).
  uint32_t AddKernel(const char* name, uint32_t code_object, std::initializer_list<Param> params,
                     const char* entry_symbol = nullptr,
                     std::array<uint32_t, 3> workgroup_size = {1, 1, 1}) {
    std::vector<axrt_axe_kernel_param_t> c_params;
    for (const Param& p : params) {
      axrt_axe_kernel_param_t param = AXRT_AXE_KERNEL_PARAM_INIT;
      param.name = p.name;
      param.kind = p.kind;
      param.access = p.access;
      param.layout = p.layout;
      if (p.kind == AXRT_AXE_PARAM_KIND_SCALAR) param.scalar_type = AXRT_AXE_DTYPE_UINT64;
      c_params.push_back(param);
    }
    axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
    desc.name = name;
    desc.code_object = code_object;
    desc.params = c_params.data();
    desc.param_count = c_params.size();
    desc.entry_symbol = entry_symbol;
    for (int i = 0; i < 3; ++i) desc.workgroup_size[i] = workgroup_size[i];
    uint32_t index = 0;
    Check(axrt_axe_builder_add_kernel(builder_, &desc, &index), std::string("adding kernel ") + name);
    return index;
  }

  uint32_t AddConstant(const char* name, axrt_axe_dtype_t dtype, std::vector<uint64_t> shape,
                       const void* data, size_t size,
                       const axrt_axe_quant_layout_t* layout = nullptr) {
    axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
    desc.name = name;
    desc.dtype = dtype;
    desc.rank = shape.size();
    desc.shape = shape.data();
    desc.data = data;
    desc.size = size;
    desc.layout = layout;
    uint32_t index = 0;
    Check(axrt_axe_builder_add_constant(builder_, &desc, &index),
          std::string("adding constant ") + name);
    return index;
  }
  template <typename T>
  uint32_t AddConstant(const char* name, axrt_axe_dtype_t dtype, std::vector<uint64_t> shape,
                       const std::vector<T>& values,
                       const axrt_axe_quant_layout_t* layout = nullptr) {
    return AddConstant(name, dtype, std::move(shape), values.data(), values.size() * sizeof(T),
                       layout);
  }

  // `symbols` are (name, upper bound) pairs, indexed in order.
  uint32_t AddFunction(const char* name,
                       std::initializer_list<std::pair<const char*, uint64_t>> symbols,
                       const std::vector<Sig>& inputs, const std::vector<Sig>& outputs,
                       uint64_t arena_size = 0) {
    std::vector<axrt_axe_symbol_t> c_symbols;
    for (const auto& [symbol_name, bound] : symbols) {
      axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
      symbol.name = symbol_name;
      symbol.upper_bound = bound;
      c_symbols.push_back(symbol);
    }
    auto sigs = [](const std::vector<Sig>& list) {
      std::vector<axrt_axe_tensor_sig_t> out;
      for (const Sig& sig : list) {
        axrt_axe_tensor_sig_t c = AXRT_AXE_TENSOR_SIG_INIT;
        c.name = sig.name;
        c.dtype = sig.dtype;
        c.rank = sig.dims.size();
        c.dims = sig.dims.data();
        out.push_back(c);
      }
      return out;
    };
    const std::vector<axrt_axe_tensor_sig_t> c_inputs = sigs(inputs);
    const std::vector<axrt_axe_tensor_sig_t> c_outputs = sigs(outputs);
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = name;
    desc.symbols = c_symbols.data();
    desc.symbol_count = c_symbols.size();
    desc.inputs = c_inputs.data();
    desc.input_count = c_inputs.size();
    desc.outputs = c_outputs.data();
    desc.output_count = c_outputs.size();
    desc.arena_size = arena_size;
    uint32_t index = 0;
    Check(axrt_axe_builder_add_function(builder_, &desc, &index),
          std::string("adding function ") + name);
    return index;
  }

  // A dispatch of grid (x, y, 1).
  void Dispatch(uint32_t function, uint32_t kernel, const Expr& x, const Expr& y,
                const std::vector<Bind>& bindings) {
    std::vector<axrt_axe_binding_t> c_bindings;
    for (const Bind& b : bindings) {
      axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
      binding.kind = b.kind;
      binding.index = b.index;
      binding.offset = b.offset;
      binding.size = b.size;
      binding.value = b.value.view();
      c_bindings.push_back(binding);
    }
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = kernel;
    desc.workgroup_count_x = x.view();
    desc.workgroup_count_y = y.view();
    desc.bindings = c_bindings.data();
    desc.binding_count = c_bindings.size();
    Check(axrt_axe_builder_add_dispatch(builder_, function, &desc), "axrt_axe_builder_add_dispatch");
  }

  // Writes the file and loads it onto `device`.
  Executable Load(axrt_device_t device) const {
    void* data = nullptr;
    size_t size = 0;
    Check(axrt_axe_builder_write_memory(builder_, &data, &size), "axrt_axe_builder_write_memory");
    axrt_executable_t raw = nullptr;
    axrt_status_t status = axrt_executable_load_memory(device, data, size, nullptr, &raw);
    axrt_axe_memory_free(data);
    Check(status, "axrt_executable_load_memory");
    return Executable(raw);
  }

 private:
  axrt_axe_builder_t builder_ = nullptr;
};

inline Function FindFunction(axrt_executable_t executable, const char* name) {
  axrt_function_t raw = nullptr;
  Check(axrt_executable_find_function(executable, name, &raw), "axrt_executable_find_function");
  return Function(raw);
}

}  // namespace axrt_bench

#endif  // AXRT_TESTS_BENCH_BENCH_UTIL_H_
