// Writes the golden .axe files of one format version through the public C
// API only. Not run by the tests: the files it wrote are committed under
// tests/golden/v<version>/ and must keep loading forever (README.md).
//
//   axrt_make_golden [--version 1.0|1.1|1.2|1.3|1.4] OUTPUT_DIR
//
// Each version's set holds the files added with that version (1.1: kernel
// variants, 1.2: mutable inputs, 1.3: declared features and negative
// scalar literals, 1.4: collectives); the default is the newest. Today's writer stamps every file with
// the newest minor, so rerunning an older set does not reproduce its
// committed bytes: released directories are never regenerated.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "axrt/axrt.h"
#include "tests/support/axe_test_builder.h"

#ifndef AXRT_GOLDEN_HOST_SO
#error "AXRT_GOLDEN_HOST_SO must name the tiny shared library (tests/golden/CMakeLists.txt)"
#endif

namespace {

using namespace axrt_test;

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

// The producer every golden file names, with the format version of its set
// as the producer version.
constexpr char kProducer[] = "axrt_make_golden";

// The target the committed files name for host code: fixed, whatever the
// machine that writes them.
constexpr char kGoldenHostTarget[] = "x86_64";

std::vector<uint8_t> text_bytes(const char* text) {
  return std::vector<uint8_t>(text, text + std::strlen(text));
}

void write(const AxeBuilder& b, const std::string& dir, const char* name) {
  const std::string path = dir + "/" + name;
  b.WriteFile(path);
  std::printf("wrote %s\n", path.c_str());
}

uint32_t add_kernel_library(AxeBuilder& b) {
  return b.AddLibrary("axrt.cpu", 1, kGoldenHostTarget);
}

// One quantized weight behind a matrix-vector kernel whose weight parameter
// declares the weight's layout, and a function "main" dispatching it, so the
// layout-matching rule is exercised too. Returns the kernel library's code
// object.
uint32_t add_matvec(AxeBuilder& b, uint32_t weight, const axrt_axe_quant_layout_t* layout,
                uint64_t in_features, uint64_t out_features) {
  const uint32_t library = add_kernel_library(b);
  const uint32_t kernel = b.AddKernel(
      "matvec", library, "axrt_cpu_matvec",
      {BufferParam("x"), BufferParam("w", AXRT_AXE_ACCESS_READ, layout),
       BufferParam("y", AXRT_AXE_ACCESS_WRITE), ScalarParam("n", AXRT_AXE_DTYPE_UINT32)},
      {64, 1, 1});
  const uint32_t main =
      b.AddFunction("main", {}, {{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(in_features)}}},
                    {{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(out_features)}}});
  b.Dispatch(main, kernel, {Lit(1)},
             {BindInput(0), BindConstant(weight), BindOutput(0), BindScalar(Lit(in_features))});
  return library;
}

// ---------------------------------------------------------------------------
// The files
// ---------------------------------------------------------------------------

// One code object of each kind, each with a kernel axpy(x, y).
void code_objects(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const std::vector<Param> params = {BufferParam("x"),
                                     BufferParam("y", AXRT_AXE_ACCESS_READ_WRITE)};
  uint32_t code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN, "sm_90", minimal_cubin(90));
  b.AddKernel("k_cubin", code, "axpy", params, {128, 1, 1}, 4096, {2, 1, 1});
  code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN, "sm_80,sm_90", minimal_fatbin());
  b.AddKernel("k_fatbin", code, "axpy", params, {128, 1, 1});
  code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_90", text_bytes(kPtx));
  b.AddKernel("k_ptx", code, "axpy", params, {128, 1, 1});
  code = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT, kGoldenHostTarget,
                   read_file(AXRT_GOLDEN_HOST_SO));
  b.AddKernel("k_host", code, "axrt_golden_axpy", params, {128, 1, 1});
  code = add_kernel_library(b);
  b.AddKernel("k_library", code, "axrt_cpu_axpy", params, {128, 1, 1});
  write(b, dir, "code_objects.axe");
}

