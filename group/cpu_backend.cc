// The "cpu" backend: collectives of CPU devices over their host memory.
//
// A collective is one host function per member, queued on the member's
// stream. When it runs (the member's stream got there) the member waits at
// a rendezvous for the others, within the group's timeout; then the members
// run the algorithm together, with a barrier between steps:
//   - reduce-scatter: the vector is cut into one block per member; member p
//     reduces block p of every member's send buffer, in rank order
//     (((x0 + x1) + x2) + ...), a slice at a time through a partial-sum
//     buffer of its own, into its receive buffer;
//   - all-reduce: the same over blocks of near-equal sizes, each result at
//     its place in the member's receive buffer; after a barrier (every send
//     buffer read) each member copies the other members' blocks from theirs;
//   - all-gather: each member copies its block in, then, size - 1 times,
//     the block its left neighbour got in the step before (a ring);
//   - broadcast: each member copies the root's buffer (a flat tree);
//   - send/recv: the receiver copies the sender's buffer.
// Vectors of up to 64 KiB are reduced by each member itself, reading every
// member's send buffer in rank order (two barriers instead of three).
// Every element of a reduction is combined in rank order whatever the
// count and the blocks, so every member ends with bit-identical results
// and an element's result does not depend on the vector's length (the
// batch invariance of docs/serving.md holds across a group). A last
// barrier keeps every member in the collective until nobody reads its
// buffers any more, so that work queued after it may overwrite them.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include "axrt/device.h"
#include "axrt/memory.h"
#include "axrt/stream.h"
#include "base/dtype.h"
#include "group/group.h"
#include "group/reduce.h"
#include "trace/trace.h"

namespace axrt::group {
namespace {

// The most bytes of a block a member reduces at once: bounds its partial-sum
// buffer, which stays in cache.
constexpr uint64_t kSliceBytes = 64 * 1024;
// Reductions of vectors up to this size skip the blocks (see
// reduce_in_rank_order).
constexpr uint64_t kDirectBytes = 64 * 1024;


// The host address of byte `offset` of `buffer` (a checked, host-visible
// buffer of a CPU device).
axrt_status_t host_address(axrt_buffer_t buffer, uint64_t offset, std::byte** out) {
  void* base = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_buffer_map(buffer, &base));
  *out = static_cast<std::byte*>(base) + offset;
  return nullptr;
}

// ---------------------------------------------------------------------------
// One collective in flight.

class CpuOp {
 public:
  struct Part {
    uint32_t rank = 0;
    std::byte* send = nullptr;
    std::byte* recv = nullptr;
    std::byte* scratch = nullptr;  // two slices
  };
  struct Copy {
    uint32_t dst_part = 0;
    std::byte* dst = nullptr;
    const std::byte* src = nullptr;
    uint64_t bytes = 0;
  };

  CpuOp(std::shared_ptr<GroupState> state, const Collective& c)
      : state_(std::move(state)),
        kind_(c.kind),
        context_(fmt::format("{} #{}", collective_name(c.kind), c.sequence)),
        sequence_(c.sequence),
        element_(c.kind == CollectiveKind::kSendRecv ? 1 : dtype_bytes(c.dtype, 1)),
        reduce_(c.kind == CollectiveKind::kSendRecv ? nullptr : reduce_function(c.dtype, c.op)),
        root_(c.root),
        participants_(static_cast<uint32_t>(c.parts.size())),
        arrived_parts_(c.parts.size(), false) {}

  // Resolves every part's and transfer's host addresses and keeps the
  // buffers (a whole-group call).
  axrt_status_t prepare(const Collective& c) {
    layout(c);
    for (uint32_t p = 0; p < participants_; ++p) AXRT_RETURN_IF_ERROR(bind(p, c.parts[p]));
    for (const TransferPart& t : c.transfers) {
      Copy copy;
      copy.dst_part = t.dst_part;
      copy.bytes = t.bytes;
      std::byte* src = nullptr;
      AXRT_RETURN_IF_ERROR(host_address(t.src_buffer, t.src_offset, &src));
      AXRT_RETURN_IF_ERROR(host_address(t.dst_buffer, t.dst_offset, &copy.dst));
      copy.src = src;
      kept_[t.src_part].emplace_back(t.src_buffer);
      kept_[t.dst_part].emplace_back(t.dst_buffer);
      copies_.push_back(copy);
    }
    return nullptr;
  }

