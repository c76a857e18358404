#pragma once
// Internal to the server: what the route handlers share.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "http/transport.h"
#include "http/work_pool.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/request_parser.h"

namespace deepinfer::server {

struct HttpServer::State {
    Backend& backend;
    ServerConfig config;
    std::string model_name;
    ParserLimits limits;
    size_t max_string_bytes = 0; // a longer JSON string in a request cannot fit in the context
    ServerMetrics metrics;
    std::atomic<int> inflight{0};
    std::atomic<bool> draining{false}; // shutting down: no new generation requests
    std::atomic<bool> cut{false};      // the drain timed out: streams end now with an error event
    std::atomic<uint64_t> next_id{1};
    std::atomic<bool> shutdown_requested{false};
    std::thread shutdown_thread; // request_shutdown()'s drain; joined by ~HttpServer
    long long start_time = 0;
    int port = 0;                 // bound port
    http::WorkPool tokenize_pool; // outlives the transport's workers, which wait on it
    http::HttplibServer http;
    std::unique_ptr<http::HttpTransport> transport; // accepts connections and runs http on them

    State(Backend& b, ServerConfig c);
    void send_error(const std::string& endpoint, const ApiError& e, httplib::Response& res);
    // Reserves an in-flight slot; false (and a 429 sent) when the server is full.
    bool admit(const std::string& endpoint, httplib::Response& res);
    void release() { metrics.set_http_inflight(--inflight); }
    // Before anything starts: fills `max_tokens` for a prompt of n_prompt tokens (unset: the engine's
    // default, capped at `cap` when given), or returns the error naming the field at fault: the prompt
    // field when it alone cannot fit, else max_tokens, with the numbers.
    std::optional<ApiError> resolve_max_tokens(int n_prompt, const char* prompt_field,
                                               std::optional<int32_t> asked, std::optional<int> cap,
                                               int& max_tokens) const;
    std::string new_id(const char* prefix);
    // The backend's render_chat / tokenize on the tokenizing threads, cut short when the client leaves
    // (Cancelled), the tokenize deadline passes or the queue is full (Unavailable, naming which).
    core::Result<std::vector<int32_t>> render_chat(const ChatPrompt& prompt);
    core::Result<std::vector<int32_t>> tokenize(std::string_view text);
    core::Result<std::vector<int32_t>>
    encode_off_thread(const std::function<core::Result<std::vector<int32_t>>()>& f);
    // What every generation request must pass before anything runs: the model name, test hooks enabled
    // when used, and a structured-output constraint the backend can compile.
    std::optional<ApiError> check_request(const CommonRequest& r) const;
};

// `body` is the whole request body, read within the size and time limits.
void handle_chat(HttpServer::State& s, const std::string& body, httplib::Response& res);
void handle_completion(HttpServer::State& s, const std::string& body, httplib::Response& res);
// POST /v1/messages: the Anthropic Messages API (anthropic_handler.cpp).
void handle_anthropic_messages(HttpServer::State& s, const std::string& body, httplib::Response& res);
void handle_anthropic_count_tokens(HttpServer::State& s, const std::string& body, httplib::Response& res);
// {"type": "error", "error": {"type", "message"}} for an error on /v1/messages (anthropic_format.cpp).
std::string anthropic_error_json(const ApiError& e);

// A POST route: the body read within the limits (http_server.cpp), then `handler`.
using BodyHandler = void (*)(HttpServer::State&, const std::string&, httplib::Response&);
using PostRoute = std::function<httplib::Server::HandlerWithContentReader(BodyHandler)>;
// utility_routes.cpp: /tokenize, /detokenize, /version, /v1/models, /v1/models/{id}.
void install_utility_routes(HttpServer::State& s, const PostRoute& post);
// "POST", "GET, HEAD", or "" for a path that is no route (the Allow header of a 405).
std::string allowed_methods(const std::string& path);

} // namespace deepinfer::server
