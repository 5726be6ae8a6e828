// Laying out an .axe container from metadata and segment payloads. The
// builder (format/builder.h) is the public way to make files; this is the
// layer under it, also used by tests that need deliberately broken files.
#ifndef AXRT_FORMAT_WRITER_H_
#define AXRT_FORMAT_WRITER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "axrt/base.h"
#include "format/axe_generated.h"
#include "format/container.h"

namespace axrt::axe {

struct SegmentPayload {
  SegmentKind kind;
  std::span<const uint8_t> bytes;
};

// Serializes `executable` into a FlatBuffer with the "AXE1" identifier.
// Deterministic: the same object gives the same bytes.
std::vector<uint8_t> pack_metadata(const ExecutableT& executable);

// Returns the whole file: header, segment table, `metadata` (8-aligned) and
// each segment at the next 4096 boundary, zero padding in between, with
// every checksum filled in.
std::vector<uint8_t> assemble_container(std::span<const uint8_t> metadata,
                                        std::span<const SegmentPayload> segments);

// Where assemble_container() puts things, for writers that stream.
struct ContainerLayout {
  uint64_t metadata_offset = 0;
  std::vector<uint64_t> segment_offsets;
  uint64_t file_size = 0;
};
ContainerLayout plan_container(uint64_t metadata_size, std::span<const SegmentPayload> segments);
ContainerLayout plan_container(uint64_t metadata_size, std::span<const uint64_t> segment_sizes);

// ---------------------------------------------------------------------------
// Streaming: files larger than the memory a writer may hold

// Bytes produced when a file is written, such as a constant's weights read
// from a checkpoint, so that a writer never holds every payload at once.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const noexcept = 0;
  // Writes bytes [offset, offset + out.size()) of the source, a range within
  // size(), into `out`. Within one write of a file a source is read once, in
  // ascending order of offset, a piece at a time.
  virtual axrt_status_t read(uint64_t offset, std::span<uint8_t> out) = 0;
  // The bytes, when the source holds them in memory (read() is then not
  // called); empty otherwise.
  virtual std::span<const uint8_t> resident() const noexcept { return {}; }
};

// Bytes held in memory, copied in.
class ResidentBytes final : public ByteSource {
 public:
  explicit ResidentBytes(std::span<const uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  uint64_t size() const noexcept override { return bytes_.size(); }
  axrt_status_t read(uint64_t offset, std::span<uint8_t> out) override;
  std::span<const uint8_t> resident() const noexcept override { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A segment as pieces at offsets within it; the bytes between and after
// pieces are zero.
struct StreamedSegment {
  struct Piece {
    uint64_t offset = 0;  // within the segment; pieces ascend and do not overlap
    std::shared_ptr<ByteSource> source;
    std::string what;  // for messages: "constant 'fc1.weight'"
  };
  SegmentKind kind = SegmentKind::kConstant;
  uint64_t size = 0;
  std::vector<Piece> pieces;
};

// Where a streamed file goes: a file, or memory.
class ContainerOutput {
 public:
  virtual ~ContainerOutput() = default;
  // Makes the output `size` bytes long; bytes never written read as zero.
  virtual axrt_status_t resize(uint64_t size) = 0;
  virtual axrt_status_t write(uint64_t offset, std::span<const uint8_t> bytes) = 0;
};

// The bytes of every source go through one buffer of this size: the most a
// streamed write holds of them at once, and the largest piece it reads.
inline constexpr uint64_t kStreamChunkSize = uint64_t{4} << 20;

// Writes a container in two steps, with the same layout and bytes as
// assemble_container(). write_resident() sizes the output and writes the
// metadata and every resident piece, with a header whose segment table
// holds no checksums yet: enough for the reader to verify everything but
// the checksums before anything is streamed. write_streamed() then reads
// the other sources in file order and writes them, and last the segment
// table and header with every checksum.
class ContainerStreamer {
 public:
  ContainerStreamer(std::span<const uint8_t> metadata, std::vector<StreamedSegment> segments);
  uint64_t file_size() const noexcept { return layout_.file_size; }
  axrt_status_t write_resident(ContainerOutput* output) const;
  axrt_status_t write_streamed(ContainerOutput* output) const;

 private:
  axrt_status_t write_table(ContainerOutput* output, std::span<const uint32_t> checksums) const;

  std::span<const uint8_t> metadata_;
  std::vector<StreamedSegment> segments_;
  ContainerLayout layout_;
};

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_WRITER_H_
