// Fault injection for the tests: makes the N-th event of a kind fail (a host
// allocation, a device allocation, a file mapping, a file read, a thread
// start) so that a test can walk every failure point of a path, one at a
// time (tests/unit/fault_injection_test.cc, docs/testing.md).
//
// Compiled in only where AXRT_FAULT_INJECTION is defined (the CMake option of
// the same name, on in the sanitizer build of `make test`). Everywhere else
// should_fail() is a constant false and the sites cost nothing.
#ifndef AXRT_BASE_FAULT_H_
#define AXRT_BASE_FAULT_H_

#include <cstdint>

namespace axrt::fault {

enum class Site : int {
  kHostAllocation = 0,    // operator new in the test program, std::malloc in axrt
  kDeviceAllocation = 1,  // a driver's allocate(), for every driver
  kFileMap = 2,           // mmap of an executable file
  kFileRead = 3,          // read() of an executable file: fails with EIO
  kShortRead = 4,         // read() of an executable file: returns one byte
  kThreadStart = 5,       // a thread start (base/thread.h): fails as when the system has none
};
inline constexpr int kSiteCount = 6;

#ifdef AXRT_FAULT_INJECTION

// Counts one event of `site` and says whether it is to fail. Thread-safe;
// cheap while nothing is armed.
bool should_fail(Site site) noexcept;

// From now on, the `n`-th event of `site` (1-based) fails; with `persistent`
// every later one fails too. Resets the counts of every site.
void arm(Site site, uint64_t n, bool persistent = false) noexcept;
// Stops injecting; returns how many events of the armed site were counted.
uint64_t disarm() noexcept;
// Whether an event failed since arm().
bool fired() noexcept;
// While `on`, every event of `site` fails, armed or not (a file that cannot
// be mapped, say, while another site is walked).
void set_always(Site site, bool on) noexcept;
// While `one_in` is not 0, each event of `site` fails with a chance of one
// in `one_in`, drawn from per-thread generators seeded from `seed` (the
// soak); 0 stops it.
void set_random(Site site, uint32_t one_in, uint64_t seed) noexcept;

// A process whose switch its test cannot reach (a child of the test, or
// code in a shared libaxrt, which holds a switch of its own) is armed by its
// environment: AXRT_FAULT_ARM=<site>:<n> arms `site` (host_allocation,
// device_allocation, file_map, file_read, short_read, thread_start) at its
// n-th event and every later one, before the first event is counted.

#else

constexpr bool should_fail(Site) noexcept { return false; }

#endif

}  // namespace axrt::fault

#endif  // AXRT_BASE_FAULT_H_
