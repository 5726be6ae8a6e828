// `axrt verify FILE [--checksums] [--no-host-code]`.
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "base/status.h"
#include "tools/axrt/commands.h"

namespace axrt::tools {

bool open_or_report(std::string_view path, const axe::ReadOptions& options,
                    std::unique_ptr<axe::AxeFile>* out) {
  StatusPtr status(axe::AxeFile::open_file(std::string(path), options, out));
  if (!status) return true;
  fmt::print(stderr, "{}: refused: {} [{}]\n", path, axrt_status_message(status.get()),
             axrt_status_code_name(axrt_status_code(status.get())));
  return false;
}

namespace {

std::string count(size_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

template <typename T>
size_t size_of(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

}  // namespace

int run_verify(std::span<const std::string_view> args) {
  axe::ReadOptions options;
  std::string_view path;
  const int parsed = parse_file_arguments(
      "verify", args,
      [&](std::string_view arg) {
        if (arg == "--checksums") {
          options.verify_checksums = true;
        } else if (arg == "--no-host-code") {
          options.allow_host_code = false;
        } else {
          return false;
        }
        return true;
      },
      &path);
  if (parsed != kExitOk) return parsed;

  std::unique_ptr<axe::AxeFile> file;
  if (!open_or_report(path, options, &file)) return kExitFailure;
  const axe::Executable& exe = file->metadata();
  fmt::print("{}: valid (format {}.{}, {}, {}, {}, {}, {}; checksums {})\n", path,
             file->header().format_major, file->header().format_minor,
             count(file->segments().size(), "segment"),
             count(size_of(exe.code_objects()), "code object"), count(size_of(exe.kernels()), "kernel"),
             count(size_of(exe.constants()), "constant"), count(size_of(exe.functions()), "function"),
             options.verify_checksums ? "verified" : "not checked");
  return kExitOk;
}

}  // namespace axrt::tools
