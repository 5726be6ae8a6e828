// The recorder: per-thread buffers, the running session, tracks and names.
//
// Every thread that records owns a slot (created on its first record, freed
// when the thread exits) with a `busy` flag. emit() raises the flag, then
// reads the running session; stop() clears the session, then waits until no
// slot is busy, so once it returns no thread touches the session's buffers
// and the writer may read them while streams keep running.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sys/syscall.h>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/status.h"
#include "trace/session.h"

namespace axrt::trace {

#if AXRT_TRACING
std::atomic<bool> g_active{false};
#endif

namespace {

constexpr uint64_t kDefaultMaxEvents = 1u << 20;
constexpr size_t kMaxRangeName = 255;

std::atomic<Session*> g_session{nullptr};
std::atomic<uint64_t> g_running_id{0};  // g_session's id, readable without it
std::atomic<uint64_t> g_session_ids{0};
std::mutex g_control;  // serialises start and stop

struct ThreadSlot {
  std::atomic<bool> busy{false};
  uint64_t session_id = 0;
  ThreadBuffer* buffer = nullptr;
  uint64_t flow_base = 0;  // unique per slot, in the high bits
  uint64_t flows = 0;
  uint64_t current_flow = 0;
};

struct Slots {
  std::mutex mutex;
  std::vector<ThreadSlot*> live;
  uint64_t created = 0;
};

Slots& slots() {
  static Slots* s = new Slots();  // never destroyed: threads outlive statics
  return *s;
}

struct SlotHolder {
  ThreadSlot* slot = nullptr;
  bool gone = false;
  ~SlotHolder() {
    gone = true;
    if (!slot) return;
    Slots& all = slots();
    std::lock_guard<std::mutex> lock(all.mutex);
    std::erase(all.live, slot);
    delete slot;
    slot = nullptr;
  }
};

thread_local SlotHolder t_slot;

ThreadSlot* my_slot() noexcept {
  if (t_slot.slot) return t_slot.slot;
  if (t_slot.gone) return nullptr;
  try {
    auto slot = std::make_unique<ThreadSlot>();
    Slots& all = slots();
    std::lock_guard<std::mutex> lock(all.mutex);
    slot->flow_base = ++all.created << 32;
    all.live.push_back(slot.get());
    t_slot.slot = slot.release();
    return t_slot.slot;
  } catch (...) {
    return nullptr;
  }
}

std::string current_thread_name() {
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) name[0] = '\0';
  return name;
}

// The slot's buffer in `session`, made on the thread's first record in it.
ThreadBuffer* buffer_for(ThreadSlot* slot, Session* session) noexcept {
  if (slot->session_id == session->id) return slot->buffer;
  try {
    auto buffer = std::make_unique<ThreadBuffer>();
    buffer->os_thread = static_cast<uint64_t>(syscall(SYS_gettid));
    buffer->thread_name = current_thread_name();
    std::lock_guard<std::mutex> lock(session->mutex);
    buffer->index = static_cast<uint32_t>(session->buffers.size() + 1);
    session->buffers.push_back(std::move(buffer));
    slot->buffer = session->buffers.back().get();
    slot->session_id = session->id;
    return slot->buffer;
  } catch (...) {
    return nullptr;
  }
}

// Marks the slot busy and returns the running session, or nullptr (and the
// slot idle) when none runs.
Session* enter(ThreadSlot* slot) noexcept {
  slot->busy.store(true, std::memory_order_seq_cst);
  Session* session = g_session.load(std::memory_order_seq_cst);
  if (!session) slot->busy.store(false, std::memory_order_release);
  return session;
}

void leave(ThreadSlot* slot) noexcept { slot->busy.store(false, std::memory_order_release); }

struct TrackRegistry {
  std::mutex mutex;
  std::unordered_map<uint32_t, TrackInfo> tracks;
  std::vector<uint32_t> retired;  // while a trace runs
  uint32_t next = 1;
};

TrackRegistry& registry() {
  static TrackRegistry* r = new TrackRegistry();
  return *r;
}

struct InternTable {
  std::mutex mutex;
  std::unordered_set<std::string> strings;
};

InternTable& interned() {
  static InternTable* t = new InternTable();
  return *t;
}

// A copy of `text` owned by `session` (its mutex held by the caller).
const char* own_string(Session* session, std::string_view text) {
  session->strings.emplace_back(text);
  return session->strings.back().c_str();
}

}  // namespace

