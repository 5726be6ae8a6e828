// CUDA streams and events. Each axrt stream is a CUDA stream; what its work
// touches stays referenced until a fence event recorded after the work
// completes. Copies from and to pageable host memory go through pinned
// chunks: a second CUDA stream copies between the chunk and the user's
// memory (host functions) while the first moves the previous chunk (DMA).
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <thread>

#include "runtime/drivers/cuda/cuda_driver.h"
#include "runtime/drivers/cuda/cuda_nvtx.h"
#include "trace/trace.h"

namespace axrt::cuda {

void enter_cuda_callback() noexcept;
void leave_cuda_callback() noexcept;

// Host work queued on a stream: a user's host function or a step of the
// runtime's own (a staging copy, a cross-driver wait). The stream owns it;
// it runs once, on the callback thread or, when the device was lost before
// CUDA ran it, on the thread that finds that out.
struct HostCall {
  CudaStream* stream = nullptr;
  uint64_t sequence = 0;
  std::function<axrt_status_t(axrt_status_t told)> body;
  std::atomic<bool> claimed{false};
  std::atomic<bool> finished{false};
};

namespace {

constexpr uint64_t kStagingChunk = 4 * 1024 * 1024;
constexpr size_t kStagingChunks = 3;

CudaStream* cuda(Stream* stream) { return static_cast<CudaStream*>(stream); }

// Host calls that CUDA may still invoke after their stream was destroyed
// with its device lost. Kept, reachable, for the life of the process.
std::mutex g_orphans_mutex;
std::vector<std::unique_ptr<HostCall>>* g_orphans = nullptr;

void run_host_call(HostCall* call, axrt_status_t told) {
  axrt_status_t result = call->body(told);
  // A call told of an earlier failure cannot change it: the stream keeps
  // its first failure.
  if (result) {
    if (told) {
      axrt_status_free(result);
    } else {
      call->stream->fail(call->sequence, make_failure(result));
    }
  }
}

void host_call_trampoline(void* user_data) {
  auto* call = static_cast<HostCall*>(user_data);
  if (call->claimed.exchange(true, std::memory_order_acq_rel)) {
    call->finished.store(true, std::memory_order_release);
    return;
  }
  enter_cuda_callback();
  CudaStream* stream = call->stream;
  FailurePtr failure = stream->failure_before(call->sequence);
  StatusPtr told(failure ? status_from_failure(failure)
                         : (stream->cuda_device()->is_lost() ? stream->cuda_device()->lost_status()
                                                             : nullptr));
  run_host_call(call, told.get());
  leave_cuda_callback();
  call->finished.store(true, std::memory_order_release);
}

}  // namespace

// --- CudaStream -------------------------------------------------------------

extern const StreamVtable kCudaStreamVtable;

CudaStream::CudaStream(CudaDevice* d) : Stream(&kCudaStreamVtable) { device = Ref<Device>(d); }

CudaStream::~CudaStream() = default;

FailurePtr CudaStream::failure_before(uint64_t op_sequence) const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_.failure && failure_.sequence < op_sequence) return failure_.failure;
  return nullptr;
}

FailurePtr CudaStream::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_.failure;
}

void CudaStream::fail(uint64_t op_sequence, FailurePtr f) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_.failure) return;
    failure_ = StreamFailure{op_sequence, f};
  }
  count_failure(f->message);
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

axrt_status_t CudaStream::retain_until_done(std::vector<Ref<Object>> keep, CommandBatchPtr batch,
                                            std::vector<Ref<Buffer>> returns) {
  reap(false);
  if (keep.empty() && !batch && returns.empty()) return nullptr;
  CudaDevice* d = cuda_device();
  Pending pending;
  AXRT_RETURN_IF_ERROR(d->acquire_fence(&pending.fence));
  const CUresult recorded = d->cu.cuEventRecord(pending.fence, stream);
  if (recorded != CUDA_SUCCESS) {
    d->recycle_fence(pending.fence);
    // The work could not be fenced: wait for it instead.
    d->cu.cuStreamSynchronize(stream);
    return d->check(recorded, "cuEventRecord");
  }
  pending.keep = std::move(keep);
  pending.batch = std::move(batch);
  pending.returns = std::move(returns);
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_.push_back(std::move(pending));
  return nullptr;
}

