#pragma once
// Model output as JSON, for `deepinfer parse-output`: the parsed message in the official parser's shape
// ({"reasoning_content", "content", "tool_calls": [OpenAI tool calls]}) plus "finish_reason", and stream
// events one object each.

#include <string_view>

#include "tokenizer/dsml_parser.h"
#include "tokenizer/json_text.h"

namespace deepinfer::tokenizer {

// Parses a whole completion. The official parser's input ends with the end-of-sentence token; generation
// stops there, so the text is cut at the first one. piece > 0 feeds the text in pieces of that many bytes.
ParsedMessage parse_completion(std::string_view text, const DsmlStreamParser::Options& options,
                               FinishReason reason = FinishReason::kStop, std::size_t piece = 0);

Json parsed_message_json(const ParsedMessage& message);
Json parse_event_json(const ParseEvent& event);

} // namespace deepinfer::tokenizer
