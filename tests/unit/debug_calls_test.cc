// The debugging modes of a call (AXRT_INVOKE_FLAG_CHECK_FINITE,
// AXRT_INVOKE_FLAG_DUMP, AXRT_CHECK_FINITE, AXRT_DUMP_DIR): a tiny kernel
// library whose second command writes a NaN or an Inf into an arena
// intermediate; the check names the command, the kernel and the binding and
// skips the commands after it; the dumps hold what each command wrote.
// The cases tagged [.env] run as their own ctest entry with the environment
// variables set (tests/unit/CMakeLists.txt).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "runtime/debug_calls.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/status_check.h"

namespace {

namespace fs = std::filesystem;
using namespace axrt_test;

constexpr int64_t kElements = 64;
constexpr uint64_t kSlice = kElements * 4;

// --- The library ------------------------------------------------------------

struct AddOneArgs {
  const float* x;
  float* y;
  uint64_t n;
};
struct PoisonArgs {
  const float* x;
  float* y;
  uint64_t n;
  uint64_t at;
  uint64_t inf;  // 0: NaN, else +Inf
};

// y = x + 1
axrt_kernel_result_t add_one(const void* args, const axrt_kernel_dispatch_t*,
                             const axrt_kernel_workgroup_t*) {
  const auto& a = *static_cast<const AddOneArgs*>(args);
  for (uint64_t i = 0; i < a.n; ++i) a.y[i] = a.x[i] + 1.0f;
  return AXRT_KERNEL_OK;
}

// y = x, with y[at] NaN or Inf
axrt_kernel_result_t poison(const void* args, const axrt_kernel_dispatch_t*,
                            const axrt_kernel_workgroup_t*) {
  const auto& a = *static_cast<const PoisonArgs*>(args);
  for (uint64_t i = 0; i < a.n; ++i) a.y[i] = a.x[i];
  if (a.at < a.n) a.y[a.at] = a.inf ? INFINITY : NAN;
  return AXRT_KERNEL_OK;
}

axrt_kernel_result_t fail(const void*, const axrt_kernel_dispatch_t*,
                          const axrt_kernel_workgroup_t* workgroup) {
  std::snprintf(workgroup->error_message, workgroup->error_message_capacity, "told to fail");
  return AXRT_STATUS_CODE_ABORTED;
}

const axrt_kernel_param_info_t kAddOneParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
const axrt_kernel_param_info_t kPoisonParams[] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
    {"at", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
    {"inf", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, nullptr},
};
const axrt_kernel_param_info_t kFailParams[] = {
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
};
const axrt_kernel_info_t kKernels[] = {
    {"dbg_add_one", add_one, kAddOneParams, 3, sizeof(AddOneArgs)},
    {"dbg_poison", poison, kPoisonParams, 5, sizeof(PoisonArgs)},
    {"dbg_fail", fail, kFailParams, 1, sizeof(void*)},
};
const axrt_kernel_library_t kLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, "axrt.debugtest", kKernels, 3,
    nullptr, nullptr};

// --- The executable ---------------------------------------------------------

Param Written(const char* name, axrt_axe_dtype_t dtype = AXRT_AXE_DTYPE_FLOAT32) {
  Param p = BufferParam(name, AXRT_AXE_ACCESS_WRITE);
  p.scalar_type = dtype;
  return p;
}

Sig Floats(const char* name) { return Sig{name, AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}; }

