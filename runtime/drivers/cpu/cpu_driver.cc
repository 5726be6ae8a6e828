#include "runtime/drivers/cpu/cpu_driver.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "base/numa.h"
#include "runtime/driver.h"

namespace axrt::cpu {

namespace {

void* host_allocate(void*, uint64_t size, uint64_t alignment) {
  void* pointer = nullptr;
  if (posix_memalign(&pointer, alignment, size) != 0) return nullptr;
  return pointer;
}

void host_free(void*, void* pointer, uint64_t, uint64_t) { std::free(pointer); }

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(' ', colon + 1);
        if (start != std::string::npos) return line.substr(start);
      }
    }
  }
  return "host CPU";
}

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 34;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

CachingPool& pool_for(Device* device, axrt_memory_type_t memory_type) {
  auto* self = static_cast<CpuDevice*>(device);
  return memory_type == AXRT_MEMORY_TYPE_HOST_PINNED ? *self->pinned_pool : *self->device_pool;
}

axrt_status_t device_allocate(Device* device, uint64_t size, uint64_t alignment,
                              axrt_memory_type_t memory_type, MemoryBlock* out_block) {
  uint64_t block_size = 0;
  void* pointer = pool_for(device, memory_type).allocate(size, alignment, &block_size);
  if (!pointer) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                       "the host has no {} bytes aligned to {} to spare", size, alignment);
  }
  out_block->host_pointer = static_cast<std::byte*>(pointer);
  out_block->device_address = reinterpret_cast<uintptr_t>(pointer);
  out_block->size = block_size;
  out_block->driver_data = reinterpret_cast<void*>(static_cast<uintptr_t>(alignment));
  return nullptr;
}

void device_deallocate(Device* device, axrt_memory_type_t memory_type, const MemoryBlock& block) {
  // `driver_data` carries the alignment: part of the block's key in the pool.
  pool_for(device, memory_type).deallocate(block.host_pointer, block.size,
                                           reinterpret_cast<uint64_t>(block.driver_data));
}

void device_query_pool_statistics(Device* device, axrt_pool_statistics_t* out) {
  const axrt_pool_statistics_t stats = static_cast<CpuDevice*>(device)->device_pool->statistics();
  *out = stats;
  out->struct_size = sizeof(*out);
  out->next = nullptr;
}

axrt_status_t device_trim_pool(Device* device, uint64_t keep_bytes) {
  static_cast<CpuDevice*>(device)->device_pool->trim(keep_bytes);
  return nullptr;
}

axrt_status_t device_synchronize(Device* device) {
  return synchronize_device(static_cast<CpuDevice*>(device));
}

// Every CPU device's memory is host memory: each reads and writes the
// others' directly, with the host's atomics.
axrt_status_t device_query_peer(Device*, Device*, axrt_device_peer_info_t* out) {
  out->link = AXRT_DEVICE_LINK_HOST_MEMORY;
  out->link_count = 0;
  out->direct_access = true;
  out->native_atomics = true;
  out->performance_rank = 0;
  return nullptr;
}

void device_destroy(Device* device) { delete static_cast<CpuDevice*>(device); }

const DeviceVtable kCpuDeviceVtable = {
    .destroy = device_destroy,
    .allocate = device_allocate,
    .deallocate = device_deallocate,
    .query_pool_statistics = device_query_pool_statistics,
    .trim_pool = device_trim_pool,
    .create_stream = create_stream,
    .create_event = create_event,
    .synchronize = device_synchronize,
    .query_peer = device_query_peer,
};

constexpr uint32_t kMaxThreads = 1024;
constexpr uint32_t kMaxDevices = 64;

// A whole number from 1 to `max` in environment variable `name`; `*out`
// is left alone when the variable is unset or empty.
axrt_status_t read_count(const char* name, const char* what, uint32_t max, uint32_t* out) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return nullptr;
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed = std::strtoull(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || value[0] == '-' || parsed < 1 ||
      parsed > max) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}='{}' is not {} (a whole number from 1 to {})", name, value, what, max);
  }
  *out = static_cast<uint32_t>(parsed);
  return nullptr;
}

// AXRT_CPU_DEVICES devices (1 when unset), each with AXRT_CPU_THREADS
// threads, else an equal share of the hardware threads (at least one).
axrt_status_t enumerate_devices(Instance*, DriverDevices* out) {
  uint32_t count = 1;
  AXRT_RETURN_IF_ERROR(read_count("AXRT_CPU_DEVICES", "a device count", kMaxDevices, &count));
  uint32_t threads = std::max(1u, std::thread::hardware_concurrency() / count);
  AXRT_RETURN_IF_ERROR(read_count("AXRT_CPU_THREADS", "a thread count", kMaxThreads, &threads));
  out->devices.reserve(count);
  for (uint32_t ordinal = 0; ordinal < count; ++ordinal) {
    auto device = std::make_unique<CpuDevice>(ordinal, count, threads);
    out->devices.push_back(device.get());
    device.release();
  }
  return nullptr;
}

}  // namespace

CpuDevice::CpuDevice(uint32_t ordinal, uint32_t count, uint32_t threads)
    : Device(&kCpuDeviceVtable) {
  // The devices of one host share its memory.
  const uint64_t memory = physical_memory() / count;
  axrt_device_properties_t& p = properties;
  p.struct_size = sizeof(p);
  fmt::format_to_n(p.id, sizeof(p.id) - 1, "cpu:{}", ordinal);
  fmt::format_to_n(p.driver, sizeof(p.driver) - 1, "cpu");
  fmt::format_to_n(p.name, sizeof(p.name) - 1, "{}", cpu_model_name());
  p.type = AXRT_DEVICE_TYPE_CPU;
  p.ordinal = ordinal;
  p.flags = AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY | AXRT_DEVICE_FLAG_EVENT_TIMING |
            AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION;
  p.compute_units = threads;
  p.total_memory = memory;
  p.buffer_alignment = 256;
  p.max_buffer_alignment = uint64_t{1} << 21;
  p.max_workgroup_size[0] = p.max_workgroup_size[1] = p.max_workgroup_size[2] = 1024;
  p.max_workgroup_invocations = 1024;
  p.max_workgroup_count[0] = p.max_workgroup_count[1] = p.max_workgroup_count[2] = 0x7fffffffu;
  p.max_shared_memory_per_workgroup = 64 * 1024;
  // Memory comes from the allocating thread's node, with no binding: a
  // node is known only when the host has one.
  p.numa_node = single_host_numa_node();

  const CachingPool::Backend backend{host_allocate, host_free, nullptr};
  device_pool = std::make_unique<CachingPool>(backend, memory / 4);
  pinned_pool = std::make_unique<CachingPool>(backend, memory / 8);
  device_pool->set_trace_name(p.id, "device memory");
  pinned_pool->set_trace_name(p.id, "pinned memory");
  workgroups = std::make_unique<WorkgroupPool>(threads);
  destroy = [](Object* object) { device_destroy(static_cast<Device*>(object)); };
}

CpuDevice::~CpuDevice() = default;

}  // namespace axrt::cpu

AXRT_DECLARE_DRIVER_FACTORY(cpu);
const axrt::DriverFactory AXRT_DRIVER_FACTORY(cpu) = {
    .name = "cpu",
    .enumerate_devices = axrt::cpu::enumerate_devices,
};
