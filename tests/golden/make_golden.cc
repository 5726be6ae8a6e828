// Writes the golden .axe files of one format version through the public C
// API only. Not run by the tests: the files it wrote are committed under
// tests/golden/v<version>/ and must keep loading forever (README.md).
//
//   axrt_make_golden [--version 1.0|1.1] OUTPUT_DIR
//
// Each version's set holds the files added with that version (1.1: kernel
// variants); the default is the newest. Today's writer stamps every file with
// the newest minor, so rerunning an older set does not reproduce its
// committed bytes: released directories are never regenerated.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "axrt/axrt.h"

#ifndef AXRT_GOLDEN_HOST_SO
#error "AXRT_GOLDEN_HOST_SO must name the tiny shared library (tests/golden/CMakeLists.txt)"
#endif

namespace {

void check(axrt_status_t status, const char* what) {
  if (!status) return;
  std::fprintf(stderr, "axrt_make_golden: %s: %s\n", what, axrt_status_message(status));
  axrt_status_free(status);
  std::exit(1);
}

#define CHECK_OK(expr) check((expr), #expr)

// Deterministic filler bytes.
std::vector<uint8_t> pattern_bytes(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t state = seed * 2654435761u + 1;
  for (uint8_t& byte : bytes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<uint8_t>(state >> 24);
  }
  return bytes;
}

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "axrt_make_golden: cannot read %s\n", path);
    std::exit(1);
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void put_u16(std::vector<uint8_t>& out, size_t at, uint16_t v) {
  out[at] = static_cast<uint8_t>(v);
  out[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(std::vector<uint8_t>& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<uint8_t>& out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// A minimal cubin: an ELF64 little-endian header for EM_CUDA (190) with the
// SM version in e_flags, and no sections.
std::vector<uint8_t> minimal_cubin(uint32_t sm) {
  std::vector<uint8_t> elf(256, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1 /* version */,
                           0x33 /* CUDA ABI */, 7};
  std::memcpy(elf.data(), ident, sizeof(ident));
  put_u16(elf, 16, 2);      // e_type ET_EXEC
  put_u16(elf, 18, 190);    // e_machine EM_CUDA
  put_u32(elf, 20, 1);      // e_version
  put_u32(elf, 48, sm | (sm << 16));  // e_flags: SM and virtual SM
  put_u16(elf, 52, 64);     // e_ehsize
  put_u16(elf, 54, 56);     // e_phentsize
  put_u16(elf, 58, 64);     // e_shentsize
  return elf;
}

// A minimal fatbin: the 16-byte header (magic 0xBA55ED50, version 1, header
// size 16, payload size) followed by an empty payload of that size.
std::vector<uint8_t> minimal_fatbin() {
  std::vector<uint8_t> fatbin(16 + 64, 0);
  put_u32(fatbin, 0, 0xBA55ED50u);
  put_u16(fatbin, 4, 1);
  put_u16(fatbin, 6, 16);
  put_u64(fatbin, 8, 64);
  return fatbin;
}

const char kPtx[] =
    "//\n// Generated for the axrt golden files\n//\n\n"
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n\n"
    ".visible .entry axpy(\n"
    "\t.param .u64 axpy_param_0,\n"
    "\t.param .u64 axpy_param_1\n"
    ")\n{\n\tret;\n}\n";

// The PTX of the 1.1 files: the axpy kernel with the parameters (x, y, n) of
// the kernel it implements.
const char kAxpyPtx[] =
    "//\n// Generated for the axrt golden files\n//\n\n"
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n\n"
    ".visible .entry axpy(\n"
    "\t.param .u64 axpy_param_0,\n"
    "\t.param .u64 axpy_param_1,\n"
    "\t.param .u32 axpy_param_2\n"
    ")\n{\n\tret;\n}\n";

class Builder {
 public:
  // `version` is the producer version the file records: the format version
  // of the set it belongs to.
  explicit Builder(const char* version = "1.0") {
    axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
    options.producer_name = "axrt_make_golden";
    options.producer_version = version;
    CHECK_OK(axrt_axe_builder_create(&options, &builder_));
  }
  ~Builder() { axrt_axe_builder_release(builder_); }
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;
  axrt_axe_builder_t get() const { return builder_; }

  void write(const std::string& dir, const char* name) const {
    const std::string path = dir + "/" + name;
    CHECK_OK(axrt_axe_builder_write_file(builder_, path.c_str()));
    std::printf("wrote %s\n", path.c_str());
  }

 private:
  axrt_axe_builder_t builder_ = nullptr;
};

uint32_t add_kernel_library(axrt_axe_builder_t b) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  desc.target = "x86_64";
  desc.library_name = "axrt.cpu";
  desc.library_min_version = 1;
  uint32_t index = 0;
  CHECK_OK(axrt_axe_builder_add_code_object(b, &desc, &index));
  return index;
}

uint32_t add_constant(axrt_axe_builder_t b, const char* name, axrt_axe_dtype_t dtype,
                      std::vector<uint64_t> shape, size_t bytes, uint32_t seed,
                      const axrt_axe_quant_layout_t* layout = nullptr, uint64_t alignment = 0) {
  const std::vector<uint8_t> data = pattern_bytes(bytes, seed);
  axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
  desc.name = name;
  desc.dtype = dtype;
  desc.rank = shape.size();
  desc.shape = shape.data();
  desc.alignment = alignment;
  desc.data = data.data();
  desc.size = data.size();
  desc.layout = layout;
  uint32_t index = 0;
  CHECK_OK(axrt_axe_builder_add_constant(b, &desc, &index));
  return index;
}

axrt_axe_expr_t literal(const axrt_axe_expr_op_t* op) { return axrt_axe_expr_t{op, 1}; }

// One quantized weight behind a matrix-vector kernel whose weight parameter
// declares the weight's layout, and a function "main" dispatching it, so the
// layout-matching rule is exercised too.
void add_matvec(axrt_axe_builder_t b, uint32_t weight, const axrt_axe_quant_layout_t* layout,
                uint64_t in_features, uint64_t out_features) {
  const uint32_t library = add_kernel_library(b);
  axrt_axe_kernel_param_t params[4] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT,
                                       AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "x";
  params[1].name = "w";
  params[1].layout = layout;
  params[2].name = "y";
  params[2].access = AXRT_AXE_ACCESS_WRITE;
  params[3].name = "n";
  params[3].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[3].scalar_type = AXRT_AXE_DTYPE_UINT32;
  params[3].access = AXRT_AXE_ACCESS_NONE;
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "matvec";
  kernel.code_object = library;
  kernel.entry_symbol = "axrt_cpu_matvec";
  kernel.params = params;
  kernel.param_count = 4;
  kernel.workgroup_size[0] = 64;
  uint32_t kernel_index = 0;
  CHECK_OK(axrt_axe_builder_add_kernel(b, &kernel, &kernel_index));

  const axrt_axe_dim_t x_dims[] = {{in_features, -1}};
  const axrt_axe_dim_t y_dims[] = {{out_features, -1}};
  axrt_axe_tensor_sig_t x = AXRT_AXE_TENSOR_SIG_INIT;
  x.name = "x";
  x.dtype = AXRT_AXE_DTYPE_FLOAT32;
  x.rank = 1;
  x.dims = x_dims;
  axrt_axe_tensor_sig_t y = AXRT_AXE_TENSOR_SIG_INIT;
  y.name = "y";
  y.dtype = AXRT_AXE_DTYPE_FLOAT32;
  y.rank = 1;
  y.dims = y_dims;
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "main";
  function.inputs = &x;
  function.input_count = 1;
  function.outputs = &y;
  function.output_count = 1;
  uint32_t function_index = 0;
  CHECK_OK(axrt_axe_builder_add_function(b, &function, &function_index));

  const axrt_axe_expr_op_t one = {AXRT_AXE_EXPR_OPCODE_CONST, 1};
  const axrt_axe_expr_op_t n = {AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(in_features)};
  axrt_axe_binding_t bindings[4] = {AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT,
                                    AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT};
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  bindings[1].kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  bindings[1].index = weight;
  bindings[2].kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  bindings[3].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[3].value = literal(&n);
  axrt_axe_dispatch_desc_t dispatch = AXRT_AXE_DISPATCH_DESC_INIT;
  dispatch.kernel = kernel_index;
  dispatch.workgroup_count_x = literal(&one);
  dispatch.bindings = bindings;
  dispatch.binding_count = 4;
  CHECK_OK(axrt_axe_builder_add_dispatch(b, function_index, &dispatch));
}

// ---------------------------------------------------------------------------
// The files
// ---------------------------------------------------------------------------

void code_objects(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const std::vector<uint8_t> cubin = minimal_cubin(90);
  const std::vector<uint8_t> fatbin = minimal_fatbin();
  const std::vector<uint8_t> host = read_file(AXRT_GOLDEN_HOST_SO);
  struct Object {
    axrt_axe_code_object_kind_t kind;
    const char* target;
    const void* data;
    size_t size;
    const char* kernel;
    const char* entry;
  } objects[] = {
      {AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN, "sm_90", cubin.data(), cubin.size(), "k_cubin",
       "axpy"},
      {AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN, "sm_80,sm_90", fatbin.data(), fatbin.size(),
       "k_fatbin", "axpy"},
      {AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_90", kPtx, std::strlen(kPtx), "k_ptx",
       "axpy"},
      {AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT, "x86_64", host.data(), host.size(), "k_host",
       "axrt_golden_axpy"},
      {AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY, "x86_64", nullptr, 0, "k_library",
       "axrt_cpu_axpy"},
  };
  axrt_axe_kernel_param_t params[2] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "x";
  params[1].name = "y";
  params[1].access = AXRT_AXE_ACCESS_READ_WRITE;
  for (const Object& object : objects) {
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = object.kind;
    desc.target = object.target;
    desc.data = object.data;
    desc.size = object.size;
    if (object.kind == AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY) {
      desc.library_name = "axrt.cpu";
      desc.library_min_version = 1;
    }
    uint32_t index = 0;
    CHECK_OK(axrt_axe_builder_add_code_object(b, &desc, &index));
    axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
    kernel.name = object.kernel;
    kernel.code_object = index;
    kernel.entry_symbol = object.entry;
    kernel.params = params;
    kernel.param_count = 2;
    kernel.workgroup_size[0] = 128;
    if (object.kind == AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN) {
      kernel.dynamic_shared_memory = 4096;
      kernel.cluster_dims[0] = 2;
      kernel.cluster_dims[1] = 1;
      kernel.cluster_dims[2] = 1;
    }
    CHECK_OK(axrt_axe_builder_add_kernel(b, &kernel, &index));
  }
  builder.write(dir, "code_objects.axe");
}

void int8_per_channel(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t scale = add_constant(b, "fc.weight.scale", AXRT_AXE_DTYPE_FLOAT32, {4, 1}, 16, 1);
  const uint64_t block[] = {1, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "int8.per_channel";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight =
      add_constant(b, "fc.weight", AXRT_AXE_DTYPE_INT8, {4, 256}, 4 * 256, 2, &layout);
  add_matvec(b, weight, &layout, 256, 4);
  builder.write(dir, "quant_int8_per_channel.axe");
}

// AWQ: [K=256, N=8] uint4 packed along N into 32-bit words in AWQ order,
// groups of 128 along K, fp16 scales and fp16 mins (value = q * s + m).
void awq_layout(axrt_axe_builder_t b, axrt_axe_quant_layout_t* layout, const uint64_t* block) {
  const uint32_t scales = add_constant(b, "awq.scales", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, 32, 3);
  const uint32_t mins = add_constant(b, "awq.mins", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, 32, 4);
  layout->layout_id = "awq.int4.g128";
  layout->element_type = AXRT_AXE_DTYPE_UINT4;
  layout->dequantized_type = AXRT_AXE_DTYPE_FLOAT16;
  layout->rank = 2;
  layout->block_shape = block;
  layout->scale.constant = static_cast<int32_t>(scales);
  layout->scale.dtype = AXRT_AXE_DTYPE_FLOAT16;
  layout->zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_FLOAT;
  layout->zero_point.constant = static_cast<int32_t>(mins);
  layout->zero_point.dtype = AXRT_AXE_DTYPE_FLOAT16;
  layout->packing.bits = 4;
  layout->packing.container_bits = 32;
  layout->packing.axis = 1;
  layout->packing.order = AXRT_AXE_ELEMENT_ORDER_AWQ;
  layout->packing.padding = AXRT_AXE_PADDING_RULE_EXACT;
}

void awq_int4_g128(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint64_t block[] = {128, 1};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  awq_layout(b, &layout, block);
  const uint32_t weight =
      add_constant(b, "awq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8}, 1024, 5, &layout, 128);
  add_matvec(b, weight, &layout, 256, 8);
  builder.write(dir, "quant_awq_int4_g128.axe");
}

// GPTQ: [K=256, N=8] uint4 packed along K into 32-bit words, groups of 128
// along K, fp16 scales, integer zero points packed along N into 32-bit words
// (stored as an int32 constant of the grid's shape with N counted in words).
// v1 stores zp - 1 (stored bias 1); v2 stores zp (bias 0).
void gptq(const std::string& dir, int32_t stored_bias, const char* file) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t scales = add_constant(b, "gptq.scales", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, 32, 6);
  const uint32_t qzeros = add_constant(b, "gptq.qzeros", AXRT_AXE_DTYPE_INT32, {2, 1}, 8, 7);
  const uint64_t block[] = {128, 1};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = stored_bias == 1 ? "gptq.v1.int4.g128" : "gptq.v2.int4.g128";
  layout.element_type = AXRT_AXE_DTYPE_UINT4;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scales);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT16;
  layout.zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_INTEGER;
  layout.zero_point.constant = static_cast<int32_t>(qzeros);
  layout.zero_point.dtype = AXRT_AXE_DTYPE_UINT4;
  layout.zero_point.packing.bits = 4;
  layout.zero_point.packing.container_bits = 32;
  layout.zero_point.packing.axis = 1;
  layout.zero_point.stored_bias = stored_bias;
  layout.packing.bits = 4;
  layout.packing.container_bits = 32;
  layout.packing.axis = 0;
  const uint32_t weight =
      add_constant(b, "gptq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8}, 1024, 8, &layout);
  add_matvec(b, weight, &layout, 256, 8);
  builder.write(dir, file);
}

void fp8_per_tensor(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t scale = add_constant(b, "fp8.scale", AXRT_AXE_DTYPE_FLOAT32, {1, 1}, 4, 9);
  const uint64_t block[] = {0, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "fp8.e4m3.per_tensor";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight =
      add_constant(b, "fp8.weight", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {4, 256}, 1024, 10, &layout);
  add_matvec(b, weight, &layout, 256, 4);
  builder.write(dir, "quant_fp8_e4m3_per_tensor.axe");
}

void fp8_block128(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t scale = add_constant(b, "fp8.block_scale", AXRT_AXE_DTYPE_FLOAT32, {1, 2}, 8, 11);
  const uint64_t block[] = {128, 128};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "fp8.e4m3.block128x128";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight = add_constant(b, "fp8.weight", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {128, 256},
                                       128 * 256, 12, &layout);
  add_matvec(b, weight, &layout, 256, 128);
  builder.write(dir, "quant_fp8_e4m3_block128.axe");
}

void mxfp4(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t scale =
      add_constant(b, "mxfp4.scale", AXRT_AXE_DTYPE_FLOAT8_E8M0FNU, {4, 2}, 8, 13);
  const uint64_t block[] = {1, 32};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "mxfp4";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT4_E2M1;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT8_E8M0FNU;
  layout.packing.bits = 4;
  layout.packing.container_bits = 8;
  layout.packing.axis = 1;
  const uint32_t weight =
      add_constant(b, "mxfp4.weight", AXRT_AXE_DTYPE_FLOAT4_E2M1, {4, 64}, 128, 14, &layout);
  add_matvec(b, weight, &layout, 64, 4);
  builder.write(dir, "quant_mxfp4.axe");
}

void nvfp4(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t global =
      add_constant(b, "nvfp4.global_scale", AXRT_AXE_DTYPE_FLOAT32, {1, 1}, 4, 15);
  const uint32_t scale =
      add_constant(b, "nvfp4.scale", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {4, 4}, 16, 16);
  const uint64_t block[] = {1, 16};
  const uint64_t second_block[] = {0, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "nvfp4";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT4_E2M1;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  layout.second_level_scale.constant = static_cast<int32_t>(global);
  layout.second_level_scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  layout.second_level_rank = 2;
  layout.second_level_block_shape = second_block;
  layout.packing.bits = 4;
  layout.packing.container_bits = 8;
  layout.packing.axis = 1;
  const uint32_t weight =
      add_constant(b, "nvfp4.weight", AXRT_AXE_DTYPE_FLOAT4_E2M1, {4, 64}, 128, 17, &layout);
  add_matvec(b, weight, &layout, 64, 4);
  builder.write(dir, "quant_nvfp4.axe");
}

// The AWQ weight with a copy pre-packed for sm_90 beside the canonical one.
void prepacked(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  const uint64_t block[] = {128, 1};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  awq_layout(b, &layout, block);
  const uint32_t weight =
      add_constant(b, "awq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8}, 1024, 18, &layout, 128);
  const std::vector<uint8_t> packed = pattern_bytes(1024, 19);
  CHECK_OK(axrt_axe_builder_add_prepacked_copy(b, weight, "sm_90", "awq.int4.g128.marlin",
                                               packed.data(), packed.size()));
  add_matvec(b, weight, &layout, 256, 8);
  builder.write(dir, "prepacked.axe");
}

// Symbolic dimensions and every command kind: fill, copy (with offsets) and
// a dispatch with INPUT, CONSTANT, ARENA, OUTPUT and SCALAR bindings whose
// workgroup count and scalar are expressions of the symbols.
void functions(const std::string& dir) {
  Builder builder;
  axrt_axe_builder_t b = builder.get();
  CHECK_OK(axrt_axe_builder_add_metadata(b, "model", "tiny-mlp"));
  CHECK_OK(axrt_axe_builder_add_metadata(b, "license", "Apache-2.0"));
  const uint32_t library = add_kernel_library(b);
  const uint32_t bias = add_constant(b, "bias", AXRT_AXE_DTYPE_FLOAT32, {256}, 1024, 20);

  axrt_axe_kernel_param_t params[5] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT,
                                       AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT,
                                       AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "x";
  params[1].name = "bias";
  params[2].name = "scratch";
  params[2].access = AXRT_AXE_ACCESS_READ_WRITE;
  params[3].name = "y";
  params[3].access = AXRT_AXE_ACCESS_WRITE;
  params[4].name = "count";
  params[4].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[4].scalar_type = AXRT_AXE_DTYPE_UINT64;
  params[4].access = AXRT_AXE_ACCESS_NONE;
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "bias_add";
  kernel.code_object = library;
  kernel.entry_symbol = "axrt_cpu_bias_add";
  kernel.params = params;
  kernel.param_count = 5;
  kernel.workgroup_size[0] = 64;
  uint32_t kernel_index = 0;
  CHECK_OK(axrt_axe_builder_add_kernel(b, &kernel, &kernel_index));

  axrt_axe_symbol_t symbols[2] = {AXRT_AXE_SYMBOL_INIT, AXRT_AXE_SYMBOL_INIT};
  symbols[0].name = "batch";
  symbols[0].upper_bound = 64;
  symbols[1].name = "seq";
  symbols[1].upper_bound = 512;
  const axrt_axe_dim_t x_dims[] = {{0, 0}, {0, 1}, {256, -1}};
  axrt_axe_tensor_sig_t x = AXRT_AXE_TENSOR_SIG_INIT;
  x.name = "x";
  x.dtype = AXRT_AXE_DTYPE_FLOAT32;
  x.rank = 3;
  x.dims = x_dims;
  axrt_axe_tensor_sig_t y = x;
  y.name = "y";
  const uint64_t arena = 4096;
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "main";
  function.symbols = symbols;
  function.symbol_count = 2;
  function.inputs = &x;
  function.input_count = 1;
  function.outputs = &y;
  function.output_count = 1;
  function.arena_size = arena;
  uint32_t main = 0;
  CHECK_OK(axrt_axe_builder_add_function(b, &function, &main));

  // Zero the arena.
  axrt_axe_binding_t scratch = AXRT_AXE_BINDING_INIT;
  scratch.kind = AXRT_AXE_BINDING_KIND_ARENA;
  scratch.offset = 0;
  scratch.size = arena;
  const axrt_axe_expr_op_t arena_bytes = {AXRT_AXE_EXPR_OPCODE_CONST, static_cast<int64_t>(arena)};
  axrt_axe_fill_desc_t fill = AXRT_AXE_FILL_DESC_INIT;
  fill.target = &scratch;
  fill.length = literal(&arena_bytes);
  fill.pattern = 0;
  fill.pattern_size = 4;
  CHECK_OK(axrt_axe_builder_add_fill(b, main, &fill));

  // The bias into the arena's second kilobyte, from an offset expression.
  axrt_axe_binding_t bias_binding = AXRT_AXE_BINDING_INIT;
  bias_binding.kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  bias_binding.index = bias;
  const axrt_axe_expr_op_t zero = {AXRT_AXE_EXPR_OPCODE_CONST, 0};
  const axrt_axe_expr_op_t kib = {AXRT_AXE_EXPR_OPCODE_CONST, 1024};
  axrt_axe_copy_desc_t copy = AXRT_AXE_COPY_DESC_INIT;
  copy.src = &bias_binding;
  copy.src_offset = literal(&zero);
  copy.dst = &scratch;
  copy.dst_offset = literal(&kib);
  copy.length = literal(&kib);
  CHECK_OK(axrt_axe_builder_add_copy(b, main, &copy));

  // count = batch * seq * 256; groups = ceil(count / 64).
  const axrt_axe_expr_op_t count_ops[] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
                                          {AXRT_AXE_EXPR_OPCODE_SYMBOL, 1},
                                          {AXRT_AXE_EXPR_OPCODE_MUL, 0},
                                          {AXRT_AXE_EXPR_OPCODE_CONST, 256},
                                          {AXRT_AXE_EXPR_OPCODE_MUL, 0}};
  const axrt_axe_expr_op_t groups_ops[] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
                                           {AXRT_AXE_EXPR_OPCODE_SYMBOL, 1},
                                           {AXRT_AXE_EXPR_OPCODE_MUL, 0},
                                           {AXRT_AXE_EXPR_OPCODE_CONST, 256},
                                           {AXRT_AXE_EXPR_OPCODE_MUL, 0},
                                           {AXRT_AXE_EXPR_OPCODE_CONST, 64},
                                           {AXRT_AXE_EXPR_OPCODE_DIV_CEIL, 0}};
  const axrt_axe_expr_op_t one = {AXRT_AXE_EXPR_OPCODE_CONST, 1};
  axrt_axe_binding_t bindings[5] = {AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT,
                                    AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT,
                                    AXRT_AXE_BINDING_INIT};
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  bindings[1].kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  bindings[1].index = bias;
  bindings[2].kind = AXRT_AXE_BINDING_KIND_ARENA;
  bindings[2].offset = 1024;
  bindings[2].size = 1024;
  bindings[3].kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  bindings[4].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[4].value = axrt_axe_expr_t{count_ops, 5};
  axrt_axe_dispatch_desc_t dispatch = AXRT_AXE_DISPATCH_DESC_INIT;
  dispatch.kernel = kernel_index;
  dispatch.workgroup_count_x = axrt_axe_expr_t{groups_ops, 7};
  dispatch.workgroup_count_z = literal(&one);
  dispatch.bindings = bindings;
  dispatch.binding_count = 5;
  CHECK_OK(axrt_axe_builder_add_dispatch(b, main, &dispatch));

  // A second function whose expressions use the remaining opcodes:
  // tile = max(min(seq, 128) - seq % 8, 1) + seq / 8.
  axrt_axe_symbol_t seq = AXRT_AXE_SYMBOL_INIT;
  seq.name = "seq";
  seq.upper_bound = 1024;
  const axrt_axe_dim_t t_dims[] = {{0, 0}, {4, -1}};
  axrt_axe_tensor_sig_t t = AXRT_AXE_TENSOR_SIG_INIT;
  t.name = "tokens";
  t.dtype = AXRT_AXE_DTYPE_INT32;
  t.rank = 2;
  t.dims = t_dims;
  axrt_axe_tensor_sig_t out = t;
  out.name = "out";
  function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "tile";
  function.symbols = &seq;
  function.symbol_count = 1;
  function.inputs = &t;
  function.input_count = 1;
  function.outputs = &out;
  function.output_count = 1;
  uint32_t tile = 0;
  CHECK_OK(axrt_axe_builder_add_function(b, &function, &tile));
  const axrt_axe_expr_op_t tile_ops[] = {
      {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0}, {AXRT_AXE_EXPR_OPCODE_CONST, 128},
      {AXRT_AXE_EXPR_OPCODE_MINIMUM, 0}, {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
      {AXRT_AXE_EXPR_OPCODE_CONST, 8},   {AXRT_AXE_EXPR_OPCODE_MOD, 0},
      {AXRT_AXE_EXPR_OPCODE_SUB, 0},     {AXRT_AXE_EXPR_OPCODE_CONST, 1},
      {AXRT_AXE_EXPR_OPCODE_MAXIMUM, 0}, {AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
      {AXRT_AXE_EXPR_OPCODE_CONST, 8},   {AXRT_AXE_EXPR_OPCODE_DIV_FLOOR, 0},
      {AXRT_AXE_EXPR_OPCODE_ADD, 0}};
  const axrt_axe_expr_op_t row_ops[] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 0},
                                        {AXRT_AXE_EXPR_OPCODE_CONST, 16},
                                        {AXRT_AXE_EXPR_OPCODE_MUL, 0}};
  axrt_axe_binding_t src = AXRT_AXE_BINDING_INIT;
  src.kind = AXRT_AXE_BINDING_KIND_INPUT;
  axrt_axe_binding_t dst = AXRT_AXE_BINDING_INIT;
  dst.kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  copy = AXRT_AXE_COPY_DESC_INIT;
  copy.src = &src;
  copy.dst = &dst;
  copy.length = axrt_axe_expr_t{row_ops, 3};
  CHECK_OK(axrt_axe_builder_add_copy(b, tile, &copy));
  fill = AXRT_AXE_FILL_DESC_INIT;
  fill.target = &dst;
  fill.offset = axrt_axe_expr_t{tile_ops, 13};
  fill.length = literal(&one);
  fill.pattern = 0xff;
  fill.pattern_size = 1;
  CHECK_OK(axrt_axe_builder_add_fill(b, tile, &fill));
  builder.write(dir, "functions.axe");
}

// ---------------------------------------------------------------------------
// Format 1.1
// ---------------------------------------------------------------------------

uint32_t add_code_object(axrt_axe_builder_t b, axrt_axe_code_object_kind_t kind,
                         const char* target, const void* data, size_t size) {
  axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  desc.kind = kind;
  desc.target = target;
  desc.data = data;
  desc.size = size;
  uint32_t index = 0;
  CHECK_OK(axrt_axe_builder_add_code_object(b, &desc, &index));
  return index;
}

// One kernel for the CPU and for CUDA: `axpy` runs from the CPU kernel
// library first, then has a fatbin variant (more threads per workgroup,
// dynamic shared memory) and a PTX variant (thread-block clusters), all
// sharing one parameter table and one dispatch; `scale`, beside it, has no
// variants.
void kernel_variants(const std::string& dir) {
  Builder builder("1.1");
  axrt_axe_builder_t b = builder.get();
  const uint32_t library = add_kernel_library(b);
  const std::vector<uint8_t> fatbin = minimal_fatbin();
  const uint32_t fatbin_index = add_code_object(b, AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN,
                                                "sm_80,sm_90", fatbin.data(), fatbin.size());
  const uint32_t ptx_index = add_code_object(b, AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_90",
                                             kAxpyPtx, std::strlen(kAxpyPtx));

  axrt_axe_kernel_param_t params[3] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT,
                                       AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "x";
  params[1].name = "y";
  params[1].access = AXRT_AXE_ACCESS_READ_WRITE;
  params[2].name = "n";
  params[2].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[2].scalar_type = AXRT_AXE_DTYPE_UINT32;
  params[2].access = AXRT_AXE_ACCESS_NONE;
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "axpy";
  kernel.code_object = library;
  kernel.entry_symbol = "axrt_cpu_axpy";
  kernel.params = params;
  kernel.param_count = 3;
  kernel.workgroup_size[0] = 64;
  uint32_t axpy = 0;
  CHECK_OK(axrt_axe_builder_add_kernel(b, &kernel, &axpy));

  axrt_axe_kernel_variant_desc_t variant = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  variant.code_object = fatbin_index;
  variant.entry_symbol = "axpy_f32";
  variant.workgroup_size[0] = 256;
  variant.dynamic_shared_memory = 1024;
  CHECK_OK(axrt_axe_builder_add_kernel_variant(b, axpy, &variant));
  variant = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  variant.code_object = ptx_index;
  variant.entry_symbol = "axpy";
  variant.workgroup_size[0] = 128;
  variant.cluster_dims[0] = 2;
  variant.cluster_dims[1] = 1;
  variant.cluster_dims[2] = 1;
  CHECK_OK(axrt_axe_builder_add_kernel_variant(b, axpy, &variant));

  kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "scale";
  kernel.code_object = library;
  kernel.entry_symbol = "axrt_cpu_scale";
  kernel.params = &params[1];
  kernel.param_count = 2;
  kernel.workgroup_size[0] = 64;
  uint32_t scale = 0;
  CHECK_OK(axrt_axe_builder_add_kernel(b, &kernel, &scale));

  // main(x: f32[1024]) -> (y: f32[1024]): y = axpy(x, y); y = scale(y).
  // Four workgroups of 256 elements each, whichever implementation runs.
  const axrt_axe_dim_t dims[] = {{1024, -1}};
  axrt_axe_tensor_sig_t x = AXRT_AXE_TENSOR_SIG_INIT;
  x.name = "x";
  x.dtype = AXRT_AXE_DTYPE_FLOAT32;
  x.rank = 1;
  x.dims = dims;
  axrt_axe_tensor_sig_t y = x;
  y.name = "y";
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "main";
  function.inputs = &x;
  function.input_count = 1;
  function.outputs = &y;
  function.output_count = 1;
  uint32_t main = 0;
  CHECK_OK(axrt_axe_builder_add_function(b, &function, &main));

  const axrt_axe_expr_op_t four = {AXRT_AXE_EXPR_OPCODE_CONST, 4};
  const axrt_axe_expr_op_t n = {AXRT_AXE_EXPR_OPCODE_CONST, 1024};
  axrt_axe_binding_t bindings[3] = {AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT,
                                    AXRT_AXE_BINDING_INIT};
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  bindings[1].kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  bindings[2].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[2].value = literal(&n);
  axrt_axe_dispatch_desc_t dispatch = AXRT_AXE_DISPATCH_DESC_INIT;
  dispatch.kernel = axpy;
  dispatch.workgroup_count_x = literal(&four);
  dispatch.bindings = bindings;
  dispatch.binding_count = 3;
  CHECK_OK(axrt_axe_builder_add_dispatch(b, main, &dispatch));
  dispatch.kernel = scale;
  dispatch.bindings = &bindings[1];
  dispatch.binding_count = 2;
  CHECK_OK(axrt_axe_builder_add_dispatch(b, main, &dispatch));
  builder.write(dir, "kernel_variants.axe");
}

void write_v1_0(const std::string& dir) {
  code_objects(dir);
  int8_per_channel(dir);
  awq_int4_g128(dir);
  gptq(dir, 1, "quant_gptq_v1.axe");
  gptq(dir, 0, "quant_gptq_v2.axe");
  fp8_per_tensor(dir);
  fp8_block128(dir);
  mxfp4(dir);
  nvfp4(dir);
  prepacked(dir);
  functions(dir);
}

void write_v1_1(const std::string& dir) { kernel_variants(dir); }

}  // namespace

int main(int argc, char** argv) {
  std::string version = "1.1";
  int next = 1;
  if (argc == 4 && std::strcmp(argv[1], "--version") == 0) {
    version = argv[2];
    next = 3;
  }
  if (argc != next + 1 || (version != "1.0" && version != "1.1")) {
    std::fprintf(stderr, "usage: %s [--version 1.0|1.1] OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[next];
  if (version == "1.0") {
    write_v1_0(dir);
  } else {
    write_v1_1(dir);
  }
  return 0;
}
