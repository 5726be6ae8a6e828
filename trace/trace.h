// The trace recorder: what the core, the drivers and the serving engine
// record into while a trace runs (include/axrt/trace.h), and the session
// that owns the events and writes them as Chrome Trace Event JSON.
//
// Recording points test active() first: one relaxed atomic load when no
// trace runs (and a constant false when the build turns tracing off with
// AXRT_TRACING=OFF). While one runs, emit() appends a fixed-size Record to
// the calling thread's buffer without a lock; names are pointers to strings
// that outlive the trace (string literals, intern()ed names, or
// Session-owned copies through intern_for_trace()).
#ifndef AXRT_TRACE_TRACE_H_
#define AXRT_TRACE_TRACE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "axrt/base.h"
#include "axrt/kernel_abi.h"

#ifndef AXRT_TRACING
#define AXRT_TRACING 1
#endif

namespace axrt::trace {

// What a record is; the writer knows each kind's arguments (`a`).
enum class Kind : uint8_t {
  // Host thread slices (track 0: the recording thread).
  kApiCall,     // name: the API function; detail: what it ran (a function's label)
  kEngineStep,  // a: sequences, prefill tokens, decode tokens, KV blocks in use
  kCollective,  // name: the collective; detail: the group; a: rank, bytes,
                // the group's collective number, ns waiting for the others
  kRangeBegin,  // name: the range's (Session-owned); end: unused
  kRangeEnd,
  // Stream track slices.
  kOperation,  // op: OpKind; a: queued time, bytes, source and destination kinds
  kFunction,   // name: function; detail: executable; a: queued time, commands
  kDispatch,   // name: kernel; a: command index, workgroup count x, y, z;
               // detail unused; dims: workgroup size
  kBatchCopy,  // a: command index, bytes
  kBatchFill,  // a: command index, bytes
  // Counter samples on a device's process (track: the pool's track).
  kCounter,  // name: the counter; a: bytes in use, reserved, allocations served
  // Instants on a track (0: the recording thread).
  kInstant,  // name: what happened (Session-owned); detail: the object
};

// The operations of a stream (Kind::kOperation).
enum class OpKind : uint8_t {
  kCopy,
  kFill,
  kHostFunction,
  kEventRecord,
  kEventWait,
  kDeallocate,
};

// Where a copy's side lives (Kind::kOperation copies).
enum class Place : uint8_t { kHost, kDevice };

struct Record {
  int64_t begin = 0;  // ns on the trace clock (now())
  int64_t end = 0;    // slices: the end; others: equal to begin
  const char* name = nullptr;
  const char* detail = nullptr;
  uint64_t flow = 0;   // API calls: the flow they start; operations: the one they end
  // The trace the record belongs to (session()); emit() drops a record of
  // an earlier trace. 0: whichever runs.
  uint64_t session = 0;
  uint32_t track = 0;  // 0: the recording thread
  Kind kind = Kind::kApiCall;
  OpKind op = OpKind::kCopy;
  uint16_t dims[3] = {0, 0, 0};  // kDispatch: the workgroup size
  int64_t a[4] = {0, 0, 0, 0};
};
// docs/profiling.md and include/axrt/trace.h state the size of a trace's
// buffers from it.
static_assert(sizeof(Record) == 96);

// Fills `r` as a kernel dispatch (Kind::kDispatch) of command `index`.
inline void set_dispatch(Record* r, size_t index, const char* name, const char* symbol,
                         axrt_kernel_dim3_t count, axrt_kernel_dim3_t workgroup_size) noexcept {
  auto narrow = [](uint32_t v) { return static_cast<uint16_t>(v < 65535 ? v : 65535); };
  r->kind = Kind::kDispatch;
  r->name = name;
  r->detail = symbol;
  r->a[0] = static_cast<int64_t>(index);
  r->a[1] = count.x;
  r->a[2] = count.y;
  r->a[3] = count.z;
  r->dims[0] = narrow(workgroup_size.x);
  r->dims[1] = narrow(workgroup_size.y);
  r->dims[2] = narrow(workgroup_size.z);
}

#if AXRT_TRACING
extern std::atomic<bool> g_active;
inline bool active() noexcept { return g_active.load(std::memory_order_relaxed); }
#else
constexpr bool active() noexcept { return false; }
#endif

// The trace clock: steady-clock nanoseconds.
int64_t now() noexcept;

// The running trace's id (ids are never reused), or 0 when none runs: work
// queued in one trace and run after it stopped must not land in the next.
uint64_t session() noexcept;

// Appends `record` to the calling thread's buffer of the running trace; does
// nothing when none runs or its event limit was reached (counted as
// dropped).
void emit(const Record& record) noexcept;

// A string that lives until the process ends, shared by equal strings: for
// names recorded many times (kernels, functions), interned once at load.
const char* intern(std::string_view text);
// A copy owned by the running trace, for names recorded once (ranges,
// failure messages); nullptr when no trace runs.
const char* intern_for_trace(std::string_view text) noexcept;

// Tracks: a named timeline under a named process ("cpu:0"), one per stream
// and per memory pool. register_track never fails to return an id (0 when it
// cannot record the name); retire_track forgets the name once no running
// trace may still need it.
uint32_t register_track(std::string_view process, std::string_view name) noexcept;
void rename_track(uint32_t track, std::string_view name) noexcept;
void retire_track(uint32_t track) noexcept;

// The flow an API call on this thread is queueing work for (0: none);
// drivers stamp the operations they queue with it.
uint64_t current_flow() noexcept;

// What a driver keeps with a queued operation to record it when it runs.
struct OpStamp {
  int64_t queued = 0;  // 0: not traced
  uint64_t flow = 0;
  uint64_t session = 0;
  uint32_t track = 0;
};
inline OpStamp stamp(uint32_t track) noexcept {
  if (!active()) return {};
  return OpStamp{now(), current_flow(), session(), track};
}
// Whether an operation stamped `s` is to be recorded now: its trace runs.
inline bool recording(const OpStamp& s) noexcept {
  return s.queued != 0 && active() && s.session == session();
}

// Records an API call on the calling thread from construction to
// destruction, and makes the operations queued meanwhile its flow's end.
class ApiScope {
 public:
  explicit ApiScope(const char* name, const char* detail = nullptr) noexcept {
    if (active()) start(name, detail);
  }
  ~ApiScope() {
    if (begin_) finish();
  }
  ApiScope(const ApiScope&) = delete;
  ApiScope& operator=(const ApiScope&) = delete;
  void set_detail(const char* detail) noexcept { detail_ = detail; }

 private:
  void start(const char* name, const char* detail) noexcept;
  void finish() noexcept;

  // Only begin_ is set when no trace runs: the others are written by
  // start() and read only when begin_ is.
  int64_t begin_ = 0;
  const char* name_;
  const char* detail_;
  uint64_t flow_;
  uint64_t outer_flow_;
};

// Records an instant event `what` (copied) about `object` (copied) on
// `track` (0: the calling thread).
void instant(uint32_t track, std::string_view what, std::string_view object) noexcept;

// Ranges of include/axrt/trace.h.
void range_begin(std::string_view name) noexcept;
void range_end() noexcept;

// The running trace. start() fails when one runs or `path` cannot be
// created; stop() stops the trace `owner` started and writes its file.
struct StopResult {
  uint64_t events = 0;
  uint64_t dropped = 0;
  uint64_t bytes = 0;
};
axrt_status_t start(const void* owner, std::string path, uint64_t max_events);
axrt_status_t stop(const void* owner, StopResult* out);
// Whether `owner` started the running trace.
bool owns(const void* owner) noexcept;

}  // namespace axrt::trace

#endif  // AXRT_TRACE_TRACE_H_