void CudaStream::reap(bool all) {
  CudaDevice* d = cuda_device();
  std::vector<Pending> done;
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
  }
  for (Pending& p : done) {
    d->recycle_fence(p.fence);
    for (auto& buffer : p.returns) buffer_return_memory(buffer.get());
    if (Buffer* arena = p.batch ? p.batch->arena : nullptr; arena && arena->claim_memory_return()) {
      d->vtable->deallocate(d, arena->memory_type, arena->block);
    }
  }
  done.clear();  // releases outside the lock
  {
    std::lock_guard<std::mutex> lock(host_calls_mutex);
    std::erase_if(host_calls, [](const std::unique_ptr<HostCall>& call) {
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

namespace {

// Runs, on this thread, every host call of `stream` CUDA has not run: the
// device is lost and CUDA will run nothing more.
void run_abandoned_calls(CudaStream* stream) {
  std::vector<HostCall*> pending;
  {
    std::lock_guard<std::mutex> lock(stream->host_calls_mutex);
    for (auto& call : stream->host_calls) pending.push_back(call.get());
  }
  StatusPtr lost(stream->cuda_device()->lost_status());
  for (HostCall* call : pending) {
    if (call->claimed.exchange(true, std::memory_order_acq_rel)) continue;
    run_host_call(call, lost.get());
  }
}

// Queues `body` on `stream` as host work.
axrt_status_t enqueue_host_call(CudaStream* stream, CUstream on,
                                std::function<axrt_status_t(axrt_status_t)> body) {
  auto call = std::make_unique<HostCall>();
  call->stream = stream;
  call->sequence = stream->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  call->body = std::move(body);
  HostCall* raw = call.get();
  {
    std::lock_guard<std::mutex> lock(stream->host_calls_mutex);
    stream->host_calls.push_back(std::move(call));
  }
  stream->has_host_work.store(true, std::memory_order_release);
  CudaDevice* d = stream->cuda_device();
  const CUresult result = d->cu.cuLaunchHostFunc(on, host_call_trampoline, raw);
  if (result != CUDA_SUCCESS) {
    raw->claimed.store(true);
    raw->finished.store(true);
    return d->check(result, "cuLaunchHostFunc");
  }
  return nullptr;
}

// --- Copies -------------------------------------------------------------

struct Endpoint {
  CUdeviceptr address = 0;  // valid when `addressable`
  std::byte* host = nullptr;
  uint64_t pitch = 0;
  bool addressable = false;  // device memory, or host memory CUDA can reach
};

Endpoint resolve(CudaDevice* d, const CopyEndpoint& e, uint64_t width) {
  Endpoint out;
  out.pitch = e.pitch ? e.pitch : width;
  if (e.buffer) {
    out.address = e.buffer->device_address(e.offset);
    out.addressable = true;
    return out;
  }
  out.host = e.host;
  CUmemorytype type = 0;
  // Pageable memory is unknown to CUDA: INVALID_VALUE, not an error here.
  if (d->cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<uintptr_t>(e.host)) == CUDA_SUCCESS &&
      type != 0) {
    out.address = reinterpret_cast<uintptr_t>(e.host);
    out.addressable = true;
  }
  return out;
}

axrt_status_t copy_direct(CudaStream* s, const Endpoint& src, const Endpoint& dst, uint64_t width,
                          uint64_t height) {
  CudaDevice* d = s->cuda_device();
  if (height == 1 || (src.pitch == width && dst.pitch == width)) {
    return d->check(d->cu.cuMemcpyAsync(dst.address, src.address, width * height, s->stream),
                    "cuMemcpyAsync");
  }
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.srcDevice = src.address;
  copy.srcPitch = src.pitch;
  copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.dstDevice = dst.address;
  copy.dstPitch = dst.pitch;
  copy.WidthInBytes = width;
  copy.Height = height;
  return d->check(d->cu.cuMemcpy2DAsync(&copy, s->stream), "cuMemcpy2DAsync");
}

axrt_status_t ensure_staging(CudaStream* s) {
  if (!s->staging.empty()) return nullptr;
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(
      d->check(d->cu.cuStreamCreate(&s->staging_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  nvtx::name_stream(s->staging_stream, fmt::format("{}: staging", s->describe()).c_str());
  for (size_t i = 0; i < kStagingChunks; ++i) {
    CudaStream::StagingChunk chunk;
    uint64_t block = 0;
    chunk.host = static_cast<std::byte*>(d->pinned_pool->allocate(kStagingChunk, 4096, &block));
    chunk.size = block;
    if (!chunk.host) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "cannot pin {} bytes of staging memory for copies on {}", kStagingChunk,
                         s->describe());
    }
    const CUresult created = d->cu.cuEventCreate(&chunk.free, CU_EVENT_DISABLE_TIMING);
    if (created != CUDA_SUCCESS) {
      d->pinned_pool->deallocate(chunk.host, chunk.size, 4096);
      return d->check(created, "cuEventCreate");
    }
    s->staging.push_back(chunk);
  }
  return nullptr;
}

// One piece of a staged copy: `rows` rows of `width` bytes between pageable
// memory (row pitch `host_pitch`) and a chunk, and between the chunk and
// `device` (row pitch `device_pitch`).
struct Piece {
  std::byte* host;
  uint64_t host_pitch;
  CUdeviceptr device;
  uint64_t device_pitch;
  uint64_t width;
  uint64_t rows;
};

axrt_status_t chunk_dma(CudaStream* s, const Piece& p, const CudaStream::StagingChunk& chunk,
                        bool to_device) {
  Endpoint staged{reinterpret_cast<uintptr_t>(chunk.host), nullptr, p.width, true};
  Endpoint device{p.device, nullptr, p.device_pitch, true};
  return to_device ? copy_direct(s, staged, device, p.width, p.rows)
                   : copy_direct(s, device, staged, p.width, p.rows);
}

void gather(std::byte* dst, const std::byte* src, uint64_t src_pitch, uint64_t width,
            uint64_t rows) {
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * src_pitch, width);
}

void scatter(std::byte* dst, uint64_t dst_pitch, const std::byte* src, uint64_t width,
             uint64_t rows) {
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_pitch, src + r * width, width);
}

// Splits a width x height copy into pieces of at most one chunk.
std::vector<Piece> split(std::byte* host, uint64_t host_pitch, CUdeviceptr device,
                         uint64_t device_pitch, uint64_t width, uint64_t height) {
  std::vector<Piece> pieces;
  if (width <= kStagingChunk) {
    const uint64_t rows_per = std::max<uint64_t>(1, kStagingChunk / width);
    for (uint64_t row = 0; row < height; row += rows_per) {
      const uint64_t rows = std::min(rows_per, height - row);
      pieces.push_back(
          {host + row * host_pitch, width, device + row * device_pitch, width, width, rows});
      pieces.back().host_pitch = host_pitch;
      pieces.back().device_pitch = device_pitch;
    }
    return pieces;
  }
  for (uint64_t row = 0; row < height; ++row) {
    for (uint64_t x = 0; x < width; x += kStagingChunk) {
      const uint64_t w = std::min(kStagingChunk, width - x);
      pieces.push_back({host + row * host_pitch + x, w, device + row * device_pitch + x, w, w, 1});
    }
  }
  return pieces;
}

// Copies between pageable host memory and memory CUDA reaches, in stream
// order, through the stream's pinned chunks: the staging stream runs the
// host-side copies, the stream itself the DMA, so that the two overlap.
axrt_status_t copy_staged(CudaStream* s, std::byte* host, uint64_t host_pitch, CUdeviceptr device,
                          uint64_t device_pitch, uint64_t width, uint64_t height, bool to_device) {
  AXRT_RETURN_IF_ERROR(ensure_staging(s));
  CudaDevice* d = s->cuda_device();
  const CudaApi& cu = d->cu;
  CUevent order = nullptr;
  AXRT_RETURN_IF_ERROR(d->acquire_fence(&order));
  struct FenceBack {
    CudaDevice* d;
    CUevent e;
    ~FenceBack() { d->recycle_fence(e); }
  } fence_back{d, order};
  // The host side starts after the work queued before the copy.
  AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(order, s->stream), "cuEventRecord"));
  AXRT_RETURN_IF_ERROR(
      d->check(cu.cuStreamWaitEvent(s->staging_stream, order, 0), "cuStreamWaitEvent"));
  const std::vector<Piece> pieces = split(host, host_pitch, device, device_pitch, width, height);
  std::vector<CUevent> ready(s->staging.size(), nullptr);
  struct ReadyBack {
    CudaDevice* d;
    std::vector<CUevent>* events;
    ~ReadyBack() {
      for (CUevent e : *events) {
        if (e) d->recycle_fence(e);
      }
    }
  } ready_back{d, &ready};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece p = pieces[i];
    CudaStream::StagingChunk& chunk = s->staging[i % s->staging.size()];
    CUevent& chunk_ready = ready[i % s->staging.size()];
    if (!chunk_ready) AXRT_RETURN_IF_ERROR(d->acquire_fence(&chunk_ready));
    std::byte* const staged = chunk.host;
    if (to_device) {
      // Staging stream: wait until the chunk's last DMA finished, fill it.
      if (chunk.used) {
        AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->staging_stream, chunk.free, 0),
                                      "cuStreamWaitEvent"));
      }
      AXRT_RETURN_IF_ERROR(enqueue_host_call(s, s->staging_stream, [p, staged](axrt_status_t) {
        gather(staged, p.host, p.host_pitch, p.width, p.rows);
        return axrt_status_t{nullptr};
      }));
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuEventRecord(chunk_ready, s->staging_stream), "cuEventRecord"));
      // Stream: wait for the chunk, move it to the device.
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuStreamWaitEvent(s->stream, chunk_ready, 0), "cuStreamWaitEvent"));
      AXRT_RETURN_IF_ERROR(chunk_dma(s, p, chunk, true));
      AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(chunk.free, s->stream), "cuEventRecord"));
    } else {
      // Stream: wait until the chunk was emptied, move device data into it.
      if (chunk.used) {
        AXRT_RETURN_IF_ERROR(
            d->check(cu.cuStreamWaitEvent(s->stream, chunk.free, 0), "cuStreamWaitEvent"));
      }
      AXRT_RETURN_IF_ERROR(chunk_dma(s, p, chunk, false));
      AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(chunk_ready, s->stream), "cuEventRecord"));
      // Staging stream: empty the chunk into the user's memory.
      AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->staging_stream, chunk_ready, 0),
                                    "cuStreamWaitEvent"));
      AXRT_RETURN_IF_ERROR(enqueue_host_call(s, s->staging_stream, [p, staged](axrt_status_t) {
        scatter(p.host, p.host_pitch, staged, p.width, p.rows);
        return axrt_status_t{nullptr};
      }));
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuEventRecord(chunk.free, s->staging_stream), "cuEventRecord"));
    }
    chunk.used = true;
  }
  if (!to_device) {
    // Later work on the stream sees the data in host memory.
    AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(order, s->staging_stream), "cuEventRecord"));
    AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->stream, order, 0), "cuStreamWaitEvent"));
  }
  // The `ready` events may be reused at once: waits already captured them.
  return nullptr;
}

