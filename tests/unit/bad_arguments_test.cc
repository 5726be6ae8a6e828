// Calls every public function with bad arguments: NULL handles, NULL out- and
// input pointers, bad struct sizes and extension chains, out-of-range and
// overflowing ranges, handles of the wrong kind, released handles and events
// that were never recorded. Each call must fail with the right code and a
// message naming the cause, leave its out-parameters alone and never abort.
//
// The last test parses the public headers and fails when an AXRT_API function
// has no case here, so a new function cannot ship without one.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "axrt/dlpack.h"
#include "tests/unit/copy_executable.h"

#ifndef AXRT_PUBLIC_HEADER_DIR
#error "AXRT_PUBLIC_HEADER_DIR must name include/axrt (set by tests/unit/CMakeLists.txt)"
#endif

namespace {

// ---------------------------------------------------------------------------
// The list of walked functions
// ---------------------------------------------------------------------------

std::set<std::string>& Walked() {
  static std::set<std::string> names;
  return names;
}

// Taking the function's address makes a misspelt or removed name a compile
// error rather than a silently stale entry.
template <typename Function>
bool RegisterWalk(const char* name, Function*) {
  Walked().insert(name);
  return true;
}

#define AXRT_WALK_CAT2(a, b) a##b
#define AXRT_WALK_CAT(a, b) AXRT_WALK_CAT2(a, b)
// Declares the bad-argument case of `function`.
#define BAD_ARGUMENTS(function)                                          \
  [[maybe_unused]] const bool AXRT_WALK_CAT(kWalked, __LINE__) =          \
      RegisterWalk(#function, &function);                                \
  TEST_CASE_METHOD(World, #function " rejects bad arguments",             \
                   "[bad_arguments]")

// ---------------------------------------------------------------------------
// Status checks
// ---------------------------------------------------------------------------

struct StatusFree {
  void operator()(axrt_status_t status) const { axrt_status_free(status); }
};
using Status = std::unique_ptr<axrt_status_s, StatusFree>;

std::string Describe(axrt_status_t status) {
  if (status == nullptr) return "OK";
  return std::string(axrt_status_code_name(axrt_status_code(status))) + ": " +
         axrt_status_message(status);
}

bool ContainsNoCase(std::string_view haystack, std::string_view needle) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  return needle.empty() ||
         std::search(haystack.begin(), haystack.end(), needle.begin(),
                     needle.end(), [&](char a, char b) {
                       return lower(a) == lower(b);
                     }) != haystack.end();
}

struct Match {
  bool matched = false;
  std::string explanation;
};

// Frees `status`.
Match MatchStatus(axrt_status_t raw,
                  std::initializer_list<axrt_status_code_t> codes,
                  std::string_view needle) {
  Status status(raw);
  Match match;
  std::string expected;
  for (axrt_status_code_t code : codes) {
    if (!expected.empty()) expected += " or ";
    expected += axrt_status_code_name(code);
  }
  match.explanation = "got " + Describe(status.get()) + "; expected " +
                      expected + " mentioning '" + std::string(needle) + "'";
  if (status == nullptr) return match;
  const axrt_status_code_t code = axrt_status_code(status.get());
  match.matched = std::find(codes.begin(), codes.end(), code) != codes.end() &&
                  ContainsNoCase(axrt_status_message(status.get()), needle);
  return match;
}

#define EXPECT_ERROR_ANY(expr, needle, ...)                          \
  do {                                                               \
    Match walk_match_ = MatchStatus((expr), {__VA_ARGS__}, (needle)); \
    INFO(#expr << ": " << walk_match_.explanation);                  \
    CHECK(walk_match_.matched);                                      \
  } while (false)
#define EXPECT_ERROR(expr, code, needle) EXPECT_ERROR_ANY(expr, needle, code)
#define EXPECT_INVALID(expr, needle) \
  EXPECT_ERROR(expr, AXRT_STATUS_CODE_INVALID_ARGUMENT, needle)
// The umbrella header allows either code for a released handle.
#define EXPECT_RELEASED(expr, needle)                                  \
  EXPECT_ERROR_ANY(expr, needle, AXRT_STATUS_CODE_FAILED_PRECONDITION, \
                   AXRT_STATUS_CODE_INVALID_ARGUMENT)
#define EXPECT_OK(expr)                                         \
  do {                                                          \
    Status walk_status_(expr);                                  \
    INFO(#expr << " returned " << Describe(walk_status_.get())); \
    REQUIRE(walk_status_ == nullptr);                           \
  } while (false)

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

// A value no library would write; out-parameters must still hold it after a
// failed call.
template <typename Handle>
Handle Sentinel() {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(0x5E47000D));
}

constexpr axrt_extension_type_t kUnknownExtension = 23130;
constexpr uint8_t kFill = 0xAB;

// A query struct whose bytes after the header hold kFill, so that a write
// on failure shows.
template <typename T>
struct Guarded {
  alignas(T) unsigned char bytes[sizeof(T) + 32];
  explicit Guarded(size_t struct_size = sizeof(T), const void* next = nullptr) {
    std::memset(bytes, kFill, sizeof(bytes));
    std::memcpy(bytes, &struct_size, sizeof(struct_size));
    std::memcpy(bytes + sizeof(size_t), &next, sizeof(next));
  }
  T* get() { return reinterpret_cast<T*>(bytes); }
  bool untouched() const {
    return std::all_of(bytes + sizeof(size_t) + sizeof(void*),
                       bytes + sizeof(bytes),
                       [](unsigned char b) { return b == kFill; });
  }
};

// Options from a newer header: `tail` bytes the library does not know.
template <typename T>
struct Newer {
  T known;
  unsigned char tail[16];
  explicit Newer(const T& init, unsigned char tail_byte) : known(init) {
    std::memset(tail, 0, sizeof(tail));
    tail[7] = tail_byte;
    known.struct_size = sizeof(Newer);
  }
};

class World {
 public:
  World() {
    EXPECT_OK(axrt_instance_create(nullptr, &instance));
    EXPECT_OK(axrt_instance_find_device(instance, "cpu:0", &device));
    EXPECT_OK(axrt_stream_create(device, nullptr, &stream));
    EXPECT_OK(axrt_buffer_allocate(device, kBufferSize, nullptr, &buffer));
    EXPECT_OK(axrt_buffer_create_view(buffer, 256, 256, &view));
    EXPECT_OK(axrt_event_create(device, nullptr, &never_recorded));
    EXPECT_OK(axrt_event_create(device, nullptr, &recorded));
    EXPECT_OK(axrt_stream_record_event(stream, recorded));
    EXPECT_OK(axrt_stream_synchronize(stream));
    EXPECT_OK(axrt_device_query_properties(device, &properties));
  }
  ~World() {
    axrt_event_release(recorded);
    axrt_event_release(never_recorded);
    axrt_buffer_release(view);
    axrt_buffer_release(buffer);
    axrt_stream_release(stream);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Handles whose objects are gone.
  axrt_instance_t StaleInstance() const {
    axrt_instance_t stale = nullptr;
    EXPECT_OK(axrt_instance_create(nullptr, &stale));
    axrt_instance_release(stale);
    return stale;
  }
  axrt_device_t StaleDevice() const {
    // A device lives as long as its instance.
    axrt_instance_t owner = nullptr;
    axrt_device_t stale = nullptr;
    EXPECT_OK(axrt_instance_create(nullptr, &owner));
    EXPECT_OK(axrt_instance_get_device(owner, 0, &stale));
    axrt_instance_release(owner);
    axrt_device_release(stale);
    return stale;
  }
  axrt_buffer_t StaleBuffer() const {
    axrt_buffer_t stale = nullptr;
    EXPECT_OK(axrt_buffer_allocate(device, 64, nullptr, &stale));
    axrt_buffer_release(stale);
    return stale;
  }
  axrt_stream_t StaleStream() const {
    axrt_stream_t stale = nullptr;
    EXPECT_OK(axrt_stream_create(device, nullptr, &stale));
    axrt_stream_release(stale);
    return stale;
  }
  axrt_event_t StaleEvent() const {
    axrt_event_t stale = nullptr;
    EXPECT_OK(axrt_event_create(device, nullptr, &stale));
    axrt_event_release(stale);
    return stale;
  }

  // Handles of one kind passed as another.
  template <typename To, typename From>
  static To As(From handle) {
    return reinterpret_cast<To>(handle);
  }

  // Bad argument errors enqueue nothing: the stream is still healthy and
  // the buffer's bytes are what they were.
  void ExpectHealthy() const {
    Status status(axrt_stream_synchronize(stream));
    INFO("stream after the bad calls: " << Describe(status.get()));
    CHECK(status == nullptr);
  }

  // The full set of errors every options-taking function must give.
  template <typename Options, typename Call>
  void WalkOptions(const Options& init, bool takes_label, Call call) const {
    Options small = init;
    small.struct_size = 0;
    EXPECT_INVALID(call(&small), "struct_size");
    small.struct_size = sizeof(size_t);
    EXPECT_INVALID(call(&small), "struct_size");

    axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t),
                                       nullptr, kUnknownExtension};
    Options with_unknown = init;
    with_unknown.next = &unknown;
    EXPECT_ERROR(call(&with_unknown), AXRT_STATUS_CODE_UNIMPLEMENTED, "23130");

    Newer<Options> nonzero_tail(init, 1);
    EXPECT_ERROR_ANY(call(&nonzero_tail.known), "struct_size",
                     AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     AXRT_STATUS_CODE_UNIMPLEMENTED);

    axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("walk");
    Options with_label = init;
    with_label.next = &label;
    if (!takes_label) {
      EXPECT_ERROR(call(&with_label), AXRT_STATUS_CODE_UNIMPLEMENTED,
                   "extension");
      return;
    }
    axrt_debug_label_t short_label = AXRT_DEBUG_LABEL_INIT("short");
    short_label.struct_size = 0;
    with_label.next = &short_label;
    EXPECT_INVALID(call(&with_label), "struct_size");
    axrt_debug_label_t a = AXRT_DEBUG_LABEL_INIT("a");
    axrt_debug_label_t b = AXRT_DEBUG_LABEL_INIT("b");
    a.next = &b;
    b.next = &a;
    with_label.next = &a;
    EXPECT_INVALID(call(&with_label), "chain");
  }

  // The errors of a query struct argument called `name`.
  template <typename T, typename Call>
  void WalkQueryStruct(const char* name, Call call) const {
    EXPECT_INVALID(call(static_cast<T*>(nullptr)), name);
    for (size_t size : {size_t{0}, sizeof(size_t)}) {
      Guarded<T> small(size);
      EXPECT_INVALID(call(small.get()), "struct_size");
      CHECK(small.untouched());
    }
    axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t),
                                       nullptr, kUnknownExtension};
    Guarded<T> with_unknown(sizeof(T), &unknown);
    EXPECT_ERROR(call(with_unknown.get()), AXRT_STATUS_CODE_UNIMPLEMENTED,
                 "23130");
    CHECK(with_unknown.untouched());
  }

  static constexpr uint64_t kBufferSize = 1024;
  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  axrt_stream_t stream = nullptr;
  axrt_buffer_t buffer = nullptr;
  axrt_buffer_t view = nullptr;  // [256, 512) of `buffer`
  axrt_event_t never_recorded = nullptr;
  axrt_event_t recorded = nullptr;
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
};

axrt_status_t NoopHostFunc(void* user_data, axrt_status_t) {
  if (user_data != nullptr) *static_cast<int*>(user_data) += 1;
  return nullptr;
}

// ---------------------------------------------------------------------------
// base.h
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_version) {
  // Takes nothing; it can only disagree with the headers.
  CHECK(axrt_version() / 1000000u == AXRT_VERSION_MAJOR);
}

BAD_ARGUMENTS(axrt_version_string) {
  REQUIRE(axrt_version_string() != nullptr);
  CHECK(std::string(axrt_version_string()).find('.') != std::string::npos);
}

BAD_ARGUMENTS(axrt_status_create) {
  CHECK(axrt_status_create(AXRT_STATUS_CODE_OK, "ignored") == nullptr);
  Status null_message(axrt_status_create(AXRT_STATUS_CODE_INTERNAL, nullptr));
  REQUIRE(null_message != nullptr);
  CHECK(std::string(axrt_status_message(null_message.get())).empty());
}

BAD_ARGUMENTS(axrt_status_code) {
  CHECK(axrt_status_code(nullptr) == AXRT_STATUS_CODE_OK);
}

BAD_ARGUMENTS(axrt_status_message) {
  REQUIRE(axrt_status_message(nullptr) != nullptr);
  CHECK(std::string(axrt_status_message(nullptr)) == "OK");
}

BAD_ARGUMENTS(axrt_status_free) {
  axrt_status_free(nullptr);
  SUCCEED("freeing NULL is a no-op");
}

BAD_ARGUMENTS(axrt_status_code_name) {
  for (axrt_status_code_t code : {18u, 4096u, 0xffffffffu}) {
    REQUIRE(axrt_status_code_name(code) != nullptr);
    CHECK(std::string(axrt_status_code_name(code)) == "UNRECOGNIZED");
  }
}

// ---------------------------------------------------------------------------
// device.h: instance
// ---------------------------------------------------------------------------


// _retain and _release cannot report errors: NULL, released handles and
// handles of another kind must be ignored without harm. Releasing the wrong
// kind three times would destroy the object behind it if it were not
// ignored, which ExpectAllAlive() then notices.
template <typename Handle>
void WalkRetainRelease(const World& world, void (*function)(Handle),
                       Handle stale, Handle wrong_kind) {
  function(nullptr);
  for (int i = 0; i < 3; ++i) function(stale);
  for (int i = 0; i < 3; ++i) function(wrong_kind);
  EXPECT_OK([&] {
    size_t count = 0;
    return axrt_instance_driver_count(world.instance, &count);
  }());
  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  EXPECT_OK(axrt_device_query_properties(world.device, &properties));
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  EXPECT_OK(axrt_buffer_query_info(world.buffer, &info));
  EXPECT_OK(axrt_buffer_query_info(world.view, &info));
  bool flag = false;
  EXPECT_OK(axrt_stream_query(world.stream, &flag));
  EXPECT_OK(axrt_event_query(world.recorded, &flag));
  CHECK(flag);
}

BAD_ARGUMENTS(axrt_instance_create) {
  EXPECT_INVALID(axrt_instance_create(nullptr, nullptr), "out_instance");
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  EXPECT_INVALID(axrt_instance_create(&options, nullptr), "out_instance");

  axrt_instance_t out = Sentinel<axrt_instance_t>();
  options.drivers = "cpu,walk-no-such-driver";
  EXPECT_ERROR(axrt_instance_create(&options, &out), AXRT_STATUS_CODE_NOT_FOUND,
               "walk-no-such-driver");
  const axrt_instance_options_t init = AXRT_INSTANCE_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/false,
              [&](const axrt_instance_options_t* o) {
                return axrt_instance_create(o, &out);
              });
  CHECK(out == Sentinel<axrt_instance_t>());
}

BAD_ARGUMENTS(axrt_instance_retain) {
  WalkRetainRelease(*this, &axrt_instance_retain, StaleInstance(),
                    As<axrt_instance_t>(stream));
}

BAD_ARGUMENTS(axrt_instance_release) {
  WalkRetainRelease(*this, &axrt_instance_release, StaleInstance(),
                    As<axrt_instance_t>(stream));
}

BAD_ARGUMENTS(axrt_instance_driver_count) {
  size_t count = 777;
  EXPECT_INVALID(axrt_instance_driver_count(nullptr, &count), "instance");
  EXPECT_INVALID(axrt_instance_driver_count(instance, nullptr), "out_count");
  EXPECT_INVALID(axrt_instance_driver_count(As<axrt_instance_t>(device), &count),
                 "device");
  EXPECT_RELEASED(axrt_instance_driver_count(StaleInstance(), &count),
                  "instance");
  CHECK(count == 777);
}

