// Inputs that once crashed the reader (found by fuzzing), kept forever. Each
// must be refused cleanly; the sanitizer builds turn any undefined behaviour
// on the way into a failure.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/reader.h"

namespace {

std::vector<uint8_t> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("every fuzzing regression input is refused without undefined behaviour") {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(AXRT_FUZZ_REGRESSION_DIR)) {
    if (entry.path().extension() != ".axe") continue;
    ++count;
    INFO(entry.path().filename().string());
    const std::vector<uint8_t> bytes = read_all(entry.path());
    for (bool checksums : {false, true}) {
      axrt::axe::ReadOptions options;
      options.verify_checksums = checksums;
      std::unique_ptr<axrt::axe::AxeFile> file;
      axrt::StatusPtr status(axrt::axe::AxeFile::open_bytes(bytes, entry.path().filename().string(),
                                                            options, &file));
      REQUIRE(status != nullptr);
      CHECK(file == nullptr);
      CHECK(std::string(axrt_status_message(status.get())).find("executable '") == 0);
    }
  }
  CHECK(count > 0);
}
