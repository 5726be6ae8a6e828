// The debugging modes of a function call (AXRT_INVOKE_FLAG_CHECK_FINITE,
// AXRT_INVOKE_FLAG_DUMP and their environment variables; docs/debugging.md):
// the call's batch is submitted as one batch per command, each followed by a
// host function that reads the bindings the command wrote and scans them for
// NaN and Inf or writes them to .npy files. Calls without a mode never reach
// this file beyond debug_calls_requested().
#ifndef AXRT_RUNTIME_DEBUG_CALLS_H_
#define AXRT_RUNTIME_DEBUG_CALLS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "axrt/executable.h"
#include "runtime/api.h"
#include "runtime/driver.h"

namespace axrt {

struct CallState;

// The modes of one call.
struct CallDebug {
  bool check_finite = false;
  std::string dump_directory;  // empty: no dumps
  bool active() const noexcept { return check_finite || !dump_directory.empty(); }
};

// The environment's modes as AXRT_INVOKE_FLAG_* bits, or
// kDebugEnvironmentUnread until the process's first call has read them.
inline constexpr uint32_t kDebugEnvironmentUnread = 1u << 31;
extern std::atomic<uint32_t> g_debug_environment;

// Whether a call whose options set `flags` may run in a debugging mode: the
// one test on the path of ordinary calls.
inline bool debug_calls_requested(uint32_t flags) noexcept {
  return (flags | g_debug_environment.load(std::memory_order_relaxed)) != 0;
}

// The modes of a call whose options set `flags` and `dump_directory`
// (checked against each other by the caller), merged with the environment's
// (AXRT_CHECK_FINITE, AXRT_DUMP_DIR; read once per process, here). A dump
// directory that does not exist is NOT_FOUND. `out` may come back inactive.
axrt_status_t prepare_call_debug(const ApiCall& api, uint32_t flags, const char* dump_directory,
                                 CallDebug* out);

// Submits `batch` (the call's, built by build_batch, every buffer retained)
// to `stream` in the modes of `debug`: the arena and the outputs the call
// allocated (NULL entries of `caller_outputs`) zeroed, a host function
// reading the inputs, then each command as its own batch followed by a host
// function reading what it wrote (through copies into host memory where
// the memory is not host-visible), the arena returned by an empty batch
// after the last of them, and, when dumping, a host function writing the
// call's index.json. Errors are returned before anything is queued, except
// those of the driver's queueing methods.
axrt_status_t submit_debug_call(const ApiCall& api, const CallState& call, const CallDebug& debug,
                                const axrt_tensor_t* caller_outputs, CommandBatchPtr batch,
                                Stream* stream);

// For tests: reads every binding through a copy into host memory, as for
// memory that is not host-visible.
void set_debug_calls_always_stage(bool stage) noexcept;

}  // namespace axrt

#endif  // AXRT_RUNTIME_DEBUG_CALLS_H_
