#pragma once
// Added tokens of a tokenizer.json ("<｜User｜>", "<think>", ...): matched in the raw text before any
// pre-tokenization, so a special token is never split by BPE. Like HF, tokens with normalized=false are
// matched first on the raw text, then tokens with normalized=true on the normalized remainder; each pass
// takes the leftmost match, longest first at that position.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

// A byte range [begin, end) of a text.
struct ByteRange {
    std::size_t begin, end;
};

struct AddedToken {
    std::string content;
    std::int32_t id = -1;
    bool special = false;
    bool normalized = false;
    bool lstrip = false;
    bool rstrip = false;
    bool single_word = false;
};

// A byte trie over one group of added tokens.
class AddedTokenMatcher {
public:
    void add(const AddedToken& token, std::size_t index);
    bool empty() const { return nodes_.size() <= 1; }

    struct Match {
        std::size_t start, end; // byte range in the text, after lstrip/rstrip widening
        std::size_t index;      // into the token list given to add()
    };
    // Splits text into non-matching gaps and matches, left to right. No match may overlap a `plain` range
    // (sorted, disjoint): text there stays text, however it is spelled.
    void find_all(std::string_view text, const std::vector<AddedToken>& tokens, std::vector<Match>& out,
                  std::span<const ByteRange> plain = {}) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, std::int32_t>> children;
        std::int64_t token = -1;
    };
    std::int32_t child(std::int32_t node, unsigned char b) const;
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
};

} // namespace deepinfer::tokenizer
