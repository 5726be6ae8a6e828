// Groups across processes (axrt_group_join): what joining needs, and the
// "cpu" backend that serves a member (group/process_backend.cc).
#ifndef AXRT_GROUP_PROCESS_GROUP_H_
#define AXRT_GROUP_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "group/group.h"

namespace axrt::group {

struct JoinRequest {
  std::string id;         // the rendezvous, group/rendezvous.h
  uint32_t size = 0;      // checked: 1 or more
  uint32_t rank = 0;      // checked: below size
  std::string device_id;  // "cpu:0", for the others' messages
  std::string label;
  std::string hostname;   // where this member listens; "": the address it reaches the store from
  uint64_t timeout_ns = 0;             // collectives
  uint64_t rendezvous_timeout_ns = 0;  // joining
  uint64_t heartbeat_interval_ns = 0;  // UINT64_MAX: none
  uint64_t heartbeat_timeout_ns = 0;
};

// Meets the other members, connects to them and writes the group's state
// and backend, whose heartbeat runs.
axrt_status_t join_process_group(const JoinRequest& request, std::shared_ptr<GroupState>* out_state,
                                 std::unique_ptr<Backend>* out_backend);
// The same for the "nccl" backend on a CUDA device: the members meet in the
// store, rank 0's NCCL unique id goes to the others through it, and each
// makes its communicator with ncclCommInitRank. NCCL's own errors and the
// group's timeout tell a lost member (no heartbeat of axrt's).
axrt_status_t join_nccl_group(const JoinRequest& request, axrt_device_t device,
                              std::shared_ptr<GroupState>* out_state,
                              std::unique_ptr<Backend>* out_backend);

}  // namespace axrt::group

#endif  // AXRT_GROUP_PROCESS_GROUP_H_
