// DeepSeek's thinking defaults (tokenizer/chat_defaults.h) and how the chat parser applies them.

#include "tokenizer/chat_defaults.h"

#include <gtest/gtest.h>

#include "server/request_parser.h"
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
#include "server/engine_backend_text.h"
#include "tokenizer/chat_tokens.h"
#endif

namespace deepinfer::server {
namespace {

using ojson = nlohmann::ordered_json;
using tokenizer::chat_defaults_from_flags;
using tokenizer::ChatDefaults;
using tokenizer::FieldError;
using tokenizer::thinking_of_request;
using tokenizer::ThinkingChoice;

ThinkingChoice choice_of(const std::string& request, const ChatDefaults& d = {}) {
    auto c = thinking_of_request(ojson::parse(request), d);
    EXPECT_TRUE(std::holds_alternative<ThinkingChoice>(c)) << request;
    return std::holds_alternative<ThinkingChoice>(c) ? std::get<ThinkingChoice>(c) : ThinkingChoice{};
}

TEST(ChatDefaults, RequestWithoutThinkingFieldsIsThinkingHigh) {
    ThinkingChoice c = choice_of(R"({"messages": []})");
    EXPECT_TRUE(c.thinking);
    EXPECT_EQ(c.reasoning_effort, "high");
}

TEST(ChatDefaults, RequestFieldsWinOverDefaults) {
    EXPECT_FALSE(choice_of(R"({"thinking": false})").thinking);
    EXPECT_EQ(choice_of(R"({"thinking": false})").reasoning_effort, "");
    EXPECT_FALSE(choice_of(R"({"thinking": {"type": "disabled"}})").thinking);
    EXPECT_FALSE(choice_of(R"({"chat_template_kwargs": {"enable_thinking": false}})").thinking);
    EXPECT_FALSE(choice_of(R"({"reasoning_effort": "none"})").thinking);
    EXPECT_EQ(choice_of(R"({"reasoning_effort": "xhigh"})").reasoning_effort, "max");
    EXPECT_EQ(choice_of(R"({"reasoning_effort": "max"})").reasoning_effort, "max");
    EXPECT_EQ(choice_of(R"({"reasoning_effort": "low"})").reasoning_effort, "high");
    EXPECT_EQ(choice_of(R"({"chat_template_kwargs": {"reasoning_effort": "medium"}})").reasoning_effort,
              "high");
    // chat_template_kwargs is read after the top level, so it wins.
    EXPECT_TRUE(choice_of(R"({"thinking": false, "chat_template_kwargs": {"thinking": true}})").thinking);
    // An explicit thinking: false is not overridden by an effort.
    EXPECT_FALSE(choice_of(R"({"thinking": false, "reasoning_effort": "max"})").thinking);
}

TEST(ChatDefaults, ServerDefaultsApplyOnlyWhereTheRequestIsSilent) {
    ChatDefaults off;
    off.thinking = false;
    EXPECT_FALSE(choice_of(R"({})", off).thinking);
    ThinkingChoice on = choice_of(R"({"thinking": true})", off);
    EXPECT_TRUE(on.thinking);
    EXPECT_EQ(on.reasoning_effort, "high");
    EXPECT_TRUE(choice_of(R"({"reasoning_effort": "high"})", off).thinking); // an effort turns thinking on
    ChatDefaults max;
    max.reasoning_effort = "max";
    EXPECT_EQ(choice_of(R"({})", max).reasoning_effort, "max");
    EXPECT_EQ(choice_of(R"({"reasoning_effort": "high"})", max).reasoning_effort, "high");
}

TEST(ChatDefaults, BadRequestFieldsNameTheField) {
    auto bad = thinking_of_request(ojson::parse(R"({"reasoning_effort": "ultra"})"), {});
    ASSERT_TRUE(std::holds_alternative<FieldError>(bad));
    EXPECT_EQ(std::get<FieldError>(bad).field, "reasoning_effort");
    EXPECT_NE(std::get<FieldError>(bad).message.find("ultra"), std::string::npos);
    bad = thinking_of_request(ojson::parse(R"({"chat_template_kwargs": {"thinking": "yes"}})"), {});
    ASSERT_TRUE(std::holds_alternative<FieldError>(bad));
    EXPECT_EQ(std::get<FieldError>(bad).field, "chat_template_kwargs.thinking");
}

TEST(ChatDefaults, ServerFlags) {
    auto d = chat_defaults_from_flags(std::nullopt, std::nullopt);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->thinking);
    EXPECT_EQ(d->reasoning_effort, "high");
    d = chat_defaults_from_flags(std::string(R"({"thinking": false})"), std::nullopt);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->thinking);
    d = chat_defaults_from_flags(std::string(R"({"enable_thinking": true, "reasoning_effort": "xhigh"})"),
                                 std::nullopt);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->thinking);
    EXPECT_EQ(d->reasoning_effort, "max");
    d = chat_defaults_from_flags(std::nullopt, std::string("max"));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->reasoning_effort, "max");
    d = chat_defaults_from_flags(std::nullopt, std::string("none"));
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->thinking);
}

