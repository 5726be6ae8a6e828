// DLPack exchange through the public C API (axrt/dlpack.h): zero-copy round
// trips in both forms, deleters run once and only when the last reference
// to the memory goes, layouts (strides, byte offsets, NULL strides, empty
// and rank-0 tensors), every element type both ways, read-only tensors and
// the invocation that refuses them, and the errors that leave the managed
// tensor with the caller.
//
// Tests tagged [.cuda-mock] run only in the ctest entry that points the
// CUDA driver at the mock Driver API (tests/mock_cuda).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "axrt/axrt.h"
#include "axrt/dlpack.h"
#include "tests/unit/copy_executable.h"
#include "tests/unit/status_check.h"

namespace {

// ---------------------------------------------------------------------------
// Status helpers
// ---------------------------------------------------------------------------

using axrt_test::Outcome;
using axrt_test::Take;

// ---------------------------------------------------------------------------
// DLPack helpers
// ---------------------------------------------------------------------------

// Device types are written as integers: a producer may send one that the
// 0.6 header does not enumerate.
DLDevice Device(int32_t type, int32_t id) {
  DLDevice device;
  std::memcpy(&device.device_type, &type, sizeof(type));
  device.device_id = id;
  return device;
}

int32_t DeviceType(const DLDevice& device) {
  int32_t type = 0;
  std::memcpy(&type, &device.device_type, sizeof(type));
  return type;
}

constexpr int32_t kCpu = 1;
constexpr int32_t kCuda = 2;
constexpr int32_t kCudaHost = 3;
constexpr int32_t kOpenCL = 4;
constexpr int32_t kRocm = 10;
constexpr int32_t kCudaManaged = 13;
constexpr int32_t kTrn = 18;  // DLPack 1.1, unknown to the 0.6 header

// A producer's tensor over memory the test owns. Its deleters only count,
// so the test sees how often and when they run.
struct Producer {
  std::vector<std::byte> bytes;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: NULL strides
  bool null_strides = false;
  DLDevice device = Device(kCpu, 0);
  DLDataType dtype{kDLFloat, 32, 1};
  uint64_t byte_offset = 0;
  bool null_data = false;
  std::atomic<int> deleted{0};
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  DLTensor Describe() {
    DLTensor t{};
    t.data = null_data ? nullptr : bytes.data();
    t.device = device;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.empty() ? nullptr : shape.data();
    t.strides = null_strides || strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
    return t;
  }
  DLManagedTensorVersioned* Versioned(uint64_t flags = 0, uint32_t major = 1,
                                      uint32_t minor = 1) {
    versioned.version.major = major;
    versioned.version.minor = minor;
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      static_cast<Producer*>(self->manager_ctx)->deleted.fetch_add(1);
    };
    versioned.flags = flags;
    versioned.dl_tensor = Describe();
    return &versioned;
  }
  DLManagedTensor* Legacy() {
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      static_cast<Producer*>(self->manager_ctx)->deleted.fetch_add(1);
    };
    legacy.dl_tensor = Describe();
    return &legacy;
  }
};

// f32 values 0, 1, 2, ... in `count` elements.
std::vector<std::byte> Iota(size_t count) {
  std::vector<std::byte> bytes(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(v));
  }
  return bytes;
}

float FloatAt(const std::vector<std::byte>& bytes, size_t index) {
  float v = 0;
  std::memcpy(&v, bytes.data() + index * sizeof(float), sizeof(v));
  return v;
}

// An export's deleter wrapped so that the test can count its calls.
struct DeleterSpy {
  static std::atomic<int>& Calls() {
    static std::atomic<int> calls{0};
    return calls;
  }
  static void (*&Original())(DLManagedTensorVersioned*) {
    static void (*original)(DLManagedTensorVersioned*) = nullptr;
    return original;
  }
  static void (*&OriginalLegacy())(DLManagedTensor*) {
    static void (*original)(DLManagedTensor*) = nullptr;
    return original;
  }
  static void Wrap(DLManagedTensorVersioned* managed) {
    Calls() = 0;
    Original() = managed->deleter;
    managed->deleter = [](DLManagedTensorVersioned* self) {
      Calls().fetch_add(1);
      Original()(self);
    };
  }
  static void Wrap(DLManagedTensor* managed) {
    Calls() = 0;
    OriginalLegacy() = managed->deleter;
    managed->deleter = [](DLManagedTensor* self) {
      Calls().fetch_add(1);
      OriginalLegacy()(self);
    };
  }
};

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

class Cpu {
 public:
  Cpu() {
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = "cpu";  // no CUDA device, whatever the machine has
    REQUIRE_CALL_OK(axrt_instance_create(&options, &instance));
    REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cpu:0", &device));
    REQUIRE_CALL_OK(axrt_stream_create(device, nullptr, &stream));
  }
  ~Cpu() {
    axrt_stream_release(stream);
    axrt_device_release(device);
    axrt_instance_release(instance);
  }
  Cpu(const Cpu&) = delete;
  Cpu& operator=(const Cpu&) = delete;

  // A contiguous f32 tensor holding `values`.
  axrt_tensor_t Floats(const std::vector<int64_t>& shape, const std::vector<std::byte>& values) {
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = static_cast<uint32_t>(shape.size());
    desc.shape = shape.data();
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
    if (!values.empty()) {
      std::memcpy(Map(tensor), values.data(), values.size());
    }
    return tensor;
  }

