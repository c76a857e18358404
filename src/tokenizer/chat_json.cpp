// OpenAI-style request JSON -> Conversation, and thinking-mode names.

#include "tokenizer/chat_encoding.h"

#include <fstream>
#include <sstream>

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
    if (name == "chat" || name == "non-thinking") return ThinkingMode::kNonThinking;
    if (name == "thinking" || name == "thinking-low") return ThinkingMode::kThinkingLow;
    if (name == "thinking-effort-high" || name == "thinking-high") return ThinkingMode::kThinkingHigh;
    if (name == "thinking-effort-max" || name == "thinking-max") return ThinkingMode::kThinkingMax;
    return core::invalid_argument("unknown thinking mode '" + std::string(name) +
                                  "' (chat, thinking, thinking-effort-high, thinking-effort-max)");
}

std::string_view thinking_mode_name(ThinkingMode mode) {
    switch (mode) {
    case ThinkingMode::kNonThinking:
        return "chat";
    case ThinkingMode::kThinkingLow:
        return "thinking";
    case ThinkingMode::kThinkingHigh:
        return "thinking-effort-high";
    case ThinkingMode::kThinkingMax:
        return "thinking-effort-max";
    }
    return "";
}

Result<EffortTable> parse_effort_table(std::string_view name) {
    if (name == "release") return EffortTable::kRelease;
    if (name == "0731") return EffortTable::k0731;
    return core::invalid_argument("unknown effort table '" + std::string(name) + "' (release, 0731)");
}

std::string_view effort_table_name(EffortTable table) {
    switch (table) {
    case EffortTable::kRelease:
        return "release";
    case EffortTable::k0731:
        return "0731";
    }
    return "";
}

EffortTableChoice detect_effort_table(const std::string& model_dir) {
    const std::string path = model_dir + "/encoding/encoding_dsv4.py";
    std::ifstream f(path, std::ios::binary);
    if (!f) return {EffortTable::kRelease, path + " not found: release table (SGLang's fallback)"};
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string src = ss.str();
    if (src.find("REASONING_EFFORT_PROMPTS") != std::string::npos)
        return {EffortTable::k0731, path + " defines REASONING_EFFORT_PROMPTS: 0731 table"};
    if (src.find("REASONING_EFFORT_MAX") != std::string::npos)
        return {EffortTable::kRelease, path + " defines REASONING_EFFORT_MAX: release table"};
    return {EffortTable::kRelease, path + " defines neither effort table: release table (SGLang's fallback)"};
}

} // namespace deepinfer::tokenizer