void int8_per_channel(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t scale =
      b.AddConstant("fc.weight.scale", AXRT_AXE_DTYPE_FLOAT32, {4, 1}, pattern_bytes(16, 1));
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
      b.AddConstant("fc.weight", AXRT_AXE_DTYPE_INT8, {4, 256}, pattern_bytes(4 * 256, 2), &layout);
  add_matvec(b, weight, &layout, 256, 4);
  write(b, dir, "quant_int8_per_channel.axe");
}

// AWQ: [K=256, N=8] uint4 packed along N into 32-bit words in AWQ order,
// groups of 128 along K, fp16 scales and fp16 mins (value = q * s + m).
void awq_layout(AxeBuilder& b, axrt_axe_quant_layout_t* layout, const uint64_t* block) {
  const uint32_t scales =
      b.AddConstant("awq.scales", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, pattern_bytes(32, 3));
  const uint32_t mins =
      b.AddConstant("awq.mins", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, pattern_bytes(32, 4));
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
  AxeBuilder b(kProducer, "1.0");
  const uint64_t block[] = {128, 1};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  awq_layout(b, &layout, block);
  const uint32_t weight = b.AddConstant("awq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8},
                                        pattern_bytes(1024, 5), &layout, 128);
  add_matvec(b, weight, &layout, 256, 8);
  write(b, dir, "quant_awq_int4_g128.axe");
}

// GPTQ: [K=256, N=8] uint4 packed along K into 32-bit words, groups of 128
// along K, fp16 scales, integer zero points packed along N into 32-bit words
// (stored as an int32 constant of the grid's shape with N counted in words).
// v1 stores zp - 1 (stored bias 1); v2 stores zp (bias 0).
void gptq(const std::string& dir, int32_t stored_bias, const char* file) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t scales =
      b.AddConstant("gptq.scales", AXRT_AXE_DTYPE_FLOAT16, {2, 8}, pattern_bytes(32, 6));
  const uint32_t qzeros =
      b.AddConstant("gptq.qzeros", AXRT_AXE_DTYPE_INT32, {2, 1}, pattern_bytes(8, 7));
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
  const uint32_t weight = b.AddConstant("gptq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8},
                                        pattern_bytes(1024, 8), &layout);
  add_matvec(b, weight, &layout, 256, 8);
  write(b, dir, file);
}

