#include "format/inspect.h"

#include <fmt/format.h>

#include <cstdio>
#include <iterator>

#include "base/json_writer.h"
#include "format/describe.h"

namespace axrt::axe {

namespace {

using flatbuffers::uoffset_t;

template <typename T>
uoffset_t size_of(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The bytes a code object's segment holds, or 0 without one.
uint64_t segment_size(const axe::AxeFile& file, int64_t segment) {
  if (segment < 0 || static_cast<uint64_t>(segment) >= file.segments().size()) return 0;
  return file.segments()[static_cast<size_t>(segment)].size;
}

std::string dim3_string(const axe::Dim3* d) {
  if (!d) return "(0, 0, 0)";
  return fmt::format("({}, {}, {})", d->x(), d->y(), d->z());
}

std::string_view kernel_name(const axe::Executable& exe, uint32_t index) {
  if (!exe.kernels() || index >= exe.kernels()->size()) return {};
  return str(exe.kernels()->Get(index)->name());
}

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

class TextPrinter {
 public:
  TextPrinter(const axe::AxeFile& file, std::string* out)
      : file_(file), exe_(file.metadata()), out_(out) {}

  void print() {
    header();
    segments();
    code_objects();
    kernels();
    constants();
    functions();
    metadata();
  }

 private:
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(*out_), format, std::forward<Args>(args)...);
    out_->push_back('\n');
  }

  void header() {
    const axe::FileHeader& h = file_.header();
    line("file: {}", file_.name());
    line("format: {}.{} (flags 0x{:08x}), {} bytes", h.format_major, h.format_minor, h.flags,
         h.file_size);
    line("metadata: {} bytes at offset {}", h.metadata_size, h.metadata_offset);
    const axe::Producer* producer = exe_.producer();
    line("producer: {} {}", producer ? str(producer->name()) : "", producer ? str(producer->version()) : "");
    std::vector<std::string_view> features;
    if (exe_.required_features()) {
      for (const flatbuffers::String* f : *exe_.required_features()) features.push_back(str(f));
    }
    line("required features: {}", features.empty() ? "none" : fmt::format("{}", fmt::join(features, ", ")));
  }

  void segments() {
    line("");
    line("segments ({}):", file_.segments().size());
    for (size_t i = 0; i < file_.segments().size(); ++i) {
      const axe::SegmentEntry& s = file_.segments()[i];
      line("  [{}] {:<9} offset {:<10} size {:<10} crc32c 0x{:08x}", i, segment_kind_name(s.kind),
           s.offset, s.size, s.checksum);
    }
  }

  void code_objects() {
    line("");
    line("code objects ({}):", size_of(exe_.code_objects()));
    for (uoffset_t i = 0; i < size_of(exe_.code_objects()); ++i) {
      const axe::CodeObject* co = exe_.code_objects()->Get(i);
      if (co->kind() == axe::CodeObjectKind::KERNEL_LIBRARY) {
        line("  [{}] {} '{}' >= version {}, target {}", i, code_object_kind_name(co->kind()),
             str(co->library_name()), co->library_min_version(), str(co->target()));
      } else {
        line("  [{}] {} target {}, segment {}, {} bytes", i, code_object_kind_name(co->kind()),
             str(co->target()), co->segment(), segment_size(file_, co->segment()));
      }
    }
  }

