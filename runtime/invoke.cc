// The executable C API and function invocation: checking a call against the
// signature, binding symbols, allocating outputs and the arena, and filling
// the function's command templates into one batch for the stream.
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "runtime/api.h"
#include "runtime/driver.h"
#include "runtime/executable.h"
#include "runtime/instance.h"
#include "runtime/tensor.h"

namespace axrt {

axrt_status_t evaluate_value(const ValueSource& value, std::span<const uint64_t> symbols,
                             std::span<const bool> symbols_bound,
                             std::span<const std::string> symbol_names, const std::string& what,
                             uint64_t* out) {
  if (!value.expr) {
    *out = value.literal;
    return nullptr;
  }
  uint64_t stack[16];
  size_t depth = 0;
  auto fail = [&](const char* reason) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: {}", what, reason);
  };
  for (const axe::ExprOp* op : *value.expr->ops()) {
    const axe::ExprOpcode opcode = op->opcode();
    if (opcode == axe::ExprOpcode::CONST) {
      stack[depth++] = static_cast<uint64_t>(op->operand());
      continue;
    }
    if (opcode == axe::ExprOpcode::SYMBOL) {
      const auto s = static_cast<size_t>(op->operand());
      if (s >= symbols.size() || !symbols_bound[s]) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: symbol '{}' has no value: no input of the call names it", what,
                           s < symbol_names.size() ? symbol_names[s] : std::to_string(s));
      }
      stack[depth++] = symbols[s];
      continue;
    }
    const uint64_t b = stack[--depth];
    const uint64_t a = stack[depth - 1];
    uint64_t r = 0;
    switch (opcode) {
      case axe::ExprOpcode::ADD:
        if (__builtin_add_overflow(a, b, &r)) return fail("an addition overflows");
        break;
      case axe::ExprOpcode::SUB:
        if (a < b) return fail("a subtraction goes below zero");
        r = a - b;
        break;
      case axe::ExprOpcode::MUL:
        if (__builtin_mul_overflow(a, b, &r)) return fail("a multiplication overflows");
        break;
      case axe::ExprOpcode::DIV_FLOOR:
        if (b == 0) return fail("division by zero");
        r = a / b;
        break;
      case axe::ExprOpcode::DIV_CEIL:
        if (b == 0) return fail("division by zero");
        r = a / b + (a % b != 0);
        break;
      case axe::ExprOpcode::MOD:
        if (b == 0) return fail("modulo by zero");
        r = a % b;
        break;
      case axe::ExprOpcode::MINIMUM: r = std::min(a, b); break;
      case axe::ExprOpcode::MAXIMUM: r = std::max(a, b); break;
      default: return fail("unknown opcode");  // the reader refuses these
    }
    stack[depth - 1] = r;
  }
  *out = stack[0];
  return nullptr;
}

namespace {

// Everything one call binds, on the stack of axrt_function_invoke.
struct CallState {
  const Function* function;
  Executable* executable;
  uint64_t symbols[kMaxSymbols];
  bool bound[kMaxSymbols];
  std::vector<Tensor*> inputs;
  std::vector<Tensor*> outputs;
  Buffer* arena = nullptr;

  std::span<const uint64_t> symbol_values() const { return {symbols, function->symbol_names.size()}; }
  std::span<const bool> symbol_bound() const { return {bound, function->symbol_names.size()}; }
};

// "inputs[3]" for messages, without formatting on the hot path.
const char* indexed_name(const char* base, size_t index) {
  static const std::array<std::string, 32> inputs = [] {
    std::array<std::string, 32> names;
    for (size_t i = 0; i < names.size(); ++i) names[i] = fmt::format("inputs[{}]", i);
    return names;
  }();
  static const std::array<std::string, 32> outputs = [] {
    std::array<std::string, 32> names;
    for (size_t i = 0; i < names.size(); ++i) names[i] = fmt::format("outputs[{}]", i);
    return names;
  }();
  const bool is_input = base[0] == 'i';
  if (index >= inputs.size()) return is_input ? "an input" : "an output";
  return (is_input ? inputs : outputs)[index].c_str();
}

const char* kind_name(axrt_argument_kind_t kind) {
  return kind == AXRT_ARGUMENT_KIND_INPUT ? "input" : "output";
}

// The extents `arg` has with the call's symbols; false when one is unbound.
bool resolved_shape(const ArgumentSignature& arg, const CallState& call, std::vector<int64_t>* out) {
  out->clear();
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    const int32_t s = arg.dim_symbols[d];
    if (s < 0) {
      out->push_back(arg.dims[d]);
    } else if (call.bound[s]) {
      out->push_back(static_cast<int64_t>(call.symbols[s]));
    } else {
      return false;
    }
  }
  return true;
}

