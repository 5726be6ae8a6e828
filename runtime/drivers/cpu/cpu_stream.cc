// CPU streams: a queue drained by one worker thread per stream, with an
// inline path that runs small work on the calling thread when the stream is
// idle, so a tiny copy or an event record costs no thread hand-off.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "base/thread.h"
#include "runtime/driver.h"
#include "runtime/drivers/cpu/cpu_driver.h"
#include "trace/trace.h"

namespace axrt::cpu {
namespace {

// Work up to this many bytes may run inline on the caller.
constexpr uint64_t kInlineBytes = 64 * 1024;
// Copies and fills from this size on are split across the workgroup pool.
constexpr uint64_t kParallelBytes = 4 * 1024 * 1024;
constexpr uint64_t kParallelChunk = 1024 * 1024;
// A worker that ran out of work, and a thread synchronizing with a busy
// stream, poll this long before sleeping: waking a sleeping thread costs tens
// of microseconds, far more than most stream work.
constexpr auto kSpinTime = std::chrono::microseconds(20);
// A command batch whose last run took at most this long runs inline on an
// idle stream: handing it to the worker would cost more than running it.
constexpr uint64_t kInlineBatchNs = 50'000;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Scratch for a kernel's dynamic shared memory, one per thread: calls on one
// thread never overlap.
std::byte* thread_scratch(uint32_t size) {
  struct AlignedFree {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  struct Scratch {
    std::unique_ptr<std::byte[], AlignedFree> storage;
    uint32_t capacity = 0;
  };
  thread_local Scratch scratch;
  if (scratch.capacity < size) {
    scratch.storage.reset(static_cast<std::byte*>(::operator new[](size, std::align_val_t{64})));
    scratch.capacity = size;
  }
  return scratch.storage.get();
}

// Polls `ready` until it holds or kSpinTime passes.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (uint32_t i = 1;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
  }
}

struct CpuOp {
  enum class Kind : uint8_t { kCopy, kFill, kHostFunc, kRecord, kWait, kDeallocate, kBatch };
  Kind kind;
  CopyCommand copy;
  Ref<Buffer> buffers[2];
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t pattern = 0;
  uint32_t pattern_size = 0;
  axrt_host_func_t func = nullptr;
  void* user_data = nullptr;
  Ref<Event> event;
  uint64_t sequence = 0;
  CommandBatchPtr batch;
  trace::OpStamp stamp;  // queued while a trace ran
};

// A FIFO over a ring of slots that only grows: unlike std::deque, pushing
// and popping in the steady state allocates nothing.
template <typename T>
class Ring {
 public:
  bool empty() const noexcept { return count_ == 0; }
  T& front() noexcept { return slots_[head_]; }
  void pop_front() noexcept {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
  }
  // Throws std::bad_alloc (the ring is unchanged then).
  void push_back(T&& value) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(value);
    ++count_;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i) {
      bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    }
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // a power of two in size
  size_t head_ = 0;
  size_t count_ = 0;
};

trace::Place place_of(const CopyEndpoint& endpoint) {
  return endpoint.buffer && endpoint.buffer->allocation()->memory_type != AXRT_MEMORY_TYPE_HOST_PINNED
             ? trace::Place::kDevice
             : trace::Place::kHost;
}

// Records `op` (ran from `begin` to now) on its stream's track.
void record_operation(const CpuOp& op, int64_t begin) {
  trace::Record r;
  r.begin = begin;
  r.end = trace::now();
  r.flow = op.stamp.flow;
  r.session = op.stamp.session;
  r.track = op.stamp.track;
  r.a[0] = op.stamp.queued;
  switch (op.kind) {
    case CpuOp::Kind::kCopy:
      r.kind = trace::Kind::kOperation;
      r.op = trace::OpKind::kCopy;
      r.a[1] = static_cast<int64_t>(op.copy.width * op.copy.height);
      r.a[2] = static_cast<int64_t>(place_of(op.copy.src));
      r.a[3] = static_cast<int64_t>(place_of(op.copy.dst));
      break;
    case CpuOp::Kind::kFill:
      r.op = trace::OpKind::kFill;
      r.a[1] = static_cast<int64_t>(op.length);
      break;
    case CpuOp::Kind::kHostFunc: r.op = trace::OpKind::kHostFunction; break;
    case CpuOp::Kind::kRecord: r.op = trace::OpKind::kEventRecord; break;
    case CpuOp::Kind::kWait: r.op = trace::OpKind::kEventWait; break;
    case CpuOp::Kind::kDeallocate: r.op = trace::OpKind::kDeallocate; break;
    case CpuOp::Kind::kBatch:
      r.kind = trace::Kind::kFunction;
      r.name = op.batch->trace_name;
      r.detail = op.batch->trace_detail;
      r.a[1] = static_cast<int64_t>(op.batch->commands.size());
      break;
  }
  if (op.kind != CpuOp::Kind::kBatch) r.kind = trace::Kind::kOperation;
  trace::emit(r);
}

}  // namespace

