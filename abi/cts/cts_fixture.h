// Shared pieces of the conformance suite: RAII handle wrappers, status
// assertions and the device-under-test fixture. Everything here goes through
// the public C API only, so that a new driver is tested by the same code.
#ifndef AXRT_ABI_CTS_CTS_FIXTURE_H_
#define AXRT_ABI_CTS_CTS_FIXTURE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/cts/unsupported.h"
#include "axrt/axrt.h"

namespace axrt_cts {

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

template <auto kRelease>
struct Releaser {
  template <typename P>
  void operator()(P handle) const {
    kRelease(handle);
  }
};

using Status = std::unique_ptr<axrt_status_s, Releaser<&axrt_status_free>>;
using Instance =
    std::unique_ptr<axrt_instance_s, Releaser<&axrt_instance_release>>;
using Device = std::unique_ptr<axrt_device_s, Releaser<&axrt_device_release>>;
using Buffer = std::unique_ptr<axrt_buffer_s, Releaser<&axrt_buffer_release>>;
using Stream = std::unique_ptr<axrt_stream_s, Releaser<&axrt_stream_release>>;
using Event = std::unique_ptr<axrt_event_s, Releaser<&axrt_event_release>>;
using Executable = std::unique_ptr<axrt_executable_s, Releaser<&axrt_executable_release>>;
using Function = std::unique_ptr<axrt_function_s, Releaser<&axrt_function_release>>;
using Tensor = std::unique_ptr<axrt_tensor_s, Releaser<&axrt_tensor_release>>;
using Graph = std::unique_ptr<axrt_graph_s, Releaser<&axrt_graph_release>>;

// Lets a smart handle receive an `out_*` parameter:
//   REQUIRE_OK(axrt_stream_create(device, nullptr, Out(stream)));
// The handle is adopted when the full expression ends, and only when the call
// wrote one.
template <typename Smart>
class OutParam {
 public:
  explicit OutParam(Smart& owner) : owner_(owner) {}
  OutParam(const OutParam&) = delete;
  OutParam& operator=(const OutParam&) = delete;
  ~OutParam() {
    if (raw_ != nullptr) owner_.reset(raw_);
  }
  operator typename Smart::pointer*() { return &raw_; }

 private:
  Smart& owner_;
  typename Smart::pointer raw_ = nullptr;
};

template <typename Smart>
OutParam<Smart> Out(Smart& owner) {
  return OutParam<Smart>(owner);
}

// ---------------------------------------------------------------------------
// Status assertions
// ---------------------------------------------------------------------------

// "INVALID_ARGUMENT: message", or "OK".
std::string Describe(axrt_status_t status);

struct StatusMatch {
  bool matched = false;
  std::string explanation;
};

// Takes ownership of `status` and frees it. Matches when its code is one of
// `codes` and its message contains `needle` (case-insensitive; an empty
// needle matches any message).
StatusMatch MatchStatus(axrt_status_t status,
                        std::initializer_list<axrt_status_code_t> codes,
                        std::string_view needle);

bool ContainsNoCase(std::string_view haystack, std::string_view needle);

}  // namespace axrt_cts

