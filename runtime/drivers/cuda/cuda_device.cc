// CUDA devices: enumeration, the primary context, memory, device code. The
// device's threads for held work, the releaser and the reaper, are
// cuda_held.cc's.
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/numa.h"
#include "runtime/driver.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_graph.h"
#include "runtime/drivers/cuda/cuda_nvtx.h"
#include "runtime/drivers/cuda/nvml.h"

namespace axrt::cuda {
namespace {

thread_local int t_callback_depth = 0;

constexpr uint64_t kDefaultAlignment = 256;  // what cuMemAlloc guarantees
constexpr uint32_t kJitLogSize = 8192;

CudaDevice* cuda(Device* device) { return static_cast<CudaDevice*>(device); }

uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

// --- Caching pools over CUDA's allocators --------------------------------
//
// CUDA aligns to at least 256 bytes; larger alignments over-allocate, and
// the device remembers where such blocks really start.

uintptr_t align_block(CudaDevice* device, uintptr_t raw, uint64_t alignment) {
  const uintptr_t aligned = align_up(raw, alignment);
  if (aligned != raw) {
    std::lock_guard<std::mutex> lock(device->aligned_mutex);
    device->aligned_blocks[aligned] = raw;
  }
  return aligned;
}

uintptr_t unalign_block(CudaDevice* device, uintptr_t aligned) {
  std::lock_guard<std::mutex> lock(device->aligned_mutex);
  auto found = device->aligned_blocks.find(aligned);
  if (found == device->aligned_blocks.end()) return aligned;
  const uintptr_t raw = found->second;
  device->aligned_blocks.erase(found);
  return raw;
}

uint64_t padded_size(uint64_t size, uint64_t alignment) {
  return std::max<uint64_t>(alignment > kDefaultAlignment ? size + alignment : size, 1);
}

// Pinned host memory: pinning is a system call that locks pages, so blocks
// are cached rather than pinned per allocation (not measured here).
void* pinned_allocate(void* context, uint64_t size, uint64_t alignment) {
  auto* device = static_cast<CudaDevice*>(context);
  ContextScope scope(device);
  void* pointer = nullptr;
  const CUresult result = device->cu.cuMemHostAlloc(
      &pointer, padded_size(size, alignment), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (result != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<void*>(align_block(device, reinterpret_cast<uintptr_t>(pointer), alignment));
}

void pinned_free(void* context, void* pointer, uint64_t, uint64_t) {
  auto* device = static_cast<CudaDevice*>(context);
  ContextScope scope(device);
  device->cu.cuMemFreeHost(
      reinterpret_cast<void*>(unalign_block(device, reinterpret_cast<uintptr_t>(pointer))));
}

// Device memory where CUDA has no memory pools.
void* fallback_allocate(void* context, uint64_t size, uint64_t alignment) {
  auto* device = static_cast<CudaDevice*>(context);
  ContextScope scope(device);
  CUdeviceptr pointer = 0;
  if (device->cu.cuMemAlloc(&pointer, padded_size(size, alignment)) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<void*>(align_block(device, pointer, alignment));
}

void fallback_free(void* context, void* pointer, uint64_t, uint64_t) {
  auto* device = static_cast<CudaDevice*>(context);
  ContextScope scope(device);
  device->cu.cuMemFree(unalign_block(device, reinterpret_cast<uintptr_t>(pointer)));
}

// --- Device memory --------------------------------------------------------

uint64_t pool_attribute(CudaDevice* self, CUmemPool_attribute attribute) {
  cuuint64_t value = 0;
  self->cu.cuMemPoolGetAttribute(self->pool, attribute, &value);
  return value;
}

// Whether the pool may hand out a block freed on another stream whose free
// the allocation stream is not yet ordered after, by making the allocation
// stream wait for it (CUDA's default). Off but when memory runs out.
CUresult set_reuse_dependencies(CudaDevice* self, bool allow) {
  int value = allow ? 1 : 0;
  return self->cu.cuMemPoolSetAttribute(self->pool,
                                        CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &value);
}

axrt_status_t out_of_device_memory(CudaDevice* self, const char* call, CUresult result) {
  size_t free_bytes = 0, total_bytes = 0;
  self->cu.cuMemGetInfo(&free_bytes, &total_bytes);
  return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                     "{} is out of memory ({}: {}; {} of {} bytes free)", self->id(), call,
                     self->cu.describe(result), free_bytes, total_bytes);
}

axrt_status_t allocate_device_memory(CudaDevice* self, uint64_t size, uint64_t alignment,
                                     MemoryBlock* out) {
  ContextScope scope(self);
  if (!self->pool) {
    uint64_t block_size = 0;
    void* pointer = self->fallback_pool->allocate(size, alignment, &block_size);
    if (!pointer) return out_of_device_memory(self, "cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
    out->host_pointer = nullptr;
    out->device_address = reinterpret_cast<uintptr_t>(pointer);
    out->size = block_size;
    out->driver_data = reinterpret_cast<void*>(static_cast<uintptr_t>(alignment));
    return nullptr;
  }
  const uint64_t padded =
      std::max<uint64_t>(alignment > kDefaultAlignment ? size + alignment - kDefaultAlignment : size,
                         1);
  const CudaApi& cu = self->cu;
  CUdeviceptr raw = 0;
  const char* call = "cuMemAllocFromPoolAsync";
  // Never waits for the device: the allocation is ordered on the allocation
  // stream, which runs nothing but allocations and frees of blocks no work
  // uses any more, and the pool hands it no block another stream's work may
  // still use (internal dependencies are off, see initialize()). Streams
  // wait for `allocation_fence` on the device before their next work.
  std::lock_guard<std::mutex> lock(self->pool_mutex);
  const uint64_t reserved_before = pool_attribute(self, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  CUresult result = cu.cuMemAllocFromPoolAsync(&raw, padded, self->pool, self->allocation_stream);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    // Memory cached by the pool but not in use is not lost to us.
    cu.cuMemPoolTrimTo(self->pool, 0);
    result = cu.cuMemAllocFromPoolAsync(&raw, padded, self->pool, self->allocation_stream);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    // Last, blocks that streams free in their order: the allocation stream
    // then waits for the frees on the device, and with it every stream that
    // waits for the fence below, but still no thread does.
    set_reuse_dependencies(self, true);
    result = cu.cuMemAllocFromPoolAsync(&raw, padded, self->pool, self->allocation_stream);
    set_reuse_dependencies(self, false);
  }
  if (result == CUDA_SUCCESS) {
    call = "cuEventRecord";
    result = cu.cuEventRecord(self->allocation_fence, self->allocation_stream);
    if (result != CUDA_SUCCESS) cu.cuMemFreeAsync(raw, self->allocation_stream);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return out_of_device_memory(self, call, result);
  AXRT_RETURN_IF_ERROR(self->check(result, call));
  self->allocation_epoch.fetch_add(1, std::memory_order_release);
  if (pool_attribute(self, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) <= reserved_before) {
    self->reuse_count.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t aligned = align_up(raw, alignment);
  out->host_pointer = nullptr;
  out->device_address = aligned;
  out->size = padded - (aligned - raw);
  out->driver_data = reinterpret_cast<void*>(static_cast<uintptr_t>(raw));
  self->allocation_count.fetch_add(1, std::memory_order_relaxed);
  const uint64_t live = self->live_bytes.fetch_add(padded, std::memory_order_relaxed) + padded;
  uint64_t peak = self->peak_live_bytes.load(std::memory_order_relaxed);
  while (live > peak && !self->peak_live_bytes.compare_exchange_weak(peak, live)) {
  }
  return nullptr;
}

void free_device_memory(CudaDevice* self, const MemoryBlock& block) {
  if (!self->pool) {
    self->fallback_pool->deallocate(reinterpret_cast<void*>(block.device_address), block.size,
                                    reinterpret_cast<uint64_t>(block.driver_data));
    return;
  }
  const auto raw = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(block.driver_data));
  const uint64_t padded = block.size + (block.device_address - raw);
  ContextScope scope(self);
  // Every use of the block completed (streams hold references until then),
  // so returning it on the allocation stream orders it after nothing.
  self->cu.cuMemFreeAsync(raw, self->allocation_stream);
  self->free_count.fetch_add(1, std::memory_order_relaxed);
  self->live_bytes.fetch_sub(padded, std::memory_order_relaxed);
}

axrt_status_t device_allocate(Device* device, uint64_t size, uint64_t alignment,
                              axrt_memory_type_t memory_type, MemoryBlock* out_block) {
  CudaDevice* self = cuda(device);
  AXRT_RETURN_IF_ERROR(self->enter());
  if (memory_type == AXRT_MEMORY_TYPE_HOST_PINNED) {
    uint64_t block_size = 0;
    void* pointer = self->pinned_pool->allocate(size, alignment, &block_size);
    if (!pointer) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "cuMemHostAlloc could not pin {} bytes (aligned to {}) for {}", size,
                         alignment, self->id());
    }
    out_block->host_pointer = static_cast<std::byte*>(pointer);
    // Unified addressing: pinned memory has the same address on the device.
    out_block->device_address = reinterpret_cast<uintptr_t>(pointer);
    out_block->size = block_size;
    out_block->driver_data = reinterpret_cast<void*>(static_cast<uintptr_t>(alignment));
    return nullptr;
  }
  return allocate_device_memory(self, size, alignment, out_block);
}

void device_deallocate(Device* device, axrt_memory_type_t memory_type, const MemoryBlock& block) {
  CudaDevice* self = cuda(device);
  self->defer_or_run([self, memory_type, block] {
    if (memory_type == AXRT_MEMORY_TYPE_HOST_PINNED) {
      self->pinned_pool->deallocate(block.host_pointer, block.size,
                                    reinterpret_cast<uint64_t>(block.driver_data));
    } else {
      free_device_memory(self, block);
    }
  });
}

void device_query_pool_statistics(Device* device, axrt_pool_statistics_t* out) {
  CudaDevice* self = cuda(device);
  self->run_deferred();
  if (!self->pool) {
    *out = self->fallback_pool->statistics();
    out->struct_size = sizeof(*out);
    out->next = nullptr;
    return;
  }
  axrt_pool_statistics_t stats{};
  stats.reuse_count = self->reuse_count.load(std::memory_order_relaxed);
  stats.trim_count = self->trim_count.load(std::memory_order_relaxed);
  stats.allocation_count = self->allocation_count.load(std::memory_order_relaxed);
  stats.deallocation_count = self->free_count.load(std::memory_order_relaxed);
  stats.bytes_in_use = self->live_bytes.load(std::memory_order_relaxed);
  stats.peak_bytes_in_use = self->peak_live_bytes.load(std::memory_order_relaxed);
  stats.bytes_reserved = stats.bytes_in_use;
  if (self->pool && !self->is_lost()) {
    ContextScope scope(self);
    cuuint64_t reserved = 0;
    if (self->cu.cuMemPoolGetAttribute(self->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                       &reserved) == CUDA_SUCCESS) {
      stats.bytes_reserved = std::max<uint64_t>(reserved, stats.bytes_in_use);
    }
  }
  *out = stats;
  out->struct_size = sizeof(*out);
  out->next = nullptr;
}

axrt_status_t device_trim_pool(Device* device, uint64_t keep_bytes) {
  CudaDevice* self = cuda(device);
  AXRT_RETURN_IF_ERROR(self->enter());
  if (self->pool) {
    ContextScope scope(self);
    std::lock_guard<std::mutex> lock(self->pool_mutex);
    // Frees already queued on the allocation stream count as cached.
    AXRT_RETURN_IF_ERROR(
        self->check(self->cu.cuStreamSynchronize(self->allocation_stream), "cuStreamSynchronize"));
    const uint64_t before = pool_attribute(self, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    AXRT_RETURN_IF_ERROR(self->check(self->cu.cuMemPoolTrimTo(self->pool, keep_bytes),
                                     "cuMemPoolTrimTo"));
    // CUDA does not say how many blocks went; count the trims that freed.
    if (pool_attribute(self, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) < before) {
      self->trim_count.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    self->fallback_pool->trim(keep_bytes);
  }
  self->pinned_pool->trim(0);
  return nullptr;
}

axrt_status_t device_synchronize(Device* device) { return synchronize_device(cuda(device)); }

void device_destroy(Device* device) { delete cuda(device); }

const DeviceVtable kCudaDeviceVtable = {
    .destroy = device_destroy,
    .allocate = device_allocate,
    .deallocate = device_deallocate,
    .query_pool_statistics = device_query_pool_statistics,
    .trim_pool = device_trim_pool,
    .create_stream = create_stream,
    .create_event = create_event,
    .synchronize = device_synchronize,
    .load_code = load_code,
    .query_peer = query_peer,
    .create_graph = create_graph,
};

axrt_status_t enumerate_devices(Instance*, DriverDevices* out) {
  std::string reason;
  const CudaApi* api = cuda_api(&reason);
  if (!api) {
    out->availability = reason;
    return nullptr;
  }
  int count = 0;
  const CUresult result = api->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    out->availability = fmt::format("cuDeviceGetCount failed: {}", api->describe(result));
    return nullptr;
  }
  if (count == 0) {
    out->availability = "the NVIDIA driver reports no CUDA device";
    return nullptr;
  }
  std::vector<std::string> skipped;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = 0;
    CUresult got = api->cuDeviceGet(&handle, ordinal);
    if (got != CUDA_SUCCESS) {
      skipped.push_back(fmt::format("device {}: cuDeviceGet: {}", ordinal, api->describe(got)));
      continue;
    }
    auto device = std::make_unique<CudaDevice>(*api, handle, static_cast<int>(out->devices.size()));
    if (axrt_status_t status = device->initialize()) {
      StatusPtr owned(status);
      skipped.push_back(fmt::format("device {}: {}", ordinal, axrt_status_message(status)));
      continue;
    }
    out->devices.push_back(device.get());
    device.release();
  }
  if (out->devices.empty()) {
    out->availability = fmt::format("no CUDA device could be used: {}", fmt::join(skipped, "; "));
  }
  return nullptr;
}

// --- Device code ----------------------------------------------------------

// Whether a code object built for `target` (comma-separated sm_XY and
// compute_XY entries; empty: unknown) can run on compute capability
// major.minor: a cubin for the same major and a lower or equal minor
// (architecture-specific "a" builds only on their own), PTX for anything
// at least as new.
bool target_fits(std::string_view target, int major, int minor, bool* out_known) {
  *out_known = false;
  bool fits = false;
  size_t begin = 0;
  while (begin <= target.size()) {
    size_t end = target.find(',', begin);
    if (end == std::string_view::npos) end = target.size();
    std::string_view entry = target.substr(begin, end - begin);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    begin = end + 1;
    const bool ptx = entry.rfind("compute_", 0) == 0;
    const bool sass = entry.rfind("sm_", 0) == 0;
    if (!ptx && !sass) continue;
    std::string_view digits = entry.substr(ptx ? 8 : 3);
    bool specific = false;
    if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
      specific = true;
      digits.remove_suffix(1);
    }
    if (digits.size() < 2 || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    *out_known = true;
    const int value = std::stoi(std::string(digits));
    const int t_major = value / 10, t_minor = value % 10;
    if (specific) {
      fits |= t_major == major && t_minor == minor;
    } else if (ptx) {
      fits |= t_major < major || (t_major == major && t_minor <= minor);
    } else {
      fits |= t_major == major && t_minor <= minor;
    }
  }
  return fits;
}

const char* kind_name(DeviceCodeKind kind) {
  switch (kind) {
    case DeviceCodeKind::kCudaCubin:
      return "cubin";
    case DeviceCodeKind::kCudaFatbin:
      return "fatbin";
    case DeviceCodeKind::kCudaPtx:
      return "PTX";
  }
  return "code";
}

std::string log_text(const std::vector<char>& log) {
  std::string text(log.data(), strnlen(log.data(), log.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

class CudaCode final : public DeviceCode {
 public:
  CudaCode(CudaDevice* device, std::string what) : device_(device), what_(std::move(what)) {}

  ~CudaCode() override {
    CudaDevice* device = device_;
    CUlibrary library = library_;
    CUmodule module = module_;
    device->defer_or_run([device, library, module] {
      ContextScope scope(device);
      if (library) device->cu.cuLibraryUnload(library);
      if (module) device->cu.cuModuleUnload(module);
    });
  }

  axrt_status_t load(std::span<const std::byte> image, DeviceCodeKind kind) {
    const CudaApi& cu = device_->cu;
    // PTX is text the JIT reads up to a NUL, which the file need not have.
    std::string ptx;
    const void* data = image.data();
    if (kind == DeviceCodeKind::kCudaPtx) {
      ptx.assign(reinterpret_cast<const char*>(image.data()), image.size());
      data = ptx.c_str();
    }
    std::vector<char> info_log(kJitLogSize, '\0'), error_log(kJitLogSize, '\0');
    CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {info_log.data(), reinterpret_cast<void*>(uintptr_t{kJitLogSize}),
                      error_log.data(), reinterpret_cast<void*>(uintptr_t{kJitLogSize})};
    ContextScope scope(device_);
    CUresult result;
    const char* call;
    if (cu.cuLibraryLoadData && cu.cuLibraryGetKernel && cu.cuKernelGetFunction &&
        cu.cuLibraryUnload) {
      call = "cuLibraryLoadData";
      result = cu.cuLibraryLoadData(&library_, data, options, values, 4, nullptr, nullptr, 0);
    } else {
      call = "cuModuleLoadDataEx";
      result = cu.cuModuleLoadDataEx(&module_, data, 4, options, values);
    }
    if (result == CUDA_SUCCESS) return nullptr;
    library_ = nullptr;
    module_ = nullptr;
    if (device_->is_lost() || is_sticky_error(result)) return device_->check(result, call);
    const std::string errors = log_text(error_log);
    const std::string info = log_text(info_log);
    std::string logs;
    if (!errors.empty()) logs += fmt::format("; JIT error log: {}", errors);
    if (!info.empty()) logs += fmt::format("; JIT info log: {}", info);
    return image_status(result, call, logs);
  }

  // An image the driver refused: at load, or at the first kernel looked up
  // when the driver loads lazily (CUDA 12.2 and later by default, where a
  // broken PTX surfaces from cuLibraryGetKernel).
  axrt_status_t image_status(CUresult result, const char* call, const std::string& logs) const {
    axrt_status_code_t code = AXRT_STATUS_CODE_INVALID_ARGUMENT;
    if (result == CUDA_ERROR_NO_BINARY_FOR_GPU || result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
        result == CUDA_ERROR_JIT_COMPILER_NOT_FOUND || result == CUDA_ERROR_NOT_SUPPORTED) {
      code = AXRT_STATUS_CODE_UNIMPLEMENTED;
    } else if (result == CUDA_ERROR_OUT_OF_MEMORY) {
      code = AXRT_STATUS_CODE_RESOURCE_EXHAUSTED;
    }
    return make_status(code, "{} could not be loaded on {} (sm_{}{}): {}: {}{}", what_,
                       device_->id(), device_->properties.compute_capability_major,
                       device_->properties.compute_capability_minor, call,
                       device_->cu.describe(result), logs);
  }

  static bool is_image_error(CUresult result) noexcept {
    return result == CUDA_ERROR_INVALID_PTX || result == CUDA_ERROR_INVALID_IMAGE ||
           result == CUDA_ERROR_NO_BINARY_FOR_GPU || result == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
           result == CUDA_ERROR_JIT_COMPILER_NOT_FOUND;
  }

  axrt_status_t get_kernel(const DeviceKernelRequest& request, DeviceKernel* out) override {
    AXRT_RETURN_IF_ERROR(device_->enter());
    const CudaApi& cu = device_->cu;
    const std::string symbol(request.symbol);
    ContextScope scope(device_);
    CUfunction function = nullptr;
    CUresult result;
    const char* call;
    if (library_) {
      CUkernel kernel = nullptr;
      call = "cuLibraryGetKernel";
      result = cu.cuLibraryGetKernel(&kernel, library_, symbol.c_str());
      if (result == CUDA_SUCCESS) {
        call = "cuKernelGetFunction";
        result = cu.cuKernelGetFunction(&function, kernel);
      }
    } else {
      call = "cuModuleGetFunction";
      result = cu.cuModuleGetFunction(&function, module_, symbol.c_str());
    }
    if (result == CUDA_ERROR_NOT_FOUND) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND, "{} has no kernel '{}'", what_, symbol);
    }
    if (is_image_error(result) && !device_->is_lost()) return image_status(result, call, "");
    AXRT_RETURN_IF_ERROR(device_->check(result, call));

    AXRT_RETURN_IF_ERROR(check_params(function, request, &out->params_size));

    int max_threads = 0;
    AXRT_RETURN_IF_ERROR(device_->check(
        cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
        "cuFuncGetAttribute"));
    const uint64_t threads = uint64_t{request.workgroup_size.x} * request.workgroup_size.y *
                             request.workgroup_size.z;
    if (threads > static_cast<uint64_t>(max_threads)) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "kernel '{}' of {} runs at most {} threads per block (its launch bounds "
                         "or registers); the executable launches {}",
                         symbol, what_, max_threads, threads);
    }
    if (request.dynamic_shared_memory > 0) {
      int static_shared = 0;
      cu.cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function);
      const CUresult set = cu.cuFuncSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
          static_cast<int>(request.dynamic_shared_memory));
      if (set != CUDA_SUCCESS) {
        if (device_->is_lost() || is_sticky_error(set)) return device_->check(set, "cuFuncSetAttribute");
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "kernel '{}' of {} cannot have {} bytes of dynamic shared memory on {} "
                           "(it uses {} bytes of static shared memory; the device allows {} per "
                           "block): {}",
                           symbol, what_, request.dynamic_shared_memory, device_->id(),
                           static_shared, device_->properties.max_shared_memory_per_workgroup,
                           cu.describe(set));
      }
    }
    const axrt_kernel_dim3_t& cluster = request.cluster_dims;
    const bool clustered = cluster.x * cluster.y * cluster.z > 1;
    if (clustered && (!device_->cluster_launch || !cu.cuLaunchKernelEx)) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "kernel '{}' of {} launches in clusters of ({}, {}, {}), which {} {}",
                         symbol, what_, cluster.x, cluster.y, cluster.z, device_->id(),
                         device_->cluster_launch ? "cannot launch: the driver lacks cuLaunchKernelEx"
                                                 : "does not support (sm_90 or later needed)");
    }
    out->handle = function;
    out->workgroup_size = request.workgroup_size;
    out->cluster_dims = clustered ? cluster : axrt_kernel_dim3_t{0, 0, 0};
    out->dynamic_shared_memory = request.dynamic_shared_memory;
    return nullptr;
  }

 private:
  // The kernel receives the argument block as its parameter buffer. A kernel
  // declared with the block's fields as its parameters takes the block up to
  // the end of its last field (the block's tail padding is not a parameter);
  // one declared with the block as a single struct takes all of it.
  axrt_status_t check_params(CUfunction function, const DeviceKernelRequest& request,
                             uint32_t* out_params_size) {
    const size_t count = request.param_sizes.size();
    const uint32_t natural =
        count == 0 ? 0 : request.param_offsets[count - 1] + request.param_sizes[count - 1];
    *out_params_size = natural;
    const CudaApi& cu = device_->cu;
    if (!cu.cuFuncGetParamInfo) return nullptr;  // trust the executable
    std::vector<std::pair<size_t, size_t>> actual;
    for (size_t i = 0; i < 1024; ++i) {
      size_t offset = 0, size = 0;
      const CUresult result = cu.cuFuncGetParamInfo(function, i, &offset, &size);
      if (result == CUDA_ERROR_INVALID_VALUE) break;
      if (result == CUDA_ERROR_NOT_SUPPORTED) return nullptr;
      AXRT_RETURN_IF_ERROR(device_->check(result, "cuFuncGetParamInfo"));
      actual.emplace_back(offset, size);
    }
    bool natural_match = actual.size() == count;
    for (size_t i = 0; natural_match && i < count; ++i) {
      natural_match = actual[i].first == request.param_offsets[i] &&
                      actual[i].second == request.param_sizes[i];
    }
    if (natural_match) return nullptr;
    if (actual.size() == 1 && actual[0].first == 0 && actual[0].second == request.args_size) {
      *out_params_size = request.args_size;
      return nullptr;
    }
    auto show = [](auto&& pairs) {
      std::vector<std::string> parts;
      for (const auto& [offset, size] : pairs) parts.push_back(fmt::format("{}@{}", size, offset));
      return parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, ", "));
    };
    std::vector<std::pair<size_t, size_t>> expected;
    for (size_t i = 0; i < count; ++i) {
      expected.emplace_back(request.param_offsets[i], request.param_sizes[i]);
    }
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "kernel '{}' of {} takes parameters (size@offset) {}, but the executable "
                       "lays out {} ({} bytes in all)",
                       request.symbol, what_, show(actual), show(expected), request.args_size);
  }

  CudaDevice* device_;
  std::string what_;
  CUlibrary library_ = nullptr;
  CUmodule module_ = nullptr;
};

}  // namespace