void fp8_per_tensor(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t scale =
      b.AddConstant("fp8.scale", AXRT_AXE_DTYPE_FLOAT32, {1, 1}, pattern_bytes(4, 9));
  const uint64_t block[] = {0, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "fp8.e4m3.per_tensor";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight = b.AddConstant("fp8.weight", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {4, 256},
                                        pattern_bytes(1024, 10), &layout);
  add_matvec(b, weight, &layout, 256, 4);
  write(b, dir, "quant_fp8_e4m3_per_tensor.axe");
}

void fp8_block128(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t scale =
      b.AddConstant("fp8.block_scale", AXRT_AXE_DTYPE_FLOAT32, {1, 2}, pattern_bytes(8, 11));
  const uint64_t block[] = {128, 128};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "fp8.e4m3.block128x128";
  layout.element_type = AXRT_AXE_DTYPE_FLOAT8_E4M3FN;
  layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight = b.AddConstant("fp8.weight", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {128, 256},
                                        pattern_bytes(128 * 256, 12), &layout);
  add_matvec(b, weight, &layout, 256, 128);
  write(b, dir, "quant_fp8_e4m3_block128.axe");
}

void mxfp4(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t scale =
      b.AddConstant("mxfp4.scale", AXRT_AXE_DTYPE_FLOAT8_E8M0FNU, {4, 2}, pattern_bytes(8, 13));
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
  const uint32_t weight = b.AddConstant("mxfp4.weight", AXRT_AXE_DTYPE_FLOAT4_E2M1, {4, 64},
                                        pattern_bytes(128, 14), &layout);
  add_matvec(b, weight, &layout, 64, 4);
  write(b, dir, "quant_mxfp4.axe");
}

void nvfp4(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint32_t global =
      b.AddConstant("nvfp4.global_scale", AXRT_AXE_DTYPE_FLOAT32, {1, 1}, pattern_bytes(4, 15));
  const uint32_t scale =
      b.AddConstant("nvfp4.scale", AXRT_AXE_DTYPE_FLOAT8_E4M3FN, {4, 4}, pattern_bytes(16, 16));
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
  const uint32_t weight = b.AddConstant("nvfp4.weight", AXRT_AXE_DTYPE_FLOAT4_E2M1, {4, 64},
                                        pattern_bytes(128, 17), &layout);
  add_matvec(b, weight, &layout, 64, 4);
  write(b, dir, "quant_nvfp4.axe");
}

// The AWQ weight with a copy pre-packed for sm_90 beside the canonical one.
void prepacked(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  const uint64_t block[] = {128, 1};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  awq_layout(b, &layout, block);
  const uint32_t weight = b.AddConstant("awq.qweight", AXRT_AXE_DTYPE_UINT4, {256, 8},
                                        pattern_bytes(1024, 18), &layout, 128);
  b.AddPrepackedCopy(weight, "sm_90", "awq.int4.g128.marlin", pattern_bytes(1024, 19));
  add_matvec(b, weight, &layout, 256, 8);
  write(b, dir, "prepacked.axe");
}

// Symbolic dimensions and every command kind: fill, copy (with offsets) and
// a dispatch with INPUT, CONSTANT, ARENA, OUTPUT and SCALAR bindings whose
// workgroup count and scalar are expressions of the symbols.
void functions(const std::string& dir) {
  AxeBuilder b(kProducer, "1.0");
  b.AddMetadata("model", "tiny-mlp");
  b.AddMetadata("license", "Apache-2.0");
  const uint32_t library = add_kernel_library(b);
  const uint32_t bias =
      b.AddConstant("bias", AXRT_AXE_DTYPE_FLOAT32, {256}, pattern_bytes(1024, 20));
  const uint32_t kernel = b.AddKernel(
      "bias_add", library, "axrt_cpu_bias_add",
      {BufferParam("x"), BufferParam("bias"), BufferParam("scratch", AXRT_AXE_ACCESS_READ_WRITE),
       BufferParam("y", AXRT_AXE_ACCESS_WRITE), ScalarParam("count", AXRT_AXE_DTYPE_UINT64)},
      {64, 1, 1});

  // main(x: f32[batch, seq, 256]) -> (y: f32[batch, seq, 256]).
  const std::vector<Dim> dims = {Symbolic(0), Symbolic(1), Fixed(256)};
  const uint64_t arena = 4096;
  const uint32_t main =
      b.AddFunction("main", {{"batch", 64}, {"seq", 512}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, dims}},
                    {{"y", AXRT_AXE_DTYPE_FLOAT32, dims}}, arena);
  // Zero the arena.
  const Binding scratch = BindArena(0, arena);
  b.Fill(main, scratch, /*offset=*/{}, Lit(arena), 0, 4);
  // The bias into the arena's second kilobyte, from an offset expression.
  b.Copy(main, BindConstant(bias), Lit(0), scratch, Lit(1024), Lit(1024));
  // count = batch * seq * 256; groups = ceil(count / 64); no y count.
  const Expr count = Sym(0) * Sym(1) * Lit(256);
  b.Dispatch(
      main, kernel, {CeilDiv(count, 64), Expr{}, Lit(1)},
      {BindInput(0), BindConstant(bias), BindArena(1024, 1024), BindOutput(0), BindScalar(count)});

  // A second function whose expressions use the remaining opcodes.
  const std::vector<Dim> token_dims = {Symbolic(0), Fixed(4)};
  const uint32_t tile =
      b.AddFunction("tile", {{"seq", 1024}}, {{"tokens", AXRT_AXE_DTYPE_INT32, token_dims}},
                    {{"out", AXRT_AXE_DTYPE_INT32, token_dims}});
  const Expr seq = Sym(0);
  b.Copy(tile, BindInput(0), /*src_offset=*/{}, BindOutput(0), /*dst_offset=*/{}, seq * Lit(16));
  const Expr tile_offset = Max(Min(seq, Lit(128)) - seq % Lit(8), Lit(1)) + seq / Lit(8);
  b.Fill(tile, BindOutput(0), tile_offset, Lit(1), 0xff, 1);
  write(b, dir, "functions.axe");
}

