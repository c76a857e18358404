// Regex -> GBNF: full-match semantics, the ECMAScript subset, JSON-string mode, refusals.

#include "structured/regex.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

std::shared_ptr<CompiledGrammar> compile_regex(const std::string& re, RegexOptions o = {}) {
    auto g = regex_to_gbnf(re, o);
    if (!g.ok()) {
        testing_util::last_error() = g.status().message();
        return nullptr;
    }
    return testing_util::compile(*g);
}

TEST(Regex, FullMatchOfTheCommonSubset) {
    struct Case {
        const char* re;
        std::vector<const char*> yes, no;
    };
    const std::vector<Case> cases = {
        {"^[A-Z]{2}-\\d{3,5}$", {"AB-123", "ZZ-12345"}, {"ab-123", "AB-12", "AB-123456", "AB123"}},
        {"(cat|dog)s?", {"cat", "dogs"}, {"cats!", "bird", ""}},
        {"a.c", {"abc", "a-c", "aéc"}, {"a\nc", "ac"}},
        {"[^0-9\\s]+", {"abc", "日本"}, {"a1", "a b", ""}},
        {"\\w+@\\w+\\.(com|org)", {"me@x.com", "a_b@c9.org"}, {"me@x.net", "@x.com"}},
        {"(?:ab){2}(?<tail>c|d)*?", {"abab", "ababcdc"}, {"ab", "ababe"}},
        {"\\u00e9\\x41\\.\\/\\[", {"éA./["}, {"eA./["}},
        {"a{2,}b{,3}", {"aab{,3}", "aaaab{,3}"}, {"ab{,3}", "aab"}}, // {,3} is literal in ECMAScript
        {"^$", {""}, {"a"}},
        // Only what ECMAScript and Python's re agree on: no U+FEFF for \s, ASCII for \W and \D.
        {"a\\sb", {"a b", "a\u3000b"}, {"a\uFEFFb", "ab"}},
        {"\\W\\D", {"-x", "!?"}, {"é!", "-٣"}},
        {"[^\\s]", {"x", "é"}, {"\uFEFF", "\u0085"}},
    };
    for (const Case& c : cases) {
        auto g = compile_regex(c.re);
        ASSERT_TRUE(g) << c.re << ": " << testing_util::last_error();
        for (const char* s : c.yes) EXPECT_TRUE(testing_util::matches(g, s)) << c.re << " should match " << s;
        for (const char* s : c.no)
            EXPECT_FALSE(testing_util::matches(g, s)) << c.re << " should not match " << s;
    }
}

TEST(Regex, SearchAndJsonStringModes) {
    auto g = compile_regex("ab", {.search = true});
    ASSERT_TRUE(g);
    EXPECT_TRUE(testing_util::matches(g, "xxabyy"));
    EXPECT_FALSE(testing_util::matches(g, "xxayy"));
    g = compile_regex("^ab", {.search = true});
    EXPECT_TRUE(testing_util::matches(g, "abyy"));
    EXPECT_FALSE(testing_util::matches(g, "xab"));
    // Inside a JSON string: a quote, backslash or newline only escaped.
    g = compile_regex("[a\"\\\\\\n]+", {.json_string = true});
    ASSERT_TRUE(g) << testing_util::last_error();
    EXPECT_TRUE(testing_util::matches(g, "a\\\"\\\\\\n"));
    EXPECT_FALSE(testing_util::matches(g, "a\""));
    EXPECT_FALSE(testing_util::matches(g, "a\n"));
}

TEST(Regex, UnsupportedFeaturesAreNamed) {
    for (auto [re, what] : std::vector<std::pair<const char*, const char*>>{{"(a)\\1", "backreferences"},
                                                                            {"a(?=b)", "lookaround"},
                                                                            {"\\bword", "word boundaries"},
                                                                            {"a^b", "inside the pattern"},
                                                                            {"(ab", "missing ')'"},
                                                                            {"*a", "nothing to repeat"},
                                                                            {"[z-a]", "out of order"}}) {
        auto g = regex_to_gbnf(re);
        ASSERT_FALSE(g.ok()) << re;
        EXPECT_NE(g.status().message().find(what), std::string::npos) << g.status().message();
    }
}

} // namespace
} // namespace deepinfer::structured

namespace deepinfer::structured {
namespace {

// Random small patterns against std::regex (ECMAScript) as the oracle: whenever both accept a pattern,
// they agree on every short string over the alphabet; and every pattern we accept compiles to valid GBNF.
TEST(Regex, AgreesWithStdRegexOnRandomPatterns) {
    std::mt19937 rng(1234);
    const std::string meta = "ab()[]|*+?.-^{}0123,\\d";
    const std::string alphabet = "ab01-";
    int compared = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string p;
        const int len = 1 + static_cast<int>(rng() % 10);
        for (int i = 0; i < len; ++i) p += meta[rng() % meta.size()];
        auto ours = regex_to_gbnf(p);
        if (!ours.ok()) continue;
        auto g = testing_util::compile(*ours);
        ASSERT_TRUE(g) << "/" << p << "/ gave invalid GBNF: " << testing_util::last_error() << "\n" << *ours;
        std::regex oracle;
        try {
            oracle = std::regex(p, std::regex::ECMAScript);
        } catch (const std::regex_error&) {
            continue;
        }
        ++compared;
        for (int k = 0; k < 40; ++k) {
            std::string s;
            const int n = static_cast<int>(rng() % 6);
            for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
            EXPECT_EQ(testing_util::matches(g, s), std::regex_match(s, oracle))
                << "/" << p << "/ on '" << s << "'";
        }
    }
    EXPECT_GT(compared, 300);
}

} // namespace
} // namespace deepinfer::structured
