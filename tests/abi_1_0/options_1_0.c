/* Options and query structs of other sizes than this library's, as clients
 * built against older and newer headers pass them, checked against the
 * convention of axrt/base.h ("Options structs and extension chains"):
 *   - a smaller struct (an older header) is accepted and the fields it does
 *     not reach take their defaults, whatever bytes lie beyond it;
 *   - a larger struct (a newer header) is accepted when the bytes this
 *     library does not know are zero, and is UNIMPLEMENTED otherwise;
 *   - a struct_size below the 16-byte header, or one no version of the
 *     struct has (not a multiple of sizeof(size_t)), is INVALID_ARGUMENT;
 *   - query structs are filled up to struct_size (at most this library's
 *     struct), and bytes beyond struct_size are left as they were;
 *   - arrays of builder structs are read with the stride of their first
 *     element's struct_size (axrt/format.h);
 *   - an extension type a function does not take is UNIMPLEMENTED naming the
 *     type; a cycle, or an extension smaller than its header, is
 *     INVALID_ARGUMENT.
 * Built like client_1_0.c, against the frozen 1.0 headers only. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "axrt/axrt.h"
#include "check.h"
#include "client_executable.h"

_Static_assert(AXRT_VERSION_MAJOR == 1 && AXRT_VERSION_MINOR == 0,
               "the 1.0 client must compile against the frozen 1.0 headers");

/* Bytes a newer header appends in these checks. */
enum { kFutureBytes = 16 };
/* Where a newer header's non-zero bytes go: past what today's library knows
 * of any struct (they grow in later minors: axrt_invoke_options_t took 16
 * bytes more in 1.x), which a 1.0 client cannot know otherwise. */
enum { kBeyondBytes = 64 };
/* What the library must leave alone in a caller's query struct. */
enum { kUntouched = 0xA5 };

static size_t struct_size_of(const void* s) {
  size_t size = 0;
  memcpy(&size, s, sizeof(size));
  return size;
}

static void set_struct_size(void* s, size_t size) { memcpy(s, &size, sizeof(size)); }

/* ---------------------------------------------------------------------- */
/* Sizes every options struct must handle alike                            */
/* ---------------------------------------------------------------------- */

/* Makes one call with `options`, releasing whatever it created. */
typedef axrt_status_t (*options_call_t)(void* context, const void* options);

/* Calls `call` with `options` (a struct initialised by its AXRT_*_INIT
 * macro, `size` bytes) as given, as a newer header's larger struct with a
 * zero tail and with a non-zero one, and with struct_size below the header. */
static void check_options_sizes(const char* type_name, const void* options, size_t size,
                                options_call_t call, void* context) {
  _Alignas(max_align_t) unsigned char storage[512];
  CHECK(size == struct_size_of(options));
  CHECK(size + kBeyondBytes <= sizeof(storage));
  memset(storage, 0, sizeof(storage));
  memcpy(storage, options, size);
  printf("%s: %zu bytes\n", type_name, size);

  CHECK_OK(call(context, storage));
  set_struct_size(storage, size + kFutureBytes);
  CHECK_OK(call(context, storage));
  set_struct_size(storage, size + kBeyondBytes);
  CHECK_OK(call(context, storage));
  storage[size + kBeyondBytes - 1] = 1;
  CHECK_STATUS(call(context, storage), AXRT_STATUS_CODE_UNIMPLEMENTED, type_name);
  storage[size + kBeyondBytes - 1] = 0;
  storage[size + kBeyondBytes - kFutureBytes] = 1;
  CHECK_STATUS(call(context, storage), AXRT_STATUS_CODE_UNIMPLEMENTED, type_name);
  storage[size + kBeyondBytes - kFutureBytes] = 0;
  /* Too small, or a size no version of the struct has, which would cut a
   * field in two. */
  const size_t refused[5] = {0, sizeof(size_t), 2 * sizeof(void*) - 1, 2 * sizeof(void*) + 4,
                             size - 1};
  for (int i = 0; i < 5; ++i) {
    set_struct_size(storage, refused[i]);
    CHECK_STATUS(call(context, storage), AXRT_STATUS_CODE_INVALID_ARGUMENT, type_name);
  }
}