// ---------------------------------------------------------------------------
// Format 1.1
// ---------------------------------------------------------------------------

// One kernel for the CPU and for CUDA: `axpy` runs from the CPU kernel
// library first, then has a fatbin variant (more threads per workgroup,
// dynamic shared memory) and a PTX variant (thread-block clusters), all
// sharing one parameter table and one dispatch; `scale`, beside it, has no
// variants.
void kernel_variants(const std::string& dir) {
  AxeBuilder b(kProducer, "1.1");
  const uint32_t library = add_kernel_library(b);
  const uint32_t fatbin =
      b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN, "sm_80,sm_90", minimal_fatbin());
  const uint32_t ptx =
      b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX, "compute_90", text_bytes(kAxpyPtx));

  const Param y = BufferParam("y", AXRT_AXE_ACCESS_READ_WRITE);
  const Param n = ScalarParam("n", AXRT_AXE_DTYPE_UINT32);
  const uint32_t axpy =
      b.AddKernel("axpy", library, "axrt_cpu_axpy", {BufferParam("x"), y, n}, {64, 1, 1});
  b.AddVariant(axpy, fatbin, "axpy_f32", {256, 1, 1}, 1024);
  b.AddVariant(axpy, ptx, "axpy", {128, 1, 1}, 0, {2, 1, 1});
  const uint32_t scale = b.AddKernel("scale", library, "axrt_cpu_scale", {y, n}, {64, 1, 1});

  // main(x: f32[1024]) -> (y: f32[1024]): y = axpy(x, y); y = scale(y).
  // Four workgroups of 256 elements each, whichever implementation runs.
  const uint32_t main = b.AddFunction("main", {}, {{"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}}},
                                      {{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}}});
  b.Dispatch(main, axpy, {Lit(4)}, {BindInput(0), BindOutput(0), BindScalar(Lit(1024))});
  b.Dispatch(main, scale, {Lit(4)}, {BindOutput(0), BindScalar(Lit(1024))});
  write(b, dir, "kernel_variants.axe");
}

// ---------------------------------------------------------------------------
// Format 1.2
// ---------------------------------------------------------------------------

// Mutable inputs: a function that updates its state in place, written by a
// dispatch (a WRITE parameter), a fill and a copy, beside an ordinary input
// and output. The file requires "mutable-inputs.v1" (added by the builder).
void mutable_inputs(const std::string& dir) {
  AxeBuilder b(kProducer, "1.2");
  const uint32_t library = add_kernel_library(b);
  const uint32_t add = b.AddKernel("add", library, "axrt_add_f32",
                                   {BufferParam("a"), BufferParam("b"),
                                    BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                    ScalarParam("n", AXRT_AXE_DTYPE_UINT64)},
                                   {64, 1, 1});
  // step(state: mutable f32[1024], x: f32[1024], last: mutable f32[1024])
  //   -> (y: f32[1024]): state += x; y = state; last = 0; last = x.
  Sig state{"state", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}};
  state.is_mutable = true;
  Sig last{"last", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}};
  last.is_mutable = true;
  const uint32_t step =
      b.AddFunction("step", {}, {state, {"x", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}}, last},
                    {{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(1024)}}});
  b.Dispatch(step, add, {Lit(1)},
             {BindInput(0), BindInput(1), BindInput(0), BindScalar(Lit(1024))});
  b.Copy(step, BindInput(0), /*src_offset=*/{}, BindOutput(0), /*dst_offset=*/{}, Lit(4096));
  b.Fill(step, BindInput(2), /*offset=*/{}, Lit(4096), 0, 4);
  b.Copy(step, BindInput(1), /*src_offset=*/{}, BindInput(2), /*dst_offset=*/{}, Lit(4096));
  write(b, dir, "mutable_inputs.axe");
}

// ---------------------------------------------------------------------------
// Format 1.3
// ---------------------------------------------------------------------------

