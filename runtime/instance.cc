#include "runtime/instance.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <string_view>

#include "kernels/cpu/library.h"
#include "runtime/api.h"
#include "runtime/driver.h"
#include "runtime/handle_table.h"
#include "runtime/kernel_library.h"

namespace axrt {

DriverDevices::~DriverDevices() {
  for (Device* device : devices) {
    if (device != nullptr) device->vtable->destroy(device);
  }
}

namespace {

void destroy_instance(Object* object) {
  auto* instance = static_cast<Instance*>(object);
  stop_instance_trace(instance);
  // Devices go in reverse order of creation; nothing refers to them any more,
  // since every object that did held a reference to this instance.
  for (auto it = instance->devices.rbegin(); it != instance->devices.rend(); ++it) {
    Device* device = *it;
    if (device->handle) HandleTable::global().remove(device->handle);
    device->vtable->destroy(device);
  }
  delete instance;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string builtin_driver_names() {
  std::string names;
  for (const DriverFactory* factory : builtin_drivers()) {
    if (!names.empty()) names += ", ";
    names += factory->name;
  }
  return names.empty() ? "none" : names;
}

// Resolves the comma-separated `list` into factories, in registry order; an
// empty list means every driver but those that take part only when named.
axrt_status_t select_drivers(const ApiCall& api, const char* list,
                             std::vector<const DriverFactory*>* out) {
  const auto all = builtin_drivers();
  if (!list || !*list) {
    for (const DriverFactory* factory : all) {
      if (!factory->only_when_named) out->push_back(factory);
    }
    return nullptr;
  }
  std::vector<bool> wanted(all.size(), false);
  std::string_view rest(list);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view name = trim(rest.substr(0, comma));
    bool found = false;
    for (size_t i = 0; i < all.size(); ++i) {
      if (name == all[i]->name) wanted[i] = found = true;
    }
    if (!found) {
      return api.error(AXRT_STATUS_CODE_NOT_FOUND,
                       "`options->drivers` names driver '{}', which is not built into this "
                       "library (built in: {})",
                       name, builtin_driver_names());
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (wanted[i]) out->push_back(all[i]);
  }
  return nullptr;
}

std::string device_names(const Instance* instance) {
  std::string names;
  for (const Device* device : instance->devices) {
    if (!names.empty()) names += ", ";
    names += device->id();
  }
  return names.empty() ? "none" : names;
}

}  // namespace
}  // namespace axrt

using namespace axrt;

extern "C" {

AXRT_API axrt_status_t axrt_instance_create(const axrt_instance_options_t* options,
                                            axrt_instance_t* out_instance) {
  static constexpr ApiCall api("axrt_instance_create");
  return guard(api.function(), [&]() -> axrt_status_t {
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_instance, "out_instance"));
    axrt_instance_options_t opts = AXRT_INSTANCE_OPTIONS_INIT;
    if (options) {
      AXRT_RETURN_IF_ERROR(api.check_struct_size(options, "options", "axrt_instance_options_t",
                                                 sizeof(axrt_instance_options_t)));
      AXRT_READ_FIELD(options, &opts, drivers);
      Extensions extensions;
      AXRT_RETURN_IF_ERROR(api.read_extensions(options->next, "options", 0, &extensions));
    }
    std::vector<const DriverFactory*> factories;
    AXRT_RETURN_IF_ERROR(select_drivers(api, opts.drivers, &factories));

    // Held by a unique_ptr with the destroy function so an error part-way
    // through tears down what was created.
    auto instance = std::unique_ptr<Instance, void (*)(Instance*)>(
        new Instance(), [](Instance* i) { destroy_instance(i); });
    instance->destroy = destroy_instance;
    for (const DriverFactory* factory : factories) {
      // Adopted first, so that devices are destroyed on every path; what
      // is not adopted `found` destroys.
      DriverDevices found;
      const StatusPtr status(factory->enumerate_devices(instance.get(), &found));
      instance->devices.reserve(instance->devices.size() + found.devices.size());
      for (Device*& device : found.devices) {
        device->instance = instance.get();
        device->owner = instance.get();
        instance->devices.push_back(std::exchange(device, nullptr));
      }
      if (status) {
        return api.error(axrt_status_code(status.get()),
                         "driver '{}' failed to enumerate devices: {}", factory->name,
                         axrt_status_message(status.get()));
      }
      instance->drivers.push_back(Instance::DriverEntry{
          factory->name, found.availability, static_cast<uint32_t>(found.devices.size())});
    }
    // The built-in CPU kernel library is there for every instance.
    std::shared_ptr<KernelLibrary> builtin;
    AXRT_RETURN_IF_ERROR(validate_kernel_library(kernels::cpu_kernel_library(),
                                                 "the built-in library", &builtin));
    for (const kernels::CpuPrepack& prepack : kernels::cpu_prepacks()) {
      const axrt_kernel_info_t* packed = builtin->find(prepack.packed_entry);
      if (!packed || !builtin->find(prepack.entry)) continue;
      builtin->prepacks.emplace(prepack.entry,
                                KernelLibrary::Prepack{prepack.param, prepack.from_layout,
                                                       prepack.to_layout, packed, prepack.packer});
    }
    AXRT_RETURN_IF_ERROR(register_kernel_library(instance.get(), std::move(builtin)));
    for (Device* device : instance->devices) object_register(device);
    object_register(instance.get());
    start_environment_trace(instance.get());
    *out_instance = to_handle<axrt_instance_t>(instance.release());
    return nullptr;
  });
}

