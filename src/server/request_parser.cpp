// Fields shared by both endpoints, and /v1/completions.

#include "server/request_parser.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "server/json_fields.h"
#include "structured/regex.h"

namespace deepinfer::server {

using detail::FieldErrors;
using detail::json;
using detail::present;

namespace detail {

std::optional<json> parse_body(std::string_view body, const ParserLimits& limits, FieldErrors& err) {
    if (std::string why = json_shape_problem(body, limits); !why.empty()) {
        err.fail("", why);
        return std::nullopt;
    }
    json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        err.fail("", "request body is not valid JSON");
        return std::nullopt;
    }
    if (!j.is_object()) {
        err.fail("", "request body must be a JSON object");
        return std::nullopt;
    }
    return j;
}

namespace {

// vLLM's guided_json / guided_regex / guided_grammar / guided_choice, also nested as
// structured_outputs.{json, regex, grammar, choice}: at most one.
bool parse_guided(const json& j, OutputConstraint& c, FieldErrors& err) {
    std::vector<std::pair<std::string, const json*>> set;
    for (const char* key : {"guided_json", "guided_regex", "guided_grammar", "guided_choice"}) {
        if (present(j, key)) set.emplace_back(key, &j.at(key));
    }
    if (present(j, "structured_outputs")) {
        const json& so = j.at("structured_outputs");
        if (!so.is_object()) return err.fail("structured_outputs", "'structured_outputs' must be an object");
        for (const char* key : {"json", "regex", "grammar", "choice"}) {
            if (present(so, key)) set.emplace_back(std::string("structured_outputs.") + key, &so.at(key));
        }
    }
    if (set.empty()) return true;
    if (set.size() > 1) {
        std::string names;
        for (const auto& [name, v] : set) names += (names.empty() ? "'" : ", '") + name + "'";
        return err.fail(set[1].first, "only one structured output constraint per request; got " + names);
    }
    const auto& [name, v] = set[0];
    const std::string kind = name.substr(name.find_last_of("_.") + 1);
    c.field = name;
    if (kind == "json") {
        if (v->is_object()) {
            c.source = dump_json(*v);
        } else if (v->is_string()) {
            json parsed = json::parse(v->get<std::string>(), nullptr, false);
            if (parsed.is_discarded() || !parsed.is_object())
                return err.fail(name, "'" + name + "' must be a JSON schema (an object or its JSON text)");
            c.source = dump_json(parsed);
        } else {
            return err.fail(name, "'" + name + "' must be a JSON schema (an object or its JSON text)");
        }
        c.kind = engine::GrammarKind::kJsonSchema;
    } else if (kind == "regex" || kind == "grammar") {
        if (!v->is_string() || v->get<std::string>().empty())
            return err.fail(name, "'" + name + "' must be a non-empty string");
        c.source = v->get<std::string>();
        c.kind = kind == "regex" ? engine::GrammarKind::kRegex : engine::GrammarKind::kGbnf;
    } else { // choice: an alternation of literals
        if (!v->is_array() || v->empty())
            return err.fail(name, "'" + name + "' must be a non-empty list of strings");
        std::string alt;
        for (const auto& e : *v) {
            if (!e.is_string() || e.get<std::string>().empty())
                return err.fail(name, "'" + name + "' must be a non-empty list of non-empty strings");
            alt += (alt.empty() ? "" : " | ") + structured::gbnf_literal(e.get<std::string>());
        }
        c.source = "root ::= " + alt + "\n";
        c.kind = engine::GrammarKind::kGbnf;
    }
    return true;
}

} // namespace

bool parse_common(const json& j, const ParserLimits& limits, CommonRequest& r, FieldErrors& err) {
    if (!present(j, "model")) return err.fail("model", "'model' is required");
    read_string(j, "model", r.model, err);
    engine::SamplingParams& s = r.sampling;
    long long v = 0;
    const long long kMaxTok = std::numeric_limits<int>::max();
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
        if (present(j, key) && read_int(j, key, 1, kMaxTok, v, err)) s.max_tokens = static_cast<int32_t>(v);
    }
    // Reads a float field in [lo, hi]; `open_low`: lo itself is refused.
    auto number = [&](const char* key, double lo, double hi, float& out, bool open_low = false) {
        if (!present(j, key)) return;
        double d = out;
        read_number(j, key, lo, hi, d, err);
        if (err.ok() && open_low && d <= lo) {
            char range[64];
            std::snprintf(range, sizeof range, "(%g, %g]", lo, hi);
            err.fail(key, "'" + std::string(key) + "' must be in " + range);
        }
        out = static_cast<float>(d);
    };
    number("temperature", 0.0, 2.0, s.temperature);
    number("top_p", 0.0, 1.0, s.top_p, /*open_low=*/true);
    v = 0;
    if (read_int(j, "top_k", -1, limits.vocab_size, v, err)) s.top_k = static_cast<int32_t>(v);
    number("min_p", 0.0, 1.0, s.min_p);
    number("presence_penalty", -2.0, 2.0, s.presence_penalty);
    number("frequency_penalty", -2.0, 2.0, s.frequency_penalty);
    number("repetition_penalty", 0.0, 10.0, s.repetition_penalty, /*open_low=*/true);
    if (present(j, "logit_bias")) {
        const json& lb = j.at("logit_bias");
        if (!lb.is_object()) return err.fail("logit_bias", "'logit_bias' must be an object");
        for (const auto& [key, val] : lb.items()) {
            char* end = nullptr;
            long long tok = std::strtoll(key.c_str(), &end, 10);
            if (key.empty() || *end != '\0' || tok < 0 || tok >= limits.vocab_size) {
                return err.fail("logit_bias", "'logit_bias' key '" + key + "' is not a token id in [0, " +
                                                  std::to_string(limits.vocab_size) + ")");
            }
            if (!val.is_number() || val.get<double>() < -100.0 || val.get<double>() > 100.0) {
                return err.fail("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
            }
            s.logit_bias.emplace_back(static_cast<int32_t>(tok), val.get<float>());
        }
    }
    if (present(j, "seed")) {
        if (!j.at("seed").is_number_integer()) return err.fail("seed", "'seed' must be an integer");
        s.seed = j.at("seed").is_number_unsigned() ? j.at("seed").get<uint64_t>()
                                                   : static_cast<uint64_t>(j.at("seed").get<int64_t>());
    }
    v = 1;
    if (read_int(j, "n", 1, limits.max_n, v, err)) s.n = static_cast<int32_t>(v);
    if (present(j, "stop")) {
        const json& st = j.at("stop");
        if (st.is_string()) {
            r.stop.push_back(st.get<std::string>());
        } else if (st.is_array()) {
            if (static_cast<int>(st.size()) > limits.max_stop) {
                return err.fail("stop",
                                "'stop' has more than " + std::to_string(limits.max_stop) + " entries");
            }
            for (const auto& e : st) {
                if (!e.is_string()) return err.fail("stop", "'stop' must be a string or a list of strings");
                r.stop.push_back(e.get<std::string>());
            }
        } else {
            return err.fail("stop", "'stop' must be a string or a list of strings");
        }
        for (const auto& s_ : r.stop) {
            if (s_.empty()) return err.fail("stop", "'stop' strings must not be empty");
        }
    }
    // vLLM's extra sampling fields (checked against the vocabulary again by the engine).
    if (present(j, "stop_token_ids")) {
        const json& ids = j.at("stop_token_ids");
        if (!ids.is_array() || static_cast<int>(ids.size()) > limits.max_stop_token_ids) {
            return err.fail("stop_token_ids", "'stop_token_ids' must be a list of at most " +
                                                  std::to_string(limits.max_stop_token_ids) + " token ids");
        }
        for (const auto& t : ids) {
            if (!t.is_number_integer() || t.get<long long>() < 0 || t.get<long long>() >= limits.vocab_size) {
                return err.fail("stop_token_ids", "'stop_token_ids' entries must be token ids in [0, " +
                                                      std::to_string(limits.vocab_size) + ")");
            }
            s.stop_token_ids.push_back(static_cast<int32_t>(t.get<long long>()));
        }
    }
    v = 0;
    if (read_int(j, "min_tokens", 0, kMaxTok, v, err)) s.min_tokens = static_cast<int32_t>(v);
    read_bool(j, "ignore_eos", s.ignore_eos, err);
    read_bool(j, "include_stop_str_in_output", r.include_stop_str_in_output, err);
    read_bool(j, "stream", r.stream, err);
    if (present(j, "stream_options")) {
        const json& so = j.at("stream_options");
        if (!so.is_object()) return err.fail("stream_options", "'stream_options' must be an object");
        if (!r.stream) return err.fail("stream_options", "'stream_options' is only allowed with stream=true");
        read_bool(so, "include_usage", r.include_usage, err, "stream_options");
    }
    read_string(j, "user", r.user, err);
    if (present(j, "deepinfer_test")) {
        const json& t = j.at("deepinfer_test");
        if (!t.is_object()) return err.fail("deepinfer_test", "'deepinfer_test' must be an object");
        read_string(t, "forced_output", r.forced_output, err, "deepinfer_test");
    }
    if (!parse_guided(j, r.constraint, err)) return false;
    return err.ok();
}

} // namespace detail

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const ParserLimits& limits) {
    FieldErrors err;
    auto j = detail::parse_body(body, limits, err);
    if (!j) return err.error();
    CompletionRequest r;
    if (!detail::parse_common(*j, limits, r.common, err)) return err.error();
    if (!present(*j, "prompt")) return invalid_param("prompt", "'prompt' is required");
    const json& p = j->at("prompt");
    auto token_list = [&](const json& arr, std::vector<int32_t>& out) {
        for (const auto& t : arr) {
            if (!t.is_number_integer() || t.get<long long>() < 0 || t.get<long long>() >= limits.vocab_size) {
                return err.fail("prompt", "'prompt' token ids must be integers in [0, " +
                                              std::to_string(limits.vocab_size) + ")");
            }
            out.push_back(static_cast<int32_t>(t.get<long long>()));
        }
        if (out.empty()) return err.fail("prompt", "'prompt' must not be empty");
        return true;
    };
    const char* kShape =
        "'prompt' must be a string, a list of strings, a list of token ids or a list of lists";
    if (p.is_string()) {
        r.prompts.emplace_back(p.get<std::string>());
    } else if (p.is_array() && !p.empty() && p[0].is_string()) {
        for (const auto& e : p) {
            if (!e.is_string()) return invalid_param("prompt", kShape);
            r.prompts.emplace_back(e.get<std::string>());
        }
    } else if (p.is_array() && !p.empty() && p[0].is_array()) {
        for (const auto& e : p) {
            std::vector<int32_t> ids;
            if (!e.is_array()) return invalid_param("prompt", kShape);
            if (!token_list(e, ids)) return err.error();
            r.prompts.emplace_back(std::move(ids));
        }
    } else if (p.is_array() && !p.empty()) {
        std::vector<int32_t> ids;
        if (!token_list(p, ids)) return err.error();
        r.prompts.emplace_back(std::move(ids));
    } else {
        return invalid_param("prompt", kShape);
    }
    if (static_cast<int>(r.prompts.size()) * r.common.sampling.n > limits.max_n * 4) {
        return invalid_param("prompt", "too many prompts x n in one request");
    }
    long long lp = 0;
    if (present(*j, "logprobs") && detail::read_int(*j, "logprobs", 0, limits.max_top_logprobs, lp, err)) {
        r.common.sampling.logprobs = static_cast<int32_t>(lp);
    }
    detail::read_bool(*j, "echo", r.echo, err);
    // vLLM's prompt_logprobs; echo with logprobs scores the prompt too (lm-eval's loglikelihood requests).
    long long plp = 0;
    if (present(*j, "prompt_logprobs") &&
        detail::read_int(*j, "prompt_logprobs", 0, limits.max_top_logprobs, plp, err)) {
        r.common.sampling.prompt_logprobs = static_cast<int32_t>(plp);
        r.prompt_logprobs = true;
    }
    if (r.echo && r.common.sampling.logprobs) {
        r.common.sampling.prompt_logprobs =
            std::max(r.common.sampling.prompt_logprobs.value_or(0), *r.common.sampling.logprobs);
    }
    if (present(*j, "suffix")) {
        return ApiError{400, "invalid_request_error", "'suffix' is not supported", "suffix",
                        "unsupported_value"};
    }
    long long best_of = r.common.sampling.n;
    detail::read_int(*j, "best_of", 1, limits.max_n, best_of, err);
    if (err.ok() && best_of != r.common.sampling.n) {
        return ApiError{400, "invalid_request_error", "'best_of' other than n is not supported", "best_of",
                        "unsupported_value"};
    }
    if (!err.ok()) return err.error();
    return r;
}

} // namespace deepinfer::server
