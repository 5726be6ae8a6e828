#include "format/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/fault.h"
#include "base/status.h"
#include "format/verifier.h"

namespace axrt::axe {

namespace {

class OwnedStorage final : public Storage {
 public:
  explicit OwnedStorage(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  explicit OwnedStorage(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  std::span<const uint8_t> bytes() const noexcept override { return bytes_; }

 private:
  // operator new aligns to at least 16 bytes, which FlatBuffers reads need.
  std::vector<uint8_t> bytes_;
};

class MappedStorage final : public Storage {
 public:
  MappedStorage(void* address, size_t size) : address_(address), size_(size) {}
  ~MappedStorage() override { munmap(address_, size_); }
  MappedStorage(const MappedStorage&) = delete;
  MappedStorage& operator=(const MappedStorage&) = delete;

  std::span<const uint8_t> bytes() const noexcept override {
    return {static_cast<const uint8_t*>(address_), size_};
  }

 private:
  void* address_;
  size_t size_;
};

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

axrt_status_code_t code_for_errno(int error) {
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return AXRT_STATUS_CODE_NOT_FOUND;
    case EACCES:
    case EPERM:
      return AXRT_STATUS_CODE_PERMISSION_DENIED;
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return AXRT_STATUS_CODE_RESOURCE_EXHAUSTED;
    default:
      return AXRT_STATUS_CODE_UNAVAILABLE;
  }
}

// Reads the `size` bytes of `fd` from its start, through short reads and
// interruptions. A file that ends early changed under the reader: DATA_LOSS.
axrt_status_t read_file(int fd, const std::string& path, uint64_t size,
                        std::vector<uint8_t>* out) {
  std::vector<uint8_t> bytes(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = 0;
    if (fault::should_fail(fault::Site::kFileRead)) {
      n = -1;
      errno = EIO;
    } else {
      const size_t chunk = fault::should_fail(fault::Site::kShortRead) ? 1 : size - done;
      n = ::pread(fd, bytes.data() + done, chunk, static_cast<off_t>(done));
    }
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      return make_status(code_for_errno(error), "executable '{}': cannot read {} bytes at {}: {}",
                         path, size - done, done, std::strerror(error));
    }
    if (n == 0) {
      return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                         "executable '{}': the file ended after {} of its {} bytes (changed "
                         "while it was read?)",
                         path, done, size);
    }
    done += static_cast<uint64_t>(n);
  }
  *out = std::move(bytes);
  return nullptr;
}

std::string hex_bytes(std::span<const uint8_t> bytes) {
  std::string text;
  for (uint8_t b : bytes) {
    if (!text.empty()) text += ' ';
    text += fmt::format("{:02x}", b);
  }
  return text;
}

// The container rules of docs/format.md: header, segment table, metadata
// range and segment ranges, all overflow-safe, before anything reads the
// metadata.
axrt_status_t verify_container(std::string_view name, std::span<const uint8_t> file,
                               FileHeader* out_header, std::vector<SegmentEntry>* out_segments) {
  const uint64_t size = file.size();
  if (size < kHeaderSize) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': the file is {} bytes, smaller than the {}-byte header",
                       name, size, kHeaderSize);
  }
  if (std::memcmp(file.data(), kMagic.data(), kMagic.size()) != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': not an .axe file: it starts with {} instead of the magic "
                       "{}",
                       name, hex_bytes(file.first(kMagic.size())), hex_bytes(kMagic));
  }
  const std::span<const uint8_t, kHeaderSize> header_bytes(file.data(), kHeaderSize);
  const FileHeader header = decode_header(header_bytes);
  // The version comes before the checksum: another major may checksum
  // differently, and "newer format" is the useful answer.
  if (header.format_major != kFormatMajor) {
    return make_status(header.format_major > kFormatMajor ? AXRT_STATUS_CODE_UNIMPLEMENTED
                                                          : AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': format {}.{} is not readable by this reader, which reads "
                       "format {}.x (up to {}.{})",
                       name, header.format_major, header.format_minor, kFormatMajor, kFormatMajor,
                       kFormatMinor);
  }
  const uint32_t checksum = header_checksum(header_bytes);
  if (checksum != header.checksum) {
    return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                       "executable '{}': header checksum mismatch: the header says 0x{:08x} but "
                       "its bytes give 0x{:08x}",
                       name, header.checksum, checksum);
  }
  if (header.flags != 0) {
    return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "executable '{}': header flags 0x{:08x} are unknown to this reader (format "
                       "{}.x defines none)",
                       name, header.flags, kFormatMajor);
  }
  if (header.reserved != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': header reserved field is 0x{:08x}, not 0", name,
                       header.reserved);
  }
  if (header.file_size != size) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': the header says the file is {} bytes but it is {} "
                       "(truncated or extended)",
                       name, header.file_size, size);
  }
  if (header.segment_table_offset != kHeaderSize) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': segment table offset is {}, not {}", name,
                       header.segment_table_offset, kHeaderSize);
  }
  const uint64_t max_segments = (size - kHeaderSize) / kSegmentEntrySize;
  if (header.segment_count > max_segments) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': segment_count {} does not fit: the {} bytes after the "
                       "header hold at most {} entries of {} bytes",
                       name, header.segment_count, size - kHeaderSize, max_segments,
                       kSegmentEntrySize);
  }
  const uint64_t table_end = kHeaderSize + header.segment_count * kSegmentEntrySize;

  const uint64_t md_offset = header.metadata_offset;
  const uint64_t md_size = header.metadata_size;
  if (md_offset % kMetadataAlignment != 0) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata offset {} is not a multiple of {}", name,
                       md_offset, kMetadataAlignment);
  }
  if (md_offset < table_end) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata offset {} overlaps the segment table, which "
                       "ends at {}",
                       name, md_offset, table_end);
  }
  if (md_offset > size || md_size > size - md_offset) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata at offset {} of {} bytes lies outside the file "
                       "of {} bytes",
                       name, md_offset, md_size, size);
  }
  // A root offset and the file identifier, at least; and within what the
  // FlatBuffers Verifier accepts.
  if (md_size < 8 || md_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata size {} is outside [8, {})", name, md_size,
                       static_cast<uint64_t>(FLATBUFFERS_MAX_BUFFER_SIZE));
  }

  std::vector<SegmentEntry> segments;
  segments.reserve(header.segment_count);
  uint64_t previous_end = md_offset + md_size;
  for (uint64_t i = 0; i < header.segment_count; ++i) {
    const SegmentEntry entry = decode_segment_entry(std::span<const uint8_t, kSegmentEntrySize>(
        file.data() + kHeaderSize + i * kSegmentEntrySize, kSegmentEntrySize));
    if (entry.kind < static_cast<uint32_t>(SegmentKind::kCode) ||
        entry.kind > static_cast<uint32_t>(SegmentKind::kPrepacked)) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "executable '{}': segment {} has kind {}, which this reader does not "
                         "know (1 code, 2 constant, 3 prepacked)",
                         name, i, entry.kind);
    }
    if (entry.reserved != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "executable '{}': segment {} reserved field is 0x{:x}, not 0", name, i,
                         entry.reserved);
    }
    if (entry.offset % kSegmentAlignment != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "executable '{}': segment {} offset {} is not a multiple of {}", name, i,
                         entry.offset, kSegmentAlignment);
    }
    if (entry.offset > size || entry.size > size - entry.offset) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "executable '{}': segment {} at offset {} of {} bytes lies outside the "
                         "file of {} bytes",
                         name, i, entry.offset, entry.size, size);
    }
    if (entry.offset < previous_end) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "executable '{}': segment {} at offset {} overlaps {}, which ends at {} "
                         "(segments follow the metadata, in order)",
                         name, i, entry.offset,
                         i == 0 ? std::string("the metadata") : fmt::format("segment {}", i - 1),
                         previous_end);
    }
    previous_end = entry.offset + entry.size;
    segments.push_back(entry);
  }
  *out_header = header;
  *out_segments = std::move(segments);
  return nullptr;
}

