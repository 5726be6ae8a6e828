// The "axrt.cpu" table: every built-in kernel with its parameter table,
// generated from kernels/contracts.json (docs/kernels.md explains them).
#include "kernels/cpu/library.h"

#include <array>
#include <cstddef>

#include "axrt/base.h"
#include "kernels/cpu/kernels.h"

namespace axrt::kernels {
namespace {

constexpr axrt_kernel_param_info_t buffer(const char* name, const char* layout_id = nullptr) {
  return {name, AXRT_KERNEL_PARAM_KIND_BUFFER, 0, layout_id};
}

constexpr axrt_kernel_param_info_t scalar(const char* name, uint32_t dtype) {
  return {name, AXRT_KERNEL_PARAM_KIND_SCALAR, dtype, nullptr};
}

constexpr axrt_kernel_param_info_t u64(const char* name) { return scalar(name, AXRT_DTYPE_UINT64); }

template <class... Params>
constexpr auto params(Params... p) {
  return std::array<axrt_kernel_param_info_t, sizeof...(Params)>{p...};
}

// The argument block's size by the ABI's C rules, for checking the structs
// against the tables at compile time. Only the scalar types used here.
template <size_t kCount>
constexpr uint32_t block_size(const std::array<axrt_kernel_param_info_t, kCount>& params) {
  uint32_t offset = 0;
  uint32_t max_align = 1;
  for (const auto& p : params) {
    uint32_t size = 8;
    if (p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR) {
      size = p.scalar_type == AXRT_DTYPE_UINT64 ? 8 : p.scalar_type == AXRT_DTYPE_FLOAT32 ? 4 : 0;
    }
    if (size == 0) return 0;
    offset = (offset + size - 1) / size * size + size;
    max_align = size > max_align ? size : max_align;
  }
  return (offset + max_align - 1) / max_align * max_align;
}

// A kernel's entry, its args_size the size of its argument struct, which
// must be the block its parameter table describes.
template <class Args, size_t kCount>
constexpr axrt_kernel_info_t kernel(const char* name, axrt_cpu_kernel_fn_t function,
                                    const std::array<axrt_kernel_param_info_t, kCount>& params) {
  return {name, function, params.data(), static_cast<uint32_t>(kCount),
          static_cast<uint32_t>(sizeof(Args))};
}

// Every kernel's parameter table and entry, generated from its contract
// (kernels/contracts.json): the tables, each checked against its argument
// struct, and AXRT_CPU_KERNEL_TABLE.
#include "kernel_contracts.inc"

constexpr axrt_kernel_info_t kKernels[] = {AXRT_CPU_KERNEL_TABLE};
constexpr CpuPrepack kPrepacks[] = {AXRT_CPU_PREPACK_TABLE};

}  // namespace

const axrt_kernel_library_t* cpu_kernel_library() noexcept {
  static const axrt_kernel_library_t library = {
      sizeof(axrt_kernel_library_t),
      AXRT_KERNEL_ABI_VERSION,
      kCpuLibraryVersion,
      kCpuLibraryName,
      kKernels,
      static_cast<uint32_t>(sizeof(kKernels) / sizeof(kKernels[0])),
      nullptr,  // init: the built-in kernels keep no per-device state
      nullptr,  // deinit
  };
  return &library;
}

std::span<const CpuPrepack> cpu_prepacks() noexcept { return kPrepacks; }

}  // namespace axrt::kernels
