#pragma once
// The DeepSeek V4 chat protocol's fixed strings: special tokens and the prompt texts the model was
// trained with. Shared by the prompt renderer (chat_encoding.cpp) and the output parser (dsml_parser.cpp).

#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/chat_encoding.h"

namespace deepinfer::tokenizer {

inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminderToken = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kImagePlaceholder = "<｜deepseek_image｜>";

// "## Tools ..." block around the tool schemas (one JSON object per line).
std::string tools_prompt(std::string_view schemas);
// "## Response Format: ..." block around a JSON schema.
std::string response_format_prompt(std::string_view schema_json);
// The text prepended to the first message in thinking modes ("" for non-thinking and low).
// The prompt put before the first message for `mode` under `table`.
std::string_view reasoning_effort_prompt(ThinkingMode mode, EffortTable table);
// The 0731 table (what this function returned before effort tables existed).
std::string_view reasoning_effort_prompt(ThinkingMode mode);
// "<｜action｜>" for "action", ... ; nullopt for an unknown task.
std::optional<std::string_view> task_token(std::string_view task);

} // namespace deepinfer::tokenizer