class CpuQueue {
 public:
  CpuQueue(CpuDevice* device, std::string name)
      : device_(device), device_ref_(device), name_(std::move(name)) {}

  void start(std::shared_ptr<CpuQueue> self) {
    start_thread([self = std::move(self)] { self->worker_main(); }).detach();
  }

  // Runs `op` inline when the stream is idle and the work is small, and
  // queues it for the worker otherwise.
  void submit(CpuOp&& op, bool may_run_inline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (may_run_inline && ops_.empty() && !busy_) {
      busy_ = true;
      set_idle(false);
      lock.unlock();
      execute(op);
      op = CpuOp{};  // drop references outside the lock
      lock.lock();
      busy_ = false;
      if (!ops_.empty()) {
        work_cv_.notify_one();
      } else {
        set_idle(true);
        idle_cv_.notify_all();
      }
      return;
    }
    ops_.push_back(std::move(op));
    set_idle(false);
    has_work_.store(true, std::memory_order_release);
    // A worker that still polls sees has_work_: only a parked one is woken.
    const bool wake = parked_.load(std::memory_order_relaxed);
    lock.unlock();
    if (wake) work_cv_.notify_one();
  }

  axrt_status_t synchronize(const Stream* stream) {
    if (t_current_queue == this) {
      return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                         "axrt_stream_synchronize: called from a host function of {}, which "
                         "would wait for itself",
                         stream ? stream->describe() : name_);
    }
    if (!parked_.load(std::memory_order_acquire)) {
      spin_until([&] { return idle_.load(std::memory_order_acquire); });
    }
    std::unique_lock<std::mutex> lock(mutex_);
    while (!ops_.empty() || busy_) {
      if (!busy_ && parked_.load(std::memory_order_relaxed)) {
        // The worker sleeps, and waking it costs tens of microseconds: this
        // thread, which would only wait, runs the queued work itself.
        run_front_here(lock);
        continue;
      }
      idle_cv_.wait(lock);
    }
    return status_from_failure(failure_);
  }

  axrt_status_t query(bool* out_idle) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) return status_from_failure(failure_);
    *out_idle = ops_.empty() && !busy_;
    return nullptr;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    work_cv_.notify_one();
  }

  bool is_current_thread() const noexcept { return t_current_queue == this; }

  // Whether a wait on `event` may run inline: its record already completed.
  bool event_already_complete(CpuEvent* event, uint64_t sequence) {
    FailurePtr ignored;
    return event->is_complete(sequence, &ignored);
  }

 private:
  // Runs the first queued operation on the calling thread, as the worker
  // would; `lock` holds mutex_ before and after.
  void run_front_here(std::unique_lock<std::mutex>& lock) {
    CpuOp op = std::move(ops_.front());
    ops_.pop_front();
    if (ops_.empty()) has_work_.store(false, std::memory_order_relaxed);
    busy_ = true;
    lock.unlock();
    const CpuQueue* const outer = t_current_queue;
    t_current_queue = this;  // a host function here is on this stream
    execute(op);
    op = CpuOp{};  // drop references outside the lock
    t_current_queue = outer;
    lock.lock();
    busy_ = false;
    if (ops_.empty()) set_idle(true);
    // Other waiters look again: the stream is idle, or there is more to run.
    idle_cv_.notify_all();
    // A worker told to close while this ran parked again: it may go now.
    if (closing_ && ops_.empty()) work_cv_.notify_one();
  }

  void worker_main() {
    t_current_queue = this;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      if (ops_.empty() && !closing_) {
        lock.unlock();
        spin_until([&] { return has_work_.load(std::memory_order_acquire); });
        lock.lock();
      }
      parked_.store(true, std::memory_order_relaxed);
      work_cv_.wait(lock, [&] { return (!ops_.empty() && !busy_) || (closing_ && ops_.empty() && !busy_); });
      parked_.store(false, std::memory_order_relaxed);
      if (ops_.empty()) break;  // closing and drained
      CpuOp op = std::move(ops_.front());
      ops_.pop_front();
      if (ops_.empty()) has_work_.store(false, std::memory_order_relaxed);
      busy_ = true;
      lock.unlock();
      execute(op);
      op = CpuOp{};
      lock.lock();
      busy_ = false;
      if (ops_.empty()) {
        set_idle(true);
        idle_cv_.notify_all();
      }
    }
    t_current_queue = nullptr;
  }

  // Mirrors `ops_.empty() && !busy_` for lock-free polling; written under
  // mutex_.
  void set_idle(bool idle) { idle_.store(idle, std::memory_order_release); }

  void fail(FailurePtr failure, uint32_t track) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) return;
      failure_ = failure;
    }
    device_->counters.stream_failures.fetch_add(1, std::memory_order_relaxed);
    if (trace::active()) trace::instant(track, failure->message, name_);
  }

  FailurePtr current_failure() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failure_;
  }

  void execute(CpuOp& op) {
    if (trace::recording(op.stamp)) {
      const int64_t begin = trace::now();
      run(op, op.stamp.track);
      record_operation(op, begin);
    } else {
      run(op, 0);
    }
  }

  // `track`: the stream's trace track when the operation is traced, else 0.
  void run(CpuOp& op, uint32_t track) {
    const FailurePtr failed = current_failure();
    switch (op.kind) {
      case CpuOp::Kind::kCopy:
        if (!failed) run_copy(op.copy);
        break;
      case CpuOp::Kind::kFill:
        if (!failed) run_fill(op);
        break;
      case CpuOp::Kind::kHostFunc: {
        StatusPtr told(status_from_failure(failed));
        axrt_status_t result = op.func(op.user_data, told.get());
        // A function told of an earlier failure cannot change it: the
        // stream keeps its first failure.
        if (result) {
          if (failed) {
            axrt_status_free(result);
          } else {
            fail(make_failure(result), track);
          }
        }
        break;
      }
      case CpuOp::Kind::kRecord:
        static_cast<CpuEvent*>(op.event.get())->complete(op.sequence, failed);
        break;
      case CpuOp::Kind::kWait:
        if (!failed) run_wait(op, track);
        break;
      case CpuOp::Kind::kDeallocate:
        buffer_return_memory(op.buffers[0].get());
        break;
      case CpuOp::Kind::kBatch:
        if (!failed) run_batch(*op.batch, track);
        if (Buffer* arena = op.batch->arena; arena && arena->claim_memory_return()) {
          device_->vtable->deallocate(device_, arena->memory_type, arena->block);
        }
        break;
    }
  }

  void run_batch(const CommandBatch& batch, uint32_t track) {
    const uint64_t start = batch.last_duration_ns ? now_ns() : 0;
    // Traced batches record each command, nested in the function's slice.
    const bool traced = track != 0;
    for (size_t i = 0; i < batch.commands.size(); ++i) {
      const BatchCommand& command = batch.commands[i];
      const int64_t command_begin = traced ? trace::now() : 0;
      switch (command.kind) {
        case BatchCommand::Kind::kDispatch:
          if (FailurePtr failure = run_dispatch(batch, command, batch.command_base + i)) {
            fail(std::move(failure), track);
            return;
          }
          break;
        case BatchCommand::Kind::kCopy:
          run_copy(command.copy);
          break;
        case BatchCommand::Kind::kFill: {
          CpuOp fill;
          fill.buffers[0] = Ref<Buffer>(command.fill_buffer);
          fill.offset = command.fill_offset;
          fill.length = command.fill_length;
          fill.pattern = command.fill_pattern;
          fill.pattern_size = command.fill_pattern_size;
          run_fill(fill);
          break;
        }
      }
      if (traced) record_command(command, batch.command_base + i, command_begin, track);
    }
    if (batch.last_duration_ns) {
      batch.last_duration_ns->store(now_ns() - start, std::memory_order_relaxed);
    }
  }

  static void record_command(const BatchCommand& command, size_t index, int64_t begin,
                             uint32_t track) {
    trace::Record r = command_trace_record(command, index);
    r.begin = begin;
    r.end = trace::now();
    r.track = track;
    trace::emit(r);
  }

  // Runs every workgroup of one dispatch across the workgroup pool.
  FailurePtr run_dispatch(const CommandBatch& batch, const BatchCommand& command, size_t index) {
    const HostKernel& kernel = *command.host_kernel;
    const axrt_kernel_dim3_t count = command.workgroup_count;
    const uint64_t total = uint64_t{count.x} * count.y * count.z;
    if (total == 0) return nullptr;
    axrt_kernel_dispatch_t dispatch = {};
    dispatch.struct_size = sizeof(dispatch);
    dispatch.workgroup_count = count;
    dispatch.workgroup_size = kernel.workgroup_size;
    dispatch.dynamic_shared_memory_size = kernel.dynamic_shared_memory;
    dispatch.worker_count = device_->workgroups->concurrency();
    dispatch.library_state = kernel.library_state;
    const void* args = batch.args_at(command.args_offset);

    struct Job {
      const HostKernel* kernel;
      const axrt_kernel_dispatch_t* dispatch;
      const void* args;
      std::atomic<bool> failed{false};
      std::mutex mutex;
      axrt_kernel_result_t result = AXRT_KERNEL_OK;
      std::string message;
      axrt_kernel_dim3_t failed_id{};
    } job;
    job.kernel = &kernel;
    job.dispatch = &dispatch;
    job.args = args;

    device_->workgroups->parallel_for(total, 1, [&job](uint64_t begin, uint64_t end) {
      const axrt_kernel_dispatch_t& d = *job.dispatch;
      char message[256];
      axrt_kernel_workgroup_t workgroup = {};
      workgroup.struct_size = sizeof(workgroup);
      workgroup.worker_id = WorkgroupPool::current_worker_index();
      workgroup.dynamic_shared_memory =
          d.dynamic_shared_memory_size ? thread_scratch(d.dynamic_shared_memory_size) : nullptr;
      workgroup.error_message = message;
      workgroup.error_message_capacity = sizeof(message);
      const uint64_t per_slice = uint64_t{d.workgroup_count.x} * d.workgroup_count.y;
      for (uint64_t linear = begin; linear < end; ++linear) {
        if (job.failed.load(std::memory_order_relaxed)) return;
        workgroup.workgroup_id.z = static_cast<uint32_t>(linear / per_slice);
        const uint64_t in_slice = linear % per_slice;
        workgroup.workgroup_id.y = static_cast<uint32_t>(in_slice / d.workgroup_count.x);
        workgroup.workgroup_id.x = static_cast<uint32_t>(in_slice % d.workgroup_count.x);
        message[0] = '\0';
        const axrt_kernel_result_t result = job.kernel->function(job.args, &d, &workgroup);
        if (result != AXRT_KERNEL_OK) {
          std::lock_guard<std::mutex> lock(job.mutex);
          if (!job.failed.exchange(true)) {
            message[sizeof(message) - 1] = '\0';
            job.result = result;
            job.message = message;
            job.failed_id = workgroup.workgroup_id;
          }
          return;
        }
      }
    });
    if (!job.failed.load()) return nullptr;
    const auto code = static_cast<axrt_status_code_t>(
        job.result > 0 && job.result <= AXRT_STATUS_CODE_DEVICE_LOST ? job.result
                                                                      : AXRT_STATUS_CODE_INTERNAL);
    return make_failure(make_status(
        code, "{} failed in command {} of {} (workgroup ({}, {}, {}), code {}): {}", kernel.name,
        index, batch.label ? *batch.label : std::string("a command batch"), job.failed_id.x,
        job.failed_id.y, job.failed_id.z, job.result,
        job.message.empty() ? "the kernel gave no reason" : job.message));
  }

  void run_wait(CpuOp& op, uint32_t track) {
    FailurePtr failure;
    if (is_cpu_event(op.event.get())) {
      static_cast<CpuEvent*>(op.event.get())->wait(op.sequence, UINT64_MAX, &failure);
    } else {
      axrt_status_t status = op.event->vtable->wait(op.event.get(), AXRT_TIMEOUT_INFINITE);
      if (status) failure = make_failure(status);
    }
    if (failure) fail(std::move(failure), track);
  }

  static std::byte* endpoint_address(const CopyEndpoint& endpoint) {
    return endpoint.host ? endpoint.host : endpoint.buffer->host_address(endpoint.offset);
  }

  void run_copy(const CopyCommand& copy) {
    std::byte* src = endpoint_address(copy.src);
    std::byte* dst = endpoint_address(copy.dst);
    const bool contiguous =
        copy.height == 1 || (copy.src.pitch == copy.width && copy.dst.pitch == copy.width);
    if (contiguous) {
      const uint64_t total = copy.width * copy.height;
      if (total >= kParallelBytes) {
        device_->workgroups->parallel_for(
            (total + kParallelChunk - 1) / kParallelChunk, 1, [&](uint64_t begin, uint64_t end) {
              const uint64_t from = begin * kParallelChunk;
              const uint64_t to = std::min(total, end * kParallelChunk);
              std::memcpy(dst + from, src + from, to - from);
            });
      } else {
        std::memcpy(dst, src, total);
      }
      return;
    }
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kParallelChunk / copy.width);
    const uint64_t grain = copy.width * copy.height >= kParallelBytes ? rows_per_chunk : copy.height;
    device_->workgroups->parallel_for(copy.height, grain, [&](uint64_t begin, uint64_t end) {
      for (uint64_t row = begin; row < end; ++row) {
        std::memcpy(dst + row * copy.dst.pitch, src + row * copy.src.pitch, copy.width);
      }
    });
  }

  template <typename T>
  static void fill_typed(std::byte* base, uint64_t length, uint64_t pattern) {
    T value;
    std::memcpy(&value, &pattern, sizeof(T));
    std::fill_n(reinterpret_cast<T*>(base), length / sizeof(T), value);
  }

  static void fill_range(std::byte* base, uint64_t length, uint64_t pattern, uint32_t size) {
    switch (size) {
      case 1: std::memset(base, static_cast<int>(pattern & 0xff), length); break;
      case 2: fill_typed<uint16_t>(base, length, pattern); break;
      case 4: fill_typed<uint32_t>(base, length, pattern); break;
      default: fill_typed<uint64_t>(base, length, pattern); break;
    }
  }

  void run_fill(const CpuOp& op) {
    std::byte* base = op.buffers[0]->host_address(op.offset);
    if (op.length < kParallelBytes) {
      fill_range(base, op.length, op.pattern, op.pattern_size);
      return;
    }
    // Chunks are multiples of 8 bytes, so every chunk starts on a pattern.
    device_->workgroups->parallel_for(
        (op.length + kParallelChunk - 1) / kParallelChunk, 1, [&](uint64_t begin, uint64_t end) {
          const uint64_t from = begin * kParallelChunk;
          const uint64_t to = std::min(op.length, end * kParallelChunk);
          fill_range(base + from, to - from, op.pattern, op.pattern_size);
        });
  }

  static thread_local const CpuQueue* t_current_queue;

  CpuDevice* device_;
  Ref<Device> device_ref_;  // the worker may outlive the stream handle
  std::string name_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  Ring<CpuOp> ops_;
  bool busy_ = false;
  bool closing_ = false;
  std::atomic<bool> idle_{true};
  std::atomic<bool> has_work_{false};
  // The worker sleeps on work_cv_ (written under mutex_; read without it
  // only as a hint).
  std::atomic<bool> parked_{false};
  FailurePtr failure_;
};

