#include "tools/axrt/trace_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

#include "base/json_writer.h"
#include "tools/axrt/json_reader.h"

namespace axrt::tools {

namespace {

// Times beyond this many microseconds (about 31 years) are not taken: their
// nanoseconds would not fit an int64_t once summed.
constexpr double kMaxMicroseconds = 1e15;

enum class Group : uint8_t { kNone, kKernel, kTransfer, kFunction, kApi };

// The first category of a comma-separated list that a table takes, as its
// table; `*fill` says whether it was "fill".
Group group_of(std::string_view category, bool* fill) {
  *fill = false;
  while (!category.empty()) {
    const size_t comma = category.find(',');
    std::string_view token = category.substr(0, comma);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    if (token == "kernel") return Group::kKernel;
    if (token == "copy") return Group::kTransfer;
    if (token == "fill") {
      *fill = true;
      return Group::kTransfer;
    }
    if (token == "function") return Group::kFunction;
    if (token == "api") return Group::kApi;
    if (comma == std::string_view::npos) break;
    category.remove_prefix(comma + 1);
  }
  return Group::kNone;
}

// Microseconds as whole nanoseconds; false when not a usable time.
bool to_ns(const JsonValue* value, int64_t* out) {
  if (!value || !value->is_number()) return false;
  const double us = value->as_double();
  if (!std::isfinite(us) || std::fabs(us) > kMaxMicroseconds) return false;
  *out = std::llround(us * 1000.0);
  return true;
}

// What a slice of one of the tables needs from its event.
struct Slice {
  Group group = Group::kNone;
  std::string name;  // the table row: a name, or a copy direction
  uint64_t bytes = 0;
  bool has_bytes = false;
};

// The row a slice goes to: kernels, functions and API calls by name; copies
// by direction ("copy HtoD", from args.direction or else the name), fills
// together.
Slice slice_of(const JsonValue& event) {
  Slice slice;
  const JsonValue* category = event.find("cat");
  bool fill = false;
  slice.group = group_of(category ? category->as_string() : std::string_view(), &fill);
  if (slice.group == Group::kNone) return slice;
  const JsonValue* name = event.find("name");
  if (name && name->is_string()) slice.name = name->as_string();
  const JsonValue* args = event.find("args");
  if (args && !args->is_object()) args = nullptr;
  if (slice.group == Group::kTransfer) {
    const JsonValue* direction = args ? args->find("direction") : nullptr;
    if (fill) {
      slice.name = "fill";
    } else if (direction && direction->is_string() && !direction->as_string().empty()) {
      slice.name = "copy " + direction->as_string();
    } else if (slice.name.empty()) {
      slice.name = "copy";
    }
    const JsonValue* bytes = args ? args->find("bytes") : nullptr;
    if (bytes && bytes->is_number()) slice.has_bytes = bytes->number().get_uint64(&slice.bytes);
  }
  if (slice.name.empty()) slice.name = "(unnamed)";
  return slice;
}

// A "B" or "E" event, kept until the trace is read: pairs are matched per
// thread in time order.
struct Mark {
  int64_t ts_ns = 0;
  uint64_t sequence = 0;  // order in the file, for marks at the same time
  bool begin = false;
  Slice slice;
};

// "pid/tid", numbers and strings alike, so that marks of a thread meet.
std::string thread_key(const JsonValue& event) {
  const auto part = [](const JsonValue* v) -> std::string {
    if (!v) return "-";
    if (v->is_string()) return "\"" + v->as_string() + "\"";
    if (v->is_number()) return fmt::format("{}", v->as_double());
    return "?";
  };
  return part(event.find("pid")) + "/" + part(event.find("tid"));
}

class Accumulator {
 public:
  explicit Accumulator(TraceSummary* summary) : summary_(summary) {}

  void add_event(const JsonValue& event) {
    ++summary_->events;
    const JsonValue* phase_value = event.find("ph");
    std::string_view phase;
    if (phase_value && phase_value->is_string()) phase = phase_value->as_string();
    if (phase.empty() || phase == "M") return;  // metadata: no time
    int64_t ts = 0;
    const bool has_ts = to_ns(event.find("ts"), &ts);
    if (phase == "X") {
      int64_t dur = 0;
      if (!has_ts || !to_ns(event.find("dur"), &dur) || dur < 0) {
        ++summary_->unusable;
        return;
      }
      cover(ts, ts + dur);
      add_slice(slice_of(event), dur);
    } else if (phase == "B" || phase == "E") {
      if (!has_ts) {
        ++summary_->unusable;
        return;
      }
      cover(ts, ts);
      Mark mark;
      mark.ts_ns = ts;
      mark.sequence = marks_++;
      mark.begin = phase == "B";
      mark.slice = slice_of(event);
      threads_[thread_key(event)].push_back(std::move(mark));
    } else if (has_ts) {
      cover(ts, ts);
    }
  }

