// The JSONL driver: parsing (errors name the field), output order and content, n > 1, text hooks.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/offline.h"
#include "fake_model.h"

using namespace deepinfer;
using namespace deepinfer::engine;
using namespace deepinfer::engine::testing;

namespace {

TEST(Offline, ParseLineNamesBadFields) {
    OfflineOptions o;
    auto r = parse_offline_line(
        R"({"prompt_ids":[1,2],"max_tokens":3,"temperature":0.5,"logit_bias":{"7":-1}})", o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(*r->params.max_tokens, 3);
    EXPECT_FLOAT_EQ(r->params.temperature, 0.5f);
    ASSERT_EQ(r->params.logit_bias.size(), 1u);
    EXPECT_EQ(r->params.logit_bias[0].first, 7);
    EXPECT_NE(
        parse_offline_line(R"({"prompt_ids":[1],"temprature":1})", o).status().message().find("temprature"),
        std::string::npos);
    EXPECT_NE(parse_offline_line(R"({"prompt_ids":"x"})", o).status().message().find("prompt_ids"),
              std::string::npos);
    EXPECT_NE(parse_offline_line(R"({"prompt":"hi"})", o).status().message().find("tokenizer"),
              std::string::npos);
    o.tokenize = [](const std::string& s) -> core::Result<std::vector<int32_t>> {
        return std::vector<int32_t>(s.begin(), s.end());
    };
    r = parse_offline_line(R"({"prompt":"hi"})", o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->prompt_ids, (std::vector<int32_t>{'h', 'i'}));
}

TEST(Offline, JsonlInJsonlOutInInputOrder) {
    FakeModel model(64);
    EngineConfig c;
    c.block_size = 16;
    c.num_kv_blocks = 64;
    auto engine = LLMEngine::create(&model, c);
    ASSERT_TRUE(engine.ok());
    std::stringstream in, out;
    in << R"({"prompt_ids":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22],"max_tokens":20,"temperature":0})"
       << "\n\n"
       << R"({"prompt_ids":[3],"max_tokens":2,"temperature":0})"
       << "\n"
       << R"({"prompt_ids":[999]})"
       << "\n"
       << R"({"prompt_ids":[3,4],"max_tokens":5,"n":2,"seed":1,"logprobs":1})"
       << "\n";
    OfflineOptions o;
    o.progress = false;
    o.defaults.temperature = 1.0f;
    o.detokenize = [](const std::vector<int32_t>& ids) { return std::to_string(ids.size()) + " tokens"; };
    auto summary = run_offline_jsonl(**engine, in, out, o);
    ASSERT_TRUE(summary.ok()) << summary.status().to_string();
    EXPECT_EQ(summary->num_requests, 4);
    EXPECT_EQ(summary->num_errors, 1);
    std::vector<nlohmann::json> lines;
    std::string line;
    while (std::getline(out, line)) lines.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(lines.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(lines[i]["index"], i);
    auto want = fake_greedy({5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}, 20, 64, 0);
    EXPECT_EQ(lines[0]["output_ids"].get<std::vector<int32_t>>(), want);
    EXPECT_EQ(lines[0]["finish_reason"], want.back() == 0 ? "stop" : "length");
    EXPECT_EQ(lines[0]["text"], std::to_string(want.size()) + " tokens");
    EXPECT_EQ(lines[1]["output_ids"].get<std::vector<int32_t>>(), fake_greedy({3}, 2, 64, 0));
    EXPECT_NE(lines[2]["error"].get<std::string>().find("999"), std::string::npos);
    ASSERT_EQ(lines[3]["outputs"].size(), 2u);
    EXPECT_EQ(lines[3]["logprobs"].size(), lines[3]["output_ids"].size());
}

} // namespace