BAD_ARGUMENTS(axrt_instance_query_driver_info) {
  Guarded<axrt_driver_info_t> info;
  EXPECT_INVALID(axrt_instance_query_driver_info(nullptr, 0, info.get()),
                 "instance");
  EXPECT_INVALID(
      axrt_instance_query_driver_info(As<axrt_instance_t>(buffer), 0, info.get()),
      "buffer");
  EXPECT_RELEASED(axrt_instance_query_driver_info(StaleInstance(), 0, info.get()),
                  "instance");
  size_t count = 0;
  EXPECT_OK(axrt_instance_driver_count(instance, &count));
  EXPECT_ERROR(axrt_instance_query_driver_info(instance, count, info.get()),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  EXPECT_ERROR(axrt_instance_query_driver_info(instance, SIZE_MAX, info.get()),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  CHECK(info.untouched());
  WalkQueryStruct<axrt_driver_info_t>("out_info", [&](axrt_driver_info_t* out) {
    return axrt_instance_query_driver_info(instance, 0, out);
  });
}

BAD_ARGUMENTS(axrt_instance_device_count) {
  size_t count = 777;
  EXPECT_INVALID(axrt_instance_device_count(nullptr, &count), "instance");
  EXPECT_INVALID(axrt_instance_device_count(instance, nullptr), "out_count");
  EXPECT_INVALID(axrt_instance_device_count(As<axrt_instance_t>(recorded), &count),
                 "event");
  EXPECT_RELEASED(axrt_instance_device_count(StaleInstance(), &count),
                  "instance");
  CHECK(count == 777);
}

BAD_ARGUMENTS(axrt_instance_get_device) {
  axrt_device_t out = Sentinel<axrt_device_t>();
  EXPECT_INVALID(axrt_instance_get_device(nullptr, 0, &out), "instance");
  EXPECT_INVALID(axrt_instance_get_device(instance, 0, nullptr), "out_device");
  EXPECT_INVALID(axrt_instance_get_device(As<axrt_instance_t>(stream), 0, &out),
                 "stream");
  EXPECT_RELEASED(axrt_instance_get_device(StaleInstance(), 0, &out),
                  "instance");
  size_t count = 0;
  EXPECT_OK(axrt_instance_device_count(instance, &count));
  EXPECT_ERROR(axrt_instance_get_device(instance, count, &out),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  EXPECT_ERROR(axrt_instance_get_device(instance, SIZE_MAX, &out),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  CHECK(out == Sentinel<axrt_device_t>());
}

BAD_ARGUMENTS(axrt_instance_find_device) {
  axrt_device_t out = Sentinel<axrt_device_t>();
  EXPECT_INVALID(axrt_instance_find_device(nullptr, "cpu:0", &out), "instance");
  EXPECT_INVALID(axrt_instance_find_device(instance, "cpu:0", nullptr),
                 "out_device");
  EXPECT_INVALID(axrt_instance_find_device(As<axrt_instance_t>(view), "cpu:0",
                                           &out),
                 "buffer");
  EXPECT_RELEASED(axrt_instance_find_device(StaleInstance(), "cpu:0", &out),
                  "instance");
  EXPECT_ERROR(axrt_instance_find_device(instance, "walk:42", &out),
               AXRT_STATUS_CODE_NOT_FOUND, "walk:42");
  CHECK(out == Sentinel<axrt_device_t>());
}

// ---------------------------------------------------------------------------
// device.h: device
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_device_retain) {
  WalkRetainRelease(*this, &axrt_device_retain, StaleDevice(),
                    As<axrt_device_t>(stream));
}

BAD_ARGUMENTS(axrt_device_release) {
  WalkRetainRelease(*this, &axrt_device_release, StaleDevice(),
                    As<axrt_device_t>(stream));
  // An instance handle is not a device handle either, even though devices
  // share their instance's lifetime.
  WalkRetainRelease(*this, &axrt_device_release, StaleDevice(),
                    As<axrt_device_t>(instance));
}

BAD_ARGUMENTS(axrt_device_query_properties) {
  Guarded<axrt_device_properties_t> out;
  EXPECT_INVALID(axrt_device_query_properties(nullptr, out.get()), "device");
  EXPECT_INVALID(axrt_device_query_properties(As<axrt_device_t>(stream), out.get()),
                 "stream");
  EXPECT_INVALID(
      axrt_device_query_properties(As<axrt_device_t>(instance), out.get()),
      "instance");
  EXPECT_RELEASED(axrt_device_query_properties(StaleDevice(), out.get()),
                  "device");
  CHECK(out.untouched());
  WalkQueryStruct<axrt_device_properties_t>(
      "out_properties", [&](axrt_device_properties_t* o) {
        return axrt_device_query_properties(device, o);
      });
}

BAD_ARGUMENTS(axrt_device_query_peer) {
  Guarded<axrt_device_peer_info_t> out;
  EXPECT_INVALID(axrt_device_query_peer(nullptr, device, out.get()), "device");
  EXPECT_INVALID(axrt_device_query_peer(device, nullptr, out.get()), "peer");
  EXPECT_INVALID(axrt_device_query_peer(As<axrt_device_t>(stream), device, out.get()),
                 "stream");
  EXPECT_INVALID(axrt_device_query_peer(device, As<axrt_device_t>(buffer), out.get()),
                 "buffer");
  EXPECT_RELEASED(axrt_device_query_peer(StaleDevice(), device, out.get()), "device");
  EXPECT_RELEASED(axrt_device_query_peer(device, StaleDevice(), out.get()), "peer");
  // A device of another instance has no path to this one's.
  axrt_instance_t other = nullptr;
  axrt_device_t foreign = nullptr;
  EXPECT_OK(axrt_instance_create(nullptr, &other));
  EXPECT_OK(axrt_instance_find_device(other, "cpu:0", &foreign));
  EXPECT_INVALID(axrt_device_query_peer(device, foreign, out.get()), "another instance");
  EXPECT_INVALID(axrt_device_query_peer(foreign, device, out.get()), "another instance");
  axrt_device_release(foreign);
  axrt_instance_release(other);
  CHECK(out.untouched());
  WalkQueryStruct<axrt_device_peer_info_t>(
      "out_info",
      [&](axrt_device_peer_info_t* o) { return axrt_device_query_peer(device, device, o); });
}

BAD_ARGUMENTS(axrt_device_link_name) {
  // Any value has a name: values no axrt_device_link_t defines are "unknown".
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_NONE)) == "none");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_SELF)) == "self");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_HOST_MEMORY)) == "host-memory");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_PCIE)) == "pcie");
  CHECK(std::string(axrt_device_link_name(AXRT_DEVICE_LINK_NVLINK)) == "nvlink");
  for (axrt_device_link_t bad : {axrt_device_link_t{5}, axrt_device_link_t{0x7fffffff},
                                 axrt_device_link_t{UINT32_MAX}}) {
    const char* name = axrt_device_link_name(bad);
    REQUIRE(name != nullptr);
    CHECK(std::string(name) == "unknown");
  }
}

BAD_ARGUMENTS(axrt_device_synchronize) {
  EXPECT_INVALID(axrt_device_synchronize(nullptr), "device");
  EXPECT_INVALID(axrt_device_synchronize(As<axrt_device_t>(buffer)), "buffer");
  EXPECT_RELEASED(axrt_device_synchronize(StaleDevice()), "device");
}

BAD_ARGUMENTS(axrt_device_query_pool_statistics) {
  Guarded<axrt_pool_statistics_t> out;
  EXPECT_INVALID(axrt_device_query_pool_statistics(nullptr, out.get()),
                 "device");
  EXPECT_INVALID(
      axrt_device_query_pool_statistics(As<axrt_device_t>(recorded), out.get()),
      "event");
  EXPECT_RELEASED(axrt_device_query_pool_statistics(StaleDevice(), out.get()),
                  "device");
  CHECK(out.untouched());
  WalkQueryStruct<axrt_pool_statistics_t>(
      "out_statistics", [&](axrt_pool_statistics_t* o) {
        return axrt_device_query_pool_statistics(device, o);
      });
}

BAD_ARGUMENTS(axrt_device_trim_pool) {
  EXPECT_INVALID(axrt_device_trim_pool(nullptr, 0), "device");
  EXPECT_INVALID(axrt_device_trim_pool(As<axrt_device_t>(stream), 0), "stream");
  EXPECT_RELEASED(axrt_device_trim_pool(StaleDevice(), 0), "device");
}

// ---------------------------------------------------------------------------
// memory.h
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_buffer_allocate) {
  axrt_buffer_t out = Sentinel<axrt_buffer_t>();
  EXPECT_INVALID(axrt_buffer_allocate(nullptr, 64, nullptr, &out), "device");
  EXPECT_INVALID(axrt_buffer_allocate(device, 64, nullptr, nullptr),
                 "out_buffer");
  EXPECT_INVALID(axrt_buffer_allocate(As<axrt_device_t>(stream), 64, nullptr,
                                      &out),
                 "stream");
  EXPECT_RELEASED(axrt_buffer_allocate(StaleDevice(), 64, nullptr, &out),
                  "device");
  EXPECT_INVALID(axrt_buffer_allocate(device, 0, nullptr, &out), "size");

  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  for (uint64_t alignment :
       {uint64_t{3}, uint64_t{768}, properties.max_buffer_alignment * 2,
        UINT64_MAX}) {
    INFO("alignment " << alignment);
    options.alignment = alignment;
    EXPECT_INVALID(axrt_buffer_allocate(device, 64, &options, &out),
                   "alignment");
  }
  options = AXRT_BUFFER_OPTIONS_INIT;
  for (axrt_memory_type_t type : {0u, 3u, 0xffffffffu}) {
    options.memory_type = type;
    EXPECT_INVALID(axrt_buffer_allocate(device, 64, &options, &out),
                   "memory_type");
  }
  EXPECT_ERROR(axrt_buffer_allocate(device, properties.total_memory + 1,
                                    nullptr, &out),
               AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "bytes");
  EXPECT_ERROR(axrt_buffer_allocate(device, UINT64_MAX, nullptr, &out),
               AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "bytes");

  const axrt_buffer_options_t init = AXRT_BUFFER_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_buffer_options_t* o) {
    return axrt_buffer_allocate(device, 64, o, &out);
  });
  CHECK(out == Sentinel<axrt_buffer_t>());
}

BAD_ARGUMENTS(axrt_buffer_create_view) {
  axrt_buffer_t out = Sentinel<axrt_buffer_t>();
  EXPECT_INVALID(axrt_buffer_create_view(nullptr, 0, 1, &out), "buffer");
  EXPECT_INVALID(axrt_buffer_create_view(buffer, 0, 1, nullptr), "out_view");
  EXPECT_INVALID(axrt_buffer_create_view(As<axrt_buffer_t>(stream), 0, 1, &out),
                 "stream");
  EXPECT_RELEASED(axrt_buffer_create_view(StaleBuffer(), 0, 1, &out), "buffer");
  struct Range {
    uint64_t offset;
    uint64_t length;
  };
  for (Range r : {Range{0, kBufferSize + 1}, Range{kBufferSize, 1},
                  Range{UINT64_MAX, 1}, Range{1, UINT64_MAX},
                  Range{UINT64_MAX, UINT64_MAX}, Range{16, UINT64_MAX - 8}}) {
    INFO("offset " << r.offset << " length " << r.length);
    EXPECT_ERROR(axrt_buffer_create_view(buffer, r.offset, r.length, &out),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  }
  // A view bounds views of it.
  EXPECT_ERROR(axrt_buffer_create_view(view, 200, 100, &out),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  CHECK(out == Sentinel<axrt_buffer_t>());
}

BAD_ARGUMENTS(axrt_buffer_retain) {
  WalkRetainRelease(*this, &axrt_buffer_retain, StaleBuffer(),
                    As<axrt_buffer_t>(stream));
}

BAD_ARGUMENTS(axrt_buffer_release) {
  WalkRetainRelease(*this, &axrt_buffer_release, StaleBuffer(),
                    As<axrt_buffer_t>(stream));
}

BAD_ARGUMENTS(axrt_buffer_query_info) {
  Guarded<axrt_buffer_info_t> out;
  EXPECT_INVALID(axrt_buffer_query_info(nullptr, out.get()), "buffer");
  EXPECT_INVALID(axrt_buffer_query_info(As<axrt_buffer_t>(stream), out.get()),
                 "stream");
  EXPECT_RELEASED(axrt_buffer_query_info(StaleBuffer(), out.get()), "buffer");
  CHECK(out.untouched());
  WalkQueryStruct<axrt_buffer_info_t>("out_info", [&](axrt_buffer_info_t* o) {
    return axrt_buffer_query_info(buffer, o);
  });
}

BAD_ARGUMENTS(axrt_buffer_get_device) {
  axrt_device_t out = Sentinel<axrt_device_t>();
  EXPECT_INVALID(axrt_buffer_get_device(nullptr, &out), "buffer");
  EXPECT_INVALID(axrt_buffer_get_device(buffer, nullptr), "out_device");
  EXPECT_INVALID(axrt_buffer_get_device(As<axrt_buffer_t>(device), &out),
                 "device");
  EXPECT_RELEASED(axrt_buffer_get_device(StaleBuffer(), &out), "buffer");
  CHECK(out == Sentinel<axrt_device_t>());
}

BAD_ARGUMENTS(axrt_buffer_map) {
  void* out = Sentinel<void*>();
  EXPECT_INVALID(axrt_buffer_map(nullptr, &out), "buffer");
  EXPECT_INVALID(axrt_buffer_map(buffer, nullptr), "out_host_pointer");
  EXPECT_INVALID(axrt_buffer_map(As<axrt_buffer_t>(recorded), &out), "event");
  EXPECT_RELEASED(axrt_buffer_map(StaleBuffer(), &out), "buffer");
  axrt_buffer_t gone = nullptr;
  EXPECT_OK(axrt_buffer_allocate(device, 64, nullptr, &gone));
  EXPECT_OK(axrt_stream_deallocate_buffer(stream, gone));
  EXPECT_ERROR(axrt_buffer_map(gone, &out),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
  axrt_buffer_release(gone);
  CHECK(out == Sentinel<void*>());
  ExpectHealthy();
}

// ---------------------------------------------------------------------------
// event.h
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_event_create) {
  axrt_event_t out = Sentinel<axrt_event_t>();
  EXPECT_INVALID(axrt_event_create(nullptr, nullptr, &out), "device");
  EXPECT_INVALID(axrt_event_create(device, nullptr, nullptr), "out_event");
  EXPECT_INVALID(axrt_event_create(As<axrt_device_t>(buffer), nullptr, &out),
                 "buffer");
  EXPECT_RELEASED(axrt_event_create(StaleDevice(), nullptr, &out), "device");
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = 1u << 30;
  EXPECT_INVALID(axrt_event_create(device, &options, &out), "flags");
  const axrt_event_options_t init = AXRT_EVENT_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_event_options_t* o) {
    return axrt_event_create(device, o, &out);
  });
  CHECK(out == Sentinel<axrt_event_t>());
}

BAD_ARGUMENTS(axrt_event_retain) {
  WalkRetainRelease(*this, &axrt_event_retain, StaleEvent(),
                    As<axrt_event_t>(stream));
}

BAD_ARGUMENTS(axrt_event_release) {
  WalkRetainRelease(*this, &axrt_event_release, StaleEvent(),
                    As<axrt_event_t>(stream));
}

BAD_ARGUMENTS(axrt_event_query) {
  // A library that wrote on failure would most likely write false.
  bool complete = true;
  EXPECT_INVALID(axrt_event_query(nullptr, &complete), "event");
  EXPECT_INVALID(axrt_event_query(recorded, nullptr), "out_complete");
  EXPECT_INVALID(axrt_event_query(As<axrt_event_t>(stream), &complete),
                 "stream");
  EXPECT_RELEASED(axrt_event_query(StaleEvent(), &complete), "event");
  EXPECT_ERROR(axrt_event_query(never_recorded, &complete),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  CHECK(complete);
}

BAD_ARGUMENTS(axrt_event_wait) {
  EXPECT_INVALID(axrt_event_wait(nullptr, 0), "event");
  EXPECT_INVALID(axrt_event_wait(As<axrt_event_t>(buffer), 0), "buffer");
  EXPECT_RELEASED(axrt_event_wait(StaleEvent(), 0), "event");
  EXPECT_ERROR(axrt_event_wait(never_recorded, 0),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  EXPECT_ERROR(axrt_event_wait(never_recorded, AXRT_TIMEOUT_INFINITE),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
}

BAD_ARGUMENTS(axrt_event_elapsed_time) {
  int64_t out = 4242;
  EXPECT_INVALID(axrt_event_elapsed_time(nullptr, recorded, &out), "start");
  EXPECT_INVALID(axrt_event_elapsed_time(recorded, nullptr, &out), "end");
  EXPECT_INVALID(axrt_event_elapsed_time(recorded, recorded, nullptr),
                 "out_nanoseconds");
  EXPECT_INVALID(
      axrt_event_elapsed_time(As<axrt_event_t>(stream), recorded, &out),
      "stream");
  EXPECT_INVALID(
      axrt_event_elapsed_time(recorded, As<axrt_event_t>(buffer), &out),
      "buffer");
  EXPECT_RELEASED(axrt_event_elapsed_time(StaleEvent(), recorded, &out),
                  "start");
  EXPECT_RELEASED(axrt_event_elapsed_time(recorded, StaleEvent(), &out), "end");
  EXPECT_ERROR(axrt_event_elapsed_time(never_recorded, recorded, &out),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  EXPECT_ERROR(axrt_event_elapsed_time(recorded, never_recorded, &out),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");

  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  axrt_event_t untimed = nullptr;
  EXPECT_OK(axrt_event_create(device, &options, &untimed));
  EXPECT_OK(axrt_stream_record_event(stream, untimed));
  EXPECT_OK(axrt_stream_synchronize(stream));
  EXPECT_ERROR_ANY(axrt_event_elapsed_time(untimed, recorded, &out), "timing",
                   AXRT_STATUS_CODE_FAILED_PRECONDITION,
                   AXRT_STATUS_CODE_INVALID_ARGUMENT);
  axrt_event_release(untimed);
  CHECK(out == 4242);
}

BAD_ARGUMENTS(axrt_event_enqueue_native_wait) {
  void* const legacy = reinterpret_cast<void*>(uintptr_t{1});  // CU_STREAM_LEGACY
  EXPECT_INVALID(axrt_event_enqueue_native_wait(nullptr, legacy), "event");
  EXPECT_INVALID(axrt_event_enqueue_native_wait(recorded, nullptr),
                 "native_stream");
  EXPECT_INVALID(
      axrt_event_enqueue_native_wait(As<axrt_event_t>(stream), legacy),
      "stream");
  EXPECT_RELEASED(axrt_event_enqueue_native_wait(StaleEvent(), legacy),
                  "event");
  // The CPU driver has no native queues, recorded event or not (the
  // never-recorded case is tested on a CUDA device).
  EXPECT_ERROR(axrt_event_enqueue_native_wait(recorded, legacy),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "native queues");
  EXPECT_ERROR(axrt_event_enqueue_native_wait(never_recorded, legacy),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "native queues");
  ExpectHealthy();
}

// ---------------------------------------------------------------------------
// stream.h
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_stream_create) {
  axrt_stream_t out = Sentinel<axrt_stream_t>();
  EXPECT_INVALID(axrt_stream_create(nullptr, nullptr, &out), "device");
  EXPECT_INVALID(axrt_stream_create(device, nullptr, nullptr), "out_stream");
  EXPECT_INVALID(axrt_stream_create(As<axrt_device_t>(stream), nullptr, &out),
                 "stream");
  EXPECT_RELEASED(axrt_stream_create(StaleDevice(), nullptr, &out), "device");
  const axrt_stream_options_t init = AXRT_STREAM_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_stream_options_t* o) {
    return axrt_stream_create(device, o, &out);
  });
  CHECK(out == Sentinel<axrt_stream_t>());
}

BAD_ARGUMENTS(axrt_stream_retain) {
  WalkRetainRelease(*this, &axrt_stream_retain, StaleStream(),
                    As<axrt_stream_t>(buffer));
}

BAD_ARGUMENTS(axrt_stream_release) {
  WalkRetainRelease(*this, &axrt_stream_release, StaleStream(),
                    As<axrt_stream_t>(buffer));
}

BAD_ARGUMENTS(axrt_stream_get_device) {
  axrt_device_t out = Sentinel<axrt_device_t>();
  EXPECT_INVALID(axrt_stream_get_device(nullptr, &out), "stream");
  EXPECT_INVALID(axrt_stream_get_device(stream, nullptr), "out_device");
  EXPECT_INVALID(axrt_stream_get_device(As<axrt_stream_t>(recorded), &out), "event");
  EXPECT_RELEASED(axrt_stream_get_device(StaleStream(), &out), "stream");
  CHECK(out == Sentinel<axrt_device_t>());
  EXPECT_OK(axrt_stream_get_device(stream, &out));
  CHECK(out == device);
  axrt_device_release(out);
}

BAD_ARGUMENTS(axrt_stream_copy_buffer) {
  axrt_buffer_t other = nullptr;
  EXPECT_OK(axrt_buffer_allocate(device, kBufferSize, nullptr, &other));
  EXPECT_INVALID(axrt_stream_copy_buffer(nullptr, buffer, 0, other, 0, 16),
                 "stream");
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, nullptr, 0, other, 0, 16),
                 "src");
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, buffer, 0, nullptr, 0, 16),
                 "dst");
  EXPECT_INVALID(axrt_stream_copy_buffer(As<axrt_stream_t>(buffer), buffer, 0,
                                         other, 0, 16),
                 "buffer");
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, As<axrt_buffer_t>(stream), 0,
                                         other, 0, 16),
                 "stream");
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, buffer, 0,
                                         As<axrt_buffer_t>(recorded), 0, 16),
                 "event");
  EXPECT_RELEASED(
      axrt_stream_copy_buffer(StaleStream(), buffer, 0, other, 0, 16),
      "stream");
  EXPECT_RELEASED(axrt_stream_copy_buffer(stream, StaleBuffer(), 0, other, 0, 16),
                  "src");
  EXPECT_RELEASED(axrt_stream_copy_buffer(stream, buffer, 0, StaleBuffer(), 0, 16),
                  "dst");
  struct Range {
    uint64_t offset;
    uint64_t length;
  };
  // Only one side out of range: the message names that side.
  for (Range r : {Range{1, kBufferSize}, Range{kBufferSize, 1},
                  Range{UINT64_MAX, 2}, Range{UINT64_MAX - 4, 8}}) {
    INFO("offset " << r.offset << " length " << r.length);
    EXPECT_ERROR(
        axrt_stream_copy_buffer(stream, buffer, r.offset, other, 0, r.length),
        AXRT_STATUS_CODE_OUT_OF_RANGE, "src");
    EXPECT_ERROR(
        axrt_stream_copy_buffer(stream, buffer, 0, other, r.offset, r.length),
        AXRT_STATUS_CODE_OUT_OF_RANGE, "dst");
  }
  // Lengths no buffer holds.
  for (uint64_t length : {kBufferSize + 1, UINT64_MAX}) {
    EXPECT_ERROR(axrt_stream_copy_buffer(stream, buffer, 2, other, 2, length),
                 AXRT_STATUS_CODE_OUT_OF_RANGE, "length");
  }
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, buffer, 0, buffer, 8, 16),
                 "overlap");
  // `view` is [256, 512) of `buffer`.
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, buffer, 260, view, 0, 16),
                 "overlap");
  // Buffers of any device of the stream's instance, but not of another.
  axrt_instance_t other_instance = nullptr;
  axrt_device_t foreign_device = nullptr;
  axrt_buffer_t foreign = nullptr;
  EXPECT_OK(axrt_instance_create(nullptr, &other_instance));
  EXPECT_OK(axrt_instance_find_device(other_instance, "cpu:0", &foreign_device));
  EXPECT_OK(axrt_buffer_allocate(foreign_device, kBufferSize, nullptr, &foreign));
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, foreign, 0, other, 0, 16), "another instance");
  EXPECT_INVALID(axrt_stream_copy_buffer(stream, buffer, 0, foreign, 0, 16), "another instance");
  axrt_buffer_release(foreign);
  axrt_device_release(foreign_device);
  axrt_instance_release(other_instance);
  EXPECT_OK(axrt_stream_deallocate_buffer(stream, other));
  EXPECT_ERROR(axrt_stream_copy_buffer(stream, buffer, 0, other, 0, 16),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "dst");
  EXPECT_ERROR(axrt_stream_copy_buffer(stream, other, 0, buffer, 0, 16),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "src");
  axrt_buffer_release(other);
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_copy_from_host) {
  std::vector<uint8_t> host(2 * kBufferSize);
  EXPECT_INVALID(axrt_stream_copy_from_host(nullptr, host.data(), buffer, 0, 16),
                 "stream");
  EXPECT_INVALID(axrt_stream_copy_from_host(stream, nullptr, buffer, 0, 16),
                 "src");
  EXPECT_INVALID(axrt_stream_copy_from_host(stream, host.data(), nullptr, 0, 16),
                 "dst");
  EXPECT_INVALID(axrt_stream_copy_from_host(As<axrt_stream_t>(recorded),
                                            host.data(), buffer, 0, 16),
                 "event");
  EXPECT_INVALID(axrt_stream_copy_from_host(stream, host.data(),
                                            As<axrt_buffer_t>(stream), 0, 16),
                 "stream");
  EXPECT_RELEASED(
      axrt_stream_copy_from_host(StaleStream(), host.data(), buffer, 0, 16),
      "stream");
  EXPECT_RELEASED(
      axrt_stream_copy_from_host(stream, host.data(), StaleBuffer(), 0, 16),
      "dst");
  EXPECT_ERROR(axrt_stream_copy_from_host(stream, host.data(), buffer, 1,
                                          kBufferSize),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "dst");
  EXPECT_ERROR(axrt_stream_copy_from_host(stream, host.data(), buffer,
                                          UINT64_MAX, 2),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "dst");
  EXPECT_ERROR(axrt_stream_copy_from_host(stream, host.data(), view, 0, 257),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "dst");
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_copy_to_host) {
  std::vector<uint8_t> host(2 * kBufferSize, 0x77);
  EXPECT_INVALID(axrt_stream_copy_to_host(nullptr, buffer, 0, host.data(), 16),
                 "stream");
  EXPECT_INVALID(axrt_stream_copy_to_host(stream, nullptr, 0, host.data(), 16),
                 "src");
  EXPECT_INVALID(axrt_stream_copy_to_host(stream, buffer, 0, nullptr, 16),
                 "dst");
  EXPECT_INVALID(axrt_stream_copy_to_host(As<axrt_stream_t>(buffer), buffer, 0,
                                          host.data(), 16),
                 "buffer");
  EXPECT_INVALID(axrt_stream_copy_to_host(stream, As<axrt_buffer_t>(device), 0,
                                          host.data(), 16),
                 "device");
  EXPECT_RELEASED(
      axrt_stream_copy_to_host(StaleStream(), buffer, 0, host.data(), 16),
      "stream");
  EXPECT_RELEASED(
      axrt_stream_copy_to_host(stream, StaleBuffer(), 0, host.data(), 16),
      "src");
  EXPECT_ERROR(axrt_stream_copy_to_host(stream, buffer, 0, host.data(),
                                        kBufferSize + 1),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "src");
  EXPECT_ERROR(axrt_stream_copy_to_host(stream, buffer, 8, host.data(),
                                        UINT64_MAX - 4),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "src");
  ExpectHealthy();
  CHECK(std::all_of(host.begin(), host.end(),
                    [](uint8_t b) { return b == 0x77; }));
}