axrt_status_t run_copy(CudaStream* s, const CopyCommand& copy) {
  CudaDevice* d = s->cuda_device();
  if (copy.width == 0 || copy.height == 0) return nullptr;
  const Endpoint src = resolve(d, copy.src, copy.width);
  const Endpoint dst = resolve(d, copy.dst, copy.width);
  if (src.addressable && dst.addressable) return copy_direct(s, src, dst, copy.width, copy.height);
  // One side is a buffer (the core allows no host-to-host copy), and
  // buffers are always addressable: the other side is pageable memory.
  if (dst.addressable) {
    return copy_staged(s, src.host, src.pitch, dst.address, dst.pitch, copy.width, copy.height,
                       true);
  }
  return copy_staged(s, dst.host, dst.pitch, src.address, src.pitch, copy.width, copy.height,
                     false);
}

axrt_status_t run_fill(CudaStream* s, Buffer* buffer, uint64_t offset, uint64_t length,
                       uint64_t pattern, uint32_t pattern_size) {
  CudaDevice* d = s->cuda_device();
  const CudaApi& cu = d->cu;
  if (length == 0) return nullptr;
  const CUdeviceptr address = buffer->device_address(offset);
  switch (pattern_size) {
    case 1:
      return d->check(cu.cuMemsetD8Async(address, static_cast<unsigned char>(pattern), length,
                                         s->stream),
                      "cuMemsetD8Async");
    case 2:
      return d->check(cu.cuMemsetD16Async(address, static_cast<unsigned short>(pattern),
                                          length / 2, s->stream),
                      "cuMemsetD16Async");
    case 4:
      return d->check(cu.cuMemsetD32Async(address, static_cast<unsigned int>(pattern), length / 4,
                                          s->stream),
                      "cuMemsetD32Async");
    default: {
      // An 8-byte pattern: its two halves as 4-byte columns of an 8-byte
      // pitched 2-D fill.
      const auto low = static_cast<unsigned int>(pattern);
      const auto high = static_cast<unsigned int>(pattern >> 32);
      if (low == high) {
        return d->check(cu.cuMemsetD32Async(address, low, length / 4, s->stream),
                        "cuMemsetD32Async");
      }
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuMemsetD2D32Async(address, 8, low, 1, length / 8, s->stream),
                   "cuMemsetD2D32Async"));
      return d->check(cu.cuMemsetD2D32Async(address + 4, 8, high, 1, length / 8, s->stream),
                      "cuMemsetD2D32Async");
    }
  }
}

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

