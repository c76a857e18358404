#include "engine/block_manager.h"

#include <sstream>

#include "core/check.h"

namespace deepinfer::engine {

namespace {
uint64_t mix64(uint64_t x) { // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
} // namespace

uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) {
    uint64_t h = mix64(parent_hash ^ 0x9e3779b97f4a7c15ULL) ^ tokens.size();
    for (int32_t t : tokens) h = mix64(h + 0x9e3779b97f4a7c15ULL + static_cast<uint32_t>(t));
    return h == 0 ? 1 : h; // 0 is the "no parent" value
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, int32_t num_slots,
                           bool enable_prefix_caching)
    : num_blocks_(num_blocks), block_size_(block_size), num_slots_(num_slots),
      prefix_caching_(enable_prefix_caching), ref_(num_blocks, 0), hash_of_(num_blocks), lru_pos_(num_blocks),
      in_lru_(num_blocks, false) {
    DI_CHECK(num_blocks > 0 && block_size > 0 && num_slots > 0);
    // LIFO: low ids are handed out first, which keeps tests readable.
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
    for (int32_t s = num_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

PrefixMatch BlockManager::match_prefix(std::span<const int32_t> tokens, int32_t max_blocks) const {
    PrefixMatch m;
    if (!prefix_caching_) return m;
    uint64_t parent = 0;
    for (int32_t i = 0; i < max_blocks && (i + 1) * int64_t(block_size_) <= int64_t(tokens.size()); ++i) {
        uint64_t h = hash_block(parent, tokens.subspan(size_t(i) * block_size_, block_size_));
        auto it = by_hash_.find(h);
        if (it == by_hash_.end()) break;
        m.blocks.push_back(it->second);
        m.hashes.push_back(h);
        if (ref_[it->second] == 0) ++m.num_evictable;
        parent = h;
    }
    return m;
}

std::optional<int32_t> BlockManager::allocate() {
    int32_t b;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else if (!lru_.empty()) {
        b = lru_.front(); // evict the least recently used cached block
        lru_.pop_front();
        in_lru_[b] = false;
        by_hash_.erase(*hash_of_[b]);
        hash_of_[b].reset();
    } else {
        return std::nullopt;
    }
    DI_CHECK_EQ(ref_[b], 0);
    ref_[b] = 1;
    return b;
}

void BlockManager::acquire(int32_t block) {
    DI_CHECK(block >= 0 && block < num_blocks_) << "block " << block;
    if (ref_[block] == 0) {
        DI_CHECK(in_lru_[block]) << "acquire of free block " << block;
        lru_.erase(lru_pos_[block]);
        in_lru_[block] = false;
    }
    ++ref_[block];
}

void BlockManager::release(int32_t block) {
    DI_CHECK(block >= 0 && block < num_blocks_) << "block " << block;
    DI_CHECK(ref_[block] > 0) << "double release of block " << block;
    if (--ref_[block] > 0) return;
    if (hash_of_[block]) {
        lru_pos_[block] = lru_.insert(lru_.end(), block);
        in_lru_[block] = true;
    } else {
        free_.push_back(block);
    }
}

void BlockManager::register_block(int32_t block, uint64_t hash) {
    if (!prefix_caching_ || hash_of_[block]) return;
    DI_CHECK(ref_[block] > 0);
    if (by_hash_.count(hash)) return; // another sequence computed the same content first
    by_hash_[hash] = block;
    hash_of_[block] = hash;
}

std::optional<int32_t> BlockManager::allocate_slot() {
    if (free_slots_.empty()) return std::nullopt;
    int32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
}

void BlockManager::free_slot(int32_t slot) {
    DI_CHECK(slot >= 0 && slot < num_slots_) << "slot " << slot;
    for (int32_t s : free_slots_) DI_CHECK(s != slot) << "double free of slot " << slot;
    free_slots_.push_back(slot);
}

std::string BlockManager::check_invariants(const std::vector<int32_t>& expected_refs,
                                           int32_t expected_used_slots) const {
    std::ostringstream err;
    std::vector<int> seen(num_blocks_, 0);
    for (int32_t b : free_) {
        if (++seen[b] > 1) err << "block " << b << " listed twice; ";
        if (ref_[b] != 0 || hash_of_[b]) err << "free block " << b << " has ref/hash; ";
    }
    for (int32_t b : lru_) {
        if (++seen[b] > 1) err << "block " << b << " listed twice; ";
        if (ref_[b] != 0 || !hash_of_[b] || !in_lru_[b]) err << "cached block " << b << " inconsistent; ";
    }
    for (int32_t b = 0; b < num_blocks_; ++b) {
        if (ref_[b] != expected_refs[b])
            err << "block " << b << " refcount " << ref_[b] << " but " << expected_refs[b] << " references; ";
        if (ref_[b] == 0 && seen[b] == 0) err << "block " << b << " leaked; ";
        if (ref_[b] > 0 && seen[b] != 0) err << "block " << b << " in use and free; ";
        if (hash_of_[b]) {
            auto it = by_hash_.find(*hash_of_[b]);
            if (it == by_hash_.end() || it->second != b) err << "block " << b << " hash not indexed; ";
        }
    }
    if (by_hash_.size() > size_t(num_blocks_)) err << "hash index larger than pool; ";
    if (num_slots_ - int32_t(free_slots_.size()) != expected_used_slots)
        err << "slots used " << num_slots_ - int32_t(free_slots_.size()) << " but " << expected_used_slots
            << " running; ";
    return err.str();
}

} // namespace deepinfer::engine
