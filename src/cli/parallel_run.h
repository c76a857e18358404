#pragma once
// Multi-process runs under mpirun (docs/parallelism.md): the layout flags (--tp/--ep/--cp and the
// vLLM/SGLang names), MPI start-up, the layout's communicators and the start-up handshake. A command
// calls start_parallel() before loading the model; without mpirun and without layout flags it is a
// single-process run and nothing starts.

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "cli/args.h"
#include "model/sharded_lm.h"
#include "parallel/communicator.h"
#include "parallel/layout_groups.h"
#include "parallel/parallel_layout.h"

namespace deepinfer::parallel {
class MpiRuntime;
}

namespace deepinfer::cli {

class ParallelRun {
public:
    ParallelRun() = default;
    ~ParallelRun();
    ParallelRun(const ParallelRun&) = delete;
    ParallelRun& operator=(const ParallelRun&) = delete;

    bool active() const { return world_ != nullptr && world_->size() > 1; }
    bool leader() const { return world_ == nullptr || world_->rank() == 0; }
    int rank() const { return world_ ? world_->rank() : 0; }
    const parallel::ParallelLayout& layout() const { return layout_; }
    parallel::Communicator* world() { return world_.get(); }
    parallel::LayoutGroups& groups() { return groups_; }
    // Payload bytes this rank has sent over MPI so far (0 without MPI).
    static std::uint64_t bytes_sent();

    // Tears the communicators down and finalizes MPI on a clean run; returns rc, or 1 when a collective
    // failed (MPI is then not finalized: it would wait for the lost rank).
    int finish(int rc);

private:
    friend core::Result<std::unique_ptr<ParallelRun>> start_parallel(const Args&, const std::string&,
                                                                     std::uint64_t);
#ifdef DEEPINFER_HAVE_MPI
    std::unique_ptr<parallel::MpiRuntime> runtime_; // (declared only where MpiRuntime is built)
#endif
    std::unique_ptr<parallel::Communicator> world_;
    parallel::LayoutGroups groups_;
    parallel::ParallelLayout layout_;
};

// Adds the layout flags (and --ep-stats-interval) to a command's value flags.
void add_parallel_flags(std::set<std::string>& value_flags);
const char* parallel_flags_help();

// Starts MPI when launched by mpirun (or refuses layout flags > 1 without it), parses and validates the
// layout against the world, builds its groups and runs the start-up handshake (checkpoint fingerprint of
// model_dir, `config_hash` of the numerics-relevant flags combined with the matmul numerics). Only the
// layouts of parallel_layout.h are accepted: tensor, expert and context parallelism and their mixes.
core::Result<std::unique_ptr<ParallelRun>> start_parallel(const Args& args, const std::string& model_dir,
                                                          std::uint64_t config_hash);

// The model of this rank: under mpirun its shard of the layout (experts, heads, vocabulary; the MoE and TP
// groups of `par`, EP statistics every --ep-stats-interval steps), else the whole model. DeepSeek V4 or
// V4.1, from the checkpoint's config.json (model/registry.h).
core::Result<std::unique_ptr<model::ShardedLm>> load_sharded_model(const Args& args, ParallelRun& par);

// Ranks other than 0 under mpirun: load the shard and replay the leader's steps until it shuts down.
// Errors are printed as "deepinfer COMMAND: rank R: ..."; returns the exit status. With --profile (or
// `report_usage`), prints the rank's peak RSS and MPI bytes sent.
int run_follower_rank(const Args& args, ParallelRun& par, const char* command, bool report_usage = false);

// Peak resident memory of this process (VmHWM), in MiB; -1 where /proc does not tell.
double peak_rss_mib();
// This process's resident memory now (/proc/self/status VmRSS, RssAnon, RssFile; -1 where unreadable).
struct RssMib {
    double total = -1, anon = -1, file = -1;
};
RssMib rss_mib();

// FNV-1a over the given flags' values (absent flags hash as absent): the handshake's config fingerprint.
std::uint64_t hash_flags(const Args& args, const std::set<std::string>& flags);

} // namespace deepinfer::cli
