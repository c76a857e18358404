#pragma once
// Prometheus metrics for the server: counters, gauges and histograms rendered in the text exposition
// format (version 0.0.4). Thread-safe; the engine's own gauges (running, waiting, KV use, preemptions,
// prefix-cache) are sampled from Backend::stats() at scrape time.

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/backend.h"

namespace deepinfer::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // Appends name_bucket{le=...}, name_sum and name_count lines.
    void render(const std::string& name, std::string& out) const;

private:
    std::vector<double> bounds_;
    mutable std::mutex mu_;
    std::vector<uint64_t> counts_; // per bucket (not cumulative), last is +Inf
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

class ServerMetrics {
public:
    ServerMetrics();

    void count_request(const std::string& endpoint, int http_status);
    void add_prompt_tokens(uint64_t n) { prompt_tokens_ += n; }
    void add_generation_tokens(uint64_t n) { generation_tokens_ += n; }
    void observe_ttft(double s) { ttft_.observe(s); }
    void observe_inter_token(double s) { itl_.observe(s); }
    void observe_e2e(double s) { e2e_.observe(s); }
    void finished(const std::string& reason);
    void set_http_inflight(int n) { inflight_ = n; }
    void count_tokenize_cancelled() { ++tokenize_cancelled_; } // client gone, deadline or stop

    std::string render(const EngineStats& engine) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    std::map<std::string, uint64_t> finish_reasons_;
    std::atomic<uint64_t> prompt_tokens_{0};
    std::atomic<uint64_t> generation_tokens_{0};
    std::atomic<int> inflight_{0};
    std::atomic<uint64_t> tokenize_cancelled_{0};
    Histogram ttft_;
    Histogram itl_;
    Histogram e2e_;
};

} // namespace deepinfer::server
