#include "tokenizer/chat_defaults.h"

#include <vector>

namespace deepinfer::tokenizer {

using json = Json;

std::optional<std::string> normalize_reasoning_effort(std::string_view name) {
    if (name == "none") return std::string();
    if (name == "minimal" || name == "low" || name == "medium" || name == "high") return std::string("high");
    if (name == "xhigh" || name == "max") return std::string("max");
    return std::nullopt;
}

namespace {

constexpr const char* kEffortNames = "none, minimal, low, medium, high, xhigh, max";

// thinking / enable_thinking: a bool, or DeepSeek's {"type": "enabled"|"disabled"}. nullopt: not a
// thinking value.
std::optional<bool> thinking_value(const json& v) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_object() && v.contains("type") && v.at("type").is_string()) {
        const std::string& t = v.at("type").get_ref<const std::string&>();
        if (t == "enabled") return true;
        if (t == "disabled") return false;
    }
    return std::nullopt;
}

bool present(const json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) && !obj.at(key).is_null();
}

struct Fields {
    std::optional<bool> thinking;
    std::optional<std::string> effort; // raw name
};

// Reads the thinking fields of `obj`; `prefix` names them in errors ("" or "chat_template_kwargs.").
std::optional<FieldError> read_fields(const json& obj, const std::string& prefix, Fields& f) {
    for (const char* key : {"thinking", "enable_thinking"}) {
        if (!present(obj, key)) continue;
        auto v = thinking_value(obj.at(key));
        if (!v) {
            return FieldError{prefix + key,
                              "'" + prefix + key +
                                  "' must be a boolean or {\"type\": \"enabled\"|\"disabled\"}"};
        }
        f.thinking = *v;
    }
    if (present(obj, "reasoning_effort")) {
        if (!obj.at("reasoning_effort").is_string()) {
            return FieldError{prefix + "reasoning_effort",
                              "'" + prefix + "reasoning_effort' must be a string"};
        }
        f.effort = obj.at("reasoning_effort").get<std::string>();
    }
    return std::nullopt;
}

} // namespace

core::Result<ChatDefaults> chat_defaults_from_flags(const std::optional<std::string>& template_kwargs_json,
                                                    const std::optional<std::string>& reasoning_effort) {
    ChatDefaults d;
    std::optional<std::string> effort;
    if (template_kwargs_json) {
        const std::string flag = "--default-chat-template-kwargs";
        json k = json::parse(*template_kwargs_json, nullptr, false);
        if (k.is_discarded() || !k.is_object()) {
            return core::invalid_argument(flag + ": '" + *template_kwargs_json +
                                          "' is not a JSON object (e.g. '{\"thinking\": false}')");
        }
        std::vector<std::string> unknown;
        for (const auto& [key, value] : k.items()) {
            if (key != "thinking" && key != "enable_thinking" && key != "reasoning_effort")
                unknown.push_back(key);
        }
        if (!unknown.empty()) {
            std::string names;
            for (const auto& u : unknown) names += (names.empty() ? "'" : ", '") + u + "'";
            return core::invalid_argument(flag + ": unknown key" + (unknown.size() > 1 ? "s " : " ") + names +
                                          " (known: thinking, enable_thinking, reasoning_effort)");
        }
        Fields f;
        if (auto e = read_fields(k, "", f)) return core::invalid_argument(flag + ": " + e->message);
        if (f.thinking) d.thinking = *f.thinking;
        effort = f.effort;
        if (f.effort && !f.thinking) d.thinking = true;
    }
    if (reasoning_effort) {
        effort = *reasoning_effort;
        d.thinking = true;
    }
    if (effort) {
        auto norm = normalize_reasoning_effort(*effort);
        if (!norm) {
            return core::invalid_argument(
                std::string(reasoning_effort ? "--reasoning-effort" : "--default-chat-template-kwargs") +
                ": unknown reasoning effort '" + *effort + "' (one of " + kEffortNames + ")");
        }
        if (norm->empty()) {
            d.thinking = false;
        } else {
            d.reasoning_effort = *norm;
        }
    }
    return d;
}

std::variant<ThinkingChoice, FieldError> thinking_of_request(const json& request,
                                                             const ChatDefaults& defaults) {
    Fields f;
    if (auto e = read_fields(request, "", f)) return *e;
    if (present(request, "chat_template_kwargs")) {
        const json& k = request.at("chat_template_kwargs");
        if (!k.is_object())
            return FieldError{"chat_template_kwargs", "'chat_template_kwargs' must be an object"};
        if (auto e = read_fields(k, "chat_template_kwargs.", f)) return *e;
    }
    ThinkingChoice c;
    c.thinking = f.thinking.value_or(defaults.thinking);
    std::string effort = defaults.reasoning_effort;
    if (f.effort) {
        auto norm = normalize_reasoning_effort(*f.effort);
        if (!norm) {
            return FieldError{"reasoning_effort", "'reasoning_effort' must be one of " +
                                                      std::string(kEffortNames) + "; got '" + *f.effort +
                                                      "'"};
        }
        if (norm->empty()) {
            c.thinking = false;
        } else {
            effort = *norm;
            if (!f.thinking) c.thinking = true;
        }
    }
    if (c.thinking) c.reasoning_effort = effort;
    return c;
}

} // namespace deepinfer::tokenizer
