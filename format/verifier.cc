#include "format/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "format/enums.h"
#include "format/quant_layout.h"

namespace axrt::axe {

// The features a format 1.x reader understands. A file lists in
// required_features what a reader must understand to run it, and a file of
// format 1.3 or later lists every feature it uses:
//   "quantization.v1"   quantization layouts (of constants or declared by
//                       kernel parameters)
//   "symbolic-dims.v1"  functions with symbols
//   "prepacked.v1"      constants with pre-packed copies
//   "host-code.v1"      HOST_SHARED_OBJECT code objects
//   "kernel-library.v1" KERNEL_LIBRARY code objects (named, not carried)
//   "mutable-inputs.v1" functions with mutable inputs (format 1.2; required
//                       whenever a file has one)
//   "signed-scalars.v1" negative literals for signed scalar parameters
//                       (format 1.3; required whenever a file has one)
//   "collectives.v1"    functions with channels and collective commands
//                       (format 1.4; required whenever a file has one)
// A reader that understands more (an application's extension) lists it in
// ReadOptions::extra_features.
std::span<const std::string_view> known_features(uint16_t minor) noexcept {
  static constexpr std::array<std::string_view, 8> kFeatures = {
      kQuantizationFeature,  kSymbolicDimsFeature,  kPrepackedFeature,     kHostCodeFeature,
      kKernelLibraryFeature, kMutableInputsFeature, kSignedScalarsFeature, kCollectivesFeature,
  };
  // Readers of 1.0 and 1.1 knew the first five, readers of 1.2 six, of 1.3
  // seven.
  const size_t count = minor >= 4 ? 8 : minor == 3 ? 7 : minor == 2 ? 6 : 5;
  return std::span<const std::string_view>(kFeatures).first(count);
}

namespace {

// Limits of expressions: they are evaluated on every call of a function, so
// they stay small and their evaluation stack fits in a fixed array.
constexpr size_t kMaxExprOps = 64;
constexpr size_t kMaxExprDepth = 16;

// ELF identification and the values the code-object sanity checks need.
constexpr uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
constexpr uint16_t kElfMachineCuda = 190;  // EM_CUDA
constexpr uint16_t kElfTypeDyn = 3;        // ET_DYN
constexpr uint32_t kFatbinMagic = 0xBA55ED50u;

constexpr std::array<std::string_view, 6> kHostArchitectures = {
    "x86_64", "aarch64", "riscv64", "ppc64le", "s390x", "loongarch64",
};

std::string_view view(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

std::span<const uint64_t> span_of(const flatbuffers::Vector<uint64_t>* v) {
  if (v == nullptr) return {};
  return std::span<const uint64_t>(v->data(), v->size());
}

template <typename T>
uint32_t count_of(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// "constant 3 'fc1.weight'", or "constant 3" when it has no name.
std::string object_name(std::string_view kind, uint64_t index, const flatbuffers::String* name) {
  if (name == nullptr || name->size() == 0) return fmt::format("{} {}", kind, index);
  return fmt::format("{} {} '{}'", kind, index, view(name));
}

// "sm_90", "sm_90a", "sm_100f", or with `prefix` "compute_".
bool is_cuda_arch(std::string_view target, std::string_view prefix) {
  if (target.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = target.substr(prefix.size());
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) rest.remove_suffix(1);
  if (rest.size() < 2 || rest.size() > 3) return false;
  for (char c : rest) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool is_host_arch(std::string_view target) {
  for (std::string_view arch : kHostArchitectures) {
    if (target == arch) return true;
  }
  return false;
}

bool is_fatbin_target(std::string_view target) {
  // A comma-separated list of the architectures the fatbin carries.
  while (true) {
    const size_t comma = target.find(',');
    const std::string_view item = target.substr(0, comma);
    if (!is_cuda_arch(item, "sm_") && !is_cuda_arch(item, "compute_")) return false;
    if (comma == std::string_view::npos) return true;
    target.remove_prefix(comma + 1);
  }
}

bool plausible_target(CodeObjectKind kind, std::string_view target) {
  switch (kind) {
    case CodeObjectKind::CUDA_CUBIN:
      return is_cuda_arch(target, "sm_");
    case CodeObjectKind::CUDA_PTX:
      return is_cuda_arch(target, "compute_") || is_cuda_arch(target, "sm_");
    case CodeObjectKind::CUDA_FATBIN:
      return is_fatbin_target(target);
    case CodeObjectKind::HOST_SHARED_OBJECT:
      return is_host_arch(target);
    case CodeObjectKind::KERNEL_LIBRARY:
      // Libraries exist for the host and for CUDA devices.
      return is_host_arch(target) || is_cuda_arch(target, "sm_") ||
             is_cuda_arch(target, "compute_");
    case CodeObjectKind::INVALID:
      break;
  }
  return false;
}

const char* expected_target(CodeObjectKind kind) {
  switch (kind) {
    case CodeObjectKind::CUDA_CUBIN:
      return "sm_NN or sm_NNa";
    case CodeObjectKind::CUDA_PTX:
      return "compute_NN or sm_NN";
    case CodeObjectKind::CUDA_FATBIN:
      return "a comma-separated list of sm_NN / compute_NN";
    case CodeObjectKind::HOST_SHARED_OBJECT:
      return "a host architecture such as x86_64 or aarch64";
    default:
      return "a host architecture or sm_NN";
  }
}

const char* segment_kind_name(uint32_t kind) {
  switch (static_cast<SegmentKind>(kind)) {
    case SegmentKind::kCode:
      return "code";
    case SegmentKind::kConstant:
      return "constant";
    case SegmentKind::kPrepacked:
      return "prepacked";
  }
  return "unknown";
}

// The value of an expression that is a single literal.
std::optional<uint64_t> literal_of(const Expr* expr) {
  if (expr == nullptr || expr->ops() == nullptr || expr->ops()->size() != 1) return std::nullopt;
  const ExprOp* op = expr->ops()->Get(0);
  if (op->opcode() != ExprOpcode::CONST || op->operand() < 0) return std::nullopt;
  return static_cast<uint64_t>(op->operand());
}

bool is_buffer_binding(BindingKind kind) {
  return kind == BindingKind::INPUT || kind == BindingKind::OUTPUT ||
         kind == BindingKind::CONSTANT || kind == BindingKind::ARENA;
}

class Checker {
 public:
  Checker(const Executable& exe, const VerifyContext& context)
      : exe_(exe), context_(context), options_(*context.options) {}

  axrt_status_t run() {
    AXRT_RETURN_IF_ERROR(check_features());
    AXRT_RETURN_IF_ERROR(check_code_objects());
    AXRT_RETURN_IF_ERROR(check_constants());
    AXRT_RETURN_IF_ERROR(check_kernels());
    AXRT_RETURN_IF_ERROR(check_functions());
    AXRT_RETURN_IF_ERROR(check_key_values());
    return nullptr;
  }

 private:
  template <typename... Args>
  axrt_status_t refuse(axrt_status_code_t code, fmt::format_string<Args...> format,
                       Args&&... args) const {
    return make_status(code, "executable '{}': {}", context_.name,
                       fmt::format(format, std::forward<Args>(args)...));
  }

  template <typename... Args>
  axrt_status_t invalid(fmt::format_string<Args...> format, Args&&... args) const {
    return refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, format, std::forward<Args>(args)...);
  }

  // An enum value this reader does not know (a newer minor's addition) is
  // UNIMPLEMENTED; the schema's INVALID value where a real one is needed is
  // INVALID_ARGUMENT.
  template <typename E>
  axrt_status_t check_enum(const std::string& what, std::string_view field, E value,
                           bool allow_zero = true) const {
    if (!known(value)) {
      return refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, "{}: {} {} is not a value this reader knows",
                    what, field, static_cast<unsigned>(value));
    }
    if (!allow_zero && static_cast<unsigned>(value) == 0) {
      return invalid("{}: {} is {}", what, field, enum_name(value));
    }
    return nullptr;
  }

  axrt_status_t check_dtype(const std::string& what, std::string_view field, DType dtype) const {
    return check_enum(what, field, dtype, /*allow_zero=*/false);
  }

  // --- required features ----------------------------------------------------

  axrt_status_t check_features() const {
    const auto* features = exe_.required_features();
    for (uint32_t i = 0; i < count_of(features); ++i) {
      const std::string_view feature = view(features->Get(i));
      if (feature.empty()) return invalid("required_features[{}] is empty", i);
      bool understood = false;
      for (std::string_view known_feature : known_features(options_.reader_minor))
        understood |= feature == known_feature;
      for (const std::string& extra : options_.extra_features) understood |= feature == extra;
      if (!understood) {
        return refuse(AXRT_STATUS_CODE_UNIMPLEMENTED,
                      "requires feature '{}' (required_features[{}]), which this reader does "
                      "not understand",
                      feature, i);
      }
    }
    return nullptr;
  }

  // --- code objects ---------------------------------------------------------

  axrt_status_t check_code_objects() const {
    const auto* objects = exe_.code_objects();
    for (uint32_t i = 0; i < count_of(objects); ++i) {
      AXRT_RETURN_IF_ERROR(check_code_object(i, *objects->Get(i)));
    }
    return nullptr;
  }

  axrt_status_t check_code_object(uint32_t i, const CodeObject& object) const {
    const std::string what = fmt::format("code object {}", i);
    const CodeObjectKind kind = object.kind();
    AXRT_RETURN_IF_ERROR(check_enum(what, "kind", kind, /*allow_zero=*/false));
    const std::string_view target = view(object.target());
    if (target.empty()) return invalid("{} ({}): target is empty", what, enum_name(kind));
    if (kind == CodeObjectKind::HOST_SHARED_OBJECT && !options_.allow_host_code) {
      return refuse(AXRT_STATUS_CODE_PERMISSION_DENIED,
                    "{} is a host shared object (native code for '{}'), which this load does not "
                    "allow: native code must be permitted explicitly",
                    what, target);
    }
    if (kind == CodeObjectKind::HOST_SHARED_OBJECT) {
      AXRT_RETURN_IF_ERROR(check_declared(kHostCodeFeature, what + " is a HOST_SHARED_OBJECT"));
    } else if (kind == CodeObjectKind::KERNEL_LIBRARY) {
      AXRT_RETURN_IF_ERROR(check_declared(kKernelLibraryFeature, what + " is a KERNEL_LIBRARY"));
    }
    if (!plausible_target(kind, target)) {
      return invalid("{} ({}): target '{}' is not {}", what, enum_name(kind), target,
                     expected_target(kind));
    }
    const int32_t segment = object.segment();
    if (kind == CodeObjectKind::KERNEL_LIBRARY) {
      if (segment != -1) {
        return invalid(
            "{} (KERNEL_LIBRARY): segment is {}, but a kernel library is named, not "
            "carried (segment must be -1)",
            what, segment);
      }
      if (view(object.library_name()).empty()) {
        return invalid("{} (KERNEL_LIBRARY): library_name is empty", what);
      }
      return nullptr;
    }
    if (segment < 0 || static_cast<uint64_t>(segment) >= context_.segments.size()) {
      return invalid("{} ({}): segment {} is out of range (the file has {} segments)", what,
                     enum_name(kind), segment, context_.segments.size());
    }
    const SegmentEntry& entry = context_.segments[static_cast<size_t>(segment)];
    if (entry.kind != static_cast<uint32_t>(SegmentKind::kCode)) {
      return invalid("{} ({}): segment {} is a {} segment, not a code segment", what,
                     enum_name(kind), segment, segment_kind_name(entry.kind));
    }
    const std::span<const uint8_t> bytes = context_.file.subspan(entry.offset, entry.size);
    return check_code_bytes(what, kind, segment, bytes);
  }

  axrt_status_t check_elf(const std::string& what, CodeObjectKind kind, int32_t segment,
                          std::span<const uint8_t> bytes) const {
    if (bytes.size() < 20 || std::memcmp(bytes.data(), kElfMagic, 4) != 0) {
      return invalid(
          "{} ({}): segment {} ({} bytes) does not start with the ELF magic "
          "7f 45 4c 46",
          what, enum_name(kind), segment, bytes.size());
    }
    return nullptr;
  }

  axrt_status_t check_code_bytes(const std::string& what, CodeObjectKind kind, int32_t segment,
                                 std::span<const uint8_t> bytes) const {
    switch (kind) {
      case CodeObjectKind::CUDA_CUBIN: {
        AXRT_RETURN_IF_ERROR(check_elf(what, kind, segment, bytes));
        const uint16_t machine = load_u16(bytes.data() + 18);
        if (machine != kElfMachineCuda) {
          return invalid("{} (CUDA_CUBIN): ELF e_machine is {}, not EM_CUDA ({})", what, machine,
                         kElfMachineCuda);
        }
        return nullptr;
      }
      case CodeObjectKind::HOST_SHARED_OBJECT: {
        AXRT_RETURN_IF_ERROR(check_elf(what, kind, segment, bytes));
        const uint16_t type = load_u16(bytes.data() + 16);
        if (type != kElfTypeDyn) {
          return invalid("{} (HOST_SHARED_OBJECT): ELF e_type is {}, not ET_DYN ({})", what, type,
                         kElfTypeDyn);
        }
        return nullptr;
      }
      case CodeObjectKind::CUDA_FATBIN: {
        const uint32_t magic = bytes.size() >= 4 ? load_u32(bytes.data()) : 0;
        if (magic != kFatbinMagic) {
          return invalid(
              "{} (CUDA_FATBIN): segment {} starts with 0x{:08x}, not the fatbin "
              "magic 0x{:08x}",
              what, segment, magic, kFatbinMagic);
        }
        return nullptr;
      }
      case CodeObjectKind::CUDA_PTX:
        return check_ptx(what, segment, bytes);
      default:
        return nullptr;
    }
  }

  axrt_status_t check_ptx(const std::string& what, int32_t segment,
                          std::span<const uint8_t> bytes) const {
    // PTX is text; a trailing NUL (as cuModuleLoadData wants it) is allowed.
    size_t length = bytes.size();
    while (length > 0 && bytes[length - 1] == 0) --length;
    for (size_t i = 0; i < length; ++i) {
      const uint8_t c = bytes[i];
      if (!((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t')) {
        return invalid("{} (CUDA_PTX): byte {} of segment {} is 0x{:02x}, which is not PTX text",
                       what, i, segment, c);
      }
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), length);
    for (std::string_view directive : {std::string_view(".version"), std::string_view(".target")}) {
      if (text.find(directive) == std::string_view::npos) {
        return invalid("{} (CUDA_PTX): segment {} ({} bytes) has no {} directive", what, segment,
                       length, directive);
      }
    }
    return nullptr;
  }

  // --- constants ------------------------------------------------------------

  axrt_status_t check_segment_range(const std::string& what, const SegmentRange& range,
                                    SegmentKind kind) const {
    const uint32_t segment = range.segment();
    if (segment >= context_.segments.size()) {
      return invalid("{}: segment {} is out of range (the file has {} segments)", what, segment,
                     context_.segments.size());
    }
    const SegmentEntry& entry = context_.segments[segment];
    if (entry.kind != static_cast<uint32_t>(kind)) {
      return invalid("{}: segment {} is a {} segment, not a {} segment", what, segment,
                     segment_kind_name(entry.kind), segment_kind_name(static_cast<uint32_t>(kind)));
    }
    uint64_t end;
    if (!checked_add(range.offset(), range.size(), &end) || end > entry.size) {
      return invalid(
          "{}: range at offset {} of {} bytes does not fit in segment {}, which holds "
          "{} bytes",
          what, range.offset(), range.size(), segment, entry.size);
    }
    return nullptr;
  }

  axrt_status_t check_constants() {
    const auto* constants = exe_.constants();
    const uint32_t count = count_of(constants);
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t i = 0; i < count; ++i) {
      const Constant& constant = *constants->Get(i);
      const std::string what = object_name("constant", i, constant.name());
      if (view(constant.name()).empty()) return invalid("{}: name is empty", what);
      const auto [it, inserted] = names.emplace(view(constant.name()), i);
      if (!inserted)
        return invalid("{}: the name is already used by constant {}", what, it->second);
      if (constant.quantization() != nullptr) {
        AXRT_RETURN_IF_ERROR(
            check_declared(kQuantizationFeature, what + " has a quantization layout"));
      }
      if (count_of(constant.prepacked()) != 0) {
        AXRT_RETURN_IF_ERROR(check_declared(kPrepackedFeature, what + " has pre-packed copies"));
      }
      AXRT_RETURN_IF_ERROR(check_constant_storage(what, constant));
    }
    // Layouts refer to other constants (scales, zero points), whose storage
    // the first pass has checked.
    for (uint32_t i = 0; i < count; ++i) {
      const Constant& constant = *constants->Get(i);
      if (constant.quantization() == nullptr) continue;
      const std::string what = object_name("constant", i, constant.name()) + ": quantization";
      AXRT_RETURN_IF_ERROR(
          check_layout_form(what, *constant.quantization(), count_of(constant.shape())));
      AXRT_RETURN_IF_ERROR(check_constant_layout(what, i, constant));
    }
    return nullptr;
  }

  axrt_status_t check_constant_storage(const std::string& what, const Constant& constant) const {
    const DType dtype = constant.dtype();
    AXRT_RETURN_IF_ERROR(check_dtype(what, "dtype", dtype));
    const std::span<const uint64_t> shape = span_of(constant.shape());
    const SegmentRange* data = constant.data();
    if (data == nullptr) return invalid("{}: data range is missing", what);
    AXRT_RETURN_IF_ERROR(check_segment_range(what + ": data", *data, SegmentKind::kConstant));

    const uint64_t alignment = constant.alignment();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kSegmentAlignment) {
      return invalid("{}: alignment {} is not a power of two <= {}", what, alignment,
                     kSegmentAlignment);
    }
    const uint64_t start = context_.segments[data->segment()].offset + data->offset();
    if (start % alignment != 0) {
      return invalid(
          "{}: data starts at file offset {} (segment {} offset {}), which is not a "
          "multiple of its alignment {}",
          what, start, data->segment(), data->offset(), alignment);
    }

    // Packed storage: sub-byte types, and layouts that pack.
    const QuantLayout* layout = constant.quantization();
    const Packing* packing = layout != nullptr ? layout->packing() : nullptr;
    const bool packed = packing != nullptr || dtype_is_sub_byte(dtype);
    if (packing != nullptr) {
      AXRT_RETURN_IF_ERROR(check_packing(what + ": quantization.packing", *packing, shape.size(),
                                         dtype_bits(dtype), enum_name(dtype)));
    }

    const auto* strides = constant.strides();
    if (count_of(strides) != 0) {
      if (strides->size() != shape.size()) {
        return invalid(
            "{}: {} strides for a shape of rank {} ({}); give one per dimension or "
            "none",
            what, strides->size(), shape.size(), format_shape(shape));
      }
      if (packed) {
        return invalid("{}: strides are not supported on packed {} data", what, enum_name(dtype));
      }
      return check_strided_extent(what, constant, shape, *strides);
    }

    uint64_t bytes = 0;
    SizeError error;
    std::string rule;
    if (packing != nullptr) {
      error = packed_byte_size(shape, packing_rule(*packing), &bytes);
      rule = fmt::format(" packed {}-bit into {}-bit words along axis {}", packing->bits(),
                         packing->container_bits(), packing->axis());
    } else {
      error = dense_byte_size(shape, dtype, &bytes);
    }
    if (error == SizeError::kOverflow) {
      return invalid("{}: shape {} x {}{} overflows a 64-bit byte count", what, format_shape(shape),
                     enum_name(dtype), rule);
    }
    if (error == SizeError::kInexact) {
      return invalid(
          "{}: shape {} x {}{} does not fill whole words along the packed axis, but "
          "padding is EXACT",
          what, format_shape(shape), enum_name(dtype), rule);
    }
    if (bytes != data->size()) {
      return invalid("{}: shape {} x {}{} is {} bytes but its data range holds {}", what,
                     format_shape(shape), enum_name(dtype), rule, bytes, data->size());
    }
    return check_prepacked(what, constant);
  }

  axrt_status_t check_strided_extent(const std::string& what, const Constant& constant,
                                     std::span<const uint64_t> shape,
                                     const flatbuffers::Vector<int64_t>& strides) const {
    uint64_t furthest = 0;
    bool empty = false;
    for (uint32_t d = 0; d < shape.size(); ++d) {
      const int64_t stride = strides.Get(d);
      if (stride < 0) {
        return invalid("{}: stride {} of dimension {} is negative", what, stride, d);
      }
      if (shape[d] == 0) empty = true;
      uint64_t reach;
      if (shape[d] != 0 && (!checked_mul(shape[d] - 1, static_cast<uint64_t>(stride), &reach) ||
                            !checked_add(furthest, reach, &furthest))) {
        return invalid("{}: shape {} with strides overflows a 64-bit element offset", what,
                       format_shape(shape));
      }
    }
    uint64_t needed = 0;
    const uint64_t element_bytes = dtype_bits(constant.dtype()) / 8;
    if (!empty &&
        (!checked_add(furthest, 1, &needed) || !checked_mul(needed, element_bytes, &needed))) {
      return invalid("{}: shape {} with strides overflows a 64-bit byte count", what,
                     format_shape(shape));
    }
    if (needed > constant.data()->size()) {
      return invalid(
          "{}: shape {} x {} with strides reaches element {}, needing {} bytes, but "
          "its data range holds {}",
          what, format_shape(shape), enum_name(constant.dtype()), furthest, needed,
          constant.data()->size());
    }
    return check_prepacked(what, constant);
  }

  axrt_status_t check_prepacked(const std::string& what, const Constant& constant) const {
    const auto* copies = constant.prepacked();
    std::map<std::pair<std::string_view, std::string_view>, uint32_t> keys;
    for (uint32_t k = 0; k < count_of(copies); ++k) {
      const PrepackedCopy& copy = *copies->Get(k);
      const std::string copy_what = fmt::format("{}: prepacked[{}]", what, k);
      if (view(copy.target()).empty()) return invalid("{}: target is empty", copy_what);
      if (view(copy.layout_id()).empty()) return invalid("{}: layout_id is empty", copy_what);
      if (copy.data() == nullptr) return invalid("{}: data range is missing", copy_what);
      AXRT_RETURN_IF_ERROR(check_segment_range(copy_what, *copy.data(), SegmentKind::kPrepacked));
      const auto [it, inserted] =
          keys.emplace(std::make_pair(view(copy.target()), view(copy.layout_id())), k);
      if (!inserted) {
        return invalid("{}: (target '{}', layout_id '{}') is already used by prepacked[{}]",
                       copy_what, view(copy.target()), view(copy.layout_id()), it->second);
      }
    }
    return nullptr;
  }

  // --- quantization layouts ---------------------------------------------------

  axrt_status_t check_packing(const std::string& what, const Packing& packing, size_t rank,
                              uint32_t element_bits, const std::string& element_name) const {
    AXRT_RETURN_IF_ERROR(check_enum(what, "order", packing.order()));
    AXRT_RETURN_IF_ERROR(check_enum(what, "sign", packing.sign()));
    AXRT_RETURN_IF_ERROR(check_enum(what, "padding", packing.padding()));
    const unsigned bits = packing.bits();
    const unsigned container = packing.container_bits();
    if (bits != 1 && bits != 2 && bits != 4 && bits != 8) {
      return invalid("{}: bits is {}; it must be 1, 2, 4 or 8", what, bits);
    }
    if (container != 8 && container != 16 && container != 32 && container != 64) {
      return invalid("{}: container_bits is {}; it must be 8, 16, 32 or 64", what, container);
    }
    if (container % bits != 0) {
      return invalid("{}: bits {} does not divide container_bits {}", what, bits, container);
    }
    if (packing.axis() < 0 || static_cast<uint64_t>(packing.axis()) >= rank) {
      return invalid("{}: axis {} is out of range for rank {}", what, packing.axis(), rank);
    }
    if (packing.order() == ElementOrder::AWQ && (bits != 4 || container != 32)) {
      return invalid(
          "{}: AWQ element order is defined for 4-bit elements in 32-bit words, not "
          "{}-bit in {}-bit",
          what, bits, container);
    }
    if (element_bits != 0 && bits != element_bits) {
      return invalid("{}: bits is {} but the element type {} has {} bits", what, bits, element_name,
                     element_bits);
    }
    return nullptr;
  }

  // The checks a layout passes on its own: on a constant, and as declared by a
  // kernel parameter (where `rank` is the block shape's length).
  axrt_status_t check_layout_form(const std::string& what, const QuantLayout& layout,
                                  size_t rank) const {
    AXRT_RETURN_IF_ERROR(check_dtype(what, "element_type", layout.element_type()));
    AXRT_RETURN_IF_ERROR(check_dtype(what, "dequantized_type", layout.dequantized_type()));
    if (!dtype_is_wide_float(layout.dequantized_type())) {
      return invalid(
          "{}: dequantized_type {} is not a floating-point type (FLOAT16, BFLOAT16, "
          "FLOAT32 or FLOAT64)",
          what, enum_name(layout.dequantized_type()));
    }
    if (count_of(layout.block_shape()) != rank) {
      return invalid("{}: block_shape {} has {} entries for a constant of rank {}", what,
                     format_shape(span_of(layout.block_shape())), count_of(layout.block_shape()),
                     rank);
    }
    const ScaleRef* scale = layout.scale();
    if (scale == nullptr) return invalid("{}: scale is missing", what);
    AXRT_RETURN_IF_ERROR(check_scale_form(what + ".scale", *scale, rank, /*allow_swizzle=*/true));

    if (const ZeroPoint* zero = layout.zero_point()) {
      const std::string zwhat = what + ".zero_point";
      AXRT_RETURN_IF_ERROR(check_enum(zwhat, "kind", zero->kind()));
      AXRT_RETURN_IF_ERROR(check_enum(zwhat, "dtype", zero->dtype()));
      if (zero->kind() == ZeroPointKind::NONE) {
        if (zero->stored_bias() != 0) {
          return invalid("{}: stored_bias is {} but kind is NONE", zwhat, zero->stored_bias());
        }
      } else {
        AXRT_RETURN_IF_ERROR(check_dtype(zwhat, "dtype", zero->dtype()));
        if (zero->kind() == ZeroPointKind::FLOAT && !dtype_is_float(zero->dtype())) {
          return invalid("{}: kind FLOAT needs a floating-point dtype, not {}", zwhat,
                         enum_name(zero->dtype()));
        }
        if (zero->kind() == ZeroPointKind::INTEGER && !dtype_is_integer(zero->dtype())) {
          return invalid("{}: kind INTEGER needs an integer dtype, not {}", zwhat,
                         enum_name(zero->dtype()));
        }
        if (const Packing* packing = zero->packing()) {
          AXRT_RETURN_IF_ERROR(check_packing(zwhat + ".packing", *packing, rank,
                                             dtype_bits(zero->dtype()), enum_name(zero->dtype())));
        }
      }
    }

    if (const ScaleRef* second = layout.second_level_scale()) {
      AXRT_RETURN_IF_ERROR(
          check_scale_form(what + ".second_level_scale", *second, rank, /*allow_swizzle=*/false));
      if (count_of(layout.second_level_block_shape()) != rank) {
        return invalid("{}: second_level_block_shape {} has {} entries for a scale grid of rank {}",
                       what, format_shape(span_of(layout.second_level_block_shape())),
                       count_of(layout.second_level_block_shape()), rank);
      }
    } else if (count_of(layout.second_level_block_shape()) != 0) {
      return invalid("{}: second_level_block_shape {} is given without a second_level_scale", what,
                     format_shape(span_of(layout.second_level_block_shape())));
    }

    if (const Packing* packing = layout.packing()) {
      AXRT_RETURN_IF_ERROR(check_packing(what + ".packing", *packing, rank,
                                         dtype_bits(layout.element_type()),
                                         enum_name(layout.element_type())));
    }
    return nullptr;
  }

  axrt_status_t check_scale_form(const std::string& what, const ScaleRef& scale, size_t rank,
                                 bool allow_swizzle) const {
    AXRT_RETURN_IF_ERROR(check_dtype(what, "dtype", scale.dtype()));
    AXRT_RETURN_IF_ERROR(check_enum(what, "layout", scale.layout()));
    if (!dtype_is_float(scale.dtype())) {
      return invalid("{}: dtype {} is not a floating-point type", what, enum_name(scale.dtype()));
    }
    if (scale.layout() == ScaleLayout::GRID_TRANSPOSED && rank < 2) {
      return invalid("{}: GRID_TRANSPOSED needs a grid of rank >= 2, not {}", what, rank);
    }
    if (scale.layout() == ScaleLayout::SWIZZLED_128X4 && !allow_swizzle) {
      return invalid("{}: layout SWIZZLED_128X4 is defined only for first-level scales", what);
    }
    return nullptr;
  }

  // The constant a layout refers to: in range and not the constant itself.
  axrt_status_t check_reference(const std::string& what, int32_t index, uint32_t self,
                                const Constant** out) const {
    const uint32_t count = count_of(exe_.constants());
    if (index < 0 || static_cast<uint64_t>(index) >= count) {
      return invalid("{}: constant {} is out of range (the file has {} constants)", what, index,
                     count);
    }
    if (static_cast<uint32_t>(index) == self) {
      return invalid("{}: constant {} is the quantized constant itself", what, index);
    }
    *out = exe_.constants()->Get(static_cast<uint32_t>(index));
    return nullptr;
  }

  // `expected` is a grid; a constant of one element stands for an all-ones grid
  // of any rank (a per-tensor scale may be stored as a scalar).
  static bool shape_matches(std::span<const uint64_t> actual, std::span<const uint64_t> expected) {
    if (std::equal(actual.begin(), actual.end(), expected.begin(), expected.end())) return true;
    uint64_t a = 0;
    uint64_t e = 0;
    return element_count(actual, &a) && element_count(expected, &e) && a == 1 && e == 1;
  }

  axrt_status_t check_scale_data(const std::string& what, const ScaleRef& scale, uint32_t self,
                                 const std::vector<uint64_t>& grid) const {
    const Constant* target = nullptr;
    AXRT_RETURN_IF_ERROR(check_reference(what, scale.constant(), self, &target));
    const std::string target_name =
        object_name("constant", static_cast<uint32_t>(scale.constant()), target->name());
    if (scale.dtype() != target->dtype()) {
      return invalid("{}: dtype {} differs from the dtype {} of {}", what, enum_name(scale.dtype()),
                     enum_name(target->dtype()), target_name);
    }
    const std::span<const uint64_t> shape = span_of(target->shape());
    switch (scale.layout()) {
      case ScaleLayout::GRID:
        if (!shape_matches(shape, grid)) {
          return invalid("{}: {} has shape {} but the block grid is {}", what, target_name,
                         format_shape(shape), format_shape(grid));
        }
        return nullptr;
      case ScaleLayout::GRID_TRANSPOSED: {
        std::vector<uint64_t> transposed = grid;
        std::swap(transposed[transposed.size() - 1], transposed[transposed.size() - 2]);
        if (!shape_matches(shape, transposed)) {
          return invalid("{}: {} has shape {} but the transposed block grid is {} (grid {})", what,
                         target_name, format_shape(shape), format_shape(transposed),
                         format_shape(grid));
        }
        return nullptr;
      }
      case ScaleLayout::SWIZZLED_128X4: {
        uint64_t elements;
        uint64_t bytes;
        if (!swizzled_128x4_elements(grid, &elements) ||
            !checked_mul(elements, dtype_bits(scale.dtype()) / 8, &bytes)) {
          return invalid("{}: the swizzled scale storage of grid {} overflows 64 bits", what,
                         format_shape(grid));
        }
        if (bytes != target->data()->size()) {
          return invalid(
              "{}: {} holds {} bytes but grid {} padded to 128x4 tiles of {} is {} "
              "bytes",
              what, target_name, target->data()->size(), format_shape(grid),
              enum_name(scale.dtype()), bytes);
        }
        return nullptr;
      }
    }
    return nullptr;
  }

  axrt_status_t check_constant_layout(const std::string& what, uint32_t self,
                                      const Constant& constant) const {
    const QuantLayout& layout = *constant.quantization();
    if (layout.element_type() != constant.dtype()) {
      return invalid("{}: element_type {} does not match the constant's dtype {}", what,
                     enum_name(layout.element_type()), enum_name(constant.dtype()));
    }
    const std::span<const uint64_t> shape = span_of(constant.shape());
    const std::vector<uint64_t> grid = block_grid(shape, span_of(layout.block_shape()));
    AXRT_RETURN_IF_ERROR(check_scale_data(what + ".scale", *layout.scale(), self, grid));

    const ZeroPoint* zero = layout.zero_point();
    if (zero != nullptr && zero->kind() == ZeroPointKind::NONE && zero->constant() != -1) {
      return invalid("{}.zero_point: kind is NONE but constant is {} (must be -1)", what,
                     zero->constant());
    }
    if (zero != nullptr && zero->kind() != ZeroPointKind::NONE) {
      AXRT_RETURN_IF_ERROR(check_zero_point_data(what + ".zero_point", *zero, self, grid));
    }

    if (const ScaleRef* second = layout.second_level_scale()) {
      const std::vector<uint64_t> second_grid =
          block_grid(grid, span_of(layout.second_level_block_shape()));
      AXRT_RETURN_IF_ERROR(
          check_scale_data(what + ".second_level_scale", *second, self, second_grid));
    }
    return nullptr;
  }

  // Zero points have the grid's shape. Packed zero points (GPTQ's qzeros) are
  // stored as container words: an integer constant whose width is
  // container_bits, with the packed axis holding the number of words.
  axrt_status_t check_zero_point_data(const std::string& what, const ZeroPoint& zero, uint32_t self,
                                      const std::vector<uint64_t>& grid) const {
    const Constant* target = nullptr;
    AXRT_RETURN_IF_ERROR(check_reference(what, zero.constant(), self, &target));
    const std::string target_name =
        object_name("constant", static_cast<uint32_t>(zero.constant()), target->name());
    const std::span<const uint64_t> shape = span_of(target->shape());
    std::vector<uint64_t> expected = grid;
    if (const Packing* packing = zero.packing()) {
      const uint32_t container = packing->container_bits();
      if (!dtype_is_integer(target->dtype()) || dtype_bits(target->dtype()) != container) {
        return invalid("{}: packed zero points are {}-bit words, but {} has dtype {}", what,
                       container, target_name, enum_name(target->dtype()));
      }
      const size_t axis = static_cast<size_t>(packing->axis());
      uint64_t row_bits;
      if (!checked_mul(grid[axis], packing->bits(), &row_bits)) {
        return invalid("{}: the packed zero points of grid {} overflow 64 bits", what,
                       format_shape(grid));
      }
      if (row_bits % container != 0 && packing->padding() == PaddingRule::EXACT) {
        return invalid(
            "{}: {} zero points of {} bits along axis {} do not fill whole {}-bit "
            "words, but padding is EXACT",
            what, grid[axis], packing->bits(), axis, container);
      }
      expected[axis] = row_bits / container + (row_bits % container != 0 ? 1 : 0);
      if (expected != std::vector<uint64_t>(shape.begin(), shape.end())) {
        return invalid("{}: {} has shape {} but grid {} packed along axis {} is {}", what,
                       target_name, format_shape(shape), format_shape(grid), axis,
                       format_shape(expected));
      }
      return nullptr;
    }
    if (zero.dtype() != target->dtype()) {
      return invalid("{}: dtype {} differs from the dtype {} of {}", what, enum_name(zero.dtype()),
                     enum_name(target->dtype()), target_name);
    }
    if (!shape_matches(shape, grid)) {
      return invalid("{}: {} has shape {} but the block grid is {}", what, target_name,
                     format_shape(shape), format_shape(grid));
    }
    return nullptr;
  }

  // --- kernels --------------------------------------------------------------

  axrt_status_t check_kernels() const {
    const auto* kernels = exe_.kernels();
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t i = 0; i < count_of(kernels); ++i) {
      const Kernel& kernel = *kernels->Get(i);
      const std::string what = object_name("kernel", i, kernel.name());
      if (view(kernel.name()).empty()) return invalid("{}: name is empty", what);
      const auto [it, inserted] = names.emplace(view(kernel.name()), i);
      if (!inserted) return invalid("{}: the name is already used by kernel {}", what, it->second);
      AXRT_RETURN_IF_ERROR(check_kernel(what, kernel));
    }
    return nullptr;
  }

