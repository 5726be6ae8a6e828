/* Custom kernels, registered: the application defines a CPU kernel library
 * (registered_library.c), registers it with its instance, builds an .axe
 * that names the library with the builder C API, and runs it:
 *
 *   saxpy_clamp(x f32[n], y f32[n]) -> (axpy f32[n], clamped f32[n])
 *     axpy    = 2.5 x + y             (example_saxpy_f32)
 *     clamped = clamp(axpy, -1, 1)    (example_clamp_f32, reading output 0)
 *
 * Public API only. Run it with AXRT_DEVICE=<id> to pick another CPU device. */
#include <axrt/axrt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"
#include "registered_library.h"

enum { kCount = 1000 };
static const float kAlpha = 2.5f;
static const float kLo = -1.0f;
static const float kHi = 1.0f;

static uint64_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static axrt_axe_binding_t bind(axrt_axe_binding_kind_t kind, uint32_t index) {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  binding.kind = kind;
  binding.index = index;
  return binding;
}

static axrt_axe_binding_t bind_scalar(axrt_axe_expr_t value) {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  binding.kind = AXRT_AXE_BINDING_KIND_SCALAR;
  binding.value = value;
  return binding;
}

/* An .axe whose function "saxpy_clamp" runs the two kernels of the library
 * over n <= 1 << 20 elements. The caller frees `*out_data` with
 * axrt_axe_memory_free(). */