BAD_ARGUMENTS(axrt_stream_copy_2d) {
  std::vector<uint8_t> host(4 * kBufferSize);
  axrt_copy_2d_t good = AXRT_COPY_2D_INIT;
  good.src = {buffer, nullptr, 0, 128};
  good.dst = {nullptr, host.data(), 0, 128};
  good.width = 64;
  good.height = 4;

  EXPECT_INVALID(axrt_stream_copy_2d(nullptr, &good), "stream");
  EXPECT_INVALID(axrt_stream_copy_2d(stream, nullptr), "copy");
  EXPECT_INVALID(axrt_stream_copy_2d(As<axrt_stream_t>(view), &good), "buffer");
  EXPECT_RELEASED(axrt_stream_copy_2d(StaleStream(), &good), "stream");

  axrt_copy_2d_t c = good;
  c.src.buffer = As<axrt_buffer_t>(stream);
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "stream");
  c = good;
  c.src.buffer = StaleBuffer();
  EXPECT_RELEASED(axrt_stream_copy_2d(stream, &c), "src");

  c = good;
  c.src = {nullptr, host.data(), 0, 128};
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "buffer");
  c = good;
  c.dst.buffer = buffer;
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "dst");
  c = good;
  c.src.buffer = nullptr;
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "src");
  c = good;
  c.src.pitch = 63;
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "pitch");
  c = good;
  c.dst.pitch = 1;
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "pitch");
  c = good;
  c.height = 9;  // rows up to 8 * 128 + 64 > 1024
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "src");
  c = good;
  c.src.offset = kBufferSize;
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "src");
  c = good;
  c.src.pitch = UINT64_MAX / 2;
  c.height = 3;
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "src");
  c = good;
  c.src.offset = UINT64_MAX - 8;
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "src");
  // Buffer to buffer, a buffer of another instance is refused.
  {
    axrt_instance_t other_instance = nullptr;
    axrt_device_t foreign_device = nullptr;
    axrt_buffer_t foreign = nullptr;
    EXPECT_OK(axrt_instance_create(nullptr, &other_instance));
    EXPECT_OK(axrt_instance_find_device(other_instance, "cpu:0", &foreign_device));
    EXPECT_OK(axrt_buffer_allocate(foreign_device, kBufferSize, nullptr, &foreign));
    c = good;
    c.dst = {foreign, nullptr, 0, 128};
    EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "another instance");
    c.src.buffer = foreign;
    c.dst = {buffer, nullptr, 512, 128};
    c.height = 2;
    EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "another instance");
    axrt_buffer_release(foreign);
    axrt_device_release(foreign_device);
    axrt_instance_release(other_instance);
  }

  // The struct conventions; a copy_2d takes no extensions at all.
  c = good;
  c.struct_size = 0;
  EXPECT_INVALID(axrt_stream_copy_2d(stream, &c), "struct_size");
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), nullptr,
                                     kUnknownExtension};
  c = good;
  c.next = &unknown;
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_UNIMPLEMENTED,
               "23130");
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("walk");
  c.next = &label;
  EXPECT_ERROR(axrt_stream_copy_2d(stream, &c), AXRT_STATUS_CODE_UNIMPLEMENTED,
               "extension");
  Newer<axrt_copy_2d_t> newer(good, 1);
  EXPECT_ERROR_ANY(axrt_stream_copy_2d(stream, &newer.known), "struct_size",
                   AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   AXRT_STATUS_CODE_UNIMPLEMENTED);
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_fill_buffer) {
  const uint64_t pattern = 0x0102030405060708ull;
  EXPECT_INVALID(axrt_stream_fill_buffer(nullptr, buffer, 0, 16, &pattern, 4),
                 "stream");
  EXPECT_INVALID(axrt_stream_fill_buffer(stream, nullptr, 0, 16, &pattern, 4),
                 "buffer");
  EXPECT_INVALID(axrt_stream_fill_buffer(stream, buffer, 0, 16, nullptr, 4),
                 "pattern");
  EXPECT_INVALID(axrt_stream_fill_buffer(As<axrt_stream_t>(device), buffer, 0,
                                         16, &pattern, 4),
                 "device");
  EXPECT_INVALID(axrt_stream_fill_buffer(stream, As<axrt_buffer_t>(stream), 0,
                                         16, &pattern, 4),
                 "stream");
  EXPECT_RELEASED(
      axrt_stream_fill_buffer(StaleStream(), buffer, 0, 16, &pattern, 4),
      "stream");
  EXPECT_RELEASED(
      axrt_stream_fill_buffer(stream, StaleBuffer(), 0, 16, &pattern, 4),
      "buffer");
  for (size_t size : {size_t{0}, size_t{3}, size_t{16}}) {
    EXPECT_INVALID(axrt_stream_fill_buffer(stream, buffer, 0, 16, &pattern, size),
                   "pattern_size");
  }
  EXPECT_INVALID(axrt_stream_fill_buffer(stream, buffer, 2, 16, &pattern, 4),
                 "offset");
  EXPECT_INVALID(axrt_stream_fill_buffer(stream, buffer, 0, 18, &pattern, 4),
                 "length");
  EXPECT_ERROR(axrt_stream_fill_buffer(stream, buffer, 0, kBufferSize + 8,
                                       &pattern, 8),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "buffer");
  EXPECT_ERROR(axrt_stream_fill_buffer(stream, buffer, UINT64_MAX - 7, 16,
                                       &pattern, 8),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "buffer");
  EXPECT_ERROR(axrt_stream_fill_buffer(stream, view, 0, 264, &pattern, 8),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "buffer");
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_launch_host_func) {
  int calls = 0;
  EXPECT_INVALID(axrt_stream_launch_host_func(nullptr, &NoopHostFunc, &calls),
                 "stream");
  EXPECT_INVALID(axrt_stream_launch_host_func(stream, nullptr, &calls), "func");
  EXPECT_INVALID(axrt_stream_launch_host_func(As<axrt_stream_t>(recorded),
                                              &NoopHostFunc, &calls),
                 "event");
  EXPECT_RELEASED(
      axrt_stream_launch_host_func(StaleStream(), &NoopHostFunc, &calls),
      "stream");
  ExpectHealthy();
  CHECK(calls == 0);
}

BAD_ARGUMENTS(axrt_stream_record_event) {
  EXPECT_INVALID(axrt_stream_record_event(nullptr, recorded), "stream");
  EXPECT_INVALID(axrt_stream_record_event(stream, nullptr), "event");
  EXPECT_INVALID(axrt_stream_record_event(As<axrt_stream_t>(recorded), recorded),
                 "event");
  EXPECT_INVALID(axrt_stream_record_event(stream, As<axrt_event_t>(buffer)),
                 "buffer");
  EXPECT_RELEASED(axrt_stream_record_event(StaleStream(), recorded), "stream");
  EXPECT_RELEASED(axrt_stream_record_event(stream, StaleEvent()), "event");
  // The failed records did not record anything.
  bool complete = false;
  EXPECT_ERROR(axrt_event_query(never_recorded, &complete),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_wait_event) {
  EXPECT_INVALID(axrt_stream_wait_event(nullptr, recorded), "stream");
  EXPECT_INVALID(axrt_stream_wait_event(stream, nullptr), "event");
  EXPECT_INVALID(axrt_stream_wait_event(As<axrt_stream_t>(buffer), recorded),
                 "buffer");
  EXPECT_INVALID(axrt_stream_wait_event(stream, As<axrt_event_t>(stream)),
                 "stream");
  EXPECT_RELEASED(axrt_stream_wait_event(StaleStream(), recorded), "stream");
  EXPECT_RELEASED(axrt_stream_wait_event(stream, StaleEvent()), "event");
  EXPECT_ERROR(axrt_stream_wait_event(stream, never_recorded),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "record");
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_allocate_buffer) {
  axrt_buffer_t out = Sentinel<axrt_buffer_t>();
  EXPECT_INVALID(axrt_stream_allocate_buffer(nullptr, 64, nullptr, &out),
                 "stream");
  EXPECT_INVALID(axrt_stream_allocate_buffer(stream, 64, nullptr, nullptr),
                 "out_buffer");
  EXPECT_INVALID(axrt_stream_allocate_buffer(As<axrt_stream_t>(device), 64,
                                             nullptr, &out),
                 "device");
  EXPECT_RELEASED(axrt_stream_allocate_buffer(StaleStream(), 64, nullptr, &out),
                  "stream");
  EXPECT_INVALID(axrt_stream_allocate_buffer(stream, 0, nullptr, &out), "size");
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.alignment = 12;
  EXPECT_INVALID(axrt_stream_allocate_buffer(stream, 64, &options, &out),
                 "alignment");
  options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = 9;
  EXPECT_INVALID(axrt_stream_allocate_buffer(stream, 64, &options, &out),
                 "memory_type");
  EXPECT_ERROR(axrt_stream_allocate_buffer(stream, properties.total_memory + 1,
                                           nullptr, &out),
               AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "bytes");
  const axrt_buffer_options_t init = AXRT_BUFFER_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_buffer_options_t* o) {
    return axrt_stream_allocate_buffer(stream, 64, o, &out);
  });
  CHECK(out == Sentinel<axrt_buffer_t>());
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_deallocate_buffer) {
  EXPECT_INVALID(axrt_stream_deallocate_buffer(nullptr, buffer), "stream");
  EXPECT_INVALID(axrt_stream_deallocate_buffer(stream, nullptr), "buffer");
  EXPECT_INVALID(axrt_stream_deallocate_buffer(As<axrt_stream_t>(buffer), buffer),
                 "buffer");
  EXPECT_INVALID(
      axrt_stream_deallocate_buffer(stream, As<axrt_buffer_t>(recorded)),
      "event");
  EXPECT_RELEASED(axrt_stream_deallocate_buffer(StaleStream(), buffer),
                  "stream");
  EXPECT_RELEASED(axrt_stream_deallocate_buffer(stream, StaleBuffer()),
                  "buffer");
  EXPECT_INVALID(axrt_stream_deallocate_buffer(stream, view), "view");
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  EXPECT_OK(axrt_buffer_query_info(buffer, &info));
  CHECK(!info.deallocated);

  axrt_buffer_t twice = nullptr;
  EXPECT_OK(axrt_stream_allocate_buffer(stream, 64, nullptr, &twice));
  EXPECT_OK(axrt_stream_deallocate_buffer(stream, twice));
  EXPECT_ERROR(axrt_stream_deallocate_buffer(stream, twice),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
  axrt_buffer_release(twice);
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_stream_synchronize) {
  EXPECT_INVALID(axrt_stream_synchronize(nullptr), "stream");
  EXPECT_INVALID(axrt_stream_synchronize(As<axrt_stream_t>(instance)),
                 "instance");
  EXPECT_INVALID(axrt_stream_synchronize(As<axrt_stream_t>(never_recorded)),
                 "event");
  EXPECT_RELEASED(axrt_stream_synchronize(StaleStream()), "stream");
}

BAD_ARGUMENTS(axrt_stream_query) {
  bool idle = false;
  EXPECT_INVALID(axrt_stream_query(nullptr, &idle), "stream");
  EXPECT_INVALID(axrt_stream_query(stream, nullptr), "out_idle");
  EXPECT_INVALID(axrt_stream_query(As<axrt_stream_t>(buffer), &idle), "buffer");
  EXPECT_RELEASED(axrt_stream_query(StaleStream(), &idle), "stream");
  CHECK(!idle);
}

BAD_ARGUMENTS(axrt_stream_get_native_handle) {
  void* out = Sentinel<void*>();
  EXPECT_INVALID(axrt_stream_get_native_handle(nullptr, &out), "stream");
  EXPECT_INVALID(axrt_stream_get_native_handle(stream, nullptr), "out_handle");
  EXPECT_INVALID(axrt_stream_get_native_handle(As<axrt_stream_t>(buffer), &out),
                 "buffer");
  EXPECT_RELEASED(axrt_stream_get_native_handle(StaleStream(), &out), "stream");
  // The CPU device runs streams on its own threads: there is no native queue.
  EXPECT_ERROR(axrt_stream_get_native_handle(stream, &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "native queue");
  CHECK(out == Sentinel<void*>());
  ExpectHealthy();
}

// ---------------------------------------------------------------------------
// format.h
// ---------------------------------------------------------------------------

// A builder with one kernel-library code object, a kernel "k" taking one
// buffer, a constant "c" of 4 bytes and a function "f" with one output and a
// 64-byte arena, so every index 0 is valid and every index 1 is not.
struct AxeBuilder {
  AxeBuilder() {
    EXPECT_OK(axrt_axe_builder_create(nullptr, &b));
    axrt_axe_code_object_desc_t code = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    code.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
    code.target = "x86_64";
    code.library_name = "walk";
    uint32_t index = 0;
    EXPECT_OK(axrt_axe_builder_add_code_object(b, &code, &index));
    axrt_axe_kernel_param_t param = AXRT_AXE_KERNEL_PARAM_INIT;
    param.name = "p";
    axrt_axe_kernel_desc_t kernel = AXRT_AXE_KERNEL_DESC_INIT;
    kernel.name = "k";
    kernel.params = &param;
    kernel.param_count = 1;
    EXPECT_OK(axrt_axe_builder_add_kernel(b, &kernel, &index));
    const uint8_t bytes[4] = {1, 2, 3, 4};
    const uint64_t shape[] = {4};
    axrt_axe_constant_desc_t constant = AXRT_AXE_CONSTANT_DESC_INIT;
    constant.name = "c";
    constant.dtype = AXRT_AXE_DTYPE_UINT8;
    constant.rank = 1;
    constant.shape = shape;
    constant.data = bytes;
    constant.size = 4;
    EXPECT_OK(axrt_axe_builder_add_constant(b, &constant, &index));
    const axrt_axe_dim_t dims[] = {{4, -1}};
    axrt_axe_tensor_sig_t out = AXRT_AXE_TENSOR_SIG_INIT;
    out.name = "out";
    out.dtype = AXRT_AXE_DTYPE_UINT8;
    out.rank = 1;
    out.dims = dims;
    axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
    function.name = "f";
    function.outputs = &out;
    function.output_count = 1;
    function.arena_size = 64;
    EXPECT_OK(axrt_axe_builder_add_function(b, &function, &index));
  }
  ~AxeBuilder() { axrt_axe_builder_release(b); }
  AxeBuilder(const AxeBuilder&) = delete;
  AxeBuilder& operator=(const AxeBuilder&) = delete;

  static axrt_axe_builder_t Stale() {
    axrt_axe_builder_t stale = nullptr;
    EXPECT_OK(axrt_axe_builder_create(nullptr, &stale));
    axrt_axe_builder_release(stale);
    return stale;
  }

  axrt_axe_builder_t b = nullptr;
};

// The builder handle errors every builder function gives.
template <typename Call>
void WalkBuilderHandle(const World& world, Call call) {
  EXPECT_INVALID(call(nullptr), "builder");
  EXPECT_INVALID(call(World::As<axrt_axe_builder_t>(world.stream)), "stream");
  EXPECT_RELEASED(call(AxeBuilder::Stale()), "builder");
}

const axrt_axe_expr_op_t kOne[] = {{AXRT_AXE_EXPR_OPCODE_CONST, 1}};

BAD_ARGUMENTS(axrt_axe_builder_create) {
  EXPECT_INVALID(axrt_axe_builder_create(nullptr, nullptr), "out_builder");
  axrt_axe_builder_t out = Sentinel<axrt_axe_builder_t>();
  const axrt_axe_builder_options_t init = AXRT_AXE_BUILDER_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/false,
              [&](const axrt_axe_builder_options_t* o) { return axrt_axe_builder_create(o, &out); });
  CHECK(out == Sentinel<axrt_axe_builder_t>());
}

BAD_ARGUMENTS(axrt_axe_builder_retain) {
  WalkRetainRelease(*this, &axrt_axe_builder_retain, AxeBuilder::Stale(),
                    As<axrt_axe_builder_t>(stream));
}

BAD_ARGUMENTS(axrt_axe_builder_release) {
  WalkRetainRelease(*this, &axrt_axe_builder_release, AxeBuilder::Stale(),
                    As<axrt_axe_builder_t>(stream));
}

BAD_ARGUMENTS(axrt_axe_builder_add_required_feature) {
  AxeBuilder builder;
  WalkBuilderHandle(*this, [](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_required_feature(b, "f");
  });
  EXPECT_INVALID(axrt_axe_builder_add_required_feature(builder.b, nullptr), "feature");
  EXPECT_INVALID(axrt_axe_builder_add_required_feature(builder.b, ""), "feature");
  EXPECT_OK(axrt_axe_builder_add_required_feature(builder.b, "f"));
  EXPECT_ERROR(axrt_axe_builder_add_required_feature(builder.b, "f"),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'f'");
}

BAD_ARGUMENTS(axrt_axe_builder_add_metadata) {
  AxeBuilder builder;
  WalkBuilderHandle(*this, [](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_metadata(b, "k", "v");
  });
  EXPECT_INVALID(axrt_axe_builder_add_metadata(builder.b, nullptr, "v"), "key");
  EXPECT_INVALID(axrt_axe_builder_add_metadata(builder.b, "k", nullptr), "value");
  EXPECT_INVALID(axrt_axe_builder_add_metadata(builder.b, "", "v"), "key");
  EXPECT_OK(axrt_axe_builder_add_metadata(builder.b, "k", "v"));
  EXPECT_ERROR(axrt_axe_builder_add_metadata(builder.b, "k", "w"),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'k'");
}

BAD_ARGUMENTS(axrt_axe_builder_add_code_object) {
  AxeBuilder builder;
  const uint8_t bytes[4] = {0x7f, 'E', 'L', 'F'};
  axrt_axe_code_object_desc_t init = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  init.kind = AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN;
  init.target = "sm_90";
  init.data = bytes;
  init.size = sizeof(bytes);
  uint32_t index = 77;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_code_object(b, &init, &index);
  });
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, nullptr, &index), "desc");
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &init, nullptr), "out_index");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_code_object_desc_t* d) {
    return axrt_axe_builder_add_code_object(builder.b, d, &index);
  });
  axrt_axe_code_object_desc_t desc = init;
  desc.kind = 0;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "desc->kind");
  desc.kind = 6;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "desc->kind");
  desc = init;
  desc.target = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "desc->target");
  desc = init;
  desc.data = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "desc->data");
  desc.size = 0;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "no bytes");
  desc = init;
  desc.library_name = "lib";
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "library");
  desc = init;
  desc.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "no bytes");
  desc.data = nullptr;
  desc.size = 0;
  EXPECT_INVALID(axrt_axe_builder_add_code_object(builder.b, &desc, &index), "library name");
  CHECK(index == 77);
}

