#pragma once
// DeepSeek V4 output as a server streams it: each piece of generated text becomes reasoning, content and
// tool-call deltas (the DSML stream parser's events, dsml_parser.h, merged per push), and a tool call cut off
// mid-arguments is closed so its arguments are still one JSON object.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

struct ToolCallDelta {
    int index = 0;
    std::string id;   // set on the first fragment of a call
    std::string name; // set on the first fragment of a call
    std::string arguments;
};

struct ParsedDelta {
    std::string reasoning;
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    // At the end: thinking never closed, so the reasoning streamed so far was the answer (non-streaming
    // responses move it to content; streams already sent it as reasoning).
    bool reasoning_was_content = false;
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class OutputParser {
public:
    virtual ~OutputParser() = default;
    virtual ParsedDelta push(std::string_view text) = 0;
    // length_cut: generation hit max_tokens (a half-written marker is dropped).
    virtual ParsedDelta finish(bool length_cut) = 0;
};

// The DSML parser behind OutputParser: `thinking`, the output starts inside reasoning; `parse_tools`,
// DSML tool calls are recognised (else they stay content).
std::unique_ptr<OutputParser> make_dsml_output_parser(bool thinking, bool parse_tools);

} // namespace deepinfer::tokenizer
