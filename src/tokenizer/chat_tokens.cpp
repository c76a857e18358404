#include "tokenizer/chat_tokens.h"

namespace deepinfer::tokenizer {

namespace {

// Written with "{D}" for ｜DSML｜, "{TS}"/"{TE}" for <think>/</think>, "{SCHEMAS}" for the schemas.
constexpr std::string_view kToolsTemplate =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools "
    "by "
    "writing a \"<{D}tool_calls>\" block like the following:\n\n<{D}tool_calls>\n<{D}invoke "
    "name=\"$TOOL_NAME\">\n<{D}parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</{D}parameter>\n...\n</{D}invoke>\n<{D}invoke "
    "name=\"$TOOL_NAME2\">\n...\n</{D}invoke>\n</{D}tool_calls>\n\nString parameters should be specified as "
    "is "
    "and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in "
    "JSON "
    "format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by {TS}), you MUST output "
    "your "
    "complete reasoning inside {TS}...{TE} BEFORE any tool calls or final response.\n\nOtherwise, output "
    "directly after {TE} with tool calls or final response.\n\n### Available Tool "
    "Schemas\n\n{SCHEMAS}\n\nYou "
    "MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

constexpr std::string_view kEffortHigh =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your "
    "thinking "
    "and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your "
    "logic "
    "against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire "
    "deliberation process, documenting every intermediate step, considered alternative, and rejected "
    "hypothesis "
    "to ensure absolutely no assumption is left unchecked.\n\n";

constexpr std::string_view kEffortMax = "Reasoning Effort: Beyond maximum — exhaustive, relentless, and "
                                        "uncompromising.\nYou MUST reason with the "
                                        "utmost depth and rigor, leaving absolutely nothing to chance: "
                                        "exhaustively decompose the problem into its "
                                        "most fundamental components, trace every causal chain to its root, "
                                        "and resolve the underlying cause rather "
                                        "than any surface symptom.\nDo not stop reasoning until you have "
                                        "independently verified the solution from "
                                        "multiple angles and are certain that no assumption remains "
                                        "unchecked and no error remains undiscovered.\n\n";

std::string substitute(std::string_view tmpl, std::string_view key, std::string_view value) {
    std::string out;
    std::size_t pos = 0;
    while (true) {
        const std::size_t hit = tmpl.find(key, pos);
        if (hit == std::string_view::npos) break;
        out.append(tmpl.substr(pos, hit - pos));
        out.append(value);
        pos = hit + key.size();
    }
    out.append(tmpl.substr(pos));
    return out;
}

} // namespace

std::string tools_prompt(std::string_view schemas) {
    std::string s = substitute(kToolsTemplate, "{D}", kDsml);
    s = substitute(s, "{TS}", kThinkStart);
    s = substitute(s, "{TE}", kThinkEnd);
    return substitute(s, "{SCHEMAS}", schemas);
}

std::string response_format_prompt(std::string_view schema_json) {
    return "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" +
           std::string(schema_json);
}

std::string_view reasoning_effort_prompt(ThinkingMode mode, EffortTable table) {
    switch (mode) {
    case ThinkingMode::kNonThinking:
    case ThinkingMode::kThinkingLow:
        return "";
    case ThinkingMode::kThinkingHigh:
        return table == EffortTable::kRelease ? std::string_view() : kEffortHigh;
    case ThinkingMode::kThinkingMax:
        // The release's only effort prompt is the text 0731 moved down to "high".
        return table == EffortTable::kRelease ? kEffortHigh : kEffortMax;
    }
    return "";
}

std::string_view reasoning_effort_prompt(ThinkingMode mode) {
    return reasoning_effort_prompt(mode, EffortTable::k0731);
}

std::optional<std::string_view> task_token(std::string_view task) {
    if (task == "action") return "<｜action｜>";
    if (task == "query") return "<｜query｜>";
    if (task == "authority") return "<｜authority｜>";
    if (task == "domain") return "<｜domain｜>";
    if (task == "title") return "<｜title｜>";
    if (task == "read_url") return "<｜read_url｜>";
    return std::nullopt;
}

} // namespace deepinfer::tokenizer
