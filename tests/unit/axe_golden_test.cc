// The committed golden files (tests/golden/README.md) must load, with full
// verification and segment checksums, and say what they said when written.
// A change that breaks one of these is a new major format version.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "format/reader.h"

#ifndef AXRT_GOLDEN_DIR
#error "AXRT_GOLDEN_DIR must name tests/golden (set by tests/unit/CMakeLists.txt)"
#endif

namespace {

namespace axe = axrt::axe;

struct StatusFree {
  void operator()(axrt_status_t status) const { axrt_status_free(status); }
};
using Status = std::unique_ptr<axrt_status_s, StatusFree>;

std::unique_ptr<axe::AxeFile> Open(const std::string& version, const std::string& name,
                                   uint16_t reader_minor = axe::kFormatMinor) {
  const std::string path = std::string(AXRT_GOLDEN_DIR) + "/" + version + "/" + name;
  axe::ReadOptions options;
  options.verify_checksums = true;
  options.reader_minor = reader_minor;
  std::unique_ptr<axe::AxeFile> file;
  Status status(axe::AxeFile::open_file(path, options, &file));
  INFO(path << ": " << (status ? axrt_status_message(status.get()) : "OK"));
  REQUIRE(status == nullptr);
  return file;
}

std::vector<uint64_t> Shape(const flatbuffers::Vector<uint64_t>* v) {
  return v ? std::vector<uint64_t>(v->begin(), v->end()) : std::vector<uint64_t>();
}

const axe::Constant* Find(const axe::Executable& exe, const std::string& name) {
  for (const axe::Constant* c : *exe.constants()) {
    if (c->name()->str() == name) return c;
  }
  FAIL("no constant " << name);
  return nullptr;
}

// The weight's layout, and that the matvec kernel declares the same one.
const axe::QuantLayout& WeightLayout(const axe::Executable& exe, const std::string& weight,
                                     const std::string& layout_id) {
  const axe::Constant* w = Find(exe, weight);
  REQUIRE(w->quantization() != nullptr);
  CHECK(w->quantization()->layout_id()->str() == layout_id);
  REQUIRE(exe.kernels()->size() == 1);
  const axe::KernelParam* param = exe.kernels()->Get(0)->params()->Get(1);
  CHECK(param->name()->str() == "w");
  REQUIRE(param->layout() != nullptr);
  CHECK(param->layout()->layout_id()->str() == layout_id);
  REQUIRE(exe.functions()->size() == 1);
  CHECK(exe.functions()->Get(0)->commands()->size() == 1);
  return *w->quantization();
}

std::string ScaleName(const axe::Executable& exe, const axe::ScaleRef* scale) {
  REQUIRE(scale != nullptr);
  REQUIRE(scale->constant() >= 0);
  return exe.constants()->Get(static_cast<uint32_t>(scale->constant()))->name()->str();
}

TEST_CASE("every golden file of format 1.0 is listed here", "[golden]") {
  const std::vector<std::string> expected = {
      "code_objects.axe",          "functions.axe",         "prepacked.axe",
      "quant_awq_int4_g128.axe",   "quant_fp8_e4m3_block128.axe",
      "quant_fp8_e4m3_per_tensor.axe", "quant_gptq_v1.axe",  "quant_gptq_v2.axe",
      "quant_int8_per_channel.axe", "quant_mxfp4.axe",        "quant_nvfp4.axe"};
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(AXRT_GOLDEN_DIR) + "/v1.0")) {
    if (entry.path().extension() == ".axe") found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  CHECK(found == expected);
  for (const std::string& name : found) {
    auto file = Open("v1.0", name);
    CHECK(file->header().format_major == 1);
    CHECK(file->header().format_minor == 0);
    CHECK(file->metadata().producer()->name()->str() == "axrt_make_golden");
  }
}

TEST_CASE("every golden file of format 1.1 is listed here", "[golden]") {
  const std::vector<std::string> expected = {"kernel_variants.axe"};
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(AXRT_GOLDEN_DIR) + "/v1.1")) {
    if (entry.path().extension() == ".axe") found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  CHECK(found == expected);
  for (const std::string& name : found) {
    auto file = Open("v1.1", name);
    CHECK(file->header().format_major == 1);
    CHECK(file->header().format_minor == 1);
    CHECK(file->metadata().producer()->name()->str() == "axrt_make_golden");
    CHECK(file->metadata().producer()->version()->str() == "1.1");
  }
}

