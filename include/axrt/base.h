/* axrt base: export macro, versioning, status objects and the options
 * convention shared by every other header.
 *
 * Everything here is thread-safe. */
#ifndef AXRT_BASE_H_
#define AXRT_BASE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Export macro                                                            */
/* ---------------------------------------------------------------------- */

#if defined(AXRT_BUILDING_LIBRARY)
#define AXRT_API __attribute__((visibility("default")))
#else
#define AXRT_API
#endif

/* ---------------------------------------------------------------------- */
/* Versioning                                                              */
/* ---------------------------------------------------------------------- */

/* The version of these headers. A major bump is the only place a breaking
 * change may appear; minors only add. */
#define AXRT_VERSION_MAJOR 1
#define AXRT_VERSION_MINOR 0
#define AXRT_VERSION_PATCH 0

/* Packs a version into one comparable integer: 1.2.3 is 1002003. */
#define AXRT_MAKE_VERSION(major, minor, patch) \
  ((uint32_t)(major) * 1000000u + (uint32_t)(minor) * 1000u + (uint32_t)(patch))
#define AXRT_VERSION \
  AXRT_MAKE_VERSION(AXRT_VERSION_MAJOR, AXRT_VERSION_MINOR, AXRT_VERSION_PATCH)

/* The version of the library actually loaded, packed as AXRT_MAKE_VERSION
 * does. A client built against headers of major M must refuse a library
 * whose `axrt_version() / 1000000` differs from M, and may rely on the
 * functions of minor N only when the library's minor is at least N. */
AXRT_API uint32_t axrt_version(void);

/* The loaded library's version as "MAJOR.MINOR.PATCH"; a static string. */
AXRT_API const char* axrt_version_string(void);

/* ---------------------------------------------------------------------- */
/* Element types                                                           */
/* ---------------------------------------------------------------------- */

/* Element types of tensors and kernel scalars. The numbers are those of the
 * .axe format's DType (and of axrt_axe_dtype_t); never reused. */
typedef uint32_t axrt_dtype_t;
enum {
  AXRT_DTYPE_INVALID = 0,
  AXRT_DTYPE_BOOL = 1,
  AXRT_DTYPE_INT8 = 2,
  AXRT_DTYPE_UINT8 = 3,
  AXRT_DTYPE_INT16 = 4,
  AXRT_DTYPE_UINT16 = 5,
  AXRT_DTYPE_INT32 = 6,
  AXRT_DTYPE_UINT32 = 7,
  AXRT_DTYPE_INT64 = 8,
  AXRT_DTYPE_UINT64 = 9,
  AXRT_DTYPE_FLOAT16 = 10,
  AXRT_DTYPE_BFLOAT16 = 11,
  AXRT_DTYPE_FLOAT32 = 12,
  AXRT_DTYPE_FLOAT64 = 13,
  AXRT_DTYPE_INT4 = 14,
  AXRT_DTYPE_UINT4 = 15,
  AXRT_DTYPE_INT2 = 16,
  AXRT_DTYPE_UINT2 = 17,
  AXRT_DTYPE_FLOAT8_E4M3FN = 18,
  AXRT_DTYPE_FLOAT8_E5M2 = 19,
  AXRT_DTYPE_FLOAT8_E4M3FNUZ = 20,
  AXRT_DTYPE_FLOAT8_E5M2FNUZ = 21,
  AXRT_DTYPE_FLOAT4_E2M1 = 22,
  AXRT_DTYPE_FLOAT8_E8M0FNU = 23,
};

/* ---------------------------------------------------------------------- */
/* Status                                                                  */
/* ---------------------------------------------------------------------- */

/* Enumerations are explicitly 32-bit: the type is an integer typedef and the
 * values are constants with explicit numbers that are never reused. */
