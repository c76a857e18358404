// The Anthropic Messages API shapes (server/anthropic_format.h): request translation, stream events, errors.

#include "server/anthropic_format.h"

#include <gtest/gtest.h>

#include "server/request_parser.h"
#include "server/server_state.h"

namespace deepinfer::server {
namespace {

using ojson = nlohmann::ordered_json;

ojson translate(const std::string& body) {
    auto r = anthropic_to_chat_request(body, "");
    EXPECT_TRUE(std::holds_alternative<ojson>(r))
        << (std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).message : std::string());
    return std::holds_alternative<ojson>(r) ? std::get<ojson>(r) : ojson();
}

ApiError refuse(const std::string& body) {
    auto r = anthropic_to_chat_request(body, "");
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(AnthropicFormat, TranslatesAToolLoopIntoTheChatRequest) {
    ojson chat = translate(R"({
      "model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
      "stop_sequences": ["END"], "temperature": 0.5, "top_k": 5, "metadata": {"user_id": "u1"},
      "tools": [{"name": "get_weather", "description": "d",
                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
      "thinking": {"type": "enabled", "budget_tokens": 2048},
      "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need the tool.", "signature": "x"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Sunny"}]},
            {"type": "text", "text": "And tomorrow?"}]}]})");
    const ojson& ms = chat.at("messages");
    ASSERT_EQ(ms.size(), 5u);
    EXPECT_EQ(ms[0], (ojson{{"role", "system"}, {"content", "Be brief."}}));
    EXPECT_EQ(ms[1].at("role"), "user");
    EXPECT_EQ(ms[2].at("reasoning_content"), "Need the tool.");
    EXPECT_EQ(ms[2].at("tool_calls")[0].at("id"), "toolu_1");
    EXPECT_EQ(ojson::parse(ms[2].at("tool_calls")[0].at("function").at("arguments").get<std::string>()),
              (ojson{{"city", "Paris"}}));
    EXPECT_EQ(ms[3], (ojson{{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "Sunny"}}));
    EXPECT_EQ(ms[4], (ojson{{"role", "user"}, {"content", "And tomorrow?"}}));
    EXPECT_EQ(chat.at("stop"), ojson::array({"END"}));
    EXPECT_EQ(chat.at("user"), "u1");
    EXPECT_EQ(chat.at("tools")[0].at("function").at("parameters").at("type"), "object");
    EXPECT_EQ(chat.at("tool_choice").at("function").at("name"), "get_weather");
    EXPECT_EQ(chat.at("parallel_tool_calls"), false);
    EXPECT_EQ(chat.at("chat_template_kwargs").at("thinking"), true);

    // The chat parser accepts the translation: a forced, single tool call; thinking as asked.
    auto parsed = parse_chat_request(chat.dump(), ParserLimits{});
    ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
    const ChatRequest& r = std::get<ChatRequest>(parsed);
    EXPECT_EQ(r.common.sampling.max_tokens, 64);
    EXPECT_EQ(r.common.sampling.top_k, 5);
    EXPECT_EQ(r.prompt.tool_choice, "function:get_weather");
    EXPECT_TRUE(r.common.constraint.single_call);
}

TEST(AnthropicFormat, ToolChoiceAndThinkingMappings) {
    const std::string base = R"("max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                                "tools": [{"name": "t", "input_schema": {"type": "object"}}])";
    EXPECT_EQ(translate("{" + base + R"(, "tool_choice": {"type": "any"}})").at("tool_choice"), "required");
    EXPECT_EQ(translate("{" + base + R"(, "tool_choice": {"type": "auto"}})").at("tool_choice"), "auto");
    EXPECT_EQ(translate("{" + base + R"(, "tool_choice": {"type": "none"}})").at("tool_choice"), "none");
    EXPECT_EQ(translate("{" + base + R"(, "thinking": {"type": "disabled"}})").at("chat_template_kwargs"),
              (ojson{{"thinking", false}}));
    EXPECT_FALSE(translate("{" + base + "}").contains("chat_template_kwargs")); // the server default applies
    EXPECT_EQ(translate("{" + base + R"(, "output_config": {"effort": "max"}})").at("chat_template_kwargs"),
              (ojson{{"reasoning_effort", "max"}}));
}

TEST(AnthropicFormat, RefusalsNameTheMessagesField) {
    EXPECT_EQ(refuse(R"({"messages": [{"role": "user", "content": "x"}]})").param, "max_tokens");
    EXPECT_EQ(refuse(R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})").param,
              "max_tokens");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": []})").param, "messages");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})").param,
              "messages[0].role");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
                 {"type": "tool_result"}]}]})")
                  .param,
              "messages[0].content[0].tool_use_id");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
                 {"type": "image", "source": {}}]}]})")
                  .param,
              "messages[0].content[0].type");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                        "tool_choice": {"type": "sometimes"}})")
                  .param,
              "tool_choice.type");
    EXPECT_EQ(refuse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                        "thinking": {"type": "enabled", "budget_tokens": "lots"}})")
                  .param,
              "thinking.budget_tokens");
    EXPECT_EQ(refuse("[1, 2]").http_status, 400);
}