template <typename V>
bool misaligned(const V* vector) {
  return vector && (reinterpret_cast<uintptr_t>(vector->Data()) & 7) != 0;
}

bool misaligned_layout(const QuantLayout* layout) {
  return layout && (misaligned(layout->block_shape()) || misaligned(layout->second_level_block_shape()));
}

bool misaligned_expr(const Expr* expr) { return expr && misaligned(expr->ops()); }

bool misaligned_binding(const Binding* binding) { return binding && misaligned_expr(binding->value()); }

// Names the first vector of 8-byte elements that is not 8-byte aligned, or
// returns "" when there is none.
std::string find_misaligned_vector(const Executable& executable) {
  if (const auto* constants = executable.constants()) {
    for (uint32_t i = 0; i < constants->size(); ++i) {
      const Constant* constant = constants->Get(i);
      if (misaligned(constant->shape()) || misaligned(constant->strides()) ||
          misaligned_layout(constant->quantization())) {
        return fmt::format("in constant {}", i);
      }
    }
  }
  if (const auto* kernels = executable.kernels()) {
    for (uint32_t k = 0; k < kernels->size(); ++k) {
      const auto* params = kernels->Get(k)->params();
      for (uint32_t p = 0; params && p < params->size(); ++p) {
        if (misaligned_layout(params->Get(p)->layout())) {
          return fmt::format("in kernel {} parameter {}", k, p);
        }
      }
    }
  }
  const auto* functions = executable.functions();
  for (uint32_t f = 0; functions && f < functions->size(); ++f) {
    const Function* function = functions->Get(f);
    const auto* types = function->commands_type();
    const auto* commands = function->commands();
    if (!types || !commands) continue;
    for (uint32_t c = 0; c < commands->size() && c < types->size(); ++c) {
      bool bad = false;
      switch (static_cast<Command>(types->Get(c))) {
        case Command::DispatchCommand: {
          const auto* d = static_cast<const DispatchCommand*>(commands->Get(c));
          bad = misaligned_expr(d->workgroup_count_x()) || misaligned_expr(d->workgroup_count_y()) ||
                misaligned_expr(d->workgroup_count_z());
          const auto* bindings = d->bindings();
          for (uint32_t b = 0; !bad && bindings && b < bindings->size(); ++b) {
            bad = misaligned_binding(bindings->Get(b));
          }
          break;
        }
        case Command::CopyCommand: {
          const auto* copy = static_cast<const CopyCommand*>(commands->Get(c));
          bad = misaligned_binding(copy->src()) || misaligned_binding(copy->dst()) ||
                misaligned_expr(copy->src_offset()) || misaligned_expr(copy->dst_offset()) ||
                misaligned_expr(copy->length());
          break;
        }
        case Command::FillCommand: {
          const auto* fill = static_cast<const FillCommand*>(commands->Get(c));
          bad = misaligned_binding(fill->target()) || misaligned_expr(fill->offset()) ||
                misaligned_expr(fill->length());
          break;
        }
        default:
          break;  // unknown command types are refused by the semantic checks
      }
      if (bad) return fmt::format("in function {} command {}", f, c);
    }
  }
  return "";
}

