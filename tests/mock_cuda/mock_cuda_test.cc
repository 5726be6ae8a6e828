// Smoke test of the CUDA Driver API mock: fetches every entry point through
// cuGetProcAddress_v2, as the CUDA driver does, and drives the control API.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda.h"
#include "tests/mock_cuda/mock_cuda_table.h"

namespace {

const axrt::mock_cuda::Table& cu() { return axrt::mock_cuda::table(); }

bool g_initialized = false;

void init() {
  REQUIRE(cu().cuInit(0) == CUDA_SUCCESS);
  g_initialized = true;
}

// Each test starts from a reset mock with device 0's primary context current.
struct Fixture {
  Fixture() {
    axrt_mock_cuda_reset();
    init();
    REQUIRE(cu().cuDevicePrimaryCtxRetain(&context, 0) == CUDA_SUCCESS);
    REQUIRE(cu().cuCtxSetCurrent(context) == CUDA_SUCCESS);
  }
  ~Fixture() {
    cu().cuCtxSetCurrent(nullptr);
    cu().cuDevicePrimaryCtxRelease(0);
    axrt_mock_cuda_reset();
  }
  CUcontext context = nullptr;
};

axrt_mock_cuda_objects_t live() {
  axrt_mock_cuda_objects_t objects;
  axrt_mock_cuda_live_objects(&objects);
  return objects;
}

// Nothing is left but the fixture's context retain.
void check_no_leaks() {
  const axrt_mock_cuda_objects_t o = live();
  CHECK(o.device_allocations == 0);
  CHECK(o.pinned_allocations == 0);
  CHECK(o.pools == 0);
  CHECK(o.streams == 0);
  CHECK(o.events == 0);
  CHECK(o.modules == 0);
  CHECK(o.context_retains == 1);
  CHECK(o.graphs == 0);
  CHECK(o.graph_execs == 0);
}

// A kernel y[i] = a * x[i] + y[i] over a grid of 1D blocks.
// Parameters: float* x, float a, float* y, uint32_t n -> offsets 0, 8, 16, 24.
int saxpy(void*, const void* params, const axrt_mock_cuda_dim3*, const axrt_mock_cuda_dim3* block,
          const axrt_mock_cuda_dim3* block_id, void*, uint32_t) {
  const auto* p = static_cast<const unsigned char*>(params);
  float* x = nullptr;
  float a = 0;
  float* y = nullptr;
  uint32_t n = 0;
  std::memcpy(&x, p + 0, 8);
  std::memcpy(&a, p + 8, 4);
  std::memcpy(&y, p + 16, 8);
  std::memcpy(&n, p + 24, 4);
  for (uint32_t t = 0; t < block->x; ++t) {
    const uint32_t i = block_id->x * block->x + t;
    if (i < n) y[i] = a * x[i] + y[i];
  }
  return 0;
}
constexpr uint32_t kSaxpySizes[] = {8, 4, 8, 4};

int faulting_kernel(void*, const void*, const axrt_mock_cuda_dim3*, const axrt_mock_cuda_dim3*,
                    const axrt_mock_cuda_dim3*, void*, uint32_t) {
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

int noop_kernel(void*, const void*, const axrt_mock_cuda_dim3*, const axrt_mock_cuda_dim3*,
                const axrt_mock_cuda_dim3*, void*, uint32_t) {
  return 0;
}

// A host function that blocks its stream until *flag is set.
void wait_until(void* flag) {
  while (!static_cast<std::atomic<bool>*>(flag)->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

constexpr char kMockImage[] = "AXRTMOCKCUDA\nsaxpy_test\naxrt_add_f32\n";

}  // namespace

TEST_CASE("entry points are found, hidden and version-checked", "[mock_cuda]") {
  (void)cu();  // fetch the table first: its lookups are not counted below
  axrt_mock_cuda_reset();
  // Every entry point of the list resolves at its listed version.
#define AXRT_TEST_CHECK(name, ret, params, version, required) CHECK(cu().name != nullptr);
  AXRT_CUDA_SYMBOLS(AXRT_TEST_CHECK)
#undef AXRT_TEST_CHECK

  void* pfn = reinterpret_cast<void*>(1);
  int status = -1;
  CHECK(cuGetProcAddress_v2("cuNoSuchThing", &pfn, 12080, 0, &status) == CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK(pfn == nullptr);
  CHECK(cuGetProcAddress_v2("cuMemPoolCreate", &pfn, 11000, 0, &status) == CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CHECK(pfn == nullptr);

  REQUIRE(axrt_mock_cuda_hide_symbol("cuLaunchKernelEx") == 0);
  CHECK(cuGetProcAddress_v2("cuLaunchKernelEx", &pfn, 12080, 0, &status) == CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  setenv("AXRT_MOCK_CUDA_HIDE", "cuLibraryLoadData, cuFuncGetParamInfo", 1);
  CHECK(cuGetProcAddress_v2("cuFuncGetParamInfo", &pfn, 12080, 0, &status) ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(cuGetProcAddress_v2("cuLibraryLoadData", &pfn, 12080, 0, &status) == CUDA_ERROR_NOT_FOUND);
  unsetenv("AXRT_MOCK_CUDA_HIDE");
  axrt_mock_cuda_reset();
  CHECK(cuGetProcAddress_v2("cuLaunchKernelEx", &pfn, 12080, 0, &status) == CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  CHECK(pfn == reinterpret_cast<void*>(cu().cuLaunchKernelEx));
  CHECK(axrt_mock_cuda_call_count("cuGetProcAddress_v2") == 1);
}

TEST_CASE("init, environment, devices and errors", "[mock_cuda]") {
  axrt_mock_cuda_reset();
  int count = 0;
  if (!g_initialized) CHECK(cu().cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  CHECK(cu().cuDriverGetVersion(&version) == CUDA_SUCCESS);
  CHECK(version == 12080);

  setenv("AXRT_MOCK_CUDA_INIT_ERROR", "100", 1);
  CHECK(cu().cuInit(0) == CUDA_ERROR_NO_DEVICE);
  unsetenv("AXRT_MOCK_CUDA_INIT_ERROR");
  init();

  REQUIRE(cu().cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 2);
  CUdevice device = -1;
  CHECK(cu().cuDeviceGet(&device, 1) == CUDA_SUCCESS);
  CHECK(device == 1);
  CHECK(cu().cuDeviceGet(&device, 2) == CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  CHECK(cu().cuDeviceGetName(name, sizeof(name), 1) == CUDA_SUCCESS);
  CHECK(std::string(name) == "axrt mock GPU 1");
  size_t total = 0;
  CHECK(cu().cuDeviceTotalMem(&total, 0) == CUDA_SUCCESS);
  CHECK(total == size_t{1024} << 20);
  int value = 0;
  CHECK(cu().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == 0);
  CHECK(value == 9);
  CHECK(cu().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                  0) == 0);
  CHECK(value == 232448);
  CHECK(cu().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0) == 0);
  CHECK(value == 1);
  CHECK(cu().cuDeviceGetAttribute(&value, 12345, 0) == CUDA_SUCCESS);
  CHECK(value == 0);

  // Nothing is live, so cuInit takes a new configuration.
  setenv("AXRT_MOCK_CUDA_COMPUTE_CAPABILITY", "80", 1);
  setenv("AXRT_MOCK_CUDA_DEVICE_COUNT", "1", 1);
  init();
  unsetenv("AXRT_MOCK_CUDA_COMPUTE_CAPABILITY");
  unsetenv("AXRT_MOCK_CUDA_DEVICE_COUNT");
  CHECK(cu().cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 1);
  CHECK(cu().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == 0);
  CHECK(value == 8);
  CHECK(cu().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 0) == 0);
  CHECK(value == 0);
  init();  // back to the defaults
  CHECK(cu().cuDeviceGetCount(&count) == CUDA_SUCCESS);
  CHECK(count == 2);

  const char* text = nullptr;
  CHECK(cu().cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "CUDA_ERROR_ILLEGAL_ADDRESS");
  CHECK(cu().cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &text) == CUDA_SUCCESS);
  CHECK(std::string(text) == "out of memory");
  CHECK(cu().cuGetErrorName(12345, &text) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("contexts are retained and current per thread", "[mock_cuda]") {
  axrt_mock_cuda_reset();
  init();
  CUdeviceptr p = 0;
  CHECK(cu().cuMemAlloc(&p, 64) == CUDA_ERROR_INVALID_CONTEXT);
  CUcontext c0 = nullptr, c1 = nullptr, again = nullptr;
  REQUIRE(cu().cuDevicePrimaryCtxRetain(&c0, 0) == CUDA_SUCCESS);
  REQUIRE(cu().cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
  REQUIRE(cu().cuDevicePrimaryCtxRetain(&again, 0) == CUDA_SUCCESS);
  CHECK(c0 == again);
  CHECK(c0 != c1);
  CHECK(live().context_retains == 3);
  REQUIRE(cu().cuCtxSetCurrent(c1) == CUDA_SUCCESS);
  CUcontext other_thread = c0;
  std::thread([&] { cu().cuCtxGetCurrent(&other_thread); }).join();
  CHECK(other_thread == nullptr);
  CUcontext current = nullptr;
  CHECK(cu().cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  CHECK(current == c1);
  CHECK(cu().cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK(cu().cuCtxSetCurrent(nullptr) == CUDA_SUCCESS);
  CHECK(cu().cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
  CHECK(cu().cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
  CHECK(cu().cuDevicePrimaryCtxRelease(0) == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(cu().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
  CHECK(live().context_retains == 0);
}

TEST_CASE_METHOD(Fixture, "memory: allocate, copy, set, limits", "[mock_cuda]") {
  const auto& c = cu();
  CUdeviceptr d = 0;
  REQUIRE(c.cuMemAlloc(&d, 1024) == CUDA_SUCCESS);
  CHECK(d % 256 == 0);
  std::vector<uint32_t> host(256);
  for (uint32_t i = 0; i < 256; ++i) host[i] = i;
  REQUIRE(c.cuMemcpyHtoDAsync(d, host.data(), 1024, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemsetD32Async(d + 16, 0xdeadbeef, 4, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemsetD8Async(d + 1020, 0xab, 4, nullptr) == CUDA_SUCCESS);
  std::vector<uint32_t> back(256);
  REQUIRE(c.cuMemcpyDtoHAsync(back.data(), d, 1024, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(back[3] == 3);
  CHECK(back[4] == 0xdeadbeef);
  CHECK(back[7] == 0xdeadbeef);
  CHECK(back[8] == 8);
  CHECK(back[255] == 0xabababab);

  // Ranges outside live allocations, misaligned memsets.
  CHECK(c.cuMemcpyHtoDAsync(d + 1000, host.data(), 100, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuMemsetD32Async(d + 2, 0, 1, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuMemcpyDtoHAsync(back.data(), 0x1000, 4, nullptr) == CUDA_ERROR_INVALID_VALUE);

  // Pinned memory is a UVA pointer for generic copies.
  void* pinned = nullptr;
  REQUIRE(c.cuMemHostAlloc(&pinned, 1024, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
  CUdeviceptr pinned_device = 0;
  CHECK(c.cuMemHostGetDevicePointer(&pinned_device, pinned, 0) == CUDA_SUCCESS);
  CHECK(pinned_device == reinterpret_cast<CUdeviceptr>(pinned));
  REQUIRE(c.cuMemcpyAsync(pinned_device, d, 1024, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(static_cast<uint32_t*>(pinned)[4] == 0xdeadbeef);
  CHECK(c.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(back.data()), d, 4, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);  // pageable memory is not a UVA pointer here

  CUmemorytype type = 0;
  CHECK(c.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 8) == CUDA_SUCCESS);
  CHECK(type == CU_MEMORYTYPE_DEVICE);
  CHECK(c.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pinned_device) == 0);
  CHECK(type == CU_MEMORYTYPE_HOST);
  CHECK(c.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                reinterpret_cast<CUdeviceptr>(back.data())) ==
        CUDA_ERROR_INVALID_VALUE);

  // 2D: copy a 4x4 block of a 16-byte-pitch device image into a pinned one,
  // then clear a 2D device region.
  CUDA_MEMCPY2D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = d;
  copy.srcXInBytes = 4;
  copy.srcPitch = 64;
  copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.dstDevice = pinned_device;
  copy.dstPitch = 16;
  copy.WidthInBytes = 16;
  copy.Height = 4;
  REQUIRE(c.cuMemcpy2DAsync(&copy, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemsetD2D32Async(d, 64, 7, 2, 3, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemcpyDtoHAsync(back.data(), d, 1024, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  const auto* p = static_cast<const uint32_t*>(pinned);
  CHECK(p[0] == 1);
  CHECK(p[4] == 17);
  CHECK(p[15] == 52);
  CHECK(back[0] == 7);
  CHECK(back[1] == 7);
  CHECK(back[2] == 2);
  CHECK(back[32] == 7);
  CHECK(back[48] == 48);
  copy.srcPitch = 8;  // below the width
  CHECK(c.cuMemcpy2DAsync(&copy, nullptr) == CUDA_ERROR_INVALID_VALUE);

  // The device limit, and a failure that is not sticky.
  size_t free_bytes = 0, total = 0;
  REQUIRE(c.cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
  CHECK(total == size_t{1024} << 20);
  CHECK(free_bytes == total - 1024);
  REQUIRE(axrt_mock_cuda_set_memory_limit(0, 4096) == 0);
  CUdeviceptr big = 0;
  CHECK(c.cuMemAlloc(&big, 4096) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(c.cuMemAlloc(&big, 3072) == CUDA_SUCCESS);
  CHECK(c.cuMemFree(big) == CUDA_SUCCESS);
  CHECK(c.cuMemFree(big) == CUDA_ERROR_INVALID_VALUE);

  // Pageable memory: the source is staged during the call, and a copy into
  // it is done when the call returns.
  std::atomic<bool> go{false};
  REQUIRE(c.cuLaunchHostFunc(nullptr, wait_until, &go) == CUDA_SUCCESS);
  std::vector<uint32_t> source(4, 42);
  REQUIRE(c.cuMemcpyHtoDAsync(d, source.data(), 16, nullptr) == CUDA_SUCCESS);
  source.assign(4, 0);
  go = true;
  std::vector<uint32_t> result(4, 0);
  REQUIRE(c.cuMemcpyDtoHAsync(result.data(), d, 16, nullptr) == CUDA_SUCCESS);
  CHECK(result == std::vector<uint32_t>(4, 42));

  CHECK(c.cuMemFreeHost(pinned) == CUDA_SUCCESS);
  CHECK(c.cuMemFree(d) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "memory pools: async allocation, caching, trimming", "[mock_cuda]") {
  const auto& c = cu();
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 5;
  CUmemoryPool pool = nullptr;
  CHECK(c.cuMemPoolCreate(&pool, &props) == CUDA_ERROR_INVALID_VALUE);
  props.location.id = 0;
  REQUIRE(c.cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  CUstream stream = nullptr;
  REQUIRE(c.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

  auto attr = [&](CUmemPool_attribute a) {
    cuuint64_t v = 0;
    REQUIRE(c.cuMemPoolGetAttribute(pool, a, &v) == CUDA_SUCCESS);
    return v;
  };
  CUdeviceptr a = 0;
  REQUIRE(c.cuMemAllocFromPoolAsync(&a, 1000, pool, stream) == CUDA_SUCCESS);
  CHECK(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1024);
  CHECK(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 1024);
  REQUIRE(c.cuMemsetD8Async(a, 1, 1000, stream) == CUDA_SUCCESS);
  CHECK(live().device_allocations == 1);

  // Threshold 0: the block is released once the stream reaches the free.
  REQUIRE(c.cuMemFreeAsync(a, stream) == CUDA_SUCCESS);
  CHECK(c.cuMemsetD8Async(a, 1, 1, stream) == CUDA_ERROR_INVALID_VALUE);  // freed
  REQUIRE(c.cuStreamSynchronize(stream) == CUDA_SUCCESS);
  CHECK(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  CHECK(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
  CHECK(attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 1024);

  // A high threshold keeps blocks cached for reuse, until trimmed.
  cuuint64_t threshold = ~cuuint64_t{0};
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) == 0);
  REQUIRE(c.cuMemAllocFromPoolAsync(&a, 4096, pool, stream) == CUDA_SUCCESS);
  REQUIRE(c.cuMemFreeAsync(a, stream) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(stream) == CUDA_SUCCESS);
  CHECK(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 4096);
  CUdeviceptr b = 0;
  REQUIRE(c.cuMemAllocFromPoolAsync(&b, 2000, pool, stream) == CUDA_SUCCESS);
  CHECK(b == a);  // the cached block
  CHECK(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 4096);
  CHECK(c.cuMemFree(b) == CUDA_SUCCESS);  // cuMemFree takes pool memory too
  CHECK(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
  REQUIRE(c.cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
  CHECK(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);

  cuuint64_t v = 0;
  CHECK(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v) == CUDA_SUCCESS);
  CHECK(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 0);

  // Pool reservations count against the device limit.
  REQUIRE(axrt_mock_cuda_set_memory_limit(0, 8192) == 0);
  CHECK(c.cuMemAllocFromPoolAsync(&a, 8193, pool, stream) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(c.cuMemAllocFromPoolAsync(&a, 8192, pool, stream) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  CHECK(c.cuMemAlloc(&d, 1) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(c.cuMemFreeAsync(a, stream) == CUDA_SUCCESS);

  CHECK(c.cuStreamDestroy(stream) == CUDA_SUCCESS);
  CHECK(c.cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "memory pools: blocks freed in stream order, by the reuse policy",
                 "[mock_cuda]") {
  const auto& c = cu();
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool pool = nullptr;
  REQUIRE(c.cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  cuuint64_t threshold = ~cuuint64_t{0};
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) == 0);
  // The policy attributes are ints, enabled by default.
  for (CUmemPool_attribute a :
       {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
        CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES}) {
    int enabled = 0;
    REQUIRE(c.cuMemPoolGetAttribute(pool, a, &enabled) == CUDA_SUCCESS);
    CHECK(enabled == 1);
  }
  CUstream freeing = nullptr, other = nullptr;
  REQUIRE(c.cuStreamCreate(&freeing, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  std::atomic<bool> open{false};
  auto hold = [](void* user) {
    while (!static_cast<std::atomic<bool>*>(user)->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };

  // A block freed behind work that has not run yet.
  CUdeviceptr a = 0, b = 0;
  REQUIRE(c.cuMemAllocFromPoolAsync(&a, 4096, pool, freeing) == CUDA_SUCCESS);
  REQUIRE(c.cuLaunchHostFunc(freeing, hold, &open) == CUDA_SUCCESS);
  REQUIRE(c.cuMemFreeAsync(a, freeing) == CUDA_SUCCESS);
  // Without internal dependencies another stream does not get it ...
  int off = 0;
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                                  &off) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAllocFromPoolAsync(&b, 4096, pool, other) == CUDA_SUCCESS);
  CHECK(b != a);
  REQUIRE(c.cuMemFreeAsync(b, other) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(other) == CUDA_SUCCESS);
  // ... nor may the pool release it to the device yet ...
  REQUIRE(c.cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
  cuuint64_t reserved = 0;
  REQUIRE(c.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == 0);
  CHECK(reserved == 4096);
  // ... but the freeing stream itself does, in its order.
  CUdeviceptr same = 0;
  REQUIRE(c.cuMemAllocFromPoolAsync(&same, 4096, pool, freeing) == CUDA_SUCCESS);
  CHECK(same == a);
  REQUIRE(c.cuMemFreeAsync(same, freeing) == CUDA_SUCCESS);
  // With internal dependencies, another stream gets it and waits for the free.
  int on = 1;
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                                  &on) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAllocFromPoolAsync(&b, 4096, pool, other) == CUDA_SUCCESS);
  CHECK(b == a);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.cuStreamQuery(other) == CUDA_ERROR_NOT_READY);
  open.store(true);
  REQUIRE(c.cuStreamSynchronize(other) == CUDA_SUCCESS);
  REQUIRE(c.cuMemFreeAsync(b, other) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(other) == CUDA_SUCCESS);
  // Reached, the free is reused anywhere (opportunistically) unless that is
  // off too.
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                                  &off) == CUDA_SUCCESS);
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off) ==
          CUDA_SUCCESS);
  REQUIRE(c.cuMemAllocFromPoolAsync(&b, 4096, pool, freeing) == CUDA_SUCCESS);
  CHECK(b != a);
  REQUIRE(c.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &on) ==
          CUDA_SUCCESS);
  CUdeviceptr again = 0;
  REQUIRE(c.cuMemAllocFromPoolAsync(&again, 4096, pool, freeing) == CUDA_SUCCESS);
  CHECK(again == a);
  REQUIRE(c.cuMemFreeAsync(again, freeing) == CUDA_SUCCESS);
  REQUIRE(c.cuMemFreeAsync(b, freeing) == CUDA_SUCCESS);

  CHECK(c.cuStreamDestroy(freeing) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(other) == CUDA_SUCCESS);
  CHECK(c.cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "host waits are counted, in all and per stream", "[mock_cuda]") {
  const auto& c = cu();
  CUstream s1 = nullptr, s2 = nullptr;
  REQUIRE(c.cuStreamCreate(&s1, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamCreate(&s2, 0) == CUDA_SUCCESS);
  CUevent event = nullptr;
  REQUIRE(c.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  CHECK(axrt_mock_cuda_host_waits() == 0);
  REQUIRE(c.cuStreamSynchronize(s1) == CUDA_SUCCESS);
  REQUIRE(c.cuEventSynchronize(event) == CUDA_SUCCESS);  // never recorded: no wait
  REQUIRE(c.cuEventRecord(event, s2) == CUDA_SUCCESS);
  REQUIRE(c.cuEventSynchronize(event) == CUDA_SUCCESS);
  CHECK(axrt_mock_cuda_host_waits() == 2);
  CHECK(axrt_mock_cuda_stream_host_waits(s1) == 1);
  CHECK(axrt_mock_cuda_stream_host_waits(s2) == 1);
  REQUIRE(c.cuCtxSynchronize() == CUDA_SUCCESS);  // every stream of the device
  CHECK(axrt_mock_cuda_host_waits() == 3);
  CHECK(axrt_mock_cuda_stream_host_waits(s1) == 2);
  CHECK(axrt_mock_cuda_stream_host_waits(s2) == 2);
  CHECK(axrt_mock_cuda_stream_host_waits(nullptr) == 0);
  axrt_mock_cuda_reset();
  CHECK(axrt_mock_cuda_host_waits() == 0);
  CHECK(axrt_mock_cuda_stream_host_waits(s1) == 0);
  CHECK(c.cuEventDestroy(event) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(s1) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(s2) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "streams, events and host functions", "[mock_cuda]") {
  const auto& c = cu();
  CUstream s1 = nullptr, s2 = nullptr;
  REQUIRE(c.cuStreamCreate(&s1, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamCreate(&s2, 0) == CUDA_SUCCESS);
  CUevent start = nullptr, done = nullptr, untimed = nullptr;
  REQUIRE(c.cuEventCreate(&start, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
  REQUIRE(c.cuEventCreate(&done, CU_EVENT_BLOCKING_SYNC) == CUDA_SUCCESS);
  REQUIRE(c.cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  CHECK(c.cuEventQuery(done) == CUDA_SUCCESS);  // never recorded
  float ms = 0;
  CHECK(c.cuEventElapsedTime(&ms, start, done) == CUDA_ERROR_INVALID_HANDLE);

  struct Shared {
    std::mutex mu;
    std::vector<int> order;
    std::atomic<bool> release{false};
    CUresult from_host_fn = CUDA_SUCCESS;
  } shared;
  // s1: record start, a blocked host function, record done.
  REQUIRE(c.cuEventRecord(start, s1) == CUDA_SUCCESS);
  REQUIRE(c.cuLaunchHostFunc(s1, [](void* user) {
            auto* sh = static_cast<Shared*>(user);
            while (!sh->release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            // CUDA calls from a host function are refused.
            CUcontext ctx = nullptr;
            sh->from_host_fn = cu().cuCtxGetCurrent(&ctx);
            std::lock_guard lock(sh->mu);
            sh->order.push_back(1);
          }, &shared) == CUDA_SUCCESS);
  REQUIRE(c.cuEventRecord(done, s1) == CUDA_SUCCESS);
  REQUIRE(c.cuEventRecord(untimed, s1) == CUDA_SUCCESS);
  // s2 waits for `done`, then runs its own host function.
  REQUIRE(c.cuStreamWaitEvent(s2, done, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuLaunchHostFunc(s2, [](void* user) {
            auto* sh = static_cast<Shared*>(user);
            std::lock_guard lock(sh->mu);
            sh->order.push_back(2);
          }, &shared) == CUDA_SUCCESS);

  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.cuStreamQuery(s1) == CUDA_ERROR_NOT_READY);
  CHECK(c.cuStreamQuery(s2) == CUDA_ERROR_NOT_READY);
  CHECK(c.cuEventQuery(done) == CUDA_ERROR_NOT_READY);
  CHECK(c.cuEventElapsedTime(&ms, start, done) == CUDA_ERROR_NOT_READY);
  shared.release = true;
  REQUIRE(c.cuStreamSynchronize(s2) == CUDA_SUCCESS);
  CHECK(c.cuEventQuery(done) == CUDA_SUCCESS);
  CHECK(c.cuEventSynchronize(untimed) == CUDA_SUCCESS);
  CHECK(shared.order == std::vector<int>{1, 2});
  CHECK(shared.from_host_fn == CUDA_ERROR_NOT_PERMITTED);
  CHECK(c.cuEventElapsedTime(&ms, start, done) == CUDA_SUCCESS);
  CHECK(ms >= 15.0f);
  CHECK(c.cuEventElapsedTime(&ms, start, untimed) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(c.cuStreamQuery(s1) == CUDA_SUCCESS);
  CHECK(c.cuCtxSynchronize() == CUDA_SUCCESS);

  // CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the NULL stream, and wait
  // like any stream.
  std::atomic<bool> held{false};
  std::atomic<int> special_runs{0};
  REQUIRE(c.cuLaunchHostFunc(s1, wait_until, &held) == CUDA_SUCCESS);
  REQUIRE(c.cuEventRecord(done, s1) == CUDA_SUCCESS);
  for (CUstream special : {AXRT_CU_STREAM_LEGACY, AXRT_CU_STREAM_PER_THREAD}) {
    REQUIRE(c.cuStreamWaitEvent(special, done, 0) == CUDA_SUCCESS);
    REQUIRE(c.cuLaunchHostFunc(special, [](void* user) {
              static_cast<std::atomic<int>*>(user)->fetch_add(1);
            }, &special_runs) == CUDA_SUCCESS);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(c.cuStreamQuery(AXRT_CU_STREAM_PER_THREAD) == CUDA_ERROR_NOT_READY);
  CHECK(special_runs.load() == 0);
  held = true;
  CHECK(c.cuStreamSynchronize(AXRT_CU_STREAM_LEGACY) == CUDA_SUCCESS);
  CHECK(special_runs.load() == 2);
  CHECK(c.cuStreamQuery(nullptr) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(AXRT_CU_STREAM_LEGACY) == CUDA_ERROR_INVALID_HANDLE);

  CHECK(c.cuStreamCreate(&s1, 4) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuStreamDestroy(nullptr) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(c.cuEventDestroy(start) == CUDA_SUCCESS);
  CHECK(c.cuEventDestroy(done) == CUDA_SUCCESS);
  CHECK(c.cuEventDestroy(untimed) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(s1) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(s2) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(s2) == CUDA_ERROR_INVALID_HANDLE);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "registered kernels: launches, parameters, validation", "[mock_cuda]") {
  const auto& c = cu();
  REQUIRE(axrt_mock_cuda_register_kernel("saxpy_test", saxpy, nullptr, kSaxpySizes, 4) == 0);
  const uint32_t bad_size = 3;
  CHECK(axrt_mock_cuda_register_kernel("bad", saxpy, nullptr, &bad_size, 1) ==
        CUDA_ERROR_INVALID_VALUE);

  CUmodule module = nullptr;
  REQUIRE(c.cuModuleLoadDataEx(&module, kMockImage, 0, nullptr, nullptr) == CUDA_SUCCESS);
  CUfunction f = nullptr;
  CHECK(c.cuModuleGetFunction(&f, module, "axrt_mul_f32") == CUDA_ERROR_NOT_FOUND);  // unlisted
  REQUIRE(c.cuModuleGetFunction(&f, module, "saxpy_test") == CUDA_SUCCESS);
  size_t offset = 0, size = 0;
  CHECK(c.cuFuncGetParamInfo(f, 3, &offset, &size) == CUDA_SUCCESS);
  CHECK(offset == 24);
  CHECK(size == 4);
  CHECK(c.cuFuncGetParamInfo(f, 4, &offset, &size) == CUDA_ERROR_INVALID_VALUE);

  constexpr uint32_t n = 1000;
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  CUdeviceptr dx = 0, dy = 0;
  REQUIRE(c.cuMemAlloc(&dx, n * 4) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAlloc(&dy, n * 4) == CUDA_SUCCESS);
  REQUIRE(c.cuMemcpyHtoDAsync(dx, x.data(), n * 4, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemcpyHtoDAsync(dy, y.data(), n * 4, nullptr) == CUDA_SUCCESS);

  // Parameters one by one: y = 2x + 1.
  float a = 2.0f;
  uint32_t count = n;
  void* params[] = {&dx, &a, &dy, &count};
  REQUIRE(c.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) == CUDA_SUCCESS);
  // A packed buffer: y = 3x + y (= 5x + 1). 28 bytes, no tail padding.
  unsigned char packed[28] = {};
  a = 3.0f;
  std::memcpy(packed + 0, &dx, 8);
  std::memcpy(packed + 8, &a, 4);
  std::memcpy(packed + 16, &dy, 8);
  std::memcpy(packed + 24, &count, 4);
  size_t packed_size = sizeof(packed);
  void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER, packed, AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, AXRT_CU_LAUNCH_PARAM_END};
  REQUIRE(c.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra) == CUDA_SUCCESS);
  packed_size = 32;  // padded to 8: not the kernel's buffer size
  CHECK(c.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra) ==
        CUDA_ERROR_INVALID_VALUE);
  REQUIRE(c.cuMemcpyDtoHAsync(y.data(), dy, n * 4, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(y[0] == 1.0f);
  CHECK(y[10] == 51.0f);
  CHECK(y[999] == 4996.0f);

  // Launch limits, shared memory opt-in, clusters.
  CHECK(c.cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, nullptr, params, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuLaunchKernel(f, 1, 65536, 1, 1, 1, 1, 0, nullptr, params, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 64 * 1024, nullptr, params, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 300000) ==
        CUDA_ERROR_INVALID_VALUE);
  REQUIRE(c.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000) == 0);
  int value = 0;
  CHECK(c.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f) == 0);
  CHECK(value == 100000);
  count = 0;  // the kernel does nothing from here on
  CHECK(c.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 64 * 1024, nullptr, params, nullptr) == 0);
  CUlaunchAttribute cluster = {};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = 1;
  cluster.value.clusterDim.z = 1;
  CUlaunchConfig config = {3, 1, 1, 32, 1, 1, 0, nullptr, &cluster, 1};
  CHECK(c.cuLaunchKernelEx(&config, f, params, nullptr) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  config.gridDimX = 4;
  CHECK(c.cuLaunchKernelEx(&config, f, params, nullptr) == CUDA_SUCCESS);

  // An axrt.cpu kernel through a library: out = a + b over 5000 elements.
  CUlibrary library = nullptr;
  REQUIRE(c.cuLibraryLoadData(&library, kMockImage, nullptr, nullptr, 0, nullptr, nullptr, 0) ==
          CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  REQUIRE(c.cuLibraryGetKernel(&kernel, library, "axrt_add_f32") == CUDA_SUCCESS);
  CUfunction add = nullptr;
  REQUIRE(c.cuKernelGetFunction(&add, kernel) == CUDA_SUCCESS);
  constexpr uint64_t m = 5000;
  CUdeviceptr da = 0, db = 0, dout = 0;
  REQUIRE(c.cuMemAlloc(&da, m * 4) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAlloc(&db, m * 4) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAlloc(&dout, m * 4) == CUDA_SUCCESS);
  std::vector<float> va(m, 1.5f), vb(m, 2.0f), out(m, 0.0f);
  REQUIRE(c.cuMemcpyHtoDAsync(da, va.data(), m * 4, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuMemcpyHtoDAsync(db, vb.data(), m * 4, nullptr) == CUDA_SUCCESS);
  uint64_t elements = m;
  void* add_params[] = {&da, &db, &dout, &elements};
  REQUIRE(c.cuLaunchKernel(add, 2, 1, 1, 64, 1, 1, 0, nullptr, add_params, nullptr) == 0);
  REQUIRE(c.cuMemcpyDtoHAsync(out.data(), dout, m * 4, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  CHECK(out[0] == 3.5f);
  CHECK(out[m - 1] == 3.5f);

  CHECK(c.cuLibraryUnload(library) == CUDA_SUCCESS);
  CHECK(c.cuModuleUnload(module) == CUDA_SUCCESS);
  CHECK(c.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) ==
        CUDA_ERROR_INVALID_HANDLE);
  for (CUdeviceptr p : {dx, dy, da, db, dout}) CHECK(c.cuMemFree(p) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "a faulting kernel poisons the context; teardown completes",
                 "[mock_cuda]") {
  const auto& c = cu();
  REQUIRE(axrt_mock_cuda_register_kernel("fault_test", faulting_kernel, nullptr, nullptr, 0) == 0);
  REQUIRE(axrt_mock_cuda_register_kernel("noop_test", noop_kernel, nullptr, nullptr, 0) == 0);
  CUmodule module = nullptr;
  REQUIRE(c.cuModuleLoadDataEx(&module, "\x7f" "ELF", 0, nullptr, nullptr) == CUDA_SUCCESS);
  CUfunction fault = nullptr, noop = nullptr;
  REQUIRE(c.cuModuleGetFunction(&fault, module, "fault_test") == CUDA_SUCCESS);
  REQUIRE(c.cuModuleGetFunction(&noop, module, "noop_test") == CUDA_SUCCESS);

  // A non-sticky injected error fails one call only, after `skip` successes.
  REQUIRE(axrt_mock_cuda_inject_error("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY, 1) == 0);
  CUdeviceptr d = 0, e = 0;
  REQUIRE(c.cuMemAlloc(&d, 256) == CUDA_SUCCESS);
  CHECK(c.cuMemAlloc(&e, 256) == CUDA_ERROR_OUT_OF_MEMORY);
  REQUIRE(c.cuMemAlloc(&e, 256) == CUDA_SUCCESS);
  CHECK(axrt_mock_cuda_call_count("cuMemAlloc") == 3);

  // A kernel made to fault by the control API.
  REQUIRE(axrt_mock_cuda_fail_kernel("noop_test", CUDA_ERROR_MISALIGNED_ADDRESS) == 0);
  REQUIRE(c.cuLaunchKernel(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) == 0);
  CHECK(c.cuStreamSynchronize(nullptr) == CUDA_ERROR_MISALIGNED_ADDRESS);
  axrt_mock_cuda_reset();
  CHECK(axrt_mock_cuda_sticky_error(0) == 0);

  CUstream stream = nullptr;
  CUevent event = nullptr;
  REQUIRE(c.cuStreamCreate(&stream, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuEventCreate(&event, 0) == CUDA_SUCCESS);
  void* pinned = nullptr;
  REQUIRE(c.cuMemHostAlloc(&pinned, 64, 0) == CUDA_SUCCESS);
  // Queue the fault and what follows it before any of it runs: once the
  // fault has happened, new calls on the context fail.
  std::atomic<bool> go{false}, ran{false};
  REQUIRE(c.cuLaunchHostFunc(stream, wait_until, &go) == CUDA_SUCCESS);
  REQUIRE(c.cuLaunchKernel(fault, 2, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) == CUDA_SUCCESS);
  auto set_flag = [](void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); };
  REQUIRE(c.cuLaunchHostFunc(stream, set_flag, &ran) == CUDA_SUCCESS);
  REQUIRE(c.cuEventRecord(event, stream) == CUDA_SUCCESS);
  go = true;
  CHECK(c.cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_FALSE(ran.load());  // dropped
  CHECK(axrt_mock_cuda_sticky_error(0) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(axrt_mock_cuda_sticky_error(1) == 0);
  CUdeviceptr more = 0;
  CHECK(c.cuMemAlloc(&more, 64) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuEventSynchronize(event) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);

  // Teardown reports the error but releases everything.
  CHECK(c.cuEventDestroy(event) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuStreamDestroy(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuModuleUnload(module) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuMemFree(d) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuMemFree(e) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuMemFreeHost(pinned) == CUDA_ERROR_ILLEGAL_ADDRESS);
  check_no_leaks();

  // An injected sticky error poisons the current context too.
  axrt_mock_cuda_reset();
  REQUIRE(axrt_mock_cuda_inject_error("cuCtxSynchronize", CUDA_ERROR_ECC_UNCORRECTABLE, 0) == 0);
  CHECK(c.cuCtxSynchronize() == CUDA_ERROR_ECC_UNCORRECTABLE);
  CHECK(c.cuMemAlloc(&more, 64) == CUDA_ERROR_ECC_UNCORRECTABLE);
}

TEST_CASE_METHOD(Fixture, "graphs: a launch runs the nodes in order as their own work would",
                 "[mock_cuda]") {
  const auto& c = cu();
  REQUIRE(axrt_mock_cuda_register_kernel("saxpy_test", saxpy, nullptr, kSaxpySizes, 4) == 0);
  CUmodule module = nullptr;
  REQUIRE(c.cuModuleLoadDataEx(&module, kMockImage, 0, nullptr, nullptr) == CUDA_SUCCESS);
  CUfunction f = nullptr;
  REQUIRE(c.cuModuleGetFunction(&f, module, "saxpy_test") == CUDA_SUCCESS);
  constexpr uint32_t n = 1000;
  CUdeviceptr dx = 0, dy = 0, dz = 0, dw = 0;
  for (CUdeviceptr* p : {&dx, &dy, &dz}) REQUIRE(c.cuMemAlloc(p, n * 4) == CUDA_SUCCESS);
  REQUIRE(c.cuMemAlloc(&dw, 64) == CUDA_SUCCESS);
  REQUIRE(c.cuMemsetD8Async(dw, 0, 64, nullptr) == CUDA_SUCCESS);
  REQUIRE(c.cuStreamSynchronize(nullptr) == CUDA_SUCCESS);

  // y = 1 (memset); y = 2x + y (parameters one by one); z = y (copy);
  // y = 3x + y (a packed buffer); two rows of w = 0x0102 (a 2-D memset).
  CUgraph graph = nullptr;
  REQUIRE(c.cuGraphCreate(&graph, 0) == CUDA_SUCCESS);
  CUgraphNode nodes[5] = {};
  CUDA_MEMSET_NODE_PARAMS fill = {};
  fill.dst = dy;
  fill.value = 0x3f800000;  // 1.0f
  fill.elementSize = 4;
  fill.width = n;
  fill.height = 1;
  REQUIRE(c.cuGraphAddMemsetNode(&nodes[0], graph, nullptr, 0, &fill, context) == CUDA_SUCCESS);
  float a = 2.0f;
  uint32_t count = n;
  void* params[] = {&dx, &a, &dy, &count};
  CUDA_KERNEL_NODE_PARAMS kernel = {};
  kernel.func = f;
  kernel.gridDimX = kernel.gridDimY = kernel.gridDimZ = 1;
  kernel.gridDimX = 4;
  kernel.blockDimX = 256;
  kernel.blockDimY = kernel.blockDimZ = 1;
  kernel.kernelParams = params;
  REQUIRE(c.cuGraphAddKernelNode(&nodes[1], graph, &nodes[0], 1, &kernel) == CUDA_SUCCESS);
  CUDA_MEMCPY3D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = dy;
  copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.dstDevice = dz;
  copy.WidthInBytes = n * 4;
  copy.Height = 1;
  copy.Depth = 1;
  REQUIRE(c.cuGraphAddMemcpyNode(&nodes[2], graph, &nodes[1], 1, &copy, context) ==
          CUDA_SUCCESS);
  unsigned char packed[28] = {};
  a = 3.0f;
  std::memcpy(packed + 0, &dx, 8);
  std::memcpy(packed + 8, &a, 4);
  std::memcpy(packed + 16, &dy, 8);
  std::memcpy(packed + 24, &count, 4);
  size_t packed_size = sizeof(packed);
  void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER, packed, AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, AXRT_CU_LAUNCH_PARAM_END};
  kernel.kernelParams = nullptr;
  kernel.extra = extra;
  REQUIRE(c.cuGraphAddKernelNode(&nodes[3], graph, &nodes[2], 1, &kernel) == CUDA_SUCCESS);
  CUDA_MEMSET_NODE_PARAMS rows = {dw, 16, 0x0102, 2, 4, 2};
  REQUIRE(c.cuGraphAddMemsetNode(&nodes[4], graph, nodes, 2, &rows, context) == CUDA_SUCCESS);
  // The parameters were copied into the nodes.
  a = 100.0f;
  std::memset(packed, 0, sizeof(packed));

  CUgraphExec exec = nullptr;
  REQUIRE(c.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
  CHECK(live().graphs == 1);
  CHECK(live().graph_execs == 1);
  REQUIRE(c.cuGraphDestroy(graph) == CUDA_SUCCESS);  // the exec keeps its copy
  CUstream stream = nullptr;
  REQUIRE(c.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  std::vector<float> x(n), y(n), z(n);
  for (int replay = 0; replay < 3; ++replay) {
    // New inputs in stream order before each launch.
    for (uint32_t i = 0; i < n; ++i) x[i] = static_cast<float>(i + replay);
    REQUIRE(c.cuMemcpyHtoDAsync(dx, x.data(), n * 4, stream) == CUDA_SUCCESS);
    REQUIRE(c.cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
    REQUIRE(c.cuMemcpyDtoHAsync(y.data(), dy, n * 4, stream) == CUDA_SUCCESS);
    REQUIRE(c.cuMemcpyDtoHAsync(z.data(), dz, n * 4, stream) == CUDA_SUCCESS);
    for (uint32_t i : {0u, 10u, 999u}) {
      CHECK(y[i] == 5.0f * x[i] + 1.0f);
      CHECK(z[i] == 2.0f * x[i] + 1.0f);
    }
  }
  std::vector<uint16_t> w(32);
  REQUIRE(c.cuMemcpyDtoHAsync(w.data(), dw, 64, stream) == CUDA_SUCCESS);
  CHECK(w[0] == 0x0102);
  CHECK(w[3] == 0x0102);
  CHECK(w[4] == 0);
  CHECK(w[8] == 0x0102);
  CHECK(w[12] == 0);
  CHECK(axrt_mock_cuda_call_count("cuGraphLaunch") == 3);
  CHECK(axrt_mock_cuda_call_count("cuLaunchKernel") == 0);

  CHECK(c.cuGraphExecDestroy(exec) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(stream) == CUDA_SUCCESS);
  CHECK(c.cuModuleUnload(module) == CUDA_SUCCESS);
  for (CUdeviceptr p : {dx, dy, dz, dw}) CHECK(c.cuMemFree(p) == CUDA_SUCCESS);
  check_no_leaks();
}

TEST_CASE_METHOD(Fixture, "graphs: validation, faults, hiding, and destroying what is queued",
                 "[mock_cuda]") {
  const auto& c = cu();
  REQUIRE(axrt_mock_cuda_register_kernel("noop_test", noop_kernel, nullptr, nullptr, 0) == 0);
  CUmodule module = nullptr;
  REQUIRE(c.cuModuleLoadDataEx(&module, "\x7f" "ELF", 0, nullptr, nullptr) == CUDA_SUCCESS);
  CUfunction noop = nullptr;
  REQUIRE(c.cuModuleGetFunction(&noop, module, "noop_test") == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  REQUIRE(c.cuMemAlloc(&d, 256) == CUDA_SUCCESS);

  CUgraph graph = nullptr, other = nullptr;
  CHECK(c.cuGraphCreate(nullptr, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphCreate(&graph, 1) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(c.cuGraphCreate(&graph, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphCreate(&other, 0) == CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS kernel = {};
  kernel.func = noop;
  kernel.gridDimX = kernel.gridDimY = kernel.gridDimZ = 1;
  kernel.blockDimX = kernel.blockDimY = kernel.blockDimZ = 1;
  CUgraphNode first = nullptr, foreign = nullptr, node = nullptr;
  REQUIRE(c.cuGraphAddKernelNode(&first, graph, nullptr, 0, &kernel) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphAddKernelNode(&foreign, other, nullptr, 0, &kernel) == CUDA_SUCCESS);
  // Null pointers, unknown handles, dependencies not of the graph or twice.
  CHECK(c.cuGraphAddKernelNode(nullptr, graph, nullptr, 0, &kernel) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphAddKernelNode(&node, graph, nullptr, 0, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphAddKernelNode(&node, reinterpret_cast<CUgraph>(&kernel), nullptr, 0, &kernel) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphAddKernelNode(&node, graph, &foreign, 1, &kernel) == CUDA_ERROR_INVALID_VALUE);
  const CUgraphNode twice[] = {first, first};
  CHECK(c.cuGraphAddKernelNode(&node, graph, twice, 2, &kernel) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphAddKernelNode(&node, graph, nullptr, 1, &kernel) == CUDA_ERROR_INVALID_VALUE);
  // Launch limits and parameters as cuLaunchKernel checks them.
  kernel.blockDimX = 1025;
  CHECK(c.cuGraphAddKernelNode(&node, graph, nullptr, 0, &kernel) == CUDA_ERROR_INVALID_VALUE);
  kernel.blockDimX = 1;
  size_t wrong_size = 8;
  void* extra[] = {AXRT_CU_LAUNCH_PARAM_BUFFER_POINTER, &d, AXRT_CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &wrong_size, AXRT_CU_LAUNCH_PARAM_END};
  kernel.extra = extra;
  CHECK(c.cuGraphAddKernelNode(&node, graph, nullptr, 0, &kernel) == CUDA_ERROR_INVALID_VALUE);
  kernel.extra = nullptr;
  // Copies and memsets: ranges in allocations, 2-D only, a context, 1/2/4 bytes.
  CUDA_MEMCPY3D copy = {};
  copy.srcMemoryType = copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = d;
  copy.dstDevice = d + 128;
  copy.WidthInBytes = 256;
  copy.Height = copy.Depth = 1;
  CHECK(c.cuGraphAddMemcpyNode(&node, graph, &first, 1, &copy, context) ==
        CUDA_ERROR_INVALID_VALUE);
  copy.WidthInBytes = 128;
  copy.Depth = 2;
  CHECK(c.cuGraphAddMemcpyNode(&node, graph, &first, 1, &copy, context) ==
        CUDA_ERROR_INVALID_VALUE);
  copy.Depth = 1;
  CHECK(c.cuGraphAddMemcpyNode(&node, graph, &first, 1, &copy, nullptr) ==
        CUDA_ERROR_INVALID_VALUE);
  CUgraphNode copied = nullptr;
  REQUIRE(c.cuGraphAddMemcpyNode(&copied, graph, &first, 1, &copy, context) == CUDA_SUCCESS);
  CUDA_MEMSET_NODE_PARAMS fill = {d, 0, 0, 8, 4, 1};
  CHECK(c.cuGraphAddMemsetNode(&node, graph, &copied, 1, &fill, context) ==
        CUDA_ERROR_INVALID_VALUE);
  fill = {d + 2, 0, 0, 4, 4, 1};
  CHECK(c.cuGraphAddMemsetNode(&node, graph, &copied, 1, &fill, context) ==
        CUDA_ERROR_INVALID_VALUE);
  // Instantiation: no flags, a current context.
  CUgraphExec exec = nullptr;
  CHECK(c.cuGraphInstantiateWithFlags(&exec, graph, 1) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(c.cuCtxSetCurrent(nullptr) == CUDA_SUCCESS);
  CHECK(c.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_ERROR_INVALID_CONTEXT);
  REQUIRE(c.cuCtxSetCurrent(context) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
  CHECK(c.cuGraphDestroy(other) == CUDA_SUCCESS);
  CHECK(c.cuGraphDestroy(other) == CUDA_ERROR_INVALID_VALUE);

  // An exec destroyed while its launches wait behind a host function: they
  // still run. Then a launch of a destroyed exec is refused.
  CUstream stream = nullptr;
  REQUIRE(c.cuStreamCreate(&stream, 0) == CUDA_SUCCESS);
  std::atomic<bool> go{false};
  REQUIRE(c.cuLaunchHostFunc(stream, wait_until, &go) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
  CHECK(c.cuGraphExecDestroy(exec) == CUDA_SUCCESS);
  CHECK(c.cuGraphExecDestroy(exec) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphLaunch(exec, stream) == CUDA_ERROR_INVALID_VALUE);
  go = true;
  CHECK(c.cuStreamSynchronize(stream) == CUDA_SUCCESS);

  // Memory a node copies is checked again at each launch.
  REQUIRE(c.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
  CUdeviceptr spare = 0;
  REQUIRE(c.cuMemAlloc(&spare, 256) == CUDA_SUCCESS);
  copy.srcDevice = spare;
  CUgraph freed_later = nullptr;
  REQUIRE(c.cuGraphCreate(&freed_later, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuGraphAddMemcpyNode(&node, freed_later, nullptr, 0, &copy, context) ==
          CUDA_SUCCESS);
  CUgraphExec stale = nullptr;
  REQUIRE(c.cuGraphInstantiateWithFlags(&stale, freed_later, 0) == CUDA_SUCCESS);
  REQUIRE(c.cuMemFree(spare) == CUDA_SUCCESS);
  CHECK(c.cuGraphLaunch(stale, stream) == CUDA_ERROR_INVALID_VALUE);
  CHECK(c.cuGraphExecDestroy(stale) == CUDA_SUCCESS);
  CHECK(c.cuGraphDestroy(freed_later) == CUDA_SUCCESS);

  // A kernel made to fault during a launch poisons the context like a
  // launch of its own; teardown still releases the exec.
  REQUIRE(axrt_mock_cuda_fail_kernel("noop_test", CUDA_ERROR_ILLEGAL_ADDRESS) == 0);
  REQUIRE(c.cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
  CHECK(c.cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuGraphLaunch(exec, stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuGraphExecDestroy(exec) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuGraphDestroy(graph) == CUDA_SUCCESS);
  CHECK(c.cuStreamDestroy(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuModuleUnload(module) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK(c.cuMemFree(d) == CUDA_ERROR_ILLEGAL_ADDRESS);
  check_no_leaks();
  axrt_mock_cuda_reset();

  // A driver without graphs, as AXRT_MOCK_CUDA_HIDE makes one.
  void* pfn = nullptr;
  int status = -1;
  setenv("AXRT_MOCK_CUDA_HIDE", "cuGraphInstantiateWithFlags", 1);
  CHECK(cuGetProcAddress_v2("cuGraphInstantiateWithFlags", &pfn, 12080, 0, &status) ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  unsetenv("AXRT_MOCK_CUDA_HIDE");
  CHECK(cuGetProcAddress_v2("cuGraphAddKernelNode", &pfn, 11080, 0, &status) ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST_CASE_METHOD(Fixture, "code images and the JIT logs", "[mock_cuda]") {
  const auto& c = cu();
  char error_log[16] = {};
  char info_log[64] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log, reinterpret_cast<void*>(uintptr_t{sizeof(error_log)}), info_log,
                    reinterpret_cast<void*>(uintptr_t{sizeof(info_log)})};
  CUmodule module = nullptr;
  const char* bad_ptx =
      ".version 8.0\n.target sm_90\n// mock-jit-error: ptxas fatal: too many registers\n";
  CHECK(c.cuModuleLoadDataEx(&module, bad_ptx, 4, options, values) == CUDA_ERROR_INVALID_PTX);
  CHECK(std::string(error_log) == "ptxas fatal: to");  // truncated to 15 + NUL
  CHECK(reinterpret_cast<uintptr_t>(values[1]) == 16);

  values[1] = reinterpret_cast<void*>(uintptr_t{sizeof(error_log)});
  values[3] = reinterpret_cast<void*>(uintptr_t{sizeof(info_log)});
  REQUIRE(c.cuModuleLoadDataEx(&module, ".version 8.0\n.target sm_90\n", 4, options, values) ==
          CUDA_SUCCESS);
  CHECK(std::string(info_log) == "mock JIT: ok");
  CUfunction f = nullptr;
  CHECK(c.cuModuleGetFunction(&f, module, "axrt_mul_f32") == CUDA_SUCCESS);
  CHECK(c.cuModuleGetFunction(&f, module, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);
  CHECK(c.cuModuleUnload(module) == CUDA_SUCCESS);

  const unsigned char fatbin[] = {0x50, 0xED, 0x55, 0xBA, 0x01, 0x00};
  REQUIRE(c.cuModuleLoadDataEx(&module, fatbin, 0, nullptr, nullptr) == CUDA_SUCCESS);
  CHECK(c.cuModuleUnload(module) == CUDA_SUCCESS);
  CHECK(c.cuModuleLoadDataEx(&module, "not an image", 0, nullptr, nullptr) ==
        CUDA_ERROR_INVALID_IMAGE);
  const unsigned char binary[] = {0x01, 0x02, 0x03, 0x00};
  CHECK(c.cuModuleLoadDataEx(&module, binary, 0, nullptr, nullptr) == CUDA_ERROR_INVALID_IMAGE);
  CUlibrary library = nullptr;
  CHECK(c.cuLibraryLoadData(&library, bad_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0) ==
        CUDA_ERROR_INVALID_PTX);
  check_no_leaks();
}
