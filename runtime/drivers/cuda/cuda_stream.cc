// CUDA streams. Each axrt stream is a CUDA stream; what its work touches
// stays referenced until a fence event recorded after the work completes
// (cuda_retained.cc). Copies and fills are cuda_copy.cc's (from and to pageable host memory
// through pinned chunks that a second CUDA stream fills and drains); events,
// which streams record and wait for, cuda_event.cc's.
//
// A host function that may fail its stream (a user's function, a wait for an
// event of another driver, the check of a record handed to CUDA early) holds
// back the work enqueued after it: that work waits on the host, in order
// (CudaStream::held), until the function ran, and then goes to CUDA, or is
// skipped when the function failed, its event records and deallocations
// still completed. Each operation here takes its place in that order; host
// calls, the held work and the threads that release it are cuda_held.cc's.
// docs/cuda-driver.md ("Streams") explains the design.
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "runtime/drivers/cuda/cuda_copy.h"
#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_graph.h"
#include "runtime/drivers/cuda/cuda_held.h"
#include "runtime/drivers/cuda/cuda_nvtx.h"
#include "trace/trace.h"

namespace axrt::cuda {

// --- FailureState -----------------------------------------------------------

FailurePtr FailureState::before(uint64_t sequence) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.failure && failure_.sequence < sequence) return failure_.failure;
  return nullptr;
}

FailurePtr FailureState::get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.failure;
}

bool FailureState::set(uint64_t sequence, FailurePtr failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.failure) return false;
  failure_ = StreamFailure{sequence, std::move(failure)};
  return true;
}

namespace {

CudaStream* cuda(Stream* stream) { return static_cast<CudaStream*>(stream); }

// Host calls that CUDA may still invoke after their stream was destroyed
// with its device lost. Kept, reachable, for the life of the process.
std::mutex g_orphans_mutex;
std::vector<std::shared_ptr<HostCall>>* g_orphans = nullptr;

}  // namespace

// --- CudaStream -------------------------------------------------------------

extern const StreamVtable kCudaStreamVtable;

CudaStream::CudaStream(CudaDevice* d) : Stream(&kCudaStreamVtable) { device = Ref<Device>(d); }

CudaStream::~CudaStream() = default;

void CudaStream::fail(uint64_t op_sequence, FailurePtr f) {
  const std::string_view what = f->message;
  if (!failure_->set(op_sequence, f)) return;
  count_failure(what);
}

void CudaStream::count_failure(std::string_view what) noexcept {
  if (failure_counted_.exchange(true, std::memory_order_acq_rel)) return;
  device->counters.stream_failures.fetch_add(1, std::memory_order_relaxed);
  if (trace::active()) {
    try {
      trace::instant(trace_track, what, describe());
    } catch (...) {
      // The trace lacks the instant; the counter has it.
    }
  }
}


// Under order_mutex, before work that may touch device memory: the stream
// waits, on the device, for the pool allocations made since it last did
// (they are ordered on the device's allocation stream; see
// allocate_device_memory in cuda_device.cc). One atomic load when there were
// none.
axrt_status_t wait_for_allocations(CudaStream* s) {
  CudaDevice* d = s->cuda_device();
  const uint64_t epoch = d->allocation_epoch.load(std::memory_order_acquire);
  if (epoch == s->allocations_seen) return nullptr;
  AXRT_RETURN_IF_ERROR(d->check(d->cu.cuStreamWaitEvent(s->stream, d->allocation_fence, 0),
                                "cuStreamWaitEvent"));
  s->allocations_seen = epoch;
  return nullptr;
}

namespace {

axrt_status_t launch(CudaStream* s, const DeviceKernel& kernel, const void* args,
                     const axrt_kernel_dim3_t& grid) {
  CudaDevice* d = s->cuda_device();
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return nullptr;
  auto* function = static_cast<CUfunction>(kernel.handle);
  size_t size = kernel.params_size;
  void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<void*>(args),
                   AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE, &size, AXRT_CU_LAUNCH_PARAM_END};
  void** extra_or_none = size ? extra : nullptr;
  const axrt_kernel_dim3_t& block = kernel.workgroup_size;
  if (kernel.cluster_dims.x != 0) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = kernel.cluster_dims.x;
    attribute.value.clusterDim.y = kernel.cluster_dims.y;
    attribute.value.clusterDim.z = kernel.cluster_dims.z;
    CUlaunchConfig config{};
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block.x;
    config.blockDimY = block.y;
    config.blockDimZ = block.z;
    config.sharedMemBytes = kernel.dynamic_shared_memory;
    config.hStream = s->stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return d->check(d->cu.cuLaunchKernelEx(&config, function, nullptr, extra_or_none),
                    "cuLaunchKernelEx");
  }
  return d->check(d->cu.cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                       kernel.dynamic_shared_memory, s->stream, nullptr,
                                       extra_or_none),
                  "cuLaunchKernel");
}

}  // namespace

