/* A client of axrt 1.0, compiled against the frozen 1.0 headers only and
 * run against the library being built: it goes through the API the way an
 * application does (instance, devices, buffers, copies, streams, events,
 * tensors, an executable built, loaded and invoked, DLPack exchange, errors,
 * tracing) and checks every result against values it computes itself.
 *
 * Usage: abi_client_1_0 <scratch directory> */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "axrt/axrt.h"
#include "axrt/dlpack.h"
#include "check.h"
#include "client_executable.h"

/* These are the 1.0 headers, not today's (see CMakeLists.txt). */
_Static_assert(AXRT_VERSION_MAJOR == 1 && AXRT_VERSION_MINOR == 0 && AXRT_VERSION_PATCH == 0,
               "the 1.0 client must compile against the frozen 1.0 headers");

static char g_scratch[4096];

typedef struct path_t {
  char text[sizeof(g_scratch) + 64];
} path_t;

/* The file `name` in the scratch directory. */
static path_t scratch_path(const char* name) {
  path_t path;
  /* Per process: two runs may share the directory. */
  const int n = snprintf(path.text, sizeof(path.text), "%s/%ld.%s", g_scratch, (long)getpid(),
                         name);
  CHECK(n > 0 && (size_t)n < sizeof(path.text));
  return path;
}

static axrt_device_properties_t device_properties(axrt_device_t device) {
  axrt_device_properties_t p = AXRT_DEVICE_PROPERTIES_INIT;
  CHECK_OK(axrt_device_query_properties(device, &p));
  return p;
}

static axrt_buffer_info_t buffer_info(axrt_buffer_t buffer) {
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  CHECK_OK(axrt_buffer_query_info(buffer, &info));
  return info;
}

static axrt_tensor_info_t tensor_info(axrt_tensor_t tensor) {
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  CHECK_OK(axrt_tensor_query_info(tensor, &info));
  return info;
}

static axrt_stream_statistics_t stream_statistics(axrt_device_t device) {
  axrt_stream_statistics_t s = AXRT_STREAM_STATISTICS_INIT;
  CHECK_OK(axrt_device_query_stream_statistics(device, &s));
  return s;
}

/* The host address of element 0 of a host-visible tensor. */
static float* tensor_data(axrt_tensor_t tensor) {
  axrt_buffer_t buffer = NULL;
  CHECK_OK(axrt_tensor_get_buffer(tensor, &buffer));
  void* base = NULL;
  CHECK_OK(axrt_buffer_map(buffer, &base));
  axrt_buffer_release(buffer);
  return (float*)((unsigned char*)base + tensor_info(tensor).byte_offset);
}

static axrt_tensor_t allocate_f32(axrt_device_t device, uint32_t rank, const int64_t* shape) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = rank;
  desc.shape = shape;
  axrt_tensor_t tensor = NULL;
  CHECK_OK(axrt_tensor_allocate(device, &desc, NULL, &tensor));
  return tensor;
}

/* ---------------------------------------------------------------------- */
/* Versions and statuses                                                   */
/* ---------------------------------------------------------------------- */

static void check_version(void) {
  /* base.h: a client of major M refuses another major and relies on minor N
   * only when the library's minor is at least N. */
  const uint32_t version = axrt_version();
  CHECK(version / 1000000u == AXRT_VERSION_MAJOR);
  CHECK(version >= AXRT_MAKE_VERSION(1, 0, 0));
  CHECK(version >= AXRT_VERSION);
  unsigned major = 0;
  unsigned minor = 0;
  unsigned patch = 0;
  CHECK(sscanf(axrt_version_string(), "%u.%u.%u", &major, &minor, &patch) == 3);
  CHECK(AXRT_MAKE_VERSION(major, minor, patch) == version);
  printf("library %s, headers %d.%d.%d\n", axrt_version_string(), AXRT_VERSION_MAJOR,
         AXRT_VERSION_MINOR, AXRT_VERSION_PATCH);
}

