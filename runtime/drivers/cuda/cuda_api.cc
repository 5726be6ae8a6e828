// Loading the CUDA driver library at run time: dlopen, then every entry point
// of AXRT_CUDA_SYMBOLS through cuGetProcAddress_v2 at its pinned version.
#include <dlfcn.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <mutex>

#include "base/runtime_library.h"
#include "runtime/drivers/cuda/cuda_driver.h"

namespace axrt::cuda {
namespace {

struct Loaded {
  CudaApi api;
  bool ok = false;
  std::string reason;
};

void load(Loaded* out) {
  const RuntimeLibrary library = open_runtime_library("AXRT_CUDA_DRIVER_LIBRARY", "libcuda.so.1");
  const std::string& path = library.path;
  void* handle = library.handle;
  if (!handle) {
    out->reason = fmt::format("no NVIDIA driver: {} could not be loaded ({})", path, library.error);
    return;
  }
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v2>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!get_proc) {
    out->reason = fmt::format(
        "{} has no cuGetProcAddress_v2: the NVIDIA driver is older than CUDA 12.0", path);
    return;
  }
  CudaApi& api = out->api;
  api.path = path;
  std::vector<std::string> missing;
  bool pools = true;
#define AXRT_CUDA_LOAD_SYMBOL(name, ret, params, version, required)                            \
  {                                                                                            \
    void* pfn = nullptr;                                                                       \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;               \
    const CUresult result =                                                                    \
        get_proc(#name, &pfn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);                   \
    if (result == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && pfn) {               \
      api.name = reinterpret_cast<ret(*) params>(pfn);                                         \
    } else if (required) {                                                                     \
      missing.push_back(                                                                       \
          fmt::format("{}{}", #name,                                                           \
                      found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT                      \
                          ? fmt::format(" (needs a driver for CUDA {}.{})", (version) / 1000,  \
                                        (version) % 1000 / 10)                                 \
                          : std::string()));                                                   \
    }                                                                                          \
  }
  AXRT_CUDA_SYMBOLS(AXRT_CUDA_LOAD_SYMBOL)
#undef AXRT_CUDA_LOAD_SYMBOL
  if (!missing.empty()) {
    out->reason = fmt::format("{} lacks entry points axrt needs: {}", path, fmt::join(missing, ", "));
    return;
  }
  pools = api.cuMemPoolCreate && api.cuMemPoolDestroy && api.cuMemPoolSetAttribute &&
          api.cuMemPoolGetAttribute && api.cuMemPoolTrimTo && api.cuMemAllocFromPoolAsync &&
          api.cuMemFreeAsync;
  api.has_pools = pools;
  api.cuDriverGetVersion(&api.driver_version);
  const CUresult init = api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    out->reason = fmt::format("cuInit failed: {}", api.describe(init));
    if (init == CUDA_ERROR_NO_DEVICE) out->reason = "the NVIDIA driver reports no CUDA device";
    return;
  }
  out->ok = true;
}

}  // namespace

std::string CudaApi::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) {
    return fmt::format("CUDA error {}", result);
  }
  if (!cuGetErrorString || cuGetErrorString(result, &text) != CUDA_SUCCESS || !text) {
    return name;
  }
  return fmt::format("{} ({})", name, text);
}

const CudaApi* cuda_api(std::string* reason) {
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

bool is_sticky_error(CUresult result) noexcept {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
      return true;
    default:
      return false;
  }
}

}  // namespace axrt::cuda
