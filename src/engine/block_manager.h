#pragma once
// The fixed pool of KV block ids and per-sequence slots, with refcounts and the prefix cache.
//
// A block is in exactly one of three states:
//   free      refcount 0, no hash                       -> in free_
//   cached    refcount 0, hashed (content is reusable)   -> in the LRU, evicted when free_ is empty
//   in use    refcount > 0 (shared when > 1), maybe hashed
// A full block whose KV has been computed is registered under a hash chained over (parent hash, its
// tokens); a new sequence whose leading blocks have the same hashes shares them. The model stores the
// compressor overlap state at each block's end, so a hit at a block boundary is exact.
// The model's scratch block (id num_blocks) and scratch slot (id num_slots) are never handed out.

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace deepinfer::engine {

// Content hash of a full block, chained over its parent's hash (0 for the first block).
uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens);

struct PrefixMatch {
    std::vector<int32_t> blocks;  // physical blocks of the matched leading blocks
    std::vector<uint64_t> hashes; // their hashes
    int32_t num_evictable = 0;    // of which currently cached with refcount 0
};

class BlockManager {
public:
    BlockManager(int32_t num_blocks, int32_t block_size, int32_t num_slots, bool enable_prefix_caching);

    int32_t num_blocks() const { return num_blocks_; }
    int32_t block_size() const { return block_size_; }
    int32_t scratch_block() const { return num_blocks_; }
    int32_t scratch_slot() const { return num_slots_; }
    bool prefix_caching() const { return prefix_caching_; }

    // Blocks an allocation can obtain now: free plus cached (evictable).
    int32_t num_available_blocks() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
    int32_t num_cached_blocks() const { return static_cast<int32_t>(lru_.size()); }
    int32_t num_used_blocks() const { return num_blocks_ - num_available_blocks(); }
    int32_t num_free_slots() const { return static_cast<int32_t>(free_slots_.size()); }

    // Longest run of leading full blocks of `tokens` present in the cache, at most max_blocks.
    PrefixMatch match_prefix(std::span<const int32_t> tokens, int32_t max_blocks) const;

    // A block with refcount 1 (from free_, else evicting the least recently used cached block).
    std::optional<int32_t> allocate();
    // Take a reference to an in-use or cached block (a prefix hit, or a fork sharing a block).
    void acquire(int32_t block);
    // Drop a reference; at zero a hashed block becomes cached (most recently used), else free.
    void release(int32_t block);
    // Publish a full, computed block under `hash` (no-op if caching is off or the hash is already taken).
    void register_block(int32_t block, uint64_t hash);

    std::optional<int32_t> allocate_slot();
    void free_slot(int32_t slot);

    int32_t refcount(int32_t block) const { return ref_[block]; }
    bool is_hashed(int32_t block) const { return hash_of_[block].has_value(); }

    // Counters for metrics.
    int64_t hit_tokens() const { return hit_tokens_; }
    int64_t query_tokens() const { return query_tokens_; }
    void count_query(int64_t queried, int64_t hit) {
        query_tokens_ += queried;
        hit_tokens_ += hit;
    }

    // Consistency of the internal structures; `expected_refs[b]` is the number of block-table entries
    // pointing at b (computed by the caller from all live sequences). Returns an empty string when fine.
    std::string check_invariants(const std::vector<int32_t>& expected_refs,
                                 int32_t expected_used_slots) const;

private:
    int32_t num_blocks_, block_size_, num_slots_;
    bool prefix_caching_;
    std::vector<int32_t> ref_;
    std::vector<std::optional<uint64_t>> hash_of_;
    std::vector<int32_t> free_; // LIFO of free blocks
    std::list<int32_t> lru_;    // cached blocks, least recently used first
    std::vector<std::list<int32_t>::iterator> lru_pos_;
    std::vector<bool> in_lru_;
    std::unordered_map<uint64_t, int32_t> by_hash_; // hash -> block
    std::vector<int32_t> free_slots_;
    int64_t hit_tokens_ = 0, query_tokens_ = 0;
};

} // namespace deepinfer::engine
