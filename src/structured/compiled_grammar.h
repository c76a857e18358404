#pragma once
// A grammar ready to constrain decoding over one vocabulary, shared by every sequence that uses it.
//
// Matching is a pushdown automaton over bytes, determinized lazily: a matcher state is the set of live
// stacks (each stack an interned chain of NFA positions, so a stack is one int), itself interned, so
// a sequence's whole parse state is one int32 and copying or rolling it back is free. Transitions
// state x byte -> state are computed on first use and cached in a dense table.
//
// The token mask of a state walks the vocabulary's byte trie once, pruning every subtree whose prefix is
// dead; masks are cached per state (the state is the whole stack, so the cache is exact), which makes the
// common case -- a state seen before, e.g. the inside of a string -- a 16 KB copy. The cache holds up to
// mask_cache_bytes; past that the least recently used half is dropped (a long-running server keeps the
// masks of the states its outputs revisit, instead of losing all of them at once).
//
// Budget: every state knows its distance, the fewest bytes that take it to an accepting state (exact:
// the state holds every stack, and each stack's shortest completion is the sum of its frames' shortest
// rests; a rule call costs the rule's shortest sentence). With a vocabulary that has every byte as a
// token, bytes bound tokens, so fill_mask(state, mask, tokens_left) can keep only the tokens after which
// the grammar can still end in the tokens left: the output then always closes before max_tokens
// (docs/structured-outputs.md, "Budget").
//
// Thread-safe: the lazy tables sit behind a mutex; matchers on different threads may share a grammar.

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/vocabulary.h"

namespace deepinfer::structured {

struct CompiledGrammarStats {
    int64_t states = 0;
    int64_t frames = 0;
    int64_t mask_hits = 0;
    int64_t mask_misses = 0;
    int64_t mask_evictions = 0; // masks dropped to keep the cache within its bytes
    int64_t cached_masks = 0;
};

class CompiledGrammar {
public:
    static constexpr int32_t kDead = -1;
    static constexpr int32_t kNoBudget = INT32_MAX;        // tokens_left: no limit
    static constexpr int32_t kUnreachable = INT32_MAX / 4; // distance: the grammar cannot end from here

    // The default mask cache: 2048 masks of the V4 vocabulary (16 KB each).
    static constexpr std::size_t kDefaultMaskCacheBytes = std::size_t{32} << 20;

    CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                    std::size_t mask_cache_bytes = kDefaultMaskCacheBytes);

    const TokenVocabulary& vocab() const { return *vocab_; }
    int32_t initial_state() const { return initial_; }
    // The state after `bytes`, or kDead.
    int32_t advance(int32_t state, std::string_view bytes);
    // The grammar may end here (end tokens allowed).
    bool is_accepting(int32_t state);
    // Some byte may follow.
    bool can_continue(int32_t state);
    // The fewest bytes after which the grammar accepts (0: accepting now; kUnreachable: never).
    int32_t distance(int32_t state);
    // The budget rule applies (the vocabulary has every byte as a token).
    bool budget_aware() const { return vocab_->has_all_bytes(); }
    // mask: [vocab.mask_words()] bits, bit id set = token id allowed. tokens_left: how many more tokens
    // the sequence may have, the end token included. When it is tight, only the tokens after which the
    // grammar can still end in time are kept: distance(next) + 1 <= tokens_left - 1, or where that is
    // already impossible, the tokens that bring the end nearest (distance(next) < distance(state)).
    void fill_mask(int32_t state, std::span<uint32_t> mask, int32_t tokens_left = kNoBudget);

    CompiledGrammarStats stats();

    static constexpr int32_t kMaxStackDepth = 4096;

private:
    struct Frame {
        int32_t node;
        int32_t parent; // frame to return to, -1 = the root rule
        int32_t depth;
    };
    struct State {
        std::vector<int32_t> frames; // sorted frame ids whose node has byte edges
        bool accepting = false;
        int32_t distance = kUnreachable;
    };
    struct DistToken {
        int32_t distance; // of the state after the token
        int32_t id;
    };
    // A state's mask, and its allowed tokens that move the end away (distance after > distance now,
    // farthest first) or nearer (distance after < now): what a tight budget removes or keeps.
    struct CachedMask {
        std::vector<uint32_t> bits;
        std::vector<DistToken> farther;
        std::vector<int32_t> nearer;
        uint64_t last_use = 0; // mask_clock_ at the last lookup
        std::size_t bytes() const {
            return bits.capacity() * sizeof(uint32_t) + farther.capacity() * sizeof(DistToken) +
                   nearer.capacity() * sizeof(int32_t);
        }
    };

    int32_t intern_frame(int32_t node, int32_t parent);
    int32_t closure(std::vector<int32_t>& seeds); // consumes seeds; returns a state or kDead
    int32_t step(int32_t state, uint8_t byte);    // cached
    void compute_mask(int32_t state, CachedMask& out);
    const CachedMask& cached_mask(int32_t state);
    void evict_masks();   // the least recently used half of the cache
    void compute_rests(); // rest_ for every node

    Grammar g_;
    std::shared_ptr<const TokenVocabulary> vocab_;
    std::mutex mu_;
    std::vector<Frame> frames_;
    std::vector<int32_t> rest_;       // per node: fewest bytes to its rule's end (calls: the rule's shortest)
    std::vector<int32_t> frame_dist_; // per frame: fewest bytes to accept (rest of it and its parents)
    std::unordered_map<uint64_t, int32_t> frame_ids_;
    std::vector<State> states_;
    std::unordered_map<std::string, int32_t> state_ids_;
    std::vector<int32_t> trans_; // [states * 256]; -2 = not computed yet
    std::unordered_map<int32_t, CachedMask> masks_;
    std::size_t mask_cache_bytes_;
    std::size_t mask_bytes_ = 0; // held by masks_
    uint64_t mask_clock_ = 0;
    std::vector<uint32_t> mark_; // per frame: epoch of the last closure that visited it
    uint32_t epoch_ = 0;
    std::vector<int32_t> work_, seeds_;
    std::vector<int32_t> walk_states_; // per trie depth
    int32_t initial_ = kDead;
    CompiledGrammarStats stats_;
};

} // namespace deepinfer::structured
