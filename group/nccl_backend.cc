// The "nccl" backend: collectives of CUDA devices through NCCL, loaded at
// run time (group/nccl_api.h). docs/multi-device.md ("The NCCL backend")
// explains the design.
//
// One communicator per member, made by ncclCommInitAll over the members'
// CUDA ordinals. NCCL's CUDA runtime works in each device's primary context,
// which is the context the axrt CUDA driver uses, so the buffers' device
// addresses and the streams' CUstreams are valid for it.
//
// A collective queues, on each member's stream and in this order:
//   1. an entry host function: when the member's stream has failed, it
//      fails the group naming the member; once the group aborted, it fails
//      the stream; and it marks the member's arrival for the watchdog;
//   2. a device-side wait (axrt_event_enqueue_native_wait) for the
//      member's order event, just recorded on a stream of the group's own:
//      an event recorded after a pool allocation covers it
//      (docs/cuda-driver.md, "Memory"), so NCCL may use buffers allocated
//      after the stream's CUstream was first handed out;
//   3. the member's NCCL call on the stream's CUstream, every member's
//      within one ncclGroupStart/ncclGroupEnd;
//   4. an exit host function: it marks the member's part finished and,
//      once the group aborted, fails the stream (NCCL's kernels cannot fail
//      an axrt stream), with DEADLINE_EXCEEDED where the member timed out.
// Ordering with the stream's own work rests on the contract of
// axrt_stream_get_native_handle (include/axrt/stream.h): work another
// library enqueues on the native queue runs in order with the stream's own
// work. The CUDA driver keeps it by holding nothing back on a stream whose
// CUstream was handed out (what it held behind host functions goes to CUDA
// at the first hand-out), so 1 and 2, queued through axrt, reach the
// CUstream before 3, and 4 after it.
//
// The watchdog, one thread per group, polls while collectives are in
// flight: the group's timeout against the members' arrivals, a stream of
// each member's device for a lost device, and ncclCommGetAsyncError. A
// failure goes to GroupState::fail, whose abort hook (abort() below) wakes
// the watchdog, which aborts every communicator (ncclCommAbort), so that
// NCCL's kernels that wait for a member that will never come end and the
// exit functions run. Every NCCL call of a group is made under one mutex:
// NCCL calls on one communicator must not overlap.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include <fmt/ranges.h>

#include "axrt/device.h"
#include "axrt/event.h"
#include "axrt/memory.h"
#include "axrt/stream.h"
#include "base/dtype.h"
#include "base/runtime_library.h"
#include "base/thread.h"
#include "group/group.h"
#include "group/nccl_api.h"

struct CUctx_st;  // the CUDA driver's context, opaque

namespace axrt::group {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks while collectives are in flight.
constexpr auto kPollInterval = std::chrono::milliseconds(5);
// A member's scratch bytes: what a collective of 0 elements moves, since
// NCCL may queue nothing for 0 elements and the collective must still
// order the members' streams. Byte 0 is sent, byte 1 received into, byte 2
// all-reduced; their values mean nothing.
constexpr uint64_t kScratchBytes = 256;

ncclDataType_t nccl_type(axrt_dtype_t dtype) {
  switch (dtype) {
    case AXRT_DTYPE_INT8: return ncclInt8;
    case AXRT_DTYPE_UINT8: return ncclUint8;
    case AXRT_DTYPE_INT32: return ncclInt32;
    case AXRT_DTYPE_UINT32: return ncclUint32;
    case AXRT_DTYPE_INT64: return ncclInt64;
    case AXRT_DTYPE_UINT64: return ncclUint64;
    case AXRT_DTYPE_FLOAT16: return ncclFloat16;
    case AXRT_DTYPE_BFLOAT16: return ncclBfloat16;
    case AXRT_DTYPE_FLOAT32: return ncclFloat32;
    default: return ncclFloat64;  // the group checked the type: FLOAT64
  }
}

ncclRedOp_t nccl_op(axrt_reduce_op_t op) {
  switch (op) {
    case AXRT_REDUCE_MAX: return ncclMax;
    case AXRT_REDUCE_MIN: return ncclMin;
    default: return ncclSum;
  }
}

// The status code that stands for an NCCL error.
axrt_status_code_t status_code(ncclResult_t result) {
  switch (result) {
    case ncclUnhandledCudaError:
    case ncclInternalError: return AXRT_STATUS_CODE_INTERNAL;
    case ncclSystemError:
    case ncclRemoteError: return AXRT_STATUS_CODE_UNAVAILABLE;
    case ncclInvalidArgument: return AXRT_STATUS_CODE_INVALID_ARGUMENT;
    case ncclInvalidUsage: return AXRT_STATUS_CODE_FAILED_PRECONDITION;
    case ncclTimeout: return AXRT_STATUS_CODE_DEADLINE_EXCEEDED;
    default: return AXRT_STATUS_CODE_UNKNOWN;
  }
}

// "member 2 (cuda:2)"
std::string member_name(const GroupState& state, uint32_t rank) {
  return fmt::format("member {} ({})", rank, state.member_id(rank));
}

// Why member `rank` failed, given its stream's failure seen `when` ("before
// all_reduce #3").
std::string stream_failure(const GroupState& state, uint32_t rank, axrt_status_t failure,
                           const std::string& when) {
  if (axrt_status_code(failure) == AXRT_STATUS_CODE_DEVICE_LOST) {
    return fmt::format("{} failed: its device was lost: {}", member_name(state, rank),
                       axrt_status_message(failure));
  }
  return fmt::format("{} failed: its stream failed {}: {}", member_name(state, rank), when,
                     axrt_status_message(failure));
}

// One collective in flight, shared by its host functions, the watchdog and
// the enqueueing call.
struct InFlight {
  InFlight(std::string context, size_t parts)
      : context(std::move(context)),
        arrived(parts, false),
        finished(parts, false),
        timed_out(parts, false),
        unfinished(static_cast<uint32_t>(parts)) {}
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

