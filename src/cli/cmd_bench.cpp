// `deepinfer bench`: prefill and decode throughput of a model (B sequences decoding together in one
// ForwardBatch), next to this machine's limits measured in the same run: read bandwidth (decode ceiling =
// bandwidth / weight bytes a step reads) and FP32 FMA rate (prefill ceiling = rate / flops per token).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cli/args.h"
#include "cli/bench_machine.h"
#include "cli/command.h"
#include "cli/parallel_run.h"
#include "core/thread_pool.h"
#include "kernels/cpu/linear.h"
#include "kernels/profiler.h"
#include "model/deepseek_v4/step_sync.h"
#include "model/registry.h"
#include "model/sequence_runner.h"
#include "weights/safetensors_writer.h"

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: deepinfer bench --model DIR [--prompt-len P] [--gen N] [--batch B] [--threads T] [--repeats R]\n"
    "                       [--bw-mb M] [--json] [--profile] [--logits-out FILE.safetensors]\n"
    "                       [--engram-gather on|off]\n"
    "Prefill (B prompts of P tokens in one batch) and decode (N steps of B tokens) throughput, median of R\n"
    "repeats after a warm-up, against the read bandwidth and FMA rate measured in the same run. Prompt "
    "token\n"
    "i of sequence b is 2 + ((i + 1000 b) * 7919 + 13) mod (vocab - 2). --logits-out writes sequence 0's\n"
    "prefill logits [P, vocab] (and its ids) for comparison with another engine. --profile adds R more\n"
    "cycles with the op census on, summed (per op: calls, time, share of the forward, GB/s, GFLOP/s and the\n"
    "fraction of the measured roofline), printed for the prefill and the decode steps (on stderr with "
    "--json).\n"
    "--bw-mb M: the read probe's buffer in MiB (default 1024; half of it in huge pages is what it streams),\n"
    "raised to twice the bytes a decode step reads (at most 4x the last-level cache), so the probe meets\n"
    "the caches as the decode does.\n"
    "--engram-gather off (bench only; V4.1): the Engram layers get zeros instead of table rows, to measure\n"
    "what the gather costs; the outputs change.\n"
    "Under mpirun -np N with --ep/--tp (docs/parallelism.md): rank 0 runs the benchmark through the step\n"
    "protocol, the others follow; adds the bytes rank 0 sent per decode step and each rank's peak RSS.\n";

int fail(const core::Status& s) {
    std::fprintf(stderr, "deepinfer bench: %s\n", s.to_string().c_str());
    return 1;
}

int32_t prompt_token(int64_t b, int64_t i, int64_t vocab) {
    return static_cast<int32_t>(2 + ((i + 1000 * b) * 7919 + 13) % (vocab - 2));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}
std::string fmt1(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}
double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The probes beside the measured repeats and the profiled cycles: passes per pattern, and the compute
// probes' chain steps per pass (a quarter of the end-of-run probe's: ~20 ms a pass on AVX-512).
constexpr int kBesidePasses = 2;
constexpr int64_t kBesideComputeIters = 5'000'000;

struct Cycle {
    double prefill_s = 0, decode_s = 0;
    uint64_t decode_bytes_sent = 0;  // over MPI by this rank during the decode steps (0 in one process)
    uint64_t prefill_bytes_sent = 0; // over MPI by this rank during the prefill forward (0 in one process)
};

// B prompts of P tokens in one batch, then `gen` decode steps of B tokens; every sequence restarts at 0.
// With `profile`, the model's op census is on for the cycle and its prefill / decode parts are returned.
struct CycleProfile {
    kernels::ProfileSnapshot prefill, decode;
};

