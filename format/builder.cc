#include "format/builder.h"


#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "base/fault.h"
#include "base/status.h"
#include "format/enums.h"
#include "format/quant_layout.h"
#include "format/reader.h"
#include "format/writer.h"

namespace axrt::axe {
namespace {

constexpr uint32_t kMaxObjects = static_cast<uint32_t>(std::numeric_limits<int32_t>::max());

std::string quote_name(const std::string& name) { return fmt::format("'{}'", name); }

// Bits per element of the byte-sized types; 0 for sub-byte types, whose
// sizes depend on packing and are judged by the reader.
uint32_t whole_byte_bits(DType dtype) {
  const uint32_t bits = dtype_bits(dtype);
  return bits >= 8 ? bits : 0;
}

// The verifier reads the builder's bytes in place.
class BorrowedStorage final : public Storage {
 public:
  explicit BorrowedStorage(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::span<const uint8_t> bytes() const noexcept override { return bytes_; }

 private:
  std::span<const uint8_t> bytes_;
};

// Appends `source` to `segment` at the next multiple of `alignment` and
// returns the offset.
uint64_t append_aligned(StreamedSegment* segment, std::shared_ptr<ByteSource> source,
                        uint64_t alignment, std::string what) {
  const uint64_t offset = align_up(segment->size, alignment);
  segment->size = offset + source->size();
  segment->pieces.push_back({offset, std::move(source), std::move(what)});
  return offset;
}

bool is_memory_binding(BindingKind kind) {
  return kind == BindingKind::INPUT || kind == BindingKind::OUTPUT ||
         kind == BindingKind::CONSTANT || kind == BindingKind::ARENA;
}

// Outputs and the arena are writable, and mutable inputs (format 1.2);
// constants and other inputs are read-only.
bool is_writable_binding(const BindingT& binding, const FunctionT& function) {
  switch (binding.kind) {
    case BindingKind::OUTPUT:
    case BindingKind::ARENA:
      return true;
    case BindingKind::INPUT:
      return binding.index < function.inputs.size() && function.inputs[binding.index]->mutable_;
    default:
      return false;
  }
}

// Why `binding`, which is not writable, cannot be written.
std::string not_writable(const BindingT& binding, const FunctionT& function) {
  if (binding.kind != BindingKind::INPUT || binding.index >= function.inputs.size()) {
    return EnumNameBindingKind(binding.kind);
  }
  return fmt::format("INPUT (input {} '{}' is not mutable)", binding.index,
                     function.inputs[binding.index]->name);
}

bool has_negative_literal(const ExprT* expr) {
  if (!expr) return false;
  for (const ExprOp& op : expr->ops) {
    if (op.opcode() == ExprOpcode::CONST && op.operand() < 0) return true;
  }
  return false;
}

// The features `executable` uses, in known_features() order: a file of
// format 1.3 lists each in required_features.
std::vector<std::string_view> used_features(const ExecutableT& executable) {
  bool quantization = false, symbols = false, prepacked = false, host_code = false;
  bool library = false, mutable_input = false, negative_literal = false, collectives = false;
  for (const auto& object : executable.code_objects) {
    host_code |= object->kind == CodeObjectKind::HOST_SHARED_OBJECT;
    library |= object->kind == CodeObjectKind::KERNEL_LIBRARY;
  }
  for (const auto& constant : executable.constants) {
    quantization |= constant->quantization != nullptr;
    prepacked |= !constant->prepacked.empty();
  }
  for (const auto& kernel : executable.kernels) {
    for (const auto& param : kernel->params) quantization |= param->layout != nullptr;
  }
  for (const auto& function : executable.functions) {
    symbols |= !function->symbols.empty();
    for (const auto& input : function->inputs) mutable_input |= input->mutable_;
    collectives |= !function->channels.empty();
    for (const CommandUnion& command : function->commands) {
      collectives |= command.AsCollectiveCommand() != nullptr;
      const DispatchCommandT* dispatch = command.AsDispatchCommand();
      if (!dispatch) continue;
      for (const auto& binding : dispatch->bindings) {
        negative_literal |= binding->kind == BindingKind::SCALAR &&
                            has_negative_literal(binding->value.get());
      }
    }
  }
  const std::pair<bool, std::string_view> uses[] = {
      {quantization, kQuantizationFeature},   {symbols, kSymbolicDimsFeature},
      {prepacked, kPrepackedFeature},         {host_code, kHostCodeFeature},
      {library, kKernelLibraryFeature},       {mutable_input, kMutableInputsFeature},
      {negative_literal, kSignedScalarsFeature}, {collectives, kCollectivesFeature},
  };
  std::vector<std::string_view> used;
  for (const auto& [uses_it, feature] : uses) {
    if (uses_it) used.push_back(feature);
  }
  return used;
}

// The output of finish(): a vector.
class MemoryOutput final : public ContainerOutput {
 public:
  explicit MemoryOutput(std::vector<uint8_t>* bytes) : bytes_(bytes) {}
  axrt_status_t resize(uint64_t size) override {
    if (size > bytes_->max_size()) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "a file of {} bytes does not fit in memory", size);
    }
    bytes_->assign(size, 0);
    return nullptr;
  }
  axrt_status_t write(uint64_t offset, std::span<const uint8_t> bytes) override {
    if (!bytes.empty()) std::memcpy(bytes_->data() + offset, bytes.data(), bytes.size());
    return nullptr;
  }