  // Part `p`'s host addresses, and its buffers kept until the collective
  // ran. Before part p's host function is queued; the parts' binds are
  // serialized by the group's enqueue lock, and a member reads another's
  // part only after the rendezvous.
  axrt_status_t bind(uint32_t p, const MemberPart& m) {
    parts_[p].rank = m.rank;
    recv_bytes_[p] = m.recv_bytes;
    if (m.send != nullptr) {
      AXRT_RETURN_IF_ERROR(host_address(m.send, m.send_offset, &parts_[p].send));
      kept_[p].emplace_back(m.send);
    }
    if (m.recv != nullptr) {
      AXRT_RETURN_IF_ERROR(host_address(m.recv, m.recv_offset, &parts_[p].recv));
      kept_[p].emplace_back(m.recv);
    }
    return nullptr;
  }

  // Lays out the blocks and the partial-sum buffers.
  void layout(const Collective& c) {
    const uint32_t n = participants_;
    parts_.resize(n);
    recv_bytes_.assign(n, 0);
    kept_.resize(n);
    for (uint32_t p = 0; p < n; ++p) parts_[p].rank = c.parts[p].rank;
    // Block r of the vector: elements [blocks_[r], blocks_[r + 1]).
    blocks_.assign(n + 1, 0);
    if (kind_ == CollectiveKind::kAllReduce) {
      const uint64_t q = c.count / n, rem = c.count % n;
      for (uint32_t r = 0; r <= n; ++r) blocks_[r] = r * q + std::min<uint64_t>(r, rem);
    } else {
      for (uint32_t r = 0; r <= n; ++r) blocks_[r] = r * c.count;
    }
    const bool reduces = kind_ == CollectiveKind::kAllReduce || kind_ == CollectiveKind::kReduceScatter;
    if (reduces && n > 1 && blocks_[n] * element_ <= kDirectBytes) {
      // Small vectors: each member reduces all it receives itself (see
      // reduce_in_rank_order).
      direct_ = true;
      slot_bytes_ = (kind_ == CollectiveKind::kAllReduce ? blocks_[n] : blocks_[1]) * element_;
      if (slot_bytes_ != 0) {
        scratch_.reset(new std::byte[slot_bytes_ * n]);
        for (uint32_t p = 0; p < n; ++p) parts_[p].scratch = scratch_.get() + slot_bytes_ * p;
      }
    } else if (reduces && n > 1) {
      // Each member's partial sums of one slice at a time, small enough
      // to stay in its core's cache.
      uint64_t largest = 0;
      for (uint32_t r = 0; r < n; ++r) largest = std::max(largest, blocks_[r + 1] - blocks_[r]);
      slice_ = std::max<uint64_t>(1, kSliceBytes / element_);
      slot_bytes_ = std::min(slice_, largest) * element_;
      if (slot_bytes_ != 0) {
        scratch_.reset(new std::byte[slot_bytes_ * n]);
        for (uint32_t p = 0; p < n; ++p) parts_[p].scratch = scratch_.get() + slot_bytes_ * p;
      }
    }
  }

  // Work queued on some members before an enqueue failed does nothing.
  void cancel() noexcept {
    {
      std::lock_guard<std::mutex> lock(state_->mutex());
      cancelled_ = true;
    }
    state_->changed().notify_all();
  }

  // Member `p`'s host function. Host memory running out on the way (the
  // messages of a failure) fails the group, as any member's failure does.
  axrt_status_t run(uint32_t p, axrt_status_t stream_status) noexcept {
    try {
      return run_member(p, stream_status);
    } catch (...) {
      state_->fail(static_cast<int32_t>(parts_[p].rank), AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                   "a member ran out of host memory in a collective");
      return out_of_memory_status();
    }
  }

 private:
  enum class Wait { kPassed, kAborted, kCancelled, kTimedOut };

