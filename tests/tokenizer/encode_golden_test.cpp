// Every corpus string must encode to exactly the ids HF `tokenizers` gives with the real DeepSeek V4
// tokenizer, and decode back to the same text (goldens: tools/tokenizer/gen_tokenizer_goldens.py).

#include <nlohmann/json.hpp>

#include <map>

#include "test_data.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

using testing::source_path;
using testing::v4_tokenizer;

std::string from_hex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

struct GoldenCase {
    std::string cat, input, text, decoded;
    std::vector<TokenId> ids;
};

struct GoldenFile {
    nlohmann::json header;
    std::vector<GoldenCase> cases;
};

GoldenFile load_golden(const std::string& rel) {
    GoldenFile out;
    std::ifstream f(source_path(rel));
    std::string line;
    if (!std::getline(f, line)) {
        ADD_FAILURE() << "cannot read " << rel;
        return out;
    }
    out.header = nlohmann::json::parse(line);
    while (std::getline(f, line)) {
        const auto j = nlohmann::json::parse(line);
        GoldenCase c;
        c.cat = j.at("cat");
        c.text = j.at("text");
        c.input = j.contains("hex") ? from_hex(j["hex"]) : c.text;
        c.ids = j.at("ids").get<std::vector<TokenId>>();
        c.decoded = j.value("decoded", c.text);
        out.cases.push_back(std::move(c));
    }
    return out;
}

const std::vector<GoldenCase>& golden_cases() {
    static const GoldenFile file = load_golden("tests/tokenizer/data/encode_golden.jsonl");
    return file.cases;
}

// Unicode 15-17 characters, emoji sequences, every block, whitespace runs
// (tools/tokenizer/unicode_corpus.py).
const GoldenFile& unicode_golden() {
    static const GoldenFile file = load_golden("tests/tokenizer/data/unicode_golden.jsonl");
    return file;
}

int count_encode_failures(const std::vector<GoldenCase>& cases) {
    const Tokenizer& tok = v4_tokenizer();
    int failures = 0;
    for (const auto& c : cases) {
        const auto ids = tok.encode(c.input);
        if (ids != c.ids && ++failures <= 10) {
            ADD_FAILURE() << "[" << c.cat << "] " << nlohmann::json(c.text).dump() << "\n got "
                          << nlohmann::json(ids).dump() << "\nwant " << nlohmann::json(c.ids).dump();
        }
    }
    return failures;
}

TEST(TokenizerGolden, CorpusIsLarge) {
    EXPECT_GE(golden_cases().size(), 3000u);
}

TEST(TokenizerGolden, EncodeMatchesHuggingFace) {
    EXPECT_EQ(count_encode_failures(golden_cases()), 0);
}

TEST(UnicodeGolden, CorpusIsLargeAndWeightedToNewCharacters) {
    const auto& cases = unicode_golden().cases;
    EXPECT_GE(cases.size(), 5000u);
    std::map<std::string, int> per_cat;
    for (const auto& c : cases) ++per_cat[c.cat];
    EXPECT_GE(per_cat["unicode15_16"] + per_cat["unicode17"] + per_cat["unicode15_17_mix"], 2500);
    EXPECT_GE(per_cat["emoji_sequence"], 500);
    EXPECT_GE(per_cat["block"], 2000); // one string per 128-code-point window with an assigned character
    EXPECT_GE(per_cat["whitespace_run"], 500);
}

TEST(UnicodeGolden, EncodeMatchesHuggingFace) {
    EXPECT_EQ(count_encode_failures(unicode_golden().cases), 0);
}

TEST(UnicodeGolden, TablesAreTheUnicodeVersionOfTheOracle) {
    // The generator checked HF's classes against unicodedata2 on every code point; the compiled-in tables
    // must be that same version (a newer table would split Unicode 17 characters differently from HF).
    const auto& header = unicode_golden().header;
    EXPECT_EQ(header.at("tokenizers").get<std::string>(), "0.23.3");
    EXPECT_EQ(std::string(unicode::version()), header.at("hf_unicode_version").get<std::string>());
    EXPECT_EQ(std::string(unicode::checked_against()),
              "tokenizers==" + header.at("tokenizers").get<std::string>());
}

TEST(UnicodeGolden, IssueExampleShakingFace) {
    // U+1FAE8 (Unicode 15.0, So): host PCRE2 10.42 (Unicode 14) saw it as unassigned and split differently.
    EXPECT_EQ(v4_tokenizer().encode(" \xf0\x9f\xab\xa8"), (std::vector<TokenId>{7351, 107, 104}));
}

TEST(TokenizerGolden, DecodeMatchesHuggingFace) {
    const Tokenizer& tok = v4_tokenizer();
    int failures = 0;
    for (const auto& c : golden_cases()) {
        const std::string got = tok.decode(c.ids);
        if (got != c.decoded && ++failures <= 10)
            ADD_FAILURE() << "[" << c.cat << "] " << nlohmann::json(c.decoded).dump() << " decoded as "
                          << nlohmann::json(got).dump(-1, ' ', false,
                                                      nlohmann::json::error_handler_t::replace);
    }
    EXPECT_EQ(failures, 0);
}

TEST(TokenizerGolden, SpecialTokensAreSingleIds) {
    const Tokenizer& tok = v4_tokenizer();
    const auto ids = tok.encode("<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");
    EXPECT_EQ(ids.size(), 5u);
    EXPECT_EQ(ids[0], 0);
    EXPECT_TRUE(tok.is_special(0));
    EXPECT_EQ(*tok.token_to_id("<｜User｜>"), 128803);
    // encode_plain never forges a turn boundary from user content.
    const auto plain = tok.encode_plain("<｜User｜>");
    EXPECT_GT(plain.size(), 1u);
    EXPECT_EQ(tok.decode(plain), "<｜User｜>");
}

TEST(TokenizerGolden, SkipSpecialTokensOnDecode) {
    const Tokenizer& tok = v4_tokenizer();
    const std::vector<TokenId> ids = {0, 19923, 2058, 1, 999999999, -5};
    EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), "Hello world");
    EXPECT_EQ(tok.decode(ids), "<｜begin▁of▁sentence｜>Hello world<｜end▁of▁sentence｜>");
}

TEST(TokenizerGolden, MissingFileIsNotFound) {
    auto r = Tokenizer::from_file("/nonexistent/tokenizer.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), core::StatusCode::kNotFound);
    auto bad = Tokenizer::from_json("{\"model\": {\"type\": \"Unigram\"}}");
    ASSERT_FALSE(bad.ok());
}

} // namespace
} // namespace deepinfer::tokenizer
