#include "abi/cts/unsupported.h"

#include <array>

#include "axrt/axrt.h"

namespace axrt_cts {
namespace {

struct Entry {
  std::string_view driver;
  Feature feature;
  std::string_view reason;
};

// One line per gap. A driver that gains the capability loses its line here,
// and the suite then tests it.
constexpr std::array kUnsupported = {
    // The CPU driver is the reference: every capability but a second device
    // and GPU code.
    Entry{"cpu", Feature::kMultipleDevices,
          "the CPU driver exposes a single device (cpu:0)"},
    Entry{"cuda", Feature::kSkipQueuedWorkOnFailure,
          "copies and kernels already handed to the GPU behind a host function "
          "run even when that function fails the stream; the failure still "
          "reaches synchronize, events, later host functions and waiting "
          "streams, and work enqueued once it is known is refused"},
    Entry{"cpu", Feature::kDeviceCode,
          "the CPU driver runs kernel libraries and host code, not GPU code objects"},
    Entry{"cpu", Feature::kNativeQueues,
          "the CPU driver runs streams on its own worker threads; there is no "
          "native queue to hand out or to make wait"},
    Entry{"cuda", Feature::kHostVisibleDeviceMemory,
          "CUDA device memory lives in GPU memory and is not mapped into the "
          "host address space; use host-pinned buffers or copies"},
    Entry{"cuda", Feature::kHostKernels,
          "CUDA devices run kernels from cubin, fatbin or PTX code objects; CPU "
          "kernel libraries run only on host devices"},
};

}  // namespace

std::string_view FeatureName(Feature feature) {
  switch (feature) {
    case Feature::kHostVisibleDeviceMemory:
      return "host-visible device-local memory";
    case Feature::kEventTiming:
      return "event timing";
    case Feature::kMultipleDevices:
      return "multiple devices per driver";
    case Feature::kHostKernels:
      return "CPU kernel libraries";
    case Feature::kSkipQueuedWorkOnFailure:
      return "skipping queued work after a failure";
    case Feature::kDeviceCode:
      return "device code (CUDA cubin, fatbin, PTX)";
    case Feature::kNativeQueues:
      return "native queues (CUstream)";
  }
  return "unknown feature";
}

uint32_t FeatureFlag(Feature feature) {
  switch (feature) {
    case Feature::kHostVisibleDeviceMemory:
      return AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY;
    case Feature::kEventTiming:
      return AXRT_DEVICE_FLAG_EVENT_TIMING;
    case Feature::kMultipleDevices:
    case Feature::kHostKernels:
    case Feature::kDeviceCode:
    case Feature::kSkipQueuedWorkOnFailure:
    case Feature::kNativeQueues:
      return 0;
  }
  return 0;
}

std::string_view UnsupportedReason(std::string_view driver, Feature feature) {
  for (const Entry& entry : kUnsupported) {
    if (entry.driver == driver && entry.feature == feature) return entry.reason;
  }
  return {};
}

}  // namespace axrt_cts
