#include "parallel/expert_load.h"

#include "core/check.h"

#include <algorithm>

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

} // namespace deepinfer::parallel