  // The host address of byte 0 of the tensor's buffer.
  static std::byte* Map(axrt_tensor_t tensor) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    void* pointer = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(buffer, &pointer));
    axrt_buffer_release(buffer);
    return static_cast<std::byte*>(pointer);
  }

  static axrt_buffer_info_t BufferInfo(axrt_tensor_t tensor) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(buffer, &info));
    axrt_buffer_release(buffer);
    return info;
  }

  static axrt_tensor_info_t Info(axrt_tensor_t tensor) {
    axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
    REQUIRE_CALL_OK(axrt_tensor_query_info(tensor, &info));
    return info;
  }

  // Every byte of the tensor's buffer, read through a stream copy.
  std::vector<std::byte> ReadBuffer(axrt_tensor_t tensor) {
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(buffer, &info));
    std::vector<std::byte> bytes(info.size);
    if (info.size > 0) {
      REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, buffer, 0, bytes.data(), info.size));
      REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    }
    axrt_buffer_release(buffer);
    return bytes;
  }

  axrt_instance_t instance = nullptr;
  axrt_device_t device = nullptr;
  axrt_stream_t stream = nullptr;
};

std::vector<int64_t> Span(const int64_t* values, uint32_t count) {
  return std::vector<int64_t>(values, values + count);
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

TEST_CASE_METHOD(Cpu, "versioned export then import is zero copy", "[dlpack]") {
  axrt_tensor_t tensor = Floats({2, 3}, Iota(6));
  std::byte* base = Map(tensor);

  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
  REQUIRE(managed != nullptr);
  CHECK(managed->version.major == 1);
  CHECK(managed->version.minor == AXRT_DLPACK_MINOR_VERSION);
  CHECK(managed->flags == 0);
  REQUIRE(managed->deleter != nullptr);
  const DLTensor& dl = managed->dl_tensor;
  CHECK(DeviceType(dl.device) == kCpu);
  CHECK(dl.device.device_id == 0);
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  CHECK(dl.dtype.lanes == 1);
  REQUIRE(dl.ndim == 2);
  CHECK(Span(dl.shape, 2) == std::vector<int64_t>{2, 3});
  REQUIRE(dl.strides != nullptr);
  CHECK(Span(dl.strides, 2) == std::vector<int64_t>{3, 1});
  CHECK(dl.byte_offset == 0);
  CHECK(dl.data == base);

  DeleterSpy::Wrap(managed);
  axrt_tensor_t imported = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &imported));
  CHECK(Map(imported) == base);  // the same memory, not a copy
  const axrt_tensor_info_t info = Info(imported);
  CHECK(info.dtype == AXRT_DTYPE_FLOAT32);
  CHECK(Span(info.shape, info.rank) == std::vector<int64_t>{2, 3});
  CHECK(Span(info.strides, info.rank) == std::vector<int64_t>{3, 1});
  CHECK(info.byte_offset == 0);
  CHECK(info.flags == 0);
  CHECK(BufferInfo(imported).size == 24);
  // Writes through one are seen through the other.
  const float seven = 7.0f;
  std::memcpy(Map(imported) + 4, &seven, sizeof(seven));
  CHECK(FloatAt(ReadBuffer(tensor), 1) == 7.0f);

  axrt_tensor_release(tensor);  // the export keeps the memory alive
  CHECK(FloatAt(ReadBuffer(imported), 5) == 5.0f);
  CHECK(DeleterSpy::Calls() == 0);
  axrt_tensor_release(imported);
  CHECK(DeleterSpy::Calls() == 1);
}

TEST_CASE_METHOD(Cpu, "legacy export then import is zero copy", "[dlpack]") {
  axrt_tensor_t tensor = Floats({4}, Iota(4));
  DLManagedTensor* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack(tensor, &managed));
  REQUIRE(managed != nullptr);
  CHECK(DeviceType(managed->dl_tensor.device) == kCpu);
  CHECK(managed->dl_tensor.data == Map(tensor));
  CHECK(managed->dl_tensor.ndim == 1);
  CHECK(managed->dl_tensor.strides[0] == 1);
  DeleterSpy::Wrap(managed);
  axrt_tensor_t imported = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, managed, &imported));
  CHECK(Map(imported) == Map(tensor));
  CHECK(Info(imported).flags == 0);
  axrt_tensor_release(imported);
  CHECK(DeleterSpy::Calls() == 1);
  CHECK(FloatAt(ReadBuffer(tensor), 3) == 3.0f);
  axrt_tensor_release(tensor);
}

TEST_CASE_METHOD(Cpu, "an export keeps its tensor alive until its deleter runs, on any thread",
                 "[dlpack]") {
  axrt_tensor_t tensor = Floats({16}, Iota(16));
  DLManagedTensorVersioned* versioned = nullptr;
  DLManagedTensor* legacy = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &versioned));
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack(tensor, &legacy));
  axrt_tensor_release(tensor);
  // Still readable: the exports hold references (ASan reports otherwise).
  float last = 0;
  std::memcpy(&last, static_cast<std::byte*>(versioned->dl_tensor.data) + 15 * sizeof(float),
              sizeof(last));
  CHECK(last == 15.0f);
  std::thread a([&] { versioned->deleter(versioned); });
  std::thread b([&] { legacy->deleter(legacy); });
  a.join();
  b.join();
}

TEST_CASE_METHOD(Cpu, "exports describe the tensor's byte offset within its buffer",
                 "[dlpack]") {
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_allocate(device, 1024, nullptr, &buffer));
  axrt_buffer_t view = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_create_view(buffer, 256, 512, &view));
  void* view_base = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_map(view, &view_base));

  const int64_t shape[] = {3, 2};
  const int64_t strides[] = {1, 3};  // column-major
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = AXRT_DTYPE_FLOAT32;
  desc.rank = 2;
  desc.shape = shape;
  desc.strides = strides;
  desc.byte_offset = 40;
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_create(view, &desc, &tensor));

  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
  CHECK(managed->dl_tensor.data == view_base);
  CHECK(managed->dl_tensor.byte_offset == 40);
  CHECK(Span(managed->dl_tensor.strides, 2) == std::vector<int64_t>{1, 3});

  // Imported again, the buffer starts at element 0 and spans its elements.
  axrt_tensor_t imported = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &imported));
  CHECK(Map(imported) == static_cast<std::byte*>(view_base) + 40);
  CHECK(BufferInfo(imported).size == 6 * sizeof(float));
  const axrt_tensor_info_t info = Info(imported);
  CHECK(info.byte_offset == 0);
  CHECK(Span(info.strides, 2) == std::vector<int64_t>{1, 3});
  CHECK_FALSE(info.contiguous);

  axrt_tensor_release(imported);
  axrt_tensor_release(tensor);
  axrt_buffer_release(view);
  axrt_buffer_release(buffer);
}