thread_local const CpuQueue* CpuQueue::t_current_queue = nullptr;

namespace {

struct CpuStream : Stream {
  CpuStream();
  std::shared_ptr<CpuQueue> queue;
};

CpuQueue& queue_of(Stream* stream) { return *static_cast<CpuStream*>(stream)->queue; }

void stream_destroy(Stream* stream) {
  auto* self = static_cast<CpuStream*>(stream);
  self->queue->close();
  delete self;
}

axrt_status_t stream_copy(Stream* stream, const CopyCommand& copy) {
  for (const CopyEndpoint* endpoint : {&copy.src, &copy.dst}) {
    if (endpoint->buffer && !endpoint->buffer->host_visible()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{} cannot reach {}: it is not host-visible", stream->describe(),
                         endpoint->buffer->describe());
    }
  }
  CpuOp op;
  op.kind = CpuOp::Kind::kCopy;
  op.copy = copy;
  op.stamp = trace::stamp(stream->trace_track);
  op.buffers[0] = Ref<Buffer>(copy.src.buffer);
  op.buffers[1] = Ref<Buffer>(copy.dst.buffer);
  queue_of(stream).submit(std::move(op), copy.width * copy.height <= kInlineBytes);
  return nullptr;
}

axrt_status_t stream_fill(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                          uint64_t pattern, uint32_t pattern_size) {
  if (!buffer->host_visible()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{} cannot reach {}: it is not host-visible",
                       stream->describe(), buffer->describe());
  }
  CpuOp op;
  op.kind = CpuOp::Kind::kFill;
  op.stamp = trace::stamp(stream->trace_track);
  op.buffers[0] = Ref<Buffer>(buffer);
  op.offset = offset;
  op.length = length;
  op.pattern = pattern;
  op.pattern_size = pattern_size;
  queue_of(stream).submit(std::move(op), length <= kInlineBytes);
  return nullptr;
}

