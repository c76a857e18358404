#pragma once
// The OpenAI-compatible HTTP server: cpp-httplib (HTTP/1.1, keep-alive, a thread per connection) in
// front of a Backend. HTTP threads parse and validate, render and tokenize, then hand requests to the
// engine loop (Backend::submit is a thread-safe queue) and turn the engine's token deltas into
// responses or SSE streams themselves.

#include <memory>
#include <string>

#include "core/status.h"
#include "server/backend.h"

namespace deepinfer::server {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;               // 0: any free port
    std::string api_key;           // empty: no authentication
    std::string served_model_name; // empty: the backend's model name
    int max_inflight = 256;        // generation requests admitted at once; beyond that -> 429
    int http_threads = 512;        // connections served at once (streams hold one each)
    size_t max_body_bytes = 32u << 20;
    int heartbeat_ms = 500;         // idle streams write a keep-alive this often, which detects disconnects
    bool enable_test_hooks = false; // honour deepinfer_test.forced_output (tests only)
    int max_n = 16;
};

class HttpServer {
public:
    HttpServer(Backend& backend, ServerConfig config);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds the listening socket; returns the port (useful with port 0).
    core::Result<int> bind();
    // Serves until stop(); call after bind().
    core::Status serve();
    void stop();

    struct State;

private:
    std::unique_ptr<State> state_;
};

} // namespace deepinfer::server
