#include "base/fault.h"

#ifdef AXRT_FAULT_INJECTION

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace axrt::fault {

namespace {

// Plain atomics with constant initialisation: should_fail() runs from
// operator new, before and after any constructor of this program.
std::atomic<int> armed_site{-1};
std::atomic<uint64_t> target{0};
std::atomic<bool> persistent_mode{false};
std::atomic<uint64_t> count{0};
std::atomic<bool> has_fired{false};
std::atomic<unsigned> always{0};  // bit i: site i always fails
std::atomic<uint32_t> random_one_in[kSiteCount] = {};
std::atomic<uint64_t> random_seed{0};
std::atomic<uint64_t> random_streams{0};  // one per thread that draws

// xorshift64*, one generator per thread.
uint64_t draw() noexcept {
  thread_local uint64_t state = 0;
  if (state == 0) {
    state = (random_seed.load(std::memory_order_relaxed) ^
             (0x9E3779B97F4A7C15ull * (random_streams.fetch_add(1) + 1))) |
            1;
  }
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

constexpr const char* kSiteNames[kSiteCount] = {"host_allocation", "device_allocation",
                                                 "file_map",        "file_read",
                                                 "short_read",      "thread_start"};

// AXRT_FAULT_ARM (fault.h), parsed; no allocation (this runs inside operator
// new) and nothing armed when the value is not understood.
void arm_named_site(const char* value) noexcept {
  if (value == nullptr) return;
  const char* colon = std::strchr(value, ':');
  if (colon == nullptr) return;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(colon + 1, &end, 10);
  if (n == 0 || *end != '\0') return;
  for (int site = 0; site < kSiteCount; ++site) {
    const size_t length = std::strlen(kSiteNames[site]);
    if (static_cast<size_t>(colon - value) == length &&
        std::strncmp(value, kSiteNames[site], length) == 0) {
      arm(static_cast<Site>(site), n, /*persistent=*/true);
    }
  }
}

// Reads AXRT_FAULT_ARM once, at the first event of any thread; an event on
// another thread meanwhile waits until the site is armed (a function-local
// static's initialization, which allocates nothing).
void arm_from_environment() noexcept {
  static const bool armed = (arm_named_site(std::getenv("AXRT_FAULT_ARM")), true);
  (void)armed;
}

}  // namespace

bool should_fail(Site site) noexcept {
  arm_from_environment();
  if (always.load(std::memory_order_relaxed) & (1u << static_cast<int>(site))) return true;
  const uint32_t one_in =
      random_one_in[static_cast<int>(site)].load(std::memory_order_relaxed);
  if (one_in != 0 && draw() % one_in == 0) return true;
  if (armed_site.load(std::memory_order_acquire) != static_cast<int>(site)) return false;
  const uint64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t at = target.load(std::memory_order_relaxed);
  if (n == at || (n > at && persistent_mode.load(std::memory_order_relaxed))) {
    has_fired.store(true, std::memory_order_relaxed);
    return true;
  }
  return false;
}

void arm(Site site, uint64_t n, bool persistent) noexcept {
  armed_site.store(-1, std::memory_order_release);
  count.store(0, std::memory_order_relaxed);
  has_fired.store(false, std::memory_order_relaxed);
  target.store(n, std::memory_order_relaxed);
  persistent_mode.store(persistent, std::memory_order_relaxed);
  armed_site.store(static_cast<int>(site), std::memory_order_release);
}

uint64_t disarm() noexcept {
  armed_site.store(-1, std::memory_order_release);
  return count.load(std::memory_order_relaxed);
}

void set_always(Site site, bool on) noexcept {
  const unsigned bit = 1u << static_cast<int>(site);
  if (on) {
    always.fetch_or(bit, std::memory_order_relaxed);
  } else {
    always.fetch_and(~bit, std::memory_order_relaxed);
  }
}

void set_random(Site site, uint32_t one_in, uint64_t seed) noexcept {
  random_seed.store(seed, std::memory_order_relaxed);
  random_one_in[static_cast<int>(site)].store(one_in, std::memory_order_relaxed);
}

bool fired() noexcept { return has_fired.load(std::memory_order_relaxed); }

}  // namespace axrt::fault

#endif  // AXRT_FAULT_INJECTION