// --- Topology -------------------------------------------------------------

axrt_status_t query_peer(Device* device, Device* peer, axrt_device_peer_info_t* out) {
  CudaDevice* self = cuda(device);
  CudaDevice* other = cuda(peer);
  const CudaApi& cu = self->cu;
  // A driver without these entry points reports no direct path.
  int access = 0, atomics = 0, rank = 0;
  if (cu.cuDeviceCanAccessPeer) {
    AXRT_RETURN_IF_ERROR(
        self->check(cu.cuDeviceCanAccessPeer(&access, self->cu_device, other->cu_device),
                    "cuDeviceCanAccessPeer"));
  } else if (cu.cuDeviceGetP2PAttribute) {
    AXRT_RETURN_IF_ERROR(self->check(
        cu.cuDeviceGetP2PAttribute(&access, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED,
                                   self->cu_device, other->cu_device),
        "cuDeviceGetP2PAttribute"));
  }
  if (access && cu.cuDeviceGetP2PAttribute) {
    AXRT_RETURN_IF_ERROR(self->check(
        cu.cuDeviceGetP2PAttribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                   self->cu_device, other->cu_device),
        "cuDeviceGetP2PAttribute"));
    AXRT_RETURN_IF_ERROR(self->check(
        cu.cuDeviceGetP2PAttribute(&rank, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
                                   self->cu_device, other->cu_device),
        "cuDeviceGetP2PAttribute"));
  }
  const uint32_t nvlinks = self->pci_bus_id.empty() || other->pci_bus_id.empty()
                               ? 0
                               : nvlink_count(self->pci_bus_id, other->pci_bus_id);
  out->direct_access = access != 0;
  out->native_atomics = access != 0 && atomics != 0;
  out->performance_rank = access != 0 ? rank : 0;
  out->link_count = nvlinks;
  out->link = nvlinks > 0   ? AXRT_DEVICE_LINK_NVLINK
              : access != 0 ? AXRT_DEVICE_LINK_PCIE
                            : AXRT_DEVICE_LINK_NONE;
  return nullptr;
}

