// `axrt run FILE [--function NAME] [--input A.npy ...] [--device ID]
// [--output-dir DIR] [--allow-host-code] [--repeat N] [--trace TRACE.json]`:
// loads an .axe executable, calls one of its functions on .npy inputs and
// writes or summarizes its outputs, tracing the run with --trace. Uses only
// the public C API, as an application would.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "axrt/axrt.h"
#include "tools/axrt/commands.h"
#include "tools/axrt/npy.h"

namespace axrt::tools {

namespace {

template <auto Release>
struct Releaser {
  template <typename T>
  void operator()(T* handle) const noexcept {
    Release(handle);
  }
};
template <typename Handle, auto Release>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Releaser<Release>>;

using InstancePtr = Owned<axrt_instance_t, axrt_instance_release>;
using DevicePtr = Owned<axrt_device_t, axrt_device_release>;
using ExecutablePtr = Owned<axrt_executable_t, axrt_executable_release>;
using FunctionPtr = Owned<axrt_function_t, axrt_function_release>;
using StreamPtr = Owned<axrt_stream_t, axrt_stream_release>;
using TensorPtr = Owned<axrt_tensor_t, axrt_tensor_release>;
using BufferPtr = Owned<axrt_buffer_t, axrt_buffer_release>;

constexpr size_t kSummaryValues = 8;

// Prints "axrt run: MESSAGE" to stderr.
template <typename... Args>
void report(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "axrt run: {}\n", fmt::format(format, std::forward<Args>(args)...));
}

// Reports a failed call's message and frees the status; true if it failed.
bool failed(axrt_status_t status) {
  if (!status) return false;
  report("{}", axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

struct Options {
  std::string path;
  std::optional<std::string> function;
  std::vector<std::string> inputs;
  std::optional<std::string> device;
  std::optional<std::string> output_dir;
  std::optional<std::string> trace;
  bool allow_host_code = false;
  uint64_t repeat = 1;
};

int parse_options(std::span<const std::string_view> args, Options* options) {
  bool have_path = false;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      if (have_path) {
        return usage_error(fmt::format("run: one file at a time ('{}' and '{}'); inputs go after "
                                       "--input",
                                       options->path, arg));
      }
      options->path = arg;
      have_path = true;
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "--allow-host-code") {
      options->allow_host_code = true;
      continue;
    }
    // Options with a value: "--name VALUE" or "--name=VALUE".
    const size_t equals = arg.find('=');
    const std::string_view name = arg.substr(0, equals);
    if (name != "--function" && name != "--input" && name != "--device" && name != "--output-dir" &&
        name != "--repeat" && name != "--trace") {
      return usage_error(fmt::format("run: unknown option '{}'", arg));
    }
    std::string_view value;
    if (equals != std::string_view::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return usage_error(fmt::format("run: {} needs a value", name));
    }
    if (value.empty()) return usage_error(fmt::format("run: {} needs a value", name));
    const auto set_once = [&](std::optional<std::string>* slot) {
      if (*slot) return usage_error(fmt::format("run: {} given twice", name));
      *slot = std::string(value);
      return kExitOk;
    };
    int status = kExitOk;
    if (name == "--function") {
      status = set_once(&options->function);
    } else if (name == "--device") {
      status = set_once(&options->device);
    } else if (name == "--output-dir") {
      status = set_once(&options->output_dir);
    } else if (name == "--trace") {
      status = set_once(&options->trace);
    } else if (name == "--input") {
      options->inputs.emplace_back(value);
    } else {  // --repeat
      uint64_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9' || n > 100'000'000) {
          n = 0;
          break;
        }
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      if (n == 0 || n > 1'000'000'000) {
        return usage_error(
            fmt::format("run: --repeat wants a count from 1 to 1000000000, not '{}'", value));
      }
      options->repeat = n;
    }
    if (status != kExitOk) return status;
  }
  if (!have_path) return usage_error("run: missing FILE");
  return kExitOk;
}

