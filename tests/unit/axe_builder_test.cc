// The .axe builder through its C API: every field round-trips through the
// verifying reader, output is deterministic, and errors name their cause;
// constants whose bytes come from a source are streamed into the file, a
// piece at a time, without the builder ever holding them.
#include <sys/stat.h>
#include <unistd.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "format/builder.h"
#include "format/inspect.h"
#include "format/reader.h"
#include "format/writer.h"
#include "tests/support/axe_test_builder.h"
#include "tests/unit/status_check.h"
#include "tests/unit/subprocess.h"

namespace {

namespace axe = axrt::axe;

using axrt_test::AxeBuilder;
using axrt_test::BindArena;
using axrt_test::BindConstant;
using axrt_test::BindOutput;
using axrt_test::BindScalar;
using axrt_test::BufferParam;
using axrt_test::CeilDiv;
using axrt_test::Fixed;
using axrt_test::Lit;
using axrt_test::ScalarParam;
using axrt_test::Sym;
using axrt_test::Symbolic;

// The producer of the files whose producer is checked.
constexpr char kProducer[] = "axe_builder_test";
constexpr char kProducerVersion[] = "3.1.4";

std::unique_ptr<axe::AxeFile> Open(const std::vector<uint8_t>& bytes,
                                   std::vector<std::string> features = {}) {
  axe::ReadOptions options;
  options.verify_checksums = true;
  options.extra_features = std::move(features);
  std::unique_ptr<axe::AxeFile> file;
  REQUIRE_CALL_OK(axe::AxeFile::open_bytes(bytes, "test", options, &file));
  return file;
}

std::vector<uint8_t> Filler(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

std::vector<uint8_t> Cubin() {
  std::vector<uint8_t> elf(128, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33, 7};
  std::memcpy(elf.data(), ident, sizeof(ident));
  elf[16] = 2;    // ET_EXEC
  elf[18] = 190;  // EM_CUDA
  elf[20] = 1;
  elf[48] = 90;
  elf[50] = 90;
  elf[52] = 64;
  return elf;
}

std::vector<uint64_t> Shape(const flatbuffers::Vector<uint64_t>* v) {
  return v ? std::vector<uint64_t>(v->begin(), v->end()) : std::vector<uint64_t>();
}

// Everything the format holds, once. Returns the bytes.
struct Everything {
  // Constant payloads, to compare with the segments.
  std::vector<uint8_t> scale = Filler(32, 1);
  std::vector<uint8_t> zeros = Filler(8, 2);
  std::vector<uint8_t> global = Filler(4, 3);
  std::vector<uint8_t> weight = Filler(1024, 4);
  std::vector<uint8_t> strided = Filler(128, 5);
  std::vector<uint8_t> packed = Filler(1000, 6);
  std::vector<uint8_t> cubin = Cubin();
  uint64_t block[2] = {128, 1};
  uint64_t second_block[2] = {0, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;

  void Fill(AxeBuilder& b) {
    b.AddRequiredFeature("test.feature.a");
    b.AddMetadata("model", "everything");
    b.AddMetadata("empty", "");
    CHECK(b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN, "sm_90", cubin) == 0);
    CHECK(b.AddLibrary("axrt.cpu", 3) == 1);

    // Grid of a [256, 8] weight in blocks of 128x1: [2, 8]. The scales are
    // stored transposed ([8, 2]); zero points packed along axis 1 into one
    // 32-bit word per row; a per-tensor second level.
    CHECK(b.AddConstant("scale", AXRT_AXE_DTYPE_FLOAT16, {8, 2}, scale) == 0);
    CHECK(b.AddConstant("zeros", AXRT_AXE_DTYPE_INT32, {2, 1}, zeros) == 1);
    CHECK(b.AddConstant("global", AXRT_AXE_DTYPE_FLOAT32, {1, 1}, global) == 2);
    layout.layout_id = "test.int4.g128";
    layout.element_type = AXRT_AXE_DTYPE_INT4;
    layout.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
    layout.rank = 2;
    layout.block_shape = block;
    layout.scale = {0, AXRT_AXE_DTYPE_FLOAT16, AXRT_AXE_SCALE_LAYOUT_GRID_TRANSPOSED};
    layout.zero_point.kind = AXRT_AXE_ZERO_POINT_KIND_INTEGER;
    layout.zero_point.constant = 1;
    layout.zero_point.dtype = AXRT_AXE_DTYPE_UINT4;
    layout.zero_point.packing = {4, 32, 1, AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL,
                                 AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT,
                                 AXRT_AXE_PADDING_RULE_EXACT};
    layout.zero_point.stored_bias = 1;
    layout.second_level_scale = {2, AXRT_AXE_DTYPE_FLOAT32, AXRT_AXE_SCALE_LAYOUT_GRID};
    layout.second_level_rank = 2;
    layout.second_level_block_shape = second_block;
    layout.packing = {4, 32, 0, AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL,
                      AXRT_AXE_SIGN_ENCODING_OFFSET_BINARY, AXRT_AXE_PADDING_RULE_EXACT};
    CHECK(b.AddConstant("weight", AXRT_AXE_DTYPE_INT4, {256, 8}, weight, &layout, 512) == 3);
    const uint32_t strided_index =
        b.AddConstant("strided", AXRT_AXE_DTYPE_FLOAT32, {4, 8}, strided, nullptr, 256, {1, 4});
    CHECK(strided_index == 4);
    b.AddPrepackedCopy(3, "sm_90", "test.int4.g128.tiled", packed);

    const uint32_t kernel = b.AddKernel("gemv", 0, "gemv_sm90",
                                        {BufferParam("w", AXRT_AXE_ACCESS_READ, &layout),
                                         BufferParam("out", AXRT_AXE_ACCESS_READ_WRITE),
                                         ScalarParam("alpha", AXRT_AXE_DTYPE_INT64)},
                                        {128, 2, 1}, 8192, {2, 1, 1});
    CHECK(kernel == 0);
    b.AddVariant(kernel, 1, "gemv_cpu", {64, 1, 4}, 512);

    const uint32_t fn =
        b.AddFunction("forward", {{"batch", 16}, {"seq", 2048}},
                      {{"x", AXRT_AXE_DTYPE_BFLOAT16, {Symbolic(0), Symbolic(1), Fixed(8)}},
                       {"scalar_in", AXRT_AXE_DTYPE_INT32, {}}},
                      {{"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0), Fixed(8)}}}, 8192);
    CHECK(fn == 0);
    b.Dispatch(fn, kernel, {CeilDiv(Sym(0) * Sym(1), 64), Lit(2), Lit(3)},
               {BindConstant(3), BindArena(4096, 2048), BindScalar(Sym(1) % Lit(7))});
    b.Copy(fn, BindArena(4096, 2048), Lit(16), BindOutput(0), Lit(0), Sym(0) * Lit(32));
    b.Fill(fn, BindOutput(0), /*offset=*/{}, Lit(4), 0xBEEF, 2);
  }
};

void CheckExpr(const axe::Expr* expr, std::vector<std::pair<axe::ExprOpcode, int64_t>> ops) {
  if (ops.empty()) {
    CHECK((expr == nullptr || expr->ops() == nullptr || expr->ops()->size() == 0));
    return;
  }
  REQUIRE(expr != nullptr);
  REQUIRE(expr->ops() != nullptr);
  REQUIRE(expr->ops()->size() == ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    CHECK(expr->ops()->Get(static_cast<uint32_t>(i))->opcode() == ops[i].first);
    CHECK(expr->ops()->Get(static_cast<uint32_t>(i))->operand() == ops[i].second);
  }
}

void CheckLayout(const axe::QuantLayout* layout) {
  REQUIRE(layout != nullptr);
  CHECK(layout->layout_id()->str() == "test.int4.g128");
  CHECK(layout->element_type() == axe::DType::INT4);
  CHECK(layout->dequantized_type() == axe::DType::BFLOAT16);
  CHECK(Shape(layout->block_shape()) == std::vector<uint64_t>{128, 1});
  REQUIRE(layout->scale());
  CHECK(layout->scale()->constant() == 0);
  CHECK(layout->scale()->dtype() == axe::DType::FLOAT16);
  CHECK(layout->scale()->layout() == axe::ScaleLayout::GRID_TRANSPOSED);
  REQUIRE(layout->zero_point());
  CHECK(layout->zero_point()->kind() == axe::ZeroPointKind::INTEGER);
  CHECK(layout->zero_point()->constant() == 1);
  CHECK(layout->zero_point()->dtype() == axe::DType::UINT4);
  CHECK(layout->zero_point()->stored_bias() == 1);
  REQUIRE(layout->zero_point()->packing());
  CHECK(layout->zero_point()->packing()->bits() == 4);
  CHECK(layout->zero_point()->packing()->container_bits() == 32);
  CHECK(layout->zero_point()->packing()->axis() == 1);
  CHECK(layout->zero_point()->packing()->order() == axe::ElementOrder::SEQUENTIAL);
  CHECK(layout->zero_point()->packing()->sign() == axe::SignEncoding::TWOS_COMPLEMENT);
  CHECK(layout->zero_point()->packing()->padding() == axe::PaddingRule::EXACT);
  REQUIRE(layout->second_level_scale());
  CHECK(layout->second_level_scale()->constant() == 2);
  CHECK(layout->second_level_scale()->dtype() == axe::DType::FLOAT32);
  CHECK(layout->second_level_scale()->layout() == axe::ScaleLayout::GRID);
  CHECK(Shape(layout->second_level_block_shape()) == std::vector<uint64_t>{0, 0});
  REQUIRE(layout->packing());
  CHECK(layout->packing()->bits() == 4);
  CHECK(layout->packing()->container_bits() == 32);
  CHECK(layout->packing()->axis() == 0);
  CHECK(layout->packing()->order() == axe::ElementOrder::SEQUENTIAL);
  CHECK(layout->packing()->sign() == axe::SignEncoding::OFFSET_BINARY);
  CHECK(layout->packing()->padding() == axe::PaddingRule::EXACT);
}

std::vector<uint8_t> BuildEverything() {
  AxeBuilder builder(kProducer, kProducerVersion);
  Everything everything;
  everything.Fill(builder);
  return builder.Bytes();
}

TEST_CASE("every field round-trips through the reader", "[axe_builder]") {
  AxeBuilder builder(kProducer, kProducerVersion);
  Everything in;
  in.Fill(builder);
  const std::vector<uint8_t> bytes = builder.Bytes();
  auto file = Open(bytes, {"test.feature.a"});
  const axe::Executable& exe = file->metadata();

  CHECK(file->header().format_major == 1);
  CHECK(file->header().format_minor == 4);
  REQUIRE(exe.producer());
  CHECK(exe.producer()->name()->str() == "axe_builder_test");
  CHECK(exe.producer()->version()->str() == "3.1.4");
  // The feature declared, then every feature the file uses (format 1.3).
  REQUIRE(exe.required_features());
  std::vector<std::string> features;
  for (const flatbuffers::String* f : *exe.required_features()) features.push_back(f->str());
  CHECK(features == std::vector<std::string>{"test.feature.a", "quantization.v1",
                                             "symbolic-dims.v1", "prepacked.v1",
                                             "kernel-library.v1"});
  REQUIRE(exe.metadata());
  REQUIRE(exe.metadata()->size() == 2);
  CHECK(exe.metadata()->Get(0)->key()->str() == "model");
  CHECK(exe.metadata()->Get(0)->value()->str() == "everything");
  CHECK(exe.metadata()->Get(1)->key()->str() == "empty");
  // Empty strings are left out of the FlatBuffer.
  CHECK(flatbuffers::GetString(exe.metadata()->Get(1)->value()).empty());

  // Segments: the cubin, the constants, the pre-packed copies.
  REQUIRE(file->segments().size() == 3);
  CHECK(file->segments()[0].kind == static_cast<uint32_t>(axe::SegmentKind::kCode));
  CHECK(file->segments()[1].kind == static_cast<uint32_t>(axe::SegmentKind::kConstant));
  CHECK(file->segments()[2].kind == static_cast<uint32_t>(axe::SegmentKind::kPrepacked));
  for (const axe::SegmentEntry& segment : file->segments()) CHECK(segment.offset % 4096 == 0);

  REQUIRE(exe.code_objects());
  REQUIRE(exe.code_objects()->size() == 2);
  const axe::CodeObject* cubin = exe.code_objects()->Get(0);
  CHECK(cubin->kind() == axe::CodeObjectKind::CUDA_CUBIN);
  CHECK(cubin->target()->str() == "sm_90");
  CHECK(cubin->segment() == 0);
  const auto cubin_bytes = file->segment_bytes(0);
  CHECK(std::vector<uint8_t>(cubin_bytes.begin(), cubin_bytes.end()) == in.cubin);
  const axe::CodeObject* library = exe.code_objects()->Get(1);
  CHECK(library->kind() == axe::CodeObjectKind::KERNEL_LIBRARY);
  CHECK(library->target()->str() == AXRT_HOST_CODE_TARGET);
  CHECK(library->segment() == -1);
  CHECK(library->library_name()->str() == "axrt.cpu");
  CHECK(library->library_min_version() == 3);

  REQUIRE(exe.constants());
  REQUIRE(exe.constants()->size() == 5);
  const std::vector<uint8_t>* payloads[] = {&in.scale, &in.zeros, &in.global, &in.weight,
                                            &in.strided};
  for (uint32_t i = 0; i < 5; ++i) {
    const axe::Constant* constant = exe.constants()->Get(i);
    INFO("constant " << constant->name()->str());
    REQUIRE(constant->data());
    CHECK(constant->data()->segment() == 1);
    CHECK(constant->data()->offset() % constant->alignment() == 0);
    const auto data = file->range_bytes(*constant->data());
    CHECK(std::vector<uint8_t>(data.begin(), data.end()) == *payloads[i]);
  }
  CHECK(exe.constants()->Get(0)->name()->str() == "scale");
  CHECK(exe.constants()->Get(0)->dtype() == axe::DType::FLOAT16);
  CHECK(Shape(exe.constants()->Get(0)->shape()) == std::vector<uint64_t>{8, 2});
  CHECK(exe.constants()->Get(0)->alignment() == 64);
  CHECK(exe.constants()->Get(0)->quantization() == nullptr);
  const axe::Constant* weight = exe.constants()->Get(3);
  CHECK(weight->name()->str() == "weight");
  CHECK(weight->dtype() == axe::DType::INT4);
  CHECK(Shape(weight->shape()) == std::vector<uint64_t>{256, 8});
  CHECK(weight->alignment() == 512);
  CHECK((weight->strides() == nullptr || weight->strides()->size() == 0));
  CheckLayout(weight->quantization());
  REQUIRE(weight->prepacked());
  REQUIRE(weight->prepacked()->size() == 1);
  const axe::PrepackedCopy* copy = weight->prepacked()->Get(0);
  CHECK(copy->target()->str() == "sm_90");
  CHECK(copy->layout_id()->str() == "test.int4.g128.tiled");
  CHECK(copy->data()->segment() == 2);
  CHECK(copy->data()->offset() % 512 == 0);
  const auto packed = file->range_bytes(*copy->data());
  CHECK(std::vector<uint8_t>(packed.begin(), packed.end()) == in.packed);
  const axe::Constant* strided = exe.constants()->Get(4);
  CHECK(strided->alignment() == 256);
  REQUIRE(strided->strides());
  CHECK(std::vector<int64_t>(strided->strides()->begin(), strided->strides()->end()) ==
        std::vector<int64_t>{1, 4});

  REQUIRE(exe.kernels());
  REQUIRE(exe.kernels()->size() == 1);
  const axe::Kernel* kernel = exe.kernels()->Get(0);
  CHECK(kernel->name()->str() == "gemv");
  CHECK(kernel->code_object() == 0);
  CHECK(kernel->entry_symbol()->str() == "gemv_sm90");
  CHECK(kernel->workgroup_size()->x() == 128);
  CHECK(kernel->workgroup_size()->y() == 2);
  CHECK(kernel->workgroup_size()->z() == 1);
  CHECK(kernel->dynamic_shared_memory() == 8192);
  CHECK(kernel->cluster_dims()->x() == 2);
  CHECK(kernel->cluster_dims()->y() == 1);
  CHECK(kernel->cluster_dims()->z() == 1);
  REQUIRE(kernel->variants());
  REQUIRE(kernel->variants()->size() == 1);
  const axe::KernelVariant* variant = kernel->variants()->Get(0);
  CHECK(variant->code_object() == 1);
  CHECK(variant->entry_symbol()->str() == "gemv_cpu");
  CHECK(variant->workgroup_size()->x() == 64);
  CHECK(variant->workgroup_size()->y() == 1);
  CHECK(variant->workgroup_size()->z() == 4);
  CHECK(variant->dynamic_shared_memory() == 512);
  CHECK(variant->cluster_dims()->x() == 0);
  CHECK(variant->cluster_dims()->y() == 0);
  CHECK(variant->cluster_dims()->z() == 0);
  REQUIRE(kernel->params()->size() == 3);
  CHECK(kernel->params()->Get(0)->name()->str() == "w");
  CHECK(kernel->params()->Get(0)->kind() == axe::ParamKind::BUFFER);
  CHECK(kernel->params()->Get(0)->access() == axe::Access::READ);
  CheckLayout(kernel->params()->Get(0)->layout());
  CHECK(kernel->params()->Get(1)->name()->str() == "out");
  CHECK(kernel->params()->Get(1)->access() == axe::Access::READ_WRITE);
  CHECK(kernel->params()->Get(1)->layout() == nullptr);
  CHECK(kernel->params()->Get(2)->name()->str() == "alpha");
  CHECK(kernel->params()->Get(2)->kind() == axe::ParamKind::SCALAR);
  CHECK(kernel->params()->Get(2)->scalar_type() == axe::DType::INT64);
  CHECK(kernel->params()->Get(2)->access() == axe::Access::NONE);

  REQUIRE(exe.functions());
  REQUIRE(exe.functions()->size() == 1);
  const axe::Function* function = exe.functions()->Get(0);
  CHECK(function->name()->str() == "forward");
  CHECK(function->arena_size() == 8192);
  REQUIRE(function->symbols()->size() == 2);
  CHECK(function->symbols()->Get(0)->name()->str() == "batch");
  CHECK(function->symbols()->Get(0)->upper_bound() == 16);
  CHECK(function->symbols()->Get(1)->name()->str() == "seq");
  CHECK(function->symbols()->Get(1)->upper_bound() == 2048);
  REQUIRE(function->inputs()->size() == 2);
  const axe::TensorSig* x = function->inputs()->Get(0);
  CHECK(x->name()->str() == "x");
  CHECK(x->dtype() == axe::DType::BFLOAT16);
  REQUIRE(x->shape()->size() == 3);
  CHECK(x->shape()->Get(0)->symbol() == 0);
  CHECK(x->shape()->Get(1)->symbol() == 1);
  CHECK(x->shape()->Get(2)->symbol() == -1);
  CHECK(x->shape()->Get(2)->value() == 8);
  CHECK(function->inputs()->Get(1)->name()->str() == "scalar_in");
  CHECK(function->inputs()->Get(1)->dtype() == axe::DType::INT32);
  CHECK((function->inputs()->Get(1)->shape() == nullptr ||
         function->inputs()->Get(1)->shape()->size() == 0));
  REQUIRE(function->outputs()->size() == 1);
  CHECK(function->outputs()->Get(0)->name()->str() == "y");
  CHECK(function->outputs()->Get(0)->dtype() == axe::DType::FLOAT32);
  CHECK(function->outputs()->Get(0)->shape()->Get(0)->symbol() == 0);
  CHECK(function->outputs()->Get(0)->shape()->Get(1)->value() == 8);

  using Op = axe::ExprOpcode;
  REQUIRE(function->commands()->size() == 3);
  REQUIRE(function->commands_type()->Get(0) == axe::Command::DispatchCommand);
  const auto* dispatch = function->commands()->GetAs<axe::DispatchCommand>(0);
  CHECK(dispatch->kernel() == 0);
  CheckExpr(dispatch->workgroup_count_x(),
            {{Op::SYMBOL, 0}, {Op::SYMBOL, 1}, {Op::MUL, 0}, {Op::CONST, 64}, {Op::DIV_CEIL, 0}});
  CheckExpr(dispatch->workgroup_count_y(), {{Op::CONST, 2}});
  CheckExpr(dispatch->workgroup_count_z(), {{Op::CONST, 3}});
  REQUIRE(dispatch->bindings()->size() == 3);
  CHECK(dispatch->bindings()->Get(0)->kind() == axe::BindingKind::CONSTANT);
  CHECK(dispatch->bindings()->Get(0)->index() == 3);
  CHECK(dispatch->bindings()->Get(1)->kind() == axe::BindingKind::ARENA);
  CHECK(dispatch->bindings()->Get(1)->offset() == 4096);
  CHECK(dispatch->bindings()->Get(1)->size() == 2048);
  CHECK(dispatch->bindings()->Get(2)->kind() == axe::BindingKind::SCALAR);
  CheckExpr(dispatch->bindings()->Get(2)->value(), {{Op::SYMBOL, 1}, {Op::CONST, 7}, {Op::MOD, 0}});

  REQUIRE(function->commands_type()->Get(1) == axe::Command::CopyCommand);
  const auto* copy_command = function->commands()->GetAs<axe::CopyCommand>(1);
  CHECK(copy_command->src()->kind() == axe::BindingKind::ARENA);
  CHECK(copy_command->src()->offset() == 4096);
  CHECK(copy_command->src()->size() == 2048);
  CheckExpr(copy_command->src_offset(), {{Op::CONST, 16}});
  CHECK(copy_command->dst()->kind() == axe::BindingKind::OUTPUT);
  CHECK(copy_command->dst()->index() == 0);
  CheckExpr(copy_command->dst_offset(), {{Op::CONST, 0}});
  CheckExpr(copy_command->length(), {{Op::SYMBOL, 0}, {Op::CONST, 32}, {Op::MUL, 0}});

  REQUIRE(function->commands_type()->Get(2) == axe::Command::FillCommand);
  const auto* fill = function->commands()->GetAs<axe::FillCommand>(2);
  CHECK(fill->target()->kind() == axe::BindingKind::OUTPUT);
  CHECK(fill->target()->index() == 0);
  CheckExpr(fill->offset(), {});
  CheckExpr(fill->length(), {{Op::CONST, 4}});
  CHECK(fill->pattern() == 0xBEEF);
  CHECK(fill->pattern_size() == 2);
}

TEST_CASE("output is deterministic and the same in memory and on disk", "[axe_builder]") {
  const std::vector<uint8_t> first = BuildEverything();
  const std::vector<uint8_t> second = BuildEverything();
  CHECK(first == second);

  AxeBuilder builder(kProducer, kProducerVersion);
  Everything everything;
  everything.Fill(builder);
  const std::vector<uint8_t> memory = builder.Bytes();
  CHECK(memory == first);
  // Writing twice without changes gives the same bytes again.
  CHECK(builder.Bytes() == memory);

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("axe_builder_test." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "everything.axe").string();
  REQUIRE_CALL_OK(axrt_axe_builder_write_file(builder.get(), path.c_str()));
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), {});
  CHECK(disk == memory);
  // Only the file itself is left: no temporary beside it.
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);

  // Overwriting an existing file replaces it whole.
  builder.AddMetadata("more", "bytes");
  REQUIRE_CALL_OK(axrt_axe_builder_write_file(builder.get(), path.c_str()));
  std::ifstream again(path, std::ios::binary);
  const std::vector<uint8_t> rewritten((std::istreambuf_iterator<char>(again)), {});
  CHECK(rewritten == builder.Bytes());
  CHECK(rewritten != memory);
  std::filesystem::remove_all(dir);
}

TEST_CASE("an empty builder writes a valid file", "[axe_builder]") {
  axrt_axe_builder_t b = nullptr;
  REQUIRE_CALL_OK(axrt_axe_builder_create(nullptr, &b));
  void* data = nullptr;
  size_t size = 0;
  REQUIRE_CALL_OK(axrt_axe_builder_write_memory(b, &data, &size));
  std::vector<uint8_t> bytes(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  axrt_axe_memory_free(data);
  axrt_axe_builder_release(b);
  auto file = Open(bytes);
  CHECK(file->segments().empty());
}

TEST_CASE("constants honour their alignment in a shared segment", "[axe_builder]") {
  AxeBuilder builder;
  const uint64_t alignments[] = {1, 64, 4096, 8, 256, 2048, 16};
  for (size_t i = 0; i < std::size(alignments); ++i) {
    const std::string name = "c" + std::to_string(i);
    builder.AddConstant(name, AXRT_AXE_DTYPE_UINT8, {3 + i}, Filler(3 + i, 9), nullptr,
                        alignments[i]);
  }
  auto file = Open(builder.Bytes());
  const auto* constants = file->metadata().constants();
  REQUIRE(constants->size() == std::size(alignments));
  uint64_t end = 0;
  for (uint32_t i = 0; i < constants->size(); ++i) {
    const axe::Constant* c = constants->Get(i);
    CHECK(c->alignment() == alignments[i]);
    CHECK(c->data()->offset() % alignments[i] == 0);
    CHECK((file->segments()[c->data()->segment()].offset + c->data()->offset()) % alignments[i] ==
          0);
    CHECK(c->data()->offset() >= end);
    end = c->data()->offset() + c->data()->size();
  }
}

TEST_CASE("arrays are read with their elements' struct_size", "[axe_builder]") {
  // An array from a newer header: each element carries 16 more (zero) bytes.
  struct NewerParam {
    axrt_axe_kernel_param_t known;
    unsigned char tail[16];
  };
  NewerParam params[2];
  std::memset(params, 0, sizeof(params));
  for (NewerParam& p : params) {
    p.known = AXRT_AXE_KERNEL_PARAM_INIT;
    p.known.struct_size = sizeof(NewerParam);
  }
  params[0].known.name = "a";
  params[1].known.name = "b";
  params[1].known.kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[1].known.scalar_type = AXRT_AXE_DTYPE_FLOAT32;
  params[1].known.access = AXRT_AXE_ACCESS_NONE;
  AxeBuilder builder;
  const uint32_t library = builder.AddLibrary("axrt.cpu", 3);
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "k";
  kernel.code_object = library;
  kernel.params = &params[0].known;
  kernel.param_count = 2;
  uint32_t index = 0;
  REQUIRE_CALL_OK(axrt_axe_builder_add_kernel(builder.get(), &kernel, &index));
  auto file = Open(builder.Bytes());
  const axe::Kernel* k = file->metadata().kernels()->Get(0);
  REQUIRE(k->params()->size() == 2);
  CHECK(k->params()->Get(0)->name()->str() == "a");
  CHECK(k->params()->Get(1)->name()->str() == "b");
  CHECK(k->params()->Get(1)->scalar_type() == axe::DType::FLOAT32);
  CHECK(k->entry_symbol()->str() == "k");

  // A non-zero tail is refused, naming the element.
  params[1].tail[3] = 1;
  kernel.name = "k2";
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel(builder.get(), &kernel, &index),
                     AXRT_STATUS_CODE_UNIMPLEMENTED, "desc->params[1]");
  // Elements must share one struct_size.
  params[1].tail[3] = 0;
  params[1].known.struct_size = sizeof(axrt_axe_kernel_param_t);
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel(builder.get(), &kernel, &index),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "shares one struct_size");
}

TEST_CASE("duplicates are refused", "[axe_builder]") {
  AxeBuilder builder;
  axrt_axe_builder_t b = builder.get();
  REQUIRE_CALL_OK(axrt_axe_builder_add_required_feature(b, "f"));
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_required_feature(b, "f"), AXRT_STATUS_CODE_ALREADY_EXISTS,
                     "'f'");
  REQUIRE_CALL_OK(axrt_axe_builder_add_metadata(b, "k", "1"));
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_metadata(b, "k", "2"), AXRT_STATUS_CODE_ALREADY_EXISTS,
                     "'k'");

  const uint32_t library = builder.AddLibrary("axrt.cpu", 3);
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "twice";
  kernel.code_object = library;
  uint32_t index = 0;
  REQUIRE_CALL_OK(axrt_axe_builder_add_kernel(b, &kernel, &index));
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel(b, &kernel, &index),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "kernel 'twice'");

  builder.AddConstant("w", AXRT_AXE_DTYPE_UINT8, {4}, Filler(4, 0));
  const std::vector<uint8_t> four = Filler(4, 1);
  axrt_axe_constant_desc_t constant = AXRT_AXE_CONSTANT_DESC_INIT;
  constant.name = "w";
  constant.dtype = AXRT_AXE_DTYPE_UINT8;
  const uint64_t shape[] = {4};
  constant.rank = 1;
  constant.shape = shape;
  constant.data = four.data();
  constant.size = four.size();
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_constant(b, &constant, &index),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "constant 'w'");

  REQUIRE_CALL_OK(axrt_axe_builder_add_prepacked_copy(b, 0, "sm_90", "tiled", four.data(), 4));
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_prepacked_copy(b, 0, "sm_90", "tiled", four.data(), 4),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "'tiled'");
  REQUIRE_CALL_OK(axrt_axe_builder_add_prepacked_copy(b, 0, "sm_80", "tiled", four.data(), 4));

  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "main";
  REQUIRE_CALL_OK(axrt_axe_builder_add_function(b, &function, &index));
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_function(b, &function, &index),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "function 'main'");

  axrt_axe_symbol_t symbols[2] = {AXRT_AXE_SYMBOL_INIT, AXRT_AXE_SYMBOL_INIT};
  symbols[0].name = "n";
  symbols[1].name = "n";
  function.name = "other";
  function.symbols = symbols;
  function.symbol_count = 2;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_function(b, &function, &index),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "symbol 'n'");
  // Nothing failed half-way: the file still verifies.
  Open(builder.Bytes(), {"f"});
}

