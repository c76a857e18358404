// The serving codec (tokenizer/text_codec.h): the spelling that constrained decoding masks over must be what
// the stream decoder writes, for a byte-level BPE tokenizer (no separator) and for the tiny V4.1 WordLevel
// tokenizer (no decoder: tokens joined with " ").

#include "tokenizer/text_codec.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "test_data.h"
#include "tokenizer/chat_tokens.h"

namespace deepinfer::tokenizer {
namespace {

using testing::source_path;

std::unique_ptr<TextCodec> codec(const std::string& relative) {
    auto r = load_hf_codec(source_path(relative));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
}

// What the spelling says the ids write (special ids write nothing), and what the decoder streams.
std::pair<std::string, std::string> spelled_and_streamed(const TextCodec& c, const TokenSpelling& sp,
                                                         const std::vector<int32_t>& ids) {
    std::string spelled, streamed;
    auto decoder = c.new_detokenizer();
    for (int32_t id : ids) {
        if (!sp.special.at(id)) spelled += sp.bytes.at(id);
        streamed += decoder->push(id);
    }
    streamed += decoder->flush();
    return {spelled, streamed};
}

TEST(TextCodecSpelling, WordLevelTokensCarryTheSeparator) {
    auto c = codec("models/tiny-v41/tokenizer.json");
    ASSERT_TRUE(c);
    const TokenSpelling sp = c->spelling(256);
    ASSERT_EQ(sp.bytes.size(), 256u);
    const std::vector<int32_t> ids = c->encode("the cat was in the house of it");
    ASSERT_GE(ids.size(), 6u);
    const auto [spelled, streamed] = spelled_and_streamed(*c, sp, ids);
    EXPECT_FALSE(streamed.empty());
    // The stream puts " " before every kept token but the first; the spelling puts it before every token,
    // so the grammar sees exactly one leading separator more than the client.
    EXPECT_EQ(spelled, " " + streamed);
    EXPECT_EQ(sp.bytes.at(c->encode("the").at(0)), " the");
    // Special ids (<s>, </s>, <pad>, <unk>) spell nothing.
    for (int32_t id = 0; id < 4; ++id) EXPECT_TRUE(sp.special.at(id)) << id;
}

TEST(TextCodecSpelling, ByteLevelTokensSpellTheStreamExactly) {
    auto c = codec("data/tokenizer/deepseek-v4/tokenizer.json");
    ASSERT_TRUE(c);
    const TokenSpelling sp = c->spelling(129280);
    ASSERT_EQ(sp.bytes.size(), 129280u);
    const std::string text = "Hello, world! {\"a\": [1, 2.5, \"\xc3\xa9\xe4\xb8\xad\"]}";
    const auto [spelled, streamed] = spelled_and_streamed(*c, sp, c->encode(text));
    EXPECT_EQ(spelled, streamed);
    EXPECT_EQ(streamed, text);
    ASSERT_EQ(sp.end_ids.size(), 1u);
    EXPECT_EQ(sp.end_ids[0], c->encode(std::string(kEosToken)).at(0));
}

TEST(TextCodecSpelling, ByteStandInSpellsBytesOnly) {
    auto c = make_byte_codec(/*bos=*/0, /*eos=*/1);
    const TokenSpelling sp = c->spelling(byte_codec_min_vocab());
    const std::string text = "a\xc3\xa9<think>b";
    const std::vector<int32_t> ids = c->encode(text);
    EXPECT_EQ(ids.size(), 5u); // a, two bytes of é, <think> as one id, b
    EXPECT_EQ(sp.bytes.at(ids[0]), "a");
    EXPECT_TRUE(sp.special.at(ids[3])); // a protocol phrase is not text to a constraint
    EXPECT_EQ(sp.end_ids, std::vector<int32_t>{1});
}

// A WordLevel tokenizer.json of `n` ids (quick to load, unlike the V4 one), written to a temporary file.
std::string word_level_tokenizer(int n) {
    nlohmann::json vocab = {{"<unk>", 0}};
    for (int i = 1; i < n; ++i) vocab["w" + std::to_string(i)] = i;
    const nlohmann::json j = {{"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<unk>"}}},
                              {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                              {"added_tokens", nlohmann::json::array()}};
    const std::string path = ::testing::TempDir() + "/text_codec_test_" + std::to_string(n) + ".json";
    std::ofstream(path) << j.dump();
    return path;
}

TEST(ModelCodec, FoundBesideTheModelElseInstalledElseAnErrorNamingThePlaces) {
    auto beside = load_model_codec({source_path("models/tiny-v41"), "", "", 256, 0, 1});
    ASSERT_TRUE(beside.ok()) << beside.status().to_string();
    EXPECT_EQ((*beside)->describe(), source_path("models/tiny-v41") + "/tokenizer.json");
    const std::string small = word_level_tokenizer(300);
    auto installed = load_model_codec({"/nonexistent-model", "", small, 300, 0, 1});
    ASSERT_TRUE(installed.ok()) << installed.status().to_string();
    EXPECT_EQ((*installed)->describe(), small);
    auto none = load_model_codec({"/nonexistent-model", "", "/nonexistent-share/tokenizer.json", 300, 0, 1});
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("/nonexistent-model/tokenizer.json"), std::string::npos);
    EXPECT_NE(none.status().message().find("/nonexistent-share/tokenizer.json"), std::string::npos);
}

TEST(ModelCodec, ATokenizerLargerThanTheModelGivesWayToTheByteStandIn) {
    const std::string large = word_level_tokenizer(300);
    auto fits = load_model_codec({"/nonexistent-model", large, "", 300, 0, 1});
    ASSERT_TRUE(fits.ok()) << fits.status().to_string();
    EXPECT_EQ((*fits)->describe(), large);
    auto small = load_model_codec({"/nonexistent-model", large, "", 299, 0, 1});
    ASSERT_TRUE(small.ok()) << small.status().to_string();
    EXPECT_EQ((*small)->describe(), "byte-level stand-in");
    EXPECT_EQ((*small)->encode("<think>").size(), 1u); // the stand-in's protocol phrases
    EXPECT_FALSE(load_model_codec({"/nonexistent-model", large, "", byte_codec_min_vocab() - 1, 0, 1}).ok());
    auto broken = load_model_codec({"/nonexistent-model", "/nonexistent.json", "", 1024, 0, 1});
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.status().to_string().find("/nonexistent.json"), std::string::npos);
}

} // namespace
} // namespace deepinfer::tokenizer