TEST_CASE("every golden file of format 1.2 is listed here", "[golden]") {
  const std::vector<std::string> expected = {"mutable_inputs.axe"};
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(AXRT_GOLDEN_DIR) + "/v1.2")) {
    if (entry.path().extension() == ".axe") found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  CHECK(found == expected);
  for (const std::string& name : found) {
    auto file = Open("v1.2", name);
    CHECK(file->header().format_major == 1);
    CHECK(file->header().format_minor == 2);
    CHECK(file->metadata().producer()->name()->str() == "axrt_make_golden");
    CHECK(file->metadata().producer()->version()->str() == "1.2");
  }
}

TEST_CASE("every golden file of format 1.3 is listed here", "[golden]") {
  const std::vector<std::string> expected = {"declared_features.axe", "signed_scalars.axe"};
  std::vector<std::string> found;
  const std::string dir = std::string(AXRT_GOLDEN_DIR) + "/v1.3";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".axe") found.push_back(entry.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  CHECK(found == expected);
  for (const std::string& name : found) {
    auto file = Open("v1.3", name);
    CHECK(file->header().format_major == 1);
    CHECK(file->header().format_minor == 3);
    CHECK(file->metadata().producer()->name()->str() == "axrt_make_golden");
    CHECK(file->metadata().producer()->version()->str() == "1.3");
  }
}

TEST_CASE("readers acting as older versions still read the older golden files", "[golden]") {
  for (const auto& [version, minor] :
       {std::pair<std::string, uint16_t>{"v1.0", 0}, {"v1.0", 1}, {"v1.0", 2}, {"v1.1", 1},
        {"v1.1", 2}, {"v1.2", 2}}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(AXRT_GOLDEN_DIR) + "/" + version)) {
      if (entry.path().extension() != ".axe") continue;
      INFO(version << " read as 1." << minor);
      Open(version, entry.path().filename().string(), minor);
    }
  }
}

TEST_CASE("golden v1.0 code_objects.axe", "[golden]") {
  auto file = Open("v1.0", "code_objects.axe");
  const axe::Executable& exe = file->metadata();
  REQUIRE(exe.code_objects()->size() == 5);
  const axe::CodeObjectKind kinds[] = {
      axe::CodeObjectKind::CUDA_CUBIN, axe::CodeObjectKind::CUDA_FATBIN,
      axe::CodeObjectKind::CUDA_PTX, axe::CodeObjectKind::HOST_SHARED_OBJECT,
      axe::CodeObjectKind::KERNEL_LIBRARY};
  const char* targets[] = {"sm_90", "sm_80,sm_90", "compute_90", "x86_64", "x86_64"};
  for (uint32_t i = 0; i < 5; ++i) {
    const axe::CodeObject* object = exe.code_objects()->Get(i);
    CHECK(object->kind() == kinds[i]);
    CHECK(object->target()->str() == targets[i]);
  }
  CHECK(file->segments().size() == 4);
  const auto cubin = file->segment_bytes(0);
  CHECK(cubin[0] == 0x7f);
  CHECK(cubin[18] == 190);
  const auto fatbin = file->segment_bytes(1);
  CHECK(axe::load_u32(fatbin.data()) == 0xBA55ED50u);
  const auto ptx = file->segment_bytes(2);
  CHECK(std::string(ptx.begin(), ptx.end()).find(".target sm_90") != std::string::npos);
  const auto host = file->segment_bytes(3);
  CHECK(host[16] == 3);  // ET_DYN
  CHECK(exe.code_objects()->Get(4)->library_name()->str() == "axrt.cpu");
  CHECK(exe.code_objects()->Get(4)->library_min_version() == 1);
  REQUIRE(exe.kernels()->size() == 5);
  CHECK(exe.kernels()->Get(0)->name()->str() == "k_cubin");
  CHECK(exe.kernels()->Get(0)->cluster_dims()->x() == 2);
  CHECK(exe.kernels()->Get(0)->dynamic_shared_memory() == 4096);
  CHECK(exe.kernels()->Get(3)->entry_symbol()->str() == "axrt_golden_axpy");
  CHECK(exe.kernels()->Get(4)->code_object() == 4);

  // The native code is refused for untrusted files.
  axe::ReadOptions untrusted;
  untrusted.allow_host_code = false;
  std::unique_ptr<axe::AxeFile> refused;
  Status status(axe::AxeFile::open_file(std::string(AXRT_GOLDEN_DIR) + "/v1.0/code_objects.axe",
                                        untrusted, &refused));
  CHECK(status != nullptr);
}

