// The paged KV cache's bookkeeping (docs/serving.md): which of the pool's
// blocks are free, who holds the others, and which free or held blocks
// still hold a reusable prefix.
//
// Blocks are reference-counted: a block shared by several sequences (a
// common prompt prefix) is freed when the last of them lets go. A block
// full of tokens can be registered under the hash of its tokens and of
// everything before it (the hash of the block before it), so that a later
// sequence with the same prefix takes the block instead of computing it
// again (automatic prefix caching). Free blocks wait in least-recently-used
// order; allocation takes the least recently used, and a registered block
// taken that way leaves the cache (eviction).
//
// Pure host logic, no device: the engine copies blocks when asked to
// (copy-on-write) and runs the model. Not thread-safe: the engine calls it
// under its lock.
#ifndef AXRT_SERVING_BLOCK_MANAGER_H_
#define AXRT_SERVING_BLOCK_MANAGER_H_

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace axrt::serving {

class BlockManager {
 public:
  // A pool of `num_blocks` blocks of `block_size` tokens; prefix caching on
  // or off (off: register() and lookup() do nothing).
  BlockManager(uint32_t num_blocks, uint32_t block_size, bool prefix_caching);

  uint32_t num_blocks() const { return static_cast<uint32_t>(refs_.size()); }
  uint32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks no sequence holds (registered or not): what allocate() can give.
  uint32_t free_blocks() const { return free_count_; }
  // Blocks some sequence holds.
  uint32_t used_blocks() const { return num_blocks() - free_count_; }
  // Free blocks still registered (reusable by lookup()).
  uint32_t cached_free_blocks() const { return cached_free_; }
  uint32_t ref_count(int32_t block) const { return refs_[block]; }
  bool registered(int32_t block) const { return entries_[block].registered; }

  // A free block, with one reference; the least recently freed, evicted
  // from the prefix cache if registered. -1 when none is free.
  int32_t allocate();
  // Adds a reference to a held block.
  void retain(int32_t block);
  // Drops a reference; the last one frees the block (most recently used
  // end of the free list; a registered block stays reusable).
  void release(int32_t block);

  // The hash naming a full block of `tokens` after the prefix hashed as
  // `parent` (0 for the first block).
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // The block registered under `hash` for exactly `tokens` after `parent`,
  // with a reference added (taken off the free list if free); -1 if none.
  int32_t lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  // Registers held block `block`, full of `tokens` after `parent`, under
  // `hash`. A block already registered, or a hash already taken by another
  // block, leaves things as they are.
  void register_block(int32_t block, uint64_t hash, uint64_t parent,
                      std::span<const int32_t> tokens);

  // Counters of lookup(): blocks asked for and blocks found.
  uint64_t lookups() const { return lookups_; }
  uint64_t hits() const { return hits_; }
  uint64_t evictions() const { return evictions_; }

  // Checks every invariant (reference counts, free list, cache map); a
  // description of the first broken one, or empty. For tests.
  std::string check() const;

 private:
  struct Entry {
    bool registered = false;
    uint64_t hash = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
  };
  void unlink(int32_t block);
  void push_back(int32_t block);
  void evict(int32_t block);

  uint32_t block_size_;
  bool prefix_caching_;
  std::vector<uint32_t> refs_;
  std::vector<Entry> entries_;
  // The free list, least recently used first: a doubly linked list over
  // block ids (-1 ends it).
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  std::vector<bool> on_free_list_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  uint32_t free_count_ = 0;
  uint32_t cached_free_ = 0;
  std::unordered_map<uint64_t, int32_t> cache_;
  uint64_t lookups_ = 0;
  uint64_t hits_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace axrt::serving

#endif  // AXRT_SERVING_BLOCK_MANAGER_H_