TEST_CASE("indices must name objects added before", "[axe_builder]") {
  AxeBuilder builder;
  axrt_axe_builder_t b = builder.get();
  uint32_t index = 77;
  axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
  kernel.name = "k";
  kernel.code_object = 0;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel(b, &kernel, &index), AXRT_STATUS_CODE_NOT_FOUND,
                     "code object 0");
  CHECK(index == 77);

  const uint32_t library = builder.AddLibrary("axrt.cpu", 3);
  axrt_axe_kernel_param_t params[2] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "in";
  params[1].name = "n";
  params[1].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  params[1].scalar_type = AXRT_AXE_DTYPE_UINT32;
  params[1].access = AXRT_AXE_ACCESS_NONE;
  kernel.code_object = library;
  kernel.params = params;
  kernel.param_count = 2;
  REQUIRE_CALL_OK(axrt_axe_builder_add_kernel(b, &kernel, &index));

  REQUIRE_CALL_FAILS(axrt_axe_builder_add_prepacked_copy(b, 0, "sm_90", "x", "abc", 3),
                     AXRT_STATUS_CODE_NOT_FOUND, "constant 0");

  // A layout naming a scale constant not yet added.
  const uint64_t block[] = {0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "int8";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.rank = 1;
  layout.block_shape = block;
  layout.scale.constant = 5;
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const std::vector<uint8_t> w = Filler(16, 3);
  axrt_axe_constant_desc_t constant = AXRT_AXE_CONSTANT_DESC_INIT;
  constant.name = "w";
  constant.dtype = AXRT_AXE_DTYPE_INT8;
  const uint64_t shape[] = {16};
  constant.rank = 1;
  constant.shape = shape;
  constant.data = w.data();
  constant.size = w.size();
  constant.layout = &layout;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_constant(b, &constant, &index),
                     AXRT_STATUS_CODE_NOT_FOUND, "names constant 5");
  // The wrong byte count for the shape.
  constant.layout = nullptr;
  constant.size = 15;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_constant(b, &constant, &index),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "needs 16 bytes, but 15");
  constant.size = 16;
  constant.alignment = 48;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_constant(b, &constant, &index),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "alignment 48");
  constant.alignment = 0;
  REQUIRE_CALL_OK(axrt_axe_builder_add_constant(b, &constant, &index));

  const axrt_axe_dim_t dims[] = {{0, 3}};
  axrt_axe_tensor_sig_t sig = AXRT_AXE_TENSOR_SIG_INIT;
  sig.name = "x";
  sig.dtype = AXRT_AXE_DTYPE_INT8;
  sig.rank = 1;
  sig.dims = dims;
  axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
  symbol.name = "n";
  symbol.upper_bound = 16;
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "f";
  function.symbols = &symbol;
  function.symbol_count = 1;
  function.inputs = &sig;
  function.input_count = 1;
  function.arena_size = 64;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_function(b, &function, &index),
                     AXRT_STATUS_CODE_OUT_OF_RANGE, "symbol 3");
  const axrt_axe_dim_t good_dims[] = {{0, 0}};
  sig.dims = good_dims;
  uint32_t fn = 0;
  REQUIRE_CALL_OK(axrt_axe_builder_add_function(b, &function, &fn));

  const axrt_axe_expr_op_t one[] = {{AXRT_AXE_EXPR_OPCODE_CONST, 1}};
  axrt_axe_binding_t bindings[2] = {AXRT_AXE_BINDING_INIT, AXRT_AXE_BINDING_INIT};
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  bindings[0].index = 1;
  bindings[1].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[1].value = {one, 1};
  axrt_axe_dispatch_desc_t dispatch = AXRT_AXE_DISPATCH_DESC_INIT;
  dispatch.kernel = 1;
  dispatch.workgroup_count_x = {one, 1};
  dispatch.bindings = bindings;
  dispatch.binding_count = 2;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch), AXRT_STATUS_CODE_NOT_FOUND,
                     "kernel 1");
  dispatch.kernel = 0;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn + 1, &dispatch),
                     AXRT_STATUS_CODE_NOT_FOUND, "function 1");
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch), AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "input index 1");
  bindings[0].index = 0;
  bindings[0].kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  bindings[0].index = 4;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch), AXRT_STATUS_CODE_NOT_FOUND,
                     "constant 4");
  bindings[0].kind = AXRT_AXE_BINDING_KIND_ARENA;
  bindings[0].index = 0;
  bindings[0].offset = 32;
  bindings[0].size = 33;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch), AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "64-byte arena");
  bindings[0].offset = 0;
  bindings[0].size = 0;
  bindings[0].kind = AXRT_AXE_BINDING_KIND_SCALAR;
  bindings[0].value = {one, 1};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "BUFFER parameter");
  bindings[0] = AXRT_AXE_BINDING_INIT;
  bindings[0].kind = AXRT_AXE_BINDING_KIND_INPUT;
  dispatch.binding_count = 1;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "1 binding(s) for 2 kernel parameter(s)");
  dispatch.binding_count = 2;

  // Malformed expressions.
  const axrt_axe_expr_op_t underflow[] = {{AXRT_AXE_EXPR_OPCODE_CONST, 1},
                                          {AXRT_AXE_EXPR_OPCODE_ADD, 0}};
  dispatch.workgroup_count_x = {underflow, 2};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "needs two values");
  const axrt_axe_expr_op_t leftover[] = {{AXRT_AXE_EXPR_OPCODE_CONST, 1},
                                         {AXRT_AXE_EXPR_OPCODE_CONST, 2}};
  dispatch.workgroup_count_x = {leftover, 2};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "leaves 2 values");
  const axrt_axe_expr_op_t bad_symbol[] = {{AXRT_AXE_EXPR_OPCODE_SYMBOL, 1}};
  dispatch.workgroup_count_x = {bad_symbol, 1};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch), AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "reads symbol 1");
  const axrt_axe_expr_op_t bad_opcode[] = {{99, 0}};
  dispatch.workgroup_count_x = {bad_opcode, 1};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "desc->workgroup_count_x.ops[0].opcode");
  dispatch.workgroup_count_x = {nullptr, 0};
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_dispatch(b, fn, &dispatch),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "workgroup_count_x: the expression is required");

  // Fill patterns.
  axrt_axe_binding_t target = AXRT_AXE_BINDING_INIT;
  target.kind = AXRT_AXE_BINDING_KIND_ARENA;
  target.size = 64;
  axrt_axe_fill_desc_t fill = AXRT_AXE_FILL_DESC_INIT;
  fill.target = &target;
  fill.length = {one, 1};
  fill.pattern_size = 3;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b, fn, &fill), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "pattern size 3");
  fill.pattern_size = 1;
  fill.pattern = 0x100;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b, fn, &fill), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "does not fit");
  target = AXRT_AXE_BINDING_INIT;
  target.kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  fill.pattern = 0;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b, fn, &fill), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "not CONSTANT");
  target.kind = AXRT_AXE_BINDING_KIND_INPUT;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b, fn, &fill), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "not INPUT");
  Open(builder.Bytes());
}