static axrt_status_t build_executable(void** out_data, size_t* out_size) {
  axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  options.producer_name = "axrt custom kernel example";
  options.producer_version = "1";
  axrt_axe_builder_t builder = NULL;
  axrt_status_t status = axrt_axe_builder_create(&options, &builder);
  if (status != NULL) return status;

  /* The library, named rather than carried: the loader finds it in the
   * instance's registry. */
  axrt_axe_code_object_desc_t library = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  library.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  library.target = AXRT_HOST_CODE_TARGET;
  library.library_name = EXAMPLE_REGISTERED_LIBRARY_NAME;
  library.library_min_version = EXAMPLE_REGISTERED_LIBRARY_VERSION;
  uint32_t code = 0;
  status = axrt_axe_builder_add_code_object(builder, &library, &code);

  /* Parameter tables equal to the library's; the loader checks them. */
  axrt_axe_kernel_param_t saxpy_params[5];
  const char* saxpy_names[5] = {"x", "y", "out", "n", "alpha"};
  for (int i = 0; i < 5; ++i) {
    axrt_axe_kernel_param_t p = AXRT_AXE_KERNEL_PARAM_INIT;
    p.name = saxpy_names[i];
    saxpy_params[i] = p;
  }
  saxpy_params[2].access = AXRT_AXE_ACCESS_WRITE;
  saxpy_params[3].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  saxpy_params[3].scalar_type = AXRT_AXE_DTYPE_UINT64;
  saxpy_params[4].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  saxpy_params[4].scalar_type = AXRT_AXE_DTYPE_FLOAT32;

  axrt_axe_kernel_param_t clamp_params[5];
  const char* clamp_names[5] = {"x", "out", "n", "lo", "hi"};
  for (int i = 0; i < 5; ++i) {
    axrt_axe_kernel_param_t p = AXRT_AXE_KERNEL_PARAM_INIT;
    p.name = clamp_names[i];
    clamp_params[i] = p;
  }
  clamp_params[1].access = AXRT_AXE_ACCESS_WRITE;
  clamp_params[2].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  clamp_params[2].scalar_type = AXRT_AXE_DTYPE_UINT64;
  for (int i = 3; i < 5; ++i) {
    clamp_params[i].kind = AXRT_AXE_PARAM_KIND_SCALAR;
    clamp_params[i].scalar_type = AXRT_AXE_DTYPE_FLOAT32;
  }

  uint32_t saxpy = 0, clamp = 0;
  status = example_add_kernel(status, builder, "saxpy", code, "example_saxpy_f32",
                              saxpy_params, 5, &saxpy);
  status = example_add_kernel(status, builder, "clamp", code, "example_clamp_f32",
                              clamp_params, 5, &clamp);

  /* saxpy_clamp(x f32[n], y f32[n]) -> (axpy f32[n], clamped f32[n]). */
  axrt_axe_symbol_t n_symbol = AXRT_AXE_SYMBOL_INIT;
  n_symbol.name = "n";
  n_symbol.upper_bound = 1u << 20;
  const axrt_axe_dim_t n_dim = {0, 0};
  axrt_axe_tensor_sig_t inputs[2], outputs[2];
  const char* input_names[2] = {"x", "y"};
  const char* output_names[2] = {"axpy", "clamped"};
  for (int i = 0; i < 2; ++i) {
    axrt_axe_tensor_sig_t sig = AXRT_AXE_TENSOR_SIG_INIT;
    sig.dtype = AXRT_AXE_DTYPE_FLOAT32;
    sig.rank = 1;
    sig.dims = &n_dim;
    sig.name = input_names[i];
    inputs[i] = sig;
    sig.name = output_names[i];
    outputs[i] = sig;
  }
  uint32_t function = 0;
  if (status == NULL) {
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = "saxpy_clamp";
    desc.symbols = &n_symbol;
    desc.symbol_count = 1;
    desc.inputs = inputs;
    desc.input_count = 2;
    desc.outputs = outputs;
    desc.output_count = 2;
    status = axrt_axe_builder_add_function(builder, &desc, &function);
  }

  /* Expressions: n, ceil(n / 256), and the scalars' literal bits. */
  const axrt_axe_expr_op_t n_ops[] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0}};
  const axrt_axe_expr_op_t groups_ops[] = {
      {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
      {AXRT_AXE_EXPR_OPCODE_CONST, EXAMPLE_ELEMENTS_PER_WORKGROUP},
      {AXRT_AXE_EXPR_OPCODE_DIV_CEIL, 0}};
  const axrt_axe_expr_op_t alpha_ops[] = {
      {AXRT_AXE_EXPR_OPCODE_CONST, (int64_t)float_bits(kAlpha)}};
  const axrt_axe_expr_op_t lo_ops[] = {{AXRT_AXE_EXPR_OPCODE_CONST, (int64_t)float_bits(kLo)}};
  const axrt_axe_expr_op_t hi_ops[] = {{AXRT_AXE_EXPR_OPCODE_CONST, (int64_t)float_bits(kHi)}};
  const axrt_axe_expr_t n_expr = {n_ops, 1};
  const axrt_axe_expr_t groups = {groups_ops, 3};

  if (status == NULL) {
    const axrt_axe_binding_t bindings[5] = {
        bind(AXRT_AXE_BINDING_KIND_INPUT, 0), bind(AXRT_AXE_BINDING_KIND_INPUT, 1),
        bind(AXRT_AXE_BINDING_KIND_OUTPUT, 0), bind_scalar(n_expr),
        bind_scalar((axrt_axe_expr_t){alpha_ops, 1})};
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = saxpy;
    desc.workgroup_count_x = groups;
    desc.bindings = bindings;
    desc.binding_count = 5;
    status = axrt_axe_builder_add_dispatch(builder, function, &desc);
  }
  if (status == NULL) {
    /* The clamp reads output 0, which the saxpy wrote before it (a
     * function's commands run in order), and writes output 1. */
    const axrt_axe_binding_t bindings[5] = {
        bind(AXRT_AXE_BINDING_KIND_OUTPUT, 0), bind(AXRT_AXE_BINDING_KIND_OUTPUT, 1),
        bind_scalar(n_expr), bind_scalar((axrt_axe_expr_t){lo_ops, 1}),
        bind_scalar((axrt_axe_expr_t){hi_ops, 1})};
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = clamp;
    desc.workgroup_count_x = groups;
    desc.bindings = bindings;
    desc.binding_count = 5;
    status = axrt_axe_builder_add_dispatch(builder, function, &desc);
  }
  if (status == NULL) status = axrt_axe_builder_write_memory(builder, out_data, out_size);
  axrt_axe_builder_release(builder);
  return status;
}

