// Parts of a unit test that run in a process of their own: what the shared
// test process cannot do, such as ending through exit() with work in flight
// or running short of address space.
#ifndef AXRT_TESTS_UNIT_SUBPROCESS_H_
#define AXRT_TESTS_UNIT_SUBPROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/sanitizer.h"

extern char** environ;

namespace axrt_test {

// Runs this test binary again with the test cases `tag` names (a hidden tag,
// "[.name]", runs only when named) and the same environment, its report
// discarded; `extra_env` ("NAME=value"), when given, is added to the child's
// environment. Returns the wait status; a child still running after
// `timeout_s` seconds is killed (SIGKILL), and -1 means it could not start.
// Run the binary with the tag by hand to see the report.
inline int RunSelf(const std::string& tag, int timeout_s = 60, const std::string& extra_env = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::string self = "/proc/self/exe", arg = tag, extra = extra_env;
  char* argv[] = {self.data(), arg.data(), nullptr};
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  if (!extra.empty()) env.push_back(extra.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  const int started = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 10) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return -1;
    if (waited_ms >= timeout_s * 1000) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return status;
    }
    usleep(10000);
  }
}

inline bool ExitedCleanly(int status) {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Whether LimitAddressSpace() can work: not under ASan and TSan, which
// reserve terabytes of address space up front (a limit would stop them, not
// the code under test).
inline constexpr bool kCanLimitAddressSpace = !kAddressSanitizer && !kThreadSanitizer;

// Whether a child can limit its data segment (RLIMIT_DATA) and still run:
// not under TSan, whose allocator ends the process at the first allocation
// the limit refuses. Under ASan, the child needs DataLimitEnvironment().
inline constexpr bool kCanLimitData = !kThreadSanitizer;

// What RunSelf() adds to the environment of a child that limits its data
// segment: under ASan, an allocation the limit refuses returns null (as
// malloc does) instead of ending the process, and freed memory goes back to
// use soon (a small quarantine) instead of growing the segment; nothing
// elsewhere. Options of the caller's ASAN_OPTIONS are kept.
inline std::string DataLimitEnvironment() {
  if (!kAddressSanitizer) return {};
  const char* own = std::getenv("ASAN_OPTIONS");
  return std::string("ASAN_OPTIONS=") + (own != nullptr && *own ? std::string(own) + ":" : "") +
         "allocator_may_return_null=1:quarantine_size_mb=8";
}

// Whether a child can be made short of threads: by the address-space limit
// below, or, in the trees with fault injection (the sanitizer trees, where
// the limit cannot be set), by failing its thread starts (base/fault.h).
#ifdef AXRT_FAULT_INJECTION
inline constexpr bool kCanFailThreadStarts = true;
#else
inline constexpr bool kCanFailThreadStarts = kCanLimitAddressSpace;
#endif

// What RunSelf() adds to a child's environment so that only `starts` more
// threads start in it: nothing where the child limits its address space
// itself (ShortOfThreads), AXRT_FAULT_ARM where it cannot.
inline std::string ThreadStartsEnvironment(int starts) {
  if (kCanLimitAddressSpace) return {};
  return "AXRT_FAULT_ARM=thread_start:" + std::to_string(starts + 1);
}

// Limits the process's address space to what it uses now plus `headroom`
// bytes, so that starting a thread (an 8 MiB stack) fails once that is
// spent. False when no limit could be set.
inline bool LimitAddressSpace(uint64_t headroom) {
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  rlimit limit{};
  if (!kCanLimitAddressSpace || pages == 0 || getrlimit(RLIMIT_AS, &limit) != 0) return false;
  limit.rlim_cur = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + headroom;
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

// In a child that RunSelf() started with ThreadStartsEnvironment(): limits
// its address space to about `headroom` bytes more where it can (room for
// headroom / 8 MiB thread stacks); elsewhere the environment already fails
// its thread starts. False when neither is possible.
inline bool ShortOfThreads(uint64_t headroom) {
  if (kCanLimitAddressSpace) return LimitAddressSpace(headroom);
  return kCanFailThreadStarts;
}

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_SUBPROCESS_H_
