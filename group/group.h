// Device groups behind include/axrt/group.h: the group (its members, its
// failure state, the checks every collective passes) and the backends that
// queue the work (group/cpu_backend.cc, group/nccl_backend.cc). A client of
// the public C API inside libaxrt, like the serving engine.
#ifndef AXRT_GROUP_GROUP_H_
#define AXRT_GROUP_GROUP_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "axrt/group.h"
#include "base/status.h"

namespace axrt::group {

enum class CollectiveKind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSendRecv };

// "all_reduce", ...
const char* collective_name(CollectiveKind kind) noexcept;

// The deadline of a wait of `ns` nanoseconds that starts now;
// time_point::max() when it reaches past what a time point holds.
std::chrono::steady_clock::time_point deadline_after(uint64_t ns) noexcept;

// A buffer reference the collective holds until its work ran.
class BufferRef {
 public:
  BufferRef() = default;
  explicit BufferRef(axrt_buffer_t buffer) noexcept;  // retains
  BufferRef(const BufferRef&) = delete;
  BufferRef& operator=(const BufferRef&) = delete;
  BufferRef(BufferRef&& other) noexcept;
  BufferRef& operator=(BufferRef&& other) noexcept;
  ~BufferRef();
  axrt_buffer_t get() const noexcept { return buffer_; }

 private:
  axrt_buffer_t buffer_ = nullptr;
};

// One member's part of a checked collective: byte ranges the group has
// checked against the buffers (a null buffer has no range).
struct MemberPart {
  uint32_t rank = 0;
  axrt_stream_t stream = nullptr;  // borrowed while the collective is queued
  axrt_buffer_t send = nullptr;
  uint64_t send_offset = 0;
  uint64_t send_bytes = 0;
  axrt_buffer_t recv = nullptr;
  uint64_t recv_offset = 0;
  uint64_t recv_bytes = 0;
};

// A send/recv pair, as indices into Collective::parts.
struct TransferPart {
  uint32_t src_part = 0;
  uint32_t dst_part = 0;
  axrt_buffer_t src_buffer = nullptr;  // borrowed while the transfer is queued
  axrt_buffer_t dst_buffer = nullptr;
  uint64_t src_offset = 0;  // bytes into the part's buffer
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
};

// A collective the group checked, for a backend to queue.
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint64_t sequence = 0;  // the group's n-th collective, from 1
  uint64_t count = 0;     // elements, as the API function takes it (send/recv: unused)
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  axrt_reduce_op_t op = AXRT_REDUCE_SUM;
  uint32_t root = 0;
  // Every member in rank order; for send/recv, the ranks the transfers
  // name, in rank order, each once, with no buffers (the transfers hold
  // them).
  std::vector<MemberPart> parts;
  std::vector<TransferPart> transfers;  // send/recv only
};

// What a group shares with the work it queued, which may outlive the group:
// its names and its failure.
class GroupState {
 public:
  GroupState(std::string label, std::vector<std::string> member_ids, uint64_t timeout_ns);

  const std::string& label() const noexcept { return label_; }
  uint32_t size() const noexcept { return static_cast<uint32_t>(member_ids_.size()); }
  const std::string& member_id(uint32_t rank) const noexcept { return member_ids_[rank]; }
  // The deadline of a wait that starts now; time_point::max() for none.
  std::chrono::steady_clock::time_point deadline_from_now() const noexcept;

  // Records the group's first failure: member `rank` (-1: none) failed with
  // `code` and `message`; later calls change nothing. Wakes every waiter
  // and tells the backend's abort hook (set_abort_hook). Returns whether
  // this call was the first.
  bool fail(int32_t rank, axrt_status_code_t code, std::string_view message) noexcept;
  bool aborted() const noexcept;
  // ABORTED (or `code`) naming the group and its first failure, for
  // `context` ("all_reduce #3"). Only after aborted() is true.
  axrt_status_t aborted_status(const char* context,
                               axrt_status_code_t code = AXRT_STATUS_CODE_ABORTED) const noexcept;
  void fill_info(axrt_group_info_t* out) const noexcept;
  // Called once, by the first fail(), outside the lock. Replacing the hook
  // waits while it runs, so that a group clearing it before destroying its
  // backend never races the hook.
  void set_abort_hook(std::function<void()> hook);

  // The lock and condition variable the backends' waits use, so that an
  // abort wakes them all.
  std::mutex& mutex() noexcept { return mutex_; }
  std::condition_variable& changed() noexcept { return changed_; }
  bool aborted_locked() const noexcept { return aborted_; }