// Fails the stream (from the next operation on) with `status` and returns it.
axrt_status_t fail_with(CudaStream* s, axrt_status_t status) {
  if (!status) return nullptr;
  if (s->cuda_device()->is_lost()) return status;
  s->fail(s->sequence.fetch_add(1, std::memory_order_relaxed) + 1,
          make_failure(axrt_status_create(axrt_status_code(status), axrt_status_message(status))));
  return status;
}

namespace {

// --- Trace records ------------------------------------------------------------
//
// What a traced operation records (cuda_trace.h adds the times, the queue
// time, the flow and the track), as the CPU driver records it.

trace::Place place_of(const CopyEndpoint& endpoint) {
  return endpoint.buffer &&
                 endpoint.buffer->allocation()->memory_type != AXRT_MEMORY_TYPE_HOST_PINNED
             ? trace::Place::kDevice
             : trace::Place::kHost;
}

trace::Record operation_record(trace::OpKind op, uint64_t bytes = 0) {
  trace::Record r;
  r.kind = trace::Kind::kOperation;
  r.op = op;
  r.a[1] = static_cast<int64_t>(bytes);
  return r;
}

trace::Record copy_record(const CopyCommand& copy) {
  trace::Record r = operation_record(trace::OpKind::kCopy, copy.width * copy.height);
  r.a[2] = static_cast<int64_t>(place_of(copy.src));
  r.a[3] = static_cast<int64_t>(place_of(copy.dst));
  return r;
}

trace::Record function_record(const CommandBatch& batch) {
  trace::Record r;
  r.kind = trace::Kind::kFunction;
  r.name = batch.trace_name;
  r.detail = batch.trace_detail;
  r.a[1] = static_cast<int64_t>(batch.commands.size());
  return r;
}

// --- Stream vtable ------------------------------------------------------------

// Gives tools the stream's name at its first use: the core labels a stream
// only after the driver created it.
void name_for_tools(CudaStream* s) noexcept {
#if AXRT_HAVE_NVTX
  if (s->named_for_tools.load(std::memory_order_relaxed) || s->named_for_tools.exchange(true)) {
    return;
  }
  try {
    nvtx::name_stream(s->stream, s->describe().c_str());
  } catch (...) {
    // Tools show the stream unnamed.
  }
#else
  (void)s;
#endif
}

// Hands device-local memory of the stream-ordered pool back on the stream
// (cuMemFreeAsync), so that the pool reuses it after the work before.
// `*out_freed` says whether it did; other memory waits for the stream.
axrt_status_t free_on_stream(CudaStream* s, Buffer* buffer, bool* out_freed) {
  CudaDevice* d = s->cuda_device();
  *out_freed = false;
  if (!d->pool || buffer->memory_type != AXRT_MEMORY_TYPE_DEVICE_LOCAL ||
      buffer->release_external) {
    return nullptr;
  }
  *out_freed = true;
  if (!buffer->claim_memory_return()) return nullptr;
  const MemoryBlock& block = buffer->block;
  const auto raw = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(block.driver_data));
  const CUresult result = d->cu.cuMemFreeAsync(raw, s->stream);
  if (result != CUDA_SUCCESS) {
    buffer->memory_returned.store(false, std::memory_order_release);
    *out_freed = false;
    return d->check(result, "cuMemFreeAsync");
  }
  d->free_count.fetch_add(1, std::memory_order_relaxed);
  d->live_bytes.fetch_sub(block.size + (block.device_address - raw), std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

// What every copy, fill, batch and graph launch checks first: the device is
// not lost, and work enqueued once the stream is known to have failed never
// runs.
axrt_status_t begin_work(CudaStream* s) {
  AXRT_RETURN_IF_ERROR(s->cuda_device()->enter());
  if (FailurePtr failure = s->failure()) return status_from_failure(failure);
  name_for_tools(s);
  return nullptr;
}

// Under order_mutex, when ready() lets new work go to CUDA: a host function
// enqueued earlier may have failed the stream after begin_work() looked (it
// ran while this work was being enqueued); the work then stops as it would
// have there.
axrt_status_t failed_meanwhile(CudaStream* s, uint64_t sequence) {
  if (FailurePtr failure = s->failure_before(sequence)) return status_from_failure(failure);
  return nullptr;
}

namespace {

void stream_destroy(Stream* stream) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  // Releasing a stream does not wait for its work: what is still running
  // or held back finishes the stream later (CudaDevice::retire).
  d->defer_or_run([s, d] {
    if (!finish_stream(s, false)) d->retire(s);
  });
}

// Each operation below has an issue_* function that hands it to CUDA, under
// the stream's order_mutex: at once when the stream holds nothing back, else
// when its held turn comes (an error then fails the stream, as no caller is
// left to tell). Held work is stamped for traces when it is enqueued.

// Under order_mutex, before a copy with another CUDA device's memory: the
// stream waits, on the device, for that device's pool allocations, as its
// own streams do (wait_for_allocations). Its latest fence is at least as
// late as the allocation of any buffer that exists now.
axrt_status_t wait_for_peer_allocations(CudaStream* s, const CopyCommand& copy) {
  CudaDevice* d = s->cuda_device();
  for (const CopyEndpoint* side : {&copy.src, &copy.dst}) {
    if (!side->buffer || side->host || side->buffer->device.get() == d ||
        side->buffer->device->vtable != d->vtable ||
        side->buffer->allocation()->memory_type == AXRT_MEMORY_TYPE_HOST_PINNED) {
      continue;
    }
    auto* peer = static_cast<CudaDevice*>(side->buffer->device.get());
    if (!peer->allocation_fence) continue;  // no pool: cuMemAlloc is synchronous
    AXRT_RETURN_IF_ERROR(d->check(d->cu.cuStreamWaitEvent(s->stream, peer->allocation_fence, 0),
                                  "cuStreamWaitEvent"));
  }
  return nullptr;
}

axrt_status_t issue_copy(CudaStream* s, const CopyCommand& copy, std::vector<Ref<Object>> keep,
                         const trace::OpStamp& stamp) {
  AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  AXRT_RETURN_IF_ERROR(wait_for_peer_allocations(s, copy));
  TraceScope traced;
  if (trace::recording(stamp)) traced.start(s, copy_record(copy), stamp);
  AXRT_RETURN_IF_ERROR(run_copy(s, copy));
  traced.finish();
  return s->retain_until_done(std::move(keep), nullptr, {});
}

axrt_status_t stream_copy(Stream* stream, const CopyCommand& copy) {
  CudaStream* s = cuda(stream);
  std::vector<Ref<Object>> keep;
  if (copy.src.buffer) keep.emplace_back(copy.src.buffer);
  if (copy.dst.buffer) keep.emplace_back(copy.dst.buffer);
  return queue_in_order<false>(s, [s, copy, keep = std::move(keep)](
                                      Disposition how, const trace::OpStamp& stamp) mutable {
    return how == Disposition::kIssue ? issue_copy(s, copy, std::move(keep), stamp) : nullptr;
  });
}

// A copy with memory of another CUDA device (StreamVtable::copy_peer): this
// device is first given direct access to the peer where CUDA can, then the
// copy goes as any other (copy_direct picks cuMemcpyPeerAsync).
axrt_status_t stream_copy_peer(Stream* stream, const CopyCommand& copy) {
  CudaStream* s = cuda(stream);
  AXRT_RETURN_IF_ERROR(begin_work(s));
  for (const CopyEndpoint* side : {&copy.src, &copy.dst}) {
    if (side->buffer && !side->host && side->buffer->device.get() != stream->device.get() &&
        side->buffer->device->vtable == stream->device->vtable) {
      s->cuda_device()->prepare_peer_access(static_cast<CudaDevice*>(side->buffer->device.get()));
    }
  }
  return stream_copy(stream, copy);
}

axrt_status_t issue_fill(CudaStream* s, Ref<Buffer> buffer, uint64_t offset, uint64_t length,
                         uint64_t pattern, uint32_t pattern_size, const trace::OpStamp& stamp) {
  AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, operation_record(trace::OpKind::kFill, length), stamp);
  }
  AXRT_RETURN_IF_ERROR(run_fill(s, buffer.get(), offset, length, pattern, pattern_size));
  traced.finish();
  std::vector<Ref<Object>> keep;
  keep.emplace_back(std::move(buffer));
  return s->retain_until_done(std::move(keep), nullptr, {});
}

