// The "cpu" backend across processes: one member per process
// (axrt_group_join), messages through a transport module
// (group/transport.h; libaxrt_gloo.so), met through a rendezvous store
// (group/rendezvous.h).
//
// A member's part of a collective is one host function on its stream. It
// posts its receives, then its sends, and waits for all of them within the
// group's timeout:
//   - all-gather: its block to every other member, theirs into its slots;
//   - broadcast: the root's vector to every other member;
//   - reduce-scatter: block p of its vector to member p; block r of every
//     member's into scratch slots, reduced in rank order into its receive
//     buffer;
//   - all-reduce: up to 64 KiB, every member's whole vector to every other,
//     each reducing all of them in rank order; above, a reduce-scatter over
//     near-equal blocks, then an all-gather of the reduced blocks.
// Every element is combined in rank order with the in-process backend's
// functions (group/reduce.h), so results are bit-identical to a group of
// one process, on every member, whatever the count.
//
// Messages meet by slot: the collective's sequence number, a tag of its
// shape (kind, count, element type, reduction, root) and the phase. Parts
// that disagree across processes never meet, and time out as a member
// that never arrived does.
//
// Failure: a transport error on a pair (the peer exited, was killed, reset
// the connection) fails the group naming the peer; so does a wait past the
// group's timeout. A heartbeat thread exchanges a beat with every peer at
// an interval and fails the group naming a peer whose beat is late by the
// heartbeat timeout (a process stopped or hung with its sockets open), or
// whose connection broke while no collective was running. The group's
// abort aborts every operation in flight, so no member waits on a dead one.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>

#include "axrt/device.h"
#include "axrt/memory.h"
#include "axrt/stream.h"
#include "base/dtype.h"
#include "base/runtime_library.h"
#include "group/group.h"
#include "group/process_group.h"
#include "group/reduce.h"
#include "group/rendezvous.h"
#include "group/transport.h"
#include "trace/trace.h"

namespace axrt::group {
namespace {

constexpr uint64_t kDirectBytes = 64 * 1024;
constexpr uint64_t kHeartbeatSlot = 1ull << 63;
constexpr uint64_t kMs = 1000 * 1000;

uint64_t ms_until(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (deadline <= now) return 0;
  if (deadline == Clock::time_point::max()) return UINT64_MAX / kMs;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count());
}

// Whether the group aborts within a moment: a wait that failed because
// another wait timed out (gloo then closes every pair) defers to the
// failure that timeout reports, which names the member truly lost.
bool aborted_soon(GroupState& state) {
  std::unique_lock lock(state.mutex());
  return state.changed().wait_for(lock, std::chrono::milliseconds(200),
                                  [&] { return state.aborted_locked(); });
}

// ---------------------------------------------------------------------------
// The transport module, opened once.

struct Module {
  const axrt_transport_api_t* api = nullptr;
  std::string reason;  // why `api` is null
};

std::string default_module_path() {
  // Beside libaxrt (the build's runtime folder, or the Python package).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&default_module_path), &info) != 0 && info.dli_fname) {
    std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash + 1) + "libaxrt_gloo.so";
  }
  return "libaxrt_gloo.so";
}

const Module& module() {
  static const Module loaded = [] {
    Module m;
    const std::string path = default_module_path();
    const RuntimeLibrary library = open_runtime_library("AXRT_GLOO_TRANSPORT", path.c_str());
    if (!library.handle) {
      m.reason = fmt::format(
          "the gloo transport module ({}) cannot be loaded: {}; it is built where Debian's "
          "libgloo-dev is installed, and needs libgloo0 at run time (AXRT_GLOO_TRANSPORT names "
          "another file)",
          library.path, library.error);
      return m;
    }
    auto entry = reinterpret_cast<axrt_transport_api_fn>(dlsym(library.handle, "axrt_transport_api_v1"));
    const axrt_transport_api_t* api = entry ? entry() : nullptr;
    if (api == nullptr || api->version != AXRT_TRANSPORT_API_VERSION) {
      m.reason = fmt::format("{} is not an axrt transport module of version {}", library.path,
                             AXRT_TRANSPORT_API_VERSION);
      return m;
    }
    m.api = api;
    return m;
  }();
  return loaded;
}

