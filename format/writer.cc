#include "format/writer.h"

#include <cstring>

namespace axrt::axe {

std::vector<uint8_t> pack_metadata(const ExecutableT& executable) {
  flatbuffers::FlatBufferBuilder fbb(4096);
  fbb.Finish(Executable::Pack(fbb, &executable), kFileIdentifier);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

ContainerLayout plan_container(uint64_t metadata_size, std::span<const SegmentPayload> segments) {
  ContainerLayout layout;
  const uint64_t table_end = kHeaderSize + kSegmentEntrySize * segments.size();
  layout.metadata_offset = align_up(table_end, kMetadataAlignment);
  uint64_t end = layout.metadata_offset + metadata_size;
  for (const SegmentPayload& segment : segments) {
    const uint64_t offset = align_up(end, kSegmentAlignment);
    layout.segment_offsets.push_back(offset);
    end = offset + segment.bytes.size();
  }
  layout.file_size = end;
  return layout;
}

std::vector<uint8_t> assemble_container(std::span<const uint8_t> metadata,
                                        std::span<const SegmentPayload> segments) {
  const ContainerLayout layout = plan_container(metadata.size(), segments);
  std::vector<uint8_t> file(layout.file_size, 0);
  for (size_t i = 0; i < segments.size(); ++i) {
    SegmentEntry entry;
    entry.offset = layout.segment_offsets[i];
    entry.size = segments[i].bytes.size();
    entry.checksum = crc32c(segments[i].bytes.data(), segments[i].bytes.size());
    entry.kind = static_cast<uint32_t>(segments[i].kind);
    encode_segment_entry(entry, std::span<uint8_t, kSegmentEntrySize>(
                                    file.data() + kHeaderSize + i * kSegmentEntrySize,
                                    kSegmentEntrySize));
    if (!segments[i].bytes.empty()) {
      std::memcpy(file.data() + entry.offset, segments[i].bytes.data(), entry.size);
    }
  }
  if (!metadata.empty()) std::memcpy(file.data() + layout.metadata_offset, metadata.data(), metadata.size());
  FileHeader header;
  header.metadata_offset = layout.metadata_offset;
  header.metadata_size = metadata.size();
  header.segment_table_offset = kHeaderSize;
  header.segment_count = segments.size();
  header.file_size = layout.file_size;
  encode_header(header, std::span<uint8_t, kHeaderSize>(file.data(), kHeaderSize));
  return file;
}

}  // namespace axrt::axe
