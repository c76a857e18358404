#include "server/request_parser.h"

#include <gtest/gtest.h>
#include <optional>
#include <random>

namespace deepinfer::server {
namespace {

ParserLimits limits() {
    ParserLimits l;
    l.vocab_size = 1000;
    return l;
}

// Parses a chat body that must fail and returns the error.
ApiError chat_error(const std::string& body) {
    auto r = parse_chat_request(body, limits());
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

ChatRequest chat_ok(const std::string& body) {
    auto r = parse_chat_request(body, limits());
    if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->to_json();
    return std::holds_alternative<ChatRequest>(r) ? std::get<ChatRequest>(r) : ChatRequest{};
}

const std::string kMsgs = R"("model":"m","messages":[{"role":"user","content":"hi"}])";

TEST(ChatParser, MinimalRequestGetsDefaults) {
    ChatRequest r = chat_ok("{" + kMsgs + "}");
    EXPECT_EQ(r.common.model, "m");
    ASSERT_EQ(r.prompt.conversation.messages.size(), 1u);
    EXPECT_EQ(r.prompt.conversation.messages[0].role, tokenizer::Role::kUser);
    EXPECT_EQ(r.prompt.conversation.messages[0].content, "hi");
    EXPECT_EQ(r.common.sampling.n, 1);
    EXPECT_FALSE(r.common.sampling.max_tokens.has_value()); // unset: resolved against the context later
    EXPECT_FALSE(r.common.sampling.logprobs.has_value());
    EXPECT_EQ(r.prompt.tool_choice, "none");
    // DeepSeek's default (as its API and vLLM): thinking, effort high.
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, "high");
}

TEST(ChatParser, ReadsEverySamplingField) {
    ChatRequest r = chat_ok("{" + kMsgs + R"(,"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,
        "presence_penalty":0.1,"frequency_penalty":-0.2,"repetition_penalty":1.1,"logit_bias":{"7":5,"9":-100},
        "seed":42,"n":3,"stop":["a","bb"],"max_completion_tokens":12,"logprobs":true,"top_logprobs":4,
        "stream":true,"stream_options":{"include_usage":true},"user":"u1"})");
    const auto& s = r.common.sampling;
    EXPECT_FLOAT_EQ(s.temperature, 0.5f);
    EXPECT_FLOAT_EQ(s.top_p, 0.9f);
    EXPECT_EQ(s.top_k, 40);
    EXPECT_FLOAT_EQ(s.min_p, 0.05f);
    EXPECT_FLOAT_EQ(s.presence_penalty, 0.1f);
    EXPECT_FLOAT_EQ(s.frequency_penalty, -0.2f);
    EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
    EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, 5.0f}, {9, -100.0f}}));
    EXPECT_EQ(*s.seed, 42u);
    EXPECT_EQ(r.common.sampling.n, 3);
    EXPECT_EQ(r.common.stop, (std::vector<std::string>{"a", "bb"}));
    EXPECT_EQ(s.max_tokens, 12);
    EXPECT_EQ(s.logprobs, 4);
    EXPECT_TRUE(r.common.stream);
    EXPECT_TRUE(r.common.include_usage);
    EXPECT_EQ(r.common.user, "u1");
}