axrt_status_t verify_metadata(std::string_view name, std::span<const uint8_t> metadata,
                              const ReadOptions& options, const Executable** out) {
  if (!ExecutableBufferHasIdentifier(metadata.data())) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata file identifier is {} ('{}' expected)", name,
                       hex_bytes(metadata.subspan(4, 4)), kFileIdentifier);
  }
  flatbuffers::Verifier::Options verifier_options;
  verifier_options.max_depth = options.max_depth;
  verifier_options.max_tables = options.max_tables;
  verifier_options.check_alignment = true;
  flatbuffers::Verifier verifier(metadata.data(), metadata.size(), verifier_options);
  if (!VerifyExecutableBuffer(verifier)) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': the metadata ({} bytes) is not a valid Executable "
                       "FlatBuffer (refused by the FlatBuffers verifier; depth limit {}, table "
                       "limit {})",
                       name, metadata.size(), options.max_depth, options.max_tables);
  }
  const Executable* executable = GetExecutable(metadata.data());
  // The FlatBuffers verifier checks the alignment of scalars and of vector
  // length prefixes, not of 8-byte vector elements; a crafted file could
  // place them where every later read would be misaligned.
  const std::string misaligned = find_misaligned_vector(*executable);
  if (!misaligned.empty()) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "executable '{}': metadata vector {} is not 8-byte aligned", name,
                       misaligned);
  }
  *out = executable;
  return nullptr;
}

}  // namespace

std::span<const uint8_t> AxeFile::segment_bytes(uint32_t index) const noexcept {
  if (index >= segments_.size()) return {};
  return file_bytes().subspan(segments_[index].offset, segments_[index].size);
}

std::span<const uint8_t> AxeFile::range_bytes(const SegmentRange& range) const noexcept {
  const std::span<const uint8_t> segment = segment_bytes(range.segment());
  if (range.offset() > segment.size() || range.size() > segment.size() - range.offset()) return {};
  return segment.subspan(range.offset(), range.size());
}

