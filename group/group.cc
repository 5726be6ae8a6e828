// Groups: members, failure state and the checks of every collective.
#include "group/group.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "axrt/device.h"
#include "axrt/memory.h"
#include "axrt/stream.h"
#include "base/dtype.h"
#include "group/process_group.h"

namespace axrt::group {
namespace {

constexpr uint64_t kDefaultTimeoutNs = 300ull * 1000 * 1000 * 1000;
constexpr uint64_t kDefaultRendezvousTimeoutNs = 60ull * 1000 * 1000 * 1000;
constexpr uint64_t kDefaultHeartbeatIntervalNs = 1000ull * 1000 * 1000;
constexpr uint64_t kDefaultHeartbeatTimeoutNs = 10ull * 1000 * 1000 * 1000;

// Copies `text` into a fixed char array, cut to fit and NUL-terminated.
template <size_t N>
void copy_text(char (&out)[N], const std::string& text) noexcept {
  const size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

bool supported_dtype(axrt_dtype_t dtype) noexcept {
  switch (dtype) {
    case AXRT_DTYPE_INT8:
    case AXRT_DTYPE_UINT8:
    case AXRT_DTYPE_INT32:
    case AXRT_DTYPE_UINT32:
    case AXRT_DTYPE_INT64:
    case AXRT_DTYPE_UINT64:
    case AXRT_DTYPE_FLOAT16:
    case AXRT_DTYPE_BFLOAT16:
    case AXRT_DTYPE_FLOAT32:
    case AXRT_DTYPE_FLOAT64:
      return true;
    default:
      return false;
  }
}

bool overlap(uint64_t a, uint64_t a_bytes, uint64_t b, uint64_t b_bytes) noexcept {
  return a_bytes != 0 && b_bytes != 0 && a < b + b_bytes && b < a + a_bytes;
}


}  // namespace

const char* collective_name(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kSendRecv: return "send_recv";
  }
  return "collective";
}

// ---------------------------------------------------------------------------
// BufferRef

BufferRef::BufferRef(axrt_buffer_t buffer) noexcept : buffer_(buffer) {
  axrt_buffer_retain(buffer_);
}
BufferRef::BufferRef(BufferRef&& other) noexcept : buffer_(std::exchange(other.buffer_, nullptr)) {}
BufferRef& BufferRef::operator=(BufferRef&& other) noexcept {
  std::swap(buffer_, other.buffer_);
  return *this;
}
BufferRef::~BufferRef() { axrt_buffer_release(buffer_); }

// ---------------------------------------------------------------------------
// GroupState

GroupState::GroupState(std::string label, std::vector<std::string> member_ids,
                       uint64_t timeout_ns)
    : label_(std::move(label)), member_ids_(std::move(member_ids)), timeout_ns_(timeout_ns) {}

std::chrono::steady_clock::time_point deadline_after(uint64_t ns) noexcept {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::time_point::max() - now);
  if (ns >= static_cast<uint64_t>(room.count())) return Clock::time_point::max();
  return now + std::chrono::nanoseconds(ns);
}

std::chrono::steady_clock::time_point GroupState::deadline_from_now() const noexcept {
  return deadline_after(timeout_ns_);
}

bool GroupState::fail(int32_t rank, axrt_status_code_t code, std::string_view message) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return false;
    aborted_ = true;
    failed_rank_ = rank;
    failure_code_ = code;
    try {
      failure_.assign(message);
    } catch (...) {
      failure_.clear();  // the code and rank still tell what happened
    }
    hook = std::move(abort_hook_);
    hook_running_ = static_cast<bool>(hook);
  }
  changed_.notify_all();
  if (hook) {
    hook();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hook_running_ = false;
    }
    changed_.notify_all();
  }
  return true;
}

bool GroupState::aborted() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

axrt_status_t GroupState::aborted_status(const char* context, axrt_status_code_t code) const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return make_status(code, "group '{}' aborted before {} completed: {}", label_, context, failure_);
}

void GroupState::fill_info(axrt_group_info_t* out) const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  out->state = aborted_ ? AXRT_GROUP_STATE_ABORTED : AXRT_GROUP_STATE_ACTIVE;
  out->failed_rank = failed_rank_;
  out->failure_code = failure_code_;
  copy_text(out->failure, failure_);
}

void GroupState::set_abort_hook(std::function<void()> hook) {
  std::unique_lock<std::mutex> lock(mutex_);
  // A hook running now may use what the caller is about to destroy.
  changed_.wait(lock, [&] { return !hook_running_; });
  abort_hook_ = std::move(hook);
}