  // Pairs the marks and sorts the tables.
  void finish() {
    for (auto& [thread, marks] : threads_) {
      std::stable_sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) {
        return a.ts_ns < b.ts_ns;
      });
      std::vector<const Mark*> open;
      for (const Mark& mark : marks) {
        if (mark.begin) {
          open.push_back(&mark);
          continue;
        }
        if (open.empty()) {
          ++summary_->unmatched_ends;
          continue;
        }
        Slice slice = open.back()->slice;
        // An "E" may carry the arguments its "B" lacked.
        if (!slice.has_bytes && mark.slice.has_bytes) {
          slice.bytes = mark.slice.bytes;
          slice.has_bytes = true;
        }
        add_slice(slice, mark.ts_ns - open.back()->ts_ns);
        open.pop_back();
      }
      summary_->unclosed_begins += open.size();
    }
    threads_.clear();
    for (auto [table, rows] : {std::pair{&summary_->kernels, &kernels_},
                               std::pair{&summary_->transfers, &transfers_},
                               std::pair{&summary_->functions, &functions_},
                               std::pair{&summary_->api_calls, &api_calls_}}) {
      for (auto& [name, row] : *rows) table->rows.push_back(std::move(row));
      std::sort(table->rows.begin(), table->rows.end(), [](const TraceRow& a, const TraceRow& b) {
        if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
        return a.name < b.name;
      });
    }
  }

 private:
  void cover(int64_t begin, int64_t end) {
    if (!summary_->first_ns) {
      summary_->first_ns = begin;
      summary_->last_ns = end;
      return;
    }
    summary_->first_ns = std::min(*summary_->first_ns, begin);
    summary_->last_ns = std::max(summary_->last_ns, end);
  }

  void add_slice(const Slice& slice, int64_t duration_ns) {
    TraceTable* table = nullptr;
    std::map<std::string, TraceRow>* rows = nullptr;
    switch (slice.group) {
      case Group::kNone: return;
      case Group::kKernel: table = &summary_->kernels, rows = &kernels_; break;
      case Group::kTransfer: table = &summary_->transfers, rows = &transfers_; break;
      case Group::kFunction: table = &summary_->functions, rows = &functions_; break;
      case Group::kApi: table = &summary_->api_calls, rows = &api_calls_; break;
    }
    TraceRow& row = (*rows)[slice.name];
    if (row.name.empty()) row.name = slice.name;
    ++row.count;
    row.total_ns += duration_ns;
    row.bytes += slice.bytes;
    ++table->count;
    table->total_ns += duration_ns;
    table->bytes += slice.bytes;
  }

  TraceSummary* summary_;
  std::map<std::string, TraceRow> kernels_, transfers_, functions_, api_calls_;
  std::unordered_map<std::string, std::vector<Mark>> threads_;
  uint64_t marks_ = 0;
};

// Reads a trace a piece at a time: each event of the event array, and
// `otherData`, is built as a tree and handed on; everything else is only
// checked to be JSON. Beside the file's text, memory holds one event's
// tree, however long the trace.
class TraceReader : public JsonHandler {
 public:
  explicit TraceReader(TraceSummary* summary) : summary_(summary), events_(summary) {}

  bool null_value() override {
    return scalar(JsonValue::Type::kNull, [&] { return capture_.null_value(); });
  }
  bool bool_value(bool flag) override {
    return scalar(JsonValue::Type::kBool, [&] { return capture_.bool_value(flag); });
  }
  bool number_value(const JsonNumber& number) override {
    return scalar(JsonValue::Type::kNumber, [&] { return capture_.number_value(number); });
  }
  bool string_value(std::string&& text) override {
    return scalar(JsonValue::Type::kString,
                  [&] { return capture_.string_value(std::move(text)); });
  }
  bool key(std::string&& name) override {
    if (capturing_ != Capture::kNone) return capture_.key(std::move(name));
    if (depth_ == 1 && !summary_->array_format) key_ = std::move(name);
    return true;
  }
  bool begin_object() override { return begin(JsonValue::Type::kObject); }
  bool begin_array() override { return begin(JsonValue::Type::kArray); }
  bool end_object() override { return end(true); }
  bool end_array() override { return end(false); }