// Greedy decoding of B sequences: each step's B picks (kernels::argmax over the vocabulary) run on the
// compute pool, idle between forwards, as the engine samples a batch's rows (engine.cpp, presample).
core::Result<Cycle> run_cycle(model::CausalLm& m, core::ThreadPool& pool, int64_t B, int64_t P, int64_t gen,
                              int64_t blocks_per_seq, CycleProfile* profile = nullptr) {
    kernels::Profiler* prof = profile ? m.profiler() : nullptr;
    if (prof) {
        prof->clear();
        prof->set_enabled(true);
    }
    const int64_t V = m.vocab_size();
    model::ForwardBatch pb;
    for (int64_t b = 0; b < B; ++b) {
        model::SequenceChunk ch;
        ch.seq_id = b;
        ch.slot = static_cast<int32_t>(b);
        ch.num_tokens = static_cast<int32_t>(P);
        ch.token_offset = static_cast<int32_t>(b * P);
        ch.reset_slot = true;
        for (int64_t k = 0; k < blocks_per_seq; ++k)
            ch.block_table.push_back(static_cast<int32_t>(b * blocks_per_seq + k));
        for (int64_t i = 0; i < P; ++i) {
            pb.token_ids.push_back(prompt_token(b, i, V));
            pb.positions.push_back(i);
        }
        pb.logits_rows.push_back(static_cast<int32_t>(b * P + P - 1));
        pb.chunks.push_back(ch);
    }
    std::vector<float> logits(B * V);
    Cycle out;
    const uint64_t prefill_sent0 = ParallelRun::bytes_sent();
    auto t0 = Clock::now();
    DI_RETURN_IF_ERROR(m.forward(pb, logits.data()));
    out.prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    out.prefill_bytes_sent = ParallelRun::bytes_sent() - prefill_sent0;
    if (prof) {
        profile->prefill = prof->snapshot();
        prof->clear();
    }

    model::ForwardBatch db;
    db.chunks = pb.chunks;
    db.token_ids.resize(B);
    db.positions.resize(B);
    for (int64_t b = 0; b < B; ++b) {
        db.chunks[b].num_tokens = 1;
        db.chunks[b].token_offset = static_cast<int32_t>(b);
        db.chunks[b].reset_slot = false;
        db.logits_rows.push_back(static_cast<int32_t>(b));
    }
    const uint64_t sent0 = ParallelRun::bytes_sent();
    t0 = Clock::now();
    auto pick = [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) db.token_ids[b] = model::argmax(logits.data() + b * V, V);
    };
    for (int64_t s = 0; s < gen; ++s) {
        B > 1 ? pool.parallel_for(B, pick) : pick(0, B);
        for (int64_t b = 0; b < B; ++b) {
            db.positions[b] = P + s;
            db.chunks[b].start_pos = P + s;
        }
        DI_RETURN_IF_ERROR(m.forward(db, logits.data()));
    }
    out.decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
    out.decode_bytes_sent = ParallelRun::bytes_sent() - sent0;
    if (prof) {
        profile->decode = prof->snapshot();
        prof->set_enabled(false);
    }
    return out;
}

// Sequence 0's prefill logits [P, V], its ids, and gen_len greedy tokens (for a peer engine to reproduce).
core::Status write_logits(model::CausalLm& m, int64_t P, int64_t gen_len, int64_t block_size,
                          const std::string& path) {
    const int64_t V = m.vocab_size(), nb = (P + gen_len + block_size - 1) / block_size;
    std::vector<int32_t> ids, blocks;
    for (int64_t i = 0; i < P; ++i) ids.push_back(prompt_token(0, i, V));
    for (int64_t k = 0; k < nb; ++k) blocks.push_back(static_cast<int32_t>(k));
    model::SequenceRunner runner(&m, 0, blocks);
    std::vector<float> logits;
    DI_RETURN_IF_ERROR(runner.feed(ids, 0, true, &logits));
    weights::SafetensorsWriter w;
    w.add_i64("ids", core::Shape{P}, std::vector<int64_t>(ids.begin(), ids.end()));
    w.add_f32("logits", core::Shape{P, V}, logits);
    // A few greedy tokens through the KV cache, for the peer to reproduce.
    std::vector<int64_t> gen;
    std::vector<float> last(logits.end() - V, logits.end());
    for (int64_t s = 0; s < gen_len; ++s) {
        gen.push_back(model::argmax(last.data(), V));
        if (s + 1 < gen_len)
            DI_RETURN_IF_ERROR(runner.feed({static_cast<int32_t>(gen.back())}, 0, false, &last));
    }
    w.add_i64("gen_ids", core::Shape{gen_len}, gen);
    return w.write(path);
}

int bench_on_leader(const Args& args, ParallelRun& par, parallel::StepChannel* channel);