axrt_status_t stream_launch_host_func(Stream* stream, axrt_host_func_t func, void* user_data) {
  CpuOp op;
  op.kind = CpuOp::Kind::kHostFunc;
  op.stamp = trace::stamp(stream->trace_track);
  op.func = func;
  op.user_data = user_data;
  // Never inline: the function may block, and it must not run within this
  // call (stream.h: a runtime thread, or a thread synchronizing the stream).
  queue_of(stream).submit(std::move(op), false);
  return nullptr;
}

axrt_status_t stream_record_event(Stream* stream, Event* event) {
  auto* cpu_event = static_cast<CpuEvent*>(event);
  CpuOp op;
  op.kind = CpuOp::Kind::kRecord;
  op.stamp = trace::stamp(stream->trace_track);
  op.event = Ref<Event>(event);
  op.sequence = cpu_event->begin_record();
  queue_of(stream).submit(std::move(op), true);
  return nullptr;
}

axrt_status_t stream_wait_event(Stream* stream, Event* event) {
  CpuOp op;
  op.kind = CpuOp::Kind::kWait;
  op.stamp = trace::stamp(stream->trace_track);
  op.event = Ref<Event>(event);
  bool ready = false;
  if (is_cpu_event(event)) {
    auto* cpu_event = static_cast<CpuEvent*>(event);
    op.sequence = cpu_event->latest_record();
    ready = queue_of(stream).event_already_complete(cpu_event, op.sequence);
  }
  queue_of(stream).submit(std::move(op), ready);
  return nullptr;
}