// Fails the stream (from the next operation on) with `status` and returns it.
axrt_status_t fail_with(CudaStream* s, axrt_status_t status) {
  if (!status) return nullptr;
  if (s->cuda_device()->is_lost()) return status;
  s->fail(s->sequence.fetch_add(1, std::memory_order_relaxed) + 1,
          make_failure(axrt_status_create(axrt_status_code(status), axrt_status_message(status))));
  return status;
}

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

// What every copy, fill and batch checks first: the device is not lost, and
// work enqueued once the stream is known to have failed never runs.
axrt_status_t begin_work(CudaStream* s) {
  AXRT_RETURN_IF_ERROR(s->cuda_device()->enter());
  if (FailurePtr failure = s->failure()) return status_from_failure(failure);
  name_for_tools(s);
  return nullptr;
}

void stream_destroy(Stream* stream) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  // Releasing a stream does not wait for its work: what is still running
  // finishes the stream later (CudaDevice::retire).
  d->defer_or_run([s, d] {
    if (!finish_stream(s, false)) d->retire(s);
  });
}

axrt_status_t stream_copy(Stream* stream, const CopyCommand& copy) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(begin_work(s));
  ContextScope scope(d);
  TraceScope traced;
  if (trace::active()) traced.start(s, copy_record(copy));
  s->sequence.fetch_add(1, std::memory_order_relaxed);
  AXRT_RETURN_IF_ERROR(run_copy(s, copy));
  traced.finish();
  std::vector<Ref<Object>> keep;
  if (copy.src.buffer) keep.emplace_back(copy.src.buffer);
  if (copy.dst.buffer) keep.emplace_back(copy.dst.buffer);
  return s->retain_until_done(std::move(keep), nullptr, {});
}

