// Zip and .npy, read and written by hand: the subset np.savez produces (zip
// "stored" entries, .npy versions 1.0 and 2.0), with every offset and size
// checked against the file before it is used.
#include "npz.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mlpc {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const uint8_t* p) { return uint32_t{le16(p)} | uint32_t{le16(p + 2)} << 16; }
uint64_t le64(const uint8_t* p) { return uint64_t{le32(p)} | uint64_t{le32(p + 4)} << 32; }

void put16(Bytes& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(Bytes& out, uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

const std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}();

// One archive being read: its bytes and the message prefix.
class Archive {
 public:
  Archive(std::string path, Bytes bytes) : path_(std::move(path)), bytes_(std::move(bytes)) {}

  std::map<std::string, Array> read() {
    const End end = find_end();
    std::map<std::string, Array> arrays;
    uint64_t at = end.directory_offset;
    for (uint64_t i = 0; i < end.entry_count; ++i) {
      const Entry entry = read_central_entry(at, i);
      at = entry.next;
      const std::string_view suffix = ".npy";
      const std::string& name = entry.name;
      if (name.size() <= suffix.size() || !name.ends_with(suffix)) {
        fail("entry '{}' is not a .npy file (np.savez writes only NAME.npy entries)", name);
      }
      const std::string key = name.substr(0, name.size() - suffix.size());
      if (arrays.count(key)) fail("entry '{}' appears twice", name);
      arrays.emplace(key, parse_npy(name, entry_data(entry)));
    }
    if (at > end.directory_offset + end.directory_size) {
      fail("the central directory overruns its recorded size of {} bytes", end.directory_size);
    }
    return arrays;
  }

 private:
  struct End {
    uint64_t entry_count;
    uint64_t directory_size;
    uint64_t directory_offset;
  };

  struct Entry {
    std::string name;
    uint16_t flags;
    uint16_t method;
    uint32_t crc;
    uint64_t compressed_size;
    uint64_t size;
    uint64_t local_offset;
    uint64_t next;  // where the following central entry starts
  };

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw NpzError(fmt::format("'{}': {}", path_, fmt::format(format, std::forward<Args>(args)...)));
  }

  // Fails unless [offset, offset + size) lies inside the file.
  const uint8_t* at(uint64_t offset, uint64_t size, std::string_view what) const {
    if (offset > bytes_.size() || size > bytes_.size() - offset) {
      fail("{} at offset {} ({} bytes) lies past the end of the file ({} bytes): the archive is "
           "truncated or damaged",
           what, offset, size, bytes_.size());
    }
    return bytes_.data() + offset;
  }

  End find_end() const {
    if (bytes_.size() < kEndSize) {
      fail("not a zip archive ({} bytes, too short); np.savez writes zip archives", bytes_.size());
    }
    // The end record sits in the last 22 + 65535 (the longest comment) bytes.
    const size_t lowest = bytes_.size() > kEndSize + 0xffff ? bytes_.size() - kEndSize - 0xffff : 0;
    for (size_t pos = bytes_.size() - kEndSize + 1; pos-- > lowest;) {
      const uint8_t* p = bytes_.data() + pos;
      if (le32(p) != kEndSignature || pos + kEndSize + le16(p + 20) != bytes_.size()) continue;
      if (le16(p + 4) != 0 || le16(p + 6) != 0) fail("multi-volume zip archives are not supported");
      End end{le16(p + 10), le32(p + 12), le32(p + 16)};
      if (end.entry_count == 0xffff || end.directory_size == 0xffffffff ||
          end.directory_offset == 0xffffffff) {
        end = zip64_end(pos);
      }
      at(end.directory_offset, end.directory_size, "the central directory");
      return end;
    }
    fail("not a zip archive, or one cut short (no end-of-central-directory record); np.savez "
         "writes zip archives");
  }

  End zip64_end(size_t end_pos) const {
    if (end_pos < 20 || le32(bytes_.data() + end_pos - 20) != kZip64LocatorSignature) {
      fail("the end record asks for zip64 but there is no zip64 locator");
    }
    const uint64_t offset = le64(bytes_.data() + end_pos - 20 + 8);
    const uint8_t* p = at(offset, 56, "the zip64 end record");
    if (le32(p) != kZip64EndSignature) fail("no zip64 end record at offset {}", offset);
    return End{le64(p + 32), le64(p + 40), le64(p + 48)};
  }

  Entry read_central_entry(uint64_t offset, uint64_t index) const {
    const uint8_t* p = at(offset, kCentralHeaderSize, fmt::format("central directory entry {}", index));
    if (le32(p) != kCentralHeaderSignature) {
      fail("central directory entry {} at offset {} has no signature: the archive is damaged", index,
           offset);
    }
    const uint16_t name_size = le16(p + 28);
    const uint16_t extra_size = le16(p + 30);
    const uint16_t comment_size = le16(p + 32);
    const uint8_t* name = at(offset + kCentralHeaderSize, uint64_t{name_size} + extra_size,
                             fmt::format("the name of central directory entry {}", index));
    Entry entry;
    entry.name.assign(reinterpret_cast<const char*>(name), name_size);
    entry.flags = le16(p + 8);
    entry.method = le16(p + 10);
    entry.crc = le32(p + 16);
    entry.compressed_size = le32(p + 20);
    entry.size = le32(p + 24);
    entry.local_offset = le32(p + 42);
    entry.next = offset + kCentralHeaderSize + name_size + extra_size + comment_size;
    // Zip64: the real values of the fields that read 0xffffffff follow in
    // the zip64 extra field, in this order.
    const uint8_t* extra = name + name_size;
    for (size_t e = 0; e + 4 <= extra_size;) {
      const uint16_t id = le16(extra + e);
      const uint16_t size = le16(extra + e + 2);
      if (e + 4 + size > extra_size) fail("entry '{}': a damaged extra field", entry.name);
      if (id == kZip64ExtraId) {
        const uint8_t* field = extra + e + 4;
        size_t used = 0;
        for (uint64_t* value : {&entry.size, &entry.compressed_size, &entry.local_offset}) {
          if (*value != 0xffffffff) continue;
          if (used + 8 > size) fail("entry '{}': a short zip64 extra field", entry.name);
          *value = le64(field + used);
          used += 8;
        }
      }
      e += 4 + size;
    }
    return entry;
  }

  // The stored bytes of `entry`, checked against its CRC-32.
  Bytes entry_data(const Entry& entry) const {
    if (entry.flags & 1) fail("entry '{}' is encrypted", entry.name);
    if (entry.method != 0) {
      fail("entry '{}' is compressed ({}method {}); only stored entries are read, as np.savez "
           "writes them (np.savez_compressed is not supported)",
           entry.name, entry.method == 8 ? "deflate, " : "", entry.method);
    }
    if (entry.compressed_size != entry.size) {
      fail("entry '{}' is stored but records {} compressed and {} uncompressed bytes", entry.name,
           entry.compressed_size, entry.size);
    }
    const uint8_t* p = at(entry.local_offset, kLocalHeaderSize,
                          fmt::format("the local header of entry '{}'", entry.name));
    if (le32(p) != kLocalHeaderSignature) {
      fail("entry '{}': no local header at offset {}: the archive is damaged", entry.name,
           entry.local_offset);
    }
    const uint64_t start = entry.local_offset + kLocalHeaderSize + le16(p + 26) + le16(p + 28);
    const uint8_t* data = at(start, entry.size, fmt::format("the data of entry '{}'", entry.name));
    const uint32_t crc = crc32(data, entry.size);
    if (crc != entry.crc) {
      fail("entry '{}' is damaged: its data has CRC-32 0x{:08x}, the archive records 0x{:08x}",
           entry.name, crc, entry.crc);
    }
    return Bytes(data, data + entry.size);
  }

  // ---- .npy ---------------------------------------------------------------

  // The header is a Python dict literal such as
  //   {'descr': '<f4', 'fortran_order': False, 'shape': (1024, 256), }
  // Parsed for exactly the three keys numpy writes.
  class HeaderParser {
   public:
    HeaderParser(const Archive& archive, const std::string& entry, std::string_view text)
        : archive_(archive), entry_(entry), text_(text) {}

    void parse(std::string* descr, bool* fortran_order, std::vector<uint64_t>* shape) {
      bool seen[3] = {false, false, false};
      expect('{');
      while (!peek('}')) {
        const std::string key = string();
        expect(':');
        if (key == "descr") {
          *descr = string();
          seen[0] = true;
        } else if (key == "fortran_order") {
          *fortran_order = boolean();
          seen[1] = true;
        } else if (key == "shape") {
          *shape = tuple();
          seen[2] = true;
        } else {
          bad(fmt::format("unknown key '{}'", key));
        }
        if (!peek('}')) expect(',');
      }
      expect('}');
      if (!seen[0] || !seen[1] || !seen[2]) bad("it lacks one of 'descr', 'fortran_order', 'shape'");
    }

   private:
    [[noreturn]] void bad(const std::string& why) const {
      archive_.fail("entry '{}': the .npy header {:?} cannot be read: {}", entry_,
                    std::string(text_), why);
    }
    void skip_space() {
      while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) {
        ++pos_;
      }
    }
    bool peek(char c) {
      skip_space();
      return pos_ < text_.size() && text_[pos_] == c;
    }
    void expect(char c) {
      if (!peek(c)) bad(fmt::format("expected '{}' at character {}", c, pos_));
      ++pos_;
    }
    std::string string() {
      skip_space();
      if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
        bad(fmt::format("expected a string at character {}", pos_));
      }
      const char quote = text_[pos_++];
      const size_t end = text_.find(quote, pos_);
      if (end == std::string_view::npos) bad("an unterminated string");
      std::string value(text_.substr(pos_, end - pos_));
      pos_ = end + 1;
      return value;
    }
    bool boolean() {
      skip_space();
      for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
        if (text_.substr(pos_).starts_with(word)) {
          pos_ += std::strlen(word);
          return value;
        }
      }
      bad(fmt::format("expected True or False at character {}", pos_));
    }
    std::vector<uint64_t> tuple() {
      std::vector<uint64_t> values;
      expect('(');
      while (!peek(')')) {
        skip_space();
        uint64_t value = 0;
        size_t digits = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
          const uint64_t digit = static_cast<uint64_t>(text_[pos_++] - '0');
          if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) bad("an extent overflows");
          value = value * 10 + digit;
          ++digits;
        }
        if (digits == 0) bad(fmt::format("expected an extent at character {}", pos_));
        if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2's long
        values.push_back(value);
        if (!peek(')')) expect(',');
      }
      expect(')');
      return values;
    }

    const Archive& archive_;
    const std::string& entry_;
    std::string_view text_;
    size_t pos_ = 0;
  };

  Array parse_npy(const std::string& entry, const Bytes& npy) const {
    static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (npy.size() < 10 || std::memcmp(npy.data(), kMagic, sizeof kMagic) != 0) {
      fail("entry '{}' is not a .npy file (no \\x93NUMPY magic)", entry);
    }
    const uint8_t major = npy[6];
    size_t header_size = 0;
    size_t header_start = 0;
    if (major == 1) {
      header_size = le16(npy.data() + 8);
      header_start = 10;
    } else if (major == 2) {
      if (npy.size() < 12) fail("entry '{}': the .npy header is truncated", entry);
      header_size = le32(npy.data() + 8);
      header_start = 12;
    } else {
      fail("entry '{}' is .npy version {}.{}; only versions 1.0 and 2.0 are read", entry, major,
           npy[7]);
    }
    if (header_size > npy.size() - header_start) {
      fail("entry '{}': the .npy header claims {} bytes, more than the entry holds", entry,
           header_size);
    }
    const std::string_view text(reinterpret_cast<const char*>(npy.data() + header_start),
                                header_size);
    std::string descr;
    bool fortran_order = false;
    std::vector<uint64_t> shape;
    HeaderParser(*this, entry, text).parse(&descr, &fortran_order, &shape);
    if (descr != "<f4") {
      fail("entry '{}' holds dtype '{}'; only little-endian float32 ('<f4') is read (convert "
           "with .astype(np.float32))",
           entry, descr);
    }
    if (fortran_order) {
      fail("entry '{}' is in Fortran order; only C order is read (np.ascontiguousarray)", entry);
    }
    uint64_t count = 1;
    for (uint64_t extent : shape) {
      if (extent != 0 && count > std::numeric_limits<uint64_t>::max() / 4 / extent) {
        fail("entry '{}': shape {} is too large", entry, shape);
      }
      count *= extent;
    }
    const size_t data_start = header_start + header_size;
    const uint64_t data_size = npy.size() - data_start;
    if (data_size != count * 4) {
      fail("entry '{}': shape ({}) of float32 needs {} bytes, but the entry holds {}", entry,
           fmt::join(shape, ", "), count * 4, data_size);
    }
    Array array;
    array.shape = std::move(shape);
    array.data.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      array.data[i] = std::bit_cast<float>(le32(npy.data() + data_start + 4 * i));
    }
    return array;
  }

  std::string path_;
  Bytes bytes_;
};

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) c = kCrcTable[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

Bytes read_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw NpzError(fmt::format("'{}': cannot open: {}", path, std::strerror(errno)));
  Bytes bytes;
  uint8_t chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, file)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(file);
  std::fclose(file);
  if (failed) throw NpzError(fmt::format("'{}': read error", path));
  return bytes;
}