  const std::string context;  // "all_reduce #3"
  std::vector<uint32_t> ranks;         // of each part
  std::vector<BufferRef> kept;         // the buffers, until the collective ran

  // Under Core::mutex.
  std::vector<bool> arrived;    // the entry function ran
  std::vector<bool> finished;   // the exit function ran
  std::vector<bool> timed_out;  // waited past the group's timeout
  uint32_t unfinished;
  // The first arrival plus the group's timeout.
  Clock::time_point deadline = Clock::time_point::max();
  // The enqueue failed before the NCCL calls: the host functions queued so
  // far do nothing.
  bool cancelled = false;

  bool done() const { return cancelled || unfinished == 0; }
};

// What a group's backend, its watchdog and its queued host functions share;
// it lives until the last of them lets go.
struct Core {
  Core(const NcclApi& nccl, std::shared_ptr<GroupState> state)
      : nccl(nccl), state(std::move(state)) {}
  // The watchdog released the communicators, unless it never ran.
  ~Core() {
    release_comms(/*abort=*/false);
    for (axrt_buffer_t buffer : scratch) {
      if (buffer != nullptr) axrt_buffer_release(buffer);
    }
    for (axrt_event_t event : order_events) {
      if (event != nullptr) axrt_event_release(event);
    }
    for (axrt_stream_t stream : watch_streams) {
      if (stream != nullptr) axrt_stream_release(stream);
    }
  }
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Ends every communicator: ncclCommAbort when `abort` (queued NCCL work
  // ends at once), else ncclCommFinalize and ncclCommDestroy (only once the
  // queued work ended). Errors change nothing: the communicators are gone
  // either way.
  void release_comms(bool abort) noexcept {
    std::lock_guard<std::mutex> calls(nccl_mutex);
    if (comms.empty()) return;
    bool finalized = !abort;
    if (!abort && nccl.ncclCommFinalize) {
      // One group call: finalizing waits for the peers, which a single
      // thread can only do for all of them at once.
      nccl.ncclGroupStart();
      for (ncclComm_t comm : comms) {
        if (comm != nullptr && nccl.ncclCommFinalize(comm) != ncclSuccess) finalized = false;
      }
      if (nccl.ncclGroupEnd() != ncclSuccess) finalized = false;
    }
    for (ncclComm_t comm : comms) {
      if (comm == nullptr) continue;  // a member in another process
      if (finalized) {
        nccl.ncclCommDestroy(comm);
      } else {
        nccl.ncclCommAbort(comm);
      }
    }
    comms.clear();
    std::lock_guard<std::mutex> lock(mutex);
    comms_live = false;
  }

  const NcclApi& nccl;
  const std::shared_ptr<GroupState> state;
  // This process's rank in a group across processes (ncclCommInitRank),
  // whose vectors below hold that rank's entry only; -1 in one process.
  int32_t local_rank = -1;
  std::vector<ncclComm_t> comms;           // by rank; under nccl_mutex
  std::vector<axrt_buffer_t> scratch;      // by rank, kScratchBytes each
  // By rank: a stream of the member's device on which the group queues
  // nothing but records of the member's order event, so that nothing on it
  // refers back to the group. The watchdog queries it to learn whether the
  // device was lost (the members' own streams are the application's, only
  // borrowed while a collective is queued).
  std::vector<axrt_stream_t> watch_streams;
  std::vector<axrt_event_t> order_events;  // by rank
  std::mutex nccl_mutex;                   // held for every NCCL call

  std::mutex mutex;
  std::condition_variable wake;  // the watchdog's
  // Under mutex.
  std::deque<std::shared_ptr<InFlight>> in_flight;
  bool comms_live = true;
  bool abort_requested = false;
  bool aborting = false;  // the watchdog is in ncclCommAbort, which may wait
  bool closing = false;
};

// What one host function gets.
struct Ticket {
  std::shared_ptr<Core> core;
  std::shared_ptr<InFlight> op;
  uint32_t part = 0;
};

axrt_status_t on_entry(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<Ticket> ticket(static_cast<Ticket*>(user_data));
  Core& core = *ticket->core;
  InFlight& op = *ticket->op;
  const uint32_t rank = op.ranks[ticket->part];
  {
    std::lock_guard<std::mutex> lock(core.mutex);
    if (op.cancelled) return nullptr;
    op.arrived[ticket->part] = true;
    if (op.deadline == Clock::time_point::max()) op.deadline = core.state->deadline_from_now();
  }
  if (stream_status != nullptr) {
    core.state->fail(static_cast<int32_t>(rank), axrt_status_code(stream_status),
                     stream_failure(*core.state, rank, stream_status, "before " + op.context));
    return nullptr;  // the stream keeps its own failure
  }
  if (core.state->aborted()) return core.state->aborted_status(op.context.c_str());
  return nullptr;
}

axrt_status_t on_exit(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<Ticket> ticket(static_cast<Ticket*>(user_data));
  Core& core = *ticket->core;
  InFlight& op = *ticket->op;
  const uint32_t rank = op.ranks[ticket->part];
  bool timed_out = false;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(core.mutex);
    if (op.cancelled) return nullptr;
    op.finished[ticket->part] = true;
    timed_out = op.timed_out[ticket->part];
    last = --op.unfinished == 0;
  }
  if (last) core.wake.notify_all();  // the watchdog lets it go
  if (stream_status != nullptr) {
    // Only the device's loss fails the stream between the entry function
    // and this one; an earlier failure was the entry function's to tell.
    core.state->fail(static_cast<int32_t>(rank), axrt_status_code(stream_status),
                     stream_failure(*core.state, rank, stream_status, "during " + op.context));
    return nullptr;
  }
  if (core.state->aborted()) {
    return core.state->aborted_status(op.context.c_str(), timed_out
                                                              ? AXRT_STATUS_CODE_DEADLINE_EXCEEDED
                                                              : AXRT_STATUS_CODE_ABORTED);
  }
  return nullptr;
}

// The oldest collective in flight past its deadline, if any: marks the
// members that waited for it as timed out and says whom to blame. Under
// core.mutex.
bool find_timeout(Core& core, Clock::time_point now, int32_t* rank, std::string* message) {
  const GroupState& state = *core.state;
  for (const auto& op : core.in_flight) {
    if (op->done() || now < op->deadline) continue;
    const size_t parts = op->ranks.size();
    int32_t waited = -1, missing = -1;
    std::vector<std::string> stuck;
    for (size_t p = 0; p < parts; ++p) {
      if (!op->arrived[p]) {
        if (missing < 0) missing = static_cast<int32_t>(p);
        continue;
      }
      if (waited < 0) waited = static_cast<int32_t>(p);
      if (!op->finished[p]) {
        op->timed_out[p] = true;
        stuck.push_back(member_name(state, op->ranks[p]));
      }
    }
    if (missing >= 0) {
      *rank = static_cast<int32_t>(op->ranks[missing]);
      *message = fmt::format(
          "{} did not reach {} within the group's timeout; {} waited for it",
          member_name(state, op->ranks[missing]), op->context,
          member_name(state, op->ranks[waited]));
    } else {
      // Every member reached it and NCCL did not finish it: nobody to blame.
      *rank = -1;
      *message = fmt::format(
          "{} did not complete within the group's timeout on {}, although every member reached it",
          op->context, fmt::join(stuck, ", "));
    }
    return true;
  }
  return false;
}

// Fails the group when member `rank`'s device was lost (its watch stream,
// which carries only event records, fails a query only then); says whether
// it was.
bool check_device(Core& core, uint32_t rank) {
  bool idle = false;
  StatusPtr status(axrt_stream_query(core.watch_streams[rank], &idle));
  if (axrt_status_code(status.get()) != AXRT_STATUS_CODE_DEVICE_LOST) return false;
  core.state->fail(static_cast<int32_t>(rank), AXRT_STATUS_CODE_DEVICE_LOST,
                   stream_failure(*core.state, rank, status.get(), ""));
  return true;
}

// One look at the members with collectives in flight: a lost device, then
// NCCL's asynchronous errors. Not under core.mutex.
void check_members(Core& core, const std::vector<uint32_t>& members) {
  GroupState& state = *core.state;
  for (uint32_t rank : members) {
    if (check_device(core, rank)) return;
  }
  // An enqueue making NCCL calls now is not waited for: the next look asks.
  std::unique_lock<std::mutex> calls(core.nccl_mutex, std::try_to_lock);
  if (!calls.owns_lock()) return;
  for (size_t rank = 0; rank < core.comms.size(); ++rank) {
    if (core.comms[rank] == nullptr) continue;  // in another process
    ncclResult_t error = ncclSuccess;
    if (core.nccl.ncclCommGetAsyncError(core.comms[rank], &error) != ncclSuccess) continue;
    if (error == ncclSuccess || error == ncclInProgress) continue;
    const std::string message = fmt::format(
        "{} failed: NCCL reported an asynchronous error on its communicator: {}",
        member_name(state, static_cast<uint32_t>(rank)), core.nccl.describe(error, core.comms[rank]));
    calls.unlock();
    // A device lost since the look above is the cause to name.
    if (check_device(core, static_cast<uint32_t>(rank))) return;
    state.fail(static_cast<int32_t>(rank), status_code(error), message);
    return;
  }
}

// The watchdog thread's body. Ends when the group is closing and either its
// communicators are gone (aborted) or no collective is in flight, then
// finalizes and destroys the communicators left.
void watch(std::shared_ptr<Core> core) {
  std::unique_lock<std::mutex> lock(core->mutex);
  for (;;) {
    // Collectives that ran (or were cancelled) let go of their buffers
    // here, outside the lock.
    std::vector<std::shared_ptr<InFlight>> spent;
    for (auto it = core->in_flight.begin(); it != core->in_flight.end();) {
      if ((*it)->done()) {
        spent.push_back(std::move(*it));
        it = core->in_flight.erase(it);
      } else {
        ++it;
      }
    }
    // The abort hook asks, unless the group cleared it (it is being
    // destroyed): then the watchdog finds the failure itself.
    if ((core->abort_requested || core->state->aborted()) && core->comms_live) {
      // What is in flight fails by itself now; its host functions keep it.
      for (auto& op : core->in_flight) spent.push_back(std::move(op));
      core->in_flight.clear();
      core->aborting = true;
      lock.unlock();
      spent.clear();
      core->release_comms(/*abort=*/true);
      lock.lock();
      core->aborting = false;
      continue;
    }
    if (core->closing && (!core->comms_live || core->in_flight.empty())) break;
    const bool watching = core->comms_live && !core->in_flight.empty();
    if (!watching) {
      lock.unlock();
      spent.clear();
      lock.lock();
      core->wake.wait(lock, [&] {
        return (core->abort_requested && core->comms_live) || core->closing ||
               (core->comms_live && !core->in_flight.empty());
      });
      continue;
    }
    int32_t late = -1;
    std::string timeout;
    const bool timed_out = find_timeout(*core, Clock::now(), &late, &timeout);
    std::vector<uint32_t> members;  // with a part in flight
    for (const auto& op : core->in_flight) {
      if (op->done()) continue;
      for (size_t p = 0; p < op->ranks.size(); ++p) {
        if (op->finished[p]) continue;
        if (std::find(members.begin(), members.end(), op->ranks[p]) == members.end()) {
          members.push_back(op->ranks[p]);
        }
      }
    }
    lock.unlock();
    spent.clear();
    if (timed_out) {
      core->state->fail(late, AXRT_STATUS_CODE_DEADLINE_EXCEEDED, timeout);
    } else if (!core->state->aborted()) {
      check_members(*core, members);
    }
    lock.lock();
    // Not woken by closing: the loop ends once the work in flight ran.
    core->wake.wait_for(lock, kPollInterval,
                        [&] { return core->abort_requested && core->comms_live; });
  }
  std::vector<std::shared_ptr<InFlight>> left(core->in_flight.begin(), core->in_flight.end());
  core->in_flight.clear();
  lock.unlock();
  left.clear();
  core->release_comms(/*abort=*/false);
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  // Starts the watchdog.
  axrt_status_t start() {
    try {
      watchdog_ = start_thread([core = core_] { watch(core); });
    } catch (const std::system_error& e) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "axrt_group_create: no thread for the watchdog of group '{}': {}",
                         core_->state->label(), e.what());
    }
    return nullptr;
  }

  // Never waits for queued collectives: with work in flight the watchdog
  // goes on alone, and destroys the communicators once the work ended or
  // the group aborted.
  ~NcclBackend() override {
    if (!watchdog_.joinable()) return;  // never started: nothing was queued
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(core_->mutex);
      core_->closing = true;
      idle = !core_->aborting &&
             (!core_->comms_live ||
              std::all_of(core_->in_flight.begin(), core_->in_flight.end(),
                          [](const auto& op) { return op->done(); }));
    }
    core_->wake.notify_all();
    if (idle) {
      watchdog_.join();
    } else {
      watchdog_.detach();
    }
  }

  const char* name() const noexcept override { return "nccl"; }

  void abort() noexcept override {
    {
      std::lock_guard<std::mutex> lock(core_->mutex);
      core_->abort_requested = true;
    }
    core_->wake.notify_all();
  }

  axrt_status_t enqueue(const Collective& c) override;
  axrt_status_t enqueue_part(const Collective& c, uint32_t rank,
                             std::shared_ptr<void>* shared) override;

 private:
  // Queues parts `which` (indices into c.parts) of `op`, which tracks
  // every part of `c`: steps 1 to 4 of the top of the file, their NCCL calls
  // in one group call. `publish`: hand `op` to the watchdog. On an error
  // before the NCCL calls, `cancel` makes the host functions queued so far
  // do nothing (a whole-group call; a part alone leaves them to the
  // group's failure instead).
  axrt_status_t queue(const Collective& c, const std::shared_ptr<InFlight>& op,
                      const std::vector<uint32_t>& which, bool publish, bool cancel_on_error);
  // A failed axrt call on member `rank`'s stream: the group fails too when
  // the device is lost. Takes `status`.
  axrt_status_t member_error(const std::string& context, uint32_t rank, axrt_status_t status);
  axrt_status_t issue(const Collective& c, const std::string& context,
                      const std::vector<uint32_t>& which, const std::vector<cudaStream_t>& native,
                      const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv,
                      const std::vector<std::pair<uint64_t, uint64_t>>& transfers);
  void cancel(InFlight& op) {
    std::lock_guard<std::mutex> lock(core_->mutex);
    op.cancelled = true;
  }

  std::shared_ptr<Core> core_;
  std::thread watchdog_;
};

