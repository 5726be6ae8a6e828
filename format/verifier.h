// The semantic checks of an .axe file's metadata, run after the container
// checks and the FlatBuffers Verifier have passed (format/reader.cc). Every
// refusal names the executable, the object, the field, the index and the
// numbers.
#ifndef AXRT_FORMAT_VERIFIER_H_
#define AXRT_FORMAT_VERIFIER_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "axrt/base.h"
#include "format/axe_generated.h"
#include "format/container.h"
#include "format/reader.h"

namespace axrt::axe {

struct VerifyContext {
  // What messages call the file.
  std::string_view name;
  // The whole file; every entry of `segments` lies inside it.
  std::span<const uint8_t> file;
  std::span<const SegmentEntry> segments;
  // The header's format_minor: from 1.3 on, a file declares every feature
  // it uses.
  uint16_t file_minor = kFormatMinor;
  const ReadOptions* options = nullptr;
};

// Checks `executable` against the rules of docs/format.md ("Verification").
axrt_status_t verify_executable(const Executable& executable, const VerifyContext& context);

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_VERIFIER_H_