// ---------------------------------------------------------------------------
// The link between this member and the others: the transport, the
// operations in flight, the heartbeat.

enum class Outcome { kDone, kAborted, kTimedOut, kFailed };

class Link {
 public:
  Link(const axrt_transport_api_t* api, void* transport, uint32_t rank, uint32_t size)
      : api_(api), transport_(transport), rank_(rank), size_(size) {}
  ~Link() {
    stop_heartbeat();
    abort_all();
    api_->destroy(transport_);
  }

  uint32_t rank() const noexcept { return rank_; }
  uint32_t size() const noexcept { return size_; }

  // One batch of operations: posted together, waited for in order.
  class Batch {
   public:
    explicit Batch(Link& link) : link_(link) {}
    ~Batch() {
      for (auto& op : ops_) link_.forget(op.handle);
    }
    // Returns false (with `error`) when the post failed.
    bool post(bool is_send, uint32_t peer, uint64_t slot, void* data, size_t bytes) {
      if (bytes == 0) return true;
      void* handle = nullptr;
      char text[512] = "";
      if (!link_.post(is_send, peer, slot, data, bytes, &handle, text, sizeof(text))) {
        error_peer = peer;
        error = text;
        return false;
      }
      ops_.push_back({handle, peer});
      return true;
    }
    // Waits for every operation until `deadline`; on the first that does
    // not complete, `error_peer` and `error` say which and why.
    Outcome wait(Clock::time_point deadline) {
      for (auto& op : ops_) {
        char text[512] = "";
        const int got = link_.api_->wait(op.handle, ms_until(deadline), text, sizeof(text));
        if (got == AXRT_TRANSPORT_DONE) continue;
        error_peer = op.peer;
        error = text;
        if (got == AXRT_TRANSPORT_ABORTED) return Outcome::kAborted;
        return got == AXRT_TRANSPORT_TIMED_OUT ? Outcome::kTimedOut : Outcome::kFailed;
      }
      return Outcome::kDone;
    }

    uint32_t error_peer = 0;
    std::string error;

   private:
    struct Op {
      void* handle;
      uint32_t peer;
    };
    Link& link_;
    std::vector<Op> ops_;
  };

  // Aborts every operation in flight and refuses new ones.
  void abort_all() noexcept {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    for (void* op : in_flight_) api_->abort(op);
  }

  // Starts the heartbeat; `on_loss(peer, why)` is called once, from its
  // thread, when a peer's beat is late or its connection broke.
  void start_heartbeat(uint64_t interval_ns, uint64_t timeout_ns,
                       std::function<void(uint32_t, std::string)> on_loss) {
    if (interval_ns == UINT64_MAX || size_ < 2) return;
    heartbeat_ = std::thread([this, interval_ns, timeout_ns, on_loss = std::move(on_loss)] {
      beat(interval_ns, timeout_ns, on_loss);
    });
  }

  void stop_heartbeat() noexcept {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      for (void* op : heartbeat_ops_) api_->abort(op);
    }
    stop_changed_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

 private:
  bool post(bool is_send, uint32_t peer, uint64_t slot, void* data, size_t bytes, void** out,
            char* error, size_t error_size) {
    std::lock_guard lock(mutex_);
    if (aborted_) {
      std::snprintf(error, error_size, "the group aborted");
      return false;
    }
    if (api_->post(transport_, is_send ? 1 : 0, static_cast<int>(peer), slot, data, bytes, out,
                   error, error_size) != 0) {
      return false;
    }
    in_flight_.insert(*out);
    return true;
  }

  void forget(void* op) noexcept {
    {
      std::lock_guard lock(mutex_);
      in_flight_.erase(op);
      heartbeat_ops_.erase(op);
    }
    api_->release(op);
  }

