// What `axrt trace summary` reports about a Chrome Trace Event JSON file
// (docs/profiling.md describes the files axrt writes): where the time went,
// by kernel, by copy direction, by function and by API call.
//
// It reads axrt's traces and the same events re-saved by other tools: the
// JSON Object Format ({"traceEvents": [...], ...}) and the JSON Array Format
// ([...], whose closing ']' may be missing), complete events ("X") and
// begin/end pairs ("B"/"E", matched per pid and tid), times as integers or
// fractions of microseconds. Unknown fields and event phases are ignored.
// Events are classified by category: "kernel", "copy", "fill", "function"
// and "api" (the first of those in a comma-separated list).
#ifndef AXRT_TOOLS_AXRT_TRACE_SUMMARY_H_
#define AXRT_TOOLS_AXRT_TRACE_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace axrt::tools {

// One line of a table: a kernel, a copy direction, a function or an API
// call, and the slices of that name.
struct TraceRow {
  std::string name;
  uint64_t count = 0;
  int64_t total_ns = 0;
  uint64_t bytes = 0;  // copies and fills: the bytes they moved
};

// The rows of one table, by total time (longest first, then by name).
struct TraceTable {
  std::vector<TraceRow> rows;
  uint64_t count = 0;    // slices in all rows
  int64_t total_ns = 0;  // their time
  uint64_t bytes = 0;
};

struct TraceSummary {
  std::string producer;                    // otherData.producer, or ""
  std::optional<uint64_t> dropped_events;  // otherData.dropped_events
  std::optional<uint64_t> max_events;      // otherData.max_events
  uint64_t events = 0;                     // entries of the event array
  bool array_format = false;               // a bare array, not an object
  bool array_left_open = false;            // the array's ']' was missing
  // The time the timed events cover, from the first start to the last end,
  // in nanoseconds of the trace's clock; unset when there are none.
  std::optional<int64_t> first_ns;
  int64_t last_ns = 0;

  TraceTable kernels;    // grouped by name
  TraceTable transfers;  // copies by direction ("copy HtoD"), and "fill"
  TraceTable functions;  // grouped by name
  TraceTable api_calls;  // grouped by name

  uint64_t unusable = 0;         // slices without a usable ts or dur
  uint64_t unmatched_ends = 0;   // "E" events with no "B" open on their thread
  uint64_t unclosed_begins = 0;  // "B" events never ended
};

// Reads the trace held in `text`. Returns false with `*error` set when it is
// not valid JSON ("line 3, column 7: ...") or not a trace ("not a trace:
// ...").
bool summarize_trace(std::string_view text, TraceSummary* out, std::string* error);

// The report, as text or as JSON, for the file `path`: each table's `top`
// longest rows (all of them when `top` is 0).
std::string trace_summary_text(const TraceSummary& summary, std::string_view path, size_t top);
std::string trace_summary_json(const TraceSummary& summary, std::string_view path, size_t top);

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_TRACE_SUMMARY_H_
