#pragma once
// Streaming parser for DeepSeek V4 output: splits reasoning (<think> ... </think>) from the answer and
// turns DSML tool calls into name + JSON arguments as they are generated.
//
//   <think>reasoning</think>Sure.
//   <｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="location" string="true">Beijing</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls>
//
// Reference: DeepSeek's deepseek-recipe 0.2.0 stream processor (goldens in
// tests/tokenizer/data/parse_golden.json): its whitespace rules (leading newlines of reasoning and answer
// dropped, newlines before </think> or a tool block dropped), argument JSON built as the text arrives
// (string="true" values JSON-escaped, others copied verbatim), text after the tool block dropped, and a
// length cut leaving partial arguments. Beyond the reference, on purpose:
//   - ASCII "|DSML|" is accepted as well as fullwidth "｜DSML｜";
//   - when thinking mode never sees </think> and the model stopped normally, the text is the answer, not
//     reasoning (a kReasoningWasContent event says so; finish() reports it as content).
// Feed any split of the text (token deltas, single characters): the events' concatenation is the same.
//
//   DsmlStreamParser p({.thinking = true});
//   for (auto& delta : deltas) for (auto& e : p.feed(delta)) send(e);
//   for (auto& e : p.finish(FinishReason::kStop)) send(e);
//   ParsedMessage m = p.message();

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

enum class ParseEventKind {
    kReasoningDelta,
    kContentDelta,
    kToolCallBegin,       // index, name
    kToolCallArgsDelta,   // index, text: a fragment of the arguments JSON
    kToolCallEnd,         // index
    kReasoningWasContent, // finish(): the reasoning streamed so far (text) is the answer
};

struct ParseEvent {
    ParseEventKind kind;
    std::string text; // delta, fragment or name
    int index = -1;   // tool call index
};

enum class FinishReason { kStop, kLength };

struct ParsedToolCall {
    std::string name;
    std::string arguments; // JSON object text (partial if cut by length)
    bool complete = false;
};

struct ParsedMessage {
    std::string reasoning;
    std::string content;
    std::vector<ParsedToolCall> tool_calls;
    std::string finish_reason; // "stop", "length" or "tool_calls"
};

class DsmlStreamParser {
public:
    struct Options {
        bool thinking = true;         // the prompt opened <think>: output starts in reasoning
        bool parse_tool_calls = true; // false: DSML stays in content
    };
    explicit DsmlStreamParser(Options options);

    std::vector<ParseEvent> feed(std::string_view text);
    // End of output; `reason` is why generation stopped (a length cut drops a half-written marker and
    // leaves a half-written call's arguments as they are).
    std::vector<ParseEvent> finish(FinishReason reason);

    // Everything parsed so far (final after finish()).
    const ParsedMessage& message() const { return msg_; }

private:
    enum class State {
        kReasoning,
        kContent,
        kToolBlock,  // inside <tool_calls>, between invokes
        kInvokeName, // after `invoke name="`
        kInvokeBody, // between parameters
        kParamName,  // after `parameter name="`
        kParamAttrs, // after the name's closing quote, up to '>'
        kParamValue,
        kDone, // after the tool block: the rest is dropped
    };
    bool step(std::vector<ParseEvent>& ev, bool final);
    bool step_text(std::vector<ParseEvent>& ev, bool final);
    void emit_text(std::vector<ParseEvent>& ev, std::string_view s);
    void emit_args(std::vector<ParseEvent>& ev, std::string_view s);
    void close_call(std::vector<ParseEvent>& ev);

    Options opt_;
    State state_;
    std::string buf_;
    bool at_segment_start_ = true; // drop leading newlines of reasoning/content
    bool saw_think_end_ = false;
    bool finished_ = false;
    // Current tool call.
    int call_index_ = -1;
    int params_ = 0;
    bool param_is_string_ = false;
    std::string param_attrs_;
    std::string pending_name_;
    ParsedMessage msg_;
};

} // namespace deepinfer::tokenizer