axrt_status_t AxeFile::verify_checksums() const {
  for (size_t i = 0; i < segments_.size(); ++i) {
    const std::span<const uint8_t> bytes = segment_bytes(static_cast<uint32_t>(i));
    const uint32_t actual = crc32c(bytes.data(), bytes.size());
    if (actual != segments_[i].checksum) {
      return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                         "executable '{}': segment {} (offset {}, {} bytes) has CRC-32C 0x{:08x} "
                         "but the segment table expects 0x{:08x}",
                         name_, i, segments_[i].offset, segments_[i].size, actual,
                         segments_[i].checksum);
    }
  }
  return nullptr;
}

axrt_status_t AxeFile::open_storage(std::shared_ptr<const Storage> storage, std::string name,
                                    const ReadOptions& options, std::unique_ptr<AxeFile>* out) {
  return guard("AxeFile::open_storage", [&]() -> axrt_status_t {
    if (name.empty()) name = "<memory>";
    if (storage == nullptr) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "executable '{}': no storage", name);
    }
    // FlatBuffers reads scalars in place; borrowed bytes at an odd address
    // are copied rather than read misaligned.
    if (reinterpret_cast<uintptr_t>(storage->bytes().data()) % kMetadataAlignment != 0) {
      storage = std::make_shared<OwnedStorage>(storage->bytes());
    }
    const std::span<const uint8_t> file = storage->bytes();
    std::unique_ptr<AxeFile> axe(new AxeFile());
    AXRT_RETURN_IF_ERROR(verify_container(name, file, &axe->header_, &axe->segments_));
    const std::span<const uint8_t> metadata =
        file.subspan(axe->header_.metadata_offset, axe->header_.metadata_size);
    AXRT_RETURN_IF_ERROR(verify_metadata(name, metadata, options, &axe->metadata_));
    VerifyContext context;
    context.name = name;
    context.file = file;
    context.segments = axe->segments_;
    context.file_minor = axe->header_.format_minor;
    context.options = &options;
    AXRT_RETURN_IF_ERROR(verify_executable(*axe->metadata_, context));
    axe->name_ = std::move(name);
    axe->storage_ = std::move(storage);
    if (options.verify_checksums) AXRT_RETURN_IF_ERROR(axe->verify_checksums());
    *out = std::move(axe);
    return nullptr;
  });
}

axrt_status_t AxeFile::open_bytes(std::span<const uint8_t> bytes, std::string name,
                                  const ReadOptions& options, std::unique_ptr<AxeFile>* out) {
  return guard("AxeFile::open_bytes", [&]() -> axrt_status_t {
    return open_storage(std::make_shared<OwnedStorage>(bytes), std::move(name), options, out);
  });
}

axrt_status_t AxeFile::open_file(const std::string& path, const ReadOptions& options,
                                 std::unique_ptr<AxeFile>* out) {
  return guard("AxeFile::open_file", [&]() -> axrt_status_t {
    const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      const int error = errno;
      return make_status(code_for_errno(error), "executable '{}': cannot open: {}", path,
                         std::strerror(error));
    }
    struct stat info;
    if (fstat(fd.get(), &info) != 0) {
      const int error = errno;
      return make_status(code_for_errno(error), "executable '{}': cannot stat: {}", path,
                         std::strerror(error));
    }
    if (!S_ISREG(info.st_mode)) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "executable '{}': not a regular file",
                         path);
    }
    const uint64_t size = static_cast<uint64_t>(info.st_size);
    // mmap refuses length 0; an empty file is refused by the header check.
    if (size == 0) {
      return open_storage(std::make_shared<OwnedStorage>(std::span<const uint8_t>()), path, options,
                          out);
    }
    void* address = fault::should_fail(fault::Site::kFileMap)
                        ? MAP_FAILED
                        : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (address == MAP_FAILED) {
      // Where the file cannot be mapped (address space, file systems without
      // mmap), it is read instead.
      std::vector<uint8_t> bytes;
      AXRT_RETURN_IF_ERROR(read_file(fd.get(), path, size, &bytes));
      return open_storage(std::make_shared<OwnedStorage>(std::move(bytes)), path, options, out);
    }
    std::shared_ptr<const Storage> storage;
    try {
      storage = std::make_shared<MappedStorage>(address, size);
    } catch (...) {
      munmap(address, size);
      throw;
    }
    return open_storage(std::move(storage), path, options, out);
  });
}

}  // namespace axrt::axe