  // After the read: whether the text was a trace.
  bool finish(std::string* error) {
    if (!saw_events_) {
      *error = "not a trace: a JSON object without a \"traceEvents\" array";
      return false;
    }
    events_.finish();
    return true;
  }

 private:
  enum class Capture : uint8_t { kNone, kEvent, kOtherData };

  // Where a value that starts now goes.
  enum class Place : uint8_t { kRoot, kEvent, kTraceEvents, kOtherData, kIgnored };
  Place place() const {
    if (depth_ == 0) return Place::kRoot;
    if (in_events_ && depth_ == events_depth_) return Place::kEvent;
    if (depth_ == 1 && !summary_->array_format) {
      if (key_ == "traceEvents") return Place::kTraceEvents;
      if (key_ == "otherData") return Place::kOtherData;
    }
    return Place::kIgnored;
  }

  template <typename Forward>
  bool scalar(JsonValue::Type type, Forward forward) {
    if (capturing_ != Capture::kNone) return forward() && captured();
    switch (place()) {
      case Place::kRoot:
        stop_reason = fmt::format("not a trace: the file holds {}, not an object with "
                                  "\"traceEvents\" or an array of events",
                                  JsonValue::type_name(type));
        return false;
      case Place::kEvent:
        stop_reason = fmt::format("not a trace: event {} (counting from 0) is {}, not an object",
                                  summary_->events, JsonValue::type_name(type));
        return false;
      case Place::kTraceEvents:
        stop_reason = fmt::format("not a trace: \"traceEvents\" is {}, not an array",
                                  JsonValue::type_name(type));
        return false;
      case Place::kOtherData:
      case Place::kIgnored:
        return true;
    }
    return true;
  }

  bool begin(JsonValue::Type type) {
    const bool object = type == JsonValue::Type::kObject;
    if (capturing_ != Capture::kNone) {
      return object ? capture_.begin_object() : capture_.begin_array();
    }
    switch (place()) {
      case Place::kRoot:
        summary_->array_format = !object;
        if (!object) start_events();
        break;
      case Place::kEvent:
        if (!object) return scalar(type, [] { return true; });
        capturing_ = Capture::kEvent;
        return capture_.begin_object();
      case Place::kTraceEvents:
        if (object) return scalar(type, [] { return true; });
        start_events();
        break;
      case Place::kOtherData:
        capturing_ = Capture::kOtherData;
        return object ? capture_.begin_object() : capture_.begin_array();
      case Place::kIgnored:
        break;
    }
    ++depth_;
    return true;
  }

  bool end(bool object) {
    if (capturing_ != Capture::kNone) {
      return (object ? capture_.end_object() : capture_.end_array()) && captured();
    }
    --depth_;
    if (in_events_ && depth_ + 1 == events_depth_) in_events_ = false;
    return true;
  }

  void start_events() {
    in_events_ = true;
    saw_events_ = true;
    events_depth_ = depth_ + 1;
  }

  // After a captured value's piece: hands on a finished value.
  bool captured() {
    if (!capture_.done()) return true;
    const JsonValue value = capture_.take();
    if (capturing_ == Capture::kEvent) {
      events_.add_event(value);
    } else {
      other_data(value);
    }
    capturing_ = Capture::kNone;
    return true;
  }

  void other_data(const JsonValue& value) {
    if (const JsonValue* producer = value.find("producer"); producer && producer->is_string()) {
      summary_->producer = producer->as_string();
    }
    uint64_t n = 0;
    if (const JsonValue* dropped = value.find("dropped_events");
        dropped && dropped->is_number() && dropped->number().get_uint64(&n)) {
      summary_->dropped_events = n;
    }
    if (const JsonValue* max = value.find("max_events");
        max && max->is_number() && max->number().get_uint64(&n)) {
      summary_->max_events = n;
    }
  }

  TraceSummary* summary_;
  Accumulator events_;
  JsonTreeBuilder capture_;
  Capture capturing_ = Capture::kNone;
  size_t depth_ = 0;         // containers open outside captured values
  size_t events_depth_ = 0;  // the depth inside the event array
  bool in_events_ = false;
  bool saw_events_ = false;
  std::string key_;  // the member of the root object being read
};

