// The running trace's state, shared by the recorder (recorder.cc) and the
// writer (writer.cc); nothing outside trace/ sees it.
#ifndef AXRT_TRACE_SESSION_H_
#define AXRT_TRACE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace axrt::trace {

// Records per buffer chunk; the event limit is taken a chunk at a time.
inline constexpr uint32_t kChunkRecords = 1024;

// One thread's events in one trace. Written only by its thread (while that
// thread's slot is busy), read by the writer after the trace stopped.
struct ThreadBuffer {
  std::vector<std::unique_ptr<Record[]>> chunks;
  uint32_t used = kChunkRecords;  // records in the last chunk
  uint64_t dropped = 0;
  uint32_t index = 0;  // the thread's track in the file, from 1
  uint64_t os_thread = 0;
  std::string thread_name;

  uint64_t count() const noexcept {
    return chunks.empty() ? 0 : (chunks.size() - 1) * uint64_t{kChunkRecords} + used;
  }
  const Record& at(uint64_t i) const noexcept {
    return chunks[i / kChunkRecords][i % kChunkRecords];
  }
};

struct TrackInfo {
  uint32_t id = 0;
  std::string process;
  std::string name;
};

struct Session {
  uint64_t id = 0;
  const void* owner = nullptr;
  std::string path;
  uint64_t max_events = 0;
  int64_t start_ns = 0;
  std::atomic<int64_t> budget{0};  // records left to hand out

  std::mutex mutex;  // guards buffers and strings
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  std::deque<std::string> strings;
};

// Writes `session`'s events (the trace stopped) with the tracks known at the
// stop to its path.
axrt_status_t write_trace(const Session& session, const std::vector<TrackInfo>& tracks,
                          StopResult* out);

}  // namespace axrt::trace

#endif  // AXRT_TRACE_SESSION_H_
