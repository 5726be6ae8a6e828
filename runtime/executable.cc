// Loading: verification (by the reader), then a pre-flight check of every
// kernel, launch and binding before anything is allocated or initialised,
// then library init, constants and the functions' command templates.
#include "runtime/executable.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "runtime/api.h"
#include "runtime/host_code.h"
#include "runtime/instance.h"
#include "runtime/tensor.h"

namespace axrt {
namespace {

using axe::AxeFile;
using axe::BindingKind;
using axe::CodeObjectKind;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

const char* code_object_kind_name(CodeObjectKind kind) {
  switch (kind) {
    case CodeObjectKind::CUDA_CUBIN: return "CUDA cubin";
    case CodeObjectKind::CUDA_FATBIN: return "CUDA fatbin";
    case CodeObjectKind::CUDA_PTX: return "CUDA PTX";
    case CodeObjectKind::HOST_SHARED_OBJECT: return "host shared object";
    case CodeObjectKind::KERNEL_LIBRARY: return "kernel library";
    default: return "unknown code object";
  }
}

// One implementation of a kernel: the primary fields or a variant.
struct Implementation {
  uint32_t code_object;
  const flatbuffers::String* entry_symbol;
  const axe::Dim3* workgroup_size;
  uint32_t dynamic_shared_memory;
  const axe::Dim3* cluster_dims;  // may be null
};

std::vector<Implementation> implementations_of(const axe::Kernel& kernel) {
  std::vector<Implementation> list;
  list.push_back({kernel.code_object(), kernel.entry_symbol(), kernel.workgroup_size(),
                  kernel.dynamic_shared_memory(), kernel.cluster_dims()});
  if (kernel.variants()) {
    for (const axe::KernelVariant* v : *kernel.variants()) {
      list.push_back({v->code_object(), v->entry_symbol() ? v->entry_symbol() : kernel.entry_symbol(),
                      v->workgroup_size(), v->dynamic_shared_memory(), v->cluster_dims()});
    }
  }
  return list;
}

// Evaluates an expression with no symbols (or returns false when it has).
bool fold_constant(const axe::Expr* expr, uint64_t* out, bool* overflow) {
  *overflow = false;
  for (const axe::ExprOp* op : *expr->ops()) {
    if (op->opcode() == axe::ExprOpcode::SYMBOL) return false;
  }
  axrt_status_t status = evaluate_value(ValueSource{expr, 0}, {}, {}, {}, "", out);
  if (status) {
    axrt_status_free(status);
    *overflow = true;
  }
  return true;
}

class Loader {
 public:
  Loader(Device* device, std::unique_ptr<AxeFile> file, const LoadParams& params)
      : device_(device), file_(std::move(file)), params_(params), meta_(file_->metadata()) {
    instance_ = device->instance;
    name_ = params.label.empty() ? file_->name() : params.label;
  }

