// libFuzzer target over the verifying .axe reader. Every input is opened as
// it is, and again with its checksums repaired (otherwise nearly every
// mutation would stop at the header's CRC). Whatever the reader accepts is
// walked field by field, its byte ranges are touched at both ends, `axrt
// inspect` renders it as text and JSON, and its checksums are verified;
// the sanitizers turn any out-of-range access, leak or UB into a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/container.h"
#include "format/inspect.h"
#include "format/reader.h"

namespace axe = axrt::axe;

namespace {

// Reads what the walk touches so that nothing is optimized away.
struct Sink {
  uint64_t value = 0;
  void add(uint64_t v) { value = value * 31 + v; }
  void add(const flatbuffers::String* s) {
    if (!s) return;
    add(s->size());
    if (s->size()) add(static_cast<uint8_t>(s->c_str()[0]) + static_cast<uint8_t>(s->c_str()[s->size() - 1]));
  }
  void add(std::span<const uint8_t> bytes) {
    add(bytes.size());
    if (!bytes.empty()) add(bytes.front() + bytes.back());
  }
  template <typename T>
  void add(const flatbuffers::Vector<T>* v) {
    if (!v) return;
    add(v->size());
    for (auto x : *v) add(static_cast<uint64_t>(x));
  }
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "axe_reader_fuzzer: %s\n", what);
  std::abort();
}

void walk_packing(const axe::Packing* p, Sink* sink) {
  if (!p) return;
  sink->add(p->bits());
  sink->add(p->container_bits());
  sink->add(static_cast<uint64_t>(p->axis()));
  sink->add(static_cast<uint64_t>(p->order()));
  sink->add(static_cast<uint64_t>(p->sign()));
  sink->add(static_cast<uint64_t>(p->padding()));
}

void walk_scale(const axe::ScaleRef* s, Sink* sink) {
  if (!s) return;
  sink->add(static_cast<uint64_t>(s->constant()));
  sink->add(static_cast<uint64_t>(s->dtype()));
  sink->add(static_cast<uint64_t>(s->layout()));
}

void walk_layout(const axe::QuantLayout* q, Sink* sink) {
  if (!q) return;
  sink->add(q->layout_id());
  sink->add(static_cast<uint64_t>(q->element_type()));
  sink->add(static_cast<uint64_t>(q->dequantized_type()));
  sink->add(q->block_shape());
  walk_scale(q->scale(), sink);
  if (const axe::ZeroPoint* zp = q->zero_point()) {
    sink->add(static_cast<uint64_t>(zp->kind()));
    sink->add(static_cast<uint64_t>(zp->constant()));
    sink->add(static_cast<uint64_t>(zp->dtype()));
    walk_packing(zp->packing(), sink);
    sink->add(static_cast<uint64_t>(zp->stored_bias()));
  }
  walk_scale(q->second_level_scale(), sink);
  sink->add(q->second_level_block_shape());
  walk_packing(q->packing(), sink);
}

void walk_expr(const axe::Expr* e, Sink* sink) {
  if (!e || !e->ops()) return;
  for (const axe::ExprOp* op : *e->ops()) {
    sink->add(static_cast<uint64_t>(op->opcode()));
    sink->add(static_cast<uint64_t>(op->operand()));
  }
}

void walk_binding(const axe::Binding* b, Sink* sink) {
  if (!b) return;
  sink->add(static_cast<uint64_t>(b->kind()));
  sink->add(b->index());
  sink->add(b->offset());
  sink->add(b->size());
  walk_expr(b->value(), sink);
}

void walk_range(const axe::AxeFile& file, const axe::SegmentRange* r, Sink* sink) {
  if (!r) return;
  sink->add(r->segment());
  sink->add(r->offset());
  sink->add(r->size());
  // The reader promises every range of an accepted file lies in its segment.
  const std::span<const uint8_t> bytes = file.range_bytes(*r);
  if (bytes.size() != r->size()) fail("range_bytes() size differs from the range");
  sink->add(bytes);
}