// ---------------------------------------------------------------------------
// Group

axrt_status_t Group::create(const axrt_device_t* devices, size_t count,
                            const axrt_group_options_t& options, std::unique_ptr<Group>* out) {
  constexpr const char* kFunction = "axrt_group_create";
  if (count == 0 || count > std::numeric_limits<int32_t>::max()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: a group needs at least one device (count is {})", kFunction, count);
  }
  std::unique_ptr<Group> group(new Group());
  std::vector<std::string> ids;
  std::string driver;
  for (size_t i = 0; i < count; ++i) {
    if (devices[i] == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: devices[{}] is NULL", kFunction, i);
    }
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    AXRT_RETURN_IF_ERROR(axrt_device_query_properties(devices[i], &properties));
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: {} is both member {} and member {}; a group's devices are distinct",
                           kFunction, properties.id, j, i);
      }
    }
    // Devices of one instance: the peer query refuses others.
    if (i > 0) {
      axrt_device_peer_info_t peer = AXRT_DEVICE_PEER_INFO_INIT;
      axrt_status_t status = axrt_device_query_peer(devices[0], devices[i], &peer);
      if (status) {
        const axrt_status_code_t code = axrt_status_code(status);
        const std::string why = axrt_status_message(status);
        status_destroy(status);
        return make_status(code, "{}: member {} ({}) cannot join member 0 ({}): {}", kFunction, i,
                           properties.id, ids[0], why);
      }
    }
    if (i == 0) {
      driver = properties.driver;
    } else if (driver != properties.driver) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "{}: member 0 ({}) is a {} device and member {} ({}) a {} device; a group's "
                         "members are devices of one driver",
                         kFunction, ids[0], driver, i, properties.id, properties.driver);
    }
    ids.emplace_back(properties.id);
    axrt_device_retain(devices[i]);
    group->devices_.push_back(devices[i]);
  }
  std::string backend = options.backend != nullptr ? options.backend : "";
  if (backend.empty()) backend = driver == "cuda" ? "nccl" : "cpu";
  const uint64_t timeout = options.timeout_ns == 0 ? kDefaultTimeoutNs : options.timeout_ns;
  group->state_ = std::make_shared<GroupState>(
      options.label != nullptr && options.label[0] != '\0' ? options.label : "group",
      std::move(ids), timeout);
  if (backend == "cpu") {
    AXRT_RETURN_IF_ERROR(make_cpu_backend(group->state_, group->devices_, &group->backend_));
  } else if (backend == "nccl") {
    AXRT_RETURN_IF_ERROR(make_nccl_backend(group->state_, group->devices_, &group->backend_));
  } else {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: unknown backend '{}' (the backends are \"cpu\" and \"nccl\")", kFunction,
                       backend);
  }
  group->backend_name_ = group->backend_->name();
  group->member_sequence_.assign(count, 0);
  Backend* raw = group->backend_.get();
  group->state_->set_abort_hook([raw] { raw->abort(); });
  *out = std::move(group);
  return nullptr;
}