// The trace --trace asks for: started on the instance before anything else
// runs, stopped (its file written) after the run's last synchronize, or
// when the command fails before that, so that a failed run leaves its trace
// too. run_run() declares it right after the instance, so that it stops
// before the instance is released.
class RunTrace {
 public:
  RunTrace() = default;
  RunTrace(const RunTrace&) = delete;
  RunTrace& operator=(const RunTrace&) = delete;
  ~RunTrace() { stop(); }

  // Starts the trace; false (reported) when it cannot run.
  bool start(axrt_instance_t instance, const std::string& path) {
    axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
    options.path = path.c_str();
    if (axrt_status_t status = axrt_instance_trace_start(instance, &options)) {
      const bool running = axrt_status_code(status) == AXRT_STATUS_CODE_FAILED_PRECONDITION;
      report("--trace: {}", axrt_status_message(status));
      axrt_status_free(status);
      const char* environment = std::getenv("AXRT_TRACE");
      if (running && environment && *environment) {
        report("AXRT_TRACE={} traces this process already; unset it to use --trace", environment);
      }
      return false;
    }
    instance_ = instance;
    path_ = path;
    return true;
  }

  // Stops the trace and reports its file; false (reported) when writing it
  // failed. Does nothing when no trace runs.
  bool stop() {
    if (!instance_) return true;
    axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
    if (failed(axrt_instance_trace_stop(std::exchange(instance_, nullptr), &result))) return false;
    fmt::print(stderr, "trace: {} events written to {} ({} dropped)\n", result.events, path_,
               result.dropped_events);
    return true;
  }

 private:
  axrt_instance_t instance_ = nullptr;
  std::string path_;
};

// A function's signature, read through axrt_function_query_*.
struct Argument {
  std::string name;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::vector<int64_t> dims;     // -1 where symbolic
  std::vector<int32_t> symbols;  // the symbol's index, or -1 where fixed
};

struct Signature {
  std::string name;
  std::vector<Argument> inputs;
  std::vector<Argument> outputs;
  std::vector<std::string> symbol_names;
  std::vector<uint64_t> symbol_bounds;

  // "f32[n, 4]".
  std::string type_string(const Argument& arg) const {
    std::vector<std::string> dims;
    for (size_t d = 0; d < arg.dims.size(); ++d) {
      const int32_t s = arg.symbols[d];
      dims.push_back(s >= 0 && static_cast<size_t>(s) < symbol_names.size()
                         ? symbol_names[s]
                         : std::to_string(arg.dims[d]));
    }
    return fmt::format("{}[{}]", axrt_dtype_name(arg.dtype), fmt::join(dims, ", "));
  }

  // "add(a: f32[n], b: f32[n]) -> (out: f32[n]) with n <= 65536".
  std::string to_string() const {
    const auto list = [&](const std::vector<Argument>& args) {
      std::vector<std::string> parts;
      for (const Argument& arg : args) parts.push_back(arg.name + ": " + type_string(arg));
      return fmt::format("{}", fmt::join(parts, ", "));
    };
    std::string text = fmt::format("{}({}) -> ({})", name, list(inputs), list(outputs));
    for (size_t s = 0; s < symbol_names.size(); ++s) {
      text += fmt::format("{} {} <= {}", s == 0 ? " with" : ",", symbol_names[s], symbol_bounds[s]);
    }
    return text;
  }
};

