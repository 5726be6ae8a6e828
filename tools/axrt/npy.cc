#include "tools/axrt/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "axrt/executable.h"

namespace axrt::tools {

namespace {

constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMagicSize = sizeof kMagic;
// np.save aligns the data to 64 bytes and leaves room for the first
// dimension to grow to this many digits (numpy/lib/format.py).
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// The largest rank an axrt tensor may have (AXRT_TENSOR_MAX_RANK).
constexpr size_t kMaxRank = 16;
// Nesting deeper than this in a header is refused rather than recursed into.
constexpr int kMaxDepth = 16;

struct DtypeEntry {
  axrt_dtype_t dtype;
  char kind;  // NumPy's type character: 'f', 'i', 'u', 'b'
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {AXRT_DTYPE_FLOAT16, 'f', 2}, {AXRT_DTYPE_FLOAT32, 'f', 4}, {AXRT_DTYPE_FLOAT64, 'f', 8},
    {AXRT_DTYPE_INT8, 'i', 1},    {AXRT_DTYPE_UINT8, 'u', 1},   {AXRT_DTYPE_INT16, 'i', 2},
    {AXRT_DTYPE_UINT16, 'u', 2},  {AXRT_DTYPE_INT32, 'i', 4},   {AXRT_DTYPE_UINT32, 'u', 4},
    {AXRT_DTYPE_INT64, 'i', 8},   {AXRT_DTYPE_UINT64, 'u', 8},  {AXRT_DTYPE_BOOL, 'b', 1},
};

const DtypeEntry* find_dtype(axrt_dtype_t dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

std::string supported_list() {
  std::string list;
  for (const DtypeEntry& e : kDtypes) {
    if (!list.empty()) list += ", ";
    list += npy_descriptor(e.dtype);
  }
  return list;
}

// Maps a descriptor such as "<f4" to a dtype, or explains why it cannot.
bool dtype_from_descriptor(std::string_view descr, axrt_dtype_t* out, std::string* error) {
  if (descr.size() >= 2 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    const char order = descr[0];
    const char kind = descr[1];
    std::optional<size_t> size;
    if (descr.size() > 2) {
      size_t value = 0;
      bool digits = true;
      for (char c : descr.substr(2)) {
        if (c < '0' || c > '9' || value > 1000) {
          digits = false;
          break;
        }
        value = value * 10 + static_cast<size_t>(c - '0');
      }
      if (digits) size = value;
    }
    if (kind == 'O') {
      *error = fmt::format("object arrays ('{}') are not supported", descr);
      return false;
    }
    for (const DtypeEntry& e : kDtypes) {
      if (!size || e.kind != kind || e.size != *size) continue;
      // Byte order does not apply to single bytes; NumPy writes '|' for them.
      const bool little = order == '<' || (order == '=' && std::endian::native == std::endian::little);
      if (e.size == 1 || little) {
        *out = e.dtype;
        return true;
      }
      if (order == '>' || order == '=') {
        *error = fmt::format(
            "big-endian data ('{}') is not supported: save it little-endian "
            "(arr.astype('<{}{}'))",
            descr, kind, e.size);
      } else {
        *error = fmt::format("dtype '{}' has no byte order: expected '<{}{}'", descr, kind, e.size);
      }
      return false;
    }
  }
  *error = fmt::format("unsupported dtype '{}' (supported: {})", descr, supported_list());
  return false;
}

// A value of the Python literal that is a .npy header.
struct PyValue {
  enum class Kind { kString, kInt, kBool, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kNone;
  std::string text;     // kString
  bool negative = false;  // kInt
  uint64_t integer = 0;   // kInt: the magnitude; saturates at UINT64_MAX
  bool flag = false;      // kBool
  std::vector<PyValue> items;       // kTuple, kList; kDict: the values
  std::vector<std::string> keys;    // kDict (string keys only)
};

// Parses the subset of Python literal syntax np.save writes (and a little
// more: either quote, any whitespace, trailing commas, 'L' suffixes of
// Python 2 integers).
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  bool parse(PyValue* out, std::string* error) {
    if (!value(out, 0)) {
      *error = error_;
      return false;
    }
    skip_space();
    if (pos_ != text_.size()) {
      *error = fmt::format("header: unexpected '{}' at offset {} after the dictionary",
                           text_[pos_], pos_);
      return false;
    }
    return true;
  }

 private:
  bool fail(std::string_view what) {
    if (pos_ >= text_.size()) {
      error_ = fmt::format("header: {} at its end", what);
    } else {
      error_ = fmt::format("header: {} at offset {} ('{}')", what, pos_, text_[pos_]);
    }
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  bool value(PyValue* out, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return fail("a value is missing");
    const char c = text_[pos_];
    if (c == '\'' || c == '"') return string(out);
    if (c == '{') return sequence(out, PyValue::Kind::kDict, '}', depth);
    if (c == '(') return sequence(out, PyValue::Kind::kTuple, ')', depth);
    if (c == '[') return sequence(out, PyValue::Kind::kList, ']', depth);
    if (c == '-' || (c >= '0' && c <= '9')) return integer(out);
    size_t end = pos_;
    while (end < text_.size() && std::isalpha(static_cast<unsigned char>(text_[end]))) ++end;
    const std::string_view word = text_.substr(pos_, end - pos_);
    if (word == "True" || word == "False") {
      out->kind = PyValue::Kind::kBool;
      out->flag = word == "True";
    } else if (word == "None") {
      out->kind = PyValue::Kind::kNone;
    } else {
      return fail("expected a string, number, True, False, None, tuple, list or dictionary");
    }
    pos_ = end;
    return true;
  }

  bool string(PyValue* out) {
    const char quote = text_[pos_++];
    out->kind = PyValue::Kind::kString;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out->text += text_[pos_++];
    }
    if (pos_ >= text_.size()) return fail("unterminated string");
    ++pos_;
    return true;
  }

  bool integer(PyValue* out) {
    out->kind = PyValue::Kind::kInt;
    if (text_[pos_] == '-') {
      out->negative = true;
      ++pos_;
    }
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') return fail("expected digits");
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
      out->integer = out->integer > (kMax - digit) / 10 ? kMax : out->integer * 10 + digit;
      ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    return true;
  }

  bool sequence(PyValue* out, PyValue::Kind kind, char close, int depth) {
    out->kind = kind;
    ++pos_;  // the opening bracket
    bool saw_comma = false;
    while (!peek(close)) {
      if (!out->items.empty() && !saw_comma) return fail(fmt::format("expected ',' or '{}'", close));
      if (kind == PyValue::Kind::kDict) {
        PyValue key;
        if (!value(&key, depth + 1)) return false;
        if (key.kind != PyValue::Kind::kString) return fail("dictionary keys must be strings");
        if (!peek(':')) return fail("expected ':'");
        ++pos_;
        out->keys.push_back(std::move(key.text));
      }
      PyValue item;
      if (!value(&item, depth + 1)) return false;
      out->items.push_back(std::move(item));
      saw_comma = peek(',');
      if (saw_comma) ++pos_;
    }
    ++pos_;  // the closing bracket
    // (3) is the number 3 in Python, not a tuple; accept it as one anyway.
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

std::string shape_string(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Reads the header of a .npy file: the array's dtype and shape, and where
// its data starts. Checks that exactly the data the shape needs follows.
bool parse_prefix(std::span<const uint8_t> bytes, NpyArray* out, size_t* data_offset,
                  std::string* error) {
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    *error = "not a .npy file (it does not start with \"\\x93NUMPY\")";
    return false;
  }
  if (bytes.size() < kMagicSize + 2) {
    *error = fmt::format("truncated: {} bytes end inside the header", bytes.size());
    return false;
  }
  const uint8_t major = bytes[6];
  const uint8_t minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    *error = fmt::format("unsupported .npy format version {}.{} (known: 1.0, 2.0, 3.0)", major, minor);
    return false;
  }
  const size_t length_size = major == 1 ? 2 : 4;
  const size_t header_start = kMagicSize + 2 + length_size;
  if (bytes.size() < header_start) {
    *error = fmt::format("truncated: {} bytes end inside the header", bytes.size());
    return false;
  }
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_size; ++i) {
    header_length |= static_cast<uint64_t>(bytes[kMagicSize + 2 + i]) << (8 * i);
  }
  if (header_length > bytes.size() - header_start) {
    *error = fmt::format("truncated: the header declares {} bytes but only {} follow", header_length,
                         bytes.size() - header_start);
    return false;
  }
  // Version 3.0 headers are UTF-8, older ones latin-1; the keys and values
  // that matter are ASCII either way.
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start),
                              header_length);
  PyValue header;
  if (!HeaderParser(text).parse(&header, error)) return false;
  if (header.kind != PyValue::Kind::kDict) {
    *error = "header: not a dictionary";
    return false;
  }
  const PyValue* descr = nullptr;
  const PyValue* fortran_order = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i < header.keys.size(); ++i) {
    const std::string& key = header.keys[i];
    const PyValue** slot = key == "descr" ? &descr
                           : key == "fortran_order" ? &fortran_order
                           : key == "shape" ? &shape
                                            : nullptr;
    if (!slot) {
      *error = fmt::format("header: unexpected key '{}' (expected 'descr', 'fortran_order', 'shape')", key);
      return false;
    }
    if (*slot) {
      *error = fmt::format("header: key '{}' appears twice", key);
      return false;
    }
    *slot = &header.items[i];
  }
  for (const auto& [value, name] : {std::pair{descr, "descr"}, std::pair{fortran_order, "fortran_order"},
                                     std::pair{shape, "shape"}}) {
    if (!value) {
      *error = fmt::format("header: key '{}' is missing", name);
      return false;
    }
  }
  if (descr->kind == PyValue::Kind::kList) {
    *error = "structured arrays (a list of fields as 'descr') are not supported";
    return false;
  }
  if (descr->kind != PyValue::Kind::kString) {
    *error = "header: 'descr' is not a string";
    return false;
  }
  if (fortran_order->kind != PyValue::Kind::kBool) {
    *error = "header: 'fortran_order' is not True or False";
    return false;
  }
  if (shape->kind != PyValue::Kind::kTuple) {
    *error = "header: 'shape' is not a tuple";
    return false;
  }
  if (!dtype_from_descriptor(descr->text, &out->dtype, error)) return false;
  if (fortran_order->flag) {
    *error = "Fortran-order (column-major) data is not supported: save a C-order array "
             "(np.ascontiguousarray)";
    return false;
  }
  if (shape->items.size() > kMaxRank) {
    *error = fmt::format("rank {} is above axrt's largest, {}", shape->items.size(), kMaxRank);
    return false;
  }
  out->shape.clear();
  uint64_t count = 1;
  bool overflow = false;
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::Kind::kInt) {
      *error = "header: 'shape' holds something other than integers";
      return false;
    }
    if (dim.negative && dim.integer != 0) {
      *error = fmt::format("header: 'shape' has a negative extent -{}", dim.integer);
      return false;
    }
    if (dim.integer > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *error = "header: 'shape' has an extent above 2^63 - 1";
      return false;
    }
    out->shape.push_back(static_cast<int64_t>(dim.integer));
    overflow |= __builtin_mul_overflow(count, dim.integer, &count);
  }
  const size_t element_size = npy_element_size(out->dtype);
  uint64_t needed = 0;
  overflow |= __builtin_mul_overflow(count, element_size, &needed);
  if (overflow) {
    *error = fmt::format("shape {} is too large", shape_string(out->shape));
    return false;
  }
  *data_offset = header_start + header_length;
  const uint64_t held = bytes.size() - *data_offset;
  if (held < needed) {
    *error = fmt::format("truncated data: shape {} of '{}' needs {} bytes, the file holds {}",
                         shape_string(out->shape), descr->text, needed, held);
    return false;
  }
  if (held > needed) {
    *error = fmt::format("{} bytes follow the data (shape {} of '{}' needs {})", held - needed,
                         shape_string(out->shape), descr->text, needed);
    return false;
  }
  return true;
}