 private:
  std::vector<uint8_t>* bytes_;
};

// The output of write_file(): a temporary file beside the destination,
// removed unless commit() renamed it into place.
class TemporaryFile final : public ContainerOutput {
 public:
  ~TemporaryFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }

  axrt_status_t create(const std::string& path) {
    path_ = path;
    const std::filesystem::path target(path);
    std::string temp =
        (target.has_parent_path() ? target.parent_path() / "" : std::filesystem::path())
            .string() +
        "." + target.filename().string() + ".tmp.XXXXXX";
    fd_ = mkstemp(temp.data());
    if (fd_ < 0) {
      return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                         "cannot create a temporary file beside '{}': {}", path,
                         std::strerror(errno));
    }
    temp_ = std::move(temp);
    // mkstemp makes the file 0600; give it the permissions a new file gets.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd_, 0666 & ~mask) != 0) return failed("fchmod");
    return nullptr;
  }

  axrt_status_t resize(uint64_t size) override {
    if (size > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
      errno = EFBIG;
      return failed("ftruncate");
    }
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return failed("ftruncate");
    size_ = size;
    return nullptr;
  }

  axrt_status_t write(uint64_t offset, std::span<const uint8_t> bytes) override {
    size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + written, bytes.size() - written,
                                 static_cast<off_t>(offset + written));
      if (n < 0) {
        if (errno == EINTR) continue;
        return failed("write");
      }
      written += static_cast<size_t>(n);
    }
    return nullptr;
  }

  // Opens what was written, through a read-only mapping, as "<builder
  // output>".
  axrt_status_t verify(const ReadOptions& options) const {
    std::shared_ptr<const Storage> storage;
    if (size_ > 0) {
      void* address = MAP_FAILED;
      if (fault::should_fail(fault::Site::kFileMap)) {
        errno = ENOMEM;
      } else {
        address = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
      }
      if (address == MAP_FAILED) return failed("mmap");
      storage = std::make_shared<MappedFile>(address, size_);
    } else {
      storage = std::make_shared<BorrowedStorage>(std::span<const uint8_t>());
    }
    std::unique_ptr<AxeFile> verified;
    return AxeFile::open_storage(std::move(storage), "<builder output>", options, &verified);
  }

  // Syncs the file and renames it over the destination.
  axrt_status_t commit() {
    if (::fsync(fd_) != 0) return failed("fsync");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return failed("close");
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
      const int error = errno;
      return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "cannot rename '{}' to '{}': {}", temp_,
                         path_, std::strerror(error));
    }
    temp_.clear();
    return nullptr;
  }

 private:
  class MappedFile final : public Storage {
   public:
    MappedFile(void* address, size_t size) : address_(address), size_(size) {}
    ~MappedFile() override { ::munmap(address_, size_); }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    std::span<const uint8_t> bytes() const noexcept override {
      return {static_cast<const uint8_t*>(address_), size_};
    }

   private:
    void* address_;
    size_t size_;
  };

  axrt_status_t failed(const char* what) const {
    const int error = errno;
    return make_status(error == ENOSPC || error == EFBIG ? AXRT_STATUS_CODE_RESOURCE_EXHAUSTED
                                                         : AXRT_STATUS_CODE_UNAVAILABLE,
                       "cannot write '{}': {} failed: {}", path_, what, std::strerror(error));
  }

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

Builder::Builder(std::string producer_name, std::string producer_version) {
  executable_.producer = std::make_unique<ProducerT>();
  executable_.producer->name = std::move(producer_name);
  executable_.producer->version = std::move(producer_version);
}

axrt_status_t Builder::add_required_feature(std::string feature) {
  if (feature.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "a required feature needs a name");
  }
  if (features_.count(feature)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "required feature '{}' was already added", feature);
  }
  features_.insert(feature);
  executable_.required_features.push_back(std::move(feature));
  return nullptr;
}

axrt_status_t Builder::add_metadata(std::string key, std::string value) {
  if (key.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "a metadata entry needs a key");
  }
  if (metadata_keys_.count(key)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "metadata key '{}' was already added",
                       key);
  }
  metadata_keys_.insert(key);
  auto entry = std::make_unique<KeyValueT>();
  entry->key = std::move(key);
  entry->value = std::move(value);
  executable_.metadata.push_back(std::move(entry));
  return nullptr;
}

