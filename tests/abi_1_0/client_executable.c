#include "client_executable.h"

#include <stdio.h>
#include <string.h>

#include "axrt/format.h"

/* ---------------------------------------------------------------------- */
/* The client's kernel library                                             */
/* ---------------------------------------------------------------------- */

/* The argument blocks, laid out by the kernel ABI's C rules. */
typedef struct scale_shift_args_t {
  const float* x;
  float* y;
  uint64_t n;
  float alpha;
} scale_shift_args_t;
_Static_assert(sizeof(scale_shift_args_t) == 32, "two buffers, a u64 and an f32: 32 bytes");

typedef struct fail_args_t {
  const float* x;
  float* y;
} fail_args_t;

enum { kScaleShiftWorkgroup = 16 }; /* elements per workgroup */

typedef struct client_library_state_t {
  float shift;
} client_library_state_t;

static client_library_state_t g_state = {CLIENT_LIBRARY_SHIFT};
static client_library_counters_t g_counters;

static axrt_kernel_result_t scale_shift(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                       const axrt_kernel_workgroup_t* workgroup) {
  const scale_shift_args_t* a = (const scale_shift_args_t*)args;
  const client_library_state_t* state = (const client_library_state_t*)dispatch->library_state;
  if (state != &g_state) return 13; /* INTERNAL: init's state did not arrive */
  const uint64_t begin = (uint64_t)workgroup->workgroup_id.x * kScaleShiftWorkgroup;
  const uint64_t end = begin + kScaleShiftWorkgroup < a->n ? begin + kScaleShiftWorkgroup : a->n;
  for (uint64_t i = begin; i < end; ++i) a->y[i] = a->alpha * a->x[i] + state->shift;
  return AXRT_KERNEL_OK;
}

static axrt_kernel_result_t fail(const void* args, const axrt_kernel_dispatch_t* dispatch,
                                const axrt_kernel_workgroup_t* workgroup) {
  (void)args;
  (void)dispatch;
  snprintf(workgroup->error_message, workgroup->error_message_capacity, "%s", CLIENT_FAIL_MESSAGE);
  return 13; /* INTERNAL */
}

static axrt_kernel_result_t client_init(const axrt_kernel_library_context_t* context,
                                        void** out_state) {
  ++g_counters.init_calls;
  if (context->struct_size < sizeof(axrt_kernel_library_context_t) ||
      strcmp(context->device_id, "cpu:0") != 0) {
    ++g_counters.bad_contexts;
  }
  *out_state = &g_state;
  return AXRT_KERNEL_OK;
}

static void client_deinit(void* state) {
  if (state == &g_state) ++g_counters.deinit_calls;
}

static const axrt_kernel_param_info_t kScaleShiftParams[4] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"n", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_UINT64, NULL},
    {"alpha", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_FLOAT32, NULL},
};

static const axrt_kernel_param_info_t kFailParams[2] = {
    {"x", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
    {"y", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, NULL},
};

static const axrt_kernel_info_t kClientKernels[2] = {
    {"abi_1_0_scale_shift", scale_shift, kScaleShiftParams, 4, sizeof(scale_shift_args_t)},
    {"abi_1_0_fail", fail, kFailParams, 2, sizeof(fail_args_t)},
};

static const axrt_kernel_library_t kClientLibrary = {
    sizeof(axrt_kernel_library_t),
    AXRT_KERNEL_ABI_VERSION,
    1, /* version */
    CLIENT_LIBRARY_NAME,
    kClientKernels,
    2,
    client_init,
    client_deinit,
};

const axrt_kernel_library_t* client_kernel_library(void) { return &kClientLibrary; }

const client_library_counters_t* client_library_counters(void) { return &g_counters; }

/* ---------------------------------------------------------------------- */
/* The executable                                                          */
/* ---------------------------------------------------------------------- */

#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    axrt_status_t status_ = (expr);      \
    if (status_ != NULL) return status_; \
  } while (0)