TEST_CASE("golden v1.0 quant_int8_per_channel.axe", "[golden]") {
  auto file = Open("v1.0", "quant_int8_per_channel.axe");
  const axe::Executable& exe = file->metadata();
  const axe::QuantLayout& layout = WeightLayout(exe, "fc.weight", "int8.per_channel");
  CHECK(layout.element_type() == axe::DType::INT8);
  CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{1, 0});
  CHECK(ScaleName(exe, layout.scale()) == "fc.weight.scale");
  CHECK(layout.zero_point() == nullptr);
  CHECK(layout.packing() == nullptr);
  CHECK(Shape(Find(exe, "fc.weight.scale")->shape()) == std::vector<uint64_t>{4, 1});
}

TEST_CASE("golden v1.0 quant_awq_int4_g128.axe", "[golden]") {
  auto file = Open("v1.0", "quant_awq_int4_g128.axe");
  const axe::Executable& exe = file->metadata();
  const axe::QuantLayout& layout = WeightLayout(exe, "awq.qweight", "awq.int4.g128");
  CHECK(layout.element_type() == axe::DType::UINT4);
  CHECK(layout.dequantized_type() == axe::DType::FLOAT16);
  CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{128, 1});
  CHECK(ScaleName(exe, layout.scale()) == "awq.scales");
  REQUIRE(layout.zero_point());
  CHECK(layout.zero_point()->kind() == axe::ZeroPointKind::FLOAT);
  CHECK(layout.zero_point()->dtype() == axe::DType::FLOAT16);
  REQUIRE(layout.packing());
  CHECK(layout.packing()->bits() == 4);
  CHECK(layout.packing()->container_bits() == 32);
  CHECK(layout.packing()->axis() == 1);
  CHECK(layout.packing()->order() == axe::ElementOrder::AWQ);
  CHECK(Find(exe, "awq.qweight")->alignment() == 128);
  CHECK(Find(exe, "awq.qweight")->data()->size() == 1024);
}

void CheckGptq(const std::string& name, int32_t stored_bias, const std::string& layout_id) {
  auto file = Open("v1.0", name);
  const axe::Executable& exe = file->metadata();
  const axe::QuantLayout& layout = WeightLayout(exe, "gptq.qweight", layout_id);
  CHECK(layout.element_type() == axe::DType::UINT4);
  CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{128, 1});
  REQUIRE(layout.packing());
  CHECK(layout.packing()->axis() == 0);
  CHECK(layout.packing()->container_bits() == 32);
  CHECK(layout.packing()->order() == axe::ElementOrder::SEQUENTIAL);
  REQUIRE(layout.zero_point());
  CHECK(layout.zero_point()->kind() == axe::ZeroPointKind::INTEGER);
  CHECK(layout.zero_point()->stored_bias() == stored_bias);
  REQUIRE(layout.zero_point()->packing());
  CHECK(layout.zero_point()->packing()->bits() == 4);
  CHECK(layout.zero_point()->packing()->container_bits() == 32);
  CHECK(layout.zero_point()->packing()->axis() == 1);
  const axe::Constant* qzeros = Find(exe, "gptq.qzeros");
  CHECK(qzeros->dtype() == axe::DType::INT32);
  CHECK(Shape(qzeros->shape()) == std::vector<uint64_t>{2, 1});
}

TEST_CASE("golden v1.0 quant_gptq_v1.axe and quant_gptq_v2.axe", "[golden]") {
  CheckGptq("quant_gptq_v1.axe", 1, "gptq.v1.int4.g128");
  CheckGptq("quant_gptq_v2.axe", 0, "gptq.v2.int4.g128");
}

TEST_CASE("golden v1.0 fp8 e4m3 files", "[golden]") {
  {
    auto file = Open("v1.0", "quant_fp8_e4m3_per_tensor.axe");
    const axe::Executable& exe = file->metadata();
    const axe::QuantLayout& layout = WeightLayout(exe, "fp8.weight", "fp8.e4m3.per_tensor");
    CHECK(layout.element_type() == axe::DType::FLOAT8_E4M3FN);
    CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{0, 0});
    CHECK(Shape(Find(exe, "fp8.scale")->shape()) == std::vector<uint64_t>{1, 1});
  }
  {
    auto file = Open("v1.0", "quant_fp8_e4m3_block128.axe");
    const axe::Executable& exe = file->metadata();
    const axe::QuantLayout& layout = WeightLayout(exe, "fp8.weight", "fp8.e4m3.block128x128");
    CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{128, 128});
    CHECK(Shape(Find(exe, "fp8.weight")->shape()) == std::vector<uint64_t>{128, 256});
    CHECK(Shape(Find(exe, "fp8.block_scale")->shape()) == std::vector<uint64_t>{1, 2});
    CHECK(layout.scale()->dtype() == axe::DType::FLOAT32);
  }
}

