// `deepinfer generate`, two modes:
//  * one prompt (--prompt-ids 1,2,3 or --prompt TEXT with a tokenizer): greedy decoding straight on the
//    model (a trivial block table and one slot), printing the generated ids (and text). --dump-probes writes
//    every layer's hidden streams, router choices and indexer top-k, to find the first stage that diverges.
//  * many prompts (--input-jsonl FILE): through the serving engine (continuous batching, paged KV, the full
//    sampler), JSONL out, progress bar on stderr (engine/offline.h documents the line format).

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/parallel_run.h"
#include "core/thread_pool.h"
#include "engine/offline.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/step_sync.h"
#include "model/registry.h"
#include "model/sequence_runner.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer generate --model DIR (--prompt-ids 1,2,3 | --prompt-ids-file F|- | --prompt TEXT)\n"
    "                          [--max-tokens N]\n"
    "                          [--chunk-size C] [--block-size B] [--dump-probes FILE.safetensors]\n"
    "                          [--tokenizer FILE] [--profile] [--engram-gather on|off]\n"
    "       deepinfer generate --model DIR --input-jsonl FILE|- [--output-jsonl FILE|-] [--no-progress]\n"
    "                          [--max-tokens N] [--tokenizer FILE] [engine flags]\n"
    "One prompt: greedy decoding; prints the generated token ids, comma-separated, on one line (and the\n"
    "text when the prompt was text). Many prompts: one JSON object per input line, e.g.\n"
    "{\"prompt_ids\": [1, 2], \"max_tokens\": 8, \"temperature\": 0.7, \"seed\": 1} or {\"prompt\": "
    "\"text\"}.\n"
    "--prompt-ids-file: ids separated by commas and/or whitespace (a JSON array works too), for prompts\n"
    "too long for the command line.\n"
    "The tokenizer defaults to DIR/tokenizer.json when present. --profile prints the op census of the\n"
    "prefill and of the decode steps (calls, time, share, GB/s, GFLOP/s per op) on stderr.\n"
    "--engram-gather off (one prompt; bench only, V4.1): the Engram layers get zeros instead of table rows.\n"
    "Engine flags:\n";

// Ids from a file (or stdin): separated by commas, whitespace, and optional JSON brackets.
core::Result<std::vector<int32_t>> read_ids_file(const std::string& path) {
    std::ifstream file;
    if (path != "-") {
        file.open(path, std::ios::binary);
        if (!file) return core::not_found(path + ": cannot open --prompt-ids-file");
    }
    std::istream& in = path == "-" ? std::cin : file;
    std::vector<int32_t> ids;
    std::string tok;
    auto flush = [&]() -> core::Status {
        if (tok.empty()) return core::Status::ok_status();
        if (tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 9)
            return core::invalid_argument(path + ": '" + tok + "' is not a token id (--prompt-ids-file)");
        ids.push_back(std::stoi(tok));
        tok.clear();
        return core::Status::ok_status();
    };
    for (char c; in.get(c);) {
        if (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '[' || c == ']') {
            DI_RETURN_IF_ERROR(flush());
        } else {
            tok.push_back(c);
        }
    }
    DI_RETURN_IF_ERROR(flush());
    return ids;
}

core::Result<std::vector<int32_t>> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = s.find(',', i);
        const std::string tok = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 9)
            return core::invalid_argument("--prompt-ids: '" + tok +
                                          "' is not a token id (expected e.g. 1,2,3)");
        ids.push_back(std::stoi(tok));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return ids;
}

int fail(const core::Status& s) {
    std::fprintf(stderr, "deepinfer generate: %s\n", s.to_string().c_str());
    return 1;
}

// --tokenizer FILE, else MODEL/tokenizer.json when it exists; nullopt when neither.
core::Result<std::optional<tokenizer::Tokenizer>> load_tokenizer(const Args& args) {
    std::string path = args.get_or("tokenizer", "");
    if (path.empty()) {
        std::filesystem::path p = std::filesystem::path(*args.get("model")) / "tokenizer.json";
        std::error_code ec;
        if (!std::filesystem::exists(p, ec)) return std::optional<tokenizer::Tokenizer>();
        path = p.string();
    }
    DI_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::from_file(path));
    return std::optional<tokenizer::Tokenizer>(std::move(tok));
}