TEST(ChatParser, BadValuesNameTheirField) {
    struct Case {
        std::string extra, param;
    };
    std::vector<Case> cases = {
        {R"("temperature":3)", "temperature"},
        {R"("temperature":"hot")", "temperature"},
        {R"("top_p":0)", "top_p"},
        {R"("top_p":1.5)", "top_p"},
        {R"("top_k":-2)", "top_k"},
        {R"("min_p":2)", "min_p"},
        {R"("presence_penalty":9)", "presence_penalty"},
        {R"("frequency_penalty":-3)", "frequency_penalty"},
        {R"("repetition_penalty":0)", "repetition_penalty"},
        {R"("logit_bias":{"abc":1})", "logit_bias"},
        {R"("logit_bias":{"5000":1})", "logit_bias"},
        {R"("logit_bias":{"5":101})", "logit_bias"},
        {R"("seed":"x")", "seed"},
        {R"("n":0)", "n"},
        {R"("n":1000)", "n"},
        {R"("stop":5)", "stop"},
        {R"("stop":[""])", "stop"},
        {R"("max_tokens":0)", "max_tokens"},
        {R"("max_tokens":1.5)", "max_tokens"},
        {R"("stream":"yes")", "stream"},
        {R"("stream_options":{"include_usage":true})", "stream_options"},
        {R"("top_logprobs":3)", "top_logprobs"},
        {R"("logprobs":true,"top_logprobs":50)", "top_logprobs"},
        {R"("tool_choice":"required")", "tool_choice"},
        {R"("tool_choice":"sometimes")", "tool_choice"},
        {R"("tools":[{"type":"function","function":{"name":"bad name!"}}])", "tools[0].function.name"},
        {R"("tools":{})", "tools"},
        {R"("response_format":{"type":"xml"})", "response_format.type"},
        {R"("response_format":{"type":"json_schema"})", "response_format.json_schema"},
        {R"("reasoning_effort":"extreme")", "reasoning_effort"},
        {R"("chat_template_kwargs":{"thinking":"on"})", "chat_template_kwargs.thinking"},
        {R"("chat_template_kwargs":[])", "chat_template_kwargs"},
    };
    for (const auto& c : cases) {
        ApiError e = chat_error("{" + kMsgs + "," + c.extra + "}");
        EXPECT_EQ(e.http_status, 400) << c.extra;
        EXPECT_EQ(e.param, c.param) << c.extra << " -> " << e.to_json();
    }
}

TEST(ChatParser, MessageErrorsNameTheMessage) {
    EXPECT_EQ(chat_error(R"({"model":"m"})").param, "messages");
    EXPECT_EQ(chat_error(R"({"model":"m","messages":[]})").param, "messages");
    EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})").param,
              "messages[0].role");
    EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"user"}]})").param,
              "messages[1].content");
    EXPECT_EQ(
        chat_error(R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]})").param,
        "messages[0].content");
    EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":
        {"name":"f","arguments":"not json"}}]}]})")
                  .param,
              "messages[0].tool_calls[0].function.arguments");
    EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}]})").param, "model");
}

TEST(ChatParser, MalformedBodiesAreRejected) {
    for (std::string body : {"", "{", "[]", "null", "42", "{\"model\":", "\xff\xfe", "{\"a\":1}}"}) {
        ApiError e = chat_error(body);
        EXPECT_EQ(e.http_status, 400) << body;
    }
    EXPECT_EQ(chat_error(std::string(200, '[') + std::string(200, ']')).http_status, 400);
}

TEST(ChatParser, AssistantHistoryWithToolsAndReasoning) {
    ChatRequest r = chat_ok(R"({"model":"m","messages":[
        {"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d1"},{"type":"text","text":"d2"}]},
        {"role":"user","content":"q"},
        {"role":"assistant","content":null,"reasoning_content":"thought","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"x\":1}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"42"},
        {"role":"assistant","content":"done","reasoning":"r2"}],
        "tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object"}}}],
        "tool_choice":{"type":"function","function":{"name":"get"}}})");
    const auto& msgs = r.prompt.conversation.messages;
    ASSERT_EQ(msgs.size(), 6u);
    EXPECT_EQ(msgs[1].content, "d1\n\nd2");
    EXPECT_EQ(msgs[3].reasoning, "thought");
    ASSERT_EQ(msgs[3].tool_calls.size(), 1u);
    EXPECT_EQ(msgs[3].tool_calls[0].arguments, "{\"x\":1}");
    EXPECT_EQ(msgs[4].role, tokenizer::Role::kTool);
    EXPECT_EQ(msgs[4].tool_call_id, "call_1");
    EXPECT_EQ(msgs[5].reasoning, "r2");
    ASSERT_TRUE(r.prompt.has_tools());
    ASSERT_EQ(r.prompt.conversation.tools.size(), 1u);
    EXPECT_EQ(r.prompt.conversation.tools[0]["function"]["parameters"].dump(), R"({"type":"object"})");
    EXPECT_EQ(r.prompt.tool_choice, "function:get");
}