  axrt_status_t run_member(uint32_t p, axrt_status_t stream_status) {
    const uint32_t rank = parts_[p].rank;
    if (stream_status != nullptr) {
      state_->fail(static_cast<int32_t>(rank), axrt_status_code(stream_status),
                   fmt::format("member {} ({}) failed: its stream failed before {}: {}", rank,
                               state_->member_id(rank), context_, axrt_status_message(stream_status)));
      return nullptr;  // the stream keeps its own failure
    }
    const int64_t begin = trace::active() ? trace::now() : 0;
    Wait arrival = rendezvous(p);
    const int64_t met = begin != 0 ? trace::now() : 0;
    if (arrival == Wait::kCancelled) return nullptr;
    if (arrival == Wait::kTimedOut) {
      return state_->aborted_status(context_.c_str(), AXRT_STATUS_CODE_DEADLINE_EXCEEDED);
    }
    if (arrival != Wait::kPassed || !algorithm(p)) {
      return cancelled() ? nullptr : state_->aborted_status(context_.c_str());
    }
    if (begin != 0) record(p, begin, met);
    return nullptr;
  }

  // The member's part in a running trace: a slice on its stream's thread.
  void record(uint32_t p, int64_t begin, int64_t met) const {
    trace::Record r;
    r.kind = trace::Kind::kCollective;
    r.begin = begin;
    r.end = trace::now();
    r.name = collective_name(kind_);
    r.detail = trace::intern_for_trace(state_->label());
    r.a[0] = parts_[p].rank;
    r.a[1] = static_cast<int64_t>(recv_bytes_[p]);
    r.a[2] = static_cast<int64_t>(sequence_);
    r.a[3] = met - begin;
    trace::emit(r);
  }

  bool cancelled() {
    std::lock_guard<std::mutex> lock(state_->mutex());
    return cancelled_;
  }

  // The first barrier: waits for every member within the group's timeout;
  // on timeout, fails the group naming the first member missing.
  Wait rendezvous(uint32_t p) {
    const auto deadline = state_->deadline_from_now();
    std::unique_lock<std::mutex> lock(state_->mutex());
    arrived_parts_[p] = true;
    Wait result = wait_locked(lock, deadline);
    if (result != Wait::kTimedOut) return result;
    uint32_t missing = 0;
    while (missing < participants_ && arrived_parts_[missing]) ++missing;
    const uint32_t rank = parts_[p].rank;
    const uint32_t late = parts_[missing < participants_ ? missing : p].rank;
    lock.unlock();
    state_->fail(static_cast<int32_t>(late), AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                 fmt::format("member {} ({}) did not reach {} within the group's timeout; member "
                             "{} ({}) waited for it",
                             late, state_->member_id(late), context_, rank, state_->member_id(rank)));
    return Wait::kTimedOut;
  }

  bool barrier() {
    std::unique_lock<std::mutex> lock(state_->mutex());
    return wait_locked(lock, std::chrono::steady_clock::time_point::max()) == Wait::kPassed;
  }

  Wait wait_locked(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline) {
    if (cancelled_) return Wait::kCancelled;
    if (state_->aborted_locked()) return Wait::kAborted;
    const uint64_t generation = generation_;
    if (++arrived_ == participants_) {
      arrived_ = 0;
      ++generation_;
      lock.unlock();
      state_->changed().notify_all();
      return Wait::kPassed;
    }
    std::condition_variable& changed = state_->changed();
    while (generation_ == generation) {
      if (cancelled_) return Wait::kCancelled;
      if (state_->aborted_locked()) return Wait::kAborted;
      if (deadline == std::chrono::steady_clock::time_point::max()) {
        changed.wait(lock);
      } else if (changed.wait_until(lock, deadline) == std::cv_status::timeout &&
                 generation_ == generation && !state_->aborted_locked() && !cancelled_) {
        return Wait::kTimedOut;
      }
    }
    return Wait::kPassed;
  }

  uint32_t left(uint32_t p) const { return (p + participants_ - 1) % participants_; }
  uint64_t block_elements(uint32_t b) const { return blocks_[b + 1] - blocks_[b]; }

