#pragma once
// A small streaming parser for DeepSeek output: reasoning up to </think>, then content, with DSML tool
// calls turned into OpenAI tool-call deltas (arguments as JSON text, streamed one parameter at a time).
// The fake backend uses it; the real backend uses the tokenizer module's parser.
//   <｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="location" string="true">Beijing</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls>
// Both the fullwidth ｜ and ASCII | spellings are accepted; a bare invoke without the wrapper too.

#include <string>

#include "server/backend.h"

namespace deepinfer::server {

class DsmlOutputParser : public OutputParser {
public:
    explicit DsmlOutputParser(ParserOptions options);
    ParsedDelta push(std::string_view text) override;
    ParsedDelta finish(bool length_cut) override;

private:
    enum class Mode { kReasoning, kContent, kTools };
    void run(ParsedDelta& out, bool final);
    bool step_tools(ParsedDelta& out, bool final);

    ParserOptions options_;
    Mode mode_;
    std::string buf_;
    int call_index_ = -1;
    bool in_invoke_ = false;
    int params_in_call_ = 0;
};

} // namespace deepinfer::server