axrt_status_t NcclBackend::member_error(const std::string& context, uint32_t rank,
                                        axrt_status_t status) {
  StatusPtr owned(status);
  GroupState& state = *core_->state;
  if (axrt_status_code(status) == AXRT_STATUS_CODE_DEVICE_LOST) {
    state.fail(static_cast<int32_t>(rank), AXRT_STATUS_CODE_DEVICE_LOST,
               stream_failure(state, rank, status, ""));
  }
  return make_status(axrt_status_code(status), "group '{}': {} on {}: {}", state.label(), context,
                     member_name(state, rank), axrt_status_message(status));
}

// The device address of byte `offset` of `buffer` (checked by the group).
axrt_status_t device_address(axrt_buffer_t buffer, uint64_t offset, uint64_t* out) {
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_buffer_query_info(buffer, &info));
  *out = info.device_address + offset;
  return nullptr;
}

axrt_status_t NcclBackend::enqueue(const Collective& c) {
  const size_t parts = c.parts.size();
  if (parts == 0) return nullptr;  // a send/recv of no transfers
  auto op = std::make_shared<InFlight>(fmt::format("{} #{}", collective_name(c.kind), c.sequence),
                                       parts);
  std::vector<uint32_t> which(parts);
  for (uint32_t p = 0; p < parts; ++p) {
    op->ranks.push_back(c.parts[p].rank);
    which[p] = p;
  }
  return queue(c, op, which, /*publish=*/true, /*cancel_on_error=*/true);
}

