// The per-request text pipeline: DSML parser, detokenizer + stop strings + parser, metrics rendering.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "fake_backend.h"
#include "server/engine_backend_text.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/response_builder.h"
#include "tokenizer/utf8.h"

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
        auto r = parse_all("thinking hard</think>" + kCall, step, {true, true, {}});
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
    auto r = parse_all(ascii, 5, {false, true, {}});
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "f");
    EXPECT_EQ(nlohmann::json::parse(r.tool_calls[0].arguments)["a"], "x"); // closed at finish
    EXPECT_EQ(r.content, "");
}

TEST(DsmlParser, NoEndOfThinkingKeepsEverythingAsReasoningAndToolsOffKeepsMarkupAsContent) {
    // Cut off by max_tokens inside reasoning: it stays reasoning. Stopped normally without </think>: the text
    // was the answer and must not be swallowed into reasoning.
    auto cut = parse_all("still thinking", 3, {true, true, {}}, /*length_cut=*/true);
    EXPECT_EQ(cut.reasoning, "still thinking");
    EXPECT_EQ(cut.content, "");
    auto stopped = parse_all("still thinking", 3, {true, true, {}});
    EXPECT_EQ(stopped.content, "still thinking");
    EXPECT_EQ(stopped.reasoning, "");
    auto r = parse_all(kCall, 4, {false, false, {}});
    EXPECT_EQ(r.content, kCall);
    EXPECT_TRUE(r.tool_calls.empty());
}

std::vector<int32_t> ids(const FakeBackend& b, const std::string& s) {
    return b.tokenize(s).value();
}

// Byte strings with multi-byte characters split over tokens and every kind of ill-formed sequence (a
// truncated character followed by ASCII, a stray continuation, an overlong, a surrogate, 0xFF, a truncated
// character at the very end), plus seeded random bytes.
std::vector<std::string> utf8_cases() {
    std::vector<std::string> cases = {"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x91\x8d!",
                                      "a\xe2\x82"
                                      "b",
                                      "\x80\x80x",
                                      "\xe0\x80\xafz",
                                      "\xed\xa0\x80 surrogate",
                                      "\xff\xfe\xc3",
                                      "\xf0\x9f\x91",
                                      "\xf4\x90\x80\x80 too big"};
    std::mt19937 rng(13);
    for (int c = 0; c < 200; ++c) {
        std::string s;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 24); i < n; ++i) {
            // Mostly bytes that start or continue multi-byte characters.
            s.push_back(static_cast<char>(rng() % 4 == 0 ? 0x20 + rng() % 0x5f : 0x80 + rng() % 0x80));
        }
        cases.push_back(std::move(s));
    }
    return cases;
}

// Streamed text (one token at a time, as the engine produces it) must equal a full decode of the same ids:
// the tokenizer's lossy repair (one U+FFFD per maximal ill-formed subpart), on every detokenizer the server
// runs: the byte-level codec of the test models, the fake backend, and the whole choice pipeline.
TEST(Utf8, StreamedTextEqualsAFullDecode) {
    auto codec = tokenizer::make_byte_codec(0, 1);
    FakeBackend fake;
    for (const std::string& bytes : utf8_cases()) {
        const std::string full = tokenizer::utf8::sanitize(bytes);
        std::vector<int32_t> ids = codec->encode(bytes);
        ASSERT_EQ(ids.size(), bytes.size());
        auto detok = codec->new_detokenizer();
        std::string streamed;
        for (int32_t t : ids) streamed += detok->push(t);
        streamed += detok->flush();
        EXPECT_EQ(streamed, full) << testing::PrintToString(bytes);

        std::vector<int32_t> fake_ids(bytes.begin(), bytes.end());
        for (int32_t& t : fake_ids) t &= 0xff;
        ChoicePipeline p(fake, {}, false, {});
        std::string piped;
        for (size_t i = 0; i < fake_ids.size(); ++i) {
            auto last = i + 1 == fake_ids.size() ? std::optional(engine::FinishReason::kStop) : std::nullopt;
            piped += p.push({&fake_ids[i], 1}, {}, last).text;
        }
        EXPECT_EQ(piped, full) << testing::PrintToString(bytes);
    }
}