  void kernels() {
    line("");
    line("kernels ({}):", size_of(exe_.kernels()));
    for (uoffset_t i = 0; i < size_of(exe_.kernels()); ++i) {
      const axe::Kernel* k = exe_.kernels()->Get(i);
      line("  [{}] {} (code object {}, entry '{}')", i, str(k->name()), k->code_object(),
           str(k->entry_symbol()));
      line("      {}", launch_string(k->workgroup_size(), k->dynamic_shared_memory(),
                                     k->cluster_dims()));
      for (uoffset_t v = 0; v < size_of(k->variants()); ++v) {
        const axe::KernelVariant* variant = k->variants()->Get(v);
        line("      variant {}: code object {}{}, entry '{}'", v, variant->code_object(),
             code_object_summary(variant->code_object()), str(variant->entry_symbol()));
        line("        {}", launch_string(variant->workgroup_size(),
                                         variant->dynamic_shared_memory(),
                                         variant->cluster_dims()));
      }
      for (uoffset_t p = 0; p < size_of(k->params()); ++p) {
        const axe::KernelParam* param = k->params()->Get(p);
        if (param->kind() == axe::ParamKind::SCALAR) {
          line("      param {} {}: scalar {}", p, str(param->name()), dtype_name(param->scalar_type()));
        } else {
          const bool typed = param->scalar_type() != axe::DType::INVALID;
          line("      param {} {}: {} {}{}{}", p, str(param->name()),
               param_kind_name(param->kind()), access_name(param->access()),
               typed ? ", elements " : "", typed ? dtype_name(param->scalar_type()) : "");
        }
        if (param->layout()) {
          line("        expects layout '{}': {}", str(param->layout()->layout_id()),
               quant_description(param->layout(), exe_, nullptr));
        }
      }
    }
  }

  static std::string launch_string(const axe::Dim3* workgroup_size, uint32_t shared_memory,
                                   const axe::Dim3* cluster) {
    std::string launch = fmt::format("workgroup size {}, dynamic shared memory {} bytes",
                                     dim3_string(workgroup_size), shared_memory);
    if (cluster && (cluster->x() || cluster->y() || cluster->z())) {
      launch += ", cluster " + dim3_string(cluster);
    }
    return launch;
  }

  // " (cuda_fatbin sm_80,sm_90)": what a variant's code object is, since
  // its kind says which devices the variant serves.
  std::string code_object_summary(uint32_t index) const {
    if (!exe_.code_objects() || index >= exe_.code_objects()->size()) return {};
    const axe::CodeObject* co = exe_.code_objects()->Get(index);
    return fmt::format(" ({} {})", code_object_kind_name(co->kind()), str(co->target()));
  }

  void constants() {
    line("");
    line("constants ({}):", size_of(exe_.constants()));
    for (uoffset_t i = 0; i < size_of(exe_.constants()); ++i) {
      const axe::Constant* c = exe_.constants()->Get(i);
      std::string strides = c->strides() && c->strides()->size() ? " strides " + strides_string(c->strides()) : "";
      line("  [{}] {}: {}{}{}, alignment {}", i, str(c->name()), dtype_name(c->dtype()),
           shape_string(c->shape()), strides, c->alignment());
      if (const axe::SegmentRange* r = c->data()) {
        line("      data: segment {}, bytes [{}, +{})", r->segment(), r->offset(), r->size());
      }
      if (const axe::QuantLayout* q = c->quantization()) {
        line("      quantization '{}': {}", str(q->layout_id()), quant_description(q, exe_, c->shape()));
      }
      for (uoffset_t p = 0; p < size_of(c->prepacked()); ++p) {
        const axe::PrepackedCopy* copy = c->prepacked()->Get(p);
        const axe::SegmentRange* r = copy->data();
        line("      prepacked for {} as '{}': segment {}, bytes [{}, +{})", str(copy->target()),
             str(copy->layout_id()), r ? r->segment() : 0, r ? r->offset() : 0, r ? r->size() : 0);
      }
    }
  }