axrt_status_t stream_fill(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                          uint64_t pattern, uint32_t pattern_size) {
  CudaStream* s = cuda(stream);
  return queue_in_order<false>(s, [=, target = Ref<Buffer>(buffer)](
                                      Disposition how, const trace::OpStamp& stamp) mutable
                                      -> axrt_status_t {
    if (how != Disposition::kIssue) return nullptr;
    return issue_fill(s, std::move(target), offset, length, pattern, pattern_size, stamp);
  });
}

axrt_status_t issue_host_func(CudaStream* s, axrt_host_func_t func, void* user_data,
                              uint64_t sequence, bool gating, const trace::OpStamp& stamp) {
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, operation_record(trace::OpKind::kHostFunction), stamp);
  }
  AXRT_RETURN_IF_ERROR(enqueue_host_call(
      s, s->stream, sequence,
      [func, user_data](axrt_status_t told) { return func(user_data, told); }, gating));
  traced.finish();
  return nullptr;
}

// A user's host function held back. It runs exactly once: in its turn on the
// stream, told of a failure before it; or, when it cannot be handed to CUDA
// (the device was lost), on the thread that finds that out, once no lock is
// held, told why.
class HeldHostFunc final : public HeldOp {
 public:
  HeldHostFunc(CudaStream* stream, axrt_host_func_t func, void* user_data, uint64_t sequence,
               const trace::OpStamp& stamp)
      : HeldOp(sequence), stream_(stream), func_(func), user_data_(user_data), stamp_(stamp) {}

