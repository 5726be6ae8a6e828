// The usage text of the `axrt` tool and its usage errors.
#include <fmt/format.h>

#include <cstdio>

#include "tools/axrt/commands.h"

namespace axrt::tools {

const char kUsage[] =
    "usage: axrt <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  inspect FILE [--json]       summarize an .axe executable (JSON with --json)\n"
    "  verify FILE [--checksums] [--no-host-code]\n"
    "                              verify an .axe executable: exit 0 if valid, 1 if\n"
    "                              refused (the reason on stderr); --checksums also\n"
    "                              checks every segment's CRC-32C, --no-host-code\n"
    "                              refuses files carrying native host code\n"
    "  devices [--json] [--topology]\n"
    "                              list the drivers built in (with why one has no\n"
    "                              devices) and the devices of this machine; with\n"
    "                              --topology, how they reach each other's memory\n"
    "                              and their NUMA nodes\n"
    "  run FILE [--function NAME] [--input X.npy ...] [--device ID]\n"
    "      [--output-dir DIR] [--allow-host-code] [--repeat N] [--trace TRACE.json]\n"
    "                              call a function of an .axe executable: one\n"
    "                              --input per function input, in order (.npy,\n"
    "                              little-endian, C order); each output is written\n"
    "                              to DIR/<name>.npy, or summarized without\n"
    "                              --output-dir; --function may be left out when\n"
    "                              there is one function; --device defaults to\n"
    "                              $AXRT_DEVICE, else cpu:0; --repeat N calls N\n"
    "                              times and prints the time per call; --trace\n"
    "                              writes a trace of the run to TRACE.json\n"
    "  trace summary TRACE.json [--top N] [--json]\n"
    "                              summarize a trace: time by kernel, copy\n"
    "                              direction, function and API call, the N\n"
    "                              longest rows of each (15; 0 for all); JSON\n"
    "                              with --json\n"
    "\n"
    "options:\n"
    "  -h, --help                  print this text\n"
    "  --version                   print the library version\n"
    "\n"
    "exit status: 0 success, 1 failure, 2 usage error\n";

int usage_error(std::string_view message) {
  fmt::print(stderr, "axrt: {}\n\n{}", message, kUsage);
  return kExitUsage;
}

int parse_file_arguments(std::string_view command, std::span<const std::string_view> args,
                         const std::function<bool(std::string_view)>& take_option,
                         std::string_view* out_path) {
  bool have_path = false;
  bool options_done = false;
  for (std::string_view arg : args) {
    if (!options_done && arg == "--") {
      options_done = true;
    } else if (!options_done && arg.size() > 1 && arg[0] == '-') {
      if (!take_option(arg)) return usage_error(fmt::format("{}: unknown option '{}'", command, arg));
    } else if (have_path) {
      return usage_error(
          fmt::format("{}: one file at a time ('{}' and '{}')", command, *out_path, arg));
    } else {
      *out_path = arg;
      have_path = true;
    }
  }
  if (!have_path) return usage_error(fmt::format("{}: missing FILE", command));
  return kExitOk;
}

}  // namespace axrt::tools
