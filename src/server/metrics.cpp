#include "server/metrics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

namespace deepinfer::server {

namespace {
std::string num(double v) {
    char buf[64];
    for (int precision = 6; precision <= 17; ++precision) { // shortest text that reads back exactly
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}
void header(std::string& out, const std::string& name, const char* type, const char* help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
// The op census (serve --profile): one series per op kind that ran, plus the forwards they belong to.
void render_ops(const kernels::ProfileSnapshot& ops, std::string& out) {
    struct Series {
        const char* name;
        const char* help;
        double kernels::OpStats::*field; // nullptr: calls
    };
    const Series series[] = {
        {"deepinfer_op_calls_total", "Kernel calls by op kind.", nullptr},
        {"deepinfer_op_seconds_total", "Wall time in each op kind.", &kernels::OpStats::seconds},
        {"deepinfer_op_bytes_total", "Bytes each op kind read and wrote (weights as stored).",
         &kernels::OpStats::bytes},
        {"deepinfer_op_flops_total", "Floating-point operations by op kind.", &kernels::OpStats::flops},
    };
    for (const Series& se : series) {
        header(out, se.name, "counter", se.help);
        for (size_t k = 0; k < ops.ops.size(); ++k) {
            const kernels::OpStats& st = ops.ops[k];
            if (st.calls == 0) continue;
            out += std::string(se.name) + "{op=\"" + kernels::op_name(static_cast<kernels::OpKind>(k)) +
                   "\"} " + (se.field ? num(st.*se.field) : std::to_string(st.calls)) + "\n";
        }
    }
    header(out, "deepinfer_forward_steps_total", "counter", "Model forward passes profiled.");
    out += "deepinfer_forward_steps_total " + std::to_string(ops.steps) + "\n";
    header(out, "deepinfer_forward_seconds_total", "counter", "Wall time of the profiled forward passes.");
    out += "deepinfer_forward_seconds_total " + num(ops.step_seconds) + "\n";
}
} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
    std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double v) {
    size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin(); // le: v <= bound
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += counts_.back();
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    out += name + "_sum " + num(sum_) + "\n";
    out += name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_(
          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
            0.75, 1, 2.5}),
      e2e_({0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960}) {}

void ServerMetrics::count_request(const std::string& endpoint, int http_status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_[{endpoint, http_status}];
}

void ServerMetrics::finished(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    ++finish_reasons_[reason];
}

std::string ServerMetrics::render(const EngineStats& engine) const {
    std::string out;
    out.reserve(8192);
    {
        std::lock_guard<std::mutex> lock(mu_);
        header(out, "deepinfer_requests_total", "counter", "HTTP requests by endpoint and status code.");
        for (const auto& [key, n] : requests_) {
            out += "deepinfer_requests_total{endpoint=\"" + key.first + "\",status=\"" +
                   std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
        }
        header(out, "deepinfer_request_finished_total", "counter", "Finished choices by finish reason.");
        for (const auto& [reason, n] : finish_reasons_) {
            out += "deepinfer_request_finished_total{finish_reason=\"" + reason + "\"} " + std::to_string(n) +
                   "\n";
        }
    }
    header(out, "deepinfer_prompt_tokens_total", "counter", "Prompt tokens processed.");
    out += "deepinfer_prompt_tokens_total " + std::to_string(prompt_tokens_.load()) + "\n";
    header(out, "deepinfer_generation_tokens_total", "counter", "Tokens generated.");
    out += "deepinfer_generation_tokens_total " + std::to_string(generation_tokens_.load()) + "\n";
    header(out, "deepinfer_tokenize_cancelled_total", "counter",
           "Prompts whose rendering and tokenization was stopped: client gone, deadline, shutdown.");
    out += "deepinfer_tokenize_cancelled_total " + std::to_string(tokenize_cancelled_.load()) + "\n";
    header(out, "deepinfer_time_to_first_token_seconds", "histogram", "Time to first token.");
    ttft_.render("deepinfer_time_to_first_token_seconds", out);
    header(out, "deepinfer_inter_token_latency_seconds", "histogram", "Time between output tokens.");
    itl_.render("deepinfer_inter_token_latency_seconds", out);
    header(out, "deepinfer_e2e_request_latency_seconds", "histogram", "End-to-end request latency.");
    e2e_.render("deepinfer_e2e_request_latency_seconds", out);
    header(out, "deepinfer_http_requests_in_flight", "gauge", "Generation requests admitted by the server.");
    out += "deepinfer_http_requests_in_flight " + std::to_string(inflight_.load()) + "\n";
    header(out, "deepinfer_num_requests_running", "gauge", "Requests the engine is running.");
    out += "deepinfer_num_requests_running " + std::to_string(engine.running) + "\n";
    header(out, "deepinfer_num_requests_waiting", "gauge", "Requests waiting in the engine's queue.");
    out += "deepinfer_num_requests_waiting " + std::to_string(engine.waiting) + "\n";
    header(out, "deepinfer_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use.");
    out += "deepinfer_kv_cache_usage_ratio " + num(engine.kv_cache_usage) + "\n";
    header(out, "deepinfer_num_preemptions_total", "counter", "Requests preempted by the engine.");
    out += "deepinfer_num_preemptions_total " + std::to_string(engine.counters.preemptions) + "\n";
    header(out, "deepinfer_prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache.");
    out +=
        "deepinfer_prefix_cache_queries_total " + std::to_string(engine.counters.prefix_query_tokens) + "\n";
    header(out, "deepinfer_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.");
    out += "deepinfer_prefix_cache_hits_total " + std::to_string(engine.counters.prefix_hit_tokens) + "\n";
    header(out, "deepinfer_prefill_tokens_total", "counter",
           "Prompt tokens computed by the engine (the n completions of a request share one prefill).");
    out += "deepinfer_prefill_tokens_total " + std::to_string(engine.counters.prefill_tokens) + "\n";
    header(out, "deepinfer_prefix_cache_hit_rate", "gauge", "Prefix-cache hits / queries since start.");
    out += "deepinfer_prefix_cache_hit_rate " + num(engine.counters.prefix_hit_rate()) + "\n";
    if (engine.ops) render_ops(*engine.ops, out);
    out += engine.extra_metrics;
    // Process memory: the load test checks that it returns to its baseline after bursts of requests.
    long pages = 0, resident = 0;
    std::ifstream("/proc/self/statm") >> pages >> resident;
    header(out, "deepinfer_process_resident_memory_bytes", "gauge", "Resident set size.");
    out +=
        "deepinfer_process_resident_memory_bytes " + std::to_string(resident * sysconf(_SC_PAGESIZE)) + "\n";
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    header(out, "deepinfer_heap_in_use_bytes", "gauge", "Bytes allocated with malloc and not yet freed.");
    out += "deepinfer_heap_in_use_bytes " + std::to_string(mi.uordblks + mi.hblkhd) + "\n";
#endif
    return out;
}

} // namespace deepinfer::server