TEST_CASE("golden v1.0 quant_mxfp4.axe and quant_nvfp4.axe", "[golden]") {
  {
    auto file = Open("v1.0", "quant_mxfp4.axe");
    const axe::Executable& exe = file->metadata();
    const axe::QuantLayout& layout = WeightLayout(exe, "mxfp4.weight", "mxfp4");
    CHECK(layout.element_type() == axe::DType::FLOAT4_E2M1);
    CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{1, 32});
    CHECK(layout.scale()->dtype() == axe::DType::FLOAT8_E8M0FNU);
    CHECK(layout.second_level_scale() == nullptr);
  }
  {
    auto file = Open("v1.0", "quant_nvfp4.axe");
    const axe::Executable& exe = file->metadata();
    const axe::QuantLayout& layout = WeightLayout(exe, "nvfp4.weight", "nvfp4");
    CHECK(layout.element_type() == axe::DType::FLOAT4_E2M1);
    CHECK(Shape(layout.block_shape()) == std::vector<uint64_t>{1, 16});
    CHECK(layout.scale()->dtype() == axe::DType::FLOAT8_E4M3FN);
    CHECK(ScaleName(exe, layout.second_level_scale()) == "nvfp4.global_scale");
    CHECK(layout.second_level_scale()->dtype() == axe::DType::FLOAT32);
    CHECK(Shape(layout.second_level_block_shape()) == std::vector<uint64_t>{0, 0});
  }
}

TEST_CASE("golden v1.0 prepacked.axe", "[golden]") {
  auto file = Open("v1.0", "prepacked.axe");
  const axe::Executable& exe = file->metadata();
  WeightLayout(exe, "awq.qweight", "awq.int4.g128");
  const axe::Constant* weight = Find(exe, "awq.qweight");
  REQUIRE(weight->prepacked());
  REQUIRE(weight->prepacked()->size() == 1);
  const axe::PrepackedCopy* copy = weight->prepacked()->Get(0);
  CHECK(copy->target()->str() == "sm_90");
  CHECK(copy->layout_id()->str() == "awq.int4.g128.marlin");
  CHECK(copy->data()->size() == 1024);
  CHECK(file->segments()[copy->data()->segment()].kind ==
        static_cast<uint32_t>(axe::SegmentKind::kPrepacked));
}

TEST_CASE("golden v1.0 files have no kernel variants", "[golden]") {
  for (const char* name : {"code_objects.axe", "functions.axe", "quant_awq_int4_g128.axe"}) {
    auto file = Open("v1.0", name);
    for (const axe::Kernel* kernel : *file->metadata().kernels()) {
      INFO(name << ": kernel " << kernel->name()->str());
      CHECK((kernel->variants() == nullptr || kernel->variants()->size() == 0));
    }
  }
}

