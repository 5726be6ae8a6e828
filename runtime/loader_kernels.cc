// Loading kernels. Pre-flight picks, for each kernel, the first
// implementation (primary, then the format 1.1 variants) the device can
// run: a registered kernel library of the host's architecture or an
// embedded host shared object for host devices, device code the driver
// loads for the others; each checked against the library's parameter table
// and the device's limits. A refusal names the kernel and every reason.
// Residency initialises each library on the device once for the executable.
#include <fmt/ranges.h>

#include <unordered_map>

#include "runtime/host_code.h"
#include "runtime/instance.h"
#include "runtime/loader.h"
#include "runtime/tensor.h"
#include "trace/trace.h"

namespace axrt {
namespace {

using axe::CodeObjectKind;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

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

// Finds and checks an implementation per kernel, loading each code object
// (a host library or device code) once.
class KernelResolver {
 public:
  explicit KernelResolver(const LoadContext& ctx) : ctx_(ctx) {}

  axrt_status_t resolve_kernels(std::vector<ResolvedKernel>* out);

 private:
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
    const axe::CodeObject& co = *ctx_.meta.code_objects()->Get(index);
    const std::string target = str(co.target());
    switch (co.kind()) {
      case CodeObjectKind::KERNEL_LIBRARY: {
        // A library for another target (a GPU's) is not for this device.
        if (!ctx_.device_runs_host_code() || target != host_architecture()) break;
        const std::string name = str(co.library_name());
        auto library = find_kernel_library(ctx_.instance, name);
        if (!library) {
          return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                             "code object {} names kernel library '{}', which is not registered "
                             "(registered: {})",
                             index, name, kernel_library_names(ctx_.instance));
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
        if (!ctx_.device_runs_host_code()) break;
        if (target != host_architecture()) {
          return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                             "code object {} is a host shared object for {}; this host is {}",
                             index, target, host_architecture());
        }
        if (!(ctx_.params.flags & AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE)) {
          return make_status(AXRT_STATUS_CODE_PERMISSION_DENIED,
                             "code object {} is native host code, which this load does not "
                             "allow (AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE)",
                             index);
        }
        std::shared_ptr<KernelLibrary> library;
        AXRT_RETURN_IF_ERROR(load_host_code_library(
            ctx_.file.segment_bytes(static_cast<uint32_t>(co.segment())),
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
                       index, code_object_kind_name(co.kind()), target, ctx_.device->id());
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
    const axe::CodeObject& co = *ctx_.meta.code_objects()->Get(index);
    DeviceCodeKind kind;
    switch (co.kind()) {
      case CodeObjectKind::CUDA_CUBIN: kind = DeviceCodeKind::kCudaCubin; break;
      case CodeObjectKind::CUDA_FATBIN: kind = DeviceCodeKind::kCudaFatbin; break;
      case CodeObjectKind::CUDA_PTX: kind = DeviceCodeKind::kCudaPtx; break;
      default: return nullptr;  // not device code
    }
    const std::string target = str(co.target());
    if (!ctx_.device->vtable->load_code || ctx_.device->properties.type != AXRT_DEVICE_TYPE_CUDA) {
      *out_unusable = true;
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "code object {} is a {} for {}, which {} cannot run", index,
                         code_object_kind_name(co.kind()), target, ctx_.device->id());
    }
    std::shared_ptr<DeviceCode> code;
    const auto image = ctx_.file.segment_bytes(static_cast<uint32_t>(co.segment()));
    axrt_status_t status = ctx_.device->vtable->load_code(
        ctx_.device, kind, target, std::as_bytes(image), &code);
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
                                      const Implementation& impl, ResolvedKernel* r, bool* out_unusable) {
    std::shared_ptr<DeviceCode> code;
    AXRT_RETURN_IF_ERROR(code_for(impl.code_object, &code, out_unusable));
    AXRT_RETURN_IF_ERROR(check_launch(kname, impl));
    ResolvedKernel candidate;
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
    if (axrt_status_t status = code->get_kernel(request, &candidate.device_kernel)) {
      // A lazily loading driver reports a broken image here, at the first
      // kernel looked up, rather than at load: name the code object too.
      StatusPtr owned(status);
      return make_status(axrt_status_code(status), "code object {}: {}", impl.code_object,
                         axrt_status_message(status));
    }
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
    const axrt_device_properties_t& p = ctx_.device->properties;
    const axe::Dim3& wg = *impl.workgroup_size;
    const uint32_t size[3] = {wg.x(), wg.y(), wg.z()};
    uint64_t invocations = 1;
    for (int d = 0; d < 3; ++d) {
      if (size[d] > p.max_workgroup_size[d]) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "kernel '{}': workgroup size ({}, {}, {}) exceeds {}'s limit ({}, {}, "
                           "{})",
                           kname, size[0], size[1], size[2], ctx_.device->id(), p.max_workgroup_size[0],
                           p.max_workgroup_size[1], p.max_workgroup_size[2]);
      }
      invocations *= size[d];
    }
    if (invocations > p.max_workgroup_invocations) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "kernel '{}': a workgroup of {} invocations exceeds {}'s limit of {}",
                         kname, invocations, ctx_.device->id(), p.max_workgroup_invocations);
    }
    if (impl.dynamic_shared_memory > p.max_shared_memory_per_workgroup) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "kernel '{}': {} bytes of dynamic shared memory exceed {}'s limit of {}",
                         kname, impl.dynamic_shared_memory, ctx_.device->id(),
                         p.max_shared_memory_per_workgroup);
    }
    return nullptr;
  }

  static void lay_out(const axe::Kernel& kernel, ResolvedKernel* r) {
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

 private:
  const LoadContext& ctx_;
  std::unordered_map<uint32_t, std::shared_ptr<KernelLibrary>> libraries_;
  std::unordered_map<uint32_t, std::shared_ptr<DeviceCode>> codes_;
};

