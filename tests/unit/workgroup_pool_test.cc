#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/drivers/cpu/workgroup_pool.h"
#include "tests/unit/subprocess.h"

using axrt::cpu::WorkgroupPool;

TEST_CASE("every item runs exactly once") {
  WorkgroupPool pool(4);
  for (uint64_t count : {1ull, 7ull, 64ull, 1000ull, 100003ull}) {
    for (uint64_t grain : {1ull, 3ull, 64ull}) {
      std::vector<std::atomic<int>> hits(count);
      // Catch2 assertions are not thread-safe, so the workers only count.
      std::atomic<int> oversized_chunks{0};
      pool.parallel_for(count, grain, [&](uint64_t begin, uint64_t end) {
        if (end - begin > grain) oversized_chunks.fetch_add(1);
        for (uint64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      CHECK(oversized_chunks.load() == 0);
      for (uint64_t i = 0; i < count; ++i) REQUIRE(hits[i].load() == 1);
    }
  }
}

TEST_CASE("small jobs run inline on the caller") {
  WorkgroupPool pool(4);
  const auto before = pool.parallel_job_count();
  std::thread::id ran_on;
  pool.parallel_for(8, 8, [&](uint64_t, uint64_t) { ran_on = std::this_thread::get_id(); });
  CHECK(ran_on == std::this_thread::get_id());
  CHECK(pool.parallel_job_count() == before);
}

TEST_CASE("large jobs use the pool threads") {
  WorkgroupPool pool(3);
  std::atomic<int> other_threads{0};
  const auto caller = std::this_thread::get_id();
  pool.parallel_for(64, 1, [&](uint64_t, uint64_t) {
    if (std::this_thread::get_id() != caller) other_threads.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  CHECK(pool.parallel_job_count() == 1);
  CHECK(other_threads.load() > 0);
}

TEST_CASE("nested and concurrent jobs complete without deadlock") {
  WorkgroupPool pool(3);
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        pool.parallel_for(16, 1, [&](uint64_t begin, uint64_t end) {
          for (uint64_t i = begin; i < end; ++i) {
            // A job inside a job runs inline on the pool thread.
            pool.parallel_for(4, 1, [&](uint64_t b, uint64_t e) { total.fetch_add(e - b); });
          }
        });
      }
    });
  }
  for (auto& s : submitters) s.join();
  CHECK(total.load() == 4u * 50u * 16u * 4u);
}

TEST_CASE("a pool of one runs everything inline") {
  WorkgroupPool pool(1);
  CHECK(pool.concurrency() == 1);
  uint64_t sum = 0;
  pool.parallel_for(1000, 10, [&](uint64_t begin, uint64_t end) { sum += end - begin; });
  CHECK(sum == 1000);
}

TEST_CASE("a pool short of threads", "[.pool-short-of-threads]") {
  // Room for about two more thread stacks, not for 63.
  REQUIRE(axrt_test::ShortOfThreads(20 << 20));
  WorkgroupPool pool(64);
  CHECK(pool.concurrency() >= 1);
  CHECK(pool.concurrency() < 64);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(hits.size(), 1, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (auto& hit : hits) REQUIRE(hit.load() == 1);
}

TEST_CASE("a pool that cannot start all its threads works with those it has") {
  if (!axrt_test::kCanFailThreadStarts) {
    WARN("skipped: neither an address-space limit nor fault injection in this build");
    return;
  }
  INFO("run with \"[.pool-short-of-threads]\" for the child's report");
  CHECK(axrt_test::ExitedCleanly(axrt_test::RunSelf("[.pool-short-of-threads]", 60,
                                                    axrt_test::ThreadStartsEnvironment(2))));
}