// Checks tensor `t` against signature `arg`, binding symbols when `bind`.
axrt_status_t check_argument(const ApiCall& api, CallState* call, axrt_argument_kind_t kind,
                             size_t index, const ArgumentSignature& arg, const Tensor& t,
                             bool bind) {
  const Function& f = *call->function;
  auto mismatch = [&](const std::string& reason) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: {} {} ('{}') {}", f.label,
                     kind_name(kind), index, arg.name, reason);
  };
  if (t.buffer->device.get() != call->executable->device.get()) {
    return mismatch(fmt::format("is on {}, but the executable is loaded on {}",
                                t.buffer->device->id(), call->executable->device->id()));
  }
  if (t.buffer->is_deallocated()) {
    return mismatch(fmt::format("views {}, which was deallocated", t.buffer->describe()));
  }
  if (kind == AXRT_ARGUMENT_KIND_OUTPUT && t.read_only) {
    return mismatch(fmt::format("is read-only (imported from a read-only DLPack tensor over {}); "
                                "an output must be writable",
                                t.buffer->describe()));
  }
  if (t.dtype != arg.dtype || t.rank != arg.dims.size()) {
    return mismatch(fmt::format("is {}{} but the signature wants {}", dtype_name(t.dtype),
                                format_shape(t.dims()), f.describe_signature(arg)));
  }
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    const int64_t extent = t.shape[d];
    const int32_t s = arg.dim_symbols[d];
    if (s < 0) {
      if (extent != arg.dims[d]) {
        return mismatch(fmt::format("has shape {} but the signature wants {} (dimension {} must "
                                    "be {})",
                                    format_shape(t.dims()), f.describe_signature(arg), d,
                                    arg.dims[d]));
      }
      continue;
    }
    const auto value = static_cast<uint64_t>(extent);
    if (call->bound[s]) {
      if (call->symbols[s] != value) {
        return mismatch(fmt::format("has shape {} but the signature wants {}: dimension {} is "
                                    "{}, while an earlier argument set '{}' to {}",
                                    format_shape(t.dims()), f.describe_signature(arg), d, extent,
                                    f.symbol_names[s], call->symbols[s]));
      }
      continue;
    }
    if (!bind) {
      return mismatch(fmt::format("has shape {}, but symbol '{}' of {} is bound by no input",
                                  format_shape(t.dims()), f.symbol_names[s],
                                  f.describe_signature(arg)));
    }
    if (value > f.symbol_bounds[s]) {
      return mismatch(fmt::format("has shape {} but the signature wants {}: dimension {} is {}, "
                                  "above the bound {} of '{}'",
                                  format_shape(t.dims()), f.describe_signature(arg), d, extent,
                                  f.symbol_bounds[s], f.symbol_names[s]));
    }
    call->symbols[s] = value;
    call->bound[s] = true;
  }
  if (!t.contiguous()) {
    return mismatch(fmt::format("has strides {} for shape {}; functions take contiguous "
                                "row-major tensors",
                                format_shape({t.strides.data(), t.rank}), format_shape(t.dims())));
  }
  return nullptr;
}

// The buffer, offset from its allocation's start, and size of a binding.
struct BoundBuffer {
  Buffer* buffer;
  uint64_t offset;
  uint64_t size;
};