axrt_status_t NcclBackend::enqueue_part(const Collective& c, uint32_t rank,
                                        std::shared_ptr<void>* shared) {
  GroupState& state = *core_->state;
  if (core_->local_rank >= 0) {
    // Across processes the other parts are their processes' own: this one
    // is a collective of one part here, which the watchdog waits for alone.
    Collective mine = c;
    mine.parts = {c.parts[rank]};
    auto op = std::make_shared<InFlight>(fmt::format("{} #{}", collective_name(c.kind), c.sequence), 1);
    op->ranks.push_back(rank);
    axrt_status_t status = queue(mine, op, {0}, /*publish=*/true, /*cancel_on_error=*/false);
    if (status != nullptr) {
      state.fail(static_cast<int32_t>(rank), axrt_status_code(status),
                 fmt::format("{} could not queue its part of {}: {}", member_name(state, rank),
                             op->context, axrt_status_message(status)));
    }
    return status;
  }
  auto op = std::static_pointer_cast<InFlight>(*shared);
  const bool first = !op;
  if (first) {
    op = std::make_shared<InFlight>(fmt::format("{} #{}", collective_name(c.kind), c.sequence),
                                    c.parts.size());
    for (const MemberPart& part : c.parts) op->ranks.push_back(part.rank);
    *shared = op;
  }
  axrt_status_t status = queue(c, op, {rank}, /*publish=*/first, /*cancel_on_error=*/false);
  if (status != nullptr) {
    // The members that queued theirs would wait for this one: they end now.
    state.fail(static_cast<int32_t>(rank), axrt_status_code(status),
               fmt::format("{} could not queue its part of {}: {}", member_name(state, rank),
                           op->context, axrt_status_message(status)));
  }
  return status;
}

