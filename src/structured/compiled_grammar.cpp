#include "structured/compiled_grammar.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>

#include "core/check.h"

namespace deepinfer::structured {

namespace {
constexpr int32_t kUnknown = -2;

int32_t add_dist(int32_t a, int32_t b) {
    return std::min<int64_t>(static_cast<int64_t>(a) + b, CompiledGrammar::kUnreachable);
}
} // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                 std::size_t mask_cache_bytes)
    : g_(std::move(grammar)), vocab_(std::move(vocab)), mask_cache_bytes_(mask_cache_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    compute_rests();
    std::vector<int32_t> seeds{intern_frame(g_.rule_start[g_.root], -1)};
    initial_ = closure(seeds);
    walk_states_.resize(vocab_->trie().max_depth + 1);
}

// rest(n) = 0 if n is final, else the least of 1 + rest(t) over byte edges n -> t, rest(e) over epsilon
// moves, rest(start of r) + rest(ret) over calls. A shortest-path problem whose call edges add two values:
// Dijkstra generalized to such sums (Knuth 1977) settles nodes in order of their rest, one heap pass.
void CompiledGrammar::compute_rests() {
    const auto n = static_cast<int32_t>(g_.nodes.size());
    rest_.assign(static_cast<std::size_t>(n), kUnreachable);
    // Reverse dependencies in CSR form: who[k] depends on the node, through how[k] (-1 a byte edge,
    // -2 an epsilon move, c >= 0 its call c).
    std::vector<int32_t> begin(static_cast<std::size_t>(n) + 1, 0);
    auto each_dep = [&](auto&& fn) {
        for (int32_t v = 0; v < n; ++v) {
            const Node& node = g_.nodes[v];
            for (const ByteEdge& e : node.edges) fn(e.target, v, -1);
            for (int32_t e : node.eps) fn(e, v, -2);
            for (std::size_t c = 0; c < node.calls.size(); ++c) {
                fn(g_.rule_start[node.calls[c].rule], v, static_cast<int32_t>(c));
                fn(node.calls[c].ret, v, static_cast<int32_t>(c));
            }
        }
    };
    each_dep([&](int32_t on, int32_t, int32_t) { ++begin[static_cast<std::size_t>(on) + 1]; });
    for (int32_t v = 0; v < n; ++v) begin[v + 1] += begin[v];
    std::vector<int32_t> who(static_cast<std::size_t>(begin[n])), how(who.size()),
        fill(begin.begin(), begin.end() - 1);
    each_dep([&](int32_t on, int32_t v, int32_t h) {
        who[fill[on]] = v;
        how[fill[on]++] = h;
    });
    std::vector<bool> done(static_cast<std::size_t>(n), false);
    using Item = std::pair<int32_t, int32_t>; // (rest, node)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    for (int32_t v = 0; v < n; ++v)
        if (g_.nodes[v].final) {
            rest_[v] = 0;
            heap.push({0, v});
        }
    while (!heap.empty()) {
        const auto [d, u] = heap.top();
        heap.pop();
        if (done[u] || d != rest_[u]) continue;
        done[u] = true;
        for (int32_t k = begin[u]; k < begin[u + 1]; ++k) {
            const int32_t v = who[k];
            if (done[v]) continue;
            int32_t cand = kUnreachable;
            if (how[k] == -1) {
                cand = add_dist(d, 1);
            } else if (how[k] == -2) {
                cand = d;
            } else {
                const CallEdge& c = g_.nodes[v].calls[static_cast<std::size_t>(how[k])];
                const int32_t start = g_.rule_start[c.rule];
                if (!done[start] || !done[c.ret]) continue; // the other half settles later and retries
                cand = add_dist(rest_[start], rest_[c.ret]);
            }
            if (cand < rest_[v]) {
                rest_[v] = cand;
                heap.push({cand, v});
            }
        }
    }
}

int32_t CompiledGrammar::intern_frame(int32_t node, int32_t parent) {
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parent);
    auto [it, fresh] = frame_ids_.try_emplace(key, static_cast<int32_t>(frames_.size()));
    if (fresh) {
        frames_.push_back({node, parent, parent < 0 ? 1 : frames_[parent].depth + 1});
        frame_dist_.push_back(add_dist(rest_[node], parent < 0 ? 0 : frame_dist_[parent]));
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
        int32_t dist = accepting ? 0 : kUnreachable;
        for (int32_t f : result) dist = std::min(dist, frame_dist_[f]);
        states_.push_back({std::move(result), accepting, dist});
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

void CompiledGrammar::compute_mask(int32_t state, CachedMask& out) {
    out.bits.assign(static_cast<std::size_t>(vocab_->mask_words()), 0u);
    out.farther.clear();
    out.nearer.clear();
    uint32_t* mask = out.bits.data();
    const TokenVocabulary::Trie& t = vocab_->trie();
    const int32_t n = static_cast<int32_t>(t.byte.size());
    const int32_t here = states_[state].distance;
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
            const int32_t next = states_[s].distance;
            for (int32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
                const int32_t id = t.tok_ids[k];
                mask[id >> 5] |= 1u << (id & 31);
                if (next > here)
                    out.farther.push_back({next, id});
                else if (next < here)
                    out.nearer.push_back(id);
            }
            ++i;
        }
    }
    if (states_[state].accepting)
        for (int32_t id : vocab_->end_ids()) mask[id >> 5] |= 1u << (id & 31);
    std::sort(out.farther.begin(), out.farther.end(),
              [](const DistToken& a, const DistToken& b) { return a.distance > b.distance; });
}