std::string milliseconds(int64_t ns) {
  return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6);
}
std::string microseconds(double ns) { return fmt::format("{:.3f}", ns / 1e3); }
double mean_ns(const TraceRow& row) {
  return row.count ? static_cast<double>(row.total_ns) / static_cast<double>(row.count) : 0.0;
}
double share(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}
// Bytes per nanosecond is gigabytes (1e9 bytes) per second.
std::string bandwidth(uint64_t bytes, int64_t ns) {
  if (ns <= 0) return "-";
  return fmt::format("{:.3f}", static_cast<double>(bytes) / static_cast<double>(ns));
}
std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// A table's text: a title line, column heads, the `top` longest rows and a
// line for the rest. Names come last, so long (C++) kernel names do not
// push the numbers out of line.
enum class Columns : uint8_t { kTimed, kTransfer, kApi };

std::string table_text(const TraceTable& table, std::string_view title, std::string_view what_one,
                       std::string_view what_many, Columns columns, size_t top,
                       std::string_view empty_note) {
  std::string out = fmt::format("{} ({}, {} ms):\n", title,
                                plural(table.count, what_one, what_many),
                                milliseconds(table.total_ns));
  switch (columns) {
    case Columns::kTimed:
      out += fmt::format("  {:>8} {:>12} {:>12} {:>7}  {}\n", "count", "total ms", "mean us",
                         "share", "name");
      break;
    case Columns::kTransfer:
      out += fmt::format("  {:>8} {:>14} {:>12} {:>10} {:>7}  {}\n", "count", "bytes",
                         "total ms", "GB/s", "share", "direction");
      break;
    case Columns::kApi:
      out += fmt::format("  {:>8} {:>12} {:>12}  {}\n", "count", "total ms", "mean us", "name");
      break;
  }
  if (table.rows.empty()) out += fmt::format("  ({})\n", empty_note);
  const size_t shown = top == 0 ? table.rows.size() : std::min(top, table.rows.size());
  for (size_t i = 0; i < shown; ++i) {
    const TraceRow& row = table.rows[i];
    const std::string percent = fmt::format("{:.1f}%", share(row.total_ns, table.total_ns));
    switch (columns) {
      case Columns::kTimed:
        out += fmt::format("  {:>8} {:>12} {:>12} {:>7}  {}\n", row.count,
                           milliseconds(row.total_ns), microseconds(mean_ns(row)), percent,
                           row.name);
        break;
      case Columns::kTransfer:
        out += fmt::format("  {:>8} {:>14} {:>12} {:>10} {:>7}  {}\n", row.count, row.bytes,
                           milliseconds(row.total_ns), bandwidth(row.bytes, row.total_ns),
                           percent, row.name);
        break;
      case Columns::kApi:
        out += fmt::format("  {:>8} {:>12} {:>12}  {}\n", row.count, milliseconds(row.total_ns),
                           microseconds(mean_ns(row)), row.name);
        break;
    }
  }
  if (shown < table.rows.size()) {
    uint64_t count = 0;
    int64_t ns = 0;
    for (size_t i = shown; i < table.rows.size(); ++i) {
      count += table.rows[i].count;
      ns += table.rows[i].total_ns;
    }
    out += fmt::format("  ... {} more ({}, {} ms, {:.1f}%)\n", table.rows.size() - shown,
                       plural(count, what_one, what_many), milliseconds(ns),
                       share(ns, table.total_ns));
  }
  return out;
}

// The notes both forms end with: what makes the totals less than certain.
std::vector<std::string> notes(const TraceSummary& s) {
  std::vector<std::string> out;
  if (s.kernels.rows.empty() && s.transfers.rows.empty() && s.functions.rows.empty() &&
      s.api_calls.rows.empty()) {
    out.push_back("the trace holds no kernel, copy, fill, function or API slices");
  }
  if (s.dropped_events.value_or(0) > 0) {
    out.push_back(fmt::format("{} events were dropped at the trace's limit{}: the totals miss "
                              "what they held",
                              *s.dropped_events,
                              s.max_events ? fmt::format(" of {} events", *s.max_events) : ""));
  }
  if (s.array_left_open) out.push_back("the event array is not closed (a cut-off trace?)");
  if (s.unusable) {
    out.push_back(fmt::format("{} ignored: no usable \"ts\" or \"dur\"",
                              plural(s.unusable, "slice", "slices")));
  }
  if (s.unmatched_ends) {
    out.push_back(fmt::format("{} ignored: no \"B\" open on the thread",
                              plural(s.unmatched_ends, "\"E\" event", "\"E\" events")));
  }
  if (s.unclosed_begins) {
    out.push_back(fmt::format("{} ignored: never ended",
                              plural(s.unclosed_begins, "\"B\" event", "\"B\" events")));
  }
  return out;
}

