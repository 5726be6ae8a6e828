// Laying out an .axe container from metadata and segment payloads. The
// builder (format/builder.h) is the public way to make files; this is the
// layer under it, also used by tests that need deliberately broken files.
#ifndef AXRT_FORMAT_WRITER_H_
#define AXRT_FORMAT_WRITER_H_

#include <cstdint>
#include <span>
#include <vector>

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

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_WRITER_H_
