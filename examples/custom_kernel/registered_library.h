/* "example.registered": a CPU kernel library that an application defines
 * and registers with axrt_instance_register_kernel_library() (registered.c).
 * Written against include/axrt/kernel_abi.h only, as docs/kernel-abi.md
 * describes.
 *
 * Kernels (entry symbols), each handling EXAMPLE_ELEMENTS_PER_WORKGROUP
 * elements per workgroup, so the grid is x = ceil(n / 256):
 *   example_saxpy_f32(x, y, out, n: u64, alpha: f32)
 *       out[i] = alpha x[i] + y[i]
 *   example_clamp_f32(x, out, n: u64, lo: f32, hi: f32)
 *       out[i] = min(max(x[i], lo), hi)
 * init allocates a small per-device state that every kernel checks. */
#ifndef AXRT_EXAMPLES_CUSTOM_KERNEL_REGISTERED_LIBRARY_H_
#define AXRT_EXAMPLES_CUSTOM_KERNEL_REGISTERED_LIBRARY_H_

#include <axrt/kernel_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EXAMPLE_REGISTERED_LIBRARY_NAME "example.registered"
#define EXAMPLE_REGISTERED_LIBRARY_VERSION 1u
#define EXAMPLE_ELEMENTS_PER_WORKGROUP 256u

/* The library's table: static, valid for the life of the process. */
const axrt_kernel_library_t* example_registered_library(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_EXAMPLES_CUSTOM_KERNEL_REGISTERED_LIBRARY_H_ */
