// Command batches: their end, and the per-function cache that hands spent
// ones out again (runtime/driver.h).
#include <utility>

#include "runtime/driver.h"

namespace axrt {

CommandBatch::~CommandBatch() {
  if (arena != nullptr) buffer_return_memory(arena);
  // Before `owner`: buffers may borrow names from what it owns.
  buffers.clear();
}

void CommandBatch::clear() noexcept {
  if (arena != nullptr) buffer_return_memory(arena);
  arena = nullptr;
  label = nullptr;
  trace_name = nullptr;
  trace_detail = nullptr;
  commands.clear();
  command_base = 0;
  args.clear();
  buffers.clear();
  last_duration_ns = nullptr;
}

void CommandBatchDeleter::operator()(CommandBatch* batch) const noexcept {
  if (batch->cache != nullptr) {
    batch->cache->put(batch);
  } else {
    delete batch;
  }
}

BatchCache::~BatchCache() {
  for (size_t i = 0; i < count_; ++i) delete spent_[i];
}

CommandBatchPtr BatchCache::take() {
  CommandBatch* batch = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (count_ > 0) batch = spent_[--count_];
  }
  if (batch == nullptr) batch = new CommandBatch();
  batch->cache = this;
  return CommandBatchPtr(batch);
}

void BatchCache::put(CommandBatch* batch) noexcept {
  // The owner (the executable) may own this cache: it is let go last, after
  // the batch is stored and the lock released.
  const Ref<Object> owner = std::move(batch->owner);
  batch->clear();
  {
    std::lock_guard lock(mutex_);
    if (count_ < kKeep) {
      spent_[count_++] = batch;
      return;
    }
  }
  delete batch;
}

}  // namespace axrt
