#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace {

constexpr std::uint64_t kEmpty = ~0ull;
constexpr std::uint32_t kNoRank = ~0u;

std::uint64_t pair_key(TokenId a, TokenId b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

} // namespace

core::Result<std::unique_ptr<Bpe>> Bpe::create(std::unordered_map<std::string, TokenId> vocab,
                                               const std::vector<std::pair<std::string, std::string>>& merges,
                                               Options options) {
    std::unique_ptr<Bpe> bpe(new Bpe());
    bpe->options_ = options;
    bpe->vocab_ = std::move(vocab);
    bpe->cache_ = std::make_unique<Shard[]>(kShards);
    auto find = [&](const std::string& s) -> TokenId {
        auto it = bpe->vocab_.find(s);
        return it == bpe->vocab_.end() ? -1 : it->second;
    };
    if (options.byte_level) {
        for (int b = 0; b < 256; ++b) {
            std::string ch;
            utf8::append_codepoint(ch, byte_level::byte_to_char(static_cast<unsigned char>(b)));
            bpe->byte_ids_[b] = find(ch);
            if (bpe->byte_ids_[b] < 0)
                return core::invalid_argument("byte-level BPE vocabulary lacks the token for byte " +
                                              std::to_string(b));
        }
    }
    if (!options.unk_token.empty()) bpe->unk_id_ = find(options.unk_token);

    std::size_t cap = 16;
    while (cap < merges.size() * 2) cap <<= 1;
    bpe->merge_keys_.assign(cap, kEmpty);
    bpe->merge_vals_.assign(cap, 0);
    bpe->merge_mask_ = cap - 1;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [l, r] = merges[rank];
        const TokenId a = find(l), b = find(r), c = find(l + r);
        if (a < 0 || b < 0 || c < 0)
            return core::invalid_argument("merge " + std::to_string(rank) + " ('" + l + "', '" + r +
                                          "') uses a token missing from the vocabulary");
        const std::uint64_t key = pair_key(a, b);
        std::uint64_t h = mix(key) & bpe->merge_mask_;
        while (bpe->merge_keys_[h] != kEmpty && bpe->merge_keys_[h] != key) h = (h + 1) & bpe->merge_mask_;
        // A repeated merge takes its last rank, as HF's HashMap collect does.
        bpe->merge_keys_[h] = key;
        bpe->merge_vals_[h] = (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(c);
    }
    return bpe;
}

bool Bpe::lookup_merge(TokenId a, TokenId b, std::uint32_t* rank, TokenId* id) const {
    const std::uint64_t key = pair_key(a, b);
    std::uint64_t h = mix(key) & merge_mask_;
    while (true) {
        const std::uint64_t k = merge_keys_[h];
        if (k == key) {
            *rank = static_cast<std::uint32_t>(merge_vals_[h] >> 32);
            *id = static_cast<TokenId>(merge_vals_[h] & 0xffffffffu);
            return true;
        }
        if (k == kEmpty) return false;
        h = (h + 1) & merge_mask_;
    }
}

void Bpe::initial_symbols(std::string_view word, std::vector<TokenId>& symbols) const {
    if (options_.byte_level) {
        for (unsigned char b : word) symbols.push_back(byte_ids_[b]);
        return;
    }
    std::size_t i = 0;
    bool last_unk = false;
    while (i < word.size()) {
        std::size_t n = utf8::valid_sequence_length(word, i);
        if (n == 0) n = 1;
        const std::string ch(word.substr(i, n));
        i += n;
        auto it = vocab_.find(ch);
        if (it != vocab_.end()) {
            symbols.push_back(it->second);
            last_unk = false;
            continue;
        }
        if (options_.byte_fallback) {
            bool all = true;
            std::vector<TokenId> bytes;
            for (unsigned char b : ch) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
                auto bt = vocab_.find(buf);
                if (bt == vocab_.end()) {
                    all = false;
                    break;
                }
                bytes.push_back(bt->second);
            }
            if (all) {
                symbols.insert(symbols.end(), bytes.begin(), bytes.end());
                last_unk = false;
                continue;
            }
        }
        if (unk_id_ >= 0 && !(options_.fuse_unk && last_unk)) symbols.push_back(unk_id_);
        last_unk = unk_id_ >= 0;
    }
}