  axrt_status_t run(Disposition how) override {
    if (how == Disposition::kAbandon) {
      told_.reset(stream_->cuda_device()->lost_status());
      return nullptr;
    }
    // Behind a failure it is told, and cannot fail the stream again.
    const bool gating = how == Disposition::kIssue && may_gate(stream_);
    axrt_status_t status = issue_host_func(stream_, func_, user_data_, sequence, gating, stamp_);
    if (status) {
      told_.reset(axrt_status_create(axrt_status_code(status), axrt_status_message(status)));
    }
    return status;
  }

  void after_run() noexcept override {
    if (told_) axrt_status_free(func_(user_data_, told_.get()));
  }

 private:
  CudaStream* stream_;  // only in run()
  axrt_host_func_t func_;
  void* user_data_;
  trace::OpStamp stamp_;
  StatusPtr told_;  // set when the function runs here rather than on the stream
};

axrt_status_t stream_launch_host_func(Stream* stream, axrt_host_func_t func, void* user_data) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  if (d->is_lost()) {
    // CUDA runs nothing more on a lost device; the function still runs
    // once, told why, and what it returns changes nothing.
    StatusPtr lost(d->lost_status());
    axrt_status_free(func(user_data, lost.get()));
    return nullptr;
  }
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  ContextScope scope(d);
  AXRT_RETURN_IF_ERROR(d->start_releaser());
  const trace::OpStamp stamp = trace::stamp(s->trace_track);
  HeldDone done;
  std::lock_guard<std::mutex> order(s->order_mutex);
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  if (ready(s, &done)) return issue_host_func(s, func, user_data, sequence, may_gate(s), stamp);
  return hold(s, std::make_unique<HeldHostFunc>(s, func, user_data, sequence, stamp));
}

axrt_status_t ensure_event(CudaEvent* e) {
  if (e->event) return nullptr;
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  const unsigned flags =
      (e->flags & AXRT_EVENT_FLAG_DISABLE_TIMING) ? CU_EVENT_DISABLE_TIMING : CU_EVENT_DEFAULT;
  return d->check(d->cu.cuEventCreate(&e->event, flags), "cuEventCreate");
}

// A held record reaches CUDA: its fence for those waiting for it, and the
// event itself when this is still its latest record. Skipped work before it
// does not keep it from completing: it then reports the failure.
axrt_status_t issue_held_record(CudaStream* s, CudaEvent* e, HeldRecord& record,
                                uint64_t sequence, const trace::OpStamp& stamp,
                                Disposition how) {
  if (how == Disposition::kAbandon) {
    record.mark_issued(false);  // waiters find the device lost
    return nullptr;
  }
  CudaDevice* d = s->cuda_device();
  if (how == Disposition::kIssue) AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, operation_record(trace::OpKind::kEventRecord), stamp);
  }
  // A flush may hand the record over before a host function that can still
  // fail the stream: its failure is then known only once it completed.
  const bool settled = s->gate == nullptr;
  CUresult result = d->cu.cuEventRecord(record.fence, s->stream);
  if (result == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(e->record_mutex);
    if (e->held_record.get() == &record) result = d->cu.cuEventRecord(e->event, s->stream);
  }
  axrt_status_t status = d->check(result, "cuEventRecord");
  if (status && !d->is_lost()) {
    // No caller is left to tell: the record completes with the failure.
    s->fail(sequence - 1, make_failure(axrt_status_create(axrt_status_code(status),
                                                          axrt_status_message(status))));
  }
  if (!status) traced.finish();
  record.mark_issued(settled);
  return status;
}

axrt_status_t stream_record_event(Stream* stream, Event* event) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  auto* e = static_cast<CudaEvent*>(event);
  ContextScope scope(d);
  const trace::OpStamp stamp = trace::stamp(s->trace_track);
  // The stream of the event's previous record, let go once the locks below
  // are: when that is its last reference, releasing it may finish it here
  // (CudaDevice::retire), which takes its order_mutex and waits for its work.
  Ref<Stream> previous;
  HeldDone done;
  std::lock_guard<std::mutex> order(s->order_mutex);
  const bool now = ready(s, &done);
  std::lock_guard<std::mutex> lock(e->record_mutex);
  AXRT_RETURN_IF_ERROR(ensure_event(e));
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  if (now) {
    // An event recorded after an allocation covers it too.
    AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
    TraceScope traced;
    if (trace::recording(stamp)) {
      traced.start(s, operation_record(trace::OpKind::kEventRecord), stamp);
    }
    AXRT_RETURN_IF_ERROR(d->check(d->cu.cuEventRecord(e->event, s->stream), "cuEventRecord"));
    traced.finish();
    previous = std::exchange(e->recorded_on, Ref<Stream>(stream));
    e->recorded_sequence = sequence;
    e->held_record.reset();
    return nullptr;
  }
  CUevent fence = nullptr;
  AXRT_RETURN_IF_ERROR(d->acquire_fence(&fence));
  std::shared_ptr<HeldRecord> record;
  try {
    record = std::make_shared<HeldRecord>(d, s, fence);
  } catch (...) {
    d->recycle_fence(fence);
    throw;
  }
  previous = std::exchange(e->recorded_on, Ref<Stream>(stream));
  e->recorded_sequence = sequence;
  e->held_record = record;
  return hold(s, make_held(sequence, [s, held_event = Ref<Event>(event), record, sequence,
                                      stamp](Disposition how) {
    return issue_held_record(s, static_cast<CudaEvent*>(held_event.get()), *record, sequence,
                             stamp, how);
  }));
}

