#pragma once
// The OpenAI-compatible HTTP server in front of a Backend: HTTP/1.1 with keep-alive; one epoll thread holds
// connections until a request header has arrived (http/transport.h), then a worker thread runs cpp-httplib's
// request processing on it. Workers parse and validate, have the prompt rendered and tokenized on the
// tokenizing threads (http/work_pool.h: bounded, cancelled when the client leaves), then hand requests to the
// engine loop (Backend::submit is a thread-safe queue) and turn the engine's token deltas into responses or
// SSE streams themselves.

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "http/access.h"
#include "server/backend.h"
#include "tokenizer/chat_defaults.h"

namespace deepinfer::server {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8000;     // 0: any free port
    std::string api_key; // empty: no authentication
    // Host header values (host names, ports ignored) served; empty: any. Guards a keyless server against
    // DNS rebinding. default_allowed_hosts() gives the usual choice.
    std::vector<std::string> allowed_hosts;
    std::string served_model_name;     // empty: the backend's model name
    int max_inflight = 256;            // generation requests admitted at once; beyond that -> 429
    int http_threads = 512;            // requests served at once (a worker thread each; streams hold theirs)
    size_t max_body_bytes = 32u << 20; // enforced while reading, chunked bodies included -> 413
    int body_timeout_ms = 30000;       // a request body must arrive within this -> 408
    int header_timeout_ms = 10000;     // a request header must arrive within this of its first byte -> 408
    int keep_alive_timeout_ms = 5000;  // an idle connection (no byte of a request yet) is closed after this
    int drain_timeout_ms = 30000;      // shutdown(): in-flight requests get this long to finish
    // Rendering and tokenization run on their own threads (http/work_pool.h), not on HTTP workers.
    int tokenize_threads = 0;        // 0: one per hardware thread
    int tokenize_queue = 128;        // prompts waiting for a tokenizing thread; beyond -> 503
    int tokenize_timeout_ms = 30000; // a prompt not rendered and tokenized within this -> 503, work stopped
    int heartbeat_ms = 500;          // idle streams write a keep-alive this often, which detects disconnects
    bool enable_test_hooks = false;  // honour deepinfer_test.forced_output (tests only)
    int max_n = 16;
    tokenizer::ChatDefaults chat_defaults; // --default-chat-template-kwargs / --reasoning-effort
};

// Who may call (http/access.h), for the CLI's flag handling.
using http::authorization_matches;
using http::default_allowed_hosts;
using http::host_name_of;

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
    // Graceful: logs `reason`, refuses new generation requests (503) and reports /health as draining, lets
    // in-flight requests finish for up to drain_timeout_ms, then ends the rest (streams with an error event
    // and [DONE]) and stops. Call from another thread than serve()'s; serve() then returns.
    void shutdown(const std::string& reason);
    // From any thread, without blocking, e.g. a fatal backend error on the engine thread: runs
    // shutdown(reason) on a thread of its own (the first call wins), so serve() returns once drained.
    void request_shutdown(const std::string& reason);
    void stop();

    struct State;

private:
    std::unique_ptr<State> state_;
};

} // namespace deepinfer::server
