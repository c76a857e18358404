// Prompts rendered by render_chat must equal, byte for byte, what DeepSeek's reference encoder renders
// (goldens: tools/tokenizer/gen_chat_goldens.py).

#include "tokenizer/chat_encoding.h"

#include "test_data.h"
#include "tokenizer/json_text.h"

namespace deepinfer::tokenizer {
namespace {

using testing::read_file;
using testing::source_path;

const Json& chat_golden() {
    static const Json j = Json::parse(read_file(source_path("tests/tokenizer/data/chat_golden.json")));
    return j;
}

// Index of the first differing byte, for readable failures.
std::size_t first_diff(const std::string& a, const std::string& b) {
    std::size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
}

TEST(ChatEncoding, MatchesReferenceEncoder) {
    const Json& cases = chat_golden().at("cases");
    ASSERT_GE(cases.size(), 60u);
    std::set<std::string> conversations, modes;
    for (const Json& c : cases) {
        const std::string name = c.at("name").get<std::string>() + " [" + c.at("mode").get<std::string>() +
                                 (c.at("drop_thinking").get<bool>() ? "" : ", keep thinking") + "]";
        conversations.insert(c.at("name").get<std::string>());
        modes.insert(c.at("mode").get<std::string>());
        auto conv = conversation_from_json(c.at("request"));
        ASSERT_TRUE(conv.ok()) << name << ": " << conv.status().to_string();
        auto mode = parse_thinking_mode(c.at("mode").get<std::string>());
        ASSERT_TRUE(mode.ok());
        ChatOptions opt;
        opt.mode = *mode;
        opt.drop_thinking = c.at("drop_thinking").get<bool>();
        auto prompt = render_chat(*conv, opt);
        ASSERT_TRUE(prompt.ok()) << name << ": " << prompt.status().to_string();
        const std::string want = c.at("prompt").get<std::string>();
        if (*prompt != want) {
            const std::size_t d = first_diff(*prompt, want);
            const std::size_t from = d > 80 ? d - 80 : 0;
            ADD_FAILURE() << name << ": differs at byte " << d << "\n got ..." << prompt->substr(from, 200)
                          << "\nwant ..." << want.substr(from, 200);
        }
    }
    EXPECT_GE(modes.size(), 3u);
}

TEST(ChatEncoding, PromptTokenizesWithTurnBoundaries) {
    const Tokenizer& tok = testing::v4_tokenizer();
    Conversation c;
    Message sys;
    sys.role = Role::kSystem;
    sys.content = "You are a helpful assistant.";
    Message user;
    user.content = "Hello";
    c.messages = {sys, user};
    auto prompt = render_chat(c, {.mode = ThinkingMode::kNonThinking});
    ASSERT_TRUE(prompt.ok());
    const auto ids = tok.encode(*prompt);
    EXPECT_EQ(ids.front(), 0);                                    // BOS
    EXPECT_EQ(ids[ids.size() - 1], *tok.token_to_id("</think>")); // reply opens after </think>
    EXPECT_EQ(ids[ids.size() - 2], *tok.token_to_id("<｜Assistant｜>"));
    EXPECT_EQ(ids.size(), 11u);
}

TEST(ChatEncoding, RejectsMalformedInput) {
    EXPECT_FALSE(conversation_from_json(Json::parse(R"({"messages": [{"role": "wizard"}]})")).ok());
    EXPECT_FALSE(conversation_from_json(Json::parse(R"({"msgs": []})")).ok());
    auto bad_args = conversation_from_json(Json::parse(
        R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
            "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]})"));
    ASSERT_TRUE(bad_args.ok());
    EXPECT_FALSE(render_chat(*bad_args, {}).ok());
    auto dev = conversation_from_json(Json::parse(R"({"messages": [{"role": "developer", "content": ""}]})"));
    ASSERT_TRUE(dev.ok());
    EXPECT_FALSE(render_chat(*dev, {}).ok());
    EXPECT_FALSE(parse_thinking_mode("ultra").ok());
}

TEST(JsonText, MatchesPythonJsonDumps) {
    EXPECT_EQ(python_json_dumps(Json::parse(R"({"a": [1, 2.5, null, true], "b": {"c": "é\n\"x\"\u0001"}})")),
              "{\"a\": [1, 2.5, null, true], \"b\": {\"c\": \"é\\n\\\"x\\\"\\u0001\"}}");
    EXPECT_EQ(python_float_repr(1e16), "1e+16");
    EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
    EXPECT_EQ(python_float_repr(0.0001), "0.0001");
    EXPECT_EQ(python_float_repr(0.00001), "1e-05");
    EXPECT_EQ(python_float_repr(-2.5e-10), "-2.5e-10");
    EXPECT_EQ(python_float_repr(100.0), "100.0");
    EXPECT_EQ(python_float_repr(0.1), "0.1");
}

} // namespace
} // namespace deepinfer::tokenizer