axrt_status_t NcclBackend::queue(const Collective& c, const std::shared_ptr<InFlight>& op,
                                 const std::vector<uint32_t>& which, bool publish,
                                 bool cancel_on_error) {
  GroupState& state = *core_->state;
  const std::string& context = op->context;
  const size_t parts = c.parts.size();
  std::vector<cudaStream_t> native(parts);
  std::vector<uint64_t> send(parts, 0), recv(parts, 0);
  for (uint32_t p : which) {
    const MemberPart& part = c.parts[p];
    void* handle = nullptr;
    if (axrt_status_t status = axrt_stream_get_native_handle(part.stream, &handle)) {
      return member_error(context, part.rank, status);
    }
    native[p] = static_cast<cudaStream_t>(handle);
    if (part.send != nullptr) {
      AXRT_RETURN_IF_ERROR(device_address(part.send, part.send_offset, &send[p]));
      op->kept.emplace_back(part.send);
    }
    if (part.recv != nullptr) {
      AXRT_RETURN_IF_ERROR(device_address(part.recv, part.recv_offset, &recv[p]));
      op->kept.emplace_back(part.recv);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> transfers;  // source, destination
  for (const TransferPart& t : c.transfers) {
    uint64_t from = 0, to = 0;
    AXRT_RETURN_IF_ERROR(device_address(t.src_buffer, t.src_offset, &from));
    AXRT_RETURN_IF_ERROR(device_address(t.dst_buffer, t.dst_offset, &to));
    op->kept.emplace_back(t.src_buffer);
    op->kept.emplace_back(t.dst_buffer);
    transfers.emplace_back(from, to);
  }
  auto fail_early = [&]() {
    if (cancel_on_error) cancel(*op);
  };

  // 1 and 2: the entry functions and the waits for the allocations. An
  // error leaves the functions queued so far doing nothing.
  for (uint32_t p : which) {
    auto ticket = std::make_unique<Ticket>(Ticket{core_, op, p});
    if (axrt_status_t status =
            axrt_stream_launch_host_func(c.parts[p].stream, on_entry, ticket.get())) {
      fail_early();
      return member_error(context, op->ranks[p], status);
    }
    ticket.release();  // the host function owns it now
    const uint32_t rank = op->ranks[p];
    axrt_status_t status = axrt_stream_record_event(core_->watch_streams[rank],
                                                    core_->order_events[rank]);
    if (status == nullptr) {
      status = axrt_event_enqueue_native_wait(core_->order_events[rank], native[p]);
    }
    if (status != nullptr) {
      fail_early();
      return member_error(context, rank, status);
    }
  }
  if (publish) {
    {
      std::lock_guard<std::mutex> lock(core_->mutex);
      core_->in_flight.push_back(op);
    }
    core_->wake.notify_all();
  }

  // 3: the NCCL calls.
  if (axrt_status_t status = issue(c, context, which, native, send, recv, transfers)) {
    fail_early();
    return status;
  }

  // 4: the exit functions. The NCCL work is queued whatever happens now, so
  // the call succeeds: a member whose exit function cannot be queued (its
  // device was lost meanwhile) fails the group, whose abort ends the NCCL
  // work and fails the other members' streams.
  for (uint32_t p : which) {
    auto ticket = std::make_unique<Ticket>(Ticket{core_, op, p});
    StatusPtr status(axrt_stream_launch_host_func(c.parts[p].stream, on_exit, ticket.get()));
    if (status == nullptr) {
      ticket.release();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(core_->mutex);
      op->finished[p] = true;
      --op->unfinished;
    }
    const uint32_t rank = op->ranks[p];
    state.fail(static_cast<int32_t>(rank), axrt_status_code(status.get()),
               axrt_status_code(status.get()) == AXRT_STATUS_CODE_DEVICE_LOST
                   ? stream_failure(state, rank, status.get(), "")
                   : fmt::format("{} failed: {} could not be ordered on its stream: {}",
                                 member_name(state, rank), context,
                                 axrt_status_message(status.get())));
  }
  core_->wake.notify_all();
  return nullptr;
}

axrt_status_t NcclBackend::issue(const Collective& c, const std::string& context,
                                 const std::vector<uint32_t>& which,
                                 const std::vector<cudaStream_t>& native,
                                 const std::vector<uint64_t>& send,
                                 const std::vector<uint64_t>& recv,
                                 const std::vector<std::pair<uint64_t, uint64_t>>& transfers) {
  GroupState& state = *core_->state;
  const NcclApi& nccl = core_->nccl;
  std::lock_guard<std::mutex> calls(core_->nccl_mutex);
  // Aborted since the group checked: the entry functions fail the streams.
  if (core_->comms.empty()) return nullptr;
  const std::vector<ncclComm_t>& comms = core_->comms;
  ncclResult_t failed = ncclSuccess;
  std::string call;
  int32_t failed_rank = -1;
  auto note = [&](ncclResult_t result, const char* what, int32_t rank) {
    if (result == ncclSuccess || failed != ncclSuccess) return;
    failed = result;
    call = what;
    failed_rank = rank;
  };
  auto scratch = [&](uint32_t rank, uint64_t byte) {
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    StatusPtr status(axrt_buffer_query_info(core_->scratch[rank], &info));
    return reinterpret_cast<void*>(info.device_address + byte);
  };
  const ncclResult_t started = nccl.ncclGroupStart();
  note(started, "ncclGroupStart", -1);
  if (started == ncclSuccess) {
    if (c.kind == CollectiveKind::kSendRecv) {
      for (size_t t = 0; t < c.transfers.size(); ++t) {
        const TransferPart& x = c.transfers[t];
        const uint32_t src = c.parts[x.src_part].rank, dst = c.parts[x.dst_part].rank;
        const bool empty = x.count == 0;
        note(nccl.ncclSend(empty ? scratch(src, 0) : reinterpret_cast<void*>(transfers[t].first),
                           empty ? 1 : x.count, empty ? ncclInt8 : nccl_type(x.dtype),
                           static_cast<int>(dst), comms[src], native[x.src_part]),
             "ncclSend", static_cast<int32_t>(src));
        note(nccl.ncclRecv(empty ? scratch(dst, 1) : reinterpret_cast<void*>(transfers[t].second),
                           empty ? 1 : x.count, empty ? ncclInt8 : nccl_type(x.dtype),
                           static_cast<int>(src), comms[dst], native[x.dst_part]),
             "ncclRecv", static_cast<int32_t>(dst));
      }
    } else {
      const ncclDataType_t type = nccl_type(c.dtype);
      const ncclRedOp_t op = nccl_op(c.op);
      for (uint32_t p : which) {
        const uint32_t rank = c.parts[p].rank;
        const int32_t r = static_cast<int32_t>(rank);
        ncclComm_t comm = comms[rank];
        cudaStream_t stream = native[p];
        void* in = reinterpret_cast<void*>(send[p]);
        void* out = reinterpret_cast<void*>(recv[p]);
        if (c.count == 0) {
          void* byte = scratch(rank, 2);
          note(nccl.ncclAllReduce(byte, byte, 1, ncclInt8, ncclSum, comm, stream), "ncclAllReduce", r);
          continue;
        }
        switch (c.kind) {
          case CollectiveKind::kAllReduce:
            note(nccl.ncclAllReduce(in, out, c.count, type, op, comm, stream), "ncclAllReduce", r);
            break;
          case CollectiveKind::kAllGather:
            note(nccl.ncclAllGather(in, out, c.count, type, comm, stream), "ncclAllGather", r);
            break;
          case CollectiveKind::kReduceScatter:
            note(nccl.ncclReduceScatter(in, out, c.count, type, op, comm, stream),
                 "ncclReduceScatter", r);
            break;
          case CollectiveKind::kBroadcast:
            // Only the root's send is read; the others pass their receive
            // range, which NCCL ignores.
            note(nccl.ncclBroadcast(rank == c.root ? in : out, out, c.count, type,
                                    static_cast<int>(c.root), comm, stream),
                 "ncclBroadcast", r);
            break;
          case CollectiveKind::kSendRecv:
            break;
        }
      }
    }
    note(nccl.ncclGroupEnd(), "ncclGroupEnd", -1);
  }
  if (failed == ncclSuccess) return nullptr;
  // Part of the collective may be queued on some members, and NCCL cannot
  // take it back: the group fails, and its abort ends that work. A member's
  // lost device (NCCL then fails with a CUDA error) is the failure to name.
  ncclComm_t comm = failed_rank >= 0 ? comms[failed_rank] : nullptr;
  std::string why = fmt::format("{}{} failed for {}: {}", call,
                                failed_rank >= 0 ? " of " + member_name(state, failed_rank) : "",
                                context, nccl.describe(failed, comm));
  axrt_status_code_t code = status_code(failed);
  for (uint32_t p : which) {
    const MemberPart& part = c.parts[p];
    bool idle = false;
    StatusPtr status(axrt_stream_query(part.stream, &idle));
    if (axrt_status_code(status.get()) != AXRT_STATUS_CODE_DEVICE_LOST) continue;
    const std::string lost = stream_failure(state, part.rank, status.get(), "");
    state.fail(static_cast<int32_t>(part.rank), AXRT_STATUS_CODE_DEVICE_LOST, lost);
    why += "; " + lost;
    code = AXRT_STATUS_CODE_DEVICE_LOST;
    break;
  }
  state.fail(failed_rank, code, why);
  return make_status(code, "group '{}': {}", state.label(), why);
}

}  // namespace

namespace {

// The Driver API calls that make a device's primary context current for
// ncclCommInitRank (NCCL takes the calling thread's device), loaded as the
// CUDA driver loads them.
// The Driver API's own types (CUresult and CUdevice are ints; CUcontext
// points to the opaque CUctx_st), so that the calls go through pointers of
// the functions' exact types.
struct ContextCalls {
  using Result = int;
  using Context = CUctx_st*;
  Result (*cuDeviceGet)(int*, int) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(Context*, int) = nullptr;
  Result (*cuDevicePrimaryCtxRelease)(int) = nullptr;
  Result (*cuCtxGetCurrent)(Context*) = nullptr;
  Result (*cuCtxSetCurrent)(Context) = nullptr;
  bool ok = false;
};

const ContextCalls& context_calls() {
  static const ContextCalls calls = [] {
    ContextCalls c;
    const RuntimeLibrary library = open_runtime_library("AXRT_CUDA_DRIVER_LIBRARY", "libcuda.so.1");
    if (library.handle == nullptr) return c;
    using GetProc = int (*)(const char*, void**, int, uint64_t, int*);
    auto get = reinterpret_cast<GetProc>(dlsym(library.handle, "cuGetProcAddress_v2"));
    if (get == nullptr) return c;
    auto fetch = [&](const char* name, auto* out) {
      void* pfn = nullptr;
      int status = 0;
      if (get(name, &pfn, 12000, 0, &status) != 0 || pfn == nullptr) return false;
      *out = reinterpret_cast<std::remove_reference_t<decltype(*out)>>(pfn);
      return true;
    };
    c.ok = fetch("cuDeviceGet", &c.cuDeviceGet) &&
           fetch("cuDevicePrimaryCtxRetain", &c.cuDevicePrimaryCtxRetain) &&
           fetch("cuDevicePrimaryCtxRelease", &c.cuDevicePrimaryCtxRelease) &&
           fetch("cuCtxGetCurrent", &c.cuCtxGetCurrent) &&
           fetch("cuCtxSetCurrent", &c.cuCtxSetCurrent);
    return c;
  }();
  return calls;
}

}  // namespace

axrt_status_t make_nccl_unique_id(std::string* out) {
  std::string reason;
  const NcclApi* nccl = nccl_api(&reason);
  if (nccl == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "axrt_group_join: the nccl backend is "
                       "unavailable: {}", reason);
  }
  if (nccl->ncclGetUniqueId == nullptr || nccl->ncclCommInitRank == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                       "axrt_group_join: {} lacks ncclGetUniqueId or ncclCommInitRank", nccl->path);
  }
  ncclUniqueId id{};
  if (const ncclResult_t result = nccl->ncclGetUniqueId(&id); result != ncclSuccess) {
    return make_status(status_code(result), "axrt_group_join: ncclGetUniqueId failed: {}",
                       nccl->describe(result));
  }
  out->assign(id.internal, sizeof(id.internal));
  return nullptr;
}

