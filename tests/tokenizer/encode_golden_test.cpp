// Every corpus string must encode to exactly the ids HF `tokenizers` gives with the real DeepSeek V4
// tokenizer, and decode back to the same text (goldens: tools/tokenizer/gen_tokenizer_goldens.py).

#include <nlohmann/json.hpp>

#include "test_data.h"
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

const std::vector<GoldenCase>& golden_cases() {
    static const std::vector<GoldenCase> cases = [] {
        std::vector<GoldenCase> out;
        std::ifstream f(source_path("tests/tokenizer/data/encode_golden.jsonl"));
        std::string line;
        std::getline(f, line); // header
        while (std::getline(f, line)) {
            const auto j = nlohmann::json::parse(line);
            GoldenCase c;
            c.cat = j.at("cat");
            c.text = j.at("text");
            c.input = j.contains("hex") ? from_hex(j["hex"]) : c.text;
            c.ids = j.at("ids").get<std::vector<TokenId>>();
            c.decoded = j.value("decoded", c.text);
            out.push_back(std::move(c));
        }
        return out;
    }();
    return cases;
}

TEST(TokenizerGolden, CorpusIsLarge) {
    EXPECT_GE(golden_cases().size(), 3000u);
}

TEST(TokenizerGolden, EncodeMatchesHuggingFace) {
    const Tokenizer& tok = v4_tokenizer();
    int failures = 0;
    for (const auto& c : golden_cases()) {
        const auto ids = tok.encode(c.input);
        if (ids != c.ids) {
            if (++failures <= 10) {
                ADD_FAILURE() << "[" << c.cat << "] " << nlohmann::json(c.text).dump() << "\n got "
                              << nlohmann::json(ids).dump() << "\nwant " << nlohmann::json(c.ids).dump();
            }
        }
    }
    EXPECT_EQ(failures, 0);
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
