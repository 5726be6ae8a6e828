// What the unit tests that write trace files share: a per-process path in
// the temporary directory and reading a file whole.
#ifndef AXRT_TESTS_UNIT_TRACE_FILES_H_
#define AXRT_TESTS_UNIT_TRACE_FILES_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace axrt_test {

// "<temp>/<name>-<pid>.json": tests running at once never share a file.
inline std::string TempTracePath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".json"))
      .string();
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_TRACE_FILES_H_
