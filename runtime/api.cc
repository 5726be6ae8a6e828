#include "runtime/api.h"

namespace axrt {

axrt_status_t ApiCall::read_extensions(const void* next, const char* name, uint32_t accepted,
                                       Extensions* out) const {
  size_t position = 0;
  for (const void* link = next; link; ++position) {
    if (position >= AXRT_EXTENSION_CHAIN_MAX) {
      return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   "the extension chain of `{}` is longer than {} links (is it a cycle?)", name,
                   AXRT_EXTENSION_CHAIN_MAX);
    }
    const auto* header = static_cast<const axrt_extension_header_t*>(link);
    if (header->struct_size < sizeof(axrt_extension_header_t)) {
      return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   "extension {} in the chain of `{}` has struct_size {}, smaller than "
                   "axrt_extension_header_t ({} bytes)",
                   position, name, header->struct_size, sizeof(axrt_extension_header_t));
    }
    const uint32_t type = header->type;
    const bool known = type == AXRT_EXTENSION_TYPE_DEBUG_LABEL;
    if (!known || type >= 32 || !(accepted & (1u << type))) {
      return error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                   "extension {} in the chain of `{}` has type {}, which {} does not take{}",
                   position, name, type, function(), known ? "" : " (unknown extension type)");
    }
    if (type == AXRT_EXTENSION_TYPE_DEBUG_LABEL) {
      const auto* label = static_cast<const axrt_debug_label_t*>(link);
      if (label->struct_size < sizeof(axrt_debug_label_t)) {
        return error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "axrt_debug_label_t at position {} in the chain of `{}` has struct_size "
                     "{}, expected at least {}",
                     position, name, label->struct_size, sizeof(axrt_debug_label_t));
      }
      if (label->label) out->label = label->label;
    }
    link = header->next;
  }
  return nullptr;
}

axrt_status_t check_query_struct(const ApiCall& api, const void* out, const char* name,
                                 const char* type_name) noexcept {
  AXRT_RETURN_IF_ERROR(api.require_pointer(out, name));
  const size_t size = *static_cast<const size_t*>(out);
  if (size < kStructHeaderSize) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "`{}->struct_size` is {}, smaller than the {}-byte header every {} starts "
                     "with (use its AXRT_*_INIT macro)",
                     name, size, kStructHeaderSize, type_name);
  }
  // No query struct takes extensions yet; an unknown one is refused rather
  // than left unfilled behind the caller's back.
  Extensions extensions;
  const void* next = static_cast<const axrt_extension_header_t*>(out)->next;
  return api.read_extensions(next, name, 0, &extensions);
}

}  // namespace axrt