BoundBuffer resolve_binding(const BufferSource& source, const CallState& call) {
  switch (source.kind) {
    case axe::BindingKind::INPUT:
    case axe::BindingKind::OUTPUT: {
      const Tensor* t = source.kind == axe::BindingKind::INPUT ? call.inputs[source.index]
                                                               : call.outputs[source.index];
      return {t->buffer.get(), t->buffer->offset + t->byte_offset, t->contiguous_bytes()};
    }
    case axe::BindingKind::CONSTANT: {
      Buffer* b = call.executable->constants[source.index].buffer.get();
      return {b, b->offset, b->size};
    }
    case axe::BindingKind::ARENA:
      return {call.arena, call.arena->offset + source.offset, source.size};
    default:
      return {nullptr, 0, 0};
  }
}

axrt_status_t build_batch(const ApiCall& api, const CallState& call, CommandBatch* batch) {
  const Function& f = *call.function;
  const Executable& exe = *call.executable;
  const auto symbols = call.symbol_values();
  const auto bound = call.symbol_bound();
  const auto names = std::span<const std::string>(f.symbol_names);
  batch->commands.resize(f.commands.size());
  batch->args.assign(f.args_words, 0);
  uint32_t args_offset = 0;
  auto eval = [&](const ValueSource& v, size_t c, const char* field, uint64_t* out) -> axrt_status_t {
    if (!v.expr) {
      *out = v.literal;
      return nullptr;
    }
    axrt_status_t status =
        evaluate_value(v, symbols, bound, names, fmt::format("{} command {} {}", f.label, c, field), out);
    if (!status) return nullptr;
    StatusPtr owned(status);
    return api.error(axrt_status_code(status), "{}", axrt_status_message(status));
  };
  for (size_t c = 0; c < f.commands.size(); ++c) {
    const CompiledCommand& command = f.commands[c];
    BatchCommand& out = batch->commands[c];
    out.kind = command.kind;
    if (command.kind == BatchCommand::Kind::kDispatch) {
      const LoadedKernel& kernel = exe.kernels[command.kernel];
      if (kernel.code) {
        out.device_kernel = &kernel.device;
      } else {
        out.host_kernel = &kernel.host;
      }
      out.args_offset = args_offset;
      out.args_size = kernel.args_size;
      auto* block = reinterpret_cast<std::byte*>(batch->args.data()) + args_offset;
      std::memcpy(block, command.args_template.data(), command.args_template.size() * 8);
      args_offset += static_cast<uint32_t>(command.args_template.size() * 8);
      for (const ArgumentPatch& patch : command.patches) {
        if (patch.is_buffer) {
          const BoundBuffer b = resolve_binding(patch.buffer, call);
          const uint64_t address = b.buffer->device_address(b.offset);
          std::memcpy(block + patch.offset, &address, 8);
          continue;
        }
        uint64_t value = 0;
        AXRT_RETURN_IF_ERROR(eval(patch.value, c, "scalar argument", &value));
        if (!encode_scalar_argument(patch, value, block)) {
          return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{} command {}: scalar argument value {} does not fit its type {}",
                           f.label, c, value, dtype_name(patch.scalar_type));
        }
      }
      uint32_t counts[3];
      for (int d = 0; d < 3; ++d) {
        uint64_t value = 0;
        AXRT_RETURN_IF_ERROR(eval(command.workgroup_count[d], c, "workgroup count", &value));
        if (value > exe.device->properties.max_workgroup_count[d]) {
          return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{} command {}: {} workgroups along {} exceed {}'s limit of {}",
                           f.label, c, value, "xyz"[d], exe.device->id(),
                           exe.device->properties.max_workgroup_count[d]);
        }
        counts[d] = static_cast<uint32_t>(value);
      }
      out.workgroup_count = {counts[0], counts[1], counts[2]};
      continue;
    }
    uint64_t dst_offset = 0, length = 0;
    AXRT_RETURN_IF_ERROR(eval(command.dst_offset, c, "offset", &dst_offset));
    AXRT_RETURN_IF_ERROR(eval(command.length, c, "length", &length));
    const BoundBuffer dst = resolve_binding(command.dst, call);
    auto check_range = [&](const BoundBuffer& b, uint64_t offset, const char* side) -> axrt_status_t {
      if (offset > b.size || length > b.size - offset) {
        return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "{} command {}: {} range [{}, {} + {}) lies outside its {}-byte binding",
                         f.label, c, side, offset, offset, length, b.size);
      }
      return nullptr;
    };
    AXRT_RETURN_IF_ERROR(check_range(dst, dst_offset, "the destination"));
    if (command.kind == BatchCommand::Kind::kFill) {
      if (length % command.pattern_size != 0) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{} command {}: fill length {} is not a multiple of the {}-byte pattern",
                         f.label, c, length, command.pattern_size);
      }
      out.fill_buffer = dst.buffer;
      out.fill_offset = dst.offset + dst_offset;
      out.fill_length = length;
      out.fill_pattern = command.pattern;
      out.fill_pattern_size = command.pattern_size;
      continue;
    }
    uint64_t src_offset = 0;
    AXRT_RETURN_IF_ERROR(eval(command.src_offset, c, "source offset", &src_offset));
    const BoundBuffer src = resolve_binding(command.src, call);
    AXRT_RETURN_IF_ERROR(check_range(src, src_offset, "the source"));
    out.copy.src = CopyEndpoint{src.buffer, nullptr, src.offset + src_offset, 0};
    out.copy.dst = CopyEndpoint{dst.buffer, nullptr, dst.offset + dst_offset, 0};
    out.copy.width = length;
    out.copy.height = 1;
  }
  return nullptr;
}

}  // namespace
}  // namespace axrt