int main(void) {
  int exit_code = 1;
  axrt_instance_t instance = NULL;
  axrt_device_t device = NULL;
  axrt_stream_t stream = NULL;
  axrt_executable_t executable = NULL;
  axrt_function_t function = NULL;
  axrt_tensor_t inputs[2] = {NULL, NULL};
  axrt_tensor_t outputs[2] = {NULL, NULL};
  void* file = NULL;
  size_t file_size = 0;
  float* x = malloc(sizeof(float) * kCount);
  float* y = malloc(sizeof(float) * kCount);
  float* axpy = malloc(sizeof(float) * kCount);
  float* clamped = malloc(sizeof(float) * kCount);
  if (!x || !y || !axpy || !clamped) goto done;
  for (int i = 0; i < kCount; ++i) {
    x[i] = (float)(i % 17) / 8.0f - 1.0f;
    y[i] = (float)(i % 5) / 4.0f - 0.5f;
  }

  if (example_failed(axrt_instance_create(NULL, &instance), "axrt_instance_create")) goto done;
  if (example_failed(axrt_instance_find_device(instance, NULL, &device),
                     "axrt_instance_find_device")) {
    goto done;
  }
  /* The table is static, so it outlives the instance, as registration
   * requires. */
  if (example_failed(axrt_instance_register_kernel_library(instance, example_registered_library()),
                     "axrt_instance_register_kernel_library")) {
    goto done;
  }
  if (example_failed(build_executable(&file, &file_size), "building the executable")) goto done;
  printf("built an .axe of %zu bytes naming kernel library '%s'\n", file_size,
         EXAMPLE_REGISTERED_LIBRARY_NAME);
  /* The library's init runs here, once for this device. */
  if (example_failed(axrt_executable_load_memory(device, file, file_size, NULL, &executable),
                     "axrt_executable_load_memory")) {
    goto done;
  }
  if (example_failed(axrt_executable_find_function(executable, "saxpy_clamp", &function),
                     "axrt_executable_find_function") ||
      example_failed(axrt_stream_create(device, NULL, &stream), "axrt_stream_create")) {
    goto done;
  }

  const int64_t shape[1] = {kCount};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  const float* host_inputs[2] = {x, y};
  for (int i = 0; i < 2; ++i) {
    if (example_failed(axrt_tensor_allocate(device, &desc, NULL, &inputs[i]),
                       "axrt_tensor_allocate") ||
        example_failed(example_tensor_transfer(stream, inputs[i], (void*)host_inputs[i],
                                               sizeof(float) * kCount, false),
                       "uploading an input")) {
      goto done;
    }
  }
  /* NULL outputs are allocated by the call. */
  if (example_failed(axrt_function_invoke(function, stream, inputs, 2, outputs, 2, NULL),
                     "axrt_function_invoke") ||
      example_failed(axrt_stream_synchronize(stream), "running saxpy_clamp") ||
      example_failed(
          example_tensor_transfer(stream, outputs[0], axpy, sizeof(float) * kCount, true),
          "downloading axpy") ||
      example_failed(
          example_tensor_transfer(stream, outputs[1], clamped, sizeof(float) * kCount, true),
          "downloading clamped")) {
    goto done;
  }

  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    const float want = kAlpha * x[i] + y[i];
    const float want_clamped = want < kLo ? kLo : want > kHi ? kHi : want;
    if (fabsf(axpy[i] - want) > 1e-6f * (1.0f + fabsf(want)) || clamped[i] != want_clamped) {
      if (wrong++ < 5) {
        fprintf(stderr, "element %d: got (%g, %g), want (%g, %g)\n", i, axpy[i], clamped[i], want,
                want_clamped);
      }
    }
  }
  printf("saxpy_clamp over %d elements:\n", kCount);
  const int shown[4] = {0, 6, 8, 11};
  for (int j = 0; j < 4; ++j) {
    const int i = shown[j];
    printf("  x = %6.3f  y = %6.3f  ->  axpy = %6.3f  clamped = %6.3f\n", x[i], y[i], axpy[i],
           clamped[i]);
  }
  if (wrong != 0) {
    fprintf(stderr, "%d of %d elements are wrong\n", wrong, kCount);
    goto done;
  }
  printf("all %d elements match the reference\n", kCount);
  exit_code = 0;

done:
  for (int i = 0; i < 2; ++i) {
    axrt_tensor_release(inputs[i]);
    axrt_tensor_release(outputs[i]);
  }
  axrt_function_release(function);
  /* The library's deinit runs with the last executable that uses it. */
  axrt_executable_release(executable);
  axrt_stream_release(stream);
  axrt_device_release(device);
  axrt_instance_release(instance);
  axrt_axe_memory_free(file);
  free(x);
  free(y);
  free(axpy);
  free(clamped);
  return exit_code;
}