// Many prompts through the engine: JSONL in, JSONL out.
int run_jsonl(const Args& args, model::CausalLm& m, const std::optional<tokenizer::Tokenizer>& tok) {
    auto config = engine_config_from_args(args);
    if (!config.ok()) return fail(config.status());
    if (config->num_kv_blocks == 0 && config->kv_cache_memory_bytes == 0)
        config->kv_cache_memory_bytes = 1ll << 30; // 1 GiB default for offline runs
    auto engine = engine::LLMEngine::create(&m, *config);
    if (!engine.ok()) return fail(engine.status());

    engine::OfflineOptions options;
    options.progress = !args.has("no-progress");
    auto max_tokens = args.get_int("max-tokens", 16);
    if (!max_tokens.ok()) return fail(max_tokens.status());
    options.defaults.max_tokens = static_cast<int32_t>(*max_tokens);
    if (tok) {
        options.tokenize = [&tok](const std::string& text) -> core::Result<std::vector<int32_t>> {
            return tok->encode(text, /*add_special_tokens=*/true);
        };
        options.detokenize = [&tok](const std::vector<int32_t>& ids) { return tok->decode(ids); };
    }

    const std::string in_path = *args.get("input-jsonl"), out_path = args.get_or("output-jsonl", "-");
    std::ifstream in_file;
    std::ofstream out_file;
    if (in_path != "-") {
        in_file.open(in_path);
        if (!in_file) return fail(core::not_found(in_path + ": cannot open --input-jsonl"));
    }
    if (out_path != "-") {
        out_file.open(out_path);
        if (!out_file) return fail(core::io_error(out_path + ": cannot open --output-jsonl for writing"));
    }
    std::istream& in = in_path == "-" ? std::cin : in_file;
    std::ostream& out = out_path == "-" ? std::cout : out_file;
    auto summary = engine::run_offline_jsonl(**engine, in, out, options);
    if (!summary.ok()) return fail(summary.status());
    std::fprintf(stderr,
                 "deepinfer generate: %lld requests (%lld rejected), %lld prompt + %lld generated tokens "
                 "in %.2f s\n",
                 static_cast<long long>(summary->num_requests), static_cast<long long>(summary->num_errors),
                 static_cast<long long>(summary->prompt_tokens),
                 static_cast<long long>(summary->output_tokens), summary->seconds);
    return summary->num_errors == 0 ? 0 : 1;
}

// Largest forward generate runs: a prompt chunk (the whole prompt when chunk <= 0).
int64_t c_tokens(int64_t chunk, size_t prompt) {
    return chunk > 0 ? std::min<int64_t>(chunk, static_cast<int64_t>(prompt)) : static_cast<int64_t>(prompt);
}

// EP load statistics and the step protocol's traffic (--profile under mpirun), on stderr.
void print_parallel_profile(const model::ShardedLm& m, const model::deepseek_v4::LeaderLm& leader,
                            uint64_t steps) {
    std::fprintf(stderr, "step protocol: %llu steps, %lld bytes published by the leader (%.0f per step)\n",
                 static_cast<unsigned long long>(steps), static_cast<long long>(leader.published_bytes()),
                 steps ? static_cast<double>(leader.published_bytes()) / static_cast<double>(steps) : 0.0);
    std::fprintf(stderr, "rank 0: peak RSS %.1f MiB (weights bound %.1f MiB), %llu bytes sent over MPI\n",
                 peak_rss_mib(), m.info().resident_weight_bytes / (1 << 20),
                 static_cast<unsigned long long>(ParallelRun::bytes_sent()));
    const parallel::ExpertLoadSnapshot* s = m.expert_load();
    if (!s || s->step == 0) return;
    std::fprintf(stderr,
                 "EP load (all layers, steps up to %llu): imbalance %.3f over experts, %.3f over EP ranks;"
                 " rows per EP rank:",
                 static_cast<unsigned long long>(s->step), s->expert_imbalance, s->ep_rank_imbalance);
    for (int64_t v : s->ep_rank_tokens) std::fprintf(stderr, " %lld", static_cast<long long>(v));
    std::fprintf(stderr, "\n");
}

int generate_on_leader(const Args* args, ParallelRun& par, parallel::StepChannel* channel);