axrt_status_t stream_fill(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                          uint64_t pattern, uint32_t pattern_size) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(begin_work(s));
  ContextScope scope(d);
  TraceScope traced;
  if (trace::active()) traced.start(s, operation_record(trace::OpKind::kFill, length));
  s->sequence.fetch_add(1, std::memory_order_relaxed);
  AXRT_RETURN_IF_ERROR(run_fill(s, buffer, offset, length, pattern, pattern_size));
  traced.finish();
  std::vector<Ref<Object>> keep;
  keep.emplace_back(buffer);
  return s->retain_until_done(std::move(keep), nullptr, {});
}

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
  TraceScope traced;
  if (trace::active()) traced.start(s, operation_record(trace::OpKind::kHostFunction));
  AXRT_RETURN_IF_ERROR(enqueue_host_call(s, s->stream, [func, user_data](axrt_status_t told) {
    return func(user_data, told);
  }));
  traced.finish();
  return nullptr;
}

axrt_status_t ensure_event(CudaEvent* e) {
  if (e->event) return nullptr;
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  const unsigned flags =
      (e->flags & AXRT_EVENT_FLAG_DISABLE_TIMING) ? CU_EVENT_DISABLE_TIMING : CU_EVENT_DEFAULT;
  return d->check(d->cu.cuEventCreate(&e->event, flags), "cuEventCreate");
}

