#pragma once
// Internal to the structured module: the JSON Schema -> GBNF compiler, shared by json_schema.cpp and
// dsml_tools.cpp. Not part of the module's API.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "structured/json_schema.h"
#include "structured/number_ranges.h"
#include "structured/regex.h"

namespace deepinfer::structured::detail {

using Json = nlohmann::ordered_json;

using Json = nlohmann::ordered_json;

// Formats as regexes over the string's body (all their characters need no JSON escaping).
inline const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", "[12][0-9]{3}-(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]|[12][0-9]|30))|"
             "(02-(0[1-9]|1[0-9]|2[0-8])))"},
    {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"date-time",
     "[12][0-9]{3}-(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]|[12][0-9]|30))|"
     "(02-(0[1-9]|1[0-9]|2[0-8])))T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
     "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"email", "[a-z0-9][a-z0-9._+-]{0,30}@[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z]{2,6}){1,2}"},
    {"ipv4",
     "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
    {"hostname", "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}"},
    {"uri", "https?://[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z]{2,6}){1,2}(/[A-Za-z0-9._~-]{1,20}){0,4}"},
};

// Keywords whose constraint the grammar cannot guarantee.
inline const char* const kRefused[] = {"uniqueItems",
                                       "multipleOf",
                                       "not",
                                       "if",
                                       "then",
                                       "else",
                                       "dependentSchemas",
                                       "patternProperties",
                                       "contains",
                                       "propertyNames",
                                       "dependentRequired",
                                       "unevaluatedProperties"};

class Compiler {
public:
    Compiler(const Json& root, JsonSchemaOptions o) : root_(&root), opt_(o) {}

