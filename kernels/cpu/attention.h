// The index checks of the attention kernels over the paged KV cache
// (attention.cc), shared by every body that reads the cache through block
// tables (attention_flash.cc), so that they fail with the same messages.
#ifndef AXRT_KERNELS_CPU_ATTENTION_H_
#define AXRT_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kv_cache.h"

namespace axrt::kernels::cpu {

// INVALID_ARGUMENT unless heads is a positive multiple of kv_heads, head_dim
// is in [1, 256] (a multiple of 16 for an fp8 cache), block_size and
// max_blocks are positive and the query heads fit a row of row_stride.
axrt_kernel_result_t check_attention_shapes(kv::Kind kind, const AttentionArgs* a,
                                            const axrt_kernel_workgroup_t* workgroup);

// INVALID_ARGUMENT unless positions 0 .. `last` lie in `table` (a row of
// max_blocks entries) and the blocks holding them in [0, num_blocks); the
// message names `what` `index` ("sequence 3").
axrt_kernel_result_t check_attention_sequence(const AttentionArgs* a, const int32_t* table,
                                              int64_t last, const char* what, uint64_t index,
                                              const axrt_kernel_workgroup_t* workgroup);

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_ATTENTION_H_