// Functions of x: f32[n] -> y: f32[n] (n <= 64), over two arena slices A
// and B of 64 floats:
//   three:     add_one(x -> A), poison(A -> B, at 5), add_one(B -> y)
//   three_inf: the same with an Inf
//   untyped:   as three, its first command's kernel declaring no element type
//   copies:    copy(x -> A), poison(A -> B, at 5), copy(B -> y)
//   fails:     add_one(x -> A), add_one(A -> y), fail(y)
std::vector<uint8_t> DebugExecutable() {
  AxeBuilder b;
  const uint32_t library = b.AddLibrary("axrt.debugtest", 1);
  const uint32_t add = b.AddKernel(
      "add_one", library, "dbg_add_one",
      {BufferParam("x"), Written("y"), ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  const uint32_t add_raw = b.AddKernel(
      "add_one_raw", library, "dbg_add_one",
      {BufferParam("x"), Written("y", AXRT_AXE_DTYPE_INVALID),
       ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  const uint32_t poison = b.AddKernel(
      "poison", library, "dbg_poison",
      {BufferParam("x"), Written("y"), ScalarParam("n", AXRT_AXE_DTYPE_UINT64),
       ScalarParam("at", AXRT_AXE_DTYPE_UINT64), ScalarParam("inf", AXRT_AXE_DTYPE_UINT64)});
  const uint32_t fail = b.AddKernel("fail", library, "dbg_fail", {Written("y")});
  const std::vector<SymbolDecl> n = {{"n", kElements}};
  const Binding a = BindArena(0, kSlice), bb = BindArena(kSlice, kSlice);
  auto three = [&](const char* name, uint32_t first, uint64_t inf) {
    const uint32_t f = b.AddFunction(name, n, {Floats("x")}, {Floats("y")}, 2 * kSlice);
    b.Dispatch(f, first, {Lit(1)}, {BindInput(0), a, BindScalar(Sym(0))});
    b.Dispatch(f, poison, {Lit(1)},
               {a, bb, BindScalar(Sym(0)), BindScalar(Lit(5)), BindScalar(Lit(inf))});
    b.Dispatch(f, add, {Lit(1)}, {bb, BindOutput(0), BindScalar(Sym(0))});
  };
  three("three", add, 0);
  three("three_inf", add, 1);
  three("untyped", add_raw, 0);
  const uint32_t copies = b.AddFunction("copies", n, {Floats("x")}, {Floats("y")}, 2 * kSlice);
  b.Copy(copies, BindInput(0), {}, a, {}, Sym(0) * Lit(4));
  b.Dispatch(copies, poison, {Lit(1)},
             {a, bb, BindScalar(Sym(0)), BindScalar(Lit(5)), BindScalar(Lit(0))});
  b.Copy(copies, bb, {}, BindOutput(0), {}, Sym(0) * Lit(4));
  const uint32_t fails = b.AddFunction("fails", n, {Floats("x")}, {Floats("y")}, kSlice);
  b.Dispatch(fails, add, {Lit(1)}, {BindInput(0), a, BindScalar(Sym(0))});
  b.Dispatch(fails, add, {Lit(1)}, {a, BindOutput(0), BindScalar(Sym(0))});
  b.Dispatch(fails, fail, {Lit(1)}, {BindOutput(0)});
  return b.Bytes();
}

class Cpu {
 public:
  Cpu() {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    REQUIRE_CALL_OK(axrt_instance_register_kernel_library(instance, &kLibrary));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &device));
    REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
    const std::vector<uint8_t> file = DebugExecutable();
    axrt_executable_load_options_t load = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
    axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("debug.axe");
    load.next = &label;
    REQUIRE_CALL_OK(
        axrt_executable_load_memory(device, file.data(), file.size(), &load, &executable));
    x = Tensor();
    float* data = Data(x);
    for (int64_t i = 0; i < kElements; ++i) data[i] = static_cast<float>(i);
  }
  ~Cpu() {
    axrt::set_debug_calls_always_stage(false);
    axrt_tensor_release(x);
    axrt_executable_release(executable);
    axrt_stream_release(stream);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  Cpu(const Cpu&) = delete;
  Cpu& operator=(const Cpu&) = delete;

  axrt_tensor_t Tensor() {
    const int64_t shape[] = {kElements};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
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

  axrt_function_t Find(const char* name) {
    axrt_function_t function = nullptr;
    REQUIRE_CALL_OK(axrt_executable_find_function(executable, name, &function));
    return function;
  }

  // Queues `name`(x) into `y` (a fresh tensor of 7s when null) with
  // `options`, returning the invoke's status; `*out` gets y.
  axrt_status_t Invoke(const char* name, const axrt_invoke_options_t* options, axrt_tensor_t* out) {
    axrt_function_t function = Find(name);
    axrt_tensor_t y = Tensor();
    float* data = Data(y);
    for (int64_t i = 0; i < kElements; ++i) data[i] = 7.0f;
    axrt_tensor_t inputs[] = {x};
    axrt_tensor_t outputs[] = {y};
    axrt_status_t status = axrt_function_invoke(function, stream, inputs, 1, outputs, 1, options);
    axrt_function_release(function);
    *out = y;
    return status;
  }

  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  axrt_stream_t stream = nullptr;
  axrt_executable_t executable = nullptr;
  axrt_tensor_t x = nullptr;
};

axrt_invoke_options_t Checking() {
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = AXRT_INVOKE_FLAG_CHECK_FINITE;
  return options;
}

// A fresh folder under the system's temporary directory.
fs::path FreshFolder(const std::string& name) {
  const fs::path path = fs::temp_directory_path() /
                        ("axrt-debug-calls-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

// The one call folder under `root` whose name ends in `-<function>`.
fs::path CallFolder(const fs::path& root, const std::string& function) {
  fs::path found;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 6 + function.size() && name.substr(6) == function) {
      REQUIRE(found.empty());
      found = entry.path();
    }
  }
  REQUIRE(!found.empty());
  return found;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The f32 elements of a .npy file, after checking its header's type and
// 1-D shape.
std::vector<float> ReadNpyFloats(const fs::path& path, int64_t count) {
  const std::string bytes = ReadText(path);
  REQUIRE(bytes.size() > 10);
  REQUIRE(bytes.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) == 0);
  const size_t header = 10 + static_cast<uint8_t>(bytes[8]) + 256 * static_cast<uint8_t>(bytes[9]);
  REQUIRE(header % 64 == 0);
  const std::string dict = bytes.substr(10, header - 10);
  CHECK(dict.find("'descr': '<f4'") != std::string::npos);
  CHECK(dict.find("'shape': (" + std::to_string(count) + ",)") != std::string::npos);
  REQUIRE(bytes.size() == header + 4 * static_cast<size_t>(count));
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data() + header, 4 * count);
  return values;
}

TEST_CASE_METHOD(Cpu, "without the flag the call runs through the NaN", "[debug]") {
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("three", nullptr, &y));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  const float* data = Data(y);
  CHECK(std::isnan(data[5]));
  CHECK(data[6] == 8.0f);
  axrt_tensor_release(y);
}

TEST_CASE_METHOD(Cpu, "the check fails the stream at the command that wrote the NaN", "[debug]") {
  const bool staged = GENERATE(false, true);
  axrt::set_debug_calls_always_stage(staged);
  INFO("read through copies into host memory: " << staged);
  const axrt_invoke_options_t options = Checking();
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("three", &options, &y));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS,
                     "axrt_function_invoke: function 'three' of executable 'debug.axe', command 1 "
                     "(kernel 'poison' (axrt.debugtest:dbg_poison)) wrote NaN to intermediate 'y' "
                     "(arena bytes [256, 512), f32) at element 5 of 64; every earlier command's "
                     "writes were finite");
  // The command after it never ran, and the stream stays failed.
  CHECK(Data(y)[0] == 7.0f);
  axrt_tensor_t again = nullptr;
  REQUIRE_CALL_OK(Invoke("three", nullptr, &again));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS, "command 1");
  CHECK(Data(again)[0] == 7.0f);
  axrt_tensor_release(again);
  axrt_tensor_release(y);
}