  void beat(uint64_t interval_ns, uint64_t timeout_ns,
            const std::function<void(uint32_t, std::string)>& on_loss) {
    std::vector<uint64_t> sent(size_), got(size_);
    for (uint64_t k = 0;; ++k) {
      {
        std::unique_lock lock(mutex_);
        if (k > 0) {
          stop_changed_.wait_for(lock, std::chrono::nanoseconds(interval_ns), [&] { return stopping_; });
        }
        if (stopping_ || aborted_) return;
      }
      // Every peer's beat k, and ours to each.
      std::vector<std::pair<void*, uint32_t>> ops;
      bool posted = true;
      for (uint32_t p = 0; p < size_ && posted; ++p) {
        if (p == rank_) continue;
        for (int is_send = 0; is_send < 2 && posted; ++is_send) {
          void* op = nullptr;
          char text[512] = "";
          uint64_t* word = is_send ? &sent[p] : &got[p];
          *word = k;
          std::unique_lock lock(mutex_);
          if (stopping_ || aborted_) {
            posted = false;
            break;
          }
          if (api_->post(transport_, is_send, static_cast<int>(p), kHeartbeatSlot | k, word, 8, &op,
                         text, sizeof(text)) != 0) {
            posted = false;
            lock.unlock();  // the loss aborts the group, which takes the lock
            on_loss(p, fmt::format("its connection broke ({})", text));
            break;
          }
          heartbeat_ops_.insert(op);
          ops.emplace_back(op, p);
        }
      }
      const auto deadline = deadline_after(timeout_ns);
      bool lost = !posted;
      for (auto& [op, peer] : ops) {
        if (!lost) {
          char text[512] = "";
          const int rc = api_->wait(op, ms_until(deadline), text, sizeof(text));
          if (rc == AXRT_TRANSPORT_TIMED_OUT) {
            lost = true;
            on_loss(peer, fmt::format("no heartbeat from it for {:.1f} s", timeout_ns / 1e9));
          } else if (rc == AXRT_TRANSPORT_FAILED) {
            lost = true;
            on_loss(peer, fmt::format("its connection broke ({})", text));
          } else if (rc == AXRT_TRANSPORT_ABORTED) {
            lost = true;
          }
        }
        forget(op);
      }
      if (lost) return;
    }
  }

  const axrt_transport_api_t* api_;
  void* transport_;
  const uint32_t rank_, size_;
  std::mutex mutex_;
  std::condition_variable stop_changed_;
  bool aborted_ = false;
  bool stopping_ = false;
  std::unordered_set<void*> in_flight_;
  std::unordered_set<void*> heartbeat_ops_;
  std::thread heartbeat_;
};

// ---------------------------------------------------------------------------
// One member's part of one collective.

struct Blocks {
  // Block b is [start[b], start[b + 1]) elements, near-equal.
  std::vector<uint64_t> start;
  explicit Blocks(uint64_t count, uint32_t n) : start(n + 1) {
    for (uint32_t b = 0; b <= n; ++b) start[b] = count * b / n;
  }
  uint64_t size(uint32_t b) const { return start[b + 1] - start[b]; }
};

