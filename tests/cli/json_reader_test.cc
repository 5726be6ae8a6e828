// The JSON reader behind `axrt trace summary`: every kind of value, string
// escapes, numbers kept exact, each kind of error with its line and column,
// deep nesting refused without recursion, and the handler interface.
#include "tools/axrt/json_reader.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>

using axrt::tools::json_parse;
using axrt::tools::json_read;
using axrt::tools::JsonError;
using axrt::tools::JsonNumber;
using axrt::tools::JsonReadOptions;
using axrt::tools::JsonReadResult;
using axrt::tools::JsonTreeBuilder;
using axrt::tools::JsonValue;

namespace {

JsonValue parse(std::string_view text) {
  JsonValue value;
  JsonError error;
  INFO(text);
  const bool ok = json_parse(text, &value, &error);
  INFO(error.to_string());
  REQUIRE(ok);
  return value;
}

JsonError error_of(std::string_view text, const JsonReadOptions& options = {}) {
  JsonValue value;
  JsonError error;
  INFO(text);
  REQUIRE_FALSE(json_parse(text, &value, &error, options));
  return error;
}

std::string string_of(std::string_view text) {
  const JsonValue value = parse(text);
  REQUIRE(value.is_string());
  return value.as_string();
}

}  // namespace

TEST_CASE("json_reader: literals, strings, arrays and objects") {
  CHECK(parse("null").is_null());
  CHECK(parse("true").as_bool());
  CHECK_FALSE(parse(" false ").as_bool());
  CHECK(parse("false").is_bool());
  CHECK(string_of("\"text\"") == "text");
  CHECK(string_of("\"\"").empty());

  const JsonValue array = parse(" [ 1 , \"two\" , [ ] , { } , null ] ");
  REQUIRE(array.is_array());
  REQUIRE(array.items().size() == 5);
  CHECK(array.items()[0].as_double() == 1);
  CHECK(array.items()[1].as_string() == "two");
  CHECK(array.items()[2].is_array());
  CHECK(array.items()[2].items().empty());
  CHECK(array.items()[3].is_object());
  CHECK(array.items()[4].is_null());

  const JsonValue object =
      parse("{\"b\": {\"c\": [true, {\"d\": -2}]}, \"a\": 1,\n\t\"a\": 2}");
  REQUIRE(object.is_object());
  REQUIRE(object.members().size() == 3);
  CHECK(object.members()[0].name == "b");  // in the order written
  CHECK(object.members()[1].name == "a");
  CHECK(object.find("a")->as_double() == 2);  // the last of a name
  CHECK(object.find("missing") == nullptr);
  CHECK(object.find("b")->find("c")->items()[1].find("d")->as_double() == -2);
  CHECK(array.find("a") == nullptr);  // not an object

  // Accessors of another kind give defaults.
  CHECK(object.as_string().empty());
  CHECK(object.as_double() == 0);
  CHECK(object.items().empty());
  CHECK_FALSE(parse("1").as_bool());
}