axrt_status_t Builder::add_code_object(CodeObjectT code_object, std::span<const uint8_t> bytes,
                                       uint32_t* out_index) {
  const size_t index = executable_.code_objects.size();
  const std::string name = fmt::format("code object {} ({})", index,
                                       EnumNameCodeObjectKind(code_object.kind));
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many code objects ({})", index);
  }
  if (code_object.kind == CodeObjectKind::INVALID ||
      code_object.kind > CodeObjectKind::MAX) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "code object {}: kind {} is not known",
                       index, static_cast<uint32_t>(code_object.kind));
  }
  if (code_object.target.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the target is empty", name);
  }
  if (code_object.kind == CodeObjectKind::KERNEL_LIBRARY) {
    if (!bytes.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: a kernel-library reference carries no bytes, but {} were given",
                         name, bytes.size());
    }
    if (code_object.library_name.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: a kernel-library reference needs a library name", name);
    }
  } else {
    if (bytes.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: no bytes were given", name);
    }
    if (!code_object.library_name.empty() || code_object.library_min_version != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: only kernel-library references take a library name and version",
                         name);
    }
  }
  code_object.segment = -1;
  code_bytes_.emplace_back(bytes.begin(), bytes.end());
  executable_.code_objects.push_back(std::make_unique<CodeObjectT>(std::move(code_object)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::add_kernel(KernelT kernel, uint32_t* out_index) {
  const size_t index = executable_.kernels.size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many kernels ({})", index);
  }
  if (kernel.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "kernel {} needs a name", index);
  }
  const std::string name = "kernel " + quote_name(kernel.name);
  if (kernel_names_.count(kernel.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (kernel.code_object >= executable_.code_objects.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "{} names code object {}, but {} code object(s) were added", name,
                       kernel.code_object, executable_.code_objects.size());
  }
  if (kernel.entry_symbol.empty()) kernel.entry_symbol = kernel.name;
  if (!kernel.workgroup_size) kernel.workgroup_size = std::make_unique<Dim3>(1, 1, 1);
  const Dim3& wg = *kernel.workgroup_size;
  if (wg.x() == 0 || wg.y() == 0 || wg.z() == 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: workgroup size {}x{}x{} has a zero component", name, wg.x(), wg.y(),
                       wg.z());
  }
  if (!kernel.cluster_dims) kernel.cluster_dims = std::make_unique<Dim3>(0, 0, 0);
  const Dim3& cluster = *kernel.cluster_dims;
  const bool no_cluster = cluster.x() == 0 && cluster.y() == 0 && cluster.z() == 0;
  if (!no_cluster && (cluster.x() == 0 || cluster.y() == 0 || cluster.z() == 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: cluster dims {}x{}x{} must be all 0 (no clusters) or all at least 1",
                       name, cluster.x(), cluster.y(), cluster.z());
  }
  for (size_t v = 0; v < kernel.variants.size(); ++v) {
    if (!kernel.variants[v]) kernel.variants[v] = std::make_unique<KernelVariantT>();
    AXRT_RETURN_IF_ERROR(check_variant(kernel, v, kernel.variants[v].get()));
  }
  std::set<std::string> param_names;
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParamT* param = kernel.params[i].get();
    const std::string where = fmt::format("{} parameter {} '{}'", name, i, param->name);
    if (!param->name.empty() && !param_names.insert(param->name).second) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: the name is used twice", where);
    }
    switch (param->kind) {
      case ParamKind::BUFFER:
        if (param->layout) AXRT_RETURN_IF_ERROR(check_layout(*param->layout, where, nullptr));
        break;
      case ParamKind::SCALAR:
        if (param->scalar_type == DType::INVALID || whole_byte_bits(param->scalar_type) == 0) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: a SCALAR parameter needs a whole-byte scalar type (got {})",
                             where, EnumNameDType(param->scalar_type));
        }
        if (param->layout) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: only BUFFER parameters take a layout", where);
        }
        break;
      default:
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kind {} is not known", where,
                           static_cast<uint32_t>(param->kind));
    }
  }
  kernel_names_.insert(kernel.name);
  executable_.kernels.push_back(std::make_unique<KernelT>(std::move(kernel)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::check_variant(const KernelT& kernel, size_t index,
                                     KernelVariantT* variant) const {
  const std::string name = fmt::format("kernel {} variant {}", quote_name(kernel.name), index);
  if (variant->code_object >= executable_.code_objects.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "{} names code object {}, but {} code object(s) were added", name,
                       variant->code_object, executable_.code_objects.size());
  }
  // One implementation per code object: a loader picks implementations by
  // the code object it can load.
  if (variant->code_object == kernel.code_object) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "{}: code object {} already holds the kernel's primary implementation",
                       name, variant->code_object);
  }
  for (size_t v = 0; v < index; ++v) {
    if (kernel.variants[v]->code_object == variant->code_object) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                         "{}: code object {} already holds variant {} of the kernel", name,
                         variant->code_object, v);
    }
  }
  if (variant->entry_symbol.empty()) variant->entry_symbol = kernel.entry_symbol;
  if (!variant->workgroup_size) variant->workgroup_size = std::make_unique<Dim3>(1, 1, 1);
  const Dim3& wg = *variant->workgroup_size;
  if (wg.x() == 0 || wg.y() == 0 || wg.z() == 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: workgroup size {}x{}x{} has a zero component", name, wg.x(), wg.y(),
                       wg.z());
  }
  if (!variant->cluster_dims) variant->cluster_dims = std::make_unique<Dim3>(0, 0, 0);
  const Dim3& cluster = *variant->cluster_dims;
  const bool no_cluster = cluster.x() == 0 && cluster.y() == 0 && cluster.z() == 0;
  if (!no_cluster && (cluster.x() == 0 || cluster.y() == 0 || cluster.z() == 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: cluster dims {}x{}x{} must be all 0 (no clusters) or all at least 1",
                       name, cluster.x(), cluster.y(), cluster.z());
  }
  return nullptr;
}

