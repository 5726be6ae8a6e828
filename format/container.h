// The .axe container: a fixed 64-byte header, a table of segments, the
// FlatBuffer metadata (axe.fbs) and the segments themselves.
//
//   offset 0     header (64 bytes, little-endian, see FileHeader)
//   offset 64    segment table: segment_count entries of 32 bytes
//   8-aligned    metadata: a FlatBuffer with file identifier "AXE1"
//   4096-aligned segments, in table order, each starting on a 4096 boundary
//
// All integers are little-endian. docs/format.md is the full specification.
#ifndef AXRT_FORMAT_CONTAINER_H_
#define AXRT_FORMAT_CONTAINER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace axrt::axe {

inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'A', 'X', 'E', '\r', '\n', 0x1a, '\n'};
inline constexpr uint16_t kFormatMajor = 1;
// The minor version this library writes. The reader accepts every minor of
// kFormatMajor (docs/format.md, "Versioning"); 1.1 added kernel variants,
// 1.2 mutable function inputs, 1.3 mandatory feature declarations and
// negative literals for signed scalar parameters, 1.4 collectives over
// function channels.
inline constexpr uint16_t kFormatMinor = 4;
inline constexpr uint64_t kHeaderSize = 64;
inline constexpr uint64_t kSegmentEntrySize = 32;
inline constexpr uint64_t kMetadataAlignment = 8;
inline constexpr uint64_t kSegmentAlignment = 4096;
inline constexpr char kFileIdentifier[] = "AXE1";

// Byte offsets of the header fields.
namespace header_offset {
inline constexpr size_t kMagic = 0;            // 8 bytes
inline constexpr size_t kFormatMajor = 8;      // u16
inline constexpr size_t kFormatMinor = 10;     // u16
inline constexpr size_t kFlags = 12;           // u32, 0 in format 1.x
inline constexpr size_t kMetadataOffset = 16;  // u64
inline constexpr size_t kMetadataSize = 24;    // u64
inline constexpr size_t kSegmentTableOffset = 32;  // u64
inline constexpr size_t kSegmentCount = 40;    // u64
inline constexpr size_t kFileSize = 48;        // u64
inline constexpr size_t kReserved = 56;        // u32, 0
inline constexpr size_t kChecksum = 60;        // u32: CRC-32C of bytes [0, 60)
}  // namespace header_offset

struct FileHeader {
  uint16_t format_major = kFormatMajor;
  uint16_t format_minor = kFormatMinor;
  uint32_t flags = 0;
  uint64_t metadata_offset = 0;
  uint64_t metadata_size = 0;
  uint64_t segment_table_offset = kHeaderSize;
  uint64_t segment_count = 0;
  uint64_t file_size = 0;
  uint32_t reserved = 0;
  uint32_t checksum = 0;  // as stored; encode_header() computes it
};

enum class SegmentKind : uint32_t {
  kCode = 1,       // bytes of a code object
  kConstant = 2,   // weights of one or more constants
  kPrepacked = 3,  // pre-packed copies of constants
};

// One entry of the segment table (32 bytes on disk).
struct SegmentEntry {
  uint64_t offset = 0;    // from the start of the file; a multiple of 4096
  uint64_t size = 0;      // bytes
  uint32_t checksum = 0;  // CRC-32C of the segment's bytes
  uint32_t kind = 0;      // SegmentKind
  uint64_t reserved = 0;  // 0 in format 1.x
};

// Writes `header` (with its checksum computed) into 64 bytes.
void encode_header(const FileHeader& header, std::span<uint8_t, kHeaderSize> out);
// Reads the fields of a 64-byte header without judging them; the reader
// checks magic, version, checksum and ranges.
FileHeader decode_header(std::span<const uint8_t, kHeaderSize> bytes);
// The checksum a header's first 60 bytes should carry.
uint32_t header_checksum(std::span<const uint8_t, kHeaderSize> bytes);

void encode_segment_entry(const SegmentEntry& entry, std::span<uint8_t, kSegmentEntrySize> out);
SegmentEntry decode_segment_entry(std::span<const uint8_t, kSegmentEntrySize> bytes);

// CRC-32C (Castagnoli), continuing from `crc` (0 to start). Uses the SSE4.2
// instruction where the CPU has it.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0) noexcept;

// Little-endian loads and stores that do not care about alignment.
uint16_t load_u16(const uint8_t* p) noexcept;
uint32_t load_u32(const uint8_t* p) noexcept;
uint64_t load_u64(const uint8_t* p) noexcept;
void store_u16(uint8_t* p, uint16_t v) noexcept;
void store_u32(uint8_t* p, uint32_t v) noexcept;
void store_u64(uint8_t* p, uint64_t v) noexcept;

inline constexpr uint64_t align_up(uint64_t value, uint64_t alignment) noexcept {
  return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_CONTAINER_H_
