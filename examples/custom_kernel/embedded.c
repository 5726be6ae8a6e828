/* Custom kernels, embedded: a kernel library built as a host shared object
 * (host_library.c) travels inside the .axe file as a HOST_SHARED_OBJECT
 * code object, so the application registers nothing.
 *
 *   embedded HOST_LIBRARY.so OUT.axe
 *
 * reads the shared object, writes OUT.axe with one function
 *
 *   transpose_and_number(m f32[37, 50]) -> (mt f32[50, 37], ids u32[1850])
 *     mt  = transpose(m)                      (example_transpose_f32)
 *     ids = 1000, 1003, 1006 ...              (example_iota_u32)
 *
 * then loads it twice: without AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE,
 * which must be refused with PERMISSION_DENIED (the file carries native
 * code), and with it, and runs and checks the function. Public API only. */
#include <axrt/axrt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

enum { kRows = 37, kCols = 50, kTile = 16, kIds = kRows * kCols, kIotaPerWorkgroup = 256 };
static const uint32_t kIotaStart = 1000;
static const uint32_t kIotaStep = 3;

/* The whole file at `path` in new memory (free it), or NULL. */
static unsigned char* read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return NULL;
  }
  unsigned char* data = NULL;
  size_t size = 0;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long end = ftell(f);
    if (end > 0 && fseek(f, 0, SEEK_SET) == 0) {
      size = (size_t)end;
      data = malloc(size);
      if (data != NULL && fread(data, 1, size, f) != size) {
        free(data);
        data = NULL;
      }
    }
  }
  fclose(f);
  if (data == NULL) fprintf(stderr, "%s: cannot read the file\n", path);
  *out_size = size;
  return data;
}

static axrt_axe_kernel_param_t buffer_param(const char* name, axrt_axe_access_t access) {
  axrt_axe_kernel_param_t p = AXRT_AXE_KERNEL_PARAM_INIT;
  p.name = name;
  p.access = access;
  return p;
}

static axrt_axe_kernel_param_t scalar_param(const char* name, axrt_axe_dtype_t type) {
  axrt_axe_kernel_param_t p = AXRT_AXE_KERNEL_PARAM_INIT;
  p.name = name;
  p.kind = AXRT_AXE_PARAM_KIND_SCALAR;
  p.scalar_type = type;
  return p;
}

static axrt_axe_binding_t bind(axrt_axe_binding_kind_t kind, uint32_t index) {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  binding.kind = kind;
  binding.index = index;
  return binding;
}

static axrt_axe_binding_t bind_scalar(const axrt_axe_expr_op_t* op) {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  binding.kind = AXRT_AXE_BINDING_KIND_SCALAR;
  binding.value.ops = op;
  binding.value.op_count = 1;
  return binding;
}

