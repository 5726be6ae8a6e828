// Writes the .axe files the `axrt` tool tests (and the fuzzer's seed corpus)
// use into the directory named by argv[1]: a sample that uses every
// code-object kind, kernel variants, a quantized weight, symbolic
// dimensions and every command kind; a minimal file; and files broken in one
// known way each.
// They are assembled with the container writer, below the builder, so that
// broken files can be made on purpose. The files `axrt run` is tested on
// (an executable that calls the built-in CPU kernel axrt_add_f32, .npy
// inputs, the output expected, and .npy files broken in one way each) are
// made through the builder's C API (tests/support/axe_test_builder.h) and
// with a .npy writer of this file's own.
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "axrt/format.h"
#include "format/container.h"
#include "format/writer.h"
#include "tests/support/axe_test_builder.h"

namespace axe = axrt::axe;

namespace {

using axrt_test::AxeBuilder;
using axrt_test::BindInput;
using axrt_test::BindOutput;
using axrt_test::BindScalar;
using axrt_test::BufferParam;
using axrt_test::CeilDiv;
using axrt_test::Dim;
using axrt_test::Param;
using axrt_test::ScalarParam;
using axrt_test::Sym;
using axrt_test::Symbolic;

// A 64-bit little-endian ELF header of `type` for `machine`, padded to
// `size` bytes.
std::vector<uint8_t> elf_image(uint16_t type, uint16_t machine, uint32_t flags, size_t size) {
  std::vector<uint8_t> bytes(size, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */};
  std::memcpy(bytes.data(), ident, sizeof ident);
  axe::store_u16(&bytes[16], type);
  axe::store_u16(&bytes[18], machine);
  axe::store_u32(&bytes[20], 1);       // e_version
  axe::store_u32(&bytes[48], flags);   // e_flags
  axe::store_u16(&bytes[52], 64);      // e_ehsize
  axe::store_u16(&bytes[54], 56);      // e_phentsize
  axe::store_u16(&bytes[58], 64);      // e_shentsize
  return bytes;
}

// A CUDA fat binary: its 16-byte header (magic, version, header size,
// payload size) and an empty payload of `size` - 16 bytes.
std::vector<uint8_t> fatbin_image(size_t size) {
  std::vector<uint8_t> bytes(size, 0);
  axe::store_u32(&bytes[0], 0xBA55ED50u);
  axe::store_u16(&bytes[4], 1);
  axe::store_u16(&bytes[6], 16);
  axe::store_u64(&bytes[8], size - 16);
  return bytes;
}

std::vector<uint8_t> text_bytes(const char* text) {
  return std::vector<uint8_t>(text, text + std::strlen(text) + 1);  // with its NUL
}

std::unique_ptr<axe::ExprT> expr(std::vector<axe::ExprOp> ops) {
  auto e = std::make_unique<axe::ExprT>();
  e->ops = std::move(ops);
  return e;
}
axe::ExprOp lit(int64_t v) { return axe::ExprOp(axe::ExprOpcode::CONST, v); }
axe::ExprOp sym(int64_t i) { return axe::ExprOp(axe::ExprOpcode::SYMBOL, i); }
axe::ExprOp op(axe::ExprOpcode code) { return axe::ExprOp(code, 0); }

std::unique_ptr<axe::BindingT> binding(axe::BindingKind kind, uint32_t index, uint64_t offset = 0,
                                       uint64_t size = 0) {
  auto b = std::make_unique<axe::BindingT>();
  b->kind = kind;
  b->index = index;
  b->offset = offset;
  b->size = size;
  return b;
}

std::unique_ptr<axe::BindingT> scalar(std::unique_ptr<axe::ExprT> value) {
  auto b = std::make_unique<axe::BindingT>();
  b->kind = axe::BindingKind::SCALAR;
  b->value = std::move(value);
  return b;
}

std::unique_ptr<axe::KernelParamT> buffer_param(const char* name, axe::Access access) {
  auto p = std::make_unique<axe::KernelParamT>();
  p->name = name;
  p->kind = axe::ParamKind::BUFFER;
  p->access = access;
  return p;
}

std::unique_ptr<axe::KernelParamT> scalar_param(const char* name, axe::DType type) {
  auto p = std::make_unique<axe::KernelParamT>();
  p->name = name;
  p->kind = axe::ParamKind::SCALAR;
  p->scalar_type = type;
  return p;
}

std::unique_ptr<axe::PackingT> packing(uint8_t bits, uint8_t container_bits, int32_t axis,
                                       axe::ElementOrder order) {
  auto p = std::make_unique<axe::PackingT>();
  p->bits = bits;
  p->container_bits = container_bits;
  p->axis = axis;
  p->order = order;
  return p;
}

// AWQ int4, groups of 128 along the input dimension of an [8, 1024] weight:
// scales bf16 [8, 8], zero points uint4 [8, 8] packed 8 to a u32 ([8, 1]).
std::unique_ptr<axe::QuantLayoutT> awq_layout() {
  auto q = std::make_unique<axe::QuantLayoutT>();
  q->layout_id = "awq.int4.g128";
  q->element_type = axe::DType::UINT4;
  q->dequantized_type = axe::DType::BFLOAT16;
  q->block_shape = {1, 128};
  q->scale = std::make_unique<axe::ScaleRefT>();
  q->scale->constant = 1;
  q->scale->dtype = axe::DType::BFLOAT16;
  q->zero_point = std::make_unique<axe::ZeroPointT>();
  q->zero_point->kind = axe::ZeroPointKind::INTEGER;
  q->zero_point->constant = 2;
  q->zero_point->dtype = axe::DType::UINT4;
  q->zero_point->packing = packing(4, 32, 1, axe::ElementOrder::AWQ);
  q->packing = packing(4, 32, 1, axe::ElementOrder::AWQ);
  return q;
}

struct Segments {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<axe::SegmentKind> kinds;

