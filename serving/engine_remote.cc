// A tensor-parallel set spread over processes (docs/multi-device.md,
// "Serving across processes"): the head's engine sends each step's inputs
// to the other members through the set's group (serving/set_link.h), and
// each of them runs axrt_engine_follow, which receives them and runs its
// shard's step; the steps' collectives meet across the processes as within
// one. The scheduler, the block manager and sampling run once, at the head.
#include <string>
#include <utility>

#include <fmt/format.h>

#include "axrt/axrt.h"
#include "base/options_struct.h"
#include "base/status.h"
#include "serving/contract.h"
#include "serving/engine.h"
#include "serving/set_link.h"

namespace axrt::serving {

// ---------------------------------------------------------------------------
// SetLink

SetLink::~SetLink() {
  axrt_buffer_release(header_buffer_);
  axrt_buffer_release(payload_buffer_);
}

axrt_status_t SetLink::reserve(uint64_t bytes) {
  if (header_buffer_ == nullptr) {
    AXRT_RETURN_IF_ERROR(axrt_buffer_allocate(device_, sizeof(SetHeader), nullptr, &header_buffer_));
  }
  if (bytes <= payload_capacity_) return nullptr;
  // Grows by half again, so that steps of slowly growing sizes reallocate
  // rarely; the stream was synchronized, so the old buffer is unused.
  const uint64_t capacity = std::max(bytes, payload_capacity_ + payload_capacity_ / 2);
  axrt_buffer_t fresh = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_buffer_allocate(device_, capacity, nullptr, &fresh));
  axrt_buffer_release(payload_buffer_);
  payload_buffer_ = fresh;
  payload_capacity_ = capacity;
  return nullptr;
}

axrt_status_t SetLink::broadcast(axrt_stream_t stream, axrt_buffer_t buffer, uint64_t count,
                                 axrt_dtype_t dtype) {
  axrt_collective_member_t me = {stream, buffer, 0, buffer, 0};
  return axrt_group_broadcast(group_, &me, count, dtype, 0);
}

axrt_status_t SetLink::send(axrt_stream_t stream, const SetHeader& header,
                            std::vector<int32_t> payload) {
  AXRT_RETURN_IF_ERROR(reserve(payload.size() * 4));
  header_ = header;
  payload_ = std::move(payload);
  AXRT_RETURN_IF_ERROR(
      axrt_stream_copy_from_host(stream, header_.words, header_buffer_, 0, sizeof(header_.words)));
  AXRT_RETURN_IF_ERROR(broadcast(stream, header_buffer_, 16, AXRT_DTYPE_INT64));
  if (payload_.empty()) return nullptr;
  AXRT_RETURN_IF_ERROR(
      axrt_stream_copy_from_host(stream, payload_.data(), payload_buffer_, 0, payload_.size() * 4));
  return broadcast(stream, payload_buffer_, payload_.size(), AXRT_DTYPE_INT32);
}

axrt_status_t SetLink::receive(axrt_stream_t stream, SetHeader* header,
                               const std::vector<int32_t>** payload) {
  AXRT_RETURN_IF_ERROR(reserve(0));
  AXRT_RETURN_IF_ERROR(broadcast(stream, header_buffer_, 16, AXRT_DTYPE_INT64));
  AXRT_RETURN_IF_ERROR(
      axrt_stream_copy_to_host(stream, header_buffer_, 0, header_.words, sizeof(header_.words)));
  AXRT_RETURN_IF_ERROR(axrt_stream_synchronize(stream));
  if (header_.magic() != SetHeader::kMagic) {
    return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                       "axrt_engine_follow: member {} received a message that is not the set's "
                       "(is rank 0 running axrt_engine_create on this group?)",
                       rank_);
  }
  payload_.clear();
  uint64_t words = 0;
  if (header_.kind() == SetHeader::kStep) {
    const int64_t T = header_.words[2], R = header_.words[3], copies = header_.words[4];
    words = static_cast<uint64_t>(2 * T + T * max_blocks_ + R + 2 * copies);
  }
  if (words != 0) {
    AXRT_RETURN_IF_ERROR(reserve(words * 4));
    AXRT_RETURN_IF_ERROR(broadcast(stream, payload_buffer_, words, AXRT_DTYPE_INT32));
    payload_.resize(words);
    AXRT_RETURN_IF_ERROR(axrt_stream_copy_to_host(stream, payload_buffer_, 0, payload_.data(), words * 4));
    AXRT_RETURN_IF_ERROR(axrt_stream_synchronize(stream));
  }
  *header = header_;
  *payload = &payload_;
  return nullptr;
}

