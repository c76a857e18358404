#include "server/anthropic_format.h"

#include <map>

#include "server/json_fields.h"
#include "server/server_state.h"

namespace deepinfer::server {

using ojson = nlohmann::ordered_json;

namespace {

bool has(const ojson& o, const char* key) {
    return o.is_object() && o.contains(key) && !o.at(key).is_null();
}

// Text of a string or a list of text blocks (other block types: an error naming them).
std::optional<ApiError> text_of(const ojson& v, const std::string& path, std::string& out) {
    if (v.is_string()) {
        out = v.get<std::string>();
        return std::nullopt;
    }
    if (!v.is_array())
        return invalid_param(path, "'" + path + "' must be a string or a list of content blocks");
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = path + "[" + std::to_string(i) + "]";
        const ojson& b = v[i];
        if (!b.is_object() || !has(b, "type") || !b.at("type").is_string())
            return invalid_param(p, "'" + p + "' must be a content block with a 'type'");
        if (b.at("type") != "text") {
            return ApiError{400, "invalid_request_error",
                            "'" + p + "': content block type '" + b.at("type").get<std::string>() +
                                "' is not supported here (text only)",
                            p, "unsupported_value"};
        }
        if (!has(b, "text") || !b.at("text").is_string())
            return invalid_param(p + ".text", "'" + p + ".text' must be a string");
        if (!out.empty()) out += "\n\n";
        out += b.at("text").get<std::string>();
    }
    return std::nullopt;
}

std::optional<ApiError> translate_message(const ojson& m, const std::string& path, ojson& messages) {
    if (!m.is_object()) return invalid_param(path, "'" + path + "' must be an object");
    if (!has(m, "role") || !m.at("role").is_string())
        return invalid_param(path + ".role", "'" + path + ".role' is required");
    const std::string role = m.at("role").get<std::string>();
    if (role != "user" && role != "assistant")
        return invalid_param(path + ".role",
                             "'" + path + ".role' must be user or assistant; got '" + role + "'");
    if (!has(m, "content")) return invalid_param(path + ".content", "'" + path + ".content' is required");
    const ojson& c = m.at("content");
    if (c.is_string()) {
        messages.push_back(ojson{{"role", role}, {"content", c}});
        return std::nullopt;
    }
    if (!c.is_array())
        return invalid_param(path + ".content",
                             "'" + path + ".content' must be a string or a list of content blocks");
    std::string text, thinking;
    ojson tool_calls = ojson::array();
    for (size_t i = 0; i < c.size(); ++i) {
        const std::string p = path + ".content[" + std::to_string(i) + "]";
        const ojson& b = c[i];
        if (!b.is_object() || !has(b, "type") || !b.at("type").is_string())
            return invalid_param(p, "'" + p + "' must be a content block with a 'type'");
        const std::string type = b.at("type").get<std::string>();
        if (type == "text") {
            if (!has(b, "text") || !b.at("text").is_string())
                return invalid_param(p + ".text", "'" + p + ".text' must be a string");
            if (!text.empty()) text += "\n\n";
            text += b.at("text").get<std::string>();
        } else if (type == "tool_result" && role == "user") {
            if (!has(b, "tool_use_id") || !b.at("tool_use_id").is_string())
                return invalid_param(p + ".tool_use_id", "'" + p + ".tool_use_id' must be a string");
            std::string result;
            if (has(b, "content")) {
                if (auto e = text_of(b.at("content"), p + ".content", result)) return e;
            }
            if (has(b, "is_error") && b.at("is_error").is_boolean() && b.at("is_error").get<bool>())
                result = "Error: " + result;
            messages.push_back(
                ojson{{"role", "tool"}, {"tool_call_id", b.at("tool_use_id")}, {"content", result}});
        } else if (type == "tool_use" && role == "assistant") {
            if (!has(b, "name") || !b.at("name").is_string())
                return invalid_param(p + ".name", "'" + p + ".name' must be a string");
            ojson input = has(b, "input") ? b.at("input") : ojson::object();
            if (!input.is_object()) return invalid_param(p + ".input", "'" + p + ".input' must be an object");
            tool_calls.push_back(
                ojson{{"id", has(b, "id") && b.at("id").is_string() ? b.at("id") : ojson("")},
                      {"type", "function"},
                      {"function", {{"name", b.at("name")}, {"arguments", input.dump()}}}});
        } else if (type == "thinking" && role == "assistant") {
            if (has(b, "thinking") && b.at("thinking").is_string())
                thinking += b.at("thinking").get<std::string>();
        } else if (type == "redacted_thinking" && role == "assistant") {
            // Opaque to this server: nothing to render.
        } else {
            return ApiError{400, "invalid_request_error",
                            "'" + p + "': content block type '" + type + "' is not supported in " + role +
                                " messages",
                            p + ".type", "unsupported_value"};
        }
    }
    if (role == "user") {
        if (!text.empty()) messages.push_back(ojson{{"role", "user"}, {"content", text}});
        return std::nullopt;
    }
    ojson msg = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    messages.push_back(std::move(msg));
    return std::nullopt;
}

} // namespace

