#include "server/http_server.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <optional>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>

#include "core/logging.h"
#include "server/json_fields.h"
#include "server/server_state.h"

namespace deepinfer::server {

HttpServer::State::State(Backend& b, ServerConfig c) : backend(b), config(std::move(c)) {
    model_name = config.served_model_name.empty() ? backend.model_name() : config.served_model_name;
    limits.vocab_size = backend.vocab_size();
    limits.max_n = config.max_n;
    limits.chat_defaults = config.chat_defaults;
    // No token decodes to more than `longest` bytes, so no text longer than context × longest (doubled and
    // padded for normalizers that shrink text, as the backend does) can fit in the context.
    size_t longest = 1;
    for (int t = 0; t < backend.vocab_size(); ++t) longest = std::max(longest, backend.token_text(t).size());
    max_string_bytes = 2 * longest * static_cast<size_t>(std::max(0, backend.context_length())) + 4096;
    start_time =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
}

std::vector<std::string> default_allowed_hosts(const std::string& host, const std::string& api_key) {
    if (!api_key.empty()) return {};
    std::string h = host_name_of(host);
    bool loopback = h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
    if (!loopback) return {};
    std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
    if (std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
    return names;
}

bool authorization_matches(const std::string& header, const std::string& api_key) {
    constexpr std::string_view kScheme = "bearer";
    if (api_key.empty() || header.size() <= kScheme.size()) return false;
    for (size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
    }
    size_t i = kScheme.size();
    if (header[i] != ' ' && header[i] != '\t') return false;
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
    std::string_view key = std::string_view(header).substr(i);
    // Constant time in the key's contents: the whole of both strings is always compared.
    unsigned diff = key.size() == api_key.size() ? 0u : 1u;
    for (size_t k = 0; k < key.size(); ++k) {
        diff |= static_cast<unsigned>(static_cast<unsigned char>(key[k]) ^
                                      static_cast<unsigned char>(api_key[k % api_key.size()]));
    }
    return diff == 0;
}

std::string host_name_of(const std::string& host_header) {
    std::string h = host_header;
    if (!h.empty() && h.front() == '[') { // [v6]:port
        size_t close = h.find(']');
        h = close == std::string::npos ? h.substr(1) : h.substr(1, close - 1);
    } else if (std::count(h.begin(), h.end(), ':') == 1) {
        h = h.substr(0, h.find(':'));
    }
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return h;
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

std::string HttpServer::State::new_id(const char* prefix) {
    return std::string(prefix) + std::to_string(start_time) + "-" + std::to_string(next_id++);
}

namespace {

// Reads the whole body, stopping as soon as it passes max_body_bytes (413) or body_timeout_ms (408).
std::optional<ApiError> read_body(const ServerConfig& c, const httplib::Request& req,
                                  const httplib::ContentReader& reader, std::string& body) {
    auto too_large = [&c] {
        return ApiError{413, "invalid_request_error",
                        "request body too large (limit " + std::to_string(c.max_body_bytes) + " bytes)", "",
                        "body_too_large"};
    };
    if (req.has_header("Content-Length")) { // refused unread
        const std::string len = req.get_header_value("Content-Length");
        char* end = nullptr;
        unsigned long long n = std::strtoull(len.c_str(), &end, 10);
        if (len.empty() || *end != '\0' || n > c.max_body_bytes) return too_large();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.body_timeout_ms);
    bool over = false, too_slow = false;
    bool ok = reader([&](const char* data, size_t len) {
        if (body.size() + len > c.max_body_bytes) {
            over = true;
            return false;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            too_slow = true;
            return false;
        }
        body.append(data, len);
        return true;
    });
    if (over) {
        body.clear();
        body.shrink_to_fit();
        return too_large();
    }
    // The transport's reads also stop at the body deadline (a client sending nothing more): a read that
    // failed that late is the same timeout.
    if (!ok && std::chrono::steady_clock::now() + std::chrono::milliseconds(100) >= deadline) too_slow = true;
    if (too_slow) {
        return ApiError{408, "invalid_request_error",
                        "request body not received within " + std::to_string(c.body_timeout_ms) + " ms", "",
                        "request_timeout"};
    }
    if (!ok) return ApiError{400, "invalid_request_error", "could not read the request body", "", "bad_body"};
    return std::nullopt;
}

// A lower bound on the decoded length of the longest JSON string in `body` (each escape counted as one
// byte). One pass, no allocation: a body is measured before it is parsed. Not a validator: a malformed
// body is the parser's to refuse.
size_t longest_json_string(std::string_view body) {
    size_t longest = 0;
    const char* p = body.data();
    const char* const end = p + body.size();
    auto find = [&end](const char* from, const char* to, char c) {
        const void* hit = std::memchr(from, c, static_cast<size_t>(to - from));
        return hit ? static_cast<const char*>(hit) : to;
    };
    while ((p = find(p, end, '"')) < end) {
        ++p; // inside a string, up to its closing quote
        size_t n = 0;
        for (;;) {
            const char* quote = find(p, end, '"');
            const char* escape = find(p, quote, '\\');
            n += static_cast<size_t>(escape - p);
            p = escape;
            if (escape == quote) break;
            // a \u escape (backslash, u, four hex digits) is 6 bytes for at least one decoded byte; any other
            // escape is 2 bytes for 1
            p += p + 1 < end && p[1] == 'u' ? std::min<ptrdiff_t>(6, end - p)
                                            : std::min<ptrdiff_t>(2, end - p);
            ++n;
        }
        longest = std::max(longest, n);
        if (p < end) ++p; // the closing quote
    }
    return longest;
}

constexpr size_t kTrimAfterBodyBytes = 1u << 20;

void install_routes(HttpServer::State& s) {
    httplib::Server& http = s.http;
    http.set_payload_max_length(s.config.max_body_bytes);

    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
        // /health stays open to probes by address; everything else answers only to the allowed names.
        if (!s.config.allowed_hosts.empty() && req.path != "/health") {
            std::string host = host_name_of(req.get_header_value("Host"));
            const auto& allowed = s.config.allowed_hosts;
            if (std::find(allowed.begin(), allowed.end(), host) == allowed.end()) {
                s.send_error(req.path,
                             ApiError{403, "invalid_request_error",
                                      "Host '" + req.get_header_value("Host") +
                                          "' is not allowed (see --allowed-hosts)",
                                      "", "host_not_allowed"},
                             res);
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        const bool keyed_path =
            req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
        if (s.config.api_key.empty() || !keyed_path) return httplib::Server::HandlerResponse::Unhandled;
        // "Authorization: Bearer KEY" (OpenAI) or "x-api-key: KEY" (Anthropic).
        if (authorization_matches(req.get_header_value("Authorization"), s.config.api_key) ||
            (req.has_header("x-api-key") &&
             authorization_matches("Bearer " + req.get_header_value("x-api-key"), s.config.api_key)))
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
            res.status = 405;
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
        s.metrics.count_request(endpoint_label(req.path), e.http_status);
        res.set_content(req.path.rfind("/v1/messages", 0) == 0 ? anthropic_error_json(e) : e.to_json(),
                        "application/json");
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
            // glibc keeps what this worker frees (a large body, its parse, its tokens) in the worker's arena:
            // after a large request, however it ends, hand that back so idle workers do not each hold their
            // last peak.
            struct TrimAfter {
                std::string& body;
                ~TrimAfter() {
                    if (body.capacity() <= kTrimAfterBodyBytes) return;
                    std::string().swap(body);
                    malloc_trim(0);
                }
            } trim{body};
            if (auto e = read_body(s.config, req, reader, body)) {
                res.set_header("Connection", "close"); // the rest of the body is never read
                return s.send_error(req.path, *e, res);
            }
            // A string too long to fit in the context (a prompt, a message, anything: none is useful past
            // that) is refused before the body is parsed, rendered or tokenized: 400, as every context
            // overflow (413 is for a body past --max-body-bytes).
            if (size_t n = longest_json_string(body); n > s.max_string_bytes) {
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
    http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
        detail::json body = {{"object", "list"}, {"data", detail::json::array({model_card_json(s)})}};
        s.metrics.count_request("/v1/models", 200);
        res.set_content(detail::dump_json(body), "application/json");
    });
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
    TransportConfig t;
    t.max_workers = c.http_threads;
    t.header_timeout_ms = c.header_timeout_ms;
    t.keep_alive_timeout_ms = c.keep_alive_timeout_ms;
    t.body_timeout_ms = c.body_timeout_ms;
    state_->transport = std::make_unique<HttpTransport>(state_->http, t);
}

HttpServer::~HttpServer() {
    stop();
}

namespace {
// httplib's default sets SO_REUSEPORT, which lets a second server bind the same port and take most of its
// connections; SO_REUSEADDR alone still allows a restart over TIME_WAIT but fails on a live listener.
void listen_socket_options(socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}
} // namespace

core::Result<int> HttpServer::bind() {
    const ServerConfig& c = state_->config;
    // Every open connection is a file descriptor (a slow client costs nothing else): allow as many as the
    // hard limit does.
    rlimit fds{};
    if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < fds.rlim_max) {
        fds.rlim_cur = fds.rlim_max;
        setrlimit(RLIMIT_NOFILE, &fds);
    }
    // httplib listens with a backlog of 5, which resets connections when hundreds arrive at once: catch the
    // listening socket as it is created and listen again with a deep backlog.
    int listen_fd = -1;
    state_->http.set_socket_options([&listen_fd](socket_t sock) {
        listen_socket_options(sock);
        if (listen_fd < 0) listen_fd = sock;
    });
    int port = c.port;
    if (port == 0) {
        port = state_->http.bind_to_any_port(c.host);
        if (port < 0) return core::unavailable("cannot bind " + c.host + " to a free port");
    } else if (!state_->http.bind_to_port(c.host, port)) {
        return core::unavailable("cannot bind " + c.host + ":" + std::to_string(port) +
                                 " (is another server using the port?)");
    }
    state_->http.set_socket_options(listen_socket_options);
    state_->port = port;
    if (listen_fd >= 0 && ::listen(listen_fd, 4096) != 0) return core::unavailable("listen() failed");
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
    // serve() then stops accepting, ends streams at their next chunk (httplib's provider loop checks the
    // listening socket), closes idle connections and joins the workers before it returns.
    state_->transport->stop();
}

} // namespace deepinfer::server