  uint32_t add(axe::SegmentKind kind, std::vector<uint8_t> data) {
    bytes.push_back(std::move(data));
    kinds.push_back(kind);
    return static_cast<uint32_t>(bytes.size() - 1);
  }
};

// Appends `size` bytes of a deterministic pattern to `segment`, aligned to
// 64, and returns the range.
std::unique_ptr<axe::SegmentRangeT> place(std::vector<uint8_t>* segment, uint32_t index, uint64_t size) {
  segment->resize(axe::align_up(segment->size(), 64), 0);
  auto range = std::make_unique<axe::SegmentRangeT>();
  range->segment = index;
  range->offset = segment->size();
  range->size = size;
  for (uint64_t i = 0; i < size; ++i) segment->push_back(static_cast<uint8_t>(i * 131 + 17));
  return range;
}

std::unique_ptr<axe::ConstantT> constant(const char* name, axe::DType dtype, std::vector<uint64_t> shape,
                                         std::unique_ptr<axe::SegmentRangeT> data) {
  auto c = std::make_unique<axe::ConstantT>();
  c->name = name;
  c->dtype = dtype;
  c->shape = std::move(shape);
  c->data = std::move(data);
  return c;
}

std::unique_ptr<axe::TensorSigT> sig(const char* name, axe::DType dtype,
                                     std::vector<std::pair<uint64_t, int32_t>> dims) {
  auto s = std::make_unique<axe::TensorSigT>();
  s->name = name;
  s->dtype = dtype;
  for (const auto& [value, symbol] : dims) {
    auto d = std::make_unique<axe::DimT>();
    d->value = value;
    d->symbol = symbol;
    s->shape.push_back(std::move(d));
  }
  return s;
}

struct Module {
  axe::ExecutableT exe;
  Segments segments;
};

void build_sample(Module* m) {
  axe::ExecutableT& exe = m->exe;
  exe.producer = std::make_unique<axe::ProducerT>();
  exe.producer->name = "axrt-cli-test";
  exe.producer->version = "1.0";
  // Format 1.3: every feature the file uses.
  exe.required_features = {"quantization.v1", "symbolic-dims.v1", "prepacked.v1", "host-code.v1",
                           "kernel-library.v1"};

  // Code objects: one of every kind.
  const uint32_t cubin = m->segments.add(axe::SegmentKind::kCode, elf_image(2, 190, 90 | (90 << 16), 256));
  const uint32_t fatbin = m->segments.add(axe::SegmentKind::kCode, fatbin_image(256));
  const uint32_t ptx = m->segments.add(
      axe::SegmentKind::kCode,
      text_bytes(".version 8.0\n.target sm_90\n.address_size 64\n\n"
                 ".visible .entry noop_kernel()\n{\n  ret;\n}\n"));
  const uint32_t host = m->segments.add(axe::SegmentKind::kCode, elf_image(3, 62, 0, 256));
  const struct {
    axe::CodeObjectKind kind;
    const char* target;
    int32_t segment;
  } code_objects[] = {
      {axe::CodeObjectKind::CUDA_CUBIN, "sm_90", static_cast<int32_t>(cubin)},
      {axe::CodeObjectKind::CUDA_FATBIN, "sm_80,sm_90", static_cast<int32_t>(fatbin)},
      {axe::CodeObjectKind::CUDA_PTX, "compute_90", static_cast<int32_t>(ptx)},
      {axe::CodeObjectKind::HOST_SHARED_OBJECT, "x86_64", static_cast<int32_t>(host)},
      {axe::CodeObjectKind::KERNEL_LIBRARY, "x86_64", -1},
  };
  for (const auto& c : code_objects) {
    auto co = std::make_unique<axe::CodeObjectT>();
    co->kind = c.kind;
    co->target = c.target;
    co->segment = c.segment;
    if (c.kind == axe::CodeObjectKind::KERNEL_LIBRARY) {
      co->library_name = "axrt.cpu";
      co->library_min_version = 1;
    }
    exe.code_objects.push_back(std::move(co));
  }

  // Constants: an AWQ int4 weight with its scales and zero points, a bias,
  // and a pre-packed copy of the weight.
  std::vector<uint8_t> weights;
  const uint32_t weight_segment = static_cast<uint32_t>(m->segments.bytes.size());
  auto qweight = constant("fc.qweight", axe::DType::UINT4, {8, 1024}, place(&weights, weight_segment, 4096));
  qweight->quantization = awq_layout();
  auto scales = constant("fc.scales", axe::DType::BFLOAT16, {8, 8}, place(&weights, weight_segment, 128));
  auto qzeros = constant("fc.qzeros", axe::DType::UINT32, {8, 1}, place(&weights, weight_segment, 32));
  auto bias = constant("fc.bias", axe::DType::BFLOAT16, {8}, place(&weights, weight_segment, 16));
  m->segments.add(axe::SegmentKind::kConstant, std::move(weights));
  std::vector<uint8_t> prepacked_bytes;
  const uint32_t prepacked_segment = static_cast<uint32_t>(m->segments.bytes.size());
  auto copy = std::make_unique<axe::PrepackedCopyT>();
  copy->target = "sm_90";
  copy->layout_id = "awq.int4.g128.sm90-tiled";
  copy->data = place(&prepacked_bytes, prepacked_segment, 4096);
  qweight->prepacked.push_back(std::move(copy));
  m->segments.add(axe::SegmentKind::kPrepacked, std::move(prepacked_bytes));
  exe.constants.push_back(std::move(qweight));
  exe.constants.push_back(std::move(scales));
  exe.constants.push_back(std::move(qzeros));
  exe.constants.push_back(std::move(bias));

  // Kernels: a CUDA GEMM that expects the AWQ layout, and a library kernel.
  auto gemm = std::make_unique<axe::KernelT>();
  gemm->name = "gemm_awq";
  gemm->code_object = 0;
  gemm->entry_symbol = "gemm_awq_kernel";
  gemm->params.push_back(buffer_param("x", axe::Access::READ));
  gemm->params.push_back(buffer_param("qweight", axe::Access::READ));
  gemm->params.back()->layout = awq_layout();
  gemm->params.push_back(buffer_param("scales", axe::Access::READ));
  gemm->params.push_back(buffer_param("qzeros", axe::Access::READ));
  gemm->params.push_back(buffer_param("y", axe::Access::WRITE));
  gemm->params.push_back(scalar_param("rows", axe::DType::UINT32));
  gemm->workgroup_size = std::make_unique<axe::Dim3>(128, 1, 1);
  gemm->dynamic_shared_memory = 16384;
  gemm->cluster_dims = std::make_unique<axe::Dim3>(2, 1, 1);
  exe.kernels.push_back(std::move(gemm));
  auto add_bias = std::make_unique<axe::KernelT>();
  add_bias->name = "add_bias";
  add_bias->code_object = 4;
  add_bias->entry_symbol = "axrt_add_bias_bf16";
  add_bias->params.push_back(buffer_param("y", axe::Access::READ_WRITE));
  add_bias->params.push_back(buffer_param("bias", axe::Access::READ));
  add_bias->params.push_back(scalar_param("count", axe::DType::UINT64));
  add_bias->workgroup_size = std::make_unique<axe::Dim3>(64, 1, 1);
  add_bias->cluster_dims = std::make_unique<axe::Dim3>(0, 0, 0);
  // Format 1.1: the same kernel for CUDA, in the fatbin and as PTX.
  auto variant = [](uint32_t code_object, const char* entry, uint32_t threads,
                    uint32_t shared_memory, uint32_t cluster) {
    auto v = std::make_unique<axe::KernelVariantT>();
    v->code_object = code_object;
    v->entry_symbol = entry;
    v->workgroup_size = std::make_unique<axe::Dim3>(threads, 1, 1);
    v->dynamic_shared_memory = shared_memory;
    v->cluster_dims = std::make_unique<axe::Dim3>(cluster, cluster ? 1 : 0, cluster ? 1 : 0);
    return v;
  };
  add_bias->variants.push_back(variant(1, "add_bias_bf16", 256, 512, 0));
  add_bias->variants.push_back(variant(2, "noop_kernel", 128, 0, 2));
  exe.kernels.push_back(std::move(add_bias));

  // main(x: bf16[batch, 1024]) -> (y: bf16[batch, 8]), batch <= 64.
  using axe::ExprOpcode;
  auto f = std::make_unique<axe::FunctionT>();
  f->name = "main";
  auto batch = std::make_unique<axe::SymbolT>();
  batch->name = "batch";
  batch->upper_bound = 64;
  f->symbols.push_back(std::move(batch));
  f->inputs.push_back(sig("x", axe::DType::BFLOAT16, {{0, 0}, {1024, -1}}));
  f->outputs.push_back(sig("y", axe::DType::BFLOAT16, {{0, 0}, {8, -1}}));
  f->arena_size = 64 * 2048;

  axe::FillCommandT fill;
  fill.target = binding(axe::BindingKind::OUTPUT, 0);
  fill.offset = expr({lit(0)});
  fill.length = expr({sym(0), lit(16), op(ExprOpcode::MUL)});
  fill.pattern = 0;
  fill.pattern_size = 4;
  f->commands.emplace_back().Set(std::move(fill));

  axe::CopyCommandT copy_in;
  copy_in.src = binding(axe::BindingKind::INPUT, 0);
  copy_in.dst = binding(axe::BindingKind::ARENA, 0, 0, 64 * 2048);
  copy_in.length = expr({sym(0), lit(2048), op(ExprOpcode::MUL)});
  f->commands.emplace_back().Set(std::move(copy_in));

  axe::DispatchCommandT gemm_call;
  gemm_call.kernel = 0;
  gemm_call.workgroup_count_x = expr({sym(0), lit(4), op(ExprOpcode::DIV_CEIL)});
  gemm_call.bindings.push_back(binding(axe::BindingKind::ARENA, 0, 0, 64 * 2048));
  gemm_call.bindings.push_back(binding(axe::BindingKind::CONSTANT, 0));
  gemm_call.bindings.push_back(binding(axe::BindingKind::CONSTANT, 1));
  gemm_call.bindings.push_back(binding(axe::BindingKind::CONSTANT, 2));
  gemm_call.bindings.push_back(binding(axe::BindingKind::OUTPUT, 0));
  gemm_call.bindings.push_back(scalar(expr({sym(0)})));
  f->commands.emplace_back().Set(std::move(gemm_call));

  axe::DispatchCommandT bias_call;
  bias_call.kernel = 1;
  bias_call.workgroup_count_x =
      expr({sym(0), lit(8), op(ExprOpcode::MUL), lit(64), op(ExprOpcode::DIV_CEIL), lit(1),
            op(ExprOpcode::MAXIMUM)});
  bias_call.workgroup_count_y = expr({lit(1)});
  bias_call.workgroup_count_z = expr({lit(1)});
  bias_call.bindings.push_back(binding(axe::BindingKind::OUTPUT, 0));
  bias_call.bindings.push_back(binding(axe::BindingKind::CONSTANT, 3));
  bias_call.bindings.push_back(scalar(expr({sym(0), lit(8), op(ExprOpcode::MUL)})));
  f->commands.emplace_back().Set(std::move(bias_call));
  exe.functions.push_back(std::move(f));

  auto kv = [&](const char* key, std::string value) {
    auto entry = std::make_unique<axe::KeyValueT>();
    entry->key = key;
    entry->value = std::move(value);
    exe.metadata.push_back(std::move(entry));
  };
  kv("source", "tests/cli/make_test_files.cc");
  kv("escapes", std::string("quote \" backslash \\ newline \n tab \t bell \x07 caf\xc3\xa9 end"));
}

std::vector<uint8_t> assemble(const Module& m) {
  const std::vector<uint8_t> metadata = axe::pack_metadata(m.exe);
  std::vector<axe::SegmentPayload> payloads;
  for (size_t i = 0; i < m.segments.bytes.size(); ++i) {
    payloads.push_back({m.segments.kinds[i], m.segments.bytes[i]});
  }
  return axe::assemble_container(metadata, payloads);
}

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "make_test_files: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}


// ---------------------------------------------------------------------------
// Files for `axrt run`.

// The elements `axrt run` is tested with: n = 5000 spans two workgroups of
// axrt_add_f32 (4096 elements each), the second one partial.
constexpr uint64_t kRunElements = 5000;
constexpr uint64_t kRunBound = 1 << 20;

// Writes an executable whose functions `names` each compute
// out[i] = a[i] (op) b[i] over f32[n] with the built-in library's kernel
// `kernels[i]`.
void write_elementwise_axe(const std::string& path, std::initializer_list<const char*> names,
                           std::initializer_list<const char*> kernels) {
  AxeBuilder b("axrt-cli-test", "1.0");
  const uint32_t library = b.AddLibrary("axrt.cpu", 1);
  const std::vector<Param> params = {BufferParam("a"), BufferParam("b"),
                                     BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                     ScalarParam("n", AXRT_AXE_DTYPE_UINT64)};
  const std::vector<Dim> n = {Symbolic(0)};
  auto kernel_it = kernels.begin();
  for (const char* name : names) {
    const char* symbol = *kernel_it++;
    const uint32_t kernel = b.AddKernel(symbol, library, symbol, params);
    const uint32_t function =
        b.AddFunction(name, {{"n", kRunBound}},
                      {{"a", AXRT_AXE_DTYPE_FLOAT32, n}, {"b", AXRT_AXE_DTYPE_FLOAT32, n}},
                      {{"out", AXRT_AXE_DTYPE_FLOAT32, n}});
    b.Dispatch(function, kernel, {CeilDiv(Sym(0), 4096)},
               {BindInput(0), BindInput(1), BindOutput(0), BindScalar(Sym(0))});
  }
  b.WriteFile(path);
}

// A .npy file as NumPy 2's np.save writes it: version `major`.0, the header
// padded with spaces to a multiple of 64 bytes after leaving room for the
// first dimension to grow to 21 digits.
std::vector<uint8_t> npy_bytes(const std::string& descr, const std::vector<uint64_t>& shape,
                               const void* data, size_t size, bool fortran_order = false,
                               int major = 1) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) shape_text += (i ? ", " : "") + std::to_string(shape[i]);
  shape_text += shape.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran_order ? "True" : "False") + ", 'shape': " + shape_text + ", }";
  if (!shape.empty()) header += std::string(21 - std::to_string(shape[0]).size(), ' ');
  const size_t length_bytes = major == 1 ? 2 : 4;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < length_bytes; ++i) bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  const auto* p = static_cast<const uint8_t*>(data);
  bytes.insert(bytes.end(), p, p + size);
  return bytes;
}

