// Mutable function inputs (format 1.2) through the public C API: the
// builder's flag and its refusals, reflection, and calls that write the
// caller's tensor in place (same memory, new contents, call after call),
// refusing read-only tensors.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "axrt/dlpack.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/status_check.h"

namespace {

using namespace axrt_test;

constexpr int64_t kElements = 1024;

Sig Floats(const char* name, bool is_mutable = false) {
  Sig sig{name, AXRT_AXE_DTYPE_FLOAT32, {Fixed(kElements)}};
  sig.is_mutable = is_mutable;
  return sig;
}

// axrt_add_f32 of the built-in library: out[i] = a[i] + b[i].
uint32_t AddKernel(AxeBuilder& b) {
  return b.AddKernel("add", b.AddLibrary("axrt.cpu", 1), "axrt_add_f32",
                     {BufferParam("a"), BufferParam("b"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                      ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
}

// step(state: mutable f32[1024], x: f32[1024]) -> (y: f32[1024]):
// state += x in place, then y = state.
std::vector<uint8_t> StepExecutable() {
  AxeBuilder b;
  const uint32_t add = AddKernel(b);
  const uint32_t step = b.AddFunction("step", {}, {Floats("state", true), Floats("x")},
                                      {Floats("y")});
  b.Dispatch(step, add, {Lit(1)},
             {BindInput(0), BindInput(1), BindInput(0), BindScalar(Lit(kElements))});
  b.Copy(step, BindInput(0), {}, BindOutput(0), {}, Lit(kElements * 4));
  return b.Bytes();
}

class Cpu {
 public:
  Cpu() {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &device));
    REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
    const std::vector<uint8_t> file = StepExecutable();
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(device, file.data(), file.size(), nullptr, &executable));
    REQUIRE_CALL_OK(axrt_executable_find_function(executable, "step", &step));
  }
  ~Cpu() {
    axrt_function_release(step);
    axrt_executable_release(executable);
    axrt_stream_release(stream);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  Cpu(const Cpu&) = delete;
  Cpu& operator=(const Cpu&) = delete;

  axrt_tensor_t Filled(float value) {
    const int64_t shape[] = {kElements};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
    float* data = Data(tensor);
    for (int64_t i = 0; i < kElements; ++i) data[i] = value + static_cast<float>(i);
    return tensor;
  }

  static float* Data(axrt_tensor_t tensor) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    void* pointer = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(buffer, &pointer));
    axrt_buffer_release(buffer);
    return static_cast<float*>(pointer);
  }

  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  axrt_stream_t stream = nullptr;
  axrt_executable_t executable = nullptr;
  axrt_function_t step = nullptr;
};

TEST_CASE_METHOD(Cpu, "reflection reports which inputs are mutable", "[mutable]") {
  axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
  REQUIRE_CALL_OK(axrt_function_query_argument(step, AXRT_ARGUMENT_KIND_INPUT, 0, &info));
  CHECK(std::string(info.name) == "state");
  CHECK(info.flags == AXRT_ARGUMENT_FLAG_MUTABLE);
  REQUIRE_CALL_OK(axrt_function_query_argument(step, AXRT_ARGUMENT_KIND_INPUT, 1, &info));
  CHECK(std::string(info.name) == "x");
  CHECK(info.flags == 0);
  REQUIRE_CALL_OK(axrt_function_query_argument(step, AXRT_ARGUMENT_KIND_OUTPUT, 0, &info));
  CHECK(info.flags == 0);

  // A caller built before the field: nothing is written past its struct.
  axrt_argument_info_t old = AXRT_ARGUMENT_INFO_INIT;
  old.struct_size = offsetof(axrt_argument_info_t, flags);
  old.flags = 0xabcd;
  REQUIRE_CALL_OK(axrt_function_query_argument(step, AXRT_ARGUMENT_KIND_INPUT, 0, &old));
  CHECK(std::string(old.name) == "state");
  CHECK(old.flags == 0xabcd);
}

