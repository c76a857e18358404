#include "structured/json_schema_validate.h"

#include <cmath>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

namespace deepinfer::structured {

namespace {

using Json = nlohmann::json;

int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

bool is_integer(const Json& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
}

bool type_matches(const Json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "number") return v.is_number();
    if (t == "integer") return is_integer(v);
    return true; // an unknown type name constrains nothing here
}

// JSON equality with numbers compared by value (1 == 1.0), as JSON Schema's enum / const require.
bool json_equal(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    if (a.type() != b.type()) return false;
    if (a.is_array()) {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (!json_equal(a[i], b[i])) return false;
        return true;
    }
    if (a.is_object()) {
        if (a.size() != b.size()) return false;
        for (auto it = a.begin(); it != a.end(); ++it) {
            auto jt = b.find(it.key());
            if (jt == b.end() || !json_equal(*it, *jt)) return false;
        }
        return true;
    }
    return a == b;
}

// std::regex recurses per input character: longer strings are not checked (a bounded stack).
constexpr size_t kMaxPatternInput = 1000;

bool regex_search(const std::string& pattern, const std::string& s) {
    if (s.size() > kMaxPatternInput) return true;
    try {
        return std::regex_search(s, std::regex(pattern, std::regex::ECMAScript));
    } catch (const std::exception&) {
        return true; // a pattern std::regex cannot compile is not checked
    }
}

class Validator {
public:
    explicit Validator(const Json& root) : root_(root) {}

    // "" when valid, else the first violation.
    std::string check(const Json& s, const Json& v, const std::string& path, int depth = 0) {
        if (depth > 64) return path + ": schema nesting (or $ref recursion) deeper than 64";
        if (s.is_boolean()) return s.get<bool>() ? "" : path + ": no value is allowed here (schema false)";
        if (!s.is_object()) return "";
        if (auto it = s.find("$ref"); it != s.end() && it->is_string()) {
            const std::string ref = it->get<std::string>();
            if (ref.rfind('#', 0) == 0) {
                try {
                    const Json& target = root_.at(Json::json_pointer(ref.substr(1)));
                    if (auto e = check(target, v, path, depth + 1); !e.empty()) return e;
                } catch (const std::exception&) {
                    return path + ": unresolvable $ref '" + ref + "'";
                }
            }
        }
        if (v.is_null() && s.value("nullable", false)) return "";
        if (auto it = s.find("type"); it != s.end()) {
            bool ok = false;
            if (it->is_string()) ok = type_matches(v, it->get<std::string>());
            if (it->is_array())
                for (const auto& t : *it) ok = ok || (t.is_string() && type_matches(v, t.get<std::string>()));
            if (!it->is_string() && !it->is_array()) ok = true;
            if (!ok) return path + ": " + v.dump() + " is not of type " + it->dump();
        }
        if (auto it = s.find("enum"); it != s.end() && it->is_array()) {
            bool found = false;
            for (const auto& e : *it) found = found || json_equal(e, v);
            if (!found) return path + ": " + v.dump() + " is not one of " + it->dump();
        }
        if (auto it = s.find("const"); it != s.end() && !json_equal(*it, v)) {
            return path + ": " + v.dump() + " is not " + it->dump();
        }
        for (const char* key : {"allOf", "anyOf", "oneOf"}) {
            auto it = s.find(key);
            if (it == s.end() || !it->is_array()) continue;
            int matched = 0;
            std::string first_error;
            for (const auto& sub : *it) {
                std::string e = check(sub, v, path, depth + 1);
                if (e.empty())
                    ++matched;
                else if (first_error.empty())
                    first_error = e;
                if (std::string(key) == "allOf" && !e.empty()) return e;
            }
            if (std::string(key) == "anyOf" && matched == 0)
                return path + ": matches no anyOf branch (" + first_error + ")";
            if (std::string(key) == "oneOf" && matched != 1)
                return path + ": matches " + std::to_string(matched) + " oneOf branches, not exactly one";
        }
        if (auto it = s.find("not"); it != s.end() && check(*it, v, path, depth + 1).empty()) {
            return path + ": matches the 'not' schema";
        }
        if (v.is_object()) return check_object(s, v, path, depth);
        if (v.is_array()) return check_array(s, v, path, depth);
        if (v.is_string()) return check_string(s, v.get<std::string>(), path);
        if (v.is_number()) return check_number(s, v.get<double>(), path);
        return "";
    }

private:
    std::string check_object(const Json& s, const Json& v, const std::string& path, int depth) {
        if (auto it = s.find("required"); it != s.end() && it->is_array()) {
            for (const auto& r : *it)
                if (r.is_string() && !v.contains(r.get<std::string>()))
                    return path + ": required property '" + r.get<std::string>() + "' is missing";
        }
        const Json* props =
            s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
        const Json* patterns = s.contains("patternProperties") && s["patternProperties"].is_object()
                                   ? &s["patternProperties"]
                                   : nullptr;
        auto additional = s.find("additionalProperties");
        for (auto it = v.begin(); it != v.end(); ++it) {
            const std::string sub = path + "." + it.key();
            bool declared = false;
            if (props && props->contains(it.key())) {
                declared = true;
                if (auto e = check((*props)[it.key()], *it, sub, depth + 1); !e.empty()) return e;
            }
            if (patterns) {
                for (auto p = patterns->begin(); p != patterns->end(); ++p) {
                    if (!regex_search(p.key(), it.key())) continue;
                    declared = true;
                    if (auto e = check(*p, *it, sub, depth + 1); !e.empty()) return e;
                }
            }
            if (!declared && additional != s.end()) {
                if (additional->is_boolean() && !additional->get<bool>())
                    return path + ": property '" + it.key() + "' is not allowed (additionalProperties false)";
                if (auto e = check(*additional, *it, sub, depth + 1); !e.empty()) return e;
            }
        }
        const auto n = static_cast<int64_t>(v.size());
        if (s.contains("minProperties") && s["minProperties"].is_number() &&
            n < s["minProperties"].get<double>())
            return path + ": fewer than " + s["minProperties"].dump() + " properties";
        if (s.contains("maxProperties") && s["maxProperties"].is_number() &&
            n > s["maxProperties"].get<double>())
            return path + ": more than " + s["maxProperties"].dump() + " properties";
        return "";
    }