// After a wait for a record of `source` (operation `source_sequence`): the
// waiting stream fails with the record's failure, at once when it is known
// (`settled`), else once the record was reached, by a host call that checks
// (and so holds back what follows).
axrt_status_t check_record(CudaStream* s, const std::shared_ptr<FailureState>& source,
                           uint64_t source_sequence, bool settled, uint64_t sequence) {
  if (!source) return nullptr;
  if (FailurePtr failure = source->before(source_sequence)) {
    s->fail(sequence, std::move(failure));
    return nullptr;
  }
  if (settled || s->failure()) return nullptr;
  return enqueue_host_call(
      s, s->stream, sequence,
      [source, source_sequence](axrt_status_t) -> axrt_status_t {
        FailurePtr failure = source->before(source_sequence);
        return failure ? status_from_failure(failure) : nullptr;
      },
      may_gate(s));
}

axrt_status_t issue_wait(CudaStream* s, CUevent target, const std::shared_ptr<FailureState>& source,
                         uint64_t source_sequence, bool settled, uint64_t sequence,
                         Ref<Object> keep_event, const trace::OpStamp& stamp) {
  CudaDevice* d = s->cuda_device();
  TraceScope traced;
  if (trace::recording(stamp)) traced.start(s, operation_record(trace::OpKind::kEventWait), stamp);
  if (target) {
    AXRT_RETURN_IF_ERROR(
        d->check(d->cu.cuStreamWaitEvent(s->stream, target, 0), "cuStreamWaitEvent"));
  }
  AXRT_RETURN_IF_ERROR(check_record(s, source, source_sequence, settled, sequence));
  traced.finish();
  std::vector<Ref<Object>> keep;
  keep.emplace_back(std::move(keep_event));
  return s->retain_until_done(std::move(keep), nullptr, {});
}

// A wait for an event of another driver (a CPU event): the stream waits on
// the callback thread, and fails with the event's failure.
axrt_status_t issue_foreign_wait(CudaStream* s, Ref<Object> event, uint64_t sequence,
                                 const trace::OpStamp& stamp) {
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, operation_record(trace::OpKind::kEventWait), stamp);
  }
  Event* raw = static_cast<Event*>(event.get());
  AXRT_RETURN_IF_ERROR(enqueue_host_call(
      s, s->stream, sequence,
      [raw](axrt_status_t told) -> axrt_status_t {
        if (told) return nullptr;
        return raw->vtable->wait(raw, AXRT_TIMEOUT_INFINITE);
      },
      may_gate(s)));
  traced.finish();
  std::vector<Ref<Object>> keep;
  keep.emplace_back(std::move(event));
  return s->retain_until_done(std::move(keep), nullptr, {});
}

