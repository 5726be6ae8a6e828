// Every Driver API entry point of the mock, fetched through
// cuGetProcAddress_v2 at its listed version, as the CUDA driver fetches
// them: how tests call the mock as another library in the process would.
#ifndef AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_TABLE_H_
#define AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_TABLE_H_

#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda.h"

namespace axrt::mock_cuda {

struct Table {
#define AXRT_TEST_MEMBER(name, ret, params, version, required) ret(*name) params = nullptr;
  AXRT_CUDA_SYMBOLS(AXRT_TEST_MEMBER)
#undef AXRT_TEST_MEMBER
};

// Entry points the mock does not give out stay null.
inline const Table& table() {
  static const Table loaded = [] {
    Table t;
#define AXRT_TEST_LOAD(name, ret, params, version, required)                     \
  {                                                                              \
    void* pfn = nullptr;                                                         \
    int status = -1;                                                             \
    if (cuGetProcAddress_v2(#name, &pfn, version, 0, &status) == CUDA_SUCCESS && \
        status == CU_GET_PROC_ADDRESS_SUCCESS) {                                 \
      t.name = reinterpret_cast<decltype(t.name)>(pfn);                          \
    }                                                                            \
  }
    AXRT_CUDA_SYMBOLS(AXRT_TEST_LOAD)
#undef AXRT_TEST_LOAD
    return t;
  }();
  return loaded;
}

}  // namespace axrt::mock_cuda

#endif  // AXRT_TESTS_MOCK_CUDA_MOCK_CUDA_TABLE_H_