axrt_status_t stream_record_event(Stream* stream, Event* event) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  auto* e = static_cast<CudaEvent*>(event);
  ContextScope scope(d);
  std::lock_guard<std::mutex> lock(e->record_mutex);
  AXRT_RETURN_IF_ERROR(ensure_event(e));
  TraceScope traced;
  if (trace::active()) traced.start(s, operation_record(trace::OpKind::kEventRecord));
  const uint64_t sequence = s->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  AXRT_RETURN_IF_ERROR(d->check(d->cu.cuEventRecord(e->event, s->stream), "cuEventRecord"));
  traced.finish();
  e->recorded_on = Ref<Stream>(stream);
  e->recorded_sequence = sequence;
  return nullptr;
}

axrt_status_t stream_wait_event(Stream* stream, Event* event) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  ContextScope scope(d);
  std::vector<Ref<Object>> keep;
  keep.emplace_back(event);
  TraceScope traced;
  if (trace::active()) traced.start(s, operation_record(trace::OpKind::kEventWait));
  if (is_cuda_event(event)) {
    auto* e = static_cast<CudaEvent*>(event);
    bool watch_failure = false;
    {
      std::lock_guard<std::mutex> lock(e->record_mutex);
      AXRT_RETURN_IF_ERROR(d->check(d->cu.cuStreamWaitEvent(s->stream, e->event, 0),
                                    "cuStreamWaitEvent"));
      auto* source = static_cast<CudaStream*>(e->recorded_on.get());
      watch_failure = source && source->has_host_work.load(std::memory_order_acquire);
    }
    if (FailurePtr failure = e->record_failure()) {
      s->fail(s->sequence.fetch_add(1, std::memory_order_relaxed) + 1, std::move(failure));
    } else if (watch_failure) {
      // The record may still complete with a failure from a host function:
      // look once it has.
      AXRT_RETURN_IF_ERROR(enqueue_host_call(s, s->stream, [e](axrt_status_t) -> axrt_status_t {
        FailurePtr failure = e->record_failure();
        return failure ? status_from_failure(failure) : nullptr;
      }));
    }
    traced.finish();
    return s->retain_until_done(std::move(keep), nullptr, {});
  }
  // An event of another driver: the stream waits on the callback thread.
  AXRT_RETURN_IF_ERROR(
      enqueue_host_call(s, s->stream, [event](axrt_status_t told) -> axrt_status_t {
        if (told) return nullptr;
        return event->vtable->wait(event, AXRT_TIMEOUT_INFINITE);
      }));
  traced.finish();
  return s->retain_until_done(std::move(keep), nullptr, {});
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

axrt_status_t stream_deallocate_buffer(Stream* stream, Buffer* buffer) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(d->enter());
  name_for_tools(s);
  ContextScope scope(d);
  TraceScope traced;
  if (trace::active()) traced.start(s, operation_record(trace::OpKind::kDeallocate));
  bool freed = false;
  AXRT_RETURN_IF_ERROR(free_on_stream(s, buffer, &freed));
  traced.finish();
  if (freed) return nullptr;
  std::vector<Ref<Buffer>> returns;
  returns.emplace_back(buffer);
  return s->retain_until_done({}, nullptr, std::move(returns));
}