axrt_status_t Builder::add_kernel_variant(uint32_t kernel_index, KernelVariantT variant) {
  if (kernel_index >= executable_.kernels.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "kernel {} was not added ({} kernel(s) so far)", kernel_index,
                       executable_.kernels.size());
  }
  KernelT& kernel = *executable_.kernels[kernel_index];
  AXRT_RETURN_IF_ERROR(check_variant(kernel, kernel.variants.size(), &variant));
  kernel.variants.push_back(std::make_unique<KernelVariantT>(std::move(variant)));
  return nullptr;
}

axrt_status_t Builder::check_layout(const QuantLayoutT& layout, const std::string& owner,
                                    const ConstantT* constant) const {
  const std::string where = owner + " layout '" + layout.layout_id + "'";
  if (layout.element_type == DType::INVALID) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the element type is INVALID",
                       where);
  }
  if (constant && layout.block_shape.size() != constant->shape.size()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the block shape has {} entries, the constant's rank is {}", where,
                       layout.block_shape.size(), constant->shape.size());
  }
  if (!constant) return nullptr;
  // Constants a layout refers to must be added first, and agree with it.
  auto check_ref = [&](int32_t index, DType dtype, const char* what) -> axrt_status_t {
    if (index == -1) return nullptr;
    if (index < 0 || static_cast<size_t>(index) >= executable_.constants.size()) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                         "{}: the {} names constant {}, but {} constant(s) were added before it",
                         where, what, index, executable_.constants.size());
    }
    const ConstantT& ref = *executable_.constants[static_cast<size_t>(index)];
    if (dtype != DType::INVALID && ref.dtype != dtype) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the {} is declared {}, but constant {} '{}' holds {}", where, what,
                         EnumNameDType(dtype), index, ref.name, EnumNameDType(ref.dtype));
    }
    return nullptr;
  };
  if (layout.scale) AXRT_RETURN_IF_ERROR(check_ref(layout.scale->constant, layout.scale->dtype, "scale"));
  if (layout.zero_point) {
    // Packed zero points are stored as container words (an integer constant
    // of container_bits), so their dtype names the element, not the words.
    const DType dtype = layout.zero_point->packing ? DType::INVALID : layout.zero_point->dtype;
    AXRT_RETURN_IF_ERROR(check_ref(layout.zero_point->constant, dtype, "zero point"));
  }
  if (layout.second_level_scale) {
    AXRT_RETURN_IF_ERROR(check_ref(layout.second_level_scale->constant,
                                   layout.second_level_scale->dtype, "second-level scale"));
  }
  return nullptr;
}

axrt_status_t Builder::add_constant(ConstantT constant, std::span<const uint8_t> bytes,
                                    uint32_t* out_index) {
  return add_constant(std::move(constant), std::make_shared<ResidentBytes>(bytes), out_index);
}