  // The fields every implementation of a kernel has: the kernel's own
  // (its primary implementation) and each variant's.
  axrt_status_t check_implementation(const std::string& what, uint32_t code_object,
                                     const flatbuffers::String* entry_symbol, const Dim3* size,
                                     const Dim3* cluster) const {
    const uint32_t objects = count_of(exe_.code_objects());
    if (code_object >= objects) {
      return invalid("{}: code_object {} is out of range (the file has {} code objects)", what,
                     code_object, objects);
    }
    if (view(entry_symbol).empty()) return invalid("{}: entry_symbol is empty", what);
    if (size == nullptr) return invalid("{}: workgroup_size is missing", what);
    if (size->x() == 0 || size->y() == 0 || size->z() == 0) {
      return invalid("{}: workgroup_size is [{}, {}, {}]; every component must be >= 1", what,
                     size->x(), size->y(), size->z());
    }
    if (cluster != nullptr) {
      const bool none = cluster->x() == 0 && cluster->y() == 0 && cluster->z() == 0;
      const bool all = cluster->x() != 0 && cluster->y() != 0 && cluster->z() != 0;
      if (!none && !all) {
        return invalid(
            "{}: cluster_dims [{}, {}, {}] mixes 0 and non-zero; use all 0 (no "
            "clusters) or every component >= 1",
            what, cluster->x(), cluster->y(), cluster->z());
      }
    }
    return nullptr;
  }

