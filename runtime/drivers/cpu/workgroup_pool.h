// The CPU driver's shared pool of threads for data-parallel work: kernel
// workgroups and large copies. One job runs on the pool at a time; the
// submitting thread works on it too. Work too small to be worth waking
// threads for, work submitted while the pool is busy, and work submitted from
// a pool thread all run inline on the caller, so the pool never deadlocks
// and small work never pays a wake-up. A pool thread polls for the next job
// for a short while (50 us) after each before it sleeps, so the dispatches
// of one function call reach threads that are awake.
#ifndef AXRT_RUNTIME_DRIVERS_CPU_WORKGROUP_POOL_H_
#define AXRT_RUNTIME_DRIVERS_CPU_WORKGROUP_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace axrt::cpu {

class WorkgroupPool {
 public:
  // Runs items [begin, end) of a job.
  using RangeFn = void (*)(void* context, uint64_t begin, uint64_t end);

  // `concurrency` threads work on a job, the caller included; 1 makes every
  // job inline. Fewer when the system cannot start that many threads.
  explicit WorkgroupPool(uint32_t concurrency);
  ~WorkgroupPool();
  WorkgroupPool(const WorkgroupPool&) = delete;
  WorkgroupPool& operator=(const WorkgroupPool&) = delete;

  uint32_t concurrency() const noexcept { return static_cast<uint32_t>(workers_.size()) + 1; }

  // Runs `fn` over [0, count) in chunks of at most `grain` items and returns
  // when all have run. Jobs of at most `grain` items run inline.
  void parallel_for(uint64_t count, uint64_t grain, RangeFn fn, void* context);

  // Convenience for lambdas: `f(begin, end)`.
  template <typename F>
  void parallel_for(uint64_t count, uint64_t grain, F&& f) {
    parallel_for(
        count, grain,
        [](void* c, uint64_t b, uint64_t e) { (*static_cast<std::remove_reference_t<F>*>(c))(b, e); },
        &f);
  }

  // Within a job, the index of the thread running a chunk: 0 for the
  // submitting thread (and for every job run inline), 1 .. concurrency-1 for
  // the pool's threads. Unique among the threads of one job.
  static uint32_t current_worker_index() noexcept;

  // Jobs that ran on the pool threads rather than inline (for tests and
  // statistics).
  uint64_t parallel_job_count() const noexcept {
    return parallel_jobs_.load(std::memory_order_relaxed);
  }

 private:
  // The job's claim counter packs the job's generation above the next item
  // index, so a thread that wakes late for an old job cannot claim items of
  // a newer one.
  static constexpr int kIndexBits = 40;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;

  void worker_main();
  void run_chunks(uint64_t generation);
  // Returns once a job newer than `seen` is published, the pool is stopping,
  // or the polling time has passed.
  void poll_for_job(uint64_t seen) const;

  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one job at a time

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  bool stopping_ = false;
  // Pool threads inside run_chunks(); the job fields below change only while
  // it is zero, so a thread that woke late never reads a half-written job.
  uint32_t active_ = 0;
  uint64_t generation_ = 0;  // under mutex_; also published in claim_
  // generation_ for lock-free polling (all ones once stopping); written
  // under mutex_.
  std::atomic<uint64_t> published_{0};

  // The current job, written before workers are woken.
  RangeFn fn_ = nullptr;
  void* context_ = nullptr;
  uint64_t count_ = 0;
  uint64_t grain_ = 1;
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> parallel_jobs_{0};
};

}  // namespace axrt::cpu

#endif  // AXRT_RUNTIME_DRIVERS_CPU_WORKGROUP_POOL_H_
