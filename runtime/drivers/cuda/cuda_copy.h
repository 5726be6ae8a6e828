// Copies and fills of a CUDA stream (docs/cuda-driver.md, "Copies"): device
// and pinned memory directly, pageable host memory through the stream's
// pinned staging chunks, which a second CUDA stream fills and drains with
// host functions while the first moves the previous chunk. Called by the
// stream (cuda_stream.cc) under its order_mutex, once ready() let new work
// go to CUDA.
#ifndef AXRT_RUNTIME_DRIVERS_CUDA_CUDA_COPY_H_
#define AXRT_RUNTIME_DRIVERS_CUDA_CUDA_COPY_H_

#include <cstdint>
#include <functional>

#include "runtime/drivers/cuda/cuda_driver.h"

namespace axrt::cuda {

// Queues `copy` on `s`.
axrt_status_t run_copy(CudaStream* s, const CopyCommand& copy);

// Queues a fill of `length` bytes of `buffer` from `offset` with the
// `pattern_size`-byte (1, 2, 4 or 8) `pattern`.
axrt_status_t run_fill(CudaStream* s, Buffer* buffer, uint64_t offset, uint64_t length,
                       uint64_t pattern, uint32_t pattern_size);

// A step of a staged copy, queued on the staging stream as host work: it
// never fails, so it holds nothing back (cuda_stream.cc). Under order_mutex.
axrt_status_t enqueue_staging_call(CudaStream* s,
                                   std::function<axrt_status_t(axrt_status_t)> body);

}  // namespace axrt::cuda

#endif  // AXRT_RUNTIME_DRIVERS_CUDA_CUDA_COPY_H_
