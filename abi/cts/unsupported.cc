#include "abi/cts/unsupported.h"


#include "axrt/axrt.h"

namespace axrt_cts {
namespace {

struct Entry {
  std::string_view driver;
  Feature feature;
  std::string_view reason;
};

// One entry per gap, from the enabled drivers' cts_unsupported.inc files
// (the generated list below includes them, each with AXRT_CTS_DRIVER set to
// the driver's name).
#define AXRT_CTS_UNSUPPORTED(feature, reason) Entry{AXRT_CTS_DRIVER, Feature::feature, reason},
constexpr Entry kUnsupported[] = {
#include "cts_unsupported_list.inc"
    Entry{"", Feature::kMultipleDevices, ""},  // the end
};
#undef AXRT_CTS_UNSUPPORTED

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
    case Feature::kAsynchronousExecution:
      return "asynchronous execution";
    case Feature::kDefaultInstance:
      return "a place among the default drivers";
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
    case Feature::kAsynchronousExecution:
    case Feature::kDefaultInstance:
      return 0;
  }
  return 0;
}

std::string_view UnsupportedReason(std::string_view driver, Feature feature) {
  for (const Entry& entry : kUnsupported) {
    if (!entry.driver.empty() && entry.driver == driver && entry.feature == feature) {
      return entry.reason;
    }
  }
  return {};
}

}  // namespace axrt_cts
