#include "base/numa.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace axrt {
namespace {

// The first line of `path`, or "" when it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

bool parse_hex(std::string_view text, size_t max_digits, unsigned long* out) {
  if (text.empty() || text.size() > max_digits) return false;
  unsigned long value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = value * 16 + static_cast<unsigned long>(digit);
  }
  *out = value;
  return true;
}

}  // namespace

int32_t single_host_numa_node() noexcept {
  try {
    return first_line("/sys/devices/system/node/online") == "0" ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

std::string normalize_pci_bus_id(std::string_view bus_id) {
  const size_t first = bus_id.find(':');
  const size_t second = first == std::string_view::npos ? first : bus_id.find(':', first + 1);
  const size_t dot = second == std::string_view::npos ? second : bus_id.find('.', second + 1);
  if (dot == std::string_view::npos) return "";
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  if (!parse_hex(bus_id.substr(0, first), 8, &domain) ||
      !parse_hex(bus_id.substr(first + 1, second - first - 1), 2, &bus) ||
      !parse_hex(bus_id.substr(second + 1, dot - second - 1), 2, &device) ||
      !parse_hex(bus_id.substr(dot + 1), 1, &function) || domain > 0xffff) {
    return "";
  }
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

int32_t pci_numa_node(std::string_view bus_id) noexcept {
  try {
    const std::string id = normalize_pci_bus_id(bus_id);
    if (id.empty()) return -1;
    const std::string text = first_line(fmt::format("/sys/bus/pci/devices/{}/numa_node", id));
    if (text.empty()) return -1;
    char* end = nullptr;
    const long node = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || node < 0 || node > INT32_MAX) return -1;
    return static_cast<int32_t>(node);
  } catch (...) {
    return -1;
  }
}

}  // namespace axrt