axrt_status_t stream_deallocate_buffer(Stream* stream, Buffer* buffer) {
  CpuOp op;
  op.kind = CpuOp::Kind::kDeallocate;
  op.stamp = trace::stamp(stream->trace_track);
  op.buffers[0] = Ref<Buffer>(buffer);
  queue_of(stream).submit(std::move(op), true);
  return nullptr;
}

axrt_status_t stream_submit_batch(Stream* stream, CommandBatchPtr batch) {
  const bool short_last_time =
      batch->last_duration_ns &&
      batch->last_duration_ns->load(std::memory_order_relaxed) <= kInlineBatchNs;
  CpuOp op;
  op.kind = CpuOp::Kind::kBatch;
  op.stamp = trace::stamp(stream->trace_track);
  op.batch = std::move(batch);
  queue_of(stream).submit(std::move(op), short_last_time);
  return nullptr;
}

axrt_status_t stream_synchronize(Stream* stream) { return queue_of(stream).synchronize(stream); }

axrt_status_t stream_query(Stream* stream, bool* out_idle) {
  return queue_of(stream).query(out_idle);
}

const StreamVtable kCpuStreamVtable = {
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
    // Every CPU device's memory is host memory: a copy between two of them
    // is the same memcpy.
    .copy_peer = stream_copy,
};