// ---------------------------------------------------------------------------
// Imports of a producer's memory
// ---------------------------------------------------------------------------

TEST_CASE_METHOD(Cpu, "an import's deleter runs once, when the last reference to its memory goes",
                 "[dlpack]") {
  Producer producer;
  producer.bytes = Iota(8);
  producer.shape = {8};
  SECTION("versioned") {
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    axrt_buffer_t view = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_create_view(buffer, 8, 8, &view));
    const int64_t two[] = {2};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = two;
    axrt_tensor_t on_view = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_create(view, &desc, &on_view));
    CHECK(FloatAt(ReadBuffer(on_view), 1) == 3.0f);

    axrt_tensor_release(tensor);
    CHECK(producer.deleted == 0);
    axrt_buffer_release(buffer);
    CHECK(producer.deleted == 0);
    axrt_buffer_release(view);
    CHECK(producer.deleted == 0);
    axrt_tensor_release(on_view);
    CHECK(producer.deleted == 1);
  }
  SECTION("legacy") {
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &tensor));
    CHECK(Map(tensor) == producer.bytes.data());
    axrt_tensor_retain(tensor);
    axrt_tensor_release(tensor);
    CHECK(producer.deleted == 0);
    axrt_tensor_release(tensor);
    CHECK(producer.deleted == 1);
  }
  SECTION("a NULL deleter is never called") {
    DLManagedTensorVersioned* managed = producer.Versioned();
    managed->deleter = nullptr;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &tensor));
    axrt_tensor_release(tensor);
    CHECK(producer.deleted == 0);
  }
  SECTION("deallocating the buffer in stream order runs the deleter then") {
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    REQUIRE_CALL_OK(axrt_stream_deallocate_buffer(stream, buffer));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CHECK(producer.deleted == 1);
    DLManagedTensorVersioned* again = nullptr;
    REQUIRE_CALL_FAILS(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &again),
                  AXRT_STATUS_CODE_FAILED_PRECONDITION, "deallocated");
    CHECK(again == nullptr);
    axrt_buffer_release(buffer);
    axrt_tensor_release(tensor);
    CHECK(producer.deleted == 1);
  }
}

TEST_CASE_METHOD(Cpu, "kDLCUDAHost memory imports as host-pinned memory on cpu:0", "[dlpack]") {
  Producer producer;
  producer.bytes = Iota(4);
  producer.shape = {4};
  producer.device = Device(kCudaHost, 0);
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
  CHECK(Map(tensor) == producer.bytes.data());
  CHECK(BufferInfo(tensor).memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
  axrt_buffer_t buffer = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
  axrt_device_t on = nullptr;
  REQUIRE_CALL_OK(axrt_buffer_get_device(buffer, &on));
  CHECK(on == device);
  axrt_device_release(on);
  axrt_buffer_release(buffer);
  // Exported again from cpu:0 it is CPU memory.
  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
  CHECK(DeviceType(managed->dl_tensor.device) == kCpu);
  managed->deleter(managed);
  axrt_tensor_release(tensor);
  CHECK(producer.deleted == 1);
}

TEST_CASE_METHOD(Cpu, "imports honour strides and byte_offset", "[dlpack]") {
  // A producer's [4, 6] row-major matrix of 0..23.
  Producer producer;
  producer.bytes = Iota(24);
  SECTION("transposed") {
    // The whole matrix transposed: [6, 4] with strides [1, 6].
    producer.shape = {6, 4};
    producer.strides = {1, 6};
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    const axrt_tensor_info_t info = Info(tensor);
    CHECK(Span(info.strides, 2) == std::vector<int64_t>{1, 6});
    CHECK_FALSE(info.contiguous);
    CHECK(Map(tensor) == producer.bytes.data());
    const std::vector<std::byte> bytes = ReadBuffer(tensor);
    REQUIRE(bytes.size() == 24 * sizeof(float));
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        // t[i][j] is the producer's m[j][i].
        CHECK(FloatAt(bytes, static_cast<size_t>(i * 1 + j * 6)) == static_cast<float>(j * 6 + i));
      }
    }
    axrt_tensor_release(tensor);
  }
  SECTION("a strided slice at a byte offset") {
    // m[1:4:2, 2:5]: rows 1 and 3, columns 2..4.
    producer.shape = {2, 3};
    producer.strides = {12, 1};
    producer.byte_offset = (1 * 6 + 2) * sizeof(float);
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &tensor));
    CHECK(Map(tensor) == producer.bytes.data() + producer.byte_offset);
    // From element 0 to the last: 12 + 2 + 1 elements.
    CHECK(BufferInfo(tensor).size == 15 * sizeof(float));
    const std::vector<std::byte> bytes = ReadBuffer(tensor);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t row = 1 + 2 * i;
        const int64_t col = 2 + j;
        CHECK(FloatAt(bytes, static_cast<size_t>(i * 12 + j)) ==
              static_cast<float>(row * 6 + col));
      }
    }
    axrt_tensor_release(tensor);
  }
  SECTION("broadcast (stride 0)") {
    producer.shape = {3, 4};
    producer.strides = {0, 1};
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    CHECK(BufferInfo(tensor).size == 4 * sizeof(float));
    axrt_tensor_release(tensor);
  }
  SECTION("NULL strides are compact row-major") {
    producer.shape = {2, 3, 4};
    producer.null_strides = true;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &tensor));
    const axrt_tensor_info_t info = Info(tensor);
    CHECK(Span(info.strides, 3) == std::vector<int64_t>{12, 4, 1});
    CHECK(info.contiguous);
    CHECK(BufferInfo(tensor).size == 24 * sizeof(float));
    axrt_tensor_release(tensor);
  }
  SECTION("any stride on a dimension of extent 1") {
    producer.shape = {1, 4};
    producer.strides = {-7, 1};
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    const axrt_tensor_info_t info = Info(tensor);
    CHECK(info.strides[1] == 1);
    CHECK(info.strides[0] >= 0);
    CHECK(info.contiguous);
    axrt_tensor_release(tensor);
  }
  CHECK(producer.deleted == 1);
}

