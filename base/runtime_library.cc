#include "base/runtime_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace axrt {

RuntimeLibrary open_runtime_library(const char* override_variable, const char* default_name) {
  RuntimeLibrary out;
  const char* override_path = std::getenv(override_variable);
  out.path = override_path != nullptr && *override_path != '\0' ? override_path : default_name;
  out.handle = dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (out.handle == nullptr) {
    const char* error = dlerror();
    out.error = error != nullptr ? error : "unknown dynamic loader error";
  }
  return out;
}

}  // namespace axrt
