#include "serving/member_thread.h"

#include <pthread.h>

#include <cstdio>
#include <new>
#include <utility>

#include "base/status.h"
#include "base/thread.h"

namespace axrt::serving {

MemberThread::MemberThread(uint32_t rank) {
  thread_ = start_thread([this, rank] { loop(rank); });
}

MemberThread::~MemberThread() {
  if (axrt_status_t s = wait()) axrt_status_free(s);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MemberThread::post(axrt_status_t (*job)(void* context), void* context) {
  {
    std::lock_guard lock(mutex_);
    job_ = job;
    context_ = context;
    posted_ = true;
    finished_ = false;
  }
  wake_.notify_all();
}

axrt_status_t MemberThread::wait() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return !posted_ || finished_; });
  posted_ = false;
  finished_ = false;
  return std::exchange(result_, nullptr);
}

void MemberThread::loop(uint32_t rank) {
  // How debuggers, top and traces name the thread (at most 15 characters).
  char name[16];
  std::snprintf(name, sizeof name, "axrt member %u", rank % 1000);
  pthread_setname_np(pthread_self(), name);
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || job_ != nullptr; });
    if (stopping_) return;
    axrt_status_t (*job)(void*) = std::exchange(job_, nullptr);
    void* context = std::exchange(context_, nullptr);
    lock.unlock();
    axrt_status_t status = nullptr;
    try {
      status = job(context);
    } catch (const std::bad_alloc&) {
      status = make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                           "axrt engine: out of host memory queueing member {}'s step", rank);
    }
    lock.lock();
    result_ = status;
    finished_ = true;
    wake_.notify_all();
  }
}

}  // namespace axrt::serving
