// The Chrome Trace Event JSON writer (docs/profiling.md, "The file"): one
// object with `traceEvents`, one event per line, timestamps in microseconds
// from the trace's start.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <unistd.h>

#include "base/json_writer.h"
#include "base/status.h"
#include "trace/session.h"

namespace axrt::trace {
namespace {

constexpr uint32_t kHostPid = 1;

const char* place_name(int64_t place) { return place == int64_t(Place::kHost) ? "H" : "D"; }

const char* op_name(OpKind op, int64_t src, int64_t dst) {
  switch (op) {
    case OpKind::kCopy: {
      static const char* const names[2][2] = {{"copy HtoH", "copy HtoD"},
                                              {"copy DtoH", "copy DtoD"}};
      return names[src == int64_t(Place::kDevice)][dst == int64_t(Place::kDevice)];
    }
    case OpKind::kFill: return "fill";
    case OpKind::kHostFunction: return "host function";
    case OpKind::kEventRecord: return "event record";
    case OpKind::kEventWait: return "event wait";
    case OpKind::kDeallocate: return "deallocate";
  }
  return "operation";
}

const char* op_category(OpKind op) {
  switch (op) {
    case OpKind::kCopy: return "copy";
    case OpKind::kFill: return "fill";
    case OpKind::kHostFunction: return "host";
    default: return "sync";
  }
}

class Output {
 public:
  Output(std::FILE* file, int64_t start_ns) : file_(file), start_ns_(start_ns) {
    text_.reserve(kFlushBytes + 4096);
  }

  // Starts the next event's line.
  void begin() {
    text_ += first_ ? "\n" : ",\n";
    first_ = false;
  }
  void end() {
    if (text_.size() >= kFlushBytes) flush();
    ++events_;
  }
  void raw(std::string_view s) { text_ += s; }
  void string(std::string_view s) { JsonWriter::escape(s, &text_); }
  void number(int64_t v) { fmt::format_to(std::back_inserter(text_), "{}", v); }
  void number(uint64_t v) { fmt::format_to(std::back_inserter(text_), "{}", v); }
  // A trace-clock time as microseconds from the start, to the nanosecond.
  void time(int64_t ns) {
    const int64_t rel = std::max<int64_t>(0, ns - start_ns_);
    fmt::format_to(std::back_inserter(text_), "{}.{:03}", rel / 1000, rel % 1000);
  }
  void duration(int64_t begin, int64_t end) {
    const int64_t d = std::max<int64_t>(0, end - begin);
    fmt::format_to(std::back_inserter(text_), "{}.{:03}", d / 1000, d % 1000);
  }
  // `"name":"...","cat":"...","ph":"X","pid":P,"tid":T,"ts":..`
  void header(std::string_view name, std::string_view category, const char* phase, uint32_t pid,
              uint64_t tid, int64_t ts) {
    raw("{\"name\":");
    string(name);
    raw(",\"cat\":\"");
    raw(category);
    raw("\",\"ph\":\"");
    raw(phase);
    raw("\",\"pid\":");
    number(uint64_t{pid});
    raw(",\"tid\":");
    number(tid);
    raw(",\"ts\":");
    time(ts);
  }

  bool flush() {
    if (!text_.empty() && std::fwrite(text_.data(), 1, text_.size(), file_) != text_.size()) {
      failed_ = true;
    }
    bytes_ += text_.size();
    text_.clear();
    return !failed_;
  }

  uint64_t events() const { return events_; }
  uint64_t bytes() const { return bytes_; }
  bool failed() const { return failed_; }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;
  std::FILE* file_;
  int64_t start_ns_;
  std::string text_;
  bool first_ = true;
  uint64_t events_ = 0;
  uint64_t bytes_ = 0;
  bool failed_ = false;
};

struct Writer {
  const Session& session;
  Output& out;
  std::unordered_map<uint32_t, const TrackInfo*> tracks;
  std::map<std::string, uint32_t> pids;  // device process -> pid
  std::unordered_set<uint64_t> call_flows;   // started by a recorded API call
  std::unordered_set<uint64_t> op_flows;     // ended by a recorded operation
  std::unordered_set<uint64_t> flows_ended;  // written already (first operation wins)
  std::unordered_set<uint32_t> slice_tracks;  // tracks holding slices or instants
  int64_t last_ns = 0;