int run_generate(const std::vector<std::string>& argv) {
    std::set<std::string> value_flags = engine_value_flags();
    value_flags.insert({"model", "prompt-ids", "prompt-ids-file", "prompt", "max-tokens", "chunk-size",
                        "dump-probes", "tokenizer", "input-jsonl", "output-jsonl", "engram-gather"});
    add_parallel_flags(value_flags);
    std::set<std::string> bool_flags = engine_bool_flags();
    bool_flags.insert({"help", "no-progress", "profile"});
    auto args = Args::parse(argv, value_flags, bool_flags);
    if (!args.ok()) {
        std::fprintf(stderr, "deepinfer generate: %s\n%s%s%s", args.status().message().c_str(), kUsage,
                     engine_flags_help(), parallel_flags_help());
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s%s%s", kUsage, engine_flags_help(), parallel_flags_help());
        return 0;
    }
    const int inputs = args->has("prompt-ids") + args->has("prompt-ids-file") + args->has("prompt") +
                       args->has("input-jsonl");
    if (!args->get("model") || inputs != 1) {
        std::fprintf(
            stderr,
            "deepinfer generate: --model and exactly one of --prompt-ids, --prompt-ids-file, --prompt, "
            "--input-jsonl are required\n%s",
            kUsage);
        return 2;
    }
    if (args->has("threads")) { // the single-prompt path runs on the global pool
        auto threads = args->get_int("threads", 0);
        if (!threads.ok()) return fail(threads.status());
        core::ThreadPool::set_default_threads(static_cast<int>(*threads));
    }
    // Under mpirun: MPI, the layout's groups and the start-up handshake; rank 0 generates, the others
    // follow its steps (docs/parallelism.md).
    // The config fingerprint: flags that change shapes or numerics (start_parallel adds the matmul
    // numerics), so ranks that would compute differently are refused.
    auto par = start_parallel(*args, *args->get("model"),
                              hash_flags(*args, {"chunk-size", "block-size", "ep-stats-interval"}));
    if (!par.ok()) return fail(par.status());
    if (!(*par)->leader()) return (*par)->finish(run_follower_rank(*args, **par, "generate"));
    int rc = 0;
    {
        std::optional<parallel::StepChannel> channel;
        if ((*par)->active()) channel.emplace(*(*par)->world());
        rc = generate_on_leader(&*args, **par, channel ? &*channel : nullptr);
        // Followers leave their loop whatever happened here (an error exits after them).
        if (channel) {
            if (core::Status s = channel->publish_shutdown(); !s.ok() && rc == 0) rc = fail(s);
        }
    }
    return (*par)->finish(rc);
}

// One process: any family the registry knows. Under mpirun: this rank's shard (V4 or V4.1), kept as such
// for the leader's step wrapper.
struct GenerateModel {
    std::unique_ptr<model::CausalLm> model;
    model::ShardedLm* v4 = nullptr; // set when sharded
};
core::Result<GenerateModel> load_generate_model(const Args& args, ParallelRun& par) {
    GenerateModel g;
    if (par.active()) {
        DI_ASSIGN_OR_RETURN(auto v4, load_sharded_model(args, par));
        g.v4 = v4.get();
        g.model = std::move(v4);
    } else {
        DI_ASSIGN_OR_RETURN(g.model, model::load_causal_lm(*args.get("model")));
    }
    return g;
}