  bool algorithm(uint32_t p) {
    switch (kind_) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kReduceScatter:
        return reduce_in_rank_order(p);
      case CollectiveKind::kAllGather: {
        Part& me = parts_[p];
        std::byte* mine = me.recv + blocks_[p] * element_;
        if (mine != me.send) std::memmove(mine, me.send, block_elements(p) * element_);
        return barrier() && gather_ring(p);
      }
      case CollectiveKind::kBroadcast: {
        Part& me = parts_[p];
        const Part& root = parts_[root_];
        const uint64_t bytes = block_elements(0) * element_;
        if (bytes != 0 && me.recv != root.send) std::memcpy(me.recv, root.send, bytes);
        return barrier();
      }
      case CollectiveKind::kSendRecv:
        for (const Copy& copy : copies_) {
          if (copy.dst_part == p && copy.bytes != 0) std::memcpy(copy.dst, copy.src, copy.bytes);
        }
        return barrier();
    }
    return false;
  }

  // Reductions (see the top of the file). Member p reduces block p of every
  // member's send buffer in rank order, a slice at a time through its
  // partial-sum buffer, and writes each slice's result at its place in its
  // own receive buffer: nobody else reads block p of member p's send buffer,
  // so in place this overwrites only what p alone has read. After a barrier
  // (every send buffer read), an all-reduce copies the other members'
  // blocks from their receive buffers; a last barrier keeps every member
  // until nobody reads its buffers any more.
  bool reduce_in_rank_order(uint32_t p) {
    const uint32_t n = participants_;
    Part& me = parts_[p];
    const bool all = kind_ == CollectiveKind::kAllReduce;
    if (n == 1) {
      const uint64_t bytes = block_elements(0) * element_;
      if (bytes != 0 && me.recv != me.send) std::memmove(me.recv, me.send, bytes);
      return true;
    }
    if (direct_) {
      // Up to kDirectBytes: member p reduces what it receives (the whole
      // vector, or block p) itself, reading every member's send buffer in
      // rank order, the same additions in the same order as the blocks take;
      // after one barrier it copies the result out, and reads nobody's
      // buffers any more. Two barriers (the rendezvous and this one), where
      // the blocks take three.
      const uint64_t from = all ? 0 : blocks_[p];
      const uint64_t count = all ? blocks_[n] : block_elements(p);
      if (count != 0) {
        const uint64_t at = from * element_;
        reduce_(me.scratch, parts_[0].send + at, parts_[1].send + at, count);
        for (uint32_t r = 2; r < n; ++r) reduce_(me.scratch, me.scratch, parts_[r].send + at, count);
      }
      if (!barrier()) return false;
      if (count != 0) std::memcpy(me.recv, me.scratch, count * element_);
      return true;
    }
    const uint64_t out_base = all ? 0 : blocks_[p];
    for (uint64_t lo = blocks_[p]; lo < blocks_[p + 1]; lo += slice_) {
      const uint64_t count = std::min(slice_, blocks_[p + 1] - lo);
      const uint64_t at = lo * element_;
      reduce_(me.scratch, parts_[0].send + at, parts_[1].send + at, count);
      for (uint32_t r = 2; r < n; ++r) reduce_(me.scratch, me.scratch, parts_[r].send + at, count);
      std::memcpy(me.recv + (lo - out_base) * element_, me.scratch, count * element_);
    }
    if (!barrier()) return false;
    if (all) {
      for (uint32_t b = 0; b < n; ++b) {
        const uint64_t bytes = block_elements(b) * element_;
        if (b == p || bytes == 0) continue;
        const uint64_t at = blocks_[b] * element_;
        std::memcpy(me.recv + at, parts_[b].recv + at, bytes);
      }
    }
    return barrier();
  }

  // The all-gather ring over the receive buffers: each step, member p copies
  // the block its left neighbour completed in the step before.
  bool gather_ring(uint32_t p) {
    const uint32_t n = participants_;
    Part& me = parts_[p];
    const Part& from = parts_[left(p)];
    for (uint32_t s = 0; s + 1 < n; ++s) {
      const uint32_t b = (p + 2 * n - 1 - s) % n;
      const uint64_t bytes = block_elements(b) * element_;
      if (bytes != 0) {
        std::memcpy(me.recv + blocks_[b] * element_, from.recv + blocks_[b] * element_, bytes);
      }
      if (!barrier()) return false;
    }
    return true;
  }