  void functions() {
    line("");
    line("functions ({}):", size_of(exe_.functions()));
    for (uoffset_t i = 0; i < size_of(exe_.functions()); ++i) {
      const axe::Function* f = exe_.functions()->Get(i);
      std::vector<std::string> inputs, outputs;
      for (uoffset_t k = 0; k < size_of(f->inputs()); ++k) {
        inputs.push_back(tensor_sig_string(f->inputs()->Get(k), f));
      }
      for (uoffset_t k = 0; k < size_of(f->outputs()); ++k) {
        outputs.push_back(tensor_sig_string(f->outputs()->Get(k), f));
      }
      line("  [{}] {}({}) -> ({})", i, str(f->name()), fmt::join(inputs, ", "), fmt::join(outputs, ", "));
      if (size_of(f->symbols())) {
        std::vector<std::string> symbols;
        for (const axe::Symbol* s : *f->symbols()) {
          symbols.push_back(fmt::format("{} <= {}", str(s->name()), s->upper_bound()));
        }
        line("      symbols: {}", fmt::join(symbols, ", "));
      }
      if (size_of(f->channels())) {
        std::vector<std::string> channels;
        for (const axe::Channel* c : *f->channels()) {
          channels.push_back(c->size() ? fmt::format("{} ({} members)", str(c->name()), c->size())
                                       : fmt::format("{} (any size)", str(c->name())));
        }
        line("      channels: {}", fmt::join(channels, ", "));
      }
      line("      arena: {} bytes", f->arena_size());
      line("      commands ({}):", size_of(f->commands()));
      for (uoffset_t k = 0; k < size_of(f->commands()); ++k) command(f, k);
    }
  }

  void command(const axe::Function* f, uoffset_t k) {
    const axe::Command type = f->commands_type() && k < f->commands_type()->size()
                                  ? f->commands_type()->Get(k)
                                  : axe::Command::NONE;
    const void* body = f->commands()->Get(k);
    switch (type) {
      case axe::Command::DispatchCommand: {
        const auto* d = static_cast<const axe::DispatchCommand*>(body);
        line("        {}: dispatch '{}' (kernel {}), workgroups ({}, {}, {})", k,
             kernel_name(exe_, d->kernel()), d->kernel(), expr_string(d->workgroup_count_x(), f),
             expr_string(d->workgroup_count_y(), f, "1"), expr_string(d->workgroup_count_z(), f, "1"));
        for (uoffset_t b = 0; b < size_of(d->bindings()); ++b) {
          line("            {}: {}", b, binding_string(d->bindings()->Get(b), exe_, f));
        }
        break;
      }
      case axe::Command::CopyCommand: {
        const auto* c = static_cast<const axe::CopyCommand*>(body);
        line("        {}: copy {} + {} -> {} + {}, {} bytes", k, binding_string(c->src(), exe_, f),
             expr_string(c->src_offset(), f), binding_string(c->dst(), exe_, f),
             expr_string(c->dst_offset(), f), expr_string(c->length(), f));
        break;
      }
      case axe::Command::FillCommand: {
        const auto* c = static_cast<const axe::FillCommand*>(body);
        line("        {}: fill {} + {}, {} bytes with 0x{:0{}x} ({}-byte pattern)", k,
             binding_string(c->target(), exe_, f), expr_string(c->offset(), f),
             expr_string(c->length(), f), c->pattern(),
             c->pattern_size() <= 8 ? 2 * c->pattern_size() : 16, c->pattern_size());
        break;
      }
      case axe::Command::CollectiveCommand: {
        const auto* c = static_cast<const axe::CollectiveCommand*>(body);
        std::string how;
        if (c->kind() == axe::CollectiveKind::ALL_REDUCE ||
            c->kind() == axe::CollectiveKind::REDUCE_SCATTER) {
          how = " (" + reduce_op_name(c->op()) + ")";
        } else if (c->kind() == axe::CollectiveKind::BROADCAST) {
          how = fmt::format(" from member {}", c->root());
        }
        line("        {}: {}{} on channel {}, {} x {}: {} + {} -> {} + {}", k,
             collective_kind_name(c->kind()), how, c->channel(), expr_string(c->count(), f),
             dtype_name(c->dtype()), binding_string(c->send(), exe_, f),
             expr_string(c->send_offset(), f), binding_string(c->recv(), exe_, f),
             expr_string(c->recv_offset(), f));
        break;
      }
      default:
        line("        {}: {}", k, command_kind_name(type));
        break;
    }
  }

