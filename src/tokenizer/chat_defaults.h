#pragma once
// A chat request's thinking mode: what its thinking fields ask for, and DeepSeek's defaults for what they
// leave out. DeepSeek's API and vLLM render a request that says nothing about thinking in thinking mode with
// effort high; `serve --default-chat-template-kwargs` / `--reasoning-effort` (vLLM's flag names) change the
// server-wide default, and `render-chat` takes the same flags (and this code) so it renders what the server
// would.

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "core/status.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::tokenizer {

// What a request without thinking fields gets.
struct ChatDefaults {
    bool thinking = true;
    std::string reasoning_effort = "high"; // "high" or "max": for thinking requests that name no effort
};

struct ThinkingChoice {
    bool thinking = true;
    std::string reasoning_effort; // "" (thinking off), "high" or "max"
    // The encoder's mode: thinking without an effort name renders no effort prompt (kThinkingLow).
    ThinkingMode mode() const {
        return !thinking                    ? ThinkingMode::kNonThinking
               : reasoning_effort == "max"  ? ThinkingMode::kThinkingMax
               : reasoning_effort == "high" ? ThinkingMode::kThinkingHigh
                                            : ThinkingMode::kThinkingLow;
    }
};

// A request field at fault: its name ("chat_template_kwargs.thinking") and what is wrong with it.
struct FieldError {
    std::string field;
    std::string message;
};

// DeepSeek's API mapping of reasoning_effort names: none -> "" (thinking off); minimal, low, medium, high ->
// "high"; xhigh, max -> "max". nullopt for any other name.
std::optional<std::string> normalize_reasoning_effort(std::string_view name);

// The server flags: `--default-chat-template-kwargs` (a JSON object with thinking / enable_thinking /
// reasoning_effort; any other key is an error naming it) and `--reasoning-effort NAME`. Either may be
// absent. Errors name the flag.
core::Result<ChatDefaults> chat_defaults_from_flags(const std::optional<std::string>& template_kwargs_json,
                                                    const std::optional<std::string>& reasoning_effort);

// The thinking mode of a chat request object: top-level `thinking` (a bool, or DeepSeek's {"type":
// "enabled"|"disabled"}), `enable_thinking`, `reasoning_effort`, and the same inside `chat_template_kwargs`
// (which wins). Unset parts come from `defaults`; an effort without a thinking field turns thinking on
// (none turns it off); thinking without an effort gets the default effort. Errors name the field.
std::variant<ThinkingChoice, FieldError> thinking_of_request(const Json& request,
                                                             const ChatDefaults& defaults);

} // namespace deepinfer::tokenizer