// --- CudaDevice -----------------------------------------------------------

bool in_cuda_callback() noexcept { return t_callback_depth > 0; }

// Used by the stream code around host functions.
void enter_cuda_callback() noexcept { ++t_callback_depth; }
void leave_cuda_callback() noexcept { --t_callback_depth; }

ContextScope::ContextScope(const CudaDevice* device) : cu_(device->cu) {
  if (cu_.cuCtxGetCurrent(&previous_) != CUDA_SUCCESS) previous_ = nullptr;
  if (previous_ != device->context) {
    switched_ = cu_.cuCtxSetCurrent(device->context) == CUDA_SUCCESS;
  }
}

ContextScope::~ContextScope() {
  if (switched_) cu_.cuCtxSetCurrent(previous_);
}

CudaDevice::CudaDevice(const CudaApi& api, CUdevice device, int ordinal)
    : Device(&kCudaDeviceVtable), cu(api), cu_device(device) {
  properties.ordinal = static_cast<uint32_t>(ordinal);
  destroy = [](Object* object) { device_destroy(static_cast<Device*>(object)); };
}

axrt_status_t CudaDevice::initialize() {
  axrt_device_properties_t& p = properties;
  p.struct_size = sizeof(p);
  fmt::format_to_n(p.id, sizeof(p.id) - 1, "cuda:{}", p.ordinal);
  fmt::format_to_n(p.driver, sizeof(p.driver) - 1, "cuda");
  char name[sizeof(p.name)] = {};
  AXRT_RETURN_IF_ERROR(check(cu.cuDeviceGetName(name, sizeof(name) - 1, cu_device),
                             "cuDeviceGetName"));
  std::memcpy(p.name, name, sizeof(name) - 1);
  size_t total = 0;
  AXRT_RETURN_IF_ERROR(check(cu.cuDeviceTotalMem(&total, cu_device), "cuDeviceTotalMem"));
  auto attribute = [&](CUdevice_attribute which, int* value) {
    return check(cu.cuDeviceGetAttribute(value, which, cu_device), "cuDeviceGetAttribute");
  };
  int major = 0, minor = 0, sms = 0, threads = 0, block[3] = {}, grid[3] = {}, shared = 0,
      shared_optin = 0, unified = 0, pools = 0, clusters = 0;
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &block[0]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &block[1]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &block[2]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &grid[0]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &grid[1]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &grid[2]));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &shared));
  AXRT_RETURN_IF_ERROR(
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &shared_optin));
  AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &unified));
  if (cu.has_pools) {
    AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, &pools));
  }
  if (major >= 9) {
    AXRT_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, &clusters));
  }
  if (!unified) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{} ({}) lacks unified addressing, which axrt relies on", p.id, p.name);
  }
  cluster_launch = clusters != 0;
  p.type = AXRT_DEVICE_TYPE_CUDA;
  p.flags = AXRT_DEVICE_FLAG_EVENT_TIMING | AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION;
  p.compute_units = static_cast<uint32_t>(sms);
  p.compute_capability_major = major;
  p.compute_capability_minor = minor;
  p.total_memory = total;
  p.buffer_alignment = kDefaultAlignment;
  p.max_buffer_alignment = uint64_t{1} << 21;
  for (int d = 0; d < 3; ++d) {
    p.max_workgroup_size[d] = static_cast<uint32_t>(block[d]);
    p.max_workgroup_count[d] = static_cast<uint32_t>(grid[d]);
  }
  p.max_workgroup_invocations = static_cast<uint32_t>(threads);
  p.max_shared_memory_per_workgroup = static_cast<uint32_t>(std::max(shared, shared_optin));
  if (cu.cuDeviceGetPCIBusId) {
    char bus_id[32] = {};
    if (cu.cuDeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, cu_device) == CUDA_SUCCESS) {
      pci_bus_id = bus_id;
    }
  }
  p.numa_node = read_numa_node();

  AXRT_RETURN_IF_ERROR(
      check(cu.cuDevicePrimaryCtxRetain(&context, cu_device), "cuDevicePrimaryCtxRetain"));
  ContextScope scope(this);
  AXRT_RETURN_IF_ERROR(
      check(cu.cuStreamCreate(&allocation_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  nvtx::name_stream(allocation_stream, fmt::format("allocations on {}", p.id).c_str());
  if (pools) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = static_cast<int>(cu_device);
    AXRT_RETURN_IF_ERROR(check(cu.cuMemPoolCreate(&pool, &props), "cuMemPoolCreate"));
    // Keep up to a quarter of the device's memory cached between uses
    // rather than returning it at every synchronisation; trim() gives it
    // back on demand.
    cuuint64_t threshold = total / 4;
    AXRT_RETURN_IF_ERROR(check(
        cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
        "cuMemPoolSetAttribute"));
    // Allocations never wait for other streams' work (allocate_device_memory).
    AXRT_RETURN_IF_ERROR(check(set_reuse_dependencies(this, false), "cuMemPoolSetAttribute"));
    AXRT_RETURN_IF_ERROR(
        check(cu.cuEventCreate(&allocation_fence, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  }
  const CachingPool::Backend backend{pinned_allocate, pinned_free, this};
  pinned_pool = std::make_unique<CachingPool>(backend, uint64_t{1} << 30);
  if (!pool) {
    const CachingPool::Backend device_backend{fallback_allocate, fallback_free, this};
    fallback_pool = std::make_unique<CachingPool>(device_backend, total / 4);
  }
  return nullptr;
}

int32_t CudaDevice::read_numa_node() const {
  // The kernel's node of the device's PCI bus first; then the driver's
  // (older drivers refuse the attribute, and that is no error); then the
  // only node of a single-node host.
  if (const int32_t node = pci_bus_id.empty() ? -1 : pci_numa_node(pci_bus_id); node >= 0) {
    return node;
  }
  int host_node = -1;
  if (cu.cuDeviceGetAttribute(&host_node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, cu_device) ==
          CUDA_SUCCESS &&
      host_node >= 0) {
    return host_node;
  }
  return single_host_numa_node();
}

void CudaDevice::prepare_peer_access(CudaDevice* peer) {
  const uint32_t index = peer->properties.ordinal;
  {
    std::lock_guard<std::mutex> lock(peer_mutex_);
    if (peer_prepared_.size() <= index) peer_prepared_.resize(index + 1, false);
    // Once per pair; a copy racing with the first one may go before access
    // is enabled, which CUDA then stages, as it does when there is none.
    if (peer_prepared_[index]) return;
    peer_prepared_[index] = true;
  }
  int access = 0;
  if (!cu.cuDeviceCanAccessPeer ||
      cu.cuDeviceCanAccessPeer(&access, cu_device, peer->cu_device) != CUDA_SUCCESS || !access) {
    return;  // no direct path: cuMemcpyPeerAsync stages through host memory
  }
  ContextScope scope(this);
  // The results are left alone: access that was enabled already (another
  // user of the primary context) is as good, and access CUDA refuses (too
  // many peers) leaves the copies to CUDA's staging, which is correct too.
  if (cu.cuCtxEnablePeerAccess) cu.cuCtxEnablePeerAccess(peer->context, 0);
  // Memory of a pool is reached only by the devices the pool grants access
  // to, whatever cuCtxEnablePeerAccess did.
  if (peer->pool && cu.cuMemPoolSetAccess) {
    CUmemAccessDesc access_desc{};
    access_desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access_desc.location.id = static_cast<int>(cu_device);
    access_desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    cu.cuMemPoolSetAccess(peer->pool, &access_desc, 1);
  }
}

CudaDevice::~CudaDevice() {
  stop_threads();
  run_deferred();
  pinned_pool.reset();
  fallback_pool.reset();
  trace_clock_.reset();  // gives its event back
  if (context) {
    {
      ContextScope scope(this);
      for (CUevent fence : fences_) cu.cuEventDestroy(fence);
      for (CUevent event : timing_events_) cu.cuEventDestroy(event);
      if (allocation_fence) cu.cuEventDestroy(allocation_fence);
      if (allocation_stream) {
        cu.cuStreamSynchronize(allocation_stream);
        cu.cuStreamDestroy(allocation_stream);
      }
      if (pool) cu.cuMemPoolDestroy(pool);
    }
    // Released, never reset: other users of the primary context keep it.
    cu.cuDevicePrimaryCtxRelease(cu_device);
  }
}

axrt_status_t CudaDevice::check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return nullptr;
  if (is_sticky_error(result)) {
    mark_lost(result, call);
    return lost_status();
  }
  if (is_lost()) return lost_status();
  axrt_status_code_t code = AXRT_STATUS_CODE_INTERNAL;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      code = AXRT_STATUS_CODE_RESOURCE_EXHAUSTED;
      break;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
      code = AXRT_STATUS_CODE_INVALID_ARGUMENT;
      break;
    case CUDA_ERROR_NOT_FOUND:
      code = AXRT_STATUS_CODE_NOT_FOUND;
      break;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      code = AXRT_STATUS_CODE_UNIMPLEMENTED;
      break;
    case CUDA_ERROR_NOT_PERMITTED:
      code = AXRT_STATUS_CODE_FAILED_PRECONDITION;
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
      code = AXRT_STATUS_CODE_UNAVAILABLE;
      break;
    default:
      break;
  }
  return make_status(code, "{} on {}: {}", call, id(), cu.describe(result));
}

void CudaDevice::mark_lost(CUresult result, const char* call) {
  std::string what;
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (lost_.load(std::memory_order_relaxed)) return;
    lost_result_ = result;
    lost_reason_ = fmt::format("{} failed with {}", call, cu.describe(result));
    what = fmt::format("device lost: {}", lost_reason_);
    lost_.store(true, std::memory_order_release);
  }
  // Every stream of the device fails with it, and what streams hold back
  // is abandoned by the releaser: CUDA runs nothing more, so no host
  // function will kick it.
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (CudaStream* stream : streams_) {
    stream->count_failure(what);
    if (stream->holding.load(std::memory_order_acquire)) kick(stream);
  }
}

axrt_status_t CudaDevice::lost_status() const {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return make_status(AXRT_STATUS_CODE_DEVICE_LOST,
                     "{} is lost: {}; the CUDA context cannot be used again (recreate the "
                     "instance after the cause is fixed)",
                     id(), lost_reason_);
}

axrt_status_t CudaDevice::enter() {
  if (has_deferred_.load(std::memory_order_acquire)) run_deferred();
  if (is_lost()) return lost_status();
  return nullptr;
}

void CudaDevice::add_stream(CudaStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  streams_.push_back(stream);
}

void CudaDevice::remove_stream(CudaStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  std::erase(streams_, stream);
}

void CudaDevice::defer_or_run(std::function<void()> work) {
  if (!in_cuda_callback()) {
    work();
    return;
  }
  std::lock_guard<std::mutex> lock(deferred_mutex_);
  deferred_.push_back(std::move(work));
  has_deferred_.store(true, std::memory_order_release);
}

void CudaDevice::run_deferred() {
  if (in_cuda_callback()) return;
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex_);
    work.swap(deferred_);
    has_deferred_.store(false, std::memory_order_release);
  }
  for (auto& item : work) item();
}