axrt_status_t Builder::add_constant(ConstantT constant, std::shared_ptr<ByteSource> source,
                                    uint32_t* out_index) {
  const size_t index = executable_.constants.size();
  if (!source) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "constant {} has no data source", index);
  }
  const uint64_t size = source->size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many constants ({})", index);
  }
  if (constant.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "constant {} needs a name", index);
  }
  const std::string name = "constant " + quote_name(constant.name);
  if (constant_names_.count(constant.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (constant.dtype == DType::INVALID) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the dtype is INVALID", name);
  }
  if (!constant.strides.empty() && constant.strides.size() != constant.shape.size()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: {} strides for a shape of rank {}", name, constant.strides.size(),
                       constant.shape.size());
  }
  if (constant.alignment == 0) constant.alignment = 64;
  if (!std::has_single_bit(constant.alignment) || constant.alignment > kSegmentAlignment) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: alignment {} is not a power of two at most {}", name,
                       constant.alignment, kSegmentAlignment);
  }
  // Dense whole-byte tensors must hold exactly shape x dtype bytes; the
  // reader judges packed and strided ones.
  const uint32_t bits = whole_byte_bits(constant.dtype);
  if (bits != 0 && constant.strides.empty()) {
    unsigned __int128 expected = bits / 8;
    bool overflow = false;
    for (uint64_t extent : constant.shape) {
      expected *= extent;
      if (expected > std::numeric_limits<uint64_t>::max()) overflow = true;
      if (overflow) break;
    }
    if (overflow || expected != size) {
      std::string shape;
      for (uint64_t extent : constant.shape) shape += (shape.empty() ? "" : "x") + std::to_string(extent);
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: shape [{}] of {} needs {} bytes, but {} were given", name, shape,
                         EnumNameDType(constant.dtype),
                         overflow ? std::string("more than 2^64")
                                  : std::to_string(static_cast<uint64_t>(expected)),
                         size);
    }
  }
  if (constant.quantization) {
    AXRT_RETURN_IF_ERROR(check_layout(*constant.quantization, name, &constant));
  }
  constant.prepacked.clear();
  constant.data = std::make_unique<SegmentRangeT>();
  constant.data->offset =
      append_aligned(&constant_segment_, std::move(source), constant.alignment, name);
  constant.data->size = size;
  constant_names_.insert(constant.name);
  executable_.constants.push_back(std::make_unique<ConstantT>(std::move(constant)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::add_prepacked_copy(uint32_t constant, std::string target,
                                          std::string layout_id, std::span<const uint8_t> bytes) {
  if (constant >= executable_.constants.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "a pre-packed copy names constant {}, but {} constant(s) were added",
                       constant, executable_.constants.size());
  }
  ConstantT& owner = *executable_.constants[constant];
  const std::string where = fmt::format("pre-packed copy of constant '{}'", owner.name);
  if (target.empty() || layout_id.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: needs a target and a layout id",
                       where);
  }
  if (bytes.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{} for ({}, {}): no bytes were given",
                       where, target, layout_id);
  }
  auto key = std::make_pair(constant, std::make_pair(target, layout_id));
  if (prepacked_keys_.count(key)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                       "{} for target '{}' and layout '{}' was already added", where, target,
                       layout_id);
  }
  auto copy = std::make_unique<PrepackedCopyT>();
  copy->target = std::move(target);
  copy->layout_id = std::move(layout_id);
  copy->data = std::make_unique<SegmentRangeT>();
  copy->data->offset = append_aligned(&prepacked_segment_, std::make_shared<ResidentBytes>(bytes),
                                      owner.alignment, where);
  copy->data->size = bytes.size();
  owner.prepacked.push_back(std::move(copy));
  prepacked_keys_.insert(std::move(key));
  return nullptr;
}

axrt_status_t Builder::add_function(FunctionT function, uint32_t* out_index) {
  const size_t index = executable_.functions.size();
  if (index >= kMaxObjects) {
    return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "too many functions ({})", index);
  }
  if (function.name.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "function {} needs a name", index);
  }
  const std::string name = "function " + quote_name(function.name);
  if (function_names_.count(function.name)) {
    return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{} was already added", name);
  }
  if (!function.commands.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: commands are added one by one after the function", name);
  }
  std::set<std::string> symbol_names;
  for (size_t i = 0; i < function.symbols.size(); ++i) {
    const SymbolT& symbol = *function.symbols[i];
    if (symbol.name.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: symbol {} needs a name", name,
                         i);
    }
    if (!symbol_names.insert(symbol.name).second) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: symbol '{}' is declared twice",
                         name, symbol.name);
    }
    if (symbol.upper_bound == 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: symbol '{}' has upper bound 0 (at least 1)", name, symbol.name);
    }
  }
  std::set<std::string> channel_names;
  for (size_t i = 0; i < function.channels.size(); ++i) {
    const ChannelT& channel = *function.channels[i];
    if (channel.name.empty()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: channel {} needs a name", name, i);
    }
    if (!channel_names.insert(channel.name).second) {
      return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS, "{}: channel '{}' is declared twice",
                         name, channel.name);
    }
  }
  std::set<std::string> tensor_names;
  for (int side = 0; side < 2; ++side) {
    const auto& sigs = side == 0 ? function.inputs : function.outputs;
    const char* what = side == 0 ? "input" : "output";
    for (size_t i = 0; i < sigs.size(); ++i) {
      const TensorSigT& sig = *sigs[i];
      const std::string where = fmt::format("{} {} {} '{}'", name, what, i, sig.name);
      if (sig.name.empty()) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: needs a name", where);
      }
      if (!tensor_names.insert(sig.name).second) {
        return make_status(AXRT_STATUS_CODE_ALREADY_EXISTS,
                           "{}: the name is already used by another input or output", where);
      }
      if (sig.dtype == DType::INVALID) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the dtype is INVALID", where);
      }
      if (side == 1 && sig.mutable_) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: only inputs can be mutable (an output is always written)", where);
      }
      for (size_t d = 0; d < sig.shape.size(); ++d) {
        const DimT& dim = *sig.shape[d];
        if (dim.symbol == -1) continue;
        if (dim.symbol < 0 || static_cast<size_t>(dim.symbol) >= function.symbols.size()) {
          return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                             "{}: dimension {} names symbol {}, but the function declares {}",
                             where, d, dim.symbol, function.symbols.size());
        }
        if (dim.value != 0) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: dimension {} is symbol {} and also has value {}", where, d,
                             dim.symbol, dim.value);
        }
      }
    }
  }
  function_names_.insert(function.name);
  executable_.functions.push_back(std::make_unique<FunctionT>(std::move(function)));
  *out_index = static_cast<uint32_t>(index);
  return nullptr;
}