  axrt_status_t check_kernel(const std::string& what, const Kernel& kernel) const {
    AXRT_RETURN_IF_ERROR(check_implementation(what, kernel.code_object(), kernel.entry_symbol(),
                                              kernel.workgroup_size(), kernel.cluster_dims()));
    // Variants (format 1.1): more implementations of the same parameters,
    // each in its own code object. A loader takes the first it can load, so
    // two implementations in one code object would be ambiguous.
    std::unordered_map<uint32_t, std::string> implemented;  // code object -> by what
    implemented.emplace(kernel.code_object(), "the kernel's primary implementation");
    const auto* variants = kernel.variants();
    for (uint32_t v = 0; v < count_of(variants); ++v) {
      const KernelVariant& variant = *variants->Get(v);
      const std::string vwhat = fmt::format("{}: variant {}", what, v);
      AXRT_RETURN_IF_ERROR(check_implementation(vwhat, variant.code_object(),
                                                variant.entry_symbol(), variant.workgroup_size(),
                                                variant.cluster_dims()));
      const auto [it, inserted] =
          implemented.emplace(variant.code_object(), fmt::format("variant {}", v));
      if (!inserted) {
        return invalid("{}: code object {} already holds {}; each implementation of a kernel "
                       "uses its own code object",
                       vwhat, variant.code_object(), it->second);
      }
    }
    const auto* params = kernel.params();
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t j = 0; j < count_of(params); ++j) {
      const KernelParam& param = *params->Get(j);
      const std::string pwhat = what + ": " + object_name("parameter", j, param.name());
      if (view(param.name()).empty()) return invalid("{}: name is empty", pwhat);
      const auto [it, inserted] = names.emplace(view(param.name()), j);
      if (!inserted) {
        return invalid("{}: the name is already used by parameter {}", pwhat, it->second);
      }
      AXRT_RETURN_IF_ERROR(check_enum(pwhat, "kind", param.kind(), /*allow_zero=*/false));
      AXRT_RETURN_IF_ERROR(check_enum(pwhat, "access", param.access()));
      AXRT_RETURN_IF_ERROR(check_enum(pwhat, "scalar_type", param.scalar_type()));
      if (param.kind() == ParamKind::SCALAR) {
        const uint32_t bits = dtype_bits(param.scalar_type());
        if (bits == 0 || bits % 8 != 0) {
          return invalid("{}: a SCALAR parameter needs a scalar_type of whole bytes, not {}", pwhat,
                         enum_name(param.scalar_type()));
        }
        if (param.layout() != nullptr) {
          return invalid("{}: a SCALAR parameter cannot declare a quantization layout", pwhat);
        }
      } else if (const QuantLayout* layout = param.layout()) {
        AXRT_RETURN_IF_ERROR(check_declared(
            kQuantizationFeature, fmt::format("{} {} declares a quantization layout", what,
                                              object_name("parameter", j, param.name()))));
        AXRT_RETURN_IF_ERROR(
            check_layout_form(pwhat + ": layout", *layout, count_of(layout->block_shape())));
      }
    }
    return nullptr;
  }

