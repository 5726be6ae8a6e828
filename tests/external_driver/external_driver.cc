// The smallest external driver: a factory that finds no devices and says
// why. A real one starts from runtime/drivers/null/.
#include "runtime/driver.h"

namespace {

axrt_status_t enumerate_devices(axrt::Instance*, axrt::DriverDevices* out) {
  out->availability = "an example of a driver built in from outside the runtime's tree";
  return nullptr;
}

}  // namespace

AXRT_DECLARE_DRIVER_FACTORY(external_example);
const axrt::DriverFactory AXRT_DRIVER_FACTORY(external_example) = {
    .name = "external_example",
    .enumerate_devices = enumerate_devices,
    .only_when_named = true,
};