axrt_status_t Builder::check_expr(const ExprT* expr, const FunctionT& function,
                                  const std::string& where, bool required,
                                  DType scalar_type) const {
  if (!expr || expr->ops.empty()) {
    if (!required) return nullptr;
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the expression is required",
                       where);
  }
  size_t depth = 0;
  for (size_t i = 0; i < expr->ops.size(); ++i) {
    const ExprOp& op = expr->ops[i];
    switch (op.opcode()) {
      case ExprOpcode::CONST:
        if (op.operand() < 0 &&
            (expr->ops.size() != 1 || !dtype_takes_negative_literal(scalar_type))) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: op {} is the negative literal {}; expressions compute "
                             "unsigned values, and only a scalar parameter of a signed type "
                             "(int8 to int64, floating point) takes a negative literal, alone",
                             where, i, op.operand());
        }
        ++depth;
        break;
      case ExprOpcode::SYMBOL:
        if (op.operand() < 0 || static_cast<uint64_t>(op.operand()) >= function.symbols.size()) {
          return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                             "{}: op {} reads symbol {}, but function '{}' declares {}", where, i,
                             op.operand(), function.name, function.symbols.size());
        }
        ++depth;
        break;
      case ExprOpcode::ADD:
      case ExprOpcode::SUB:
      case ExprOpcode::MUL:
      case ExprOpcode::DIV_FLOOR:
      case ExprOpcode::DIV_CEIL:
      case ExprOpcode::MOD:
      case ExprOpcode::MINIMUM:
      case ExprOpcode::MAXIMUM:
        if (depth < 2) {
          return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                             "{}: op {} ({}) needs two values, the stack holds {}", where, i,
                             EnumNameExprOpcode(op.opcode()), depth);
        }
        --depth;
        break;
      default:
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: op {} has opcode {}, not known",
                           where, i, static_cast<uint32_t>(op.opcode()));
    }
  }
  if (depth != 1) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: the expression leaves {} values on its stack, expected 1", where,
                       depth);
  }
  return nullptr;
}

axrt_status_t Builder::check_binding(const BindingT* binding, const FunctionT& function,
                                     const std::string& where, DType scalar_type) const {
  if (!binding) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: the binding is missing", where);
  }
  const BindingT& b = *binding;
  const bool uses_index = b.kind == BindingKind::INPUT || b.kind == BindingKind::OUTPUT ||
                          b.kind == BindingKind::CONSTANT;
  const bool has_value = b.value && !b.value->ops.empty();
  if (!uses_index && b.index != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: a {} binding takes no index ({})",
                       where, EnumNameBindingKind(b.kind), b.index);
  }
  if (b.kind != BindingKind::ARENA && (b.offset != 0 || b.size != 0)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: only ARENA bindings take an offset and size", where);
  }
  if (b.kind != BindingKind::SCALAR && has_value) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: only SCALAR bindings take a value", where);
  }
  switch (b.kind) {
    case BindingKind::INPUT:
    case BindingKind::OUTPUT: {
      const bool input = b.kind == BindingKind::INPUT;
      const size_t count = input ? function.inputs.size() : function.outputs.size();
      if (b.index >= count) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{}: {} index {} is out of range: function '{}' has {} {}(s)", where,
                           input ? "input" : "output", b.index, function.name, count,
                           input ? "input" : "output");
      }
      return nullptr;
    }
    case BindingKind::CONSTANT:
      if (b.index >= executable_.constants.size()) {
        return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                           "{}: names constant {}, but {} constant(s) were added", where, b.index,
                           executable_.constants.size());
      }
      return nullptr;
    case BindingKind::ARENA:
      if (b.size == 0) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: an ARENA binding covers at least 1 byte", where);
      }
      if (b.offset > function.arena_size || b.size > function.arena_size - b.offset) {
        return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{}: arena bytes [{}, {} + {}) do not fit in the {}-byte arena of "
                           "function '{}'",
                           where, b.offset, b.offset, b.size, function.arena_size, function.name);
      }
      return nullptr;
    case BindingKind::SCALAR:
      return check_expr(b.value.get(), function, where + " value", /*required=*/true,
                        scalar_type);
    default:
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: binding kind {} is not known",
                         where, static_cast<uint32_t>(b.kind));
  }
}

