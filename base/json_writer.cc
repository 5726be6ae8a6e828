#include "base/json_writer.h"

#include <fmt/format.h>

#include <iterator>

namespace axrt {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  size_t length = 0;
  uint32_t min = 0;
  uint32_t code = 0;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() - i < length) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

void JsonWriter::escape(std::string_view text, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out->append("\\\""); ++i; continue;
      case '\\': out->append("\\\\"); ++i; continue;
      case '\b': out->append("\\b"); ++i; continue;
      case '\f': out->append("\\f"); ++i; continue;
      case '\n': out->append("\\n"); ++i; continue;
      case '\r': out->append("\\r"); ++i; continue;
      case '\t': out->append("\\t"); ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      fmt::format_to(std::back_inserter(*out), "\\u{:04x}", c);
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out->append("\\ufffd");
      ++i;
      continue;
    }
    out->append(text.substr(i, length));
    i += length;
  }
  out->push_back('"');
}

void JsonWriter::newline() {
  out_->push_back('\n');
  out_->append(2 * levels_.size(), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!levels_.empty()) {
    if (levels_.back().count++ > 0) out_->push_back(',');
    newline();
  }
}

void JsonWriter::begin_object() {
  before_value();
  out_->push_back('{');
  levels_.push_back({true, 0});
}

void JsonWriter::end_object() {
  const bool empty = levels_.back().count == 0;
  levels_.pop_back();
  if (!empty) newline();
  out_->push_back('}');
  if (levels_.empty()) out_->push_back('\n');
}

void JsonWriter::begin_array() {
  before_value();
  out_->push_back('[');
  levels_.push_back({false, 0});
}

void JsonWriter::end_array() {
  const bool empty = levels_.back().count == 0;
  levels_.pop_back();
  if (!empty) newline();
  out_->push_back(']');
  if (levels_.empty()) out_->push_back('\n');
}

void JsonWriter::key(std::string_view name) {
  before_value();
  escape(name, out_);
  out_->append(": ");
  after_key_ = true;
}

void JsonWriter::value(std::string_view text) {
  before_value();
  escape(text, out_);
}

void JsonWriter::value(uint64_t number) {
  before_value();
  fmt::format_to(std::back_inserter(*out_), "{}", number);
}

void JsonWriter::value(int64_t number) {
  before_value();
  fmt::format_to(std::back_inserter(*out_), "{}", number);
}

void JsonWriter::value(bool flag) {
  before_value();
  out_->append(flag ? "true" : "false");
}

void JsonWriter::null() {
  before_value();
  out_->append("null");
}

}  // namespace axrt