axrt_status_t stream_submit_batch(Stream* stream, CommandBatchPtr batch) {
  CudaStream* s = cuda(stream);
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(begin_work(s));
  ContextScope scope(d);
  // Tools see the launches inside a range named by the function.
  nvtx::Range range(batch->trace_name ? batch->trace_name : "function");
  TraceScope traced;
  if (trace::active()) traced.start(s, function_record(*batch), batch->commands.size());
  s->sequence.fetch_add(1, std::memory_order_relaxed);
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
      return fail_with(s, status);
    }
    if (traced.active()) traced.command(command_trace_record(command, batch->command_base + i));
  }
  traced.finish();
  // The arena goes back on the stream, right behind the launches, when the
  // pool takes it; otherwise when the stream got there (reap).
  if (batch->arena) {
    bool freed = false;
    if (axrt_status_t status = free_on_stream(s, batch->arena, &freed)) {
      StatusPtr(s->retain_until_done({}, std::move(batch), {}));
      return fail_with(s, status);
    }
  }
  return s->retain_until_done({}, std::move(batch), {});
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
  // The staging stream's last steps precede the stream's, but it is idle
  // only once it noted them done.
  CUresult result = d->cu.cuStreamSynchronize(s->stream);
  if (result == CUDA_SUCCESS && s->staging_stream) {
    result = d->cu.cuStreamSynchronize(s->staging_stream);
  }
  if (result != CUDA_SUCCESS) {
    axrt_status_t status = d->check(result, "cuStreamSynchronize");
    if (d->is_lost()) {
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
  for (CUstream stream : {s->stream, s->staging_stream}) {
    if (!stream) continue;
    const CUresult result = d->cu.cuStreamQuery(stream);
    if (result == CUDA_ERROR_NOT_READY) {
      idle = false;
      break;
    }
    AXRT_RETURN_IF_ERROR(d->check(result, "cuStreamQuery"));
  }
  if (idle) s->reap(false);
  if (FailurePtr failure = s->failure()) return status_from_failure(failure);
  *out_idle = idle;
  return nullptr;
}

axrt_status_t stream_get_native_handle(Stream* stream, void** out_handle) {
  CudaStream* s = cuda(stream);
  AXRT_RETURN_IF_ERROR(s->cuda_device()->enter());
  *out_handle = s->stream;
  return nullptr;
}

// --- Events -----------------------------------------------------------------

// Records the traced work of the stream that recorded `e`, which completed.
void poll_recording_stream(CudaEvent* e) noexcept {
  if (in_cuda_callback()) return;
  Ref<Stream> source;
  {
    std::lock_guard<std::mutex> lock(e->record_mutex);
    source = e->recorded_on;
  }
  auto* s = static_cast<CudaStream*>(source.get());
  if (s && s->trace.pending()) s->trace.poll(s->cuda_device());
}

void event_destroy(Event* event) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  d->defer_or_run([e, d] {
    if (e->event) {
      ContextScope scope(d);
      d->cu.cuEventDestroy(e->event);
    }
    delete e;
  });
}

axrt_status_t event_query(Event* event, bool* out_complete) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  const CUresult result = d->cu.cuEventQuery(e->event);
  if (result == CUDA_ERROR_NOT_READY) {
    *out_complete = false;
    return nullptr;
  }
  AXRT_RETURN_IF_ERROR(d->check(result, "cuEventQuery"));
  if (FailurePtr failure = e->record_failure()) return status_from_failure(failure);
  if (trace::active()) poll_recording_stream(e);
  *out_complete = true;
  return nullptr;
}

axrt_status_t event_wait(Event* event, uint64_t timeout_ns) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  CUresult result;
  if (timeout_ns == AXRT_TIMEOUT_INFINITE && !in_cuda_callback()) {
    result = d->cu.cuEventSynchronize(e->event);
  } else {
    // Poll: CUDA has no timed wait. Short sleeps first, longer ones later.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(
                              std::min<uint64_t>(timeout_ns, uint64_t{1} << 62));
    auto pause = std::chrono::microseconds(2);
    while ((result = d->cu.cuEventQuery(e->event)) == CUDA_ERROR_NOT_READY) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                           "axrt_event_wait: {} did not complete within {} ns", e->describe(),
                           timeout_ns);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  AXRT_RETURN_IF_ERROR(d->check(result, "cuEventSynchronize"));
  if (FailurePtr failure = e->record_failure()) return status_from_failure(failure);
  if (trace::active()) poll_recording_stream(e);
  return nullptr;
}

