// The C entry points of status objects and versions.
#include "base/status.h"

extern "C" {

AXRT_API uint32_t axrt_version(void) { return AXRT_VERSION; }

AXRT_API const char* axrt_version_string(void) {
#define AXRT_STRINGIFY_(x) #x
#define AXRT_STRINGIFY(x) AXRT_STRINGIFY_(x)
  return AXRT_STRINGIFY(AXRT_VERSION_MAJOR) "." AXRT_STRINGIFY(
      AXRT_VERSION_MINOR) "." AXRT_STRINGIFY(AXRT_VERSION_PATCH);
#undef AXRT_STRINGIFY
#undef AXRT_STRINGIFY_
}

AXRT_API axrt_status_t axrt_status_create(axrt_status_code_t code, const char* message) {
  try {
    return axrt::make_status(code, std::string(message ? message : ""));
  } catch (...) {
    return axrt::out_of_memory_status();
  }
}

AXRT_API axrt_status_code_t axrt_status_code(axrt_status_t status) {
  return status ? status->code : axrt_status_code_t{AXRT_STATUS_CODE_OK};
}

AXRT_API const char* axrt_status_message(axrt_status_t status) {
  return status ? status->message.c_str() : "OK";
}

AXRT_API void axrt_status_free(axrt_status_t status) { axrt::status_destroy(status); }

AXRT_API const char* axrt_status_code_name(axrt_status_code_t code) {
  switch (code) {
    case AXRT_STATUS_CODE_OK: return "OK";
    case AXRT_STATUS_CODE_CANCELLED: return "CANCELLED";
    case AXRT_STATUS_CODE_UNKNOWN: return "UNKNOWN";
    case AXRT_STATUS_CODE_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case AXRT_STATUS_CODE_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case AXRT_STATUS_CODE_NOT_FOUND: return "NOT_FOUND";
    case AXRT_STATUS_CODE_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case AXRT_STATUS_CODE_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case AXRT_STATUS_CODE_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case AXRT_STATUS_CODE_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case AXRT_STATUS_CODE_ABORTED: return "ABORTED";
    case AXRT_STATUS_CODE_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case AXRT_STATUS_CODE_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case AXRT_STATUS_CODE_INTERNAL: return "INTERNAL";
    case AXRT_STATUS_CODE_UNAVAILABLE: return "UNAVAILABLE";
    case AXRT_STATUS_CODE_DATA_LOSS: return "DATA_LOSS";
    case AXRT_STATUS_CODE_UNAUTHENTICATED: return "UNAUTHENTICATED";
    case AXRT_STATUS_CODE_DEVICE_LOST: return "DEVICE_LOST";
  }
  return "UNRECOGNIZED";
}

}  // extern "C"