CpuStream::CpuStream() : Stream(&kCpuStreamVtable) {
  destroy = [](Object* object) { stream_destroy(static_cast<Stream*>(object)); };
}

}  // namespace

axrt_status_t create_stream(Device* device, Stream** out_stream) {
  auto* cpu_device = static_cast<CpuDevice*>(device);
  auto stream = std::make_unique<CpuStream>();
  stream->queue = std::make_shared<CpuQueue>(cpu_device, fmt::format("stream on {}", device->id()));
  {
    std::lock_guard<std::mutex> lock(cpu_device->queues_mutex);
    auto& queues = cpu_device->queues;
    std::erase_if(queues, [](const std::weak_ptr<CpuQueue>& q) { return q.expired(); });
    queues.push_back(stream->queue);
  }
  stream->queue->start(stream->queue);
  *out_stream = stream.release();
  return nullptr;
}

axrt_status_t synchronize_device(CpuDevice* device) {
  std::vector<std::shared_ptr<CpuQueue>> live;
  {
    std::lock_guard<std::mutex> lock(device->queues_mutex);
    for (const auto& weak : device->queues) {
      if (auto queue = weak.lock()) live.push_back(std::move(queue));
    }
  }
  for (const auto& queue : live) {
    if (queue->is_current_thread()) {
      return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                         "axrt_device_synchronize: called from a host function on {}, which "
                         "would wait for itself",
                         device->id());
    }
  }
  // Stream failures are the streams' to report (axrt_device_synchronize).
  for (const auto& queue : live) axrt_status_free(queue->synchronize(nullptr));
  return nullptr;
}

}  // namespace axrt::cpu
