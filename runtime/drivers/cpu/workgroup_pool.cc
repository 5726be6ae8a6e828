#include "runtime/drivers/cpu/workgroup_pool.h"

#include <chrono>
#include <system_error>
#include <thread>

#include "base/thread.h"

namespace axrt::cpu {
namespace {
thread_local bool t_is_pool_thread = false;
thread_local uint32_t t_worker_index = 0;

// How long a pool thread polls for the next job after finishing one before
// it sleeps. Jobs come in runs (the dispatches of one function call, a
// few to tens of microseconds apart); a thread that is still polling takes
// the next one without a wake-up through the kernel.
constexpr auto kPollTime = std::chrono::microseconds(50);
}  // namespace

uint32_t WorkgroupPool::current_worker_index() noexcept { return t_worker_index; }

WorkgroupPool::WorkgroupPool(uint32_t concurrency) {
  const uint32_t threads = concurrency > 1 ? concurrency - 1 : 0;
  workers_.reserve(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    try {
      workers_.push_back(start_thread([this, i] {
        t_worker_index = i + 1;
        worker_main();
      }));
    } catch (const std::system_error&) {
      // The system has no more threads to give. Throwing would destroy the
      // started ones unjoined (std::terminate); the pool works with them.
      break;
    }
  }
}

WorkgroupPool::~WorkgroupPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    published_.store(~uint64_t{0}, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void WorkgroupPool::parallel_for(uint64_t count, uint64_t grain, RangeFn fn, void* context) {
  if (count == 0) return;
  if (grain == 0) grain = 1;
  if (count <= grain || workers_.empty() || t_is_pool_thread || count > kIndexMask) {
    fn(context, 0, count);
    return;
  }
  std::unique_lock<std::mutex> submit(submit_mutex_, std::try_to_lock);
  if (!submit.owns_lock()) {
    fn(context, 0, count);
    return;
  }
  uint64_t generation;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return active_ == 0; });
    generation = ++generation_;
    published_.store(generation, std::memory_order_release);
    fn_ = fn;
    context_ = context;
    count_ = count;
    grain_ = grain;
    done_.store(0, std::memory_order_relaxed);
    claim_.store((generation & ((uint64_t{1} << (64 - kIndexBits)) - 1)) << kIndexBits,
                 std::memory_order_release);
  }
  wake_.notify_all();
  parallel_jobs_.fetch_add(1, std::memory_order_relaxed);
  run_chunks(generation);
  for (uint64_t done = done_.load(std::memory_order_acquire); done != count;
       done = done_.load(std::memory_order_acquire)) {
    done_.wait(done, std::memory_order_acquire);
  }
}

void WorkgroupPool::run_chunks(uint64_t generation) {
  const uint64_t tag = generation & ((uint64_t{1} << (64 - kIndexBits)) - 1);
  uint64_t current = claim_.load(std::memory_order_acquire);
  while (true) {
    if ((current >> kIndexBits) != tag) return;  // a newer job, or none
    const uint64_t begin = current & kIndexMask;
    if (begin >= count_) return;
    const uint64_t end = begin + grain_ < count_ ? begin + grain_ : count_;
    if (!claim_.compare_exchange_weak(current, (tag << kIndexBits) | end,
                                      std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;
    }
    fn_(context_, begin, end);
    const uint64_t finished = done_.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin);
    if (finished == count_) done_.notify_all();
    current = claim_.load(std::memory_order_acquire);
  }
}

void WorkgroupPool::worker_main() {
  t_is_pool_thread = true;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!stopping_ && generation_ == seen) {
      lock.unlock();
      poll_for_job(seen);
      lock.lock();
    }
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    ++active_;
    lock.unlock();
    run_chunks(seen);
    lock.lock();
    if (--active_ == 0) idle_.notify_all();
  }
}

void WorkgroupPool::poll_for_job(uint64_t seen) const {
  const auto deadline = std::chrono::steady_clock::now() + kPollTime;
  for (uint32_t i = 1;; ++i) {
    if (published_.load(std::memory_order_acquire) != seen) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return;
      // Another thread of this process may be waiting for the core.
      std::this_thread::yield();
    }
  }
}

}  // namespace axrt::cpu
