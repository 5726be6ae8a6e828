// The part of NVML the CUDA driver uses, declared here from the published
// API (nvml.h) so that nothing of NVML is needed to build, and loaded with
// dlopen/dlsym once per process.
#include "runtime/drivers/cuda/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/numa.h"
#include "base/runtime_library.h"

// The types of NVML's C API, declared as nvml.h declares them (at global
// scope, under the same tags), so that the functions called through the
// pointers below have exactly the type they are defined with.
extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
// nvmlPciInfo_t as the _v2 and later functions fill it.
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
}

namespace axrt::cuda {
namespace {

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;  // past the last link
constexpr int kNvmlFeatureEnabled = 1;                 // nvmlEnableState_t
constexpr int kNvmlNvLinkDeviceTypeSwitch = 2;         // nvmlIntNvLinkDeviceType_t
// More links than any GPU has; the walk stops at NVML's "no such link".
constexpr unsigned int kMaxLinks = 64;

// X(name, parameters, required)
#define AXRT_NVML_SYMBOLS(X)                                                                \
  X(nvmlInit_v2, (void), true)                                                              \
  X(nvmlDeviceGetHandleByPciBusId_v2, (const char* bus_id, nvmlDevice_t* device), true)     \
  X(nvmlDeviceGetNvLinkState, (nvmlDevice_t device, unsigned int link, int* active), true) \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2,                                                    \
    (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci), true)                     \
  X(nvmlDeviceGetNvLinkRemoteDeviceType, (nvmlDevice_t device, unsigned int link, int* type), \
    false)

struct Nvml {
#define AXRT_NVML_DECLARE(name, params, required) nvmlReturn_t(*name) params = nullptr;
  AXRT_NVML_SYMBOLS(AXRT_NVML_DECLARE)
#undef AXRT_NVML_DECLARE
};

// The loaded library, or nullptr. Never unloaded, like the Driver API.
const Nvml* nvml() {
  static const Nvml* loaded = []() -> const Nvml* {
    void* handle = open_runtime_library("AXRT_NVML_LIBRARY", "libnvidia-ml.so.1").handle;
    if (!handle) return nullptr;
    auto* api = new Nvml();  // never freed: see above
    bool complete = true;
#define AXRT_NVML_LOAD(name, params, required)                                   \
  api->name = reinterpret_cast<nvmlReturn_t(*) params>(dlsym(handle, #name));    \
  complete = complete && (api->name != nullptr || !(required));
    AXRT_NVML_SYMBOLS(AXRT_NVML_LOAD)
#undef AXRT_NVML_LOAD
    if (!complete || api->nvmlInit_v2() != kNvmlSuccess) {
      delete api;
      return nullptr;
    }
    return api;
  }();
  return loaded;
}

struct PciAddress {
  unsigned int domain = 0, bus = 0, device = 0;
};

bool parse_address(std::string_view bus_id, PciAddress* out) {
  const std::string id = normalize_pci_bus_id(bus_id);  // "dddd:bb:dd.f"
  if (id.empty()) return false;
  out->domain = static_cast<unsigned int>(std::strtoul(id.substr(0, 4).c_str(), nullptr, 16));
  out->bus = static_cast<unsigned int>(std::strtoul(id.substr(5, 2).c_str(), nullptr, 16));
  out->device = static_cast<unsigned int>(std::strtoul(id.substr(8, 2).c_str(), nullptr, 16));
  return true;
}

struct Links {
  uint32_t to_peer = 0;
  uint32_t to_switches = 0;
};

// The active links of `device`: those to the GPU at `peer`, and those to
// NVSwitches.
Links count_links(const Nvml& api, nvmlDevice_t device, const PciAddress& peer) {
  Links links;
  for (unsigned int link = 0; link < kMaxLinks; ++link) {
    int active = 0;
    const nvmlReturn_t state = api.nvmlDeviceGetNvLinkState(device, link, &active);
    if (state == kNvmlErrorInvalidArgument) break;
    if (state != kNvmlSuccess || active != kNvmlFeatureEnabled) continue;
    int type = 0;
    if (api.nvmlDeviceGetNvLinkRemoteDeviceType &&
        api.nvmlDeviceGetNvLinkRemoteDeviceType(device, link, &type) == kNvmlSuccess &&
        type == kNvmlNvLinkDeviceTypeSwitch) {
      ++links.to_switches;
      continue;
    }
    nvmlPciInfo_t pci{};
    if (api.nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, &pci) != kNvmlSuccess) continue;
    if (pci.domain == peer.domain && pci.bus == peer.bus && pci.device == peer.device) {
      ++links.to_peer;
    }
  }
  return links;
}

}  // namespace

uint32_t nvlink_count(std::string_view bus_id, std::string_view peer_bus_id) {
  const Nvml* api = nvml();
  PciAddress self, peer;
  if (!api || !parse_address(bus_id, &self) || !parse_address(peer_bus_id, &peer)) return 0;
  const std::string self_id(bus_id), peer_id(peer_bus_id);
  nvmlDevice_t self_device = nullptr, peer_device = nullptr;
  if (api->nvmlDeviceGetHandleByPciBusId_v2(self_id.c_str(), &self_device) != kNvmlSuccess ||
      api->nvmlDeviceGetHandleByPciBusId_v2(peer_id.c_str(), &peer_device) != kNvmlSuccess) {
    return 0;
  }
  const Links mine = count_links(*api, self_device, peer);
  if (mine.to_peer > 0 || mine.to_switches == 0) return mine.to_peer;
  const Links theirs = count_links(*api, peer_device, self);
  return theirs.to_switches > 0 ? std::min(mine.to_switches, theirs.to_switches) : 0;
}

}  // namespace axrt::cuda
