#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <set>

#include "runtime/caching_pool.h"

using namespace axrt;

namespace {

struct CountingBackend {
  int live = 0;
  int allocations = 0;
  bool fail = false;
  static void* allocate(void* context, uint64_t size, uint64_t alignment) {
    auto* self = static_cast<CountingBackend*>(context);
    if (self->fail) return nullptr;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size) != 0) return nullptr;
    ++self->live;
    ++self->allocations;
    return p;
  }
  static void free(void* context, void* pointer, uint64_t, uint64_t) {
    --static_cast<CountingBackend*>(context)->live;
    std::free(pointer);
  }
  CachingPool::Backend backend() { return {allocate, free, this}; }
};

}  // namespace

TEST_CASE("size classes round up by at most a quarter") {
  CHECK(CachingPool::size_class(1) == 256);
  CHECK(CachingPool::size_class(256) == 256);
  CHECK(CachingPool::size_class(257) == 320);
  CHECK(CachingPool::size_class(512) == 512);
  CHECK(CachingPool::size_class(513) == 640);
  for (uint64_t size = 300; size < (uint64_t{1} << 40); size = size * 3 + 7) {
    const uint64_t rounded = CachingPool::size_class(size);
    CHECK(rounded >= size);
    CHECK(rounded - size <= size / 4 + 1);
  }
}

TEST_CASE("freed blocks are reused and statistics follow") {
  CountingBackend counting;
  CachingPool pool(counting.backend(), uint64_t{1} << 30);
  uint64_t block = 0;
  void* a = pool.allocate(1000, 256, &block);
  REQUIRE(a);
  CHECK(reinterpret_cast<uintptr_t>(a) % 256 == 0);
  pool.deallocate(a, block, 256);
  void* b = pool.allocate(1000, 256, &block);
  CHECK(b == a);
  CHECK(counting.allocations == 1);
  auto stats = pool.statistics();
  CHECK(stats.allocation_count == 2);
  CHECK(stats.reuse_count == 1);
  CHECK(stats.deallocation_count == 1);
  CHECK(stats.bytes_in_use == block);
  CHECK(stats.bytes_reserved == block);
  pool.deallocate(b, block, 256);
  CHECK(pool.statistics().bytes_in_use == 0);
  CHECK(pool.trim(0) == 1);
  CHECK(counting.live == 0);
  CHECK(pool.statistics().bytes_reserved == 0);
}

TEST_CASE("different alignments never share blocks") {
  CountingBackend counting;
  CachingPool pool(counting.backend(), uint64_t{1} << 30);
  uint64_t block = 0;
  void* a = pool.allocate(4096, 256, &block);
  pool.deallocate(a, block, 256);
  void* b = pool.allocate(4096, 65536, &block);
  CHECK(reinterpret_cast<uintptr_t>(b) % 65536 == 0);
  pool.deallocate(b, block, 65536);
  CHECK(counting.allocations == 2);
}

TEST_CASE("trim keeps the requested amount cached") {
  CountingBackend counting;
  CachingPool pool(counting.backend(), uint64_t{1} << 30);
  std::set<void*> blocks;
  uint64_t block = 0;
  for (int i = 0; i < 8; ++i) blocks.insert(pool.allocate(1 << 20, 256, &block));
  for (void* p : blocks) pool.deallocate(p, block, 256);
  pool.trim(3 * block);
  auto stats = pool.statistics();
  CHECK(stats.bytes_reserved == 3 * block);
  CHECK(counting.live == 3);
}

TEST_CASE("blocks beyond the cache limit go straight back") {
  CountingBackend counting;
  CachingPool pool(counting.backend(), 1024);
  uint64_t block = 0;
  void* p = pool.allocate(1 << 16, 256, &block);
  pool.deallocate(p, block, 256);
  CHECK(counting.live == 0);
  CHECK(pool.statistics().bytes_reserved == 0);
}

TEST_CASE("a failing backend yields nullptr after trimming the cache") {
  CountingBackend counting;
  CachingPool pool(counting.backend(), uint64_t{1} << 30);
  uint64_t block = 0;
  void* p = pool.allocate(4096, 256, &block);
  pool.deallocate(p, block, 256);
  counting.fail = true;
  CHECK(pool.allocate(1 << 20, 256, &block) == nullptr);
  CHECK(counting.live == 0);  // the cached block was handed back first
  CHECK(pool.allocate(uint64_t{1} << 60, 256, &block) == nullptr);
}