  axrt_status_t load(Ref<Executable>* out) {
    // Pre-flight: nothing is allocated or initialised until every check
    // passed.
    AXRT_RETURN_IF_ERROR(resolve_kernels());
    AXRT_RETURN_IF_ERROR(check_dispatches());

    auto* exe = new Executable();
    Ref<Executable> ref = Ref<Executable>::adopt(exe);
    exe->destroy = destroy_executable;
    exe->device = Ref<Device>(device_);
    exe->name = name_;
    exe->kernels.resize(resolved_.size());
    std::unordered_map<const axrt_kernel_library_t*, void*> library_states;
    for (size_t i = 0; i < resolved_.size(); ++i) {
      Resolved& r = resolved_[i];
      LoadedKernel& k = exe->kernels[i];
      k.args_size = r.args_size;
      k.param_offsets = r.param_offsets;
      k.param_sizes = r.param_sizes;
      if (r.code) {
        k.code = r.code;
        k.device = r.device_kernel;
        k.device.name = fmt::format("kernel '{}' ({}:{})", str(meta_.kernels()->Get(i)->name()),
                                    code_object_kind_name(meta_.code_objects()->Get(r.impl.code_object)->kind()),
                                    str(r.impl.entry_symbol));
        continue;
      }
      // One acquisition per library and executable; its state serves every
      // kernel of the library.
      auto [held, first] = library_states.try_emplace(r.library->table, nullptr);
      if (first) {
        AXRT_RETURN_IF_ERROR(prefix(acquire_kernel_library(device_, *r.library, &held->second)));
        exe->acquired_libraries.push_back(r.library);
      }
      void* const state = held->second;
      k.library = r.library;
      k.host.function = r.info->function;
      k.host.library_state = state;
      k.host.workgroup_size = {r.impl.workgroup_size->x(), r.impl.workgroup_size->y(),
                               r.impl.workgroup_size->z()};
      k.host.dynamic_shared_memory = r.impl.dynamic_shared_memory;
      k.host.name = fmt::format("kernel '{}' ({}:{})", str(meta_.kernels()->Get(i)->name()),
                                r.library->name, r.info->name);
    }
    AXRT_RETURN_IF_ERROR(make_constants_resident(exe));
    exe->file = std::move(file_);
    AXRT_RETURN_IF_ERROR(compile_functions(exe));
    object_register(exe);
    for (auto& function : exe->functions) object_register(function.get());
    *out = std::move(ref);
    return nullptr;
  }

 private:
  struct Resolved {
    std::shared_ptr<KernelLibrary> library;  // host code, or
    std::shared_ptr<DeviceCode> code;        // device code
    DeviceKernel device_kernel;
    const axrt_kernel_info_t* info = nullptr;
    Implementation impl{};
    uint32_t args_size = 0;
    std::vector<uint32_t> param_offsets;
    std::vector<uint32_t> param_sizes;
  };

  static void destroy_executable(Object* object) {
    auto* exe = static_cast<Executable*>(object);
    for (auto& function : exe->functions) {
      if (function->handle) HandleTable::global().remove(function->handle);
    }
    for (const auto& library : exe->acquired_libraries) {
      release_kernel_library(exe->device.get(), *library);
    }
    delete exe;
  }

  std::string what() const { return fmt::format("executable '{}'", name_); }

  // Puts "executable 'x': " in front of a status from elsewhere.
  axrt_status_t prefix(axrt_status_t status) const {
    if (!status) return nullptr;
    StatusPtr owned(status);
    return make_status(axrt_status_code(status), "{}: {}", what(), axrt_status_message(status));
  }

  bool device_runs_host_code() const { return device_->properties.type == AXRT_DEVICE_TYPE_CPU; }

