// Model outputs must parse to what DeepSeek's reference stream processor gives (goldens:
// tools/tokenizer/gen_parse_goldens.py), whole and streamed in pieces of 1 and 7 characters, and the
// streamed events must add up to the final message.

#include "tokenizer/dsml_parser.h"

#include "test_data.h"
#include "tokenizer/json_text.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Splits text into pieces of n code points (0: whole).
std::vector<std::string> pieces(const std::string& text, std::size_t n) {
    if (n == 0) return {text};
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t j = i;
        for (std::size_t k = 0; k < n && j < text.size(); ++k) {
            std::size_t len = utf8::valid_sequence_length(text, j);
            j += len ? len : 1;
        }
        out.push_back(text.substr(i, j - i));
        i = j;
    }
    return out;
}

struct Replayed {
    ParsedMessage msg;
    std::string reasoning, content; // from events
    std::vector<std::string> names, args;
};

Replayed run(const std::string& text, bool thinking, FinishReason fr, std::size_t n) {
    DsmlStreamParser p({.thinking = thinking});
    Replayed r;
    auto apply = [&](const std::vector<ParseEvent>& evs) {
        for (const auto& e : evs) {
            switch (e.kind) {
            case ParseEventKind::kReasoningDelta:
                r.reasoning += e.text;
                break;
            case ParseEventKind::kContentDelta:
                r.content += e.text;
                break;
            case ParseEventKind::kToolCallBegin:
                EXPECT_EQ(e.index, static_cast<int>(r.names.size()));
                r.names.push_back(e.text);
                r.args.emplace_back();
                break;
            case ParseEventKind::kToolCallArgsDelta:
                r.args.at(e.index) += e.text;
                break;
            case ParseEventKind::kToolCallEnd:
                break;
            case ParseEventKind::kReasoningWasContent:
                r.content = e.text + r.content;
                r.reasoning.clear();
                break;
            }
        }
    };
    for (const auto& piece : pieces(text, n)) apply(p.feed(piece));
    apply(p.finish(fr));
    r.msg = p.message();
    return r;
}

TEST(DsmlParser, MatchesReferenceWholeAndStreamed) {
    const Json golden =
        Json::parse(testing::read_file(testing::source_path("tests/tokenizer/data/parse_golden.json")));
    const Json& cases = golden.at("cases");
    ASSERT_GE(cases.size(), 30u);
    for (const Json& c : cases) {
        const std::string name = c.at("name");
        const std::string text = c.at("text");
        const bool thinking = c.at("thinking");
        const FinishReason fr = c.at("finish") == "length" ? FinishReason::kLength : FinishReason::kStop;
        const Json& want = c.at("expected");
        for (std::size_t n : {0, 1, 7}) {
            SCOPED_TRACE(name + " pieces=" + std::to_string(n));
            const Replayed r = run(text, thinking, fr, n);
            EXPECT_EQ(r.msg.reasoning, want.at("reasoning").get<std::string>());
            EXPECT_EQ(r.msg.content, want.at("content").get<std::string>());
            EXPECT_EQ(r.msg.finish_reason, want.at("finish_reason").get<std::string>());
            ASSERT_EQ(r.msg.tool_calls.size(), want.at("tool_calls").size());
            for (std::size_t i = 0; i < r.msg.tool_calls.size(); ++i) {
                EXPECT_EQ(r.msg.tool_calls[i].name, want["tool_calls"][i].at("name").get<std::string>());
                EXPECT_EQ(r.msg.tool_calls[i].arguments,
                          want["tool_calls"][i].at("arguments").get<std::string>());
            }
            // Events add up to the message.
            EXPECT_EQ(r.reasoning, r.msg.reasoning);
            EXPECT_EQ(r.content, r.msg.content);
            ASSERT_EQ(r.names.size(), r.msg.tool_calls.size());
            for (std::size_t i = 0; i < r.names.size(); ++i) {
                EXPECT_EQ(r.names[i], r.msg.tool_calls[i].name);
                EXPECT_EQ(r.args[i], r.msg.tool_calls[i].arguments);
            }
        }
    }
}

TEST(DsmlParser, ArgumentsStreamBeforeTheCallCloses) {
    DsmlStreamParser p({.thinking = false});
    std::string args;
    auto take = [&](const std::vector<ParseEvent>& evs) {
        for (const auto& e : evs)
            if (e.kind == ParseEventKind::kToolCallArgsDelta) args += e.text;
    };
    take(p.feed("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"q\" "
                "string=\"true\">hel"));
    EXPECT_EQ(args, "{\"q\": \"hel");
    take(p.feed("lo</｜DSML｜parameter>\n</｜DSML｜invoke>"));
    EXPECT_EQ(args, "{\"q\": \"hello\"}");
    ASSERT_EQ(p.message().tool_calls.size(), 1u);
    EXPECT_TRUE(p.message().tool_calls[0].complete);
}

TEST(DsmlParser, NoThinkEndKeepsTheAnswer) {
    DsmlStreamParser p({.thinking = true});
    p.feed("The answer is 42.");
    p.finish(FinishReason::kStop);
    EXPECT_EQ(p.message().content, "The answer is 42.");
    EXPECT_EQ(p.message().reasoning, "");
}

} // namespace
} // namespace deepinfer::tokenizer