TEST_CASE_METHOD(Cpu, "empty and rank-0 tensors cross both ways", "[dlpack]") {
  Producer producer;
  SECTION("a zero-size tensor with NULL data") {
    producer.shape = {3, 0};
    producer.strides = {-1, 5};  // address nothing
    producer.null_data = true;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    const axrt_tensor_info_t info = Info(tensor);
    CHECK(info.element_count == 0);
    CHECK(Span(info.shape, 2) == std::vector<int64_t>{3, 0});
    CHECK(BufferInfo(tensor).size == 0);
    DLManagedTensorVersioned* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
    CHECK(managed->dl_tensor.data == nullptr);
    CHECK(managed->dl_tensor.byte_offset == 0);
    CHECK(Span(managed->dl_tensor.shape, 2) == std::vector<int64_t>{3, 0});
    managed->deleter(managed);
    axrt_tensor_release(tensor);
  }
  SECTION("a zero-size tensor with data") {
    producer.bytes = Iota(1);
    producer.shape = {0};
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &tensor));
    CHECK(Info(tensor).element_count == 0);
    axrt_tensor_release(tensor);
  }
  SECTION("a scalar") {
    const double pi = 3.25;
    producer.bytes.resize(sizeof(pi));
    std::memcpy(producer.bytes.data(), &pi, sizeof(pi));
    producer.dtype = {kDLFloat, 64, 1};
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(), &tensor));
    const axrt_tensor_info_t info = Info(tensor);
    CHECK(info.rank == 0);
    CHECK(info.dtype == AXRT_DTYPE_FLOAT64);
    CHECK(info.element_count == 1);
    CHECK(BufferInfo(tensor).size == sizeof(double));
    double read = 0;
    std::memcpy(&read, ReadBuffer(tensor).data(), sizeof(read));
    CHECK(read == pi);
    DLManagedTensor* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack(tensor, &managed));
    CHECK(managed->dl_tensor.ndim == 0);
    CHECK(managed->dl_tensor.data == producer.bytes.data());
    managed->deleter(managed);
    axrt_tensor_release(tensor);
  }
  SECTION("an empty axrt tensor exports NULL data") {
    axrt_tensor_t tensor = Floats({2, 0, 3}, {});
    DLManagedTensor* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack(tensor, &managed));
    CHECK(managed->dl_tensor.data == nullptr);
    CHECK(Span(managed->dl_tensor.shape, 3) == std::vector<int64_t>{2, 0, 3});
    axrt_tensor_t imported = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, managed, &imported));
    CHECK(Info(imported).element_count == 0);
    axrt_tensor_release(imported);
    axrt_tensor_release(tensor);
  }
  axrt_tensor_t scalar = Floats({}, Iota(1));
  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(scalar, AXRT_DLPACK_FLAG_NONE, &managed));
  CHECK(managed->dl_tensor.ndim == 0);
  CHECK(managed->dl_tensor.data == Map(scalar));
  managed->deleter(managed);
  axrt_tensor_release(scalar);
}

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------

struct DtypeCase {
  axrt_dtype_t dtype;
  uint8_t code;
  uint8_t bits;
};

const DtypeCase kDtypeCases[] = {
    {AXRT_DTYPE_BOOL, AXRT_DL_BOOL, 8},
    {AXRT_DTYPE_INT2, kDLInt, 2},
    {AXRT_DTYPE_INT4, kDLInt, 4},
    {AXRT_DTYPE_INT8, kDLInt, 8},
    {AXRT_DTYPE_INT16, kDLInt, 16},
    {AXRT_DTYPE_INT32, kDLInt, 32},
    {AXRT_DTYPE_INT64, kDLInt, 64},
    {AXRT_DTYPE_UINT2, kDLUInt, 2},
    {AXRT_DTYPE_UINT4, kDLUInt, 4},
    {AXRT_DTYPE_UINT8, kDLUInt, 8},
    {AXRT_DTYPE_UINT16, kDLUInt, 16},
    {AXRT_DTYPE_UINT32, kDLUInt, 32},
    {AXRT_DTYPE_UINT64, kDLUInt, 64},
    {AXRT_DTYPE_FLOAT16, kDLFloat, 16},
    {AXRT_DTYPE_FLOAT32, kDLFloat, 32},
    {AXRT_DTYPE_FLOAT64, kDLFloat, 64},
    {AXRT_DTYPE_BFLOAT16, kDLBfloat, 16},
    // The DLPack 1.1 codes, as numbers from the specification.
    {AXRT_DTYPE_FLOAT8_E4M3FN, 10, 8},
    {AXRT_DTYPE_FLOAT8_E5M2, 12, 8},
    {AXRT_DTYPE_FLOAT8_E4M3FNUZ, 11, 8},
    {AXRT_DTYPE_FLOAT8_E5M2FNUZ, 13, 8},
    {AXRT_DTYPE_FLOAT8_E8M0FNU, 14, 8},
    {AXRT_DTYPE_FLOAT4_E2M1, 17, 4},
};

