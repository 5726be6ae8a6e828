/* The checks of the 1.0 client programs: plain C, as a client would write
 * them. A failed check prints where and why and ends the program with 1;
 * statuses are freed on every path that goes on. */
#ifndef AXRT_TESTS_ABI_1_0_CHECK_H_
#define AXRT_TESTS_ABI_1_0_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axrt/base.h"

/* Fails unless `status` is OK (NULL). */
static inline void check_ok(axrt_status_t status, const char* expr, const char* file, int line) {
  if (status == NULL) return;
  fflush(stdout);
  fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, expr,
          axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
  axrt_status_free(status);
  exit(1);
}

/* Fails unless `status` has `code` and a message holding `fragment` (NULL
 * skips the message). Frees `status`. */
static inline void check_status(axrt_status_t status, axrt_status_code_t code,
                                const char* fragment, const char* expr, const char* file,
                                int line) {
  const axrt_status_code_t got = axrt_status_code(status);
  const char* message = axrt_status_message(status);
  if (got != code || (fragment != NULL && strstr(message, fragment) == NULL)) {
    fflush(stdout);
    fprintf(stderr, "%s:%d: %s returned %s: \"%s\"; expected %s with \"%s\"\n", file, line, expr,
            axrt_status_code_name(got), message, axrt_status_code_name(code),
            fragment != NULL ? fragment : "");
    axrt_status_free(status);
    exit(1);
  }
  axrt_status_free(status);
}

static inline void check_true(int condition, const char* expr, const char* file, int line) {
  if (condition) return;
  fflush(stdout);
  fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
  exit(1);
}

#define CHECK_OK(expr) check_ok((expr), #expr, __FILE__, __LINE__)
#define CHECK_STATUS(expr, code, fragment) \
  check_status((expr), (code), (fragment), #expr, __FILE__, __LINE__)
#define CHECK(condition) check_true((condition) ? 1 : 0, #condition, __FILE__, __LINE__)

#endif /* AXRT_TESTS_ABI_1_0_CHECK_H_ */
