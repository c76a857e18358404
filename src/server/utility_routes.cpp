// The endpoints beside generation: POST /tokenize and /detokenize (vLLM's shapes), GET /version,
// GET /v1/models and /v1/models/{id}, and the methods each path allows (a wrong method -> 405 with an Allow
// header).

#include <string_view>

#include "server/json_fields.h"
#include "server/server_state.h"

namespace deepinfer::server {

using detail::json;

namespace {

constexpr const char* kVersion = "0.1.0";

// The body as a JSON object whose optional `model` is the served one.
std::optional<ApiError> parse_utility_body(const HttpServer::State& s, const std::string& body, json& j) {
    const std::string problem = json_shape_problem(body, s.limits);
    j = problem.empty() ? json::parse(body, nullptr, false) : json(nullptr);
    if (!problem.empty() || j.is_discarded() || !j.is_object())
        return invalid_param("", problem.empty() ? "the body must be a JSON object" : problem);
    if (!detail::present(j, "model")) return std::nullopt;
    if (!j.at("model").is_string()) return invalid_param("model", "'model' must be a string");
    if (j.at("model") != s.model_name) return unknown_model(j.at("model").get<std::string>());
    return std::nullopt;
}

// vLLM: {"prompt": "..."} or {"messages": [...], "tools", "add_generation_prompt", thinking fields}; the
// model is optional. Returns the ids a completions prompt / chat request of that shape is given.
void handle_tokenize(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    const char* kEndpoint = "/tokenize";
    json j;
    if (auto e = parse_utility_body(s, body, j)) return s.send_error(kEndpoint, *e, res);
    const bool has_prompt = detail::present(j, "prompt"), has_messages = detail::present(j, "messages");
    if (has_prompt == has_messages) {
        return s.send_error(
            kEndpoint,
            invalid_param(has_prompt ? "messages" : "prompt", "give one of 'prompt' or 'messages'"), res);
    }
    core::Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
    if (has_prompt) {
        if (!j.at("prompt").is_string())
            return s.send_error(kEndpoint, invalid_param("prompt", "'prompt' must be a string"), res);
        ids = s.tokenize(j.at("prompt").get_ref<const std::string&>());
        if (!ids.ok()) return s.send_error(kEndpoint, from_status(ids.status(), "prompt"), res);
    } else {
        // The chat request parser validates messages, tools and thinking fields exactly as for generation.
        j["model"] = s.model_name;
        bool add_generation_prompt = true;
        detail::FieldErrors err;
        if (!detail::read_bool(j, "add_generation_prompt", add_generation_prompt, err))
            return s.send_error(kEndpoint, err.error(), res);
        auto parsed = parse_chat_request(detail::dump_json(j), s.limits);
        if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
        ChatRequest& r = std::get<ChatRequest>(parsed);
        r.prompt.add_generation_prompt = add_generation_prompt;
        ids = s.render_chat(r.prompt);
        if (!ids.ok()) return s.send_error(kEndpoint, from_status(ids.status(), "messages"), res);
    }
    json out = {{"count", ids->size()}, {"max_model_len", s.backend.context_length()}, {"tokens", *ids}};
    out["token_strs"] = nullptr;
    if (detail::present(j, "return_token_strs") && j.at("return_token_strs") == true) {
        out["token_strs"] = json::array();
        for (int32_t id : *ids) out["token_strs"].push_back(s.backend.token_text(id));
    }
    s.metrics.count_request(kEndpoint, 200);
    res.set_content(detail::dump_json(out), "application/json");
}

// vLLM: {"tokens": [ids]} -> {"prompt": text}.
void handle_detokenize(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    const char* kEndpoint = "/detokenize";
    json j;
    if (auto e = parse_utility_body(s, body, j)) return s.send_error(kEndpoint, *e, res);
    if (!detail::present(j, "tokens") || !j.at("tokens").is_array())
        return s.send_error(kEndpoint, invalid_param("tokens", "'tokens' must be a list of token ids"), res);
    const json& toks = j.at("tokens");
    auto detok = s.backend.new_detokenizer();
    std::string text;
    for (size_t i = 0; i < toks.size(); ++i) {
        const json& t = toks[i];
        if (!t.is_number_integer() || t.get<long long>() < 0 ||
            t.get<long long>() >= s.backend.vocab_size()) {
            return s.send_error(kEndpoint,
                                invalid_param("tokens[" + std::to_string(i) + "]",
                                              "'tokens[" + std::to_string(i) +
                                                  "]' must be a token id in [0, " +
                                                  std::to_string(s.backend.vocab_size()) + ")"),
                                res);
        }
        text += detok->push(static_cast<int32_t>(t.get<long long>()));
    }
    text += detok->flush();
    s.metrics.count_request(kEndpoint, 200);
    res.set_content(detail::dump_json(json{{"prompt", text}}), "application/json");
}

json model_card_json(const HttpServer::State& s) {
    return json{{"id", s.model_name},      {"object", "model"},
                {"created", s.start_time}, {"owned_by", "deepinfer"},
                {"root", s.model_name},    {"max_model_len", s.backend.context_length()}};
}

} // namespace

std::string allowed_methods(const std::string& path) {
    for (const char* p : {"/v1/chat/completions", "/v1/completions", "/v1/messages",
                          "/v1/messages/count_tokens", "/tokenize", "/detokenize"})
        if (path == p) return "POST";
    for (const char* p : {"/v1/models", "/health", "/metrics", "/version"})
        if (path == p) return "GET, HEAD";
    if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11) return "GET, HEAD";
    return {};
}

void install_utility_routes(HttpServer::State& s, const PostRoute& post) {
    s.http.Post("/tokenize", post(handle_tokenize));
    s.http.Post("/detokenize", post(handle_detokenize));
    s.http.Get("/version", [&s](const httplib::Request&, httplib::Response& res) {
        s.metrics.count_request("/version", 200);
        res.set_content(detail::dump_json(json{{"version", kVersion}}), "application/json");
    });
    s.http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
        s.metrics.count_request("/v1/models", 200);
        res.set_content(
            detail::dump_json(json{{"object", "list"}, {"data", json::array({model_card_json(s)})}}),
            "application/json");
    });
    s.http.Get(R"(/v1/models/(.+))", [&s](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        if (id != s.model_name) return s.send_error("/v1/models", unknown_model(id), res);
        s.metrics.count_request("/v1/models", 200);
        res.set_content(detail::dump_json(model_card_json(s)), "application/json");
    });
}

} // namespace deepinfer::server
