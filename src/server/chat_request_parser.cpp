// /v1/chat/completions: messages, tools, tool_choice, thinking controls, response_format, logprobs.

#include <cctype>
#include <optional>

#include "server/request_parser.h"

namespace deepinfer::server {

using detail::FieldErrors;
using detail::json;
using detail::present;

namespace {

// content: a string, null, or a list of {"type": "text", "text": ...} parts.
bool read_content(const json& m, const std::string& path, bool required, std::string& out, FieldErrors& err) {
    if (!present(m, "content")) {
        if (required) return err.fail(path + ".content", "'" + path + ".content' is required");
        return true;
    }
    const json& c = m.at("content");
    if (c.is_string()) {
        out = c.get<std::string>();
        return true;
    }
    if (!c.is_array())
        return err.fail(path + ".content", "'" + path + ".content' must be a string or a list");
    for (const auto& part : c) {
        if (!part.is_object() || !part.contains("type") || !part.at("type").is_string()) {
            return err.fail(path + ".content", "content parts must be objects with a 'type'");
        }
        if (part.at("type") != "text") {
            return err.fail(ApiError{400, "invalid_request_error",
                                     "content part type '" + part.at("type").get<std::string>() +
                                         "' is not supported (text only)",
                                     path + ".content", "unsupported_value"});
        }
        if (!part.contains("text") || !part.at("text").is_string()) {
            return err.fail(path + ".content", "text content parts need a string 'text'");
        }
        if (!out.empty()) out += "\n\n"; // DeepSeek's encoder joins text parts this way
        out += part.at("text").get<std::string>();
    }
    return true;
}

bool read_tool_calls(const json& m, const std::string& path, tokenizer::Message& msg, FieldErrors& err) {
    if (!present(m, "tool_calls")) return true;
    const json& tcs = m.at("tool_calls");
    std::string p = path + ".tool_calls";
    if (!tcs.is_array()) return err.fail(p, "'" + p + "' must be a list");
    for (size_t i = 0; i < tcs.size(); ++i) {
        const json& tc = tcs[i];
        std::string pi = p + "[" + std::to_string(i) + "]";
        if (!tc.is_object() || !tc.contains("function") || !tc.at("function").is_object()) {
            return err.fail(pi, "'" + pi + "' must be an object with a 'function'");
        }
        tokenizer::ToolCall call;
        detail::read_string(tc, "id", call.id, err, pi);
        const json& f = tc.at("function");
        if (!present(f, "name")) return err.fail(pi + ".function.name", "tool call needs a function name");
        detail::read_string(f, "name", call.name, err, pi + ".function");
        if (present(f, "arguments")) {
            const json& a = f.at("arguments");
            if (a.is_string()) {
                const std::string& text = a.get_ref<const std::string&>();
                json parsed = json_shape_problem(text, ParserLimits{}).empty()
                                  ? json::parse(text, nullptr, false)
                                  : json(nullptr);
                if (parsed.is_discarded() || !parsed.is_object()) {
                    return err.fail(pi + ".function.arguments", "tool call arguments must be a JSON object");
                }
                call.arguments = a.get<std::string>();
            } else if (a.is_object()) {
                call.arguments = detail::dump_json(a);
            } else {
                return err.fail(pi + ".function.arguments", "tool call arguments must be a JSON string");
            }
        } else {
            call.arguments = "{}";
        }
        msg.tool_calls.push_back(std::move(call));
    }
    return err.ok();
}

std::optional<tokenizer::Role> role_of(const std::string& r) {
    if (r == "system") return tokenizer::Role::kSystem;
    if (r == "developer") return tokenizer::Role::kDeveloper;
    if (r == "user") return tokenizer::Role::kUser;
    if (r == "assistant") return tokenizer::Role::kAssistant;
    if (r == "tool") return tokenizer::Role::kTool;
    return std::nullopt;
}

bool parse_messages(const json& j, ChatPrompt& prompt, FieldErrors& err) {
    if (!present(j, "messages")) return err.fail("messages", "'messages' is required");
    const json& ms = j.at("messages");
    if (!ms.is_array() || ms.empty()) return err.fail("messages", "'messages' must be a non-empty list");
    for (size_t i = 0; i < ms.size(); ++i) {
        const json& m = ms[i];
        std::string path = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return err.fail(path, "'" + path + "' must be an object");
        tokenizer::Message msg;
        std::string role, name;
        if (!present(m, "role")) return err.fail(path + ".role", "'" + path + ".role' is required");
        if (!detail::read_string(m, "role", role, err, path)) return false;
        const std::optional<tokenizer::Role> r = role_of(role);
        if (!r) return err.fail(path + ".role", "unknown role '" + role + "'");
        msg.role = *r;
        const bool is_assistant = *r == tokenizer::Role::kAssistant;
        if (!read_content(m, path, !is_assistant, msg.content, err)) return false;
        detail::read_string(m, "name", name, err, path); // checked; the V4 encoding has no names
        if (is_assistant) {
            std::string reasoning;
            detail::read_string(m, "reasoning", reasoning, err, path);
            detail::read_string(m, "reasoning_content", reasoning, err, path);
            if (!reasoning.empty()) msg.reasoning = std::move(reasoning);
            if (!read_tool_calls(m, path, msg, err)) return false;
        }
        if (*r == tokenizer::Role::kTool) detail::read_string(m, "tool_call_id", msg.tool_call_id, err, path);
        if (!err.ok()) return false;
        prompt.conversation.messages.push_back(std::move(msg));
    }
    return true;
}

bool parse_tools(const json& j, ChatPrompt& prompt, FieldErrors& err) {
    auto valid_name = [](const std::string& n) {
        if (n.empty() || n.size() > 64) return false;
        for (char c : n) {
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' &&
                c != '-') {
                return false;
            }
        }
        return true;
    };
    json& tools = prompt.conversation.tools;
    if (present(j, "tools")) {
        tools = json::array();
        const json& ts = j.at("tools");
        if (!ts.is_array()) return err.fail("tools", "'tools' must be a list");
        for (size_t i = 0; i < ts.size(); ++i) {
            std::string p = "tools[" + std::to_string(i) + "]";
            const json& t = ts[i];
            if (!t.is_object() || !present(t, "function") || !t.at("function").is_object()) {
                return err.fail(p, "'" + p + "' must be {\"type\": \"function\", \"function\": {...}}");
            }
            if (present(t, "type") && t.at("type") != "function") {
                return err.fail(p + ".type", "only tools of type 'function' are supported");
            }
            const json& f = t.at("function");
            std::string name, description;
            if (!present(f, "name")) return err.fail(p + ".function.name", "a tool needs a name");
            if (!detail::read_string(f, "name", name, err, p + ".function")) return false;
            if (!valid_name(name)) {
                return err.fail(p + ".function.name", "tool names must match [a-zA-Z0-9_.:-]{1,64}");
            }
            detail::read_string(f, "description", description, err, p + ".function");
            json fn = {{"name", name}};
            if (!description.empty()) fn["description"] = description;
            fn["parameters"] = json::object();
            if (present(f, "parameters")) {
                if (!f.at("parameters").is_object()) {
                    return err.fail(p + ".function.parameters",
                                    "tool parameters must be a JSON schema object");
                }
                fn["parameters"] = f.at("parameters");
            }
            tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
        }
    }
    if (!present(j, "tool_choice")) {
        prompt.tool_choice = prompt.has_tools() ? "auto" : "none";
        return err.ok();
    }
    const json& tc = j.at("tool_choice");
    if (tc.is_string()) {
        std::string c = tc.get<std::string>();
        if (c != "auto" && c != "none" && c != "required") {
            return err.fail("tool_choice", "'tool_choice' must be auto, none, required or a named function");
        }
        prompt.tool_choice = c;
    } else if (tc.is_object() && present(tc, "function") && tc.at("function").is_object() &&
               present(tc.at("function"), "name") && tc.at("function").at("name").is_string()) {
        std::string name = tc.at("function").at("name").get<std::string>();
        bool known = false;
        if (prompt.has_tools()) {
            for (const auto& t : tools) known = known || t.at("function").at("name") == name;
        }
        if (!known) return err.fail("tool_choice", "'tool_choice' names unknown tool '" + name + "'");
        prompt.tool_choice = "function:" + name;
    } else {
        return err.fail("tool_choice", "'tool_choice' must be auto, none, required or a named function");
    }
    if (!prompt.has_tools() && prompt.tool_choice != "none" && prompt.tool_choice != "auto") {
        return err.fail("tool_choice", "'tool_choice' requires 'tools'");
    }
    return err.ok();
}

// chat_template_kwargs.{thinking, enable_thinking, reasoning_effort}, also accepted at top level; what the
// request leaves out comes from the server's defaults (tokenizer/chat_defaults.h).
bool parse_thinking(const json& j, const tokenizer::ChatDefaults& defaults, ChatPrompt& prompt,
                    FieldErrors& err) {
    auto choice = tokenizer::thinking_of_request(j, defaults);
    if (auto* e = std::get_if<tokenizer::FieldError>(&choice)) return err.fail(e->field, e->message);
    prompt.thinking = std::get<tokenizer::ThinkingChoice>(choice).thinking;
    prompt.reasoning_effort = std::get<tokenizer::ThinkingChoice>(choice).reasoning_effort;
    return true;
}

bool parse_response_format(const json& j, ChatRequest& r, FieldErrors& err) {
    if (!present(j, "response_format")) return true;
    const json& rf = j.at("response_format");
    if (!rf.is_object() || !present(rf, "type") || !rf.at("type").is_string()) {
        return err.fail("response_format", "'response_format' must be an object with a 'type'");
    }
    r.response_format = rf.at("type").get<std::string>();
    if (r.response_format != "text") r.prompt.response_format = rf;
    if (r.response_format == "json_schema") {
        if (!present(rf, "json_schema") || !rf.at("json_schema").is_object()) {
            return err.fail("response_format.json_schema", "'response_format.json_schema' must be an object");
        }
        const json& js = rf.at("json_schema");
        if (present(js, "schema")) {
            if (!js.at("schema").is_object()) {
                return err.fail("response_format.json_schema.schema", "the schema must be a JSON object");
            }
            r.json_schema = detail::dump_json(js.at("schema"));
        }
    } else if (r.response_format != "text" && r.response_format != "json_object") {
        return err.fail("response_format.type",
                        "'response_format.type' must be text, json_object or json_schema");
    }
    if (r.response_format == "text") return true;
    OutputConstraint& c = r.common.constraint;
    if (c.kind) {
        return err.fail("response_format", "only one structured output constraint per request; got "
                                           "'response_format' and '" +
                                               c.field + "'");
    }
    c.field = "response_format";
    if (!r.json_schema.empty()) {
        c.kind = engine::GrammarKind::kJsonSchema;
        c.source = r.json_schema;
    } else {
        c.kind = engine::GrammarKind::kJsonObject;
    }
    return true;
}

// tool_choice required / named: a forced DSML tool call whose arguments follow the tool's schema.
bool force_tool_call(const json& j, ChatRequest& r, FieldErrors& err) {
    bool parallel = true;
    if (present(j, "parallel_tool_calls") && !detail::read_bool(j, "parallel_tool_calls", parallel, err))
        return false;
    const std::string& choice = r.prompt.tool_choice;
    if (choice != "required" && choice.rfind("function:", 0) != 0) return true;
    OutputConstraint& c = r.common.constraint;
    if (c.kind) {
        return err.fail("tool_choice", "a forced tool call cannot be combined with '" + c.field + "'");
    }
    json tools = json::array();
    if (r.prompt.has_tools()) {
        for (const auto& t : r.prompt.conversation.tools) {
            const json& f = t.at("function");
            tools.push_back(json{{"name", f.at("name")}, {"parameters", f.at("parameters")}});
        }
    }
    c.kind = engine::GrammarKind::kDsmlTools;
    c.field = "tool_choice";
    c.source = detail::dump_json(tools);
    if (choice != "required") c.only_tool = choice.substr(std::string("function:").size());
    c.single_call = !parallel;
    return true;
}

} // namespace