BAD_ARGUMENTS(axrt_axe_builder_add_kernel) {
  AxeBuilder builder;
  axrt_axe_kernel_param_t params[2] = {AXRT_AXE_KERNEL_PARAM_INIT, AXRT_AXE_KERNEL_PARAM_INIT};
  params[0].name = "a";
  params[1].name = "b";
  axrt_axe_kernel_desc_t init = AXRT_AXE_KERNEL_DESC_INIT;
  init.name = "walk";
  init.params = params;
  init.param_count = 2;
  uint32_t index = 77;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_kernel(b, &init, &index);
  });
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, nullptr, &index), "desc");
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &init, nullptr), "out_index");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_kernel_desc_t* d) {
    return axrt_axe_builder_add_kernel(builder.b, d, &index);
  });
  axrt_axe_kernel_desc_t desc = init;
  desc.name = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "desc->name");
  desc = init;
  desc.name = "k";
  EXPECT_ERROR(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'k'");
  desc = init;
  desc.code_object = 1;
  EXPECT_ERROR(axrt_axe_builder_add_kernel(builder.b, &desc, &index), AXRT_STATUS_CODE_NOT_FOUND,
               "code object 1");
  desc = init;
  desc.params = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "desc->params");
  desc = init;
  desc.workgroup_size[1] = 0;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "workgroup size");
  desc = init;
  desc.cluster_dims[0] = 2;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "cluster dims");
  desc = init;
  params[1].kind = 9;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "desc->params[1].kind");
  params[1].kind = AXRT_AXE_PARAM_KIND_SCALAR;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "scalar type");
  params[1].scalar_type = 200;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
                 "desc->params[1].scalar_type");
  params[1] = AXRT_AXE_KERNEL_PARAM_INIT;
  params[1].name = "b";
  params[1].access = 4;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "desc->params[1].access");
  params[1].access = AXRT_AXE_ACCESS_READ;
  params[1].struct_size = 0;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "struct_size");
  params[1].struct_size = sizeof(axrt_axe_kernel_param_t);
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), nullptr, kUnknownExtension};
  params[1].next = &unknown;
  EXPECT_ERROR(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "23130");
  params[1].next = nullptr;
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.element_type = AXRT_AXE_DTYPE_INT8;
  layout.struct_size = 0;
  params[1].layout = &layout;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "struct_size");
  layout.struct_size = sizeof(layout);
  layout.scale.layout = 3;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
                 "desc->params[1].layout->scale.layout");
  layout.scale.layout = AXRT_AXE_SCALE_LAYOUT_GRID;
  layout.packing.order = 2;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
                 "desc->params[1].layout->packing.order");
  layout.packing.order = 0;
  layout.zero_point.kind = 3;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index),
                 "desc->params[1].layout->zero_point.kind");
  layout.zero_point.kind = 0;
  layout.rank = 2;
  EXPECT_INVALID(axrt_axe_builder_add_kernel(builder.b, &desc, &index), "block_shape");
  CHECK(index == 77);
}

BAD_ARGUMENTS(axrt_axe_builder_add_kernel_variant) {
  AxeBuilder builder;
  axrt_axe_code_object_desc_t code = AXRT_AXE_CODE_OBJECT_DESC_INIT;
  code.kind = AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY;
  code.target = "aarch64";
  code.library_name = "walk.arm";
  uint32_t other = 0;
  EXPECT_OK(axrt_axe_builder_add_code_object(builder.b, &code, &other));
  axrt_axe_kernel_variant_desc_t init = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
  init.code_object = other;
  init.entry_symbol = "walk_arm";
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_kernel_variant(b, 0, &init);
  });
  EXPECT_INVALID(axrt_axe_builder_add_kernel_variant(builder.b, 0, nullptr), "desc");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_kernel_variant_desc_t* d) {
    return axrt_axe_builder_add_kernel_variant(builder.b, 0, d);
  });
  EXPECT_ERROR(axrt_axe_builder_add_kernel_variant(builder.b, 1, &init),
               AXRT_STATUS_CODE_NOT_FOUND, "kernel 1");
  axrt_axe_kernel_variant_desc_t desc = init;
  desc.code_object = 2;
  EXPECT_ERROR(axrt_axe_builder_add_kernel_variant(builder.b, 0, &desc),
               AXRT_STATUS_CODE_NOT_FOUND, "code object 2");
  desc.code_object = 0;
  EXPECT_ERROR(axrt_axe_builder_add_kernel_variant(builder.b, 0, &desc),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "code object 0");
  desc = init;
  desc.workgroup_size[2] = 0;
  EXPECT_INVALID(axrt_axe_builder_add_kernel_variant(builder.b, 0, &desc), "workgroup size");
  desc = init;
  desc.cluster_dims[1] = 1;
  EXPECT_INVALID(axrt_axe_builder_add_kernel_variant(builder.b, 0, &desc), "cluster dims");
  EXPECT_OK(axrt_axe_builder_add_kernel_variant(builder.b, 0, &init));
  EXPECT_ERROR(axrt_axe_builder_add_kernel_variant(builder.b, 0, &init),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "variant 0");
}

BAD_ARGUMENTS(axrt_axe_builder_add_constant) {
  AxeBuilder builder;
  const uint8_t bytes[8] = {};
  const uint64_t shape[] = {2, 4};
  axrt_axe_constant_desc_t init = AXRT_AXE_CONSTANT_DESC_INIT;
  init.name = "walk";
  init.dtype = AXRT_AXE_DTYPE_UINT8;
  init.rank = 2;
  init.shape = shape;
  init.data = bytes;
  init.size = sizeof(bytes);
  uint32_t index = 77;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_constant(b, &init, &index);
  });
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, nullptr, &index), "desc");
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &init, nullptr), "out_index");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_constant_desc_t* d) {
    return axrt_axe_builder_add_constant(builder.b, d, &index);
  });
  axrt_axe_constant_desc_t desc = init;
  desc.name = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "desc->name");
  desc = init;
  desc.name = "c";
  EXPECT_ERROR(axrt_axe_builder_add_constant(builder.b, &desc, &index),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'c'");
  desc = init;
  desc.dtype = 24;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "desc->dtype");
  desc.dtype = AXRT_AXE_DTYPE_INVALID;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "dtype");
  desc = init;
  desc.shape = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "desc->shape");
  desc = init;
  desc.data = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "desc->data");
  desc = init;
  desc.size = 7;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "needs 8 bytes");
  desc = init;
  desc.alignment = 8192;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "alignment 8192");
  desc = init;
  axrt_axe_quant_layout_t layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  layout.element_type = AXRT_AXE_DTYPE_UINT8;
  const uint64_t block[] = {1, 0};
  layout.rank = 2;
  layout.block_shape = block;
  desc.layout = &layout;
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), nullptr, kUnknownExtension};
  layout.next = &unknown;
  EXPECT_ERROR(axrt_axe_builder_add_constant(builder.b, &desc, &index),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "23130");
  layout.next = nullptr;
  layout.block_shape = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index),
                 "desc->layout->block_shape");
  layout.block_shape = block;
  layout.rank = 1;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "rank is 2");
  layout.rank = 2;
  layout.scale.constant = 1;
  layout.scale.dtype = AXRT_AXE_DTYPE_FLOAT32;
  EXPECT_ERROR(axrt_axe_builder_add_constant(builder.b, &desc, &index),
               AXRT_STATUS_CODE_NOT_FOUND, "constant 1");
  layout.scale.constant = 0;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index), "holds UINT8");
  layout.scale.constant = -2;
  EXPECT_INVALID(axrt_axe_builder_add_constant(builder.b, &desc, &index),
                 "desc->layout->scale.constant");
  CHECK(index == 77);
}

// Counts the releases of a walk's data source; reads zeros.
struct WalkSource {
  int released = 0;
  static axrt_status_t Read(void*, uint64_t, void* dst, uint64_t size) {
    std::memset(dst, 0, size);
    return nullptr;
  }
  static void Release(void* user_data) { ++static_cast<WalkSource*>(user_data)->released; }
};

BAD_ARGUMENTS(axrt_axe_builder_add_constant_from_source) {
  WalkSource walk_source;
  {
    AxeBuilder builder;
    const uint64_t shape[] = {2, 4};
    axrt_axe_constant_desc_t init = AXRT_AXE_CONSTANT_DESC_INIT;
    init.name = "walk";
    init.dtype = AXRT_AXE_DTYPE_UINT8;
    init.rank = 2;
    init.shape = shape;
    axrt_axe_data_source_t source = AXRT_AXE_DATA_SOURCE_INIT;
    source.size = 8;
    source.read = &WalkSource::Read;
    source.release = &WalkSource::Release;
    source.user_data = &walk_source;
    uint32_t index = 77;
    WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
      return axrt_axe_builder_add_constant_from_source(b, &init, &source, &index);
    });
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, nullptr, &source, &index),
                   "desc");
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &init, nullptr, &index),
                   "source");
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &init, &source, nullptr),
                   "out_index");
    WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_constant_desc_t* d) {
      return axrt_axe_builder_add_constant_from_source(builder.b, d, &source, &index);
    });
    WalkOptions(source, /*takes_label=*/false, [&](const axrt_axe_data_source_t* s) {
      return axrt_axe_builder_add_constant_from_source(builder.b, &init, s, &index);
    });
    axrt_axe_constant_desc_t desc = init;
    const uint8_t bytes[8] = {};
    desc.data = bytes;
    desc.size = sizeof(bytes);
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &desc, &source, &index),
                   "desc->data");
    desc = init;
    desc.name = nullptr;
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &desc, &source, &index),
                   "desc->name");
    desc = init;
    desc.dtype = 24;
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &desc, &source, &index),
                   "desc->dtype");
    axrt_axe_data_source_t bad = source;
    bad.read = nullptr;
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &init, &bad, &index),
                   "source->read");
    bad = source;
    bad.size = 7;
    EXPECT_INVALID(axrt_axe_builder_add_constant_from_source(builder.b, &init, &bad, &index),
                   "needs 8 bytes");
    CHECK(index == 77);
    // Every refusal left the source with the caller.
    CHECK(walk_source.released == 0);
    EXPECT_OK(axrt_axe_builder_add_constant_from_source(builder.b, &init, &source, &index));
    CHECK(index == 1);
    void* data = nullptr;
    size_t size = 0;
    EXPECT_OK(axrt_axe_builder_write_memory(builder.b, &data, &size));
    axrt_axe_memory_free(data);
    desc = init;
    EXPECT_ERROR(axrt_axe_builder_add_constant_from_source(builder.b, &desc, &source, &index),
                 AXRT_STATUS_CODE_ALREADY_EXISTS, "'walk'");
    CHECK(walk_source.released == 0);
  }
  // The builder kept the one it took, and released it with itself.
  CHECK(walk_source.released == 1);
}

BAD_ARGUMENTS(axrt_axe_builder_add_prepacked_copy) {
  AxeBuilder builder;
  const uint8_t bytes[4] = {};
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_prepacked_copy(b, 0, "sm_90", "tiled", bytes, 4);
  });
  EXPECT_INVALID(axrt_axe_builder_add_prepacked_copy(builder.b, 0, nullptr, "t", bytes, 4),
                 "target");
  EXPECT_INVALID(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "sm_90", nullptr, bytes, 4),
                 "layout_id");
  EXPECT_INVALID(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "sm_90", "t", nullptr, 4),
                 "data");
  EXPECT_INVALID(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "sm_90", "t", bytes, 0),
                 "size");
  EXPECT_INVALID(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "", "t", bytes, 4), "target");
  EXPECT_ERROR(axrt_axe_builder_add_prepacked_copy(builder.b, 1, "sm_90", "t", bytes, 4),
               AXRT_STATUS_CODE_NOT_FOUND, "constant 1");
  EXPECT_OK(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "sm_90", "t", bytes, 4));
  EXPECT_ERROR(axrt_axe_builder_add_prepacked_copy(builder.b, 0, "sm_90", "t", bytes, 4),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'t'");
}

