// Building .axe files: the one implementation behind the C API of
// include/axrt/format.h (and the Python bindings).
//
// The builder accumulates the metadata as an ExecutableT (the FlatBuffers
// object API) and the segment payloads: copies of the bytes it is given, or
// sources (ByteSource, format/writer.h) it reads only while writing, so that
// a converter never needs memory for all the weights. Each code object gets its
// own kCode segment; all constants share one kConstant segment, laid out in
// the order they were added with each start rounded up to the constant's
// alignment (segments start on 4096-byte boundaries, so offsets aligned
// within the segment are aligned in the file); pre-packed copies share one
// kPrepacked segment the same way. Segment order: code objects, constants,
// pre-packed copies. Nothing depends on pointers, clocks or hash order, so
// the same calls give the same bytes.
//
// Every add_* checks what it can at once (names unique, indices naming
// objects added earlier, kinds and ranges). Writing lays the file out
// piece by piece (writer.h's ContainerStreamer): everything held in memory
// first, verified by the reader before any source is read, then the sources
// streamed through one bounded buffer, and last the full verification with
// checksums over the bytes written, read back; so no file the reader
// refuses ever leaves the builder. Used from one thread at a time.
//
// Format 1.3: the file written lists in required_features every feature it
// uses (docs/format.md, "Required features"): those declared with
// add_required_feature(), then the others it uses, in known_features()
// order. Among them kMutableInputsFeature for a mutable function input
// (TensorSigT::mutable_, 1.2) and kSignedScalarsFeature for a negative
// literal bound to a signed scalar parameter (1.3).
#ifndef AXRT_FORMAT_BUILDER_H_
#define AXRT_FORMAT_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "axrt/base.h"
#include "format/axe_generated.h"
#include "format/container.h"
#include "format/reader.h"
#include "format/writer.h"

namespace axrt::axe {

class Builder {
 public:
  Builder() = default;
  Builder(std::string producer_name, std::string producer_version);

  // A feature readers must know; the builder's own verification accepts it.
  axrt_status_t add_required_feature(std::string feature);
  axrt_status_t add_metadata(std::string key, std::string value);

  // `code_object.segment` is assigned by the builder; `bytes` (empty for
  // KERNEL_LIBRARY) are copied.
  axrt_status_t add_code_object(CodeObjectT code_object, std::span<const uint8_t> bytes,
                                uint32_t* out_index);
  // `kernel.variants`, if any, are checked like add_kernel_variant()'s.
  axrt_status_t add_kernel(KernelT kernel, uint32_t* out_index);
  // Format 1.1: appends another implementation of kernel `kernel` (added
  // earlier) in a code object that does not implement it yet. An empty
  // entry symbol means the kernel's; an absent workgroup size 1x1x1.
  axrt_status_t add_kernel_variant(uint32_t kernel, KernelVariantT variant);
  // `constant.data` and `constant.prepacked` are assigned by the builder;
  // `bytes` are copied. An alignment of 0 means the schema default (64).
  axrt_status_t add_constant(ConstantT constant, std::span<const uint8_t> bytes,
                             uint32_t* out_index);
  // As above, with the data read from `source` (non-null) each time the file
  // is written, a piece of at most kStreamChunkSize bytes at a time; the
  // builder keeps the source until it is destroyed.
  axrt_status_t add_constant(ConstantT constant, std::shared_ptr<ByteSource> source,
                             uint32_t* out_index);
  axrt_status_t add_prepacked_copy(uint32_t constant, std::string target, std::string layout_id,
                                   std::span<const uint8_t> bytes);
  // `function.commands` must be empty; commands are appended with
  // add_command().
  axrt_status_t add_function(FunctionT function, uint32_t* out_index);
  axrt_status_t add_command(uint32_t function, CommandUnion command);

  // The whole file in memory, verified (checksums included) by the reader.
  axrt_status_t finish(std::vector<uint8_t>* out) const;
  // Writes the file to a temporary file beside `path`, verifies it as
  // finish() does (read back through a mapping), and renames it into place;
  // on failure nothing is left behind. Holds no more of the sources' bytes
  // at once than kStreamChunkSize.
  axrt_status_t write_file(const std::string& path) const;

  // The metadata as accumulated (segment indices not yet assigned).
  const ExecutableT& executable() const noexcept { return executable_; }

 private:
  // Fills `variant`'s defaults and checks it as the next variant of
  // `kernel`, against the implementations `kernel` already has.
  axrt_status_t check_variant(const KernelT& kernel, size_t index, KernelVariantT* variant) const;
  axrt_status_t check_layout(const QuantLayoutT& layout, const std::string& owner,
                             const ConstantT* constant) const;
  // `scalar_type`: the parameter's type when the expression is the value
  // of a dispatch's binding for a SCALAR parameter, which alone may be a
  // negative literal (for a signed type); INVALID otherwise.
  axrt_status_t check_expr(const ExprT* expr, const FunctionT& function,
                           const std::string& where, bool required,
                           DType scalar_type = DType::INVALID) const;
  axrt_status_t check_binding(const BindingT* binding, const FunctionT& function,
                              const std::string& where,
                              DType scalar_type = DType::INVALID) const;
  // The metadata as written and the segments' pieces, for the streamer.
  void plan(ExecutableT* executable, std::vector<StreamedSegment>* segments) const;
  // Writes through `output` and verifies the result with `verify`, which
  // opens what was written with the options it is given.
  axrt_status_t write(ContainerOutput* output,
                      const std::function<axrt_status_t(const ReadOptions&)>& verify) const;

  ExecutableT executable_;
  // Per code object; empty for kernel libraries.
  std::vector<std::vector<uint8_t>> code_bytes_;
  // The constant and pre-packed segments' payloads, at their offsets.
  StreamedSegment constant_segment_;
  StreamedSegment prepacked_segment_;
  std::set<std::string> features_;
  std::set<std::string> metadata_keys_;
  std::set<std::string> kernel_names_;
  std::set<std::string> constant_names_;
  std::set<std::string> function_names_;
  // (constant, target, layout id) of every pre-packed copy.
  std::set<std::pair<uint32_t, std::pair<std::string, std::string>>> prepacked_keys_;
};

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_BUILDER_H_
