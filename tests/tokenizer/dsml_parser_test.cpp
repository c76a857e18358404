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

// Issue 12: prose that quotes an unclosed invoke header is text, not a call with {} arguments.
TEST(DsmlParser, QuotedUnclosedInvokeIsProse) {
    const std::string text = "To call a tool, write <｜DSML｜invoke name=\"get_weather\"> and then the "
                             "parameters.";
    for (std::size_t n : {0, 1, 7}) {
        SCOPED_TRACE(n);
        for (FinishReason fr : {FinishReason::kStop, FinishReason::kLength}) {
            const Replayed r = run(text, /*thinking=*/false, fr, n);
            EXPECT_TRUE(r.msg.tool_calls.empty());
            EXPECT_TRUE(r.names.empty()); // no kToolCallBegin was streamed either
            EXPECT_EQ(r.msg.content, text);
            EXPECT_EQ(r.content, text);
            EXPECT_EQ(r.msg.finish_reason, fr == FinishReason::kStop ? "stop" : "length");
        }
    }
    // The header at the very end of the output, and inside reasoning.
    const std::string tail = "Example: <｜DSML｜invoke name=\"f\">";
    Replayed r = run(tail, false, FinishReason::kStop, 1);
    EXPECT_TRUE(r.msg.tool_calls.empty());
    EXPECT_EQ(r.msg.content, tail);
    r = run("I could use <｜DSML｜invoke name=\"f\"> here.</think>No.", true, FinishReason::kStop, 7);
    EXPECT_TRUE(r.msg.tool_calls.empty());
    EXPECT_EQ(r.msg.reasoning, "I could use <｜DSML｜invoke name=\"f\"> here.");
    EXPECT_EQ(r.msg.content, "No.");
    // A header confirmed by a parameter is still a call.
    r = run(
        "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">1</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>",
        false, FinishReason::kStop, 1);
    ASSERT_EQ(r.msg.tool_calls.size(), 1u);
    EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"a\": 1}");
}

// Issue 12: a call whose only parameter `arguments` holds a JSON object is unwrapped.
TEST(DsmlParser, ArgumentsWrapperRemoved) {
    const std::string head = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n";
    const std::string tail = "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    for (std::size_t n : {0, 1, 7}) {
        SCOPED_TRACE(n);
        for (const char* attr : {"false", "true"}) {
            const std::string text = head + "<｜DSML｜parameter name=\"arguments\" string=\"" + attr +
                                     "\">{\"location\": \"Paris\", \"days\": 2}</｜DSML｜parameter>\n" + tail;
            const Replayed r = run(text, false, FinishReason::kStop, n);
            ASSERT_EQ(r.msg.tool_calls.size(), 1u);
            EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"location\": \"Paris\", \"days\": 2}");
            EXPECT_EQ(r.args.at(0), r.msg.tool_calls[0].arguments);
            EXPECT_EQ(r.msg.finish_reason, "tool_calls");
        }
        // Not a wrapper: `arguments` beside another parameter, or holding a non-object, stays as written.
        Replayed r = run(head +
                             "<｜DSML｜parameter name=\"arguments\" string=\"false\">{\"x\": 1}"
                             "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"false\">2"
                             "</｜DSML｜parameter>\n" +
                             tail,
                         false, FinishReason::kStop, n);
        ASSERT_EQ(r.msg.tool_calls.size(), 1u);
        EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"arguments\": {\"x\": 1}, \"b\": 2}");
        EXPECT_EQ(r.args.at(0), r.msg.tool_calls[0].arguments);
        r = run(head + "<｜DSML｜parameter name=\"arguments\" string=\"true\">hello</｜DSML｜parameter>\n" +
                    tail,
                false, FinishReason::kStop, n);
        ASSERT_EQ(r.msg.tool_calls.size(), 1u);
        EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"arguments\": \"hello\"}");
    }
}

// Issue 12: an invoke whose body is a JSON object keeps it as the arguments.
TEST(DsmlParser, JsonBodyKept) {
    for (std::size_t n : {0, 1, 7}) {
        SCOPED_TRACE(n);
        Replayed r =
            run("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n{\"q\": \"a</b>\", \"n\": [1, 2]}\n"
                "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
                false, FinishReason::kStop, n);
        ASSERT_EQ(r.msg.tool_calls.size(), 1u);
        EXPECT_EQ(r.msg.tool_calls[0].name, "f");
        EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"q\": \"a</b>\", \"n\": [1, 2]}");
        EXPECT_TRUE(r.msg.tool_calls[0].complete);
        EXPECT_EQ(r.args.at(0), r.msg.tool_calls[0].arguments);
        // A bare invoke with a JSON body is a call too.
        r = run("Sure.\n\n<｜DSML｜invoke name=\"g\">{\"a\": 1}</｜DSML｜invoke>", false, FinishReason::kStop,
                n);
        ASSERT_EQ(r.msg.tool_calls.size(), 1u);
        EXPECT_EQ(r.msg.tool_calls[0].arguments, "{\"a\": 1}");
        EXPECT_EQ(r.msg.content, "Sure.");
        EXPECT_EQ(r.msg.finish_reason, "tool_calls");
    }
}

} // namespace
} // namespace deepinfer::tokenizer