std::variant<ojson, ApiError> anthropic_to_chat_request(std::string_view body,
                                                        const std::string& shape_problem) {
    if (!shape_problem.empty()) return invalid_param("", shape_problem);
    ojson a = ojson::parse(body, nullptr, false);
    if (a.is_discarded() || !a.is_object())
        return invalid_param("", "the request body must be a JSON object");
    ojson r = ojson::object();
    if (has(a, "model")) r["model"] = a.at("model");
    if (!has(a, "max_tokens")) return invalid_param("max_tokens", "'max_tokens' is required");
    if (!a.at("max_tokens").is_number_integer() || a.at("max_tokens").get<long long>() < 1)
        return invalid_param("max_tokens", "'max_tokens' must be a positive integer");
    r["max_tokens"] = a.at("max_tokens");
    ojson messages = ojson::array();
    if (has(a, "system")) {
        std::string system;
        if (auto e = text_of(a.at("system"), "system", system)) return *e;
        messages.push_back(ojson{{"role", "system"}, {"content", system}});
    }
    if (!has(a, "messages") || !a.at("messages").is_array() || a.at("messages").empty())
        return invalid_param("messages", "'messages' must be a non-empty list");
    const ojson& ms = a.at("messages");
    for (size_t i = 0; i < ms.size(); ++i) {
        if (auto e = translate_message(ms[i], "messages[" + std::to_string(i) + "]", messages)) return *e;
    }
    r["messages"] = std::move(messages);
    if (has(a, "stop_sequences")) {
        if (!a.at("stop_sequences").is_array())
            return invalid_param("stop_sequences", "'stop_sequences' must be a list of strings");
        r["stop"] = a.at("stop_sequences");
    }
    for (const char* k : {"temperature", "top_p", "top_k", "stream"}) {
        if (has(a, k)) r[k] = a.at(k);
    }
    if (has(a, "metadata") && a.at("metadata").is_object() && has(a.at("metadata"), "user_id"))
        r["user"] = a.at("metadata").at("user_id");
    if (has(a, "tools")) {
        const ojson& ts = a.at("tools");
        if (!ts.is_array()) return invalid_param("tools", "'tools' must be a list");
        ojson tools = ojson::array();
        for (size_t i = 0; i < ts.size(); ++i) {
            const std::string p = "tools[" + std::to_string(i) + "]";
            const ojson& t = ts[i];
            if (!t.is_object() || !has(t, "name") || !t.at("name").is_string())
                return invalid_param(p + ".name", "'" + p + ".name' must be a string");
            if (has(t, "type") && t.at("type").is_string() && t.at("type") != "custom") {
                return ApiError{400, "invalid_request_error",
                                "'" + p + ".type': server tool '" + t.at("type").get<std::string>() +
                                    "' is not supported (client tools with input_schema only)",
                                p + ".type", "unsupported_value"};
            }
            ojson f = {{"name", t.at("name")}};
            if (has(t, "description")) f["description"] = t.at("description");
            if (has(t, "input_schema")) {
                if (!t.at("input_schema").is_object())
                    return invalid_param(p + ".input_schema", "'" + p + ".input_schema' must be an object");
                f["parameters"] = t.at("input_schema");
            }
            tools.push_back(ojson{{"type", "function"}, {"function", std::move(f)}});
        }
        r["tools"] = std::move(tools);
    }
    if (has(a, "tool_choice")) {
        const ojson& tc = a.at("tool_choice");
        if (!tc.is_object() || !has(tc, "type") || !tc.at("type").is_string())
            return invalid_param("tool_choice", "'tool_choice' must be an object with a 'type'");
        const std::string type = tc.at("type").get<std::string>();
        if (type == "auto") {
            r["tool_choice"] = "auto";
        } else if (type == "any") {
            r["tool_choice"] = "required";
        } else if (type == "none") {
            r["tool_choice"] = "none";
        } else if (type == "tool") {
            if (!has(tc, "name") || !tc.at("name").is_string())
                return invalid_param("tool_choice.name", "'tool_choice.name' must name a tool");
            r["tool_choice"] = ojson{{"type", "function"}, {"function", {{"name", tc.at("name")}}}};
        } else {
            return invalid_param("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
        }
        if (has(tc, "disable_parallel_tool_use") && tc.at("disable_parallel_tool_use").is_boolean())
            r["parallel_tool_calls"] = !tc.at("disable_parallel_tool_use").get<bool>();
    }
    if (has(a, "thinking")) {
        const ojson& th = a.at("thinking");
        if (!th.is_object() || !has(th, "type") || !th.at("type").is_string())
            return invalid_param("thinking", "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": "
                                             "N} or {\"type\": \"disabled\"}");
        const std::string type = th.at("type").get<std::string>();
        if (type != "enabled" && type != "disabled" && type != "adaptive")
            return invalid_param("thinking.type", "'thinking.type' must be enabled or disabled");
        if (has(th, "budget_tokens") &&
            (!th.at("budget_tokens").is_number_integer() || th.at("budget_tokens").get<long long>() < 1))
            return invalid_param("thinking.budget_tokens",
                                 "'thinking.budget_tokens' must be a positive integer");
        r["chat_template_kwargs"] = ojson{{"thinking", type != "disabled"}};
    }
    // Anthropic's effort control: output_config.effort (low / medium / high / max) -> reasoning_effort.
    if (has(a, "output_config") && a.at("output_config").is_object() &&
        has(a.at("output_config"), "effort")) {
        if (!a.at("output_config").at("effort").is_string())
            return invalid_param("output_config.effort", "'output_config.effort' must be a string");
        ojson& k = r["chat_template_kwargs"];
        if (!k.is_object()) k = ojson::object();
        k["reasoning_effort"] = a.at("output_config").at("effort");
    }
    if (has(a, "deepinfer_test")) r["deepinfer_test"] = a.at("deepinfer_test"); // test hook, gated as in chat
    return r;
}

std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_sequence) {
    if (finish_reason == "length") return "max_tokens";
    if (finish_reason == "tool_calls") return "tool_use";
    if (finish_reason == "stop" && !stop_sequence.empty()) return "stop_sequence";
    return "end_turn";
}