BAD_ARGUMENTS(axrt_axe_builder_add_function) {
  AxeBuilder builder;
  axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
  symbol.name = "n";
  symbol.upper_bound = 8;
  const axrt_axe_dim_t dims[] = {{0, 0}};
  axrt_axe_tensor_sig_t sig = AXRT_AXE_TENSOR_SIG_INIT;
  sig.name = "x";
  sig.dtype = AXRT_AXE_DTYPE_FLOAT32;
  sig.rank = 1;
  sig.dims = dims;
  axrt_axe_function_desc_t init = AXRT_AXE_FUNCTION_DESC_INIT;
  init.name = "walk";
  init.symbols = &symbol;
  init.symbol_count = 1;
  init.inputs = &sig;
  init.input_count = 1;
  uint32_t index = 77;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_function(b, &init, &index);
  });
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, nullptr, &index), "desc");
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &init, nullptr), "out_index");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_function_desc_t* d) {
    return axrt_axe_builder_add_function(builder.b, d, &index);
  });
  axrt_axe_function_desc_t desc = init;
  desc.name = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "desc->name");
  desc.name = "f";
  EXPECT_ERROR(axrt_axe_builder_add_function(builder.b, &desc, &index),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'f'");
  desc = init;
  desc.symbols = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "desc->symbols");
  desc = init;
  desc.outputs = nullptr;
  desc.output_count = 2;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "desc->outputs");
  desc = init;
  symbol.upper_bound = 0;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "upper bound 0");
  symbol.upper_bound = 8;
  symbol.struct_size = 0;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "struct_size");
  symbol.struct_size = sizeof(symbol);
  sig.dtype = 99;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "desc->inputs[0].dtype");
  sig.dtype = AXRT_AXE_DTYPE_FLOAT32;
  sig.dims = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index), "desc->inputs[0].dims");
  const axrt_axe_dim_t bad_dims[] = {{0, 1}};
  sig.dims = bad_dims;
  EXPECT_ERROR(axrt_axe_builder_add_function(builder.b, &desc, &index),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "symbol 1");
  sig.dims = dims;
  sig.flags = 1u << 5;
  EXPECT_ERROR(axrt_axe_builder_add_function(builder.b, &desc, &index),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "desc->inputs[0].flags");
  sig.flags = 0;
  desc.outputs = &sig;
  desc.output_count = 1;
  EXPECT_ERROR(axrt_axe_builder_add_function(builder.b, &desc, &index),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "'x'");
  sig.name = "y";
  sig.flags = AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE;
  desc.inputs = nullptr;
  desc.input_count = 0;
  EXPECT_INVALID(axrt_axe_builder_add_function(builder.b, &desc, &index),
                 "only inputs can be mutable");
  CHECK(index == 77);
}

// A valid binding of the builder's function "f".
axrt_axe_binding_t ArenaBinding() {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  binding.kind = AXRT_AXE_BINDING_KIND_ARENA;
  binding.size = 64;
  return binding;
}

// Errors of a binding passed by pointer as `name`.
template <typename Call>
void WalkBinding(const char* name, axrt_axe_binding_t* binding, Call call) {
  const axrt_axe_binding_t good = *binding;
  binding->struct_size = 0;
  EXPECT_INVALID(call(), "struct_size");
  *binding = good;
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), nullptr, kUnknownExtension};
  binding->next = &unknown;
  EXPECT_ERROR(call(), AXRT_STATUS_CODE_UNIMPLEMENTED, "23130");
  *binding = good;
  binding->kind = 6;
  EXPECT_INVALID(call(), std::string(name) + ".kind");
  binding->kind = AXRT_AXE_BINDING_KIND_INVALID;
  EXPECT_INVALID(call(), std::string(name) + ".kind");
  *binding = good;
  binding->offset = 1;
  EXPECT_ERROR(call(), AXRT_STATUS_CODE_OUT_OF_RANGE, "64-byte arena");
  *binding = good;
  binding->kind = AXRT_AXE_BINDING_KIND_OUTPUT;
  binding->size = 0;
  binding->index = 1;
  EXPECT_ERROR(call(), AXRT_STATUS_CODE_OUT_OF_RANGE, "output index 1");
  *binding = good;
  binding->value = {kOne, 1};
  EXPECT_INVALID(call(), "only SCALAR");
  *binding = good;
}

BAD_ARGUMENTS(axrt_axe_builder_add_dispatch) {
  AxeBuilder builder;
  axrt_axe_binding_t binding = ArenaBinding();
  axrt_axe_dispatch_desc_t init = AXRT_AXE_DISPATCH_DESC_INIT;
  init.workgroup_count_x = {kOne, 1};
  init.bindings = &binding;
  init.binding_count = 1;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_dispatch(b, 0, &init);
  });
  EXPECT_INVALID(axrt_axe_builder_add_dispatch(builder.b, 0, nullptr), "desc");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_dispatch_desc_t* d) {
    return axrt_axe_builder_add_dispatch(builder.b, 0, d);
  });
  EXPECT_ERROR(axrt_axe_builder_add_dispatch(builder.b, 1, &init), AXRT_STATUS_CODE_NOT_FOUND,
               "function 1");
  axrt_axe_dispatch_desc_t desc = init;
  desc.kernel = 1;
  EXPECT_ERROR(axrt_axe_builder_add_dispatch(builder.b, 0, &desc), AXRT_STATUS_CODE_NOT_FOUND,
               "kernel 1");
  desc = init;
  desc.workgroup_count_x = {nullptr, 0};
  EXPECT_INVALID(axrt_axe_builder_add_dispatch(builder.b, 0, &desc), "workgroup_count_x");
  desc.workgroup_count_x = {nullptr, 1};
  EXPECT_INVALID(axrt_axe_builder_add_dispatch(builder.b, 0, &desc),
                 "desc->workgroup_count_x.ops");
  desc = init;
  desc.binding_count = 0;
  EXPECT_INVALID(axrt_axe_builder_add_dispatch(builder.b, 0, &desc), "0 binding(s)");
  desc = init;
  desc.bindings = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_dispatch(builder.b, 0, &desc), "desc->bindings");
  WalkBinding("desc->bindings[0]", &binding,
              [&] { return axrt_axe_builder_add_dispatch(builder.b, 0, &init); });
  EXPECT_OK(axrt_axe_builder_add_dispatch(builder.b, 0, &init));
}

BAD_ARGUMENTS(axrt_axe_builder_add_copy) {
  AxeBuilder builder;
  axrt_axe_binding_t src = AXRT_AXE_BINDING_INIT;
  src.kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  axrt_axe_binding_t dst = ArenaBinding();
  axrt_axe_copy_desc_t init = AXRT_AXE_COPY_DESC_INIT;
  init.src = &src;
  init.dst = &dst;
  init.length = {kOne, 1};
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_copy(b, 0, &init);
  });
  EXPECT_INVALID(axrt_axe_builder_add_copy(builder.b, 0, nullptr), "desc");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_copy_desc_t* d) {
    return axrt_axe_builder_add_copy(builder.b, 0, d);
  });
  EXPECT_ERROR(axrt_axe_builder_add_copy(builder.b, 1, &init), AXRT_STATUS_CODE_NOT_FOUND,
               "function 1");
  axrt_axe_copy_desc_t desc = init;
  desc.src = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_copy(builder.b, 0, &desc), "desc->src");
  desc = init;
  desc.dst = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_copy(builder.b, 0, &desc), "desc->dst");
  desc = init;
  desc.length = {nullptr, 0};
  EXPECT_INVALID(axrt_axe_builder_add_copy(builder.b, 0, &desc), "length");
  desc = init;
  desc.dst = &src;
  EXPECT_INVALID(axrt_axe_builder_add_copy(builder.b, 0, &desc), "destination");
  WalkBinding("desc->dst", &dst, [&] { return axrt_axe_builder_add_copy(builder.b, 0, &init); });
  EXPECT_OK(axrt_axe_builder_add_copy(builder.b, 0, &init));
}

BAD_ARGUMENTS(axrt_axe_builder_add_fill) {
  AxeBuilder builder;
  axrt_axe_binding_t target = ArenaBinding();
  axrt_axe_fill_desc_t init = AXRT_AXE_FILL_DESC_INIT;
  init.target = &target;
  init.length = {kOne, 1};
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_fill(b, 0, &init);
  });
  EXPECT_INVALID(axrt_axe_builder_add_fill(builder.b, 0, nullptr), "desc");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_fill_desc_t* d) {
    return axrt_axe_builder_add_fill(builder.b, 0, d);
  });
  EXPECT_ERROR(axrt_axe_builder_add_fill(builder.b, 1, &init), AXRT_STATUS_CODE_NOT_FOUND,
               "function 1");
  axrt_axe_fill_desc_t desc = init;
  desc.target = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_fill(builder.b, 0, &desc), "desc->target");
  desc = init;
  desc.pattern_size = 0;
  EXPECT_INVALID(axrt_axe_builder_add_fill(builder.b, 0, &desc), "pattern size 0");
  desc.pattern_size = 1000;
  EXPECT_INVALID(axrt_axe_builder_add_fill(builder.b, 0, &desc), "pattern_size");
  desc = init;
  desc.pattern = 0x1FF;
  EXPECT_INVALID(axrt_axe_builder_add_fill(builder.b, 0, &desc), "does not fit");
  WalkBinding("desc->target", &target, [&] { return axrt_axe_builder_add_fill(builder.b, 0, &init); });
  EXPECT_OK(axrt_axe_builder_add_fill(builder.b, 0, &init));
}

BAD_ARGUMENTS(axrt_axe_builder_add_collective) {
  AxeBuilder builder;
  // Function 1, "g", with channel "tp" of two members.
  axrt_axe_channel_t channel = AXRT_AXE_CHANNEL_INIT;
  channel.name = "tp";
  channel.size = 2;
  axrt_axe_function_desc_t function = AXRT_AXE_FUNCTION_DESC_INIT;
  function.name = "g";
  function.arena_size = 64;
  function.channels = &channel;
  function.channel_count = 1;
  uint32_t index = 0;
  EXPECT_OK(axrt_axe_builder_add_function(builder.b, &function, &index));
  REQUIRE(index == 1);
  axrt_axe_binding_t arena = ArenaBinding();
  axrt_axe_collective_desc_t init = AXRT_AXE_COLLECTIVE_DESC_INIT;
  init.kind = AXRT_AXE_COLLECTIVE_ALL_REDUCE;
  init.dtype = AXRT_AXE_DTYPE_FLOAT32;
  init.count = {kOne, 1};
  init.send = &arena;
  init.recv = &arena;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_add_collective(b, 1, &init);
  });
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, nullptr), "desc");
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_axe_collective_desc_t* d) {
    return axrt_axe_builder_add_collective(builder.b, 1, d);
  });
  EXPECT_ERROR(axrt_axe_builder_add_collective(builder.b, 2, &init), AXRT_STATUS_CODE_NOT_FOUND,
               "function 2");
  EXPECT_ERROR(axrt_axe_builder_add_collective(builder.b, 0, &init), AXRT_STATUS_CODE_NOT_FOUND,
               "channel 0");
  axrt_axe_collective_desc_t desc = init;
  desc.kind = AXRT_AXE_COLLECTIVE_INVALID;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "not a collective");
  desc.kind = 1000;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "desc->kind");
  desc = init;
  desc.op = 3;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "not a reduction");
  desc = init;
  desc.kind = AXRT_AXE_COLLECTIVE_BROADCAST;
  desc.root = 2;
  EXPECT_ERROR(axrt_axe_builder_add_collective(builder.b, 1, &desc), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "root 2");
  desc = init;
  desc.send = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "desc->send");
  desc = init;
  desc.recv = nullptr;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "desc->recv");
  desc = init;
  desc.count = {nullptr, 0};
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "count");
  axrt_axe_binding_t constant = AXRT_AXE_BINDING_INIT;
  constant.kind = AXRT_AXE_BINDING_KIND_CONSTANT;
  desc = init;
  desc.recv = &constant;
  EXPECT_INVALID(axrt_axe_builder_add_collective(builder.b, 1, &desc), "recv must be");
  WalkBinding("desc->send", &arena, [&] { return axrt_axe_builder_add_collective(builder.b, 1, &init); });
  EXPECT_OK(axrt_axe_builder_add_collective(builder.b, 1, &init));
}

BAD_ARGUMENTS(axrt_axe_builder_write_file) {
  AxeBuilder builder;
  WalkBuilderHandle(*this, [](axrt_axe_builder_t b) {
    return axrt_axe_builder_write_file(b, "walk.axe");
  });
  EXPECT_INVALID(axrt_axe_builder_write_file(builder.b, nullptr), "path");
  EXPECT_INVALID(axrt_axe_builder_write_file(builder.b, ""), "path");
  EXPECT_ERROR(axrt_axe_builder_write_file(builder.b, "/nonexistent-axrt-walk/dir/x.axe"),
               AXRT_STATUS_CODE_UNAVAILABLE, "x.axe");
}

BAD_ARGUMENTS(axrt_axe_builder_write_memory) {
  AxeBuilder builder;
  void* data = Sentinel<void*>();
  size_t size = 7;
  WalkBuilderHandle(*this, [&](axrt_axe_builder_t b) {
    return axrt_axe_builder_write_memory(b, &data, &size);
  });
  EXPECT_INVALID(axrt_axe_builder_write_memory(builder.b, nullptr, &size), "out_data");
  EXPECT_INVALID(axrt_axe_builder_write_memory(builder.b, &data, nullptr), "out_size");
  CHECK(data == Sentinel<void*>());
  CHECK(size == 7);
  EXPECT_OK(axrt_axe_builder_write_memory(builder.b, &data, &size));
  CHECK(size > 64);
  axrt_axe_memory_free(data);
}

BAD_ARGUMENTS(axrt_axe_memory_free) {
  axrt_axe_memory_free(nullptr);
  SUCCEED("freeing NULL is a no-op");
}

// ---------------------------------------------------------------------------
// executable.h
// ---------------------------------------------------------------------------

// A one-kernel library for the walk: out[i] = in[i] over `n` floats.
using axrt_test::CopyFloatsKernel;
using axrt_test::kCopyFloatsParams;
const axrt_kernel_info_t kWalkKernels[] = {{"walk_copy", CopyFloatsKernel, kCopyFloatsParams, 3, 24}};
const axrt_kernel_library_t kWalkLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, "walk.kernels", kWalkKernels, 1,
    nullptr, nullptr};

// An executable with function "copy(x: f32[n<=64]) -> y: f32[n]", loaded on
// the world's device, and tensors to call it with.
struct WalkExecutable {
  explicit WalkExecutable(const World& world) {
    EXPECT_OK(axrt_instance_register_kernel_library(world.instance, &kWalkLibrary));
    bytes = axrt_test::BuildCopyExecutable("walk.kernels", "walk_copy");
    EXPECT_OK(axrt_executable_load_memory(world.device, bytes.data(), bytes.size(), nullptr,
                                          &executable));
    EXPECT_OK(axrt_executable_get_function(executable, 0, &function_handle));
    const int64_t shape[] = {8};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    EXPECT_OK(axrt_tensor_allocate(world.device, &desc, nullptr, &input));
  }
  ~WalkExecutable() {
    axrt_tensor_release(input);
    axrt_function_release(function_handle);
    axrt_executable_release(executable);
  }
  axrt_executable_t StaleExecutable(const World& world) const {
    axrt_executable_t stale = nullptr;
    EXPECT_OK(axrt_executable_load_memory(world.device, bytes.data(), bytes.size(), nullptr,
                                          &stale));
    axrt_executable_release(stale);
    return stale;
  }

  axrt_function_t StaleFunction(const World& world) const {
    axrt_executable_t owner = nullptr;
    axrt_function_t stale = nullptr;
    EXPECT_OK(axrt_executable_load_memory(world.device, bytes.data(), bytes.size(), nullptr,
                                          &owner));
    EXPECT_OK(axrt_executable_get_function(owner, 0, &stale));
    axrt_function_release(stale);
    axrt_executable_release(owner);
    return stale;
  }

  std::vector<uint8_t> bytes;
  axrt_executable_t executable = nullptr;
  axrt_function_t function_handle = nullptr;
  axrt_tensor_t input = nullptr;
};

const axrt_tensor_desc_t kWalkDesc = [] {
  static const int64_t shape[] = {4, 4};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = shape;
  return desc;
}();

BAD_ARGUMENTS(axrt_tensor_create) {
  axrt_tensor_t out = Sentinel<axrt_tensor_t>();
  EXPECT_INVALID(axrt_tensor_create(nullptr, &kWalkDesc, &out), "buffer");
  EXPECT_RELEASED(axrt_tensor_create(StaleBuffer(), &kWalkDesc, &out), "released");
  EXPECT_INVALID(axrt_tensor_create(As<axrt_buffer_t>(stream), &kWalkDesc, &out), "stream");
  EXPECT_INVALID(axrt_tensor_create(buffer, nullptr, &out), "desc");
  EXPECT_INVALID(axrt_tensor_create(buffer, &kWalkDesc, nullptr), "out_tensor");
  axrt_tensor_desc_t desc = kWalkDesc;
  desc.dtype = 999;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "dtype");
  desc = kWalkDesc;
  desc.rank = AXRT_TENSOR_MAX_RANK + 1;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "rank");
  desc = kWalkDesc;
  desc.shape = nullptr;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "shape");
  const int64_t negative[] = {4, -1};
  desc.shape = negative;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "shape[1]");
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  desc.shape = huge;
  EXPECT_ERROR_ANY(axrt_tensor_create(buffer, &desc, &out), "", AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   AXRT_STATUS_CODE_OUT_OF_RANGE);
  desc = kWalkDesc;
  desc.byte_offset = kBufferSize - 8;
  EXPECT_ERROR(axrt_tensor_create(buffer, &desc, &out), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "byte offset");
  desc.byte_offset = UINT64_MAX;
  EXPECT_ERROR(axrt_tensor_create(buffer, &desc, &out), AXRT_STATUS_CODE_OUT_OF_RANGE, "");
  desc = kWalkDesc;
  const int64_t negative_strides[] = {-4, 1};
  desc.strides = negative_strides;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "strides[0]");
  const int64_t overflowing[] = {int64_t{1} << 61, 1};
  desc.strides = overflowing;
  EXPECT_ERROR_ANY(axrt_tensor_create(buffer, &desc, &out), "", AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   AXRT_STATUS_CODE_OUT_OF_RANGE);
  const int64_t int4_shape[] = {8};
  const int64_t int4_strides[] = {2};
  desc = kWalkDesc;
  desc.dtype = AXRT_DTYPE_INT4;
  desc.rank = 1;
  desc.shape = int4_shape;
  desc.strides = int4_strides;
  EXPECT_INVALID(axrt_tensor_create(buffer, &desc, &out), "contiguous");
  WalkOptions(kWalkDesc, /*takes_label=*/false,
              [&](const axrt_tensor_desc_t* d) { return axrt_tensor_create(buffer, d, &out); });
  CHECK(out == Sentinel<axrt_tensor_t>());
}

