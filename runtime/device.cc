#include "runtime/driver.h"

#include <cstring>

#include "runtime/api.h"
#include "runtime/instance.h"

using namespace axrt;

extern "C" {

AXRT_API void axrt_device_retain(axrt_device_t device) { retain_handle<Device>(device); }

AXRT_API void axrt_device_release(axrt_device_t device) { release_handle<Device>(device); }

AXRT_API axrt_status_t axrt_device_query_properties(axrt_device_t device,
                                                    axrt_device_properties_t* out_properties) {
  static constexpr ApiCall api("axrt_device_query_properties");
  Device* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
  AXRT_RETURN_IF_ERROR(
      check_query_struct(api, out_properties, "out_properties", "axrt_device_properties_t"));
  write_query_struct(self->properties, out_properties);
  return nullptr;
}

AXRT_API axrt_status_t axrt_device_query_peer(axrt_device_t device, axrt_device_t peer,
                                              axrt_device_peer_info_t* out_info) {
  static constexpr ApiCall api("axrt_device_query_peer");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    Device* other = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    AXRT_RETURN_IF_ERROR(api.resolve(peer, "peer", &other));
    AXRT_RETURN_IF_ERROR(
        check_query_struct(api, out_info, "out_info", "axrt_device_peer_info_t"));
    if (self->instance != other->instance) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`peer` ({}) belongs to another instance than `device` ({})", other->id(),
                       self->id());
    }
    axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
    if (self == other) {
      info.link = AXRT_DEVICE_LINK_SELF;
      info.direct_access = true;
      info.native_atomics = true;
    } else if (std::strcmp(self->properties.driver, other->properties.driver) == 0 &&
               self->vtable->query_peer) {
      AXRT_RETURN_IF_ERROR(api.prefix(self->vtable->query_peer(self, other, &info)));
    } else {
      // Across drivers (or a driver that does not say): host memory on both
      // sides is reached directly, with the host's atomics when both
      // devices run on the host; anything else goes through host memory.
      const auto host_memory = [](const Device* d) {
        return (d->properties.flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY) != 0;
      };
      if (host_memory(self) && host_memory(other)) {
        info.link = AXRT_DEVICE_LINK_HOST_MEMORY;
        info.direct_access = true;
        info.native_atomics = self->properties.type == AXRT_DEVICE_TYPE_CPU &&
                              other->properties.type == AXRT_DEVICE_TYPE_CPU;
      }
    }
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API const char* axrt_device_link_name(axrt_device_link_t link) {
  switch (link) {
    case AXRT_DEVICE_LINK_NONE: return "none";
    case AXRT_DEVICE_LINK_SELF: return "self";
    case AXRT_DEVICE_LINK_HOST_MEMORY: return "host-memory";
    case AXRT_DEVICE_LINK_PCIE: return "pcie";
    case AXRT_DEVICE_LINK_NVLINK: return "nvlink";
    default: return "unknown";
  }
}

AXRT_API axrt_status_t axrt_device_synchronize(axrt_device_t device) {
  static constexpr ApiCall api("axrt_device_synchronize");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    return self->vtable->synchronize(self);
  });
}

AXRT_API axrt_status_t axrt_device_query_pool_statistics(axrt_device_t device,
                                                         axrt_pool_statistics_t* out_statistics) {
  static constexpr ApiCall api("axrt_device_query_pool_statistics");
  Device* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
  AXRT_RETURN_IF_ERROR(
      check_query_struct(api, out_statistics, "out_statistics", "axrt_pool_statistics_t"));
  axrt_pool_statistics_t statistics = AXRT_POOL_STATISTICS_INIT;
  self->vtable->query_pool_statistics(self, &statistics);
  write_query_struct(statistics, out_statistics);
  return nullptr;
}

AXRT_API axrt_status_t axrt_device_query_stream_statistics(
    axrt_device_t device, axrt_stream_statistics_t* out_statistics) {
  static constexpr ApiCall api("axrt_device_query_stream_statistics");
  Device* self = nullptr;
  AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
  AXRT_RETURN_IF_ERROR(
      check_query_struct(api, out_statistics, "out_statistics", "axrt_stream_statistics_t"));
  const Device::StreamCounters& c = self->counters;
  auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  axrt_stream_statistics_t statistics = AXRT_STREAM_STATISTICS_INIT;
  statistics.streams_created = get(c.streams_created);
  statistics.copies = get(c.copies);
  statistics.copy_bytes = get(c.copy_bytes);
  statistics.fills = get(c.fills);
  statistics.fill_bytes = get(c.fill_bytes);
  statistics.host_functions = get(c.host_functions);
  statistics.event_records = get(c.event_records);
  statistics.event_waits = get(c.event_waits);
  statistics.deallocations = get(c.deallocations);
  statistics.function_calls = get(c.function_calls);
  statistics.dispatches = get(c.dispatches);
  statistics.stream_failures = get(c.stream_failures);
  write_query_struct(statistics, out_statistics);
  return nullptr;
}

AXRT_API axrt_status_t axrt_device_trim_pool(axrt_device_t device, uint64_t keep_bytes) {
  static constexpr ApiCall api("axrt_device_trim_pool");
  return guard(api.function(), [&]() -> axrt_status_t {
    Device* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(device, "device", &self));
    return self->vtable->trim_pool(self, keep_bytes);
  });
}

}  // extern "C"
