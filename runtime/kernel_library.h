// CPU kernel libraries: checking a library's table against the kernel ABI,
// the instance's registry of libraries by name, and the per-device
// lifecycle (init once per device when the first executable needing the
// library loads there, deinit when the last one goes).
#ifndef AXRT_RUNTIME_KERNEL_LIBRARY_H_
#define AXRT_RUNTIME_KERNEL_LIBRARY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "axrt/kernel_abi.h"
#include "base/status.h"
#include "kernels/cpu/library.h"

namespace axrt {

struct Device;
struct Instance;

// A library whose table passed validate_kernel_library().
struct KernelLibrary {
  const axrt_kernel_library_t* table = nullptr;
  std::string name;
  uint32_t version = 0;
  // Where it came from, for messages: "the built-in library", ...
  std::string origin;
  std::unordered_map<std::string_view, const axrt_kernel_info_t*> kernels;
  // Keeps the code of a library loaded from a shared object mapped.
  std::shared_ptr<void> code;
  // The pre-packed forms of its kernels, by the entry they stand in for
  // (the built-in library's, kernels/cpu/library.h; runtime/loader_prepack.cc).
  struct Prepack {
    uint32_t param;
    std::string_view from_layout;
    std::string_view to_layout;
    const axrt_kernel_info_t* packed;  // the entry reading to_layout
    const kernels::CpuPacker* packer;
  };
  std::unordered_map<std::string_view, Prepack> prepacks;

  const axrt_kernel_info_t* find(std::string_view symbol) const {
    auto it = kernels.find(symbol);
    return it == kernels.end() ? nullptr : it->second;
  }
};

// Lays out parameters of `sizes` bytes each (1, 2, 4 or 8, aligned to their
// size) by the C rules: writes their offsets when `out_offsets` is set and
// returns the block's size, rounded up to its largest alignment.
uint32_t lay_out_kernel_args(std::span<const uint32_t> sizes, std::vector<uint32_t>* out_offsets);

// The size of the argument block the C layout rules give `params`; sets
// `*out_bad_param` to the index of a parameter with an unknown kind or
// scalar type and returns 0 then.
uint32_t kernel_args_size(std::span<const axrt_kernel_param_info_t> params,
                          uint32_t* out_bad_param);

// Checks `table` against the kernel ABI; messages start with `origin`.
axrt_status_t validate_kernel_library(const axrt_kernel_library_t* table, std::string origin,
                                      std::shared_ptr<KernelLibrary>* out);

// Adds a validated library to `instance`'s registry (ALREADY_EXISTS when the
// name is taken).
axrt_status_t register_kernel_library(Instance* instance, std::shared_ptr<KernelLibrary> library);
// The registered library named `name`, or null.
std::shared_ptr<KernelLibrary> find_kernel_library(Instance* instance, std::string_view name);
// The names registered, for messages.
std::string kernel_library_names(Instance* instance);

// Initialises `library` on `device` when it is not yet, counts one more
// user, and writes the state its kernels see.
axrt_status_t acquire_kernel_library(Device* device, const KernelLibrary& library,
                                     void** out_state);
// Drops a user; the last one deinitialises the library on `device`.
void release_kernel_library(Device* device, const KernelLibrary& library) noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_KERNEL_LIBRARY_H_
