// OpenAI-style request JSON -> Conversation, and thinking-mode names.

#include "tokenizer/chat_encoding.h"

namespace deepinfer::tokenizer {

namespace {

using core::Result;

Result<Role> parse_role(const std::string& r) {
    if (r == "system") return Role::kSystem;
    if (r == "developer") return Role::kDeveloper;
    if (r == "user") return Role::kUser;
    if (r == "assistant") return Role::kAssistant;
    if (r == "tool") return Role::kTool;
    if (r == "latest_reminder") return Role::kLatestReminder;
    return core::invalid_argument("unsupported role '" + r + "'");
}

core::Status parse_content(const Json& c, const std::string& where, Message& m) {
    if (c.is_null()) return {};
    if (c.is_string()) {
        m.content = c.get<std::string>();
        return {};
    }
    if (!c.is_array()) return core::invalid_argument(where + ".content must be a string, null or an array");
    std::vector<ContentPart> parts;
    for (const Json& p : c) {
        const std::string type = p.is_object() ? p.value("type", "") : "";
        if (type == "text") {
            parts.push_back({false, p.value("text", "")});
        } else if (type == "image_url" || type == "image") {
            parts.push_back({true, ""});
        } else {
            return core::invalid_argument(where + ": unsupported content part type '" + type + "'");
        }
    }
    m.parts = std::move(parts);
    return {};
}

} // namespace

Result<Conversation> conversation_from_json(const Json& request) {
    Conversation conv;
    try {
        if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array())
            return core::invalid_argument("request must be an object with a 'messages' array");
        if (request.contains("tools") && !request["tools"].is_null()) {
            if (!request["tools"].is_array()) return core::invalid_argument("'tools' must be an array");
            conv.tools = request["tools"];
        }
        int index = 0;
        for (const Json& jm : request["messages"]) {
            const std::string where = "messages[" + std::to_string(index++) + "]";
            if (!jm.is_object() || !jm.contains("role") || !jm["role"].is_string())
                return core::invalid_argument(where + " must be an object with a string 'role'");
            Message m;
            DI_ASSIGN_OR_RETURN(m.role, parse_role(jm["role"].get<std::string>()));
            DI_RETURN_IF_ERROR(parse_content(jm.value("content", Json()), where, m));
            for (const char* key : {"reasoning_content", "reasoning"}) {
                if (jm.contains(key) && jm[key].is_string()) m.reasoning = jm[key].get<std::string>();
            }
            if (jm.contains("tool_calls") && jm["tool_calls"].is_array()) {
                for (const Json& tc : jm["tool_calls"]) {
                    ToolCall call;
                    call.id = tc.value("id", "");
                    const Json& f = tc.at("function");
                    call.name = f.at("name").get<std::string>();
                    const Json& args = f.value("arguments", Json("{}"));
                    call.arguments = args.is_string() ? args.get<std::string>() : python_json_dumps(args);
                    m.tool_calls.push_back(std::move(call));
                }
            }
            if (jm.contains("tool_call_id") && jm["tool_call_id"].is_string())
                m.tool_call_id = jm["tool_call_id"].get<std::string>();
            if (jm.contains("tools")) m.tools = jm["tools"];
            if (jm.contains("response_format")) m.response_format = jm["response_format"];
            if (jm.contains("task") && jm["task"].is_string()) m.task = jm["task"].get<std::string>();
            m.wo_eos = jm.value("wo_eos", false);
            conv.messages.push_back(std::move(m));
        }
    } catch (const std::exception& e) {
        return core::invalid_argument(std::string("malformed chat request: ") + e.what());
    }
    return conv;
}

Result<ThinkingMode> parse_thinking_mode(std::string_view name) {
    if (name == "non-thinking" || name == "chat") return ThinkingMode::kNonThinking;
    if (name == "thinking-low") return ThinkingMode::kThinkingLow;
    if (name == "thinking" || name == "thinking-high") return ThinkingMode::kThinkingHigh;
    if (name == "thinking-max") return ThinkingMode::kThinkingMax;
    return core::invalid_argument("unknown thinking mode '" + std::string(name) +
                                  "' (non-thinking, thinking-low, thinking-high, thinking-max)");
}

std::string_view thinking_mode_name(ThinkingMode mode) {
    switch (mode) {
    case ThinkingMode::kNonThinking:
        return "non-thinking";
    case ThinkingMode::kThinkingLow:
        return "thinking-low";
    case ThinkingMode::kThinkingHigh:
        return "thinking-high";
    case ThinkingMode::kThinkingMax:
        return "thinking-max";
    }
    return "";
}

} // namespace deepinfer::tokenizer
