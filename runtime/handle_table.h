// Maps the opaque handles of the C API to objects. A handle packs a slot
// index with the slot's generation, so a handle whose object is gone (or a
// value that never was a handle) is recognised instead of dereferenced.
// Lookups are lock-free; inserting and removing take a mutex.
#ifndef AXRT_RUNTIME_HANDLE_TABLE_H_
#define AXRT_RUNTIME_HANDLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "runtime/object.h"

namespace axrt {

class HandleTable {
 public:
  enum class Lookup { kFound, kNull, kReleased, kNotAHandle };

  HandleTable();
  ~HandleTable();
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Returns the new handle of `object`. Throws std::bad_alloc when full.
  uint64_t insert(Object* object);
  // Frees the slot of `handle`; later lookups of it report kReleased.
  void remove(uint64_t handle) noexcept;
  Object* find(uint64_t handle, Lookup* result) const noexcept;

  size_t live_count() const noexcept;

  // The process-wide table (never destroyed, so objects released during
  // static destruction still find it).
  static HandleTable& global();

 private:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 1u << 16;

  struct Slot {
    std::atomic<uint32_t> generation{1};
    std::atomic<Object*> object{nullptr};
  };

  Slot* slot(uint32_t index) const noexcept;

  std::atomic<Slot*>* chunks_;  // kMaxChunks entries
  std::atomic<uint32_t> next_index_{1};  // index 0 is never used
  mutable std::mutex mutex_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_HANDLE_TABLE_H_