  // The library a code object provides on this device, or a reason why it
  // provides none (`*out_unusable` true: the device cannot use this kind).
  axrt_status_t library_for(uint32_t index, std::shared_ptr<KernelLibrary>* out,
                            bool* out_unusable) {
    *out_unusable = false;
    auto cached = libraries_.find(index);
    if (cached != libraries_.end()) {
      *out = cached->second;
      return nullptr;
    }
    const axe::CodeObject& co = *meta_.code_objects()->Get(index);
    const std::string target = str(co.target());
    switch (co.kind()) {
      case CodeObjectKind::KERNEL_LIBRARY: {
        // A library for another target (a GPU's) is not for this device.
        if (!device_runs_host_code() || target != host_architecture()) break;
        const std::string name = str(co.library_name());
        auto library = find_kernel_library(instance_, name);
        if (!library) {
          return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                             "code object {} names kernel library '{}', which is not registered "
                             "(registered: {})",
                             index, name, kernel_library_names(instance_));
        }
        if (library->version < co.library_min_version()) {
          return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                             "code object {} needs kernel library '{}' version {} or later; "
                             "version {} is registered",
                             index, name, co.library_min_version(), library->version);
        }
        libraries_[index] = library;
        *out = std::move(library);
        return nullptr;
      }
      case CodeObjectKind::HOST_SHARED_OBJECT: {
        if (!device_runs_host_code()) break;
        if (target != host_architecture()) {
          return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                             "code object {} is a host shared object for {}; this host is {}",
                             index, target, host_architecture());
        }
        if (!(params_.flags & AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE)) {
          return make_status(AXRT_STATUS_CODE_PERMISSION_DENIED,
                             "code object {} is native host code, which this load does not "
                             "allow (AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE)",
                             index);
        }
        std::shared_ptr<KernelLibrary> library;
        AXRT_RETURN_IF_ERROR(load_host_code_library(
            file_->segment_bytes(static_cast<uint32_t>(co.segment())),
            fmt::format("host code object {}", index), &library));
        libraries_[index] = library;
        *out = std::move(library);
        return nullptr;
      }
      case CodeObjectKind::CUDA_CUBIN:
      case CodeObjectKind::CUDA_FATBIN:
      case CodeObjectKind::CUDA_PTX:
        break;  // device code: code_for()
      default:
        break;
    }
    *out_unusable = true;
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED, "code object {} is a {} for {}, which {} cannot run",
                       index, code_object_kind_name(co.kind()), target, device_->id());
  }

  // The device code a code object holds for this device, loaded once per
  // load, or a reason why there is none (`*out_unusable`: the device cannot
  // run it, another implementation may do).
  axrt_status_t code_for(uint32_t index, std::shared_ptr<DeviceCode>* out, bool* out_unusable) {
    *out_unusable = false;
    auto cached = codes_.find(index);
    if (cached != codes_.end()) {
      *out = cached->second;
      return nullptr;
    }
    const axe::CodeObject& co = *meta_.code_objects()->Get(index);
    DeviceCodeKind kind;
    switch (co.kind()) {
      case CodeObjectKind::CUDA_CUBIN: kind = DeviceCodeKind::kCudaCubin; break;
      case CodeObjectKind::CUDA_FATBIN: kind = DeviceCodeKind::kCudaFatbin; break;
      case CodeObjectKind::CUDA_PTX: kind = DeviceCodeKind::kCudaPtx; break;
      default: return nullptr;  // not device code
    }
    const std::string target = str(co.target());
    if (!device_->vtable->load_code || device_->properties.type != AXRT_DEVICE_TYPE_CUDA) {
      *out_unusable = true;
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "code object {} is a {} for {}, which {} cannot run", index,
                         code_object_kind_name(co.kind()), target, device_->id());
    }
    std::shared_ptr<DeviceCode> code;
    const auto image = file_->segment_bytes(static_cast<uint32_t>(co.segment()));
    axrt_status_t status = device_->vtable->load_code(
        device_, kind, target, std::as_bytes(image), &code);
    if (status) {
      *out_unusable = axrt_status_code(status) == AXRT_STATUS_CODE_UNIMPLEMENTED;
      StatusPtr owned(status);
      return make_status(axrt_status_code(status), "code object {}: {}", index,
                         axrt_status_message(status));
    }
    codes_[index] = code;
    *out = std::move(code);
    return nullptr;
  }

  static bool is_device_code(CodeObjectKind kind) {
    return kind == CodeObjectKind::CUDA_CUBIN || kind == CodeObjectKind::CUDA_FATBIN ||
           kind == CodeObjectKind::CUDA_PTX;
  }

  // Finds and checks `impl` in device code.
  axrt_status_t resolve_device_kernel(const axe::Kernel& kernel, const std::string& kname,
                                      const Implementation& impl, Resolved* r, bool* out_unusable) {
    std::shared_ptr<DeviceCode> code;
    AXRT_RETURN_IF_ERROR(code_for(impl.code_object, &code, out_unusable));
    AXRT_RETURN_IF_ERROR(check_launch(kname, impl));
    Resolved candidate;
    candidate.impl = impl;
    lay_out(kernel, &candidate);
    DeviceKernelRequest request;
    request.symbol = impl.entry_symbol ? impl.entry_symbol->string_view() : std::string_view();
    request.param_offsets = candidate.param_offsets;
    request.param_sizes = candidate.param_sizes;
    request.args_size = candidate.args_size;
    request.workgroup_size = {impl.workgroup_size->x(), impl.workgroup_size->y(),
                              impl.workgroup_size->z()};
    if (impl.cluster_dims) {
      request.cluster_dims = {impl.cluster_dims->x(), impl.cluster_dims->y(),
                              impl.cluster_dims->z()};
    }
    request.dynamic_shared_memory = impl.dynamic_shared_memory;
    AXRT_RETURN_IF_ERROR(code->get_kernel(request, &candidate.device_kernel));
    candidate.code = std::move(code);
    *r = std::move(candidate);
    return nullptr;
  }

  // Compares the executable's parameter table with the library's.
  axrt_status_t match_params(const axe::Kernel& kernel, const axrt_kernel_info_t& info,
                             const KernelLibrary& library) const {
    const auto* params = kernel.params();
    const uint32_t count = params ? params->size() : 0;
    const std::string who = fmt::format("'{}' in kernel library '{}'", info.name, library.name);
    if (count != info.param_count) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "the executable declares {} parameters, but {} takes {}", count, who,
                         info.param_count);
    }
    for (uint32_t p = 0; p < count; ++p) {
      const axe::KernelParam& param = *params->Get(p);
      const axrt_kernel_param_info_t& expected = info.params[p];
      const std::string pname = str(param.name());
      const auto kind = static_cast<axrt_kernel_param_kind_t>(param.kind());
      if (kind != expected.kind) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "parameter {} ('{}') is a {}, but {} takes a {} there", p, pname,
                           kind == AXRT_KERNEL_PARAM_KIND_BUFFER ? "buffer" : "scalar", who,
                           expected.kind == AXRT_KERNEL_PARAM_KIND_BUFFER ? "buffer" : "scalar");
      }
      if (kind == AXRT_KERNEL_PARAM_KIND_SCALAR &&
          static_cast<axrt_dtype_t>(param.scalar_type()) != expected.scalar_type) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "parameter {} ('{}') is a {} scalar, but {} takes a {} scalar", p, pname,
                           dtype_name(static_cast<axrt_dtype_t>(param.scalar_type())), who,
                           dtype_name(expected.scalar_type));
      }
      if (kind != AXRT_KERNEL_PARAM_KIND_BUFFER) continue;
      const std::string declared = param.layout() ? str(param.layout()->layout_id()) : "";
      const std::string wanted = expected.layout_id ? expected.layout_id : "";
      if (declared != wanted) {
        if (wanted.empty()) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "parameter {} ('{}') declares quantization layout '{}', but {} reads "
                             "plain data there",
                             p, pname, declared, who);
        }
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "parameter {} ('{}') {}, but {} reads layout '{}' there", p, pname,
                           declared.empty() ? "declares no quantization layout"
                                            : fmt::format("declares layout '{}'", declared),
                           who, wanted);
      }
    }
    return nullptr;
  }

  axrt_status_t check_launch(const std::string& kname, const Implementation& impl) const {
    const axrt_device_properties_t& p = device_->properties;
    const axe::Dim3& wg = *impl.workgroup_size;
    const uint32_t size[3] = {wg.x(), wg.y(), wg.z()};
    uint64_t invocations = 1;
    for (int d = 0; d < 3; ++d) {
      if (size[d] > p.max_workgroup_size[d]) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "kernel '{}': workgroup size ({}, {}, {}) exceeds {}'s limit ({}, {}, "
                           "{})",
                           kname, size[0], size[1], size[2], device_->id(), p.max_workgroup_size[0],
                           p.max_workgroup_size[1], p.max_workgroup_size[2]);
      }
      invocations *= size[d];
    }
    if (invocations > p.max_workgroup_invocations) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "kernel '{}': a workgroup of {} invocations exceeds {}'s limit of {}",
                         kname, invocations, device_->id(), p.max_workgroup_invocations);
    }
    if (impl.dynamic_shared_memory > p.max_shared_memory_per_workgroup) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "kernel '{}': {} bytes of dynamic shared memory exceed {}'s limit of {}",
                         kname, impl.dynamic_shared_memory, device_->id(),
                         p.max_shared_memory_per_workgroup);
    }
    return nullptr;
  }

  axrt_status_t resolve_kernels() {
    const auto* kernels = meta_.kernels();
    const uint32_t count = kernels ? kernels->size() : 0;
    resolved_.resize(count);
    for (uint32_t k = 0; k < count; ++k) {
      const axe::Kernel& kernel = *kernels->Get(k);
      const std::string kname = str(kernel.name());
      std::vector<std::string> reasons;
      bool found = false;
      axrt_status_code_t code = AXRT_STATUS_CODE_UNIMPLEMENTED;
      for (const Implementation& impl : implementations_of(kernel)) {
        std::shared_ptr<KernelLibrary> library;
        bool unusable = false;
        const CodeObjectKind kind = meta_.code_objects()->Get(impl.code_object)->kind();
        if (is_device_code(kind)) {
          axrt_status_t status = resolve_device_kernel(kernel, kname, impl, &resolved_[k], &unusable);
          if (!status) {
            found = true;
            break;
          }
          StatusPtr owned(status);
          if (!unusable || code == AXRT_STATUS_CODE_UNIMPLEMENTED) code = axrt_status_code(status);
          reasons.push_back(axrt_status_message(status));
          continue;
        }
        axrt_status_t status = library_for(impl.code_object, &library, &unusable);
        if (!status) {
          const std::string symbol = str(impl.entry_symbol);
          const axrt_kernel_info_t* info = library->find(symbol);
          if (!info) {
            status = make_status(AXRT_STATUS_CODE_NOT_FOUND,
                                 "kernel library '{}' ({}) has no kernel '{}'", library->name,
                                 library->origin, symbol);
          } else {
            status = match_params(kernel, *info, *library);
            if (!status) status = check_launch(kname, impl);
            if (!status) {
              Resolved& r = resolved_[k];
              r.library = library;
              r.info = info;
              r.impl = impl;
              lay_out(kernel, &r);
              found = true;
              break;
            }
          }
        }
        StatusPtr owned(status);
        // A code object the device cannot use at all yields to a more
        // telling reason from another implementation.
        if (!unusable || code == AXRT_STATUS_CODE_UNIMPLEMENTED) code = axrt_status_code(status);
        reasons.push_back(axrt_status_message(status));
      }
      if (!found) {
        if (reasons.size() == 1) {
          return make_status(code, "{}: kernel '{}': {}", what(), kname, reasons[0]);
        }
        return make_status(code, "{}: kernel '{}' has no implementation for {}: {}", what(), kname,
                           device_->id(), fmt::join(reasons, "; "));
      }
    }
    return nullptr;
  }

  static void lay_out(const axe::Kernel& kernel, Resolved* r) {
    if (kernel.params()) {
      for (const axe::KernelParam* param : *kernel.params()) {
        r->param_sizes.push_back(
            param->kind() == axe::ParamKind::BUFFER
                ? 8
                : axrt_kernel_scalar_size(static_cast<uint32_t>(param->scalar_type())));
      }
    }
    r->args_size = lay_out_kernel_args(r->param_sizes, &r->param_offsets);
  }

  // Literal workgroup counts are checked against the device's limits now;
  // the others at every call.
  axrt_status_t check_dispatches() const {
    if (!meta_.functions()) return nullptr;
    const axrt_device_properties_t& p = device_->properties;
    for (const axe::Function* function : *meta_.functions()) {
      if (!function->commands()) continue;
      for (uint32_t c = 0; c < function->commands()->size(); ++c) {
        if (function->commands_type()->Get(c) != axe::Command::DispatchCommand) continue;
        const auto* dispatch = function->commands()->GetAs<axe::DispatchCommand>(c);
        const axe::Expr* counts[3] = {dispatch->workgroup_count_x(), dispatch->workgroup_count_y(),
                                      dispatch->workgroup_count_z()};
        for (int d = 0; d < 3; ++d) {
          if (!counts[d]) continue;
          uint64_t value = 0;
          bool overflow = false;
          if (!fold_constant(counts[d], &value, &overflow)) continue;
          if (overflow || value > p.max_workgroup_count[d]) {
            return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                               "{}: function '{}' command {} dispatches {} workgroups along {}, "
                               "beyond {}'s limit of {}",
                               what(), str(function->name()), c,
                               overflow ? std::string("an overflowing number of")
                                        : std::to_string(value),
                               "xyz"[d], device_->id(), p.max_workgroup_count[d]);
          }
        }
      }
    }
    return nullptr;
  }

  axrt_status_t make_constants_resident(Executable* exe) {
    const auto* constants = meta_.constants();
    const uint32_t count = constants ? constants->size() : 0;
    exe->constants.resize(count);
    if (count == 0) return nullptr;
    if (!device_runs_host_code()) return upload_constants(exe);
    // The CPU device reads constants where the file is mapped: one external
    // buffer over the file, a view per constant. The buffer keeps the
    // storage alive.
    const auto bytes = file_->file_bytes();
    auto* keep = new std::shared_ptr<const axe::Storage>(file_->storage());
    auto* base = const_cast<std::byte*>(reinterpret_cast<const std::byte*>(bytes.data()));
    Ref<Buffer> file_buffer = buffer_wrap_external(
        device_, base, reinterpret_cast<uintptr_t>(base), bytes.size(),
        AXRT_MEMORY_TYPE_DEVICE_LOCAL, name_,
        [](void* context) { delete static_cast<std::shared_ptr<const axe::Storage>*>(context); },
        keep);
    for (uint32_t i = 0; i < count; ++i) {
      const axe::Constant& constant = *constants->Get(i);
      const auto data = file_->range_bytes(*constant.data());
      exe->constants[i].buffer =
          buffer_create_view(file_buffer.get(), static_cast<uint64_t>(data.data() - bytes.data()),
                             data.size(), str(constant.name()));
    }
    return nullptr;
  }

  // Devices that do not read host memory get one buffer holding every
  // constant, each at its alignment (at least the device's), filled from the
  // mapped file through a stream of their own.
  axrt_status_t upload_constants(Executable* exe) {
    const auto* constants = meta_.constants();
    const uint32_t count = constants->size();
    const uint64_t base_alignment = device_->properties.buffer_alignment;
    std::vector<uint64_t> offsets(count);
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const axe::Constant& constant = *constants->Get(i);
      const uint64_t alignment = std::max<uint64_t>(constant.alignment(), base_alignment);
      total = (total + alignment - 1) & ~(alignment - 1);
      offsets[i] = total;
      total += file_->range_bytes(*constant.data()).size();
    }
    static constexpr ApiCall api("axrt_executable_load");
    BufferParams params;
    params.alignment = base_alignment;
    params.label = fmt::format("constants of {}", name_);
    Ref<Buffer> buffer;
    AXRT_RETURN_IF_ERROR(prefix(buffer_allocate(api, device_, std::max<uint64_t>(total, 1),
                                                std::move(params), &buffer)));
    Stream* raw_stream = nullptr;
    AXRT_RETURN_IF_ERROR(prefix(device_->vtable->create_stream(device_, &raw_stream)));
    auto stream = Ref<Stream>::adopt(raw_stream);
    stream->device = Ref<Device>(device_);
    stream->label = fmt::format("upload of {}", name_);
    for (uint32_t i = 0; i < count; ++i) {
      const axe::Constant& constant = *constants->Get(i);
      const auto data = file_->range_bytes(*constant.data());
      exe->constants[i].buffer =
          buffer_create_view(buffer.get(), offsets[i], data.size(), str(constant.name()));
      if (data.empty()) continue;
      CopyCommand copy;
      copy.src.host = const_cast<std::byte*>(reinterpret_cast<const std::byte*>(data.data()));
      copy.dst.buffer = buffer.get();
      copy.dst.offset = offsets[i];
      copy.width = data.size();
      copy.height = 1;
      AXRT_RETURN_IF_ERROR(prefix(stream->vtable->copy(stream.get(), copy)));
    }
    return prefix(stream->vtable->synchronize(stream.get()));
  }

  static ArgumentSignature signature_of(const axe::TensorSig& sig) {
    ArgumentSignature arg;
    arg.name = str(sig.name());
    arg.dtype = static_cast<axrt_dtype_t>(sig.dtype());
    if (sig.shape()) {
      for (const axe::Dim* dim : *sig.shape()) {
        const bool symbolic = dim->symbol() >= 0;
        arg.dims.push_back(symbolic ? -1 : static_cast<int64_t>(dim->value()));
        arg.dim_symbols.push_back(symbolic ? dim->symbol() : -1);
      }
    }
    return arg;
  }

  static ValueSource value_of(const axe::Expr* expr, uint64_t absent) {
    if (!expr) return ValueSource{nullptr, absent};
    uint64_t value = 0;
    bool overflow = false;
    if (fold_constant(expr, &value, &overflow) && !overflow) return ValueSource{nullptr, value};
    return ValueSource{expr, 0};  // symbolic, or failing: evaluated per call
  }

  static BufferSource buffer_of(const axe::Binding& binding) {
    BufferSource source;
    source.kind = binding.kind();
    source.index = binding.index();
    source.offset = binding.offset();
    source.size = binding.size();
    return source;
  }

  axrt_status_t compile_functions(Executable* exe) {
    const auto* functions = meta_.functions();
    if (!functions) return nullptr;
    for (const axe::Function* fb : *functions) {
      auto function = std::make_unique<Function>();
      Function& f = *function;
      f.executable = exe;
      f.owner = exe;
      f.destroy = nullptr;
      f.name = str(fb->name());
      f.label = fmt::format("function '{}' of executable '{}'", f.name, name_);
      if (fb->symbols() && fb->symbols()->size() > kMaxSymbols) {
        return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                           "{}: function '{}' has {} symbolic dimensions; this runtime binds at "
                           "most {}",
                           what(), f.name, fb->symbols()->size(), kMaxSymbols);
      }
      if (fb->symbols()) {
        for (const axe::Symbol* symbol : *fb->symbols()) {
          f.symbol_names.push_back(str(symbol->name()));
          f.symbol_bounds.push_back(symbol->upper_bound());
        }
      }
      if (fb->inputs()) {
        for (const axe::TensorSig* sig : *fb->inputs()) f.inputs.push_back(signature_of(*sig));
      }
      if (fb->outputs()) {
        for (const axe::TensorSig* sig : *fb->outputs()) f.outputs.push_back(signature_of(*sig));
      }
      f.arena_size = fb->arena_size();
      const uint32_t command_count = fb->commands() ? fb->commands()->size() : 0;
      for (uint32_t c = 0; c < command_count; ++c) {
        CompiledCommand command;
        switch (fb->commands_type()->Get(c)) {
          case axe::Command::DispatchCommand:
            compile_dispatch(exe, *fb->commands()->GetAs<axe::DispatchCommand>(c), &command);
            f.args_words += (exe->kernels[command.kernel].args_size + 7) / 8;
            break;
          case axe::Command::CopyCommand: {
            const auto& copy = *fb->commands()->GetAs<axe::CopyCommand>(c);
            command.kind = BatchCommand::Kind::kCopy;
            command.src = buffer_of(*copy.src());
            command.dst = buffer_of(*copy.dst());
            command.src_offset = value_of(copy.src_offset(), 0);
            command.dst_offset = value_of(copy.dst_offset(), 0);
            command.length = value_of(copy.length(), 0);
            break;
          }
          case axe::Command::FillCommand: {
            const auto& fill = *fb->commands()->GetAs<axe::FillCommand>(c);
            command.kind = BatchCommand::Kind::kFill;
            command.dst = buffer_of(*fill.target());
            command.dst_offset = value_of(fill.offset(), 0);
            command.length = value_of(fill.length(), 0);
            command.pattern = fill.pattern();
            command.pattern_size = fill.pattern_size();
            break;
          }
          default:  // the reader refuses unknown commands
            return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: unknown command type", f.label);
        }
        f.commands.push_back(std::move(command));
      }
      exe->functions.push_back(std::move(function));
    }
    return nullptr;
  }

  void compile_dispatch(Executable* exe, const axe::DispatchCommand& dispatch,
                        CompiledCommand* out) const {
    out->kind = BatchCommand::Kind::kDispatch;
    out->kernel = dispatch.kernel();
    const LoadedKernel& kernel = exe->kernels[out->kernel];
    const axe::Kernel& fk = *meta_.kernels()->Get(out->kernel);
    out->workgroup_count[0] = value_of(dispatch.workgroup_count_x(), 1);
    out->workgroup_count[1] = value_of(dispatch.workgroup_count_y(), 1);
    out->workgroup_count[2] = value_of(dispatch.workgroup_count_z(), 1);
    out->args_template.assign((kernel.args_size + 7) / 8, 0);
    auto* block = reinterpret_cast<std::byte*>(out->args_template.data());
    const auto* bindings = dispatch.bindings();
    for (uint32_t p = 0; p < kernel.param_offsets.size(); ++p) {
      const axe::Binding& binding = *bindings->Get(p);
      const axe::KernelParam& param = *fk.params()->Get(p);
      ArgumentPatch patch;
      patch.offset = kernel.param_offsets[p];
      patch.size = kernel.param_sizes[p];
      if (param.kind() == axe::ParamKind::BUFFER) {
        if (binding.kind() == BindingKind::CONSTANT) {
          const uint64_t address = exe->constants[binding.index()].buffer->device_address(
              exe->constants[binding.index()].buffer->offset);
          std::memcpy(block + patch.offset, &address, 8);
          continue;
        }
        patch.is_buffer = true;
        patch.buffer = buffer_of(binding);
      } else {
        patch.scalar_type = static_cast<axrt_dtype_t>(param.scalar_type());
        patch.value = value_of(binding.value(), 0);
        if (!patch.value.expr && encode_scalar_argument(patch, patch.value.literal, block)) continue;
        // Literals that do not fit fail every call with the reason.
        patch.value.expr = binding.value();
      }
      out->patches.push_back(patch);
    }
  }

 private:
  Device* device_;
  Instance* instance_;
  std::unique_ptr<AxeFile> file_;
  const LoadParams& params_;
  const axe::Executable& meta_;
  std::string name_;
  std::unordered_map<uint32_t, std::shared_ptr<KernelLibrary>> libraries_;
  std::unordered_map<uint32_t, std::shared_ptr<DeviceCode>> codes_;
  std::vector<Resolved> resolved_;
};

}  // namespace

