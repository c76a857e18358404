#include "tokenizer/unicode.h"

#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/unicode/unicode_tables.inc"

namespace deepinfer::tokenizer::unicode {

namespace {

struct GcRun {
    char32_t first;
    Gc gc;
};
constexpr GcRun kGcRuns[] = {DI_UNICODE_GC_RUNS};

struct Range {
    char32_t first, last;
};
constexpr Range kWhiteSpace[] = {DI_UNICODE_WHITE_SPACE};

constexpr char32_t kCodeSpace = 0x110000;
constexpr int kBlockBits = 8;
constexpr char32_t kBlockSize = char32_t{1} << kBlockBits;
constexpr std::uint8_t kWhiteSpaceBit = 0x80;

// Two-stage lookup built once from the runs: stage1[cp >> 8] is a block, stage2 holds each distinct
// block of 256 entries (Gc in the low bits, White_Space in the top bit).
struct Tables {
    std::array<std::uint16_t, kCodeSpace / kBlockSize> stage1{};
    std::vector<std::uint8_t> stage2;

    Tables() {
        std::vector<std::uint8_t> flat(kCodeSpace, static_cast<std::uint8_t>(Gc::kCn));
        constexpr std::size_t n_runs = sizeof(kGcRuns) / sizeof(kGcRuns[0]);
        for (std::size_t i = 0; i < n_runs; ++i) {
            const char32_t end = i + 1 < n_runs ? kGcRuns[i + 1].first : kCodeSpace;
            for (char32_t cp = kGcRuns[i].first; cp < end; ++cp)
                flat[cp] = static_cast<std::uint8_t>(kGcRuns[i].gc);
        }
        for (const Range& r : kWhiteSpace)
            for (char32_t cp = r.first; cp <= r.last; ++cp) flat[cp] |= kWhiteSpaceBit;
        std::unordered_map<std::string, std::uint16_t> seen;
        for (char32_t b = 0; b < kCodeSpace / kBlockSize; ++b) {
            std::string key(reinterpret_cast<const char*>(flat.data() + b * kBlockSize), kBlockSize);
            auto [it, inserted] = seen.emplace(key, static_cast<std::uint16_t>(stage2.size() / kBlockSize));
            if (inserted) stage2.insert(stage2.end(), key.begin(), key.end());
            stage1[b] = it->second;
        }
    }

    std::uint8_t at(char32_t cp) const {
        if (cp >= kCodeSpace) return static_cast<std::uint8_t>(Gc::kCn);
        return stage2[static_cast<std::size_t>(stage1[cp >> kBlockBits]) * kBlockSize +
                      (cp & (kBlockSize - 1))];
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

constexpr GcMask kLetter =
    gc_bit(Gc::kLu) | gc_bit(Gc::kLl) | gc_bit(Gc::kLt) | gc_bit(Gc::kLm) | gc_bit(Gc::kLo);
constexpr GcMask kCasedLetter = gc_bit(Gc::kLu) | gc_bit(Gc::kLl) | gc_bit(Gc::kLt);
constexpr GcMask kMark = gc_bit(Gc::kMn) | gc_bit(Gc::kMc) | gc_bit(Gc::kMe);
constexpr GcMask kNumber = gc_bit(Gc::kNd) | gc_bit(Gc::kNl) | gc_bit(Gc::kNo);
constexpr GcMask kPunct = gc_bit(Gc::kPc) | gc_bit(Gc::kPd) | gc_bit(Gc::kPs) | gc_bit(Gc::kPe) |
                          gc_bit(Gc::kPi) | gc_bit(Gc::kPf) | gc_bit(Gc::kPo);
constexpr GcMask kSymbol = gc_bit(Gc::kSm) | gc_bit(Gc::kSc) | gc_bit(Gc::kSk) | gc_bit(Gc::kSo);
constexpr GcMask kSeparator = gc_bit(Gc::kZs) | gc_bit(Gc::kZl) | gc_bit(Gc::kZp);
constexpr GcMask kOther =
    gc_bit(Gc::kCc) | gc_bit(Gc::kCf) | gc_bit(Gc::kCs) | gc_bit(Gc::kCo) | gc_bit(Gc::kCn);

constexpr const char* kGcNames[kGcCount] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
                                            "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
                                            "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

} // namespace

Gc general_category(char32_t cp) {
    return static_cast<Gc>(tables().at(cp) & ~kWhiteSpaceBit);
}

bool is_white_space(char32_t cp) {
    return (tables().at(cp) & kWhiteSpaceBit) != 0;
}

std::optional<GcMask> gc_mask_for_name(std::string_view name) {
    struct Named {
        const char* name;
        GcMask mask;
    };
    static constexpr Named kMajor[] = {
        {"L", kLetter},    {"Letter", kLetter},       {"LC", kCasedLetter}, {"L&", kCasedLetter},
        {"M", kMark},      {"Mark", kMark},           {"N", kNumber},       {"Number", kNumber},
        {"P", kPunct},     {"Punctuation", kPunct},   {"S", kSymbol},       {"Symbol", kSymbol},
        {"Z", kSeparator}, {"Separator", kSeparator}, {"C", kOther},        {"Other", kOther},
    };
    for (const Named& n : kMajor)
        if (name == n.name) return n.mask;
    for (int g = 0; g < kGcCount; ++g)
        if (name == kGcNames[g]) return GcMask{1} << g;
    return std::nullopt;
}

const char* version() {
    return DI_UNICODE_VERSION;
}
const char* data_source() {
    return DI_UNICODE_DATA_SOURCE;
}
const char* checked_against() {
    return DI_UNICODE_CHECKED_AGAINST;
}

} // namespace deepinfer::tokenizer::unicode