axrt_status_t query_signature(axrt_function_t function, Signature* out) {
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  if (axrt_status_t status = axrt_function_query_info(function, &info)) return status;
  out->name = info.name;
  for (uint32_t s = 0; s < info.symbol_count; ++s) {
    const char* name = nullptr;
    uint64_t bound = 0;
    if (axrt_status_t status = axrt_function_query_symbol(function, s, &name, &bound)) return status;
    out->symbol_names.emplace_back(name);
    out->symbol_bounds.push_back(bound);
  }
  const auto query = [&](axrt_argument_kind_t kind, uint32_t count, std::vector<Argument>* args) {
    for (uint32_t i = 0; i < count; ++i) {
      axrt_argument_info_t arg = AXRT_ARGUMENT_INFO_INIT;
      if (axrt_status_t status = axrt_function_query_argument(function, kind, i, &arg)) return status;
      Argument a;
      a.name = arg.name;
      a.dtype = arg.dtype;
      a.dims.assign(arg.dims, arg.dims + arg.rank);
      a.symbols.assign(arg.dim_symbols, arg.dim_symbols + arg.rank);
      args->push_back(std::move(a));
    }
    return axrt_status_t{nullptr};
  };
  if (axrt_status_t status = query(AXRT_ARGUMENT_KIND_INPUT, info.input_count, &out->inputs)) {
    return status;
  }
  return query(AXRT_ARGUMENT_KIND_OUTPUT, info.output_count, &out->outputs);
}

// The signatures of every function of `executable`, one per line, indented.
std::string function_list(axrt_executable_t executable) {
  axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
  if (axrt_status_t status = axrt_executable_query_info(executable, &info)) {
    axrt_status_free(status);
    return "";
  }
  std::string list;
  for (uint32_t i = 0; i < info.function_count; ++i) {
    axrt_function_t raw = nullptr;
    Signature signature;
    axrt_status_t status = axrt_executable_get_function(executable, i, &raw);
    FunctionPtr function(raw);
    if (!status) status = query_signature(function.get(), &signature);
    if (status) {
      list += fmt::format("  function {}: {}\n", i, axrt_status_message(status));
      axrt_status_free(status);
      continue;
    }
    list += fmt::format("  {}\n", signature.to_string());
  }
  return list;
}

std::string shape_string(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Checks input `index`'s array against the signature, binding symbols as
// they are met (`symbol_setters`: which input set each). Returns "" or what
// is wrong, with both shapes.
std::string check_input(const Signature& signature, size_t index, std::span<const std::string> paths,
                        std::span<const NpyArray> arrays,
                        std::vector<std::optional<int64_t>>* symbol_values,
                        std::vector<size_t>* symbol_setters) {
  const Argument& arg = signature.inputs[index];
  const NpyArray& array = arrays[index];
  const auto held = [&](size_t i) {
    return fmt::format("{}{}", axrt_dtype_name(arrays[i].dtype), shape_string(arrays[i].shape));
  };
  const std::string what = fmt::format("input {} '{}' ({}) holds {} but {} wants {}", index, arg.name,
                                       paths[index], held(index), signature.name,
                                       signature.type_string(arg));
  if (npy_descriptor(arg.dtype).empty()) {
    return fmt::format("{}, a dtype .npy files cannot hold", what);
  }
  if (array.dtype != arg.dtype || array.shape.size() != arg.dims.size()) return what;
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    const int64_t extent = array.shape[d];
    const int32_t s = arg.symbols[d];
    if (s < 0 || static_cast<size_t>(s) >= symbol_values->size()) {
      if (extent != arg.dims[d]) return fmt::format("{}: dimension {} must be {}", what, d, arg.dims[d]);
      continue;
    }
    const std::string& symbol = signature.symbol_names[s];
    std::optional<int64_t>& value = (*symbol_values)[s];
    if (value && *value != extent) {
      const size_t setter = (*symbol_setters)[s];
      return fmt::format("{}: input {} '{}' ({}) holds {}, which sets {} = {}", what, setter,
                         signature.inputs[setter].name, paths[setter], held(setter), symbol, *value);
    }
    if (static_cast<uint64_t>(extent) > signature.symbol_bounds[s]) {
      return fmt::format("{}: {} = {} is above its bound {}", what, symbol, extent,
                         signature.symbol_bounds[s]);
    }
    value = extent;
    (*symbol_setters)[s] = index;
  }
  return "";
}