TEST(ChatDefaults, BadServerFlagsNameTheFlagAndKey) {
    auto d = chat_defaults_from_flags(std::string(R"({"thinking": false, "temprature": 1, "foo": 2})"),
                                      std::nullopt);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("--default-chat-template-kwargs"), std::string::npos);
    EXPECT_NE(d.status().message().find("'temprature'"), std::string::npos);
    EXPECT_NE(d.status().message().find("'foo'"), std::string::npos);
    d = chat_defaults_from_flags(std::string("{thinking: false}"), std::nullopt);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("not a JSON object"), std::string::npos);
    d = chat_defaults_from_flags(std::string(R"({"thinking": "off"})"), std::nullopt);
    ASSERT_FALSE(d.ok());
    d = chat_defaults_from_flags(std::nullopt, std::string("huge"));
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("--reasoning-effort"), std::string::npos);
}

ChatRequest parse_chat(const std::string& body, const ParserLimits& limits = {}) {
    auto r = parse_chat_request(body, limits);
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(r)) << body;
    return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

TEST(ChatDefaults, ChatParserRendersSilentRequestsThinkingHigh) {
    const std::string msgs = R"("model": "m", "messages": [{"role": "user", "content": "hi"}])";
    ChatRequest r = parse_chat("{" + msgs + "}");
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, "high");
    ParserLimits off;
    off.chat_defaults.thinking = false;
    r = parse_chat("{" + msgs + "}", off);
    EXPECT_FALSE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, "");
    r = parse_chat("{" + msgs + R"(, "reasoning_effort": "xhigh"})", off);
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, "max");
    // Constrained requests keep the default too: the model thinks, the constraint applies after </think>.
    r = parse_chat("{" + msgs + R"(, "response_format": {"type": "json_object"}})");
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_TRUE(r.common.constraint.after_thinking);
}

#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
// What the engine backend renders (the DeepSeek V4 encoder, 0731 effort table) for a parsed request.
std::string rendered(const std::string& extra, const ParserLimits& limits = {}) {
    ChatRequest r =
        parse_chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + extra + "}", limits);
    auto text = detail::render_chat_text(r.prompt, tokenizer::EffortTable::k0731);
    EXPECT_TRUE(text.ok());
    return text.ok() ? *text : std::string();
}

bool ends_with(const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(ChatDefaults, EngineRendersSilentRequestsInThinkingModeWithEffortHigh) {
    using tokenizer::ThinkingMode;
    const std::string high(
        tokenizer::reasoning_effort_prompt(ThinkingMode::kThinkingHigh, tokenizer::EffortTable::k0731));
    const std::string max(
        tokenizer::reasoning_effort_prompt(ThinkingMode::kThinkingMax, tokenizer::EffortTable::k0731));
    ASSERT_FALSE(high.empty());
    ASSERT_NE(high, max);
    const std::string think = std::string(tokenizer::kAssistantToken) + std::string(tokenizer::kThinkStart);
    const std::string chat = std::string(tokenizer::kAssistantToken) + std::string(tokenizer::kThinkEnd);

    std::string p = rendered("");
    EXPECT_TRUE(ends_with(p, think)) << p;
    EXPECT_NE(p.find(high), std::string::npos) << p;
    EXPECT_EQ(p.find(max), std::string::npos) << p;
    p = rendered(R"(, "reasoning_effort": "xhigh")");
    EXPECT_NE(p.find(max), std::string::npos) << p;
    p = rendered(R"(, "thinking": false)");
    EXPECT_TRUE(ends_with(p, chat)) << p;
    EXPECT_EQ(p.find("Reasoning Effort"), std::string::npos) << p;

    ParserLimits off; // serve --default-chat-template-kwargs '{"thinking": false}'
    off.chat_defaults = *chat_defaults_from_flags(std::string(R"({"thinking": false})"), std::nullopt);
    EXPECT_TRUE(ends_with(rendered("", off), chat));
    ParserLimits max_default; // serve --reasoning-effort max
    max_default.chat_defaults = *chat_defaults_from_flags(std::nullopt, std::string("max"));
    EXPECT_NE(rendered("", max_default).find(max), std::string::npos);
}
#endif

} // namespace
} // namespace deepinfer::server