axrt_status_t Group::join(const char* id, uint32_t size, uint32_t rank, axrt_device_t device,
                          const axrt_group_join_options_t& options, std::unique_ptr<Group>* out) {
  constexpr const char* kFunction = "axrt_group_join";
  if (id == nullptr || id[0] == '\0') {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: id is empty (tcp://HOST:PORT[/NAME] or file://DIR[#NAME])", kFunction);
  }
  if (size == 0 || size > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) || rank >= size) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: rank {} of a world of {} members: the size is 1 or more and the rank "
                       "below it",
                       kFunction, rank, size);
  }
  if (device == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: device is NULL", kFunction);
  }
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  AXRT_RETURN_IF_ERROR(axrt_device_query_properties(device, &properties));
  std::string backend = options.backend != nullptr ? options.backend : "";
  if (backend.empty()) backend = std::string(properties.driver) == "cuda" ? "nccl" : "cpu";
  if (backend != "cpu" && backend != "nccl") {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: unknown backend '{}' (the backends are \"cpu\" and \"nccl\")",
                       kFunction, backend);
  }
  const bool nccl = backend == "nccl";
  if (nccl != (properties.type == AXRT_DEVICE_TYPE_CUDA)) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{}: the {} backend runs on {} devices, and {} is a {} device", kFunction,
                       backend, nccl ? "CUDA" : "CPU", properties.id, properties.driver);
  }
  JoinRequest request;
  request.id = id;
  request.size = size;
  request.rank = rank;
  request.device_id = properties.id;
  request.label = options.label != nullptr && options.label[0] != '\0' ? options.label : id;
  request.hostname = options.hostname != nullptr ? options.hostname : "";
  request.timeout_ns = options.timeout_ns == 0 ? kDefaultTimeoutNs : options.timeout_ns;
  request.rendezvous_timeout_ns =
      options.rendezvous_timeout_ns == 0 ? kDefaultRendezvousTimeoutNs : options.rendezvous_timeout_ns;
  request.heartbeat_interval_ns = options.heartbeat_interval_ns == 0 ? kDefaultHeartbeatIntervalNs
                                                                      : options.heartbeat_interval_ns;
  request.heartbeat_timeout_ns =
      options.heartbeat_timeout_ns == 0 ? kDefaultHeartbeatTimeoutNs : options.heartbeat_timeout_ns;
  std::unique_ptr<Group> group(new Group());
  if (nccl) {
    AXRT_RETURN_IF_ERROR(join_nccl_group(request, device, &group->state_, &group->backend_));
  } else {
    AXRT_RETURN_IF_ERROR(join_process_group(request, &group->state_, &group->backend_));
  }
  group->devices_.assign(size, nullptr);
  axrt_device_retain(device);
  group->devices_[rank] = device;
  group->local_rank_ = static_cast<int32_t>(rank);
  group->backend_name_ = group->backend_->name();
  group->member_sequence_.assign(size, 0);
  Backend* raw = group->backend_.get();
  group->state_->set_abort_hook([raw] { raw->abort(); });
  *out = std::move(group);
  return nullptr;
}

Group::~Group() {
  if (state_ && !pending_.empty()) {
    const Pending& oldest = pending_.begin()->second;
    state_->fail(-1, AXRT_STATUS_CODE_ABORTED,
                 fmt::format("the group was destroyed before every member queued its part of {} #{}",
                             collective_name(oldest.collective.kind), oldest.collective.sequence));
  }
  if (state_) state_->set_abort_hook(nullptr);
  backend_.reset();
  for (axrt_device_t device : devices_) {
    if (device != nullptr) axrt_device_release(device);
  }
}

void Group::info(axrt_group_info_t* out) const noexcept {
  copy_text(out->label, state_->label());
  copy_text(out->backend, backend_name_);
  out->size = size();
  out->rank = local_rank_;
  state_->fill_info(out);
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  out->collectives = sequence_;
}

axrt_status_t Group::abort(int32_t rank, const char* reason) {
  if (rank < -1 || (rank >= 0 && static_cast<uint32_t>(rank) >= size())) {
    return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "axrt_group_abort: rank {} is not a member of group '{}' (ranks 0 to {}, or "
                       "-1 for none)",
                       rank, state_->label(), size() - 1);
  }
  const std::string why = reason != nullptr && reason[0] != '\0' ? reason : "aborted by the application";
  const std::string message =
      rank >= 0 ? fmt::format("member {} ({}) failed: {}", rank,
                              state_->member_id(static_cast<uint32_t>(rank)), why)
                : why;
  state_->fail(rank, AXRT_STATUS_CODE_ABORTED, message);
  return nullptr;
}

axrt_status_t Group::check_range(const char* function, uint32_t rank, const char* what,
                                 axrt_buffer_t buffer, uint64_t offset, uint64_t bytes,
                                 uint64_t* out_address) const {
  if (buffer == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: member {}'s {} buffer is NULL",
                       function, rank, what);
  }
  axrt_device_t device = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_buffer_get_device(buffer, &device));
  axrt_device_release(device);  // only compared
  if (device != devices_[rank]) {
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    axrt_status_t status = axrt_device_query_properties(device, &properties);
    if (status) status_destroy(status);
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: member {}'s {} buffer is on {}, not on the member's device {}", function,
                       rank, what, properties.id, state_->member_id(rank));
  }
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_buffer_query_info(buffer, &info));
  if (info.deallocated) {
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "{}: member {}'s {} buffer was deallocated", function, rank, what);
  }
  if (offset > info.size || bytes > info.size - offset) {
    return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "{}: member {}'s {} range ({} bytes at offset {}) does not fit its buffer of "
                       "{} bytes",
                       function, rank, what, bytes, offset, info.size);
  }
  if (out_address != nullptr) *out_address = info.device_address + offset;
  return nullptr;
}

