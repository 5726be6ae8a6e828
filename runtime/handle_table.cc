#include "runtime/handle_table.h"

#include <algorithm>
#include <new>

namespace axrt {

HandleTable::HandleTable() : chunks_(new std::atomic<Slot*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

HandleTable::~HandleTable() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
  delete[] chunks_;
}

HandleTable& HandleTable::global() {
  static HandleTable* table = new HandleTable();
  return *table;
}

HandleTable::Slot* HandleTable::slot(uint32_t index) const noexcept {
  Slot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
}

uint64_t HandleTable::insert(Object* object) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = next_index_.load(std::memory_order_relaxed);
    if ((index >> kChunkBits) >= kMaxChunks) throw std::bad_alloc();
    if ((index & (kChunkSize - 1)) == 0 || index == 1) {
      std::atomic<Slot*>& chunk = chunks_[index >> kChunkBits];
      if (!chunk.load(std::memory_order_relaxed)) chunk.store(new Slot[kChunkSize], std::memory_order_release);
    }
    // remove() must not allocate: keep room for every slot in the free list.
    if (free_.capacity() < index) free_.reserve(std::max<size_t>(index, 2 * free_.capacity()));
    next_index_.store(index + 1, std::memory_order_release);
  }
  Slot* s = slot(index);
  s->object.store(object, std::memory_order_release);
  ++live_;
  const uint64_t generation = s->generation.load(std::memory_order_relaxed);
  return (generation << 32) | index;
}

void HandleTable::remove(uint64_t handle) noexcept {
  const auto index = static_cast<uint32_t>(handle);
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* s = slot(index);
  if (!s || s->generation.load(std::memory_order_relaxed) != (handle >> 32)) return;
  s->object.store(nullptr, std::memory_order_release);
  uint32_t next = s->generation.load(std::memory_order_relaxed) + 1;
  if (next == 0) next = 1;  // generation 0 would make handle values that look null-ish
  s->generation.store(next, std::memory_order_release);
  free_.push_back(index);  // capacity reserved by insert()
  --live_;
}

Object* HandleTable::find(uint64_t handle, Lookup* result) const noexcept {
  if (handle == 0) {
    *result = Lookup::kNull;
    return nullptr;
  }
  const auto index = static_cast<uint32_t>(handle);
  const auto generation = static_cast<uint32_t>(handle >> 32);
  if (index == 0 || generation == 0 || index >= next_index_.load(std::memory_order_acquire)) {
    *result = Lookup::kNotAHandle;
    return nullptr;
  }
  Slot* s = slot(index);
  if (!s) {
    *result = Lookup::kNotAHandle;
    return nullptr;
  }
  const uint32_t current = s->generation.load(std::memory_order_acquire);
  Object* object = s->object.load(std::memory_order_acquire);
  if (current != generation || !object) {
    // A generation from the future was never handed out.
    *result = generation > current ? Lookup::kNotAHandle : Lookup::kReleased;
    return nullptr;
  }
  *result = Lookup::kFound;
  return object;
}

size_t HandleTable::live_count() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

const char* object_type_name(ObjectType type) noexcept {
  switch (type) {
    case ObjectType::kInstance: return "instance";
    case ObjectType::kDevice: return "device";
    case ObjectType::kBuffer: return "buffer";
    case ObjectType::kStream: return "stream";
    case ObjectType::kEvent: return "event";
    case ObjectType::kAxeBuilder: return "axe builder";
    case ObjectType::kTensor: return "tensor";
    case ObjectType::kExecutable: return "executable";
    case ObjectType::kFunction: return "function";
    case ObjectType::kGraph: return "graph";
  }
  return "object";
}

void object_register(Object* object) { object->handle = HandleTable::global().insert(object); }

void object_retain(Object* object) noexcept {
  if (object->owner) object = object->owner;
  object->ref_count.fetch_add(1, std::memory_order_relaxed);
}

void object_release(Object* object) noexcept {
  if (object->owner) object = object->owner;
  if (object->ref_count.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (object->handle) HandleTable::global().remove(object->handle);
  object->destroy(object);
}

}  // namespace axrt