axrt_status_t Builder::add_command(uint32_t function_index, CommandUnion command) {
  if (function_index >= executable_.functions.size()) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                       "function {} was not added ({} function(s) so far)", function_index,
                       executable_.functions.size());
  }
  FunctionT& function = *executable_.functions[function_index];
  const std::string where =
      fmt::format("function '{}' command {}", function.name, function.commands.size());
  if (auto* dispatch = command.AsDispatchCommand()) {
    if (dispatch->kernel >= executable_.kernels.size()) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                         "{} (dispatch): names kernel {}, but {} kernel(s) were added", where,
                         dispatch->kernel, executable_.kernels.size());
    }
    const KernelT& kernel = *executable_.kernels[dispatch->kernel];
    const std::string here = fmt::format("{} (dispatch of kernel '{}')", where, kernel.name);
    if (dispatch->bindings.size() != kernel.params.size()) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: {} binding(s) for {} kernel parameter(s)", here,
                         dispatch->bindings.size(), kernel.params.size());
    }
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_x.get(), function,
                                    here + " workgroup_count_x", true));
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_y.get(), function,
                                    here + " workgroup_count_y", false));
    AXRT_RETURN_IF_ERROR(check_expr(dispatch->workgroup_count_z.get(), function,
                                    here + " workgroup_count_z", false));
    for (size_t i = 0; i < dispatch->bindings.size(); ++i) {
      const KernelParamT& param = *kernel.params[i];
      const std::string at = fmt::format("{} binding {} (parameter '{}')", here, i, param.name);
      const DType scalar_type =
          param.kind == ParamKind::SCALAR ? param.scalar_type : DType::INVALID;
      AXRT_RETURN_IF_ERROR(check_binding(dispatch->bindings[i].get(), function, at, scalar_type));
      const BindingKind kind = dispatch->bindings[i]->kind;
      if ((param.kind == ParamKind::SCALAR) != (kind == BindingKind::SCALAR)) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "{}: a {} binding cannot serve a {} parameter", at,
                           EnumNameBindingKind(kind), EnumNameParamKind(param.kind));
      }
    }
  } else if (auto* copy = command.AsCopyCommand()) {
    const std::string here = where + " (copy)";
    AXRT_RETURN_IF_ERROR(check_binding(copy->src.get(), function, here + " src"));
    AXRT_RETURN_IF_ERROR(check_binding(copy->dst.get(), function, here + " dst"));
    if (!is_memory_binding(copy->src->kind)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the source must be memory, not a {} binding", here,
                         EnumNameBindingKind(copy->src->kind));
    }
    if (!is_writable_binding(*copy->dst, function)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the destination must be an OUTPUT or ARENA binding, not {}; or "
                         "a mutable input",
                         here, not_writable(*copy->dst, function));
    }
    AXRT_RETURN_IF_ERROR(check_expr(copy->src_offset.get(), function, here + " src_offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(copy->dst_offset.get(), function, here + " dst_offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(copy->length.get(), function, here + " length", true));
  } else if (auto* fill = command.AsFillCommand()) {
    const std::string here = where + " (fill)";
    AXRT_RETURN_IF_ERROR(check_binding(fill->target.get(), function, here + " target"));
    if (!is_writable_binding(*fill->target, function)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: the target must be an OUTPUT or ARENA binding, not {}; or a "
                         "mutable input",
                         here, not_writable(*fill->target, function));
    }
    AXRT_RETURN_IF_ERROR(check_expr(fill->offset.get(), function, here + " offset", false));
    AXRT_RETURN_IF_ERROR(check_expr(fill->length.get(), function, here + " length", true));
    const uint32_t size = fill->pattern_size;
    if (size != 1 && size != 2 && size != 4 && size != 8) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: pattern size {} is not 1, 2, 4 or 8", here, size);
    }
    if (size < 8 && (fill->pattern >> (8 * size)) != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: pattern {:#x} does not fit in {} byte(s)", here, fill->pattern, size);
    }
  } else if (auto* collective = command.AsCollectiveCommand()) {
    const std::string here = where + " (collective)";
    if (!known(collective->kind) || collective->kind == CollectiveKind::INVALID) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: kind {} is not a collective",
                         here, static_cast<uint32_t>(collective->kind));
    }
    if (!known(collective->op)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: op {} is not a reduction", here,
                         static_cast<uint32_t>(collective->op));
    }
    if (collective->channel >= function.channels.size()) {
      return make_status(AXRT_STATUS_CODE_NOT_FOUND,
                         "{}: names channel {}, but function '{}' has {} channel(s)", here,
                         collective->channel, function.name, function.channels.size());
    }
    const ChannelT& channel = *function.channels[collective->channel];
    if (collective->kind == CollectiveKind::BROADCAST && channel.size != 0 &&
        collective->root >= channel.size) {
      return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "{}: root {} is not a member of channel '{}' ({} members)", here,
                         collective->root, channel.name, channel.size);
    }
    AXRT_RETURN_IF_ERROR(check_binding(collective->send.get(), function, here + " send"));
    AXRT_RETURN_IF_ERROR(check_binding(collective->recv.get(), function, here + " recv"));
    if (!is_memory_binding(collective->send->kind)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: send must be memory, not a {} binding", here,
                         EnumNameBindingKind(collective->send->kind));
    }
    if (!is_writable_binding(*collective->recv, function)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{}: recv must be an OUTPUT or ARENA binding, not {}; or a mutable "
                         "input",
                         here, not_writable(*collective->recv, function));
    }
    AXRT_RETURN_IF_ERROR(check_expr(collective->count.get(), function, here + " count", true));
    AXRT_RETURN_IF_ERROR(
        check_expr(collective->send_offset.get(), function, here + " send_offset", false));
    AXRT_RETURN_IF_ERROR(
        check_expr(collective->recv_offset.get(), function, here + " recv_offset", false));
  } else {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: no command was given", where);
  }
  function.commands.push_back(std::move(command));
  return nullptr;
}

