// A JSON reader (RFC 8259) for the files the tool reads, such as traces: every
// value kind, strings with all escapes (\uXXXX surrogate pairs included),
// numbers kept exact when they are integers. It never recurses: containers
// are tracked on an explicit stack, nested at most `max_depth` deep, so that
// deep input is refused with a message rather than overflowing the stack.
// Errors name the line and column (1-based, in characters) and what was
// expected.
//
// Strictness: the grammar is RFC 8259's, with no extensions (no comments,
// trailing commas, NaN, single quotes). Text is taken as UTF-8; a leading
// byte order mark is skipped, and invalid UTF-8 bytes or unpaired surrogate
// escapes in strings become U+FFFD, as base/json_writer.h writes them.
//
// Two ways to read: json_parse() into a JsonValue tree, or json_read() with
// a JsonHandler that receives the values in document order, so that a large
// text (a trace of a million events) is never built into one tree.
#ifndef AXRT_TOOLS_AXRT_JSON_READER_H_
#define AXRT_TOOLS_AXRT_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace axrt::tools {

// A number as read: its double value, and its exact integer value when the
// text was an integer that fits 64 bits.
struct JsonNumber {
  enum class Exact : uint8_t { kNone, kInt64, kUint64 };
  double value = 0;
  Exact exact = Exact::kNone;
  int64_t int64 = 0;    // kInt64
  uint64_t uint64 = 0;  // kUint64 (above INT64_MAX only)

  // The value as an integer: the exact one, or the double when it is a
  // whole number within +-2^53 (1e3, 5.0). False otherwise.
  bool get_int64(int64_t* out) const;
  bool get_uint64(uint64_t* out) const;
};

struct JsonMember;

// One JSON value and, for arrays and objects, its children. Object members
// keep their order; a name given twice is kept twice, and find() returns the
// last (what most readers keep).
class JsonValue {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue make_bool(bool flag);
  static JsonValue make_number(const JsonNumber& number);
  static JsonValue make_string(std::string text);
  static JsonValue make_array();
  static JsonValue make_object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // The value of each kind; the accessor of another kind's value returns a
  // default (false, 0, "", no items).
  bool as_bool() const { return is_bool() && bool_; }
  double as_double() const { return is_number() ? number_.value : 0; }
  const JsonNumber& number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<JsonMember>& members() const { return members_; }

  // The member `name` of an object (the last one of that name), or null when
  // there is none or this is not an object.
  const JsonValue* find(std::string_view name) const;

  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* type_name(Type type);

  // For builders: children are added only to arrays and objects.
  JsonValue* add_item(JsonValue value);
  JsonValue* add_member(std::string name, JsonValue value);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  JsonNumber number_;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<JsonMember> members_;
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

// Receives the values of a document in order. Each call returns false to
// stop the read; the read then fails with `stop_reason`, placed where the
// read stopped.
class JsonHandler {
 public:
  virtual ~JsonHandler() = default;
  virtual bool null_value() = 0;
  virtual bool bool_value(bool flag) = 0;
  virtual bool number_value(const JsonNumber& number) = 0;
  virtual bool string_value(std::string&& text) = 0;
  virtual bool begin_object() = 0;
  // The name of the next member of the innermost object.
  virtual bool key(std::string&& name) = 0;
  virtual bool end_object() = 0;
  virtual bool begin_array() = 0;
  virtual bool end_array() = 0;

  std::string stop_reason;
};

struct JsonReadOptions {
  // The most arrays and objects open at once; deeper input is an error.
  size_t max_depth = 256;
  // Accept a document that is one array whose closing ']' is missing (after
  // an element or a trailing comma), as the Trace Event Format's JSON Array
  // Format allows for traces cut off while being written. The read then
  // reports it through JsonReadResult::array_left_open.
  bool allow_unclosed_array = false;
};

struct JsonError {
  std::string message;  // what is wrong: "expected ',' or '}' after a member"
  size_t offset = 0;    // in bytes from the start of the text
  size_t line = 0;      // 1-based
  size_t column = 0;    // 1-based, in characters (UTF-8 sequences count once)

  // "line 3, column 7: MESSAGE".
  std::string to_string() const;
};

struct JsonReadResult {
  bool ok = false;
  JsonError error;               // when !ok
  bool array_left_open = false;  // when ok: the closing ']' was missing
};

// Reads `text`, which must hold exactly one value (whitespace around it
// aside), passing its pieces to `handler`.
JsonReadResult json_read(std::string_view text, JsonHandler* handler,
                         const JsonReadOptions& options = {});

// Reads `text` into `*out`. Returns false with `*error` set when it is not
// valid JSON.
bool json_parse(std::string_view text, JsonValue* out, JsonError* error,
                const JsonReadOptions& options = {});

// Builds JsonValue trees from a handler's calls; json_parse() is built on
// it, and handlers that keep only parts of a document use it for those.
class JsonTreeBuilder : public JsonHandler {
 public:
  bool null_value() override { return add(JsonValue()); }
  bool bool_value(bool flag) override { return add(JsonValue::make_bool(flag)); }
  bool number_value(const JsonNumber& number) override {
    return add(JsonValue::make_number(number));
  }
  bool string_value(std::string&& text) override {
    return add(JsonValue::make_string(std::move(text)));
  }
  bool begin_object() override;
  bool key(std::string&& name) override;
  bool end_object() override;
  bool begin_array() override;
  bool end_array() override;

  // Whether a whole value has been built, and takes it (the builder is then
  // ready for the next value).
  bool done() const { return done_; }
  JsonValue take();

 private:
  bool add(JsonValue value);
  bool open(JsonValue value);

  JsonValue root_;
  std::vector<JsonValue*> open_;  // the containers not yet closed, outermost first
  std::string key_;
  bool done_ = false;
};

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_JSON_READER_H_