static uint64_t float_bits(float value) {
  uint32_t bits = 0;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static axrt_axe_binding_t binding(axrt_axe_binding_kind_t kind, uint32_t index) {
  axrt_axe_binding_t b = AXRT_AXE_BINDING_INIT;
  b.kind = kind;
  b.index = index;
  return b;
}

static axrt_axe_binding_t arena(uint64_t offset, uint64_t size) {
  axrt_axe_binding_t b = AXRT_AXE_BINDING_INIT;
  b.kind = AXRT_AXE_BINDING_KIND_ARENA;
  b.offset = offset;
  b.size = size;
  return b;
}

static axrt_axe_binding_t scalar(const axrt_axe_expr_op_t* ops, size_t op_count) {
  axrt_axe_binding_t b = AXRT_AXE_BINDING_INIT;
  b.kind = AXRT_AXE_BINDING_KIND_SCALAR;
  b.value.ops = ops;
  b.value.op_count = op_count;
  return b;
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
  p.access = AXRT_AXE_ACCESS_NONE;
  return p;
}

static axrt_status_t add_library(axrt_axe_builder_t builder, const char* name,
                                 uint32_t* out_index) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  desc.target = AXRT_HOST_CODE_TARGET;
  desc.library_name = name;
  desc.library_min_version = 1;
  return axrt_axe_builder_add_code_object(builder, &desc, out_index);
}

static axrt_status_t add_kernel(axrt_axe_builder_t builder, const char* name, uint32_t library,
                                const char* entry, const axrt_axe_kernel_param_t* params,
                                size_t param_count, uint32_t* out_index) {
  axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
  desc.name = name;
  desc.code_object = library;
  desc.entry_symbol = entry;
  desc.params = params;
  desc.param_count = param_count;
  return axrt_axe_builder_add_kernel(builder, &desc, out_index);
}

static axrt_status_t add_constant(axrt_axe_builder_t builder, const char* name,
                                  const float values[4], uint32_t* out_index) {
  static const uint64_t kShape[1] = {4};
  axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
  desc.name = name;
  desc.dtype = AXRT_AXE_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = kShape;
  desc.data = values;
  desc.size = 4 * sizeof(float);
  return axrt_axe_builder_add_constant(builder, &desc, out_index);
}

static axrt_axe_tensor_sig_t signature(const char* name, const axrt_axe_dim_t* dim) {
  axrt_axe_tensor_sig_t sig = AXRT_AXE_TENSOR_SIG_INIT;
  sig.name = name;
  sig.dtype = AXRT_AXE_DTYPE_FLOAT32;
  sig.rank = 1;
  sig.dims = dim;
  return sig;
}

static axrt_status_t add_function(axrt_axe_builder_t builder, const char* name,
                                  const axrt_axe_symbol_t* symbol, const axrt_axe_tensor_sig_t* in,
                                  size_t in_count, const axrt_axe_tensor_sig_t* out,
                                  size_t out_count, uint64_t arena_size, uint32_t* out_index) {
  axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
  desc.name = name;
  desc.symbols = symbol;
  desc.symbol_count = symbol != NULL ? 1 : 0;
  desc.inputs = in;
  desc.input_count = in_count;
  desc.outputs = out;
  desc.output_count = out_count;
  desc.arena_size = arena_size;
  return axrt_axe_builder_add_function(builder, &desc, out_index);
}

static axrt_status_t add_dispatch(axrt_axe_builder_t builder, uint32_t function, uint32_t kernel,
                                  const axrt_axe_expr_op_t* grid, size_t grid_ops,
                                  const axrt_axe_binding_t* bindings, size_t binding_count) {
  axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
  desc.kernel = kernel;
  desc.workgroup_count_x.ops = grid;
  desc.workgroup_count_x.op_count = grid_ops;
  desc.bindings = bindings;
  desc.binding_count = binding_count;
  return axrt_axe_builder_add_dispatch(builder, function, &desc);
}

