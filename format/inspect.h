// A summary of a verified .axe file, as text for people or as one JSON object
// for tools (key names are stable; docs/format.md): what `axrt inspect`
// prints, and what the reader's fuzzer runs over every file it accepts.
#ifndef AXRT_FORMAT_INSPECT_H_
#define AXRT_FORMAT_INSPECT_H_

#include <string>

#include "format/reader.h"

namespace axrt::axe {

std::string inspect_text(const AxeFile& file);
std::string inspect_json(const AxeFile& file);

}  // namespace axrt::axe

#endif  // AXRT_FORMAT_INSPECT_H_
