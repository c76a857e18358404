// The built-in split matcher: Oniguruma's leftmost-first semantics on hand-worked cases, the compiled-in
// Unicode 16 classes, and the PCRE2 fallback for syntax outside the subset.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_data.h"
#include "tokenizer/regex.h"
#include "tokenizer/split_matcher.h"
#include "tokenizer/unicode.h"

namespace deepinfer::tokenizer {
namespace {

std::vector<std::string> matches(std::string_view pattern, std::string_view subject,
                                 bool want_builtin = true) {
    auto re = Regex::compile(pattern);
    EXPECT_TRUE(re.ok()) << re.status().to_string();
    if (!re.ok()) return {};
    EXPECT_EQ(re.value().builtin(), want_builtin) << pattern;
    std::vector<Regex::Match> m;
    re.value().find_all(subject, m);
    std::vector<std::string> out;
    for (const auto& x : m) out.emplace_back(subject.substr(x.start, x.end - x.start));
    return out;
}

using V = std::vector<std::string>;

TEST(SplitMatcher, LeftmostFirstAlternationAndGreedyRepeats) {
    EXPECT_EQ(matches("a|ab", "ab ab"), (V{"a", "a"}));
    EXPECT_EQ(matches("ab|a", "ab a"), (V{"ab", "a"}));
    EXPECT_EQ(matches(R"(\p{N}{1,3})", "1234567"), (V{"123", "456", "7"}));
    EXPECT_EQ(matches("x{2}", "xxxxx"), (V{"xx", "xx"}));
    EXPECT_EQ(matches("x{2,}", "x xxxxx"), (V{"xxxxx"}));
    EXPECT_EQ(matches("(?:ab)+c?", "ababcab"), (V{"ababc", "ab"}));
    // Whitespace before a word stays with the word: \s+(?!\S) backs off one space.
    EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", "a   b  "), (V{"  ", " ", "  "}));
    EXPECT_EQ(matches(R"(\s*[\r\n]+)", "a \n\nb"), (V{" \n\n"}));
    EXPECT_EQ(matches("(?=b)", "abab"), V{}); // empty matches are skipped
    EXPECT_EQ(matches("a(?=b)", "abac"), (V{"a"}));
    // A repeated class gives characters back one at a time, multi-byte ones whole.
    EXPECT_EQ(matches("a+ab", "aaab aab ab"), (V{"aaab", "aab"}));
    EXPECT_EQ(matches("x{2,3}y", "xxxxy"), (V{"xxxy"}));
    EXPECT_EQ(matches("é+éa", "éééa éa"), (V{"éééa"}));
    EXPECT_EQ(matches("[ab]*b", "aaba"), (V{"aab"}));
}

TEST(SplitMatcher, ClassesEscapesAndRanges) {
    EXPECT_EQ(matches(R"([^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)", "1abc é\xcc\x81x\n"),
              (V{"1abc", " é\xcc\x81x"}));
    EXPECT_EQ(matches(R"([!\-\[\]\\^]+)", "a-[]\\^b!"), (V{"-[]\\^", "!"}));
    EXPECT_EQ(matches("[a-c]+", "abcd cab"), (V{"abc", "cab"}));
    EXPECT_EQ(matches("[]a]+", "]a]b"), (V{"]a]"})); // ']' first is a literal, like Oniguruma
    EXPECT_EQ(matches(R"(\P{L}+)", "ab12!cd"), (V{"12!"}));
    EXPECT_EQ(matches(R"([\S]+)", "ab \t cd"), (V{"ab", "cd"}));
    EXPECT_EQ(matches("[一-龥぀-ゟ゠-ヿ]+", "ab漢字かなカナ!"), (V{"漢字かなカナ"}));
}

TEST(SplitMatcher, UnicodeSixteenClassesAreCompiledIn) {
    using unicode::Gc;
    EXPECT_EQ(unicode::general_category(0x1FAE8), Gc::kSo); // shaking face, Unicode 15.0
    EXPECT_EQ(unicode::general_category(0x1C89), Gc::kLu);  // Cyrillic TJE, Unicode 16.0
    EXPECT_EQ(unicode::general_category(0x16D40), Gc::kLm); // Kirat Rai, Unicode 16.0
    EXPECT_EQ(unicode::general_category(0x10940), Gc::kCn); // Sidetic, Unicode 17.0: not yet (HF is 16.0)
    EXPECT_EQ(unicode::general_category('A'), Gc::kLu);
    EXPECT_EQ(unicode::general_category(0xD800), Gc::kCs);
    EXPECT_EQ(unicode::general_category(0x10FFFF), Gc::kCn);
    EXPECT_TRUE(unicode::is_white_space(0x85));
    EXPECT_TRUE(unicode::is_white_space(0x3000));
    EXPECT_FALSE(unicode::is_white_space(0x200B));
    EXPECT_FALSE(unicode::is_white_space(0x180E));
    EXPECT_EQ(matches(R"(\p{S}+)", "a\xf0\x9f\xab\xa8\xf0\x9f\xab\xa8"
                                   "b"),
              (V{"\xf0\x9f\xab\xa8\xf0\x9f\xab\xa8"}));
    EXPECT_EQ(matches(R"(\s+)", "a\xc2\x85\xe2\x80\x8b"), (V{"\xc2\x85"}));
    EXPECT_FALSE(unicode::gc_mask_for_name("Han").has_value());
    EXPECT_EQ(*unicode::gc_mask_for_name("N"), *unicode::gc_mask_for_name("Number"));
}

TEST(SplitMatcher, EveryV4PatternRunsOnTheBuiltInMatcher) {
    const auto j = nlohmann::json::parse(
        testing::read_file(testing::source_path("data/tokenizer/deepseek-v4/tokenizer.json")));
    int n = 0;
    for (const auto& p : j.at("pre_tokenizer").at("pretokenizers")) {
        if (!p.contains("pattern")) continue;
        const std::string pattern = p.at("pattern").at("Regex").get<std::string>();
        auto re = Regex::compile(pattern);
        ASSERT_TRUE(re.ok());
        EXPECT_TRUE(re.value().builtin()) << pattern;
        ++n;
    }
    EXPECT_EQ(n, 3);
}

TEST(SplitMatcher, OtherSyntaxFallsBackToPcre2) {
    EXPECT_FALSE(SplitMatcher::compile(R"(\p{Han}+)").ok());
    EXPECT_FALSE(SplitMatcher::compile("(?i:ab)").ok());
    EXPECT_FALSE(SplitMatcher::compile("a+?").ok());
    EXPECT_FALSE(SplitMatcher::compile("(a?)*").ok()); // unbounded repeat of an empty match
    EXPECT_EQ(matches("(?i:ab)", "xABab", /*want_builtin=*/false), (V{"AB", "ab"}));
    EXPECT_FALSE(Regex::compile("(ab").ok());
}

TEST(SplitMatcher, LiteralMatchesExactly) {
    auto re = Regex::literal("a.b\\E*");
    ASSERT_TRUE(re.ok());
    std::vector<Regex::Match> m;
    re.value().find_all("xa.b\\E*a.b", m);
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].start, 1u);
    EXPECT_EQ(m[0].end, 7u);
}

} // namespace
} // namespace deepinfer::tokenizer