axrt_status_t event_elapsed_time(Event* start, Event* end, int64_t* out_nanoseconds) {
  auto* a = static_cast<CudaEvent*>(start);
  auto* b = static_cast<CudaEvent*>(end);
  CudaDevice* d = static_cast<CudaDevice*>(a->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  float milliseconds = 0;
  AXRT_RETURN_IF_ERROR(
      d->check(d->cu.cuEventElapsedTime(&milliseconds, a->event, b->event), "cuEventElapsedTime"));
  *out_nanoseconds = std::llround(static_cast<double>(milliseconds) * 1e6);
  return nullptr;
}

// Every axrt record is a cuEventRecord on the recording stream's CUDA stream,
// in stream order behind its host functions and cross-driver waits, so the
// CUDA event stands for the latest record exactly.
axrt_status_t event_enqueue_native_wait(Event* event, void* native_stream) {
  auto* e = static_cast<CudaEvent*>(event);
  CudaDevice* d = static_cast<CudaDevice*>(e->device.get());
  AXRT_RETURN_IF_ERROR(d->enter());
  // The special handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) name the
  // default streams of the current context.
  ContextScope scope(d);
  std::lock_guard<std::mutex> lock(e->record_mutex);
  auto* source = static_cast<CudaStream*>(e->recorded_on.get());
  if (FailurePtr failure = source ? source->failure_before(e->recorded_sequence) : nullptr) {
    // A native queue cannot fail, so it is not made to wait for a failure.
    return make_status(failure->code,
                       "axrt_event_enqueue_native_wait: the latest record of {} completes with a "
                       "failure, so no native stream is made to wait for it: {}",
                       e->describe(), failure->message);
  }
  const CUresult result =
      d->cu.cuStreamWaitEvent(static_cast<CUstream>(native_stream), e->event, 0);
  if (result == CUDA_ERROR_INVALID_HANDLE) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "axrt_event_enqueue_native_wait: `native_stream` {} is not a live CUstream "
                       "(cuStreamWaitEvent on {}: {})",
                       native_stream, d->id(), d->cu.describe(result));
  }
  return d->check(result, "cuStreamWaitEvent");
}

const EventVtable kCudaEventVtable = {
    .destroy = event_destroy,
    .query = event_query,
    .wait = event_wait,
    .elapsed_time = event_elapsed_time,
    .enqueue_native_wait = event_enqueue_native_wait,
};

}  // namespace

bool finish_stream(CudaStream* s, bool wait) {
  CudaDevice* d = s->cuda_device();
  {
    ContextScope scope(d);
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
      if (!g_orphans) g_orphans = new std::vector<std::unique_ptr<HostCall>>();
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
};

CudaEvent::CudaEvent(CudaDevice* d) : Event(&kCudaEventVtable) { device = Ref<Device>(d); }

FailurePtr CudaEvent::record_failure() {
  std::lock_guard<std::mutex> lock(record_mutex);
  auto* source = static_cast<CudaStream*>(recorded_on.get());
  return source ? source->failure_before(recorded_sequence) : nullptr;
}

bool is_cuda_event(const Event* event) noexcept { return event->vtable == &kCudaEventVtable; }

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

axrt_status_t create_event(Device* device, Event** out_event) {
  auto* d = static_cast<CudaDevice*>(device);
  AXRT_RETURN_IF_ERROR(d->enter());
  auto* e = new CudaEvent(d);
  e->destroy = [](Object* object) { event_destroy(static_cast<Event*>(object)); };
  *out_event = e;
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
  // What the streams hold is released at their next call; their traced work
  // is recorded now, while the trace that wants it may still run.
  AXRT_RETURN_IF_ERROR(device->check(device->cu.cuCtxSynchronize(), "cuCtxSynchronize"));
  if (trace::active()) device->poll_traced_streams();
  return nullptr;
}

}  // namespace axrt::cuda