int64_t now() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t session() noexcept { return g_running_id.load(std::memory_order_relaxed); }

void emit(const Record& record) noexcept {
  ThreadSlot* slot = my_slot();
  if (!slot) return;
  Session* session = enter(slot);
  if (!session) return;
  if (record.session != 0 && record.session != session->id) {
    leave(slot);
    return;
  }
  ThreadBuffer* buffer = buffer_for(slot, session);
  if (buffer) {
    if (buffer->used == kChunkRecords) {
      if (session->budget.fetch_sub(kChunkRecords, std::memory_order_relaxed) <= 0) {
        ++buffer->dropped;
        leave(slot);
        return;
      }
      try {
        buffer->chunks.emplace_back(new Record[kChunkRecords]);
        buffer->used = 0;
      } catch (...) {
        ++buffer->dropped;
        leave(slot);
        return;
      }
    }
    buffer->chunks.back()[buffer->used++] = record;
  }
  leave(slot);
}

const char* intern(std::string_view text) {
  InternTable& table = interned();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.strings.emplace(text).first->c_str();
}

const char* intern_for_trace(std::string_view text) noexcept {
  ThreadSlot* slot = my_slot();
  if (!slot) return nullptr;
  Session* session = enter(slot);
  if (!session) return nullptr;
  const char* result = nullptr;
  ThreadBuffer* buffer = buffer_for(slot, session);
  // The string of an event past the limit would never be written: the
  // event is counted as dropped instead.
  if (buffer && buffer->used == kChunkRecords &&
      session->budget.load(std::memory_order_relaxed) <= 0) {
    ++buffer->dropped;
  } else {
    try {
      std::lock_guard<std::mutex> lock(session->mutex);
      result = own_string(session, text);
    } catch (...) {
      if (buffer) ++buffer->dropped;
    }
  }
  leave(slot);
  return result;
}

uint32_t register_track(std::string_view process, std::string_view name) noexcept {
  try {
    TrackRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const uint32_t id = r.next++;
    r.tracks.emplace(id, TrackInfo{id, std::string(process), std::string(name)});
    return id;
  } catch (...) {
    return 0;
  }
}

void rename_track(uint32_t track, std::string_view name) noexcept {
  try {
    TrackRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.tracks.find(track);
    if (it != r.tracks.end()) it->second.name = std::string(name);
  } catch (...) {
  }
}

void retire_track(uint32_t track) noexcept {
  if (track == 0) return;
  TrackRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // A running trace may hold operations of the track still to be written.
  if (g_session.load(std::memory_order_acquire)) {
    try {
      r.retired.push_back(track);
      return;
    } catch (...) {
      // Forgetting the name now only leaves the track unnamed in the file.
    }
  }
  r.tracks.erase(track);
}

uint64_t current_flow() noexcept {
  ThreadSlot* slot = t_slot.slot;
  return slot ? slot->current_flow : 0;
}

void ApiScope::start(const char* name, const char* detail) noexcept {
  ThreadSlot* slot = my_slot();
  if (!slot) return;
  name_ = name;
  detail_ = detail;
  flow_ = 0;
  begin_ = now();
  outer_flow_ = slot->current_flow;
  // Work queued by a call nested in another (a function call allocating its
  // outputs) belongs to the outer call's flow.
  if (outer_flow_ == 0) {
    flow_ = slot->flow_base | ++slot->flows;
    slot->current_flow = flow_;
  }
}

void ApiScope::finish() noexcept {
  if (ThreadSlot* slot = t_slot.slot) slot->current_flow = outer_flow_;
  Record record;
  record.kind = Kind::kApiCall;
  record.begin = begin_;
  record.end = now();
  record.name = name_;
  record.detail = detail_;
  record.flow = flow_;
  emit(record);
}