// The magic, version 1.0, header length and header of an array, as np.save
// writes them, for `data_size` bytes of data.
bool encode_prefix(axrt_dtype_t dtype, std::span<const int64_t> shape, size_t data_size,
                   std::string* out, std::string* error) {
  const std::string_view descr = npy_descriptor(dtype);
  if (descr.empty()) {
    *error = fmt::format("a .npy file cannot hold {} elements", axrt_dtype_name(dtype));
    return false;
  }
  uint64_t count = 1;
  for (int64_t extent : shape) {
    if (extent < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(extent), &count)) {
      *error = fmt::format("bad shape {}", shape_string(shape));
      return false;
    }
  }
  uint64_t needed = 0;
  if (__builtin_mul_overflow(count, npy_element_size(dtype), &needed) || needed != data_size) {
    *error = fmt::format("shape {} of '{}' needs {} elements but {} bytes were given",
                         shape_string(shape), descr, count, data_size);
    return false;
  }
  // Python's repr of the shape tuple: (), (5,), (2, 3).
  std::string shape_repr = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) shape_repr += ", ";
    shape_repr += std::to_string(shape[i]);
  }
  if (shape.size() == 1) shape_repr += ",";
  shape_repr += ")";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_repr);
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) header.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const size_t prefix_size = kMagicSize + 2 + 2;  // magic, version 1.0, u16 length
  // Like NumPy, a header that would end on the boundary gets a whole block.
  header.append(kArrayAlign - (prefix_size + header.size() + 1) % kArrayAlign, ' ');
  header += '\n';
  if (header.size() > std::numeric_limits<uint16_t>::max()) {
    *error = fmt::format("a header of {} bytes does not fit a version 1.0 file", header.size());
    return false;
  }
  out->assign(reinterpret_cast<const char*>(kMagic), kMagicSize);
  *out += '\x01';
  *out += '\x00';
  *out += static_cast<char>(header.size() & 0xff);
  *out += static_cast<char>(header.size() >> 8);
  *out += header;
  return true;
}

struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

std::string_view npy_descriptor(axrt_dtype_t dtype) {
  switch (dtype) {
    case AXRT_DTYPE_FLOAT16: return "<f2";
    case AXRT_DTYPE_FLOAT32: return "<f4";
    case AXRT_DTYPE_FLOAT64: return "<f8";
    case AXRT_DTYPE_INT8: return "|i1";
    case AXRT_DTYPE_UINT8: return "|u1";
    case AXRT_DTYPE_INT16: return "<i2";
    case AXRT_DTYPE_UINT16: return "<u2";
    case AXRT_DTYPE_INT32: return "<i4";
    case AXRT_DTYPE_UINT32: return "<u4";
    case AXRT_DTYPE_INT64: return "<i8";
    case AXRT_DTYPE_UINT64: return "<u8";
    case AXRT_DTYPE_BOOL: return "|b1";
    default: return "";
  }
}

size_t npy_element_size(axrt_dtype_t dtype) {
  const DtypeEntry* e = find_dtype(dtype);
  return e ? e->size : 0;
}

bool npy_parse(std::span<const uint8_t> bytes, NpyArray* out, std::string* error) {
  size_t data_offset = 0;
  if (!parse_prefix(bytes, out, &data_offset, error)) return false;
  out->data.assign(bytes.begin() + static_cast<ptrdiff_t>(data_offset), bytes.end());
  return true;
}

