// Streaming detokenization never emits part of a UTF-8 character and adds up to decode().

#include "tokenizer/incremental_detokenizer.h"

#include "test_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

TEST(IncrementalDetokenizer, HoldsSplitCharactersUntilComplete) {
    const Tokenizer& tok = testing::v4_tokenizer();
    // Byte tokens of "👍" (F0 9F 91 8D) one at a time.
    std::vector<TokenId> bytes;
    for (unsigned char b : std::string("👍"))
        bytes.push_back(*tok.token_to_id(byte_level::encode_bytes(std::string(1, b))));
    IncrementalDetokenizer d(tok);
    EXPECT_EQ(d.push(bytes[0]), "");
    EXPECT_EQ(d.push(bytes[1]), "");
    EXPECT_EQ(d.push(bytes[2]), "");
    EXPECT_EQ(d.pending_bytes(), 3u);
    EXPECT_EQ(d.push(bytes[3]), "👍");
    EXPECT_EQ(d.finish(), "");
}

TEST(IncrementalDetokenizer, DanglingBytesBecomeReplacementAtFinish) {
    const Tokenizer& tok = testing::v4_tokenizer();
    const TokenId f0 = *tok.token_to_id(byte_level::encode_bytes("\xF0"));
    const TokenId ff = *tok.token_to_id(byte_level::encode_bytes("\xFF"));
    IncrementalDetokenizer d(tok);
    EXPECT_EQ(d.push(ff), "\xEF\xBF\xBD"); // can never start a character: emitted at once
    EXPECT_EQ(d.push(f0), "");
    EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
    const std::vector<TokenId> ids = {ff, f0};
    EXPECT_EQ(tok.decode(ids), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, ConcatenationEqualsDecodeOnCorpusSample) {
    const Tokenizer& tok = testing::v4_tokenizer();
    for (const char* text : {"Hello 世界 👨‍👩‍👧‍👦 مرحبا नमस्ते",
                             "<｜User｜>hi<｜Assistant｜></think>ok", "\xE4\xB8\xAD\xE6"}) {
        const auto ids = tok.encode(text);
        IncrementalDetokenizer d(tok);
        std::string out;
        for (TokenId id : ids) {
            const std::string piece = d.push(id);
            EXPECT_TRUE(utf8::is_valid(piece));
            out += piece;
        }
        out += d.finish();
        EXPECT_EQ(out, tok.decode(ids));
    }
}

TEST(IncrementalDetokenizer, SkipsSpecialTokensWhenAsked) {
    const Tokenizer& tok = testing::v4_tokenizer();
    IncrementalDetokenizer d(tok, /*skip_special_tokens=*/true);
    std::string out = d.push(0); // BOS
    const std::vector<TokenId> hello = {19923, 2058};
    out += d.push(hello);
    out += d.push(1); // EOS
    EXPECT_EQ(out + d.finish(), "Hello world");
}

} // namespace
} // namespace deepinfer::tokenizer