class ProcessOp {
 public:
  ProcessOp(std::shared_ptr<GroupState> state, std::shared_ptr<Link> link, const Collective& c,
            uint32_t rank)
      : state_(std::move(state)),
        link_(std::move(link)),
        kind_(c.kind),
        context_(fmt::format("{} #{}", collective_name(c.kind), c.sequence)),
        sequence_(c.sequence),
        count_(c.count),
        element_(dtype_bytes(c.dtype, 1)),
        reduce_(reduce_function(c.dtype, c.op)),
        root_(c.root),
        rank_(rank),
        recv_bytes_(c.parts[rank].recv_bytes) {
    // The shape's tag: parts that disagree use other slots.
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {uint64_t(c.kind), c.count, uint64_t(c.dtype), uint64_t(c.op), uint64_t(c.root)}) {
      h = (h ^ v) * 1099511628211ull;
    }
    slot_base_ = ((c.sequence & 0xffffffffffull) << 20) | ((h & 0xffff) << 4);
  }

  axrt_status_t bind(const MemberPart& m) {
    void* base = nullptr;
    if (m.send != nullptr) {
      AXRT_RETURN_IF_ERROR(axrt_buffer_map(m.send, &base));
      send_ = static_cast<std::byte*>(base) + m.send_offset;
      kept_.emplace_back(m.send);
    }
    AXRT_RETURN_IF_ERROR(axrt_buffer_map(m.recv, &base));
    recv_ = static_cast<std::byte*>(base) + m.recv_offset;
    kept_.emplace_back(m.recv);
    return nullptr;
  }

  axrt_status_t run(axrt_status_t stream_status) noexcept {
    try {
      if (stream_status != nullptr) {
        state_->fail(static_cast<int32_t>(rank_), axrt_status_code(stream_status),
                     fmt::format("member {} ({}) failed: its stream failed before {}: {}", rank_,
                                 state_->member_id(rank_), context_,
                                 axrt_status_message(stream_status)));
        return nullptr;  // the stream keeps its own failure
      }
      if (state_->aborted()) return state_->aborted_status(context_.c_str());
      const int64_t begin = trace::active() ? trace::now() : 0;
      AXRT_RETURN_IF_ERROR(algorithm());
      if (begin != 0) record(begin);
      return nullptr;
    } catch (...) {
      state_->fail(static_cast<int32_t>(rank_), AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                   "a member ran out of host memory in a collective");
      return out_of_memory_status();
    }
  }

 private:
  uint32_t n() const { return link_->size(); }

  void record(int64_t begin) const {
    trace::Record r;
    r.kind = trace::Kind::kCollective;
    r.begin = begin;
    r.end = trace::now();
    r.name = collective_name(kind_);
    r.detail = trace::intern_for_trace(state_->label());
    r.a[0] = rank_;
    r.a[1] = static_cast<int64_t>(recv_bytes_);
    r.a[2] = static_cast<int64_t>(sequence_);
    r.a[3] = 0;
    trace::emit(r);
  }

  // Waits for `batch`, turning what went wrong into the group's failure.
  axrt_status_t finish(Link::Batch& batch, bool posted) {
    Outcome outcome = Outcome::kFailed;
    if (posted) outcome = batch.wait(deadline_);
    if (outcome == Outcome::kDone) return nullptr;
    const uint32_t peer = batch.error_peer;
    if (outcome == Outcome::kAborted || state_->aborted() ||
        (outcome == Outcome::kFailed && aborted_soon(*state_))) {
      return state_->aborted_status(context_.c_str());
    }
    if (outcome == Outcome::kTimedOut) {
      state_->fail(static_cast<int32_t>(peer), AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                   fmt::format("member {} ({}) did not reach {} within the group's timeout (or "
                               "queued a part of another shape); member {} ({}) waited for it",
                               peer, state_->member_id(peer), context_, rank_,
                               state_->member_id(rank_)));
      return state_->aborted_status(context_.c_str(), AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
    }
    state_->fail(static_cast<int32_t>(peer), AXRT_STATUS_CODE_UNAVAILABLE,
                 fmt::format("member {} ({}) is gone: the connection to it broke during {} ({})",
                             peer, state_->member_id(peer), context_, batch.error));
    return state_->aborted_status(context_.c_str());
  }

  uint64_t slot(uint32_t phase) const { return slot_base_ | phase; }

  // Scratch for every member's block of `bytes` (uninitialized: received
  // into, or ours copied when a reduction needs it), and where each member's
  // block is read from: slot p for the others, `own` for this member.
  struct Inputs {
    std::unique_ptr<std::byte[]> scratch;
    std::vector<const std::byte*> from;
    uint64_t bytes = 0;
    std::byte* slot(uint32_t p) { return scratch.get() + bytes * p; }
  };
  Inputs inputs(uint64_t bytes, const std::byte* own) const {
    Inputs in;
    in.bytes = bytes;
    in.scratch.reset(new std::byte[std::max<uint64_t>(bytes * n(), 1)]);
    in.from.resize(n());
    for (uint32_t p = 0; p < n(); ++p) in.from[p] = p == rank_ ? own : in.slot(p);
    return in;
  }

  // One message's range of this member's memory: {data, bytes}; no bytes,
  // no message.
  struct Span {
    std::byte* data = nullptr;
    uint64_t bytes = 0;
  };

  // From every other member p into recv_from(p), and to it from
  // send_to(p), in `phase`: every receive posted first, then every send,
  // then all of them waited for.
  template <typename RecvFrom, typename SendTo>
  axrt_status_t exchange(uint32_t phase, RecvFrom recv_from, SendTo send_to) {
    Link::Batch batch(*link_);
    bool posted = true;
    for (uint32_t p = 0; p < n() && posted; ++p) {
      if (p == rank_) continue;
      const Span in = recv_from(p);
      posted = batch.post(false, p, slot(phase), in.data, in.bytes);
    }
    for (uint32_t p = 0; p < n() && posted; ++p) {
      if (p == rank_) continue;
      const Span out = send_to(p);
      posted = batch.post(true, p, slot(phase), out.data, out.bytes);
    }
    return finish(batch, posted);
  }

  // out = block 0 (op) block 1 (op) ..., in rank order, `elements` long.
  // `out` may be this member's own block: it is read before it is written
  // unless ranks before it are combined first (rank 2 and up), and then it
  // is copied to its slot first.
  void reduce_ranks(std::byte* out, Inputs& in, uint64_t elements) const {
    const uint64_t bytes = elements * element_;
    if (bytes == 0) return;
    if (n() == 1) {
      if (out != in.from[0]) std::memcpy(out, in.from[0], bytes);
      return;
    }
    if (rank_ >= 2 && out == in.from[rank_]) {
      std::memcpy(in.slot(rank_), in.from[rank_], bytes);
      in.from[rank_] = in.slot(rank_);
    }
    reduce_(out, in.from[0], in.from[1], elements);
    for (uint32_t p = 2; p < n(); ++p) reduce_(out, out, in.from[p], elements);
  }

  axrt_status_t algorithm() {
    deadline_ = state_->deadline_from_now();
    const uint64_t bytes = count_ * element_;
    const auto none = [](uint32_t) { return Span{}; };
    switch (kind_) {
      case CollectiveKind::kAllReduce: {
        if (bytes <= kDirectBytes || n() == 1) {
          // Every member's whole vector to every other.
          Inputs in = inputs(bytes, send_);
          AXRT_RETURN_IF_ERROR(exchange(
              0, [&](uint32_t p) { return Span{in.slot(p), bytes}; },
              [&](uint32_t) { return Span{send_, bytes}; }));
          reduce_ranks(recv_, in, count_);
          return nullptr;
        }
        // Block p of every vector to member p, which reduces it; then the
        // reduced blocks to every member.
        const Blocks blocks(count_, n());
        const auto block = [&](std::byte* base, uint32_t p) {
          return Span{base + blocks.start[p] * element_, blocks.size(p) * element_};
        };
        const Span own = block(recv_, rank_);
        Inputs in = inputs(own.bytes, block(send_, rank_).data);
        AXRT_RETURN_IF_ERROR(exchange(
            1, [&](uint32_t p) { return Span{in.slot(p), own.bytes}; },
            [&](uint32_t p) { return block(send_, p); }));
        reduce_ranks(own.data, in, blocks.size(rank_));
        return exchange(
            2, [&](uint32_t p) { return block(recv_, p); }, [&](uint32_t) { return own; });
      }
      case CollectiveKind::kAllGather: {
        const Span own{recv_ + bytes * rank_, bytes};
        if (own.data != send_ && bytes != 0) std::memcpy(own.data, send_, bytes);
        return exchange(
            0, [&](uint32_t p) { return Span{recv_ + bytes * p, bytes}; },
            [&](uint32_t) { return own; });
      }
      case CollectiveKind::kReduceScatter: {
        Inputs in = inputs(bytes, send_ + bytes * rank_);
        AXRT_RETURN_IF_ERROR(exchange(
            0, [&](uint32_t p) { return Span{in.slot(p), bytes}; },
            [&](uint32_t p) { return Span{send_ + bytes * p, bytes}; }));
        reduce_ranks(recv_, in, count_);
        return nullptr;
      }
      case CollectiveKind::kBroadcast: {
        if (rank_ == root_) {
          if (send_ != recv_ && bytes != 0) std::memcpy(recv_, send_, bytes);
          return exchange(0, none, [&](uint32_t) { return Span{recv_, bytes}; });
        }
        return exchange(
            0, [&](uint32_t p) { return p == root_ ? Span{recv_, bytes} : Span{}; }, none);
      }
      case CollectiveKind::kSendRecv:
        break;
    }
    return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: not a collective of this backend", context_);
  }

  const std::shared_ptr<GroupState> state_;
  const std::shared_ptr<Link> link_;
  const CollectiveKind kind_;
  const std::string context_;
  const uint64_t sequence_;
  const uint64_t count_;
  const uint64_t element_;
  const ReduceFn reduce_;
  const uint32_t root_;
  const uint32_t rank_;
  const uint64_t recv_bytes_;
  uint64_t slot_base_ = 0;
  std::byte* send_ = nullptr;
  std::byte* recv_ = nullptr;
  std::vector<BufferRef> kept_;
  Clock::time_point deadline_;
};

