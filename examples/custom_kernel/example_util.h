/* What the two custom-kernel examples share: reporting a failed status,
 * adding a kernel to a builder, and moving a tensor's bytes to and from the
 * host. Public API only. */
#ifndef AXRT_EXAMPLES_CUSTOM_KERNEL_EXAMPLE_UTIL_H_
#define AXRT_EXAMPLES_CUSTOM_KERNEL_EXAMPLE_UTIL_H_

#include <axrt/axrt.h>
#include <stdbool.h>
#include <stdio.h>

#if !defined(AXRT_HOST_CODE_TARGET)
#error "axrt does not know this host's architecture (docs/format.md, code object targets)"
#endif

/* Prints and frees a failed status; true when there was one. */
static inline bool example_failed(axrt_status_t status, const char* what) {
  if (status == NULL) return false;
  fprintf(stderr, "%s failed: %s: %s\n", what, axrt_status_code_name(axrt_status_code(status)),
          axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

/* Adds kernel `name` (entry `entry` in `code_object`, `param_count`
 * parameters, default launch shape) to `builder`; passes a failure through
 * so that calls chain. */
static inline axrt_status_t example_add_kernel(axrt_status_t status, axrt_axe_builder_t builder,
                                               const char* name, uint32_t code_object,
                                               const char* entry,
                                               const axrt_axe_kernel_param_t* params,
                                               size_t param_count, uint32_t* out_index) {
  if (status != NULL) return status;
  axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
  desc.name = name;
  desc.code_object = code_object;
  desc.entry_symbol = entry;
  desc.params = params;
  desc.param_count = param_count;
  return axrt_axe_builder_add_kernel(builder, &desc, out_index);
}

/* Copies `size` bytes between the host and contiguous `tensor` through
 * `stream`, and waits for the copy. */
static inline axrt_status_t example_tensor_transfer(axrt_stream_t stream, axrt_tensor_t tensor,
                                                    void* host, size_t size, bool to_host) {
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  axrt_status_t status = axrt_tensor_query_info(tensor, &info);
  if (status != NULL) return status;
  axrt_buffer_t buffer = NULL;
  status = axrt_tensor_get_buffer(tensor, &buffer);
  if (status != NULL) return status;
  status = to_host ? axrt_stream_copy_to_host(stream, buffer, info.byte_offset, host, size)
                   : axrt_stream_copy_from_host(stream, host, buffer, info.byte_offset, size);
  if (status == NULL) status = axrt_stream_synchronize(stream);
  axrt_buffer_release(buffer);
  return status;
}

#endif /* AXRT_EXAMPLES_CUSTOM_KERNEL_EXAMPLE_UTIL_H_ */
