// The summary behind `axrt trace summary`, on the hand-written traces in
// tests/cli/traces: totals, shares and order of each table, "B"/"E" pairs,
// the JSON Array Format, the JSON form, empty traces and what is not a trace.
#include "tools/axrt/trace_summary.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "tools/axrt/json_reader.h"

using axrt::tools::json_parse;
using axrt::tools::JsonError;
using axrt::tools::JsonValue;
using axrt::tools::summarize_trace;
using axrt::tools::trace_summary_json;
using axrt::tools::trace_summary_text;
using axrt::tools::TraceSummary;
using axrt::tools::TraceTable;

namespace {

std::string read_trace(const std::string& name) {
  const std::string path = std::string(AXRT_CLI_TRACES) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TraceSummary summarize(std::string_view text) {
  TraceSummary summary;
  std::string error;
  INFO(text);
  const bool ok = summarize_trace(text, &summary, &error);
  INFO(error);
  REQUIRE(ok);
  return summary;
}

std::string error_of(std::string_view text) {
  TraceSummary summary;
  std::string error;
  INFO(text);
  REQUIRE_FALSE(summarize_trace(text, &summary, &error));
  return error;
}

struct Expected {
  const char* name;
  uint64_t count;
  int64_t total_ns;
  uint64_t bytes;
};

void check_table(const TraceTable& table, std::initializer_list<Expected> rows) {
  REQUIRE(table.rows.size() == rows.size());
  uint64_t count = 0;
  int64_t total = 0;
  size_t i = 0;
  for (const Expected& expected : rows) {
    INFO("row " << i << ": " << expected.name);
    CHECK(table.rows[i].name == expected.name);
    CHECK(table.rows[i].count == expected.count);
    CHECK(table.rows[i].total_ns == expected.total_ns);
    CHECK(table.rows[i].bytes == expected.bytes);
    count += expected.count;
    total += expected.total_ns;
    ++i;
  }
  CHECK(table.count == count);
  CHECK(table.total_ns == total);
}

// small.json, as either format holds it.
void check_small(const TraceSummary& s) {
  CHECK(s.events == 24);
  REQUIRE(s.first_ns);
  CHECK(*s.first_ns == 10'000);  // the counter at 10 us
  CHECK(s.last_ns == 550'000);   // the end of "step"
  // Longest first; "softmax" is a "B"/"E" pair written end first.
  check_table(s.kernels, {{"gemm", 2, 50'000, 0}, {"softmax", 1, 30'000, 0},
                          {"add", 1, 20'000, 0}});
  // Copies by direction (from args.direction, or the name), fills together.
  check_table(s.transfers, {{"fill", 1, 5'000, 2000},
                            {"copy HtoD", 2, 4'000, 8000},
                            {"copy DtoH", 1, 1'000, 1000}});
  CHECK(s.transfers.bytes == 11000);
  // "step" is a pair on a thread named by strings.
  check_table(s.functions, {{"forward", 2, 200'000, 0}, {"step", 1, 50'000, 0}});
  check_table(s.api_calls, {{"axrt_function_invoke", 2, 16'000, 0},
                            {"axrt_stream_copy_from_host", 1, 4'000, 0}});
  CHECK(s.unusable == 0);
  CHECK(s.unmatched_ends == 0);
  CHECK(s.unclosed_begins == 0);
}

}  // namespace

TEST_CASE("trace summary: tables of the object format, with B/E pairs") {
  const TraceSummary s = summarize(read_trace("small.json"));
  CHECK_FALSE(s.array_format);
  CHECK_FALSE(s.array_left_open);
  CHECK(s.producer == "hand-written 1.0");
  CHECK(s.dropped_events == 0u);
  CHECK(s.max_events == 1000u);
  check_small(s);
}

TEST_CASE("trace summary: the array format, its closing bracket missing") {
  const TraceSummary s = summarize(read_trace("small_array.json"));
  CHECK(s.array_format);
  CHECK(s.array_left_open);
  CHECK(s.producer.empty());
  CHECK_FALSE(s.dropped_events);
  check_small(s);
  const TraceSummary closed = summarize("[{\"name\":\"k\",\"cat\":\"kernel\",\"ph\":\"X\","
                                        "\"ts\":1,\"dur\":2}]");
  CHECK(closed.array_format);
  CHECK_FALSE(closed.array_left_open);
  check_table(closed.kernels, {{"k", 1, 2'000, 0}});
}

TEST_CASE("trace summary: the text form") {
  const std::string text = trace_summary_text(summarize(read_trace("small.json")), "t.json", 15);
  INFO(text);
  const auto has = [&](std::string_view needle) { return text.find(needle) != std::string::npos; };
  CHECK(has("trace: t.json\n"));
  CHECK(has("producer: hand-written 1.0\n"));
  CHECK(has("span: 0.540 ms (10.000 us to 550.000 us)\n"));
  CHECK(has("events: 24 (0 dropped)\n"));
  CHECK(has("kernels (4 dispatches, 0.100 ms):\n"));
  CHECK(has("         2        0.050       25.000   50.0%  gemm\n"));
  CHECK(has("         1        0.030       30.000   30.0%  softmax\n"));
  CHECK(has("         1        0.020       20.000   20.0%  add\n"));
  // In order of total time.
  CHECK(text.find("%  gemm") < text.find("%  softmax"));
  CHECK(text.find("%  softmax") < text.find("%  add"));
  CHECK(has("copies and fills (4 operations, 0.010 ms):\n"));
  CHECK(has("         1           2000        0.005      0.400   50.0%  fill\n"));
  CHECK(has("         2           8000        0.004      2.000   40.0%  copy HtoD\n"));
  CHECK(has("         1           1000        0.001      1.000   10.0%  copy DtoH\n"));
  CHECK(has("functions (3 invocations, 0.250 ms):\n"));
  CHECK(has("         2        0.200      100.000   80.0%  forward\n"));
  CHECK(has("API calls (3 calls, 0.020 ms):\n"));
  CHECK(has("         2        0.016        8.000  axrt_function_invoke\n"));
  CHECK_FALSE(has("note:"));

  // --top 1: the longest row, and one line for the rest.
  const std::string top = trace_summary_text(summarize(read_trace("small.json")), "t.json", 1);
  INFO(top);
  CHECK(top.find("%  gemm\n  ... 2 more (2 dispatches, 0.050 ms, 50.0%)\n") != std::string::npos);
  CHECK(top.find("softmax") == std::string::npos);
}

TEST_CASE("trace summary: the JSON form parses and its shares add up") {
  const TraceSummary s = summarize(read_trace("small.json"));
  const std::string text = trace_summary_json(s, "t.json", 0);
  INFO(text);
  JsonValue json;
  JsonError error;
  REQUIRE(json_parse(text, &json, &error));
  CHECK(json.find("file")->as_string() == "t.json");
  CHECK(json.find("producer")->as_string() == "hand-written 1.0");
  CHECK(json.find("span_ns")->as_double() == 540'000);
  CHECK(json.find("events")->as_double() == 24);
  CHECK(json.find("dropped_events")->as_double() == 0);
  CHECK(json.find("notes")->items().empty());
  for (const char* table : {"kernels", "transfers", "functions", "api_calls"}) {
    INFO(table);
    const JsonValue* rows = json.find(table)->find("top");
    REQUIRE(rows);
    double shares = 0;
    for (const JsonValue& row : rows->items()) shares += row.find("share_ppm")->as_double();
    CHECK(shares == 1'000'000);
  }
  const JsonValue& gemm = json.find("kernels")->find("top")->items()[0];
  CHECK(gemm.find("name")->as_string() == "gemm");
  CHECK(gemm.find("count")->as_double() == 2);
  CHECK(gemm.find("total_ns")->as_double() == 50'000);
  CHECK(gemm.find("mean_ns")->as_double() == 25'000);
  CHECK(gemm.find("share_ppm")->as_double() == 500'000);
  const JsonValue& htod = json.find("transfers")->find("top")->items()[1];
  CHECK(htod.find("direction")->as_string() == "copy HtoD");
  CHECK(htod.find("bytes")->as_double() == 8000);
  CHECK(htod.find("bytes_per_second")->as_double() == 2e9);
  CHECK(json.find("kernels")->find("total_ns")->as_double() == 100'000);
  CHECK(json.find("kernels")->find("rows")->as_double() == 3);

  // --top limits the rows listed, not the totals.
  JsonValue limited;
  REQUIRE(json_parse(trace_summary_json(s, "t.json", 1), &limited, &error));
  CHECK(limited.find("kernels")->find("top")->items().size() == 1);
  CHECK(limited.find("kernels")->find("rows")->as_double() == 3);
  CHECK(limited.find("kernels")->find("total_ns")->as_double() == 100'000);
}

TEST_CASE("trace summary: ts and dur as integers or fractions, nested B/E") {
  const TraceSummary s = summarize(R"({"traceEvents": [
    {"name": "k", "cat": "kernel", "ph": "X", "ts": 1.5, "dur": 0.002},
    {"name": "k", "cat": "kernel", "ph": "X", "ts": 3, "dur": 2},
    {"name": "outer", "cat": "kernel", "ph": "B", "pid": 1, "tid": 1, "ts": 10},
    {"name": "inner", "cat": "kernel", "ph": "B", "pid": 1, "tid": 1, "ts": 12},
    {"name": "other thread", "cat": "kernel", "ph": "B", "pid": 1, "tid": 2, "ts": 13},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 15},
    {"ph": "E", "pid": 1, "tid": 2, "ts": 16},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 20, "args": {}},
    {"name": "both", "cat": "api,kernel", "ph": "X", "ts": 30, "dur": 1},
    {"name": "c", "cat": "copy", "ph": "B", "tid": 3, "ts": 40, "args": {"direction": "DtoD"}},
    {"name": "c", "cat": "copy", "ph": "E", "tid": 3, "ts": 42, "args": {"bytes": 64}}
  ]})");
  check_table(s.kernels, {{"outer", 1, 10'000, 0},
                          {"inner", 1, 3'000, 0},
                          {"other thread", 1, 3'000, 0},
                          {"k", 2, 2'002, 0}});
  // The first category a table takes wins.
  check_table(s.api_calls, {{"both", 1, 1'000, 0}});
  // An "E" may carry the arguments its "B" lacked.
  check_table(s.transfers, {{"copy DtoD", 1, 2'000, 64}});
  CHECK(*s.first_ns == 1'500);
  CHECK(s.last_ns == 42'000);
}

TEST_CASE("trace summary: malformed events are counted, not taken") {
  const TraceSummary s = summarize(R"({"traceEvents": [
    {"name": "no dur", "cat": "kernel", "ph": "X", "ts": 1},
    {"name": "string ts", "cat": "kernel", "ph": "X", "ts": "1", "dur": 1},
    {"name": "negative", "cat": "kernel", "ph": "X", "ts": 1, "dur": -1},
    {"name": "huge", "cat": "kernel", "ph": "X", "ts": 1e300, "dur": 1},
    {"name": "lost end", "cat": "kernel", "ph": "E", "tid": 1, "ts": 5},
    {"name": "never ends", "cat": "kernel", "ph": "B", "tid": 2, "ts": 6},
    {"name": "no phase", "cat": "kernel", "ts": 1, "dur": 1},
    {"name": "ok", "cat": "kernel", "ph": "X", "ts": 7, "dur": 1, "args": [1, 2]}
  ]})");
  CHECK(s.events == 8);
  CHECK(s.unusable == 4);
  CHECK(s.unmatched_ends == 1);
  CHECK(s.unclosed_begins == 1);
  check_table(s.kernels, {{"ok", 1, 1'000, 0}});
  const std::string text = trace_summary_text(s, "m.json", 15);
  INFO(text);
  CHECK(text.find("note: 4 slices ignored: no usable \"ts\" or \"dur\"") != std::string::npos);
  CHECK(text.find("note: 1 \"E\" event ignored: no \"B\" open on the thread") !=
        std::string::npos);
  CHECK(text.find("note: 1 \"B\" event ignored: never ended") != std::string::npos);
}

TEST_CASE("trace summary: empty traces print empty tables and a note") {
  for (const char* text : {"{\"traceEvents\": []}", "[]", "[", "  [\n",
                           "{\"traceEvents\": [{\"name\": \"process_name\", \"ph\": \"M\"}]}"}) {
    INFO(text);
    const TraceSummary s = summarize(text);
    CHECK(s.kernels.rows.empty());
    CHECK_FALSE(s.first_ns);
    const std::string out = trace_summary_text(s, "e.json", 15);
    INFO(out);
    CHECK(out.find("span: none (no timed events)") != std::string::npos);
    CHECK(out.find("kernels (0 dispatches, 0.000 ms):\n") != std::string::npos);
    CHECK(out.find("  (no kernel slices)\n") != std::string::npos);
    CHECK(out.find("  (no copy or fill slices)\n") != std::string::npos);
    CHECK(out.find("  (no function slices)\n") != std::string::npos);
    CHECK(out.find("  (no API call slices)\n") != std::string::npos);
    CHECK(out.find("note: the trace holds no kernel, copy, fill, function or API slices") !=
          std::string::npos);
    JsonValue json;
    REQUIRE(json_parse(trace_summary_json(s, "e.json", 15), &json, nullptr));
    CHECK(json.find("kernels")->find("top")->items().empty());
    CHECK(json.find("notes")->items().size() == (s.array_left_open ? 2u : 1u));
  }
}

TEST_CASE("trace summary: dropped events are noted") {
  const TraceSummary s = summarize(R"({"otherData": {"dropped_events": 7, "max_events": 10},
    "traceEvents": [{"name": "k", "cat": "kernel", "ph": "X", "ts": 0, "dur": 1}]})");
  CHECK(s.dropped_events == 7u);
  const std::string text = trace_summary_text(s, "d.json", 15);
  CHECK(text.find("events: 1 (7 dropped)") != std::string::npos);
  CHECK(text.find("note: 7 events were dropped at the trace's limit of 10 events") !=
        std::string::npos);
}

TEST_CASE("trace summary: what is not a trace is refused with the reason") {
  CHECK(error_of("") == "line 1, column 1: no JSON value: the text is empty");
  CHECK(error_of(read_trace("invalid.json")) ==
        "line 3, column 46: unexpected '}'; expected a member name (a string) after ','");
  CHECK(error_of("{\"traceEvents\": [}") == "line 1, column 18: unexpected '}'; expected a value");
  CHECK(error_of("\x7f" "ELF") == "line 1, column 1: unexpected U+007F; expected a value");
  CHECK(error_of(read_trace("not_a_trace.json")) ==
        "not a trace: a JSON object without a \"traceEvents\" array");
  CHECK(error_of("{}") == "not a trace: a JSON object without a \"traceEvents\" array");
  CHECK(error_of("42") == "line 1, column 1: not a trace: the file holds a number, not an object "
                          "with \"traceEvents\" or an array of events");
  CHECK(error_of("\"x\"").find("not a trace: the file holds a string") != std::string::npos);
  CHECK(error_of("{\"traceEvents\": {}}") ==
        "line 1, column 17: not a trace: \"traceEvents\" is an object, not an array");
  CHECK(error_of("{\"traceEvents\": 3}").find("\"traceEvents\" is a number, not an array") !=
        std::string::npos);
  CHECK(error_of("[{}, 5]") ==
        "line 1, column 6: not a trace: event 1 (counting from 0) is a number, not an object");
  CHECK(error_of("[[]]").find("event 0 (counting from 0) is an array") != std::string::npos);
  // An object's events may not be left open; only the bare array's.
  CHECK(error_of("{\"traceEvents\": [").find("unexpected end of the text") != std::string::npos);
  // Deep nesting inside an event is refused, not a crash.
  const std::string deep = "[{\"args\": " + std::string(100'000, '[');
  CHECK(error_of(deep).find("nest deeper than 256 levels") != std::string::npos);
}
