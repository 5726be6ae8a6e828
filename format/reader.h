// Opening an .axe file: every check of docs/format.md runs before the caller
// gets anything, and before the runtime allocates anything for the file.
#ifndef AXRT_FORMAT_READER_H_
#define AXRT_FORMAT_READER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "axrt/base.h"
#include "format/axe_generated.h"
#include "format/container.h"

namespace axrt::axe {

struct ReadOptions {
  // Refuse files that carry HOST_SHARED_OBJECT code objects (native code),
  // for files from untrusted sources.
  bool allow_host_code = true;
  // Verify every segment's CRC-32C while opening (otherwise on request,
  // through AxeFile::verify_checksums()).
  bool verify_checksums = false;
  // Features this reader understands beyond the built-in list
  // (known_features()); a file requiring anything else is refused.
  std::vector<std::string> extra_features;
  // Read as a reader of format 1.<reader_minor> would: with the built-in
  // features that version understood (known_features(reader_minor)), and
  // without what later minors added to the rules (mutable inputs before
  // 1.2; declared features and negative literals before 1.3). For tests of
  // what older readers make of newer files; values above kFormatMinor read
  // as kFormatMinor.
  uint16_t reader_minor = kFormatMinor;
  // FlatBuffers Verifier limits.
  uint32_t max_depth = 64;
  uint32_t max_tables = 1000000;
};

// The required_features a reader of format 1.<minor> understands (this
// reader's by default): those of 1.0 and 1.1, "mutable-inputs.v1" from 1.2
// on, "signed-scalars.v1" from 1.3 on and "collectives.v1" from 1.4 on.
std::span<const std::string_view> known_features(uint16_t minor = kFormatMinor) noexcept;

// The features of format 1.0, each named by a file that uses what it names
// (always from format 1.3 on; docs/format.md, "Required features").
inline constexpr std::string_view kQuantizationFeature = "quantization.v1";
inline constexpr std::string_view kSymbolicDimsFeature = "symbolic-dims.v1";
inline constexpr std::string_view kPrepackedFeature = "prepacked.v1";
inline constexpr std::string_view kHostCodeFeature = "host-code.v1";
inline constexpr std::string_view kKernelLibraryFeature = "kernel-library.v1";
// The feature a file with a mutable function input requires (format 1.2).
inline constexpr std::string_view kMutableInputsFeature = "mutable-inputs.v1";
// The feature a file with a negative literal for a signed scalar parameter
// requires (format 1.3).
inline constexpr std::string_view kSignedScalarsFeature = "signed-scalars.v1";
// The feature a file with function channels or collective commands
// requires (format 1.4).
inline constexpr std::string_view kCollectivesFeature = "collectives.v1";

// The bytes of a file: memory-mapped, owned, or borrowed from the caller.
class Storage {
 public:
  virtual ~Storage() = default;
  virtual std::span<const uint8_t> bytes() const noexcept = 0;
};

// A verified, read-only view of an .axe file. Thread-safe after opening.
//
// Opening refuses a file with a status whose message starts with
// "executable '<name>': " and names the field, the index and the numbers:
// INVALID_ARGUMENT for a broken rule, DATA_LOSS for a checksum mismatch,
// UNIMPLEMENTED for what a newer writer may use (another major format,
// unknown flags, features, segment kinds or enum values), PERMISSION_DENIED
// for host code when ReadOptions::allow_host_code is false; open_file adds
// NOT_FOUND and PERMISSION_DENIED from the file system.
class AxeFile {
 public:
  // Maps `path` read-only. `name` in messages is the path.
  static axrt_status_t open_file(const std::string& path, const ReadOptions& options,
                                 std::unique_ptr<AxeFile>* out);
  // Verifies `storage`'s bytes; the file keeps `storage` alive. `name` is
  // what error messages call the file ("<memory>" when empty).
  static axrt_status_t open_storage(std::shared_ptr<const Storage> storage, std::string name,
                                    const ReadOptions& options, std::unique_ptr<AxeFile>* out);
  // Copies `bytes` into owned storage and opens that.
  static axrt_status_t open_bytes(std::span<const uint8_t> bytes, std::string name,
                                  const ReadOptions& options, std::unique_ptr<AxeFile>* out);

  const std::string& name() const noexcept { return name_; }
  const FileHeader& header() const noexcept { return header_; }
  const Executable& metadata() const noexcept { return *metadata_; }
  std::span<const SegmentEntry> segments() const noexcept { return segments_; }
  // The bytes of segment `index` (checked in range when opening).
  std::span<const uint8_t> segment_bytes(uint32_t index) const noexcept;
  // The bytes of a verified SegmentRange.
  std::span<const uint8_t> range_bytes(const SegmentRange& range) const noexcept;
  std::span<const uint8_t> file_bytes() const noexcept { return storage_->bytes(); }
  const std::shared_ptr<const Storage>& storage() const noexcept { return storage_; }

  // Checks every segment's CRC-32C; DATA_LOSS names the first that differs.
  axrt_status_t verify_checksums() const;

 private:
  AxeFile() = default;

  std::string name_;
  std::shared_ptr<const Storage> storage_;
  FileHeader header_;
  std::vector<SegmentEntry> segments_;
  const Executable* metadata_ = nullptr;
};

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_READER_H_
