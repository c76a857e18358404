// The tiny V4.1 word-level tokenizer (models/tiny-v41/tokenizer.json: WordLevel + WhitespaceSplit, no
// decoder) against HF tokenizers' own ids and text (tests/fixtures/tiny-v41/tokenizer_goldens.json, written
// by tools/oracle/tokenizer_goldens_v41.py).

#include <nlohmann/json.hpp>

#include <random>

#include "test_data.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using testing::read_file;
using testing::source_path;

const Tokenizer& tiny_v41() {
    static const Tokenizer* tok = [] {
        auto r = Tokenizer::from_file(source_path("models/tiny-v41/tokenizer.json"));
        if (!r.ok()) {
            ADD_FAILURE() << r.status().to_string();
            std::abort();
        }
        return new Tokenizer(std::move(r).value());
    }();
    return *tok;
}

nlohmann::json goldens() {
    return nlohmann::json::parse(read_file(source_path("tests/fixtures/tiny-v41/tokenizer_goldens.json")));
}

TEST(WordLevel, BothCheckpointsShipTheSameTokenizer) {
    EXPECT_EQ(read_file(source_path("models/tiny-v41/tokenizer.json")),
              read_file(source_path("models/tiny-v41-fp8/tokenizer.json")));
    EXPECT_EQ(tiny_v41().vocab_size(), 256u);
    EXPECT_EQ(tiny_v41().token_separator(), " ");
}

TEST(WordLevel, EncodeMatchesHfTokenizers) {
    const nlohmann::json g = goldens();
    ASSERT_GE(g.at("encode").size(), 10u);
    for (const auto& c : g.at("encode")) {
        const std::string text = c.at("text").get<std::string>();
        const auto want = c.at("ids").get<std::vector<TokenId>>();
        EXPECT_EQ(tiny_v41().encode(text), want) << text;
        // The template adds nothing, as in HF.
        EXPECT_EQ(tiny_v41().encode(text, /*add_special_tokens=*/true), want) << text;
        // Every HF token string maps back to its id.
        const auto tokens = c.at("tokens").get<std::vector<std::string>>();
        ASSERT_EQ(tokens.size(), want.size()) << text;
        for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tiny_v41().token_to_id(tokens[i]), want[i]);
    }
}

TEST(WordLevel, DecodeMatchesHfTokenizers) {
    const nlohmann::json g = goldens();
    auto check = [](const std::vector<TokenId>& ids, const nlohmann::json& c, const std::string& what) {
        EXPECT_EQ(tiny_v41().decode(ids, false), c.at("decoded").get<std::string>()) << what;
        EXPECT_EQ(tiny_v41().decode(ids, true), c.at("decoded_skip_special").get<std::string>()) << what;
        // Streaming gives the same text, separators included.
        for (bool skip : {false, true}) {
            IncrementalDetokenizer d(tiny_v41(), skip);
            std::string streamed;
            for (TokenId id : ids) streamed += d.push(id);
            streamed += d.finish();
            EXPECT_EQ(streamed, tiny_v41().decode(ids, skip)) << what << " skip " << skip;
        }
    };
    for (const auto& c : g.at("encode")) check(c.at("ids").get<std::vector<TokenId>>(), c, c.at("text"));
    ASSERT_GE(g.at("decode").size(), 5u);
    for (const auto& c : g.at("decode"))
        check(c.at("ids").get<std::vector<TokenId>>(), c, c.at("ids").dump());
}

TEST(WordLevel, StreamingEqualsDecodeOnRandomIds) {
    // Ids from every class: specials (0-3), words, whitespace tokens, U+FFFD tokens, out of range.
    std::mt19937 rng(41);
    std::uniform_int_distribution<int> id(-2, 259), len(0, 12);
    for (int trial = 0; trial < 500; ++trial) {
        std::vector<TokenId> ids(len(rng));
        for (auto& x : ids) x = id(rng);
        for (bool skip : {false, true}) {
            IncrementalDetokenizer d(tiny_v41(), skip);
            std::string streamed;
            for (TokenId x : ids) streamed += d.push(x);
            streamed += d.finish();
            ASSERT_EQ(streamed, tiny_v41().decode(ids, skip)) << ::testing::PrintToString(ids) << " " << skip;
        }
    }
}

TEST(WordLevel, LoadErrorsNameTheField) {
    auto no_unk = Tokenizer::from_json(
        R"({"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1}, "unk_token": "<unk>"}})");
    ASSERT_FALSE(no_unk.ok());
    EXPECT_NE(no_unk.status().to_string().find("model.unk_token"), std::string::npos)
        << no_unk.status().to_string();
    auto bad_id = Tokenizer::from_json(R"({"model": {"type": "WordLevel", "vocab": {"<unk>": 0, "b": -4}}})");
    ASSERT_FALSE(bad_id.ok());
    EXPECT_NE(bad_id.status().to_string().find("model.vocab['b']"), std::string::npos)
        << bad_id.status().to_string();
    auto unigram = Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": []}})");
    ASSERT_FALSE(unigram.ok());
    EXPECT_NE(unigram.status().to_string().find("Unigram"), std::string::npos);
}

TEST(WordLevel, DefaultUnkAndNoPreTokenizer) {
    // Without a pre-tokenizer the whole text is one word; unk_token defaults to "<unk>" (tokenizers').
    auto r = Tokenizer::from_json(
        R"({"model": {"type": "WordLevel", "vocab": {"<unk>": 0, "a b": 1, "a": 2}}, "decoder": null})");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->encode("a b"), std::vector<TokenId>{1});
    EXPECT_EQ(r->encode("a"), std::vector<TokenId>{2});
    EXPECT_EQ(r->encode("a  b"), std::vector<TokenId>{0});
    EXPECT_EQ(r->decode(std::vector<TokenId>{2, 1, 9, 0}), "a a b <unk>");
}

} // namespace
} // namespace deepinfer::tokenizer
