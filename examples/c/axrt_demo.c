/* axrt demo: lists the drivers and devices of an instance, then moves bytes
 * host -> device -> host through a stream on the default device and checks
 * them. Run it with AXRT_DEVICE=<id> to pick another device.
 *
 * Every axrt call returns NULL or an owned status; fail() prints and frees
 * it, and main() releases what it holds on the way out. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <axrt/axrt.h>

enum {
  kBufferSize = 1 << 20,
  kFillOffset = 256 << 10, /* the part of the buffer the fill overwrites */
  kFillLength = 256 << 10,
};
static const uint32_t kFillPattern = 0xA5C3F00Du;

/* Prints the failure and frees it; returns true when there was one. */
static bool fail(axrt_status_t status, const char* what) {
  if (status == NULL) return false;
  fprintf(stderr, "demo: %s failed: %s: %s\n", what,
          axrt_status_code_name(axrt_status_code(status)),
          axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

static bool list_drivers(axrt_instance_t instance) {
  size_t count = 0;
  if (fail(axrt_instance_driver_count(instance, &count), "axrt_instance_driver_count")) return false;
  printf("drivers (%zu):\n", count);
  for (size_t i = 0; i < count; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    if (fail(axrt_instance_query_driver_info(instance, i, &info), "axrt_instance_query_driver_info")) return false;
    if (info.device_count > 0) {
      printf("  %-6s %" PRIu32 " device(s)\n", info.name, info.device_count);
    } else {
      printf("  %-6s no devices: %s\n", info.name, info.availability);
    }
  }
  return true;
}

static bool list_devices(axrt_instance_t instance) {
  size_t count = 0;
  if (fail(axrt_instance_device_count(instance, &count), "axrt_instance_device_count")) return false;
  printf("devices (%zu):\n", count);
  for (size_t i = 0; i < count; ++i) {
    axrt_device_t device = NULL;
    if (fail(axrt_instance_get_device(instance, i, &device), "axrt_instance_get_device")) return false;
    axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
    bool ok = !fail(axrt_device_query_properties(device, &p), "axrt_device_query_properties");
    axrt_device_release(device);
    if (!ok) return false;
    printf("  %-8s %s\n", p.id, p.name);
    printf("           %" PRIu32 " compute units, %" PRIu64 " MiB, buffers aligned to %" PRIu64
           " bytes, workgroups up to %" PRIu32 " invocations\n",
           p.compute_units, p.total_memory >> 20, p.buffer_alignment,
           p.max_workgroup_invocations);
    if (p.type == AXRT_DEVICE_TYPE_CUDA) {
      printf("           compute capability %" PRId32 ".%" PRId32 "\n",
             p.compute_capability_major, p.compute_capability_minor);
    }
    printf("           %s%s%s\n",
           p.flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY ? "host-visible memory  " : "",
           p.flags & AXRT_DEVICE_FLAG_EVENT_TIMING ? "event timing  " : "",
           p.flags & AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION ? "stream-ordered allocation" : "");
  }
  return true;
}

/* Round trip on `device`: upload, fill a part on the device, download, check. */
static bool round_trip(axrt_device_t device) {
  bool ok = false;
  axrt_buffer_t buffer = NULL;
  axrt_stream_t stream = NULL;
  unsigned char* host_in = malloc(kBufferSize);
  unsigned char* host_out = malloc(kBufferSize);
  if (host_in == NULL || host_out == NULL) {
    fprintf(stderr, "demo: out of host memory\n");
    goto done;
  }
  for (size_t i = 0; i < kBufferSize; ++i) host_in[i] = (unsigned char)(i * 31 + 7);
  memset(host_out, 0, kBufferSize);

  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("demo buffer");
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.next = &label; /* names the buffer in any error message */
  if (fail(axrt_buffer_allocate(device, kBufferSize, &options, &buffer), "axrt_buffer_allocate")) goto done;
  printf("allocated a %d KiB device buffer\n", kBufferSize >> 10);
  if (fail(axrt_stream_create(device, NULL, &stream), "axrt_stream_create")) goto done;

  /* Three operations queued back to back; the stream runs them in order. */
  if (fail(axrt_stream_copy_from_host(stream, host_in, buffer, 0, kBufferSize), "axrt_stream_copy_from_host")) goto done;
  if (fail(axrt_stream_fill_buffer(stream, buffer, kFillOffset, kFillLength, &kFillPattern, sizeof kFillPattern),
           "axrt_stream_fill_buffer")) goto done;
  if (fail(axrt_stream_copy_to_host(stream, buffer, 0, host_out, kBufferSize), "axrt_stream_copy_to_host")) goto done;
  if (fail(axrt_stream_synchronize(stream), "axrt_stream_synchronize")) goto done;
  printf("copied %d KiB host -> device, filled [%d KiB, %d KiB) with 0x%08" PRIX32
         ", copied it back\n", kBufferSize >> 10, kFillOffset >> 10,
         (kFillOffset + kFillLength) >> 10, kFillPattern);

  for (size_t i = 0; i < kBufferSize; ++i) {
    unsigned char expected = host_in[i];
    if (i >= kFillOffset && i < kFillOffset + kFillLength) {
      expected = ((const unsigned char*)&kFillPattern)[(i - kFillOffset) % sizeof kFillPattern];
    }
    if (host_out[i] != expected) {
      fprintf(stderr, "demo: byte %zu reads 0x%02x, expected 0x%02x\n", i, host_out[i], expected);
      goto done;
    }
  }
  printf("checked all %d bytes\n", kBufferSize);
  ok = true;

done:
  axrt_stream_release(stream); /* NULL is a no-op */
  axrt_buffer_release(buffer);
  free(host_in);
  free(host_out);
  return ok;
}

int main(void) {
  /* A client built against major M refuses any other major, and a library
   * older than its headers. */
  uint32_t version = axrt_version();
  printf("axrt %s (headers %d.%d.%d)\n", axrt_version_string(), AXRT_VERSION_MAJOR,
         AXRT_VERSION_MINOR, AXRT_VERSION_PATCH);
  if (version / 1000000u != AXRT_VERSION_MAJOR || version < AXRT_VERSION) {
    fprintf(stderr, "demo: library %s does not match these headers\n", axrt_version_string());
    return 1;
  }

  axrt_instance_t instance = NULL;
  axrt_device_t device = NULL;
  bool ok = false;
  if (fail(axrt_instance_create(NULL, &instance), "axrt_instance_create")) goto done;
  if (!list_drivers(instance) || !list_devices(instance)) goto done;

  /* NULL picks the default device: $AXRT_DEVICE, else cpu:0. */
  if (fail(axrt_instance_find_device(instance, NULL, &device), "axrt_instance_find_device")) goto done;
  axrt_device_properties_t props = AXRT_DEVICE_PROPERTIES_INIT;
  if (fail(axrt_device_query_properties(device, &props), "axrt_device_query_properties")) goto done;
  printf("default device: %s\n", props.id);
  ok = round_trip(device);

done:
  axrt_device_release(device);
  axrt_instance_release(instance);
  if (!ok) return 1;
  printf("demo: OK\n");
  return 0;
}
