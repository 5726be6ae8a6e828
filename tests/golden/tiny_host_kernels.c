/* The host shared object embedded in the golden file code_objects.axe: one
 * kernel-shaped function, built as a real shared library. */
#include <stdint.h>

__attribute__((visibility("default"))) void axrt_golden_axpy(const void* args, uint32_t group) {
  const float* const* buffers = (const float* const*)args;
  ((float*)buffers[1])[group] += 2.0f * buffers[0][group];
}
