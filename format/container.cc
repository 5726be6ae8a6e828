#include "format/container.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace axrt::axe {

uint16_t load_u16(const uint8_t* p) noexcept { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t load_u32(const uint8_t* p) noexcept {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

uint64_t load_u64(const uint8_t* p) noexcept {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}

void store_u16(uint8_t* p, uint16_t v) noexcept {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void store_u32(uint8_t* p, uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void store_u64(uint8_t* p, uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

namespace {

// The reflected Castagnoli polynomial.
constexpr uint32_t kCrc32cPolynomial = 0x82F63B78u;

struct Crc32cTable {
  uint32_t entries[8][256];
  constexpr Crc32cTable() : entries() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (kCrc32cPolynomial & (0u - (crc & 1u)));
      entries[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int t = 1; t < 8; ++t) {
        entries[t][i] = (entries[t - 1][i] >> 8) ^ entries[0][entries[t - 1][i] & 0xff];
      }
    }
  }
};

constexpr Crc32cTable kTable;

// Slicing-by-8 over the table: the portable path.
uint32_t crc32c_portable(const uint8_t* p, size_t size, uint32_t crc) noexcept {
  while (size && (reinterpret_cast<uintptr_t>(p) & 7)) {
    crc = (crc >> 8) ^ kTable.entries[0][(crc ^ *p++) & 0xff];
    --size;
  }
  while (size >= 8) {
    const uint64_t word = load_u64(p) ^ crc;
    crc = kTable.entries[7][word & 0xff] ^ kTable.entries[6][(word >> 8) & 0xff] ^
          kTable.entries[5][(word >> 16) & 0xff] ^ kTable.entries[4][(word >> 24) & 0xff] ^
          kTable.entries[3][(word >> 32) & 0xff] ^ kTable.entries[2][(word >> 40) & 0xff] ^
          kTable.entries[1][(word >> 48) & 0xff] ^ kTable.entries[0][word >> 56];
    p += 8;
    size -= 8;
  }
  while (size--) crc = (crc >> 8) ^ kTable.entries[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t size,
                                                          uint32_t crc) noexcept {
  uint64_t c = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool have_sse42 = __builtin_cpu_supports("sse4.2");
  crc = have_sse42 ? crc32c_sse42(p, size, crc) : crc32c_portable(p, size, crc);
#else
  crc = crc32c_portable(p, size, crc);
#endif
  return ~crc;
}

uint32_t header_checksum(std::span<const uint8_t, kHeaderSize> bytes) {
  return crc32c(bytes.data(), header_offset::kChecksum);
}

void encode_header(const FileHeader& header, std::span<uint8_t, kHeaderSize> out) {
  uint8_t* p = out.data();
  std::memset(p, 0, kHeaderSize);
  std::memcpy(p + header_offset::kMagic, kMagic.data(), kMagic.size());
  store_u16(p + header_offset::kFormatMajor, header.format_major);
  store_u16(p + header_offset::kFormatMinor, header.format_minor);
  store_u32(p + header_offset::kFlags, header.flags);
  store_u64(p + header_offset::kMetadataOffset, header.metadata_offset);
  store_u64(p + header_offset::kMetadataSize, header.metadata_size);
  store_u64(p + header_offset::kSegmentTableOffset, header.segment_table_offset);
  store_u64(p + header_offset::kSegmentCount, header.segment_count);
  store_u64(p + header_offset::kFileSize, header.file_size);
  store_u32(p + header_offset::kReserved, header.reserved);
  store_u32(p + header_offset::kChecksum, header_checksum(out));
}

FileHeader decode_header(std::span<const uint8_t, kHeaderSize> bytes) {
  const uint8_t* p = bytes.data();
  FileHeader header;
  header.format_major = load_u16(p + header_offset::kFormatMajor);
  header.format_minor = load_u16(p + header_offset::kFormatMinor);
  header.flags = load_u32(p + header_offset::kFlags);
  header.metadata_offset = load_u64(p + header_offset::kMetadataOffset);
  header.metadata_size = load_u64(p + header_offset::kMetadataSize);
  header.segment_table_offset = load_u64(p + header_offset::kSegmentTableOffset);
  header.segment_count = load_u64(p + header_offset::kSegmentCount);
  header.file_size = load_u64(p + header_offset::kFileSize);
  header.reserved = load_u32(p + header_offset::kReserved);
  header.checksum = load_u32(p + header_offset::kChecksum);
  return header;
}

void encode_segment_entry(const SegmentEntry& entry, std::span<uint8_t, kSegmentEntrySize> out) {
  uint8_t* p = out.data();
  store_u64(p + 0, entry.offset);
  store_u64(p + 8, entry.size);
  store_u32(p + 16, entry.checksum);
  store_u32(p + 20, entry.kind);
  store_u64(p + 24, entry.reserved);
}

SegmentEntry decode_segment_entry(std::span<const uint8_t, kSegmentEntrySize> bytes) {
  const uint8_t* p = bytes.data();
  SegmentEntry entry;
  entry.offset = load_u64(p + 0);
  entry.size = load_u64(p + 8);
  entry.checksum = load_u32(p + 16);
  entry.kind = load_u32(p + 20);
  entry.reserved = load_u64(p + 24);
  return entry;
}

}  // namespace axrt::axe