TEST(ChatParser, ThinkingControls) {
    EXPECT_TRUE(chat_ok("{" + kMsgs + R"(,"chat_template_kwargs":{"thinking":true}})").prompt.thinking);
    EXPECT_TRUE(chat_ok("{" + kMsgs + R"(,"thinking":true})").prompt.thinking);
    auto r = chat_ok("{" + kMsgs + R"(,"reasoning_effort":"max"})");
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, "max");
    r = chat_ok("{" + kMsgs + R"(,"chat_template_kwargs":{"thinking":false,"reasoning_effort":"high"}})");
    EXPECT_FALSE(r.prompt.thinking);
    EXPECT_EQ(r.prompt.reasoning_effort, ""); // no effort renders without thinking
    EXPECT_FALSE(chat_ok("{" + kMsgs + R"(,"reasoning_effort":"none"})").prompt.thinking);
    r = chat_ok("{" + kMsgs + R"(,"thinking":true})"); // thinking without an effort: the default, high
    EXPECT_EQ(r.prompt.reasoning_effort, "high");
    r = chat_ok("{" + kMsgs + R"(,"reasoning_effort":"xhigh"})"); // DeepSeek's API: xhigh -> max
    EXPECT_EQ(r.prompt.reasoning_effort, "max");
}

TEST(ChatParser, ResponseFormat) {
    auto r = chat_ok("{" + kMsgs + R"(,"response_format":{"type":"json_object"}})");
    EXPECT_EQ(r.response_format, "json_object");
    r = chat_ok(
        "{" + kMsgs +
        R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}})");
    EXPECT_EQ(r.response_format, "json_schema");
    EXPECT_EQ(r.json_schema, R"({"type":"object"})");
}

TEST(ChatParser, ConstraintsBecomeOneOutputConstraint) {
    using Kind = engine::GrammarKind;
    auto r = chat_ok("{" + kMsgs + R"(,"response_format":{"type":"json_object"},"thinking":true})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kJsonObject);
    EXPECT_EQ(r.common.constraint.field, "response_format");
    // Thinking is kept; the constraint applies after </think>.
    EXPECT_TRUE(r.prompt.thinking);
    EXPECT_TRUE(r.common.constraint.after_thinking);
    r = chat_ok("{" + kMsgs + R"(,"response_format":{"type":"json_object"},"thinking":false})");
    EXPECT_FALSE(r.prompt.thinking);
    EXPECT_FALSE(r.common.constraint.after_thinking);
    r = chat_ok("{" + kMsgs +
                R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"integer"}}}})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kJsonSchema);
    EXPECT_EQ(r.common.constraint.source, R"({"type":"integer"})");
    r = chat_ok("{" + kMsgs + R"(,"guided_json":"{\"type\": \"integer\"}"})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kJsonSchema);
    EXPECT_EQ(r.common.constraint.source, R"({"type":"integer"})");
    r = chat_ok("{" + kMsgs + R"(,"structured_outputs":{"regex":"a+"}})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kRegex);
    EXPECT_EQ(r.common.constraint.field, "structured_outputs.regex");
    EXPECT_EQ(r.common.constraint.source, "a+");
    r = chat_ok("{" + kMsgs + R"(,"guided_choice":["a\"b","c\\d","\n"]})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kGbnf);
    EXPECT_EQ(r.common.constraint.source, "root ::= \"a\\\"b\" | \"c\\\\d\" | \"\\x0A\"\n");
    const std::string tools =
        R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},)"
        R"({"type":"function","function":{"name":"g"}}])";
    r = chat_ok("{" + kMsgs + tools + R"(,"tool_choice":"required","parallel_tool_calls":false})");
    EXPECT_EQ(r.common.constraint.kind, Kind::kDsmlTools);
    EXPECT_TRUE(r.common.constraint.single_call);
    EXPECT_EQ(r.common.constraint.only_tool, "");
    EXPECT_EQ(r.common.constraint.source,
              R"([{"name":"f","parameters":{"type":"object"}},{"name":"g","parameters":{}}])");
    r = chat_ok("{" + kMsgs + tools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}}})");
    EXPECT_EQ(r.common.constraint.only_tool, "g");
    EXPECT_FALSE(r.common.constraint.single_call);
    r = chat_ok("{" + kMsgs + tools + R"(,"tool_choice":"auto"})");
    EXPECT_FALSE(r.common.constraint.kind.has_value());

    for (auto [extra, param] : std::vector<std::pair<std::string, std::string>>{
             {R"(,"guided_regex":"a","guided_choice":["b"])", "guided_choice"},
             {R"(,"guided_json":{},"structured_outputs":{"grammar":"root ::= \"a\""})",
              "structured_outputs.grammar"},
             {R"(,"guided_regex":"a","response_format":{"type":"json_object"})", "response_format"},
             {R"(,"guided_choice":[])", "guided_choice"},
             {R"(,"guided_choice":["a",1])", "guided_choice"},
             {R"(,"guided_regex":"")", "guided_regex"},
             {R"(,"guided_json":"[1]")", "guided_json"},
             {R"(,"structured_outputs":"x")", "structured_outputs"},
             {tools + R"(,"tool_choice":"required","guided_regex":"a")", "tool_choice"}}) {
        EXPECT_EQ(chat_error("{" + kMsgs + extra + "}").param, param) << extra;
    }
}