axrt_status_t run_op(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<ProcessOp> op(static_cast<ProcessOp*>(user_data));
  return op->run(stream_status);
}

class ProcessBackend final : public Backend {
 public:
  ProcessBackend(std::shared_ptr<GroupState> state, std::shared_ptr<Link> link,
                 std::unique_ptr<Store> store)
      : state_(std::move(state)), link_(std::move(link)), store_(std::move(store)) {}
  ~ProcessBackend() override { link_->stop_heartbeat(); }

  const char* name() const noexcept override { return "cpu"; }

  axrt_status_t enqueue(const Collective& c) override {
    return make_status(AXRT_STATUS_CODE_INTERNAL, "group '{}': {} #{} of every member in a group "
                       "across processes", state_->label(), collective_name(c.kind), c.sequence);
  }

  axrt_status_t enqueue_part(const Collective& c, uint32_t rank, std::shared_ptr<void>*) override {
    auto op = std::make_unique<ProcessOp>(state_, link_, c, rank);
    axrt_status_t status = op->bind(c.parts[rank]);
    if (status == nullptr) status = axrt_stream_launch_host_func(c.parts[rank].stream, run_op, op.get());
    if (status == nullptr) {
      op.release();  // the host function owns it now
      return nullptr;
    }
    // The other processes would wait for this part: they learn of it as a
    // failure of this member.
    state_->fail(static_cast<int32_t>(rank), axrt_status_code(status),
                 fmt::format("member {} ({}) could not queue its part of {} #{}: {}", rank,
                             state_->member_id(rank), collective_name(c.kind), c.sequence,
                             axrt_status_message(status)));
    link_->abort_all();
    return status;
  }

