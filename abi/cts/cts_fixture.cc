#include "abi/cts/cts_fixture.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>

namespace axrt_cts {

std::string Describe(axrt_status_t status) {
  if (status == nullptr) return "OK";
  std::string text = axrt_status_code_name(axrt_status_code(status));
  text += ": ";
  text += axrt_status_message(status);
  return text;
}

bool ContainsNoCase(std::string_view haystack, std::string_view needle) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(),
                        needle.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != haystack.end() || needle.empty();
}

StatusMatch MatchStatus(axrt_status_t status,
                        std::initializer_list<axrt_status_code_t> codes,
                        std::string_view needle) {
  Status owned(status);
  StatusMatch match;
  std::string expected;
  for (axrt_status_code_t code : codes) {
    if (!expected.empty()) expected += " or ";
    expected += axrt_status_code_name(code);
  }
  expected += " mentioning '" + std::string(needle) + "'";
  match.explanation = "got " + Describe(owned.get()) + "; expected " + expected;
  axrt_status_code_t code = axrt_status_code(owned.get());
  if (owned == nullptr) {
    // Only a caller that allows OK gets here with a match.
    match.matched = std::find(codes.begin(), codes.end(), code) != codes.end();
    return match;
  }
  bool code_ok = std::find(codes.begin(), codes.end(), code) != codes.end();
  match.matched =
      code_ok && ContainsNoCase(axrt_status_message(owned.get()), needle);
  return match;
}

std::string DeviceUnderTestId() {
  const char* env = std::getenv("AXRT_CTS_DEVICE");
  return env != nullptr && env[0] != '\0' ? env : "cpu:0";
}

std::string DriverUnderTest() {
  std::string id = DeviceUnderTestId();
  return id.substr(0, id.find(':'));
}

const axrt_instance_options_t* OptionsWithDriverUnderTest() {
  if (UnsupportedReason(DriverUnderTest(), Feature::kDefaultInstance).empty()) return nullptr;
  static const std::string drivers = "cpu," + DriverUnderTest();
  static axrt_instance_options_t options = [] {
    axrt_instance_options_t o = AXRT_INSTANCE_OPTIONS_INIT;
    o.drivers = drivers.c_str();
    return o;
  }();
  return &options;
}

DeviceTest::DeviceTest() : driver_(DriverUnderTest()) {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = driver_.c_str();
  REQUIRE_OK(axrt_instance_create(&options, Out(instance_)));
  std::string id = DeviceUnderTestId();
  REQUIRE_OK(axrt_instance_find_device(instance_.get(), id.c_str(),
                                       Out(device_)));
  REQUIRE_OK(axrt_device_query_properties(device_.get(), &properties_));
  REQUIRE_OK(axrt_stream_create(device_.get(), nullptr, Out(io_stream_)));
}

bool DeviceTest::Supports(Feature feature) const {
  if (!UnsupportedReason(driver_, feature).empty()) return false;
  uint32_t flag = FeatureFlag(feature);
  if (flag != 0) return (properties_.flags & flag) != 0;
  if (feature == Feature::kMultipleDevices) {
    size_t count = 0;
    Status status(axrt_instance_device_count(instance_.get(), &count));
    return status == nullptr && count >= 2;
  }
  return true;
}

bool DeviceTest::RequireFeature(Feature feature) const {
  std::string_view reason = UnsupportedReason(driver_, feature);
  if (!reason.empty()) {
    WARN("skipped on " << properties_.id << ": no " << FeatureName(feature)
                       << " (" << reason << ")");
    return false;
  }
  uint32_t flag = FeatureFlag(feature);
  if (flag != 0 && (properties_.flags & flag) == 0) {
    FAIL("device " << properties_.id << " does not advertise "
                   << FeatureName(feature)
                   << " but abi/cts/unsupported.cc gives no reason for driver '"
                   << driver_ << "'");
  }
  if (!Supports(feature)) {
    WARN("skipped on " << properties_.id << ": no " << FeatureName(feature)
                       << " on this machine");
    return false;
  }
  return true;
}

Instance DeviceTest::NewInstance() const {
  axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
  options.drivers = driver_.c_str();
  Instance instance;
  REQUIRE_OK(axrt_instance_create(&options, Out(instance)));
  return instance;
}

Stream DeviceTest::NewStream(const char* label) const {
  axrt_debug_label_t debug_label = AXRT_DEBUG_LABEL_INIT(label);
  axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
  if (label != nullptr) options.next = &debug_label;
  Stream stream;
  REQUIRE_OK(axrt_stream_create(device_.get(), &options, Out(stream)));
  REQUIRE(stream != nullptr);
  return stream;
}