// Every feature of 1.0 and 1.2 in one file, each listed in
// required_features by the builder, as a 1.3 file must: host code, a kernel
// library, a quantized weight (declared by a kernel parameter too) with a
// pre-packed copy, symbols and a mutable input.
void declared_features(const std::string& dir) {
  AxeBuilder b(kProducer, "1.3");
  const uint32_t host = b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT, kGoldenHostTarget,
                                  read_file(AXRT_GOLDEN_HOST_SO));
  b.AddKernel("k_host", host, "axrt_golden_axpy",
              {BufferParam("x"), BufferParam("y", AXRT_AXE_ACCESS_READ_WRITE)}, {128, 1, 1});

  // The int8 per-channel weight of quant_int8_per_channel.axe, with a copy
  // pre-packed for sm_90, behind "main".
  const uint32_t scale =
      b.AddConstant("fc.weight.scale", AXRT_AXE_DTYPE_FLOAT32, {4, 1}, pattern_bytes(16, 21));
  const uint64_t block[] = {1, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "int8.per_channel";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = static_cast<int32_t>(scale);
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight = b.AddConstant("fc.weight", AXRT_AXE_DTYPE_INT8, {4, 256},
                                        pattern_bytes(4 * 256, 22), &layout);
  b.AddPrepackedCopy(weight, "sm_90", "int8.per_channel.sm90", pattern_bytes(4 * 256, 23));
  const uint32_t library = add_matvec(b, weight, &layout, 256, 4);

  // accumulate(acc: mutable f32[n], x: f32[n]) -> (y: f32[n]), n <= 4096:
  // acc += x in place; y = acc.
  const uint32_t add = b.AddKernel("add", library, "axrt_add_f32",
                                   {BufferParam("a"), BufferParam("b"),
                                    BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                    ScalarParam("n", AXRT_AXE_DTYPE_UINT64)},
                                   {64, 1, 1});
  Sig acc{"acc", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}};
  acc.is_mutable = true;
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t accumulate =
      b.AddFunction("accumulate", {{"n", 4096}}, {acc, {"x", AXRT_AXE_DTYPE_FLOAT32, n}},
                    {{"y", AXRT_AXE_DTYPE_FLOAT32, n}});
  b.Dispatch(accumulate, add, {CeilDiv(Sym(0), 4096)},
             {BindInput(0), BindInput(1), BindInput(0), BindScalar(Sym(0))});
  b.Copy(accumulate, BindInput(0), /*src_offset=*/{}, BindOutput(0), /*dst_offset=*/{},
         Sym(0) * Lit(4));
  write(b, dir, "declared_features.axe");
}

