#include "cli/parallel_run.h"

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <span>
#include <vector>

#include "kernels/cpu/linear.h"
#include "model/config_fields.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/step_sync.h"
#include "model/deepseek_v41/model.h"
#include "model/int8_panels.h"
#include "model/lm_head.h"
#include "model/registry.h"
#include "parallel/fingerprint.h"
#include "parallel/handshake.h"
#include "parallel/step_message.h"
#ifdef DEEPINFER_HAVE_MPI
#include "parallel/mpi_runtime.h"
#endif

namespace deepinfer::cli {
namespace {

constexpr const char* kLayoutFlags[] = {
    "tp", "ep", "cp", "tensor-parallel-size", "expert-parallel-size", "context-parallel-size"};

} // namespace

ParallelRun::~ParallelRun() = default;

int ParallelRun::finish(int rc) {
    groups_ = parallel::LayoutGroups();
    world_.reset();
#ifdef DEEPINFER_HAVE_MPI
    if (runtime_) {
        const bool healthy = parallel::MpiRuntime::healthy();
        if (healthy) {
            if (core::Status s = runtime_->finalize(); !s.ok()) {
                std::fprintf(stderr, "deepinfer: %s\n", s.to_string().c_str());
                return rc == 0 ? 1 : rc;
            }
        }
        runtime_.reset();
        if (!healthy) return rc == 0 ? 1 : rc;
    }
#endif
    return rc;
}

std::uint64_t ParallelRun::bytes_sent() {
#ifdef DEEPINFER_HAVE_MPI
    return parallel::MpiRuntime::bytes_sent();
#else
    return 0;
#endif
}

void add_parallel_flags(std::set<std::string>& value_flags) {
    for (const char* f : kLayoutFlags) value_flags.insert(f);
    value_flags.insert("ep-stats-interval");
    value_flags.insert("collective-deadline-s");
}

const char* parallel_flags_help() {
    return "Parallel (run under mpirun -np N; docs/parallelism.md):\n"
           "  --ep N | --expert-parallel-size N   routed experts split over N ranks (rank 0 samples)\n"
           "  --tp N | --tensor-parallel-size N   attention heads, wo_b and vocabulary split over N ranks\n"
           "  --cp N | --context-parallel-size N  KV blocks split over N ranks, attention merged by LSE\n"
           "  --ep-stats-interval N               EP load statistics every N steps (default 8)\n"
           "  --collective-deadline-s S           a rank silent for S s fails the job (default 30)\n";
}

core::Result<std::unique_ptr<model::ShardedLm>> load_sharded_model(const Args& args, ParallelRun& par) {
    model::deepseek_v4::ShardSpec shard;
    if (par.active()) {
        shard.moe = par.groups().moe.get();
        shard.tp = par.groups().tp.get();
        shard.cp = par.groups().cp.get();
        DI_ASSIGN_OR_RETURN(long long interval, args.get_int("ep-stats-interval", 8));
        if (interval < 0) return core::invalid_argument("--ep-stats-interval must be >= 0");
        shard.stats_interval = static_cast<std::uint64_t>(interval);
    }
    const std::string dir = args.get_or("model", "");
    DI_ASSIGN_OR_RETURN(std::string text, model::read_config_file(dir + "/config.json"));
    DI_ASSIGN_OR_RETURN(model::ModelFamily family, model::detect_family(text, dir + "/config.json"));
    switch (family) {
    case model::ModelFamily::kDeepseekV4: {
        DI_ASSIGN_OR_RETURN(auto m, model::deepseek_v4::DeepseekV4Model::load(dir, shard));
        return std::unique_ptr<model::ShardedLm>(std::move(m));
    }
    case model::ModelFamily::kDeepseekV41: {
        DI_ASSIGN_OR_RETURN(auto m, model::deepseek_v41::DeepseekV41Model::load(dir, shard));
        return std::unique_ptr<model::ShardedLm>(std::move(m));
    }
    }
    return core::internal_error("unreachable");
}

double peak_rss_mib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0; // kB
    return -1;
}

RssMib rss_mib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    RssMib r;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) r.total = std::stod(line.substr(6)) / 1024.0; // kB
        if (line.rfind("RssAnon:", 0) == 0) r.anon = std::stod(line.substr(8)) / 1024.0;
        if (line.rfind("RssFile:", 0) == 0) r.file = std::stod(line.substr(8)) / 1024.0;
    }
    return r;
}