int run_bench(const std::vector<std::string>& argv) {
    std::set<std::string> value_flags = {"model",   "prompt-len", "gen",        "batch",        "threads",
                                         "repeats", "bw-mb",      "logits-out", "engram-gather"};
    add_parallel_flags(value_flags);
    auto args = Args::parse(argv, value_flags, {"help", "json", "profile"});
    if (!args.ok()) {
        std::fprintf(stderr, "deepinfer bench: %s\n%s", args.status().message().c_str(), kUsage);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s%s", kUsage, parallel_flags_help());
        return 0;
    }
    if (!args->get("model")) {
        std::fprintf(stderr, "deepinfer bench: --model is required\n%s", kUsage);
        return 2;
    }
    // Every rank sizes its pool before loading (followers compute with it too).
    if (auto t = args->get_int("threads", 2); t.ok() && *t > 0)
        core::ThreadPool::set_default_threads(static_cast<int>(*t));
    auto par = start_parallel(*args, *args->get("model"), hash_flags(*args, {"ep-stats-interval"}));
    if (!par.ok()) return fail(par.status());
    if (!(*par)->leader()) return (*par)->finish(run_follower_rank(*args, **par, "bench", true));
    int rc = 0;
    {
        std::optional<parallel::StepChannel> channel;
        if ((*par)->active()) channel.emplace(*(*par)->world());
        rc = bench_on_leader(*args, **par, channel ? &*channel : nullptr);
        if (channel) { // the followers leave their loop whatever happened here
            if (core::Status s = channel->publish_shutdown(); !s.ok() && rc == 0) rc = fail(s);
        }
    }
    return (*par)->finish(rc);
}

