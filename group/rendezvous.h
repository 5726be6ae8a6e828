// The rendezvous of a group across processes (axrt_group_join): a small
// key-value store that the members meet in, named by the group's id.
//   - "tcp://HOST:PORT[/NAME]": rank 0 serves the store on HOST:PORT from
//     its first join there until its process exits (the groups built after
//     a failure meet there too, under new names); the others connect to
//     it, retrying until the deadline.
//   - "file://DIR[#NAME]": a directory every member can reach (a shared
//     file system), one file per key.
// NAME, when given, prefixes every key, so that several groups may meet in
// one store. The members' records (rank, world size, host, process and
// device) and the transport's addresses are its keys.
#ifndef AXRT_GROUP_RENDEZVOUS_H_
#define AXRT_GROUP_RENDEZVOUS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "axrt/base.h"

namespace axrt::group {

using Clock = std::chrono::steady_clock;

class Store {
 public:
  virtual ~Store() = default;
  // Every function is thread-safe; errors say which key and why.
  virtual axrt_status_t set(const std::string& key, std::string_view value) = 0;
  // Waits until `key` is present, until `deadline` (DEADLINE_EXCEEDED
  // naming the key after it).
  virtual axrt_status_t get(const std::string& key, Clock::time_point deadline,
                            std::string* out) = 0;
  // Whether `key` is present now, and its value when it is; never waits.
  virtual axrt_status_t check(const std::string& key, bool* found, std::string* out) = 0;
  // Adds `delta` to the integer under `key` (absent: 0), atomically across
  // the members; writes the new value.
  virtual axrt_status_t add(const std::string& key, int64_t delta, int64_t* out) = 0;
  // "tcp://127.0.0.1:29500", for messages.
  virtual const std::string& where() const noexcept = 0;
  // The numeric address this process reaches the store from (TCP), where
  // its peers can likely reach it too; "" when there is none (files).
  virtual std::string local_address() const { return {}; }
};

// Opens the store `id` names as member `rank` (rank 0 serves a TCP store),
// connecting until `deadline`. INVALID_ARGUMENT for an id of no known form.
axrt_status_t open_store(std::string_view id, uint32_t rank, Clock::time_point deadline,
                         std::unique_ptr<Store>* out);

}  // namespace axrt::group

#endif  // AXRT_GROUP_RENDEZVOUS_H_