/* Writes the .axe embedding `code` (`size` bytes) to `path`. */
static axrt_status_t write_executable(const unsigned char* code, size_t size, const char* path) {
  axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  options.producer_name = "axrt custom kernel example";
  options.producer_version = "1";
  axrt_axe_builder_t builder = NULL;
  axrt_status_t status = axrt_axe_builder_create(&options, &builder);
  if (status != NULL) return status;

  /* The shared object's bytes, for this host's architecture. */
  axrt_axe_code_object_desc_t object = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  object.kind = AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT;
  object.target = AXRT_HOST_CODE_TARGET;
  object.data = code;
  object.size = size;
  uint32_t code_object = 0;
  status = axrt_axe_builder_add_code_object(builder, &object, &code_object);

  const axrt_axe_kernel_param_t transpose_params[4] = {
      buffer_param("in", AXRT_AXE_ACCESS_READ), buffer_param("out", AXRT_AXE_ACCESS_WRITE),
      scalar_param("rows", AXRT_AXE_DTYPE_UINT64), scalar_param("cols", AXRT_AXE_DTYPE_UINT64)};
  const axrt_axe_kernel_param_t iota_params[4] = {
      buffer_param("out", AXRT_AXE_ACCESS_WRITE), scalar_param("n", AXRT_AXE_DTYPE_UINT32),
      scalar_param("start", AXRT_AXE_DTYPE_UINT32), scalar_param("step", AXRT_AXE_DTYPE_UINT32)};
  uint32_t transpose = 0, iota = 0;
  status = example_add_kernel(status, builder, "transpose", code_object, "example_transpose_f32",
                              transpose_params, 4, &transpose);
  status = example_add_kernel(status, builder, "iota", code_object, "example_iota_u32",
                              iota_params, 4, &iota);

  const axrt_axe_dim_t m_dims[2] = {{kRows, -1}, {kCols, -1}};
  const axrt_axe_dim_t mt_dims[2] = {{kCols, -1}, {kRows, -1}};
  const axrt_axe_dim_t ids_dims[1] = {{kIds, -1}};
  axrt_axe_tensor_sig_t input = AXRT_AXE_TENSOR_SIG_INIT;
  input.name = "m";
  input.dtype = AXRT_AXE_DTYPE_FLOAT32;
  input.rank = 2;
  input.dims = m_dims;
  axrt_axe_tensor_sig_t outputs[2] = {AXRT_AXE_TENSOR_SIG_INIT, AXRT_AXE_TENSOR_SIG_INIT};
  outputs[0].name = "mt";
  outputs[0].dtype = AXRT_AXE_DTYPE_FLOAT32;
  outputs[0].rank = 2;
  outputs[0].dims = mt_dims;
  outputs[1].name = "ids";
  outputs[1].dtype = AXRT_AXE_DTYPE_UINT32;
  outputs[1].rank = 1;
  outputs[1].dims = ids_dims;
  uint32_t function = 0;
  if (status == NULL) {
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = "transpose_and_number";
    desc.inputs = &input;
    desc.input_count = 1;
    desc.outputs = outputs;
    desc.output_count = 2;
    status = axrt_axe_builder_add_function(builder, &desc, &function);
  }

  const axrt_axe_expr_op_t rows[] = {{AXRT_AXE_EXPR_OPCODE_CONST, kRows}};
  const axrt_axe_expr_op_t cols[] = {{AXRT_AXE_EXPR_OPCODE_CONST, kCols}};
  const axrt_axe_expr_op_t tiles_x[] = {{AXRT_AXE_EXPR_OPCODE_CONST, (kCols + kTile - 1) / kTile}};
  const axrt_axe_expr_op_t tiles_y[] = {{AXRT_AXE_EXPR_OPCODE_CONST, (kRows + kTile - 1) / kTile}};
  const axrt_axe_expr_op_t ids[] = {{AXRT_AXE_EXPR_OPCODE_CONST, kIds}};
  const axrt_axe_expr_op_t id_groups[] = {
      {AXRT_AXE_EXPR_OPCODE_CONST, (kIds + kIotaPerWorkgroup - 1) / kIotaPerWorkgroup}};
  const axrt_axe_expr_op_t start[] = {{AXRT_AXE_EXPR_OPCODE_CONST, kIotaStart}};
  const axrt_axe_expr_op_t step[] = {{AXRT_AXE_EXPR_OPCODE_CONST, kIotaStep}};
  if (status == NULL) {
    const axrt_axe_binding_t bindings[4] = {bind(AXRT_AXE_BINDING_KIND_INPUT, 0),
                                            bind(AXRT_AXE_BINDING_KIND_OUTPUT, 0),
                                            bind_scalar(rows), bind_scalar(cols)};
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = transpose;
    desc.workgroup_count_x = (axrt_axe_expr_t){tiles_x, 1};
    desc.workgroup_count_y = (axrt_axe_expr_t){tiles_y, 1};
    desc.bindings = bindings;
    desc.binding_count = 4;
    status = axrt_axe_builder_add_dispatch(builder, function, &desc);
  }
  if (status == NULL) {
    const axrt_axe_binding_t bindings[4] = {bind(AXRT_AXE_BINDING_KIND_OUTPUT, 1), bind_scalar(ids),
                                            bind_scalar(start), bind_scalar(step)};
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = iota;
    desc.workgroup_count_x = (axrt_axe_expr_t){id_groups, 1};
    desc.bindings = bindings;
    desc.binding_count = 4;
    status = axrt_axe_builder_add_dispatch(builder, function, &desc);
  }
  if (status == NULL) status = axrt_axe_builder_write_file(builder, path);
  axrt_axe_builder_release(builder);
  return status;
}

