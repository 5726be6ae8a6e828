#include "tools/axrt/json_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "base/json_writer.h"

namespace axrt::tools {

namespace {

constexpr double kExactDoubleLimit = 9007199254740992.0;  // 2^53

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

// A character as a message shows it: 'x', or U+XXXX when not printable.
std::string describe_char(std::string_view text, size_t at) {
  const auto c = static_cast<unsigned char>(text[at]);
  if (c >= 0x20 && c < 0x7F) return fmt::format("'{}'", static_cast<char>(c));
  if (c < 0x80) return fmt::format("U+{:04X}", c);
  const size_t length = utf8_sequence_length(text, at);
  if (length == 0) return fmt::format("byte 0x{:02X} (not UTF-8)", c);
  uint32_t code = c & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < length; ++k) code = (code << 6) | (text[at + k] & 0x3F);
  return fmt::format("U+{:04X}", code);
}

class Reader {
 public:
  Reader(std::string_view text, JsonHandler* handler, const JsonReadOptions& options)
      : text_(text), handler_(handler), options_(options) {}

  JsonReadResult read();

 private:
  // What the reader expects next.
  enum class State : uint8_t {
    kValue,            // a value (at the start, after ':' or after ',' in an array)
    kFirstItem,        // a value or ']' (after '[')
    kFirstKey,         // a member name or '}' (after '{')
    kKey,              // a member name (after ',' in an object)
    kColon,            // ':' after a member name
    kAfterValue,       // ',' or the end of the container, or the end of the text
  };