axrt_status_t stream_wait_event(Stream* stream, Event* event) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  ContextScope scope(d);
  s->reap(false);
  const trace::OpStamp stamp = trace::stamp(s->trace_track);
  if (!is_cuda_event(event)) {
    AXRT_RETURN_IF_ERROR(d->start_releaser());
    HeldDone done;
    std::lock_guard<std::mutex> order(s->order_mutex);
    const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
    if (ready(s, &done)) return issue_foreign_wait(s, Ref<Object>(event), sequence, stamp);
    return hold(s, make_held(sequence, [s, held_event = Ref<Object>(event), sequence, stamp](
                                           Disposition how) -> axrt_status_t {
      // After a failure a wait has nothing left to order. A copy of the event
      // goes on, here and below: the op's own reference goes with the op
      // (HeldOp::run).
      if (how != Disposition::kIssue) return nullptr;
      return issue_foreign_wait(s, held_event, sequence, stamp);
    }));
  }
  auto* e = static_cast<CudaEvent*>(event);
  // A stream whose native queue was handed out holds nothing back, so it
  // cannot wait for a record held back by another stream: that record goes
  // to CUDA now (the wait then covers the host functions before it).
  if (s->native_handed_out.load(std::memory_order_acquire)) flush_record(e);
  HeldDone done;
  std::lock_guard<std::mutex> order(s->order_mutex);
  const bool now = ready(s, &done);
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  std::shared_ptr<HeldRecord> record;
  std::shared_ptr<FailureState> source;
  uint64_t source_sequence = 0;
  {
    std::lock_guard<std::mutex> lock(e->record_mutex);
    record = e->held_record;
    if (auto* from = static_cast<CudaStream*>(e->recorded_on.get())) {
      source = from->failure_state();
      source_sequence = e->recorded_sequence;
    }
    if (!record) {
      // The record went to CUDA with its failure known.
      if (now) {
        return issue_wait(s, e->event, source, source_sequence, true, sequence,
                          Ref<Object>(event), stamp);
      }
      // This stream holds work back. The wait goes to CUDA now, while the
      // event still stands for this record, ahead of that work: the record
      // waits for nothing the stream holds, so this delays that work at
      // most. Its failure is checked in its turn.
      AXRT_RETURN_IF_ERROR(
          d->check(d->cu.cuStreamWaitEvent(s->stream, e->event, 0), "cuStreamWaitEvent"));
    }
  }
  if (!record) {
    return hold(s, make_held(sequence, [s, source, source_sequence, sequence,
                                        held_event = Ref<Object>(event),
                                        stamp](Disposition how) -> axrt_status_t {
      if (how != Disposition::kIssue) return nullptr;
      return issue_wait(s, nullptr, source, source_sequence, true, sequence, held_event, stamp);
    }));
  }
  // The record was held back by its stream: wait for its fence once it is
  // issued, in this stream's order (issued at once when it may be).
  AXRT_RETURN_IF_ERROR(d->start_releaser());
  auto op = make_held(sequence, [s, record, source, source_sequence, sequence,
                                 held_event = Ref<Object>(event),
                                 stamp](Disposition how) -> axrt_status_t {
    if (how != Disposition::kIssue) return nullptr;
    return issue_wait(s, record->fence, source, source_sequence, record->settled(), sequence,
                      held_event, stamp);
  });
  op->after = record;
  AXRT_RETURN_IF_ERROR(hold(s, std::move(op)));
  if (!in_cuda_callback()) drain(s, &done);
  return nullptr;
}

axrt_status_t issue_deallocate(CudaStream* s, Ref<Buffer> buffer, const trace::OpStamp& stamp) {
  AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, operation_record(trace::OpKind::kDeallocate), stamp);
  }
  bool freed = false;
  AXRT_RETURN_IF_ERROR(free_on_stream(s, buffer.get(), &freed));
  traced.finish();
  if (freed) return nullptr;
  std::vector<Ref<Buffer>> returns;
  returns.push_back(std::move(buffer));
  return s->retain_until_done({}, nullptr, std::move(returns));
}

axrt_status_t stream_deallocate_buffer(Stream* stream, Buffer* buffer) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  ContextScope scope(d);
  s->reap(false);
  const trace::OpStamp stamp = trace::stamp(s->trace_track);
  Ref<Buffer> target(buffer);
  HeldDone done;
  std::lock_guard<std::mutex> order(s->order_mutex);
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  if (ready(s, &done)) return issue_deallocate(s, std::move(target), stamp);
  // Held memory goes back in its turn even after a failure; with the device
  // lost, at once.
  return hold(s, make_held(sequence, [s, target = std::move(target),
                                      stamp](Disposition how) mutable -> axrt_status_t {
    if (how == Disposition::kAbandon) {
      buffer_return_memory(target.get());
      return nullptr;
    }
    return issue_deallocate(s, std::move(target), stamp);
  }));
}

// Gives back the arena of a batch that will not run: nothing on the device
// uses it.
void return_arena(CudaStream* s, CommandBatch& batch) {
  Buffer* arena = batch.arena;
  if (!arena || !arena->claim_memory_return()) return;
  CudaDevice* d = s->cuda_device();
  d->vtable->deallocate(d, arena->memory_type, arena->block);
}

