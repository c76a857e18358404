// The per-request text pipeline: DSML parser, detokenizer + stop strings + parser, metrics rendering.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/engine_backend_text.h"
#include "server/fake_backend.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/response_builder.h"
#include "server/utf8.h"

namespace deepinfer::server {
namespace {

const std::string kCall = "Let me check.<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                          "<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n"
                          "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
                          "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

// Runs text through a parser in pieces of `step` bytes and merges the result.
ChatChoiceResult parse_all(const std::string& text, size_t step, ParserOptions opts,
                           bool length_cut = false) {
    auto p = detail::make_dsml_parser(opts);
    ChatChoiceResult r;
    for (size_t i = 0; i < text.size(); i += step) r.merge(p->push(text.substr(i, step)));
    r.merge(p->finish(length_cut));
    return r;
}

TEST(DsmlParser, SplitsReasoningContentAndToolCallsAtEveryChunking) {
    for (size_t step : {1, 2, 3, 7, 1000}) {
        auto r = parse_all("thinking hard</think>" + kCall, step, {true, true});
        EXPECT_EQ(r.reasoning, "thinking hard") << step;
        EXPECT_EQ(r.content, "Let me check.") << step;
        ASSERT_EQ(r.tool_calls.size(), 1u) << step;
        EXPECT_EQ(r.tool_calls[0].name, "get_weather");
        auto args = nlohmann::json::parse(r.tool_calls[0].arguments);
        EXPECT_EQ(args["location"], "Beijing");
        EXPECT_EQ(args["days"], 3);
        EXPECT_EQ(r.content.find("DSML"), std::string::npos);
    }
}

TEST(DsmlParser, AsciiBarsBareInvokeAndUnterminatedCalls) {
    std::string ascii =
        "<|DSML|invoke name=\"f\">\n<|DSML|parameter name=\"a\" string=\"true\">x</|DSML|parameter>";
    auto r = parse_all(ascii, 5, {false, true});
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "f");
    EXPECT_EQ(nlohmann::json::parse(r.tool_calls[0].arguments)["a"], "x"); // closed at finish
    EXPECT_EQ(r.content, "");
}

TEST(DsmlParser, NoEndOfThinkingKeepsEverythingAsReasoningAndToolsOffKeepsMarkupAsContent) {
    // Cut off by max_tokens inside reasoning: it stays reasoning. Stopped normally without </think>: the text
    // was the answer and must not be swallowed into reasoning.
    auto cut = parse_all("still thinking", 3, {true, true}, /*length_cut=*/true);
    EXPECT_EQ(cut.reasoning, "still thinking");
    EXPECT_EQ(cut.content, "");
    auto stopped = parse_all("still thinking", 3, {true, true});
    EXPECT_EQ(stopped.content, "still thinking");
    EXPECT_EQ(stopped.reasoning, "");
    auto r = parse_all(kCall, 4, {false, false});
    EXPECT_EQ(r.content, kCall);
    EXPECT_TRUE(r.tool_calls.empty());
}

std::vector<int32_t> ids(const FakeBackend& b, const std::string& s) {
    return b.tokenize(s).value();
}

TEST(ChoicePipeline, DetokenizesUtf8AcrossTokensAndAppliesStops) {
    FakeBackend b;
    ChoicePipeline p(b, {"STOP"}, false, {});
    GenerationDelta d;
    d.tokens = ids(b, "h\xc3\xa9llo ST"); // é split over two byte tokens
    std::string text;
    for (int32_t t : d.tokens) {
        GenerationDelta one;
        one.tokens = {t};
        text += p.push(one).text;
    }
    EXPECT_EQ(text, "h\xc3\xa9llo "); // "ST" held back
    GenerationDelta rest;
    rest.tokens = ids(b, "OP and more");
    auto out = p.push(rest);
    EXPECT_EQ(out.text, "");
    ASSERT_TRUE(out.finish_reason.has_value());
    EXPECT_EQ(*out.finish_reason, "stop");
    EXPECT_TRUE(p.finished());
    EXPECT_EQ(p.completion_tokens(), 11); // 9 bytes, then "OP" completes the stop string
}

TEST(ChoicePipeline, LengthFinishFlushesHeldText) {
    FakeBackend b;
    ChoicePipeline p(b, {"xyz"}, false, {});
    GenerationDelta d;
    d.tokens = ids(b, "abcxy");
    d.finish = FinishReason::kLength;
    auto out = p.push(d);
    EXPECT_EQ(out.text, "abcxy");
    EXPECT_EQ(*out.finish_reason, "length");
}

TEST(ChoicePipeline, ToolCallsMakeFinishReasonToolCalls) {
    FakeBackend b;
    ChoicePipeline p(b, {}, true, {false, true});
    GenerationDelta d;
    d.tokens = ids(b, kCall);
    d.finish = FinishReason::kStop;
    auto out = p.push(d);
    EXPECT_EQ(*out.finish_reason, "tool_calls");
    ChatChoiceResult r;
    r.merge(out.parsed);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
}

TEST(Generation, ForcedOutputRunsWithoutTheEngineAndHonoursMaxTokens) {
    FakeBackend b;
    ChoiceSpec spec;
    spec.prompt = ids(b, "prompt");
    spec.forced_output = "hello world";
    spec.sampling.max_tokens = 5;
    Generation g(b, "req-forced", {spec}, {}, false, {});
    ASSERT_TRUE(g.start().ok());
    std::string text;
    std::optional<std::string> finish;
    for (int i = 0; i < 100 && !g.done(); ++i) {
        for (auto& [c, out] : g.poll(std::chrono::milliseconds(50))) {
            text += out.text;
            if (out.finish_reason) finish = out.finish_reason;
        }
    }
    EXPECT_EQ(text, "hello");
    EXPECT_EQ(finish, "length");
}

TEST(Generation, SeededChoicesReproduceAndStopStringsAbortTheEngineRequest) {
    FakeBackendConfig cfg;
    cfg.step_delay_us = 0;
    FakeBackend b(cfg);
    auto run = [&](const std::string& id, std::vector<std::string> stops) {
        SamplingOptions s;
        s.max_tokens = 40;
        s.seed = 7;
        Generation g(b, id, {ChoiceSpec{ids(b, "p"), s, ""}}, stops, false, {});
        EXPECT_TRUE(g.start().ok());
        std::string text;
        for (int i = 0; i < 1000 && !g.done(); ++i) {
            for (auto& [c, out] : g.poll(std::chrono::milliseconds(50))) text += out.text;
        }
        EXPECT_TRUE(g.done());
        return text;
    };
    std::string a = run("r1", {}), b2 = run("r2", {});
    EXPECT_EQ(a, b2);
    EXPECT_EQ(a.size(), 40u);
    std::string stop = a.substr(10, 2);
    std::string c = run("r3", {stop});
    EXPECT_EQ(c, a.substr(0, a.find(stop)));
    for (int i = 0; i < 200 && b.live_requests() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(b.live_requests(), 0);
}

TEST(Metrics, RendersCountersHistogramsAndEngineGauges) {
    ServerMetrics m;
    m.count_request("/v1/completions", 200);
    m.count_request("/v1/completions", 200);
    m.count_request("/v1/completions", 400);
    m.add_prompt_tokens(11);
    m.add_generation_tokens(5);
    m.observe_ttft(0.003);
    m.observe_ttft(100.0);
    EngineStats es;
    es.running = 2;
    es.prefix_cache_queries = 10;
    es.prefix_cache_hits = 4;
    std::string t = m.render(es);
    EXPECT_NE(t.find("deepinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2\n"),
              std::string::npos);
    EXPECT_NE(t.find("deepinfer_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 1\n"),
              std::string::npos);
    EXPECT_NE(t.find("deepinfer_prompt_tokens_total 11\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_generation_tokens_total 5\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_time_to_first_token_seconds_count 2\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_num_requests_running 2\n"), std::string::npos);
    EXPECT_NE(t.find("deepinfer_prefix_cache_hit_rate 0.4"), std::string::npos);
}

} // namespace
} // namespace deepinfer::server

namespace deepinfer::server {
namespace {

TEST(Utf8, ReplacesIllFormedBytesAndFindsIncompleteTails) {
    EXPECT_EQ(valid_utf8("a\xc3\xa9z"), "a\xc3\xa9z");
    EXPECT_EQ(valid_utf8("a\xff"), "a\xEF\xBF\xBD");
    EXPECT_EQ(valid_utf8("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(valid_utf8("\xed\xa0\x80"),
              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // a surrogate is ill-formed
    EXPECT_EQ(incomplete_utf8_tail("ab\xe2\x82"), 2u); // € missing its last byte
    EXPECT_EQ(incomplete_utf8_tail("ab\xe2\x82\xac"), 0u);
    EXPECT_EQ(incomplete_utf8_tail("ab\xf0"), 1u);
    EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
}

} // namespace
} // namespace deepinfer::server
