#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace {

bool is_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Approximates \w at a byte boundary for single_word tokens: ASCII alphanumerics, '_' and any non-ASCII.
bool is_word_byte(unsigned char c) {
    return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80;
}

} // namespace

void AddedTokenMatcher::add(const AddedToken& token, std::size_t index) {
    if (token.content.empty()) return;
    std::int32_t node = 0;
    for (unsigned char b : token.content) {
        std::int32_t next = child(node, b);
        if (next < 0) {
            next = static_cast<std::int32_t>(nodes_.size());
            nodes_.emplace_back();
            nodes_[node].children.emplace_back(b, next);
        }
        node = next;
    }
    nodes_[node].token = static_cast<std::int64_t>(index);
    first_byte_[static_cast<unsigned char>(token.content[0])] = true;
}

std::int32_t AddedTokenMatcher::child(std::int32_t node, unsigned char b) const {
    for (const auto& [c, n] : nodes_[node].children)
        if (c == b) return n;
    return -1;
}

void AddedTokenMatcher::find_all(std::string_view text, const std::vector<AddedToken>& tokens,
                                 std::vector<Match>& out, std::span<const ByteRange> plain) const {
    if (empty()) return;
    std::size_t i = 0;
    std::size_t last_end = 0;
    std::size_t next_plain = 0; // first plain range ending after i
    while (i < text.size()) {
        if (!first_byte_[static_cast<unsigned char>(text[i])]) {
            ++i;
            continue;
        }
        // A match at i must end before the next plain range starts (and i must not be inside one).
        while (next_plain < plain.size() && plain[next_plain].end <= i) ++next_plain;
        std::size_t limit = text.size();
        if (next_plain < plain.size()) {
            if (plain[next_plain].begin <= i) {
                i = plain[next_plain].end;
                continue;
            }
            limit = plain[next_plain].begin;
        }
        // Longest token starting at i.
        std::int32_t node = 0;
        std::int64_t best = -1;
        std::size_t best_end = 0;
        for (std::size_t j = i; j < limit; ++j) {
            node = child(node, static_cast<unsigned char>(text[j]));
            if (node < 0) break;
            if (nodes_[node].token >= 0) {
                best = nodes_[node].token;
                best_end = j + 1;
            }
        }
        if (best < 0) {
            ++i;
            continue;
        }
        const AddedToken& tok = tokens[static_cast<std::size_t>(best)];
        if (tok.single_word) {
            const bool left_ok = i == 0 || !is_word_byte(static_cast<unsigned char>(text[i - 1]));
            const bool right_ok =
                best_end == text.size() || !is_word_byte(static_cast<unsigned char>(text[best_end]));
            if (!left_ok || !right_ok) {
                ++i;
                continue;
            }
        }
        std::size_t start = i, end = best_end;
        // Stripping never reaches into plain text.
        const std::size_t floor = next_plain > 0 ? std::max(last_end, plain[next_plain - 1].end) : last_end;
        if (tok.lstrip)
            while (start > floor && is_space(static_cast<unsigned char>(text[start - 1]))) --start;
        if (tok.rstrip)
            while (end < limit && is_space(static_cast<unsigned char>(text[end]))) ++end;
        out.push_back({start, end, static_cast<std::size_t>(best)});
        last_end = end;
        i = end;
    }
}

} // namespace deepinfer::tokenizer