TEST_CASE("json_reader: string escapes and UTF-8") {
  CHECK(string_of(R"("\" \\ \/ \b \f \n \r \t")") == "\" \\ / \b \f \n \r \t");
  CHECK(string_of(R"("\u0041\u00e9\u20AC")") == "A\xc3\xa9\xe2\x82\xac");
  CHECK(string_of(R"("\u0000")") == std::string("\0", 1));
  // A surrogate pair is one code point: U+1F600.
  CHECK(string_of(R"("\ud83d\ude00")") == "\xf0\x9f\x98\x80");
  CHECK(string_of(R"("\uD834\uDD1E")") == "\xf0\x9d\x84\x9e");
  // Unpaired surrogates become U+FFFD; what follows is kept.
  CHECK(string_of(R"("\ud83d")") == "\xef\xbf\xbd");
  CHECK(string_of(R"("\ud83dx")") == "\xef\xbf\xbdx");
  CHECK(string_of(R"("\ud83d\u0041")") == "\xef\xbf\xbd" "A");
  CHECK(string_of(R"("\ude00\ud83d")") == "\xef\xbf\xbd\xef\xbf\xbd");
  // UTF-8 passes through; invalid bytes become U+FFFD.
  CHECK(string_of("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"") == "caf\xc3\xa9 \xf0\x9f\x98\x80");
  CHECK(string_of("\"a\xff" "b\"") == "a\xef\xbf\xbd" "b");
  CHECK(string_of("\"\xc0\xaf\"") == "\xef\xbf\xbd\xef\xbf\xbd");  // overlong
  CHECK(string_of("\"\xed\xa0\x80\"") == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
  // A byte order mark before the value is skipped.
  CHECK(string_of("\xef\xbb\xbf\"x\"") == "x");
  CHECK(parse("{\"\\u006b\": 1}").find("k") != nullptr);  // escapes in member names
}

TEST_CASE("json_reader: numbers") {
  const auto number = [](std::string_view text) {
    const JsonValue value = parse(text);
    REQUIRE(value.is_number());
    return value.number();
  };
  CHECK(number("0").value == 0);
  CHECK(number("-0").value == 0);
  CHECK(number("1.5").value == 1.5);
  CHECK(number("-12.25e2").value == -1225);
  CHECK(number("1E+3").value == 1000);
  CHECK(number("25e-1").value == 2.5);
  CHECK(number("0.1").value == 0.1);
  CHECK(number("1e-400").value == 0);  // underflow reads as zero
  CHECK(number("1.7976931348623157e308").value == std::numeric_limits<double>::max());

  int64_t i = 0;
  uint64_t u = 0;
  const JsonNumber big = number("18446744073709551615");
  CHECK(big.exact == JsonNumber::Exact::kUint64);
  CHECK(big.get_uint64(&u));
  CHECK(u == std::numeric_limits<uint64_t>::max());
  CHECK_FALSE(big.get_int64(&i));
  const JsonNumber min = number("-9223372036854775808");
  CHECK(min.get_int64(&i));
  CHECK(i == std::numeric_limits<int64_t>::min());
  CHECK_FALSE(min.get_uint64(&u));
  CHECK(number("9007199254740993").get_int64(&i));  // exact beyond 2^53
  CHECK(i == 9007199254740993);
  // Whole numbers written as fractions or exponents convert; others not.
  CHECK(number("1e3").get_uint64(&u));
  CHECK(u == 1000);
  CHECK(number("5.0").get_int64(&i));
  CHECK(i == 5);
  CHECK_FALSE(number("5.5").get_int64(&i));
  CHECK_FALSE(number("1e300").get_int64(&i));
  CHECK_FALSE(number("-1").get_uint64(&u));
  // Beyond 64 bits: only the double.
  const JsonNumber huge = number("123456789012345678901234567890");
  CHECK(huge.exact == JsonNumber::Exact::kNone);
  CHECK(huge.value == Approx(1.2345678901234568e29));
}

TEST_CASE("json_reader: every kind of error, with line and column") {
  struct Case {
    const char* text;
    const char* message;
    size_t line;
    size_t column;
  };
  const Case cases[] = {
      {"", "no JSON value: the text is empty", 1, 1},
      {" \n ", "no JSON value: the text is empty", 2, 2},
      {"[1, 2", "unexpected end of the text; expected ',' or ']'", 1, 6},
      {"{\"a\": 1", "unexpected end of the text; expected ',' or '}'", 1, 8},
      {"{\"a\"", "unexpected end of the text; expected ':'", 1, 5},
      {"[", "unexpected end of the text; expected a value or ']'", 1, 2},
      {"[1,]", "trailing commas are not JSON", 1, 4},
      {"{\"a\": 1,}", "expected a member name (a string) after ','", 1, 9},
      {"{1: 2}", "unexpected '1'; expected a member name (a string) or '}'", 1, 2},
      {"{'a': 1}", "unexpected '''", 1, 2},
      {"{\"a\" 1}", "unexpected '1'; expected ':' after a member name", 1, 6},
      {"[1 2]", "unexpected '2'; expected ',' or ']' after an array item", 1, 4},
      {"{\"a\": 1 \"b\": 2}", "expected ',' or '}' after a member", 1, 9},
      {"[}", "unexpected '}'; expected a value", 1, 2},
      {"[1}", "unexpected '}'; expected ',' or ']' after an array item", 1, 3},
      {"{\"a\": 1]", "unexpected ']'; expected ',' or '}' after a member", 1, 8},
      {"1 2", "unexpected '2' after the JSON value; the text must hold one value", 1, 3},
      {"{} x", "unexpected 'x' after the JSON value", 1, 4},
      {"tru", "invalid literal 'tru'; expected true, false or null", 1, 1},
      {"[truex]", "invalid literal 'truex'", 1, 2},
      {"nul", "invalid literal 'nul'", 1, 1},
      {"True", "unexpected 'T'; expected a value", 1, 1},
      {"NaN", "unexpected 'N'; expected a value", 1, 1},
      {"undefined", "unexpected 'u'; expected a value", 1, 1},
      {"01", "invalid number '01': leading zeros are not allowed", 1, 1},
      {"-", "invalid number '-': expected a digit after '-'", 1, 2},
      {"-x", "expected a digit after '-'", 1, 2},
      {"1.", "invalid number '1.': expected a digit after '.'", 1, 3},
      {"1.e5", "expected a digit after '.'", 1, 3},
      {"1e", "invalid number '1e': expected a digit in the exponent", 1, 3},
      {"1e+", "expected a digit in the exponent", 1, 4},
      {".5", "unexpected '.'; expected a value", 1, 1},
      {"+1", "unexpected '+'; expected a value", 1, 1},
      {"1e400", "number '1e400' is too large for a double", 1, 1},
      {"-1e400", "is too large for a double", 1, 1},
      {"\"abc", "unexpected end of the text in the string that starts at offset 0", 1, 5},
      {"\"a\nb\"", "control character U+000A in a string; it must be escaped", 1, 3},
      {"\"a\tb\"", "control character U+0009", 1, 3},
      {"\"\\x\"", "invalid escape in a string: '\\' followed by 'x'", 1, 2},
      {"\"\\", "unexpected end of the text in an escape sequence", 1, 3},
      {"\"\\u12\"", "invalid \\u escape in a string: it takes four hexadecimal digits", 1, 2},
      {"\"\\u12g4\"", "four hexadecimal digits", 1, 2},
      {"\x01", "unexpected U+0001; expected a value", 1, 1},
      {"\xff", "unexpected byte 0xFF (not UTF-8); expected a value", 1, 1},
      {"\xc3\xa9", "unexpected U+00E9; expected a value", 1, 1},
      // Lines count newlines; columns count characters, not bytes.
      {"{\n  \"a\": tru\n}", "invalid literal 'tru'", 2, 8},
      {"[\"\xc3\xa9\xc3\xa9\", x]", "unexpected 'x'", 1, 8},
      {"[\r\n1,\r\n?]", "unexpected '?'", 3, 1},
  };
  for (const Case& c : cases) {
    const JsonError error = error_of(c.text);
    INFO(c.text);
    INFO(error.to_string());
    CHECK(error.message.find(c.message) != std::string::npos);
    CHECK(error.line == c.line);
    CHECK(error.column == c.column);
  }
  CHECK(error_of("[1,\n x]").to_string() == "line 2, column 2: unexpected 'x'; expected a value");
}

TEST_CASE("json_reader: nesting deeper than the limit is refused, without recursion") {
  const auto nested = [](size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  // At the limit: read, and the tree (as deep) is freed.
  {
    const JsonValue value = parse(nested(256));
    const JsonValue* inner = &value;
    size_t depth = 1;
    while (!inner->items().empty()) {
      inner = &inner->items()[0];
      ++depth;
    }
    CHECK(depth == 256);
  }
  JsonError error = error_of(nested(257));
  CHECK(error.message == "arrays and objects nest deeper than 256 levels");
  CHECK(error.column == 257);
  // Far deeper input, and unbalanced input, fail the same way at the limit.
  error = error_of(std::string(1'000'000, '['));
  CHECK(error.message == "arrays and objects nest deeper than 256 levels");
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += "{\"a\":";
  CHECK(error_of(objects).message == "arrays and objects nest deeper than 256 levels");
  // The limit is an option.
  JsonReadOptions options;
  options.max_depth = 3;
  JsonValue value;
  CHECK(json_parse("[[[1]]]", &value, nullptr, options));
  CHECK(error_of("[[[[1]]]]", options).message == "arrays and objects nest deeper than 3 levels");
  CHECK(error_of("[{\"a\":{\"b\":[]}}]", options).column == 12);
}

TEST_CASE("json_reader: an array left open is accepted only when asked for") {
  JsonReadOptions options;
  options.allow_unclosed_array = true;
  for (const char* text : {"[1, 2", "[1, 2,", "[1, 2,\n  ", "[", "[{\"a\": [1]}"}) {
    INFO(text);
    JsonTreeBuilder builder;
    const JsonReadResult result = json_read(text, &builder, options);
    CHECK(result.ok);
    CHECK(result.array_left_open);
    CHECK(builder.done());
    CHECK(builder.take().is_array());
    // Without the option, the same text is an error.
    JsonTreeBuilder strict;
    CHECK_FALSE(json_read(text, &strict).ok);
  }
  JsonTreeBuilder builder;
  JsonReadResult result = json_read("[1, 2]", &builder, options);
  CHECK(result.ok);
  CHECK_FALSE(result.array_left_open);
  // Only the outermost array, and only between values.
  CHECK_FALSE(json_read("[1, [2", &builder, options).ok);
  CHECK_FALSE(json_read("[1, {\"a\": 1", &builder, options).ok);
  CHECK_FALSE(json_read("[1, \"ab", &builder, options).ok);
  CHECK_FALSE(json_read("[1, 2.", &builder, options).ok);
  CHECK_FALSE(json_read("{\"a\": 1", &builder, options).ok);
  CHECK_FALSE(json_read("[1, 2]]", &builder, options).ok);
}

TEST_CASE("json_reader: a handler sees values in order and may stop the read") {
  struct Recorder : axrt::tools::JsonHandler {
    std::string log;
    bool add(std::string_view text) {
      log += text;
      log += ' ';
      return true;
    }
    bool null_value() override { return add("null"); }
    bool bool_value(bool flag) override { return add(flag ? "true" : "false"); }
    bool number_value(const JsonNumber& n) override { return add(std::to_string(n.int64)); }
    bool string_value(std::string&& text) override { return add("'" + text + "'"); }
    bool begin_object() override { return add("{"); }
    bool key(std::string&& name) override {
      if (name == "stop") {
        stop_reason = "stopped at 'stop'";
        return false;
      }
      return add(name + ":");
    }
    bool end_object() override { return add("}"); }
    bool begin_array() override { return add("["); }
    bool end_array() override { return add("]"); }
  };
  Recorder recorder;
  JsonReadResult result = json_read(R"({"a": [1, "x", null, true, false], "b": {}})", &recorder);
  CHECK(result.ok);
  CHECK(recorder.log == "{ a: [ 1 'x' null true false ] b: { } } ");

  Recorder stopping;
  result = json_read("{\"a\": 1,\n \"stop\": 2}", &stopping);
  CHECK_FALSE(result.ok);
  CHECK(result.error.to_string() == "line 2, column 2: stopped at 'stop'");
  CHECK(stopping.log == "{ a: 1 ");
}
