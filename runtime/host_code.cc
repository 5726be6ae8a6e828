#include "runtime/host_code.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "axrt/format.h"

namespace axrt {
namespace {

// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

const char* host_architecture() noexcept {
#if defined(AXRT_HOST_CODE_TARGET)
  return AXRT_HOST_CODE_TARGET;
#else
  return "unknown";
#endif
}

axrt_status_t load_host_code_library(std::span<const uint8_t> bytes, std::string origin,
                                     std::shared_ptr<KernelLibrary>* out) {
  // An anonymous in-memory file: the code never lands on a file system.
  FdCloser file{memfd_create("axrt-host-code", MFD_CLOEXEC)};
  if (file.fd < 0) {
    return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: memfd_create failed: {}", origin,
                       std::strerror(errno));
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(file.fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "{}: cannot stage {} bytes: {}",
                         origin, bytes.size(), std::strerror(errno));
    }
    written += static_cast<size_t>(n);
  }
  const std::string path = fmt::format("/proc/self/fd/{}", file.fd);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the shared object does not load: {}",
                       origin, reason ? reason : "unknown reason");
  }
  std::shared_ptr<void> code(handle, [](void* h) { dlclose(h); });
  dlerror();
  auto query = reinterpret_cast<axrt_kernel_library_query_fn_t>(
      dlsym(handle, AXRT_KERNEL_LIBRARY_QUERY_SYMBOL));
  if (query == nullptr) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "{}: the shared object does not export {}, so it is not an axrt kernel "
                       "library",
                       origin, AXRT_KERNEL_LIBRARY_QUERY_SYMBOL);
  }
  const axrt_kernel_library_t* table = query(AXRT_KERNEL_ABI_VERSION);
  if (table == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{}: the library serves no kernel ABI version up to {}", origin,
                       AXRT_KERNEL_ABI_VERSION);
  }
  std::shared_ptr<KernelLibrary> library;
  AXRT_RETURN_IF_ERROR(validate_kernel_library(table, std::move(origin), &library));
  library->code = std::move(code);
  *out = std::move(library);
  return nullptr;
}

}  // namespace axrt