bool encode_scalar_argument(const ArgumentPatch& patch, uint64_t value, std::byte* block) {
  switch (patch.scalar_type) {
    case AXRT_DTYPE_BOOL: if (value > 1) return false; break;
    case AXRT_DTYPE_INT8: if (value > 0x7f) return false; break;
    case AXRT_DTYPE_UINT8: if (value > 0xff) return false; break;
    case AXRT_DTYPE_INT16: if (value > 0x7fff) return false; break;
    case AXRT_DTYPE_UINT16: if (value > 0xffff) return false; break;
    case AXRT_DTYPE_INT32: if (value > 0x7fffffff) return false; break;
    case AXRT_DTYPE_UINT32: if (value > 0xffffffffu) return false; break;
    case AXRT_DTYPE_INT64: if (value > 0x7fffffffffffffffull) return false; break;
    default: break;  // unsigned 64-bit and floating point: raw bytes
  }
  std::memcpy(block + patch.offset, &value, patch.size);  // little-endian
  return true;
}

axrt_status_t load_executable(Device* device, std::unique_ptr<axe::AxeFile> file,
                              const LoadParams& params, Ref<Executable>* out) {
  Loader loader(device, std::move(file), params);
  return loader.load(out);
}

std::string Function::describe_signature(const ArgumentSignature& arg) const {
  std::vector<std::string> dims;
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    if (arg.dim_symbols[d] >= 0) {
      const auto s = static_cast<size_t>(arg.dim_symbols[d]);
      dims.push_back(fmt::format("{}<={}", symbol_names[s], symbol_bounds[s]));
    } else {
      dims.push_back(std::to_string(arg.dims[d]));
    }
  }
  return fmt::format("{}[{}]", dtype_name(arg.dtype), fmt::join(dims, ", "));
}

}  // namespace axrt