BAD_ARGUMENTS(axrt_tensor_allocate) {
  axrt_tensor_t out = Sentinel<axrt_tensor_t>();
  EXPECT_INVALID(axrt_tensor_allocate(nullptr, &kWalkDesc, nullptr, &out), "device");
  EXPECT_INVALID(axrt_tensor_allocate(device, nullptr, nullptr, &out), "desc");
  EXPECT_INVALID(axrt_tensor_allocate(device, &kWalkDesc, nullptr, nullptr), "out_tensor");
  axrt_tensor_desc_t desc = kWalkDesc;
  const int64_t strides[] = {4, 1};
  desc.strides = strides;
  EXPECT_INVALID(axrt_tensor_allocate(device, &desc, nullptr, &out), "contiguous");
  desc = kWalkDesc;
  desc.byte_offset = 4;
  EXPECT_INVALID(axrt_tensor_allocate(device, &desc, nullptr, &out), "contiguous");
  desc = kWalkDesc;
  desc.dtype = AXRT_DTYPE_INVALID;
  EXPECT_INVALID(axrt_tensor_allocate(device, &desc, nullptr, &out), "dtype");
  desc = kWalkDesc;
  const int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  desc.shape = huge;
  EXPECT_INVALID(axrt_tensor_allocate(device, &desc, nullptr, &out), "shape");
  const int64_t big[] = {int64_t{1} << 28, int64_t{1} << 20};
  desc.shape = big;
  EXPECT_ERROR(axrt_tensor_allocate(device, &desc, nullptr, &out),
               AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "");
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.alignment = 3;
  EXPECT_INVALID(axrt_tensor_allocate(device, &kWalkDesc, &options, &out), "alignment");
  CHECK(out == Sentinel<axrt_tensor_t>());
}

BAD_ARGUMENTS(axrt_tensor_retain) {
  axrt_tensor_t stale = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &stale));
  axrt_tensor_release(stale);
  WalkRetainRelease(*this, &axrt_tensor_retain, stale, As<axrt_tensor_t>(buffer));
}

BAD_ARGUMENTS(axrt_tensor_release) {
  axrt_tensor_t stale = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &stale));
  axrt_tensor_release(stale);
  WalkRetainRelease(*this, &axrt_tensor_release, stale, As<axrt_tensor_t>(buffer));
}

BAD_ARGUMENTS(axrt_tensor_query_info) {
  axrt_tensor_t tensor = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &tensor));
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  EXPECT_INVALID(axrt_tensor_query_info(nullptr, &info), "tensor");
  EXPECT_INVALID(axrt_tensor_query_info(As<axrt_tensor_t>(buffer), &info), "buffer");
  WalkQueryStruct<axrt_tensor_info_t>(
      "out_info", [&](axrt_tensor_info_t* out) { return axrt_tensor_query_info(tensor, out); });
  axrt_tensor_release(tensor);
  EXPECT_RELEASED(axrt_tensor_query_info(tensor, &info), "released");
}

BAD_ARGUMENTS(axrt_tensor_get_buffer) {
  axrt_tensor_t tensor = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &tensor));
  axrt_buffer_t out = Sentinel<axrt_buffer_t>();
  EXPECT_INVALID(axrt_tensor_get_buffer(nullptr, &out), "tensor");
  EXPECT_INVALID(axrt_tensor_get_buffer(tensor, nullptr), "out_buffer");
  EXPECT_INVALID(axrt_tensor_get_buffer(As<axrt_tensor_t>(stream), &out), "stream");
  axrt_tensor_release(tensor);
  EXPECT_RELEASED(axrt_tensor_get_buffer(tensor, &out), "released");
  CHECK(out == Sentinel<axrt_buffer_t>());
}

BAD_ARGUMENTS(axrt_dtype_bit_width) {
  CHECK(axrt_dtype_bit_width(AXRT_DTYPE_INVALID) == 0);
  CHECK(axrt_dtype_bit_width(9999) == 0);
  CHECK(axrt_dtype_bit_width(AXRT_DTYPE_INT4) == 4);
}

BAD_ARGUMENTS(axrt_dtype_name) {
  CHECK(std::string(axrt_dtype_name(AXRT_DTYPE_INVALID)) == "invalid");
  CHECK(std::string(axrt_dtype_name(9999)) == "invalid");
  CHECK(std::string(axrt_dtype_name(AXRT_DTYPE_FLOAT32)) == "f32");
}

BAD_ARGUMENTS(axrt_instance_register_kernel_library) {
  EXPECT_INVALID(axrt_instance_register_kernel_library(nullptr, &kWalkLibrary), "instance");
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, nullptr), "library");
  EXPECT_RELEASED(axrt_instance_register_kernel_library(StaleInstance(), &kWalkLibrary),
                  "released");
  EXPECT_INVALID(axrt_instance_register_kernel_library(As<axrt_instance_t>(device), &kWalkLibrary),
                 "device");
  axrt_kernel_library_t library = kWalkLibrary;
  library.struct_size = 8;
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "struct_size");
  library = kWalkLibrary;
  library.name = "";
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "no name");
  library = kWalkLibrary;
  library.kernels = nullptr;
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "kernels is NULL");
  axrt_kernel_info_t kernels[2] = {kWalkKernels[0], kWalkKernels[0]};
  library = kWalkLibrary;
  library.kernels = kernels;
  library.kernel_count = 2;
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "appears twice");
  kernels[1].name = nullptr;
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "no name");
  kernels[1] = kWalkKernels[0];
  kernels[1].name = "other";
  kernels[1].function = nullptr;
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "no function");
  const axrt_kernel_param_info_t bad_scalar[] = {
      {"s", AXRT_KERNEL_PARAM_KIND_SCALAR, AXRT_DTYPE_INT4, nullptr}};
  kernels[1] = {"other", CopyFloatsKernel, bad_scalar, 1, 1};
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "does not define");
  kernels[1] = {"other", CopyFloatsKernel, nullptr, 2, 16};
  EXPECT_INVALID(axrt_instance_register_kernel_library(instance, &library), "params is NULL");
  EXPECT_OK(axrt_instance_register_kernel_library(instance, &kWalkLibrary));
  EXPECT_ERROR(axrt_instance_register_kernel_library(instance, &kWalkLibrary),
               AXRT_STATUS_CODE_ALREADY_EXISTS, "walk.kernels");
}

BAD_ARGUMENTS(axrt_executable_load_file) {
  axrt_executable_t out = Sentinel<axrt_executable_t>();
  EXPECT_INVALID(axrt_executable_load_file(nullptr, "x.axe", nullptr, &out), "device");
  EXPECT_INVALID(axrt_executable_load_file(device, nullptr, nullptr, &out), "path");
  EXPECT_INVALID(axrt_executable_load_file(device, "x.axe", nullptr, nullptr), "out_executable");
  EXPECT_RELEASED(axrt_executable_load_file(StaleDevice(), "x.axe", nullptr, &out), "released");
  EXPECT_ERROR(axrt_executable_load_file(device, "/nonexistent/walk.axe", nullptr, &out),
               AXRT_STATUS_CODE_NOT_FOUND, "walk.axe");
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.flags = 0x80;
  EXPECT_ERROR(axrt_executable_load_file(device, "x.axe", &options, &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "flags");
  const axrt_executable_load_options_t init = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_executable_load_options_t* o) {
    return axrt_executable_load_file(device, "x.axe", o, &out);
  });
  CHECK(out == Sentinel<axrt_executable_t>());
}

BAD_ARGUMENTS(axrt_executable_load_memory) {
  WalkExecutable walk(*this);
  axrt_executable_t out = Sentinel<axrt_executable_t>();
  const std::vector<uint8_t>& bytes = walk.bytes;
  EXPECT_INVALID(axrt_executable_load_memory(nullptr, bytes.data(), bytes.size(), nullptr, &out),
                 "device");
  EXPECT_INVALID(axrt_executable_load_memory(device, nullptr, bytes.size(), nullptr, &out), "data");
  EXPECT_INVALID(axrt_executable_load_memory(device, bytes.data(), bytes.size(), nullptr, nullptr),
                 "out_executable");
  EXPECT_INVALID(axrt_executable_load_memory(device, bytes.data(), 10, nullptr, &out), "<memory>");
  EXPECT_INVALID(axrt_executable_load_memory(device, bytes.data(), 0, nullptr, &out), "");
  std::vector<uint8_t> flipped = bytes;
  flipped[20] ^= 0x40;  // in the checksummed header
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.flags = AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS;
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("walk.axe");
  options.next = &label;
  axrt_status_t status =
      axrt_executable_load_memory(device, flipped.data(), flipped.size(), &options, &out);
  EXPECT_ERROR_ANY(status, "walk.axe", AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   AXRT_STATUS_CODE_DATA_LOSS, AXRT_STATUS_CODE_UNIMPLEMENTED);
  const axrt_executable_load_options_t init = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/true, [&](const axrt_executable_load_options_t* o) {
    return axrt_executable_load_memory(device, bytes.data(), bytes.size(), o, &out);
  });
  CHECK(out == Sentinel<axrt_executable_t>());
}

BAD_ARGUMENTS(axrt_executable_retain) {
  WalkExecutable walk(*this);
  WalkRetainRelease(*this, &axrt_executable_retain, walk.StaleExecutable(*this),
                    As<axrt_executable_t>(buffer));
}

BAD_ARGUMENTS(axrt_executable_release) {
  WalkExecutable walk(*this);
  WalkRetainRelease(*this, &axrt_executable_release, walk.StaleExecutable(*this),
                    As<axrt_executable_t>(buffer));
}

BAD_ARGUMENTS(axrt_executable_query_info) {
  WalkExecutable walk(*this);
  axrt_executable_info_t info = AXRT_EXECUTABLE_INFO_INIT;
  EXPECT_INVALID(axrt_executable_query_info(nullptr, &info), "executable");
  EXPECT_RELEASED(axrt_executable_query_info(walk.StaleExecutable(*this), &info), "released");
  EXPECT_INVALID(axrt_executable_query_info(As<axrt_executable_t>(walk.function_handle), &info),
                 "function");
  WalkQueryStruct<axrt_executable_info_t>("out_info", [&](axrt_executable_info_t* out) {
    return axrt_executable_query_info(walk.executable, out);
  });
}

BAD_ARGUMENTS(axrt_executable_get_function) {
  WalkExecutable walk(*this);
  axrt_function_t out = Sentinel<axrt_function_t>();
  EXPECT_INVALID(axrt_executable_get_function(nullptr, 0, &out), "executable");
  EXPECT_INVALID(axrt_executable_get_function(walk.executable, 0, nullptr), "out_function");
  EXPECT_ERROR(axrt_executable_get_function(walk.executable, 1, &out),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  EXPECT_ERROR(axrt_executable_get_function(walk.executable, UINT32_MAX, &out),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  EXPECT_RELEASED(axrt_executable_get_function(walk.StaleExecutable(*this), 0, &out), "released");
  CHECK(out == Sentinel<axrt_function_t>());
}

BAD_ARGUMENTS(axrt_executable_find_function) {
  WalkExecutable walk(*this);
  axrt_function_t out = Sentinel<axrt_function_t>();
  EXPECT_INVALID(axrt_executable_find_function(nullptr, "copy", &out), "executable");
  EXPECT_INVALID(axrt_executable_find_function(walk.executable, nullptr, &out), "name");
  EXPECT_INVALID(axrt_executable_find_function(walk.executable, "copy", nullptr), "out_function");
  EXPECT_ERROR(axrt_executable_find_function(walk.executable, "", &out),
               AXRT_STATUS_CODE_NOT_FOUND, "it has: copy");
  EXPECT_ERROR(axrt_executable_find_function(walk.executable, "Copy", &out),
               AXRT_STATUS_CODE_NOT_FOUND, "'Copy'");
  CHECK(out == Sentinel<axrt_function_t>());
}

BAD_ARGUMENTS(axrt_executable_get_device) {
  WalkExecutable walk(*this);
  axrt_device_t out = Sentinel<axrt_device_t>();
  EXPECT_INVALID(axrt_executable_get_device(nullptr, &out), "executable");
  EXPECT_INVALID(axrt_executable_get_device(walk.executable, nullptr), "out_device");
  EXPECT_INVALID(axrt_executable_get_device(As<axrt_executable_t>(stream), &out), "stream");
  CHECK(out == Sentinel<axrt_device_t>());
  EXPECT_OK(axrt_executable_get_device(walk.executable, &out));
  CHECK(out == device);
  axrt_device_release(out);
}

BAD_ARGUMENTS(axrt_executable_get_metadata) {
  WalkExecutable walk(*this);
  const char* key = nullptr;
  const char* value = nullptr;
  size_t size = 7;
  EXPECT_INVALID(axrt_executable_get_metadata(nullptr, 0, &key, &value, &size), "executable");
  EXPECT_INVALID(axrt_executable_get_metadata(walk.executable, 0, nullptr, &value, &size),
                 "out_key");
  EXPECT_INVALID(axrt_executable_get_metadata(walk.executable, 0, &key, nullptr, &size),
                 "out_value");
  EXPECT_INVALID(axrt_executable_get_metadata(As<axrt_executable_t>(stream), 0, &key, &value,
                                              &size),
                 "stream");
  // The walk's executable carries no metadata.
  EXPECT_ERROR(axrt_executable_get_metadata(walk.executable, 0, &key, &value, &size),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "has 0 entries");
  CHECK(key == nullptr);
  CHECK(value == nullptr);
  CHECK(size == 7);
}

BAD_ARGUMENTS(axrt_executable_find_metadata) {
  WalkExecutable walk(*this);
  const char* value = nullptr;
  EXPECT_INVALID(axrt_executable_find_metadata(nullptr, "k", &value, nullptr), "executable");
  EXPECT_INVALID(axrt_executable_find_metadata(walk.executable, nullptr, &value, nullptr), "key");
  EXPECT_INVALID(axrt_executable_find_metadata(walk.executable, "k", nullptr, nullptr),
                 "out_value");
  EXPECT_ERROR(axrt_executable_find_metadata(walk.executable, "model", &value, nullptr),
               AXRT_STATUS_CODE_NOT_FOUND, "no metadata entry 'model'");
  CHECK(value == nullptr);
}

BAD_ARGUMENTS(axrt_function_retain) {
  WalkExecutable walk(*this);
  const axrt_function_t stale = walk.StaleFunction(*this);
  WalkRetainRelease(*this, &axrt_function_retain, stale, As<axrt_function_t>(walk.executable));
}

BAD_ARGUMENTS(axrt_function_release) {
  WalkExecutable walk(*this);
  const axrt_function_t stale = walk.StaleFunction(*this);
  WalkRetainRelease(*this, &axrt_function_release, stale, As<axrt_function_t>(walk.executable));
  // The walk's own function still works.
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  EXPECT_OK(axrt_function_query_info(walk.function_handle, &info));
}

BAD_ARGUMENTS(axrt_function_query_info) {
  WalkExecutable walk(*this);
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  EXPECT_INVALID(axrt_function_query_info(nullptr, &info), "function");
  EXPECT_INVALID(axrt_function_query_info(As<axrt_function_t>(walk.executable), &info),
                 "executable");
  WalkQueryStruct<axrt_function_info_t>("out_info", [&](axrt_function_info_t* out) {
    return axrt_function_query_info(walk.function_handle, out);
  });
}

BAD_ARGUMENTS(axrt_function_query_argument) {
  WalkExecutable walk(*this);
  axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
  EXPECT_INVALID(axrt_function_query_argument(nullptr, AXRT_ARGUMENT_KIND_INPUT, 0, &info),
                 "function");
  EXPECT_INVALID(axrt_function_query_argument(walk.function_handle, 0, 0, &info), "kind");
  EXPECT_INVALID(axrt_function_query_argument(walk.function_handle, 3, 0, &info), "kind");
  EXPECT_ERROR(axrt_function_query_argument(walk.function_handle, AXRT_ARGUMENT_KIND_OUTPUT, 1,
                                            &info),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  WalkQueryStruct<axrt_argument_info_t>("out_info", [&](axrt_argument_info_t* out) {
    return axrt_function_query_argument(walk.function_handle, AXRT_ARGUMENT_KIND_INPUT, 0, out);
  });
}

BAD_ARGUMENTS(axrt_function_query_symbol) {
  WalkExecutable walk(*this);
  const char* name = "untouched";
  uint64_t bound = 7;
  EXPECT_INVALID(axrt_function_query_symbol(nullptr, 0, &name, &bound), "function");
  EXPECT_INVALID(axrt_function_query_symbol(walk.function_handle, 0, nullptr, &bound), "out_name");
  EXPECT_INVALID(axrt_function_query_symbol(walk.function_handle, 0, &name, nullptr),
                 "out_upper_bound");
  EXPECT_ERROR(axrt_function_query_symbol(walk.function_handle, 1, &name, &bound),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "index");
  CHECK(std::string(name) == "untouched");
  CHECK(bound == 7);
}

BAD_ARGUMENTS(axrt_function_query_channel) {
  WalkExecutable walk(*this);
  const char* name = "untouched";
  uint32_t size = 7;
  EXPECT_INVALID(axrt_function_query_channel(nullptr, 0, &name, &size), "function");
  EXPECT_INVALID(axrt_function_query_channel(walk.function_handle, 0, nullptr, &size), "out_name");
  EXPECT_INVALID(axrt_function_query_channel(walk.function_handle, 0, &name, nullptr), "out_size");
  EXPECT_ERROR(axrt_function_query_channel(walk.function_handle, 0, &name, &size),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "has 0 channel(s)");
  CHECK(std::string(name) == "untouched");
  CHECK(size == 7);
}

BAD_ARGUMENTS(axrt_function_invoke) {
  WalkExecutable walk(*this);
  axrt_tensor_t inputs[] = {walk.input};
  axrt_tensor_t outputs[] = {nullptr};
  axrt_function_t fn = walk.function_handle;
  EXPECT_INVALID(axrt_function_invoke(nullptr, stream, inputs, 1, outputs, 1, nullptr), "function");
  EXPECT_INVALID(axrt_function_invoke(fn, nullptr, inputs, 1, outputs, 1, nullptr), "stream");
  EXPECT_RELEASED(axrt_function_invoke(fn, StaleStream(), inputs, 1, outputs, 1, nullptr),
                  "released");
  EXPECT_INVALID(axrt_function_invoke(fn, As<axrt_stream_t>(buffer), inputs, 1, outputs, 1, nullptr),
                 "buffer");
  EXPECT_INVALID(axrt_function_invoke(fn, stream, nullptr, 1, outputs, 1, nullptr), "inputs");
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, nullptr, 1, nullptr), "outputs");
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 0, outputs, 1, nullptr), "1 inputs");
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 2, nullptr), "1 outputs");
  axrt_tensor_t wrong_kind[] = {As<axrt_tensor_t>(buffer)};
  EXPECT_INVALID(axrt_function_invoke(fn, stream, wrong_kind, 1, outputs, 1, nullptr), "inputs[0]");
  axrt_tensor_t stale = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &stale));
  axrt_tensor_release(stale);
  axrt_tensor_t stale_inputs[] = {stale};
  EXPECT_RELEASED(axrt_function_invoke(fn, stream, stale_inputs, 1, outputs, 1, nullptr),
                  "inputs[0]");
  axrt_tensor_t matrix = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &matrix));
  axrt_tensor_t matrix_inputs[] = {matrix};
  EXPECT_INVALID(axrt_function_invoke(fn, stream, matrix_inputs, 1, outputs, 1, nullptr),
                 "f32[4, 4] but the signature wants f32[n<=64]");
  axrt_tensor_t matrix_outputs[] = {matrix};
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, matrix_outputs, 1, nullptr),
                 "output 0 ('y')");
  axrt_tensor_release(matrix);
  // Channels (format 1.4): none to bind here, and a count without an array.
  axrt_invoke_options_t bound = AXRT_INVOKE_OPTIONS_INIT;
  bound.channel_count = 1;
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &bound),
                 "options->channels");
  axrt_invoke_channel_t channel = {nullptr, 0};
  bound.channels = &channel;
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &bound),
                 "has 0 channel(s); `options->channels` binds 1");
  // A deallocated buffer under a tensor.
  axrt_buffer_t doomed = nullptr;
  EXPECT_OK(axrt_buffer_allocate(device, 64, nullptr, &doomed));
  const int64_t eight[] = {8};
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 1;
  desc.shape = eight;
  axrt_tensor_t on_doomed = nullptr;
  EXPECT_OK(axrt_tensor_create(doomed, &desc, &on_doomed));
  EXPECT_OK(axrt_stream_deallocate_buffer(stream, doomed));
  axrt_tensor_t doomed_inputs[] = {on_doomed};
  EXPECT_INVALID(axrt_function_invoke(fn, stream, doomed_inputs, 1, outputs, 1, nullptr),
                 "deallocated");
  axrt_tensor_release(on_doomed);
  axrt_buffer_release(doomed);
  // A read-only output (imported from a read-only DLPack tensor).
  DLManagedTensorVersioned* exported = nullptr;
  EXPECT_OK(axrt_tensor_export_dlpack_versioned(walk.input, AXRT_DLPACK_FLAG_READ_ONLY, &exported));
  axrt_tensor_t read_only = nullptr;
  EXPECT_OK(axrt_tensor_import_dlpack_versioned(instance, exported, &read_only));
  axrt_tensor_t read_only_outputs[] = {read_only};
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, read_only_outputs, 1, nullptr),
                 "output 0 ('y') is read-only");
  axrt_tensor_release(read_only);
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.flags = 1u << 31;
  EXPECT_ERROR(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &options),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "flags");
  // The dump flag and its directory go together; the directory must exist.
  options.flags = AXRT_INVOKE_FLAG_DUMP;
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &options),
                 "dump_directory");
  axrt_invoke_options_t old_size = options;  // a header from before the field
  old_size.struct_size = offsetof(axrt_invoke_options_t, dump_directory);
  old_size.dump_directory = AXRT_PUBLIC_HEADER_DIR;
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &old_size),
                 "dump_directory");
  options.flags = 0;
  options.dump_directory = AXRT_PUBLIC_HEADER_DIR;
  EXPECT_INVALID(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &options),
                 "AXRT_INVOKE_FLAG_DUMP");
  options.flags = AXRT_INVOKE_FLAG_DUMP | AXRT_INVOKE_FLAG_CHECK_FINITE;
  options.dump_directory = AXRT_PUBLIC_HEADER_DIR "/no-such-folder";
  EXPECT_ERROR(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &options),
               AXRT_STATUS_CODE_NOT_FOUND, "does not exist");
  options.dump_directory = AXRT_PUBLIC_HEADER_DIR "/executable.h";
  EXPECT_ERROR(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, &options),
               AXRT_STATUS_CODE_NOT_FOUND, "not a directory");
  const axrt_invoke_options_t init = AXRT_INVOKE_OPTIONS_INIT;
  WalkOptions(init, /*takes_label=*/false, [&](const axrt_invoke_options_t* o) {
    return axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, o);
  });
  CHECK(outputs[0] == nullptr);
  ExpectHealthy();
  EXPECT_OK(axrt_function_invoke(fn, stream, inputs, 1, outputs, 1, nullptr));
  CHECK(outputs[0] != nullptr);
  axrt_tensor_release(outputs[0]);
  ExpectHealthy();
}

