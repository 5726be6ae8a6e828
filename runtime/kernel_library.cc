#include "runtime/kernel_library.h"

#include <algorithm>
#include <cstring>

#include "runtime/api.h"
#include "runtime/driver.h"
#include "runtime/instance.h"
#include "runtime/tensor.h"

namespace axrt {
namespace {

// The smallest tables this runtime reads: ABI version 1's.
constexpr size_t kLibraryV1Size = offsetof(axrt_kernel_library_t, deinit) + sizeof(void*);

bool valid_string(const char* s) { return s != nullptr && *s != '\0'; }

}  // namespace

uint32_t lay_out_kernel_args(std::span<const uint32_t> sizes, std::vector<uint32_t>* out_offsets) {
  uint64_t offset = 0;
  uint64_t max_alignment = 1;
  for (const uint32_t size : sizes) {
    offset = (offset + size - 1) / size * size;
    if (out_offsets) out_offsets->push_back(static_cast<uint32_t>(offset));
    offset += size;
    max_alignment = std::max<uint64_t>(max_alignment, size);
  }
  return static_cast<uint32_t>((offset + max_alignment - 1) / max_alignment * max_alignment);
}

uint32_t kernel_args_size(std::span<const axrt_kernel_param_info_t> params,
                          uint32_t* out_bad_param) {
  std::vector<uint32_t> sizes;
  sizes.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    uint32_t size = 0;
    if (params[i].kind == AXRT_KERNEL_PARAM_KIND_BUFFER) {
      size = 8;
    } else if (params[i].kind == AXRT_KERNEL_PARAM_KIND_SCALAR) {
      size = axrt_kernel_scalar_size(params[i].scalar_type);
    }
    if (size == 0) {
      *out_bad_param = static_cast<uint32_t>(i);
      return 0;
    }
    sizes.push_back(size);
  }
  return lay_out_kernel_args(sizes, nullptr);
}

axrt_status_t validate_kernel_library(const axrt_kernel_library_t* table, std::string origin,
                                      std::shared_ptr<KernelLibrary>* out) {
  if (table == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the library table is NULL", origin);
  }
  if (table->struct_size < kLibraryV1Size) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the library table's struct_size is {}, smaller than the {} bytes of "
                       "kernel ABI version 1",
                       origin, table->struct_size, kLibraryV1Size);
  }
  if (table->abi_version == 0 || table->abi_version > AXRT_KERNEL_ABI_VERSION) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{}: the library was built for kernel ABI version {}; this runtime speaks "
                       "versions 1 to {}",
                       origin, table->abi_version, AXRT_KERNEL_ABI_VERSION);
  }
  if (!valid_string(table->name)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the library has no name", origin);
  }
  auto library = std::make_shared<KernelLibrary>();
  library->table = table;
  library->name = table->name;
  library->version = table->version;
  library->origin = std::move(origin);
  const std::string what = fmt::format("{} '{}'", library->origin, library->name);
  if (table->kernel_count > 0 && table->kernels == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: kernel_count is {} but kernels is NULL", what, table->kernel_count);
  }
  for (uint32_t k = 0; k < table->kernel_count; ++k) {
    const axrt_kernel_info_t& kernel = table->kernels[k];
    if (!valid_string(kernel.name)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kernel {} has no name", what, k);
    }
    if (kernel.function == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kernel '{}' has no function",
                         what, kernel.name);
    }
    if (kernel.param_count > 0 && kernel.params == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: kernel '{}' has {} parameters but params is NULL", what, kernel.name,
                         kernel.param_count);
    }
    uint32_t bad = 0;
    const uint32_t size = kernel_args_size({kernel.params, kernel.param_count}, &bad);
    if (size == 0 && kernel.param_count > 0) {
      const axrt_kernel_param_info_t& p = kernel.params[bad];
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: kernel '{}' parameter {} ('{}') has kind {} and scalar type {}, "
                         "which the kernel ABI does not define",
                         what, kernel.name, bad, p.name ? p.name : "", p.kind, p.scalar_type);
    }
    for (uint32_t p = 0; p < kernel.param_count; ++p) {
      if (kernel.params[p].kind == AXRT_KERNEL_PARAM_KIND_SCALAR && kernel.params[p].layout_id) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: kernel '{}' parameter {} is a scalar but names quantization "
                           "layout '{}'; only buffers hold quantized data",
                           what, kernel.name, p, kernel.params[p].layout_id);
      }
    }
    if (size != kernel.args_size) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: kernel '{}' declares a {}-byte argument block, but its {} "
                         "parameters lay out to {} bytes",
                         what, kernel.name, kernel.args_size, kernel.param_count, size);
    }
    if (!library->kernels.emplace(kernel.name, &kernel).second) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kernel name '{}' appears twice",
                         what, kernel.name);
    }
  }
  *out = std::move(library);
  return nullptr;
}

