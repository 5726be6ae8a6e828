// The C entry points of include/axrt/group.h.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "axrt/group.h"
#include "base/options_struct.h"
#include "base/status.h"
#include "group/group.h"

using axrt::guard;
using axrt::make_status;
using axrt::read_options_struct;
using axrt::group::CollectiveKind;
using axrt::group::Group;

struct axrt_group_s {
  std::unique_ptr<Group> group;
};

namespace {

axrt_status_t null_group(const char* function) {
  return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: group is NULL", function);
}

axrt_status_t run_collective(const char* function, axrt_group_t group, CollectiveKind kind,
                             const axrt_collective_member_t* members, uint64_t count,
                             axrt_dtype_t dtype, axrt_reduce_op_t op, size_t root) {
  return guard(function, [&]() -> axrt_status_t {
    if (group == nullptr) return null_group(function);
    return group->group->collective(function, kind, members, count, dtype, op, root);
  });
}

}  // namespace

extern "C" {

AXRT_API axrt_status_t axrt_group_create(const axrt_device_t* devices, size_t count,
                                         const axrt_group_options_t* options,
                                         axrt_group_t* out_group) {
  return guard("axrt_group_create", [&]() -> axrt_status_t {
    if (devices == nullptr || out_group == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_group_create: devices and out_group must not be NULL");
    }
    axrt_group_options_t opts;
    if (!read_options_struct(options, &opts, axrt_group_options_t AXRT_GROUP_OPTIONS_INIT)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_group_create: options.struct_size {} is too small",
                         options->struct_size);
    }
    auto handle = std::make_unique<axrt_group_s>();
    AXRT_RETURN_IF_ERROR(Group::create(devices, count, opts, &handle->group));
    *out_group = handle.release();
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_group_join(const char* id, uint32_t size, uint32_t rank,
                                       axrt_device_t device,
                                       const axrt_group_join_options_t* options,
                                       axrt_group_t* out_group) {
  return guard("axrt_group_join", [&]() -> axrt_status_t {
    if (out_group == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "axrt_group_join: out_group is NULL");
    }
    axrt_group_join_options_t opts;
    if (!read_options_struct(options, &opts,
                             axrt_group_join_options_t AXRT_GROUP_JOIN_OPTIONS_INIT)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_group_join: options->struct_size {} is too small",
                         options->struct_size);
    }
    auto handle = std::make_unique<axrt_group_s>();
    AXRT_RETURN_IF_ERROR(Group::join(id, size, rank, device, opts, &handle->group));
    *out_group = handle.release();
    return nullptr;
  });
}

AXRT_API void axrt_group_destroy(axrt_group_t group) { delete group; }

AXRT_API axrt_status_t axrt_group_query_info(axrt_group_t group, axrt_group_info_t* out_info) {
  return guard("axrt_group_query_info", [&]() -> axrt_status_t {
    if (group == nullptr) return null_group("axrt_group_query_info");
    if (out_info == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "axrt_group_query_info: out_info is NULL");
    }
    if (out_info->struct_size < offsetof(axrt_group_info_t, next) + sizeof(void*)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_group_query_info: out_info->struct_size {} is too small",
                         out_info->struct_size);
    }
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    group->group->info(&info);
    const size_t size = std::min(out_info->struct_size, sizeof(info));
    const void* next = out_info->next;
    std::memcpy(out_info, &info, size);
    out_info->struct_size = size;
    out_info->next = next;
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_group_get_device(axrt_group_t group, size_t rank,
                                             axrt_device_t* out_device) {
  return guard("axrt_group_get_device", [&]() -> axrt_status_t {
    if (group == nullptr) return null_group("axrt_group_get_device");
    if (out_device == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "axrt_group_get_device: out_device is NULL");
    }
    if (rank >= group->group->size()) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "axrt_group_get_device: rank {} is past the group's last member ({})",
                         rank, group->group->size() - 1);
    }
    axrt_device_t device = group->group->device(static_cast<uint32_t>(rank));
    if (device == nullptr) {
      return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                         "axrt_group_get_device: member {} is in another process; this process is "
                         "member {}",
                         rank, group->group->local_rank());
    }
    axrt_device_retain(device);
    *out_device = device;
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_group_abort(axrt_group_t group, int32_t rank, const char* reason) {
  return guard("axrt_group_abort", [&]() -> axrt_status_t {
    if (group == nullptr) return null_group("axrt_group_abort");
    return group->group->abort(rank, reason);
  });
}

AXRT_API axrt_status_t axrt_group_all_reduce(axrt_group_t group,
                                             const axrt_collective_member_t* members,
                                             uint64_t count, axrt_dtype_t dtype,
                                             axrt_reduce_op_t op) {
  return run_collective("axrt_group_all_reduce", group, CollectiveKind::kAllReduce, members, count,
                        dtype, op, 0);
}

AXRT_API axrt_status_t axrt_group_all_gather(axrt_group_t group,
                                             const axrt_collective_member_t* members,
                                             uint64_t count, axrt_dtype_t dtype) {
  return run_collective("axrt_group_all_gather", group, CollectiveKind::kAllGather, members, count,
                        dtype, AXRT_REDUCE_SUM, 0);
}

AXRT_API axrt_status_t axrt_group_reduce_scatter(axrt_group_t group,
                                                 const axrt_collective_member_t* members,
                                                 uint64_t count, axrt_dtype_t dtype,
                                                 axrt_reduce_op_t op) {
  return run_collective("axrt_group_reduce_scatter", group, CollectiveKind::kReduceScatter, members,
                        count, dtype, op, 0);
}

AXRT_API axrt_status_t axrt_group_broadcast(axrt_group_t group,
                                            const axrt_collective_member_t* members,
                                            uint64_t count, axrt_dtype_t dtype, size_t root) {
  return run_collective("axrt_group_broadcast", group, CollectiveKind::kBroadcast, members, count,
                        dtype, AXRT_REDUCE_SUM, root);
}

AXRT_API axrt_status_t axrt_group_send_recv(axrt_group_t group,
                                            const axrt_group_transfer_t* transfers,
                                            size_t transfer_count) {
  return guard("axrt_group_send_recv", [&]() -> axrt_status_t {
    if (group == nullptr) return null_group("axrt_group_send_recv");
    return group->group->send_recv("axrt_group_send_recv", transfers, transfer_count);
  });
}

AXRT_API axrt_status_t axrt_group_enqueue_part(axrt_group_t group, size_t rank,
                                               axrt_collective_kind_t kind,
                                               const axrt_collective_member_t* member,
                                               uint64_t count, axrt_dtype_t dtype,
                                               axrt_reduce_op_t op, size_t root) {
  constexpr const char* kFunction = "axrt_group_enqueue_part";
  return guard(kFunction, [&]() -> axrt_status_t {
    if (group == nullptr) return null_group(kFunction);
    CollectiveKind which;
    switch (kind) {
      case AXRT_COLLECTIVE_ALL_REDUCE: which = CollectiveKind::kAllReduce; break;
      case AXRT_COLLECTIVE_ALL_GATHER: which = CollectiveKind::kAllGather; break;
      case AXRT_COLLECTIVE_REDUCE_SCATTER: which = CollectiveKind::kReduceScatter; break;
      case AXRT_COLLECTIVE_BROADCAST: which = CollectiveKind::kBroadcast; break;
      default:
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: {} is not a collective (AXRT_COLLECTIVE_ALL_REDUCE, _ALL_GATHER, "
                           "_REDUCE_SCATTER or _BROADCAST)",
                           kFunction, kind);
    }
    return group->group->part(kFunction, rank, which, member, count, dtype, op, root);
  });
}

}  // extern "C"