TEST_CASE("golden v1.0 functions.axe", "[golden]") {
  auto file = Open("v1.0", "functions.axe");
  const axe::Executable& exe = file->metadata();
  REQUIRE(exe.metadata()->size() == 2);
  CHECK(exe.metadata()->Get(0)->key()->str() == "model");
  CHECK(exe.metadata()->Get(0)->value()->str() == "tiny-mlp");
  REQUIRE(exe.functions()->size() == 2);

  const axe::Function* main = exe.functions()->Get(0);
  CHECK(main->name()->str() == "main");
  CHECK(main->arena_size() == 4096);
  REQUIRE(main->symbols()->size() == 2);
  CHECK(main->symbols()->Get(0)->name()->str() == "batch");
  CHECK(main->symbols()->Get(0)->upper_bound() == 64);
  CHECK(main->symbols()->Get(1)->upper_bound() == 512);
  const axe::TensorSig* x = main->inputs()->Get(0);
  CHECK(x->shape()->Get(0)->symbol() == 0);
  CHECK(x->shape()->Get(1)->symbol() == 1);
  CHECK(x->shape()->Get(2)->value() == 256);
  REQUIRE(main->commands()->size() == 3);
  CHECK(main->commands_type()->Get(0) == axe::Command::FillCommand);
  CHECK(main->commands_type()->Get(1) == axe::Command::CopyCommand);
  CHECK(main->commands_type()->Get(2) == axe::Command::DispatchCommand);
  const auto* dispatch = main->commands()->GetAs<axe::DispatchCommand>(2);
  REQUIRE(dispatch->bindings()->size() == 5);
  const axe::BindingKind kinds[] = {axe::BindingKind::INPUT, axe::BindingKind::CONSTANT,
                                    axe::BindingKind::ARENA, axe::BindingKind::OUTPUT,
                                    axe::BindingKind::SCALAR};
  for (uint32_t i = 0; i < 5; ++i) CHECK(dispatch->bindings()->Get(i)->kind() == kinds[i]);
  CHECK(dispatch->workgroup_count_x()->ops()->size() == 7);
  CHECK(dispatch->workgroup_count_x()->ops()->Get(6)->opcode() == axe::ExprOpcode::DIV_CEIL);
  CHECK(dispatch->bindings()->Get(4)->value()->ops()->size() == 5);

  const axe::Function* tile = exe.functions()->Get(1);
  CHECK(tile->name()->str() == "tile");
  REQUIRE(tile->commands()->size() == 2);
  const auto* fill = tile->commands()->GetAs<axe::FillCommand>(1);
  CHECK(fill->pattern() == 0xff);
  CHECK(fill->pattern_size() == 1);
  // Every opcode appears somewhere in the file.
  std::vector<bool> seen(static_cast<size_t>(axe::ExprOpcode::MAX) + 1, false);
  auto mark = [&](const axe::Expr* expr) {
    if (!expr || !expr->ops()) return;
    for (const axe::ExprOp* op : *expr->ops()) seen[static_cast<size_t>(op->opcode())] = true;
  };
  for (const axe::Function* function : *exe.functions()) {
    for (uint32_t i = 0; i < function->commands()->size(); ++i) {
      switch (function->commands_type()->Get(i)) {
        case axe::Command::DispatchCommand: {
          const auto* d = function->commands()->GetAs<axe::DispatchCommand>(i);
          mark(d->workgroup_count_x());
          mark(d->workgroup_count_y());
          mark(d->workgroup_count_z());
          for (const axe::Binding* b : *d->bindings()) mark(b->value());
          break;
        }
        case axe::Command::CopyCommand: {
          const auto* c = function->commands()->GetAs<axe::CopyCommand>(i);
          mark(c->src_offset());
          mark(c->dst_offset());
          mark(c->length());
          break;
        }
        case axe::Command::FillCommand: {
          const auto* f = function->commands()->GetAs<axe::FillCommand>(i);
          mark(f->offset());
          mark(f->length());
          break;
        }
        default:
          FAIL("unexpected command");
      }
    }
  }
  for (size_t op = 1; op < seen.size(); ++op) {
    INFO("opcode " << op);
    CHECK(seen[op]);
  }
}

// ---------------------------------------------------------------------------
// Format 1.1
// ---------------------------------------------------------------------------

TEST_CASE("golden v1.1 kernel_variants.axe", "[golden]") {
  auto file = Open("v1.1", "kernel_variants.axe");
  const axe::Executable& exe = file->metadata();
  REQUIRE(exe.code_objects()->size() == 3);
  const axe::CodeObject* library = exe.code_objects()->Get(0);
  CHECK(library->kind() == axe::CodeObjectKind::KERNEL_LIBRARY);
  CHECK(library->library_name()->str() == "axrt.cpu");
  CHECK(library->target()->str() == "x86_64");
  CHECK(exe.code_objects()->Get(1)->kind() == axe::CodeObjectKind::CUDA_FATBIN);
  CHECK(exe.code_objects()->Get(1)->target()->str() == "sm_80,sm_90");
  CHECK(exe.code_objects()->Get(2)->kind() == axe::CodeObjectKind::CUDA_PTX);
  REQUIRE(file->segments().size() == 2);
  CHECK(axe::load_u32(file->segment_bytes(0).data()) == 0xBA55ED50u);

  REQUIRE(exe.kernels()->size() == 2);
  const axe::Kernel* axpy = exe.kernels()->Get(0);
  CHECK(axpy->name()->str() == "axpy");
  CHECK(axpy->code_object() == 0);
  CHECK(axpy->entry_symbol()->str() == "axrt_cpu_axpy");
  CHECK(axpy->workgroup_size()->x() == 64);
  REQUIRE(axpy->params()->size() == 3);
  CHECK(axpy->params()->Get(2)->kind() == axe::ParamKind::SCALAR);
  REQUIRE(axpy->variants() != nullptr);
  REQUIRE(axpy->variants()->size() == 2);
  const axe::KernelVariant* fatbin = axpy->variants()->Get(0);
  CHECK(fatbin->code_object() == 1);
  CHECK(fatbin->entry_symbol()->str() == "axpy_f32");
  CHECK(fatbin->workgroup_size()->x() == 256);
  CHECK(fatbin->workgroup_size()->y() == 1);
  CHECK(fatbin->workgroup_size()->z() == 1);
  CHECK(fatbin->dynamic_shared_memory() == 1024);
  CHECK(fatbin->cluster_dims()->x() == 0);
  const axe::KernelVariant* ptx = axpy->variants()->Get(1);
  CHECK(ptx->code_object() == 2);
  CHECK(ptx->entry_symbol()->str() == "axpy");
  CHECK(ptx->workgroup_size()->x() == 128);
  CHECK(ptx->cluster_dims()->x() == 2);
  CHECK(ptx->cluster_dims()->y() == 1);
  CHECK(ptx->cluster_dims()->z() == 1);
  const axe::Kernel* scale = exe.kernels()->Get(1);
  CHECK(scale->name()->str() == "scale");
  CHECK((scale->variants() == nullptr || scale->variants()->size() == 0));

  // One dispatch serves every implementation: four workgroups either way.
  REQUIRE(exe.functions()->size() == 1);
  const axe::Function* main = exe.functions()->Get(0);
  REQUIRE(main->commands()->size() == 2);
  const auto* dispatch = main->commands()->GetAs<axe::DispatchCommand>(0);
  CHECK(dispatch->kernel() == 0);
  CHECK(dispatch->bindings()->size() == 3);
  CHECK(dispatch->workgroup_count_x()->ops()->Get(0)->operand() == 4);
}