void Bpe::merge_word(std::vector<TokenId>& sym) const {
    const std::size_t n = sym.size();
    if (n < 2) return;
    if (n <= 96) {
        // Short words: rescan for the lowest-ranked (then leftmost) pair; O(n^2) but cache-friendly.
        std::uint32_t ranks[96];
        TokenId ids[96];
        std::size_t len = n;
        for (std::size_t i = 0; i + 1 < len; ++i)
            if (!lookup_merge(sym[i], sym[i + 1], &ranks[i], &ids[i])) ranks[i] = kNoRank;
        while (len > 1) {
            std::uint32_t best = kNoRank;
            std::size_t at = 0;
            for (std::size_t i = 0; i + 1 < len; ++i)
                if (ranks[i] < best) best = ranks[i], at = i;
            if (best == kNoRank) break;
            sym[at] = ids[at];
            for (std::size_t i = at + 1; i + 1 < len; ++i) {
                sym[i] = sym[i + 1];
                ranks[i] = ranks[i + 1];
                ids[i] = ids[i + 1];
            }
            --len;
            if (at + 1 < len) {
                if (!lookup_merge(sym[at], sym[at + 1], &ranks[at], &ids[at])) ranks[at] = kNoRank;
            }
            if (at > 0) {
                if (!lookup_merge(sym[at - 1], sym[at], &ranks[at - 1], &ids[at - 1]))
                    ranks[at - 1] = kNoRank;
            }
        }
        sym.resize(len);
        return;
    }
    // Long words: linked list + min-heap of (rank, position), skipping stale entries (HF's algorithm).
    std::vector<int> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (std::size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
    }
    struct Entry {
        std::uint32_t rank;
        int pos;
        TokenId id;
        bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](int i) {
        if (i < 0 || next[i] < 0) return;
        std::uint32_t r;
        TokenId id;
        if (lookup_merge(sym[i], sym[next[i]], &r, &id)) heap.push({r, i, id});
    };
    for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
    while (!heap.empty()) {
        const Entry e = heap.top();
        heap.pop();
        if (!alive[e.pos] || next[e.pos] < 0) continue;
        const int right = next[e.pos];
        std::uint32_t r;
        TokenId id;
        if (!lookup_merge(sym[e.pos], sym[right], &r, &id) || id != e.id) continue;
        sym[e.pos] = id;
        alive[right] = 0;
        next[e.pos] = next[right];
        if (next[right] >= 0) prev[next[right]] = e.pos;
        push(prev[e.pos]);
        push(e.pos);
    }
    std::size_t w = 0;
    for (int i = 0; i >= 0; i = next[i]) sym[w++] = sym[i];
    sym.resize(w);
}

namespace {
std::size_t shard_of(std::string_view s) {
    return std::hash<std::string_view>()(s);
}
} // namespace

void Bpe::tokenize(std::string_view word, std::vector<TokenId>& out) const {
    if (word.empty()) return;
    if (options_.ignore_merges) {
        auto it = vocab_.find(std::string(word));
        if (it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    const std::size_t h = shard_of(word);
    Shard& shard = cache_[h % kShards];
    if (cacheable) {
        std::lock_guard<std::mutex> lock(shard.mu);
        auto it = shard.map.find(std::string(word));
        if (it != shard.map.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<TokenId> sym;
    sym.reserve(word.size());
    initial_symbols(word, sym);
    merge_word(sym);
    out.insert(out.end(), sym.begin(), sym.end());
    if (cacheable) {
        std::lock_guard<std::mutex> lock(shard.mu);
        if (shard.map.size() >= kMaxEntriesPerShard) shard.map.clear();
        shard.map.emplace(std::string(word), std::move(sym));
    }
}

} // namespace deepinfer::tokenizer
