// A small streaming JSON writer for machine-readable output (`axrt inspect
// --json`, `axrt devices --json`): objects, arrays, strings (escaped per
// RFC 8259), integers and booleans, pretty-printed with two-space
// indentation.
#ifndef AXRT_BASE_JSON_WRITER_H_
#define AXRT_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace axrt {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  // The name of the next member; only inside an object.
  void key(std::string_view name);

  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  void value(uint64_t number);
  void value(int64_t number);
  void value(uint32_t number) { value(static_cast<uint64_t>(number)); }
  void value(int32_t number) { value(static_cast<int64_t>(number)); }
  void value(bool flag);
  void null();

  // key(name) followed by value(v).
  template <typename T>
  void member(std::string_view name, const T& v) {
    key(name);
    value(v);
  }

  // Appends `text` to `out` as a JSON string literal, quotes included.
  // Invalid UTF-8 bytes become U+FFFD so the output is always valid JSON.
  static void escape(std::string_view text, std::string* out);

 private:
  void before_value();
  void newline();

  struct Level {
    bool object;
    size_t count;
  };
  std::string* out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

// Length of the valid UTF-8 sequence starting at `s[i]` (1 for ASCII), or
// 0 when it is not one: overlong forms, surrogates and code points above
// U+10FFFF are invalid. The JSON writer and the tool's reader share it.
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace axrt

#endif  // AXRT_BASE_JSON_WRITER_H_