axrt_status_t Group::check_part(const char* function, uint32_t rank, axrt_stream_t stream,
                                MemberPart* part) const {
  part->rank = rank;
  if (stream == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: member {}'s stream is NULL",
                       function, rank);
  }
  axrt_device_t device = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_stream_get_device(stream, &device));
  axrt_device_release(device);  // only compared
  if (device != devices_[rank]) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: member {}'s stream is not a stream of the member's device {}", function,
                       rank, state_->member_id(rank));
  }
  part->stream = stream;
  return nullptr;
}

axrt_status_t Group::check_shape(const char* function, CollectiveKind kind, uint64_t count,
                                 axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root,
                                 uint64_t* out_bytes) const {
  if (!supported_dtype(dtype)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: element type {} ({}) is not one collectives take (int8, uint8, int32, "
                       "uint32, int64, uint64, f16, bf16, f32, f64)",
                       function, dtype_name(dtype), dtype);
  }
  if (op > AXRT_REDUCE_MIN) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: {} is not a reduction (AXRT_REDUCE_SUM, _MAX or _MIN)", function, op);
  }
  const uint32_t n = size();
  if (kind == CollectiveKind::kBroadcast && root >= n) {
    return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "{}: root {} is not a member of group '{}' ({} members)", function, root,
                       state_->label(), n);
  }
  const uint64_t element = dtype_bytes(dtype, 1);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / element / n;
  if (count > limit) {
    return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE, "{}: {} elements of {} overflow a byte count",
                       function, count, dtype_name(dtype));
  }
  *out_bytes = count * element;
  return nullptr;
}

axrt_status_t Group::check_member(const char* function, CollectiveKind kind, uint32_t r,
                                  const axrt_collective_member_t& m, uint64_t bytes, size_t root,
                                  MemberPart* part) const {
  const uint32_t n = size();
  AXRT_RETURN_IF_ERROR(check_part(function, r, m.stream, part));
  uint64_t send_bytes = bytes, recv_bytes = bytes;
  if (kind == CollectiveKind::kAllGather) recv_bytes = bytes * n;
  if (kind == CollectiveKind::kReduceScatter) send_bytes = bytes * n;
  const bool needs_send = kind != CollectiveKind::kBroadcast || r == root;
  uint64_t send_at = 0, recv_at = 0;
  if (needs_send) {
    AXRT_RETURN_IF_ERROR(
        check_range(function, r, "send", m.send_buffer, m.send_offset, send_bytes, &send_at));
    part->send = m.send_buffer;
    part->send_offset = m.send_offset;
    part->send_bytes = send_bytes;
  }
  AXRT_RETURN_IF_ERROR(
      check_range(function, r, "receive", m.recv_buffer, m.recv_offset, recv_bytes, &recv_at));
  part->recv = m.recv_buffer;
  part->recv_offset = m.recv_offset;
  part->recv_bytes = recv_bytes;
  if (!needs_send) return nullptr;
  // In place, or apart.
  bool in_place = false;
  switch (kind) {
    case CollectiveKind::kAllGather: in_place = send_at == recv_at + r * bytes; break;
    case CollectiveKind::kReduceScatter: in_place = recv_at == send_at + r * bytes; break;
    default: in_place = send_at == recv_at; break;
  }
  if (!in_place && overlap(send_at, send_bytes, recv_at, recv_bytes)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: member {}'s send and receive ranges overlap without being in place",
                       function, r);
  }
  return nullptr;
}

axrt_status_t Group::collective(const char* function, CollectiveKind kind,
                                const axrt_collective_member_t* members, uint64_t count,
                                axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root) {
  if (members == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: members is NULL", function);
  }
  // A member across processes passes its own entry only.
  if (local_rank_ >= 0) return part(function, static_cast<size_t>(local_rank_), kind, members, count, dtype, op, root);
  uint64_t bytes = 0;
  AXRT_RETURN_IF_ERROR(check_shape(function, kind, count, dtype, op, root, &bytes));
  const uint32_t n = size();
  Collective c;
  c.kind = kind;
  c.count = count;
  c.dtype = dtype;
  c.op = op;
  c.root = static_cast<uint32_t>(root);
  c.parts.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    AXRT_RETURN_IF_ERROR(check_member(function, kind, r, members[r], bytes, root, &c.parts[r]));
  }
  return submit(c);
}

