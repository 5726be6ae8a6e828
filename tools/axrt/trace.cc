// `axrt trace summary TRACE.json [--top N] [--json]`: where the time of a
// trace (axrt_instance_trace_start, `axrt run --trace`) went, by kernel, copy
// direction, function and API call (trace_summary.h).
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "tools/axrt/commands.h"
#include "tools/axrt/trace_summary.h"

namespace axrt::tools {

namespace {

constexpr size_t kDefaultTop = 15;

// Reads the whole file at `path`; false with `*error` set otherwise.
bool read_file(const std::string& path, std::string* out, std::string* error) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    *error = fmt::format("cannot open: {}", std::strerror(errno));
    return false;
  }
  char buffer[1 << 16];
  while (true) {
    const size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    out->append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get())) {
    *error = fmt::format("cannot read: {}", std::strerror(errno));
    return false;
  }
  return true;
}

int run_summary(std::span<const std::string_view> args) {
  bool json = false;
  size_t top = kDefaultTop;
  std::string_view path;
  bool have_path = false;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      if (have_path) {
        return usage_error(
            fmt::format("trace summary: one file at a time ('{}' and '{}')", path, arg));
      }
      path = arg;
      have_path = true;
    } else if (arg == "--") {
      options_done = true;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--top" || arg.starts_with("--top=")) {
      std::string_view value;
      if (arg != "--top") {
        value = arg.substr(6);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return usage_error("trace summary: --top needs a value");
      }
      size_t n = 0;
      bool valid = !value.empty() && value.size() <= 9;
      for (char c : value) {
        if (c < '0' || c > '9') valid = false;
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (!valid) {
        return usage_error(fmt::format(
            "trace summary: --top wants a count of rows (0 for all), not '{}'", value));
      }
      top = n;
    } else {
      return usage_error(fmt::format("trace summary: unknown option '{}'", arg));
    }
  }
  if (!have_path) return usage_error("trace summary: missing TRACE.json");

  std::string text;
  std::string error;
  if (!read_file(std::string(path), &text, &error)) {
    fmt::print(stderr, "axrt trace: {}: {}\n", path, error);
    return kExitFailure;
  }
  TraceSummary summary;
  if (!summarize_trace(text, &summary, &error)) {
    fmt::print(stderr, "axrt trace: {}: {}\n", path, error);
    return kExitFailure;
  }
  const std::string out =
      json ? trace_summary_json(summary, path, top) : trace_summary_text(summary, path, top);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int run_trace(std::span<const std::string_view> args) {
  if (args.empty()) return usage_error("trace: missing subcommand (summary)");
  const std::string_view subcommand = args[0];
  const std::span<const std::string_view> rest = args.subspan(1);
  if (subcommand == "summary") return run_summary(rest);
  return usage_error(fmt::format("trace: unknown subcommand '{}' (there is summary)", subcommand));
}

}  // namespace axrt::tools
