#include "server/http_server.h"

#include <chrono>
#include <csignal>
#include <sys/socket.h>

#include "core/logging.h"
#include "server/json_fields.h"
#include "server/server_state.h"

namespace deepinfer::server {

HttpServer::State::State(Backend& b, ServerConfig c) : backend(b), config(std::move(c)) {
    model_name = config.served_model_name.empty() ? backend.model_name() : config.served_model_name;
    limits.vocab_size = backend.vocab_size();
    limits.max_n = config.max_n;
    start_time =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
}

namespace {
// Metric labels stay a fixed set, whatever paths clients send.
std::string endpoint_label(const std::string& path) {
    for (const char* known :
         {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"}) {
        if (path == known) return path;
    }
    return "other";
}
} // namespace

void HttpServer::State::send_error(const std::string& endpoint, const ApiError& e, httplib::Response& res) {
    metrics.count_request(endpoint_label(endpoint), e.http_status);
    res.status = e.http_status;
    res.set_content(e.to_json(), "application/json");
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

std::string HttpServer::State::new_id(const char* prefix) {
    return std::string(prefix) + std::to_string(start_time) + "-" + std::to_string(next_id++);
}

namespace {

void install_routes(HttpServer::State& s) {
    httplib::Server& http = s.http;
    http.new_task_queue = [n = s.config.http_threads] { return new httplib::ThreadPool(n); };
    http.set_payload_max_length(s.config.max_body_bytes);
    http.set_keep_alive_max_count(1000);
    http.set_keep_alive_timeout(5);
    http.set_read_timeout(60);
    http.set_write_timeout(60);
    http.set_tcp_nodelay(true);

    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
        if (s.config.api_key.empty() || req.path.rfind("/v1/", 0) != 0) {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        std::string auth = req.get_header_value("Authorization");
        if (auth == "Bearer " + s.config.api_key) return httplib::Server::HandlerResponse::Unhandled;
        s.send_error(req.path, unauthorized(), res);
        return httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own rejections (unknown route, body too large, malformed HTTP) get OpenAI error bodies too.
    http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        ApiError e;
        e.http_status = res.status;
        if (res.status == 404)
            e = not_found_route(req.path);
        else if (res.status == 413)
            e = {413, "invalid_request_error", "request body too large", "", "body_too_large"};
        else
            e.message = "HTTP error " + std::to_string(res.status);
        s.metrics.count_request(endpoint_label(req.path), e.http_status);
        res.set_content(e.to_json(), "application/json");
    });
    http.set_exception_handler([&s](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        s.send_error(req.path, from_status(core::internal_error("unexpected error handling the request")),
                     res);
    });

    http.Post("/v1/chat/completions",
              [&s](const httplib::Request& req, httplib::Response& res) { handle_chat(s, req, res); });
    http.Post("/v1/completions",
              [&s](const httplib::Request& req, httplib::Response& res) { handle_completion(s, req, res); });
    http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
        detail::json model = {{"id", s.model_name},
                              {"object", "model"},
                              {"created", s.start_time},
                              {"owned_by", "deepinfer"},
                              {"max_model_len", s.backend.context_length()}};
        detail::json body = {{"object", "list"}, {"data", detail::json::array({model})}};
        s.metrics.count_request("/v1/models", 200);
        res.set_content(detail::dump_json(body), "application/json");
    });
    http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
        s.metrics.count_request("/health", 200);
        res.set_content("{\"status\":\"ok\"}", "application/json");
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
}

HttpServer::~HttpServer() {
    stop();
}

core::Result<int> HttpServer::bind() {
    const ServerConfig& c = state_->config;
    // httplib listens with a backlog of 5, which resets connections when hundreds arrive at once: catch the
    // listening socket as it is created and listen again with a deep backlog.
    int listen_fd = -1;
    state_->http.set_socket_options([&listen_fd](socket_t sock) {
        httplib::default_socket_options(sock);
        if (listen_fd < 0) listen_fd = sock;
    });
    int port = c.port;
    if (port == 0) {
        port = state_->http.bind_to_any_port(c.host);
        if (port < 0) return core::unavailable("cannot bind " + c.host + " to a free port");
    } else if (!state_->http.bind_to_port(c.host, port)) {
        return core::unavailable("cannot bind " + c.host + ":" + std::to_string(port));
    }
    state_->http.set_socket_options(httplib::default_socket_options);
    state_->port = port;
    if (listen_fd >= 0 && ::listen(listen_fd, 4096) != 0) return core::unavailable("listen() failed");
    return port;
}

core::Status HttpServer::serve() {
    if (!state_->http.listen_after_bind()) return core::unavailable("the HTTP server stopped with an error");
    return core::Status();
}

void HttpServer::stop() {
    // httplib stops accepting, ends streams at their next chunk (the provider loop checks for shutdown) and
    // joins its threads; an idle keep-alive connection holds its thread up to the keep-alive timeout (5 s).
    // Shutting such sockets down from here would race with httplib closing them (TSan), so we wait.
    if (state_->http.is_running()) state_->http.stop();
}

} // namespace deepinfer::server