namespace {

// "all_reduce of 4096 FLOAT32 (sum)", for a part that disagrees.
std::string describe_shape(const Collective& c) {
  std::string text = fmt::format("{} of {} {}", collective_name(c.kind), c.count, dtype_name(c.dtype));
  if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduceScatter) {
    static constexpr const char* kOps[] = {"sum", "max", "min"};
    text += fmt::format(" ({})", kOps[c.op]);
  }
  if (c.kind == CollectiveKind::kBroadcast) text += fmt::format(" from root {}", c.root);
  return text;
}

// Collective `sequence` of this shape, with one part per member of `n`
// (ranks set, nothing bound); the reduction and the root only where the
// kind has them.
Collective shape(CollectiveKind kind, uint64_t sequence, uint64_t count, axrt_dtype_t dtype,
                 axrt_reduce_op_t op, size_t root, uint32_t n) {
  Collective c;
  c.kind = kind;
  c.sequence = sequence;
  c.count = count;
  c.dtype = dtype;
  c.op = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter
             ? op
             : axrt_reduce_op_t{AXRT_REDUCE_SUM};
  c.root = kind == CollectiveKind::kBroadcast ? static_cast<uint32_t>(root) : 0;
  c.parts.resize(n);
  for (uint32_t m = 0; m < n; ++m) c.parts[m].rank = m;
  return c;
}

}  // namespace

axrt_status_t Group::part(const char* function, size_t rank, CollectiveKind kind,
                          const axrt_collective_member_t* member, uint64_t count,
                          axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root) {
  const uint32_t n = size();
  if (rank >= n) {
    return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "{}: rank {} is not a member of group '{}' ({} members)", function, rank,
                       state_->label(), n);
  }
  if (member == nullptr) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: member is NULL", function);
  }
  if (local_rank_ >= 0 && rank != static_cast<size_t>(local_rank_)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: member {} of group '{}' is in another process; this process is member "
                       "{} and queues its own part only",
                       function, rank, state_->label(), local_rank_);
  }
  uint64_t bytes = 0;
  AXRT_RETURN_IF_ERROR(check_shape(function, kind, count, dtype, op, root, &bytes));
  const uint32_t r = static_cast<uint32_t>(rank);
  MemberPart checked;
  AXRT_RETURN_IF_ERROR(check_member(function, kind, r, *member, bytes, root, &checked));

  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  const uint64_t sequence = member_sequence_[r] + 1;
  const std::string context = fmt::format("{} #{}", collective_name(kind), sequence);
  if (state_->aborted()) return state_->aborted_status(context.c_str());
  if (local_rank_ >= 0) {
    // The other members' parts are queued in their processes; the backend
    // meets them there.
    Collective c = shape(kind, sequence, count, dtype, op, root, n);
    c.parts[r] = checked;
    std::shared_ptr<void> unused;
    AXRT_RETURN_IF_ERROR(backend_->enqueue_part(c, r, &unused));
    member_sequence_[r] = sequence;
    sequence_ = sequence;
    return nullptr;
  }
  auto found = pending_.find(sequence);
  if (found == pending_.end()) {
    Pending fresh;
    fresh.collective = shape(kind, sequence, count, dtype, op, root, n);
    fresh.first_rank = r;
    found = pending_.emplace(sequence, std::move(fresh)).first;
  }
  Pending& pending = found->second;
  Collective& c = pending.collective;
  const bool same = c.kind == kind && c.count == count && c.dtype == dtype &&
                    (c.op == op || (kind != CollectiveKind::kAllReduce &&
                                    kind != CollectiveKind::kReduceScatter)) &&
                    (c.root == root || kind != CollectiveKind::kBroadcast);
  if (!same) {
    Collective mine = c;
    mine.kind = kind;
    mine.count = count;
    mine.dtype = dtype;
    mine.op = op;  // checked: a reduction
    mine.root = static_cast<uint32_t>(root);
    const std::string message = fmt::format(
        "member {} ({})'s part of collective #{} is {}, but member {} ({}) queued {}", r,
        state_->member_id(r), sequence, describe_shape(mine), pending.first_rank,
        state_->member_id(pending.first_rank), describe_shape(c));
    state_->fail(static_cast<int32_t>(r), AXRT_STATUS_CODE_INVALID_ARGUMENT, message);
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: group '{}': {}", function,
                       state_->label(), message);
  }
  c.parts[r] = checked;
  axrt_status_t status = backend_->enqueue_part(c, r, &pending.backend);
  c.parts[r] = MemberPart{};
  c.parts[r].rank = r;
  if (status != nullptr) return status;
  member_sequence_[r] = sequence;
  sequence_ = std::max(sequence_, sequence);
  if (++pending.queued == n) pending_.erase(found);
  return nullptr;
}