axrt_status_t make_nccl_member_backend(std::shared_ptr<GroupState> state, axrt_device_t device,
                                       uint32_t rank, uint32_t size,
                                       const std::string& unique_id,
                                       std::unique_ptr<Backend>* out) {
  constexpr const char* kFunction = "axrt_group_join";
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  AXRT_RETURN_IF_ERROR(axrt_device_query_properties(device, &properties));
  std::string reason;
  const NcclApi* nccl = nccl_api(&reason);
  if (nccl == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "{}: the nccl backend is unavailable: {}",
                       kFunction, reason);
  }
  const ContextCalls& cu = context_calls();
  if (!cu.ok || nccl->ncclCommInitRank == nullptr || unique_id.size() != sizeof(ncclUniqueId)) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                       "{}: ncclCommInitRank, or the CUDA driver's context calls, are unavailable",
                       kFunction);
  }
  auto core = std::make_shared<Core>(*nccl, state);
  core->local_rank = static_cast<int32_t>(rank);
  core->scratch.assign(size, nullptr);
  core->order_events.assign(size, nullptr);
  core->watch_streams.assign(size, nullptr);
  AXRT_RETURN_IF_ERROR(axrt_buffer_allocate(device, kScratchBytes, nullptr, &core->scratch[rank]));
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  AXRT_RETURN_IF_ERROR(axrt_event_create(device, &options, &core->order_events[rank]));
  AXRT_RETURN_IF_ERROR(axrt_stream_create(device, nullptr, &core->watch_streams[rank]));
  // NCCL works on the calling thread's current device: its primary context,
  // the one the CUDA driver uses, for the call.
  int cu_device = 0;
  ContextCalls::Context context = nullptr;
  ContextCalls::Context previous = nullptr;
  if (cu.cuDeviceGet(&cu_device, static_cast<int>(properties.ordinal)) != 0 ||
      cu.cuDevicePrimaryCtxRetain(&context, cu_device) != 0) {
    return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: {}'s primary context is unavailable",
                       kFunction, properties.id);
  }
  cu.cuCtxGetCurrent(&previous);
  cu.cuCtxSetCurrent(context);
  ncclUniqueId id{};
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      nccl->ncclCommInitRank(&comm, static_cast<int>(size), id, static_cast<int>(rank));
  cu.cuCtxSetCurrent(previous);
  cu.cuDevicePrimaryCtxRelease(cu_device);
  if (result != ncclSuccess) {
    axrt_status_code_t code = status_code(result);
    if (code == AXRT_STATUS_CODE_UNKNOWN) code = AXRT_STATUS_CODE_INTERNAL;
    return make_status(code, "{}: ncclCommInitRank of member {} of {} ({}) failed ({} {}): {}",
                       kFunction, rank, size, properties.id, nccl->path, nccl->version_text,
                       nccl->describe(result));
  }
  core->comms.assign(size, nullptr);
  core->comms[rank] = comm;
  auto backend = std::make_unique<NcclBackend>(std::move(core));
  AXRT_RETURN_IF_ERROR(backend->start());
  *out = std::move(backend);
  return nullptr;
}