TEST(CompletionParser, PromptShapes) {
    auto ok = [](const std::string& body) {
        auto r = parse_completion_request(body, limits());
        if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->to_json();
        return std::holds_alternative<CompletionRequest>(r) ? std::get<CompletionRequest>(r)
                                                            : CompletionRequest{};
    };
    EXPECT_EQ(ok(R"({"model":"m","prompt":"hi"})").prompts.size(), 1u);
    EXPECT_EQ(ok(R"({"model":"m","prompt":["a","b","c"]})").prompts.size(), 3u);
    auto ids = ok(R"({"model":"m","prompt":[1,2,3]})");
    ASSERT_EQ(ids.prompts.size(), 1u);
    EXPECT_EQ(std::get<std::vector<int32_t>>(ids.prompts[0]), (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(ok(R"({"model":"m","prompt":[[1],[2,3]]})").prompts.size(), 2u);
    // Unset: OpenAI's 16 at most, resolved with the prompt's length.
    EXPECT_FALSE(ok(R"({"model":"m","prompt":"x"})").common.sampling.max_tokens.has_value());
    EXPECT_EQ(ok(R"({"model":"m","prompt":"x","logprobs":2})").common.sampling.logprobs, 2);
}

TEST(CompletionParser, BadPrompts) {
    for (std::string p :
         {"5", "[]", "[1,\"a\"]", "[1,-1]", "[1,1000]", "[[1],[]]", "[\"a\",1]", "{}", "null"}) {
        auto r = parse_completion_request(R"({"model":"m","prompt":)" + p + "}", limits());
        ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << p;
        EXPECT_EQ(std::get<ApiError>(r).param, "prompt") << p;
    }
    auto r = parse_completion_request(R"({"model":"m","prompt":"x","logprobs":99})", limits());
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).param, "logprobs");
}

TEST(CompletionParser, VllmSamplingFieldsEchoAndPromptLogprobs) {
    auto ok = [](const std::string& body) {
        auto r = parse_completion_request(body, limits());
        EXPECT_TRUE(std::holds_alternative<CompletionRequest>(r)) << body;
        return std::get<CompletionRequest>(r);
    };
    auto r = ok(R"({"model":"m","prompt":"x","stop_token_ids":[3,4],"min_tokens":2,"ignore_eos":true,
                    "include_stop_str_in_output":true})");
    EXPECT_EQ(r.common.sampling.stop_token_ids, (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(r.common.sampling.min_tokens, 2);
    EXPECT_TRUE(r.common.sampling.ignore_eos);
    EXPECT_TRUE(r.common.include_stop_str_in_output);
    auto echo = ok(R"({"model":"m","prompt":"x","echo":true,"logprobs":3})");
    EXPECT_TRUE(echo.echo);
    EXPECT_EQ(echo.common.sampling.prompt_logprobs, 3); // echo with logprobs scores the prompt
    EXPECT_FALSE(echo.prompt_logprobs);
    auto plp = ok(R"({"model":"m","prompt":"x","prompt_logprobs":1,"echo":true,"logprobs":2})");
    EXPECT_EQ(plp.common.sampling.prompt_logprobs, 2);
    EXPECT_TRUE(plp.prompt_logprobs);
    EXPECT_FALSE(ok(R"({"model":"m","prompt":"x","echo":true})").common.sampling.prompt_logprobs.has_value());
    for (std::string bad :
         {R"("stop_token_ids":[1000])", R"("stop_token_ids":7)", R"("min_tokens":-1)", R"("ignore_eos":1)",
          R"("prompt_logprobs":21)", R"("include_stop_str_in_output":"y")"}) {
        auto e = parse_completion_request(R"({"model":"m","prompt":"x",)" + bad + "}", limits());
        ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << bad;
        const std::string& param = std::get<ApiError>(e).param;
        EXPECT_NE(bad.find(param), std::string::npos) << bad << " named " << param;
    }
}

TEST(ApiErrorJson, HasTheOpenAiShape) {
    std::string j = invalid_param("temperature", "bad").to_json();
    EXPECT_EQ(
        j,
        R"({"error":{"code":"invalid_value","message":"bad","param":"temperature","type":"invalid_request_error"}})");
    EXPECT_EQ(from_status(core::out_of_range("x")).http_status, 400);
    EXPECT_EQ(from_status(core::resource_exhausted("x")).http_status, 429);
    EXPECT_EQ(from_status(core::not_found("x")).http_status, 404);
    EXPECT_EQ(from_status(core::internal_error("x")).http_status, 500);
}

} // namespace
} // namespace deepinfer::server