TEST(ChoicePipeline, DetokenizesUtf8AcrossTokensAndAppliesStops) {
    FakeBackend b;
    ChoicePipeline p(b, {"STOP"}, false, {});
    std::string text;
    for (int32_t t : ids(b, "h\xc3\xa9llo ST")) text += p.push({&t, 1}, {}, std::nullopt).text; // é split
    EXPECT_EQ(text, "h\xc3\xa9llo "); // "ST" held back
    auto out = p.push(ids(b, "OP and more"), {}, std::nullopt);
    EXPECT_EQ(out.text, "");
    ASSERT_TRUE(out.finish_reason.has_value());
    EXPECT_EQ(*out.finish_reason, "stop");
    EXPECT_TRUE(p.finished());
    EXPECT_EQ(p.completion_tokens(), 11); // 9 bytes, then "OP" completes the stop string
}

TEST(ChoicePipeline, LengthFinishFlushesHeldText) {
    FakeBackend b;
    ChoicePipeline p(b, {"xyz"}, false, {});
    auto out = p.push(ids(b, "abcxy"), {}, engine::FinishReason::kLength);
    EXPECT_EQ(out.text, "abcxy");
    EXPECT_EQ(*out.finish_reason, "length");
}

TEST(ChoicePipeline, ToolCallsMakeFinishReasonToolCallsAndErrorsEndTheChoice) {
    FakeBackend b;
    ChoicePipeline p(b, {}, true, {false, true, {}});
    auto out = p.push(ids(b, kCall), {}, engine::FinishReason::kStop);
    EXPECT_EQ(*out.finish_reason, "tool_calls");
    ChatChoiceResult r;
    r.merge(out.parsed);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    ChoicePipeline q(b, {}, false, {});
    auto failed = q.fail(core::internal_error("boom"));
    EXPECT_EQ(failed.finish_reason, "error");
    EXPECT_EQ(failed.error.message(), "boom");
    EXPECT_TRUE(q.finished());
}

// Drains a generation; returns each choice's text and finish reason.
std::vector<std::pair<std::string, std::string>> drain(Generation& g) {
    std::vector<std::pair<std::string, std::string>> r(g.num_choices());
    for (int i = 0; i < 1000 && !g.done(); ++i) {
        for (auto& [c, out] : g.poll(std::chrono::milliseconds(50))) {
            r[c].first += out.text;
            if (out.finish_reason) r[c].second = *out.finish_reason;
        }
    }
    EXPECT_TRUE(g.done());
    return r;
}

TEST(Generation, ForcedOutputRunsWithoutTheEngineAndHonoursMaxTokens) {
    FakeBackend b;
    GenerationSpec spec;
    spec.prompts = {ids(b, "prompt")};
    spec.forced_output = "hello world";
    spec.params.max_tokens = 5;
    spec.params.n = 2;
    Generation g(b, "req-forced", spec);
    ASSERT_TRUE(g.start().ok());
    auto r = drain(g);
    ASSERT_EQ(r.size(), 2u);
    for (const auto& [text, finish] : r) {
        EXPECT_EQ(text, "hello");
        EXPECT_EQ(finish, "length");
    }
}

TEST(Generation, SeededChoicesReproduceAndStopStringsAbortTheEngineRequest) {
    FakeBackendConfig cfg;
    cfg.step_delay_us = 0;
    FakeBackend b(cfg);
    auto run = [&](const std::string& id, std::vector<std::string> stops, int n = 1) {
        GenerationSpec spec;
        spec.prompts = {ids(b, "p")};
        spec.params.max_tokens = 40;
        spec.params.seed = 7;
        spec.params.n = n;
        spec.stops = std::move(stops);
        Generation g(b, id, spec);
        EXPECT_TRUE(g.start().ok());
        return drain(g);
    };
    std::string a = run("r1", {})[0].first, b2 = run("r2", {})[0].first;
    EXPECT_EQ(a, b2);
    EXPECT_EQ(a.size(), 40u);
    std::string stop = a.substr(10, 2);
    std::string c = run("r3", {stop})[0].first;
    EXPECT_EQ(c, a.substr(0, a.find(stop)));
    // n = 3: one engine request, three choices; the first reproduces the n = 1 run, the others differ.
    int64_t prefill_before = b.stats().counters.prefill_tokens;
    auto three = run("r4", {}, 3);
    ASSERT_EQ(three.size(), 3u);
    EXPECT_EQ(static_cast<size_t>(b.stats().counters.prefill_tokens - prefill_before), ids(b, "p").size());
    EXPECT_EQ(three[0].first, a);
    EXPECT_NE(three[1].first, three[0].first);
    EXPECT_NE(three[2].first, three[1].first);
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
    es.counters.prefix_query_tokens = 10;
    es.counters.prefix_hit_tokens = 4;
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