// ---------------------------------------------------------------------------
// The head

axrt_status_t Engine::init_remote(uint64_t num_blocks) {
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_group_query_info(group_, &info));
  remote_ = std::make_unique<SetLink>(group_, device_, 0);
  remote_->set_max_blocks(shape_.max_blocks);
  SetHeader hello = SetHeader::make(SetHeader::kHello);
  hello.words[2] = static_cast<int64_t>(num_blocks);
  hello.words[3] = static_cast<int64_t>(shape_.max_tokens);
  hello.words[4] = static_cast<int64_t>(shape_.max_rows);
  hello.words[5] = static_cast<int64_t>(shape_.max_blocks);
  hello.words[6] = static_cast<int64_t>(shape_.layers);
  hello.words[7] = static_cast<int64_t>(shape_.block_size);
  hello.words[8] = static_cast<int64_t>(shape_.row);
  hello.words[9] = static_cast<int64_t>(shape_.cache_dtype);
  hello.words[10] = static_cast<int64_t>(info.size);
  AXRT_RETURN_IF_ERROR(remote_->send(stream_, hello, {}));
  return axrt_stream_synchronize(stream_);
}

axrt_status_t Engine::execute_remote(axrt_tensor_t* inputs, axrt_tensor_t logits,
                                     const StepPlan& plan, uint64_t T, uint64_t R) {
  const Staging& h = staging_;
  const uint64_t MB = shape_.max_blocks;
  SetHeader header = SetHeader::make(SetHeader::kStep);
  header.words[2] = static_cast<int64_t>(T);
  header.words[3] = static_cast<int64_t>(R);
  header.words[4] = static_cast<int64_t>(plan.copies.size());
  std::vector<int32_t> payload;
  payload.reserve(2 * T + T * MB + R + 2 * plan.copies.size());
  payload.insert(payload.end(), h.tokens.begin(), h.tokens.begin() + T);
  payload.insert(payload.end(), h.positions.begin(), h.positions.begin() + T);
  payload.insert(payload.end(), h.tables.begin(), h.tables.begin() + T * MB);
  payload.insert(payload.end(), h.rows.begin(), h.rows.begin() + R);
  for (const auto& [from, to] : plan.copies) {
    payload.push_back(from);
    payload.push_back(to);
  }
  axrt_invoke_channel_t channel = {group_, 0};
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.channels = &channel;
  options.channel_count = 1;
  StatusPtr failed(remote_->send(stream_, header, std::move(payload)));
  if (!failed) failed.reset(axrt_function_invoke(step_, stream_, inputs, 5, &logits, 1, &options));
  // The others wait for what this member could not queue: end their wait.
  if (failed) abort_group(axrt_status_message(failed.get()));
  return failed.release();
}

void Engine::stop_remote() noexcept {
  if (!remote_) return;
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  if (axrt_status_t s = axrt_group_query_info(group_, &info)) {
    axrt_status_free(s);
    return;
  }
  if (info.state != AXRT_GROUP_STATE_ACTIVE) return;
  if (axrt_status_t s = remote_->send(stream_, SetHeader::make(SetHeader::kStop), {})) {
    axrt_status_free(s);
    return;
  }
  if (axrt_status_t s = axrt_stream_synchronize(stream_)) axrt_status_free(s);
}

// ---------------------------------------------------------------------------
// A member after the head