void walk(const axe::AxeFile& file, Sink* sink) {
  const axe::Executable& exe = file.metadata();
  for (uint32_t i = 0; i < file.segments().size(); ++i) {
    const std::span<const uint8_t> bytes = file.segment_bytes(i);
    if (bytes.size() != file.segments()[i].size) fail("segment_bytes() size differs from the entry");
    sink->add(bytes);
  }
  if (const axe::Producer* p = exe.producer()) {
    sink->add(p->name());
    sink->add(p->version());
  }
  if (exe.required_features()) {
    for (const flatbuffers::String* f : *exe.required_features()) sink->add(f);
  }
  if (exe.code_objects()) {
    for (const axe::CodeObject* co : *exe.code_objects()) {
      sink->add(static_cast<uint64_t>(co->kind()));
      sink->add(co->target());
      sink->add(static_cast<uint64_t>(co->segment()));
      sink->add(co->library_name());
      sink->add(co->library_min_version());
    }
  }
  if (exe.kernels()) {
    for (const axe::Kernel* k : *exe.kernels()) {
      sink->add(k->name());
      sink->add(k->code_object());
      sink->add(k->entry_symbol());
      if (k->params()) {
        for (const axe::KernelParam* p : *k->params()) {
          sink->add(p->name());
          sink->add(static_cast<uint64_t>(p->kind()));
          sink->add(static_cast<uint64_t>(p->scalar_type()));
          sink->add(static_cast<uint64_t>(p->access()));
          walk_layout(p->layout(), sink);
        }
      }
      for (const axe::Dim3* d : {k->workgroup_size(), k->cluster_dims()}) {
        if (d) sink->add(uint64_t{d->x()} + d->y() + d->z());
      }
      sink->add(k->dynamic_shared_memory());
    }
  }
  if (exe.constants()) {
    for (const axe::Constant* c : *exe.constants()) {
      sink->add(c->name());
      sink->add(static_cast<uint64_t>(c->dtype()));
      sink->add(c->shape());
      sink->add(c->strides());
      sink->add(c->alignment());
      walk_range(file, c->data(), sink);
      walk_layout(c->quantization(), sink);
      if (c->prepacked()) {
        for (const axe::PrepackedCopy* copy : *c->prepacked()) {
          sink->add(copy->target());
          sink->add(copy->layout_id());
          walk_range(file, copy->data(), sink);
        }
      }
    }
  }
  if (exe.functions()) {
    for (const axe::Function* f : *exe.functions()) {
      sink->add(f->name());
      if (f->symbols()) {
        for (const axe::Symbol* s : *f->symbols()) {
          sink->add(s->name());
          sink->add(s->upper_bound());
        }
      }
      for (const auto* sigs : {f->inputs(), f->outputs()}) {
        if (!sigs) continue;
        for (const axe::TensorSig* sig : *sigs) {
          sink->add(sig->name());
          sink->add(static_cast<uint64_t>(sig->dtype()));
          if (!sig->shape()) continue;
          for (const axe::Dim* d : *sig->shape()) {
            sink->add(d->value());
            sink->add(static_cast<uint64_t>(d->symbol()));
          }
        }
      }
      sink->add(f->arena_size());
      if (!f->commands()) continue;
      for (flatbuffers::uoffset_t i = 0; i < f->commands()->size(); ++i) {
        const void* body = f->commands()->Get(i);
        switch (f->commands_type()->Get(i)) {
          case axe::Command::DispatchCommand: {
            const auto* d = static_cast<const axe::DispatchCommand*>(body);
            sink->add(d->kernel());
            walk_expr(d->workgroup_count_x(), sink);
            walk_expr(d->workgroup_count_y(), sink);
            walk_expr(d->workgroup_count_z(), sink);
            if (d->bindings()) {
              for (const axe::Binding* b : *d->bindings()) walk_binding(b, sink);
            }
            break;
          }
          case axe::Command::CopyCommand: {
            const auto* c = static_cast<const axe::CopyCommand*>(body);
            walk_binding(c->src(), sink);
            walk_expr(c->src_offset(), sink);
            walk_binding(c->dst(), sink);
            walk_expr(c->dst_offset(), sink);
            walk_expr(c->length(), sink);
            break;
          }
          case axe::Command::FillCommand: {
            const auto* c = static_cast<const axe::FillCommand*>(body);
            walk_binding(c->target(), sink);
            walk_expr(c->offset(), sink);
            walk_expr(c->length(), sink);
            sink->add(c->pattern());
            sink->add(c->pattern_size());
            break;
          }
          case axe::Command::CollectiveCommand: {
            const auto* c = static_cast<const axe::CollectiveCommand*>(body);
            if (!f->channels() || c->channel() >= f->channels()->size()) {
              fail("the reader accepted a collective on a channel the function does not have");
            }
            sink->add(static_cast<uint32_t>(c->kind()));
            sink->add(f->channels()->Get(c->channel())->name());
            sink->add(static_cast<uint32_t>(c->dtype()));
            walk_expr(c->count(), sink);
            sink->add(static_cast<uint32_t>(c->op()));
            sink->add(c->root());
            walk_binding(c->send(), sink);
            walk_expr(c->send_offset(), sink);
            walk_binding(c->recv(), sink);
            walk_expr(c->recv_offset(), sink);
            break;
          }
          default:
            fail("the reader accepted a command of an unknown kind");
        }
      }
    }
  }
  if (exe.metadata()) {
    for (const axe::KeyValue* kv : *exe.metadata()) {
      sink->add(kv->key());
      sink->add(kv->value());
    }
  }
}

