#include "structured/vocabulary.h"

#include <algorithm>
#include <numeric>

namespace deepinfer::structured {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> special,
                                 std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), special_(std::move(special)), end_ids_(std::move(end_ids)) {
    special_.resize(bytes_.size(), false);
    std::erase_if(end_ids_, [&](int32_t id) { return id < 0 || id >= size(); });
    std::vector<int32_t> ids;
    std::vector<bool> single(256, false);
    for (int32_t id = 0; id < size(); ++id)
        if (!special_[id] && !is_end(id) && !bytes_[id].empty()) {
            ids.push_back(id);
            if (bytes_[id].size() == 1) single[static_cast<uint8_t>(bytes_[id][0])] = true;
        }
    has_all_bytes_ = std::all_of(single.begin(), single.end(), [](bool b) { return b; });
    std::sort(ids.begin(), ids.end(),
              [&](int32_t a, int32_t b) { return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b; });
    Trie& t = trie_;
    std::vector<int32_t> path; // node index per depth - 1
    const std::string* prev = nullptr;
    for (int32_t id : ids) {
        const std::string& b = bytes_[id];
        std::size_t lcp = 0;
        if (prev != nullptr)
            while (lcp < prev->size() && lcp < b.size() && (*prev)[lcp] == b[lcp]) ++lcp;
        while (path.size() > lcp) {
            t.skip[path.back()] = static_cast<int32_t>(t.byte.size());
            path.pop_back();
        }
        for (std::size_t k = lcp; k < b.size(); ++k) {
            path.push_back(static_cast<int32_t>(t.byte.size()));
            t.byte.push_back(static_cast<uint8_t>(b[k]));
            t.depth.push_back(static_cast<uint16_t>(std::min<std::size_t>(k + 1, UINT16_MAX)));
            t.skip.push_back(0);
            t.tok_begin.push_back(static_cast<int32_t>(t.tok_ids.size()));
        }
        t.max_depth = std::max<int32_t>(t.max_depth, static_cast<int32_t>(b.size()));
        t.tok_ids.push_back(id); // the node path.back() was created or reached last, so ids stay grouped
        prev = &b;
    }
    while (!path.empty()) {
        t.skip[path.back()] = static_cast<int32_t>(t.byte.size());
        path.pop_back();
    }
    t.tok_begin.push_back(static_cast<int32_t>(t.tok_ids.size()));
}

bool TokenVocabulary::is_end(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

} // namespace deepinfer::structured
