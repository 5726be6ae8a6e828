// What a driver does not support, and why. The conformance suite asks here
// before it tests an optional capability, so that a driver's gaps are written
// down in one reviewed place rather than hidden in skipped tests: the
// driver's own folder, in its cts_unsupported.inc (runtime/drivers/*/),
// gathered at build time from the enabled drivers.
#ifndef AXRT_ABI_CTS_UNSUPPORTED_H_
#define AXRT_ABI_CTS_UNSUPPORTED_H_

#include <cstdint>
#include <string_view>

namespace axrt_cts {

// Optional capabilities. Those backed by a device property flag name it, so
// the suite can check that the list and the flags agree.
enum class Feature : uint32_t {
  // Mapping AXRT_MEMORY_TYPE_DEVICE_LOCAL buffers into the host
  // (AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY).
  kHostVisibleDeviceMemory,
  // axrt_event_elapsed_time() (AXRT_DEVICE_FLAG_EVENT_TIMING).
  kEventTiming,
  // More than one device of the same driver, for cross-device checks.
  kMultipleDevices,
  // Running CPU kernel libraries (built in, registered or embedded host
  // code) on the device.
  kHostKernels,
  // Running GPU code objects (CUDA cubin, fatbin or PTX) on the device.
  kDeviceCode,
  // Skipping work that was already queued behind a host function when that
  // function fails the stream (or behind a wait on an event it failed).
  kSkipQueuedWorkOnFailure,
  // Streams over a native API's queues (axrt_stream_get_native_handle,
  // axrt_event_enqueue_native_wait): the DLPack stream protocol.
  kNativeQueues,
  // Work that runs after the enqueueing call returned, so that a host
  // function may block until the enqueueing thread lets it go (the tests'
  // Gate) and work queued behind it waits.
  kAsynchronousExecution,
  // Taking part in instances that do not name the driver (NULL or ""
  // axrt_instance_options_t::drivers).
  kDefaultInstance,
};

std::string_view FeatureName(Feature feature);

// The device property flag that advertises `feature`, or 0 when none does.
uint32_t FeatureFlag(Feature feature);

// Why `driver` does not support `feature`, or an empty view when it does.
std::string_view UnsupportedReason(std::string_view driver, Feature feature);

}  // namespace axrt_cts

#endif  // AXRT_ABI_CTS_UNSUPPORTED_H_