TEST_CASE("the AXRT_DL_* codes are DLPack's", "[dlpack]") {
  CHECK(AXRT_DL_BOOL == 6);
  CHECK(AXRT_DL_FLOAT8_E3M4 == 7);
  CHECK(AXRT_DL_FLOAT8_E4M3 == 8);
  CHECK(AXRT_DL_FLOAT8_E4M3B11FNUZ == 9);
  CHECK(AXRT_DL_FLOAT8_E4M3FN == 10);
  CHECK(AXRT_DL_FLOAT8_E4M3FNUZ == 11);
  CHECK(AXRT_DL_FLOAT8_E5M2 == 12);
  CHECK(AXRT_DL_FLOAT8_E5M2FNUZ == 13);
  CHECK(AXRT_DL_FLOAT8_E8M0FNU == 14);
  CHECK(AXRT_DL_FLOAT6_E2M3FN == 15);
  CHECK(AXRT_DL_FLOAT6_E3M2FN == 16);
  CHECK(AXRT_DL_FLOAT4_E2M1FN == 17);
  CHECK(DLPACK_FLAG_BITMASK_READ_ONLY == 1);
  CHECK(DLPACK_FLAG_BITMASK_IS_COPIED == 2);
  CHECK(offsetof(DLManagedTensorVersioned, flags) == 8 + 2 * sizeof(void*));
}

TEST_CASE_METHOD(Cpu, "every element type maps both ways", "[dlpack]") {
  // Every dtype axrt knows is covered: a new one needs a mapping or a
  // deliberate refusal.
  size_t known = 0;
  for (axrt_dtype_t d = 1; d < 256; ++d) known += axrt_dtype_bit_width(d) != 0;
  CHECK(known == sizeof(kDtypeCases) / sizeof(kDtypeCases[0]));

  for (const DtypeCase& c : kDtypeCases) {
    INFO("dtype " << axrt_dtype_name(c.dtype));
    const int64_t shape[] = {2, 4};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = c.dtype;
    desc.rank = 2;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(device, &desc, nullptr, &tensor));
    DLManagedTensorVersioned* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
    CHECK(managed->dl_tensor.dtype.code == c.code);
    CHECK(managed->dl_tensor.dtype.bits == c.bits);
    CHECK(managed->dl_tensor.dtype.lanes == 1);
    axrt_tensor_t imported = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &imported));
    CHECK(Info(imported).dtype == c.dtype);
    // 8 elements of `bits` each, packed.
    CHECK(BufferInfo(imported).size == (8u * c.bits + 7) / 8);
    axrt_tensor_release(imported);
    axrt_tensor_release(tensor);

    Producer producer;
    producer.bytes.resize(16);
    producer.shape = {8};
    producer.dtype = {c.code, c.bits, 1};
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, producer.Legacy(), &imported));
    CHECK(Info(imported).dtype == c.dtype);
    axrt_tensor_release(imported);
    CHECK(producer.deleted == 1);
  }
}

// ---------------------------------------------------------------------------
// Read-only tensors
// ---------------------------------------------------------------------------

TEST_CASE_METHOD(Cpu, "read-only crosses both ways", "[dlpack]") {
  Producer producer;
  producer.bytes = Iota(4);
  producer.shape = {4};
  axrt_tensor_t read_only = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(
      instance, producer.Versioned(DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED),
      &read_only));
  CHECK(Info(read_only).flags == AXRT_TENSOR_FLAG_READ_ONLY);

  // Versioned exports of it say so, with or without the flag.
  for (axrt_dlpack_flags_t flags : {AXRT_DLPACK_FLAG_NONE, AXRT_DLPACK_FLAG_READ_ONLY}) {
    DLManagedTensorVersioned* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(read_only, flags, &managed));
    CHECK(managed->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
    managed->deleter(managed);
  }
  // The legacy form cannot say so, and exports it all the same.
  DLManagedTensor* legacy = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack(read_only, &legacy));
  legacy->deleter(legacy);

  // A writable tensor exports read-only when asked, and stays writable.
  axrt_tensor_t writable = Floats({4}, Iota(4));
  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(writable, AXRT_DLPACK_FLAG_READ_ONLY, &managed));
  CHECK(managed->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(Info(writable).flags == 0);
  // Imported back, it is read-only.
  axrt_tensor_t reimported = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &reimported));
  CHECK(Info(reimported).flags == AXRT_TENSOR_FLAG_READ_ONLY);
  axrt_tensor_release(reimported);

  // A legacy import is writable.
  Producer other;
  other.bytes = Iota(4);
  other.shape = {4};
  axrt_tensor_t from_legacy = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, other.Legacy(), &from_legacy));
  CHECK(Info(from_legacy).flags == 0);

  axrt_tensor_release(from_legacy);
  axrt_tensor_release(writable);
  axrt_tensor_release(read_only);
  CHECK(producer.deleted == 1);
  CHECK(other.deleted == 1);
}

TEST_CASE_METHOD(Cpu, "older axrt_tensor_info_t structs are filled up to their size",
                 "[dlpack]") {
  Producer producer;
  producer.bytes = Iota(4);
  producer.shape = {4};
  axrt_tensor_t tensor = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, producer.Versioned(1), &tensor));
  // A caller built before `flags` existed.
  axrt_tensor_info_t info;
  std::memset(&info, 0xEE, sizeof(info));
  info.struct_size = offsetof(axrt_tensor_info_t, flags);
  info.next = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_query_info(tensor, &info));
  CHECK(info.rank == 1);
  CHECK(info.contiguous);
  CHECK(info.flags == UINT64_C(0xEEEEEEEEEEEEEEEE));
  axrt_tensor_release(tensor);
}

