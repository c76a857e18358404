#include "tokenizer/output_parser.h"

#include <nlohmann/json.hpp>

#include "tokenizer/dsml_parser.h"

namespace deepinfer::tokenizer {

namespace {

class DsmlParserAdapter : public OutputParser {
public:
    DsmlParserAdapter(bool thinking, bool parse_tools)
        : parser_(DsmlStreamParser::Options{thinking, parse_tools}) {}
    ParsedDelta push(std::string_view text) override { return convert(parser_.feed(text)); }
    ParsedDelta finish(bool length_cut) override {
        ParsedDelta d = convert(parser_.finish(length_cut ? FinishReason::kLength : FinishReason::kStop));
        close_open_call(d);
        return d;
    }

private:
    ParsedDelta convert(const std::vector<ParseEvent>& events) {
        ParsedDelta d;
        for (const auto& e : events) {
            switch (e.kind) {
            case ParseEventKind::kReasoningDelta:
                d.reasoning += e.text;
                break;
            case ParseEventKind::kContentDelta:
                d.content += e.text;
                break;
            case ParseEventKind::kToolCallBegin:
                d.tool_calls.push_back({e.index, "", e.text, ""});
                open_index_ = e.index;
                open_args_.clear();
                break;
            case ParseEventKind::kToolCallArgsDelta:
                if (!d.tool_calls.empty() && d.tool_calls.back().index == e.index) {
                    d.tool_calls.back().arguments += e.text;
                } else {
                    d.tool_calls.push_back({e.index, "", "", e.text});
                }
                if (e.index == open_index_) open_args_ += e.text;
                break;
            case ParseEventKind::kToolCallEnd:
                if (e.index == open_index_) open_index_ = -1;
                break;
            case ParseEventKind::kReasoningWasContent:
                d.reasoning_was_content = true;
                break;
            }
        }
        return d;
    }

    // Output that ends inside a tool call (cut off, or stopped mid-call) still gets arguments that are one
    // JSON object: the shortest closing suffix that makes the streamed fragments parse is appended.
    void close_open_call(ParsedDelta& d) {
        if (open_index_ < 0) return;
        std::string suffix;
        for (const char* s : {"}", "\"}", "\"\"}"}) {
            if (nlohmann::json::accept(open_args_ + s)) {
                suffix = s;
                break;
            }
        }
        if (open_args_.empty()) suffix = "{}";
        if (!suffix.empty()) d.tool_calls.push_back({open_index_, "", "", suffix});
        open_index_ = -1;
    }

    DsmlStreamParser parser_;
    int open_index_ = -1;   // tool call begun but not ended
    std::string open_args_; // its argument fragments so far
};

} // namespace

std::unique_ptr<OutputParser> make_dsml_output_parser(bool thinking, bool parse_tools) {
    return std::make_unique<DsmlParserAdapter>(thinking, parse_tools);
}

} // namespace deepinfer::tokenizer
