// `axrt inspect FILE [--json]`: format/inspect.h's summary of a verified file.
#include <cstdio>
#include <memory>
#include <string>

#include "format/inspect.h"
#include "tools/axrt/commands.h"

namespace axrt::tools {

// `axrt inspect FILE [--json]`.
int run_inspect(std::span<const std::string_view> args) {
  bool json = false;
  std::string_view path;
  const int parsed = parse_file_arguments(
      "inspect", args,
      [&](std::string_view arg) {
        if (arg != "--json") return false;
        json = true;
        return true;
      },
      &path);
  if (parsed != kExitOk) return parsed;

  std::unique_ptr<axe::AxeFile> file;
  if (!open_or_report(path, axe::ReadOptions(), &file)) return kExitFailure;
  const std::string text = json ? axe::inspect_json(*file) : axe::inspect_text(*file);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace axrt::tools