namespace deepinfer::server {
namespace {

// A small deterministic fuzz run in every test pass (the libFuzzer target goes further): random byte
// edits of valid bodies must parse or fail with a 4xx error object, never crash.
TEST(ParserFuzz, MutatedBodiesNeverCrash) {
    const std::vector<std::string> seeds = {
        R"({"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,
            "tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\":[1,2]}"}}]}],
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
            "tool_choice":{"type":"function","function":{"name":"f"}},"temperature":0.2,"stop":["a"],
            "logprobs":true,"top_logprobs":2,"n":2,"seed":5,"chat_template_kwargs":{"thinking":true}})",
        R"({"model":"m","prompt":[[1,2],[3]],"max_tokens":3,"logprobs":1,"logit_bias":{"3":-100},
            "stream":true,"stream_options":{"include_usage":true}})"};
    std::mt19937 rng(20261130);
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string body = seeds[iter % seeds.size()];
        int edits = 1 + rng() % 6;
        for (int e = 0; e < edits && !body.empty(); ++e) {
            size_t pos = rng() % body.size();
            switch (rng() % 4) {
            case 0:
                body[pos] = static_cast<char>(rng() % 256);
                break;
            case 1:
                body.erase(pos, 1 + rng() % 8);
                break;
            case 2:
                body.insert(pos, 1, "{}[],:\"0-e.\\"[rng() % 13]);
                break;
            case 3:
                body.insert(pos, body.substr(rng() % body.size(), rng() % 16));
                break;
            }
        }
        for (bool chat : {true, false}) {
            std::optional<ApiError> err;
            if (chat) {
                auto r = parse_chat_request(body, limits());
                if (auto* e = std::get_if<ApiError>(&r)) err = *e;
            } else {
                auto r = parse_completion_request(body, limits());
                if (auto* e = std::get_if<ApiError>(&r)) err = *e;
            }
            if (err) {
                ++rejected;
                ASSERT_GE(err->http_status, 400);
                ASSERT_LT(err->http_status, 500);
                ASSERT_FALSE(err->message.empty());
            } else {
                ++accepted;
            }
        }
    }
    EXPECT_GT(accepted, 0);
    EXPECT_GT(rejected, 0);
}

TEST(ParserFuzz, HostileShapesAreRejectedCheaply) {
    ParserLimits l = limits();
    EXPECT_FALSE(json_shape_problem(std::string(100000, '['), l).empty());
    std::string many = "{";
    for (int i = 0; i < 5000; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    many += "}";
    EXPECT_FALSE(json_shape_problem(many, l).empty());
    EXPECT_TRUE(json_shape_problem(R"({"a":"[[[[{{{{:::"})", l).empty()); // inside strings: ignored
    auto r = parse_chat_request(many, l);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    EXPECT_EQ(std::get<ApiError>(r).http_status, 400);
}

} // namespace
} // namespace deepinfer::server