  void metadata() {
    line("");
    line("metadata ({}):", size_of(exe_.metadata()));
    for (uoffset_t i = 0; i < size_of(exe_.metadata()); ++i) {
      const axe::KeyValue* kv = exe_.metadata()->Get(i);
      std::string key, value;
      JsonWriter::escape(str(kv->key()), &key);
      JsonWriter::escape(str(kv->value()), &value);
      line("  {} = {}", key, value);
    }
  }

  const axe::AxeFile& file_;
  const axe::Executable& exe_;
  std::string* out_;
};

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

class JsonPrinter {
 public:
  JsonPrinter(const axe::AxeFile& file, std::string* out)
      : file_(file), exe_(file.metadata()), w_(out) {}

  void print() {
    const axe::FileHeader& h = file_.header();
    w_.begin_object();
    w_.member("file", file_.name());
    w_.member("format_version", fmt::format("{}.{}", h.format_major, h.format_minor));
    w_.key("header");
    w_.begin_object();
    w_.member("format_major", static_cast<uint64_t>(h.format_major));
    w_.member("format_minor", static_cast<uint64_t>(h.format_minor));
    w_.member("flags", static_cast<uint64_t>(h.flags));
    w_.member("metadata_offset", h.metadata_offset);
    w_.member("metadata_size", h.metadata_size);
    w_.member("segment_table_offset", h.segment_table_offset);
    w_.member("segment_count", h.segment_count);
    w_.member("file_size", h.file_size);
    w_.member("checksum", hex32(h.checksum));
    w_.end_object();
    w_.key("producer");
    w_.begin_object();
    w_.member("name", str(exe_.producer() ? exe_.producer()->name() : nullptr));
    w_.member("version", str(exe_.producer() ? exe_.producer()->version() : nullptr));
    w_.end_object();
    w_.key("required_features");
    w_.begin_array();
    if (exe_.required_features()) {
      for (const flatbuffers::String* f : *exe_.required_features()) w_.value(str(f));
    }
    w_.end_array();
    segments();
    code_objects();
    kernels();
    constants();
    functions();
    w_.key("metadata");
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(exe_.metadata()); ++i) {
      const axe::KeyValue* kv = exe_.metadata()->Get(i);
      w_.begin_object();
      w_.member("key", str(kv->key()));
      w_.member("value", str(kv->value()));
      w_.end_object();
    }
    w_.end_array();
    w_.end_object();
  }

 private:
  static std::string hex32(uint32_t v) { return fmt::format("0x{:08x}", v); }

  void u64_array(const flatbuffers::Vector<uint64_t>* v) {
    w_.begin_array();
    if (v) {
      for (uint64_t x : *v) w_.value(x);
    }
    w_.end_array();
  }

  void dim3(std::string_view name, const axe::Dim3* d) {
    w_.key(name);
    w_.begin_array();
    w_.value(d ? d->x() : 0u);
    w_.value(d ? d->y() : 0u);
    w_.value(d ? d->z() : 0u);
    w_.end_array();
  }

  void segments() {
    w_.key("segments");
    w_.begin_array();
    for (size_t i = 0; i < file_.segments().size(); ++i) {
      const axe::SegmentEntry& s = file_.segments()[i];
      w_.begin_object();
      w_.member("index", static_cast<uint64_t>(i));
      w_.member("kind", segment_kind_name(s.kind));
      w_.member("offset", s.offset);
      w_.member("size", s.size);
      w_.member("checksum", hex32(s.checksum));
      w_.end_object();
    }
    w_.end_array();
  }

