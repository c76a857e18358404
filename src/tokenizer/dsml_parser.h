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
//     reasoning (a kReasoningWasContent event says so; finish() reports it as content);
//   - a bare `<｜DSML｜invoke name="…">` met in text is a call only once it is confirmed by a parameter,
//     a JSON body or `</｜DSML｜invoke>`; prose after the header (someone quoting the markup) turns the
//     header back into text, so quoted markup never becomes a phantom call (kToolCallBegin waits for the
//     confirmation);
//   - an invoke whose body is a JSON object (`<｜DSML｜invoke name="f">{"a": 1}</｜DSML｜invoke>`) keeps it
//     as the arguments;
//   - a call whose only parameter is `arguments` holding a JSON object is unwrapped: the object is the
//     arguments (the model wrapped them in a spurious {"arguments": …}). The first parameter's text is
//     held back until its name shows it is not such a wrapper.
// Feed any split of the text (token deltas, single characters): the events' concatenation is the same.
//
//   DsmlStreamParser p({.thinking = true});
//   for (auto& delta : deltas) for (auto& e : p.feed(delta)) send(e);
//   for (auto& e : p.finish(FinishReason::kStop)) send(e);
//   ParsedMessage m = p.message();

#include <string>
#include <string_view>
#include <vector>

#include "core/finish_reason.h"

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

using core::FinishReason; // why generation stopped: kLength cuts a half-written marker

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
        kInvokeJson, // an invoke body that starts with '{': a JSON object up to </invoke>
        kDone,       // after the tool block: the rest is dropped
    };
    bool step(std::vector<ParseEvent>& ev, bool final);
    bool step_text(std::vector<ParseEvent>& ev, bool final);
    void emit_text(std::vector<ParseEvent>& ev, std::string_view s);
    void emit_args(std::vector<ParseEvent>& ev, std::string_view s);
    void close_call(std::vector<ParseEvent>& ev);
    void begin_call(std::vector<ParseEvent>& ev);
    void invoke_was_prose(std::vector<ParseEvent>& ev);
    void flush_held(std::vector<ParseEvent>& ev);
    // Consumes n bytes of buf_ (kept in raw_ while a bare invoke is unconfirmed).
    void consume(std::size_t n);

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
    std::string param_name_;
    std::string pending_name_;
    // A header seen but no kToolCallBegin sent yet (see the header comment).
    bool call_pending_ = false;
    bool invoke_from_text_ = false; // the header came from reasoning/answer text, not a tool block
    State text_state_ = State::kContent;
    std::string raw_; // text consumed since a bare header, given back if it was prose
    // The first parameter's argument text, held back while it may be an {"arguments": …} wrapper.
    bool holding_ = false;
    bool wrapper_ = false;  // the held parameter is named "arguments"
    std::string held_;      // argument JSON text held back
    std::string held_raw_;  // the wrapper parameter's raw value
    std::string json_body_; // kInvokeJson: the body so far
    ParsedMessage msg_;
};

} // namespace deepinfer::tokenizer
