#include "runtime/driver.h"

namespace axrt {

#if defined(AXRT_HAVE_DRIVER_CPU)
extern const DriverFactory kCpuDriverFactory;
#endif
#if defined(AXRT_HAVE_DRIVER_CUDA)
extern const DriverFactory kCudaDriverFactory;
#endif

std::span<const DriverFactory* const> builtin_drivers() noexcept {
  static const DriverFactory* const kDrivers[] = {
#if defined(AXRT_HAVE_DRIVER_CPU)
      &kCpuDriverFactory,
#endif
#if defined(AXRT_HAVE_DRIVER_CUDA)
      &kCudaDriverFactory,
#endif
      nullptr,
  };
  return std::span<const DriverFactory* const>(kDrivers, std::size(kDrivers) - 1);
}

}  // namespace axrt