/* Makes one query into `out`. */
typedef axrt_status_t (*query_call_t)(void* context, void* out);

/* Queries into a newer header's larger struct (nothing past its struct_size
 * is written; the bytes between the 1.0 struct and struct_size are a later
 * version's fields, which a later library fills), into the header alone
 * (nothing past it is written) and with struct_size below the header. */
static void check_query_sizes(const char* type_name, size_t size, query_call_t call,
                              void* context) {
  _Alignas(max_align_t) unsigned char storage[512];
  CHECK(size + kFutureBytes <= sizeof(storage));
  printf("%s: %zu bytes\n", type_name, size);

  memset(storage, kUntouched, sizeof(storage));
  set_struct_size(storage, size + kFutureBytes);
  memset(storage + sizeof(size_t), 0, sizeof(void*)); /* next */
  CHECK_OK(call(context, storage));
  CHECK(struct_size_of(storage) == size + kFutureBytes);
  for (size_t i = size + kFutureBytes; i < sizeof(storage); ++i) CHECK(storage[i] == kUntouched);

  memset(storage, kUntouched, sizeof(storage));
  set_struct_size(storage, 2 * sizeof(void*));
  memset(storage + sizeof(size_t), 0, sizeof(void*));
  CHECK_OK(call(context, storage));
  for (size_t i = 2 * sizeof(void*); i < sizeof(storage); ++i) CHECK(storage[i] == kUntouched);

  set_struct_size(storage, sizeof(size_t));
  CHECK_STATUS(call(context, storage), AXRT_STATUS_CODE_INVALID_ARGUMENT, type_name);
}

/* ---------------------------------------------------------------------- */
/* The calls                                                               */
/* ---------------------------------------------------------------------- */

typedef struct fixture_t {
  axrt_instance_t instance;
  axrt_device_t device;
  axrt_stream_t stream;
  axrt_buffer_t buffer; /* 256 bytes */
  axrt_tensor_t tensor; /* f32[4] */
  void* axe;            /* the client executable's bytes */
  size_t axe_size;
  axrt_executable_t executable;
  axrt_function_t affine;
} fixture_t;

static axrt_status_t create_instance(void* context, const void* options) {
  (void)context;
  axrt_instance_t instance = NULL;
  axrt_status_t status = axrt_instance_create(options, &instance);
  axrt_instance_release(instance);
  return status;
}

static axrt_status_t allocate_buffer(void* context, const void* options) {
  const fixture_t* f = context;
  axrt_buffer_t buffer = NULL;
  axrt_status_t status = axrt_buffer_allocate(f->device, 64, options, &buffer);
  axrt_buffer_release(buffer);
  return status;
}

static axrt_status_t create_stream(void* context, const void* options) {
  const fixture_t* f = context;
  axrt_stream_t stream = NULL;
  axrt_status_t status = axrt_stream_create(f->device, options, &stream);
  axrt_stream_release(stream);
  return status;
}

static axrt_status_t create_event(void* context, const void* options) {
  const fixture_t* f = context;
  axrt_event_t event = NULL;
  axrt_status_t status = axrt_event_create(f->device, options, &event);
  axrt_event_release(event);
  return status;
}

static axrt_status_t allocate_tensor(void* context, const void* desc) {
  const fixture_t* f = context;
  axrt_tensor_t tensor = NULL;
  axrt_status_t status = axrt_tensor_allocate(f->device, desc, NULL, &tensor);
  axrt_tensor_release(tensor);
  return status;
}

static axrt_status_t copy_2d(void* context, const void* copy) {
  const fixture_t* f = context;
  return axrt_stream_copy_2d(f->stream, copy);
}

static axrt_status_t load_executable(void* context, const void* options) {
  const fixture_t* f = context;
  axrt_executable_t executable = NULL;
  axrt_status_t status =
      axrt_executable_load_memory(f->device, f->axe, f->axe_size, options, &executable);
  axrt_executable_release(executable);
  return status;
}

