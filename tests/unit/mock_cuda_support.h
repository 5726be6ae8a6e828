// What the unit tests of the CUDA driver against the mock Driver API
// (tests/mock_cuda) share: the leak check and mock code images.
#ifndef AXRT_TESTS_UNIT_MOCK_CUDA_SUPPORT_H_
#define AXRT_TESTS_UNIT_MOCK_CUDA_SUPPORT_H_

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/mock_cuda/mock_cuda.h"

namespace axrt_test {

// Every CUDA object the mock handed out has been given back. Streams
// released with work queued (and graphs their replays hold) are finished by
// the device in the background, so this waits a little for the counts to
// settle.
inline void RequireNoLiveObjects() {
  axrt_mock_cuda_objects_t live{};
  for (int i = 0; i < 2500; ++i) {
    axrt_mock_cuda_live_objects(&live);
    if (live.streams == 0 && live.events == 0 && live.context_retains == 0 &&
        live.graph_execs == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(live.device_allocations == 0);
  CHECK(live.pinned_allocations == 0);
  CHECK(live.pools == 0);
  CHECK(live.streams == 0);
  CHECK(live.events == 0);
  CHECK(live.modules == 0);
  CHECK(live.context_retains == 0);
  CHECK(live.graphs == 0);
  CHECK(live.graph_execs == 0);
}

// A mock code image providing `names`: the mock's magic line, the names,
// and the directives that make the text pass the reader as PTX.
inline std::vector<uint8_t> MockImage(const std::vector<std::string>& names) {
  std::string text = "AXRTMOCKCUDA\n";
  for (const std::string& name : names) text += name + "\n";
  text += ".version 8.0\n.target sm_80\n";
  return std::vector<uint8_t>(text.begin(), text.end());
}

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_MOCK_CUDA_SUPPORT_H_
