// A bounded stack of spent objects kept for reuse (command batches, buffer
// objects), so that the call path in the steady state takes nothing from
// the heap. Thread-safe; allocates nothing itself.
#ifndef AXRT_BASE_SPENT_LIST_H_
#define AXRT_BASE_SPENT_LIST_H_

#include <cstddef>
#include <mutex>

namespace axrt {

template <typename T, size_t N>
class SpentList {
 public:
  // A kept object, or null.
  T* take() noexcept {
    std::lock_guard lock(mutex_);
    return count_ > 0 ? slots_[--count_] : nullptr;
  }
  // Keeps `object`; false when the list is full (the caller frees it).
  bool put(T* object) noexcept {
    std::lock_guard lock(mutex_);
    if (count_ == N) return false;
    slots_[count_++] = object;
    return true;
  }
  // Hands every kept object to `free`; for the owner's destructor.
  template <typename Free>
  void drain(Free&& free) noexcept {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < count_; ++i) free(slots_[i]);
    count_ = 0;
  }

 private:
  std::mutex mutex_;
  T* slots_[N] = {};
  size_t count_ = 0;
};

}  // namespace axrt

#endif  // AXRT_BASE_SPENT_LIST_H_