  bool fail(size_t at, std::string message) {
    error_.offset = at;
    error_.message = std::move(message);
    return false;
  }
  // The handler refused the value, name or bracket that starts at `at`.
  bool handler_stopped(size_t at) {
    return fail(at, handler_->stop_reason.empty() ? std::string("reading stopped")
                                                  : handler_->stop_reason);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_whitespace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool value();
  bool open(char bracket);
  bool close(char bracket);
  bool string(std::string* out);
  bool escape(std::string* out);
  bool number();
  bool literal();

  std::string_view text_;
  JsonHandler* handler_;
  JsonReadOptions options_;
  size_t pos_ = 0;
  std::vector<char> open_;  // '{' or '[' of each open container
  State state_ = State::kValue;
  JsonError error_;
};

JsonReadResult Reader::read() {
  JsonReadResult result;
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  bool ok = true;
  while (ok) {
    skip_whitespace();
    if (at_end()) {
      if (open_.empty() && state_ == State::kAfterValue) {
        result.ok = true;
        return result;
      }
      const bool open_array = open_.size() == 1 && open_[0] == '[';
      if (options_.allow_unclosed_array && open_array &&
          (state_ == State::kAfterValue || state_ == State::kValue ||
           state_ == State::kFirstItem)) {
        if (!handler_->end_array()) {
          ok = handler_stopped(pos_);
          break;
        }
        result.ok = true;
        result.array_left_open = true;
        return result;
      }
      const char* expected = "";
      switch (state_) {
        case State::kValue: expected = "a value"; break;
        case State::kFirstItem: expected = "a value or ']'"; break;
        case State::kFirstKey: expected = "a member name or '}'"; break;
        case State::kKey: expected = "a member name"; break;
        case State::kColon: expected = "':'"; break;
        case State::kAfterValue:
          expected = open_.back() == '{' ? "',' or '}'" : "',' or ']'";
          break;
      }
      ok = fail(pos_, open_.empty() && state_ == State::kValue
                          ? std::string("no JSON value: the text is empty")
                          : fmt::format("unexpected end of the text; expected {}", expected));
      break;
    }
    const char c = text_[pos_];
    switch (state_) {
      case State::kFirstItem:
        if (c == ']') {
          ok = close(']');
          break;
        }
        [[fallthrough]];
      case State::kValue:
        ok = value();
        break;
      case State::kFirstKey:
        if (c == '}') {
          ok = close('}');
          break;
        }
        [[fallthrough]];
      case State::kKey: {
        if (c != '"') {
          ok = fail(pos_, fmt::format("unexpected {}; expected {}", describe_char(text_, pos_),
                                      state_ == State::kFirstKey
                                          ? "a member name (a string) or '}'"
                                          : "a member name (a string) after ','"));
          break;
        }
        const size_t start = pos_;
        std::string name;
        ok = string(&name);
        if (!ok) break;
        if (!handler_->key(std::move(name))) {
          ok = handler_stopped(start);
          break;
        }
        state_ = State::kColon;
        break;
      }
      case State::kColon:
        if (c != ':') {
          ok = fail(pos_, fmt::format("unexpected {}; expected ':' after a member name",
                                      describe_char(text_, pos_)));
          break;
        }
        ++pos_;
        state_ = State::kValue;
        break;
      case State::kAfterValue:
        if (open_.empty()) {
          ok = fail(pos_, fmt::format("unexpected {} after the JSON value; the text must hold "
                                      "one value",
                                      describe_char(text_, pos_)));
          break;
        }
        if (c == ',') {
          ++pos_;
          state_ = open_.back() == '{' ? State::kKey : State::kValue;
        } else if (c == '}' || c == ']') {
          ok = close(c);
        } else {
          ok = fail(pos_, fmt::format("unexpected {}; expected {}", describe_char(text_, pos_),
                                      open_.back() == '{' ? "',' or '}' after a member"
                                                          : "',' or ']' after an array item"));
        }
        break;
    }
  }
  result.ok = false;
  result.error = std::move(error_);
  // The line and column, counted only now that they are needed.
  size_t line = 1;
  size_t column = 1;
  const size_t end = std::min(result.error.offset, text_.size());
  for (size_t i = 0; i < end; ++i) {
    const auto b = static_cast<unsigned char>(text_[i]);
    if (b == '\n') {
      ++line;
      column = 1;
    } else if ((b & 0xC0) != 0x80) {
      ++column;
    }
  }
  result.error.line = line;
  result.error.column = column;
  return result;
}

bool Reader::value() {
  const char c = text_[pos_];
  if (c == '{' || c == '[') return open(c);
  if (c == '"') {
    const size_t start = pos_;
    std::string text;
    if (!string(&text)) return false;
    if (!handler_->string_value(std::move(text))) return handler_stopped(start);
    state_ = State::kAfterValue;
    return true;
  }
  if (c == '-' || is_digit(c)) return number();
  if (c == 't' || c == 'f' || c == 'n') return literal();
  if (c == ']' && state_ == State::kValue && !open_.empty() && open_.back() == '[') {
    return fail(pos_, "unexpected ']' after ','; expected a value (trailing commas are not JSON)");
  }
  return fail(pos_, fmt::format("unexpected {}; expected a value", describe_char(text_, pos_)));
}

bool Reader::open(char bracket) {
  if (open_.size() >= options_.max_depth) {
    return fail(pos_, fmt::format("arrays and objects nest deeper than {} levels",
                                  options_.max_depth));
  }
  open_.push_back(bracket);
  const bool ok = bracket == '{' ? handler_->begin_object() : handler_->begin_array();
  if (!ok) return handler_stopped(pos_);
  ++pos_;
  state_ = bracket == '{' ? State::kFirstKey : State::kFirstItem;
  return true;
}

bool Reader::close(char bracket) {
  const char opened = open_.back();
  if ((opened == '{') != (bracket == '}')) {
    return fail(pos_, fmt::format("unexpected '{}'; expected {}", bracket,
                                  opened == '{' ? "',' or '}' after a member"
                                                : "',' or ']' after an array item"));
  }
  open_.pop_back();
  const bool ok = bracket == '}' ? handler_->end_object() : handler_->end_array();
  if (!ok) return handler_stopped(pos_);
  ++pos_;
  state_ = State::kAfterValue;
  return true;
}

bool Reader::string(std::string* out) {
  const size_t start = pos_;
  ++pos_;  // the opening quote
  while (true) {
    // Runs of plain bytes are copied at once.
    const size_t run = pos_;
    while (pos_ < text_.size()) {
      const auto b = static_cast<unsigned char>(text_[pos_]);
      if (b == '"' || b == '\\' || b < 0x20 || b >= 0x80) break;
      ++pos_;
    }
    out->append(text_.data() + run, pos_ - run);
    if (at_end()) {
      return fail(pos_, fmt::format("unexpected end of the text in the string that starts at "
                                    "offset {}; expected '\"'",
                                    start));
    }
    const auto b = static_cast<unsigned char>(text_[pos_]);
    if (b == '"') {
      ++pos_;
      return true;
    }
    if (b == '\\') {
      if (!escape(out)) return false;
    } else if (b < 0x20) {
      return fail(pos_, fmt::format("control character U+{:04X} in a string; it must be "
                                    "escaped",
                                    b));
    } else {
      const size_t length = utf8_sequence_length(text_, pos_);
      if (length == 0) {
        out->append("\xEF\xBF\xBD");  // U+FFFD
        ++pos_;
      } else {
        out->append(text_.data() + pos_, length);
        pos_ += length;
      }
    }
  }
}

bool Reader::escape(std::string* out) {
  const size_t start = pos_;
  ++pos_;  // the backslash
  if (at_end()) return fail(pos_, "unexpected end of the text in an escape sequence");
  const char c = text_[pos_++];
  switch (c) {
    case '"': out->push_back('"'); return true;
    case '\\': out->push_back('\\'); return true;
    case '/': out->push_back('/'); return true;
    case 'b': out->push_back('\b'); return true;
    case 'f': out->push_back('\f'); return true;
    case 'n': out->push_back('\n'); return true;
    case 'r': out->push_back('\r'); return true;
    case 't': out->push_back('\t'); return true;
    case 'u': break;
    default:
      return fail(start, fmt::format("invalid escape in a string: '\\' followed by {}; JSON "
                                     "escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX",
                                     describe_char(text_, pos_ - 1)));
  }
  const auto hex4 = [&](size_t at, uint32_t* code) {
    if (text_.size() - at < 4) return false;
    uint32_t value = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int digit = hex_value(text_[at + k]);
      if (digit < 0) return false;
      value = (value << 4) | static_cast<uint32_t>(digit);
    }
    *code = value;
    return true;
  };
  uint32_t code = 0;
  if (!hex4(pos_, &code)) {
    return fail(start, "invalid \\u escape in a string: it takes four hexadecimal digits");
  }
  pos_ += 4;
  if (code >= 0xD800 && code <= 0xDBFF) {
    // A high surrogate: with a low one after it, one code point.
    uint32_t low = 0;
    if (text_.size() - pos_ >= 6 && text_[pos_] == '\\' && text_[pos_ + 1] == 'u' &&
        hex4(pos_ + 2, &low) && low >= 0xDC00 && low <= 0xDFFF) {
      pos_ += 6;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else {
      code = 0xFFFD;
    }
  } else if (code >= 0xDC00 && code <= 0xDFFF) {
    code = 0xFFFD;
  }
  append_utf8(code, out);
  return true;
}

bool Reader::number() {
  const size_t start = pos_;
  size_t i = pos_;
  const auto digit_at = [&](size_t k) { return k < text_.size() && is_digit(text_[k]); };
  const auto shown = [&](size_t end) {
    return std::string(text_.substr(start, std::min<size_t>(end - start, 40)));
  };
  if (text_[i] == '-') ++i;
  if (!digit_at(i)) {
    return fail(i, fmt::format("invalid number '{}': expected a digit after '-'", shown(i)));
  }
  bool integer = true;
  if (text_[i] == '0') {
    ++i;
    if (digit_at(i)) {
      return fail(start, fmt::format("invalid number '{}': leading zeros are not allowed",
                                     shown(i + 1)));
    }
  } else {
    while (digit_at(i)) ++i;
  }
  if (i < text_.size() && text_[i] == '.') {
    integer = false;
    ++i;
    if (!digit_at(i)) {
      return fail(i, fmt::format("invalid number '{}': expected a digit after '.'", shown(i)));
    }
    while (digit_at(i)) ++i;
  }
  if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
    integer = false;
    ++i;
    if (i < text_.size() && (text_[i] == '+' || text_[i] == '-')) ++i;
    if (!digit_at(i)) {
      return fail(i, fmt::format("invalid number '{}': expected a digit in the exponent",
                                 shown(i)));
    }
    while (digit_at(i)) ++i;
  }
  const char* first = text_.data() + start;
  const char* last = text_.data() + i;
  JsonNumber number;
  auto [end, status] = std::from_chars(first, last, number.value);
  if (status == std::errc::result_out_of_range) {
    // Out of range: an underflow reads as zero (or the nearest subnormal),
    // an overflow is refused.
    const std::string copy(first, last);
    const double value = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(value)) {
      return fail(start, fmt::format("number '{}' is too large for a double", shown(i)));
    }
    number.value = value;
  } else if (status != std::errc() || end != last) {
    return fail(start, fmt::format("invalid number '{}'", shown(i)));
  }
  if (integer) {
    if (text_[start] == '-') {
      int64_t value = 0;
      if (std::from_chars(first, last, value).ec == std::errc()) {
        number.exact = JsonNumber::Exact::kInt64;
        number.int64 = value;
      }
    } else {
      uint64_t value = 0;
      if (std::from_chars(first, last, value).ec == std::errc()) {
        if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          number.exact = JsonNumber::Exact::kInt64;
          number.int64 = static_cast<int64_t>(value);
        } else {
          number.exact = JsonNumber::Exact::kUint64;
          number.uint64 = value;
        }
      }
    }
  }
  pos_ = i;
  if (!handler_->number_value(number)) return handler_stopped(start);
  state_ = State::kAfterValue;
  return true;
}

