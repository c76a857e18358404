#include "structured/compiled_grammar.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace deepinfer::structured {

namespace {
constexpr int32_t kUnknown = -2;
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : g_(std::move(grammar)), vocab_(std::move(vocab)) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int32_t> seeds{intern_frame(g_.rule_start[g_.root], -1)};
    initial_ = closure(seeds);
    walk_states_.resize(vocab_->trie().max_depth + 1);
}

int32_t CompiledGrammar::intern_frame(int32_t node, int32_t parent) {
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parent);
    auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<int32_t>(frames_.size()));
    if (fresh) {
        frames_.push_back({node, parent, parent < 0 ? 1 : frames_[parent].depth + 1});
        mark_.push_back(0);
    }
    return it->second;
}

int32_t CompiledGrammar::closure(std::vector<int32_t>& seeds) {
    if (++epoch_ == 0) { // wrapped: old marks could collide
        std::fill(mark_.begin(), mark_.end(), 0u);
        epoch_ = 1;
    }
    std::vector<int32_t> result;
    bool accepting = false;
    work_.assign(seeds.begin(), seeds.end());
    while (!work_.empty()) {
        const int32_t f = work_.back();
        work_.pop_back();
        if (mark_[f] == epoch_) continue;
        mark_[f] = epoch_;
        const Frame fr = frames_[f];
        if (fr.depth > kMaxStackDepth) continue; // runaway nesting: this path dies
        const Node& n = g_.nodes[fr.node];
        if (!n.edges.empty()) result.push_back(f);
        for (int32_t e : n.eps) work_.push_back(intern_frame(e, fr.parent));
        for (const CallEdge& c : n.calls) {
            const int32_t ret = g_.nodes[c.ret].tail ? fr.parent : intern_frame(c.ret, fr.parent);
            work_.push_back(intern_frame(g_.rule_start[c.rule], ret));
        }
        if (n.final) {
            if (fr.parent < 0)
                accepting = true;
            else
                work_.push_back(fr.parent);
        }
    }
    if (result.empty() && !accepting) return kDead;
    std::sort(result.begin(), result.end());
    std::string key(reinterpret_cast<const char*>(result.data()), result.size() * sizeof(int32_t));
    key.push_back(accepting ? 1 : 0);
    auto [it, fresh] = state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
    if (fresh) {
        states_.push_back({std::move(result), accepting});
        trans_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
}

int32_t CompiledGrammar::step(int32_t state, uint8_t byte) {
    const std::size_t slot = static_cast<std::size_t>(state) * 256 + byte;
    int32_t t = trans_[slot];
    if (t != kUnknown) return t;
    seeds_.clear();
    for (int32_t f : states_[state].frames) {
        const Frame fr = frames_[f];
        for (const ByteEdge& e : g_.nodes[fr.node].edges)
            if (e.lo <= byte && byte <= e.hi) seeds_.push_back(intern_frame(e.target, fr.parent));
    }
    t = seeds_.empty() ? kDead : closure(seeds_);
    trans_[slot] = t;
    return t;
}

int32_t CompiledGrammar::advance(int32_t state, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    for (char c : bytes) {
        if (state == kDead) break;
        state = step(state, static_cast<uint8_t>(c));
    }
    return state;
}

bool CompiledGrammar::is_accepting(int32_t state) {
    std::lock_guard<std::mutex> lock(mu_);
    return state >= 0 && states_[state].accepting;
}

bool CompiledGrammar::can_continue(int32_t state) {
    std::lock_guard<std::mutex> lock(mu_);
    return state >= 0 && !states_[state].frames.empty();
}

void CompiledGrammar::compute_mask(int32_t state, std::span<uint32_t> mask) {
    std::fill(mask.begin(), mask.end(), 0u);
    const TokenVocabulary::Trie& t = vocab_->trie();
    const int32_t n = static_cast<int32_t>(t.byte.size());
    walk_states_[0] = state;
    if (!states_[state].frames.empty()) {
        for (int32_t i = 0; i < n;) {
            const int32_t d = t.depth[i];
            const int32_t from = walk_states_[d - 1];
            int32_t s = trans_[static_cast<std::size_t>(from) * 256 + t.byte[i]];
            if (s == kUnknown) s = step(from, t.byte[i]);
            if (s == kDead) {
                i = t.skip[i];
                continue;
            }
            walk_states_[d] = s;
            for (int32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
                const int32_t id = t.tok_ids[k];
                mask[id >> 5] |= 1u << (id & 31);
            }
            ++i;
        }
    }
    if (states_[state].accepting)
        for (int32_t id : vocab_->end_ids()) mask[id >> 5] |= 1u << (id & 31);
}

void CompiledGrammar::fill_mask(int32_t state, std::span<uint32_t> mask) {
    DI_CHECK(mask.size() == static_cast<std::size_t>(vocab_->mask_words()));
    std::lock_guard<std::mutex> lock(mu_);
    if (state < 0) {
        std::fill(mask.begin(), mask.end(), 0u);
        return;
    }
    auto it = masks_.find(state);
    if (it != masks_.end()) {
        ++stats_.mask_hits;
        std::memcpy(mask.data(), it->second.data(), mask.size() * sizeof(uint32_t));
        return;
    }
    ++stats_.mask_misses;
    compute_mask(state, mask);
    if (masks_.size() >= kMaxCachedMasks) masks_.clear();
    masks_.emplace(state, std::vector<uint32_t>(mask.begin(), mask.end()));
}

CompiledGrammarStats CompiledGrammar::stats() {
    std::lock_guard<std::mutex> lock(mu_);
    CompiledGrammarStats s = stats_;
    s.states = static_cast<int64_t>(states_.size());
    s.frames = static_cast<int64_t>(frames_.size());
    return s;
}

} // namespace deepinfer::structured