float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// Element `i` of `data` as text, or "" for a dtype this does not print.
std::string element_string(axrt_dtype_t dtype, const uint8_t* data, uint64_t i) {
  switch (dtype) {
    case AXRT_DTYPE_BOOL: return data[i] ? "true" : "false";
    case AXRT_DTYPE_INT8: return fmt::format("{}", load<int8_t>(data + i));
    case AXRT_DTYPE_UINT8: return fmt::format("{}", data[i]);
    case AXRT_DTYPE_INT16: return fmt::format("{}", load<int16_t>(data + 2 * i));
    case AXRT_DTYPE_UINT16: return fmt::format("{}", load<uint16_t>(data + 2 * i));
    case AXRT_DTYPE_INT32: return fmt::format("{}", load<int32_t>(data + 4 * i));
    case AXRT_DTYPE_UINT32: return fmt::format("{}", load<uint32_t>(data + 4 * i));
    case AXRT_DTYPE_INT64: return fmt::format("{}", load<int64_t>(data + 8 * i));
    case AXRT_DTYPE_UINT64: return fmt::format("{}", load<uint64_t>(data + 8 * i));
    case AXRT_DTYPE_FLOAT16: return fmt::format("{}", half_to_float(load<uint16_t>(data + 2 * i)));
    case AXRT_DTYPE_BFLOAT16: {
      const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(data + 2 * i)) << 16;
      return fmt::format("{}", load<float>(reinterpret_cast<const uint8_t*>(&bits)));
    }
    case AXRT_DTYPE_FLOAT32: return fmt::format("{}", load<float>(data + 4 * i));
    case AXRT_DTYPE_FLOAT64: return fmt::format("{}", load<double>(data + 8 * i));
    default: return "";
  }
}

// "out: f32[5000] = [1, 2, 3, ...]".
std::string summary(const std::string& name, axrt_dtype_t dtype, std::span<const int64_t> shape,
                    uint64_t count, const std::vector<uint8_t>& data) {
  std::string line = fmt::format("{}: {}{}", name, axrt_dtype_name(dtype), shape_string(shape));
  const bool printable = npy_element_size(dtype) > 0 || dtype == AXRT_DTYPE_BFLOAT16;
  if (!printable) {
    return line + fmt::format(" ({} bytes; values not shown for {})", data.size(), axrt_dtype_name(dtype));
  }
  std::vector<std::string> values;
  for (uint64_t i = 0; i < count && i < kSummaryValues; ++i) {
    values.push_back(element_string(dtype, data.data(), i));
  }
  if (count > kSummaryValues) values.push_back("...");
  if (shape.empty() && count == 1) return fmt::format("{} = {}", line, values[0]);
  return fmt::format("{} = [{}]", line, fmt::join(values, ", "));
}

// A file name for output `name`: path separators and other unsafe
// characters become '_'.
std::string file_name_for(std::string_view name, size_t index) {
  std::string file;
  for (char c : name) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.';
    file += safe ? c : '_';
  }
  if (file.empty() || file == "." || file == "..") file = fmt::format("output{}", index);
  return file;
}

}  // namespace