bool Reader::literal() {
  static constexpr std::string_view kLiterals[] = {"true", "false", "null"};
  for (std::string_view word : kLiterals) {
    if (text_.substr(pos_, word.size()) != word) continue;
    const size_t at = pos_;
    pos_ += word.size();
    // "trueish": the literal must end where a value may end.
    if (pos_ < text_.size()) {
      const char next = text_[pos_];
      if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') || is_digit(next) ||
          next == '_') {
        size_t end = pos_;
        while (end < text_.size() && end - at < 40 &&
               ((text_[end] >= 'a' && text_[end] <= 'z') ||
                (text_[end] >= 'A' && text_[end] <= 'Z') || is_digit(text_[end]) ||
                text_[end] == '_')) {
          ++end;
        }
        return fail(at, fmt::format("invalid literal '{}'; expected true, false or null",
                                    text_.substr(at, end - at)));
      }
    }
    bool ok = true;
    if (word == "true") {
      ok = handler_->bool_value(true);
    } else if (word == "false") {
      ok = handler_->bool_value(false);
    } else {
      ok = handler_->null_value();
    }
    if (!ok) return handler_stopped(at);
    state_ = State::kAfterValue;
    return true;
  }
  size_t end = pos_;
  while (end < text_.size() && end - pos_ < 40 &&
         ((text_[end] >= 'a' && text_[end] <= 'z') || (text_[end] >= 'A' && text_[end] <= 'Z'))) {
    ++end;
  }
  return fail(pos_, fmt::format("invalid literal '{}'; expected true, false or null",
                                text_.substr(pos_, end - pos_)));
}

}  // namespace

