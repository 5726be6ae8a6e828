// The thread that queues the work of one member of a tensor-parallel set.
//
// The engine queues every member's step at once, each from a thread of its
// own: NCCL requires that calls on several communicators be grouped or come
// from different threads, since a call may wait on the host for the other
// members' calls (as it does when it first connects them), and a member's
// step queues its collectives one at a time as the call goes through its
// commands. The head (rank 0) queues from the engine's thread.
#ifndef AXRT_SERVING_MEMBER_THREAD_H_
#define AXRT_SERVING_MEMBER_THREAD_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "axrt/base.h"

namespace axrt::serving {

class MemberThread {
 public:
  // Starts the thread of member `rank`; std::system_error when none can
  // start.
  explicit MemberThread(uint32_t rank);
  // Waits for a posted job, then stops the thread.
  ~MemberThread();
  MemberThread(const MemberThread&) = delete;
  MemberThread& operator=(const MemberThread&) = delete;

  // Runs `job(context)` on the thread. One job at a time: wait() before
  // the next.
  void post(axrt_status_t (*job)(void* context), void* context);
  // Waits for the posted job to return and hands over its status (owned by
  // the caller).
  axrt_status_t wait();

 private:
  void loop(uint32_t rank);

  std::mutex mutex_;
  std::condition_variable wake_;
  axrt_status_t (*job_)(void*) = nullptr;
  void* context_ = nullptr;
  bool posted_ = false;
  bool finished_ = false;
  bool stopping_ = false;
  axrt_status_t result_ = nullptr;
  std::thread thread_;
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_MEMBER_THREAD_H_
