#pragma once
// The BPE model of a Hugging Face tokenizer.json: vocabulary, ranked merges, and the merge loop
// (lowest rank first, leftmost among equals, exactly as HF's `Word::merge_all`). Words already seen are
// cached. Thread-safe.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

using TokenId = std::int32_t;

class Bpe {
public:
    struct Options {
        bool byte_level = true; // words are raw bytes; initial symbols are the 256 byte tokens
        std::string unk_token;  // char-level mode only; empty: unknown characters are dropped
        bool fuse_unk = false;
        bool byte_fallback = false; // char-level mode: unknown chars become <0xXX> tokens
        bool ignore_merges = false; // a word that is itself in the vocabulary is one token
    };

    // vocab: token string (byte-level alphabet when byte_level) -> id. merges: pairs in rank order.
    static core::Result<std::unique_ptr<Bpe>>
    create(std::unordered_map<std::string, TokenId> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options);

    // Appends the ids of one pre-tokenized word.
    void tokenize(std::string_view word, std::vector<TokenId>& out) const;

    const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }

private:
    struct MergeTable; // open-addressing (left, right) -> (rank, new id)
    Bpe() = default;
    void merge_word(std::vector<TokenId>& symbols) const;
    void initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const;

    Options options_;
    std::unordered_map<std::string, TokenId> vocab_;
    std::vector<std::uint64_t> merge_keys_;
    std::vector<std::uint64_t> merge_vals_; // rank << 32 | new_id
    std::uint64_t merge_mask_ = 0;
    TokenId byte_ids_[256] = {};
    TokenId unk_id_ = -1;

    bool lookup_merge(TokenId a, TokenId b, std::uint32_t* rank, TokenId* id) const;

    // Word cache (HF keeps one too); sharded to keep lock contention low.
    static constexpr int kShards = 16;
    static constexpr std::size_t kMaxEntriesPerShard = 1 << 14;
    static constexpr std::size_t kMaxCachedWordBytes = 128;
    struct Shard {
        std::mutex mu;
        std::unordered_map<std::string, std::vector<TokenId>> map;
    };
    mutable std::unique_ptr<Shard[]> cache_;
};

} // namespace deepinfer::tokenizer