bool JsonNumber::get_int64(int64_t* out) const {
  if (exact == Exact::kInt64) {
    *out = int64;
    return true;
  }
  if (exact == Exact::kUint64) return false;
  if (value != std::floor(value) || std::fabs(value) > kExactDoubleLimit) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

bool JsonNumber::get_uint64(uint64_t* out) const {
  if (exact == Exact::kUint64) {
    *out = uint64;
    return true;
  }
  if (exact == Exact::kInt64) {
    if (int64 < 0) return false;
    *out = static_cast<uint64_t>(int64);
    return true;
  }
  if (value != std::floor(value) || value < 0 || value > kExactDoubleLimit) return false;
  *out = static_cast<uint64_t>(value);
  return true;
}

JsonValue JsonValue::make_bool(bool flag) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = flag;
  return v;
}

JsonValue JsonValue::make_number(const JsonNumber& number) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = number;
  return v;
}

JsonValue JsonValue::make_string(std::string text) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(text);
  return v;
}

JsonValue JsonValue::make_array() {
  JsonValue v;
  v.type_ = Type::kArray;
  return v;
}

JsonValue JsonValue::make_object() {
  JsonValue v;
  v.type_ = Type::kObject;
  return v;
}

const JsonValue* JsonValue::find(std::string_view name) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->name == name) return &it->value;
  }
  return nullptr;
}

