#pragma once
// A small backtracking matcher for the regex subset tokenizer.json split patterns are written in,
// with the character classes of unicode.h (Unicode 16, compiled in) instead of the host PCRE2's.
//
// Supported: literals and escapes (\r \n \t \f \v \0 and escaped punctuation), classes [...] with ^,
// ranges, \p{..} / \P{..} (general categories), \s / \S; groups (...) and (?:...); lookaheads (?=...)
// and (?!...); alternation; greedy ?, *, +, {n}, {n,}, {n,m}. Semantics are Oniguruma's (Perl
// leftmost-first backtracking). Anything else — scripts in \p{}, \d, \w, '.', anchors, lazy or
// possessive quantifiers, inline flags, backreferences — makes compile() return Unimplemented so the
// caller can fall back to PCRE2.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {

class SplitMatcher {
public:
    static core::Result<SplitMatcher> compile(std::string_view pattern);
    // Matches `text` (valid UTF-8) exactly.
    static SplitMatcher literal(std::string_view text);

    static constexpr std::size_t kNoMatch = static_cast<std::size_t>(-1);
    // End of the leftmost-first match starting exactly at `pos`, or kNoMatch. `s` is valid UTF-8.
    std::size_t match_at(std::string_view s, std::size_t pos) const;

    struct Span {
        std::size_t start, end;
    };
    // Oniguruma's search: repeatedly the leftmost start where the pattern matches and its leftmost-first
    // match there; empty matches are skipped. Appends to `out`.
    void find_all(std::string_view s, std::vector<Span>& out) const;

    struct CharClass {
        bool negated = false;
        unicode::GcMask gc = 0; // code points whose category is in the mask
        // \P{X}\P{Y}...: code points outside X, or outside Y, ... = outside the intersection X ∩ Y.
        bool has_not_gc = false;
        unicode::GcMask not_gc = ~unicode::GcMask{0};
        bool space = false;     // \s (White_Space)
        bool not_space = false; // \S
        std::vector<std::pair<char32_t, char32_t>> ranges;
        std::uint64_t ascii[2] = {0, 0}; // membership of U+0000..U+007F, precomputed
        bool contains_slow(char32_t cp) const;
        bool contains(char32_t cp) const {
            if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
            return contains_slow(cp);
        }
    };
    struct Inst {
        // kRepeatClass: a greedy repeat of one class (X+, X*, X{n,m}) consumed in one loop, giving back
        // one character at a time on backtracking.
        enum Op : std::uint8_t { kClass, kSplit, kJmp, kLookahead, kMatch, kRepeatClass } op;
        bool negate = false;   // kLookahead: (?!...)
        std::uint32_t x = 0;   // kClass, kRepeatClass: class index; kSplit: preferred; kJmp: target;
                               // kLookahead: body
        std::uint32_t y = 0;   // kSplit: alternative; kLookahead: continuation; kRepeatClass: min
        std::uint32_t max = 0; // kRepeatClass: max repeats (kUnbounded: no limit)
    };
    static constexpr std::uint32_t kUnbounded = 0xFFFFFFFFu;

private:
    std::size_t run(std::string_view s, std::uint32_t pc, std::size_t pos) const;
    void compute_first_classes();

    std::vector<CharClass> classes_;
    std::vector<Inst> prog_;
    // A match must start with a character of one of these classes (the classes reachable from the start
    // without consuming); empty when the pattern can match or look ahead first, i.e. no filter.
    std::vector<std::uint32_t> first_classes_;
    std::uint64_t first_ascii_[2] = {0, 0}; // union of the first classes on U+0000..U+007F
};

} // namespace deepinfer::tokenizer
