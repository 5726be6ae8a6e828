// Building .axe files: the one implementation behind the C API of
// include/axrt/format.h (and the Python bindings).
//
// The builder accumulates the metadata as an ExecutableT (the FlatBuffers
// object API) and copies of the segment payloads. Each code object gets its
// own kCode segment; all constants share one kConstant segment, laid out in
// the order they were added with each start rounded up to the constant's
// alignment (segments start on 4096-byte boundaries, so offsets aligned
// within the segment are aligned in the file); pre-packed copies share one
// kPrepacked segment the same way. Segment order: code objects, constants,
// pre-packed copies. Nothing depends on pointers, clocks or hash order, so
// the same calls give the same bytes.
//
// Every add_* checks what it can at once (names unique, indices naming
// objects added earlier, kinds and ranges); finish() then runs the reader's
// full verification over the bytes it assembled, so no file the reader
// refuses ever leaves the builder. Used from one thread at a time.
#ifndef AXRT_FORMAT_BUILDER_H_
#define AXRT_FORMAT_BUILDER_H_

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "axrt/base.h"
#include "format/axe_generated.h"
#include "format/container.h"

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
  axrt_status_t add_prepacked_copy(uint32_t constant, std::string target, std::string layout_id,
                                   std::span<const uint8_t> bytes);
  // `function.commands` must be empty; commands are appended with
  // add_command().
  axrt_status_t add_function(FunctionT function, uint32_t* out_index);
  axrt_status_t add_command(uint32_t function, CommandUnion command);

  // The whole file, verified (checksums included) by the reader.
  axrt_status_t finish(std::vector<uint8_t>* out) const;
  // finish(), then writes `path` through a temporary file in the same
  // directory renamed into place.
  axrt_status_t write_file(const std::string& path) const;

  // The metadata as accumulated (segment indices not yet assigned).
  const ExecutableT& executable() const noexcept { return executable_; }

 private:
  // Fills `variant`'s defaults and checks it as the next variant of
  // `kernel`, against the implementations `kernel` already has.
  axrt_status_t check_variant(const KernelT& kernel, size_t index, KernelVariantT* variant) const;
  axrt_status_t check_layout(const QuantLayoutT& layout, const std::string& owner,
                             const ConstantT* constant) const;
  axrt_status_t check_expr(const ExprT* expr, const FunctionT& function,
                           const std::string& where, bool required) const;
  axrt_status_t check_binding(const BindingT* binding, const FunctionT& function,
                              const std::string& where) const;

  ExecutableT executable_;
  // Per code object; empty for kernel libraries.
  std::vector<std::vector<uint8_t>> code_bytes_;
  std::vector<uint8_t> constant_bytes_;
  std::vector<uint8_t> prepacked_bytes_;
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