static void check_statuses(void) {
  CHECK(axrt_status_create(AXRT_STATUS_CODE_OK, "ignored") == NULL);
  CHECK(axrt_status_code(NULL) == AXRT_STATUS_CODE_OK);
  CHECK(strcmp(axrt_status_message(NULL), "OK") == 0);
  axrt_status_t status = axrt_status_create(AXRT_STATUS_CODE_ABORTED, "the client's reason");
  CHECK(axrt_status_code(status) == AXRT_STATUS_CODE_ABORTED);
  CHECK(strcmp(axrt_status_message(status), "the client's reason") == 0);
  axrt_status_free(status);
  status = axrt_status_create(AXRT_STATUS_CODE_INTERNAL, NULL);
  CHECK(strcmp(axrt_status_message(status), "") == 0);
  axrt_status_free(status);
  axrt_status_free(NULL);
  CHECK(strcmp(axrt_status_code_name(AXRT_STATUS_CODE_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  CHECK(strcmp(axrt_status_code_name(AXRT_STATUS_CODE_DEVICE_LOST), "DEVICE_LOST") == 0);
  CHECK(strcmp(axrt_status_code_name(1000), "UNRECOGNIZED") == 0);
}

/* ---------------------------------------------------------------------- */
/* Instances and devices                                                   */
/* ---------------------------------------------------------------------- */

static axrt_instance_t create_instance(void) {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu";
  axrt_instance_t instance = NULL;
  CHECK_OK(axrt_instance_create(&options, &instance));

  size_t driver_count = 0;
  CHECK_OK(axrt_instance_driver_count(instance, &driver_count));
  CHECK(driver_count == 1);
  axrt_driver_info_t driver = AXRT_DRIVER_INFO_INIT;
  CHECK_OK(axrt_instance_query_driver_info(instance, 0, &driver));
  CHECK(strcmp(driver.name, "cpu") == 0);
  CHECK(driver.device_count >= 1);
  CHECK(driver.availability[0] == '\0');
  CHECK_STATUS(axrt_instance_query_driver_info(instance, 1, &driver),
               AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);

  size_t device_count = 0;
  CHECK_OK(axrt_instance_device_count(instance, &device_count));
  CHECK(device_count == driver.device_count);
  for (size_t i = 0; i < device_count; ++i) {
    axrt_device_t device = NULL;
    CHECK_OK(axrt_instance_get_device(instance, i, &device));
    const axrt_device_properties_t p = device_properties(device);
    CHECK(strcmp(p.driver, "cpu") == 0);
    CHECK(p.type == AXRT_DEVICE_TYPE_CPU);
    CHECK(p.ordinal == i);
    axrt_device_release(device);
  }
  axrt_device_t device = NULL;
  CHECK_STATUS(axrt_instance_get_device(instance, device_count, &device),
               AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);
  /* NOT_FOUND names the devices there are. */
  CHECK_STATUS(axrt_instance_find_device(instance, "cpu:99", &device), AXRT_STATUS_CODE_NOT_FOUND,
               "cpu:0");
  CHECK_STATUS(axrt_instance_create(&options, NULL), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "out_instance");

  /* Every built-in driver: one that finds no hardware says why and is no
   * error. */
  axrt_instance_t all = NULL;
  CHECK_OK(axrt_instance_create(NULL, &all));
  CHECK_OK(axrt_instance_driver_count(all, &driver_count));
  CHECK(driver_count >= 1);
  for (size_t i = 0; i < driver_count; ++i) {
    axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
    CHECK_OK(axrt_instance_query_driver_info(all, i, &info));
    CHECK(info.device_count > 0 || info.availability[0] != '\0');
  }
  axrt_instance_retain(all);
  axrt_instance_release(all);
  axrt_instance_release(all);
  return instance;
}

static axrt_device_t find_cpu(axrt_instance_t instance) {
  axrt_device_t device = NULL;
  CHECK_OK(axrt_instance_find_device(instance, "cpu:0", &device));
  const axrt_device_properties_t p = device_properties(device);
  CHECK(strcmp(p.id, "cpu:0") == 0);
  CHECK(p.ordinal == 0);
  CHECK((p.flags & AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY) != 0);
  CHECK(p.compute_units >= 1);
  CHECK(p.total_memory > 0);
  CHECK(p.buffer_alignment >= 256);
  CHECK(p.max_buffer_alignment >= 4096);
  CHECK(p.max_workgroup_invocations >= 1);
  axrt_device_retain(device);
  axrt_device_release(device);
  return device;
}

/* ---------------------------------------------------------------------- */
/* Buffers, copies and streams                                             */
/* ---------------------------------------------------------------------- */

typedef struct host_calls_t {
  int calls;
  int failed_calls; /* calls told of a stream failure */
} host_calls_t;

static axrt_status_t count_host_call(void* user_data, axrt_status_t stream_status) {
  host_calls_t* calls = (host_calls_t*)user_data;
  ++calls->calls;
  if (stream_status != NULL) ++calls->failed_calls;
  return NULL;
}

static axrt_status_t fail_host_call(void* user_data, axrt_status_t stream_status) {
  (void)user_data;
  (void)stream_status;
  return axrt_status_create(AXRT_STATUS_CODE_ABORTED, "the client's host function stops");
}

enum { kBufferSize = 1024, kPinnedSize = 512 };

static void check_buffers_and_streams(axrt_device_t device) {
  const axrt_stream_statistics_t before = stream_statistics(device);

  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("client buffer");
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.next = &label;
  options.alignment = 4096;
  axrt_buffer_t buffer = NULL;
  CHECK_OK(axrt_buffer_allocate(device, kBufferSize, &options, &buffer));
  axrt_buffer_info_t info = buffer_info(buffer);
  CHECK(info.size == kBufferSize);
  CHECK(info.offset == 0);
  CHECK(info.allocation_size >= kBufferSize);
  CHECK(info.alignment >= 4096);
  CHECK(info.device_address % 4096 == 0);
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  CHECK(info.host_visible);
  CHECK(!info.deallocated);
  axrt_device_t owner = NULL;
  CHECK_OK(axrt_buffer_get_device(buffer, &owner));
  CHECK(strcmp(device_properties(owner).id, "cpu:0") == 0);
  axrt_device_release(owner);

  axrt_buffer_t view = NULL;
  CHECK_OK(axrt_buffer_create_view(buffer, 256, 256, &view));
  info = buffer_info(view);
  CHECK(info.size == 256 && info.offset == 256);
  CHECK_STATUS(axrt_buffer_create_view(buffer, 1000, 100, &view), AXRT_STATUS_CODE_OUT_OF_RANGE,
               NULL);

  options = (axrt_buffer_options_t)AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
  axrt_buffer_t pinned = NULL;
  CHECK_OK(axrt_buffer_allocate(device, kPinnedSize, &options, &pinned));
  CHECK(buffer_info(pinned).memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
  CHECK(buffer_info(pinned).host_visible);

  axrt_debug_label_t stream_label = AXRT_DEBUG_LABEL_INIT("client stream");
  axrt_stream_options_t stream_options = AXRT_STREAM_OPTIONS_INIT;
  stream_options.next = &stream_label;
  axrt_stream_t stream = NULL;
  CHECK_OK(axrt_stream_create(device, &stream_options, &stream));

  /* Upload, fill the view, copy a part to pinned memory, a 2-D block and the
   * whole buffer back to the host: queued back to back, run in order. */
  unsigned char source[kBufferSize];
  for (size_t i = 0; i < kBufferSize; ++i) source[i] = (unsigned char)(i * 7 + 3);
  const uint32_t pattern = 0xC0FFEE11u;
  unsigned char whole[kBufferSize];
  unsigned char block[4][16];
  memset(whole, 0, sizeof(whole));
  memset(block, 0, sizeof(block));
  host_calls_t calls = {0, 0};
  CHECK_OK(axrt_stream_copy_from_host(stream, source, buffer, 0, kBufferSize));
  CHECK_OK(axrt_stream_fill_buffer(stream, view, 0, 256, &pattern, sizeof(pattern)));
  CHECK_OK(axrt_stream_copy_buffer(stream, buffer, 128, pinned, 0, kPinnedSize));
  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  copy.src.buffer = buffer;
  copy.src.offset = 8;
  copy.src.pitch = 64;
  copy.dst.host_pointer = block;
  copy.dst.pitch = 16;
  copy.width = 16;
  copy.height = 4;
  CHECK_OK(axrt_stream_copy_2d(stream, &copy));
  CHECK_OK(axrt_stream_copy_to_host(stream, buffer, 0, whole, kBufferSize));
  CHECK_OK(axrt_stream_launch_host_func(stream, count_host_call, &calls));
  CHECK_OK(axrt_stream_copy_buffer(stream, buffer, 0, buffer, 0, 0)); /* zero bytes: valid */
  CHECK_OK(axrt_stream_synchronize(stream));
  bool idle = false;
  CHECK_OK(axrt_stream_query(stream, &idle));
  CHECK(idle);
  CHECK(calls.calls == 1 && calls.failed_calls == 0);

  unsigned char expected[kBufferSize];
  memcpy(expected, source, kBufferSize);
  for (size_t i = 256; i < 512; i += sizeof(pattern)) memcpy(expected + i, &pattern, 4);
  CHECK(memcmp(whole, expected, kBufferSize) == 0);
  void* pinned_data = NULL;
  CHECK_OK(axrt_buffer_map(pinned, &pinned_data));
  CHECK(memcmp(pinned_data, expected + 128, kPinnedSize) == 0);
  for (size_t row = 0; row < 4; ++row) CHECK(memcmp(block[row], expected + 8 + 64 * row, 16) == 0);
  void* mapped = NULL;
  CHECK_OK(axrt_buffer_map(buffer, &mapped));
  CHECK((uintptr_t)mapped % 4096 == 0);
  CHECK(memcmp(mapped, expected, kBufferSize) == 0);

  /* Argument errors are returned at once and name the labelled object. */
  CHECK_STATUS(axrt_stream_copy_to_host(stream, buffer, 1000, whole, 100),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "client buffer");
  CHECK_STATUS(axrt_stream_fill_buffer(stream, buffer, 1, 4, &pattern, 4),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
  CHECK_STATUS(axrt_stream_copy_from_host(stream, source, (axrt_buffer_t)stream, 0, 4),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "stream handle");
  void* native = NULL;
  CHECK_STATUS(axrt_stream_get_native_handle(stream, &native), AXRT_STATUS_CODE_UNIMPLEMENTED,
               NULL);

  /* Stream-ordered allocation. */
  axrt_buffer_t transient = NULL;
  CHECK_OK(axrt_stream_allocate_buffer(stream, 64, NULL, &transient));
  const uint8_t byte = 0x5A;
  unsigned char out[64];
  CHECK_OK(axrt_stream_fill_buffer(stream, transient, 0, 64, &byte, 1));
  CHECK_OK(axrt_stream_copy_to_host(stream, transient, 0, out, 64));
  CHECK_OK(axrt_stream_deallocate_buffer(stream, transient));
  CHECK_OK(axrt_stream_synchronize(stream));
  for (size_t i = 0; i < 64; ++i) CHECK(out[i] == 0x5A);
  CHECK(buffer_info(transient).deallocated);
  CHECK_STATUS(axrt_buffer_map(transient, &mapped), AXRT_STATUS_CODE_FAILED_PRECONDITION, NULL);
  CHECK_STATUS(axrt_stream_copy_to_host(stream, transient, 0, out, 64),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, NULL);
  axrt_buffer_release(transient);

  /* A host function's failure fails its stream, sticky; later host
   * functions still run and are told. */
  axrt_stream_t failing = NULL;
  CHECK_OK(axrt_stream_create(device, NULL, &failing));
  host_calls_t after = {0, 0};
  CHECK_OK(axrt_stream_launch_host_func(failing, fail_host_call, NULL));
  CHECK_OK(axrt_stream_copy_to_host(failing, buffer, 0, whole, 16));
  CHECK_OK(axrt_stream_launch_host_func(failing, count_host_call, &after));
  CHECK_STATUS(axrt_stream_synchronize(failing), AXRT_STATUS_CODE_ABORTED,
               "the client's host function stops");
  CHECK_STATUS(axrt_stream_query(failing, &idle), AXRT_STATUS_CODE_ABORTED, NULL);
  CHECK(after.calls == 1 && after.failed_calls == 1);
  axrt_stream_release(failing);

  const axrt_stream_statistics_t stats = stream_statistics(device);
  CHECK(stats.streams_created >= before.streams_created + 2);
  CHECK(stats.copies >= before.copies + 5);
  CHECK(stats.fills >= before.fills + 2);
  CHECK(stats.host_functions >= before.host_functions + 3);
  CHECK(stats.deallocations >= before.deallocations + 1);
  CHECK(stats.stream_failures >= before.stream_failures + 1);
  axrt_pool_statistics_t pool = AXRT_POOL_STATISTICS_INIT;
  CHECK_OK(axrt_device_query_pool_statistics(device, &pool));
  CHECK(pool.bytes_in_use >= kBufferSize);
  CHECK(pool.allocation_count >= 2);

  axrt_buffer_retain(buffer);
  axrt_buffer_release(buffer);
  axrt_stream_release(stream);
  axrt_buffer_release(view);
  axrt_buffer_release(pinned);
  axrt_buffer_release(buffer);
  /* Released handles are reported by name, not dereferenced. */
  CHECK_STATUS(axrt_buffer_map(buffer, &mapped), AXRT_STATUS_CODE_FAILED_PRECONDITION,
               "released handle");
  CHECK_OK(axrt_device_synchronize(device));
  CHECK_OK(axrt_device_trim_pool(device, 0));
}

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static void check_events(axrt_device_t device) {
  axrt_stream_t producer = NULL;
  axrt_stream_t consumer = NULL;
  CHECK_OK(axrt_stream_create(device, NULL, &producer));
  CHECK_OK(axrt_stream_create(device, NULL, &consumer));
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("client event");
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.next = &label;
  axrt_event_t start = NULL;
  axrt_event_t end = NULL;
  CHECK_OK(axrt_event_create(device, &options, &start));
  CHECK_OK(axrt_event_create(device, NULL, &end));

  bool complete = false;
  CHECK_STATUS(axrt_event_query(start, &complete), AXRT_STATUS_CODE_FAILED_PRECONDITION, NULL);
  CHECK_STATUS(axrt_event_wait(start, 0), AXRT_STATUS_CODE_FAILED_PRECONDITION, NULL);
  CHECK_STATUS(axrt_stream_wait_event(consumer, start), AXRT_STATUS_CODE_FAILED_PRECONDITION,
               NULL);

  /* The consumer reads what the producer wrote, ordered by the event. */
  axrt_buffer_t buffer = NULL;
  CHECK_OK(axrt_buffer_allocate(device, 4096, NULL, &buffer));
  uint32_t values[1024];
  uint32_t read_back[1024];
  for (uint32_t i = 0; i < 1024; ++i) values[i] = i * 2654435761u;
  memset(read_back, 0, sizeof(read_back));
  CHECK_OK(axrt_stream_record_event(producer, start));
  CHECK_OK(axrt_stream_copy_from_host(producer, values, buffer, 0, sizeof(values)));
  CHECK_OK(axrt_stream_record_event(producer, end));
  CHECK_OK(axrt_stream_wait_event(consumer, end));
  CHECK_OK(axrt_stream_copy_to_host(consumer, buffer, 0, read_back, sizeof(read_back)));
  CHECK_OK(axrt_stream_synchronize(consumer));
  CHECK(memcmp(values, read_back, sizeof(values)) == 0);
  CHECK_OK(axrt_event_wait(end, AXRT_TIMEOUT_INFINITE));
  CHECK_OK(axrt_event_wait(end, 0));
  CHECK_OK(axrt_event_query(end, &complete));
  CHECK(complete);
  int64_t nanoseconds = -1;
  CHECK_OK(axrt_event_elapsed_time(start, end, &nanoseconds));
  CHECK(nanoseconds >= 0);
  CHECK_STATUS(axrt_event_enqueue_native_wait(end, (void*)1), AXRT_STATUS_CODE_UNIMPLEMENTED,
               NULL);

  /* Without timing there is no elapsed time. */
  options = (axrt_event_options_t)AXRT_EVENT_OPTIONS_INIT;
  options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  axrt_event_t untimed = NULL;
  CHECK_OK(axrt_event_create(device, &options, &untimed));
  CHECK_OK(axrt_stream_record_event(producer, untimed));
  CHECK_OK(axrt_event_wait(untimed, AXRT_TIMEOUT_INFINITE));
  CHECK_STATUS(axrt_event_elapsed_time(start, untimed, &nanoseconds),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, NULL);

  /* A failure travels along the event to the stream that waits on it. */
  CHECK_OK(axrt_stream_launch_host_func(producer, fail_host_call, NULL));
  CHECK_OK(axrt_stream_record_event(producer, end));
  CHECK_STATUS(axrt_event_wait(end, AXRT_TIMEOUT_INFINITE), AXRT_STATUS_CODE_ABORTED, NULL);
  CHECK_OK(axrt_stream_wait_event(consumer, end));
  CHECK_STATUS(axrt_stream_synchronize(consumer), AXRT_STATUS_CODE_ABORTED, NULL);

  axrt_event_retain(start);
  axrt_event_release(start);
  axrt_event_release(start);
  axrt_event_release(end);
  axrt_event_release(untimed);
  axrt_buffer_release(buffer);
  axrt_stream_release(producer);
  axrt_stream_release(consumer);
}

/* ---------------------------------------------------------------------- */
/* Tensors                                                                 */
/* ---------------------------------------------------------------------- */

static void check_tensors(axrt_device_t device) {
  const int64_t shape[2] = {2, 3};
  axrt_tensor_t matrix = allocate_f32(device, 2, shape);
  axrt_tensor_info_t info = tensor_info(matrix);
  CHECK(info.dtype == AXRT_DTYPE_FLOAT32 && info.rank == 2);
  CHECK(info.shape[0] == 2 && info.shape[1] == 3);
  CHECK(info.strides[0] == 3 && info.strides[1] == 1);
  CHECK(info.element_count == 6 && info.byte_size == 24);
  CHECK(info.contiguous && info.byte_offset == 0);
  CHECK(info.flags == 0);

  /* The transpose of the same memory, as a strided tensor over its buffer. */
  axrt_buffer_t buffer = NULL;
  CHECK_OK(axrt_tensor_get_buffer(matrix, &buffer));
  const int64_t transposed_shape[2] = {3, 2};
  const int64_t transposed_strides[2] = {1, 3};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = transposed_shape;
  desc.strides = transposed_strides;
  axrt_tensor_t transposed = NULL;
  CHECK_OK(axrt_tensor_create(buffer, &desc, &transposed));
  info = tensor_info(transposed);
  CHECK(!info.contiguous && info.element_count == 6);
  CHECK(info.strides[0] == 1 && info.strides[1] == 3);
  CHECK(tensor_data(transposed) == tensor_data(matrix));

  /* A scalar at a byte offset, and what does not fit. */
  desc = (axrt_tensor_desc_t)AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.byte_offset = 20;
  axrt_tensor_t last = NULL;
  CHECK_OK(axrt_tensor_create(buffer, &desc, &last));
  CHECK(tensor_info(last).rank == 0 && tensor_info(last).element_count == 1);
  CHECK(tensor_data(last) == tensor_data(matrix) + 5);
  desc.byte_offset = 24;
  axrt_tensor_t bad = NULL;
  CHECK_STATUS(axrt_tensor_create(buffer, &desc, &bad), AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);
  desc.byte_offset = 0;
  desc.dtype = AXRT_DTYPE_INVALID;
  CHECK_STATUS(axrt_tensor_create(buffer, &desc, &bad), AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = AXRT_TENSOR_MAX_RANK + 1;
  CHECK_STATUS(axrt_tensor_create(buffer, &desc, &bad), AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);

  CHECK(axrt_dtype_bit_width(AXRT_DTYPE_FLOAT32) == 32);
  CHECK(axrt_dtype_bit_width(AXRT_DTYPE_INT4) == 4);
  CHECK(axrt_dtype_bit_width(AXRT_DTYPE_INVALID) == 0);
  CHECK(strcmp(axrt_dtype_name(AXRT_DTYPE_FLOAT32), "f32") == 0);
  CHECK(strcmp(axrt_dtype_name(AXRT_DTYPE_INVALID), "invalid") == 0);

  axrt_tensor_retain(matrix);
  axrt_tensor_release(matrix);
  axrt_tensor_release(matrix);
  axrt_tensor_release(transposed);
  axrt_tensor_release(last);
  axrt_buffer_release(buffer);
}

/* ---------------------------------------------------------------------- */
/* DLPack producers                                                        */
/* ---------------------------------------------------------------------- */

/* A tensor of the client's own memory, lent to axrt through DLPack. */
typedef struct client_tensor_t {
  DLManagedTensorVersioned managed;
  int64_t shape[1];
  float* data;
  int deleted;
} client_tensor_t;

static void client_tensor_deleter(DLManagedTensorVersioned* self) {
  ++((client_tensor_t*)self->manager_ctx)->deleted;
}

static void describe_client_tensor(client_tensor_t* t, int64_t count, uint64_t flags) {
  memset(&t->managed, 0, sizeof(t->managed));
  t->shape[0] = count;
  t->managed.version.major = 1;
  t->managed.version.minor = 0;
  t->managed.manager_ctx = t;
  t->managed.deleter = client_tensor_deleter;
  t->managed.flags = flags;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.device.device_id = 0;
  t->managed.dl_tensor.ndim = 1;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = NULL;
  t->managed.dl_tensor.byte_offset = 0;
}

/* ---------------------------------------------------------------------- */
/* Executables                                                             */
/* ---------------------------------------------------------------------- */

static axrt_executable_info_t executable_info(axrt_executable_t executable) {
  axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
  CHECK_OK(axrt_executable_query_info(executable, &info));
  return info;
}

static void check_executable_description(axrt_executable_t executable) {
  const axrt_executable_info_t info = executable_info(executable);
  CHECK(strcmp(info.producer_name, CLIENT_PRODUCER_NAME) == 0);
  CHECK(strcmp(info.producer_version, "1.0") == 0);
  CHECK(info.function_count == 3);
  CHECK(info.kernel_count == 4);
  CHECK(info.constant_count == 2);
  CHECK(info.constant_bytes == 2 * sizeof(kAffineW));

  const char* key = NULL;
  const char* value = NULL;
  size_t value_size = 0;
  CHECK_OK(axrt_executable_get_metadata(executable, 0, &key, &value, &value_size));
  CHECK(strcmp(key, "client") == 0 && strcmp(value, "abi 1.0") == 0 && value_size == 7);
  CHECK_STATUS(axrt_executable_get_metadata(executable, 1, &key, &value, NULL),
               AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);
  CHECK_OK(axrt_executable_find_metadata(executable, "client", &value, NULL));
  CHECK(strcmp(value, "abi 1.0") == 0);
  CHECK_STATUS(axrt_executable_find_metadata(executable, "missing", &value, NULL),
               AXRT_STATUS_CODE_NOT_FOUND, NULL);

  axrt_device_t device = NULL;
  CHECK_OK(axrt_executable_get_device(executable, &device));
  CHECK(strcmp(device_properties(device).id, "cpu:0") == 0);
  axrt_device_release(device);

  axrt_function_t function = NULL;
  CHECK_OK(axrt_executable_get_function(executable, 0, &function));
  axrt_function_info_t function_info = AXRT_FUNCTION_INFO_INIT;
  CHECK_OK(axrt_function_query_info(function, &function_info));
  CHECK(strcmp(function_info.name, "affine") == 0);
  CHECK(function_info.input_count == 1 && function_info.output_count == 1);
  CHECK(function_info.symbol_count == 0 && function_info.command_count == 2);
  CHECK(function_info.arena_size >= 16);
  axrt_function_release(function);
  CHECK_STATUS(axrt_executable_get_function(executable, 3, &function),
               AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);
  /* NOT_FOUND lists the names there are. */
  CHECK_STATUS(axrt_executable_find_function(executable, "missing", &function),
               AXRT_STATUS_CODE_NOT_FOUND, "scale_shift");

  CHECK_OK(axrt_executable_find_function(executable, "scale_shift", &function));
  CHECK_OK(axrt_function_query_info(function, &function_info));
  CHECK(function_info.input_count == 1 && function_info.output_count == 2);
  CHECK(function_info.symbol_count == 1 && function_info.command_count == 2);
  axrt_argument_info_t argument = AXRT_ARGUMENT_INFO_INIT;
  CHECK_OK(axrt_function_query_argument(function, AXRT_ARGUMENT_KIND_INPUT, 0, &argument));
  CHECK(strcmp(argument.name, "x") == 0 && argument.dtype == AXRT_DTYPE_FLOAT32);
  CHECK(argument.rank == 1 && argument.dims[0] == -1 && argument.dim_symbols[0] == 0);
  CHECK(argument.flags == 0);
  CHECK_OK(axrt_function_query_argument(function, AXRT_ARGUMENT_KIND_OUTPUT, 1, &argument));
  CHECK(strcmp(argument.name, "z") == 0);
  CHECK_STATUS(axrt_function_query_argument(function, AXRT_ARGUMENT_KIND_OUTPUT, 2, &argument),
               AXRT_STATUS_CODE_OUT_OF_RANGE, NULL);
  const char* symbol = NULL;
  uint64_t upper_bound = 0;
  CHECK_OK(axrt_function_query_symbol(function, 0, &symbol, &upper_bound));
  CHECK(strcmp(symbol, "n") == 0 && upper_bound == 64);
  axrt_function_retain(function);
  axrt_function_release(function);
  axrt_function_release(function);
}

/* "affine" with a tensor the client supplies and with one axrt allocates. */
static void check_affine(axrt_device_t device, axrt_executable_t executable,
                         axrt_stream_t stream) {
  axrt_function_t affine = NULL;
  CHECK_OK(axrt_executable_find_function(executable, "affine", &affine));
  const int64_t four[1] = {4};
  const float x[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float expected[4];
  for (int i = 0; i < 4; ++i) expected[i] = x[i] * kAffineW[i] + kAffineB[i];

  axrt_tensor_t input = allocate_f32(device, 1, four);
  axrt_tensor_t output = allocate_f32(device, 1, four);
  axrt_buffer_t input_buffer = NULL;
  CHECK_OK(axrt_tensor_get_buffer(input, &input_buffer));
  CHECK_OK(axrt_stream_copy_from_host(stream, x, input_buffer, 0, sizeof(x)));
  axrt_buffer_release(input_buffer);

  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = AXRT_INVOKE_FLAG_CHECK_FINITE;
  CHECK_OK(axrt_function_invoke(affine, stream, &input, 1, &output, 1, &options));
  axrt_tensor_t allocated = NULL;
  CHECK_OK(axrt_function_invoke(affine, stream, &input, 1, &allocated, 1, NULL));
  CHECK(allocated != NULL);
  float result[4] = {0, 0, 0, 0};
  axrt_buffer_t output_buffer = NULL;
  CHECK_OK(axrt_tensor_get_buffer(output, &output_buffer));
  CHECK_OK(axrt_stream_copy_to_host(stream, output_buffer, 0, result, sizeof(result)));
  axrt_buffer_release(output_buffer);
  CHECK_OK(axrt_stream_synchronize(stream));
  for (int i = 0; i < 4; ++i) CHECK(result[i] == expected[i]);
  const float* allocated_data = tensor_data(allocated);
  for (int i = 0; i < 4; ++i) CHECK(allocated_data[i] == expected[i]);

  /* Errors are returned before anything is queued, naming the function and
   * the argument. */
  const int64_t five[1] = {5};
  axrt_tensor_t wrong = allocate_f32(device, 1, five);
  CHECK_STATUS(axrt_function_invoke(affine, stream, &wrong, 1, &output, 1, NULL),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "affine");
  CHECK_STATUS(axrt_function_invoke(affine, stream, &input, 0, &output, 1, NULL),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
  axrt_tensor_release(wrong);
  axrt_tensor_release(allocated);
  axrt_tensor_release(output);
  axrt_tensor_release(input);
  axrt_function_release(affine);
}

/* "scale_shift" over the client's own memory, lent through DLPack, and its
 * outputs handed back the same way. */
static void check_scale_shift(axrt_instance_t instance, axrt_executable_t executable,
                              axrt_stream_t stream) {
  enum { kN = 37 };
  axrt_function_t function = NULL;
  CHECK_OK(axrt_executable_find_function(executable, "scale_shift", &function));

  client_tensor_t x;
  x.data = malloc(kN * sizeof(float));
  CHECK(x.data != NULL);
  x.deleted = 0;
  for (int i = 0; i < kN; ++i) x.data[i] = (float)i * 0.25f - 3.0f;
  describe_client_tensor(&x, kN, 0);
  axrt_tensor_t input = NULL;
  CHECK_OK(axrt_tensor_import_dlpack_versioned(instance, &x.managed, &input));
  CHECK(tensor_data(input) == x.data);

  axrt_tensor_t outputs[2] = {NULL, NULL};
  CHECK_OK(axrt_function_invoke(function, stream, &input, 1, outputs, 2, NULL));
  CHECK_OK(axrt_stream_synchronize(stream));
  const float* y = tensor_data(outputs[0]);
  const float* z = tensor_data(outputs[1]);
  for (int i = 0; i < kN; ++i) {
    CHECK(y[i] == CLIENT_SCALE_SHIFT_ALPHA * x.data[i] + CLIENT_LIBRARY_SHIFT);
    CHECK(z[i] == x.data[i]);
  }

  /* A symbol beyond its bound is refused. */
  client_tensor_t too_long;
  too_long.data = calloc(65, sizeof(float));
  CHECK(too_long.data != NULL);
  too_long.deleted = 0;
  describe_client_tensor(&too_long, 65, 0);
  axrt_tensor_t long_input = NULL;
  CHECK_OK(axrt_tensor_import_dlpack_versioned(instance, &too_long.managed, &long_input));
  axrt_tensor_t unused[2] = {NULL, NULL};
  CHECK_STATUS(axrt_function_invoke(function, stream, &long_input, 1, unused, 2, NULL),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "scale_shift");
  CHECK(unused[0] == NULL && unused[1] == NULL);
  axrt_tensor_release(long_input);
  CHECK(too_long.deleted == 1);
  free(too_long.data);

  /* y out through versioned DLPack and back in: the same memory. */
  DLManagedTensorVersioned* exported = NULL;
  CHECK_OK(axrt_tensor_export_dlpack_versioned(outputs[0], AXRT_DLPACK_FLAG_NONE, &exported));
  CHECK(exported->version.major == AXRT_DLPACK_MAJOR_VERSION);
  CHECK(exported->flags == 0);
  const DLTensor* dl = &exported->dl_tensor;
  CHECK(dl->device.device_type == kDLCPU && dl->device.device_id == 0);
  CHECK(dl->dtype.code == kDLFloat && dl->dtype.bits == 32 && dl->dtype.lanes == 1);
  CHECK(dl->ndim == 1 && dl->shape[0] == kN && dl->strides[0] == 1);
  CHECK((const float*)((const unsigned char*)dl->data + dl->byte_offset) == y);
  axrt_tensor_t round_trip = NULL;
  CHECK_OK(axrt_tensor_import_dlpack_versioned(instance, exported, &round_trip));
  CHECK(tensor_data(round_trip) == y);
  CHECK(tensor_info(round_trip).rank == 1 && tensor_info(round_trip).shape[0] == kN);
  axrt_tensor_release(outputs[0]);
  CHECK(tensor_data(round_trip)[kN - 1] ==
        CLIENT_SCALE_SHIFT_ALPHA * x.data[kN - 1] + CLIENT_LIBRARY_SHIFT);
  axrt_tensor_release(round_trip); /* runs the export's deleter */

  /* z out read-only, and through the legacy form, deleted by the client. */
  CHECK_OK(axrt_tensor_export_dlpack_versioned(outputs[1], AXRT_DLPACK_FLAG_READ_ONLY, &exported));
  CHECK((exported->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  axrt_tensor_t read_only = NULL;
  CHECK_OK(axrt_tensor_import_dlpack_versioned(instance, exported, &read_only));
  CHECK((tensor_info(read_only).flags & AXRT_TENSOR_FLAG_READ_ONLY) != 0);
  axrt_tensor_t read_only_outputs[2] = {NULL, read_only};
  CHECK_STATUS(axrt_function_invoke(function, stream, &input, 1, read_only_outputs, 2, NULL),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, "read-only");
  axrt_tensor_release(read_only);
  DLManagedTensor* legacy = NULL;
  CHECK_OK(axrt_tensor_export_dlpack(outputs[1], &legacy));
  CHECK((const float*)((const unsigned char*)legacy->dl_tensor.data +
                       legacy->dl_tensor.byte_offset) == z);
  axrt_tensor_release(outputs[1]);
  CHECK(((const float*)((const unsigned char*)legacy->dl_tensor.data +
                        legacy->dl_tensor.byte_offset))[3] == x.data[3]);
  legacy->deleter(legacy);

  DLDataType dtype;
  CHECK_OK(axrt_dtype_to_dlpack(AXRT_DTYPE_FLOAT32, &dtype));
  CHECK(dtype.code == kDLFloat && dtype.bits == 32 && dtype.lanes == 1);
  CHECK_STATUS(axrt_dtype_to_dlpack(AXRT_DTYPE_INVALID, &dtype), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               NULL);

  /* The import calls the client's deleter once, when its memory goes. */
  CHECK(x.deleted == 0);
  axrt_tensor_release(input);
  CHECK(x.deleted == 1);
  free(x.data);
  axrt_function_release(function);
}

/* A kernel's failure fails its stream with the kernel's message. */
static void check_failing_kernel(axrt_device_t device, axrt_executable_t executable) {
  axrt_function_t function = NULL;
  CHECK_OK(axrt_executable_find_function(executable, "fail", &function));
  axrt_stream_t stream = NULL;
  CHECK_OK(axrt_stream_create(device, NULL, &stream));
  const int64_t one[1] = {1};
  axrt_tensor_t input = allocate_f32(device, 1, one);
  axrt_tensor_t output = NULL;
  CHECK_OK(axrt_function_invoke(function, stream, &input, 1, &output, 1, NULL));
  axrt_event_t event = NULL;
  CHECK_OK(axrt_event_create(device, NULL, &event));
  CHECK_OK(axrt_stream_record_event(stream, event));
  CHECK_STATUS(axrt_stream_synchronize(stream), AXRT_STATUS_CODE_INTERNAL, CLIENT_FAIL_MESSAGE);
  CHECK_STATUS(axrt_event_wait(event, AXRT_TIMEOUT_INFINITE), AXRT_STATUS_CODE_INTERNAL,
               CLIENT_FAIL_MESSAGE);
  axrt_event_release(event);
  axrt_tensor_release(output);
  axrt_tensor_release(input);
  axrt_stream_release(stream);
  axrt_function_release(function);
}

static void check_executables(axrt_instance_t instance, axrt_device_t device) {
  /* The client's kernel library, once per name. */
  CHECK_OK(axrt_instance_register_kernel_library(instance, client_kernel_library()));
  CHECK_STATUS(axrt_instance_register_kernel_library(instance, client_kernel_library()),
               AXRT_STATUS_CODE_ALREADY_EXISTS, NULL);

  const path_t axe_path = scratch_path("client_1_0.axe");
  const char* path = axe_path.text;
  void* data = NULL;
  size_t size = 0;
  CHECK_OK(build_client_executable(path, &data, &size));
  CHECK(size > 0);

  /* From memory, labelled, with checksums verified; then from the file. */
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("client executable");
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.next = &label;
  options.flags = AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS;
  axrt_executable_t from_memory = NULL;
  CHECK_OK(axrt_executable_load_memory(device, data, size, &options, &from_memory));
  CHECK(strcmp(executable_info(from_memory).name, "client executable") == 0);
  CHECK(client_library_counters()->init_calls == 1);
  axrt_executable_t from_file = NULL;
  CHECK_OK(axrt_executable_load_file(device, path, NULL, &from_file));
  CHECK(strstr(executable_info(from_file).name, "client_1_0.axe") != NULL);
  CHECK(client_library_counters()->init_calls == 1); /* once per device */
  CHECK(client_library_counters()->bad_contexts == 0);
  check_executable_description(from_memory);
  check_executable_description(from_file);

  /* Broken and missing files are refused with the cause. */
  axrt_executable_t broken = NULL;
  CHECK_STATUS(axrt_executable_load_memory(device, data, 16, NULL, &broken),
               AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
  axrt_axe_memory_free(data);
  const path_t missing = scratch_path("missing.axe");
  CHECK_STATUS(axrt_executable_load_file(device, missing.text, NULL, &broken),
               AXRT_STATUS_CODE_NOT_FOUND, "missing.axe");
  CHECK(broken == NULL);

  const axrt_stream_statistics_t before = stream_statistics(device);
  axrt_stream_t stream = NULL;
  CHECK_OK(axrt_stream_create(device, NULL, &stream));

  /* A trace of the calls, with a range of the client's own. */
  const path_t trace_path = scratch_path("client_1_0.trace.json");
  axrt_trace_options_t trace = AXRT_TRACE_OPTIONS_INIT;
  trace.path = trace_path.text;
  CHECK_OK(axrt_instance_trace_start(instance, &trace));
  CHECK(axrt_trace_is_active());
  CHECK_OK(axrt_trace_range_begin("client range"));
  check_affine(device, from_memory, stream);
  axrt_trace_range_end();
  check_scale_shift(instance, from_file, stream);
  axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
  CHECK_OK(axrt_instance_trace_stop(instance, &result));
  CHECK(!axrt_trace_is_active());
  CHECK(result.events > 0 && result.bytes_written > 0);

  const axrt_stream_statistics_t after = stream_statistics(device);
  CHECK(after.function_calls >= before.function_calls + 3);
  CHECK(after.dispatches >= before.dispatches + 5);

  check_failing_kernel(device, from_file);

  axrt_stream_release(stream);
  axrt_executable_retain(from_file);
  axrt_executable_release(from_file);
  axrt_executable_release(from_file);
  CHECK(client_library_counters()->deinit_calls == 0); /* from_memory still uses it */
  axrt_executable_release(from_memory);
  CHECK(client_library_counters()->deinit_calls == 1);
}

int main(int argc, char** argv) {
  if (argc != 2 || strlen(argv[1]) >= sizeof(g_scratch)) {
    fprintf(stderr, "usage: %s <scratch directory>\n", argv[0]);
    return 2;
  }
  strcpy(g_scratch, argv[1]);
  check_version();
  check_statuses();
  axrt_instance_t instance = create_instance();
  axrt_device_t device = find_cpu(instance);
  check_buffers_and_streams(device);
  check_events(device);
  check_tensors(device);
  check_executables(instance, device);
  axrt_device_release(device);
  axrt_instance_release(instance);
  printf("the 1.0 client ran against axrt %s\n", axrt_version_string());
  return 0;
}
