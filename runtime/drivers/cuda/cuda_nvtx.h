// NVTX v3 annotations for tools such as Nsight Systems: a range in the
// "axrt" domain around each function call's launches on the submitting
// thread, and names for CUDA streams. NVTX v3 is header-only and costs a
// call through a no-op pointer when no tool is attached, so these run
// unconditionally; built without the nvtx3 headers (AXRT_HAVE_NVTX unset)
// they do nothing.
//
// The implementation is its own translation unit: NVTX's CUDA header
// includes the toolkit's cuda.h, which cuda_api.h must never meet.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_NVTX_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_NVTX_H_

struct CUstream_st;  // CUstream, as cuda_api.h and cuda.h both declare it

namespace axrt::cuda::nvtx {

#if AXRT_HAVE_NVTX
// `name` is read during the call.
void push_range(const char* name) noexcept;
void pop_range() noexcept;
void name_stream(CUstream_st* stream, const char* name) noexcept;
#else
inline void push_range(const char*) noexcept {}
inline void pop_range() noexcept {}
inline void name_stream(CUstream_st*, const char*) noexcept {}
#endif

// A range on the calling thread for the scope's duration.
class Range {
 public:
  explicit Range(const char* name) noexcept { push_range(name); }
  ~Range() { pop_range(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

}  // namespace axrt::cuda::nvtx

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_NVTX_H_