int run_run(std::span<const std::string_view> args) {
  Options options;
  if (const int parsed = parse_options(args, &options); parsed != kExitOk) return parsed;

  axrt_instance_t raw_instance = nullptr;
  if (failed(axrt_instance_create(nullptr, &raw_instance))) return kExitFailure;
  InstancePtr instance(raw_instance);
  RunTrace trace;
  if (options.trace && !trace.start(instance.get(), *options.trace)) return kExitFailure;
  axrt_device_t raw_device = nullptr;
  if (failed(axrt_instance_find_device(instance.get(), options.device ? options.device->c_str() : nullptr,
                                       &raw_device))) {
    return kExitFailure;
  }
  DevicePtr device(raw_device);

  axrt_executable_load_options_t load_options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  if (options.allow_host_code) load_options.flags |= AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE;
  axrt_executable_t raw_executable = nullptr;
  if (axrt_status_t status = axrt_executable_load_file(device.get(), options.path.c_str(),
                                                       &load_options, &raw_executable)) {
    const bool host_code = axrt_status_code(status) == AXRT_STATUS_CODE_PERMISSION_DENIED;
    failed(status);
    if (host_code && !options.allow_host_code) {
      report("pass --allow-host-code to load it (its native code then runs in this process)");
    }
    return kExitFailure;
  }
  ExecutablePtr executable(raw_executable);

  // The function: the one named, or the only one there is.
  axrt_function_t raw_function = nullptr;
  if (options.function) {
    if (axrt_status_t status =
            axrt_executable_find_function(executable.get(), options.function->c_str(), &raw_function)) {
      failed(status);
      fmt::print(stderr, "functions of {}:\n{}", options.path, function_list(executable.get()));
      return kExitFailure;
    }
  } else {
    axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
    if (failed(axrt_executable_query_info(executable.get(), &info))) return kExitFailure;
    if (info.function_count == 0) {
      report("{} has no functions", options.path);
      return kExitFailure;
    }
    if (info.function_count > 1) {
      std::string list = function_list(executable.get());
      if (!list.empty()) list.pop_back();  // report() ends the line
      report("{} has {} functions; name one with --function NAME:\n{}", options.path,
             info.function_count, list);
      return kExitUsage;
    }
    if (failed(axrt_executable_get_function(executable.get(), 0, &raw_function))) return kExitFailure;
  }
  FunctionPtr function(raw_function);
  Signature signature;
  if (failed(query_signature(function.get(), &signature))) return kExitFailure;

  // The inputs: counted before any file is read, then read and checked
  // against the signature before anything is allocated.
  if (options.inputs.size() != signature.inputs.size()) {
    report("function '{}' takes {} input{} but {} {} given (--input FILE.npy for each): {}",
           signature.name, signature.inputs.size(), signature.inputs.size() == 1 ? "" : "s",
           options.inputs.size(), options.inputs.size() == 1 ? "was" : "were", signature.to_string());
    return kExitFailure;
  }
  std::vector<NpyArray> arrays(options.inputs.size());
  std::vector<std::optional<int64_t>> symbol_values(signature.symbol_names.size());
  std::vector<size_t> symbol_setters(signature.symbol_names.size(), 0);
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    std::string error;
    if (!npy_read_file(options.inputs[i], &arrays[i], &error)) {
      report("input {} '{}': {}", i, signature.inputs[i].name, error);
      return kExitFailure;
    }
    error = check_input(signature, i, options.inputs, arrays, &symbol_values, &symbol_setters);
    if (!error.empty()) {
      report("{} (signature: {})", error, signature.to_string());
      return kExitFailure;
    }
  }

  axrt_stream_t raw_stream = nullptr;
  if (failed(axrt_stream_create(device.get(), nullptr, &raw_stream))) return kExitFailure;
  StreamPtr stream(raw_stream);
  std::vector<TensorPtr> inputs;
  for (const NpyArray& array : arrays) {
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = array.dtype;
    desc.rank = static_cast<uint32_t>(array.shape.size());
    desc.shape = array.shape.data();
    axrt_tensor_t raw_tensor = nullptr;
    if (failed(axrt_tensor_allocate(device.get(), &desc, nullptr, &raw_tensor))) return kExitFailure;
    inputs.emplace_back(raw_tensor);
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    axrt_buffer_t raw_buffer = nullptr;
    if (failed(axrt_tensor_query_info(raw_tensor, &info)) ||
        failed(axrt_tensor_get_buffer(raw_tensor, &raw_buffer))) {
      return kExitFailure;
    }
    BufferPtr buffer(raw_buffer);
    if (failed(axrt_stream_copy_from_host(stream.get(), array.data.data(), buffer.get(),
                                          info.byte_offset, info.byte_size))) {
      return kExitFailure;
    }
  }
  // The uploads finish before the clock starts.
  if (failed(axrt_stream_synchronize(stream.get()))) return kExitFailure;

  std::vector<axrt_tensor_t> input_handles;
  for (const TensorPtr& tensor : inputs) input_handles.push_back(tensor.get());
  std::vector<TensorPtr> outputs;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t call = 0; call < options.repeat; ++call) {
    std::vector<axrt_tensor_t> raw_outputs(signature.outputs.size(), nullptr);
    if (failed(axrt_function_invoke(function.get(), stream.get(), input_handles.data(),
                                    input_handles.size(), raw_outputs.data(), raw_outputs.size(),
                                    nullptr))) {
      return kExitFailure;
    }
    // Each call's outputs are retained until it completes; only the last
    // call's are kept.
    outputs.clear();
    for (axrt_tensor_t tensor : raw_outputs) outputs.emplace_back(tensor);
  }
  if (failed(axrt_stream_synchronize(stream.get()))) return kExitFailure;
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;

  // Download every output.
  struct Result {
    axrt_dtype_t dtype;
    std::vector<int64_t> shape;
    uint64_t count;
    std::vector<uint8_t> data;
  };
  std::vector<Result> results;
  for (const TensorPtr& tensor : outputs) {
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    axrt_buffer_t raw_buffer = nullptr;
    if (failed(axrt_tensor_query_info(tensor.get(), &info)) ||
        failed(axrt_tensor_get_buffer(tensor.get(), &raw_buffer))) {
      return kExitFailure;
    }
    BufferPtr buffer(raw_buffer);
    Result& result = results.emplace_back();
    result.dtype = info.dtype;
    result.shape.assign(info.shape, info.shape + info.rank);
    result.count = info.element_count;
    result.data.resize(info.byte_size);
    if (failed(axrt_stream_copy_to_host(stream.get(), buffer.get(), info.byte_offset,
                                        result.data.data(), info.byte_size))) {
      return kExitFailure;
    }
  }
  if (failed(axrt_stream_synchronize(stream.get()))) return kExitFailure;
  if (!trace.stop()) return kExitFailure;

  std::string out;
  if (options.output_dir) {
    std::error_code error;
    std::filesystem::create_directories(*options.output_dir, error);
    if (error) {
      report("cannot create the output directory {}: {}", *options.output_dir, error.message());
      return kExitFailure;
    }
    std::set<std::string> used;
    for (size_t i = 0; i < results.size(); ++i) {
      std::string name = file_name_for(signature.outputs[i].name, i);
      if (!used.insert(name).second) name += fmt::format("_{}", i);
      used.insert(name);
      const std::string path = (std::filesystem::path(*options.output_dir) / (name + ".npy")).string();
      std::string write_error;
      if (!npy_write_file(path, results[i].dtype, results[i].shape, results[i].data, &write_error)) {
        report("output {} '{}': {}", i, signature.outputs[i].name, write_error);
        return kExitFailure;
      }
      out += fmt::format("{}: {}{} -> {}\n", signature.outputs[i].name,
                         axrt_dtype_name(results[i].dtype), shape_string(results[i].shape), path);
    }
  } else {
    for (size_t i = 0; i < results.size(); ++i) {
      out += summary(signature.outputs[i].name, results[i].dtype, results[i].shape, results[i].count,
                     results[i].data) +
             "\n";
    }
  }
  if (options.repeat > 1) {
    out += fmt::format("{} calls: {:.3f} ms per call ({:.3f} ms in all)\n", options.repeat,
                       elapsed.count() / static_cast<double>(options.repeat), elapsed.count());
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace axrt::tools