// A one-kernel library: out[i] = in[i] over `n` floats.
const axrt_kernel_info_t kCopyKernels[] = {
    {"dlpack_copy", axrt_test::CopyFloatsKernel, axrt_test::kCopyFloatsParams, 3, 24}};
const axrt_kernel_library_t kCopyLibrary = {
    sizeof(axrt_kernel_library_t), AXRT_KERNEL_ABI_VERSION, 1, "dlpack.test.kernels",
    kCopyKernels, 1, nullptr, nullptr};

// Loads "copy(x: f32[n<=64]) -> y: f32[n]" on cpu:0.
axrt_function_t LoadCopy(const Cpu& cpu, axrt_executable_t* out_executable) {
  REQUIRE_CALL_OK(axrt_instance_register_kernel_library(cpu.instance, &kCopyLibrary));
  const std::vector<uint8_t> bytes =
      axrt_test::BuildCopyExecutable("dlpack.test.kernels", "dlpack_copy");
  REQUIRE_CALL_OK(axrt_executable_load_memory(cpu.device, bytes.data(), bytes.size(), nullptr,
                                         out_executable));
  axrt_function_t function_handle = nullptr;
  REQUIRE_CALL_OK(axrt_executable_get_function(*out_executable, 0, &function_handle));
  return function_handle;
}

TEST_CASE_METHOD(Cpu, "invocations write imported tensors, and refuse read-only outputs",
                 "[dlpack]") {
  axrt_executable_t executable = nullptr;
  axrt_function_t copy = LoadCopy(*this, &executable);
  axrt_tensor_t input = Floats({8}, Iota(8));

  Producer destination;
  destination.bytes.assign(8 * sizeof(float), std::byte{0});
  destination.shape = {8};
  axrt_tensor_t read_only = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(
      instance, destination.Versioned(DLPACK_FLAG_BITMASK_READ_ONLY), &read_only));
  axrt_tensor_t inputs[] = {input};
  axrt_tensor_t outputs[] = {read_only};
  REQUIRE_CALL_FAILS(axrt_function_invoke(copy, stream, inputs, 1, outputs, 1, nullptr),
                AXRT_STATUS_CODE_INVALID_ARGUMENT, "function 'copy'", "output 0 ('y')",
                "read-only");
  CHECK(outputs[0] == read_only);
  // As an input it is fine.
  axrt_tensor_t read_only_inputs[] = {read_only};
  axrt_tensor_t allocated[] = {nullptr};
  REQUIRE_CALL_OK(axrt_function_invoke(copy, stream, read_only_inputs, 1, allocated, 1, nullptr));
  axrt_tensor_release(allocated[0]);
  axrt_tensor_release(read_only);
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(destination.deleted == 1);

  // A writable import is written in place: the producer sees the result.
  Producer writable;
  writable.bytes.assign(8 * sizeof(float), std::byte{0});
  writable.shape = {8};
  axrt_tensor_t output = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, writable.Legacy(), &output));
  outputs[0] = output;
  REQUIRE_CALL_OK(axrt_function_invoke(copy, stream, inputs, 1, outputs, 1, nullptr));
  axrt_tensor_release(output);  // the queued call keeps it alive
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  CHECK(FloatAt(writable.bytes, 7) == 7.0f);
  CHECK(writable.deleted == 1);

  axrt_tensor_release(input);
  axrt_function_release(copy);
  axrt_executable_release(executable);
}

TEST_CASE_METHOD(Cpu, "a strided import is refused as a call's input before anything is queued",
                 "[dlpack]") {
  axrt_executable_t executable = nullptr;
  axrt_function_t copy = LoadCopy(*this, &executable);
  Producer strided;
  strided.bytes = Iota(16);
  strided.shape = {8};
  strided.strides = {2};  // every other float: a view the kernels cannot take
  axrt_tensor_t input = nullptr;
  REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, strided.Versioned(), &input));
  CHECK_FALSE(Info(input).contiguous);
  axrt_tensor_t inputs[] = {input};
  axrt_tensor_t outputs[] = {nullptr};
  axrt_stream_statistics_t before = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(device, &before));
  REQUIRE_CALL_FAILS(axrt_function_invoke(copy, stream, inputs, 1, outputs, 1, nullptr),
                     AXRT_STATUS_CODE_INVALID_ARGUMENT, "function 'copy'", "input 0 ('x')",
                     "contiguous row-major");
  CHECK(outputs[0] == nullptr);
  axrt_stream_statistics_t after = AXRT_STREAM_STATISTICS_INIT;
  REQUIRE_CALL_OK(axrt_device_query_stream_statistics(device, &after));
  CHECK(after.function_calls == before.function_calls);  // nothing was queued
  REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
  axrt_tensor_release(input);
  CHECK(strided.deleted == 1);
  axrt_function_release(copy);
  axrt_executable_release(executable);
}

// ---------------------------------------------------------------------------
// Refused imports keep ownership with the caller
// ---------------------------------------------------------------------------

axrt_tensor_t Sentinel() { return reinterpret_cast<axrt_tensor_t>(uintptr_t{0x5E47000D}); }

