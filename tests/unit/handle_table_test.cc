#include <catch2/catch.hpp>

#include <set>
#include <thread>
#include <vector>

#include "runtime/handle_table.h"

using namespace axrt;

namespace {
struct Dummy : Object {
  Dummy() : Object(ObjectType::kBuffer) {}
};
}  // namespace

TEST_CASE("handles find their object until removed") {
  HandleTable table;
  Dummy a, b;
  const uint64_t ha = table.insert(&a);
  const uint64_t hb = table.insert(&b);
  CHECK(ha != hb);
  HandleTable::Lookup result;
  CHECK(table.find(ha, &result) == &a);
  CHECK(result == HandleTable::Lookup::kFound);
  table.remove(ha);
  CHECK(table.find(ha, &result) == nullptr);
  CHECK(result == HandleTable::Lookup::kReleased);
  CHECK(table.find(hb, &result) == &b);
  CHECK(table.live_count() == 1);
}

TEST_CASE("a reused slot does not revive an old handle") {
  HandleTable table;
  Dummy a, b;
  const uint64_t old_handle = table.insert(&a);
  table.remove(old_handle);
  const uint64_t new_handle = table.insert(&b);
  CHECK(static_cast<uint32_t>(new_handle) == static_cast<uint32_t>(old_handle));
  HandleTable::Lookup result;
  CHECK(table.find(old_handle, &result) == nullptr);
  CHECK(result == HandleTable::Lookup::kReleased);
  CHECK(table.find(new_handle, &result) == &b);
}

TEST_CASE("values that never were handles are recognised") {
  HandleTable table;
  Dummy a;
  const uint64_t handle = table.insert(&a);
  HandleTable::Lookup result;
  CHECK(table.find(0, &result) == nullptr);
  CHECK(result == HandleTable::Lookup::kNull);
  CHECK(table.find(0xdeadbeefcafef00dull, &result) == nullptr);
  CHECK(result == HandleTable::Lookup::kNotAHandle);
  CHECK(table.find(handle + (uint64_t{5} << 32), &result) == nullptr);  // future generation
  CHECK(result == HandleTable::Lookup::kNotAHandle);
  CHECK(table.find(static_cast<uint32_t>(handle), &result) == nullptr);  // generation 0
  CHECK(result == HandleTable::Lookup::kNotAHandle);
}

TEST_CASE("the table grows past one chunk and stays consistent across threads") {
  HandleTable table;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  std::vector<Dummy> objects(kThreads * kPerThread);
  std::vector<std::vector<uint64_t>> handles(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) handles[t].push_back(table.insert(&objects[t * kPerThread + i]));
      // Remove every other one while the other threads still insert.
      for (int i = 0; i < kPerThread; i += 2) table.remove(handles[t][i]);
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> unique;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      HandleTable::Lookup result;
      Object* found = table.find(handles[t][i], &result);
      if (i % 2 == 0) {
        CHECK(found == nullptr);
      } else {
        CHECK(found == &objects[t * kPerThread + i]);
      }
      unique.insert(handles[t][i]);
    }
  }
  CHECK(unique.size() == static_cast<size_t>(kThreads * kPerThread));
  CHECK(table.live_count() == static_cast<size_t>(kThreads * kPerThread / 2));
}
