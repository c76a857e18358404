#pragma once
// Pre-tokenizers: split normalized text into the words BPE sees. Implements the Hugging Face
// tokenizer.json types Split (regex or string; all five delimiter behaviours; invert), ByteLevel,
// Digits, WhitespaceSplit, Whitespace and Sequence.

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace deepinfer::tokenizer {

// Pieces are views into the input text, or into `arena` when a pre-tokenizer rewrote them.
struct PreTokenizeState {
    std::vector<std::string_view> pieces;
    std::deque<std::string> arena;
    // Scratch reused across calls.
    std::vector<std::string_view> next;
    std::vector<Regex::Match> matches;
};

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    // Replaces state.pieces by their splits.
    virtual void apply(PreTokenizeState& state) const = 0;
    // True when this pre-tokenizer (or one inside a Sequence) maps bytes to the byte-level alphabet, so
    // BPE works on raw bytes.
    virtual bool byte_level() const { return false; }
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

std::unique_ptr<PreTokenizer> make_split(Regex regex, SplitBehavior behavior, bool invert);
std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> items);

} // namespace deepinfer::tokenizer