using namespace axrt;

namespace {

axrt_status_t read_load_options(const ApiCall& api, const axrt_executable_load_options_t* options,
                                LoadParams* out) {
  if (!options) return nullptr;
  AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_executable_load_options_t",
                                             sizeof(axrt_executable_load_options_t)));
  axrt_executable_load_options_t opts = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  AXRT_READ_FIELD(options, &opts, flags);
  constexpr uint32_t kKnown =
      AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE | AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS;
  if (opts.flags & ~kKnown) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED, "`options->flags` sets unknown bits {:#x}",
                     opts.flags & ~kKnown);
  }
  Extensions extensions;
  AXRT_RETURN_IF_ERROR(api.read_extensions(options->next, "options", kAcceptDebugLabel, &extensions));
  out->flags = opts.flags;
  out->label = std::move(extensions.label);
  return nullptr;
}

axe::ReadOptions read_options_for(const LoadParams& params) {
  axe::ReadOptions options;
  options.allow_host_code = (params.flags & AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE) != 0;
  options.verify_checksums = (params.flags & AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS) != 0;
  return options;
}

// Prefixes a status from the reader or loader with the API function.
axrt_status_t with_function(const ApiCall& api, axrt_status_t status) {
  if (!status) return nullptr;
  StatusPtr owned(status);
  return api.error(axrt_status_code(status), "{}", axrt_status_message(status));
}

// Says how to allow host code when the reader refused it.
axrt_status_t hint_host_code(axrt_status_t status) {
  if (axrt_status_code(status) != AXRT_STATUS_CODE_PERMISSION_DENIED) return status;
  StatusPtr owned(status);
  return make_status(AXRT_STATUS_CODE_PERMISSION_DENIED,
                     "{} (set AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE for files you trust)",
                     axrt_status_message(status));
}

axrt_status_t finish_load(const ApiCall& api, Device* device, std::unique_ptr<axe::AxeFile> file,
                          const LoadParams& params, axrt_executable_t* out_executable) {
  Ref<Executable> executable;
  AXRT_RETURN_IF_ERROR(
      with_function(api, load_executable(device, std::move(file), params, &executable)));
  *out_executable = to_handle<axrt_executable_t>(executable.release());
  return nullptr;
}

}  // namespace