axrt_status_t register_kernel_library(Instance* instance, std::shared_ptr<KernelLibrary> library) {
  std::lock_guard<std::mutex> lock(instance->kernel_libraries_mutex);
  for (const auto& existing : instance->kernel_libraries) {
    if (existing->name == library->name) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                         "a kernel library named '{}' is already registered ({})", library->name,
                         existing->origin);
    }
  }
  instance->kernel_libraries.push_back(std::move(library));
  return nullptr;
}

std::shared_ptr<KernelLibrary> find_kernel_library(Instance* instance, std::string_view name) {
  std::lock_guard<std::mutex> lock(instance->kernel_libraries_mutex);
  for (const auto& library : instance->kernel_libraries) {
    if (library->name == name) return library;
  }
  return nullptr;
}

std::string kernel_library_names(Instance* instance) {
  std::lock_guard<std::mutex> lock(instance->kernel_libraries_mutex);
  std::string names;
  for (const auto& library : instance->kernel_libraries) {
    if (!names.empty()) names += ", ";
    names += library->name;
  }
  return names.empty() ? "none" : names;
}

axrt_status_t acquire_kernel_library(Device* device, const KernelLibrary& library,
                                     void** out_state) {
  std::lock_guard<std::mutex> lock(device->kernel_libraries_mutex);
  for (auto& use : device->kernel_libraries) {
    if (use.table == library.table) {
      ++use.users;
      *out_state = use.state;
      return nullptr;
    }
  }
  void* state = nullptr;
  if (library.table->init) {
    char message[512] = {};
    axrt_kernel_library_context_t context = {};
    context.struct_size = sizeof(context);
    context.device_id = device->id();
    context.worker_count = std::max<uint32_t>(1, device->properties.compute_units);
    context.error_message = message;
    context.error_message_capacity = sizeof(message);
    const axrt_kernel_result_t result = library.table->init(&context, &state);
    if (result != AXRT_KERNEL_OK) {
      message[sizeof(message) - 1] = '\0';
      const auto code = static_cast<axrt_status_code_t>(
          result > 0 && result <= AXRT_STATUS_CODE_DEVICE_LOST ? result : AXRT_STATUS_CODE_INTERNAL);
      return make_status(code, "kernel library '{}' ({}) failed to initialise on {}: {}",
                         library.name, library.origin, device->id(),
                         message[0] ? message : "no reason given");
    }
  }
  device->kernel_libraries.push_back({library.table, state, 1});
  *out_state = state;
  return nullptr;
}

void release_kernel_library(Device* device, const KernelLibrary& library) noexcept {
  Device::KernelLibraryUse released{};
  {
    std::lock_guard<std::mutex> lock(device->kernel_libraries_mutex);
    auto it = std::find_if(device->kernel_libraries.begin(), device->kernel_libraries.end(),
                           [&](const auto& use) { return use.table == library.table; });
    if (it == device->kernel_libraries.end() || --it->users > 0) return;
    released = *it;
    device->kernel_libraries.erase(it);
    // deinit runs under the lock so that a concurrent load cannot init the
    // library again before it has finished.
    if (released.table->deinit) released.table->deinit(released.state);
  }
}

}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_instance_register_kernel_library(axrt_instance_t instance,
                                                             const axrt_kernel_library_t* library) {
  static constexpr ApiCall api("axrt_instance_register_kernel_library");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(library, "library"));
    std::shared_ptr<KernelLibrary> validated;
    AXRT_RETURN_IF_ERROR(api.prefix(validate_kernel_library(
        library, "the library registered by the application", &validated)));
    return api.prefix(register_kernel_library(self, std::move(validated)));
  });
}

}  // extern "C"
