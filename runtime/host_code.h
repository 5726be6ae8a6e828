// Host code objects: a kernel library carried inside an .axe file as an ELF
// shared object, loaded from memory without touching the file system.
#ifndef AXRT_RUNTIME_HOST_CODE_H_
#define AXRT_RUNTIME_HOST_CODE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/kernel_library.h"

namespace axrt {

// The host architecture as code-object targets spell it ("x86_64").
const char* host_architecture() noexcept;

// Loads the shared object `bytes`, asks it for its kernel library table
// (AXRT_KERNEL_LIBRARY_QUERY_SYMBOL) and checks the table. `origin` names the
// code object in messages. The library keeps the code loaded.
axrt_status_t load_host_code_library(std::span<const uint8_t> bytes, std::string origin,
                                     std::shared_ptr<KernelLibrary>* out);

}  // namespace axrt

#endif  // AXRT_RUNTIME_HOST_CODE_H_
