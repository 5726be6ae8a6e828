// A caching allocator over a driver's raw allocation functions: freed blocks
// are kept per (size class, alignment) and handed out again, so steady-state
// allocation costs a mutex and a hash lookup. Size classes step by quarters
// of a power of two, which bounds the rounding waste at 25%.
#ifndef AXRT_RUNTIME_CACHING_POOL_H_
#define AXRT_RUNTIME_CACHING_POOL_H_

#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "axrt/device.h"

namespace axrt {

class CachingPool {
 public:
  struct Backend {
    // Returns nullptr when the memory is not there.
    void* (*allocate)(void* context, uint64_t size, uint64_t alignment);
    void (*free)(void* context, void* pointer, uint64_t size, uint64_t alignment);
    void* context;
  };

  // Cached (free) bytes beyond `max_cached_bytes` go straight back to the
  // backend instead of into the cache.
  CachingPool(Backend backend, uint64_t max_cached_bytes);
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // Returns a block of at least `size` bytes aligned to `alignment` (a power
  // of two), or nullptr when even a trimmed pool cannot get the memory.
  // `*out_block_size` is what deallocate() must be given back.
  void* allocate(uint64_t size, uint64_t alignment, uint64_t* out_block_size);
  void deallocate(void* pointer, uint64_t block_size, uint64_t alignment);

  // Frees cached blocks until at most `keep_bytes` stay cached; returns the
  // number of blocks freed.
  uint64_t trim(uint64_t keep_bytes);

  axrt_pool_statistics_t statistics() const;

  // Names the pool's counter track in traces ("device memory" under
  // "cpu:0"): while a trace runs, every allocation and deallocation samples
  // bytes in use, bytes reserved and allocations served.
  void set_trace_name(std::string_view process, std::string_view counter) noexcept;

  // The block size a request of `size` bytes is rounded up to.
  static uint64_t size_class(uint64_t size) noexcept;

 private:
  static uint64_t key(uint64_t block_size, uint64_t alignment) noexcept;
  uint64_t trim_locked(uint64_t keep_bytes);
  // Samples the counters into a running trace; mutex_ held.
  void trace_counters() const noexcept;

  Backend backend_;
  uint64_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<void*>> free_blocks_;
  uint64_t cached_bytes_ = 0;
  axrt_pool_statistics_t stats_{};
  uint32_t trace_track_ = 0;
  const char* trace_counter_ = nullptr;
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_CACHING_POOL_H_
