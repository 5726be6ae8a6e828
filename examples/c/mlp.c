/* axrt_mlp: runs the 2-layer MLP that axrt_mlp_compiler emits and checks it.
 *
 *   axrt_mlp [--device ID] [--iterations N] MODEL.axe REFERENCE
 *
 * Loads MODEL.axe on the device (--device, else the default device: the
 * environment variable AXRT_DEVICE, else cpu:0), uploads x from REFERENCE,
 * calls main(x) -> y on a stream, reads y back and compares it with the
 * references axrt_mlp_compiler computed in double (the file's layout is
 * described at the top of examples/compiler/mlp_compiler.cc):
 *
 *   - against y from the dequantized weights, element by element, within the
 *     bound the compiler derived from the kernels' accuracy statements
 *     (docs/kernels.md): this measures the runtime and decides the exit
 *     status;
 *   - against y from the original float weights: the quantization error,
 *     printed for information.
 *
 * Then it times the call: the mean of N calls (default 200, after 20
 * warm-up calls) of invoke + synchronize, measured with
 * clock_gettime(CLOCK_MONOTONIC).
 *
 * Exit status: 0 within the bound, 1 outside it or on any failure, 2 bad
 * command line. Every axrt status is checked and printed with its message. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <axrt/axrt.h>

enum { kWarmupCalls = 20, kDefaultCalls = 200 };

/* Prints the failure and frees it; returns true when there was one. */
static bool fail(axrt_status_t status, const char* what) {
  if (status == NULL) return false;
  fprintf(stderr, "axrt_mlp: %s failed: %s: %s\n", what,
          axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

/* ---------------------------------------------------------------------- */
/* The reference file                                                      */
/* ---------------------------------------------------------------------- */

typedef struct reference_t {
  uint32_t batch, in, out;
  float* x;         /* [batch][in] */
  double* y;        /* [batch][out], from the dequantized weights */
  double* bound;    /* [batch][out] */
  double* y_float;  /* [batch][out], from the float weights */
} reference_t;

static uint64_t read_le(const unsigned char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

static void free_reference(reference_t* ref) {
  free(ref->x);
  free(ref->y);
  free(ref->bound);
  free(ref->y_float);
}

static bool read_reference(const char* path, reference_t* ref) {
  bool ok = false;
  unsigned char* bytes = NULL;
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    perror(path);
    return false;
  }
  long size = -1;
  if (fseek(file, 0, SEEK_END) == 0) size = ftell(file);
  if (size < 24 || fseek(file, 0, SEEK_SET) != 0) {
    fprintf(stderr, "axrt_mlp: '%s' is not a reference file (too short)\n", path);
    goto done;
  }
  bytes = malloc((size_t)size);
  if (bytes == NULL || fread(bytes, 1, (size_t)size, file) != (size_t)size) {
    fprintf(stderr, "axrt_mlp: cannot read '%s'\n", path);
    goto done;
  }
  if (memcmp(bytes, "AXRTMLPR", 8) != 0 || read_le(bytes + 8, 4) != 1) {
    fprintf(stderr, "axrt_mlp: '%s' is not a version 1 reference file of axrt_mlp_compiler\n", path);
    goto done;
  }
  ref->batch = (uint32_t)read_le(bytes + 12, 4);
  ref->in = (uint32_t)read_le(bytes + 16, 4);
  ref->out = (uint32_t)read_le(bytes + 20, 4);
  const uint64_t nx = (uint64_t)ref->batch * ref->in;
  const uint64_t ny = (uint64_t)ref->batch * ref->out;
  if (ref->batch == 0 || (uint64_t)size != 24 + 4 * nx + 3 * 8 * ny) {
    fprintf(stderr, "axrt_mlp: '%s' holds %ld bytes; batch %" PRIu32 ", in %" PRIu32 ", out %" PRIu32
            " need %" PRIu64 "\n", path, size, ref->batch, ref->in, ref->out, 24 + 4 * nx + 24 * ny);
    goto done;
  }
  ref->x = malloc(nx * sizeof(float));
  ref->y = malloc(ny * sizeof(double));
  ref->bound = malloc(ny * sizeof(double));
  ref->y_float = malloc(ny * sizeof(double));
  if (!ref->x || !ref->y || !ref->bound || !ref->y_float) {
    fprintf(stderr, "axrt_mlp: out of host memory\n");
    goto done;
  }
  const unsigned char* p = bytes + 24;
  for (uint64_t i = 0; i < nx; ++i, p += 4) {
    const uint32_t bits = (uint32_t)read_le(p, 4);
    memcpy(&ref->x[i], &bits, 4);
  }
  double* parts[3] = {ref->y, ref->bound, ref->y_float};
  for (int part = 0; part < 3; ++part) {
    for (uint64_t i = 0; i < ny; ++i, p += 8) {
      const uint64_t bits = read_le(p, 8);
      memcpy(&parts[part][i], &bits, 8);
    }
  }
  ok = true;

done:
  free(bytes);
  fclose(file);
  return ok;
}

/* ---------------------------------------------------------------------- */
/* Running                                                                 */
/* ---------------------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: axrt_mlp [--device ID] [--iterations N] MODEL.axe REFERENCE\n"
          "Runs main(x) -> y of an axrt_mlp_compiler model on a device, checks y against\n"
          "REFERENCE and times the call. ID is a device such as cpu:0 (default: $AXRT_DEVICE,\n"
          "else cpu:0); N the timed calls (default %d). Exit status: 0 within the bound,\n"
          "1 outside it or on a failure, 2 bad command line.\n",
          kDefaultCalls);
}

/* Checks main's signature against the reference: x [batch, in], y
 * [batch, out], batch a symbol whose bound admits the reference's rows. */
static bool check_signature(axrt_function_t function, const reference_t* ref) {
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  if (fail(axrt_function_query_info(function, &info), "axrt_function_query_info")) return false;
  if (info.input_count != 1 || info.output_count != 1) {
    fprintf(stderr, "axrt_mlp: main takes %" PRIu32 " inputs and %" PRIu32 " outputs, not 1 and 1\n",
            info.input_count, info.output_count);
    return false;
  }
  const uint32_t features[2] = {ref->in, ref->out};
  const axrt_argument_kind_t kinds[2] = {AXRT_ARGUMENT_KIND_INPUT, AXRT_ARGUMENT_KIND_OUTPUT};
  for (int i = 0; i < 2; ++i) {
    axrt_argument_info_t arg = AXRT_ARGUMENT_INFO_INIT;
    if (fail(axrt_function_query_argument(function, kinds[i], 0, &arg), "axrt_function_query_argument")) {
      return false;
    }
    if (arg.dtype != AXRT_DTYPE_FLOAT32 || arg.rank != 2 || arg.dims[1] != features[i] ||
        arg.dim_symbols[0] < 0) {
      fprintf(stderr, "axrt_mlp: main's %s '%s' is not f32[batch, %" PRIu32 "] as the reference "
              "expects\n", i == 0 ? "input" : "output", arg.name, features[i]);
      return false;
    }
    const char* symbol = NULL;
    uint64_t bound = 0;
    if (fail(axrt_function_query_symbol(function, (uint32_t)arg.dim_symbols[0], &symbol, &bound),
             "axrt_function_query_symbol")) {
      return false;
    }
    if (bound < ref->batch) {
      fprintf(stderr, "axrt_mlp: main's %s admits at most %" PRIu64 " rows; the reference has %" PRIu32
              "\n", symbol, bound, ref->batch);
      return false;
    }
    if (i == 0) {
      printf("model     main(x: f32[%s, %" PRIu32 "]) -> y: f32[%s, %" PRIu32 "], %s <= %" PRIu64
             "; %" PRIu32 " commands, %" PRIu64 " KiB arena\n",
             symbol, ref->in, symbol, ref->out, symbol, bound, info.command_count,
             info.arena_size >> 10);
    }
  }
  return true;
}

static axrt_status_t new_tensor(axrt_device_t device, uint32_t rows, uint32_t cols,
                                axrt_tensor_t* out) {
  const int64_t shape[2] = {rows, cols};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = shape;
  return axrt_tensor_allocate(device, &desc, NULL, out);
}

int main(int argc, char** argv) {
  const char* device_name = NULL;
  const char* paths[2] = {NULL, NULL};
  int path_count = 0;
  long calls = kDefaultCalls;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device_name = argv[++i];
    } else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      char* end = NULL;
      calls = strtol(argv[++i], &end, 10);
      if (*end != '\0' || calls < 1 || calls > 1000000) {
        fprintf(stderr, "axrt_mlp: --iterations takes a count in [1, 1000000], not '%s'\n", argv[i]);
        return 2;
      }
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "axrt_mlp: unknown option or missing value: '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else if (path_count < 2) {
      paths[path_count++] = argv[i];
    } else {
      fprintf(stderr, "axrt_mlp: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (path_count != 2) {
    usage(stderr);
    return 2;
  }

  reference_t ref;
  memset(&ref, 0, sizeof ref);
  axrt_instance_t instance = NULL;
  axrt_device_t device = NULL;
  axrt_executable_t executable = NULL;
  axrt_function_t function = NULL;
  axrt_stream_t stream = NULL;
  axrt_tensor_t x = NULL, y = NULL;
  axrt_buffer_t x_buffer = NULL, y_buffer = NULL;
  float* y_host = NULL;
  int exit_code = 1;

  if (!read_reference(paths[1], &ref)) goto done;
  printf("axrt %s\n", axrt_version_string());
  if (fail(axrt_instance_create(NULL, &instance), "axrt_instance_create")) goto done;
  if (fail(axrt_instance_find_device(instance, device_name, &device), "axrt_instance_find_device")) {
    goto done;
  }
  axrt_device_properties_t props = AXRT_DEVICE_PROPERTIES_INIT;
  if (fail(axrt_device_query_properties(device, &props), "axrt_device_query_properties")) goto done;
  printf("device    %s: %s, %" PRIu32 " %s\n", props.id, props.name, props.compute_units,
         props.type == AXRT_DEVICE_TYPE_CPU ? "threads" : "compute units");

  if (fail(axrt_executable_load_file(device, paths[0], NULL, &executable), "axrt_executable_load_file")) {
    goto done;
  }
  if (fail(axrt_executable_find_function(executable, "main", &function), "axrt_executable_find_function")) {
    goto done;
  }
  axrt_executable_info_t exe = AXRT_EXECUTABLE_INFO_INIT;
  if (fail(axrt_executable_query_info(executable, &exe), "axrt_executable_query_info")) goto done;
  printf("loaded    %s (from %s %s): %" PRIu32 " kernels, %" PRIu32 " constants, %.0f KiB of weights\n",
         exe.name, exe.producer_name, exe.producer_version, exe.kernel_count, exe.constant_count,
         (double)exe.constant_bytes / 1024);
  if (!check_signature(function, &ref)) goto done;

  /* x and y live on the device; y is passed in so that no call allocates. */
  if (fail(axrt_stream_create(device, NULL, &stream), "axrt_stream_create")) goto done;
  if (fail(new_tensor(device, ref.batch, ref.in, &x), "axrt_tensor_allocate (x)")) goto done;
  if (fail(new_tensor(device, ref.batch, ref.out, &y), "axrt_tensor_allocate (y)")) goto done;
  if (fail(axrt_tensor_get_buffer(x, &x_buffer), "axrt_tensor_get_buffer (x)")) goto done;
  if (fail(axrt_tensor_get_buffer(y, &y_buffer), "axrt_tensor_get_buffer (y)")) goto done;
  const uint64_t y_count = (uint64_t)ref.batch * ref.out;
  y_host = malloc(y_count * sizeof(float));
  if (y_host == NULL) {
    fprintf(stderr, "axrt_mlp: out of host memory\n");
    goto done;
  }
  if (fail(axrt_stream_copy_from_host(stream, ref.x, x_buffer, 0,
                                      (uint64_t)ref.batch * ref.in * sizeof(float)),
           "axrt_stream_copy_from_host (x)")) {
    goto done;
  }
  if (fail(axrt_function_invoke(function, stream, &x, 1, &y, 1, NULL), "axrt_function_invoke")) goto done;
  if (fail(axrt_stream_copy_to_host(stream, y_buffer, 0, y_host, y_count * sizeof(float)),
           "axrt_stream_copy_to_host (y)")) {
    goto done;
  }
  if (fail(axrt_stream_synchronize(stream), "axrt_stream_synchronize")) goto done;
  printf("input     x: f32[%" PRIu32 ", %" PRIu32 "] from %s\n", ref.batch, ref.in, paths[1]);

  /* The check: every element within its bound (a NaN never is). */
  double max_error = 0, max_error_bound = 0, worst_ratio = 0, max_y = 0, max_quant_error = 0;
  uint64_t outside = 0, first_outside = 0;
  for (uint64_t i = 0; i < y_count; ++i) {
    const double error = fabs((double)y_host[i] - ref.y[i]);
    if (!(error <= ref.bound[i])) {
      if (outside++ == 0) first_outside = i;
    }
    if (error > max_error || isnan(error)) {
      max_error = error;
      max_error_bound = ref.bound[i];
    }
    if (error / ref.bound[i] > worst_ratio) worst_ratio = error / ref.bound[i];
    if (fabs(ref.y[i]) > max_y) max_y = fabs(ref.y[i]);
    const double quant_error = fabs((double)y_host[i] - ref.y_float[i]);
    if (quant_error > max_quant_error) max_quant_error = quant_error;
  }
  printf("error     max |y - y_ref| = %.3g against the dequantized weights (max |y_ref| = %.3g)\n",
         max_error, max_y);
  printf("bound     %.3g there: per element, docs/kernels.md's accuracy chained through fc1, gelu,\n"
         "          fc2; the worst element reaches %.2g%% of its bound\n",
         max_error_bound, 100 * worst_ratio);
  printf("quantized max |y - y_float| = %.3g against the float weights, %.2g%% of max |y| "
         "(informational)\n", max_quant_error, max_y > 0 ? 100 * max_quant_error / max_y : 0.0);
  if (outside > 0) {
    fprintf(stderr, "axrt_mlp: %" PRIu64 " of %" PRIu64 " elements outside their bound; the first, "
            "y[%" PRIu64 "][%" PRIu64 "] = %.9g, reference %.9g, bound %.3g\n", outside, y_count,
            first_outside / ref.out, first_outside % ref.out, y_host[first_outside],
            ref.y[first_outside], ref.bound[first_outside]);
    goto done;
  }

  /* Timing: each call invoked and waited for, as an application would. */
  double total = 0, fastest = INFINITY;
  for (long i = -kWarmupCalls; i < calls; ++i) {
    const double start = now_seconds();
    if (fail(axrt_function_invoke(function, stream, &x, 1, &y, 1, NULL), "axrt_function_invoke")) {
      goto done;
    }
    if (fail(axrt_stream_synchronize(stream), "axrt_stream_synchronize")) goto done;
    const double elapsed = now_seconds() - start;
    if (i < 0) continue;
    total += elapsed;
    if (elapsed < fastest) fastest = elapsed;
  }
  printf("time      %.1f us per call (mean of %ld invoke + synchronize after %d warm-up; "
         "fastest %.1f us)\n", 1e6 * total / (double)calls, calls, kWarmupCalls, 1e6 * fastest);
  printf("axrt_mlp: OK, within the bound\n");
  exit_code = 0;

done:
  axrt_buffer_release(x_buffer);
  axrt_buffer_release(y_buffer);
  axrt_tensor_release(x);
  axrt_tensor_release(y);
  axrt_stream_release(stream);
  axrt_function_release(function);
  axrt_executable_release(executable);
  axrt_device_release(device);
  axrt_instance_release(instance);
  free(y_host);
  free_reference(&ref);
  return exit_code;
}
