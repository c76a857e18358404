#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "core/logging.h"
#include "http/body.h"
#include "server/server_state.h"
#include "tokenizer/cancel.h"

namespace deepinfer::server {

HttpServer::State::State(Backend& b, ServerConfig c)
    : backend(b), config(std::move(c)), tokenize_pool(config.tokenize_threads, config.tokenize_queue) {
    model_name = config.served_model_name.empty() ? backend.model_name() : config.served_model_name;
    limits.vocab_size = backend.vocab_size();
    limits.max_n = config.max_n;
    limits.chat_defaults = config.chat_defaults;
    max_string_bytes = max_prompt_bytes(backend); // no longer string fits in the context
    start_time =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
}

namespace {
// Metric labels stay a fixed set, whatever paths clients send.
std::string endpoint_label(const std::string& path) {
    for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                              "/v1/messages", "/tokenize", "/detokenize", "/version"}) {
        if (path == known) return path;
    }
    return "other";
}
} // namespace

void HttpServer::State::send_error(const std::string& endpoint, const ApiError& e, httplib::Response& res) {
    metrics.count_request(endpoint_label(endpoint), e.http_status);
    res.status = e.http_status;
    // The Anthropic Messages API answers with its own error shape (anthropic_format.h).
    res.set_content(endpoint.rfind("/v1/messages", 0) == 0 ? anthropic_error_json(e) : e.to_json(),
                    "application/json");
}

bool HttpServer::State::admit(const std::string& endpoint, httplib::Response& res) {
    int now = ++inflight;
    if (now > config.max_inflight) {
        --inflight;
        send_error(endpoint, server_busy(), res);
        return false;
    }
    metrics.set_http_inflight(now);
    return true;
}

std::optional<ApiError> HttpServer::State::resolve_max_tokens(int n_prompt, const char* prompt_field,
                                                              std::optional<int32_t> asked,
                                                              std::optional<int> cap, int& max_tokens) const {
    const int ctx = backend.context_length();
    if (n_prompt >= ctx) return context_too_long(prompt_field, n_prompt, ctx);
    const bool max_tokens_set = asked.has_value();
    auto resolved = backend.resolve_max_tokens(n_prompt, asked);
    if (!resolved.ok()) {
        ApiError e = invalid_param(max_tokens_set ? "max_tokens" : prompt_field, resolved.status().message());
        e.code = resolved.status().code() == core::StatusCode::kResourceExhausted ? "kv_cache_too_small"
                                                                                  : "context_length_exceeded";
        return e;
    }
    max_tokens = max_tokens_set || !cap ? *resolved : std::min(*resolved, *cap);
    return std::nullopt;
}

core::Result<std::vector<int32_t>>
HttpServer::State::encode_off_thread(const std::function<core::Result<std::vector<int32_t>>()>& f) {
    core::Result<std::vector<int32_t>> out = core::internal_error("not run");
    const http::WorkPool::Work work = [&](const std::atomic<bool>& cancel) {
        tokenizer::CancelScope scope(&cancel); // the tokenizer stops within 64 KiB once it is set
        out = f();
    };
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(config.tokenize_timeout_ms);
    const http::WorkPool::Outcome outcome =
        tokenize_pool.run(work, deadline, &http::HttpTransport::client_gone);
    if (outcome != http::WorkPool::Outcome::kDone && outcome != http::WorkPool::Outcome::kQueueFull)
        metrics.count_tokenize_cancelled();
    switch (outcome) {
    case http::WorkPool::Outcome::kDone:
        return out;
    case http::WorkPool::Outcome::kQueueFull:
        return core::unavailable("the tokenizer queue is full (" + std::to_string(tokenize_pool.max_queue()) +
                                 " prompts waiting); retry later");
    case http::WorkPool::Outcome::kDeadline:
        return core::unavailable("the prompt was not rendered and tokenized within " +
                                 std::to_string(config.tokenize_timeout_ms) + " ms; tokenizing stopped");
    case http::WorkPool::Outcome::kStopping:
        return core::unavailable("the server is shutting down");
    case http::WorkPool::Outcome::kClientGone:
        return core::Status(core::StatusCode::kCancelled,
                            "the client disconnected while its prompt tokenized");
    }
    return out;
}