  const std::shared_ptr<GroupState> state_;
  const CollectiveKind kind_;
  const std::string context_;  // "all_reduce #3"
  const uint64_t sequence_;
  const uint64_t element_;
  const ReduceFn reduce_;
  const uint32_t root_;
  const uint32_t participants_;
  std::vector<Part> parts_;
  std::vector<uint64_t> recv_bytes_;  // per part, for traces
  std::vector<Copy> copies_;
  std::vector<std::vector<BufferRef>> kept_;  // per part
  std::vector<uint64_t> blocks_;
  uint64_t slice_ = 1;
  uint64_t slot_bytes_ = 0;
  bool direct_ = false;
  std::unique_ptr<std::byte[]> scratch_;

  // Under the group state's lock.
  std::vector<bool> arrived_parts_;
  uint32_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool cancelled_ = false;
};

// What one member's host function gets.
struct Ticket {
  std::shared_ptr<CpuOp> op;
  uint32_t part;
};

axrt_status_t run_ticket(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<Ticket> ticket(static_cast<Ticket*>(user_data));
  return ticket->op->run(ticket->part, stream_status);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::shared_ptr<GroupState> state) : state_(std::move(state)) {}

  const char* name() const noexcept override { return "cpu"; }

  axrt_status_t enqueue(const Collective& c) override {
    auto op = std::make_shared<CpuOp>(state_, c);
    AXRT_RETURN_IF_ERROR(op->prepare(c));
    std::vector<std::unique_ptr<Ticket>> tickets;
    tickets.reserve(c.parts.size());
    for (uint32_t p = 0; p < c.parts.size(); ++p) tickets.push_back(std::make_unique<Ticket>(Ticket{op, p}));
    for (uint32_t p = 0; p < c.parts.size(); ++p) {
      axrt_status_t status = axrt_stream_launch_host_func(c.parts[p].stream, run_ticket, tickets[p].get());
      if (status) {
        op->cancel();
        return status;
      }
      tickets[p].release();  // the host function owns it now
    }
    return nullptr;
  }

  axrt_status_t enqueue_part(const Collective& c, uint32_t rank,
                             std::shared_ptr<void>* shared) override {
    std::shared_ptr<CpuOp> op = std::static_pointer_cast<CpuOp>(*shared);
    if (!op) {
      op = std::make_shared<CpuOp>(state_, c);
      op->layout(c);
      *shared = op;
    }
    axrt_status_t status = op->bind(rank, c.parts[rank]);
    std::unique_ptr<Ticket> ticket;
    if (status == nullptr) {
      ticket = std::make_unique<Ticket>(Ticket{op, rank});
      status = axrt_stream_launch_host_func(c.parts[rank].stream, run_ticket, ticket.get());
    }
    if (status == nullptr) {
      ticket.release();  // the host function owns it now
      return nullptr;
    }
    // The members that queued theirs would wait for this one: they end now.
    state_->fail(static_cast<int32_t>(rank), axrt_status_code(status),
                 fmt::format("member {} ({}) could not queue its part of {} #{}: {}", rank,
                             state_->member_id(rank), collective_name(c.kind), c.sequence,
                             axrt_status_message(status)));
    return status;
  }

  // Waiting members wake through the group state's condition variable,
  // and queued ones find the group aborted when they start.
  void abort() noexcept override {}

 private:
  std::shared_ptr<GroupState> state_;
};

}  // namespace

axrt_status_t make_cpu_backend(std::shared_ptr<GroupState> state,
                               const std::vector<axrt_device_t>& devices,
                               std::unique_ptr<Backend>* out) {
  for (size_t r = 0; r < devices.size(); ++r) {
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    AXRT_RETURN_IF_ERROR(axrt_device_query_properties(devices[r], &properties));
    if (properties.type != AXRT_DEVICE_TYPE_CPU) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "axrt_group_create: the cpu backend runs on CPU devices, and member {} is "
                         "{} (a {} device)",
                         r, properties.id, properties.driver);
    }
  }
  *out = std::make_unique<CpuBackend>(std::move(state));
  return nullptr;
}

}  // namespace axrt::group
