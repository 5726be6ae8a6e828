// The JSON writer behind `axrt inspect --json` and `axrt devices --json`:
// structure, numbers and, above all, string escaping.
#include "base/json_writer.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using axrt::JsonWriter;

namespace {

std::string escaped(std::string_view text) {
  std::string out;
  JsonWriter::escape(text, &out);
  return out;
}

}  // namespace

TEST_CASE("json: quotes, backslashes and control characters are escaped") {
  CHECK(escaped("plain") == "\"plain\"");
  CHECK(escaped("a \"quoted\" word") == "\"a \\\"quoted\\\" word\"");
  CHECK(escaped("back\\slash") == "\"back\\\\slash\"");
  CHECK(escaped("\b\f\n\r\t") == "\"\\b\\f\\n\\r\\t\"");
  CHECK(escaped(std::string_view("nul\0bell\x07" "del\x7f", 13)) == "\"nul\\u0000bell\\u0007del\\u007f\"");
  CHECK(escaped("\x1f") == "\"\\u001f\"");
  CHECK(escaped("/") == "\"/\"");
}

TEST_CASE("json: valid UTF-8 passes through, invalid bytes become U+FFFD") {
  CHECK(escaped("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(escaped("\xe2\x82\xac \xf0\x9f\x98\x80") == "\"\xe2\x82\xac \xf0\x9f\x98\x80\"");
  CHECK(escaped("\xff") == "\"\\ufffd\"");
  CHECK(escaped("\xc3") == "\"\\ufffd\"");              // truncated sequence
  CHECK(escaped("\xc0\xaf") == "\"\\ufffd\\ufffd\"");   // overlong '/'
  CHECK(escaped("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  CHECK(escaped("\xf4\x90\x80\x80") == "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // > U+10FFFF
}

TEST_CASE("json: nested objects and arrays with commas and indentation") {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.member("name", "x");
  w.member("count", uint64_t{18446744073709551615u});
  w.member("delta", int64_t{-5});
  w.member("ok", true);
  w.key("none");
  w.null();
  w.key("list");
  w.begin_array();
  w.value(uint64_t{1});
  w.begin_object();
  w.end_object();
  w.begin_array();
  w.end_array();
  w.end_array();
  w.end_object();
  CHECK(out ==
        "{\n"
        "  \"name\": \"x\",\n"
        "  \"count\": 18446744073709551615,\n"
        "  \"delta\": -5,\n"
        "  \"ok\": true,\n"
        "  \"none\": null,\n"
        "  \"list\": [\n"
        "    1,\n"
        "    {},\n"
        "    []\n"
        "  ]\n"
        "}\n");
}

TEST_CASE("json: keys are escaped like values") {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.member("a\"b", "c\nd");
  w.end_object();
  CHECK(out == "{\n  \"a\\\"b\": \"c\\nd\"\n}\n");
}