AXRT_API void axrt_instance_retain(axrt_instance_t instance) {
  retain_handle<Instance>(instance);
}

AXRT_API void axrt_instance_release(axrt_instance_t instance) {
  release_handle<Instance>(instance);
}

AXRT_API axrt_status_t axrt_instance_driver_count(axrt_instance_t instance, size_t* out_count) {
  static constexpr ApiCall api("axrt_instance_driver_count");
  Instance* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_count, "out_count"));
  *out_count = self->drivers.size();
  return nullptr;
}

AXRT_API axrt_status_t axrt_instance_query_driver_info(axrt_instance_t instance, size_t index,
                                                       axrt_driver_info_t* out_info) {
  static constexpr ApiCall api("axrt_instance_query_driver_info");
  Instance* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
  AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_driver_info_t"));
  if (index >= self->drivers.size()) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "`index` {} is out of range: {} driver(s)",
                     index, self->drivers.size());
  }
  const Instance::DriverEntry& entry = self->drivers[index];
  axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
  fmt::format_to_n(info.name, sizeof(info.name) - 1, "{}", entry.name);
  fmt::format_to_n(info.availability, sizeof(info.availability) - 1, "{}", entry.availability);
  info.device_count = entry.device_count;
  write_query_struct(info, out_info);
  return nullptr;
}

AXRT_API axrt_status_t axrt_instance_device_count(axrt_instance_t instance, size_t* out_count) {
  static constexpr ApiCall api("axrt_instance_device_count");
  Instance* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_count, "out_count"));
  *out_count = self->devices.size();
  return nullptr;
}

AXRT_API axrt_status_t axrt_instance_get_device(axrt_instance_t instance, size_t index,
                                                axrt_device_t* out_device) {
  static constexpr ApiCall api("axrt_instance_get_device");
  Instance* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
  AXRT_RETURN_IF_ERROR(api.require_pointer(out_device, "out_device"));
  if (index >= self->devices.size()) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "`index` {} is out of range: {} device(s) ({})",
                     index, self->devices.size(), device_names(self));
  }
  Device* device = self->devices[index];
  object_retain(device);
  *out_device = to_handle<axrt_device_t>(device);
  return nullptr;
}

AXRT_API axrt_status_t axrt_instance_find_device(axrt_instance_t instance, const char* name,
                                                 axrt_device_t* out_device) {
  static constexpr ApiCall api("axrt_instance_find_device");
  return guard(api.function(), [&]() -> axrt_status_t {
    Instance* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(instance, "instance", &self));
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_device, "out_device"));
    std::string wanted = name ? name : "";
    const bool by_default = wanted.empty();
    if (by_default) {
      const char* env = std::getenv("AXRT_DEVICE");
      wanted = env && *env ? env : "cpu:0";
    }
    for (Device* device : self->devices) {
      if (wanted == device->id()) {
        object_retain(device);
        *out_device = to_handle<axrt_device_t>(device);
        return nullptr;
      }
    }
    // A driver without devices says why ("cuda:0": no NVIDIA driver ...).
    std::string why;
    const std::string driver = wanted.substr(0, wanted.find(':'));
    for (const auto& entry : self->drivers) {
      if (entry.name == driver && !entry.availability.empty()) {
        why = fmt::format("; driver '{}': {}", driver, entry.availability);
      }
    }
    return api.error(AXRT_STATUS_CODE_NOT_FOUND, "no device named '{}'{} (devices: {}){}", wanted,
                     by_default ? " (the default device, from AXRT_DEVICE or cpu:0)" : "",
                     device_names(self), why);
  });
}

}  // extern "C"