// Negative literals for signed scalar parameters: an f32, an i32, an f64 and
// an i64, bound to the conformance suite's kernel cts_affine (library
// "cts.kernels", abi/cts/cts_kernel_library.h), where that library is
// registered the file runs. The file requires "signed-scalars.v1" (added by
// the builder).
void signed_scalars(const std::string& dir) {
  AxeBuilder b(kProducer, "1.3");
  const uint32_t library = b.AddLibrary("cts.kernels", 1, kGoldenHostTarget);
  const uint32_t affine = b.AddKernel(
      "affine", library, "cts_affine",
      {BufferParam("x"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
       ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("scale", AXRT_AXE_DTYPE_FLOAT32),
       ScalarParam("shift", AXRT_AXE_DTYPE_INT32), ScalarParam("bias", AXRT_AXE_DTYPE_FLOAT64),
       ScalarParam("step", AXRT_AXE_DTYPE_INT64)},
      {64, 1, 1});
  // affine(x: f32[n]) -> (out: f32[n]), n <= 1000:
  // out[i] = -2.5 x[i] - 7 - 0.25 - 3 i, 64 elements per workgroup.
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t function = b.AddFunction("affine", {{"n", 1000}},
                                          {{"x", AXRT_AXE_DTYPE_FLOAT32, n}},
                                          {{"out", AXRT_AXE_DTYPE_FLOAT32, n}});
  b.Dispatch(function, affine, {CeilDiv(Sym(0), 64)},
             {BindInput(0), BindOutput(0), BindScalar(Sym(0)), BindScalar(F32(-2.5f)),
              BindScalar(Int(-7)), BindScalar(F64(-0.25)), BindScalar(Int(-3))});
  write(b, dir, "signed_scalars.axe");
}

// ---------------------------------------------------------------------------
// Format 1.4
// ---------------------------------------------------------------------------

// Collectives over a function's channel: a tensor-parallel layer's two
// reductions and the other three kinds, between copies, over inputs,
// outputs and the arena. The file requires "collectives.v1" (added by the
// builder).
void collectives(const std::string& dir) {
  AxeBuilder b(kProducer, "1.4");
  // layer(x: f32[n], mask: f32[8]) -> (y: f32[n], gathered: f32[16],
  // first: f32[4]), n <= 4096, over channel "tensor_parallel" of 2 members.
  const std::vector<Dim> n = {Symbolic(0)};
  const uint32_t layer = b.AddFunction(
      "layer", {{"n", 4096}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, n}, {"mask", AXRT_AXE_DTYPE_FLOAT32, {Fixed(8)}}},
      {{"y", AXRT_AXE_DTYPE_FLOAT32, n}, {"gathered", AXRT_AXE_DTYPE_FLOAT32, {Fixed(16)}},
       {"first", AXRT_AXE_DTYPE_FLOAT32, {Fixed(4)}}},
      /*arena_size=*/16384, {{"tensor_parallel", 2}});
  // y = all_reduce(x) through the arena; the mask's max in place of the
  // arena's head; its gather; a reduce-scatter of it; a broadcast from 1.
  b.Copy(layer, BindInput(0), {}, BindArena(0, 16384), {}, Sym(0) * Lit(4));
  b.Collective(layer, AXRT_AXE_COLLECTIVE_ALL_REDUCE, 0, AXRT_AXE_DTYPE_FLOAT32, Sym(0),
               BindArena(0, 16384), BindArena(0, 16384));
  b.Copy(layer, BindArena(0, 16384), {}, BindOutput(0), {}, Sym(0) * Lit(4));
  b.Collective(layer, AXRT_AXE_COLLECTIVE_ALL_GATHER, 0, AXRT_AXE_DTYPE_FLOAT32, Lit(8),
               BindInput(1), BindOutput(1));
  b.Collective(layer, AXRT_AXE_COLLECTIVE_REDUCE_SCATTER, 0, AXRT_AXE_DTYPE_FLOAT32, Lit(4),
               BindInput(1), BindOutput(2), AXRT_AXE_REDUCE_MAX);
  b.Collective(layer, AXRT_AXE_COLLECTIVE_BROADCAST, 0, AXRT_AXE_DTYPE_FLOAT32, Lit(4),
               BindOutput(2), BindOutput(2), AXRT_AXE_REDUCE_SUM, /*root=*/1);
  write(b, dir, "collectives.axe");
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

void write_v1_2(const std::string& dir) { mutable_inputs(dir); }

void write_v1_3(const std::string& dir) {
  declared_features(dir);
  signed_scalars(dir);
}

void write_v1_4(const std::string& dir) { collectives(dir); }

}  // namespace

int main(int argc, char** argv) {
  std::string version = "1.4";
  int next = 1;
  if (argc == 4 && std::strcmp(argv[1], "--version") == 0) {
    version = argv[2];
    next = 3;
  }
  if (argc != next + 1 ||
      (version != "1.0" && version != "1.1" && version != "1.2" && version != "1.3" &&
       version != "1.4")) {
    std::fprintf(stderr, "usage: %s [--version 1.0|1.1|1.2|1.3|1.4] OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[next];
  try {
    if (version == "1.0") {
      write_v1_0(dir);
    } else if (version == "1.1") {
      write_v1_1(dir);
    } else if (version == "1.2") {
      write_v1_2(dir);
    } else if (version == "1.3") {
      write_v1_3(dir);
    } else {
      write_v1_4(dir);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "axrt_make_golden: %s\n", e.what());
    return 1;
  }
  return 0;
}