core::Result<std::vector<int32_t>> HttpServer::State::render_chat(const ChatPrompt& prompt) {
    return encode_off_thread([&] { return backend.render_chat(prompt); });
}

core::Result<std::vector<int32_t>> HttpServer::State::tokenize(std::string_view text) {
    return encode_off_thread([&] { return backend.tokenize(text); });
}

// Shared by the generation endpoints, before anything runs.
std::optional<ApiError> HttpServer::State::check_request(const CommonRequest& r) const {
    if (r.model != model_name) return unknown_model(r.model);
    if (!r.forced_output.empty() && !config.enable_test_hooks) {
        return invalid_param("deepinfer_test", "test hooks are disabled");
    }
    const OutputConstraint& c = r.constraint;
    if (!c.kind) return std::nullopt;
    core::Status st = backend.check_constraint(c);
    if (st.ok()) return std::nullopt;
    if (st.code() == core::StatusCode::kInvalidArgument)
        return invalid_param(c.field, "'" + c.field + "' cannot be enforced: " + st.message());
    return from_status(st, c.field);
}

std::string HttpServer::State::new_id(const char* prefix) {
    return std::string(prefix) + std::to_string(start_time) + "-" + std::to_string(next_id++);
}

namespace {

void install_routes(HttpServer::State& s) {
    httplib::Server& http = s.http;
    http.set_payload_max_length(s.config.max_body_bytes);

    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
        // /health stays open to probes by address; everything else answers only to the allowed names.
        if (req.path != "/health" &&
            !http::host_allowed(s.config.allowed_hosts, req.get_header_value("Host"))) {
            s.send_error(
                req.path,
                ApiError{403, "invalid_request_error",
                         "Host '" + req.get_header_value("Host") + "' is not allowed (see --allowed-hosts)",
                         "", "host_not_allowed"},
                res);
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool keyed_path =
            req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
        const std::string x_api_key = req.get_header_value("x-api-key");
        if (s.config.api_key.empty() || !keyed_path ||
            http::key_presented(req.get_header_value("Authorization"),
                                req.has_header("x-api-key") ? &x_api_key : nullptr, s.config.api_key))
            return httplib::Server::HandlerResponse::Unhandled;
        s.send_error(req.path, unauthorized(), res);
        return httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own rejections (unknown route, body too large, malformed HTTP) get OpenAI error bodies too.
    http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        ApiError e;
        e.http_status = res.status;
        if (res.status == 404 && !allowed_methods(req.path).empty()) {
            // The path exists, the method does not (httplib reports it as an unknown route).
            res.set_header("Allow", allowed_methods(req.path));
            e = {405, "invalid_request_error",
                 "Method " + req.method + " is not allowed on " + req.path +
                     " (allowed: " + allowed_methods(req.path) + ")",
                 "", "method_not_allowed"};
        } else if (res.status == 404)
            e = not_found_route(req.path);
        else if (res.status == 413)
            e = {413, "invalid_request_error", "request body too large", "", "body_too_large"};
        else
            e.message = "HTTP error " + std::to_string(res.status);
        s.send_error(req.path, e, res);
    });
    http.set_exception_handler([&s](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        s.send_error(req.path, from_status(core::internal_error("unexpected error handling the request")),
                     res);
    });

