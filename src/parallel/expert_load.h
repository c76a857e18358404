#pragma once
// EP load statistics: how many token rows each routed expert received, summed over all ranks, exchanged
// every `interval` steps.
//
// The exchange is a collective, so every rank calls on_step() on every step with the leader's step
// counter: whether a step exchanges depends only on that counter, never on anything rank-local (a
// statistics all-gather entered by some ranks only is exactly how an engine hangs).

#include "parallel/communicator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::parallel {

struct ExpertLoadSnapshot {
    std::uint64_t step = 0;                   // step of the exchange
    std::vector<std::int64_t> expert_tokens;  // [n_experts] summed over ranks, since the previous exchange
    std::vector<std::int64_t> ep_rank_tokens; // [ep] tokens that went to each EP rank's experts
    double expert_imbalance = 0;              // max / mean over experts (1 = balanced; 0 when no tokens)
    double ep_rank_imbalance = 0;             // max / mean over EP ranks (what limits an EP step)
};

class ExpertLoadStats {
public:
    // Experts are assigned to EP ranks in contiguous ranges: rank e holds experts
    // [e * n_experts / ep, (e + 1) * n_experts / ep).
    ExpertLoadStats(int n_experts, int ep, std::uint64_t interval);

    // Counts this rank's routing decisions: one call per (token, expert) pair or batched counts.
    void record(int expert, std::int64_t tokens = 1);

    // Every rank, every step. On steps that are multiples of the interval: all-gathers the counts over
    // `group` (the ranks whose routing decisions differ; with replicated tokens any one rank's view is the
    // whole picture, so pass a LocalCommunicator), updates latest(), and resets the local counts.
    Status on_step(Communicator& group, std::uint64_t step);

    const ExpertLoadSnapshot& latest() const { return latest_; }
    int expert_rank(int expert) const;

private:
    int n_experts_;
    int ep_;
    std::uint64_t interval_;
    std::vector<std::int64_t> local_;
    ExpertLoadSnapshot latest_;
};

// What the server's /metrics shows: the latest exchange, and per expert the rows since start (the sum of
// every exchange's window; rows routed after the latest exchange are not in it yet).
struct ExpertLoadReport {
    ExpertLoadSnapshot latest;
    std::vector<std::int64_t> expert_tokens_total; // [n_experts]
    std::uint64_t exchanges = 0;
    // Takes a newer snapshot (a snapshot of an older or the same step is ignored).
    void add(const ExpertLoadSnapshot& s);
};

// Prometheus text (HELP/TYPE lines included) of a report, metric names deepinfer_ep_*: per expert
// (label expert) the latest window's rows and the total, per EP rank (label ep_rank) the latest window's
// rows, both imbalance figures and the step of the latest exchange.
std::string expert_load_prometheus(const ExpertLoadReport& r);

// max / mean of the values; 0 when they sum to zero.
double imbalance(std::span<const std::int64_t> v);

} // namespace deepinfer::parallel