const CompiledGrammar::CachedMask& CompiledGrammar::cached_mask(int32_t state) {
    auto it = masks_.find(state);
    if (it != masks_.end()) {
        ++stats_.mask_hits;
        it->second.last_use = ++mask_clock_;
        return it->second;
    }
    ++stats_.mask_misses;
    CachedMask m;
    compute_mask(state, m);
    m.bits.shrink_to_fit();
    m.farther.shrink_to_fit();
    m.nearer.shrink_to_fit();
    m.last_use = ++mask_clock_;
    mask_bytes_ += m.bytes();
    if (mask_bytes_ > mask_cache_bytes_) evict_masks(); // before the insert: the new one stays
    return masks_.emplace(state, std::move(m)).first->second;
}

void CompiledGrammar::evict_masks() {
    std::vector<std::pair<uint64_t, int32_t>> uses; // (last use, state)
    uses.reserve(masks_.size());
    for (const auto& [state, m] : masks_) uses.emplace_back(m.last_use, state);
    if (uses.empty()) return;
    const std::size_t drop = (uses.size() + 1) / 2;
    std::nth_element(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(drop) - 1, uses.end());
    for (std::size_t k = 0; k < drop; ++k) {
        auto it = masks_.find(uses[k].second);
        mask_bytes_ -= it->second.bytes();
        masks_.erase(it);
        ++stats_.mask_evictions;
    }
}

int32_t CompiledGrammar::distance(int32_t state) {
    std::lock_guard<std::mutex> lock(mu_);
    return state < 0 ? kUnreachable : states_[state].distance;
}

void CompiledGrammar::fill_mask(int32_t state, std::span<uint32_t> mask, int32_t tokens_left) {
    DI_CHECK(mask.size() == static_cast<std::size_t>(vocab_->mask_words()));
    std::lock_guard<std::mutex> lock(mu_);
    if (state < 0) {
        std::fill(mask.begin(), mask.end(), 0u);
        return;
    }
    const CachedMask& m = cached_mask(state);
    const int32_t here = states_[state].distance;
    // After the next token, tokens_left - 1 remain: its distance + 1 (the end token) must fit in them.
    // Where nothing fits any more (the budget was too small from the start), head for the end anyway.
    const int32_t limit = std::max<int64_t>(static_cast<int64_t>(tokens_left) - 2, here - 1);
    const bool loose = limit >= here && (m.farther.empty() || m.farther.front().distance <= limit);
    if (!budget_aware() || loose) {
        std::memcpy(mask.data(), m.bits.data(), mask.size() * sizeof(uint32_t));
        return;
    }
    if (limit >= here) { // drop the tokens that move the end out of reach
        std::memcpy(mask.data(), m.bits.data(), mask.size() * sizeof(uint32_t));
        for (const DistToken& dt : m.farther) {
            if (dt.distance <= limit) break;
            mask[dt.id >> 5] &= ~(1u << (dt.id & 31));
        }
        return;
    }
    // limit == here - 1: only the tokens that bring the end nearer (or the end token, when accepting).
    std::fill(mask.begin(), mask.end(), 0u);
    for (int32_t id : m.nearer) mask[id >> 5] |= 1u << (id & 31);
    if (states_[state].accepting)
        for (int32_t id : vocab_->end_ids()) mask[id >> 5] |= 1u << (id & 31);
}

CompiledGrammarStats CompiledGrammar::stats() {
    std::lock_guard<std::mutex> lock(mu_);
    CompiledGrammarStats s = stats_;
    s.states = static_cast<int64_t>(states_.size());
    s.frames = static_cast<int64_t>(frames_.size());
    s.cached_masks = static_cast<int64_t>(masks_.size());
    return s;
}

} // namespace deepinfer::structured