TEST_CASE_METHOD(Cpu, "refused imports call no deleter and write no tensor", "[dlpack]") {
  Producer p;
  p.bytes = Iota(64);
  p.shape = {4, 4};
  axrt_tensor_t out = Sentinel();
  // Both forms, with the producer's tensor as `mutate` leaves it.
  auto refuse = [&](axrt_status_code_t code, std::initializer_list<const char*> needles) {
    for (int form = 0; form < 2; ++form) {
      INFO((form == 0 ? "versioned" : "legacy"));
      Outcome outcome =
          Take(form == 0 ? axrt_tensor_import_dlpack_versioned(instance, p.Versioned(), &out)
                         : axrt_tensor_import_dlpack(instance, p.Legacy(), &out));
      INFO(axrt_status_code_name(outcome.code) << ": " << outcome.message);
      CHECK(outcome.code == code);
      for (const char* needle : needles) {
        INFO("expected the message to mention '" << needle << "'");
        CHECK(outcome.message.find(needle) != std::string::npos);
      }
      CHECK(out == Sentinel());
      CHECK(p.deleted == 0);
    }
  };
  SECTION("devices") {
    p.device = Device(kOpenCL, 0);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLOpenCL", "dl_tensor.device"});
    p.device = Device(kRocm, 1);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLROCM"});
    p.device = Device(kCudaManaged, 0);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLCUDAManaged"});
    p.device = Device(kTrn, 0);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLTrn"});
    p.device = Device(99, 0);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"99"});
    p.device = Device(kCuda, 0);  // the instance has the CPU driver only
    refuse(AXRT_STATUS_CODE_NOT_FOUND, {"kDLCUDA", "cuda:0", "cpu:0"});
    p.device = Device(kCpu, 1);
    refuse(AXRT_STATUS_CODE_NOT_FOUND, {"cpu:1"});
    p.device = Device(kCpu, -1);
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"-1"});
  }
  SECTION("element types") {
    p.dtype = {kDLFloat, 32, 4};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"4 lanes"});
    p.dtype = {kDLFloat, 32, 0};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"0 lanes"});
    p.dtype = {kDLComplex, 64, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLComplex", "bits 64"});
    p.dtype = {kDLFloat, 8, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLFloat", "bits 8"});
    p.dtype = {AXRT_DL_BOOL, 1, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLBool", "bits 1"});
    p.dtype = {kDLInt, 12, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"bits 12"});
    p.dtype = {AXRT_DL_FLOAT6_E2M3FN, 6, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"kDLFloat6_e2m3fn"});
    p.dtype = {200, 8, 1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"code 200"});
  }
  SECTION("layouts") {
    p.strides = {4, -1};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"strides[1]", "-1"});
    p.strides = {int64_t{1} << 62, 1};
    p.shape = {1 << 20, 4};
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"strides"});
    p.strides = {4, (int64_t{1} << 62) + 1};
    p.shape = {4, 4};
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"strides[1]"});
    p.strides.clear();
    p.shape = {4, -4};
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"shape[1]", "-4"});
    p.shape = std::vector<int64_t>(AXRT_TENSOR_MAX_RANK + 1, 1);
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"ndim", "17"});
    p.shape = {int64_t{1} << 40, int64_t{1} << 40};
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"shape"});
    p.shape = {8};
    p.dtype = {kDLInt, 4, 1};
    p.strides = {2};
    refuse(AXRT_STATUS_CODE_UNIMPLEMENTED, {"int4", "contiguous"});
  }
  SECTION("malformed tensors") {
    p.null_data = true;
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"data", "NULL", "16 elements"});
    p.null_data = false;
    p.byte_offset = UINT64_MAX - 8;
    refuse(AXRT_STATUS_CODE_INVALID_ARGUMENT, {"overflows"});
    p.byte_offset = 0;
    for (int form = 0; form < 2; ++form) {
      DLTensor& t = form == 0 ? p.Versioned()->dl_tensor : p.Legacy()->dl_tensor;
      t.shape = nullptr;
      Outcome outcome = Take(form == 0 ? axrt_tensor_import_dlpack_versioned(instance,
                                                                             &p.versioned, &out)
                                       : axrt_tensor_import_dlpack(instance, &p.legacy, &out));
      CHECK(outcome.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
      CHECK(outcome.message.find("shape") != std::string::npos);
      t = p.Describe();
      t.ndim = -2;
      outcome = Take(form == 0 ? axrt_tensor_import_dlpack_versioned(instance, &p.versioned, &out)
                               : axrt_tensor_import_dlpack(instance, &p.legacy, &out));
      CHECK(outcome.code == AXRT_STATUS_CODE_INVALID_ARGUMENT);
      CHECK(outcome.message.find("ndim") != std::string::npos);
    }
    CHECK(out == Sentinel());
    CHECK(p.deleted == 0);
  }
  SECTION("versions and flags of the versioned form") {
    for (auto [major, minor] : {std::pair{0u, 8u}, std::pair{2u, 0u}, std::pair{UINT32_MAX, 1u}}) {
      const std::string version = std::to_string(major) + "." + std::to_string(minor);
      REQUIRE_CALL_FAILS(
          axrt_tensor_import_dlpack_versioned(instance, p.Versioned(0, major, minor), &out),
          AXRT_STATUS_CODE_UNIMPLEMENTED, "managed->version", version.c_str());
    }
    p.shape = {8};
    p.dtype = {AXRT_DL_FLOAT4_E2M1FN, 4, 1};
    REQUIRE_CALL_FAILS(axrt_tensor_import_dlpack_versioned(
                      instance, p.Versioned(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED), &out),
                  AXRT_STATUS_CODE_UNIMPLEMENTED, "padded");
    CHECK(out == Sentinel());
    CHECK(p.deleted == 0);
    // Any minor of major 1 is taken; unknown flag bits are informational.
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, p.Versioned(1u << 20, 1, 7), &out));
    CHECK(Info(out).dtype == AXRT_DTYPE_FLOAT4_E2M1);
    axrt_tensor_release(out);
    CHECK(p.deleted == 1);
  }
}

