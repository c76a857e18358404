// The output parser against DeepSeek's own parser (parse_message_from_completion_text of the V4 release
// encoding_dsv4.py) on well-formed completions, whole and fed in pieces (golden:
// tools/tokenizer/gen_parse_official_goldens.py).

#include "test_data.h"
#include "tokenizer/output_json.h"

namespace deepinfer::tokenizer {
namespace {

using testing::read_file;
using testing::source_path;

TEST(ParseOfficial, MatchesDeepSeekParserWholeAndStreamed) {
    const Json golden =
        Json::parse(read_file(source_path("tests/tokenizer/data/parse_official_golden.json")));
    const Json& cases = golden.at("cases");
    ASSERT_GE(cases.size(), 50u);
    int with_calls = 0;
    for (const Json& c : cases) {
        const std::string text = c.at("text").get<std::string>();
        DsmlStreamParser::Options opt;
        opt.thinking = c.at("mode") == "thinking";
        with_calls += !c.at("tool_calls").empty();
        for (std::size_t piece : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
            const std::string name = c.at("name").get<std::string>() + " [" +
                                     c.at("mode").get<std::string>() + ", pieces of " +
                                     std::to_string(piece) + "]";
            const ParsedMessage m = parse_completion(text, opt, FinishReason::kStop, piece);
            EXPECT_EQ(m.reasoning, c.at("reasoning_content").get<std::string>()) << name;
            EXPECT_EQ(m.content, c.at("content").get<std::string>()) << name;
            const Json& want = c.at("tool_calls");
            ASSERT_EQ(m.tool_calls.size(), want.size()) << name;
            for (std::size_t i = 0; i < want.size(); ++i) {
                EXPECT_EQ(m.tool_calls[i].name, want[i].at("name").get<std::string>()) << name;
                EXPECT_TRUE(m.tool_calls[i].complete) << name;
                Json args;
                try {
                    args = Json::parse(m.tool_calls[i].arguments);
                } catch (const std::exception& e) {
                    ADD_FAILURE() << name << ": arguments are not JSON: " << m.tool_calls[i].arguments;
                    continue;
                }
                EXPECT_EQ(args, want[i].at("arguments")) << name;
            }
            EXPECT_EQ(m.finish_reason, want.empty() ? "stop" : "tool_calls") << name;
        }
    }
    EXPECT_GE(with_calls, 20);
}

TEST(ParseOfficial, JsonShape) {
    DsmlStreamParser::Options opt;
    const ParsedMessage m = parse_completion("why</think>hi<｜end▁of▁sentence｜>", opt);
    const Json j = parsed_message_json(m);
    EXPECT_EQ(j.at("reasoning_content"), "why");
    EXPECT_EQ(j.at("content"), "hi");
    EXPECT_TRUE(j.at("tool_calls").empty());
    EXPECT_EQ(j.at("finish_reason"), "stop");
    EXPECT_EQ(parse_event_json({ParseEventKind::kToolCallBegin, "f", 0}).at("event"), "tool_call_begin");
}

} // namespace
} // namespace deepinfer::tokenizer