    std::string check_array(const Json& s, const Json& v, const std::string& path, int depth) {
        size_t first_free = 0;
        const Json* tuple = nullptr;
        if (s.contains("prefixItems") && s["prefixItems"].is_array())
            tuple = &s["prefixItems"];
        else if (s.contains("items") && s["items"].is_array())
            tuple = &s["items"]; // draft 4-7 tuples
        if (tuple) {
            for (size_t i = 0; i < v.size() && i < tuple->size(); ++i)
                if (auto e = check((*tuple)[i], v[i], path + "[" + std::to_string(i) + "]", depth + 1);
                    !e.empty())
                    return e;
            first_free = tuple->size();
        }
        const Json* rest = nullptr;
        if (s.contains("items") && !s["items"].is_array())
            rest = &s["items"];
        else if (tuple && s.contains("additionalItems"))
            rest = &s["additionalItems"];
        if (rest) {
            for (size_t i = first_free; i < v.size(); ++i)
                if (auto e = check(*rest, v[i], path + "[" + std::to_string(i) + "]", depth + 1); !e.empty())
                    return e;
        }
        const auto n = static_cast<double>(v.size());
        if (s.contains("minItems") && s["minItems"].is_number() && n < s["minItems"].get<double>())
            return path + ": fewer than " + s["minItems"].dump() + " items";
        if (s.contains("maxItems") && s["maxItems"].is_number() && n > s["maxItems"].get<double>())
            return path + ": more than " + s["maxItems"].dump() + " items";
        if (s.value("uniqueItems", false)) {
            for (size_t i = 0; i < v.size(); ++i)
                for (size_t j = i + 1; j < v.size(); ++j)
                    if (json_equal(v[i], v[j])) return path + ": items are not unique";
        }
        return "";
    }

    static std::string check_string(const Json& s, const std::string& str, const std::string& path) {
        const auto n = static_cast<double>(code_points(str));
        if (s.contains("minLength") && s["minLength"].is_number() && n < s["minLength"].get<double>())
            return path + ": shorter than " + s["minLength"].dump() + " characters";
        if (s.contains("maxLength") && s["maxLength"].is_number() && n > s["maxLength"].get<double>())
            return path + ": longer than " + s["maxLength"].dump() + " characters";
        if (s.contains("pattern") && s["pattern"].is_string() &&
            !regex_search(s["pattern"].get<std::string>(), str))
            return path + ": " + Json(str).dump() + " does not match " + s["pattern"].dump();
        return "";
    }

    static std::string check_number(const Json& s, double x, const std::string& path) {
        auto num = [&](const char* k, double& out) {
            if (!s.contains(k) || !s[k].is_number()) return false;
            out = s[k].get<double>();
            return true;
        };
        double b = 0;
        const bool excl_min_bool = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                                   s["exclusiveMinimum"].get<bool>();
        const bool excl_max_bool = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                                   s["exclusiveMaximum"].get<bool>();
        if (num("minimum", b) && (excl_min_bool ? x <= b : x < b)) return path + ": below the minimum";
        if (num("maximum", b) && (excl_max_bool ? x >= b : x > b)) return path + ": above the maximum";
        if (num("exclusiveMinimum", b) && x <= b) return path + ": not above the exclusive minimum";
        if (num("exclusiveMaximum", b) && x >= b) return path + ": not below the exclusive maximum";
        if (num("multipleOf", b) && b > 0) {
            const double q = x / b;
            if (std::abs(q - std::round(q)) > 1e-9 * std::max(1.0, std::abs(q)))
                return path + ": not a multiple of " + s["multipleOf"].dump();
        }
        return "";
    }

    const Json& root_;
};

} // namespace

core::Status validate_json_schema(std::string_view schema_json, std::string_view instance_json) {
    Json schema = Json::parse(schema_json, nullptr, false);
    if (schema.is_discarded()) return core::invalid_argument("the JSON Schema does not parse as JSON");
    Json value = Json::parse(instance_json, nullptr, false);
    if (value.is_discarded()) return core::invalid_argument("the value does not parse as JSON");
    std::string e = Validator(schema).check(schema, value, "$");
    if (!e.empty()) return core::invalid_argument(e);
    return {};
}

} // namespace deepinfer::structured