  void abort() noexcept override { link_->abort_all(); }

  void start_heartbeat(uint64_t interval_ns, uint64_t timeout_ns) {
    std::weak_ptr<GroupState> weak = state_;
    link_->start_heartbeat(interval_ns, timeout_ns, [weak](uint32_t peer, std::string why) {
      if (auto state = weak.lock()) {
        if (why.starts_with("its connection broke") && aborted_soon(*state)) return;
        state->fail(static_cast<int32_t>(peer), AXRT_STATUS_CODE_UNAVAILABLE,
                    fmt::format("member {} ({}) is gone: {}", peer, state->member_id(peer), why));
      }
    });
  }

 private:
  std::shared_ptr<GroupState> state_;
  std::shared_ptr<Link> link_;
  // Kept while the group lives: rank 0's serves the others, who may still
  // read the transport's addresses when rank 0 is connected.
  std::unique_ptr<Store> store_;
};

// "size=2 host=node1 pid=4242 device=cpu:0": a member's record in the store.
struct Record {
  uint32_t size = 0;
  std::string host, pid, device;
  std::string describe() const { return fmt::format("{}, pid {} on {}", device, pid, host); }
};

std::string encode(const Record& r) {
  return fmt::format("size={}\nhost={}\npid={}\ndevice={}\n", r.size, r.host, r.pid, r.device);
}

Record decode(const std::string& text) {
  Record r;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "size") r.size = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    if (key == "host") r.host = value;
    if (key == "pid") r.pid = value;
    if (key == "device") r.device = value;
  }
  return r;
}

// The store as the transport module borrows it.
struct LentStore {
  Store* store;
  std::string prefix;
};

int lent_set(void* context, const char* key, const void* data, size_t size, char* error,
             size_t error_size) {
  auto* lent = static_cast<LentStore*>(context);
  axrt_status_t status = lent->store->set(key, std::string_view(static_cast<const char*>(data), size));
  if (status == nullptr) return 0;
  std::snprintf(error, error_size, "%s", axrt_status_message(status));
  status_destroy(status);
  return -1;
}