    core::Result<std::string> run() {
        add_common();
        DI_ASSIGN_OR_RETURN(std::string top, visit(*root_, "#"));
        std::string out = "root ::= " + top + "\n";
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

    std::string free_object() {
        add_common();
        std::string out = "root ::= " + any_object(0) + "\n";
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

    // Internal pieces the DSML tool-call compiler (dsml_tools.cpp) reuses.
    void begin() { add_common(); }
    // $refs resolve against `root` from now on.
    void set_root(const Json& root) {
        root_ = &root;
        refs_.clear();
    }
    std::string rules_text() const {
        std::string out;
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }
    core::Status error(const std::string& where, const std::string& what) const {
        return core::invalid_argument("json schema at '" + where + "': " + what);
    }

    void rule(const std::string& name, std::string body) {
        if (!rules_.count(name)) rules_[name] = std::move(body);
    }

    void add_common() {
        rule("ws",
             opt_.max_whitespace > 0 ? "[ \\t\\n]{0," + std::to_string(opt_.max_whitespace) + "}" : "\"\"");
        // One code point of a string body: unescaped, or an escape (no lone surrogates, so lengths count
        // as Python counts them).
        rule("jchar",
             "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | "
             "[dD] [0-7] [0-9a-fA-F]{2} ) )");
        rule("jstring", "\"\\\"\" jchar* \"\\\"\"");
        rule("jint", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )");
        rule("jnumber", "jint ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?");
        rule("jbool", "\"true\" | \"false\"");
        rule("jnull", "\"null\"");
    }

    // Free-form values, nested at most kMaxFreeDepth deep.
    std::string any_value(int depth) {
        const std::string name = "jvalue" + std::to_string(depth);
        if (!rules_.count(name)) {
            std::string body = "jstring | jnumber | jbool | jnull";
            if (depth < kMaxFreeDepth)
                body = any_object(depth + 1) + " | " + any_array(depth + 1) + " | " + body;
            rule(name, body);
        }
        return name;
    }
    std::string any_object(int depth) {
        const std::string name = "jobject" + std::to_string(depth);
        if (!rules_.count(name)) {
            const std::string v = any_value(depth);
            rule(name, "\"{\" ws ( jstring ws \":\" ws " + v + " ( ws \",\" ws jstring ws \":\" ws " + v +
                           " )* )? ws \"}\"");
        }
        return name;
    }
    std::string any_array(int depth) {
        const std::string name = "jarray" + std::to_string(depth);
        if (!rules_.count(name)) {
            const std::string v = any_value(depth);
            rule(name, "\"[\" ws ( " + v + " ( ws \",\" ws " + v + " )* )? ws \"]\"");
        }
        return name;
    }

    std::string fresh(const std::string& hint) {
        std::string n;
        for (char c : hint)
            n += (std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-');
        if (n.size() > 40) n = n.substr(n.size() - 40);
        return "s" + std::to_string(counter_++) + "-" + n;
    }

    static std::string literal_json(const Json& v) { return gbnf_literal(v.dump()); }

    core::Result<const Json*> resolve(const std::string& ref, const std::string& where) {
        if (ref.empty() || ref[0] != '#')
            return error(where, "only local $ref ('#/...') is supported, got '" + ref + "'");
        const Json* cur = root_;
        std::size_t i = 1;
        while (i < ref.size()) {
            if (ref[i] != '/') return error(where, "bad $ref '" + ref + "'");
            const std::size_t j = ref.find('/', i + 1);
            std::string tok = ref.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
            std::string key;
            for (std::size_t k = 0; k < tok.size(); ++k) { // JSON pointer escapes
                if (tok[k] == '~' && k + 1 < tok.size())
                    key += tok[++k] == '1' ? '/' : '~';
                else
                    key += tok[k];
            }
            if (cur->is_object() && cur->contains(key))
                cur = &(*cur)[key];
            else if (cur->is_array() && !key.empty() &&
                     key.find_first_not_of("0123456789") == std::string::npos &&
                     std::stoul(key) < cur->size())
                cur = &(*cur)[std::stoul(key)];
            else
                return error(where, "$ref '" + ref + "' does not resolve");
            i = j == std::string::npos ? ref.size() : j;
        }
        return cur;
    }

    core::Result<std::string> visit(const Json& s, const std::string& where) {
        if (++depth_ > 256) return error(where, "schema nested too deeply");
        auto r = visit_inner(s, where);
        --depth_;
        return r;
    }

    core::Result<std::string> visit_inner(const Json& s, const std::string& where) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return any_value(0);
            return error(where, "a `false` schema admits no value");
        }
        if (!s.is_object()) return error(where, "a schema must be an object or a boolean");
        for (const char* k : kRefused)
            if (s.contains(k))
                return error(where, std::string("'") + k + "' is not supported in constrained decoding");
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) return error(where, "$ref must be a string");
            const std::string ref = s["$ref"].get<std::string>();
            auto it = refs_.find(ref);
            if (it != refs_.end()) return it->second;
            const std::string name = fresh("ref-" + ref);
            refs_[ref] = name;
            DI_ASSIGN_OR_RETURN(const Json* target, resolve(ref, where));
            DI_ASSIGN_OR_RETURN(std::string body, visit(*target, ref));
            rule(name, body);
            return name;
        }
        std::string e;
        DI_ASSIGN_OR_RETURN(e, visit_value(s, where));
        if (s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>())
            e = "( " + e + " | jnull )";
        return e;
    }

    core::Result<std::string> visit_value(const Json& s, const std::string& where) {
        if (s.contains("const")) return literal_json(s["const"]);
        if (s.contains("enum")) {
            const Json& en = s["enum"];
            if (!en.is_array() || en.empty()) return error(where, "'enum' must be a non-empty array");
            std::string out = "(";
            for (std::size_t i = 0; i < en.size(); ++i) out += (i ? " | " : "") + literal_json(en[i]);
            return out + ")";
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            const Json& alts = s[key];
            if (!alts.is_array() || alts.empty())
                return error(where, std::string("'") + key + "' must be a non-empty array");
            std::string out = "(";
            for (std::size_t i = 0; i < alts.size(); ++i) {
                // Sibling keywords (type, properties) apply to every branch.
                Json branch = alts[i];
                if (branch.is_object())
                    for (auto it = s.begin(); it != s.end(); ++it)
                        if (it.key() != key && !branch.contains(it.key()) && it.key() != "nullable")
                            branch[it.key()] = it.value();
                DI_ASSIGN_OR_RETURN(std::string b,
                                    visit(branch, where + "/" + key + "/" + std::to_string(i)));
                out += (i ? " | " : "") + b;
            }
            return out + ")";
        }
        if (s.contains("allOf")) {
            const Json& parts = s["allOf"];
            if (!parts.is_array() || parts.empty()) return error(where, "'allOf' must be a non-empty array");
            Json merged = s;
            merged.erase("allOf");
            if (s.contains("additionalProperties"))
                return error(where, "additionalProperties beside allOf applies to the outer properties only "
                                    "(JSON Schema semantics); move it into the object schema");
            for (std::size_t i = 0; i < parts.size(); ++i) {
                const Json* p = &parts[i];
                if (p->is_object() && p->contains("$ref") && (*p)["$ref"].is_string()) {
                    DI_ASSIGN_OR_RETURN(p, resolve((*p)["$ref"].get<std::string>(), where));
                }
                if (!p->is_object())
                    return error(where + "/allOf/" + std::to_string(i), "must be an object schema");
                if (p->contains("additionalProperties") && parts.size() > 1)
                    return error(where + "/allOf/" + std::to_string(i),
                                 "additionalProperties inside allOf sees only its own part's properties "
                                 "(JSON Schema semantics); this combination is not supported");
                for (auto it = p->begin(); it != p->end(); ++it) {
                    if (it.key() == "properties" && merged.contains("properties") && it.value().is_object()) {
                        for (auto pt = it.value().begin(); pt != it.value().end(); ++pt)
                            merged["properties"][pt.key()] = pt.value();
                    } else if (it.key() == "required" && merged.contains("required") &&
                               it.value().is_array()) {
                        for (const Json& r : it.value()) merged["required"].push_back(r);
                    } else if (!merged.contains(it.key())) {
                        merged[it.key()] = it.value();
                    } else if (merged[it.key()] != it.value()) {
                        return error(where + "/allOf/" + std::to_string(i),
                                     "cannot merge conflicting '" + it.key() + "' keywords");
                    }
                }
            }
            return visit(merged, where);
        }
        std::vector<std::string> types;
        if (s.contains("type")) {
            const Json& t = s["type"];
            if (t.is_string())
                types.push_back(t.get<std::string>());
            else if (t.is_array())
                for (const Json& x : t) {
                    if (!x.is_string()) return error(where, "'type' entries must be strings");
                    types.push_back(x.get<std::string>());
                }
            else
                return error(where, "'type' must be a string or an array of strings");
            if (types.empty()) return error(where, "'type' is an empty list");
        } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
            types.push_back("object");
        } else if (s.contains("items") || s.contains("prefixItems")) {
            types.push_back("array");
        } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
                   s.contains("maxLength")) {
            types.push_back("string");
        } else {
            return any_value(0);
        }
        std::string out;
        for (std::size_t i = 0; i < types.size(); ++i) {
            DI_ASSIGN_OR_RETURN(std::string e, visit_type(s, types[i], where));
            out += (i ? " | " : "") + e;
        }
        return types.size() == 1 ? out : "( " + out + " )";
    }

    core::Result<std::optional<int64_t>> get_count(const Json& s, const char* key, const std::string& where) {
        if (!s.contains(key)) return std::optional<int64_t>();
        const Json& v = s[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
            return error(where, std::string("'") + key + "' must be an integer in [0, 10000]");
        return std::optional<int64_t>(v.get<int64_t>());
    }

    // max < 0: unbounded. (A plain integer: GCC 12 reports std::optional<int64_t> temporaries here as
    // maybe-uninitialized, a false positive that -Werror turns into a build failure.)
    static std::string repeat(const std::string& item, int64_t min, int64_t max) {
        if (max < 0) return min == 0 ? "( " + item + " )*" : "( " + item + " ){" + std::to_string(min) + ",}";
        return "( " + item + " ){" + std::to_string(min) + "," + std::to_string(max) + "}";
    }

    core::Result<std::string> visit_type(const Json& s, const std::string& type, const std::string& where) {
        if (type == "null") return std::string("jnull");
        if (type == "boolean") return std::string("jbool");
        if (type == "string") return visit_string(s, where);
        if (type == "integer" || type == "number") return visit_number(s, type == "integer", where);
        if (type == "array") return visit_array(s, where);
        if (type == "object") return visit_object(s, where);
        return error(where, "unknown type '" + type + "'");
    }

    core::Result<std::string> visit_string(const Json& s, const std::string& where) {
        DI_ASSIGN_OR_RETURN(auto min_len, get_count(s, "minLength", where));
        DI_ASSIGN_OR_RETURN(auto max_len, get_count(s, "maxLength", where));
        if (min_len && max_len && *min_len > *max_len) return error(where, "minLength > maxLength");
        if (s.contains("pattern")) {
            if (min_len || max_len)
                return error(where, "'pattern' together with minLength/maxLength is not supported");
            if (!s["pattern"].is_string()) return error(where, "'pattern' must be a string");
            auto body =
                regex_to_gbnf_expr(s["pattern"].get<std::string>(), {.search = true, .json_string = true});
            if (!body.ok()) return error(where, body.status().message());
            const std::string name = fresh(where + "-pattern");
            rule(name, "\"\\\"\" " + *body + " \"\\\"\"");
            return name;
        }
        if (s.contains("format") && s["format"].is_string()) {
            auto it = kFormats.find(s["format"].get<std::string>());
            if (it != kFormats.end()) {
                if (min_len || max_len)
                    return error(where, "'format' together with minLength/maxLength is not supported");
                const std::string name = "format-" + it->first;
                if (!rules_.count(name)) {
                    auto body = regex_to_gbnf_expr(it->second, {.json_string = true});
                    if (!body.ok()) return body.status();
                    rule(name, "\"\\\"\" " + *body + " \"\\\"\"");
                }
                return name;
            }
        }
        if (!min_len && !max_len) return std::string("jstring");
        return "\"\\\"\" " + repeat("jchar", min_len.value_or(0), max_len.value_or(-1)) + " \"\\\"\"";
    }

    core::Result<std::string> visit_number(const Json& s, bool integer, const std::string& where) {
        std::optional<double> lo, hi;
        bool lo_ex = false, hi_ex = false;
        for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
            if (!s.contains(k)) continue;
            const Json& v = s[k];
            if (v.is_boolean()) { // draft 4: exclusiveMinimum: true modifies minimum
                if (std::string(k) == "exclusiveMinimum") lo_ex = v.get<bool>();
                if (std::string(k) == "exclusiveMaximum") hi_ex = v.get<bool>();
                continue;
            }
            if (!v.is_number()) return error(where, std::string("'") + k + "' must be a number");
            const double d = v.get<double>();
            const std::string key = k;
            if (key == "minimum" && (!lo || d > *lo)) lo = d;
            if (key == "maximum" && (!hi || d < *hi)) hi = d;
            if (key == "exclusiveMinimum") lo = d, lo_ex = true;
            if (key == "exclusiveMaximum") hi = d, hi_ex = true;
        }
        if (!lo && !hi) return std::string(integer ? "jint" : "jnumber");
        const double limit = static_cast<double>(kMaxJsonInt);
        if ((lo && std::fabs(*lo) > limit) || (hi && std::fabs(*hi) > limit))
            return error(where, "bound out of range");
        std::string e;
        if (integer) {
            const int64_t a = !lo     ? -kMaxJsonInt
                              : lo_ex ? static_cast<int64_t>(std::floor(*lo)) + 1
                                      : static_cast<int64_t>(std::ceil(*lo));
            const int64_t b = !hi     ? kMaxJsonInt
                              : hi_ex ? static_cast<int64_t>(std::ceil(*hi)) - 1
                                      : static_cast<int64_t>(std::floor(*hi));
            e = integer_range_expr(a, b);
        } else {
            e = number_range_expr(lo.value_or(-limit), lo && lo_ex, hi.value_or(limit), hi && hi_ex);
        }
        if (e.empty())
            return error(where,
                         "no " + std::string(integer ? "integer" : "number") + " satisfies the bounds");
        const std::string name = fresh(where + (integer ? "-int" : "-num"));
        rule(name, e);
        return name;
    }

    core::Result<std::string> visit_array(const Json& s, const std::string& where) {
        DI_ASSIGN_OR_RETURN(auto min_items, get_count(s, "minItems", where));
        DI_ASSIGN_OR_RETURN(auto max_items, get_count(s, "maxItems", where));
        if (min_items && max_items && *min_items > *max_items) return error(where, "minItems > maxItems");
        const std::string name = fresh(where + "-array");
        rules_[name] = ""; // reserve (recursion through $ref)
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const Json& p = s["prefixItems"];
            if (!p.is_array()) return error(where, "'prefixItems' must be an array");
            for (std::size_t i = 0; i < p.size(); ++i) {
                DI_ASSIGN_OR_RETURN(std::string e, visit(p[i], where + "/prefixItems/" + std::to_string(i)));
                prefix.push_back(e);
            }
        }
        std::string item;
        bool more = true;
        if (s.contains("items")) {
            if (s["items"].is_boolean() && !s["items"].get<bool>())
                more = false;
            else {
                DI_ASSIGN_OR_RETURN(item, visit(s["items"], where + "/items"));
            }
        } else {
            item = any_value(1);
        }
        std::string body;
        if (!prefix.empty()) {
            // A tuple: the prefix items, all of them (then more items only up to maxItems).
            const int64_t n = static_cast<int64_t>(prefix.size());
            if (max_items && *max_items < n) return error(where, "maxItems is smaller than prefixItems");
            body = "\"[\" ws";
            for (std::size_t i = 0; i < prefix.size(); ++i) body += (i ? " ws \",\" ws " : " ") + prefix[i];
            if (more && (!max_items || *max_items > n)) {
                const int64_t extra = max_items ? *max_items - n : -1;
                body += " " + repeat("ws \",\" ws " + item, 0, extra);
            }
            body += " ws \"]\"";
        } else {
            const int64_t mn = min_items.value_or(0);
            if (!more) {
                if (mn > 0) return error(where, "minItems > 0 but items is false");
                body = "\"[\" ws \"]\"";
            } else if (max_items && *max_items == 0) {
                body = "\"[\" ws \"]\"";
            } else {
                const int64_t rest = max_items ? *max_items - 1 : -1;
                std::string items = item + " " + repeat("ws \",\" ws " + item, mn > 0 ? mn - 1 : 0, rest);
                body = "\"[\" ws " + (mn > 0 ? items : "( " + items + " )?") + " ws \"]\"";
            }
        }
        rules_[name] = body;
        return name;
    }

    core::Result<std::string> visit_object(const Json& s, const std::string& where) {
        const std::string name = fresh(where + "-object");
        rules_[name] = "";
        std::vector<std::pair<std::string, std::string>> props; // (key literal, value expr)
        std::vector<bool> required;
        std::vector<std::string> req_names;
        if (s.contains("required")) {
            if (!s["required"].is_array()) return error(where, "'required' must be an array");
            for (const Json& r : s["required"]) {
                if (!r.is_string()) return error(where, "'required' entries must be strings");
                req_names.push_back(r.get<std::string>());
            }
        }
        auto is_required = [&](const std::string& k) {
            return std::find(req_names.begin(), req_names.end(), k) != req_names.end();
        };
        std::vector<std::string> seen;
        if (s.contains("properties")) {
            const Json& p = s["properties"];
            if (!p.is_object()) return error(where, "'properties' must be an object");
            for (auto it = p.begin(); it != p.end(); ++it) {
                DI_ASSIGN_OR_RETURN(std::string v, visit(it.value(), where + "/properties/" + it.key()));
                props.emplace_back(literal_json(Json(it.key())), v);
                required.push_back(is_required(it.key()));
                seen.push_back(it.key());
            }
        }
        const bool closed = s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
                            !s["additionalProperties"].get<bool>();
        for (const std::string& r : req_names) // required but not described: any value
            if (std::find(seen.begin(), seen.end(), r) == seen.end()) {
                if (closed)
                    return error(where, "property '" + r +
                                            "' is required but additionalProperties is false and " +
                                            "it is not in properties: no instance can validate");
                props.emplace_back(literal_json(Json(r)), any_value(1));
                required.push_back(true);
                seen.push_back(r);
            }
        std::string body;
        if (props.empty()) {
            DI_ASSIGN_OR_RETURN(auto min_p, get_count(s, "minProperties", where));
            DI_ASSIGN_OR_RETURN(auto max_p, get_count(s, "maxProperties", where));
            bool extra = true;
            std::string value = any_value(1);
            if (s.contains("additionalProperties")) {
                const Json& ap = s["additionalProperties"];
                if (ap.is_boolean())
                    extra = ap.get<bool>();
                else {
                    DI_ASSIGN_OR_RETURN(value, visit(ap, where + "/additionalProperties"));
                }
            }
            const int64_t mn = min_p.value_or(0);
            if (!extra || (max_p && *max_p == 0)) {
                if (mn > 0) return error(where, "minProperties > 0 but no property is allowed");
                body = "\"{\" ws \"}\"";
            } else {
                // Repeated keys would collapse when parsed, so minProperties > 1 is not guaranteed: refuse.
                if (mn > 1)
                    return error(where, "minProperties > 1 without declared properties is not supported");
                const std::string kv = "jstring ws \":\" ws " + value;
                const int64_t rest = max_p ? *max_p - 1 : -1;
                const std::string items = kv + " " + repeat("ws \",\" ws " + kv, 0, rest);
                body = "\"{\" ws " + (mn > 0 ? items : "( " + items + " )?") + " ws \"}\"";
            }
        } else {
            // Properties in schema order; optional ones may be skipped. part(i, first): properties i.. with
            // `first` = nothing written yet (so no leading comma).
            const std::size_t n = props.size();
            auto part = [&](std::size_t i, bool first) {
                return name + "-p" + std::to_string(i) + (first ? "f" : "r");
            };
            for (std::size_t i = n + 1; i-- > 0;) {
                for (bool first : {true, false}) {
                    if (i == n) {
                        rule(part(i, first), "\"\"");
                        continue;
                    }
                    const std::string kv = std::string(first ? "" : "ws \",\" ws ") + props[i].first +
                                           " ws \":\" ws " + props[i].second;
                    std::string b = kv + " " + part(i + 1, false);
                    if (!required[i]) b = "( " + b + " ) | " + part(i + 1, first);
                    rule(part(i, first), b);
                }
            }
            body = "\"{\" ws " + part(0, true) + " ws \"}\"";
        }
        rules_[name] = body;
        return name;
    }

    const Json* root_;
    JsonSchemaOptions opt_;
    std::map<std::string, std::string> rules_;
    std::map<std::string, std::string> refs_;
    int counter_ = 0;
    int depth_ = 0;
};

} // namespace deepinfer::structured::detail