AXRT_API axrt_status_t axrt_instance_register_kernel_library(axrt_instance_t instance,
                                                             const axrt_kernel_library_t* library) {
  static constexpr ApiCall api("axrt_instance_register_kernel_library");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(library, "library"));
    std::shared_ptr<KernelLibrary> validated;
    AXRT_RETURN_IF_ERROR(with_function(
        api, validate_kernel_library(library, "the library registered by the application",
                                     &validated)));
    return with_function(api, register_kernel_library(self, std::move(validated)));
  });
}

AXRT_API axrt_status_t axrt_executable_load_file(axrt_device_t device, const char* path,
                                                 const axrt_executable_load_options_t* options,
                                                 axrt_executable_t* out_executable) {
  static constexpr ApiCall api("axrt_executable_load_file");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &target));
    AXRT_RETURN_IF_ERROR(api.require_pointer(path, "path"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_executable, "out_executable"));
    LoadParams params;
    AXRT_RETURN_IF_ERROR(read_load_options(api, options, &params));
    std::unique_ptr<axe::AxeFile> file;
    AXRT_RETURN_IF_ERROR(
        with_function(api, hint_host_code(axe::AxeFile::open_file(path, read_options_for(params), &file))));
    return finish_load(api, target, std::move(file), params, out_executable);
  });
}

AXRT_API axrt_status_t axrt_executable_load_memory(axrt_device_t device, const void* data,
                                                   size_t size,
                                                   const axrt_executable_load_options_t* options,
                                                   axrt_executable_t* out_executable) {
  static constexpr ApiCall api("axrt_executable_load_memory");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &target));
    AXRT_RETURN_IF_ERROR(api.require_pointer(data, "data"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_executable, "out_executable"));
    LoadParams params;
    AXRT_RETURN_IF_ERROR(read_load_options(api, options, &params));
    std::unique_ptr<axe::AxeFile> file;
    AXRT_RETURN_IF_ERROR(with_function(
        api, hint_host_code(axe::AxeFile::open_bytes({static_cast<const uint8_t*>(data), size},
                                                     params.label.empty() ? "<memory>" : params.label,
                                                     read_options_for(params), &file))));
    return finish_load(api, target, std::move(file), params, out_executable);
  });
}

AXRT_API void axrt_executable_retain(axrt_executable_t executable) {
  retain_handle<Executable>(executable);
}

AXRT_API void axrt_executable_release(axrt_executable_t executable) {
  release_handle<Executable>(executable);
}

AXRT_API axrt_status_t axrt_executable_query_info(axrt_executable_t executable,
                                                  axrt_executable_info_t* out_info) {
  static constexpr ApiCall api("axrt_executable_query_info");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_executable_info_t"));
    const axe::Executable& meta = self->file->metadata();
    axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
    info.name = self->name.c_str();
    const auto* producer = meta.producer();
    info.producer_name = producer && producer->name() ? producer->name()->c_str() : "";
    info.producer_version = producer && producer->version() ? producer->version()->c_str() : "";
    info.function_count = static_cast<uint32_t>(self->functions.size());
    info.kernel_count = static_cast<uint32_t>(self->kernels.size());
    info.constant_count = static_cast<uint32_t>(self->constants.size());
    for (const auto& constant : self->constants) info.constant_bytes += constant.buffer->size;
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_executable_get_function(axrt_executable_t executable, uint32_t index,
                                                    axrt_function_t* out_function) {
  static constexpr ApiCall api("axrt_executable_get_function");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_function, "out_function"));
    if (index >= self->functions.size()) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "`index` {} is beyond the {} functions of {}",
                       index, self->functions.size(), self->describe());
    }
    Function* function = self->functions[index].get();
    object_retain(function);
    *out_function = to_handle<axrt_function_t>(function);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_executable_find_function(axrt_executable_t executable, const char* name,
                                                     axrt_function_t* out_function) {
  static constexpr ApiCall api("axrt_executable_find_function");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(name, "name"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_function, "out_function"));
    std::vector<std::string_view> names;
    for (const auto& function : self->functions) {
      if (function->name == name) {
        object_retain(function.get());
        *out_function = to_handle<axrt_function_t>(function.get());
        return nullptr;
      }
      names.push_back(function->name);
    }
    return api.error(AXRT_STATUS_CODE_NOT_FOUND, "{} has no function '{}' (it has: {})",
                     self->describe(), name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  });
}