static axrt_status_t invoke_affine(void* context, const void* options) {
  const fixture_t* f = context;
  axrt_tensor_t output = NULL;
  axrt_status_t status =
      axrt_function_invoke(f->affine, f->stream, &f->tensor, 1, &output, 1, options);
  axrt_tensor_release(output);
  return status;
}

static axrt_status_t create_builder(void* context, const void* options) {
  (void)context;
  axrt_axe_builder_t builder = NULL;
  axrt_status_t status = axrt_axe_builder_create(options, &builder);
  axrt_axe_builder_release(builder);
  return status;
}

static axrt_status_t query_device(void* context, void* out) {
  return axrt_device_query_properties(((const fixture_t*)context)->device, out);
}

static axrt_status_t query_driver(void* context, void* out) {
  return axrt_instance_query_driver_info(((const fixture_t*)context)->instance, 0, out);
}

static axrt_status_t query_pool(void* context, void* out) {
  return axrt_device_query_pool_statistics(((const fixture_t*)context)->device, out);
}

static axrt_status_t query_streams(void* context, void* out) {
  return axrt_device_query_stream_statistics(((const fixture_t*)context)->device, out);
}

static axrt_status_t query_buffer(void* context, void* out) {
  return axrt_buffer_query_info(((const fixture_t*)context)->buffer, out);
}

static axrt_status_t query_tensor(void* context, void* out) {
  return axrt_tensor_query_info(((const fixture_t*)context)->tensor, out);
}

static axrt_status_t query_executable(void* context, void* out) {
  return axrt_executable_query_info(((const fixture_t*)context)->executable, out);
}

static axrt_status_t query_function(void* context, void* out) {
  return axrt_function_query_info(((const fixture_t*)context)->affine, out);
}

static axrt_status_t query_argument(void* context, void* out) {
  return axrt_function_query_argument(((const fixture_t*)context)->affine,
                                      AXRT_ARGUMENT_KIND_INPUT, 0, out);
}

static void check_every_struct(fixture_t* f) {
  const axrt_instance_options_t instance = AXRT_INSTANCE_OPTIONS_INIT;
  check_options_sizes("axrt_instance_options_t", &instance, sizeof(instance), create_instance, f);
  const axrt_buffer_options_t buffer = AXRT_BUFFER_OPTIONS_INIT;
  check_options_sizes("axrt_buffer_options_t", &buffer, sizeof(buffer), allocate_buffer, f);
  const axrt_stream_options_t stream = AXRT_STREAM_OPTIONS_INIT;
  check_options_sizes("axrt_stream_options_t", &stream, sizeof(stream), create_stream, f);
  const axrt_event_options_t event = AXRT_EVENT_OPTIONS_INIT;
  check_options_sizes("axrt_event_options_t", &event, sizeof(event), create_event, f);
  const int64_t four[1] = {4};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = four;
  check_options_sizes("axrt_tensor_desc_t", &desc, sizeof(desc), allocate_tensor, f);
  float host[4] = {0, 0, 0, 0};
  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  copy.src.buffer = f->buffer;
  copy.dst.host_pointer = host;
  copy.width = sizeof(host);
  copy.height = 1;
  check_options_sizes("axrt_copy_2d_t", &copy, sizeof(copy), copy_2d, f);
  const axrt_executable_load_options_t load = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  check_options_sizes("axrt_executable_load_options_t", &load, sizeof(load), load_executable, f);
  const axrt_invoke_options_t invoke = AXRT_INVOKE_OPTIONS_INIT;
  check_options_sizes("axrt_invoke_options_t", &invoke, sizeof(invoke), invoke_affine, f);
  const axrt_axe_builder_options_t builder = AXRT_AXE_BUILDER_OPTIONS_INIT;
  check_options_sizes("axrt_axe_builder_options_t", &builder, sizeof(builder), create_builder, f);
  CHECK_OK(axrt_stream_synchronize(f->stream));

  check_query_sizes("axrt_device_properties_t", sizeof(axrt_device_properties_t), query_device, f);
  check_query_sizes("axrt_driver_info_t", sizeof(axrt_driver_info_t), query_driver, f);
  check_query_sizes("axrt_pool_statistics_t", sizeof(axrt_pool_statistics_t), query_pool, f);
  check_query_sizes("axrt_stream_statistics_t", sizeof(axrt_stream_statistics_t), query_streams,
                    f);
  check_query_sizes("axrt_buffer_info_t", sizeof(axrt_buffer_info_t), query_buffer, f);
  check_query_sizes("axrt_tensor_info_t", sizeof(axrt_tensor_info_t), query_tensor, f);
  check_query_sizes("axrt_executable_info_t", sizeof(axrt_executable_info_t), query_executable,
                    f);
  check_query_sizes("axrt_function_info_t", sizeof(axrt_function_info_t), query_function, f);
  check_query_sizes("axrt_argument_info_t", sizeof(axrt_argument_info_t), query_argument, f);
}

