// The CPU driver: the embedded default device and the reference for every
// other driver. Device memory and pinned memory are aligned host memory from
// caching pools; each stream has a worker thread; data-parallel work runs on
// one shared workgroup pool per device.
#ifndef AXRT_RUNTIME_DRIVERS_CPU_CPU_DRIVER_H_
#define AXRT_RUNTIME_DRIVERS_CPU_CPU_DRIVER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "runtime/caching_pool.h"
#include "runtime/driver.h"
#include "runtime/drivers/cpu/workgroup_pool.h"

namespace axrt::cpu {

class CpuQueue;

struct CpuDevice : Device {
  // Device `ordinal` of `count` ("cpu:<ordinal>", a `count`-th of the host's
  // memory) with `threads` workgroup threads, the caller's included
  // (compute_units).
  CpuDevice(uint32_t ordinal, uint32_t count, uint32_t threads);
  ~CpuDevice();

  std::unique_ptr<CachingPool> device_pool;
  std::unique_ptr<CachingPool> pinned_pool;
  std::unique_ptr<WorkgroupPool> workgroups;

  // The queues of live streams, for axrt_device_synchronize().
  std::mutex queues_mutex;
  std::vector<std::weak_ptr<CpuQueue>> queues;
};

struct CpuEvent : Event {
  CpuEvent();

  // Reserves the sequence number of a new record.
  uint64_t begin_record();
  // Marks record `sequence` complete, with `failure` when its stream failed.
  void complete(uint64_t sequence, FailurePtr failure);
  // Waits until record `sequence` (or a later one) completed; false on
  // timeout. `*out_failure` receives the failure it completed with.
  bool wait(uint64_t sequence, uint64_t timeout_ns, FailurePtr* out_failure);
  bool is_complete(uint64_t sequence, FailurePtr* out_failure);
  uint64_t latest_record();

  std::mutex mutex;
  std::condition_variable completed_cv;
  uint64_t recorded = 0;   // records enqueued
  uint64_t completed = 0;  // highest record completed
  FailurePtr failure;      // of the completed record
  int64_t timestamp_ns = 0;
};

bool is_cpu_event(const Event* event) noexcept;

axrt_status_t create_stream(Device* device, Stream** out_stream);
// Waits for every live stream of `device` (cpu_stream.cc owns the queues).
axrt_status_t synchronize_device(CpuDevice* device);
axrt_status_t create_event(Device* device, Event** out_event);

}  // namespace axrt::cpu

#endif  // AXRT_RUNTIME_DRIVERS_CPU_CPU_DRIVER_H_