axrt_status_t CudaDevice::acquire_fence(CUevent* out) {
  {
    std::lock_guard<std::mutex> lock(fences_mutex_);
    if (!fences_.empty()) {
      *out = fences_.back();
      fences_.pop_back();
      return nullptr;
    }
  }
  return check(cu.cuEventCreate(out, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
}

void CudaDevice::recycle_fence(CUevent event) {
  std::lock_guard<std::mutex> lock(fences_mutex_);
  fences_.push_back(event);
}

axrt_status_t load_code(Device* device, DeviceCodeKind kind, std::string_view target,
                        std::span<const std::byte> image, std::shared_ptr<DeviceCode>* out) {
  CudaDevice* self = cuda(device);
  AXRT_RETURN_IF_ERROR(self->enter());
  const int major = self->properties.compute_capability_major;
  const int minor = self->properties.compute_capability_minor;
  const std::string what = fmt::format("CUDA {} for {}", kind_name(kind),
                                       target.empty() ? std::string_view("any target") : target);
  bool known = false;
  if (!target_fits(target, major, minor, &known) && known) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED, "{} cannot run on {} (sm_{}{})", what,
                       self->id(), major, minor);
  }
  auto code = std::make_shared<CudaCode>(self, what);
  AXRT_RETURN_IF_ERROR(code->load(image, kind));
  *out = std::move(code);
  return nullptr;
}

}  // namespace axrt::cuda

AXRT_DECLARE_DRIVER_FACTORY(cuda);
const axrt::DriverFactory AXRT_DRIVER_FACTORY(cuda) = {
    .name = "cuda",
    .enumerate_devices = axrt::cuda::enumerate_devices,
};