bool npy_read_file(const std::string& path, NpyArray* out, std::string* error) {
  errno = 0;
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    *error = fmt::format("{}: cannot open: {}", path, std::strerror(errno));
    return false;
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  while (true) {
    const size_t n = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  if (std::ferror(file.get())) {
    *error = fmt::format("{}: cannot read: {}", path, std::strerror(errno));
    return false;
  }
  size_t data_offset = 0;
  if (!parse_prefix(bytes, out, &data_offset, error)) {
    *error = fmt::format("{}: {}", path, *error);
    return false;
  }
  // Keep the file's buffer rather than copy the data out of it.
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(data_offset));
  out->data = std::move(bytes);
  return true;
}

bool npy_encode(axrt_dtype_t dtype, std::span<const int64_t> shape, std::span<const uint8_t> data,
                std::vector<uint8_t>* out, std::string* error) {
  std::string prefix;
  if (!encode_prefix(dtype, shape, data.size(), &prefix, error)) return false;
  out->clear();
  out->reserve(prefix.size() + data.size());
  out->insert(out->end(), prefix.begin(), prefix.end());
  out->insert(out->end(), data.begin(), data.end());
  return true;
}

bool npy_write_file(const std::string& path, axrt_dtype_t dtype, std::span<const int64_t> shape,
                    std::span<const uint8_t> data, std::string* error) {
  std::string prefix;
  if (!encode_prefix(dtype, shape, data.size(), &prefix, error)) {
    *error = fmt::format("{}: {}", path, *error);
    return false;
  }
  errno = 0;
  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (!file) {
    *error = fmt::format("{}: cannot create: {}", path, std::strerror(errno));
    return false;
  }
  const bool written = std::fwrite(prefix.data(), 1, prefix.size(), file.get()) == prefix.size() &&
                       std::fwrite(data.data(), 1, data.size(), file.get()) == data.size() &&
                       std::fflush(file.get()) == 0;
  if (!written) {
    *error = fmt::format("{}: cannot write: {}", path, std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace axrt::tools
