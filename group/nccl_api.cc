// Loading NCCL at run time: dlopen, then every entry point of
// AXRT_NCCL_SYMBOLS by name, then a version check.
#include "group/nccl_api.h"

#include "base/runtime_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <vector>

namespace axrt::group {
namespace {

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string reason;
};

std::string version_text(int code) {
  // Codes from 2.9 on are major * 10000 + minor * 100 + patch.
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code / 100 % 10, code % 100);
}

void load(Loaded* out) {
  // Never unloaded: NCCL's proxy threads and the host functions it queues
  // may run in the library until the process exits.
  const RuntimeLibrary library = open_runtime_library("AXRT_NCCL_LIBRARY", "libnccl.so.2");
  const std::string& path = library.path;
  void* handle = library.handle;
  if (!handle) {
    out->reason = fmt::format(
        "{} not found: {}; install the nvidia-nccl-cu12 wheel (its nvidia/nccl/lib holds the "
        "library) or set AXRT_NCCL_LIBRARY to the library's path",
        path, library.error);
    return;
  }
  NcclApi& api = out->api;
  api.path = path;
  std::vector<std::string> missing;
#define AXRT_NCCL_LOAD_SYMBOL(name, ret, params, required)       \
  api.name = reinterpret_cast<ret(*) params>(dlsym(handle, #name)); \
  if (!api.name && (required)) missing.emplace_back(#name);
  AXRT_NCCL_SYMBOLS(AXRT_NCCL_LOAD_SYMBOL)
#undef AXRT_NCCL_LOAD_SYMBOL
  if (!missing.empty()) {
    out->reason = fmt::format("{} lacks NCCL entry points axrt needs: {}", path,
                              fmt::join(missing, ", "));
    return;
  }
  if (const ncclResult_t got = api.ncclGetVersion(&api.version); got != ncclSuccess) {
    out->reason = fmt::format("ncclGetVersion of {} failed: {}", path, api.describe(got));
    return;
  }
  api.version_text = version_text(api.version);
  if (api.version < kMinNcclVersion) {
    out->reason = fmt::format("{} is NCCL {}; axrt needs NCCL {} or later", path, api.version_text,
                              version_text(kMinNcclVersion));
    return;
  }
  out->ok = true;
}

}  // namespace

std::string NcclApi::describe(ncclResult_t result, ncclComm_t comm) const {
  const char* text = ncclGetErrorString ? ncclGetErrorString(result) : nullptr;
  std::string out = text && *text ? fmt::format("{} (ncclResult_t {})", text, result)
                                  : fmt::format("ncclResult_t {}", result);
  const char* last = comm && ncclGetLastError ? ncclGetLastError(comm) : nullptr;
  if (last && *last) out += fmt::format("; last error: {}", last);
  return out;
}

const NcclApi* nccl_api(std::string* reason) {
  static Loaded* loaded = [] {
    auto* l = new Loaded();  // never freed: see RTLD_NODELETE
    load(l);
    return l;
  }();
  if (!loaded->ok) {
    if (reason) *reason = loaded->reason;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace axrt::group