const char* JsonValue::type_name(Type type) {
  switch (type) {
    case Type::kNull: return "null";
    case Type::kBool: return "a boolean";
    case Type::kNumber: return "a number";
    case Type::kString: return "a string";
    case Type::kArray: return "an array";
    case Type::kObject: return "an object";
  }
  return "a value";
}

JsonValue* JsonValue::add_item(JsonValue value) {
  if (type_ != Type::kArray) return nullptr;
  items_.push_back(std::move(value));
  return &items_.back();
}

JsonValue* JsonValue::add_member(std::string name, JsonValue value) {
  if (type_ != Type::kObject) return nullptr;
  members_.push_back(JsonMember{std::move(name), std::move(value)});
  return &members_.back().value;
}

std::string JsonError::to_string() const {
  return fmt::format("line {}, column {}: {}", line, column, message);
}

JsonReadResult json_read(std::string_view text, JsonHandler* handler,
                         const JsonReadOptions& options) {
  return Reader(text, handler, options).read();
}

bool json_parse(std::string_view text, JsonValue* out, JsonError* error,
                const JsonReadOptions& options) {
  JsonTreeBuilder builder;
  JsonReadResult result = json_read(text, &builder, options);
  if (!result.ok) {
    if (error) *error = std::move(result.error);
    return false;
  }
  *out = builder.take();
  return true;
}

// JsonTreeBuilder: `open_` points at the containers being filled. Only the
// innermost one gains children, so the pointers to it and its ancestors
// stay valid while it grows.

bool JsonTreeBuilder::add(JsonValue value) {
  if (open_.empty()) {
    root_ = std::move(value);
    done_ = true;
    return true;
  }
  JsonValue* parent = open_.back();
  if (parent->is_object()) {
    parent->add_member(std::move(key_), std::move(value));
    key_.clear();
  } else {
    parent->add_item(std::move(value));
  }
  return true;
}

bool JsonTreeBuilder::open(JsonValue value) {
  if (open_.empty()) {
    root_ = std::move(value);
    done_ = false;
    open_.push_back(&root_);
    return true;
  }
  JsonValue* parent = open_.back();
  JsonValue* child = parent->is_object() ? parent->add_member(std::move(key_), std::move(value))
                                         : parent->add_item(std::move(value));
  key_.clear();
  open_.push_back(child);
  return true;
}

bool JsonTreeBuilder::begin_object() { return open(JsonValue::make_object()); }
bool JsonTreeBuilder::begin_array() { return open(JsonValue::make_array()); }

bool JsonTreeBuilder::key(std::string&& name) {
  key_ = std::move(name);
  return true;
}

bool JsonTreeBuilder::end_object() {
  open_.pop_back();
  if (open_.empty()) done_ = true;
  return true;
}

bool JsonTreeBuilder::end_array() { return end_object(); }

JsonValue JsonTreeBuilder::take() {
  done_ = false;
  JsonValue value = std::move(root_);
  root_ = JsonValue();
  return value;
}

}  // namespace axrt::tools