 private:
  const std::string label_;
  const std::vector<std::string> member_ids_;
  const uint64_t timeout_ns_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool aborted_ = false;
  int32_t failed_rank_ = -1;
  axrt_status_code_t failure_code_ = AXRT_STATUS_CODE_OK;
  std::string failure_;
  std::function<void()> abort_hook_;
  bool hook_running_ = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const noexcept = 0;
  // Queues `collective` on its parts' streams. Checked already; called
  // under the group's enqueue lock. An error means nothing ran: work queued
  // on some members before the error must complete without doing anything.
  // Where a library may have queued part of it (NCCL failing inside a group
  // call), the backend fails the group with the error too, so that the
  // abort ends that part.
  virtual axrt_status_t enqueue(const Collective& collective) = 0;
  // Queues member `rank`'s part of `collective` on that part's stream
  // (axrt_group_enqueue_part): `collective.parts` has one entry per
  // member, in rank order, only `parts[rank]` filled. `shared` is what the
  // backend keeps of the collective between its members' parts: null at
  // the first part, which sets it. Checked already; called under the
  // group's enqueue lock. An error means this part did not queue; the
  // backend fails the group with it, so that the parts queued end.
  virtual axrt_status_t enqueue_part(const Collective& collective, uint32_t rank,
                                     std::shared_ptr<void>* shared) = 0;
  // The group aborted (GroupState::fail): make queued and waiting work fail
  // at once. Any thread; may be called while enqueue() runs.
  virtual void abort() noexcept = 0;
};

// Make the "cpu" and the "nccl" backend for `devices` (the group checked
// them: distinct, of one instance and one driver), or an error saying why
// they cannot serve them.
axrt_status_t make_cpu_backend(std::shared_ptr<GroupState> state,
                               const std::vector<axrt_device_t>& devices,
                               std::unique_ptr<Backend>* out);
axrt_status_t make_nccl_backend(std::shared_ptr<GroupState> state,
                                const std::vector<axrt_device_t>& devices,
                                std::unique_ptr<Backend>* out);
// Across processes (group/process_backend.cc joins): NCCL's unique id, made
// by rank 0, as bytes; and this process's member `rank` of `size` on
// `device`, through ncclCommInitRank with that id.
axrt_status_t make_nccl_unique_id(std::string* out);
axrt_status_t make_nccl_member_backend(std::shared_ptr<GroupState> state, axrt_device_t device,
                                       uint32_t rank, uint32_t size,
                                       const std::string& unique_id,
                                       std::unique_ptr<Backend>* out);

class Group {
 public:
  static axrt_status_t create(const axrt_device_t* devices, size_t count,
                              const axrt_group_options_t& options, std::unique_ptr<Group>* out);
  // This process's member of a group across processes (axrt_group_join).
  static axrt_status_t join(const char* id, uint32_t size, uint32_t rank, axrt_device_t device,
                            const axrt_group_join_options_t& options, std::unique_ptr<Group>* out);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  uint32_t size() const noexcept { return state_->size(); }
  // Null for a member in another process.
  axrt_device_t device(uint32_t rank) const noexcept { return devices_[rank]; }
  // This process's rank in a group across processes; -1 for a group of
  // one process.
  int32_t local_rank() const noexcept { return local_rank_; }
  void info(axrt_group_info_t* out) const noexcept;
  axrt_status_t abort(int32_t rank, const char* reason);

  // The API functions' work, named by `function` in messages.
  axrt_status_t collective(const char* function, CollectiveKind kind,
                           const axrt_collective_member_t* members, uint64_t count,
                           axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root);
  axrt_status_t send_recv(const char* function, const axrt_group_transfer_t* transfers,
                          size_t transfer_count);
  // One member's part (axrt_group_enqueue_part).
  axrt_status_t part(const char* function, size_t rank, CollectiveKind kind,
                     const axrt_collective_member_t* member, uint64_t count, axrt_dtype_t dtype,
                     axrt_reduce_op_t op, size_t root);

 private:
  // A collective some members have queued their parts of and others not.
  struct Pending {
    Collective collective;  // its shape, and the parts queued so far
    uint32_t first_rank = 0;
    uint32_t queued = 0;
    std::shared_ptr<void> backend;  // Backend::enqueue_part's `shared`
  };

  Group() = default;
  // The checks every collective's shape passes; writes `count` elements' bytes.
  axrt_status_t check_shape(const char* function, CollectiveKind kind, uint64_t count,
                            axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root,
                            uint64_t* out_bytes) const;
  // Member `rank`'s part of a collective of `bytes` per member's block.
  axrt_status_t check_member(const char* function, CollectiveKind kind, uint32_t rank,
                             const axrt_collective_member_t& member, uint64_t bytes, size_t root,
                             MemberPart* part) const;
  axrt_status_t check_part(const char* function, uint32_t rank, axrt_stream_t stream,
                           MemberPart* part) const;
  // Checks that `bytes` at `offset` of `buffer` lie in a live buffer of
  // member `rank`'s device; writes their device address when asked.
  axrt_status_t check_range(const char* function, uint32_t rank, const char* what,
                            axrt_buffer_t buffer, uint64_t offset, uint64_t bytes,
                            uint64_t* out_address = nullptr) const;
  axrt_status_t submit(Collective& collective);

  std::vector<axrt_device_t> devices_;  // retained; null for members in other processes
  int32_t local_rank_ = -1;
  std::shared_ptr<GroupState> state_;
  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  mutable std::mutex enqueue_mutex_;
  // Under enqueue_mutex_: the latest collective any member queued a part
  // of; each member's latest; those some members have not queued yet.
  uint64_t sequence_ = 0;
  std::vector<uint64_t> member_sequence_;
  std::map<uint64_t, Pending> pending_;
};

}  // namespace axrt::group

#endif  // AXRT_GROUP_GROUP_H_