// Rank 0 (or the only process): everything but the followers' loop.
int generate_on_leader(const Args* args, ParallelRun& par, parallel::StepChannel* channel) {
    using model::deepseek_v4::DeepseekV4Model;
    auto tok = load_tokenizer(*args);
    if (!tok.ok()) {
        // The model directory's own tokenizer.json is only needed for text: token ids run without it.
        if (args->has("tokenizer") || args->has("prompt")) return fail(tok.status());
        std::fprintf(stderr, "deepinfer generate: tokenizer not loaded, token ids only (%s)\n",
                     tok.status().to_string().c_str());
        tok = std::optional<tokenizer::Tokenizer>();
    }
    if (args->has("prompt") && !*tok)
        return fail(core::invalid_argument("--prompt needs a tokenizer: pass --tokenizer FILE or put "
                                           "tokenizer.json in the model directory"));
    if (args->has("input-jsonl")) {
        auto lm = load_generate_model(*args, par);
        if (!lm.ok()) return fail(lm.status());
        if (!channel) return run_jsonl(*args, *lm->model, *tok);
        model::deepseek_v4::LeaderLm leader(lm->v4, channel);
        return run_jsonl(*args, leader, *tok);
    }
    core::Result<std::vector<int32_t>> ids =
        args->has("prompt") ? core::Result<std::vector<int32_t>>((*tok)->encode(*args->get("prompt"), true))
        : args->has("prompt-ids-file") ? read_ids_file(*args->get("prompt-ids-file"))
                                       : parse_ids(*args->get("prompt-ids"));
    if (!ids.ok()) return fail(ids.status());
    if (ids->empty()) return fail(core::invalid_argument("--prompt: the prompt encodes to no tokens"));
    auto max_tokens = args->get_int("max-tokens", 16);
    auto chunk = args->get_int("chunk-size", 0);
    auto block_size = args->get_int("block-size", 256);
    if (!max_tokens.ok()) return fail(max_tokens.status());
    if (!chunk.ok()) return fail(chunk.status());
    if (!block_size.ok()) return fail(block_size.status());
    if (*max_tokens < 0) return fail(core::invalid_argument("--max-tokens must be >= 0"));

    auto lm = load_generate_model(*args, par);
    if (!lm.ok()) return fail(lm.status());
    model::CausalLm& m = *lm->model;
    // Under mpirun every step and KV operation goes through the leader's wrapper (step_sync.h).
    std::optional<model::deepseek_v4::LeaderLm> leader;
    if (channel) leader.emplace(lm->v4, channel);
    model::CausalLm* run_lm = leader ? static_cast<model::CausalLm*>(&*leader) : &m;
    for (int32_t id : *ids)
        if (id >= m.vocab_size())
            return fail(core::invalid_argument("--prompt-ids: token id " + std::to_string(id) +
                                               " is outside the vocabulary of " +
                                               std::to_string(m.vocab_size())));
    const int64_t total = static_cast<int64_t>(ids->size()) + *max_tokens;
    model::KvCacheSpec spec;
    spec.block_size = *block_size;
    spec.num_blocks = (total + spec.block_size - 1) / spec.block_size;
    spec.num_slots = 1;
    model::RuntimeSpec runtime{std::max<int64_t>(c_tokens(*chunk, ids->size()), 1), 1};
    const std::string gather = args->get("engram-gather").value_or("on");
    if (gather != "on" && gather != "off")
        return fail(core::invalid_argument("--engram-gather must be on or off, got '" + gather + "'"));
    runtime.engram_gather = gather == "on";
    if (core::Status s = run_lm->configure_runtime(runtime); !s.ok()) return fail(s);
    if (core::Status s = run_lm->init_kv_cache(spec); !s.ok()) return fail(s);
    const bool profile = args->has("profile");
    m.profiler()->set_enabled(profile);
    std::vector<int32_t> blocks;
    for (int32_t b = 0; b < spec.num_blocks; ++b) blocks.push_back(b);

    const auto dump = args->get("dump-probes");
    std::unique_ptr<model::ProbeRecorder> probes = dump ? m.attach_probe_recorder() : nullptr;
    if (dump && !probes)
        return fail(core::unimplemented("--dump-probes: this model family records no probes"));
    model::SequenceRunner runner(run_lm, 0, blocks);
    std::vector<float> logits;
    // Prefill chunk by chunk so every chunk's probes are logged.
    const int64_t c = *chunk > 0 ? *chunk : std::max<int64_t>(1, static_cast<int64_t>(ids->size()));
    for (size_t s = 0; s < ids->size(); s += c) {
        std::vector<int32_t> part(ids->begin() + s, ids->begin() + std::min(ids->size(), s + c));
        if (core::Status st = runner.feed(part, 0, false, &logits); !st.ok()) return fail(st);
        if (probes) probes->record(part);
    }
    kernels::ProfileSnapshot prefill_profile = m.profiler()->snapshot();
    m.profiler()->clear();
    std::vector<int32_t> out;
    for (int64_t i = 0; i < *max_tokens; ++i) {
        const int32_t next = model::argmax(logits.data(), m.vocab_size());
        out.push_back(next);
        if (i + 1 == *max_tokens) break;
        if (core::Status st = runner.feed({next}, 0, false, &logits); !st.ok()) return fail(st);
        if (probes) probes->record({next});
    }
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? "," : "", out[i]);
    std::printf("\n");
    if (args->has("prompt")) std::printf("%s\n", (*tok)->decode(out).c_str());
    std::fflush(stdout);
    if (profile) { // the op census, on stderr (stdout carries the tokens)
        kernels::print_profile(stderr, prefill_profile, {}, "prefill");
        kernels::print_profile(stderr, m.profiler()->snapshot(), {}, "decode");
        if (leader) print_parallel_profile(*lm->v4, *leader, channel->last_step());
    }
    if (probes)
        if (core::Status s = probes->write(*dump); !s.ok()) return fail(s);
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("generate",
                    "offline generation: one prompt (ids or text, greedy, probes) or JSONL batches",
                    run_generate);

} // namespace deepinfer::cli