// A graph of the walk's function over its input and an output of the same
// shape, and one already released.
struct WalkGraph {
  WalkGraph(const World& world, WalkExecutable& walk) {
    // The shape of the walk's input: its output has the same.
    const int64_t shape[] = {8};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    EXPECT_OK(axrt_tensor_allocate(world.device, &desc, nullptr, &output));
    axrt_tensor_t inputs[] = {walk.input};
    axrt_tensor_t outputs[] = {output};
    EXPECT_OK(axrt_function_capture(walk.function_handle, world.stream, inputs, 1, outputs, 1,
                                    nullptr, &graph));
    EXPECT_OK(axrt_function_capture(walk.function_handle, world.stream, inputs, 1, outputs, 1,
                                    nullptr, &stale));
    axrt_graph_release(stale);
  }
  ~WalkGraph() {
    axrt_graph_release(graph);
    axrt_tensor_release(output);
  }
  axrt_tensor_t output = nullptr;
  axrt_graph_t graph = nullptr;
  axrt_graph_t stale = nullptr;
};

BAD_ARGUMENTS(axrt_function_capture) {
  WalkExecutable walk(*this);
  WalkGraph made(*this, walk);
  axrt_tensor_t inputs[] = {walk.input};
  axrt_tensor_t outputs[] = {made.output};
  axrt_function_t fn = walk.function_handle;
  axrt_graph_t graph = As<axrt_graph_t>(buffer);  // overwritten with NULL on failure
  EXPECT_INVALID(axrt_function_capture(fn, stream, inputs, 1, outputs, 1, nullptr, nullptr),
                 "out_graph");
  EXPECT_INVALID(axrt_function_capture(nullptr, stream, inputs, 1, outputs, 1, nullptr, &graph),
                 "function");
  CHECK(graph == nullptr);
  EXPECT_INVALID(axrt_function_capture(fn, nullptr, inputs, 1, outputs, 1, nullptr, &graph),
                 "stream");
  EXPECT_RELEASED(axrt_function_capture(fn, StaleStream(), inputs, 1, outputs, 1, nullptr, &graph),
                  "released");
  EXPECT_INVALID(axrt_function_capture(fn, stream, nullptr, 1, outputs, 1, nullptr, &graph),
                 "inputs");
  EXPECT_INVALID(axrt_function_capture(fn, stream, inputs, 1, nullptr, 1, nullptr, &graph),
                 "outputs");
  EXPECT_INVALID(axrt_function_capture(fn, stream, inputs, 0, outputs, 1, nullptr, &graph),
                 "1 inputs");
  axrt_tensor_t none[] = {nullptr};
  EXPECT_INVALID(axrt_function_capture(fn, stream, inputs, 1, none, 1, nullptr, &graph),
                 "`outputs[0]` ('y' of function");
  axrt_tensor_t wrong_kind[] = {As<axrt_tensor_t>(buffer)};
  EXPECT_INVALID(axrt_function_capture(fn, stream, wrong_kind, 1, outputs, 1, nullptr, &graph),
                 "inputs[0]");
  int reserved = 0;
  EXPECT_INVALID(axrt_function_capture(fn, stream, inputs, 1, outputs, 1, &reserved, &graph),
                 "`options` is reserved");
  CHECK(graph == nullptr);
}

BAD_ARGUMENTS(axrt_graph_replay) {
  WalkExecutable walk(*this);
  WalkGraph made(*this, walk);
  EXPECT_INVALID(axrt_graph_replay(nullptr), "graph");
  EXPECT_RELEASED(axrt_graph_replay(made.stale), "released");
  EXPECT_INVALID(axrt_graph_replay(As<axrt_graph_t>(buffer)), "buffer");
  EXPECT_OK(axrt_graph_replay(made.graph));
  EXPECT_OK(axrt_stream_synchronize(stream));
}

BAD_ARGUMENTS(axrt_graph_query_info) {
  WalkExecutable walk(*this);
  WalkGraph made(*this, walk);
  axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
  EXPECT_INVALID(axrt_graph_query_info(nullptr, &info), "graph");
  EXPECT_RELEASED(axrt_graph_query_info(made.stale, &info), "released");
  EXPECT_INVALID(axrt_graph_query_info(As<axrt_graph_t>(buffer), &info), "buffer");
  WalkQueryStruct<axrt_graph_info_t>("out_info", [&](axrt_graph_info_t* out) {
    return axrt_graph_query_info(made.graph, out);
  });
}

BAD_ARGUMENTS(axrt_graph_retain) {
  WalkExecutable walk(*this);
  WalkGraph made(*this, walk);
  WalkRetainRelease(*this, &axrt_graph_retain, made.stale, As<axrt_graph_t>(buffer));
}

BAD_ARGUMENTS(axrt_graph_release) {
  WalkExecutable walk(*this);
  WalkGraph made(*this, walk);
  WalkRetainRelease(*this, &axrt_graph_release, made.stale, As<axrt_graph_t>(buffer));
  // The walk's own graph still works.
  EXPECT_OK(axrt_graph_replay(made.graph));
  EXPECT_OK(axrt_stream_synchronize(stream));
}

// ---------------------------------------------------------------------------
// dlpack.h
// ---------------------------------------------------------------------------

// A producer's f32[4] over memory of its own, whose deleters count calls.
struct WalkProducer {
  float data[4] = {0, 1, 2, 3};
  int64_t shape[1] = {4};
  int deleted = 0;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  DLTensor Describe() {
    DLTensor t{};
    t.data = data;
    t.device.device_type = kDLCPU;
    t.device.device_id = 0;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
  }
  DLManagedTensorVersioned* Versioned(uint32_t major = 1) {
    versioned.version.major = major;
    versioned.version.minor = 0;
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<WalkProducer*>(self->manager_ctx)->deleted;
    };
    versioned.flags = 0;
    versioned.dl_tensor = Describe();
    return &versioned;
  }
  DLManagedTensor* Legacy() {
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      ++static_cast<WalkProducer*>(self->manager_ctx)->deleted;
    };
    legacy.dl_tensor = Describe();
    return &legacy;
  }
};

BAD_ARGUMENTS(axrt_tensor_export_dlpack_versioned) {
  axrt_tensor_t tensor = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &tensor));
  DLManagedTensorVersioned* out = Sentinel<DLManagedTensorVersioned*>();
  EXPECT_INVALID(axrt_tensor_export_dlpack_versioned(nullptr, 0, &out), "tensor");
  EXPECT_INVALID(axrt_tensor_export_dlpack_versioned(tensor, 0, nullptr), "out");
  EXPECT_INVALID(axrt_tensor_export_dlpack_versioned(As<axrt_tensor_t>(buffer), 0, &out),
                 "buffer");
  EXPECT_ERROR(axrt_tensor_export_dlpack_versioned(tensor, 0x80000000u, &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "flags");
  axrt_buffer_t doomed = nullptr;
  EXPECT_OK(axrt_buffer_allocate(device, 64, nullptr, &doomed));
  axrt_tensor_t on_doomed = nullptr;
  EXPECT_OK(axrt_tensor_create(doomed, &kWalkDesc, &on_doomed));
  EXPECT_OK(axrt_stream_deallocate_buffer(stream, doomed));
  EXPECT_ERROR(axrt_tensor_export_dlpack_versioned(on_doomed, 0, &out),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
  axrt_tensor_release(on_doomed);
  axrt_buffer_release(doomed);
  axrt_tensor_release(tensor);
  EXPECT_RELEASED(axrt_tensor_export_dlpack_versioned(tensor, 0, &out), "released");
  CHECK(out == Sentinel<DLManagedTensorVersioned*>());
  ExpectHealthy();
}

BAD_ARGUMENTS(axrt_dtype_to_dlpack) {
  DLDataType out = {0xee, 0xee, 0xeeee};
  EXPECT_INVALID(axrt_dtype_to_dlpack(AXRT_DTYPE_FLOAT32, nullptr), "out_dtype");
  EXPECT_INVALID(axrt_dtype_to_dlpack(AXRT_DTYPE_INVALID, &out), "dtype");
  EXPECT_INVALID(axrt_dtype_to_dlpack(9999, &out), "dtype");
  CHECK(out.code == 0xee);
  EXPECT_OK(axrt_dtype_to_dlpack(AXRT_DTYPE_BFLOAT16, &out));
  CHECK(out.code == kDLBfloat);
  CHECK(out.bits == 16);
  CHECK(out.lanes == 1);
}

BAD_ARGUMENTS(axrt_tensor_export_dlpack) {
  axrt_tensor_t tensor = nullptr;
  EXPECT_OK(axrt_tensor_create(buffer, &kWalkDesc, &tensor));
  DLManagedTensor* out = Sentinel<DLManagedTensor*>();
  EXPECT_INVALID(axrt_tensor_export_dlpack(nullptr, &out), "tensor");
  EXPECT_INVALID(axrt_tensor_export_dlpack(tensor, nullptr), "out");
  EXPECT_INVALID(axrt_tensor_export_dlpack(As<axrt_tensor_t>(stream), &out), "stream");
  axrt_tensor_release(tensor);
  EXPECT_RELEASED(axrt_tensor_export_dlpack(tensor, &out), "released");
  CHECK(out == Sentinel<DLManagedTensor*>());
}

BAD_ARGUMENTS(axrt_tensor_import_dlpack_versioned) {
  WalkProducer producer;
  axrt_tensor_t out = Sentinel<axrt_tensor_t>();
  EXPECT_INVALID(axrt_tensor_import_dlpack_versioned(nullptr, producer.Versioned(), &out),
                 "instance");
  EXPECT_RELEASED(axrt_tensor_import_dlpack_versioned(StaleInstance(), producer.Versioned(), &out),
                  "released");
  EXPECT_INVALID(
      axrt_tensor_import_dlpack_versioned(As<axrt_instance_t>(stream), producer.Versioned(), &out),
      "stream");
  EXPECT_INVALID(axrt_tensor_import_dlpack_versioned(instance, nullptr, &out), "managed");
  EXPECT_INVALID(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), nullptr),
                 "out");
  EXPECT_ERROR(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(2), &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "managed->version");
  DLManagedTensorVersioned* managed = producer.Versioned();
  managed->dl_tensor.dtype.lanes = 2;
  EXPECT_ERROR(axrt_tensor_import_dlpack_versioned(instance, managed, &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "lanes");
  managed = producer.Versioned();
  managed->dl_tensor.shape = nullptr;
  EXPECT_INVALID(axrt_tensor_import_dlpack_versioned(instance, managed, &out), "shape");
  managed = producer.Versioned();
  managed->dl_tensor.data = nullptr;
  EXPECT_INVALID(axrt_tensor_import_dlpack_versioned(instance, managed, &out), "data");
  CHECK(out == Sentinel<axrt_tensor_t>());
  CHECK(producer.deleted == 0);
  EXPECT_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &out));
  axrt_tensor_release(out);
  CHECK(producer.deleted == 1);
}

BAD_ARGUMENTS(axrt_tensor_import_dlpack) {
  WalkProducer producer;
  axrt_tensor_t out = Sentinel<axrt_tensor_t>();
  EXPECT_INVALID(axrt_tensor_import_dlpack(nullptr, producer.Legacy(), &out), "instance");
  EXPECT_RELEASED(axrt_tensor_import_dlpack(StaleInstance(), producer.Legacy(), &out),
                  "released");
  EXPECT_INVALID(axrt_tensor_import_dlpack(As<axrt_instance_t>(buffer), producer.Legacy(), &out),
                 "buffer");
  EXPECT_INVALID(axrt_tensor_import_dlpack(instance, nullptr, &out), "managed");
  EXPECT_INVALID(axrt_tensor_import_dlpack(instance, producer.Legacy(), nullptr), "out");
  DLManagedTensor* managed = producer.Legacy();
  managed->dl_tensor.ndim = -1;
  EXPECT_INVALID(axrt_tensor_import_dlpack(instance, managed, &out), "ndim");
  managed = producer.Legacy();
  managed->dl_tensor.device.device_type = kDLOpenCL;
  EXPECT_ERROR(axrt_tensor_import_dlpack(instance, managed, &out),
               AXRT_STATUS_CODE_UNIMPLEMENTED, "kDLOpenCL");
  CHECK(out == Sentinel<axrt_tensor_t>());
  CHECK(producer.deleted == 0);
  EXPECT_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &out));
  axrt_tensor_release(out);
  CHECK(producer.deleted == 1);
}

// ---------------------------------------------------------------------------
// Every public function has a case above
// ---------------------------------------------------------------------------

// Removes comments and preprocessor lines, which mention AXRT_API without
// declaring anything.
std::string DeclarationsOnly(const std::string& source) {
  std::string code;
  for (size_t i = 0; i < source.size();) {
    if (source.compare(i, 2, "/*") == 0) {
      size_t end = source.find("*/", i + 2);
      i = end == std::string::npos ? source.size() : end + 2;
      code += ' ';
    } else if (source.compare(i, 2, "//") == 0) {
      i = source.find('\n', i);
      if (i == std::string::npos) i = source.size();
    } else {
      code += source[i++];
    }
  }
  std::istringstream lines(code);
  std::string line;
  std::string result;
  bool continued = false;
  while (std::getline(lines, line)) {
    size_t first = line.find_first_not_of(" \t");
    bool directive =
        continued || (first != std::string::npos && line[first] == '#');
    continued = directive && !line.empty() && line.back() == '\\';
    if (!directive) result += line + '\n';
  }
  return result;
}

std::set<std::string> DeclaredFunctions() {
  std::set<std::string> names;
  const std::regex declaration(R"(AXRT_API\s+[^;{}()]*?\b(axrt_[A-Za-z0-9_]+)\s*\()");
  for (const auto& entry :
       std::filesystem::directory_iterator(AXRT_PUBLIC_HEADER_DIR)) {
    if (entry.path().extension() != ".h") continue;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    std::string code = DeclarationsOnly(text.str());
    for (std::sregex_iterator it(code.begin(), code.end(), declaration), end;
         it != end; ++it) {
      names.insert((*it)[1].str());
    }
  }
  return names;
}

TEST_CASE("every AXRT_API function has a bad-argument case",
          "[bad_arguments][coverage]") {
  const std::set<std::string> declared = DeclaredFunctions();
  // A parser that finds nothing would pass vacuously.
  REQUIRE(declared.size() >= 40);
  REQUIRE(declared.count("axrt_stream_copy_2d") == 1);
  REQUIRE(declared.count("axrt_version") == 1);

  std::vector<std::string> missing;
  for (const std::string& name : declared) {
    if (Walked().count(name) == 0) missing.push_back(name);
  }
  std::vector<std::string> unknown;
  for (const std::string& name : Walked()) {
    if (declared.count(name) == 0) unknown.push_back(name);
  }
  std::string missing_list;
  for (const std::string& name : missing) missing_list += " " + name;
  std::string unknown_list;
  for (const std::string& name : unknown) unknown_list += " " + name;
  INFO("declared in " << AXRT_PUBLIC_HEADER_DIR << " without a case:"
                      << missing_list);
  INFO("walked but not found by the header scan:" << unknown_list);
  CHECK(missing.empty());
  CHECK(unknown.empty());
}

}  // namespace