ojson anthropic_tool_input(const std::string& arguments) {
    ojson in = ojson::parse(arguments, nullptr, false);
    return in.is_object() ? in : ojson::object();
}

std::string anthropic_error_json(const ApiError& e) {
    // Anthropic's error type per HTTP status; any other status by its class.
    static const std::map<int, const char*> kTypes = {
        {401, "authentication_error"}, {403, "permission_error"},  {404, "not_found_error"},
        {408, "timeout_error"},        {413, "request_too_large"}, {429, "rate_limit_error"},
        {503, "overloaded_error"}};
    const auto it = kTypes.find(e.http_status);
    const char* type = it != kTypes.end()     ? it->second
                       : e.http_status >= 500 ? "api_error"
                                              : "invalid_request_error";
    std::string msg = e.message;
    if (!e.param.empty() && msg.find(e.param) == std::string::npos) msg = e.param + ": " + msg;
    return detail::dump_json(ojson{{"type", "error"}, {"error", {{"type", type}, {"message", msg}}}});
}

std::string AnthropicStreamWriter::event(const ojson& data) {
    return "event: " + data.at("type").get<std::string>() + "\ndata: " + detail::dump_json(data) + "\n\n";
}

void AnthropicStreamWriter::close(std::string& out) {
    if (open_ == Open::kNone) return;
    out += event(ojson{{"type", "content_block_stop"}, {"index", index_}});
    open_ = Open::kNone;
}

void AnthropicStreamWriter::open(Open kind, const ojson& block, std::string& out) {
    close(out);
    open_ = kind;
    ++index_;
    out += event(ojson{{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

void AnthropicStreamWriter::push(const ParsedDelta& d, std::string& out) {
    if (!d.reasoning.empty()) {
        if (open_ != Open::kThinking)
            open(Open::kThinking, ojson{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
        out += event(ojson{{"type", "content_block_delta"},
                           {"index", index_},
                           {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
    }
    if (!d.content.empty()) {
        if (open_ != Open::kText) open(Open::kText, ojson{{"type", "text"}, {"text", ""}}, out);
        out += event(ojson{{"type", "content_block_delta"},
                           {"index", index_},
                           {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
    }
    for (const ToolCallDelta& tc : d.tool_calls) {
        if (open_ != Open::kToolUse || tool_index_ != tc.index) {
            open(Open::kToolUse,
                 ojson{{"type", "tool_use"}, {"id", tc.id}, {"name", tc.name}, {"input", ojson::object()}},
                 out);
            tool_index_ = tc.index;
        }
        if (!tc.arguments.empty()) {
            out += event(ojson{{"type", "content_block_delta"},
                               {"index", index_},
                               {"delta", {{"type", "input_json_delta"}, {"partial_json", tc.arguments}}}});
        }
    }
}

} // namespace deepinfer::server