void instant(uint32_t track, std::string_view what, std::string_view object) noexcept {
  if (!active()) return;
  Record record;
  record.kind = Kind::kInstant;
  record.begin = record.end = now();
  record.track = track;
  record.name = intern_for_trace(what);
  record.detail = intern_for_trace(object);
  if (record.name) emit(record);
}

void range_begin(std::string_view name) noexcept {
  if (!active()) return;
  Record record;
  record.kind = Kind::kRangeBegin;
  record.begin = record.end = now();
  record.name = intern_for_trace(name.substr(0, kMaxRangeName));
  if (record.name) emit(record);
}

void range_end() noexcept {
  if (!active()) return;
  Record record;
  record.kind = Kind::kRangeEnd;
  record.begin = record.end = now();
  emit(record);
}

axrt_status_t start(const void* owner, std::string path, uint64_t max_events) {
  std::lock_guard<std::mutex> control(g_control);
  if (Session* running = g_session.load(std::memory_order_acquire)) {
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "a trace is already running (writing '{}'); stop it first",
                       running->path);
  }
  // Create the file now, so that a path that cannot be written is refused
  // before anything is recorded.
  if (std::FILE* file = std::fopen(path.c_str(), "wb")) {
    std::fclose(file);
  } else {
    const int error = errno;
    return make_status(error == EACCES || error == EPERM || error == EROFS
                           ? AXRT_STATUS_CODE_PERMISSION_DENIED
                           : AXRT_STATUS_CODE_NOT_FOUND,
                       "cannot create trace file '{}': {}", path, std::strerror(error));
  }
  auto session = std::make_unique<Session>();
  session->id = ++g_session_ids;
  session->owner = owner;
  session->path = std::move(path);
  session->max_events = max_events ? max_events : kDefaultMaxEvents;
  session->budget.store(static_cast<int64_t>(session->max_events));
  session->start_ns = now();
  g_running_id.store(session->id, std::memory_order_relaxed);
  g_session.store(session.release(), std::memory_order_seq_cst);
#if AXRT_TRACING
  g_active.store(true, std::memory_order_release);
#endif
  return nullptr;
}

bool owns(const void* owner) noexcept {
  Session* session = g_session.load(std::memory_order_acquire);
  return session && session->owner == owner;
}

axrt_status_t stop(const void* owner, StopResult* out) {
  std::unique_lock<std::mutex> control(g_control);
  Session* running = g_session.load(std::memory_order_acquire);
  if (!running || running->owner != owner) {
    if (!running) return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION, "no trace is running");
    return make_status(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                       "the running trace (writing '{}') was started by another instance",
                       running->path);
  }
#if AXRT_TRACING
  g_active.store(false, std::memory_order_release);
#endif
  g_session.store(nullptr, std::memory_order_seq_cst);
  g_running_id.store(0, std::memory_order_relaxed);
  // Wait until no thread is inside emit() with the session.
  {
    Slots& all = slots();
    std::lock_guard<std::mutex> lock(all.mutex);
    for (ThreadSlot* slot : all.live) {
      while (slot->busy.load(std::memory_order_seq_cst)) std::this_thread::yield();
    }
  }
  std::unique_ptr<Session> session(running);
  std::vector<TrackInfo> tracks;
  {
    TrackRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    try {
      tracks.reserve(r.tracks.size());
      for (const auto& [id, info] : r.tracks) tracks.push_back(info);
    } catch (...) {
      tracks.clear();  // the file then names no tracks; its events stay right
    }
    for (uint32_t id : r.retired) r.tracks.erase(id);
    r.retired.clear();
  }
  control.unlock();
  std::sort(tracks.begin(), tracks.end(),
            [](const TrackInfo& a, const TrackInfo& b) { return a.id < b.id; });
  StopResult result;
  axrt_status_t status = write_trace(*session, tracks, &result);
  if (out) *out = result;
  return status;
}

}  // namespace axrt::trace