axrt_status_t KernelResolver::resolve_kernels(std::vector<ResolvedKernel>* out) {
  const auto* kernels = ctx_.meta.kernels();
  const uint32_t count = kernels ? kernels->size() : 0;
  out->resize(count);
  for (uint32_t k = 0; k < count; ++k) {
    const axe::Kernel& kernel = *kernels->Get(k);
    const std::string kname = str(kernel.name());
    std::vector<std::string> reasons;
    bool found = false;
    axrt_status_code_t code = AXRT_STATUS_CODE_UNIMPLEMENTED;
    for (const Implementation& impl : implementations_of(kernel)) {
      std::shared_ptr<KernelLibrary> library;
      bool unusable = false;
      const CodeObjectKind kind = ctx_.meta.code_objects()->Get(impl.code_object)->kind();
      if (is_device_code(kind)) {
        axrt_status_t status = resolve_device_kernel(kernel, kname, impl, &(*out)[k], &unusable);
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
            ResolvedKernel& r = (*out)[k];
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
        return make_status(code, "{}: kernel '{}': {}", ctx_.what(), kname, reasons[0]);
      }
      return make_status(code, "{}: kernel '{}' has no implementation for {}: {}", ctx_.what(),
                         kname, ctx_.device->id(), fmt::join(reasons, "; "));
    }
  }
  return nullptr;
}

}  // namespace

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

axrt_status_t resolve_kernels(const LoadContext& ctx, std::vector<ResolvedKernel>* out) {
  return KernelResolver(ctx).resolve_kernels(out);
}

axrt_status_t load_kernels(const LoadContext& ctx, std::vector<ResolvedKernel>& resolved,
                           Executable* exe) {
  exe->kernels.resize(resolved.size());
  std::unordered_map<const axrt_kernel_library_t*, void*> library_states;
  for (size_t i = 0; i < resolved.size(); ++i) {
    ResolvedKernel& r = resolved[i];
    LoadedKernel& k = exe->kernels[i];
    k.args_size = r.args_size;
    k.param_offsets = r.param_offsets;
    k.param_sizes = r.param_sizes;
    if (r.code) {
      k.code = r.code;
      k.device = r.device_kernel;
      const axe::CodeObject& co = *ctx.meta.code_objects()->Get(r.impl.code_object);
      k.device.name = fmt::format("kernel '{}' ({}:{})", str(ctx.meta.kernels()->Get(i)->name()),
                                  code_object_kind_name(co.kind()), str(r.impl.entry_symbol));
      k.device.trace_name = trace::intern(str(ctx.meta.kernels()->Get(i)->name()));
      k.device.trace_symbol = trace::intern(str(r.impl.entry_symbol));
      continue;
    }
    // One acquisition per library and executable; its state serves every
    // kernel of the library.
    auto [held, first] = library_states.try_emplace(r.library->table, nullptr);
    if (first) {
      AXRT_RETURN_IF_ERROR(ctx.prefix(acquire_kernel_library(ctx.device, *r.library, &held->second)));
      exe->acquired_libraries.push_back(r.library);
    }
    void* const state = held->second;
    k.library = r.library;
    k.host.function = r.info->function;
    if (r.prepack) k.packed_param = static_cast<int32_t>(r.prepack->param);
    k.host.library_state = state;
    k.host.workgroup_size = {r.impl.workgroup_size->x(), r.impl.workgroup_size->y(),
                             r.impl.workgroup_size->z()};
    k.host.dynamic_shared_memory = r.impl.dynamic_shared_memory;
    k.host.name = fmt::format("kernel '{}' ({}:{})", str(ctx.meta.kernels()->Get(i)->name()),
                              r.library->name, r.info->name);
    k.host.trace_name = trace::intern(str(ctx.meta.kernels()->Get(i)->name()));
    k.host.trace_symbol = trace::intern(r.info->name);
  }
  return nullptr;
}

}  // namespace axrt