int bench_on_leader(const Args& a, ParallelRun& par, parallel::StepChannel* channel) {
    const Args* args = &a;
    long long P = 0, N = 0, B = 0, T = 0, R = 0, bw_mb = 0;
    for (auto [flag, out, def] : {std::tuple{"prompt-len", &P, 64LL}, std::tuple{"gen", &N, 32LL},
                                  std::tuple{"batch", &B, 1LL}, std::tuple{"threads", &T, 2LL},
                                  std::tuple{"repeats", &R, 3LL}, std::tuple{"bw-mb", &bw_mb, 1024LL}}) {
        auto v = args->get_int(flag, def);
        if (!v.ok()) return fail(v.status());
        if (*v <= 0) return fail(core::invalid_argument(std::string("--") + flag + " must be positive"));
        *out = *v;
    }
    const std::string gather = args->get("engram-gather").value_or("on");
    if (gather != "on" && gather != "off")
        return fail(core::invalid_argument("--engram-gather must be on or off, got '" + gather + "'"));
    core::ThreadPool::set_default_threads(static_cast<int>(T));
    // Under mpirun: this rank's shard, driven through the step-publishing LeaderLm (its keep-alive thread
    // carries the followers through the machine measurement).
    std::unique_ptr<model::CausalLm> lm;
    std::unique_ptr<model::deepseek_v4::LeaderLm> leader;
    const auto load_t0 = std::chrono::steady_clock::now();
    if (channel) {
        auto shard = load_sharded_model(*args, par);
        if (!shard.ok()) return fail(shard.status());
        leader = std::make_unique<model::deepseek_v4::LeaderLm>(shard->get(), channel);
        leader->start_keep_alive();
        lm = std::move(shard).value();
    } else {
        auto loaded = model::load_causal_lm(*args->get("model"));
        if (!loaded.ok()) return fail(loaded.status());
        lm = std::move(loaded).value();
    }
    model::CausalLm& m = leader ? static_cast<model::CausalLm&>(*leader) : *lm;
    // Load cost (open, bind, placement copies, an LM head quantized at load) and what it left resident.
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_t0).count();
    const RssMib loaded_rss = rss_mib();
    // Like the engine, bench owns the compute pool and plans the model's workspace for its largest step.
    core::ThreadPool pool(static_cast<int>(T));
    m.set_thread_pool(&pool);
    model::RuntimeSpec runtime{B * P, static_cast<int32_t>(B)};
    runtime.engram_gather = gather == "on";
    if (core::Status s = m.configure_runtime(runtime); !s.ok()) return fail(s);
    const model::ModelInfo cfg = m.info();

    const int64_t unit = cfg.kv_block_unit; // block size: a multiple of every compression ratio
    const int64_t block_size = unit * std::max<int64_t>(1, (256 + unit - 1) / unit);
    const int64_t blocks_per_seq = (P + N + block_size - 1) / block_size;
    model::KvCacheSpec spec;
    spec.block_size = block_size;
    spec.num_blocks = B * blocks_per_seq;
    spec.num_slots = static_cast<int32_t>(B);
    if (core::Status s = m.init_kv_cache(spec); !s.ok()) return fail(s);
    if (auto path = args->get("logits-out")) {
        if (core::Status s = write_logits(m, P, std::min<long long>(N, 5), block_size, *path); !s.ok())
            return fail(s);
    }

    // Warm-up (pages of every touched weight mapped in, allocator settled), then the measured repeats.
    if (auto c = run_cycle(m, pool, B, P, std::min<long long>(N, 4), blocks_per_seq); !c.ok())
        return fail(c.status());
    const model::DecodeCost tc = m.decode_cost();
    const double E = static_cast<double>(cfg.n_routed_experts), K = static_cast<double>(cfg.experts_per_tok);
    const double per_expert = tc.expert_bytes; // one expert in every layer
    const double bytes_token = tc.dense_bytes + K * per_expert;
    const double distinct = E * (1.0 - std::pow(1.0 - K / E, static_cast<double>(B))); // uniform routing
    const double bytes_step = tc.dense_bytes + distinct * per_expert;

    // The read probe beside the repeats (ReadProbe): once before the first repeat and after each, so each
    // repeat's decode is set against the mean of the two readings that bracket it, not only against the
    // probe at the end of the run, which on a shared machine can read another state of it.
    // Each half of its buffer holds at least the bytes a decode step reads, up to twice the last-level cache,
    // so the probe's stream meets the caches as the decode's does: on a 2-vCPU Xeon reporting a 480 MiB L3, a
    // 256 MiB half (--bw-mb 512) read 39-40 GB/s beside a decode whose 1 GB of weights per token came from
    // DRAM, where a 1 GiB half read 32-34 (docs/benchmarks.md, session 17). The cap keeps the probe's memory
    // bounded for checkpoints whose steps read tens of GB (past twice the cache, DRAM is what it reads).
    const size_t llc = last_level_cache_bytes();
    const size_t step_floor = std::min(static_cast<size_t>(bytes_step), llc > 0 ? 2 * llc : size_t{0});
    const size_t probe_bytes = std::max(static_cast<size_t>(bw_mb) << 20, 2 * step_floor);
    ReadProbe probe(static_cast<int>(T), probe_bytes);
    std::vector<double> beside{probe.measure(kBesidePasses).best}, decode_beside;
    std::vector<double> prefill, decode, sent_per_step, prefill_sent;
    for (long long r = 0; r < R; ++r) {
        auto c = run_cycle(m, pool, B, P, N, blocks_per_seq);
        if (!c.ok()) return fail(c.status());
        beside.push_back(probe.measure(kBesidePasses).best);
        prefill.push_back(static_cast<double>(B * P) / c->prefill_s);
        decode.push_back(static_cast<double>(B * N) / c->decode_s);
        const double step_gb_s = static_cast<double>(N) / c->decode_s * bytes_step / 1e9;
        decode_beside.push_back(step_gb_s / (0.5 * (beside[r] + beside[r + 1])));
        sent_per_step.push_back(static_cast<double>(c->decode_bytes_sent) / static_cast<double>(N));
        prefill_sent.push_back(static_cast<double>(c->prefill_bytes_sent));
    }
    const int ranks = par.active() ? par.world()->size() : 1;
    const std::string layout = par.active() ? par.layout().to_string() : std::string("1 process");
    const double prefill_tps = median(prefill), decode_tps = median(decode);
    // The census sums R profiled cycles (one prefill forward each: a single one swung by +-30% from run to
    // run on a shared 2-vCPU machine), set against peaks read beside them: all three before the first
    // profiled cycle and after each, averaged.
    CycleProfile census;
    std::vector<double> census_read, census_fma, census_vnni;
    auto census_peaks = [&] {
        census_read.push_back(probe.measure(kBesidePasses).best);
        const ComputePeaks c = measure_compute(static_cast<int>(T), kBesidePasses, kBesideComputeIters);
        census_fma.push_back(c.fma_gflop_s);
        census_vnni.push_back(c.vnni_gop_s);
    };
    if (args->has("profile")) {
        census_peaks();
        for (int64_t r = 0; r < R; ++r) {
            CycleProfile one;
            if (auto c = run_cycle(m, pool, B, P, N, blocks_per_seq, &one); !c.ok()) return fail(c.status());
            census.prefill += one.prefill;
            census.decode += one.decode;
            census_peaks();
        }
    }

    const MachineLimits lim = measure_machine(probe, static_cast<int>(T), 5);
    const double decode_ceiling = static_cast<double>(B) * lim.read_gb_s * 1e9 / bytes_step;
    // Prefill flops per prompt token: every weight but the LM head for each token, the head for the last
    // row of each prompt only (the prefill's logits).
    const double flops_token = 2.0 * (tc.dense_macs - tc.head_macs + K * tc.expert_macs) +
                               2.0 * tc.head_macs / static_cast<double>(P);
    const double prefill_ceiling = lim.fma_gflop_s * 1e9 / flops_token;

    const double beside_read = median(beside), beside_frac = median(decode_beside);
    if (args->has("profile")) {
        std::FILE* out = args->has("json") ? stderr : stdout;
        const kernels::Roofline peaks{mean(census_read), mean(census_fma), mean(census_vnni)};
        std::fprintf(
            out,
            "census peaks, read beside its cycles (the mean of %zu readings, before the first and after "
            "each): read %.1f GB/s, FP32 FMA %.1f GFLOP/s, int8 VNNI %.0f GOP/s (the probe at the end "
            "of the run: %.1f, %.1f, %.0f)\n",
            census_read.size(), peaks.read_gb_s, peaks.gflop_s, peaks.int8_gop_s, lim.read_gb_s,
            lim.fma_gflop_s, lim.vnni_gop_s);
        kernels::print_profile(
            out, census.prefill, peaks,
            ("prefill of " + std::to_string(B) + " x " + std::to_string(P) + " tokens").c_str());
        kernels::print_profile(out, census.decode, peaks,
                               (std::to_string(N) + " decode steps of batch " + std::to_string(B)).c_str());
    }
    if (args->has("json")) {
        std::printf(
            "{\"model\": \"%s\", \"prompt_len\": %lld, \"gen\": %lld, \"batch\": %lld, \"threads\": %lld, "
            "\"repeats\": %lld, \"prefill_tok_s\": %.4f, \"decode_tok_s\": %.4f, \"read_gb_s\": %.3f, "
            "\"read_1stream_gb_s\": %.3f, \"read_4k_gb_s\": %.3f, \"fma_gflop_s\": %.2f, \"vnni_gop_s\": "
            "%.1f, \"isa\": \"%s\", "
            "\"kernel_isa\": \"%s\", \"bytes_per_token\": %.0f, \"bytes_per_step\": %.0f, "
            "\"decode_roofline_tok_s\": %.4f, \"decode_fraction_of_roofline\": %.4f, "
            "\"flops_per_token\": %.0f, \"prefill_roofline_tok_s\": %.4f, "
            "\"prefill_fraction_of_roofline\": %.4f, \"ranks\": %d, \"layout\": \"%s\", "
            "\"decode_bytes_sent_per_step_rank0\": %.0f, \"prefill_bytes_sent_rank0\": %.0f, "
            "\"peak_rss_mib_rank0\": %.1f, \"load_s\": %.3f, \"rss_after_load_mib\": %.1f, "
            "\"rss_anon_after_load_mib\": %.1f, \"rss_file_after_load_mib\": %.1f, "
            "\"read_beside_gb_s\": %.3f, \"decode_fraction_beside\": %.4f, \"read_buffer_bytes\": %zu, "
            "\"last_level_cache_bytes\": %zu}\n",
            args->get("model")->c_str(), P, N, B, T, R, prefill_tps, decode_tps, lim.read_gb_s,
            lim.read_1stream_gb_s, lim.read_4k_gb_s, lim.fma_gflop_s, lim.vnni_gop_s, lim.isa.c_str(),
            kernels::cpu::isa_name(kernels::cpu::active_isa()), bytes_token, bytes_step, decode_ceiling,
            decode_tps / decode_ceiling, flops_token, prefill_ceiling, prefill_tps / prefill_ceiling, ranks,
            layout.c_str(), median(sent_per_step), median(prefill_sent), peak_rss_mib(), load_s,
            loaded_rss.total, loaded_rss.anon, loaded_rss.file, beside_read, beside_frac, lim.buffer_bytes,
            llc);
        return 0;
    }
    std::printf("model %s: %lld layers, hidden %lld, %lld experts top-%lld; resident weights %.1f MB\n",
                args->get("model")->c_str(), static_cast<long long>(cfg.num_layers),
                static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.n_routed_experts),
                static_cast<long long>(cfg.experts_per_tok), cfg.resident_weight_bytes / 1e6);
    std::printf("run: prompt %lld, gen %lld, batch %lld, threads %lld, median of %lld after a warm-up\n", P,
                N, B, T, R);
    std::printf("load: %.2f s; after it VmRSS %.1f MiB (RssAnon %.1f, RssFile %.1f)\n", load_s,
                loaded_rss.total, loaded_rss.anon, loaded_rss.file);
    std::printf(
        "machine (%s, %lld threads): read %.1f GB/s over %.0f MiB (last-level cache %.0f MiB; best "
        "streaming pattern; 1 stream %.1f, 4 streams on 4 KiB pages %.1f), FP32 FMA %.1f GFLOP/s, int8 "
        "VNNI %.0f GOP/s; kernels: %s%s, numerics: %s\n",
        lim.isa.c_str(), T, lim.read_gb_s, lim.buffer_bytes / 1048576.0, llc / 1048576.0,
        lim.read_1stream_gb_s, lim.read_4k_gb_s, lim.fma_gflop_s, lim.vnni_gop_s,
        kernels::cpu::isa_name(kernels::cpu::active_isa()),
        // The fast int8 GEMMs' tiles (bit-identical to VNNI): their rate is not the VNNI peak's.
        kernels::cpu::active_isa() == kernels::cpu::Isa::kAvx512 && kernels::cpu::amx_supported()
            ? " (int8 GEMMs on AMX tiles)"
            : "",
        kernels::cpu::numerics_name(kernels::cpu::default_numerics()));
    std::printf(
        "decode weight bytes: %.1f MB per token (dense %.1f MB + %lld experts x %.1f MB), %.1f MB per "
        "step of %lld\n",
        bytes_token / 1e6, tc.dense_bytes / 1e6, static_cast<long long>(K), per_expert / 1e6,
        bytes_step / 1e6, B);
    std::printf(
        "prefill: %.2f tok/s  (FMA roofline %.1f tok/s at %.3f GFLOP/token, the head once per prompt: "
        "%.1f%%)\n",
        prefill_tps, prefill_ceiling, flops_token / 1e9, 100.0 * prefill_tps / prefill_ceiling);
    std::printf("decode:  %.2f tok/s  (bandwidth roofline %.1f tok/s: %.1f%%)\n", decode_tps, decode_ceiling,
                100.0 * decode_tps / decode_ceiling);
    std::string readings, fractions;
    for (double v : beside) readings += (readings.empty() ? "" : ", ") + fmt1(v);
    for (double v : decode_beside) fractions += (fractions.empty() ? "" : ", ") + fmt1(100.0 * v);
    std::printf(
        "decode beside the read: %.1f%% of the read measured before and after each repeat (median of %lld: "
        "%s%%; the readings, GB/s: %s)\n",
        100.0 * beside_frac, R, fractions.c_str(), readings.c_str());
    if (par.active())
        std::printf(
            "parallel: %d ranks, %s; rank 0 sent %.0f bytes over MPI per decode step, %.0f in the prefill "
            "forward; peak RSS of rank 0 %.1f MiB (each follower prints its own on stderr)\n",
            ranks, layout.c_str(), median(sent_per_step), median(prefill_sent), peak_rss_mib());
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("bench", "prefill/decode throughput against the measured roofline", run_bench);

} // namespace deepinfer::cli