TEST(AnthropicFormat, ErrorsHaveTheAnthropicShape) {
    ojson e = ojson::parse(anthropic_error_json(invalid_param("max_tokens", "'max_tokens' is required")));
    EXPECT_EQ(e.at("type"), "error");
    EXPECT_EQ(e.at("error").at("type"), "invalid_request_error");
    EXPECT_NE(e.at("error").at("message").get<std::string>().find("max_tokens"), std::string::npos);
    EXPECT_EQ(ojson::parse(anthropic_error_json(unauthorized())).at("error").at("type"),
              "authentication_error");
    EXPECT_EQ(ojson::parse(anthropic_error_json(unknown_model("x"))).at("error").at("type"),
              "not_found_error");
    EXPECT_EQ(ojson::parse(anthropic_error_json(server_busy())).at("error").at("type"), "rate_limit_error");
}

TEST(AnthropicFormat, StopReasons) {
    EXPECT_EQ(anthropic_stop_reason("stop", ""), "end_turn");
    EXPECT_EQ(anthropic_stop_reason("stop", "END"), "stop_sequence");
    EXPECT_EQ(anthropic_stop_reason("length", ""), "max_tokens");
    EXPECT_EQ(anthropic_stop_reason("tool_calls", ""), "tool_use");
    EXPECT_EQ(anthropic_tool_input(R"({"a": 1})"), (ojson{{"a", 1}}));
    EXPECT_EQ(anthropic_tool_input("[1]"), ojson::object());
}

// Splits "event: T\ndata: J\n\n" events into (T, J).
std::vector<std::pair<std::string, ojson>> events_of(const std::string& s) {
    std::vector<std::pair<std::string, ojson>> out;
    size_t pos = 0;
    while ((pos = s.find("event: ", pos)) != std::string::npos) {
        size_t nl = s.find('\n', pos);
        size_t end = s.find("\n\n", nl);
        std::string type = s.substr(pos + 7, nl - pos - 7);
        ojson data = ojson::parse(s.substr(nl + 7, end - nl - 7));
        EXPECT_EQ(data.at("type"), type);
        out.emplace_back(type, std::move(data));
        pos = end;
    }
    return out;
}

TEST(AnthropicFormat, StreamWriterOpensAndClosesBlocksInOrder) {
    AnthropicStreamWriter w;
    std::string out;
    ParsedDelta a;
    a.reasoning = "Hmm";
    w.push(a, out);
    ParsedDelta b;
    b.reasoning = ".";
    w.push(b, out);
    ParsedDelta c;
    c.content = "Calling.";
    w.push(c, out);
    ParsedDelta d;
    d.tool_calls = {ToolCallDelta{0, "toolu_a", "f", "{\"x\":"}};
    w.push(d, out);
    ParsedDelta e;
    e.tool_calls = {ToolCallDelta{0, "", "", "1}"}, ToolCallDelta{1, "toolu_b", "g", "{}"}};
    w.push(e, out);
    w.close(out);
    auto ev = events_of(out);
    std::vector<std::string> types;
    for (auto& [t, j] : ev)
        types.push_back(t == "content_block_delta" ? j.at("delta").at("type").get<std::string>() : t);
    EXPECT_EQ(types, (std::vector<std::string>{
                         "content_block_start", "thinking_delta", "thinking_delta", "content_block_stop",
                         "content_block_start", "text_delta", "content_block_stop", "content_block_start",
                         "input_json_delta", "input_json_delta", "content_block_stop", "content_block_start",
                         "input_json_delta", "content_block_stop"}));
    EXPECT_EQ(ev[0].second.at("content_block").at("type"), "thinking");
    EXPECT_EQ(ev[4].second.at("index"), 1);
    EXPECT_EQ(ev[7].second.at("content_block").at("id"), "toolu_a");
    EXPECT_EQ(ev[7].second.at("content_block").at("name"), "f");
    EXPECT_EQ(ev[8].second.at("delta").at("partial_json").get<std::string>() +
                  ev[9].second.at("delta").at("partial_json").get<std::string>(),
              "{\"x\":1}");
    EXPECT_EQ(ev[11].second.at("index"), 3);
    EXPECT_EQ(ev[11].second.at("content_block").at("name"), "g");
}

} // namespace
} // namespace deepinfer::server
