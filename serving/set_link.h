// The messages of a tensor-parallel set whose members after the head run
// in other processes (a group across processes, axrt_group_join): the head
// (rank 0) broadcasts, through the set's group, a header and then a
// payload; every other member receives them (axrt_engine_follow) and runs
// its shard's step with them. They are collectives of the group like the
// steps' own, so they keep the one order every member sees.
#ifndef AXRT_SERVING_SET_LINK_H_
#define AXRT_SERVING_SET_LINK_H_

#include <cstdint>
#include <vector>

#include "axrt/axrt.h"

namespace axrt::serving {

// 16 int64: what a message is, and its sizes.
struct SetHeader {
  static constexpr int64_t kMagic = 0x6178727473657431;  // "axrtset1"
  enum Kind : int64_t { kHello = 1, kStep = 2, kStop = 3 };
  int64_t words[16] = {};

  int64_t magic() const { return words[0]; }
  int64_t kind() const { return words[1]; }
  // kHello: the set's shape and KV-cache blocks, which every member checks
  // its shard against.
  //   [2] num_blocks [3] max_tokens [4] max_rows [5] max_blocks [6] layers
  //   [7] block_size [8] row [9] cache dtype [10] members
  // kStep: [2] T [3] R [4] copies; the payload is tokens[T], positions[T],
  // tables[T * max_blocks], rows[R], then copies as (from, to) pairs.
  static SetHeader make(Kind kind) {
    SetHeader h;
    h.words[0] = kMagic;
    h.words[1] = kind;
    return h;
  }
};

// One member's end of the messages: buffers on its device and the host
// copies the stream reads from or writes to.
class SetLink {
 public:
  SetLink(axrt_group_t group, axrt_device_t device, uint32_t rank)
      : group_(group), device_(device), rank_(rank) {}
  ~SetLink();
  SetLink(const SetLink&) = delete;
  SetLink& operator=(const SetLink&) = delete;

  // The head: queues `header` and `payload` (copied here) to every member,
  // on `stream`. The host copies stay until the next send; the caller
  // synchronizes `stream` before it.
  axrt_status_t send(axrt_stream_t stream, const SetHeader& header, std::vector<int32_t> payload);
  // A member: waits for the next message on `stream` (synchronizing it);
  // `*payload` is valid until the next receive.
  axrt_status_t receive(axrt_stream_t stream, SetHeader* header, const std::vector<int32_t>** payload);
  // The set's block-table width, which sizes a step's payload.
  void set_max_blocks(uint64_t max_blocks) { max_blocks_ = static_cast<int64_t>(max_blocks); }

 private:
  axrt_status_t reserve(uint64_t bytes);
  axrt_status_t broadcast(axrt_stream_t stream, axrt_buffer_t buffer, uint64_t count,
                          axrt_dtype_t dtype);

  axrt_group_t group_;
  axrt_device_t device_;
  uint32_t rank_;
  axrt_buffer_t header_buffer_ = nullptr;
  axrt_buffer_t payload_buffer_ = nullptr;
  uint64_t payload_capacity_ = 0;
  int64_t max_blocks_ = 0;
  SetHeader header_;
  std::vector<int32_t> payload_;
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_SET_LINK_H_