TEST_CASE_METHOD(Cpu, "a call writes a mutable input in place, call after call", "[mutable]") {
  axrt_tensor_t state = Filled(0.0f);  // state[i] = i
  axrt_tensor_t x = Filled(1.0f);      // x[i] = i + 1
  float* memory = Data(state);
  axrt_buffer_t buffer_before = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(state, &buffer_before));
  axrt_buffer_info_t before = AXRT_BUFFER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_buffer_query_info(buffer_before, &before));

  for (int call = 1; call <= 3; ++call) {
    axrt_tensor_t inputs[] = {state, x};
    axrt_tensor_t outputs[] = {nullptr};
    REQUIRE_CALL_OK(axrt_function_invoke(step, stream, inputs, 2, outputs, 1, nullptr));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    // The same memory, updated: state[i] = i + call * (i + 1).
    CHECK(Data(state) == memory);
    const float* y = Data(outputs[0]);
    bool state_ok = true, y_ok = true;
    for (int64_t i = 0; i < kElements; ++i) {
      const float expected = static_cast<float>(i) + static_cast<float>(call) * static_cast<float>(i + 1);
      state_ok &= memory[i] == expected;
      y_ok &= y[i] == expected;
    }
    INFO("call " << call << ": state[5] = " << memory[5] << ", y[5] = " << y[5]);
    CHECK(state_ok);
    CHECK(y_ok);
    axrt_tensor_release(outputs[0]);
  }
  axrt_buffer_t buffer_after = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(state, &buffer_after));
  axrt_buffer_info_t after = AXRT_BUFFER_INFO_INIT;
  REQUIRE_CALL_OK(axrt_buffer_query_info(buffer_after, &after));
  CHECK(after.device_address == before.device_address);
  CHECK(after.size == before.size);
  axrt_buffer_release(buffer_after);
  axrt_buffer_release(buffer_before);

  // Queued calls without a wait in between still see each other's writes:
  // the stream orders them like calls writing an output.
  for (int call = 0; call < 4; ++call) {
    axrt_tensor_t inputs[] = {state, x};
    axrt_tensor_t outputs[] = {nullptr};
    REQUIRE_CALL_OK(axrt_function_invoke(step, stream, inputs, 2, outputs, 1, nullptr));
    axrt_tensor_release(outputs[0]);
  }
  // The calls hold the tensors; releasing ours changes nothing.
  axrt_tensor_release(x);
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(memory[7] == 7.0f + 7.0f * 8.0f);
  axrt_tensor_release(state);
}

// A producer's tensor over memory the test owns.
struct Imported {
  std::vector<float> values = std::vector<float>(kElements, 2.0f);
  int64_t shape[1] = {kElements};
  DLManagedTensorVersioned managed{};

  DLManagedTensorVersioned* Versioned(uint64_t flags) {
    managed.version.major = 1;
    managed.version.minor = 1;
    managed.manager_ctx = nullptr;
    managed.deleter = nullptr;
    managed.flags = flags;
    managed.dl_tensor.data = values.data();
    managed.dl_tensor.device.device_type = kDLCPU;
    managed.dl_tensor.device.device_id = 0;
    managed.dl_tensor.ndim = 1;
    managed.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape;
    managed.dl_tensor.strides = nullptr;
    managed.dl_tensor.byte_offset = 0;
    return &managed;
  }
};

