// NVTX v3 annotations (cuda_nvtx.h). Includes no axrt CUDA header: NVTX's
// CUDA header brings the toolkit's cuda.h.
#include "runtime/drivers/cuda/cuda_nvtx.h"

#if AXRT_HAVE_NVTX

#include <nvtx3/nvToolsExt.h>
// Stream names need cuda.h, which a stand-alone copy of NVTX lacks.
#if __has_include(<cuda.h>)
#include <nvtx3/nvToolsExtCuda.h>
#define AXRT_NVTX_NAMES_STREAMS 1
#else
#define AXRT_NVTX_NAMES_STREAMS 0
#endif

namespace axrt::cuda::nvtx {
namespace {

nvtxDomainHandle_t domain() noexcept {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("axrt");
  return handle;
}

}  // namespace

void push_range(const char* name) noexcept {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx(domain(), &attributes);
}

void pop_range() noexcept { nvtxDomainRangePop(domain()); }

void name_stream(CUstream_st* stream, const char* name) noexcept {
#if AXRT_NVTX_NAMES_STREAMS
  nvtxNameCuStreamA(stream, name);
#else
  (void)stream;
  (void)name;
#endif
}

}  // namespace axrt::cuda::nvtx

#endif  // AXRT_HAVE_NVTX