// Launches the commands of `batch`. A failure is returned, not given to the
// stream: the caller decides which operation of the stream failed.
axrt_status_t issue_batch(CudaStream* s, CommandBatchPtr batch, const trace::OpStamp& stamp) {
  if (axrt_status_t status = wait_for_allocations(s)) {
    return_arena(s, *batch);
    return status;
  }
  // Tools see the launches inside a range named by the function.
  nvtx::Range range(batch->trace_name ? batch->trace_name : "function");
  TraceScope traced;
  if (trace::recording(stamp)) {
    traced.start(s, function_record(*batch), stamp, batch->commands.size());
  }
  for (size_t i = 0; i < batch->commands.size(); ++i) {
    const BatchCommand& command = batch->commands[i];
    axrt_status_t status = nullptr;
    switch (command.kind) {
      case BatchCommand::Kind::kDispatch:
        if (!command.device_kernel) {
          status = make_status(AXRT_STATUS_CODE_INTERNAL,
                               "command {} of {} has no CUDA kernel to launch",
                               batch->command_base + i,
                               batch->label ? *batch->label : std::string("a batch"));
          break;
        }
        status = launch(s, *command.device_kernel, batch->args_at(command.args_offset),
                        command.workgroup_count);
        if (status) {
          StatusPtr owned(status);
          status = make_status(axrt_status_code(status), "{}: {}: {}",
                               batch->label ? *batch->label : std::string("batch"),
                               command.device_kernel->name, axrt_status_message(status));
        }
        break;
      case BatchCommand::Kind::kCopy:
        status = run_copy(s, command.copy);
        break;
      case BatchCommand::Kind::kFill:
        status = run_fill(s, command.fill_buffer, command.fill_offset, command.fill_length,
                          command.fill_pattern, command.fill_pattern_size);
        break;
    }
    if (status) {
      // What was queued keeps its buffers until it is done; the arena goes
      // back then (reap). The command's failure is the one to report: a
      // fence failing as well (the device lost) adds nothing to it.
      StatusPtr(s->retain_until_done({}, std::move(batch), {}));
      return status;
    }
    if (traced.active()) traced.command(command_trace_record(command, batch->command_base + i));
  }
  traced.finish();
  // The arena goes back on the stream, right behind the launches, when the
  // pool takes it; otherwise when the stream got there (reap), so such a
  // batch is fenced at once rather than with later calls.
  bool freed = true;
  if (batch->arena) {
    if (axrt_status_t status = free_on_stream(s, batch->arena, &freed)) {
      StatusPtr(s->retain_until_done({}, std::move(batch), {}));
      return status;
    }
  }
  return s->retain_until_done({}, std::move(batch), {}, /*coalesce=*/freed);
}

axrt_status_t stream_submit_batch(Stream* stream, CommandBatchPtr batch) {
  CudaStream* s = cuda(stream);
  return queue_in_order<true>(s, [s, batch = std::move(batch)](
                                     Disposition how, const trace::OpStamp& stamp) mutable
                                     -> axrt_status_t {
    if (how == Disposition::kIssue) return issue_batch(s, std::move(batch), stamp);
    return_arena(s, *batch);
    return nullptr;
  });
}

axrt_status_t stream_synchronize(Stream* stream) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  if (in_cuda_callback()) {
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "axrt_stream_synchronize: called from a host function, where CUDA allows "
                       "no waiting on streams ({})",
                       s->describe());
  }
  AXRT_RETURN_IF_ERROR(d->enter());
  ContextScope scope(d);
  AXRT_RETURN_IF_ERROR(release_held(s));
  // The staging stream's last steps precede the stream's, but it is idle
  // only once it noted them done.
  CUresult result = d->cu.cuStreamSynchronize(s->stream);
  if (result == CUDA_SUCCESS && s->staging_stream) {
    result = d->cu.cuStreamSynchronize(s->staging_stream);
  }
  if (result != CUDA_SUCCESS) {
    axrt_status_t status = d->check(result, "cuStreamSynchronize");
    if (d->is_lost()) {
      StatusPtr(release_held(s));  // abandons what is still held
      run_abandoned_calls(s);
      s->reap(true);
    }
    return status;
  }
  s->reap(true);
  FailurePtr failure = s->failure();
  return failure ? status_from_failure(failure) : nullptr;
}

axrt_status_t stream_query(Stream* stream, bool* out_idle) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  ContextScope scope(d);
  bool idle = true;
  if (s->holding.load(std::memory_order_acquire) && !in_cuda_callback()) {
    HeldDone done;
    std::lock_guard<std::mutex> order(s->order_mutex);
    drain(s, &done);
  }
  idle = !s->holding.load(std::memory_order_acquire);
  // What waits for a later fence, taken before asking: an idle stream ran
  // all of it (what is retained meanwhile stays for its fence).
  CudaStream::Retained unfenced = s->take_unfenced();
  axrt_status_t error = nullptr;
  for (CUstream stream : {s->stream, s->staging_stream}) {
    if (!stream || !idle) continue;
    const CUresult result = d->cu.cuStreamQuery(stream);
    if (result == CUDA_ERROR_NOT_READY) {
      idle = false;
      break;
    }
    if ((error = d->check(result, "cuStreamQuery"))) break;
  }
  if (idle && !error) {
    s->reap(false);
    s->release(unfenced);
  } else {
    s->restore_unfenced(std::move(unfenced));
  }
  if (error) return error;
  if (FailurePtr failure = s->failure()) return status_from_failure(failure);
  *out_idle = idle;
  return nullptr;
}

