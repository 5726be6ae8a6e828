#include "format/writer.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/status.h"

namespace axrt::axe {

std::vector<uint8_t> pack_metadata(const ExecutableT& executable) {
  flatbuffers::FlatBufferBuilder fbb(4096);
  fbb.Finish(Executable::Pack(fbb, &executable), kFileIdentifier);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

ContainerLayout plan_container(uint64_t metadata_size, std::span<const uint64_t> segment_sizes) {
  ContainerLayout layout;
  const uint64_t table_end = kHeaderSize + kSegmentEntrySize * segment_sizes.size();
  layout.metadata_offset = align_up(table_end, kMetadataAlignment);
  uint64_t end = layout.metadata_offset + metadata_size;
  for (const uint64_t size : segment_sizes) {
    const uint64_t offset = align_up(end, kSegmentAlignment);
    layout.segment_offsets.push_back(offset);
    end = offset + size;
  }
  layout.file_size = end;
  return layout;
}

ContainerLayout plan_container(uint64_t metadata_size, std::span<const SegmentPayload> segments) {
  std::vector<uint64_t> sizes;
  for (const SegmentPayload& segment : segments) sizes.push_back(segment.bytes.size());
  return plan_container(metadata_size, sizes);
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

axrt_status_t ResidentBytes::read(uint64_t offset, std::span<uint8_t> out) {
  if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
  return nullptr;
}

namespace {

// The CRC-32C of `count` zero bytes, continuing from `crc`.
uint32_t crc32c_zeros(uint64_t count, uint32_t crc) {
  static constexpr std::array<uint8_t, 4096> kZeros{};
  while (count > 0) {
    const uint64_t n = std::min<uint64_t>(count, kZeros.size());
    crc = crc32c(kZeros.data(), n, crc);
    count -= n;
  }
  return crc;
}

}  // namespace

ContainerStreamer::ContainerStreamer(std::span<const uint8_t> metadata,
                                     std::vector<StreamedSegment> segments)
    : metadata_(metadata), segments_(std::move(segments)) {
  std::vector<uint64_t> sizes;
  for (const StreamedSegment& segment : segments_) sizes.push_back(segment.size);
  layout_ = plan_container(metadata_.size(), sizes);
}

axrt_status_t ContainerStreamer::write_table(ContainerOutput* output,
                                             std::span<const uint32_t> checksums) const {
  std::vector<uint8_t> bytes(kHeaderSize + kSegmentEntrySize * segments_.size(), 0);
  for (size_t i = 0; i < segments_.size(); ++i) {
    SegmentEntry entry;
    entry.offset = layout_.segment_offsets[i];
    entry.size = segments_[i].size;
    entry.checksum = checksums.empty() ? 0 : checksums[i];
    entry.kind = static_cast<uint32_t>(segments_[i].kind);
    encode_segment_entry(entry, std::span<uint8_t, kSegmentEntrySize>(
                                    bytes.data() + kHeaderSize + i * kSegmentEntrySize,
                                    kSegmentEntrySize));
  }
  FileHeader header;
  header.metadata_offset = layout_.metadata_offset;
  header.metadata_size = metadata_.size();
  header.segment_table_offset = kHeaderSize;
  header.segment_count = segments_.size();
  header.file_size = layout_.file_size;
  encode_header(header, std::span<uint8_t, kHeaderSize>(bytes.data(), kHeaderSize));
  return output->write(0, bytes);
}

axrt_status_t ContainerStreamer::write_resident(ContainerOutput* output) const {
  AXRT_RETURN_IF_ERROR(output->resize(layout_.file_size));
  AXRT_RETURN_IF_ERROR(output->write(layout_.metadata_offset, metadata_));
  for (size_t i = 0; i < segments_.size(); ++i) {
    for (const StreamedSegment::Piece& piece : segments_[i].pieces) {
      const std::span<const uint8_t> bytes = piece.source->resident();
      if (bytes.empty()) continue;
      AXRT_RETURN_IF_ERROR(output->write(layout_.segment_offsets[i] + piece.offset, bytes));
    }
  }
  return write_table(output, {});
}

axrt_status_t ContainerStreamer::write_streamed(ContainerOutput* output) const {
  std::vector<uint8_t> chunk;
  std::vector<uint32_t> checksums;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const StreamedSegment& segment = segments_[i];
    uint32_t crc = 0;
    uint64_t position = 0;
    for (const StreamedSegment::Piece& piece : segment.pieces) {
      crc = crc32c_zeros(piece.offset - position, crc);
      const uint64_t size = piece.source->size();
      const std::span<const uint8_t> resident = piece.source->resident();
      if (!resident.empty() || size == 0) {
        crc = crc32c(resident.data(), resident.size(), crc);
      } else {
        if (chunk.empty()) chunk.resize(std::min<uint64_t>(kStreamChunkSize, size));
        for (uint64_t done = 0; done < size;) {
          const uint64_t n = std::min<uint64_t>({size - done, kStreamChunkSize});
          if (chunk.size() < n) chunk.resize(n);
          const std::span<uint8_t> out(chunk.data(), n);
          if (axrt_status_t status = piece.source->read(done, out)) {
            StatusPtr owned(status);
            return make_status(status->code, "{}: reading bytes [{}, {}) of its data failed: {}",
                               piece.what, done, done + n, status->message);
          }
          crc = crc32c(out.data(), n, crc);
          AXRT_RETURN_IF_ERROR(
              output->write(layout_.segment_offsets[i] + piece.offset + done, out));
          done += n;
        }
      }
      position = piece.offset + size;
    }
    checksums.push_back(crc32c_zeros(segment.size - position, crc));
  }
  return write_table(output, checksums);
}

}  // namespace axrt::axe