  uint32_t pid_of(uint32_t track) const {
    auto it = tracks.find(track);
    if (it == tracks.end()) return kHostPid;
    return pids.at(it->second->process);
  }

  // Where a record lies: its track, or the recording thread.
  void place(const ThreadBuffer& thread, uint32_t track, uint32_t* pid, uint64_t* tid) const {
    if (track == 0) {
      *pid = kHostPid;
      *tid = thread.index;
    } else {
      *pid = pid_of(track);
      *tid = 1000000u + track;
    }
  }

  void metadata() {
    auto name_event = [&](const char* what, uint32_t pid, uint64_t tid, std::string_view name) {
      out.begin();
      out.raw("{\"name\":\"");
      out.raw(what);
      out.raw("\",\"ph\":\"M\",\"pid\":");
      out.number(uint64_t{pid});
      out.raw(",\"tid\":");
      out.number(tid);
      out.raw(",\"args\":{\"name\":");
      out.string(name);
      out.raw("}}");
      out.end();
    };
    auto sort_event = [&](uint32_t pid, uint64_t index) {
      out.begin();
      out.raw("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":");
      out.number(uint64_t{pid});
      out.raw(",\"tid\":0,\"args\":{\"sort_index\":");
      out.number(index);
      out.raw("}}");
      out.end();
    };
    name_event("process_name", kHostPid, 0, fmt::format("host (pid {})", ::getpid()));
    sort_event(kHostPid, 0);
    for (const auto& [process, pid] : pids) {
      name_event("process_name", pid, 0, process);
      sort_event(pid, pid);
    }
    for (const auto& thread : session.buffers) {
      std::string name = thread->thread_name.empty() ? "thread" : thread->thread_name;
      name_event("thread_name", kHostPid, thread->index,
                 fmt::format("{} (tid {})", name, thread->os_thread));
    }
    for (const auto& [id, info] : tracks) {
      // Counter tracks are named by their events; unused tracks not at all.
      if (!slice_tracks.count(id)) continue;
      name_event("thread_name", pids.at(info->process), 1000000u + id, info->name);
    }
  }

  void flow_start(uint32_t pid, uint64_t tid, const Record& r) {
    out.begin();
    out.header("queue", "flow", "s", pid, tid, r.begin);
    out.raw(",\"id\":");
    out.number(r.flow);
    out.raw("}");
    out.end();
  }

  // The end of `r`'s flow, when an API call started it and no earlier
  // operation ended it.
  void flow_end(uint32_t pid, uint64_t tid, const Record& r) {
    if (!r.flow || !call_flows.count(r.flow) || !flows_ended.insert(r.flow).second) return;
    out.begin();
    out.header("queue", "flow", "f", pid, tid, r.begin);
    out.raw(",\"bp\":\"e\",\"id\":");
    out.number(r.flow);
    out.raw("}");
    out.end();
  }

  void slice(const char* name, const char* category, uint32_t pid, uint64_t tid,
             const Record& r) {
    out.header(name ? name : "?", category, "X", pid, tid, r.begin);
    out.raw(",\"dur\":");
    out.duration(r.begin, r.end);
  }

  void queued_args(const Record& r) {
    out.raw("\"queued\":");
    out.time(r.a[0]);
    out.raw(",\"queue_delay_us\":");
    out.duration(r.a[0], r.begin);
  }

  void write(const ThreadBuffer& thread, const Record& r) {
    uint32_t pid = kHostPid;
    uint64_t tid = 0;
    place(thread, r.track, &pid, &tid);
    switch (r.kind) {
      case Kind::kApiCall:
        out.begin();
        slice(r.name, "api", pid, tid, r);
        if (r.detail) {
          out.raw(",\"args\":{\"what\":");
          out.string(r.detail);
          out.raw("}");
        }
        out.raw("}");
        out.end();
        if (r.flow && op_flows.count(r.flow)) flow_start(pid, tid, r);
        return;
      case Kind::kCollective:
        out.begin();
        slice(r.name, "collective", pid, tid, r);
        out.raw(",\"args\":{\"group\":");
        out.string(r.detail ? r.detail : "?");
        out.raw(",\"rank\":");
        out.number(r.a[0]);
        out.raw(",\"bytes\":");
        out.number(r.a[1]);
        out.raw(",\"number\":");
        out.number(r.a[2]);
        out.raw(",\"wait_us\":");
        out.duration(0, r.a[3]);
        out.raw("}}");
        out.end();
        return;
      case Kind::kEngineStep:
        out.begin();
        slice("engine step", "serving", pid, tid, r);
        out.raw(",\"args\":{\"sequences\":");
        out.number(r.a[0]);
        out.raw(",\"prefill_tokens\":");
        out.number(r.a[1]);
        out.raw(",\"decode_tokens\":");
        out.number(r.a[2]);
        out.raw(",\"kv_blocks_in_use\":");
        out.number(r.a[3]);
        out.raw("}}");
        out.end();
        return;
      case Kind::kRangeBegin:
      case Kind::kRangeEnd:
        return;  // paired in write_ranges()
      case Kind::kOperation: {
        out.begin();
        slice(op_name(r.op, r.a[2], r.a[3]), op_category(r.op), pid, tid, r);
        out.raw(",\"args\":{");
        queued_args(r);
        if (r.op == OpKind::kCopy || r.op == OpKind::kFill) {
          out.raw(",\"bytes\":");
          out.number(r.a[1]);
        }
        if (r.op == OpKind::kCopy) {
          out.raw(",\"direction\":\"");
          out.raw(place_name(r.a[2]));
          out.raw("to");
          out.raw(place_name(r.a[3]));
          out.raw("\"");
        }
        out.raw("}}");
        out.end();
        flow_end(pid, tid, r);
        return;
      }
      case Kind::kFunction:
        out.begin();
        slice(r.name, "function", pid, tid, r);
        out.raw(",\"args\":{");
        queued_args(r);
        out.raw(",\"commands\":");
        out.number(r.a[1]);
        if (r.detail) {
          out.raw(",\"executable\":");
          out.string(r.detail);
        }
        out.raw("}}");
        out.end();
        flow_end(pid, tid, r);
        return;
      case Kind::kDispatch:
        out.begin();
        slice(r.name, "kernel", pid, tid, r);
        out.raw(",\"args\":{\"command\":");
        out.number(r.a[0]);
        out.raw(",\"workgroup_count\":[");
        out.number(r.a[1]);
        out.raw(",");
        out.number(r.a[2]);
        out.raw(",");
        out.number(r.a[3]);
        out.raw("],\"workgroup_size\":[");
        out.number(uint64_t{r.dims[0]});
        out.raw(",");
        out.number(uint64_t{r.dims[1]});
        out.raw(",");
        out.number(uint64_t{r.dims[2]});
        out.raw("]");
        if (r.detail && (!r.name || std::strcmp(r.detail, r.name) != 0)) {
          out.raw(",\"symbol\":");
          out.string(r.detail);
        }
        out.raw("}}");
        out.end();
        return;
      case Kind::kBatchCopy:
      case Kind::kBatchFill:
        out.begin();
        slice(r.kind == Kind::kBatchCopy ? "copy DtoD" : "fill",
              r.kind == Kind::kBatchCopy ? "copy" : "fill", pid, tid, r);
        out.raw(",\"args\":{\"command\":");
        out.number(r.a[0]);
        out.raw(",\"bytes\":");
        out.number(r.a[1]);
        if (r.kind == Kind::kBatchCopy) out.raw(",\"direction\":\"DtoD\"");
        out.raw("}}");
        out.end();
        return;
      case Kind::kCounter:
        out.begin();
        out.header(r.name ? r.name : "memory", "memory", "C", pid, 0, r.begin);
        out.raw(",\"args\":{\"bytes_in_use\":");
        out.number(r.a[0]);
        out.raw(",\"bytes_reserved\":");
        out.number(r.a[1]);
        out.raw("}}");
        out.end();
        out.begin();
        out.header(fmt::format("{} allocations", r.name ? r.name : "memory"), "memory", "C", pid,
                   0, r.begin);
        out.raw(",\"args\":{\"allocations\":");
        out.number(r.a[2]);
        out.raw("}}");
        out.end();
        return;
      case Kind::kInstant:
        out.begin();
        out.header(r.name ? r.name : "?", "failure", "i", pid, tid, r.begin);
        out.raw(",\"s\":\"t\"");
        if (r.detail) {
          out.raw(",\"args\":{\"object\":");
          out.string(r.detail);
          out.raw("}");
        }
        out.raw("}");
        out.end();
        return;
    }
  }

  // Ranges become slices: each end closes the thread's innermost open
  // range; an end with none open is dropped, a range still open at the
  // stop ends at the trace's last timestamp.
  void write_ranges(const ThreadBuffer& thread) {
    std::vector<const Record*> open;
    auto close = [&](const Record& begin, int64_t end, bool unterminated) {
      Record r = begin;
      r.end = end;
      out.begin();
      slice(begin.name, "range", kHostPid, thread.index, r);
      if (unterminated) out.raw(",\"args\":{\"unterminated\":true}");
      out.raw("}");
      out.end();
    };
    for (uint64_t i = 0; i < thread.count(); ++i) {
      const Record& r = thread.at(i);
      if (r.kind == Kind::kRangeBegin) {
        open.push_back(&r);
      } else if (r.kind == Kind::kRangeEnd && !open.empty()) {
        close(*open.back(), r.begin, false);
        open.pop_back();
      }
    }
    while (!open.empty()) {
      close(*open.back(), std::max(last_ns, open.back()->begin), true);
      open.pop_back();
    }
  }
};

}  // namespace

axrt_status_t write_trace(const Session& session, const std::vector<TrackInfo>& tracks,
                          StopResult* out) {
  std::FILE* file = std::fopen(session.path.c_str(), "wb");
  if (!file) {
    return make_status(AXRT_STATUS_CODE_NOT_FOUND, "cannot write trace file '{}': {}",
                       session.path, std::strerror(errno));
  }
  Output output(file, session.start_ns);
  Writer writer{session, output, {}, {}, {}, {}, {}, {}, session.start_ns};
  uint64_t dropped = 0;
  for (const auto& thread : session.buffers) {
    dropped += thread->dropped;
    for (uint64_t i = 0; i < thread->count(); ++i) {
      const Record& r = thread->at(i);
      writer.last_ns = std::max(writer.last_ns, r.end);
      if (r.track && r.kind != Kind::kCounter) writer.slice_tracks.insert(r.track);
      if (!r.flow) continue;
      if (r.kind == Kind::kApiCall) writer.call_flows.insert(r.flow);
      if (r.kind == Kind::kOperation || r.kind == Kind::kFunction) writer.op_flows.insert(r.flow);
    }
  }
  for (const TrackInfo& track : tracks) {
    writer.tracks.emplace(track.id, &track);
    writer.pids.emplace(track.process, 0);
  }
  uint32_t next_pid = kHostPid + 1;
  for (auto& [process, pid] : writer.pids) pid = next_pid++;

  output.raw("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"axrt ");
  output.raw(axrt_version_string());
  output.raw("\",\"max_events\":");
  output.number(session.max_events);
  output.raw(",\"dropped_events\":");
  output.number(dropped);
  output.raw("},\"traceEvents\":[");
  writer.metadata();
  for (const auto& thread : session.buffers) {
    for (uint64_t i = 0; i < thread->count(); ++i) writer.write(*thread, thread->at(i));
    writer.write_ranges(*thread);
  }
  output.raw("\n]}\n");
  output.flush();
  const bool closed = std::fclose(file) == 0;
  if (output.failed() || !closed) {
    return make_status(AXRT_STATUS_CODE_DATA_LOSS, "writing trace file '{}' failed: {}",
                       session.path, std::strerror(errno));
  }
  out->events = output.events();
  out->dropped = dropped;
  out->bytes = output.bytes();
  return nullptr;
}

}  // namespace axrt::trace