AXRT_API axrt_status_t axrt_executable_get_device(axrt_executable_t executable,
                                                  axrt_device_t* out_device) {
  static constexpr ApiCall api("axrt_executable_get_device");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_device, "out_device"));
    object_retain(self->device.get());
    *out_device = to_handle<axrt_device_t>(self->device.get());
    return nullptr;
  });
}

AXRT_API void axrt_function_retain(axrt_function_t function) { retain_handle<Function>(function); }

AXRT_API void axrt_function_release(axrt_function_t function) { release_handle<Function>(function); }

AXRT_API axrt_status_t axrt_function_query_info(axrt_function_t function,
                                                axrt_function_info_t* out_info) {
  static constexpr ApiCall api("axrt_function_query_info");
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_function_info_t"));
    axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
    info.name = self->name.c_str();
    info.input_count = static_cast<uint32_t>(self->inputs.size());
    info.output_count = static_cast<uint32_t>(self->outputs.size());
    info.symbol_count = static_cast<uint32_t>(self->symbol_names.size());
    info.command_count = static_cast<uint32_t>(self->commands.size());
    info.arena_size = self->arena_size;
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_function_query_argument(axrt_function_t function,
                                                    axrt_argument_kind_t kind, uint32_t index,
                                                    axrt_argument_info_t* out_info) {
  static constexpr ApiCall api("axrt_function_query_argument");
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_argument_info_t"));
    if (kind != AXRT_ARGUMENT_KIND_INPUT && kind != AXRT_ARGUMENT_KIND_OUTPUT) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`kind` {} is not a known axrt_argument_kind_t", kind);
    }
    const auto& list = kind == AXRT_ARGUMENT_KIND_INPUT ? self->inputs : self->outputs;
    if (index >= list.size()) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "`index` {} is beyond the {} {}s of {}",
                       index, list.size(), kind_name(kind), self->label);
    }
    const ArgumentSignature& arg = list[index];
    axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
    info.name = arg.name.c_str();
    info.dtype = arg.dtype;
    info.rank = static_cast<uint32_t>(arg.dims.size());
    info.dims = arg.dims.data();
    info.dim_symbols = arg.dim_symbols.data();
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_function_query_symbol(axrt_function_t function, uint32_t index,
                                                  const char** out_name,
                                                  uint64_t* out_upper_bound) {
  static constexpr ApiCall api("axrt_function_query_symbol");
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_name, "out_name"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_upper_bound, "out_upper_bound"));
    if (index >= self->symbol_names.size()) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "`index` {} is beyond the {} symbols of {}",
                       index, self->symbol_names.size(), self->label);
    }
    *out_name = self->symbol_names[index].c_str();
    *out_upper_bound = self->symbol_bounds[index];
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_function_invoke(axrt_function_t function, axrt_stream_t stream,
                                            const axrt_tensor_t* inputs, size_t input_count,
                                            axrt_tensor_t* outputs, size_t output_count,
                                            const axrt_invoke_options_t* options) {
  static constexpr ApiCall api("axrt_function_invoke");
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    Stream* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &target));
    if (options) {
      AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_invoke_options_t",
                                                 sizeof(axrt_invoke_options_t)));
      axrt_invoke_options_t opts = AXRT_INVOKE_OPTIONS_INIT;
      AXRT_READ_FIELD(options, &opts, flags);
      if (opts.flags != 0) {
        return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED, "`options->flags` sets unknown bits {:#x}",
                         opts.flags);
      }
      Extensions ignored;
      AXRT_RETURN_IF_ERROR(api.read_extensions(options->next, "options", 0, &ignored));
    }
    Executable* exe = self->executable;
    if (target->device.get() != exe->device.get()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: {} belongs to {}, but the executable is loaded on {}", self->label,
                       target->describe(), target->device->id(), exe->device->id());
    }
    if (input_count != self->inputs.size() || output_count != self->outputs.size()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{} takes {} inputs and {} outputs; the call passes {} and {}", self->label,
                       self->inputs.size(), self->outputs.size(), input_count, output_count);
    }
    if (input_count > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(inputs, "inputs"));
    if (output_count > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(outputs, "outputs"));

    CallState call;
    call.function = self;
    call.executable = exe;
    std::fill_n(call.bound, self->symbol_names.size(), false);
    call.inputs.resize(input_count);
    for (size_t i = 0; i < input_count; ++i) {
      AXRT_RETURN_IF_ERROR(api.resolve(inputs[i], indexed_name("inputs", i), &call.inputs[i]));
      AXRT_RETURN_IF_ERROR(check_argument(api, &call, AXRT_ARGUMENT_KIND_INPUT, i, self->inputs[i],
                                          *call.inputs[i], true));
    }
    // Outputs: the caller's are checked against the shape the inputs imply;
    // the others are allocated once every check has passed.
    call.outputs.assign(output_count, nullptr);
    std::vector<std::vector<int64_t>> shapes(output_count);
    for (size_t o = 0; o < output_count; ++o) {
      const ArgumentSignature& arg = self->outputs[o];
      if (outputs[o] != nullptr) {
        AXRT_RETURN_IF_ERROR(api.resolve(outputs[o], indexed_name("outputs", o), &call.outputs[o]));
        AXRT_RETURN_IF_ERROR(check_argument(api, &call, AXRT_ARGUMENT_KIND_OUTPUT, o, arg,
                                            *call.outputs[o], false));
        continue;
      }
      if (!resolved_shape(arg, call, &shapes[o])) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: output {} ('{}') is {}, but no input binds its symbols; pass the "
                         "output tensor",
                         self->label, o, arg.name, self->describe_signature(arg));
      }
    }
    std::vector<Ref<Tensor>> allocated;
    auto batch = std::make_unique<CommandBatch>();
    batch->label = &self->label;
    batch->owner = Ref<Object>(exe);
    batch->last_duration_ns = &self->last_duration_ns;
    Device* device = exe->device.get();
    for (size_t o = 0; o < output_count; ++o) {
      if (call.outputs[o]) continue;
      const ArgumentSignature& arg = self->outputs[o];
      uint64_t count = 1;
      for (int64_t extent : shapes[o]) count *= static_cast<uint64_t>(extent);
      const uint64_t bytes = std::max<uint64_t>(1, dtype_bytes(arg.dtype, count));
      BufferParams params;
      params.alignment = device->properties.buffer_alignment;
      params.label = fmt::format("{} of {}", arg.name, self->label);
      Ref<Buffer> buffer;
      AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, bytes, std::move(params), &buffer));
      allocated.push_back(tensor_wrap(std::move(buffer), arg.dtype, shapes[o]));
      call.outputs[o] = allocated.back().get();
    }
    Ref<Buffer> arena;
    if (self->arena_size > 0) {
      BufferParams params;
      params.alignment = device->properties.buffer_alignment;
      params.label = fmt::format("arena of {}", self->label);
      AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, self->arena_size, std::move(params), &arena));
      call.arena = arena.get();
    }
    AXRT_RETURN_IF_ERROR(build_batch(api, call, batch.get()));
    batch->buffers.reserve(input_count + output_count + 1);
    for (Tensor* t : call.inputs) batch->buffers.emplace_back(t->buffer.get());
    for (Tensor* t : call.outputs) batch->buffers.emplace_back(t->buffer.get());
    if (arena) {
      // The batch owns the arena from here: the driver returns its memory
      // in stream order once the commands ran.
      arena->deallocated.store(true, std::memory_order_release);
      batch->arena = arena.get();
      batch->buffers.push_back(std::move(arena));
    }
    AXRT_RETURN_IF_ERROR(target->vtable->submit_batch(target, std::move(batch)));
    for (size_t o = 0, a = 0; o < output_count; ++o) {
      if (outputs[o] == nullptr) outputs[o] = to_handle<axrt_tensor_t>(allocated[a++].release());
    }
    return nullptr;
  });
}