TEST_CASE("a buffer parameter's element type round-trips and shows in inspect",
          "[axe_builder]") {
  AxeBuilder builder;
  axrt_test::Param typed = BufferParam("out", AXRT_AXE_ACCESS_WRITE);
  typed.scalar_type = AXRT_AXE_DTYPE_BFLOAT16;
  axrt_test::Param packed = BufferParam("codes", AXRT_AXE_ACCESS_READ_WRITE);
  packed.scalar_type = AXRT_AXE_DTYPE_INT4;
  builder.AddKernel("k", builder.AddLibrary("axrt.cpu"), "axrt_k",
                    {BufferParam("in"), typed, packed, ScalarParam("n", AXRT_AXE_DTYPE_UINT64)});
  axrt_test::Param unknown = BufferParam("x");
  unknown.scalar_type = static_cast<axrt_axe_dtype_t>(999);
  REQUIRE_THROWS_WITH(builder.AddKernel("bad", 0, "axrt_bad", {unknown}),
                      Catch::Contains("desc->params[0].scalar_type"));
  auto file = Open(builder.Bytes());
  const auto* params = file->metadata().kernels()->Get(0)->params();
  REQUIRE(params->size() == 4);
  CHECK(params->Get(0)->scalar_type() == axe::DType::INVALID);
  CHECK(params->Get(1)->scalar_type() == axe::DType::BFLOAT16);
  CHECK(params->Get(2)->scalar_type() == axe::DType::INT4);
  CHECK(params->Get(3)->scalar_type() == axe::DType::UINT64);
  const std::string text = axe::inspect_text(*file);
  CHECK(text.find("param 0 in: buffer read\n") != std::string::npos);
  CHECK(text.find("param 1 out: buffer write, elements bf16\n") != std::string::npos);
  CHECK(text.find("param 2 codes: buffer read_write, elements int4\n") != std::string::npos);
  const std::string json = axe::inspect_json(*file);
  CHECK(json.find("\"scalar_type\": \"bf16\"") != std::string::npos);
}