TEST_CASE_METHOD(Cpu, "the check names Inf, copies and undeclared element types", "[debug]") {
  const axrt_invoke_options_t options = Checking();
  axrt_tensor_t y = nullptr;
  SECTION("Inf") {
    REQUIRE_CALL_OK(Invoke("three_inf", &options, &y));
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS,
                       "command 1 (kernel 'poison' (axrt.debugtest:dbg_poison)) wrote Inf to "
                       "intermediate 'y'");
  }
  SECTION("an earlier command's writes not checked") {
    REQUIRE_CALL_OK(Invoke("untyped", &options, &y));
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS,
                       "command 1 (kernel 'poison'",
                       "(1 of undeclared element type were not checked)");
  }
  SECTION("copies") {
    REQUIRE_CALL_OK(Invoke("copies", &options, &y));
    REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS,
                       "function 'copies' of executable 'debug.axe', command 1 (kernel 'poison'",
                       "at element 5 of 64; every earlier command's writes were finite");
    CHECK(Data(y)[0] == 7.0f);
  }
  axrt_tensor_release(y);
}

TEST_CASE_METHOD(Cpu, "a kernel failing in a checked call names its command in the function",
                 "[debug]") {
  const axrt_invoke_options_t options = Checking();
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("fails", &options, &y));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_ABORTED,
                     "kernel 'fail' (axrt.debugtest:dbg_fail) failed in command 2 of function "
                     "'fails'",
                     "told to fail");
  axrt_tensor_release(y);
}