// Fails (REQUIRE) or records a failure (CHECK) unless `expr` returns NULL;
// prints the status message and frees the status either way.
#define AXRT_CTS_EXPECT_OK(kind, expr)                                  \
  do {                                                                  \
    ::axrt_cts::Status axrt_cts_status_(expr);                          \
    INFO(#expr << " returned " << ::axrt_cts::Describe(axrt_cts_status_.get())); \
    kind(axrt_cts_status_ == nullptr);                                  \
  } while (false)
#define REQUIRE_OK(expr) AXRT_CTS_EXPECT_OK(REQUIRE, expr)
#define CHECK_OK(expr) AXRT_CTS_EXPECT_OK(CHECK, expr)

// Requires that `expr` returns a status with `code` whose message contains
// `needle`; frees it.
#define AXRT_CTS_EXPECT_STATUS(kind, expr, needle, ...)                   \
  do {                                                                    \
    ::axrt_cts::StatusMatch axrt_cts_match_ =                             \
        ::axrt_cts::MatchStatus((expr), {__VA_ARGS__}, (needle));         \
    INFO(#expr << ": " << axrt_cts_match_.explanation);                   \
    kind(axrt_cts_match_.matched);                                        \
  } while (false)
#define REQUIRE_STATUS(expr, code, needle) \
  AXRT_CTS_EXPECT_STATUS(REQUIRE, expr, needle, code)
#define CHECK_STATUS(expr, code, needle) \
  AXRT_CTS_EXPECT_STATUS(CHECK, expr, needle, code)
// For results the headers leave open between a few codes.
#define REQUIRE_STATUS_ANY(expr, needle, ...) \
  AXRT_CTS_EXPECT_STATUS(REQUIRE, expr, needle, __VA_ARGS__)
#define CHECK_STATUS_ANY(expr, needle, ...) \
  AXRT_CTS_EXPECT_STATUS(CHECK, expr, needle, __VA_ARGS__)

// Returns from the current test with a warning when the device under test
// does not support `feature` (see unsupported.cc).
#define CTS_REQUIRE_FEATURE(feature)           \
  do {                                         \
    if (!RequireFeature(feature)) return;      \
  } while (false)

namespace axrt_cts {

// ---------------------------------------------------------------------------
// Device under test
// ---------------------------------------------------------------------------

// The device named by AXRT_CTS_DEVICE ("cpu:0" when unset).
std::string DeviceUnderTestId();
// The driver part of DeviceUnderTestId(): "cpu" for "cpu:0".
std::string DriverUnderTest();
// Options for an instance of the default drivers that surely holds the
// driver under test: NULL (the default set) unless that driver takes part
// only when named (Feature::kDefaultInstance), then "cpu,<driver>".
const axrt_instance_options_t* OptionsWithDriverUnderTest();

// Opens a fresh instance (with only the driver under test enabled) and the
// device under test for every test case, so that tests cannot leak state into
// each other through a shared device.
class DeviceTest {
 public:
  DeviceTest();

  axrt_instance_t instance() const { return instance_.get(); }
  axrt_device_t device() const { return device_.get(); }
  const axrt_device_properties_t& properties() const { return properties_; }
  const std::string& driver() const { return driver_; }

  // Returns false after a warning naming the reason when the device does not
  // support `feature`; fails the test when the device lacks the capability
  // flag but unsupported.cc gives no reason for it.
  bool RequireFeature(Feature feature) const;
  bool Supports(Feature feature) const;

  // Another instance over the driver under test (as the fixture's own: some
  // drivers take part only in instances that name them).
  Instance NewInstance() const;
  Stream NewStream(const char* label = nullptr) const;
  Buffer NewBuffer(uint64_t size,
                   axrt_memory_type_t type = AXRT_MEMORY_TYPE_DEVICE_LOCAL,
                   uint64_t alignment = 0, const char* label = nullptr) const;
  Event NewEvent(axrt_event_flags_t flags = AXRT_EVENT_FLAG_NONE,
                 const char* label = nullptr) const;
  Buffer NewView(axrt_buffer_t buffer, uint64_t offset, uint64_t length) const;
  axrt_buffer_info_t Info(axrt_buffer_t buffer) const;

  // Synchronous helpers on a private stream, for setting up and checking
  // buffer contents in any memory type.
  void Write(axrt_buffer_t buffer, uint64_t offset,
             std::span<const uint8_t> bytes) const;
  std::vector<uint8_t> Read(axrt_buffer_t buffer, uint64_t offset,
                            uint64_t length) const;

 private:
  std::string driver_;
  Instance instance_;
  Device device_;
  axrt_device_properties_t properties_ = AXRT_DEVICE_PROPERTIES_INIT;
  Stream io_stream_;
};

// ---------------------------------------------------------------------------
// Executables and tensors
// ---------------------------------------------------------------------------

// Loads the .axe file `bytes` onto `device`.
axrt_status_t LoadBytes(axrt_device_t device, const std::vector<uint8_t>& bytes,
                        axrt_executable_load_flags_t flags, axrt_executable_t* out);

// A contiguous tensor on the device under test, holding `data` (its byte
// size) when given, written through a private stream.
Tensor NewTensor(const DeviceTest& test, axrt_dtype_t dtype, const std::vector<int64_t>& shape,
                 const void* data = nullptr);
// A contiguous tensor of `dtype` and `shape` over `buffer` from its start.
Tensor TensorOver(axrt_buffer_t buffer, axrt_dtype_t dtype, const std::vector<int64_t>& shape);
// The bytes of contiguous `tensor`.
std::vector<uint8_t> ReadTensor(const DeviceTest& test, axrt_tensor_t tensor);
template <typename T>
std::vector<T> ReadAs(const DeviceTest& test, axrt_tensor_t tensor) {
  std::vector<uint8_t> bytes = ReadTensor(test, tensor);
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// ---------------------------------------------------------------------------
// Host-function helpers
// ---------------------------------------------------------------------------

// Holds a stream inside a host function until the test opens it, so that the
// test can enqueue work behind it deterministically. A host function that is
// never released gives up after a while and fails its stream instead of
// hanging the suite.
class Gate {
 public:
  void Open() { open_.store(true, std::memory_order_release); }
  bool entered() const { return entered_.load(std::memory_order_acquire); }
  // The axrt_host_func_t; `user_data` is the Gate.
  static axrt_status_t HostFunc(void* user_data, axrt_status_t stream_status);

 private:
  std::atomic<bool> open_{false};
  std::atomic<bool> entered_{false};
};

// Waits until `flag` is set, for at most `timeout`.
bool WaitForFlag(const std::atomic<bool>& flag,
                 std::chrono::milliseconds timeout);

// Deterministic pseudo-random bytes; different seeds give different bytes.
std::vector<uint8_t> PatternBytes(size_t size, uint32_t seed);

bool IsPowerOfTwo(uint64_t value);

}  // namespace axrt_cts

#endif  // AXRT_ABI_CTS_CTS_FIXTURE_H_
