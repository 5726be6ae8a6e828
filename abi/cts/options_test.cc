// The options-struct conventions of base.h: AXRT_*_INIT macros, struct_size
// from older and newer headers, extension chains and debug labels.
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {
namespace {

constexpr axrt_extension_type_t kUnknownExtension = 23130;  // 0x5A5A

TEST_CASE("options: AXRT_*_INIT macros fill size, chain and defaults",
          "[cts][options]") {
  axrt_instance_options_t instance = AXRT_INSTANCE_OPTIONS_INIT;
  CHECK(instance.struct_size == sizeof(instance));
  CHECK(instance.next == nullptr);
  CHECK(instance.drivers == nullptr);

  axrt_driver_info_t driver = AXRT_DRIVER_INFO_INIT;
  CHECK(driver.struct_size == sizeof(driver));
  CHECK(driver.next == nullptr);

  axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
  CHECK(properties.struct_size == sizeof(properties));
  CHECK(properties.next == nullptr);

  axrt_pool_statistics_t stats = AXRT_POOL_STATISTICS_INIT;
  CHECK(stats.struct_size == sizeof(stats));
  CHECK(stats.next == nullptr);

  axrt_buffer_options_t buffer = AXRT_BUFFER_OPTIONS_INIT;
  CHECK(buffer.struct_size == sizeof(buffer));
  CHECK(buffer.next == nullptr);
  CHECK(buffer.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  CHECK(buffer.alignment == 0);

  axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
  CHECK(info.struct_size == sizeof(info));
  CHECK(info.next == nullptr);

  axrt_event_options_t event = AXRT_EVENT_OPTIONS_INIT;
  CHECK(event.struct_size == sizeof(event));
  CHECK(event.next == nullptr);
  CHECK(event.flags == AXRT_EVENT_FLAG_NONE);

  axrt_stream_options_t stream = AXRT_STREAM_OPTIONS_INIT;
  CHECK(stream.struct_size == sizeof(stream));
  CHECK(stream.next == nullptr);

  axrt_copy_2d_t copy = AXRT_COPY_2D_INIT;
  CHECK(copy.struct_size == sizeof(copy));
  CHECK(copy.next == nullptr);
  CHECK(copy.src.buffer == nullptr);
  CHECK(copy.dst.host_pointer == nullptr);
  CHECK(copy.width == 0);
  CHECK(copy.height == 0);

  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("cts");
  CHECK(label.struct_size == sizeof(label));
  CHECK(label.next == nullptr);
  CHECK(label.type == AXRT_EXTENSION_TYPE_DEBUG_LABEL);
  CHECK(std::string(label.label) == "cts");

  // Every options and query struct starts with the extension header layout.
  CHECK(offsetof(axrt_buffer_options_t, next) ==
        offsetof(axrt_extension_header_t, next));
  CHECK(offsetof(axrt_debug_label_t, type) ==
        offsetof(axrt_extension_header_t, type));
}

// Each function that reads an options or query struct, called with a
// struct whose head is `header` (struct_size and next filled by the caller).
// `storage` is zeroed and large enough for a struct from a newer header.
struct StructCase {
  const char* name;
  size_t size;
  std::function<axrt_status_t(DeviceTest&, void* storage)> call;
  bool query;  // a query struct: bigger ones are accepted whatever the tail
};

std::vector<StructCase> StructCases() {
  return {
      {"axrt_instance_options_t", sizeof(axrt_instance_options_t),
       [](DeviceTest&, void* storage) {
         axrt_instance_t instance = nullptr;
         axrt_status_t status = axrt_instance_create(
             static_cast<axrt_instance_options_t*>(storage), &instance);
         axrt_instance_release(instance);
         return status;
       },
       false},
      {"axrt_buffer_options_t", sizeof(axrt_buffer_options_t),
       [](DeviceTest& t, void* storage) {
         axrt_buffer_t buffer = nullptr;
         axrt_status_t status = axrt_buffer_allocate(
             t.device(), 64, static_cast<axrt_buffer_options_t*>(storage),
             &buffer);
         axrt_buffer_release(buffer);
         return status;
       },
       false},
      {"axrt_buffer_options_t (stream-ordered)", sizeof(axrt_buffer_options_t),
       [](DeviceTest& t, void* storage) {
         Stream stream = t.NewStream();
         axrt_buffer_t buffer = nullptr;
         axrt_status_t status = axrt_stream_allocate_buffer(
             stream.get(), 64, static_cast<axrt_buffer_options_t*>(storage),
             &buffer);
         axrt_buffer_release(buffer);
         return status;
       },
       false},
      {"axrt_stream_options_t", sizeof(axrt_stream_options_t),
       [](DeviceTest& t, void* storage) {
         axrt_stream_t stream = nullptr;
         axrt_status_t status = axrt_stream_create(
             t.device(), static_cast<axrt_stream_options_t*>(storage), &stream);
         axrt_stream_release(stream);
         return status;
       },
       false},
      {"axrt_event_options_t", sizeof(axrt_event_options_t),
       [](DeviceTest& t, void* storage) {
         axrt_event_t event = nullptr;
         axrt_status_t status = axrt_event_create(
             t.device(), static_cast<axrt_event_options_t*>(storage), &event);
         axrt_event_release(event);
         return status;
       },
       false},
      {"axrt_copy_2d_t", sizeof(axrt_copy_2d_t),
       [](DeviceTest& t, void* storage) {
         Stream stream = t.NewStream();
         Buffer buffer = t.NewBuffer(256);
         auto* copy = static_cast<axrt_copy_2d_t*>(storage);
         // Only the fields inside struct_size count; fill them all anyway.
         copy->src = {buffer.get(), nullptr, 0, 64};
         copy->dst = {buffer.get(), nullptr, 128, 64};
         copy->width = 32;
         copy->height = 2;
         axrt_status_t status = axrt_stream_copy_2d(stream.get(), copy);
         if (status == nullptr) {
           status = axrt_stream_synchronize(stream.get());
         }
         return status;
       },
       false},
      {"axrt_driver_info_t", sizeof(axrt_driver_info_t),
       [](DeviceTest& t, void* storage) {
         return axrt_instance_query_driver_info(
             t.instance(), 0, static_cast<axrt_driver_info_t*>(storage));
       },
       true},
      {"axrt_device_properties_t", sizeof(axrt_device_properties_t),
       [](DeviceTest& t, void* storage) {
         return axrt_device_query_properties(
             t.device(), static_cast<axrt_device_properties_t*>(storage));
       },
       true},
      {"axrt_pool_statistics_t", sizeof(axrt_pool_statistics_t),
       [](DeviceTest& t, void* storage) {
         return axrt_device_query_pool_statistics(
             t.device(), static_cast<axrt_pool_statistics_t*>(storage));
       },
       true},
      {"axrt_buffer_info_t", sizeof(axrt_buffer_info_t),
       [](DeviceTest& t, void* storage) {
         Buffer buffer = t.NewBuffer(64);
         return axrt_buffer_query_info(
             buffer.get(), static_cast<axrt_buffer_info_t*>(storage));
       },
       true},
  };
}

struct alignas(16) Storage {
  unsigned char bytes[1024];
};

// Zeroed storage whose head is a struct of `size` bytes chained to `next`.
void Prepare(Storage& storage, size_t struct_size, const void* next) {
  std::memset(storage.bytes, 0, sizeof(storage.bytes));
  std::memcpy(storage.bytes, &struct_size, sizeof(struct_size));
  std::memcpy(storage.bytes + sizeof(size_t), &next, sizeof(next));
}

TEST_CASE_METHOD(DeviceTest, "options: struct_size smaller than the header is "
                 "INVALID_ARGUMENT", "[cts][options][struct_size]") {
  for (const StructCase& c : StructCases()) {
    for (size_t size : {size_t{0}, size_t{1}, sizeof(size_t),
                        sizeof(size_t) + sizeof(void*) - 1}) {
      INFO(c.name << " with struct_size " << size);
      Storage storage;
      Prepare(storage, size, nullptr);
      CHECK_STATUS(c.call(*this, &storage), AXRT_STATUS_CODE_INVALID_ARGUMENT,
                   "struct_size");
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "options: the full struct and larger ones with a "
                 "zero tail are accepted", "[cts][options][struct_size]") {
  for (const StructCase& c : StructCases()) {
    for (size_t size : {c.size, c.size + 8, c.size + 200}) {
      INFO(c.name << " with struct_size " << size);
      Storage storage;
      Prepare(storage, size, nullptr);
      // Options whose zero value is not the default get it explicitly.
      if (std::string(c.name).rfind("axrt_buffer_options_t", 0) == 0) {
        auto* options = reinterpret_cast<axrt_buffer_options_t*>(&storage);
        options->memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
      }
      CHECK_OK(c.call(*this, &storage));
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "options: a larger struct with a non-zero tail",
                 "[cts][options][struct_size]") {
  for (const StructCase& c : StructCases()) {
    INFO(c.name);
    Storage storage;
    Prepare(storage, c.size + 16, nullptr);
    if (std::string(c.name).rfind("axrt_buffer_options_t", 0) == 0) {
      reinterpret_cast<axrt_buffer_options_t*>(&storage)->memory_type =
          AXRT_MEMORY_TYPE_DEVICE_LOCAL;
    }
    storage.bytes[c.size + 9] = 1;
    if (c.query) {
      // A query struct's tail is output space: accepted.
      CHECK_OK(c.call(*this, &storage));
    } else {
      // Options the library cannot honour are refused, never ignored.
      CHECK_STATUS_ANY(c.call(*this, &storage), "struct_size",
                       AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       AXRT_STATUS_CODE_UNIMPLEMENTED);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "options: query structs from older headers "
                 "are written only up to their size",
                 "[cts][options][struct_size]") {
  constexpr unsigned char kGuard = 0xC3;
  for (const StructCase& c : StructCases()) {
    if (!c.query) continue;
    for (size_t size : {sizeof(size_t) + sizeof(void*),
                        sizeof(size_t) + sizeof(void*) + 4, c.size - 1}) {
      INFO(c.name << " with struct_size " << size);
      Storage storage;
      std::memset(storage.bytes, kGuard, sizeof(storage.bytes));
      std::memcpy(storage.bytes, &size, sizeof(size));
      const void* next = nullptr;
      std::memcpy(storage.bytes + sizeof(size_t), &next, sizeof(next));
      CHECK_OK(c.call(*this, &storage));
      size_t written_past = 0;
      for (size_t i = size; i < sizeof(storage.bytes); ++i) {
        if (storage.bytes[i] != kGuard) ++written_past;
      }
      CHECK(written_past == 0);
      // The header itself is the caller's.
      size_t size_after = 0;
      std::memcpy(&size_after, storage.bytes, sizeof(size_after));
      CHECK(size_after == size);
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "options: older, smaller structs take the "
                 "defaults for missing fields", "[cts][options][struct_size]") {
  SECTION("buffer options without alignment") {
    axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
    options.struct_size = offsetof(axrt_buffer_options_t, alignment);
    options.memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
    options.alignment = 3;  // not part of the struct: must be ignored
    Buffer buffer;
    REQUIRE_OK(axrt_buffer_allocate(device(), 100, &options, Out(buffer)));
    axrt_buffer_info_t info = Info(buffer.get());
    CHECK(info.memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
    CHECK(info.alignment >= properties().buffer_alignment);
  }
  SECTION("buffer options with only the header") {
    axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
    options.struct_size = offsetof(axrt_buffer_options_t, memory_type);
    options.memory_type = 77;  // not part of the struct: must be ignored
    Buffer buffer;
    REQUIRE_OK(axrt_buffer_allocate(device(), 100, &options, Out(buffer)));
    CHECK(Info(buffer.get()).memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
  }
  SECTION("instance options with only the header") {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.struct_size = offsetof(axrt_instance_options_t, drivers);
    options.drivers = "nosuchdriver";  // not part of the struct
    Instance instance;
    REQUIRE_OK(axrt_instance_create(&options, Out(instance)));
    size_t count = 0;
    REQUIRE_OK(axrt_instance_driver_count(instance.get(), &count));
    CHECK(count >= 1);
  }
  SECTION("event options with only the header") {
    axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
    options.struct_size = offsetof(axrt_event_options_t, flags);
    options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;  // not part of the struct
    Event start;
    Event end;
    REQUIRE_OK(axrt_event_create(device(), &options, Out(start)));
    REQUIRE_OK(axrt_event_create(device(), &options, Out(end)));
    CTS_REQUIRE_FEATURE(Feature::kEventTiming);
    Stream stream = NewStream();
    REQUIRE_OK(axrt_stream_record_event(stream.get(), start.get()));
    REQUIRE_OK(axrt_stream_record_event(stream.get(), end.get()));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
    int64_t nanoseconds = -1;
    REQUIRE_OK(axrt_event_elapsed_time(start.get(), end.get(), &nanoseconds));
    CHECK(nanoseconds >= 0);
  }
}

bool MentionsAny(std::string_view message,
                 std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    if (ContainsNoCase(message, needle)) return true;
  }
  return false;
}

TEST_CASE_METHOD(DeviceTest, "options: unknown extension types are "
                 "UNIMPLEMENTED naming the type", "[cts][options][extension]") {
  axrt_extension_header_t unknown = {sizeof(axrt_extension_header_t), nullptr,
                                     kUnknownExtension};
  // Behind a valid label, so the whole chain is walked.
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("cts-label");
  label.next = &unknown;
  for (const StructCase& c : StructCases()) {
    for (const void* chain : {static_cast<const void*>(&unknown),
                              static_cast<const void*>(&label)}) {
      INFO(c.name << (chain == &label ? " behind a label" : ""));
      Storage storage;
      Prepare(storage, c.size, chain);
      if (std::string(c.name).rfind("axrt_buffer_options_t", 0) == 0) {
        reinterpret_cast<axrt_buffer_options_t*>(&storage)->memory_type =
            AXRT_MEMORY_TYPE_DEVICE_LOCAL;
      }
      Status status(c.call(*this, &storage));
      INFO("got " << Describe(status.get()));
      if (chain == &label && axrt_status_code(status.get()) ==
                                 AXRT_STATUS_CODE_UNIMPLEMENTED &&
          !MentionsAny(axrt_status_message(status.get()),
                       {"23130", "0x5a5a"})) {
        // A function that does not take labels stops at the label.
        CHECK(MentionsAny(axrt_status_message(status.get()),
                          {"1", "label"}));
        continue;
      }
      CHECK(axrt_status_code(status.get()) == AXRT_STATUS_CODE_UNIMPLEMENTED);
      CHECK(MentionsAny(axrt_status_message(status.get()),
                        {"23130", "0x5a5a"}));
    }
  }
}

TEST_CASE_METHOD(DeviceTest, "options: debug labels where they are taken, "
                 "UNIMPLEMENTED elsewhere", "[cts][options][extension]") {
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("cts-label");
  for (const StructCase& c : StructCases()) {
    INFO(c.name);
    Storage storage;
    Prepare(storage, c.size, &label);
    std::string name = c.name;
    if (name.rfind("axrt_buffer_options_t", 0) == 0) {
      reinterpret_cast<axrt_buffer_options_t*>(&storage)->memory_type =
          AXRT_MEMORY_TYPE_DEVICE_LOCAL;
    }
    const bool takes_label = name.rfind("axrt_buffer_options_t", 0) == 0 ||
                             name == "axrt_stream_options_t" ||
                             name == "axrt_event_options_t";
    if (takes_label) {
      CHECK_OK(c.call(*this, &storage));
    } else {
      CHECK_STATUS(c.call(*this, &storage), AXRT_STATUS_CODE_UNIMPLEMENTED,
                   "");
    }
  }
  // NULL and "" labels mean no label.
  for (const char* text : {static_cast<const char*>(nullptr), ""}) {
    axrt_debug_label_t empty = AXRT_DEBUG_LABEL_INIT(text);
    axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
    options.next = &empty;
    Stream stream;
    REQUIRE_OK(axrt_stream_create(device(), &options, Out(stream)));
    REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  }
}

TEST_CASE_METHOD(DeviceTest, "options: labels appear in error messages",
                 "[cts][options][extension][label]") {
  // Labels are copied: the caller's string may change right after the call.
  char buffer_label[] = "cts-buffer-label";
  char stream_label[] = "cts-stream-label";
  char event_label[] = "cts-event-label";
  Buffer buffer = NewBuffer(64, AXRT_MEMORY_TYPE_DEVICE_LOCAL, 0, buffer_label);
  Stream stream = NewStream(stream_label);
  Event event = NewEvent(AXRT_EVENT_FLAG_NONE, event_label);
  std::memset(buffer_label, 'x', sizeof(buffer_label) - 1);
  std::memset(stream_label, 'x', sizeof(stream_label) - 1);
  std::memset(event_label, 'x', sizeof(event_label) - 1);

  std::vector<uint8_t> host(128);
  CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                          buffer.get(), 0, 128),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "cts-buffer-label");
  CHECK_STATUS(axrt_stream_copy_to_host(stream.get(), buffer.get(), 32,
                                        host.data(), 64),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "cts-stream-label");
  CHECK_STATUS(axrt_event_wait(event.get(), 0),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "cts-event-label");
  CHECK_STATUS(axrt_stream_wait_event(stream.get(), event.get()),
               AXRT_STATUS_CODE_FAILED_PRECONDITION, "cts-event-label");

  // A view names the buffer it was cut from.
  Buffer view = NewView(buffer.get(), 16, 16);
  CHECK_STATUS(axrt_stream_copy_from_host(stream.get(), host.data(),
                                          view.get(), 0, 17),
               AXRT_STATUS_CODE_OUT_OF_RANGE, "cts-buffer-label");
}

TEST_CASE_METHOD(DeviceTest, "options: cyclic and overlong chains are refused",
                 "[cts][options][extension]") {
  axrt_debug_label_t a = AXRT_DEBUG_LABEL_INIT("a");
  axrt_debug_label_t b = AXRT_DEBUG_LABEL_INIT("b");
  a.next = &b;
  b.next = &a;
  axrt_debug_label_t self = AXRT_DEBUG_LABEL_INIT("self");
  self.next = &self;
  std::vector<axrt_debug_label_t> long_chain(AXRT_EXTENSION_CHAIN_MAX + 1);
  for (size_t i = 0; i < long_chain.size(); ++i) {
    long_chain[i] = AXRT_DEBUG_LABEL_INIT("link");
    if (i + 1 < long_chain.size()) long_chain[i].next = &long_chain[i + 1];
  }

  for (const void* chain : {static_cast<const void*>(&a),
                            static_cast<const void*>(&self),
                            static_cast<const void*>(long_chain.data())}) {
    axrt_stream_options_t stream_options = AXRT_STREAM_OPTIONS_INIT;
    stream_options.next = chain;
    axrt_stream_t stream = nullptr;
    CHECK_STATUS(axrt_stream_create(device(), &stream_options, &stream),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "chain");
    CHECK(stream == nullptr);

    axrt_buffer_options_t buffer_options = AXRT_BUFFER_OPTIONS_INIT;
    buffer_options.next = chain;
    axrt_buffer_t buffer = nullptr;
    CHECK_STATUS(axrt_buffer_allocate(device(), 64, &buffer_options, &buffer),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "chain");
    CHECK(buffer == nullptr);

    axrt_event_options_t event_options = AXRT_EVENT_OPTIONS_INIT;
    event_options.next = chain;
    axrt_event_t event = nullptr;
    CHECK_STATUS(axrt_event_create(device(), &event_options, &event),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "chain");
    CHECK(event == nullptr);
  }
}

TEST_CASE_METHOD(DeviceTest, "options: an extension smaller than its header "
                 "is INVALID_ARGUMENT", "[cts][options][extension]") {
  axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("short");
  for (size_t size : {size_t{0}, sizeof(size_t),
                      sizeof(axrt_extension_header_t) - 1}) {
    INFO("extension struct_size " << size);
    label.struct_size = size;
    axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
    options.next = &label;
    axrt_stream_t stream = nullptr;
    CHECK_STATUS(axrt_stream_create(device(), &options, &stream),
                 AXRT_STATUS_CODE_INVALID_ARGUMENT, "struct_size");
    CHECK(stream == nullptr);
  }
}

}  // namespace
}  // namespace axrt_cts
