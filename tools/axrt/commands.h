// The subcommands of the `axrt` tool. Each takes the arguments after its
// name and returns the process exit status: 0 success, 1 failure (a file
// refused, a device error), 2 a usage error (usage printed to stderr).
#ifndef AXRT_TOOLS_AXRT_COMMANDS_H_
#define AXRT_TOOLS_AXRT_COMMANDS_H_

#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "format/reader.h"

namespace axrt::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int run_inspect(std::span<const std::string_view> args);
int run_verify(std::span<const std::string_view> args);
int run_devices(std::span<const std::string_view> args);
int run_run(std::span<const std::string_view> args);
int run_trace(std::span<const std::string_view> args);

// Opens `path` with `options`; on refusal prints "PATH: refused: REASON"
// to stderr and returns false.
bool open_or_report(std::string_view path, const axe::ReadOptions& options,
                    std::unique_ptr<axe::AxeFile>* out);

// Parses the arguments of a subcommand that takes `[options] FILE`: `--`
// ends the options, `take_option(arg)` says whether the subcommand knows an
// option (and records it). Returns kExitOk with `*out_path` set, or the
// usage error's exit status. `command` names the subcommand in messages.
int parse_file_arguments(std::string_view command, std::span<const std::string_view> args,
                         const std::function<bool(std::string_view)>& take_option,
                         std::string_view* out_path);

// Prints `message` and the usage text to stderr; returns kExitUsage.
int usage_error(std::string_view message);
// The usage text printed by `axrt --help`.
extern const char kUsage[];

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_COMMANDS_H_
