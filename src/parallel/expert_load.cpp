#include "parallel/expert_load.h"

#include "core/check.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::parallel {

double imbalance(std::span<const std::int64_t> v) {
    if (v.empty()) return 0;
    std::int64_t sum = 0, mx = 0;
    for (auto x : v) sum += x, mx = std::max(mx, x);
    if (sum == 0) return 0;
    return static_cast<double>(mx) * static_cast<double>(v.size()) / static_cast<double>(sum);
}

ExpertLoadStats::ExpertLoadStats(int n_experts, int ep, std::uint64_t interval)
    : n_experts_(n_experts), ep_(ep), interval_(interval), local_(static_cast<std::size_t>(n_experts), 0) {
    DI_CHECK(n_experts > 0 && ep > 0 && ep <= n_experts && interval > 0)
        << "n_experts " << n_experts << " ep " << ep << " interval " << interval;
}

int ExpertLoadStats::expert_rank(int expert) const {
    // The largest e with floor(e * n / ep) <= expert.
    return static_cast<int>(((static_cast<std::int64_t>(expert) + 1) * ep_ - 1) / n_experts_);
}

void ExpertLoadStats::record(int expert, std::int64_t tokens) {
    DI_CHECK(expert >= 0 && expert < n_experts_) << "expert " << expert;
    local_[expert] += tokens;
}

Status ExpertLoadStats::on_step(Communicator& group, std::uint64_t step) {
    if (step % interval_ != 0) return {};
    const auto n = static_cast<std::size_t>(n_experts_);
    std::vector<std::int64_t> all(n * static_cast<std::size_t>(group.size()));
    DI_RETURN_IF_ERROR(group.all_gather_i64(local_, all).with_context("expert load statistics"));
    ExpertLoadSnapshot s;
    s.step = step;
    s.expert_tokens.assign(n, 0);
    for (int r = 0; r < group.size(); ++r) {
        for (std::size_t e = 0; e < n; ++e) s.expert_tokens[e] += all[static_cast<std::size_t>(r) * n + e];
    }
    s.ep_rank_tokens.assign(static_cast<std::size_t>(ep_), 0);
    for (int e = 0; e < n_experts_; ++e) s.ep_rank_tokens[expert_rank(e)] += s.expert_tokens[e];
    s.expert_imbalance = imbalance(s.expert_tokens);
    s.ep_rank_imbalance = imbalance(s.ep_rank_tokens);
    latest_ = std::move(s);
    std::fill(local_.begin(), local_.end(), 0);
    return {};
}

void ExpertLoadReport::add(const ExpertLoadSnapshot& s) {
    if (exchanges > 0 && s.step <= latest.step) return;
    if (expert_tokens_total.size() < s.expert_tokens.size())
        expert_tokens_total.resize(s.expert_tokens.size(), 0);
    for (std::size_t e = 0; e < s.expert_tokens.size(); ++e) expert_tokens_total[e] += s.expert_tokens[e];
    latest = s;
    ++exchanges;
}

std::string expert_load_prometheus(const ExpertLoadReport& r) {
    std::string out;
    auto header = [&](const char* name, const char* type, const char* help) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto num = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", v);
        return std::string(buf);
    };
    header("deepinfer_ep_load_exchanges_total", "counter", "EP load-statistics exchanges so far.");
    out += "deepinfer_ep_load_exchanges_total " + std::to_string(r.exchanges) + "\n";
    header("deepinfer_ep_load_step", "gauge", "Leader step of the latest EP load-statistics exchange.");
    out += "deepinfer_ep_load_step " + std::to_string(r.latest.step) + "\n";
    header("deepinfer_ep_expert_tokens", "gauge",
           "Token rows routed to each expert (all layers) between the last two exchanges.");
    for (std::size_t e = 0; e < r.latest.expert_tokens.size(); ++e)
        out += "deepinfer_ep_expert_tokens{expert=\"" + std::to_string(e) + "\"} " +
               std::to_string(r.latest.expert_tokens[e]) + "\n";
    header("deepinfer_ep_expert_tokens_total", "counter",
           "Token rows routed to each expert (all layers) up to the latest exchange.");
    for (std::size_t e = 0; e < r.expert_tokens_total.size(); ++e)
        out += "deepinfer_ep_expert_tokens_total{expert=\"" + std::to_string(e) + "\"} " +
               std::to_string(r.expert_tokens_total[e]) + "\n";
    header("deepinfer_ep_rank_tokens", "gauge",
           "Token rows routed to each EP rank's experts between the last two exchanges.");
    for (std::size_t k = 0; k < r.latest.ep_rank_tokens.size(); ++k)
        out += "deepinfer_ep_rank_tokens{ep_rank=\"" + std::to_string(k) + "\"} " +
               std::to_string(r.latest.ep_rank_tokens[k]) + "\n";
    header("deepinfer_ep_expert_imbalance", "gauge",
           "Max / mean token rows over experts in the latest window (1 = balanced, 0 = no rows).");
    out += "deepinfer_ep_expert_imbalance " + num(r.latest.expert_imbalance) + "\n";
    header("deepinfer_ep_rank_imbalance", "gauge",
           "Max / mean token rows over EP ranks in the latest window (what stretches an EP step).");
    out += "deepinfer_ep_rank_imbalance " + num(r.latest.ep_rank_imbalance) + "\n";
    return out;
}

} // namespace deepinfer::parallel
