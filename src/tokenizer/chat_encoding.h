#pragma once
// DeepSeek V4 chat prompt rendering, byte-exact with DeepSeek's reference encoder `encoding_dsv4.py`
// (oracle: the copy vLLM 0.33.0 ships as vllm/tokenizers/deepseek_v4_encoding.py; goldens in
// tests/tokenizer/data/chat_golden.json). V4 has no Jinja template:
//   - tool schemas go into a "## Tools" block of the first system message (one is synthesized at the
//     front when the conversation has none), as DeepSeek's Rust renderer and vLLM do;
//   - assistant tool calls render as DSML (<｜DSML｜tool_calls> / invoke / parameter);
//   - V4 has no tool role: tool results merge into the following user turn as <tool_result> blocks,
//     ordered like the calls they answer; consecutive user messages merge into one turn;
//   - thinking modes prepend a reasoning-effort prompt and open the reply with <think>;
//   - reasoning of earlier turns is dropped, except when tools are defined (an active tool loop keeps it).
//
//   Conversation c = ...;  // or conversation_from_json(openai_request)
//   DI_ASSIGN_OR_RETURN(std::string prompt, render_chat(c, {.mode = ThinkingMode::kThinkingHigh}));
//   std::vector<TokenId> ids = tokenizer.encode(prompt);   // prompt starts with <｜begin▁of▁sentence｜>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/json_text.h"

namespace deepinfer::tokenizer {

enum class Role { kSystem, kDeveloper, kUser, kAssistant, kTool, kLatestReminder };

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments; // a JSON object, as text (OpenAI's function.arguments)
};

// One part of a content array: text, or an image (rendered as the image placeholder token).
struct ContentPart {
    bool is_image = false;
    std::string text;
};

struct Message {
    Role role = Role::kUser;
    std::string content;
    // When set, content is this array (OpenAI content parts) instead of `content`; parts join with "\n\n".
    std::optional<std::vector<ContentPart>> parts;
    std::optional<std::string> reasoning; // assistant: reasoning_content
    std::vector<ToolCall> tool_calls;     // assistant
    std::string tool_call_id;             // tool
    Json tools;                           // system/developer: OpenAI tool objects (array), or null
    Json response_format;                 // system/developer, or null
    std::optional<std::string> task;      // DeepSeek quick-instruction task ("action", "query", ...)
    bool wo_eos = false;                  // assistant prefix to continue: no end-of-sentence token
};

struct Conversation {
    std::vector<Message> messages;
    Json tools; // request-level tools (OpenAI format), attached to the first system message
};

enum class ThinkingMode {
    kNonThinking,  // "chat": reply opens with </think>
    kThinkingLow,  // thinking without an effort prompt
    kThinkingHigh, // thinking, "Reasoning Effort: Absolute maximum ..." prompt
    kThinkingMax,  // thinking, "Reasoning Effort: Beyond maximum ..." prompt
};

struct ChatOptions {
    ThinkingMode mode = ThinkingMode::kThinkingHigh;
    bool drop_thinking = true; // drop reasoning of turns before the last user message
    bool add_bos = true;
};

// Renders the prompt text (special tokens spelled out; encode it with Tokenizer::encode).
core::Result<std::string> render_chat(const Conversation& conversation, const ChatOptions& options);

// "non-thinking"/"chat", "thinking-low", "thinking"/"thinking-high", "thinking-max".
core::Result<ThinkingMode> parse_thinking_mode(std::string_view name);
std::string_view thinking_mode_name(ThinkingMode mode);

// From an OpenAI-style request object: {"messages": [...], "tools": [...]}. Accepts both
// "reasoning_content" and "reasoning" on assistant messages; content may be a string, null, or parts.
core::Result<Conversation> conversation_from_json(const Json& request);

} // namespace deepinfer::tokenizer