int lent_get(void* context, const char* key, uint64_t timeout_ms,
             void (*sink)(void*, const void*, size_t), void* sink_context, char* error,
             size_t error_size) {
  auto* lent = static_cast<LentStore*>(context);
  std::string value;
  const auto deadline = deadline_after(timeout_ms >= UINT64_MAX / kMs ? UINT64_MAX : timeout_ms * kMs);
  axrt_status_t status = lent->store->get(key, deadline, &value);
  if (status == nullptr) {
    sink(sink_context, value.data(), value.size());
    return 0;
  }
  std::snprintf(error, error_size, "%s", axrt_status_message(status));
  status_destroy(status);
  return -1;
}

// The members' meeting in the store. Rank 0 opens a new epoch of the
// group each time it joins ("epoch", counted up); the others join the
// newest, and move on when a newer one opens while they wait. So the
// members left after a failure, and a process that replaces a lost one,
// meet again under the same id: a rank whose claim in the current epoch is
// a lost member's waits for rank 0 to open the next.
struct Meeting {
  int64_t epoch = 0;
  std::vector<std::string> ids;  // the members, for messages
};

constexpr auto kPoll = std::chrono::milliseconds(10);

axrt_status_t current_epoch(Store& store, int64_t* out) { return store.add("epoch", 0, out); }

// Waits until the epoch is past `epoch` (true) or `deadline` passes (false).
axrt_status_t wait_for_epoch_after(Store& store, int64_t epoch, Clock::time_point deadline,
                                   bool* moved) {
  for (;;) {
    int64_t now = 0;
    AXRT_RETURN_IF_ERROR(current_epoch(store, &now));
    if (now > epoch) {
      *moved = true;
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      *moved = false;
      return nullptr;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

axrt_status_t meet(const JoinRequest& request, Store& store, Clock::time_point deadline,
                   Meeting* out) {
  constexpr const char* kFunction = "axrt_group_join";
  const uint32_t n = request.size, rank = request.rank;
  Record mine;
  mine.size = n;
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  mine.host = host;
  mine.pid = std::to_string(::getpid());
  mine.device = request.device_id;
  for (;;) {
    int64_t epoch = 0;
    if (rank == 0) {
      AXRT_RETURN_IF_ERROR(store.add("epoch", 1, &epoch));
    } else {
      bool opened = false;
      AXRT_RETURN_IF_ERROR(wait_for_epoch_after(store, 0, deadline, &opened));
      if (!opened) {
        return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                           "{}: group '{}': member 0 did not open the group within {:.1f} s; "
                           "member {} waited for it",
                           kFunction, request.id, request.rendezvous_timeout_ns / 1e9, rank);
      }
      AXRT_RETURN_IF_ERROR(current_epoch(store, &epoch));
    }
    const auto key = [&](uint32_t r) { return fmt::format("{}/member/{}", epoch, r); };
    // Claim the rank, then publish this member's record.
    int64_t claims = 0;
    AXRT_RETURN_IF_ERROR(store.add(key(rank) + "/claims", 1, &claims));
    if (claims > 1) {
      bool moved = false;
      AXRT_RETURN_IF_ERROR(wait_for_epoch_after(store, epoch, deadline, &moved));
      if (moved) continue;
      bool found = false;
      std::string other;
      AXRT_RETURN_IF_ERROR(store.check(key(rank), &found, &other));
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                         "{}: rank {} of group '{}' is taken ({}), and member 0 opened no new "
                         "epoch of the group within {:.1f} s; every member joins with a rank of "
                         "its own",
                         kFunction, rank, request.id,
                         found ? decode(other).describe() : "by another process",
                         request.rendezvous_timeout_ns / 1e9);
    }
    AXRT_RETURN_IF_ERROR(store.set(key(rank), encode(mine)));

    std::vector<std::string> ids(n);
    ids[rank] = fmt::format("{}, this process", mine.device);
    bool restart = false;
    for (uint32_t p = 0; p < n && !restart; ++p) {
      if (p == rank) continue;
      std::string text;
      for (bool found = false; !found;) {
        AXRT_RETURN_IF_ERROR(store.check(key(p), &found, &text));
        if (found) break;
        if (rank != 0) {
          int64_t now = 0;
          AXRT_RETURN_IF_ERROR(current_epoch(store, &now));
          if (now != epoch) {
            restart = true;  // rank 0 opened a newer epoch: meet there
            break;
          }
        }
        if (Clock::now() >= deadline) {
          std::vector<uint32_t> missing;
          for (uint32_t q = p; q < n; ++q) {
            bool there = q == rank;
            std::string ignored;
            if (!there) AXRT_RETURN_IF_ERROR(store.check(key(q), &there, &ignored));
            if (!there) missing.push_back(q);
          }
          return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                             "{}: group '{}': member(s) {} of {} did not arrive within {:.1f} s; "
                             "member {} waited for them",
                             kFunction, request.id, fmt::join(missing, ", "), n,
                             request.rendezvous_timeout_ns / 1e9, rank);
        }
        std::this_thread::sleep_for(kPoll);
      }
      if (restart) break;
      const Record theirs = decode(text);
      if (theirs.size != n) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: group '{}': member {} ({}) joined with world size {}, and member "
                           "{} with {}; every member gives the same size",
                           kFunction, request.id, p, theirs.describe(), theirs.size, rank, n);
      }
      ids[p] = theirs.describe();
    }
    if (restart) continue;
    out->epoch = epoch;
    out->ids = std::move(ids);
    return nullptr;
  }
}

}  // namespace