/* ---------------------------------------------------------------------- */
/* Older headers: the fields a struct does not reach take their defaults   */
/* ---------------------------------------------------------------------- */

/* Fills the bytes of `s` from `offset` on, up to `size`, with garbage that
 * would fail the call if it were read. */
static void fill_beyond(void* s, size_t offset, size_t size) {
  memset((unsigned char*)s + offset, 0xFF, size - offset);
}

static void check_older_options(fixture_t* f) {
  /* Instance: `drivers` unread means every built-in driver. */
  axrt_instance_options_t instance_options = AXRT_INSTANCE_OPTIONS_INIT;
  instance_options.drivers = "no-such-driver";
  CHECK_STATUS(create_instance(f, &instance_options), AXRT_STATUS_CODE_NOT_FOUND,
               "no-such-driver");
  instance_options.struct_size = offsetof(axrt_instance_options_t, drivers);
  CHECK_OK(create_instance(f, &instance_options));

  /* Buffer: memory_type and alignment default when unreached. */
  axrt_buffer_options_t buffer_options = AXRT_BUFFER_OPTIONS_INIT;
  buffer_options.alignment = 3;
  CHECK_STATUS(allocate_buffer(f, &buffer_options), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "alignment");
  buffer_options.memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
  buffer_options.struct_size = offsetof(axrt_buffer_options_t, alignment);
  axrt_buffer_t buffer = NULL;
  CHECK_OK(axrt_buffer_allocate(f->device, 64, &buffer_options, &buffer));
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  CHECK_OK(axrt_buffer_query_info(buffer, &info));
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
  axrt_buffer_release(buffer);
  fill_beyond(&buffer_options, offsetof(axrt_buffer_options_t, memory_type),
              sizeof(buffer_options));
  buffer_options.struct_size = offsetof(axrt_buffer_options_t, memory_type);
  buffer_options.next = NULL;
  CHECK_OK(axrt_buffer_allocate(f->device, 64, &buffer_options, &buffer));
  CHECK_OK(axrt_buffer_query_info(buffer, &info));
  CHECK(info.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  axrt_buffer_release(buffer);

  /* Event: flags unread means timed. */
  axrt_event_options_t event_options = AXRT_EVENT_OPTIONS_INIT;
  event_options.flags = 0x80;
  CHECK_STATUS(create_event(f, &event_options), AXRT_STATUS_CODE_INVALID_ARGUMENT, "flags");
  event_options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING | 0x80;
  event_options.struct_size = offsetof(axrt_event_options_t, flags);
  axrt_event_t start = NULL;
  axrt_event_t end = NULL;
  CHECK_OK(axrt_event_create(f->device, &event_options, &start));
  CHECK_OK(axrt_event_create(f->device, &event_options, &end));
  CHECK_OK(axrt_stream_record_event(f->stream, start));
  CHECK_OK(axrt_stream_record_event(f->stream, end));
  CHECK_OK(axrt_event_wait(end, AXRT_TIMEOUT_INFINITE));
  int64_t nanoseconds = -1;
  CHECK_OK(axrt_event_elapsed_time(start, end, &nanoseconds));
  axrt_event_release(start);
  axrt_event_release(end);

  /* Tensor: strides and byte_offset unread mean contiguous from byte 0. */
  const int64_t shape[2] = {2, 3};
  const int64_t strides[2] = {1, 2};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = shape;
  desc.strides = strides;
  desc.byte_offset = 1u << 20;
  desc.struct_size = offsetof(axrt_tensor_desc_t, strides);
  axrt_tensor_t tensor = NULL;
  CHECK_OK(axrt_tensor_create(f->buffer, &desc, &tensor));
  axrt_tensor_info_t tensor_info = AXRT_TENSOR_INFO_INIT;
  CHECK_OK(axrt_tensor_query_info(tensor, &tensor_info));
  CHECK(tensor_info.contiguous && tensor_info.byte_offset == 0);
  CHECK(tensor_info.strides[0] == 3 && tensor_info.strides[1] == 1);
  axrt_tensor_release(tensor);

  /* 2-D copy: height unread means no rows, which copies nothing. */
  unsigned char host[16];
  memset(host, 0x11, sizeof(host));
  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  copy.src.buffer = f->buffer;
  copy.dst.host_pointer = host;
  copy.width = sizeof(host);
  copy.height = 1;
  copy.struct_size = offsetof(axrt_copy_2d_t, height);
  CHECK_OK(axrt_stream_copy_2d(f->stream, &copy));
  CHECK_OK(axrt_stream_synchronize(f->stream));
  for (size_t i = 0; i < sizeof(host); ++i) CHECK(host[i] == 0x11);

  /* Load: flags unread mean none. */
  axrt_executable_load_options_t load = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  load.flags = 0x80000000u;
  CHECK_STATUS(load_executable(f, &load), AXRT_STATUS_CODE_UNIMPLEMENTED, "flags");
  load.struct_size = offsetof(axrt_executable_load_options_t, flags);
  CHECK_OK(load_executable(f, &load));

  /* Invoke: a dump asked for by a struct that ends before
   * `dump_directory` has none, which the flag requires. */
  axrt_invoke_options_t invoke = AXRT_INVOKE_OPTIONS_INIT;
  invoke.flags = 0x80000000u;
  invoke.dump_directory = "unread";
  CHECK_STATUS(invoke_affine(f, &invoke), AXRT_STATUS_CODE_UNIMPLEMENTED, "flags");
  invoke.struct_size = offsetof(axrt_invoke_options_t, flags);
  CHECK_OK(invoke_affine(f, &invoke));
  invoke.flags = AXRT_INVOKE_FLAG_DUMP;
  invoke.struct_size = offsetof(axrt_invoke_options_t, dump_directory);
  CHECK_STATUS(invoke_affine(f, &invoke), AXRT_STATUS_CODE_INVALID_ARGUMENT, "dump_directory");
  CHECK_OK(axrt_stream_synchronize(f->stream));

  /* Builder: producer unread means none. */
  axrt_axe_builder_options_t builder_options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  builder_options.producer_name = "unread";
  builder_options.producer_version = "unread";
  builder_options.struct_size = offsetof(axrt_axe_builder_options_t, producer_name);
  axrt_axe_builder_t builder = NULL;
  CHECK_OK(axrt_axe_builder_create(&builder_options, &builder));
  void* data = NULL;
  size_t size = 0;
  CHECK_OK(axrt_axe_builder_write_memory(builder, &data, &size));
  axrt_axe_builder_release(builder);
  axrt_executable_t empty = NULL;
  CHECK_OK(axrt_executable_load_memory(f->device, data, size, NULL, &empty));
  axrt_axe_memory_free(data);
  axrt_executable_info_t executable_info = AXRT_EXECUTABLE_INFO_INIT;
  CHECK_OK(axrt_executable_query_info(empty, &executable_info));
  CHECK(strcmp(executable_info.producer_name, "") == 0);
  CHECK(executable_info.function_count == 0);
  axrt_executable_release(empty);
}

/* Query structs of an older header: the fields a newer library added past
 * them stay as they were. */
static void check_older_queries(fixture_t* f) {
  /* axrt_tensor_info_t.flags and axrt_argument_info_t.flags lie past the
   * end of the structs as they were before the fields. */
  axrt_tensor_info_t tensor_info = AXRT_TENSOR_INFO_INIT;
  tensor_info.struct_size = offsetof(axrt_tensor_info_t, flags);
  tensor_info.flags = 0xA5A5A5A5u;
  CHECK_OK(axrt_tensor_query_info(f->tensor, &tensor_info));
  CHECK(tensor_info.flags == 0xA5A5A5A5u);
  CHECK(tensor_info.rank == 1 && tensor_info.shape[0] == 4 && tensor_info.contiguous);

  axrt_argument_info_t argument = AXRT_ARGUMENT_INFO_INIT;
  argument.struct_size = offsetof(axrt_argument_info_t, flags);
  argument.flags = 0xA5A5A5A5u;
  CHECK_OK(axrt_function_query_argument(f->affine, AXRT_ARGUMENT_KIND_OUTPUT, 0, &argument));
  CHECK(argument.flags == 0xA5A5A5A5u);
  CHECK(strcmp(argument.name, "y") == 0 && argument.rank == 1 && argument.dims[0] == 4);

  /* A prefix that stops after the first fields. */
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  memset(properties.name, 'x', sizeof(properties.name));
  properties.struct_size = offsetof(axrt_device_properties_t, name);
  CHECK_OK(axrt_device_query_properties(f->device, &properties));
  CHECK(strcmp(properties.id, "cpu:0") == 0 && strcmp(properties.driver, "cpu") == 0);
  for (size_t i = 0; i < sizeof(properties.name); ++i) CHECK(properties.name[i] == 'x');
  CHECK(properties.total_memory == 0);

  axrt_buffer_info_t buffer_info = AXRT_BUFFER_INFO_INIT;
  buffer_info.struct_size = offsetof(axrt_buffer_info_t, offset);
  buffer_info.offset = 77;
  CHECK_OK(axrt_buffer_query_info(f->buffer, &buffer_info));
  CHECK(buffer_info.size == 256 && buffer_info.offset == 77 && buffer_info.allocation_size == 0);
}

/* ---------------------------------------------------------------------- */
/* Builder arrays from older and newer headers                             */
/* ---------------------------------------------------------------------- */

/* axrt_axe_tensor_sig_t as it was before `flags` (format 1.2). */
typedef struct older_tensor_sig_t {
  size_t struct_size;
  const void* next;
  const char* name;
  axrt_axe_dtype_t dtype;
  size_t rank;
  const axrt_axe_dim_t* dims;
} older_tensor_sig_t;
_Static_assert(sizeof(older_tensor_sig_t) == offsetof(axrt_axe_tensor_sig_t, flags),
               "the older signature is a prefix of today's");

/* axrt_axe_tensor_sig_t as a newer header might extend it. */
typedef struct newer_tensor_sig_t {
  axrt_axe_tensor_sig_t known;
  uint64_t future[2];
} newer_tensor_sig_t;

static axrt_status_t add_copy(axrt_axe_builder_t builder, uint32_t function, uint32_t index,
                              uint64_t bytes) {
  axrt_axe_binding_t src = AXRT_AXE_BINDING_INIT;
  src.kind = AXRT_AXE_BINDING_KIND_INPUT;
  src.index = index;
  axrt_axe_binding_t dst = AXRT_AXE_BINDING_INIT;
  dst.kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  dst.index = index;
  const axrt_axe_expr_op_t length[1] = {{AXRT_AXE_EXPR_OPCODE_CONST, (int64_t)bytes}};
  axrt_axe_copy_desc_t copy = AXRT_AXE_COPY_DESC_INIT;
  copy.src = &src;
  copy.dst = &dst;
  copy.length.ops = length;
  copy.length.op_count = 1;
  return axrt_axe_builder_add_copy(builder, function, &copy);
}

/* "pass" (a: f32[2], b: f32[3]) -> (c: f32[2], d: f32[3]), c = a and d = b,
 * its inputs described with older signatures and its outputs with newer
 * ones: a stride other than the array's own would misread the second
 * element of each. */
static void check_builder_arrays(fixture_t* f) {
  const axrt_axe_dim_t two = {2, -1};
  const axrt_axe_dim_t three = {3, -1};
  const older_tensor_sig_t inputs[2] = {
      {sizeof(older_tensor_sig_t), NULL, "a", AXRT_AXE_DTYPE_FLOAT32, 1, &two},
      {sizeof(older_tensor_sig_t), NULL, "b", AXRT_AXE_DTYPE_FLOAT32, 1, &three},
  };
  newer_tensor_sig_t outputs[2];
  memset(outputs, 0, sizeof(outputs));
  const char* output_names[2] = {"c", "d"};
  for (int i = 0; i < 2; ++i) {
    outputs[i].known.struct_size = sizeof(newer_tensor_sig_t);
    outputs[i].known.name = output_names[i];
    outputs[i].known.dtype = AXRT_AXE_DTYPE_FLOAT32;
    outputs[i].known.rank = 1;
    outputs[i].known.dims = i == 0 ? &two : &three;
  }
  axrt_axe_builder_t builder = NULL;
  CHECK_OK(axrt_axe_builder_create(NULL, &builder));
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "pass";
  function.inputs = (const axrt_axe_tensor_sig_t*)(const void*)inputs;
  function.input_count = 2;
  function.outputs = &outputs[0].known;
  function.output_count = 2;
  uint32_t index = 0;
  CHECK_OK(axrt_axe_builder_add_function(builder, &function, &index));
  CHECK_OK(add_copy(builder, index, 0, 2 * sizeof(float)));
  CHECK_OK(add_copy(builder, index, 1, 3 * sizeof(float)));

  /* A newer signature that sets a field this library does not know. */
  outputs[1].future[1] = 1;
  function.name = "refused";
  CHECK_STATUS(axrt_axe_builder_add_function(builder, &function, &index),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "axrt_axe_tensor_sig_t");
  outputs[1].future[1] = 0;

  void* data = NULL;
  size_t size = 0;
  CHECK_OK(axrt_axe_builder_write_memory(builder, &data, &size));
  axrt_axe_builder_release(builder);
  axrt_executable_t executable = NULL;
  CHECK_OK(axrt_executable_load_memory(f->device, data, size, NULL, &executable));
  axrt_axe_memory_free(data);
  axrt_function_t pass = NULL;
  CHECK_OK(axrt_executable_find_function(executable, "pass", &pass));
  const char* names[4] = {"a", "b", "c", "d"};
  const int64_t extents[4] = {2, 3, 2, 3};
  for (uint32_t i = 0; i < 4; ++i) {
    axrt_argument_info_t argument = AXRT_ARGUMENT_INFO_INIT;
    CHECK_OK(axrt_function_query_argument(
        pass, i < 2 ? AXRT_ARGUMENT_KIND_INPUT : AXRT_ARGUMENT_KIND_OUTPUT, i % 2, &argument));
    CHECK(strcmp(argument.name, names[i]) == 0);
    CHECK(argument.dtype == AXRT_DTYPE_FLOAT32 && argument.rank == 1);
    CHECK(argument.dims[0] == extents[i] && argument.flags == 0);
  }

  /* And it runs. */
  axrt_tensor_t in[2] = {NULL, NULL};
  axrt_tensor_t out[2] = {NULL, NULL};
  const float values[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  for (int i = 0; i < 2; ++i) {
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = &extents[i];
    CHECK_OK(axrt_tensor_allocate(f->device, &desc, NULL, &in[i]));
    axrt_buffer_t buffer = NULL;
    CHECK_OK(axrt_tensor_get_buffer(in[i], &buffer));
    CHECK_OK(axrt_stream_copy_from_host(f->stream, values + 2 * i, buffer, 0,
                                        (uint64_t)extents[i] * sizeof(float)));
    axrt_buffer_release(buffer);
  }
  CHECK_OK(axrt_function_invoke(pass, f->stream, in, 2, out, 2, NULL));
  float result[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 2; ++i) {
    axrt_buffer_t buffer = NULL;
    CHECK_OK(axrt_tensor_get_buffer(out[i], &buffer));
    CHECK_OK(axrt_stream_copy_to_host(f->stream, buffer, 0, result + 2 * i,
                                      (uint64_t)extents[i] * sizeof(float)));
    axrt_buffer_release(buffer);
  }
  CHECK_OK(axrt_stream_synchronize(f->stream));
  for (int i = 0; i < 5; ++i) CHECK(result[i] == values[i]);
  for (int i = 0; i < 2; ++i) {
    axrt_tensor_release(in[i]);
    axrt_tensor_release(out[i]);
  }
  axrt_function_release(pass);
  axrt_executable_release(executable);
}

/* ---------------------------------------------------------------------- */
/* Extension chains                                                        */
/* ---------------------------------------------------------------------- */

static void check_extensions(fixture_t* f) {
  /* A type from a newer header. */
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), NULL, 4242};
  axrt_buffer_options_t buffer_options = AXRT_BUFFER_OPTIONS_INIT;
  buffer_options.next = &unknown;
  CHECK_STATUS(allocate_buffer(f, &buffer_options), AXRT_STATUS_CODE_UNIMPLEMENTED, "4242");

  /* A known type where it is not taken. */
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("client instance");
  axrt_instance_options_t instance_options = AXRT_INSTANCE_OPTIONS_INIT;
  instance_options.next = &label;
  CHECK_STATUS(create_instance(f, &instance_options), AXRT_STATUS_CODE_UNIMPLEMENTED, NULL);

  /* Where it is taken, behind another label. */
  axrt_debug_label_t second = AXRT_DEBUG_LABEL_INIT("second");
  label.next = &second;
  buffer_options.next = &label;
  CHECK_OK(allocate_buffer(f, &buffer_options));

  /* A cycle, and an extension smaller than its header. */
  second.next = &label;
  CHECK_STATUS(allocate_buffer(f, &buffer_options), AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
  second.next = NULL;
  unknown.struct_size = sizeof(size_t);
  second.next = &unknown;
  CHECK_STATUS(allocate_buffer(f, &buffer_options), AXRT_STATUS_CODE_INVALID_ARGUMENT, NULL);
}

int main(void) {
  fixture_t f;
  memset(&f, 0, sizeof(f));
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = "cpu";
  CHECK_OK(axrt_instance_create(&options, &f.instance));
  CHECK_OK(axrt_instance_find_device(f.instance, "cpu:0", &f.device));
  CHECK_OK(axrt_stream_create(f.device, NULL, &f.stream));
  CHECK_OK(axrt_buffer_allocate(f.device, 256, NULL, &f.buffer));
  const int64_t four[1] = {4};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = four;
  CHECK_OK(axrt_tensor_allocate(f.device, &desc, NULL, &f.tensor));
  CHECK_OK(axrt_instance_register_kernel_library(f.instance, client_kernel_library()));
  CHECK_OK(build_client_executable(NULL, &f.axe, &f.axe_size));
  CHECK_OK(axrt_executable_load_memory(f.device, f.axe, f.axe_size, NULL, &f.executable));
  CHECK_OK(axrt_executable_find_function(f.executable, "affine", &f.affine));

  check_every_struct(&f);
  check_older_options(&f);
  check_older_queries(&f);
  check_builder_arrays(&f);
  check_extensions(&f);

  CHECK_OK(axrt_stream_synchronize(f.stream));
  axrt_function_release(f.affine);
  axrt_executable_release(f.executable);
  axrt_axe_memory_free(f.axe);
  axrt_tensor_release(f.tensor);
  axrt_buffer_release(f.buffer);
  axrt_stream_release(f.stream);
  axrt_device_release(f.device);
  axrt_instance_release(f.instance);
  printf("options and query structs of every size behave as axrt/base.h documents\n");
  return 0;
}