bool has_host_code(const axe::Executable& exe) {
  if (!exe.code_objects()) return false;
  for (const axe::CodeObject* co : *exe.code_objects()) {
    if (co->kind() == axe::CodeObjectKind::HOST_SHARED_OBJECT) return true;
  }
  return false;
}

// Opens `bytes` with `options`; on success checks and walks the file.
// Returns whether the reader accepted it.
bool open_and_walk(std::span<const uint8_t> bytes, const axe::ReadOptions& options) {
  std::unique_ptr<axe::AxeFile> file;
  axrt::StatusPtr status(axe::AxeFile::open_bytes(bytes, "fuzz.axe", options, &file));
  if (status) {
    if (file) fail("open_bytes() failed but wrote its out-parameter");
    if (status->message.empty()) fail("a refusal without a message");
    return false;
  }
  if (!file) fail("open_bytes() succeeded without a file");
  if (!options.allow_host_code && has_host_code(file->metadata())) {
    fail("allow_host_code = false accepted a host shared object");
  }
  Sink sink;
  walk(*file, &sink);
  sink.add(axe::inspect_text(*file).size());
  sink.add(axe::inspect_json(*file).size());
  axrt::StatusPtr checksums(file->verify_checksums());
  if (options.verify_checksums && checksums) {
    fail("opened with verify_checksums, yet verify_checksums() fails");
  }
  if (!options.verify_checksums) {
    // Verifying while opening must agree with verifying afterwards.
    axe::ReadOptions verifying = options;
    verifying.verify_checksums = true;
    std::unique_ptr<axe::AxeFile> again;
    axrt::StatusPtr reopened(axe::AxeFile::open_bytes(bytes, "fuzz.axe", verifying, &again));
    if (!checksums != !reopened) fail("verify_checksums() and ReadOptions::verify_checksums disagree");
  }
  volatile uint64_t keep = sink.value;
  (void)keep;
  return true;
}

// Recomputes every segment's CRC-32C (for entries inside the input) and the
// header's, and with `fix_size` also sets file_size to the input's size.
void repair(std::vector<uint8_t>* bytes, bool fix_size) {
  uint8_t* p = bytes->data();
  const uint64_t size = bytes->size();
  const uint64_t table = axe::load_u64(p + axe::header_offset::kSegmentTableOffset);
  const uint64_t count = axe::load_u64(p + axe::header_offset::kSegmentCount);
  for (uint64_t i = 0; i < count && table <= size && i < (size - table) / axe::kSegmentEntrySize; ++i) {
    uint8_t* entry = p + table + i * axe::kSegmentEntrySize;
    const uint64_t offset = axe::load_u64(entry);
    const uint64_t length = axe::load_u64(entry + 8);
    if (offset <= size && length <= size - offset) {
      axe::store_u32(entry + 16, axe::crc32c(p + offset, length));
    }
  }
  if (fix_size) axe::store_u64(p + axe::header_offset::kFileSize, size);
  axe::store_u32(p + axe::header_offset::kChecksum,
                 axe::header_checksum(std::span<const uint8_t, axe::kHeaderSize>(p, axe::kHeaderSize)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  axe::ReadOptions plain;
  axe::ReadOptions strict;
  strict.verify_checksums = true;
  strict.allow_host_code = false;
  open_and_walk(input, plain);
  open_and_walk(input, strict);
  if (size >= axe::kHeaderSize) {
    std::vector<uint8_t> repaired(data, data + size);
    repair(&repaired, false);
    if (open_and_walk(repaired, plain)) open_and_walk(repaired, strict);
    repair(&repaired, true);
    open_and_walk(repaired, plain);
  }
  return 0;
}
