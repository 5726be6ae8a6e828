// `axrt`: the command-line tool. Subcommands live in their own files; this
// one dispatches.
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "axrt/base.h"
#include "tools/axrt/commands.h"

int main(int argc, char** argv) {
  using namespace axrt::tools;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("missing command");
  const std::string_view command = args[0];
  const std::span<const std::string_view> rest(args.data() + 1, args.size() - 1);
  if (command == "-h" || command == "--help" || command == "help") {
    fmt::print("{}", kUsage);
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    fmt::print("axrt {}\n", axrt_version_string());
    return kExitOk;
  }
  if (command == "inspect") return run_inspect(rest);
  if (command == "verify") return run_verify(rest);
  if (command == "devices") return run_devices(rest);
  if (command == "run") return run_run(rest);
  if (command == "trace") return run_trace(rest);
  if (!command.empty() && command[0] == '-') {
    return usage_error(fmt::format("unknown option '{}'", command));
  }
  return usage_error(fmt::format("unknown command '{}'", command));
}