namespace {

axrt_status_t follow(axrt_executable_t executable, axrt_group_t group) {
  constexpr const char* kFunction = "axrt_engine_follow";
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_group_query_info(group, &info));
  if (info.rank < 1) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: group '{}' {}; a member after the head of a group across processes "
                       "(axrt_group_join, rank 1 or more) follows",
                       kFunction, info.label,
                       info.rank == 0 ? "makes this process rank 0, the head, which runs "
                                        "axrt_engine_create"
                                      : "is a group of one process");
  }
  const uint32_t rank = static_cast<uint32_t>(info.rank);
  axrt_device_t device = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_executable_get_device(executable, &device));
  axrt_device_release(device);  // only compared
  axrt_device_t member = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_group_get_device(group, rank, &member));
  axrt_device_release(member);
  if (member != device) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the executable is not loaded on the device this process joined group "
                       "'{}' with",
                       kFunction, info.label);
  }
  // A stream for the messages, before the step's: the member's own stream
  // is set up once the head said the set's shape.
  axrt_stream_t stream = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_stream_create(device, nullptr, &stream));
  struct Release {
    axrt_stream_t s;
    ~Release() {
      if (axrt_status_t st = axrt_stream_synchronize(s)) axrt_status_free(st);
      axrt_stream_release(s);
    }
  } release{stream};
  SetLink link(group, device, rank);
  SetHeader header;
  const std::vector<int32_t>* payload = nullptr;
  AXRT_RETURN_IF_ERROR(link.receive(stream, &header, &payload));
  if (header.kind() == SetHeader::kStop) return nullptr;
  if (header.kind() != SetHeader::kHello) {
    return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                       "{}: member {} expected the head's first message, and got message kind {}",
                       kFunction, rank, header.kind());
  }
  ModelShape shape;
  const uint64_t num_blocks = static_cast<uint64_t>(header.words[2]);
  shape.max_tokens = static_cast<uint64_t>(header.words[3]);
  shape.max_rows = static_cast<uint64_t>(header.words[4]);
  shape.max_blocks = static_cast<uint64_t>(header.words[5]);
  shape.layers = static_cast<uint64_t>(header.words[6]);
  shape.block_size = static_cast<uint64_t>(header.words[7]);
  shape.row = static_cast<uint64_t>(header.words[8]);
  shape.cache_dtype = static_cast<axrt_dtype_t>(header.words[9]);
  shape.element_bytes = axrt_dtype_bit_width(shape.cache_dtype) / 8;
  link.set_max_blocks(shape.max_blocks);
  Peer peer;
  AXRT_RETURN_IF_ERROR(setup_member(shape, num_blocks, rank, info.size, executable, &peer));
  std::vector<std::pair<int32_t, int32_t>> copies;
  for (;;) {
    AXRT_RETURN_IF_ERROR(link.receive(stream, &header, &payload));
    if (header.kind() == SetHeader::kStop) return axrt_stream_synchronize(peer.stream);
    if (header.kind() != SetHeader::kStep) {
      return make_status(AXRT_STATUS_CODE_DATA_LOSS, "{}: member {} got message kind {}", kFunction,
                         rank, header.kind());
    }
    MemberStep step;
    step.T = static_cast<uint64_t>(header.words[2]);
    step.R = static_cast<uint64_t>(header.words[3]);
    const int32_t* at = payload->data();
    step.tokens = at;
    step.positions = at + step.T;
    step.tables = at + 2 * step.T;
    step.rows = step.tables + step.T * shape.max_blocks;
    const int32_t* pairs = step.rows + step.R;
    copies.resize(static_cast<size_t>(header.words[4]));
    for (size_t c = 0; c < copies.size(); ++c) copies[c] = {pairs[2 * c], pairs[2 * c + 1]};
    step.copies = copies.data();
    step.copy_count = copies.size();
    // The step reads its inputs (copied from `payload`) before the next
    // message overwrites them: both streams are the member's, and the next
    // receive waits for the message stream only, so wait for the step's
    // uploads first.
    AXRT_RETURN_IF_ERROR(queue_member_step(shape, group, peer, step));
    AXRT_RETURN_IF_ERROR(axrt_stream_synchronize(peer.stream));
  }
}

}  // namespace

}  // namespace axrt::serving

extern "C" AXRT_API axrt_status_t axrt_engine_follow(axrt_executable_t executable,
                                                    axrt_group_t group,
                                                    const axrt_engine_follow_options_t* options) {
  return axrt::guard("axrt_engine_follow", [&]() -> axrt_status_t {
    if (executable == nullptr || group == nullptr) {
      return axrt::make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                               "axrt_engine_follow: executable and group must not be NULL");
    }
    axrt_engine_follow_options_t opts;
    if (!axrt::read_options_struct(options, &opts,
                                   axrt_engine_follow_options_t AXRT_ENGINE_FOLLOW_OPTIONS_INIT)) {
      return axrt::make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                               "axrt_engine_follow: options->struct_size {} is too small",
                               options->struct_size);
    }
    return axrt::serving::follow(executable, group);
  });
}