typedef uint32_t axrt_status_code_t;
enum {
  AXRT_STATUS_CODE_OK = 0,
  AXRT_STATUS_CODE_CANCELLED = 1,
  AXRT_STATUS_CODE_UNKNOWN = 2,
  AXRT_STATUS_CODE_INVALID_ARGUMENT = 3,
  AXRT_STATUS_CODE_DEADLINE_EXCEEDED = 4,
  AXRT_STATUS_CODE_NOT_FOUND = 5,
  AXRT_STATUS_CODE_ALREADY_EXISTS = 6,
  AXRT_STATUS_CODE_PERMISSION_DENIED = 7,
  AXRT_STATUS_CODE_RESOURCE_EXHAUSTED = 8,
  AXRT_STATUS_CODE_FAILED_PRECONDITION = 9,
  AXRT_STATUS_CODE_ABORTED = 10,
  AXRT_STATUS_CODE_OUT_OF_RANGE = 11,
  AXRT_STATUS_CODE_UNIMPLEMENTED = 12,
  AXRT_STATUS_CODE_INTERNAL = 13,
  AXRT_STATUS_CODE_UNAVAILABLE = 14,
  AXRT_STATUS_CODE_DATA_LOSS = 15,
  AXRT_STATUS_CODE_UNAUTHENTICATED = 16,
  /* The device hit an unrecoverable error; every later call on it fails. */
  AXRT_STATUS_CODE_DEVICE_LOST = 17,
};

/* The result of every fallible function. NULL means success; anything else
 * is an object owned by the caller, who frees it with axrt_status_free().
 * A status is not reference-counted and is used from one thread at a time. */
typedef struct axrt_status_s* axrt_status_t;

/* Creates a status with `code` and a copy of `message` (NULL reads as "").
 * Used by applications to fail a stream from a host function. A `code` of
 * AXRT_STATUS_CODE_OK returns NULL. The caller owns the result. If memory
 * runs out, returns a static RESOURCE_EXHAUSTED status that
 * axrt_status_free() accepts like any other. */
AXRT_API axrt_status_t axrt_status_create(axrt_status_code_t code,
                                          const char* message);

/* The code of `status`; AXRT_STATUS_CODE_OK for NULL. Borrows `status`. */
AXRT_API axrt_status_code_t axrt_status_code(axrt_status_t status);

/* The message of `status`: a NUL-terminated string owned by the status and
 * valid until it is freed; "OK" for NULL. Borrows `status`. */
AXRT_API const char* axrt_status_message(axrt_status_t status);

/* Frees `status`. NULL is a no-op. */
AXRT_API void axrt_status_free(axrt_status_t status);

/* The name of `code`, such as "INVALID_ARGUMENT"; "UNRECOGNIZED" for a value
 * this library does not know. A static string. */
AXRT_API const char* axrt_status_code_name(axrt_status_code_t code);

/* ---------------------------------------------------------------------- */
/* Options structs and extension chains                                    */
/* ---------------------------------------------------------------------- */

/* Every options or query struct starts with
 *     size_t struct_size;   set to sizeof(the struct) by its AXRT_*_INIT
 *     const void* next;     NULL, or the first extension of a chain
 * The library accepts a struct smaller than its own (from an older header):
 * the missing fields take their defaults. A larger struct (from a newer
 * header) is accepted only when the fields this library does not know are
 * all zero (UNIMPLEMENTED otherwise). A `struct_size` below the 16-byte
 * header is INVALID_ARGUMENT; so is, for options structs, one that is not a
 * multiple of sizeof(size_t) (no header's sizeof is) or more than 64 KiB
 * beyond this library's struct. Query structs are filled up to
 * `struct_size` bytes; bytes beyond this library's struct are left as they
 * were.
 *
 * Every extension starts with axrt_extension_header_t. A function that is
 * given an extension type it does not take fails with UNIMPLEMENTED naming
 * the type; chains longer than AXRT_EXTENSION_CHAIN_MAX are refused. */
typedef uint32_t axrt_extension_type_t;
enum {
  AXRT_EXTENSION_TYPE_NONE = 0,
  /* axrt_debug_label_t: taken by buffer, stream and event options. */
  AXRT_EXTENSION_TYPE_DEBUG_LABEL = 1,
};

#define AXRT_EXTENSION_CHAIN_MAX 64

typedef struct axrt_extension_header_t {
  size_t struct_size;
  const void* next;
  axrt_extension_type_t type;
} axrt_extension_header_t;

/* Names the object being created in every error message that mentions it.
 * `label` is copied; NULL or "" means no label. */
typedef struct axrt_debug_label_t {
  size_t struct_size;
  const void* next;
  axrt_extension_type_t type; /* AXRT_EXTENSION_TYPE_DEBUG_LABEL */
  const char* label;
} axrt_debug_label_t;

#define AXRT_DEBUG_LABEL_INIT(label) \
  { sizeof(axrt_debug_label_t), NULL, AXRT_EXTENSION_TYPE_DEBUG_LABEL, (label) }

/* Wait forever: the timeout value of functions that take one. */
#define AXRT_TIMEOUT_INFINITE UINT64_MAX

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_BASE_H_ */