axrt_status_t join_process_group(const JoinRequest& request, std::shared_ptr<GroupState>* out_state,
                                 std::unique_ptr<Backend>* out_backend) {
  constexpr const char* kFunction = "axrt_group_join";
  const Module& transport_module = module();
  if (transport_module.api == nullptr) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "{}: {}", kFunction, transport_module.reason);
  }
  const auto deadline = deadline_after(request.rendezvous_timeout_ns);
  std::unique_ptr<Store> store;
  AXRT_RETURN_IF_ERROR(open_store(request.id, request.rank, deadline, &store));
  Meeting meeting;
  AXRT_RETURN_IF_ERROR(meet(request, *store, deadline, &meeting));

  const uint32_t n = request.size, rank = request.rank;
  LentStore lent{store.get(), ""};
  axrt_transport_store_t lent_store{&lent, lent_set, lent_get};
  void* transport = nullptr;
  char error[1024] = "";
  const std::string listen = request.hostname.empty() ? store->local_address() : request.hostname;
  const std::string prefix = fmt::format("{}/transport", meeting.epoch);
  if (transport_module.api->connect(&lent_store, prefix.c_str(), static_cast<int>(rank),
                                    static_cast<int>(n), listen.c_str(), ms_until(deadline),
                                    &transport, error, sizeof(error)) != 0) {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                       "{}: group '{}': member {} could not connect to the others through gloo: {}",
                       kFunction, request.id, rank, error);
  }
  auto link = std::make_shared<Link>(transport_module.api, transport, rank, n);
  auto state = std::make_shared<GroupState>(request.label, std::move(meeting.ids), request.timeout_ns);
  auto backend = std::make_unique<ProcessBackend>(state, link, std::move(store));
  backend->start_heartbeat(request.heartbeat_interval_ns, request.heartbeat_timeout_ns);
  *out_state = std::move(state);
  *out_backend = std::move(backend);
  return nullptr;
}

axrt_status_t join_nccl_group(const JoinRequest& request, axrt_device_t device,
                              std::shared_ptr<GroupState>* out_state,
                              std::unique_ptr<Backend>* out_backend) {
  const auto deadline = deadline_after(request.rendezvous_timeout_ns);
  std::unique_ptr<Store> store;
  AXRT_RETURN_IF_ERROR(open_store(request.id, request.rank, deadline, &store));
  Meeting meeting;
  AXRT_RETURN_IF_ERROR(meet(request, *store, deadline, &meeting));
  // Rank 0's NCCL id, to every member through the store.
  const std::string key = fmt::format("{}/nccl/id", meeting.epoch);
  std::string id;
  if (request.rank == 0) {
    AXRT_RETURN_IF_ERROR(make_nccl_unique_id(&id));
    AXRT_RETURN_IF_ERROR(store->set(key, id));
  } else {
    AXRT_RETURN_IF_ERROR(store->get(key, deadline, &id));
  }
  auto state = std::make_shared<GroupState>(request.label, std::move(meeting.ids), request.timeout_ns);
  AXRT_RETURN_IF_ERROR(
      make_nccl_member_backend(state, device, request.rank, request.size, id, out_backend));
  *out_state = std::move(state);
  return nullptr;
}

}  // namespace axrt::group