// Other libraries enqueue onto the handle directly, in order with the
// stream's own work: from now on the stream holds nothing back (what it
// holds goes to CUDA now), and host functions that fail it no longer keep
// later work from running, as on a plain CUDA stream.
axrt_status_t stream_get_native_handle(Stream* stream, void** out_handle) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  if (!s->native_handed_out.load(std::memory_order_acquire)) {
    ContextScope scope(d);
    HeldDone done;
    std::lock_guard<std::mutex> flush(flush_mutex());
    std::lock_guard<std::mutex> order(s->order_mutex);
    s->native_handed_out.store(true, std::memory_order_release);
    stop_holding(s, &done);
    // What the other library enqueues may use buffers allocated so far.
    AXRT_RETURN_IF_ERROR(wait_for_allocations(s));
  }
  *out_handle = s->stream;
  return nullptr;
}

}  // namespace

axrt_status_t enqueue_staging_call(CudaStream* s,
                                   std::function<axrt_status_t(axrt_status_t)> body) {
  return enqueue_host_call(s, s->staging_stream, s->sequence.load(std::memory_order_relaxed),
                           std::move(body), false);
}

bool finish_stream(CudaStream* s, bool wait) {
  CudaDevice* d = s->cuda_device();
  {
    ContextScope scope(d);
    if (!settle_held_work(s, wait)) return false;
    if (!d->is_lost()) {
      for (CUstream stream : {s->stream, s->staging_stream}) {
        if (!stream) continue;
        const CUresult state =
            wait ? d->cu.cuStreamSynchronize(stream) : d->cu.cuStreamQuery(stream);
        if (state == CUDA_ERROR_NOT_READY) return false;
        // check() marks the device lost on a sticky error, which ends the
        // wait below.
        if (state != CUDA_SUCCESS) StatusPtr(d->check(state, "cuStreamQuery"));
      }
    }
    // A host call that ran meanwhile may have queued the stream again.
    if (!d->leave_releaser(s, wait)) return false;
    d->remove_stream(s);
    if (d->is_lost()) run_abandoned_calls(s);
    s->reap(true);
    s->trace.discard(d);  // what completed was recorded by reap()
    for (auto& chunk : s->staging) {
      d->cu.cuEventDestroy(chunk.free);
      d->pinned_pool->deallocate(chunk.host, chunk.size, 4096);
    }
    if (s->staging_stream) d->cu.cuStreamDestroy(s->staging_stream);
    d->cu.cuStreamDestroy(s->stream);
  }
  // Host calls CUDA never ran (the device was lost) stay reachable: CUDA
  // might still call them.
  {
    std::lock_guard<std::mutex> lock(g_orphans_mutex);
    for (auto& call : s->host_calls) {
      if (call->finished.load(std::memory_order_acquire)) continue;
      if (!g_orphans) g_orphans = new std::vector<std::shared_ptr<HostCall>>();
      g_orphans->push_back(std::move(call));
    }
  }
  delete s;
  return true;
}

const StreamVtable kCudaStreamVtable = {
    .destroy = stream_destroy,
    .copy = stream_copy,
    .fill = stream_fill,
    .launch_host_func = stream_launch_host_func,
    .record_event = stream_record_event,
    .wait_event = stream_wait_event,
    .deallocate_buffer = stream_deallocate_buffer,
    .submit_batch = stream_submit_batch,
    .synchronize = stream_synchronize,
    .query = stream_query,
    .get_native_handle = stream_get_native_handle,
    .copy_peer = stream_copy_peer,
    .launch_graph = launch_graph,
};

axrt_status_t create_stream(Device* device, Stream** out_stream) {
  auto* d = static_cast<CudaDevice*>(device);
  AXRT_RETURN_IF_ERROR(d->enter());
  ContextScope scope(d);
  CUstream handle = nullptr;
  AXRT_RETURN_IF_ERROR(
      d->check(d->cu.cuStreamCreate(&handle, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  auto s = std::make_unique<CudaStream>(d);
  s->stream = handle;
  s->destroy = [](Object* object) { stream_destroy(static_cast<Stream*>(object)); };
  try {
    d->add_stream(s.get());
  } catch (const std::bad_alloc&) {
    d->cu.cuStreamDestroy(handle);
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "out of memory creating a stream on {}",
                       d->id());
  }
  *out_stream = s.release();
  return nullptr;
}

axrt_status_t synchronize_device(CudaDevice* device) {
  if (in_cuda_callback()) {
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "axrt_device_synchronize: called from a host function on {}, where CUDA "
                       "allows no waiting",
                       device->id());
  }
  AXRT_RETURN_IF_ERROR(device->enter());
  ContextScope scope(device);
  // Work held back behind host functions reaches CUDA once they ran: the
  // device is waited for until, before a wait, no stream held any. What the
  // streams hold is released at their next call; their traced work is
  // recorded now, while the trace that wants it may still run.
  for (;;) {
    const bool holding = device->held_streams.load(std::memory_order_acquire) != 0;
    AXRT_RETURN_IF_ERROR(device->check(device->cu.cuCtxSynchronize(), "cuCtxSynchronize"));
    if (!holding) break;
    device->wait_for_release(std::chrono::milliseconds(1));
  }
  if (trace::active()) device->poll_traced_streams();
  return nullptr;
}

}  // namespace axrt::cuda

