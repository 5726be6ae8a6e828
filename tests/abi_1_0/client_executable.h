/* The executable the 1.0 client programs load, built in-process with the
 * builder of axrt/format.h, and the kernel library the client registers for
 * it (axrt/kernel_abi.h).
 *
 * Functions, in this order:
 *   0 "affine"      (x: f32[4]) -> (y: f32[4])
 *                   y = x * w + b with the constants w and b below, through
 *                   axrt_mul_f32 and axrt_add_f32 of "axrt.cpu" and 16 bytes
 *                   of arena between them.
 *   1 "scale_shift" (x: f32[n <= 64]) -> (y: f32[n], z: f32[n])
 *                   y = CLIENT_SCALE_SHIFT_ALPHA * x + CLIENT_LIBRARY_SHIFT (the
 *                   state the client library's init hands its kernel), over
 *                   ceil(n / 16) workgroups; z = x by a copy command.
 *   2 "fail"        (x: f32[1]) -> (y: f32[1])
 *                   a kernel that fails with INTERNAL and CLIENT_FAIL_MESSAGE.
 * Metadata: "client" = "abi 1.0". */
#ifndef AXRT_TESTS_ABI_1_0_CLIENT_EXECUTABLE_H_
#define AXRT_TESTS_ABI_1_0_CLIENT_EXECUTABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "axrt/base.h"
#include "axrt/kernel_abi.h"

#define CLIENT_LIBRARY_NAME "abi_1_0.client"
#define CLIENT_FAIL_MESSAGE "the client's kernel fails on purpose"
#define CLIENT_PRODUCER_NAME "abi_1_0 client"

#define CLIENT_SCALE_SHIFT_ALPHA 2.0f
#define CLIENT_LIBRARY_SHIFT 0.5f
static const float kAffineW[4] = {1.5f, -2.0f, 0.25f, 4.0f};
static const float kAffineB[4] = {0.5f, 1.0f, -3.0f, 8.0f};

/* What the client library's init and deinit have seen. */
typedef struct client_library_counters_t {
  int init_calls;
  int deinit_calls;
  int bad_contexts; /* inits told something other than cpu:0 */
} client_library_counters_t;

/* The client's kernel library: a static table, valid for the process. */
const axrt_kernel_library_t* client_kernel_library(void);
const client_library_counters_t* client_library_counters(void);

/* Builds the executable into new memory that the caller frees with
 * axrt_axe_memory_free(); when `path` is not NULL, also writes it there. */
axrt_status_t build_client_executable(const char* path, void** out_data, size_t* out_size);

#endif /* AXRT_TESTS_ABI_1_0_CLIENT_EXECUTABLE_H_ */