Buffer DeviceTest::NewBuffer(uint64_t size, axrt_memory_type_t type,
                             uint64_t alignment, const char* label) const {
  axrt_debug_label_t debug_label = AXRT_DEBUG_LABEL_INIT(label);
  axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
  options.memory_type = type;
  options.alignment = alignment;
  if (label != nullptr) options.next = &debug_label;
  Buffer buffer;
  REQUIRE_OK(axrt_buffer_allocate(device_.get(), size, &options, Out(buffer)));
  REQUIRE(buffer != nullptr);
  return buffer;
}

Event DeviceTest::NewEvent(axrt_event_flags_t flags, const char* label) const {
  axrt_debug_label_t debug_label = AXRT_DEBUG_LABEL_INIT(label);
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = flags;
  if (label != nullptr) options.next = &debug_label;
  Event event;
  REQUIRE_OK(axrt_event_create(device_.get(), &options, Out(event)));
  REQUIRE(event != nullptr);
  return event;
}

Buffer DeviceTest::NewView(axrt_buffer_t buffer, uint64_t offset,
                           uint64_t length) const {
  Buffer view;
  REQUIRE_OK(axrt_buffer_create_view(buffer, offset, length, Out(view)));
  REQUIRE(view != nullptr);
  return view;
}

axrt_buffer_info_t DeviceTest::Info(axrt_buffer_t buffer) const {
  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  REQUIRE_OK(axrt_buffer_query_info(buffer, &info));
  return info;
}

void DeviceTest::Write(axrt_buffer_t buffer, uint64_t offset,
                       std::span<const uint8_t> bytes) const {
  REQUIRE_OK(axrt_stream_copy_from_host(io_stream_.get(), bytes.data(), buffer,
                                        offset, bytes.size()));
  REQUIRE_OK(axrt_stream_synchronize(io_stream_.get()));
}

std::vector<uint8_t> DeviceTest::Read(axrt_buffer_t buffer, uint64_t offset,
                                      uint64_t length) const {
  std::vector<uint8_t> bytes(length);
  REQUIRE_OK(axrt_stream_copy_to_host(io_stream_.get(), buffer, offset,
                                      bytes.data(), length));
  REQUIRE_OK(axrt_stream_synchronize(io_stream_.get()));
  return bytes;
}

axrt_status_t LoadBytes(axrt_device_t device, const std::vector<uint8_t>& bytes,
                        axrt_executable_load_flags_t flags, axrt_executable_t* out) {
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  options.flags = flags;
  return axrt_executable_load_memory(device, bytes.data(), bytes.size(), &options, out);
}

Tensor NewTensor(const DeviceTest& test, axrt_dtype_t dtype, const std::vector<int64_t>& shape,
                 const void* data) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  Tensor tensor;
  REQUIRE_OK(axrt_tensor_allocate(test.device(), &desc, nullptr, Out(tensor)));
  if (data) {
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    REQUIRE_OK(axrt_tensor_query_info(tensor.get(), &info));
    Buffer buffer;
    REQUIRE_OK(axrt_tensor_get_buffer(tensor.get(), Out(buffer)));
    test.Write(buffer.get(), 0,
               std::span<const uint8_t>(static_cast<const uint8_t*>(data), info.byte_size));
  }
  return tensor;
}

Tensor TensorOver(axrt_buffer_t buffer, axrt_dtype_t dtype, const std::vector<int64_t>& shape) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = static_cast<uint32_t>(shape.size());
  desc.shape = shape.data();
  Tensor tensor;
  REQUIRE_OK(axrt_tensor_create(buffer, &desc, Out(tensor)));
  return tensor;
}

std::vector<uint8_t> ReadTensor(const DeviceTest& test, axrt_tensor_t tensor) {
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  REQUIRE_OK(axrt_tensor_query_info(tensor, &info));
  Buffer buffer;
  REQUIRE_OK(axrt_tensor_get_buffer(tensor, Out(buffer)));
  return test.Read(buffer.get(), info.byte_offset, info.byte_size);
}

axrt_status_t Gate::HostFunc(void* user_data, axrt_status_t) {
  auto* gate = static_cast<Gate*>(user_data);
  gate->entered_.store(true, std::memory_order_release);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!gate->open_.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return axrt_status_create(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                                "cts gate was never opened");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return nullptr;
}

bool WaitForFlag(const std::atomic<bool>& flag,
                 std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!flag.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

std::vector<uint8_t> PatternBytes(size_t size, uint32_t seed) {
  // xorshift64: cheap, and no period short enough to hide a misplaced chunk.
  // Eight bytes a step, stored as words, so that 64 MiB of them stay quick
  // in the sanitizer runs.
  std::vector<uint64_t> words(size / 8 + 1);
  uint64_t state = (seed + 1) * 0x9e3779b97f4a7c15ull;
  for (uint64_t& word : words) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    word = state;
  }
  std::vector<uint8_t> bytes(size);
  std::memcpy(bytes.data(), words.data(), size);
  return bytes;
}

bool IsPowerOfTwo(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

}  // namespace axrt_cts