static axrt_status_t build(axrt_axe_builder_t builder) {
  static const axrt_axe_expr_op_t kOne[1] = {{AXRT_AXE_EXPR_OPCODE_CONST, 1}};
  static const axrt_axe_expr_op_t kFour[1] = {{AXRT_AXE_EXPR_OPCODE_CONST, 4}};
  static const axrt_axe_expr_op_t kN[1] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0}};
  static const axrt_axe_expr_op_t kWorkgroups[3] = {
      {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
      {AXRT_AXE_EXPR_OPCODE_CONST, kScaleShiftWorkgroup},
      {AXRT_AXE_EXPR_OPCODE_DIV_CEIL, 0},
  };
  static const axrt_axe_expr_op_t kNBytes[3] = {
      {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
      {AXRT_AXE_EXPR_OPCODE_CONST, sizeof(float)},
      {AXRT_AXE_EXPR_OPCODE_MUL, 0},
  };
  const axrt_axe_expr_op_t alpha[1] = {
      {AXRT_AXE_EXPR_OPCODE_CONST, (int64_t)float_bits(CLIENT_SCALE_SHIFT_ALPHA)}};

  RETURN_IF_ERROR(axrt_axe_builder_add_metadata(builder, "client", "abi 1.0"));

  uint32_t cpu_library = 0;
  uint32_t client_library = 0;
  RETURN_IF_ERROR(add_library(builder, "axrt.cpu", &cpu_library));
  RETURN_IF_ERROR(add_library(builder, CLIENT_LIBRARY_NAME, &client_library));

  const axrt_axe_kernel_param_t a = buffer_param("a", AXRT_AXE_ACCESS_READ);
  const axrt_axe_kernel_param_t b = buffer_param("b", AXRT_AXE_ACCESS_READ);
  const axrt_axe_kernel_param_t x = buffer_param("x", AXRT_AXE_ACCESS_READ);
  const axrt_axe_kernel_param_t y = buffer_param("y", AXRT_AXE_ACCESS_WRITE);
  const axrt_axe_kernel_param_t out = buffer_param("out", AXRT_AXE_ACCESS_WRITE);
  const axrt_axe_kernel_param_t n = scalar_param("n", AXRT_AXE_DTYPE_UINT64);
  const axrt_axe_kernel_param_t alpha_param = scalar_param("alpha", AXRT_AXE_DTYPE_FLOAT32);
  const axrt_axe_kernel_param_t binary[4] = {a, b, out, n};
  const axrt_axe_kernel_param_t scale_shift_params[4] = {x, y, n, alpha_param};
  const axrt_axe_kernel_param_t fail_params[2] = {x, y};

  uint32_t mul = 0;
  uint32_t add = 0;
  uint32_t scale = 0;
  uint32_t failing = 0;
  RETURN_IF_ERROR(add_kernel(builder, "mul", cpu_library, "axrt_mul_f32", binary, 4, &mul));
  RETURN_IF_ERROR(add_kernel(builder, "add", cpu_library, "axrt_add_f32", binary, 4, &add));
  RETURN_IF_ERROR(add_kernel(builder, "scale_shift", client_library, "abi_1_0_scale_shift",
                             scale_shift_params, 4, &scale));
  RETURN_IF_ERROR(
      add_kernel(builder, "fail", client_library, "abi_1_0_fail", fail_params, 2, &failing));

  uint32_t w = 0;
  uint32_t bias = 0;
  RETURN_IF_ERROR(add_constant(builder, "w", kAffineW, &w));
  RETURN_IF_ERROR(add_constant(builder, "b", kAffineB, &bias));

  /* 0 "affine": y = x * w + b. */
  const axrt_axe_dim_t four = {4, -1};
  const axrt_axe_tensor_sig_t affine_in[1] = {signature("x", &four)};
  const axrt_axe_tensor_sig_t affine_out[1] = {signature("y", &four)};
  uint32_t affine = 0;
  RETURN_IF_ERROR(add_function(builder, "affine", NULL, affine_in, 1, affine_out, 1, 16, &affine));
  const axrt_axe_binding_t mul_bindings[4] = {
      binding(AXRT_AXE_BINDING_KIND_INPUT, 0), binding(AXRT_AXE_BINDING_KIND_CONSTANT, w),
      arena(0, 16), scalar(kFour, 1)};
  const axrt_axe_binding_t add_bindings[4] = {
      arena(0, 16), binding(AXRT_AXE_BINDING_KIND_CONSTANT, bias),
      binding(AXRT_AXE_BINDING_KIND_OUTPUT, 0), scalar(kFour, 1)};
  RETURN_IF_ERROR(add_dispatch(builder, affine, mul, kOne, 1, mul_bindings, 4));
  RETURN_IF_ERROR(add_dispatch(builder, affine, add, kOne, 1, add_bindings, 4));

  /* 1 "scale_shift": y = alpha * x + shift over ceil(n / 16) workgroups; z = x. */
  axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
  symbol.name = "n";
  symbol.upper_bound = 64;
  const axrt_axe_dim_t symbolic = {0, 0};
  const axrt_axe_tensor_sig_t scale_in[1] = {signature("x", &symbolic)};
  const axrt_axe_tensor_sig_t scale_out[2] = {signature("y", &symbolic),
                                              signature("z", &symbolic)};
  uint32_t scale_shift_function = 0;
  RETURN_IF_ERROR(add_function(builder, "scale_shift", &symbol, scale_in, 1, scale_out, 2, 0,
                               &scale_shift_function));
  const axrt_axe_binding_t scale_bindings[4] = {
      binding(AXRT_AXE_BINDING_KIND_INPUT, 0), binding(AXRT_AXE_BINDING_KIND_OUTPUT, 0),
      scalar(kN, 1), scalar(alpha, 1)};
  RETURN_IF_ERROR(
      add_dispatch(builder, scale_shift_function, scale, kWorkgroups, 3, scale_bindings, 4));
  const axrt_axe_binding_t copy_src = binding(AXRT_AXE_BINDING_KIND_INPUT, 0);
  const axrt_axe_binding_t copy_dst = binding(AXRT_AXE_BINDING_KIND_OUTPUT, 1);
  axrt_axe_copy_desc_t copy = AXRT_AXE_COPY_DESC_INIT;
  copy.src = &copy_src;
  copy.dst = &copy_dst;
  copy.length.ops = kNBytes;
  copy.length.op_count = 3;
  RETURN_IF_ERROR(axrt_axe_builder_add_copy(builder, scale_shift_function, &copy));

  /* 2 "fail". */
  const axrt_axe_dim_t one = {1, -1};
  const axrt_axe_tensor_sig_t fail_in[1] = {signature("x", &one)};
  const axrt_axe_tensor_sig_t fail_out[1] = {signature("y", &one)};
  uint32_t fail_function = 0;
  RETURN_IF_ERROR(add_function(builder, "fail", NULL, fail_in, 1, fail_out, 1, 0, &fail_function));
  const axrt_axe_binding_t fail_bindings[2] = {binding(AXRT_AXE_BINDING_KIND_INPUT, 0),
                                               binding(AXRT_AXE_BINDING_KIND_OUTPUT, 0)};
  return add_dispatch(builder, fail_function, failing, kOne, 1, fail_bindings, 2);
}

axrt_status_t build_client_executable(const char* path, void** out_data, size_t* out_size) {
  axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
  options.producer_name = CLIENT_PRODUCER_NAME;
  options.producer_version = "1.0";
  axrt_axe_builder_t builder = NULL;
  RETURN_IF_ERROR(axrt_axe_builder_create(&options, &builder));
  axrt_status_t status = build(builder);
  if (status == NULL && path != NULL) status = axrt_axe_builder_write_file(builder, path);
  if (status == NULL) status = axrt_axe_builder_write_memory(builder, out_data, out_size);
  axrt_axe_builder_release(builder);
  return status;
}