TEST_CASE_METHOD(Cpu, "a dump holds the inputs and every command's writes", "[debug]") {
  const bool staged = GENERATE(false, true);
  axrt::set_debug_calls_always_stage(staged);
  INFO("read through copies into host memory: " << staged);
  const fs::path root = FreshFolder(staged ? "dump-staged" : "dump");
  const std::string directory = root.string();
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = AXRT_INVOKE_FLAG_DUMP;
  options.dump_directory = directory.c_str();
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("copies", &options, &y));
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  const fs::path call = CallFolder(root, "copies");
  CHECK(ReadNpyFloats(call / "in-x.npy", kElements)[3] == 3.0f);
  const std::vector<float> a = ReadNpyFloats(call / "c000-copy-dst.npy", kElements);
  const std::vector<float> b = ReadNpyFloats(call / "c001-poison-y.npy", kElements);
  const std::vector<float> out = ReadNpyFloats(call / "c002-copy-dst.npy", kElements);
  const float* result = Data(y);
  for (int64_t i = 0; i < kElements; ++i) {
    INFO("element " << i);
    CHECK(a[i] == static_cast<float>(i));
    if (i == 5) {
      CHECK(std::isnan(b[i]));
      CHECK(std::isnan(out[i]));
    } else {
      CHECK(b[i] == static_cast<float>(i));
      CHECK(std::memcmp(&out[i], &result[i], 4) == 0);
    }
  }
  const std::string index = ReadText(call / "index.json");
  CHECK(index.find("\"function\": \"copies\"") != std::string::npos);
  CHECK(index.find("\"failure\": null") != std::string::npos);
  CHECK(index.find("\"file\": \"c001-poison-y.npy\"") != std::string::npos);
  CHECK(index.find("\"binding\": \"output\"") != std::string::npos);
  axrt_tensor_release(y);
  fs::remove_all(root);
}

TEST_CASE_METHOD(Cpu, "a checked dump stops at the failure and says so in index.json",
                 "[debug]") {
  const fs::path root = FreshFolder("checked-dump");
  const std::string directory = root.string();
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = AXRT_INVOKE_FLAG_DUMP | AXRT_INVOKE_FLAG_CHECK_FINITE;
  options.dump_directory = directory.c_str();
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("three", &options, &y));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS, "command 1");
  const fs::path call = CallFolder(root, "three");
  CHECK(fs::exists(call / "c000-add_one-y.npy"));
  CHECK(fs::exists(call / "c001-poison-y.npy"));  // dumped, then checked
  CHECK(!fs::exists(call / "c002-add_one-y.npy"));
  const std::string index = ReadText(call / "index.json");
  CHECK(index.find("wrote NaN to intermediate 'y'") != std::string::npos);
  axrt_tensor_release(y);
  fs::remove_all(root);
}

// Run by the ctest entry unit.debug_calls_test.env, with AXRT_CHECK_FINITE=1
// and AXRT_DUMP_DIR naming an existing folder.
TEST_CASE_METHOD(Cpu, "the environment checks and dumps calls without options", "[.env]") {
  const char* root = std::getenv("AXRT_DUMP_DIR");
  REQUIRE(root != nullptr);
  REQUIRE(std::getenv("AXRT_CHECK_FINITE") != nullptr);
  for (const auto& entry : fs::directory_iterator(root)) fs::remove_all(entry.path());
  axrt_tensor_t y = nullptr;
  REQUIRE_CALL_OK(Invoke("three", nullptr, &y));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS,
                     "command 1 (kernel 'poison' (axrt.debugtest:dbg_poison)) wrote NaN");
  const fs::path call = CallFolder(root, "three");
  CHECK(fs::exists(call / "in-x.npy"));
  CHECK(fs::exists(call / "c001-poison-y.npy"));
  CHECK(fs::exists(call / "index.json"));
  axrt_tensor_release(y);
  // Options add to the environment: a dump flag with its own directory.
  const fs::path other = FreshFolder("env-options");
  const std::string directory = other.string();
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = AXRT_INVOKE_FLAG_DUMP;
  options.dump_directory = directory.c_str();
  axrt_stream_t fresh = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &fresh));
  std::swap(fresh, stream);
  REQUIRE_CALL_OK(Invoke("copies", &options, &y));
  REQUIRE_CALL_FAILS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_DATA_LOSS, "command 1");
  CHECK(fs::exists(CallFolder(other, "copies") / "c001-poison-y.npy"));
  std::swap(fresh, stream);
  axrt_stream_release(fresh);
  axrt_tensor_release(y);
  fs::remove_all(other);
}

}  // namespace
