#pragma once
// Unicode character properties compiled in from data/unicode/unicode_tables.inc (generated offline by
// tools/tokenizer/gen_unicode_tables.py from a pinned unicodedata2, checked equal to HF tokenizers'
// Oniguruma on every code point). The pre-tokenizer's character classes come from here, never from the
// host's PCRE2, so a binary tokenizes the same on every machine.

#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer::tokenizer::unicode {

// General_Category values, in the generator's order.
enum class Gc : std::uint8_t {
    kLu,
    kLl,
    kLt,
    kLm,
    kLo,
    kMn,
    kMc,
    kMe,
    kNd,
    kNl,
    kNo,
    kPc,
    kPd,
    kPs,
    kPe,
    kPi,
    kPf,
    kPo,
    kSm,
    kSc,
    kSk,
    kSo,
    kZs,
    kZl,
    kZp,
    kCc,
    kCf,
    kCs,
    kCo,
    kCn,
};
inline constexpr int kGcCount = 30;

// Bit (1 << Gc) set of general categories.
using GcMask = std::uint32_t;
constexpr GcMask gc_bit(Gc g) {
    return GcMask{1} << static_cast<int>(g);
}

Gc general_category(char32_t cp);
bool is_white_space(char32_t cp); // the White_Space property (what Oniguruma's \s matches)

// The mask for a property name as written in \p{...}: one-letter major classes (L, M, N, P, S, Z, C),
// their long names (Letter, Mark, Number, Punctuation, Symbol, Separator, Other), two-letter categories
// (Lu, Nd, ...) and LC / L&. Empty when the name is not a general category (scripts, binary properties).
std::optional<GcMask> gc_mask_for_name(std::string_view name);

// Unicode version of the tables, their data source and the HF tokenizers version they were checked against.
const char* version();
const char* data_source();
const char* checked_against();

} // namespace deepinfer::tokenizer::unicode
