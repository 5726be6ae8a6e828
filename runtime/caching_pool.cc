#include "runtime/caching_pool.h"

#include <algorithm>
#include <bit>

#include "trace/trace.h"

namespace axrt {

namespace {
constexpr uint64_t kMinBlock = 256;
}  // namespace

CachingPool::CachingPool(Backend backend, uint64_t max_cached_bytes)
    : backend_(backend), max_cached_bytes_(max_cached_bytes) {
  stats_.struct_size = sizeof(stats_);
}

CachingPool::~CachingPool() {
  trim(0);
  trace::retire_track(trace_track_);
}

uint64_t CachingPool::size_class(uint64_t size) noexcept {
  if (size <= kMinBlock) return kMinBlock;
  // 2^(k-1) < size <= 2^k; classes step by 2^(k-3) within that octave.
  const int k = std::bit_width(size - 1);
  const uint64_t step = uint64_t{1} << (k - 3);
  return (size + step - 1) & ~(step - 1);
}

uint64_t CachingPool::key(uint64_t block_size, uint64_t alignment) noexcept {
  return block_size | (static_cast<uint64_t>(std::countr_zero(alignment)) << 58);
}

void* CachingPool::allocate(uint64_t size, uint64_t alignment, uint64_t* out_block_size) {
  if (size > (uint64_t{1} << 56)) return nullptr;
  const uint64_t block_size = size_class(size);
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = free_blocks_.find(key(block_size, alignment));
  void* pointer = nullptr;
  if (it != free_blocks_.end() && !it->second.empty()) {
    pointer = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= block_size;
    ++stats_.reuse_count;
  } else {
    lock.unlock();
    pointer = backend_.allocate(backend_.context, block_size, alignment);
    lock.lock();
    if (!pointer && cached_bytes_ > 0) {
      // Hand the cache back and try once more before giving up.
      trim_locked(0);
      lock.unlock();
      pointer = backend_.allocate(backend_.context, block_size, alignment);
      lock.lock();
    }
    if (!pointer) return nullptr;
    stats_.bytes_reserved += block_size;
  }
  ++stats_.allocation_count;
  stats_.bytes_in_use += block_size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  if (trace::active()) trace_counters();
  *out_block_size = block_size;
  return pointer;
}

void CachingPool::deallocate(void* pointer, uint64_t block_size, uint64_t alignment) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++stats_.deallocation_count;
  stats_.bytes_in_use -= block_size;
  if (cached_bytes_ + block_size <= max_cached_bytes_) {
    try {
      free_blocks_[key(block_size, alignment)].push_back(pointer);
      cached_bytes_ += block_size;
      if (trace::active()) trace_counters();
      return;
    } catch (...) {
      // No room to remember the block: give it back instead.
    }
  }
  stats_.bytes_reserved -= block_size;
  ++stats_.trim_count;
  if (trace::active()) trace_counters();
  lock.unlock();
  backend_.free(backend_.context, pointer, block_size, alignment);
}

uint64_t CachingPool::trim(uint64_t keep_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t freed = trim_locked(keep_bytes);
  if (freed && trace::active()) trace_counters();
  return freed;
}

void CachingPool::set_trace_name(std::string_view process, std::string_view counter) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  trace::retire_track(trace_track_);
  trace_track_ = 0;
  try {
    trace_counter_ = trace::intern(counter);
    trace_track_ = trace::register_track(process, counter);
  } catch (...) {
    // Without a name the pool records no counters; nothing else depends on it.
  }
}

void CachingPool::trace_counters() const noexcept {
  if (!trace_track_) return;
  trace::Record r;
  r.kind = trace::Kind::kCounter;
  r.begin = r.end = trace::now();
  r.track = trace_track_;
  r.name = trace_counter_;
  r.a[0] = static_cast<int64_t>(stats_.bytes_in_use);
  r.a[1] = static_cast<int64_t>(stats_.bytes_reserved);
  r.a[2] = static_cast<int64_t>(stats_.allocation_count);
  trace::emit(r);
}

uint64_t CachingPool::trim_locked(uint64_t keep_bytes) {
  uint64_t freed = 0;
  for (auto it = free_blocks_.begin(); it != free_blocks_.end() && cached_bytes_ > keep_bytes;) {
    const uint64_t block_size = it->first & ((uint64_t{1} << 58) - 1);
    const uint64_t alignment = uint64_t{1} << (it->first >> 58);
    std::vector<void*>& blocks = it->second;
    while (!blocks.empty() && cached_bytes_ > keep_bytes) {
      backend_.free(backend_.context, blocks.back(), block_size, alignment);
      blocks.pop_back();
      cached_bytes_ -= block_size;
      stats_.bytes_reserved -= block_size;
      ++stats_.trim_count;
      ++freed;
    }
    it = blocks.empty() ? free_blocks_.erase(it) : std::next(it);
  }
  return freed;
}

axrt_pool_statistics_t CachingPool::statistics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace axrt