  void code_objects() {
    w_.key("code_objects");
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(exe_.code_objects()); ++i) {
      const axe::CodeObject* co = exe_.code_objects()->Get(i);
      w_.begin_object();
      w_.member("index", i);
      w_.member("kind", code_object_kind_name(co->kind()));
      w_.member("target", str(co->target()));
      w_.member("segment", co->segment());
      w_.member("size", segment_size(file_, co->segment()));
      if (co->kind() == axe::CodeObjectKind::KERNEL_LIBRARY) {
        w_.member("library_name", str(co->library_name()));
        w_.member("library_min_version", co->library_min_version());
      }
      w_.end_object();
    }
    w_.end_array();
  }

  void scale_ref(std::string_view name, const axe::ScaleRef* s) {
    w_.key(name);
    if (!s) {
      w_.null();
      return;
    }
    w_.begin_object();
    w_.member("constant", s->constant());
    w_.member("constant_name", constant_name(exe_, s->constant()));
    w_.member("dtype", dtype_name(s->dtype()));
    w_.member("layout", scale_layout_name(s->layout()));
    w_.end_object();
  }

  void packing(const axe::Packing* p) {
    w_.key("packing");
    if (!p) {
      w_.null();
      return;
    }
    w_.begin_object();
    w_.member("bits", static_cast<uint64_t>(p->bits()));
    w_.member("container_bits", static_cast<uint64_t>(p->container_bits()));
    w_.member("axis", p->axis());
    w_.member("order", element_order_name(p->order()));
    w_.member("sign", sign_encoding_name(p->sign()));
    w_.member("padding", padding_rule_name(p->padding()));
    w_.end_object();
  }

  void layout(std::string_view name, const axe::QuantLayout* q,
              const flatbuffers::Vector<uint64_t>* shape) {
    w_.key(name);
    if (!q) {
      w_.null();
      return;
    }
    w_.begin_object();
    w_.member("description", quant_description(q, exe_, shape));
    w_.member("layout_id", str(q->layout_id()));
    w_.member("element_type", dtype_name(q->element_type()));
    w_.member("dequantized_type", dtype_name(q->dequantized_type()));
    w_.key("block_shape");
    u64_array(q->block_shape());
    scale_ref("scale", q->scale());
    w_.key("zero_point");
    if (const axe::ZeroPoint* zp = q->zero_point()) {
      w_.begin_object();
      w_.member("kind", zero_point_kind_name(zp->kind()));
      w_.member("constant", zp->constant());
      w_.member("constant_name", constant_name(exe_, zp->constant()));
      w_.member("dtype", dtype_name(zp->dtype()));
      packing(zp->packing());
      w_.member("stored_bias", zp->stored_bias());
      w_.end_object();
    } else {
      w_.null();
    }
    scale_ref("second_level_scale", q->second_level_scale());
    w_.key("second_level_block_shape");
    u64_array(q->second_level_block_shape());
    packing(q->packing());
    w_.end_object();
  }

  void kernels() {
    w_.key("kernels");
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(exe_.kernels()); ++i) {
      const axe::Kernel* k = exe_.kernels()->Get(i);
      w_.begin_object();
      w_.member("index", i);
      w_.member("name", str(k->name()));
      w_.member("code_object", k->code_object());
      w_.member("entry_symbol", str(k->entry_symbol()));
      dim3("workgroup_size", k->workgroup_size());
      w_.member("dynamic_shared_memory", k->dynamic_shared_memory());
      dim3("cluster_dims", k->cluster_dims());
      w_.key("variants");
      w_.begin_array();
      for (uoffset_t v = 0; v < size_of(k->variants()); ++v) {
        const axe::KernelVariant* variant = k->variants()->Get(v);
        w_.begin_object();
        w_.member("index", v);
        w_.member("code_object", variant->code_object());
        w_.member("entry_symbol", str(variant->entry_symbol()));
        dim3("workgroup_size", variant->workgroup_size());
        w_.member("dynamic_shared_memory", variant->dynamic_shared_memory());
        dim3("cluster_dims", variant->cluster_dims());
        w_.end_object();
      }
      w_.end_array();
      w_.key("params");
      w_.begin_array();
      for (uoffset_t p = 0; p < size_of(k->params()); ++p) {
        const axe::KernelParam* param = k->params()->Get(p);
        w_.begin_object();
        w_.member("name", str(param->name()));
        w_.member("kind", param_kind_name(param->kind()));
        if (param->kind() == axe::ParamKind::SCALAR) {
          w_.member("scalar_type", dtype_name(param->scalar_type()));
        } else {
          w_.member("access", access_name(param->access()));
          if (param->scalar_type() != axe::DType::INVALID) {
            w_.member("scalar_type", dtype_name(param->scalar_type()));
          }
        }
        layout("layout", param->layout(), nullptr);
        w_.end_object();
      }
      w_.end_array();
      w_.end_object();
    }
    w_.end_array();
  }

  void segment_range(std::string_view name, const axe::SegmentRange* r) {
    w_.key(name);
    if (!r) {
      w_.null();
      return;
    }
    w_.begin_object();
    w_.member("segment", r->segment());
    w_.member("offset", r->offset());
    w_.member("size", r->size());
    w_.end_object();
  }

  void constants() {
    w_.key("constants");
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(exe_.constants()); ++i) {
      const axe::Constant* c = exe_.constants()->Get(i);
      w_.begin_object();
      w_.member("index", i);
      w_.member("name", str(c->name()));
      w_.member("dtype", dtype_name(c->dtype()));
      w_.key("shape");
      u64_array(c->shape());
      w_.key("strides");
      w_.begin_array();
      if (c->strides()) {
        for (int64_t s : *c->strides()) w_.value(s);
      }
      w_.end_array();
      w_.member("alignment", c->alignment());
      segment_range("data", c->data());
      layout("quantization", c->quantization(), c->shape());
      w_.key("prepacked");
      w_.begin_array();
      for (uoffset_t p = 0; p < size_of(c->prepacked()); ++p) {
        const axe::PrepackedCopy* copy = c->prepacked()->Get(p);
        w_.begin_object();
        w_.member("target", str(copy->target()));
        w_.member("layout_id", str(copy->layout_id()));
        segment_range("data", copy->data());
        w_.end_object();
      }
      w_.end_array();
      w_.end_object();
    }
    w_.end_array();
  }

  void tensor_sigs(std::string_view name,
                   const flatbuffers::Vector<flatbuffers::Offset<axe::TensorSig>>* sigs,
                   const axe::Function* f) {
    w_.key(name);
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(sigs); ++i) {
      const axe::TensorSig* sig = sigs->Get(i);
      w_.begin_object();
      w_.member("name", str(sig->name()));
      w_.member("dtype", dtype_name(sig->dtype()));
      // Format 1.2: written in place by the function (inputs only).
      if (name == "inputs") w_.member("mutable", sig->mutable_());
      w_.key("shape");
      w_.begin_array();
      for (uoffset_t d = 0; d < size_of(sig->shape()); ++d) {
        const axe::Dim* dim = sig->shape()->Get(d);
        if (dim->symbol() >= 0) {
          w_.value(dim_string(dim, f));
        } else {
          w_.value(dim->value());
        }
      }
      w_.end_array();
      w_.end_object();
    }
    w_.end_array();
  }

  void binding(std::string_view name, const axe::Binding* b, const axe::Function* f) {
    if (!name.empty()) w_.key(name);
    if (!b) {
      w_.null();
      return;
    }
    w_.begin_object();
    w_.member("kind", binding_kind_name(b->kind()));
    switch (b->kind()) {
      case axe::BindingKind::INPUT:
      case axe::BindingKind::OUTPUT:
      case axe::BindingKind::CONSTANT:
        w_.member("index", b->index());
        break;
      case axe::BindingKind::ARENA:
        w_.member("offset", b->offset());
        w_.member("size", b->size());
        break;
      case axe::BindingKind::SCALAR:
        w_.member("value", expr_string(b->value(), f));
        break;
      default:
        break;
    }
    w_.member("description", binding_string(b, exe_, f));
    w_.end_object();
  }

  void functions() {
    w_.key("functions");
    w_.begin_array();
    for (uoffset_t i = 0; i < size_of(exe_.functions()); ++i) {
      const axe::Function* f = exe_.functions()->Get(i);
      w_.begin_object();
      w_.member("index", i);
      w_.member("name", str(f->name()));
      w_.key("symbols");
      w_.begin_array();
      for (uoffset_t s = 0; s < size_of(f->symbols()); ++s) {
        w_.begin_object();
        w_.member("name", str(f->symbols()->Get(s)->name()));
        w_.member("upper_bound", f->symbols()->Get(s)->upper_bound());
        w_.end_object();
      }
      w_.end_array();
      tensor_sigs("inputs", f->inputs(), f);
      tensor_sigs("outputs", f->outputs(), f);
      if (size_of(f->channels())) {
        w_.key("channels");
        w_.begin_array();
        for (const axe::Channel* c : *f->channels()) {
          w_.begin_object();
          w_.member("name", str(c->name()));
          w_.member("size", static_cast<uint64_t>(c->size()));
          w_.end_object();
        }
        w_.end_array();
      }
      w_.member("arena_size", f->arena_size());
      w_.key("commands");
      w_.begin_array();
      for (uoffset_t k = 0; k < size_of(f->commands()); ++k) command(f, k);
      w_.end_array();
      w_.end_object();
    }
    w_.end_array();
  }

  void command(const axe::Function* f, uoffset_t k) {
    const axe::Command type = f->commands_type() && k < f->commands_type()->size()
                                  ? f->commands_type()->Get(k)
                                  : axe::Command::NONE;
    const void* body = f->commands()->Get(k);
    w_.begin_object();
    w_.member("kind", command_kind_name(type));
    switch (type) {
      case axe::Command::DispatchCommand: {
        const auto* d = static_cast<const axe::DispatchCommand*>(body);
        w_.member("kernel", d->kernel());
        w_.member("kernel_name", kernel_name(exe_, d->kernel()));
        w_.key("workgroup_count");
        w_.begin_array();
        w_.value(expr_string(d->workgroup_count_x(), f));
        w_.value(expr_string(d->workgroup_count_y(), f, "1"));
        w_.value(expr_string(d->workgroup_count_z(), f, "1"));
        w_.end_array();
        w_.key("bindings");
        w_.begin_array();
        for (uoffset_t b = 0; b < size_of(d->bindings()); ++b) binding({}, d->bindings()->Get(b), f);
        w_.end_array();
        break;
      }
      case axe::Command::CopyCommand: {
        const auto* c = static_cast<const axe::CopyCommand*>(body);
        binding("src", c->src(), f);
        w_.member("src_offset", expr_string(c->src_offset(), f));
        binding("dst", c->dst(), f);
        w_.member("dst_offset", expr_string(c->dst_offset(), f));
        w_.member("length", expr_string(c->length(), f));
        break;
      }
      case axe::Command::FillCommand: {
        const auto* c = static_cast<const axe::FillCommand*>(body);
        binding("target", c->target(), f);
        w_.member("offset", expr_string(c->offset(), f));
        w_.member("length", expr_string(c->length(), f));
        w_.member("pattern", c->pattern());
        w_.member("pattern_size", static_cast<uint64_t>(c->pattern_size()));
        break;
      }
      case axe::Command::CollectiveCommand: {
        const auto* c = static_cast<const axe::CollectiveCommand*>(body);
        w_.member("collective", collective_kind_name(c->kind()));
        w_.member("channel", static_cast<uint64_t>(c->channel()));
        w_.member("dtype", dtype_name(c->dtype()));
        w_.member("count", expr_string(c->count(), f));
        w_.member("op", reduce_op_name(c->op()));
        w_.member("root", static_cast<uint64_t>(c->root()));
        binding("send", c->send(), f);
        w_.member("send_offset", expr_string(c->send_offset(), f));
        binding("recv", c->recv(), f);
        w_.member("recv_offset", expr_string(c->recv_offset(), f));
        break;
      }
      default:
        break;
    }
    w_.end_object();
  }

  const axe::AxeFile& file_;
  const axe::Executable& exe_;
  JsonWriter w_;
};

}  // namespace

std::string inspect_text(const axe::AxeFile& file) {
  std::string out;
  TextPrinter(file, &out).print();
  return out;
}

std::string inspect_json(const axe::AxeFile& file) {
  std::string out;
  JsonPrinter(file, &out).print();
  return out;
}

}  // namespace axrt::axe