int run_follower_rank(const Args& args, ParallelRun& par, const char* command, bool report_usage) {
    const std::string who = "rank " + std::to_string(par.rank());
    auto lm = load_sharded_model(args, par);
    if (!lm.ok()) {
        std::fprintf(stderr, "deepinfer %s: %s\n", command,
                     lm.status().with_context(who).to_string().c_str());
        return 1;
    }
    parallel::StepChannel channel(*par.world());
    if (core::Status s = model::deepseek_v4::run_model_follower(**lm, channel); !s.ok()) {
        std::fprintf(stderr, "deepinfer %s: %s\n", command, s.with_context(who).to_string().c_str());
        return 1;
    }
    if (args.has("profile") || report_usage)
        std::fprintf(stderr, "%s: peak RSS %.1f MiB (weights bound %.1f MiB), %llu bytes sent over MPI\n",
                     who.c_str(), peak_rss_mib(), (*lm)->info().resident_weight_bytes / (1 << 20),
                     static_cast<unsigned long long>(ParallelRun::bytes_sent()));
    return 0;
}

std::uint64_t hash_flags(const Args& args, const std::set<std::string>& flags) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const std::string& f : flags) {
        const std::string v =
            f + "=" + (args.has(f) ? args.get_or(f, "(set)") : std::string("(absent)")) + ";";
        h = parallel::fnv1a64(std::as_bytes(std::span<const char>(v.data(), v.size())), h);
    }
    return h;
}

core::Result<std::unique_ptr<ParallelRun>> start_parallel(const Args& args, const std::string& model_dir,
                                                          std::uint64_t config_hash) {
    auto run = std::make_unique<ParallelRun>();
    std::vector<std::string> values;
    std::vector<parallel::LayoutFlag> flags;
    values.reserve(std::size(kLayoutFlags));
    for (const char* f : kLayoutFlags) {
        if (!args.has(f)) continue;
        values.push_back(args.get_or(f, ""));
        flags.push_back({f, values.back()});
    }
    bool mpi = false;
#ifdef DEEPINFER_HAVE_MPI
    mpi = parallel::launched_by_mpirun();
#endif
    if (!mpi) {
        // One process: the flags must describe a world of one.
        auto layout = parallel::parse_parallel_layout(flags, 1);
        if (!layout.ok()) return layout.status().with_context("one process (not started by mpirun -np N)");
        run->layout_ = *layout;
        return run;
    }
#ifdef DEEPINFER_HAVE_MPI
    DI_ASSIGN_OR_RETURN(long long deadline_s, args.get_int("collective-deadline-s", 30));
    if (deadline_s < 1 || deadline_s > 3600)
        return core::invalid_argument("--collective-deadline-s must be in [1, 3600]");
    DI_ASSIGN_OR_RETURN(run->runtime_, parallel::MpiRuntime::init(nullptr, nullptr));
    DI_ASSIGN_OR_RETURN(run->world_, run->runtime_->world(std::chrono::seconds(deadline_s)));
    DI_ASSIGN_OR_RETURN(run->layout_, parallel::parse_parallel_layout(flags, run->world_->size()));
    DI_ASSIGN_OR_RETURN(run->groups_, parallel::make_layout_groups(*run->world_, run->layout_));
    parallel::RankIdentity id;
    DI_ASSIGN_OR_RETURN(id.checkpoint_hash, parallel::fingerprint_checkpoint_dir(model_dir));
    // The matmul numerics (--numerics / DEEPINFER_NUMERICS, taken out by main) change every result too, and
    // so do whether the LM head is held as FP8 blocks (--head-fp8 / DEEPINFER_HEAD_FP8), whether it also
    // carries int8 panels (DEEPINFER_HEAD_PANELS, the CPU). The dense FP8 weights' panels
    // (DEEPINFER_DENSE_PANELS) change no result, only speed and memory; the ranks still agree on them, so
    // that every rank runs the same kernels.
    id.config_hash =
        (((config_hash * 31 + static_cast<std::uint64_t>(kernels::cpu::default_numerics())) * 31 +
          static_cast<std::uint64_t>(model::head_as_fp8())) *
             31 +
         static_cast<std::uint64_t>(model::head_int8_panels())) *
            31 +
        static_cast<std::uint64_t>(model::dense_int8_panels());
    id.checkpoint_label = model_dir;
    id.layout = run->layout_;
    DI_RETURN_IF_ERROR(parallel::handshake(*run->world_, id));
#endif
    return run;
}

} // namespace deepinfer::cli
