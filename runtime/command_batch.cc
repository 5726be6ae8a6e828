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
  spent_.drain([](CommandBatch* batch) { delete batch; });
}

CommandBatchPtr BatchCache::take() {
  CommandBatch* batch = spent_.take();
  if (batch == nullptr) batch = new CommandBatch();
  batch->cache = this;
  return CommandBatchPtr(batch);
}

void BatchCache::put(CommandBatch* batch) noexcept {
  // The owner (the executable) may own this cache: it is let go last, after
  // the batch is stored and the lock released.
  const Ref<Object> owner = std::move(batch->owner);
  batch->clear();
  if (!spent_.put(batch)) delete batch;
}

}  // namespace axrt