axrt_status_t Group::send_recv(const char* function, const axrt_group_transfer_t* transfers,
                               size_t transfer_count) {
  if (transfers == nullptr && transfer_count != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: transfers is NULL", function);
  }
  if (local_rank_ >= 0) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{}: group '{}' spans processes, and send/recv between processes is not "
                       "available; the collectives are",
                       function, state_->label());
  }
  const uint32_t n = size();
  Collective c;
  c.kind = CollectiveKind::kSendRecv;
  std::vector<int32_t> part_of(n, -1);
  std::vector<axrt_stream_t> stream_of(n, nullptr);
  // Parts in rank order: find the ranks first.
  for (size_t t = 0; t < transfer_count; ++t) {
    const axrt_group_transfer_t& x = transfers[t];
    if (x.src_rank >= n || x.dst_rank >= n) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "{}: transfer {} names rank {}, and group '{}' has {} members", function, t,
                         x.src_rank >= n ? x.src_rank : x.dst_rank, state_->label(), n);
    }
    if (x.src_rank == x.dst_rank) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: transfer {} sends from rank {} to itself", function, t, x.src_rank);
    }
    if (!supported_dtype(x.dtype)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: transfer {}'s element type {} ({}) is not one collectives take",
                         function, t, dtype_name(x.dtype), x.dtype);
    }
    for (auto [rank, stream] : {std::pair{x.src_rank, x.src_stream}, std::pair{x.dst_rank, x.dst_stream}}) {
      if (stream_of[rank] != nullptr && stream_of[rank] != stream) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: rank {} takes part on two streams; one call gives each rank one "
                           "stream",
                           function, rank);
      }
      stream_of[rank] = stream;
      part_of[rank] = 0;
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    if (part_of[r] < 0) continue;
    part_of[r] = static_cast<int32_t>(c.parts.size());
    MemberPart part;
    AXRT_RETURN_IF_ERROR(check_part(function, r, stream_of[r], &part));
    c.parts.push_back(part);
  }
  for (size_t t = 0; t < transfer_count; ++t) {
    const axrt_group_transfer_t& x = transfers[t];
    const uint64_t element = dtype_bytes(x.dtype, 1);
    if (x.count > std::numeric_limits<uint64_t>::max() / element) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE, "{}: transfer {}'s count overflows",
                         function, t);
    }
    const uint64_t bytes = x.count * element;
    const uint32_t src = static_cast<uint32_t>(x.src_rank), dst = static_cast<uint32_t>(x.dst_rank);
    AXRT_RETURN_IF_ERROR(check_range(function, src, "send", x.src_buffer, x.src_offset, bytes));
    AXRT_RETURN_IF_ERROR(check_range(function, dst, "receive", x.dst_buffer, x.dst_offset, bytes));
    TransferPart tp;
    tp.src_part = static_cast<uint32_t>(part_of[src]);
    tp.dst_part = static_cast<uint32_t>(part_of[dst]);
    tp.src_offset = x.src_offset;
    tp.dst_offset = x.dst_offset;
    tp.bytes = bytes;
    tp.count = x.count;
    tp.dtype = x.dtype;
    tp.src_buffer = x.src_buffer;
    tp.dst_buffer = x.dst_buffer;
    c.transfers.push_back(tp);
  }
  return submit(c);
}

axrt_status_t Group::submit(Collective& collective) {
  std::lock_guard<std::mutex> lock(enqueue_mutex_);
  collective.sequence = sequence_ + 1;
  if (state_->aborted()) {
    const std::string context = fmt::format("{} #{}", collective_name(collective.kind), collective.sequence);
    return state_->aborted_status(context.c_str());
  }
  if (!pending_.empty()) {
    const Pending& oldest = pending_.begin()->second;
    uint32_t missing = 0;
    while (missing < size() && member_sequence_[missing] >= oldest.collective.sequence) ++missing;
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "group '{}': member {} ({}) has not queued its part of {} #{}, which other "
                       "members queued alone; a collective of every member waits until it has",
                       state_->label(), missing, state_->member_id(missing),
                       collective_name(oldest.collective.kind), oldest.collective.sequence);
  }
  AXRT_RETURN_IF_ERROR(backend_->enqueue(collective));
  ++sequence_;
  std::fill(member_sequence_.begin(), member_sequence_.end(), sequence_);
  return nullptr;
}

}  // namespace axrt::group