  // --- functions ------------------------------------------------------------

  axrt_status_t check_functions() const {
    const auto* functions = exe_.functions();
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t i = 0; i < count_of(functions); ++i) {
      const Function& function = *functions->Get(i);
      const std::string what = object_name("function", i, function.name());
      if (view(function.name()).empty()) return invalid("{}: name is empty", what);
      const auto [it, inserted] = names.emplace(view(function.name()), i);
      if (!inserted) {
        return invalid("{}: the name is already used by function {}", what, it->second);
      }
      AXRT_RETURN_IF_ERROR(check_function(what, function));
    }
    return nullptr;
  }

  axrt_status_t check_function(const std::string& what, const Function& function) const {
    const auto* symbols = function.symbols();
    if (count_of(symbols) != 0) {
      AXRT_RETURN_IF_ERROR(check_declared(kSymbolicDimsFeature, what + " has symbols"));
    }
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t s = 0; s < count_of(symbols); ++s) {
      const Symbol& symbol = *symbols->Get(s);
      const std::string swhat = what + ": " + object_name("symbol", s, symbol.name());
      if (view(symbol.name()).empty()) return invalid("{}: name is empty", swhat);
      const auto [it, inserted] = names.emplace(view(symbol.name()), s);
      if (!inserted) return invalid("{}: the name is already used by symbol {}", swhat, it->second);
      if (symbol.upper_bound() == 0) return invalid("{}: upper_bound is 0; it must be >= 1", swhat);
    }
    AXRT_RETURN_IF_ERROR(check_signatures(what, "input", function.inputs(), function));
    AXRT_RETURN_IF_ERROR(check_signatures(what, "output", function.outputs(), function));
    AXRT_RETURN_IF_ERROR(check_mutable(what, function));
    AXRT_RETURN_IF_ERROR(check_channels(what, function));

    const auto* types = function.commands_type();
    const auto* commands = function.commands();
    for (uint32_t c = 0; c < count_of(types); ++c) {
      const Command type = types->GetEnum<Command>(c);
      const std::string cwhat = fmt::format("{}: command {}", what, c);
      // The FlatBuffers Verifier passes union members of unknown types
      // without looking at them, so nothing of such a command may be read.
      AXRT_RETURN_IF_ERROR(check_enum(cwhat, "type", type, /*allow_zero=*/false));
      if (type == Command::CollectiveCommand && options_.reader_minor < 4) {
        return refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, "{}: type {} is not a value this reader knows",
                      cwhat, static_cast<unsigned>(type));
      }
      const void* value = commands->Get(c);
      switch (type) {
        case Command::DispatchCommand:
          AXRT_RETURN_IF_ERROR(check_dispatch(
              cwhat + " (dispatch)", *static_cast<const DispatchCommand*>(value), function));
          break;
        case Command::CopyCommand:
          AXRT_RETURN_IF_ERROR(
              check_copy(cwhat + " (copy)", *static_cast<const CopyCommand*>(value), function));
          break;
        case Command::FillCommand:
          AXRT_RETURN_IF_ERROR(
              check_fill(cwhat + " (fill)", *static_cast<const FillCommand*>(value), function));
          break;
        case Command::CollectiveCommand:
          AXRT_RETURN_IF_ERROR(check_collective(
              cwhat + " (collective)", *static_cast<const CollectiveCommand*>(value), function));
          break;
        case Command::NONE:
          break;
      }
    }
    return nullptr;
  }

  axrt_status_t check_signatures(const std::string& what, std::string_view kind,
                                 const flatbuffers::Vector<flatbuffers::Offset<TensorSig>>* sigs,
                                 const Function& function) const {
    const uint32_t symbols = count_of(function.symbols());
    for (uint32_t k = 0; k < count_of(sigs); ++k) {
      const TensorSig& sig = *sigs->Get(k);
      const std::string swhat = what + ": " + object_name(kind, k, sig.name());
      AXRT_RETURN_IF_ERROR(check_dtype(swhat, "dtype", sig.dtype()));
      const auto* shape = sig.shape();
      for (uint32_t m = 0; m < count_of(shape); ++m) {
        const int32_t symbol = shape->Get(m)->symbol();
        if (symbol < -1 || (symbol >= 0 && static_cast<uint32_t>(symbol) >= symbols)) {
          return invalid(
              "{}: dimension {} refers to symbol {}, which is out of range (the "
              "function has {} symbols)",
              swhat, m, symbol, symbols);
        }
      }
    }
    return nullptr;
  }

  // Format 1.2: an input the commands may write. A reader that predates it
  // (ReadOptions::reader_minor < 2) reads every input as read-only.
  bool is_mutable_input(const Function& function, uint32_t index) const {
    if (options_.reader_minor < 2) return false;
    const auto* inputs = function.inputs();
    return index < count_of(inputs) && inputs->Get(index)->mutable_();
  }

  // Mutable inputs need the feature that makes older readers refuse the
  // file rather than read them as read-only; outputs cannot be mutable.
  axrt_status_t check_mutable(const std::string& what, const Function& function) const {
    if (options_.reader_minor < 2) return nullptr;
    const auto* outputs = function.outputs();
    for (uint32_t k = 0; k < count_of(outputs); ++k) {
      if (outputs->Get(k)->mutable_()) {
        return invalid("{}: {} is marked mutable; only inputs can be", what,
                       object_name("output", k, outputs->Get(k)->name()));
      }
    }
    const auto* inputs = function.inputs();
    for (uint32_t k = 0; k < count_of(inputs); ++k) {
      if (!inputs->Get(k)->mutable_() || requires_feature(kMutableInputsFeature)) continue;
      return invalid("{}: {} is mutable, but required_features does not list '{}'", what,
                     object_name("input", k, inputs->Get(k)->name()), kMutableInputsFeature);
    }
    return nullptr;
  }

  bool requires_feature(std::string_view name) const {
    const auto* features = exe_.required_features();
    for (uint32_t i = 0; i < count_of(features); ++i) {
      if (view(features->Get(i)) == name) return true;
    }
    return false;
  }

  // Format 1.3: a file lists every feature it uses, so that what a reader
  // must understand is never guessed from the contents. Files of earlier
  // minors (and a reader acting as one before 1.3) had to list only
  // mutable-inputs.v1, and keep reading as they did. `use` says what in
  // the file uses `feature`.
  axrt_status_t check_declared(std::string_view feature, const std::string& use) const {
    if (context_.file_minor < 3 || options_.reader_minor < 3 || requires_feature(feature)) {
      return nullptr;
    }
    return invalid(
        "{}, which needs feature '{}', but required_features does not list it (a file of format "
        "1.{} lists every feature it uses)",
        use, feature, context_.file_minor);
  }

  // Expressions compute unsigned values. Format 1.3: the value of a SCALAR
  // binding for a parameter of a signed type may be one negative literal,
  // in a file that requires signed-scalars.v1. `scalar_type` is INVALID
  // for every other expression.
  axrt_status_t check_negative_literal(const std::string& what, int64_t operand,
                                       uint32_t op_count, DType scalar_type,
                                       const std::string& pname) const {
    if (scalar_type == DType::INVALID || options_.reader_minor < 3) {
      return invalid("{}: CONST operand {} is negative (values are unsigned)", what, operand);
    }
    if (!dtype_takes_negative_literal(scalar_type)) {
      return invalid("{}: CONST operand {} is negative, but {} is {}, which takes no negative "
                     "value",
                     what, operand, pname, enum_name(scalar_type));
    }
    if (op_count != 1) {
      return invalid("{}: CONST operand {} is negative inside an expression of {} ops; {} takes a "
                     "negative value only as a literal alone (expressions compute unsigned "
                     "values)",
                     what, operand, op_count, pname);
    }
    if (!requires_feature(kSignedScalarsFeature)) {
      return invalid("{}: the negative literal {} for {} ({}) needs '{}' in required_features",
                     what, operand, pname, enum_name(scalar_type), kSignedScalarsFeature);
    }
    return nullptr;
  }

  // `scalar_type` and `pname`: the parameter, when `expr` is the value of a
  // dispatch's SCALAR binding for a SCALAR parameter.
  axrt_status_t check_expr(const std::string& what, const Expr* expr, const Function& function,
                           DType scalar_type = DType::INVALID,
                           const std::string& pname = {}) const {
    if (expr == nullptr) return invalid("{} is missing", what);
    const auto* ops = expr->ops();
    const uint32_t count = count_of(ops);
    if (count == 0) return invalid("{} has no ops", what);
    if (count > kMaxExprOps) {
      return invalid("{} has {} ops; at most {} are allowed", what, count, kMaxExprOps);
    }
    const uint32_t symbols = count_of(function.symbols());
    size_t depth = 0;
    for (uint32_t k = 0; k < count; ++k) {
      const ExprOp& op = *ops->Get(k);
      const std::string owhat = fmt::format("{} op {}", what, k);
      AXRT_RETURN_IF_ERROR(check_enum(owhat, "opcode", op.opcode(), /*allow_zero=*/false));
      switch (op.opcode()) {
        case ExprOpcode::CONST:
          if (op.operand() < 0) {
            AXRT_RETURN_IF_ERROR(
                check_negative_literal(owhat, op.operand(), count, scalar_type, pname));
          }
          ++depth;
          break;
        case ExprOpcode::SYMBOL:
          if (op.operand() < 0 || static_cast<uint64_t>(op.operand()) >= symbols) {
            return invalid("{}: symbol {} is out of range (the function has {} symbols)", owhat,
                           op.operand(), symbols);
          }
          ++depth;
          break;
        default:
          if (depth < 2) {
            return invalid("{}: {} needs two values but the stack holds {}", owhat,
                           enum_name(op.opcode()), depth);
          }
          --depth;
          break;
      }
      if (depth > kMaxExprDepth) {
        return invalid("{}: the stack grows to {} values; at most {} are allowed", owhat, depth,
                       kMaxExprDepth);
      }
    }
    if (depth != 1) return invalid("{} leaves {} values on the stack instead of 1", what, depth);
    return nullptr;
  }

  axrt_status_t check_binding(const std::string& what, const Binding* binding,
                              const Function& function, DType scalar_type = DType::INVALID,
                              const std::string& pname = {}) const {
    if (binding == nullptr) return invalid("{} is missing", what);
    const BindingKind kind = binding->kind();
    AXRT_RETURN_IF_ERROR(check_enum(what, "kind", kind, /*allow_zero=*/false));
    const uint32_t index = binding->index();
    uint32_t limit = 0;
    const char* noun = nullptr;
    switch (kind) {
      case BindingKind::INPUT:
        limit = count_of(function.inputs());
        noun = "inputs";
        break;
      case BindingKind::OUTPUT:
        limit = count_of(function.outputs());
        noun = "outputs";
        break;
      case BindingKind::CONSTANT:
        limit = count_of(exe_.constants());
        noun = "constants";
        break;
      case BindingKind::ARENA: {
        uint64_t end;
        if (!checked_add(binding->offset(), binding->size(), &end) || end > function.arena_size()) {
          return invalid("{}: arena slice at offset {} of {} bytes exceeds the arena of {} bytes",
                         what, binding->offset(), binding->size(), function.arena_size());
        }
        break;
      }
      case BindingKind::SCALAR:
        if (binding->value() == nullptr) return invalid("{}: a SCALAR binding needs a value", what);
        break;
      default:
        break;
    }
    if (noun != nullptr && index >= limit) {
      return invalid("{}: {} {} is out of range (there are {} {})", what, enum_name(kind), index,
                     limit, noun);
    }
    if (binding->value() != nullptr) {
      AXRT_RETURN_IF_ERROR(
          check_expr(what + " value", binding->value(), function, scalar_type, pname));
    }
    return nullptr;
  }

  // The byte size of what a buffer binding refers to, when it is static.
  std::optional<uint64_t> static_size(const Binding& binding, const Function& function) const {
    switch (binding.kind()) {
      case BindingKind::CONSTANT:
        return exe_.constants()->Get(binding.index())->data()->size();
      case BindingKind::ARENA:
        return binding.size();
      case BindingKind::INPUT:
      case BindingKind::OUTPUT: {
        const auto* sigs =
            binding.kind() == BindingKind::INPUT ? function.inputs() : function.outputs();
        const TensorSig& sig = *sigs->Get(binding.index());
        std::vector<uint64_t> shape;
        for (uint32_t m = 0; m < count_of(sig.shape()); ++m) {
          const Dim& dim = *sig.shape()->Get(m);
          if (dim.symbol() != -1) return std::nullopt;
          shape.push_back(dim.value());
        }
        uint64_t bytes;
        if (dense_byte_size(shape, sig.dtype(), &bytes) != SizeError::kNone) return std::nullopt;
        return bytes;
      }
      default:
        return std::nullopt;
    }
  }

  axrt_status_t check_static_range(const std::string& what, const Binding& binding,
                                   const Expr* offset, const Expr* length,
                                   const Function& function) const {
    const std::optional<uint64_t> bytes = literal_of(length);
    if (!bytes) return nullptr;
    return check_static_bytes(what, binding, offset, *bytes, function);
  }

  axrt_status_t check_static_bytes(const std::string& what, const Binding& binding,
                                   const Expr* offset, uint64_t bytes,
                                   const Function& function) const {
    const std::optional<uint64_t> size = static_size(binding, function);
    const std::optional<uint64_t> start = offset == nullptr ? 0 : literal_of(offset);
    if (!size || !start) return nullptr;
    uint64_t end;
    if (!checked_add(*start, bytes, &end) || end > *size) {
      return invalid("{}: a range of {} bytes at offset {} exceeds the {} bytes of {}", what,
                     bytes, *start, *size, binding_target(binding, function));
    }
    return nullptr;
  }

  // What a checked buffer binding refers to, for messages.
  std::string binding_target(const Binding& binding, const Function& function) const {
    switch (binding.kind()) {
      case BindingKind::CONSTANT:
        return object_name("constant", binding.index(),
                           exe_.constants()->Get(binding.index())->name());
      case BindingKind::INPUT:
        return object_name("input", binding.index(),
                           function.inputs()->Get(binding.index())->name());
      case BindingKind::OUTPUT:
        return object_name("output", binding.index(),
                           function.outputs()->Get(binding.index())->name());
      case BindingKind::ARENA:
        return fmt::format("the arena slice at offset {}", binding.offset());
      default:
        return enum_name(binding.kind());
    }
  }

  // Constants and inputs are read-only, mutable inputs (1.2) excepted.
  bool is_read_only(const Binding& binding, const Function& function) const {
    if (binding.kind() == BindingKind::CONSTANT) return true;
    return binding.kind() == BindingKind::INPUT && !is_mutable_input(function, binding.index());
  }

  axrt_status_t check_writable(const std::string& what, const Binding& binding,
                               const Function& function) const {
    if (is_read_only(binding, function)) {
      return invalid("{}: {} {} is read-only and cannot be written{}", what,
                     enum_name(binding.kind()), binding.index(),
                     binding.kind() == BindingKind::INPUT ? " (the input is not mutable)" : "");
    }
    return nullptr;
  }

  axrt_status_t check_dispatch(const std::string& what, const DispatchCommand& dispatch,
                               const Function& function) const {
    const uint32_t kernels = count_of(exe_.kernels());
    if (dispatch.kernel() >= kernels) {
      return invalid("{}: kernel {} is out of range (the file has {} kernels)", what,
                     dispatch.kernel(), kernels);
    }
    const Kernel& kernel = *exe_.kernels()->Get(dispatch.kernel());
    const std::string kernel_name = object_name("kernel", dispatch.kernel(), kernel.name());
    AXRT_RETURN_IF_ERROR(
        check_expr(what + ": workgroup_count_x", dispatch.workgroup_count_x(), function));
    if (dispatch.workgroup_count_y() != nullptr) {
      AXRT_RETURN_IF_ERROR(
          check_expr(what + ": workgroup_count_y", dispatch.workgroup_count_y(), function));
    }
    if (dispatch.workgroup_count_z() != nullptr) {
      AXRT_RETURN_IF_ERROR(
          check_expr(what + ": workgroup_count_z", dispatch.workgroup_count_z(), function));
    }
    const auto* bindings = dispatch.bindings();
    const auto* params = kernel.params();
    if (count_of(bindings) != count_of(params)) {
      return invalid("{}: {} bindings for {}, which has {} parameters", what, count_of(bindings),
                     kernel_name, count_of(params));
    }
    for (uint32_t j = 0; j < count_of(params); ++j) {
      const KernelParam& param = *params->Get(j);
      const Binding* binding = bindings->Get(j);
      const std::string bwhat = fmt::format("{}: binding {}", what, j);
      const std::string pname = kernel_name + " " + object_name("parameter", j, param.name());
      const bool scalar_value = param.kind() == ParamKind::SCALAR && binding != nullptr &&
                                binding->kind() == BindingKind::SCALAR;
      AXRT_RETURN_IF_ERROR(check_binding(bwhat, binding, function,
                                         scalar_value ? param.scalar_type() : DType::INVALID,
                                         pname));
      const BindingKind kind = binding->kind();
      if (param.kind() == ParamKind::SCALAR && kind != BindingKind::SCALAR) {
        return invalid("{}: {} is SCALAR but is bound to {}", bwhat, pname, enum_name(kind));
      }
      if (param.kind() == ParamKind::BUFFER && !is_buffer_binding(kind)) {
        return invalid("{}: {} is a BUFFER but is bound to {}", bwhat, pname, enum_name(kind));
      }
      const bool writes = param.access() == Access::WRITE || param.access() == Access::READ_WRITE;
      if (writes && is_read_only(*binding, function)) {
        return invalid("{}: {} has {} access but is bound to read-only {} {}{}", bwhat, pname,
                       enum_name(param.access()), enum_name(kind), binding->index(),
                       kind == BindingKind::INPUT ? " (the input is not mutable)" : "");
      }
      if (kind == BindingKind::CONSTANT) {
        AXRT_RETURN_IF_ERROR(check_layout_binding(bwhat, pname, param, binding->index()));
      }
    }
    return nullptr;
  }

  // Silent reinterpretation of quantized weights is the failure this rules
  // out: a parameter and the constant bound to it agree on the layout, or
  // neither has one.
  axrt_status_t check_layout_binding(const std::string& what, const std::string& pname,
                                     const KernelParam& param, uint32_t index) const {
    const Constant& constant = *exe_.constants()->Get(index);
    const std::string cname = object_name("constant", index, constant.name());
    const QuantLayout* expected = param.layout();
    const QuantLayout* actual = constant.quantization();
    if (expected == nullptr && actual == nullptr) return nullptr;
    if (expected == nullptr) {
      return invalid(
          "{}: {} declares no quantization layout but {} has layout '{}'; the kernel "
          "would read quantized data as plain {}",
          what, pname, cname, view(actual->layout_id()), enum_name(constant.dtype()));
    }
    if (actual == nullptr) {
      return invalid("{}: {} expects layout '{}' but {} has no quantization layout", what, pname,
                     view(expected->layout_id()), cname);
    }
    if (const std::optional<std::string> difference = first_layout_difference(*expected, *actual)) {
      return invalid(
          "{}: {} expects layout '{}' but {} has layout '{}'; they differ in {} "
          "(expected vs constant)",
          what, pname, view(expected->layout_id()), cname, view(actual->layout_id()), *difference);
    }
    return nullptr;
  }

  axrt_status_t check_buffer_binding(const std::string& what, const Binding* binding,
                                     const Function& function) const {
    AXRT_RETURN_IF_ERROR(check_binding(what, binding, function));
    if (!is_buffer_binding(binding->kind())) {
      return invalid("{}: a {} binding is not a buffer", what, enum_name(binding->kind()));
    }
    return nullptr;
  }

  axrt_status_t check_copy(const std::string& what, const CopyCommand& copy,
                           const Function& function) const {
    AXRT_RETURN_IF_ERROR(check_buffer_binding(what + ": src", copy.src(), function));
    AXRT_RETURN_IF_ERROR(check_buffer_binding(what + ": dst", copy.dst(), function));
    AXRT_RETURN_IF_ERROR(check_writable(what + ": dst", *copy.dst(), function));
    if (copy.src_offset() != nullptr) {
      AXRT_RETURN_IF_ERROR(check_expr(what + ": src_offset", copy.src_offset(), function));
    }
    if (copy.dst_offset() != nullptr) {
      AXRT_RETURN_IF_ERROR(check_expr(what + ": dst_offset", copy.dst_offset(), function));
    }
    AXRT_RETURN_IF_ERROR(check_expr(what + ": length", copy.length(), function));
    AXRT_RETURN_IF_ERROR(check_static_range(what + ": src", *copy.src(), copy.src_offset(),
                                            copy.length(), function));
    AXRT_RETURN_IF_ERROR(check_static_range(what + ": dst", *copy.dst(), copy.dst_offset(),
                                            copy.length(), function));
    return nullptr;
  }

  axrt_status_t check_fill(const std::string& what, const FillCommand& fill,
                           const Function& function) const {
    AXRT_RETURN_IF_ERROR(check_buffer_binding(what + ": target", fill.target(), function));
    AXRT_RETURN_IF_ERROR(check_writable(what + ": target", *fill.target(), function));
    const unsigned pattern_size = fill.pattern_size();
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8) {
      return invalid("{}: pattern_size is {}; it must be 1, 2, 4 or 8", what, pattern_size);
    }
    if (pattern_size < 8 && (fill.pattern() >> (8 * pattern_size)) != 0) {
      return invalid("{}: pattern 0x{:x} does not fit in pattern_size {} bytes", what,
                     fill.pattern(), pattern_size);
    }
    if (fill.offset() != nullptr) {
      AXRT_RETURN_IF_ERROR(check_expr(what + ": offset", fill.offset(), function));
    }
    AXRT_RETURN_IF_ERROR(check_expr(what + ": length", fill.length(), function));
    if (const std::optional<uint64_t> length = literal_of(fill.length())) {
      if (*length % pattern_size != 0) {
        return invalid("{}: length {} is not a multiple of pattern_size {}", what, *length,
                       pattern_size);
      }
    }
    return check_static_range(what + ": target", *fill.target(), fill.offset(), fill.length(),
                              function);
  }

  // Format 1.4: channels and collective commands need their feature at
  // every minor, so that an older reader refuses the file by name rather
  // than as broken. A reader acting as an older one skips channels, as it
  // would not know the field.
  axrt_status_t check_collectives_declared(const std::string& what) const {
    if (requires_feature(kCollectivesFeature)) return nullptr;
    return invalid("{}, which needs feature '{}', but required_features does not list it", what,
                   kCollectivesFeature);
  }

  axrt_status_t check_channels(const std::string& what, const Function& function) const {
    const auto* channels = function.channels();
    if (count_of(channels) == 0 || options_.reader_minor < 4) return nullptr;
    AXRT_RETURN_IF_ERROR(check_collectives_declared(what + " has channels"));
    std::unordered_map<std::string_view, uint32_t> names;
    for (uint32_t k = 0; k < count_of(channels); ++k) {
      const Channel& channel = *channels->Get(k);
      const std::string kwhat = what + ": " + object_name("channel", k, channel.name());
      if (view(channel.name()).empty()) return invalid("{}: name is empty", kwhat);
      const auto [it, inserted] = names.emplace(view(channel.name()), k);
      if (!inserted) return invalid("{}: the name is already used by channel {}", kwhat, it->second);
    }
    return nullptr;
  }

  axrt_status_t check_collective(const std::string& what, const CollectiveCommand& collective,
                                 const Function& function) const {
    AXRT_RETURN_IF_ERROR(check_collectives_declared(what));
    AXRT_RETURN_IF_ERROR(check_enum(what, "kind", collective.kind(), /*allow_zero=*/false));
    AXRT_RETURN_IF_ERROR(check_enum(what, "op", collective.op()));
    const uint32_t channels = count_of(function.channels());
    if (collective.channel() >= channels) {
      return invalid("{}: channel {} is out of range (the function has {} channels)", what,
                     collective.channel(), channels);
    }
    const Channel& channel = *function.channels()->Get(collective.channel());
    AXRT_RETURN_IF_ERROR(check_dtype(what, "dtype", collective.dtype()));
    switch (collective.dtype()) {
      case DType::INT8: case DType::UINT8: case DType::INT32: case DType::UINT32:
      case DType::INT64: case DType::UINT64: case DType::FLOAT16: case DType::BFLOAT16:
      case DType::FLOAT32: case DType::FLOAT64:
        break;
      default:
        return invalid("{}: dtype {} is not one collectives take (INT8, UINT8, INT32, UINT32, "
                       "INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64)",
                       what, enum_name(collective.dtype()));
    }
    const bool broadcast = collective.kind() == CollectiveKind::BROADCAST;
    if (broadcast && channel.size() != 0 && collective.root() >= channel.size()) {
      return invalid("{}: root {} is not a member of {}, which has {} members", what,
                     collective.root(),
                     object_name("channel", collective.channel(), channel.name()), channel.size());
    }
    AXRT_RETURN_IF_ERROR(check_expr(what + ": count", collective.count(), function));
    AXRT_RETURN_IF_ERROR(check_buffer_binding(what + ": send", collective.send(), function));
    AXRT_RETURN_IF_ERROR(check_buffer_binding(what + ": recv", collective.recv(), function));
    AXRT_RETURN_IF_ERROR(check_writable(what + ": recv", *collective.recv(), function));
    if (collective.send_offset() != nullptr) {
      AXRT_RETURN_IF_ERROR(check_expr(what + ": send_offset", collective.send_offset(), function));
    }
    if (collective.recv_offset() != nullptr) {
      AXRT_RETURN_IF_ERROR(check_expr(what + ": recv_offset", collective.recv_offset(), function));
    }
    // Literal ranges in buffers of static sizes: a block per member's
    // send (reduce-scatter) or receive (all-gather) when the channel's
    // size is known, else one block.
    const std::optional<uint64_t> count = literal_of(collective.count());
    if (!count) return nullptr;
    const uint64_t element = dtype_bytes(static_cast<axrt_dtype_t>(collective.dtype()), 1);
    const uint64_t members = std::max<uint32_t>(channel.size(), 1);
    uint64_t bytes = 0, send_bytes = 0, recv_bytes = 0;
    if (__builtin_mul_overflow(*count, element, &bytes) ||
        __builtin_mul_overflow(bytes, members, &send_bytes)) {
      return invalid("{}: count {} of {} overflows a byte count", what, *count,
                     enum_name(collective.dtype()));
    }
    recv_bytes = collective.kind() == CollectiveKind::ALL_GATHER ? send_bytes : bytes;
    if (collective.kind() != CollectiveKind::REDUCE_SCATTER) send_bytes = bytes;
    AXRT_RETURN_IF_ERROR(check_static_bytes(what + ": send", *collective.send(),
                                            collective.send_offset(), send_bytes, function));
    return check_static_bytes(what + ": recv", *collective.recv(), collective.recv_offset(),
                              recv_bytes, function);
  }

  // --- free-form metadata ---------------------------------------------------

  axrt_status_t check_key_values() const {
    const auto* entries = exe_.metadata();
    for (uint32_t i = 0; i < count_of(entries); ++i) {
      if (view(entries->Get(i)->key()).empty()) return invalid("metadata[{}]: key is empty", i);
    }
    return nullptr;
  }

  const Executable& exe_;
  const VerifyContext& context_;
  const ReadOptions& options_;
};

}  // namespace

axrt_status_t verify_executable(const Executable& executable, const VerifyContext& context) {
  return Checker(executable, context).run();
}

}  // namespace axrt::axe
