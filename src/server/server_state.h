#pragma once
// Internal to the server: what the route handlers share.

#include <atomic>
#include <chrono>
#include <string>

#include <httplib.h>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/request_parser.h"

namespace deepinfer::server {

struct HttpServer::State {
    Backend& backend;
    ServerConfig config;
    std::string model_name;
    ParserLimits limits;
    ServerMetrics metrics;
    std::atomic<int> inflight{0};
    std::atomic<uint64_t> next_id{1};
    long long start_time = 0;
    int port = 0; // bound port
    httplib::Server http;

    State(Backend& b, ServerConfig c);
    void send_error(const std::string& endpoint, const ApiError& e, httplib::Response& res);
    // Reserves an in-flight slot; false (and a 429 sent) when the server is full.
    bool admit(const std::string& endpoint, httplib::Response& res);
    void release() { metrics.set_http_inflight(--inflight); }
    std::string new_id(const char* prefix);
};

void handle_chat(HttpServer::State& s, const httplib::Request& req, httplib::Response& res);
void handle_completion(HttpServer::State& s, const httplib::Request& req, httplib::Response& res);

inline double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace deepinfer::server