template <typename T>
std::vector<uint8_t> npy_of(const std::string& descr, const std::vector<uint64_t>& shape,
                            const std::vector<T>& values, bool fortran_order = false, int major = 1) {
  return npy_bytes(descr, shape, values.data(), values.size() * sizeof(T), fortran_order, major);
}

bool write_run_files(const std::string& dir) {
  write_elementwise_axe(dir + "/add.axe", {"add"}, {"axrt_add_f32"});
  write_elementwise_axe(dir + "/two_functions.axe", {"add", "mul"},
                        {"axrt_add_f32", "axrt_mul_f32"});
  bool ok = true;

  // Values whose sums are exact in f32, so the expected file is certain.
  std::vector<float> a(kRunElements), b(kRunElements), sum(kRunElements);
  for (uint64_t i = 0; i < kRunElements; ++i) {
    a[i] = static_cast<float>(i) * 0.25f;
    b[i] = 1000.0f - static_cast<float>(i) * 0.5f;
    sum[i] = a[i] + b[i];
  }
  ok &= write_file(dir + "/run_a.npy", npy_of("<f4", {kRunElements}, a));
  ok &= write_file(dir + "/run_b.npy", npy_of("<f4", {kRunElements}, b));
  ok &= write_file(dir + "/run_expected_out.npy", npy_of("<f4", {kRunElements}, sum));
  // The same input in a version 2.0 header.
  ok &= write_file(dir + "/run_b_v2.npy", npy_of("<f4", {kRunElements}, b, false, 2));

  // Inputs that do not fit the signature add(a: f32[n], b: f32[n]).
  ok &= write_file(dir + "/run_b_int32.npy",
                   npy_of("<i4", {kRunElements}, std::vector<int32_t>(kRunElements, 1)));
  ok &= write_file(dir + "/run_b_4000.npy", npy_of("<f4", {4000}, std::vector<float>(4000, 1.0f)));
  ok &= write_file(dir + "/run_b_2x2500.npy", npy_of("<f4", {2, 2500}, b));

  // Broken .npy files, one way each.
  ok &= write_file(dir + "/npy_big_endian.npy", npy_of(">f4", {kRunElements}, b));
  ok &= write_file(dir + "/npy_fortran.npy", npy_of("<f4", {2, 2500}, b, true));
  ok &= write_file(dir + "/npy_object.npy", npy_of("|O", {1}, std::vector<uint64_t>(1, 0)));
  ok &= write_file(dir + "/npy_complex.npy", npy_of("<c8", {2500}, b));
  {
    std::vector<uint8_t> bytes = npy_of("<f4", {kRunElements}, b);
    bytes.resize(bytes.size() - 6);
    ok &= write_file(dir + "/npy_truncated.npy", bytes);
  }
  {
    const char text[] = "a,b\n1,2\n";
    ok &= write_file(dir + "/npy_not_npy.npy", std::vector<uint8_t>(text, text + sizeof text - 1));
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_test_files OUTPUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "make_test_files: cannot create %s: %s\n", dir.c_str(), error.message().c_str());
    return 1;
  }
  bool ok = true;

  Module sample;
  build_sample(&sample);
  const std::vector<uint8_t> sample_bytes = assemble(sample);
  ok &= write_file(dir + "/sample.axe", sample_bytes);

  Module minimal;
  minimal.exe.producer = std::make_unique<axe::ProducerT>();
  minimal.exe.producer->name = "axrt-cli-test";
  minimal.exe.producer->version = "1.0";
  ok &= write_file(dir + "/minimal.axe", assemble(minimal));

  // One byte of the weights changed after the checksums were computed:
  // valid unless checksums are verified.
  {
    std::vector<uint8_t> bytes = sample_bytes;
    const axe::SegmentEntry weights = axe::decode_segment_entry(
        std::span<const uint8_t, axe::kSegmentEntrySize>(&bytes[axe::kHeaderSize + 4 * axe::kSegmentEntrySize],
                                                         axe::kSegmentEntrySize));
    bytes[weights.offset + 100] ^= 0xff;
    ok &= write_file(dir + "/bad_segment_checksum.axe", bytes);
  }
  // The header's file_size changed without its checksum.
  {
    std::vector<uint8_t> bytes = sample_bytes;
    bytes[axe::header_offset::kFileSize] ^= 0x01;
    ok &= write_file(dir + "/bad_header_checksum.axe", bytes);
  }
  // Cut short inside the segment table.
  ok &= write_file(dir + "/truncated.axe",
                   std::vector<uint8_t>(sample_bytes.begin(), sample_bytes.begin() + 100));
  // Needs a feature no reader knows.
  {
    Module m;
    build_sample(&m);
    m.exe.required_features.push_back("axrt.test.unknown-feature");
    ok &= write_file(dir + "/unknown_feature.axe", assemble(m));
  }
  // A kernel naming a code object that does not exist.
  {
    Module m;
    build_sample(&m);
    m.exe.kernels[1]->code_object = 99;
    ok &= write_file(dir + "/bad_code_object_index.axe", assemble(m));
  }
  // A kernel variant in the code object of the kernel's primary
  // implementation.
  {
    Module m;
    build_sample(&m);
    m.exe.kernels[1]->variants[1]->code_object = 4;
    ok &= write_file(dir + "/bad_variant.axe", assemble(m));
  }
  // Not an .axe file at all.
  {
    const char text[] = "this is not an executable\n";
    ok &= write_file(dir + "/not_axe.txt", std::vector<uint8_t>(text, text + sizeof text - 1));
  }
  try {
    ok &= write_run_files(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_test_files: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
