// Shared libraries opened at run time and never linked (the CUDA driver,
// NVML, NCCL): the file an environment variable names, else the library's
// usual name.
#ifndef AXRT_BASE_RUNTIME_LIBRARY_H_
#define AXRT_BASE_RUNTIME_LIBRARY_H_

#include <string>

namespace axrt {

struct RuntimeLibrary {
  void* handle = nullptr;  // for dlsym; null when the library could not be opened
  std::string path;        // the file opened, or tried
  std::string error;       // the dynamic loader's reason, when `handle` is null
};

// Opens the file that the environment variable `override_variable` names
// when it is set and not empty, else `default_name` (found the dynamic
// loader's way), with RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE: never unloaded,
// since the library's threads and callbacks may run until the process
// exits. Throws std::bad_alloc only.
RuntimeLibrary open_runtime_library(const char* override_variable, const char* default_name);

}  // namespace axrt

#endif  // AXRT_BASE_RUNTIME_LIBRARY_H_