void Builder::plan(ExecutableT* executable, std::vector<StreamedSegment>* segments) const {
  if (!executable->producer) executable->producer = std::make_unique<ProducerT>();
  for (std::string_view feature : used_features(*executable)) {
    if (!features_.count(std::string(feature))) executable->required_features.emplace_back(feature);
  }
  for (size_t i = 0; i < executable->code_objects.size(); ++i) {
    if (executable->code_objects[i]->kind == CodeObjectKind::KERNEL_LIBRARY) continue;
    executable->code_objects[i]->segment = static_cast<int32_t>(segments->size());
    StreamedSegment code;
    code.kind = SegmentKind::kCode;
    code.size = code_bytes_[i].size();
    code.pieces.push_back({0, std::make_shared<ResidentBytes>(code_bytes_[i]),
                           fmt::format("code object {}", i)});
    segments->push_back(std::move(code));
  }
  if (!executable->constants.empty()) {
    const auto segment = static_cast<uint32_t>(segments->size());
    for (auto& constant : executable->constants) constant->data->segment = segment;
    segments->push_back(constant_segment_);
    segments->back().kind = SegmentKind::kConstant;
  }
  if (!prepacked_keys_.empty()) {
    const auto segment = static_cast<uint32_t>(segments->size());
    for (auto& constant : executable->constants) {
      for (auto& copy : constant->prepacked) copy->data->segment = segment;
    }
    segments->push_back(prepacked_segment_);
    segments->back().kind = SegmentKind::kPrepacked;
  }
}

axrt_status_t Builder::write(ContainerOutput* output,
                             const std::function<axrt_status_t(const ReadOptions&)>& verify) const {
  ExecutableT executable(executable_);
  std::vector<StreamedSegment> segments;
  plan(&executable, &segments);
  const std::vector<uint8_t> metadata = pack_metadata(executable);
  const ContainerStreamer streamer(metadata, std::move(segments));

  ReadOptions options;
  options.allow_host_code = true;
  options.extra_features = executable.required_features;
  auto refused = [](axrt_status_t status) {
    StatusPtr owned(status);
    return make_status(status->code, "the reader refuses the file built: {}", status->message);
  };
  // Everything but the streamed bytes is judged before any source is read:
  // a refused file costs no pass over the weights.
  AXRT_RETURN_IF_ERROR(streamer.write_resident(output));
  if (axrt_status_t status = verify(options)) return refused(status);
  AXRT_RETURN_IF_ERROR(streamer.write_streamed(output));
  options.verify_checksums = true;
  if (axrt_status_t status = verify(options)) return refused(status);
  return nullptr;
}

axrt_status_t Builder::finish(std::vector<uint8_t>* out) const {
  std::vector<uint8_t> file;
  MemoryOutput output(&file);
  AXRT_RETURN_IF_ERROR(write(&output, [&](const ReadOptions& options) -> axrt_status_t {
    std::unique_ptr<AxeFile> verified;
    return AxeFile::open_storage(std::make_shared<BorrowedStorage>(file), "<builder output>",
                                 options, &verified);
  }));
  *out = std::move(file);
  return nullptr;
}

axrt_status_t Builder::write_file(const std::string& path) const {
  if (path.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "the output path is empty");
  }
  TemporaryFile file;
  AXRT_RETURN_IF_ERROR(file.create(path));
  AXRT_RETURN_IF_ERROR(
      write(&file, [&](const ReadOptions& options) { return file.verify(options); }));
  return file.commit();
}

}  // namespace axrt::axe