TEST_CASE_METHOD(Cpu, "a read-only tensor is refused as a mutable input", "[mutable]") {
  Imported read_only_memory;
  axrt_tensor_t read_only = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(
      instance, read_only_memory.Versioned(DLPACK_FLAG_BITMASK_READ_ONLY), &read_only));
  axrt_tensor_t x = Filled(1.0f);
  axrt_tensor_t inputs[] = {read_only, x};
  axrt_tensor_t outputs[] = {nullptr};
  REQUIRE_CALL_FAILS(axrt_function_invoke(step, stream, inputs, 2, outputs, 1, nullptr),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "axrt_function_invoke", "function 'step'",
                     "input 0 ('state')", "read-only", "mutable");
  CHECK(outputs[0] == nullptr);
  CHECK(read_only_memory.values[3] == 2.0f);

  // As the input that is only read, it is fine.
  axrt_tensor_t state = Filled(0.0f);
  axrt_tensor_t fine[] = {state, read_only};
  REQUIRE_CALL_OK(axrt_function_invoke(step, stream, fine, 2, outputs, 1, nullptr));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(Data(state)[3] == 5.0f);
  axrt_tensor_release(outputs[0]);

  // A writable import is written in place: the producer's memory changes.
  Imported writable_memory;
  axrt_tensor_t writable = nullptr;
  REQUIRE_CALL_OK(
      axrt_tensor_import_dlpack_versioned(instance, writable_memory.Versioned(0), &writable));
  axrt_tensor_t in_place[] = {writable, x};
  outputs[0] = nullptr;
  REQUIRE_CALL_OK(axrt_function_invoke(step, stream, in_place, 2, outputs, 1, nullptr));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(writable_memory.values[3] == 2.0f + 4.0f);
  axrt_tensor_release(outputs[0]);
  axrt_tensor_release(writable);
  axrt_tensor_release(state);
  axrt_tensor_release(x);
  axrt_tensor_release(read_only);
}

TEST_CASE("the builder takes mutable inputs only where they are writable", "[mutable]") {
  SECTION("an output cannot be mutable") {
    AxeBuilder b;
    std::vector<axrt_axe_dim_t> dims = {{4, -1}};
    axrt_axe_tensor_sig_t output = AXRT_AXE_TENSOR_SIG_INIT;
    output.name = "y";
    output.dtype = AXRT_AXE_DTYPE_FLOAT32;
    output.rank = 1;
    output.dims = dims.data();
    output.flags = AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE;
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = "f";
    desc.outputs = &output;
    desc.output_count = 1;
    uint32_t index = 0;
    REQUIRE_CALL_FAILS(axrt_axe_builder_add_function(b.get(), &desc, &index),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "function 'f' output 0 'y'",
                       "only inputs can be mutable");
    // Unknown flag bits are a newer caller's request this library cannot honour.
    output.flags = 1u << 7;
    desc.outputs = nullptr;
    desc.output_count = 0;
    desc.inputs = &output;
    desc.input_count = 1;
    REQUIRE_CALL_FAILS(axrt_axe_builder_add_function(b.get(), &desc, &index),
                       AXRT_STATUS_CODE_UNIMPLEMENTED, "desc->inputs[0].flags", "0x80");
  }

  SECTION("copies and fills write only mutable inputs") {
    AxeBuilder b;
    const uint32_t f =
        b.AddFunction("f", {}, {Floats("kv", true), Floats("x")}, {Floats("y")});
    b.Copy(f, BindInput(1), {}, BindInput(0), {}, Lit(16));
    b.Fill(f, BindInput(0), {}, Lit(16), 0, 4);
    const Binding x = BindInput(1);
    axrt_axe_binding_t target = AXRT_AXE_BINDING_INIT;
    target.kind = x.kind;
    target.index = x.index;
    const axrt_axe_expr_op_t length[] = {{AXRT_AXE_EXPR_OPCODE_CONST, 16}};
    axrt_axe_fill_desc_t fill = AXRT_AXE_FILL_DESC_INIT;
    fill.target = &target;
    fill.length = {length, 1};
    REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b.get(), f, &fill),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "input 1 'x' is not mutable");
    b.Bytes();  // verifies
  }

  SECTION("a WRITE parameter bound to an input that is not mutable is refused on writing") {
    AxeBuilder b;
    const uint32_t add = AddKernel(b);
    const uint32_t f = b.AddFunction("f", {}, {Floats("x")}, {Floats("y")});
    b.Dispatch(f, add, {Lit(1)},
               {BindInput(0), BindInput(0), BindInput(0), BindScalar(Lit(kElements))});
    void* data = nullptr;
    size_t size = 0;
    REQUIRE_CALL_FAILS(axrt_axe_builder_write_memory(b.get(), &data, &size),
                       AXRT_STATUS_CODE_INVALID_ARGUMENT, "reader refuses",
                       "is bound to read-only INPUT 0 (the input is not mutable)");
  }
}

}  // namespace