TEST_CASE("kernel variants round-trip in the order added", "[axe_builder]") {
  AxeBuilder builder;
  axrt_axe_builder_t b = builder.get();
  const uint32_t library = builder.AddLibrary("axrt.cpu", 3);
  const uint32_t cuda = builder.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN, "sm_90", Cubin());
  const uint32_t cuda80 = builder.AddCode(AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN, "sm_80", Cubin());
  const uint32_t relu =
      builder.AddKernel("relu", library, "axrt_cpu_relu",
                        {BufferParam("data", AXRT_AXE_ACCESS_READ_WRITE)}, {32, 1, 1});

  // The sm_90 variant with clusters, then an sm_80 one that keeps the
  // kernel's entry symbol and the default launch shape.
  axrt_axe_kernel_variant_desc_t variant = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  variant.code_object = cuda;
  variant.entry_symbol = "relu_sm90";
  variant.workgroup_size[0] = 256;
  variant.dynamic_shared_memory = 4096;
  variant.cluster_dims[0] = 2;
  variant.cluster_dims[1] = 1;
  variant.cluster_dims[2] = 1;
  REQUIRE_CALL_OK(axrt_axe_builder_add_kernel_variant(b, relu, &variant));
  axrt_axe_kernel_variant_desc_t plain = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  plain.code_object = cuda80;
  REQUIRE_CALL_OK(axrt_axe_builder_add_kernel_variant(b, relu, &plain));

  // Refusals leave the kernel as it was.
  variant.code_object = 3;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel_variant(b, relu, &variant),
                     AXRT_STATUS_CODE_NOT_FOUND, "code object 3");
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel_variant(b, relu + 1, &variant),
                     AXRT_STATUS_CODE_NOT_FOUND, "kernel 1");
  variant.code_object = library;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel_variant(b, relu, &variant),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "primary implementation");
  variant.code_object = cuda;
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_kernel_variant(b, relu, &variant),
                     AXRT_STATUS_CODE_ALREADY_EXISTS, "already holds variant 0");

  auto file = Open(builder.Bytes());
  const axe::Kernel* k = file->metadata().kernels()->Get(relu);
  CHECK(k->code_object() == library);
  CHECK(k->entry_symbol()->str() == "axrt_cpu_relu");
  CHECK(k->workgroup_size()->x() == 32);
  REQUIRE(k->variants());
  REQUIRE(k->variants()->size() == 2);
  const axe::KernelVariant* first = k->variants()->Get(0);
  CHECK(first->code_object() == cuda);
  CHECK(first->entry_symbol()->str() == "relu_sm90");
  CHECK(first->workgroup_size()->x() == 256);
  CHECK(first->workgroup_size()->y() == 1);
  CHECK(first->workgroup_size()->z() == 1);
  CHECK(first->dynamic_shared_memory() == 4096);
  CHECK(first->cluster_dims()->x() == 2);
  CHECK(first->cluster_dims()->y() == 1);
  CHECK(first->cluster_dims()->z() == 1);
  const axe::KernelVariant* second = k->variants()->Get(1);
  CHECK(second->code_object() == cuda80);
  CHECK(second->entry_symbol()->str() == "axrt_cpu_relu");
  CHECK(second->workgroup_size()->x() == 1);
  CHECK(second->workgroup_size()->y() == 1);
  CHECK(second->workgroup_size()->z() == 1);
  CHECK(second->dynamic_shared_memory() == 0);
  CHECK(second->cluster_dims()->x() == 0);
}

