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
#include "tokenizer/added_vocabulary.h"
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

// The official encoder's (thinking_mode, reasoning_effort) pairs. What an effort renders depends on the
// checkpoint's EffortTable below.
enum class ThinkingMode {
    kNonThinking,  // "chat": thinking_mode="chat", reply opens with </think>
    kThinkingLow,  // "thinking": thinking_mode="thinking", reasoning_effort None/"low": no effort prompt
    kThinkingHigh, // "thinking-effort-high": reasoning_effort="high"
    kThinkingMax,  // "thinking-effort-max": reasoning_effort="max"
};

// The reasoning-effort prompts differ between DeepSeek V4 checkpoints (SGLang and smg choose per checkpoint):
//   kRelease (the V4 release's encoding_dsv4.py, REASONING_EFFORT_MAX):
//       high → nothing, max → "Reasoning Effort: Absolute maximum ..."
//   k0731 (DeepSeek-V4-Flash-0731's encoding_dsv4.py, REASONING_EFFORT_PROMPTS):
//       low → nothing, high → "Reasoning Effort: Absolute maximum ...", max → "Reasoning Effort: Beyond
//       maximum ..."
enum class EffortTable { kRelease, k0731 };

struct ChatOptions {
    ThinkingMode mode = ThinkingMode::kThinkingHigh;
    EffortTable effort_table = EffortTable::k0731;
    bool drop_thinking = true; // drop reasoning of turns before the last user message
    bool add_bos = true;
    // The first `context_messages` messages are an already-encoded prefix (the official encoder's
    // `context=`): they shape the rendering (indices, last user turn, dropped reasoning) but only the
    // messages after them are rendered, without BOS.
    std::size_t context_messages = 0;
};

// Renders the prompt text (special tokens spelled out; encode it with Tokenizer::encode).
core::Result<std::string> render_chat(const Conversation& conversation, const ChatOptions& options);

// A byte range [begin, end) of a rendered prompt.
using ContentRange = ByteRange;
// Also reports where message text (content, content parts except image placeholders, reasoning, tool
// results) landed in the prompt, in order. Encoding those ranges with Tokenizer::encode_plain_ranges keeps
// role markers typed by users as text (deepinfer's --plain-content); everything else matches as usual.
core::Result<std::string> render_chat(const Conversation& conversation, const ChatOptions& options,
                                      std::vector<ContentRange>* content);

// Mode names say what they render: "chat", "thinking" (no effort prompt), "thinking-effort-high",
// "thinking-effort-max". Older names stay as aliases: "non-thinking" (chat), "thinking-low" (thinking),
// "thinking-high", "thinking-max". Note: before the effort tables, bare "thinking" meant thinking-high;
// it now means the official thinking_mode="thinking" with no reasoning_effort.
core::Result<ThinkingMode> parse_thinking_mode(std::string_view name);
std::string_view thinking_mode_name(ThinkingMode mode);

// "release" or "0731".
core::Result<EffortTable> parse_effort_table(std::string_view name);
std::string_view effort_table_name(EffortTable table);

// The effort table a checkpoint ships, decided like SGLang: its encoding/encoding_dsv4.py defines
// REASONING_EFFORT_PROMPTS → k0731; REASONING_EFFORT_MAX → kRelease; file missing or inconclusive →
// kRelease. `reason` says which (for logs and `render-chat --verbose`).
struct EffortTableChoice {
    EffortTable table = EffortTable::kRelease;
    std::string reason;
};
EffortTableChoice detect_effort_table(const std::string& model_dir);

// From an OpenAI-style request object: {"messages": [...], "tools": [...]}. Accepts both
// "reasoning_content" and "reasoning" on assistant messages; content may be a string, null, or parts.
core::Result<Conversation> conversation_from_json(const Json& request);

} // namespace deepinfer::tokenizer