// ---------------------------------------------------------------------------
// Format 1.2
// ---------------------------------------------------------------------------

TEST_CASE("golden v1.2 mutable_inputs.axe", "[golden]") {
  auto file = Open("v1.2", "mutable_inputs.axe");
  const axe::Executable& exe = file->metadata();
  REQUIRE(exe.required_features() != nullptr);
  REQUIRE(exe.required_features()->size() == 1);
  CHECK(exe.required_features()->Get(0)->str() == "mutable-inputs.v1");
  REQUIRE(exe.functions()->size() == 1);
  const axe::Function* step = exe.functions()->Get(0);
  CHECK(step->name()->str() == "step");
  REQUIRE(step->inputs()->size() == 3);
  CHECK(step->inputs()->Get(0)->name()->str() == "state");
  CHECK(step->inputs()->Get(0)->mutable_());
  CHECK_FALSE(step->inputs()->Get(1)->mutable_());
  CHECK(step->inputs()->Get(2)->name()->str() == "last");
  CHECK(step->inputs()->Get(2)->mutable_());
  REQUIRE(step->outputs()->size() == 1);
  CHECK_FALSE(step->outputs()->Get(0)->mutable_());

  // Every command writes a mutable input or reads one: the WRITE parameter
  // of the dispatch, the copy out of it, the fill and the copy into it.
  REQUIRE(step->commands()->size() == 4);
  const auto* dispatch = step->commands()->GetAs<axe::DispatchCommand>(0);
  REQUIRE(dispatch != nullptr);
  CHECK(exe.kernels()->Get(dispatch->kernel())->params()->Get(2)->access() ==
        axe::Access::WRITE);
  CHECK(dispatch->bindings()->Get(2)->kind() == axe::BindingKind::INPUT);
  CHECK(dispatch->bindings()->Get(2)->index() == 0);
  const auto* fill = step->commands()->GetAs<axe::FillCommand>(2);
  REQUIRE(fill != nullptr);
  CHECK(fill->target()->kind() == axe::BindingKind::INPUT);
  CHECK(fill->target()->index() == 2);
  const auto* copy = step->commands()->GetAs<axe::CopyCommand>(3);
  REQUIRE(copy != nullptr);
  CHECK(copy->dst()->kind() == axe::BindingKind::INPUT);
  CHECK(copy->dst()->index() == 2);
}

TEST_CASE("a reader of format 1.1 refuses the 1.2 file, naming the feature", "[golden]") {
  CHECK(axe::known_features(1).size() == 5);
  CHECK(std::find(axe::known_features(1).begin(), axe::known_features(1).end(),
                  "mutable-inputs.v1") == axe::known_features(1).end());
  for (uint16_t minor : {uint16_t{0}, uint16_t{1}}) {
    INFO("read as 1." << minor);
    const std::string path = std::string(AXRT_GOLDEN_DIR) + "/v1.2/mutable_inputs.axe";
    axe::ReadOptions options;
    options.reader_minor = minor;
    std::unique_ptr<axe::AxeFile> file;
    Status status(axe::AxeFile::open_file(path, options, &file));
    REQUIRE(status != nullptr);
    CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_UNIMPLEMENTED);
    const std::string message = axrt_status_message(status.get());
    INFO(message);
    CHECK(message.find("requires feature 'mutable-inputs.v1'") != std::string::npos);
    CHECK(message.find("does not understand") != std::string::npos);
    CHECK(file == nullptr);
  }
}