TEST_CASE("a file the reader refuses is never written", "[axe_builder]") {
  AxeBuilder builder;
  axrt_axe_builder_t b = builder.get();
  // Per-channel int8 on [4, 16] wants 4 scales; give 3.
  builder.AddConstant("scale", AXRT_AXE_DTYPE_FLOAT32, {3, 1}, Filler(12, 0));
  const uint64_t block[] = {1, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "int8.per_channel";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = 0;
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  builder.AddConstant("w", AXRT_AXE_DTYPE_INT8, {4, 16}, Filler(64, 1), &layout);

  void* data = reinterpret_cast<void*>(0x1);
  size_t size = 7;
  const axrt_test::Outcome refused =
      axrt_test::Take(axrt_axe_builder_write_memory(b, &data, &size));
  INFO(refused.message);
  REQUIRE(refused.code != AXRT_STATUS_CODE_OK);
  CHECK(refused.message.find("axrt_axe_builder_write_memory") != std::string::npos);
  CHECK(refused.message.find("reader refuses") != std::string::npos);
  CHECK(refused.message.find("'scale'") != std::string::npos);
  CHECK(data == reinterpret_cast<void*>(0x1));
  CHECK(size == 7);

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("axe_builder_refused." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "refused.axe").string();
  const axrt_test::Outcome not_written =
      axrt_test::Take(axrt_axe_builder_write_file(b, path.c_str()));
  REQUIRE(not_written.code != AXRT_STATUS_CODE_OK);
  CHECK(not_written.message.find("'scale'") != std::string::npos);
  CHECK(std::filesystem::is_empty(dir));

  // A directory that does not exist: nothing is created.
  const std::string missing = (dir / "no" / "such" / "dir.axe").string();
  AxeBuilder good;
  REQUIRE_CALL_FAILS(axrt_axe_builder_write_file(good.get(), missing.c_str()),
                     AXRT_STATUS_CODE_UNAVAILABLE, "temporary file");
  CHECK(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the file lists every feature it uses, once", "[axe_builder]") {
  // Nothing used, nothing listed.
  auto empty = Open(AxeBuilder().Bytes());
  const auto* none = empty->metadata().required_features();
  CHECK((none == nullptr || none->size() == 0));

  // Declared features keep their place and are not repeated.
  AxeBuilder builder;
  builder.AddRequiredFeature("kernel-library.v1");
  const uint32_t library = builder.AddLibrary("axrt.cpu", 1);
  const uint32_t host =
      builder.AddCode(AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT, "x86_64", [] {
        std::vector<uint8_t> elf(64, 0);
        const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
        std::memcpy(elf.data(), ident, sizeof(ident));
        elf[16] = 3;  // ET_DYN
        elf[18] = 62;
        return elf;
      }());
  builder.AddKernel("add", library, "axrt_add_f32",
                    {BufferParam("a"), BufferParam("out", AXRT_AXE_ACCESS_WRITE)});
  builder.AddKernel("relu", host, "relu", {BufferParam("x", AXRT_AXE_ACCESS_READ_WRITE)});
  axrt_test::Sig state{"state", AXRT_AXE_DTYPE_FLOAT32, {Fixed(4)}};
  state.is_mutable = true;
  const uint32_t f = builder.AddFunction("step", {}, {state}, {});
  builder.Fill(f, axrt_test::BindInput(0), {}, Lit(16), 0, 4);
  auto file = Open(builder.Bytes());
  std::vector<std::string> features;
  for (const flatbuffers::String* s : *file->metadata().required_features()) {
    features.push_back(s->str());
  }
  CHECK(features ==
        std::vector<std::string>{"kernel-library.v1", "host-code.v1", "mutable-inputs.v1"});
}

TEST_CASE("negative literals for signed scalar parameters (format 1.3)", "[axe_builder]") {
  using axrt_test::F64;
  using axrt_test::Int;
  AxeBuilder builder;
  const uint32_t library = builder.AddLibrary("axrt.cpu", 1);
  const uint32_t kernel = builder.AddKernel(
      "k", library, "k",
      {ScalarParam("i8", AXRT_AXE_DTYPE_INT8), ScalarParam("i16", AXRT_AXE_DTYPE_INT16),
       ScalarParam("i32", AXRT_AXE_DTYPE_INT32), ScalarParam("i64", AXRT_AXE_DTYPE_INT64),
       ScalarParam("f32", AXRT_AXE_DTYPE_FLOAT32), ScalarParam("f64", AXRT_AXE_DTYPE_FLOAT64),
       ScalarParam("u32", AXRT_AXE_DTYPE_UINT32)});
  const uint32_t f =
      builder.AddFunction("main", {{"n", 8}}, {{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                          {{"y", AXRT_AXE_DTYPE_FLOAT32, {Fixed(4)}}});
  builder.Dispatch(f, kernel, {Lit(1)},
                   {BindScalar(Int(-128)), BindScalar(Int(-2)), BindScalar(Int(-7)),
                    BindScalar(Int(INT64_MIN)), BindScalar(axrt_test::F32(-2.5f)),
                    BindScalar(F64(-0.25)), BindScalar(Sym(0))});
  auto file = Open(builder.Bytes());
  const axe::Executable& exe = file->metadata();
  REQUIRE(exe.required_features());
  CHECK(exe.required_features()->size() == 3);
  CHECK(exe.required_features()->Get(2)->str() == "signed-scalars.v1");
  const auto* dispatch = exe.functions()->Get(0)->commands()->GetAs<axe::DispatchCommand>(0);
  REQUIRE(dispatch != nullptr);
  CheckExpr(dispatch->bindings()->Get(0)->value(), {{axe::ExprOpcode::CONST, -128}});
  CheckExpr(dispatch->bindings()->Get(3)->value(), {{axe::ExprOpcode::CONST, INT64_MIN}});
  CheckExpr(dispatch->bindings()->Get(4)->value(), {{axe::ExprOpcode::CONST, 0xC0200000}});
  CheckExpr(dispatch->bindings()->Get(5)->value(),
            {{axe::ExprOpcode::CONST, static_cast<int64_t>(0xBFD0000000000000ull)}});

  // Refused as the command is added: an unsigned parameter, a negative
  // value inside an expression, a size.
  axrt_axe_builder_t b = builder.get();
  auto dispatch_with = [&](const axrt_test::Expr& u32, const axrt_test::Expr& i32) {
    std::vector<axrt_axe_binding_t> bindings(7, AXRT_AXE_BINDING_INIT);
    const axrt_test::Expr values[] = {Int(-1), Int(-1), i32, Int(-1), Int(-1), Int(-1), u32};
    for (size_t i = 0; i < bindings.size(); ++i) {
      bindings[i].kind = AXRT_AXE_BINDING_KIND_SCALAR;
      bindings[i].value = values[i].view();
    }
    const axrt_test::Expr one = Lit(1);
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = kernel;
    desc.workgroup_count_x = one.view();
    desc.bindings = bindings.data();
    desc.binding_count = bindings.size();
    return axrt_axe_builder_add_dispatch(b, f, &desc);
  };
  REQUIRE_CALL_FAILS(dispatch_with(Int(-1), Int(-1)), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "binding 6 (parameter 'u32') value: op 0 is the negative literal -1");
  REQUIRE_CALL_FAILS(dispatch_with(Lit(1), Sym(0) + Int(-1)), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "binding 2 (parameter 'i32') value: op 1 is the negative literal -1");
  REQUIRE_CALL_OK(dispatch_with(Lit(1), Int(-1)));
  const axrt_test::Expr length = Int(-4);
  axrt_axe_binding_t target = AXRT_AXE_BINDING_INIT;
  target.kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  axrt_axe_fill_desc_t fill = AXRT_AXE_FILL_DESC_INIT;
  fill.target = &target;
  fill.length = length.view();
  REQUIRE_CALL_FAILS(axrt_axe_builder_add_fill(b, f, &fill), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "length: op 0 is the negative literal -4");
}

TEST_CASE("a declared kernel layout must match the bound constant's", "[axe_builder]") {
  AxeBuilder builder;
  builder.AddConstant("scale", AXRT_AXE_DTYPE_FLOAT32, {4, 1}, Filler(16, 0));
  const uint64_t block[] = {1, 0};
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.layout_id = "int8.per_channel";
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.dequantized_type = AXRT_AXE_DTYPE_FLOAT32;
  layout.rank = 2;
  layout.block_shape = block;
  layout.scale.constant = 0;
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  const uint32_t weight =
      builder.AddConstant("w", AXRT_AXE_DTYPE_INT8, {4, 16}, Filler(64, 1), &layout);

  axrt_axe_quant_layout_t expected = layout;
  expected.dequantized_type = AXRT_AXE_DTYPE_BFLOAT16;
  const uint32_t kernel = builder.AddKernel("k", builder.AddLibrary("axrt.cpu", 3), "k",
                                            {BufferParam("w", AXRT_AXE_ACCESS_READ, &expected)});
  const uint32_t fn = builder.AddFunction("f", {}, {}, {});
  builder.Dispatch(fn, kernel, {Lit(1)}, {BindConstant(weight)});
  void* data = nullptr;
  size_t size = 0;
  const axrt_test::Outcome refused =
      axrt_test::Take(axrt_axe_builder_write_memory(builder.get(), &data, &size));
  INFO(refused.message);
  REQUIRE(refused.code != AXRT_STATUS_CODE_OK);
  CHECK(refused.message.find("dequantized_type") != std::string::npos);
}

// ---------------------------------------------------------------------------
// Constants read from a source while the file is written
// ---------------------------------------------------------------------------

// The byte at `offset` of the test sources' data.
uint8_t SourceByte(uint64_t offset) {
  return static_cast<uint8_t>((offset * 2654435761u) >> 13);
}

// Produces SourceByte() data and records every read: the largest piece,
// that pieces come in order and whole, and how many bytes were read.
class CountingSource final : public axe::ByteSource {
 public:
  explicit CountingSource(uint64_t size) : size_(size) {}
  uint64_t size() const noexcept override { return size_; }
  axrt_status_t read(uint64_t offset, std::span<uint8_t> out) override {
    ++reads;
    in_order &= offset == next_offset;
    next_offset = offset + out.size();
    if (next_offset == size_) next_offset = 0;  // the next write starts again
    largest = std::max<uint64_t>(largest, out.size());
    bytes_read += out.size();
    for (size_t i = 0; i < out.size(); ++i) out[i] = SourceByte(offset + i);
    return nullptr;
  }

  uint64_t reads = 0;
  uint64_t largest = 0;
  uint64_t bytes_read = 0;
  uint64_t next_offset = 0;
  bool in_order = true;

 private:
  uint64_t size_;
};

std::filesystem::path ScratchDir(const char* name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (std::string(name) + "." + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

axe::ConstantT DenseBytes(const char* name, uint64_t size) {
  axe::ConstantT constant;
  constant.name = name;
  constant.dtype = axe::DType::UINT8;
  constant.shape = {size};
  return constant;
}

TEST_CASE("a constant from a source is streamed a piece at a time", "[axe_builder][stream]") {
  // Three and a half chunks, between two small constants held in memory.
  const uint64_t size = 3 * axe::kStreamChunkSize + axe::kStreamChunkSize / 2 + 12345;
  auto source = std::make_shared<CountingSource>(size);
  axe::Builder builder("axe_builder_test", "1");
  uint32_t index = 0;
  const std::vector<uint8_t> small = Filler(100, 3);
  REQUIRE_CALL_OK(builder.add_constant(DenseBytes("before", small.size()), small, &index));
  REQUIRE_CALL_OK(builder.add_constant(DenseBytes("streamed", size), source, &index));
  CHECK(index == 1);
  REQUIRE_CALL_OK(builder.add_constant(DenseBytes("after", small.size()), small, &index));
  CHECK(source->reads == 0);  // nothing is read before a write

  const std::filesystem::path dir = ScratchDir("axe_builder_stream");
  const std::string path = (dir / "streamed.axe").string();
  REQUIRE_CALL_OK(builder.write_file(path));
  CHECK(source->in_order);
  CHECK(source->bytes_read == size);
  CHECK(source->largest <= axe::kStreamChunkSize);
  CHECK(source->largest < size);
  CHECK(source->reads == (size + axe::kStreamChunkSize - 1) / axe::kStreamChunkSize);
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);

  // The file holds the source's bytes where the metadata says, and the
  // same bytes as the file built in memory, and as one whose constant was
  // copied in.
  const std::vector<uint8_t> disk = ReadAll(path);
  auto file = Open(disk);
  const axe::Constant* streamed = file->metadata().constants()->Get(1);
  const std::span<const uint8_t> data = file->range_bytes(*streamed->data());
  REQUIRE(data.size() == size);
  bool same = true;
  for (uint64_t i = 0; i < size; ++i) same &= data[i] == SourceByte(i);
  CHECK(same);
  std::vector<uint8_t> memory;
  REQUIRE_CALL_OK(builder.finish(&memory));
  CHECK(memory == disk);
  CHECK(source->bytes_read == 2 * size);

  std::vector<uint8_t> copied_bytes(data.begin(), data.end());
  axe::Builder copied("axe_builder_test", "1");
  REQUIRE_CALL_OK(copied.add_constant(DenseBytes("before", small.size()), small, &index));
  REQUIRE_CALL_OK(copied.add_constant(DenseBytes("streamed", size), copied_bytes, &index));
  REQUIRE_CALL_OK(copied.add_constant(DenseBytes("after", small.size()), small, &index));
  std::vector<uint8_t> copied_file;
  REQUIRE_CALL_OK(copied.finish(&copied_file));
  CHECK(copied_file == disk);
  std::filesystem::remove_all(dir);
}

// The C callback of the tests below: SourceByte() data, or a failure at
// `fail_at`; counts its calls and releases.
struct CallbackState {
  uint64_t fail_at = UINT64_MAX;
  int reads = 0;
  int released = 0;

  static axrt_status_t Read(void* user_data, uint64_t offset, void* dst, uint64_t size) {
    auto* self = static_cast<CallbackState*>(user_data);
    ++self->reads;
    if (offset + size > self->fail_at) {
      return axrt_status_create(AXRT_STATUS_CODE_DATA_LOSS, "the checkpoint is truncated");
    }
    auto* out = static_cast<uint8_t*>(dst);
    for (uint64_t i = 0; i < size; ++i) out[i] = SourceByte(offset + i);
    return nullptr;
  }
  static void Release(void* user_data) { ++static_cast<CallbackState*>(user_data)->released; }
};

uint32_t AddSourceConstant(axrt_axe_builder_t builder, const char* name, uint64_t size,
                           CallbackState* state) {
  const uint64_t shape[] = {size / 4};
  axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
  desc.name = name;
  desc.dtype = AXRT_AXE_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = shape;
  axrt_axe_data_source_t source = AXRT_AXE_DATA_SOURCE_INIT;
  source.size = size;
  source.read = &CallbackState::Read;
  source.release = &CallbackState::Release;
  source.user_data = state;
  uint32_t index = 99;
  REQUIRE_CALL_OK(axrt_axe_builder_add_constant_from_source(builder, &desc, &source, &index));
  return index;
}

TEST_CASE("the C API reads a constant through a callback while writing",
          "[axe_builder][stream]") {
  CallbackState state;
  const std::filesystem::path dir = ScratchDir("axe_builder_callback");
  const std::string path = (dir / "callback.axe").string();
  {
    AxeBuilder builder;
    builder.AddConstant("bias", AXRT_AXE_DTYPE_FLOAT32, {4}, Filler(16, 1));
    CHECK(AddSourceConstant(builder.get(), "w", 1 << 20, &state) == 1);
    CHECK(state.reads == 0);
    REQUIRE_CALL_OK(axrt_axe_builder_write_file(builder.get(), path.c_str()));
    CHECK(state.reads == 1);  // 1 MiB: one piece
    const std::vector<uint8_t> disk = ReadAll(path);
    CHECK(builder.Bytes() == disk);
    CHECK(state.reads == 2);
    auto file = Open(disk);
    const std::span<const uint8_t> data =
        file->range_bytes(*file->metadata().constants()->Get(1)->data());
    REQUIRE(data.size() == 1 << 20);
    CHECK(data[12345] == SourceByte(12345));
    CHECK(state.released == 0);
  }
  // Released once, with the builder.
  CHECK(state.released == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a failing source fails the write and leaves no file behind",
          "[axe_builder][stream]") {
  CallbackState state;
  state.fail_at = 6 << 20;  // the second piece fails
  const std::filesystem::path dir = ScratchDir("axe_builder_failing");
  const std::string path = (dir / "model.axe").string();
  // An older file at the destination stays as it was.
  std::ofstream(path, std::ios::binary) << "previous";
  AxeBuilder builder;
  AddSourceConstant(builder.get(), "layers.0.w", 8 << 20, &state);
  REQUIRE_CALL_FAILS(axrt_axe_builder_write_file(builder.get(), path.c_str()),
                     AXRT_STATUS_CODE_DATA_LOSS, "axrt_axe_builder_write_file",
                     "constant 'layers.0.w'", "the checkpoint is truncated", "[4194304, 8388608)");
  CHECK(state.reads == 2);
  const std::vector<uint8_t> left = ReadAll(path);
  CHECK(std::string(left.begin(), left.end()) == "previous");
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);
  void* data = reinterpret_cast<void*>(0x1);
  size_t size = 7;
  REQUIRE_CALL_FAILS(axrt_axe_builder_write_memory(builder.get(), &data, &size),
                     AXRT_STATUS_CODE_DATA_LOSS, "constant 'layers.0.w'");
  CHECK(data == reinterpret_cast<void*>(0x1));
  CHECK(size == 7);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a file the reader refuses reads no source", "[axe_builder][stream]") {
  CallbackState state;
  AxeBuilder builder;
  AddSourceConstant(builder.get(), "w", 4096, &state);
  // A kernel library whose target names no host: refused when written.
  builder.AddLibrary("axrt.cpu", 1, "not-a-target");
  const std::filesystem::path dir = ScratchDir("axe_builder_refused_source");
  const std::string path = (dir / "refused.axe").string();
  REQUIRE_CALL_FAILS(axrt_axe_builder_write_file(builder.get(), path.c_str()),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "reader refuses", "not-a-target");
  CHECK(state.reads == 0);
  CHECK(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

// Run alone, in a process of its own (below): 256 MiB of weights from a
// source are written while the process may not allocate 128 MiB more.
TEST_CASE("stream 256 MiB under a memory limit", "[.stream-256mib]") {
  constexpr uint64_t kSize = uint64_t{256} << 20;
  const std::filesystem::path dir = ScratchDir("axe_builder_256mib");
  const std::string path = (dir / "big.axe").string();
  axe::Builder builder("axe_builder_test", "1");
  auto source = std::make_shared<CountingSource>(kSize);
  uint32_t index = 0;
  REQUIRE_CALL_OK(builder.add_constant(DenseBytes("big", kSize), source, &index));

  // From here on, private writable memory (the heap, anonymous mappings)
  // may grow by 128 MiB at most; mapping the written file read-only, as the
  // verification does, is not counted.
  uint64_t data_kib = 0;
  {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmData:", 0) == 0) data_kib = std::strtoull(line.c_str() + 7, nullptr, 10);
    }
  }
  REQUIRE(data_kib > 0);
  rlimit limit{};
  REQUIRE(getrlimit(RLIMIT_DATA, &limit) == 0);
  limit.rlim_cur = data_kib * 1024 + (uint64_t{128} << 20);
  REQUIRE(setrlimit(RLIMIT_DATA, &limit) == 0);
  // The limit bites: a copy of the constant cannot be made.
  void* whole = std::malloc(kSize);
  const bool limited = whole == nullptr;
  std::free(whole);
  if (!limited) std::exit(77);

  REQUIRE_CALL_OK(builder.write_file(path));
  CHECK(source->bytes_read == kSize);
  CHECK(source->largest <= axe::kStreamChunkSize);
  CHECK(std::filesystem::file_size(path) > kSize);
  std::filesystem::remove_all(dir);
}

TEST_CASE("writing a 256 MiB constant from a source needs no memory for it",
          "[axe_builder][stream]") {
  if (!axrt_test::kCanLimitData) {
    WARN("skipped: ThreadSanitizer's allocator cannot run under a data limit");
    return;
  }
  INFO("run with \"[.stream-256mib]\" for the child's report");
  const int status =
      axrt_test::RunSelf("[.stream-256mib]", 120, axrt_test::DataLimitEnvironment());
  if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    WARN("skipped: this kernel does not count anonymous mappings against RLIMIT_DATA");
    return;
  }
  CHECK(axrt_test::ExitedCleanly(status));
}

}  // namespace