TEST_CASE_METHOD(Cpu, "export refusals", "[dlpack]") {
  axrt_tensor_t tensor = Floats({4}, Iota(4));
  DLManagedTensorVersioned* managed = nullptr;
  REQUIRE_CALL_FAILS(axrt_tensor_export_dlpack_versioned(tensor, 1u << 5, &managed),
                AXRT_STATUS_CODE_UNIMPLEMENTED, "flags", "0x20");
  CHECK(managed == nullptr);
  axrt_tensor_release(tensor);
}

// ---------------------------------------------------------------------------
// CUDA, against the mock Driver API
// ---------------------------------------------------------------------------

TEST_CASE("CUDA device memory and pinned memory cross both ways", "[.cuda-mock]") {
  axrt_instance_t instance = nullptr;
  REQUIRE_CALL_OK(axrt_instance_create(nullptr, &instance));
  axrt_device_t cuda1 = nullptr;
  REQUIRE_CALL_OK(axrt_instance_find_device(instance, "cuda:1", &cuda1));
  axrt_stream_t stream = nullptr;
  REQUIRE_CALL_OK(axrt_stream_create(cuda1, nullptr, &stream));
  const std::vector<std::byte> values = Iota(8);

  SECTION("device-local") {
    const int64_t shape[] = {8};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_allocate(cuda1, &desc, nullptr, &tensor));
    axrt_buffer_t buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(tensor, &buffer));
    REQUIRE_CALL_OK(axrt_stream_copy_from_host(stream, values.data(), buffer, 0, values.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(buffer, &info));

    DLManagedTensorVersioned* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack_versioned(tensor, AXRT_DLPACK_FLAG_NONE, &managed));
    CHECK(DeviceType(managed->dl_tensor.device) == kCuda);
    CHECK(managed->dl_tensor.device.device_id == 1);
    CHECK(reinterpret_cast<uintptr_t>(managed->dl_tensor.data) == info.device_address);

    axrt_tensor_t imported = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack_versioned(instance, managed, &imported));
    axrt_buffer_t imported_buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(imported, &imported_buffer));
    axrt_buffer_info_t imported_info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(imported_buffer, &imported_info));
    CHECK(imported_info.device_address == info.device_address);
    CHECK(imported_info.memory_type == AXRT_MEMORY_TYPE_DEVICE_LOCAL);
    CHECK_FALSE(imported_info.host_visible);
    axrt_device_t on = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_get_device(imported_buffer, &on));
    CHECK(on == cuda1);
    axrt_device_release(on);
    std::vector<std::byte> read(values.size());
    REQUIRE_CALL_OK(axrt_stream_copy_to_host(stream, imported_buffer, 0, read.data(), read.size()));
    REQUIRE_CALL_OK(axrt_stream_synchronize(stream));
    CHECK(read == values);
    axrt_buffer_release(imported_buffer);
    axrt_tensor_release(imported);
    axrt_buffer_release(buffer);
    axrt_tensor_release(tensor);
  }
  SECTION("host-pinned memory of a CUDA device is kDLCUDAHost, imported on cpu:0") {
    axrt_buffer_options_t options = AXRT_BUFFER_OPTIONS_INIT;
    options.memory_type = AXRT_MEMORY_TYPE_HOST_PINNED;
    axrt_buffer_t pinned = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_allocate(cuda1, 64, &options, &pinned));
    void* host = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(pinned, &host));
    std::memcpy(host, values.data(), values.size());
    const int64_t shape[] = {8};
    axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
    desc.dtype = AXRT_DTYPE_FLOAT32;
    desc.rank = 1;
    desc.shape = shape;
    axrt_tensor_t tensor = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_create(pinned, &desc, &tensor));
    DLManagedTensor* managed = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_export_dlpack(tensor, &managed));
    CHECK(DeviceType(managed->dl_tensor.device) == kCudaHost);
    CHECK(managed->dl_tensor.device.device_id == 0);
    CHECK(managed->dl_tensor.data == host);

    axrt_tensor_t imported = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_import_dlpack(instance, managed, &imported));
    axrt_buffer_t imported_buffer = nullptr;
    REQUIRE_CALL_OK(axrt_tensor_get_buffer(imported, &imported_buffer));
    axrt_device_t on = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_get_device(imported_buffer, &on));
    axrt_device_properties_t properties = AXRT_DEVICE_PROPERTIES_INIT;
    REQUIRE_CALL_OK(axrt_device_query_properties(on, &properties));
    CHECK(std::string(properties.id) == "cpu:0");
    axrt_device_release(on);
    axrt_buffer_info_t info = AXRT_BUFFER_INFO_INIT;
    REQUIRE_CALL_OK(axrt_buffer_query_info(imported_buffer, &info));
    CHECK(info.memory_type == AXRT_MEMORY_TYPE_HOST_PINNED);
    void* mapped = nullptr;
    REQUIRE_CALL_OK(axrt_buffer_map(imported_buffer, &mapped));
    CHECK(mapped == host);
    axrt_buffer_release(imported_buffer);
    axrt_tensor_release(imported);
    axrt_tensor_release(tensor);
    axrt_buffer_release(pinned);
  }
  SECTION("a CUDA ordinal the instance lacks") {
    Producer p;
    p.bytes = Iota(4);
    p.shape = {4};
    p.device = Device(kCuda, 5);
    axrt_tensor_t out = Sentinel();
    REQUIRE_CALL_FAILS(axrt_tensor_import_dlpack_versioned(instance, p.Versioned(), &out),
                  AXRT_STATUS_CODE_NOT_FOUND, "cuda:5", "cuda:0, cuda:1");
    CHECK(out == Sentinel());
    CHECK(p.deleted == 0);
  }
  axrt_stream_release(stream);
  axrt_device_release(cuda1);
  axrt_instance_release(instance);
}

}  // namespace