Parsed<ChatRequest> parse_chat_request(std::string_view body, const ParserLimits& limits) {
    FieldErrors err;
    auto j = detail::parse_body(body, limits, err);
    if (!j) return err.error();
    ChatRequest r;
    if (!detail::parse_common(*j, limits, r.common, err)) return err.error();
    if (!parse_messages(*j, r.prompt, err)) return err.error();
    if (!parse_tools(*j, r.prompt, err)) return err.error();
    if (!parse_thinking(*j, limits.chat_defaults, r.prompt, err)) return err.error();
    if (!parse_response_format(*j, r, err)) return err.error();
    if (!force_tool_call(*j, r, err)) return err.error();
    // In thinking mode the model thinks freely and the constraint applies from the token after </think>
    // (docs/structured-outputs.md); in non-thinking mode from the first generated token.
    r.common.constraint.after_thinking = r.common.constraint.kind.has_value() && r.prompt.thinking;
    if (present(*j, "plain_content")) { // deepinfer extension (docs/server.md)
        bool plain = false;
        if (!detail::read_bool(*j, "plain_content", plain, err)) return err.error();
        r.prompt.plain_content = plain;
    }
    detail::read_bool(*j, "logprobs", r.logprobs, err);
    long long top = 0;
    if (present(*j, "top_logprobs")) {
        if (!detail::read_int(*j, "top_logprobs", 0, limits.max_top_logprobs, top, err)) return err.error();
        if (!r.logprobs) return invalid_param("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    }
    if (r.logprobs) r.common.sampling.logprobs = static_cast<int32_t>(top);
    if (!err.ok()) return err.error();
    return r;
}

} // namespace deepinfer::server