// ---------------------------------------------------------------------------
// Format 1.3
// ---------------------------------------------------------------------------

std::vector<std::string> Features(const axe::Executable& exe) {
  std::vector<std::string> features;
  if (exe.required_features()) {
    for (const flatbuffers::String* f : *exe.required_features()) features.push_back(f->str());
  }
  return features;
}

TEST_CASE("golden v1.3 declared_features.axe", "[golden]") {
  auto file = Open("v1.3", "declared_features.axe");
  const axe::Executable& exe = file->metadata();
  // Every feature of 1.0 and 1.2, each listed by the builder.
  CHECK(Features(exe) == std::vector<std::string>{"quantization.v1", "symbolic-dims.v1",
                                                  "prepacked.v1", "host-code.v1",
                                                  "kernel-library.v1", "mutable-inputs.v1"});
  REQUIRE(exe.code_objects()->size() == 2);
  CHECK(exe.code_objects()->Get(0)->kind() == axe::CodeObjectKind::HOST_SHARED_OBJECT);
  CHECK(exe.code_objects()->Get(1)->kind() == axe::CodeObjectKind::KERNEL_LIBRARY);
  const axe::Constant* weight = Find(exe, "fc.weight");
  REQUIRE(weight->quantization() != nullptr);
  CHECK(weight->quantization()->layout_id()->str() == "int8.per_channel");
  REQUIRE(weight->prepacked() != nullptr);
  REQUIRE(weight->prepacked()->size() == 1);
  CHECK(weight->prepacked()->Get(0)->target()->str() == "sm_90");
  REQUIRE(exe.functions()->size() == 2);
  const axe::Function* accumulate = exe.functions()->Get(1);
  CHECK(accumulate->name()->str() == "accumulate");
  REQUIRE(accumulate->symbols()->size() == 1);
  CHECK(accumulate->symbols()->Get(0)->upper_bound() == 4096);
  CHECK(accumulate->inputs()->Get(0)->mutable_());
  CHECK_FALSE(accumulate->inputs()->Get(1)->mutable_());
}

TEST_CASE("golden v1.3 signed_scalars.axe", "[golden]") {
  auto file = Open("v1.3", "signed_scalars.axe");
  const axe::Executable& exe = file->metadata();
  CHECK(Features(exe) ==
        std::vector<std::string>{"symbolic-dims.v1", "kernel-library.v1", "signed-scalars.v1"});
  REQUIRE(exe.code_objects()->size() == 1);
  CHECK(exe.code_objects()->Get(0)->library_name()->str() == "cts.kernels");
  REQUIRE(exe.kernels()->size() == 1);
  const axe::Kernel* affine = exe.kernels()->Get(0);
  CHECK(affine->entry_symbol()->str() == "cts_affine");
  const axe::DType types[] = {axe::DType::INVALID, axe::DType::INVALID, axe::DType::UINT64,
                              axe::DType::FLOAT32, axe::DType::INT32,   axe::DType::FLOAT64,
                              axe::DType::INT64};
  REQUIRE(affine->params()->size() == 7);
  for (uint32_t p = 2; p < 7; ++p) CHECK(affine->params()->Get(p)->scalar_type() == types[p]);

  // The scalars: n, then -2.5f (its bits), -7, -0.25 (its bits, a negative
  // literal) and -3.
  const auto* dispatch = exe.functions()->Get(0)->commands()->GetAs<axe::DispatchCommand>(0);
  REQUIRE(dispatch != nullptr);
  const int64_t literals[] = {0xC0200000, -7, static_cast<int64_t>(0xBFD0000000000000ull), -3};
  for (uint32_t b = 3; b < 7; ++b) {
    INFO("binding " << b);
    const axe::Expr* value = dispatch->bindings()->Get(b)->value();
    REQUIRE(value->ops()->size() == 1);
    CHECK(value->ops()->Get(0)->opcode() == axe::ExprOpcode::CONST);
    CHECK(value->ops()->Get(0)->operand() == literals[b - 3]);
  }
}

Status OpenStatus(const std::string& version, const std::string& name, uint16_t reader_minor) {
  const std::string path = std::string(AXRT_GOLDEN_DIR) + "/" + version + "/" + name;
  axe::ReadOptions options;
  options.reader_minor = reader_minor;
  std::unique_ptr<axe::AxeFile> file;
  Status status(axe::AxeFile::open_file(path, options, &file));
  CHECK((status == nullptr) == (file != nullptr));
  return status;
}