// ---------------------------------------------------------------------------
// The serving engine (its lifecycle over a stand-in model is
// serving_engine_test.cc; the real model's is tests/python/test_serving_*.py)
// ---------------------------------------------------------------------------

namespace {
void IgnoreEvent(void*, const axrt_engine_event_t*) {}
}  // namespace

BAD_ARGUMENTS(axrt_engine_create) {
  WalkExecutable walk(*this);
  axrt_engine_t engine = nullptr;
  axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
  options.callback = &IgnoreEvent;
  EXPECT_INVALID(axrt_engine_create(nullptr, &options, &engine), "NULL");
  EXPECT_INVALID(axrt_engine_create(walk.executable, nullptr, &engine), "NULL");
  EXPECT_INVALID(axrt_engine_create(walk.executable, &options, nullptr), "NULL");
  options.struct_size = 4;
  EXPECT_INVALID(axrt_engine_create(walk.executable, &options, &engine), "struct_size");
  options.struct_size = sizeof options;
  options.callback = nullptr;
  EXPECT_INVALID(axrt_engine_create(walk.executable, &options, &engine), "callback");
  options.callback = &IgnoreEvent;
  EXPECT_INVALID(axrt_engine_create(walk.executable, &options, &engine), "no `step` function");
  CHECK(engine == nullptr);
}

BAD_ARGUMENTS(axrt_engine_follow) {
  // Following a head is tests/python/test_serving_processes.py.
  WalkExecutable walk(*this);
  axrt_group_t group = nullptr;
  EXPECT_OK(axrt_group_create(&device, 1, nullptr, &group));
  EXPECT_INVALID(axrt_engine_follow(nullptr, group, nullptr), "NULL");
  EXPECT_INVALID(axrt_engine_follow(walk.executable, nullptr, nullptr), "NULL");
  axrt_engine_follow_options_t options = AXRT_ENGINE_FOLLOW_OPTIONS_INIT;
  options.struct_size = 4;
  EXPECT_INVALID(axrt_engine_follow(walk.executable, group, &options), "struct_size");
  EXPECT_INVALID(axrt_engine_follow(walk.executable, group, nullptr), "group of one process");
  axrt_group_destroy(group);
}

BAD_ARGUMENTS(axrt_engine_add_request) {
  axrt_request_t request = AXRT_REQUEST_INIT;
  EXPECT_INVALID(axrt_engine_add_request(nullptr, &request), "NULL");
}

BAD_ARGUMENTS(axrt_engine_cancel) {
  EXPECT_INVALID(axrt_engine_cancel(nullptr, 1), "NULL");
}

BAD_ARGUMENTS(axrt_engine_query_stats) {
  axrt_engine_stats_t stats = AXRT_ENGINE_STATS_INIT;
  EXPECT_INVALID(axrt_engine_query_stats(nullptr, &stats), "NULL");
}

BAD_ARGUMENTS(axrt_engine_destroy) {
  axrt_engine_destroy(nullptr);  // a no-op
}

// ---------------------------------------------------------------------------
// trace.h (what a trace records is trace_test.cc and tests/python/test_profile.py)
// ---------------------------------------------------------------------------

BAD_ARGUMENTS(axrt_instance_trace_start) {
  const std::string path = (std::filesystem::temp_directory_path() /
                           ("walk-trace-" + std::to_string(::getpid()) + ".json")).string();
  axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
  options.path = path.c_str();
  EXPECT_INVALID(axrt_instance_trace_start(nullptr, &options), "instance");
  EXPECT_INVALID(axrt_instance_trace_start(As<axrt_instance_t>(device), &options), "device");
  EXPECT_RELEASED(axrt_instance_trace_start(StaleInstance(), &options), "instance");
  EXPECT_INVALID(axrt_instance_trace_start(instance, nullptr), "options");
  axrt_trace_options_t no_path = AXRT_TRACE_OPTIONS_INIT;
  EXPECT_INVALID(axrt_instance_trace_start(instance, &no_path), "path");
  axrt_trace_options_t empty_path = AXRT_TRACE_OPTIONS_INIT;
  empty_path.path = "";
  EXPECT_INVALID(axrt_instance_trace_start(instance, &empty_path), "path");
  axrt_trace_options_t bad_path = AXRT_TRACE_OPTIONS_INIT;
  bad_path.path = "no-such-directory-of-the-walk/trace.json";
  EXPECT_ERROR(axrt_instance_trace_start(instance, &bad_path), AXRT_STATUS_CODE_NOT_FOUND,
               "no-such-directory-of-the-walk");
  WalkOptions(options, /*takes_label=*/false,
              [&](const axrt_trace_options_t* o) { return axrt_instance_trace_start(instance, o); });
  CHECK_FALSE(axrt_trace_is_active());
  // One trace at a time.
  EXPECT_OK(axrt_instance_trace_start(instance, &options));
  EXPECT_ERROR(axrt_instance_trace_start(instance, &options),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "already running");
  EXPECT_OK(axrt_instance_trace_stop(instance, nullptr));
  std::remove(path.c_str());
}

BAD_ARGUMENTS(axrt_instance_trace_stop) {
  axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
  EXPECT_INVALID(axrt_instance_trace_stop(nullptr, &result), "instance");
  EXPECT_INVALID(axrt_instance_trace_stop(As<axrt_instance_t>(stream), &result), "stream");
  EXPECT_RELEASED(axrt_instance_trace_stop(StaleInstance(), &result), "instance");
  EXPECT_ERROR(axrt_instance_trace_stop(instance, &result), AXRT_STATUS_CODE_FAILED_PRECONDITION,
               "no trace is running");
  // Only the instance that started a trace stops it.
  const std::string path = (std::filesystem::temp_directory_path() /
                           ("walk-trace-stop-" + std::to_string(::getpid()) + ".json")).string();
  axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
  options.path = path.c_str();
  axrt_instance_t other = nullptr;
  EXPECT_OK(axrt_instance_create(nullptr, &other));
  EXPECT_OK(axrt_instance_trace_start(other, &options));
  EXPECT_ERROR(axrt_instance_trace_stop(instance, &result), AXRT_STATUS_CODE_FAILED_PRECONDITION,
               "another instance");
  // `out_result` may be NULL, but not too small; a refused stop keeps the trace running.
  for (size_t size : {size_t{0}, sizeof(size_t)}) {
    Guarded<axrt_trace_result_t> small(size);
    EXPECT_INVALID(axrt_instance_trace_stop(other, small.get()), "struct_size");
    CHECK(small.untouched());
  }
  CHECK(axrt_trace_is_active());
  // Destroying the instance stops its trace and writes the file.
  axrt_instance_release(other);
  CHECK_FALSE(axrt_trace_is_active());
  std::FILE* file = std::fopen(path.c_str(), "rb");
  CHECK(file != nullptr);
  if (file) std::fclose(file);
  std::remove(path.c_str());
}

BAD_ARGUMENTS(axrt_trace_is_active) { CHECK_FALSE(axrt_trace_is_active()); }

BAD_ARGUMENTS(axrt_trace_range_begin) {
  EXPECT_INVALID(axrt_trace_range_begin(nullptr), "name");
  EXPECT_OK(axrt_trace_range_begin("walk"));  // no trace runs: nothing recorded
  axrt_trace_range_end();
}

BAD_ARGUMENTS(axrt_trace_range_end) {
  axrt_trace_range_end();  // without a begin, and without a trace: a no-op
  SUCCEED("an unmatched end is dropped");
}

BAD_ARGUMENTS(axrt_device_query_stream_statistics) {
  Guarded<axrt_stream_statistics_t> out;
  EXPECT_INVALID(axrt_device_query_stream_statistics(nullptr, out.get()), "device");
  EXPECT_INVALID(axrt_device_query_stream_statistics(As<axrt_device_t>(recorded), out.get()),
                 "event");
  EXPECT_RELEASED(axrt_device_query_stream_statistics(StaleDevice(), out.get()), "device");
  CHECK(out.untouched());
  WalkQueryStruct<axrt_stream_statistics_t>("out_statistics", [&](axrt_stream_statistics_t* o) {
    return axrt_device_query_stream_statistics(device, o);
  });
}

// ---------------------------------------------------------------------------
// group.h (what collectives compute is group_test.cc and tests/python/test_group.py)
// ---------------------------------------------------------------------------

namespace {

// A group of cpu:0 alone, and one member's part over the fixture's buffer.
struct WalkGroup {
  explicit WalkGroup(const World& world) {
    EXPECT_OK(axrt_group_create(&world.device, 1, nullptr, &group));
    member = {world.stream, world.buffer, 0, world.buffer, 0};
  }
  ~WalkGroup() { axrt_group_destroy(group); }
  WalkGroup(const WalkGroup&) = delete;
  WalkGroup& operator=(const WalkGroup&) = delete;
  axrt_group_t group = nullptr;
  axrt_collective_member_t member{};
};

}  // namespace

BAD_ARGUMENTS(axrt_group_create) {
  axrt_group_t group = nullptr;
  EXPECT_INVALID(axrt_group_create(nullptr, 1, nullptr, &group), "NULL");
  EXPECT_INVALID(axrt_group_create(&device, 1, nullptr, nullptr), "NULL");
  EXPECT_INVALID(axrt_group_create(&device, 0, nullptr, &group), "at least one device");
  axrt_device_t none = nullptr;
  EXPECT_INVALID(axrt_group_create(&none, 1, nullptr, &group), "devices[0] is NULL");
  EXPECT_RELEASED(axrt_group_create(reinterpret_cast<axrt_device_t*>(&stream), 1, nullptr, &group),
                  "stream");
  axrt_group_options_t options = AXRT_GROUP_OPTIONS_INIT;
  options.struct_size = 4;
  EXPECT_INVALID(axrt_group_create(&device, 1, &options, &group), "struct_size");
  options.struct_size = sizeof options;
  options.backend = "carrier-pigeon";
  EXPECT_INVALID(axrt_group_create(&device, 1, &options, &group), "unknown backend");
  CHECK(group == nullptr);
}

BAD_ARGUMENTS(axrt_group_join) {
  // What joining does is group_join_test.cc and tests/python/test_group_processes.py.
  axrt_group_t group = nullptr;
  const char* id = "tcp://127.0.0.1:1";
  EXPECT_INVALID(axrt_group_join(id, 1, 0, device, nullptr, nullptr), "out_group");
  EXPECT_INVALID(axrt_group_join(nullptr, 1, 0, device, nullptr, &group), "id is empty");
  EXPECT_INVALID(axrt_group_join(id, 0, 0, device, nullptr, &group), "world of 0");
  EXPECT_INVALID(axrt_group_join(id, 2, 5, device, nullptr, &group), "rank 5 of a world of 2");
  EXPECT_INVALID(axrt_group_join(id, 1, 0, nullptr, nullptr, &group), "device is NULL");
  EXPECT_RELEASED(axrt_group_join(id, 1, 0, reinterpret_cast<axrt_device_t>(stream), nullptr, &group),
                  "stream");
  axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
  options.struct_size = 4;
  EXPECT_INVALID(axrt_group_join(id, 1, 0, device, &options, &group), "struct_size");
  options.struct_size = sizeof options;
  options.backend = "carrier-pigeon";
  EXPECT_INVALID(axrt_group_join(id, 1, 0, device, &options, &group), "unknown backend");
  CHECK(group == nullptr);
}

BAD_ARGUMENTS(axrt_group_destroy) {
  axrt_group_destroy(nullptr);  // a no-op
  SUCCEED("NULL is a no-op");
}

BAD_ARGUMENTS(axrt_group_query_info) {
  WalkGroup walk(*this);
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  EXPECT_INVALID(axrt_group_query_info(nullptr, &info), "NULL");
  EXPECT_INVALID(axrt_group_query_info(walk.group, nullptr), "NULL");
  for (size_t size : {size_t{0}, sizeof(size_t)}) {
    Guarded<axrt_group_info_t> small(size);
    EXPECT_INVALID(axrt_group_query_info(walk.group, small.get()), "struct_size");
    CHECK(small.untouched());
  }
}

BAD_ARGUMENTS(axrt_group_get_device) {
  WalkGroup walk(*this);
  axrt_device_t out = nullptr;
  EXPECT_INVALID(axrt_group_get_device(nullptr, 0, &out), "NULL");
  EXPECT_INVALID(axrt_group_get_device(walk.group, 0, nullptr), "NULL");
  EXPECT_ERROR(axrt_group_get_device(walk.group, 1, &out), AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 1");
  CHECK(out == nullptr);
}

BAD_ARGUMENTS(axrt_group_abort) {
  WalkGroup walk(*this);
  EXPECT_INVALID(axrt_group_abort(nullptr, -1, nullptr), "NULL");
  EXPECT_ERROR(axrt_group_abort(walk.group, 1, nullptr), AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 1");
  EXPECT_ERROR(axrt_group_abort(walk.group, -2, nullptr), AXRT_STATUS_CODE_OUT_OF_RANGE, "rank -2");
}

BAD_ARGUMENTS(axrt_group_all_reduce) {
  WalkGroup walk(*this);
  EXPECT_INVALID(axrt_group_all_reduce(nullptr, &walk.member, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                 "NULL");
  EXPECT_INVALID(axrt_group_all_reduce(walk.group, nullptr, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                 "members");
  EXPECT_INVALID(axrt_group_all_reduce(walk.group, &walk.member, 1, AXRT_DTYPE_BOOL, AXRT_REDUCE_SUM),
                 "element type");
  EXPECT_INVALID(axrt_group_all_reduce(walk.group, &walk.member, 1, AXRT_DTYPE_FLOAT32, 3),
                 "not a reduction");
  EXPECT_ERROR(axrt_group_all_reduce(walk.group, &walk.member, UINT64_MAX / 2, AXRT_DTYPE_FLOAT32,
                                     AXRT_REDUCE_SUM),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "overflow");
  EXPECT_ERROR(axrt_group_all_reduce(walk.group, &walk.member, kBufferSize, AXRT_DTYPE_FLOAT32,
                                     AXRT_REDUCE_SUM),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "does not fit");
  axrt_collective_member_t bad = walk.member;
  bad.stream = nullptr;
  EXPECT_INVALID(axrt_group_all_reduce(walk.group, &bad, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                 "stream is NULL");
  bad = walk.member;
  bad.recv_buffer = nullptr;
  EXPECT_INVALID(axrt_group_all_reduce(walk.group, &bad, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                 "receive buffer is NULL");
  bad = walk.member;
  bad.send_buffer = As<axrt_buffer_t>(stream);
  EXPECT_RELEASED(axrt_group_all_reduce(walk.group, &bad, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM),
                  "stream");
}

BAD_ARGUMENTS(axrt_group_all_gather) {
  WalkGroup walk(*this);
  EXPECT_INVALID(axrt_group_all_gather(nullptr, &walk.member, 1, AXRT_DTYPE_FLOAT32), "NULL");
  EXPECT_INVALID(axrt_group_all_gather(walk.group, nullptr, 1, AXRT_DTYPE_FLOAT32), "members");
  axrt_collective_member_t bad = walk.member;
  bad.recv_offset = 2;  // overlaps without being in place
  EXPECT_INVALID(axrt_group_all_gather(walk.group, &bad, 4, AXRT_DTYPE_FLOAT32), "overlap");
}

BAD_ARGUMENTS(axrt_group_reduce_scatter) {
  WalkGroup walk(*this);
  EXPECT_INVALID(
      axrt_group_reduce_scatter(nullptr, &walk.member, 1, AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM), "NULL");
  EXPECT_INVALID(
      axrt_group_reduce_scatter(walk.group, &walk.member, 1, AXRT_DTYPE_INT4, AXRT_REDUCE_SUM),
      "element type");
}

BAD_ARGUMENTS(axrt_group_broadcast) {
  WalkGroup walk(*this);
  EXPECT_INVALID(axrt_group_broadcast(nullptr, &walk.member, 1, AXRT_DTYPE_FLOAT32, 0), "NULL");
  EXPECT_ERROR(axrt_group_broadcast(walk.group, &walk.member, 1, AXRT_DTYPE_FLOAT32, 1),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "root 1");
}

BAD_ARGUMENTS(axrt_group_enqueue_part) {
  WalkGroup walk(*this);
  EXPECT_INVALID(axrt_group_enqueue_part(nullptr, 0, AXRT_COLLECTIVE_ALL_REDUCE, &walk.member, 1,
                                         AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                 "NULL");
  EXPECT_INVALID(axrt_group_enqueue_part(walk.group, 0, AXRT_COLLECTIVE_ALL_REDUCE, nullptr, 1,
                                         AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                 "member is NULL");
  EXPECT_ERROR(axrt_group_enqueue_part(walk.group, 1, AXRT_COLLECTIVE_ALL_REDUCE, &walk.member, 1,
                                       AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "rank 1");
  EXPECT_INVALID(axrt_group_enqueue_part(walk.group, 0, 4, &walk.member, 1, AXRT_DTYPE_FLOAT32,
                                         AXRT_REDUCE_SUM, 0),
                 "not a collective");
  EXPECT_INVALID(axrt_group_enqueue_part(walk.group, 0, AXRT_COLLECTIVE_ALL_REDUCE, &walk.member, 1,
                                         AXRT_DTYPE_BOOL, AXRT_REDUCE_SUM, 0),
                 "element type");
  EXPECT_ERROR(axrt_group_enqueue_part(walk.group, 0, AXRT_COLLECTIVE_BROADCAST, &walk.member, 1,
                                       AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 1),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "root 1");
  axrt_collective_member_t bad = walk.member;
  bad.send_buffer = As<axrt_buffer_t>(stream);
  EXPECT_RELEASED(axrt_group_enqueue_part(walk.group, 0, AXRT_COLLECTIVE_ALL_REDUCE, &bad, 1,
                                          AXRT_DTYPE_FLOAT32, AXRT_REDUCE_SUM, 0),
                  "stream");
}

BAD_ARGUMENTS(axrt_group_send_recv) {
  WalkGroup walk(*this);
  axrt_group_transfer_t transfer = {0, stream, buffer, 0, 0, stream, buffer, 64, 1, AXRT_DTYPE_FLOAT32};
  EXPECT_INVALID(axrt_group_send_recv(nullptr, &transfer, 1), "NULL");
  EXPECT_INVALID(axrt_group_send_recv(walk.group, nullptr, 1), "transfers is NULL");
  EXPECT_INVALID(axrt_group_send_recv(walk.group, &transfer, 1), "to itself");
  transfer.dst_rank = 1;
  EXPECT_ERROR(axrt_group_send_recv(walk.group, &transfer, 1), AXRT_STATUS_CODE_OUT_OF_RANGE,
               "rank 1");
  EXPECT_OK(axrt_group_send_recv(walk.group, nullptr, 0));  // nothing to move
}
