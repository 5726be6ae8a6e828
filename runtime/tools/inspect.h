// `axrt inspect`: a summary of a verified .axe file, as text for people or
// as one JSON object for tools (key names are stable; docs/format.md).
#ifndef AXRT_RUNTIME_TOOLS_INSPECT_H_
#define AXRT_RUNTIME_TOOLS_INSPECT_H_

#include <string>

#include "format/reader.h"

namespace axrt::tools {

std::string inspect_text(const axe::AxeFile& file);
std::string inspect_json(const axe::AxeFile& file);

}  // namespace axrt::tools

#endif  // AXRT_RUNTIME_TOOLS_INSPECT_H_