int64_t span_ns(const TraceSummary& s) { return s.first_ns ? s.last_ns - *s.first_ns : 0; }

void table_json(JsonWriter* w, std::string_view name, const TraceTable& table, size_t top,
                bool transfers) {
  w->key(name);
  w->begin_object();
  w->member("count", table.count);
  w->member("total_ns", table.total_ns);
  if (transfers) w->member("bytes", table.bytes);
  w->member("rows", static_cast<uint64_t>(table.rows.size()));
  w->key("top");
  w->begin_array();
  const size_t shown = top == 0 ? table.rows.size() : std::min(top, table.rows.size());
  for (size_t i = 0; i < shown; ++i) {
    const TraceRow& row = table.rows[i];
    w->begin_object();
    w->member(transfers ? "direction" : "name", row.name);
    w->member("count", row.count);
    w->member("total_ns", row.total_ns);
    w->member("mean_ns", static_cast<int64_t>(std::llround(mean_ns(row))));
    if (transfers) {
      w->member("bytes", row.bytes);
      if (row.total_ns > 0) {
        w->member("bytes_per_second",
                  static_cast<uint64_t>(std::llround(static_cast<double>(row.bytes) * 1e9 /
                                                     static_cast<double>(row.total_ns))));
      } else {
        w->key("bytes_per_second");
        w->null();
      }
    }
    // Parts per million of the table's time: the writer has integers only.
    w->member("share_ppm",
              static_cast<int64_t>(std::llround(share(row.total_ns, table.total_ns) * 1e4)));
    w->end_object();
  }
  w->end_array();
  w->end_object();
}

}  // namespace

bool summarize_trace(std::string_view text, TraceSummary* out, std::string* error) {
  *out = TraceSummary();
  TraceReader reader(out);
  JsonReadOptions options;
  options.allow_unclosed_array = true;
  const JsonReadResult result = json_read(text, &reader, options);
  if (!result.ok) {
    *error = result.error.to_string();
    return false;
  }
  // Only a bare array may be left open.
  out->array_left_open = result.array_left_open;
  return reader.finish(error);
}

std::string trace_summary_text(const TraceSummary& s, std::string_view path, size_t top) {
  std::string out = fmt::format("trace: {}\n", path);
  out += fmt::format("producer: {}\n", s.producer.empty() ? "(not named)" : s.producer);
  if (s.first_ns) {
    out += fmt::format("span: {} ms ({} us to {} us)\n", milliseconds(span_ns(s)),
                       microseconds(static_cast<double>(*s.first_ns)),
                       microseconds(static_cast<double>(s.last_ns)));
  } else {
    out += "span: none (no timed events)\n";
  }
  out += fmt::format("events: {}", s.events);
  if (s.dropped_events) out += fmt::format(" ({} dropped)", *s.dropped_events);
  out += "\n\n";
  out += table_text(s.kernels, "kernels", "dispatch", "dispatches", Columns::kTimed, top,
                    "no kernel slices");
  out += "\n";
  out += table_text(s.transfers, "copies and fills", "operation", "operations",
                    Columns::kTransfer, top, "no copy or fill slices");
  out += "\n";
  out += table_text(s.functions, "functions", "invocation", "invocations", Columns::kTimed, top,
                    "no function slices");
  out += "\n";
  out += table_text(s.api_calls, "API calls", "call", "calls", Columns::kApi, top,
                    "no API call slices");
  const std::vector<std::string> trailing = notes(s);
  for (const std::string& note : trailing) out += fmt::format("\nnote: {}", note);
  if (!trailing.empty()) out += "\n";
  return out;
}

std::string trace_summary_json(const TraceSummary& s, std::string_view path, size_t top) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.member("file", path);
  w.key("producer");
  if (s.producer.empty()) {
    w.null();
  } else {
    w.value(s.producer);
  }
  w.member("span_ns", span_ns(s));
  w.member("events", s.events);
  w.key("dropped_events");
  if (s.dropped_events) {
    w.value(*s.dropped_events);
  } else {
    w.null();
  }
  table_json(&w, "kernels", s.kernels, top, false);
  table_json(&w, "transfers", s.transfers, top, true);
  table_json(&w, "functions", s.functions, top, false);
  table_json(&w, "api_calls", s.api_calls, top, false);
  w.key("notes");
  w.begin_array();
  for (const std::string& note : notes(s)) w.value(note);
  w.end_array();
  w.end_object();
  out += "\n";
  return out;
}

}  // namespace axrt::tools
