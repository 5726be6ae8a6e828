// What a CUDA stream's operations keep until they completed: the fence
// events recorded behind them and the references, buffers to return and
// batches they hold (CudaStream::Retained). Function calls and graph
// replays share fences, one per kCoalescedFences of them, recorded with the
// last or with the next operation that does not coalesce; reap() lets go of
// what completed, at the next operations and at synchronisation.
// docs/cuda-driver.md ("Streams").
#include <utility>
#include <vector>

#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_held.h"

namespace axrt::cuda {

namespace {

void absorb(CudaStream::Retained& into, std::vector<Ref<Object>>& keep, CommandBatchPtr& batch,
            std::vector<Ref<Buffer>>& returns) {
  if (into.keep.empty()) {
    into.keep = std::move(keep);
  } else {
    for (auto& k : keep) into.keep.push_back(std::move(k));
  }
  if (batch) into.batches.push_back(std::move(batch));
  if (into.returns.empty()) {
    into.returns = std::move(returns);
  } else {
    for (auto& r : returns) into.returns.push_back(std::move(r));
  }
}

}  // namespace

axrt_status_t CudaStream::retain_until_done(std::vector<Ref<Object>> keep, CommandBatchPtr batch,
                                            std::vector<Ref<Buffer>> returns, bool coalesce) {
  if (keep.empty() && !batch && returns.empty()) return nullptr;
  CudaDevice* d = cuda_device();
  Retained group;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    absorb(unfenced_, keep, batch, returns);
    if (coalesce && ++unfenced_count_ < kCoalescedFences) return nullptr;
    // Everything unfenced was handed to CUDA before this call: the fence
    // recorded now follows all of it.
    group = std::move(unfenced_);
    unfenced_ = Retained();
    unfenced_count_ = 0;
  }
  AXRT_RETURN_IF_ERROR(d->acquire_fence(&group.fence));
  const CUresult recorded = d->cu.cuEventRecord(group.fence, stream);
  if (recorded != CUDA_SUCCESS) {
    d->recycle_fence(group.fence);
    group.fence = nullptr;
    // The work could not be fenced: wait for it instead.
    d->cu.cuStreamSynchronize(stream);
    release(group);
    return d->check(recorded, "cuEventRecord");
  }
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_.push_back(std::move(group));
  return nullptr;
}

CudaStream::Retained CudaStream::take_unfenced() {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  Retained taken = std::move(unfenced_);
  unfenced_ = Retained();
  unfenced_count_ = 0;
  return taken;
}

void CudaStream::restore_unfenced(Retained retained) {
  if (retained.empty()) return;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  CommandBatchPtr none;
  for (auto& batch : retained.batches) {
    std::vector<Ref<Object>> no_keep;
    std::vector<Ref<Buffer>> no_returns;
    absorb(unfenced_, no_keep, batch, no_returns);
  }
  absorb(unfenced_, retained.keep, none, retained.returns);
}

void CudaStream::release(Retained& retained) {
  CudaDevice* d = cuda_device();
  if (retained.fence) d->recycle_fence(retained.fence);
  retained.fence = nullptr;
  for (auto& buffer : retained.returns) buffer_return_memory(buffer.get());
  for (auto& batch : retained.batches) {
    if (Buffer* arena = batch->arena; arena && arena->claim_memory_return()) {
      d->vtable->deallocate(d, arena->memory_type, arena->block);
    }
  }
  retained = Retained();
}

void CudaStream::reap(bool all) {
  CudaDevice* d = cuda_device();
  std::vector<Retained> done;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    while (!pending_.empty()) {
      if (!all && !d->is_lost()) {
        const CUresult state = d->cu.cuEventQuery(pending_.front().fence);
        if (state == CUDA_ERROR_NOT_READY) break;
        // check() marks the device lost on a sticky error; the fence is done
        // with either way.
        if (state != CUDA_SUCCESS) StatusPtr(d->check(state, "cuEventQuery"));
      }
      done.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    if (all) {
      done.push_back(std::move(unfenced_));
      unfenced_ = Retained();
      unfenced_count_ = 0;
    }
  }
  for (Retained& r : done) release(r);
  done.clear();  // releases outside the lock
  {
    std::lock_guard<std::mutex> lock(host_calls_mutex);
    std::erase_if(host_calls, [](const std::shared_ptr<HostCall>& call) {
      return call->finished.load(std::memory_order_acquire);
    });
  }
  if (trace.pending()) {
    if (all && d->is_lost()) {
      trace.discard(d);
    } else {
      trace.poll(d);
    }
  }
}

}  // namespace axrt::cuda