axrt_status_t make_nccl_backend(std::shared_ptr<GroupState> state,
                                const std::vector<axrt_device_t>& devices,
                                std::unique_ptr<Backend>* out) {
  constexpr const char* kFunction = "axrt_group_create";
  std::vector<int> ordinals;
  for (size_t r = 0; r < devices.size(); ++r) {
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    AXRT_RETURN_IF_ERROR(axrt_device_query_properties(devices[r], &properties));
    if (properties.type != AXRT_DEVICE_TYPE_CUDA) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "{}: the nccl backend runs on CUDA devices, and member {} is {} (a {} "
                         "device)",
                         kFunction, r, properties.id, properties.driver);
    }
    ordinals.push_back(static_cast<int>(properties.ordinal));
  }
  std::string reason;
  const NcclApi* nccl = nccl_api(&reason);
  if (nccl == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "{}: the nccl backend is unavailable: {}",
                       kFunction, reason);
  }
  auto core = std::make_shared<Core>(*nccl, state);
  for (axrt_device_t device : devices) {
    axrt_buffer_t scratch = nullptr;
    AXRT_RETURN_IF_ERROR(axrt_buffer_allocate(device, kScratchBytes, nullptr, &scratch));
    core->scratch.push_back(scratch);
    axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
    options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
    axrt_event_t event = nullptr;
    AXRT_RETURN_IF_ERROR(axrt_event_create(device, &options, &event));
    core->order_events.push_back(event);
    axrt_stream_t watch = nullptr;
    AXRT_RETURN_IF_ERROR(axrt_stream_create(device, nullptr, &watch));
    core->watch_streams.push_back(watch);
  }
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  if (const ncclResult_t result =
          nccl->ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data());
      result != ncclSuccess) {
    std::vector<std::string> ids;
    for (uint32_t r = 0; r < state->size(); ++r) ids.push_back(state->member_id(r));
    axrt_status_code_t code = status_code(result);
    if (code == AXRT_STATUS_CODE_UNKNOWN) code = AXRT_STATUS_CODE_INTERNAL;
    return make_status(code, "{}: ncclCommInitAll over {} failed ({} {}): {}", kFunction,
                       fmt::join(ids, ", "), nccl->path, nccl->version_text,
                       nccl->describe(result));
  }
  core->comms = std::move(comms);
  auto backend = std::make_unique<NcclBackend>(std::move(core));
  AXRT_RETURN_IF_ERROR(backend->start());
  *out = std::move(backend);
  return nullptr;
}

}  // namespace axrt::group
