// The C entry points of executables and functions: loading (options, the
// reader, then the loader), queries, and axrt_function_invoke, which checks
// what it can without the signature and hands the call to invoke.cc.
#include <fmt/ranges.h>

#include <string_view>
#include <vector>

#include "runtime/api.h"
#include "runtime/call.h"
#include "runtime/executable.h"
#include "trace/trace.h"

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
      api.prefix(load_executable(device, std::move(file), params, &executable)));
  *out_executable = to_handle<axrt_executable_t>(executable.release());
  return nullptr;
}

// Writes a metadata entry's value; the verifier allows an absent one, which reads as "".
void write_metadata_value(const axe::KeyValue& entry, const char** out_value,
                          size_t* out_value_size) {
  const auto* value = entry.value();
  *out_value = value == nullptr ? "" : value->c_str();
  if (out_value_size != nullptr) *out_value_size = value == nullptr ? 0 : value->size();
}

}  // namespace

extern "C" {

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
        api.prefix(hint_host_code(axe::AxeFile::open_file(path, read_options_for(params), &file))));
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
    AXRT_RETURN_IF_ERROR(api.prefix(hint_host_code(axe::AxeFile::open_bytes({static_cast<const uint8_t*>(data), size},
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

AXRT_API axrt_status_t axrt_executable_get_metadata(axrt_executable_t executable, uint32_t index,
                                                    const char** out_key,
                                                    const char** out_value,
                                                    size_t* out_value_size) {
  static constexpr ApiCall api("axrt_executable_get_metadata");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_key, "out_key"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_value, "out_value"));
    const auto* entries = self->file->metadata().metadata();
    const uint32_t count = entries == nullptr ? 0 : entries->size();
    if (index >= count) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "metadata entry {} is out of range: {} has {} entries", index,
                       self->describe(), count);
    }
    const auto* entry = entries->Get(index);
    // The verifier requires a non-empty key; a value may be absent.
    *out_key = entry->key()->c_str();
    write_metadata_value(*entry, out_value, out_value_size);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_executable_find_metadata(axrt_executable_t executable,
                                                     const char* key, const char** out_value,
                                                     size_t* out_value_size) {
  static constexpr ApiCall api("axrt_executable_find_metadata");
  return guard(api.function(), [&]() -> axrt_status_t {
    Executable* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(executable, "executable", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(key, "key"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_value, "out_value"));
    const auto* entries = self->file->metadata().metadata();
    if (entries != nullptr) {
      for (const auto* entry : *entries) {
        if (entry->key()->string_view() != key) continue;
        write_metadata_value(*entry, out_value, out_value_size);
        return nullptr;
      }
    }
    return api.error(AXRT_STATUS_CODE_NOT_FOUND, "{} has no metadata entry '{}'",
                     self->describe(), key);
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
    info.channel_count = static_cast<uint32_t>(self->channels.size());
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_function_query_channel(axrt_function_t function, uint32_t index,
                                                   const char** out_name, uint32_t* out_size) {
  static constexpr ApiCall api("axrt_function_query_channel");
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_name, "out_name"));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_size, "out_size"));
    if (index >= self->channels.size()) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "{} has {} channel(s); `index` is {}",
                       self->label, self->channels.size(), index);
    }
    *out_name = self->channels[index].first.c_str();
    *out_size = self->channels[index].second;
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
                       index, list.size(), argument_kind_name(kind), self->label);
    }
    const ArgumentSignature& arg = list[index];
    axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
    info.name = arg.name.c_str();
    info.dtype = arg.dtype;
    info.rank = static_cast<uint32_t>(arg.dims.size());
    info.dims = arg.dims.data();
    info.dim_symbols = arg.dim_symbols.data();
    info.flags = arg.is_mutable ? AXRT_ARGUMENT_FLAG_MUTABLE : 0;
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
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Function* self = nullptr;
    Stream* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    trace_scope.set_detail(self->trace_name);
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &target));
    axrt_invoke_options_t opts = AXRT_INVOKE_OPTIONS_INIT;
    if (options) {
      AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_invoke_options_t",
                                                 sizeof(axrt_invoke_options_t)));
      AXRT_READ_FIELD(options, &opts, flags);
      AXRT_READ_FIELD(options, &opts, dump_directory);
      AXRT_READ_FIELD(options, &opts, channels);
      AXRT_READ_FIELD(options, &opts, channel_count);
      if (opts.channel_count > 0) {
        AXRT_RETURN_IF_ERROR(api.require_pointer(opts.channels, "options->channels"));
      }
      constexpr uint32_t kKnownFlags = AXRT_INVOKE_FLAG_CHECK_FINITE | AXRT_INVOKE_FLAG_DUMP;
      if (opts.flags & ~kKnownFlags) {
        return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED, "`options->flags` sets unknown bits {:#x}",
                         opts.flags & ~kKnownFlags);
      }
      const bool dump = (opts.flags & AXRT_INVOKE_FLAG_DUMP) != 0;
      if (dump && !opts.dump_directory) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`options->flags` sets AXRT_INVOKE_FLAG_DUMP but "
                         "`options->dump_directory` is NULL{}",
                         options->struct_size < sizeof(axrt_invoke_options_t)
                             ? fmt::format(" (`options->struct_size` {} ends before it)",
                                           options->struct_size)
                             : std::string());
      }
      if (!dump && opts.dump_directory) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "`options->dump_directory` is set, but `options->flags` lacks "
                         "AXRT_INVOKE_FLAG_DUMP");
      }
      Extensions ignored;
      AXRT_RETURN_IF_ERROR(api.read_extensions(options->next, "options", 0, &ignored));
    }
    const Executable* exe = self->executable;
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

    const std::span<const axrt_invoke_channel_t> channels(opts.channels, opts.channel_count);
    if (debug_calls_requested(opts.flags)) [[unlikely]] {
      CallDebug debug;
      AXRT_RETURN_IF_ERROR(prepare_call_debug(api, opts.flags, opts.dump_directory, &debug));
      if (debug.active()) {
        return invoke_function(api, self, target, inputs, outputs, &debug, channels);
      }
    }
    return invoke_function(api, self, target, inputs, outputs, nullptr, channels);
  });
}

}  // extern "C"