TEST_CASE("readers before 1.3 read the 1.3 files by their features", "[golden]") {
  // As 1.2: every feature of declared_features.axe is one it knows; it
  // refuses signed_scalars.axe by the feature it does not.
  Status status = OpenStatus("v1.3", "declared_features.axe", 2);
  INFO((status ? axrt_status_message(status.get()) : "OK"));
  CHECK(status == nullptr);
  for (uint16_t minor : {uint16_t{0}, uint16_t{1}, uint16_t{2}}) {
    INFO("read as 1." << minor);
    status = OpenStatus("v1.3", "signed_scalars.axe", minor);
    REQUIRE(status != nullptr);
    CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_UNIMPLEMENTED);
    const std::string message = axrt_status_message(status.get());
    INFO(message);
    CHECK(message.find("requires feature 'signed-scalars.v1'") != std::string::npos);
  }
  // As 1.1, the mutable input's feature is the one it lacks.
  status = OpenStatus("v1.3", "declared_features.axe", 1);
  REQUIRE(status != nullptr);
  CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_UNIMPLEMENTED);
  CHECK(std::string(axrt_status_message(status.get())).find("'mutable-inputs.v1'") !=
        std::string::npos);
}

// ---------------------------------------------------------------------------
// Format 1.4
// ---------------------------------------------------------------------------

TEST_CASE("golden v1.4 collectives.axe", "[golden]") {
  const std::string dir = std::string(AXRT_GOLDEN_DIR) + "/v1.4";
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".axe") found.push_back(entry.path().filename().string());
  }
  CHECK(found == std::vector<std::string>{"collectives.axe"});
  auto file = Open("v1.4", "collectives.axe");
  CHECK(file->header().format_minor == 4);
  CHECK(file->metadata().producer()->version()->str() == "1.4");
  const axe::Executable& exe = file->metadata();
  CHECK(Features(exe) == std::vector<std::string>{"symbolic-dims.v1", "collectives.v1"});
  const axe::Function* layer = exe.functions()->Get(0);
  REQUIRE(layer->channels() != nullptr);
  REQUIRE(layer->channels()->size() == 1);
  CHECK(layer->channels()->Get(0)->name()->str() == "tensor_parallel");
  CHECK(layer->channels()->Get(0)->size() == 2);
  REQUIRE(layer->commands()->size() == 6);
  const axe::CollectiveKind kinds[] = {axe::CollectiveKind::ALL_REDUCE,
                                       axe::CollectiveKind::ALL_GATHER,
                                       axe::CollectiveKind::REDUCE_SCATTER,
                                       axe::CollectiveKind::BROADCAST};
  const uint32_t at[] = {1, 3, 4, 5};
  for (int i = 0; i < 4; ++i) {
    INFO("command " << at[i]);
    REQUIRE(layer->commands_type()->Get(at[i]) == axe::Command::CollectiveCommand);
    const auto* c = layer->commands()->GetAs<axe::CollectiveCommand>(at[i]);
    CHECK(c->kind() == kinds[i]);
    CHECK(c->channel() == 0);
    CHECK(c->dtype() == axe::DType::FLOAT32);
  }
  const auto* scatter = layer->commands()->GetAs<axe::CollectiveCommand>(4);
  CHECK(scatter->op() == axe::ReduceOp::MAXIMUM);
  CHECK(layer->commands()->GetAs<axe::CollectiveCommand>(5)->root() == 1);
  CHECK(layer->commands()->GetAs<axe::CollectiveCommand>(1)->send()->kind() ==
        axe::BindingKind::ARENA);
}

TEST_CASE("readers before 1.4 refuse the 1.4 file, naming collectives.v1", "[golden]") {
  CHECK(axe::known_features(3).size() == 7);
  CHECK(axe::known_features(4).back() == "collectives.v1");
  for (uint16_t minor : {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{3}}) {
    INFO("read as 1." << minor);
    Status status = OpenStatus("v1.4", "collectives.axe", minor);
    REQUIRE(status != nullptr);
    CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_UNIMPLEMENTED);
    const std::string message = axrt_status_message(status.get());
    INFO(message);
    CHECK(message.find("requires feature 'collectives.v1'") != std::string::npos);
  }
  // And the 1.3 files still read as 1.4 reads them.
  for (const char* name : {"declared_features.axe", "signed_scalars.axe"}) {
    Status status = OpenStatus("v1.3", name, 4);
    CHECK(status == nullptr);
  }
}

}  // namespace
