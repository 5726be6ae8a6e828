#include "serving/block_manager.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace axrt::serving {
namespace {

// splitmix64's finaliser: a cheap mix with good avalanche.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(uint32_t num_blocks, uint32_t block_size, bool prefix_caching)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      refs_(num_blocks, 0),
      entries_(num_blocks),
      prev_(num_blocks, -1),
      next_(num_blocks, -1),
      on_free_list_(num_blocks, false) {
  for (uint32_t b = 0; b < num_blocks; ++b) push_back(static_cast<int32_t>(b));
}

void BlockManager::unlink(int32_t block) {
  const int32_t p = prev_[block];
  const int32_t n = next_[block];
  (p >= 0 ? next_[p] : head_) = n;
  (n >= 0 ? prev_[n] : tail_) = p;
  prev_[block] = next_[block] = -1;
  on_free_list_[block] = false;
  --free_count_;
  if (entries_[block].registered) --cached_free_;
}

void BlockManager::push_back(int32_t block) {
  prev_[block] = tail_;
  next_[block] = -1;
  (tail_ >= 0 ? next_[tail_] : head_) = block;
  tail_ = block;
  on_free_list_[block] = true;
  ++free_count_;
  if (entries_[block].registered) ++cached_free_;
}

void BlockManager::evict(int32_t block) {
  Entry& entry = entries_[block];
  if (!entry.registered) return;
  cache_.erase(entry.hash);
  entry = Entry{};
  ++evictions_;
}

int32_t BlockManager::allocate() {
  if (head_ < 0) return -1;
  const int32_t block = head_;
  unlink(block);
  evict(block);
  refs_[block] = 1;
  return block;
}

void BlockManager::retain(int32_t block) { ++refs_[block]; }

void BlockManager::release(int32_t block) {
  if (--refs_[block] == 0) push_back(block);
}

uint64_t BlockManager::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x6a09e667f3bcc908ull);
  for (const int32_t token : tokens) h = mix(h ^ static_cast<uint32_t>(token));
  return mix(h ^ tokens.size());
}

int32_t BlockManager::lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  if (!prefix_caching_) return -1;
  ++lookups_;
  const auto it = cache_.find(hash);
  if (it == cache_.end()) return -1;
  const int32_t block = it->second;
  const Entry& entry = entries_[block];
  // The hash names the block; the tokens and the parent prove it.
  if (entry.parent != parent || entry.tokens.size() != tokens.size() ||
      !std::equal(tokens.begin(), tokens.end(), entry.tokens.begin())) {
    return -1;
  }
  if (on_free_list_[block]) unlink(block);
  ++refs_[block];
  ++hits_;
  return block;
}

void BlockManager::register_block(int32_t block, uint64_t hash, uint64_t parent,
                                  std::span<const int32_t> tokens) {
  if (!prefix_caching_ || entries_[block].registered || cache_.contains(hash)) return;
  Entry& entry = entries_[block];
  // What can throw (out of memory) comes first: a block is registered
  // whole or not at all.
  entry.tokens.assign(tokens.begin(), tokens.end());
  cache_.emplace(hash, block);
  entry.registered = true;
  entry.hash = hash;
  entry.parent = parent;
  if (on_free_list_[block]) ++cached_free_;
}

std::string BlockManager::check() const {
  uint32_t listed = 0;
  uint32_t cached = 0;
  int32_t previous = -1;
  for (int32_t b = head_; b >= 0; b = next_[b]) {
    if (prev_[b] != previous) return fmt::format("block {}: broken back link", b);
    if (refs_[b] != 0) return fmt::format("block {} is free with {} references", b, refs_[b]);
    if (!on_free_list_[b]) return fmt::format("block {} is listed but not marked free", b);
    if (entries_[b].registered) ++cached;
    if (++listed > num_blocks()) return "the free list has a cycle";
    previous = b;
  }
  if (previous != tail_) return "the free list's tail is wrong";
  if (listed != free_count_) return fmt::format("{} blocks listed, {} counted", listed, free_count_);
  if (cached != cached_free_) return fmt::format("{} cached free, {} counted", cached, cached_free_);
  for (uint32_t b = 0; b < num_blocks(); ++b) {
    if ((refs_[b] == 0) != on_free_list_[b]) {
      return fmt::format("block {} has {} references, free-listed {}", b, refs_[b],
                         static_cast<bool>(on_free_list_[b]));
    }
  }
  size_t registered = 0;
  for (uint32_t b = 0; b < num_blocks(); ++b) {
    if (!entries_[b].registered) continue;
    ++registered;
    const auto it = cache_.find(entries_[b].hash);
    if (it == cache_.end() || it->second != static_cast<int32_t>(b)) {
      return fmt::format("block {} is registered but not in the cache map", b);
    }
  }
  if (registered != cache_.size()) return "the cache map names unregistered blocks";
  return {};
}

}  // namespace axrt::serving