void write_file(const std::string& path, const Bytes& bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw NpzError(fmt::format("'{}': cannot create: {}", path, std::strerror(errno)));
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (std::fclose(file) != 0 || !written) {
    throw NpzError(fmt::format("'{}': write error: {}", path, std::strerror(errno)));
  }
}

std::map<std::string, Array> read_npz(const std::string& path) {
  return Archive(path, read_file(path)).read();
}

Bytes npy_bytes(const std::string& descr, bool fortran_order, const std::vector<uint64_t>& shape,
                const Bytes& data) {
  std::string shape_text = "(";
  for (uint64_t extent : shape) shape_text += fmt::format("{}{}", extent, shape.size() == 1 ? "," : ", ");
  if (shape.size() > 1) shape_text.resize(shape_text.size() - 2);
  shape_text += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                                   fortran_order ? "True" : "False", shape_text);
  // numpy pads with spaces and a newline so that the data starts on a
  // multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  put16(out, static_cast<uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes npy_float32(const Array& array) {
  Bytes data;
  data.reserve(array.data.size() * 4);
  for (float value : array.data) put32(data, std::bit_cast<uint32_t>(value));
  return npy_bytes("<f4", false, array.shape, data);
}

Bytes zip_bytes(const std::vector<ZipEntry>& entries) {
  Bytes out;
  Bytes directory;
  constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, fixed for reproducibility
  for (const ZipEntry& entry : entries) {
    Bytes payload;
    if (entry.method == 8) {
      // Deflate's stored blocks: BFINAL/BTYPE=00, LEN, NLEN, bytes.
      size_t done = 0;
      do {
        const size_t n = std::min<size_t>(0xffff, entry.data.size() - done);
        payload.push_back(done + n == entry.data.size() ? 1 : 0);
        put16(payload, static_cast<uint32_t>(n));
        put16(payload, static_cast<uint32_t>(~n & 0xffff));
        payload.insert(payload.end(), entry.data.begin() + done, entry.data.begin() + done + n);
        done += n;
      } while (done < entry.data.size());
    } else {
      payload = entry.data;
    }
    if (out.size() > 0xffffffffu || payload.size() > 0xffffffffu) {
      throw NpzError("zip_bytes: archives over 4 GiB need zip64, which this writer does not do");
    }
    const uint32_t crc = crc32(entry.data.data(), entry.data.size());
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const auto header = [&](Bytes& b, bool central) {
      put32(b, central ? kCentralHeaderSignature : kLocalHeaderSignature);
      if (central) put16(b, 20);  // made by: zip 2.0
      put16(b, 20);               // needed: zip 2.0
      put16(b, 0);                // flags
      put16(b, entry.method);
      put16(b, 0);                // time
      put16(b, kDosDate1980);
      put32(b, crc);
      put32(b, static_cast<uint32_t>(payload.size()));
      put32(b, static_cast<uint32_t>(entry.data.size()));
      put16(b, static_cast<uint32_t>(entry.name.size()));
      put16(b, 0);  // extra
      if (central) {
        put16(b, 0);  // comment
        put16(b, 0);  // disk
        put16(b, 0);  // internal attributes
        put32(b, 0);  // external attributes
        put32(b, offset);
      }
      b.insert(b.end(), entry.name.begin(), entry.name.end());
    };
    header(out, false);
    out.insert(out.end(), payload.begin(), payload.end());
    header(directory, true);
  }
  const uint32_t directory_offset = static_cast<uint32_t>(out.size());
  out.insert(out.end(), directory.begin(), directory.end());
  put32(out, kEndSignature);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(entries.size()));
  put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(directory.size()));
  put32(out, directory_offset);
  put16(out, 0);
  return out;
}

Bytes npz_bytes(const std::map<std::string, Array>& arrays) {
  std::vector<ZipEntry> entries;
  for (const auto& [name, array] : arrays) entries.push_back({name + ".npy", npy_float32(array), 0});
  return zip_bytes(entries);
}

}  // namespace mlpc
