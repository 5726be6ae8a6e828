// The "nccl" backend: collectives of CUDA devices through NCCL.
#include "group/group.h"

namespace axrt::group {

axrt_status_t make_nccl_backend(std::shared_ptr<GroupState>, const std::vector<axrt_device_t>&,
                                std::unique_ptr<Backend>*) {
  return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "axrt_group_create: the nccl backend is not available in this build");
}

}  // namespace axrt::group
