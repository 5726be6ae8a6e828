// `axrt devices [--json] [--topology]`: every driver built into the library
// (a default instance enables them all), with why a driver has no devices,
// every device's properties and, with --topology, how the devices reach each
// other's memory. Uses only the public C API, as an application would.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "axrt/axrt.h"
#include "base/json_writer.h"
#include "tools/axrt/commands.h"
#include "tools/axrt/devices.h"

namespace axrt::tools {

namespace {

struct InstanceDeleter {
  void operator()(axrt_instance_t instance) const noexcept { axrt_instance_release(instance); }
};
struct DeviceDeleter {
  void operator()(axrt_device_t device) const noexcept { axrt_device_release(device); }
};
using InstancePtr = std::unique_ptr<std::remove_pointer_t<axrt_instance_t>, InstanceDeleter>;
using DevicePtr = std::unique_ptr<std::remove_pointer_t<axrt_device_t>, DeviceDeleter>;

// Prints a failed call's status to stderr and frees it; true if it failed.
bool failed(axrt_status_t status, std::string_view call) {
  if (!status) return false;
  fmt::print(stderr, "axrt devices: {} failed: {}: {}\n", call,
             axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

std::string type_name(axrt_device_type_t type) {
  switch (type) {
    case AXRT_DEVICE_TYPE_CPU: return "cpu";
    case AXRT_DEVICE_TYPE_CUDA: return "cuda";
    default: return "unknown";
  }
}

std::string flag_names(axrt_device_flags_t flags) {
  std::string names;
  const auto add = [&](axrt_device_flags_t bit, std::string_view name) {
    if (!(flags & bit)) return;
    if (!names.empty()) names += ", ";
    names += name;
  };
  add(AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY, "host-visible memory");
  add(AXRT_DEVICE_FLAG_EVENT_TIMING, "event timing");
  add(AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION, "stream-ordered allocation");
  return names.empty() ? "none" : names;
}

// A char array of a query struct, which is NUL-terminated unless full.
template <size_t N>
std::string_view fixed_string(const char (&text)[N]) {
  return std::string_view(text, strnlen(text, N));
}

// `text` without trailing whitespace, its later lines indented to sit under
// the first in the driver list.
std::string indented(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "         ";
  }
  return out;
}

template <typename... Args>
void append(std::string* out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(*out), format, std::forward<Args>(args)...);
}

std::string numa_text(int32_t node) { return node < 0 ? "unknown" : std::to_string(node); }

// The matrix of `axrt devices --topology`: a row per device, its cells the
// links to each device's memory, then its NUMA node.
void append_topology(std::string* out, std::span<const axrt_device_properties_t> devices,
                     std::span<const axrt_device_peer_info_t> topology) {
  const size_t n = devices.size();
  size_t width = 4;  // "numa"
  for (const axrt_device_properties_t& p : devices) width = std::max(width, std::strlen(p.id));
  for (const axrt_device_peer_info_t& info : topology) {
    width = std::max(width, link_text(info).size());
  }
  width += 2;
  append(out, "topology (each row's device reaching the memory of each column's):\n");
  append(out, "  {:<{}}", "", width);
  for (const axrt_device_properties_t& p : devices) append(out, "{:<{}}", p.id, width);
  append(out, "numa node\n");
  for (size_t i = 0; i < n; ++i) {
    append(out, "  {:<{}}", devices[i].id, width);
    for (size_t j = 0; j < n; ++j) append(out, "{:<{}}", link_text(topology[i * n + j]), width);
    append(out, "{}\n", numa_text(devices[i].numa_node));
  }
}

}  // namespace

std::string link_text(const axrt_device_peer_info_t& info) {
  std::string text = axrt_device_link_name(info.link);
  if (info.link == AXRT_DEVICE_LINK_NVLINK && info.link_count > 0) {
    text += fmt::format(" x{}", info.link_count);
  }
  return text;
}

std::string devices_report(std::span<const axrt_driver_info_t> drivers,
                           std::span<const axrt_device_properties_t> devices, bool json,
                           std::span<const axrt_device_peer_info_t> topology) {
  const bool with_topology =
      !topology.empty() && topology.size() == devices.size() * devices.size();
  std::string out;
  if (json) {
    JsonWriter w(&out);
    w.begin_object();
    w.member("version", axrt_version_string());
    w.key("drivers");
    w.begin_array();
    for (const axrt_driver_info_t& d : drivers) {
      w.begin_object();
      w.member("name", fixed_string(d.name));
      w.member("device_count", d.device_count);
      w.member("available", d.device_count > 0);
      w.member("availability", fixed_string(d.availability));
      w.end_object();
    }
    w.end_array();
    w.key("devices");
    w.begin_array();
    for (const axrt_device_properties_t& p : devices) {
      w.begin_object();
      w.member("id", p.id);
      w.member("driver", p.driver);
      w.member("name", p.name);
      w.member("type", type_name(p.type));
      w.member("ordinal", p.ordinal);
      w.member("compute_units", p.compute_units);
      if (p.type == AXRT_DEVICE_TYPE_CUDA) {
        w.member("compute_capability",
                 fmt::format("{}.{}", p.compute_capability_major, p.compute_capability_minor));
      }
      w.member("total_memory", p.total_memory);
      w.member("buffer_alignment", p.buffer_alignment);
      w.member("max_workgroup_invocations", p.max_workgroup_invocations);
      w.member("max_shared_memory_per_workgroup", p.max_shared_memory_per_workgroup);
      w.member("host_visible_memory", (p.flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY) != 0);
      w.member("event_timing", (p.flags & AXRT_DEVICE_FLAG_EVENT_TIMING) != 0);
      w.member("stream_ordered_allocation", (p.flags & AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION) != 0);
      w.member("numa_node", p.numa_node);  // -1: unknown
      w.end_object();
    }
    w.end_array();
    if (with_topology) {
      // A row per device: how it reaches each device's memory.
      w.key("topology");
      w.begin_array();
      const size_t n = devices.size();
      for (size_t i = 0; i < n; ++i) {
        w.begin_object();
        w.member("device", devices[i].id);
        w.member("numa_node", devices[i].numa_node);
        w.key("peers");
        w.begin_array();
        for (size_t j = 0; j < n; ++j) {
          const axrt_device_peer_info_t& info = topology[i * n + j];
          w.begin_object();
          w.member("peer", devices[j].id);
          w.member("link", axrt_device_link_name(info.link));
          w.member("link_count", info.link_count);
          w.member("direct_access", info.direct_access);
          w.member("native_atomics", info.native_atomics);
          w.member("performance_rank", info.performance_rank);
          w.end_object();
        }
        w.end_array();
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  } else {
    append(&out, "axrt {}\n", axrt_version_string());
    append(&out, "drivers ({}):\n", drivers.size());
    for (const axrt_driver_info_t& d : drivers) {
      // A driver with no devices always says why, even when it gave no
      // reason; one with devices may still have a note (some unusable).
      const std::string reason = indented(fixed_string(d.availability));
      const std::string_view name = fixed_string(d.name);
      if (d.device_count == 0) {
        append(&out, "  {:<6} unavailable: {}\n", name,
               reason.empty() ? "no devices found (the driver gave no reason)" : reason);
      } else if (reason.empty()) {
        append(&out, "  {:<6} available, {} device(s)\n", name, d.device_count);
      } else {
        append(&out, "  {:<6} available, {} device(s); {}\n", name, d.device_count, reason);
      }
    }
    append(&out, "devices ({}):\n", devices.size());
    for (const axrt_device_properties_t& p : devices) {
      append(&out, "  {:<8} {}\n", p.id, p.name);
      append(&out, "           {} compute units, {} MiB, buffers aligned to {} bytes, "
             "workgroups up to {} invocations\n",
             p.compute_units, p.total_memory >> 20, p.buffer_alignment, p.max_workgroup_invocations);
      if (p.type == AXRT_DEVICE_TYPE_CUDA) {
        append(&out, "           compute capability {}.{}\n", p.compute_capability_major,
               p.compute_capability_minor);
      }
      append(&out, "           {}\n", flag_names(p.flags));
    }
    if (with_topology) append_topology(&out, devices, topology);
  }
  return out;
}

int run_devices(std::span<const std::string_view> args) {
  bool json = false;
  bool topology = false;
  for (std::string_view arg : args) {
    if (arg == "--json") {
      json = true;
    } else if (arg == "--topology") {
      topology = true;
    } else {
      return usage_error(fmt::format("devices: unexpected argument '{}'", arg));
    }
  }

  axrt_instance_t raw_instance = nullptr;
  if (failed(axrt_instance_create(nullptr, &raw_instance), "axrt_instance_create")) return kExitFailure;
  InstancePtr instance(raw_instance);

  std::vector<axrt_driver_info_t> drivers;
  size_t driver_count = 0;
  if (failed(axrt_instance_driver_count(instance.get(), &driver_count), "axrt_instance_driver_count")) {
    return kExitFailure;
  }
  for (size_t i = 0; i < driver_count; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    if (failed(axrt_instance_query_driver_info(instance.get(), i, &info), "axrt_instance_query_driver_info")) {
      return kExitFailure;
    }
    drivers.push_back(info);
  }

  std::vector<axrt_device_properties_t> devices;
  std::vector<DevicePtr> handles;
  size_t device_count = 0;
  if (failed(axrt_instance_device_count(instance.get(), &device_count), "axrt_instance_device_count")) {
    return kExitFailure;
  }
  for (size_t i = 0; i < device_count; ++i) {
    axrt_device_t raw_device = nullptr;
    if (failed(axrt_instance_get_device(instance.get(), i, &raw_device), "axrt_instance_get_device")) {
      return kExitFailure;
    }
    DevicePtr device(raw_device);
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    if (failed(axrt_device_query_properties(device.get(), &p), "axrt_device_query_properties")) {
      return kExitFailure;
    }
    devices.push_back(p);
    handles.push_back(std::move(device));
  }

  std::vector<axrt_device_peer_info_t> links;
  if (topology) {
    for (const DevicePtr& device : handles) {
      for (const DevicePtr& peer : handles) {
        axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
        if (failed(axrt_device_query_peer(device.get(), peer.get(), &info),
                   "axrt_device_query_peer")) {
          return kExitFailure;
        }
        links.push_back(info);
      }
    }
  }

  const std::string out = devices_report(drivers, devices, json, links);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace axrt::tools
