#include "tokenizer/output_json.h"

#include "tokenizer/chat_tokens.h"

namespace deepinfer::tokenizer {

ParsedMessage parse_completion(std::string_view text, const DsmlStreamParser::Options& options,
                               FinishReason reason, std::size_t piece) {
    if (const std::size_t eos = text.find(kEosToken); eos != std::string_view::npos)
        text = text.substr(0, eos);
    DsmlStreamParser parser(options);
    if (piece == 0) piece = text.size() + 1;
    for (std::size_t i = 0; i < text.size(); i += piece) parser.feed(text.substr(i, piece));
    parser.finish(reason);
    return parser.message();
}

Json parsed_message_json(const ParsedMessage& message) {
    Json calls = Json::array();
    for (std::size_t i = 0; i < message.tool_calls.size(); ++i) {
        const ParsedToolCall& c = message.tool_calls[i];
        calls.push_back({{"index", i},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}},
                         {"complete", c.complete}});
    }
    return Json{{"reasoning_content", message.reasoning},
                {"content", message.content},
                {"tool_calls", std::move(calls)},
                {"finish_reason", message.finish_reason}};
}

Json parse_event_json(const ParseEvent& event) {
    switch (event.kind) {
    case ParseEventKind::kReasoningDelta:
        return {{"event", "reasoning"}, {"text", event.text}};
    case ParseEventKind::kContentDelta:
        return {{"event", "content"}, {"text", event.text}};
    case ParseEventKind::kToolCallBegin:
        return {{"event", "tool_call_begin"}, {"index", event.index}, {"name", event.text}};
    case ParseEventKind::kToolCallArgsDelta:
        return {{"event", "tool_call_arguments"}, {"index", event.index}, {"text", event.text}};
    case ParseEventKind::kToolCallEnd:
        return {{"event", "tool_call_end"}, {"index", event.index}};
    case ParseEventKind::kReasoningWasContent:
        return {{"event", "reasoning_was_content"}, {"text", event.text}};
    }
    return {};
}

} // namespace deepinfer::tokenizer
