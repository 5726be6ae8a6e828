/* A client of the installed axrt package: checks that the library it loads
 * matches the headers it was compiled with, then moves bytes through a
 * stream and back. Exits non-zero with the reason on any failure. */
#include <stdio.h>
#include <string.h>

#include <axrt/axrt.h>

#define STR2(x) #x
#define STR(x) STR2(x)

static int failed(const char* what, axrt_status_t status) {
  fprintf(stderr, "consumer: %s failed: %s: %s\n", what,
          axrt_status_code_name(axrt_status_code(status)),
          axrt_status_message(status));
  axrt_status_free(status);
  return 1;
}

static int run(axrt_device_t device) {
  enum { kSize = 4096 };
  static unsigned char src[kSize];
  static unsigned char dst[kSize];
  for (int i = 0; i < kSize; ++i) src[i] = (unsigned char)(i * 7 + 3);

  axrt_buffer_t buffer = NULL;
  axrt_stream_t stream = NULL;
  axrt_status_t status = axrt_buffer_allocate(device, kSize, NULL, &buffer);
  if (status) return failed("axrt_buffer_allocate", status);
  status = axrt_stream_create(device, NULL, &stream);
  if (!status) status = axrt_stream_copy_from_host(stream, src, buffer, 0, kSize);
  if (!status) status = axrt_stream_copy_to_host(stream, buffer, 0, dst, kSize);
  if (!status) status = axrt_stream_synchronize(stream);
  axrt_stream_release(stream);
  axrt_buffer_release(buffer);
  if (status) return failed("copying through a stream", status);
  if (memcmp(src, dst, kSize) != 0) {
    fprintf(stderr, "consumer: the bytes read back differ from those written\n");
    return 1;
  }
  return 0;
}

int main(void) {
  /* The check every client should make: same major, and a library at least
   * as new as the headers. Here both come from one install, so they match. */
  uint32_t version = axrt_version();
  if (version / 1000000u != AXRT_VERSION_MAJOR || version < AXRT_VERSION) {
    fprintf(stderr, "consumer: library %s is older than or incompatible with headers %u\n",
            axrt_version_string(), (unsigned)AXRT_VERSION);
    return 1;
  }
  const char* header_version = STR(AXRT_VERSION_MAJOR) "." STR(
      AXRT_VERSION_MINOR) "." STR(AXRT_VERSION_PATCH);
  if (version != AXRT_VERSION || strcmp(axrt_version_string(), header_version) != 0) {
    fprintf(stderr, "consumer: library %s (%u) differs from headers %s (%u)\n",
            axrt_version_string(), (unsigned)version, header_version,
            (unsigned)AXRT_VERSION);
    return 1;
  }
#ifdef AXRT_CONSUMER_PACKAGE_VERSION
  /* The version the package metadata (CMake or pkg-config) announced. */
  if (strcmp(AXRT_CONSUMER_PACKAGE_VERSION, header_version) != 0) {
    fprintf(stderr, "consumer: package says %s, headers say %s\n",
            AXRT_CONSUMER_PACKAGE_VERSION, header_version);
    return 1;
  }
#endif

  axrt_instance_t instance = NULL;
  axrt_status_t status = axrt_instance_create(NULL, &instance);
  if (status) return failed("axrt_instance_create", status);
  axrt_device_t device = NULL;
  status = axrt_instance_find_device(instance, NULL, &device);
  axrt_instance_release(instance);
  if (status) return failed("axrt_instance_find_device", status);
  int result = run(device);
  axrt_device_release(device);
  if (result == 0) printf("consumer: axrt %s OK\n", axrt_version_string());
  return result;
}