/* Runs the function of `executable` and checks its results. */
static bool run_and_check(axrt_device_t device, axrt_executable_t executable) {
  bool ok = false;
  axrt_function_t function = NULL;
  axrt_stream_t stream = NULL;
  axrt_tensor_t input = NULL;
  axrt_tensor_t outputs[2] = {NULL, NULL};
  static float m[kRows][kCols], mt[kCols][kRows];
  static uint32_t ids[kIds];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) m[r][c] = (float)(100 * r + c);
  }
  const int64_t shape[2] = {kRows, kCols};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = shape;
  if (example_failed(axrt_executable_find_function(executable, "transpose_and_number", &function),
                     "axrt_executable_find_function") ||
      example_failed(axrt_stream_create(device, NULL, &stream), "axrt_stream_create") ||
      example_failed(axrt_tensor_allocate(device, &desc, NULL, &input), "axrt_tensor_allocate") ||
      example_failed(example_tensor_transfer(stream, input, m, sizeof(m), false), "uploading m") ||
      example_failed(axrt_function_invoke(function, stream, &input, 1, outputs, 2, NULL),
                     "axrt_function_invoke") ||
      example_failed(axrt_stream_synchronize(stream), "running transpose_and_number") ||
      example_failed(example_tensor_transfer(stream, outputs[0], mt, sizeof(mt), true),
                     "downloading mt") ||
      example_failed(example_tensor_transfer(stream, outputs[1], ids, sizeof(ids), true),
                     "downloading ids")) {
    goto done;
  }
  int wrong = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      if (mt[c][r] != m[r][c] && wrong++ < 5) {
        fprintf(stderr, "mt[%d][%d] is %g, want %g\n", c, r, mt[c][r], m[r][c]);
      }
    }
  }
  for (int i = 0; i < kIds; ++i) {
    const uint32_t want = kIotaStart + (uint32_t)i * kIotaStep;
    if (ids[i] != want && wrong++ < 10) {
      fprintf(stderr, "ids[%d] is %" PRIu32 ", want %" PRIu32 "\n", i, ids[i], want);
    }
  }
  printf("transpose_and_number: m[2][7] = %g -> mt[7][2] = %g; ids = %" PRIu32 ", %" PRIu32
         ", ..., %" PRIu32 "\n",
         m[2][7], mt[7][2], ids[0], ids[1], ids[kIds - 1]);
  if (wrong != 0) {
    fprintf(stderr, "%d results are wrong\n", wrong);
    goto done;
  }
  printf("all %d transposed elements and %d ids match the reference\n", kRows * kCols, kIds);
  ok = true;

done:
  axrt_tensor_release(outputs[0]);
  axrt_tensor_release(outputs[1]);
  axrt_tensor_release(input);
  axrt_stream_release(stream);
  axrt_function_release(function);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST_LIBRARY.so OUT.axe\n", argv[0]);
    return 2;
  }
  int exit_code = 1;
  axrt_instance_t instance = NULL;
  axrt_device_t device = NULL;
  axrt_executable_t executable = NULL;
  size_t code_size = 0;
  unsigned char* code = read_file(argv[1], &code_size);
  if (code == NULL) return 1;

  if (example_failed(write_executable(code, code_size, argv[2]), "writing the executable"))
    goto done;
  printf("wrote %s, embedding %zu bytes of host code from %s\n", argv[2], code_size, argv[1]);
  if (example_failed(axrt_instance_create(NULL, &instance), "axrt_instance_create") ||
      example_failed(axrt_instance_find_device(instance, NULL, &device),
                     "axrt_instance_find_device")) {
    goto done;
  }

  /* Without the flag, native code in a file is refused before it is
   * mapped. */
  axrt_status_t refused = axrt_executable_load_file(device, argv[2], NULL, &executable);
  if (axrt_status_code(refused) != AXRT_STATUS_CODE_PERMISSION_DENIED) {
    fprintf(stderr, "loading without ALLOW_HOST_CODE should be refused with PERMISSION_DENIED\n");
    example_failed(refused, "axrt_executable_load_file");
    axrt_executable_release(executable);
    executable = NULL;
    goto done;
  }
  printf("without ALLOW_HOST_CODE: %s: %s\n", axrt_status_code_name(axrt_status_code(refused)),
         axrt_status_message(refused));
  axrt_status_free(refused);

  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.flags = AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE;
  if (example_failed(axrt_executable_load_file(device, argv[2], &options, &executable),
                     "axrt_executable_load_file with ALLOW_HOST_CODE")) {
    goto done;
  }
  printf("with ALLOW_HOST_CODE: loaded\n");
  if (run_and_check(device, executable)) exit_code = 0;

done:
  axrt_executable_release(executable);
  axrt_device_release(device);
  axrt_instance_release(instance);
  free(code);
  return exit_code;
}
