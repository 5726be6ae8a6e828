// Every host allocation of a program that links this goes through
// base/fault.h: its operator new and delete replace the standard ones, so
// that the fault-injection tests (tests/unit/fault_injection_test.cc) and
// the soak (tests/soak/soak.cc) can count host allocations, inside axrt and
// out, and make one fail. Link it as an object library: the definitions
// must be part of the program.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "base/fault.h"

#ifndef AXRT_FAULT_INJECTION
#error "counted_new.cc needs a tree configured with -DAXRT_FAULT_INJECTION=ON"
#endif

namespace {

void* CountedAllocate(std::size_t size) {
  if (axrt::fault::should_fail(axrt::fault::Site::kHostAllocation)) throw std::bad_alloc();
  void* pointer = std::malloc(size == 0 ? 1 : size);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void* CountedAllocateAligned(std::size_t size, std::align_val_t alignment) {
  if (axrt::fault::should_fail(axrt::fault::Site::kHostAllocation)) throw std::bad_alloc();
  const std::size_t align = std::max(static_cast<std::size_t>(alignment), sizeof(void*));
  void* pointer = nullptr;
  if (posix_memalign(&pointer, align, size == 0 ? 1 : size) != 0) throw std::bad_alloc();
  return pointer;
}

}  // namespace

void* operator new(std::size_t size) { return CountedAllocate(size); }
void* operator new[](std::size_t size) { return CountedAllocate(size); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  return CountedAllocateAligned(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return CountedAllocateAligned(size, alignment);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return CountedAllocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return CountedAllocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return CountedAllocateAligned(size, alignment);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t alignment,
                     const std::nothrow_t&) noexcept {
  try {
    return CountedAllocateAligned(size, alignment);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete[](void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t, std::align_val_t) noexcept {
  std::free(pointer);
}
void operator delete(void* pointer, const std::nothrow_t&) noexcept { std::free(pointer); }
void operator delete[](void* pointer, const std::nothrow_t&) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(pointer);
}
void operator delete[](void* pointer, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(pointer);
}