    // The body is read here rather than by httplib, which does not limit a chunked body's size.
    PostRoute post = [&s](BodyHandler handler) -> httplib::Server::HandlerWithContentReader {
        return [&s, handler](const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader& reader) {
            if (s.draining) {
                res.set_header("Connection", "close");
                return s.send_error(req.path, shutting_down(), res);
            }
            std::string body;
            http::TrimAfterLargeBody trim(body);
            if (auto e =
                    http::read_body({s.config.max_body_bytes, s.config.body_timeout_ms}, req, reader, body)) {
                res.set_header("Connection", "close"); // the rest of the body is never read
                return s.send_error(
                    req.path, ApiError{e->status, "invalid_request_error", e->message, "", e->code}, res);
            }
            // A string too long to fit in the context (a prompt, a message, anything: none is useful past
            // that) is refused before the body is parsed, rendered or tokenized: 400, as every context
            // overflow (413 is for a body past --max-body-bytes).
            if (size_t n = http::longest_json_string(body); n > s.max_string_bytes) {
                return s.send_error(req.path,
                                    ApiError{400, "invalid_request_error",
                                             "a string of at least " + std::to_string(n) +
                                                 " bytes cannot fit in the context of " +
                                                 std::to_string(s.backend.context_length()) +
                                                 " tokens (at most " + std::to_string(s.max_string_bytes) +
                                                 " bytes are tokenized)",
                                             "", "context_length_exceeded"},
                                    res);
            }
            handler(s, body, res);
        };
    };
    http.Post("/v1/chat/completions", post(handle_chat));
    http.Post("/v1/completions", post(handle_completion));
    http.Post("/v1/messages", post(handle_anthropic_messages));
    http.Post("/v1/messages/count_tokens", post(handle_anthropic_count_tokens));
    install_utility_routes(s, post);
    http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
        bool draining = s.draining;
        res.status = draining ? 503 : 200;
        s.metrics.count_request("/health", res.status);
        res.set_content(draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}", "application/json");
    });
    http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
        res.set_content(s.metrics.render(s.backend.stats()), "text/plain; version=0.0.4");
    });
}

} // namespace

HttpServer::HttpServer(Backend& backend, ServerConfig config)
    : state_(std::make_unique<State>(backend, std::move(config))) {
    // A client that closes its socket mid-write must not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
    install_routes(*state_);
    const ServerConfig& c = state_->config;
    http::TransportConfig t;
    t.error_body = [](int status, const std::string& message, const std::string& code) {
        return ApiError{status, "invalid_request_error", message, "", code}.to_json();
    };
    t.max_workers = c.http_threads;
    t.header_timeout_ms = c.header_timeout_ms;
    t.keep_alive_timeout_ms = c.keep_alive_timeout_ms;
    t.body_timeout_ms = c.body_timeout_ms;
    state_->transport = std::make_unique<http::HttpTransport>(state_->http, t);
}

HttpServer::~HttpServer() {
    if (state_->shutdown_thread.joinable()) state_->shutdown_thread.join();
    stop();
}

void HttpServer::request_shutdown(const std::string& reason) {
    if (state_->shutdown_requested.exchange(true)) return;
    state_->shutdown_thread = std::thread([this, reason] { shutdown(reason); });
}

core::Result<int> HttpServer::bind() {
    DI_ASSIGN_OR_RETURN(int port, state_->http.bind_listener(state_->config.host, state_->config.port));
    state_->port = port;
    return port;
}

core::Status HttpServer::serve() {
    return state_->transport->run();
}

void HttpServer::shutdown(const std::string& reason) {
    State& s = *state_;
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(s.config.drain_timeout_ms);
    DI_LOG(Info) << reason << ": draining " << s.inflight.load() << " in-flight requests (up to "
                 << s.config.drain_timeout_ms << " ms)";
    s.draining = true;
    while (s.inflight > 0 && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (int left = s.inflight; left > 0) {
        DI_LOG(Warn) << "drain timeout: ending " << left << " requests with an error";
        s.cut = true;
        // Each responder notices within one poll (<= 100 ms) and writes its last event.
        const auto grace = Clock::now() + std::chrono::seconds(5);
        while (s.inflight > 0 && Clock::now() < grace)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    DI_LOG(Info) << "drained; stopping";
    stop();
}

void HttpServer::stop() {
    state_->tokenize_pool.stop(); // workers waiting on a prompt return at once
    // serve() then stops accepting, ends streams at their next chunk (httplib's provider loop checks the
    // listening socket), closes idle connections and joins the workers before it returns.
    state_->transport->stop();
}

} // namespace deepinfer::server
