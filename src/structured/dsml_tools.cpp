#include "structured/dsml_tools.h"

#include "structured/json_schema_compiler.h"

namespace deepinfer::structured {

namespace {

using detail::Json;

const std::string kDsml = "｜DSML｜";

std::string lit(const std::string& s) {
    return gbnf_literal(s);
}

// The raw (string="true") grammar of a string-valued parameter, or nullopt if it is not string-valued.
core::Result<std::optional<std::string>> raw_string(const Json& s, const std::string& where) {
    if (!s.is_object()) return std::optional<std::string>();
    if (s.contains("const")) {
        if (!s["const"].is_string()) return std::optional<std::string>();
        return std::optional<std::string>(lit(s["const"].get<std::string>()));
    }
    if (s.contains("enum")) {
        const Json& en = s["enum"];
        if (!en.is_array() || en.empty()) return std::optional<std::string>();
        std::string out = "(";
        for (std::size_t i = 0; i < en.size(); ++i) {
            if (!en[i].is_string()) return std::optional<std::string>();
            out += (i ? " | " : "") + lit(en[i].get<std::string>());
        }
        return std::optional<std::string>(out + ")");
    }
    if (!s.contains("type") || !s["type"].is_string() || s["type"].get<std::string>() != "string" ||
        s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf") || s.contains("$ref"))
        return std::optional<std::string>();
    if (s.contains("pattern") && s["pattern"].is_string()) {
        // Raw text may not contain '<' (the closing marker starts with it); a pattern that needs one is
        // written as a JSON string (string="false") instead.
        auto e = regex_to_gbnf_expr(s["pattern"].get<std::string>(), {.search = true, .no_angle = true});
        if (!e.ok()) return std::optional<std::string>();
        return std::optional<std::string>(*e);
    }
    if (s.contains("format") && s["format"].is_string()) {
        auto it = detail::kFormats.find(s["format"].get<std::string>());
        if (it != detail::kFormats.end()) {
            auto e = regex_to_gbnf_expr(it->second);
            if (!e.ok()) return e.status();
            return std::optional<std::string>(*e);
        }
    }
    auto count = [&](const char* k) -> std::optional<int64_t> {
        if (s.contains(k) && s[k].is_number_integer() && s[k].get<int64_t>() >= 0 &&
            s[k].get<int64_t>() <= 10000)
            return s[k].get<int64_t>();
        return std::nullopt;
    };
    const auto mn = count("minLength"), mx = count("maxLength");
    if (!mn && !mx) return std::optional<std::string>("[^<]*");
    return std::optional<std::string>("[^<]{" + std::to_string(mn.value_or(0)) + "," +
                                      (mx ? std::to_string(*mx) : std::string()) + "}");
}

} // namespace

core::Result<std::string> dsml_tool_calls_gbnf(std::string_view tools_json, const DsmlToolsOptions& options) {
    Json tools = Json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
    if (tools.is_discarded() || !tools.is_array() || tools.empty())
        return core::invalid_argument("tools: expected a non-empty JSON array");
    try {
        detail::Compiler c(tools, options.json);
        c.begin();
        std::vector<std::string> calls;
        for (std::size_t t = 0; t < tools.size(); ++t) {
            const Json& entry = tools[t];
            const Json& fn = entry.is_object() && entry.contains("function") ? entry["function"] : entry;
            const std::string where = "tools[" + std::to_string(t) + "]";
            if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string())
                return core::invalid_argument(where + ": a tool needs a string 'name'");
            const std::string name = fn["name"].get<std::string>();
            if (name.empty() || name.find_first_of("\"<>\n") != std::string::npos)
                return core::invalid_argument(where + ": tool name '" + name + "' cannot be written in DSML");
            if (!options.only.empty() &&
                std::find(options.only.begin(), options.only.end(), name) == options.only.end())
                continue;
            static const Json kNoParams = Json::object();
            const Json& params = fn.contains("parameters") ? fn["parameters"] : kNoParams;
            if (!params.is_object())
                return core::invalid_argument(where + " '" + name + "': parameters must be an object");
            c.set_root(params);
            std::vector<std::pair<std::string, bool>> items; // (parameter grammar, required)
            std::vector<std::string> required;
            if (params.contains("required") && params["required"].is_array())
                for (const Json& r : params["required"])
                    if (r.is_string()) required.push_back(r.get<std::string>());
            if (params.contains("properties") && params["properties"].is_object()) {
                for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
                    const std::string& key = it.key();
                    const std::string pw = "tool '" + name + "' #/properties/" + key;
                    if (key.empty() || key.find_first_of("\"<>\n") != std::string::npos)
                        return core::invalid_argument(pw + ": parameter name cannot be written in DSML");
                    const Json* ps = &it.value();
                    if (ps->is_object() && ps->contains("$ref") && (*ps)["$ref"].is_string()) {
                        auto r = c.resolve((*ps)["$ref"].get<std::string>(), pw);
                        if (!r.ok()) return r.status();
                        ps = *r;
                    }
                    DI_ASSIGN_OR_RETURN(std::optional<std::string> raw, raw_string(*ps, pw));
                    std::string open = "<" + kDsml + "parameter name=\"" + key + "\" string=\"";
                    std::string value;
                    if (raw) {
                        value = lit(open + "true\">") + " " + *raw;
                    } else {
                        auto v = c.visit(it.value(), "#/properties/" + key);
                        if (!v.ok()) return v.status().with_context("tool '" + name + "'");
                        value = lit(open + "false\">") + " " + *v;
                    }
                    value += " " + lit("</" + kDsml + "parameter>");
                    const bool req = std::find(required.begin(), required.end(), key) != required.end();
                    items.emplace_back(value, req);
                }
            }
            for (const std::string& r : required) {
                bool declared = false;
                if (params.contains("properties") && params["properties"].is_object())
                    declared = params["properties"].contains(r);
                if (!declared)
                    return core::invalid_argument("tool '" + name + "': required parameter '" + r +
                                                  "' is not in properties");
            }
            // Chain of parameters in order, "\n" between them (the template's layout).
            const std::string base = c.fresh("tool-" + name);
            auto part = [&](std::size_t i, bool first) {
                return base + "-p" + std::to_string(i) + (first ? "f" : "r");
            };
            for (std::size_t i = items.size() + 1; i-- > 0;) {
                for (bool first : {true, false}) {
                    if (i == items.size()) {
                        c.rule(part(i, first), "\"\"");
                        continue;
                    }
                    std::string b =
                        std::string(first ? "" : "\"\\n\" ") + items[i].first + " " + part(i + 1, false);
                    if (!items[i].second) b = "( " + b + " ) | " + part(i + 1, first);
                    c.rule(part(i, first), b);
                }
            }
            c.rule(base, lit("<" + kDsml + "invoke name=\"" + name + "\">\n") + " " + part(0, true) + " " +
                             lit("\n</" + kDsml + "invoke>"));
            calls.push_back(base);
        }
        if (calls.empty()) return core::invalid_argument("tools: none of the allowed tools is declared");
        std::string any_call = "(";
        for (std::size_t i = 0; i < calls.size(); ++i) any_call += (i ? " | " : "") + calls[i];
        any_call += ")";
        c.rule("dsml-call", any_call);
        std::string more = options.max_calls == 1 ? ""
                           : options.max_calls > 1
                               ? "( \"\\n\" dsml-call ){0," + std::to_string(options.max_calls - 1) + "}"
                               : "( \"\\n\" dsml-call )*";
        std::string out = "root ::= \"\\n\"{0,2} " + lit("<" + kDsml + "tool_calls>\n") + " dsml-call " +
                          more + " " + lit("\n</" + kDsml + "tool_calls>") + "\n";
        return out + c.rules_text();
    } catch (const std::exception& e) {
        return core::invalid_argument(std::string("tools: ") + e.what());
    }
}

} // namespace deepinfer::structured
