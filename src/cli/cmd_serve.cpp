// `deepinfer serve --model DIR`: the OpenAI-compatible HTTP server.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/parallel_run.h"
#include "cli/serve_backends.h"
#include "cli/serve_compat.h"
#include "core/logging.h"
#include "kernels/profiler.h"
#include "model/deepseek_v4/step_sync.h"
#include "parallel/expert_load.h"
#include "parallel/step_channel.h"
#include "server/http_server.h"
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
#include "cli/engine_flags.h"
#include "server/engine_backend.h"
#endif

namespace deepinfer::cli {

std::vector<ServeBackend>& serve_backend_registry() {
    static std::vector<ServeBackend> registry;
    return registry;
}

namespace {

const char* kUsage = R"(usage: deepinfer serve --model DIR [options]     (or: deepinfer serve DIR [options])

Serves the model over the OpenAI API: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
GET /health, GET /metrics.

  --model DIR               model directory (config.json, tokenizer.json, *.safetensors)
  --host ADDR               address to listen on (default 127.0.0.1)
  --port N                  port (default 8000; 0 picks a free one)
  --port-file PATH          write the bound port here once listening (useful with --port 0)
  --api-key KEY             require "Authorization: Bearer KEY" on /v1/* (also DEEPINFER_API_KEY; empty
                            is refused)
  --allowed-hosts H1,H2     serve only requests whose Host header names one of these ("*": any; default:
                            the loopback names when bound to loopback without an API key, else any)
  --served-model-name NAME  the model id clients send (default: the model directory's name)
  --max-inflight N          generation requests admitted at once; more get 429 (default 256)
  --http-threads N          requests served at once (worker threads; a stream holds one; idle and slow
                            connections hold none) (default 512)
  --max-n N                 largest n accepted (default 16)
  --drain-timeout SECONDS   on SIGTERM/SIGINT: in-flight requests get this long to finish before they are
                            ended with an error event (default 30); new ones get 503 meanwhile
  --tokenizer PATH          tokenizer.json (also DEEPINFER_TOKENIZER; default: MODEL/tokenizer.json, else
                            the installed PREFIX/share/deepinfer/tokenizer/deepseek-v4/tokenizer.json)
  --effort-table auto|release|0731
                            the reasoning-effort prompts' table (default auto: what the checkpoint's
                            encoding/encoding_dsv4.py defines, as SGLang decides; release when absent)
  --default-chat-template-kwargs JSON
                            server-wide thinking default for chat requests that say nothing, e.g.
                            '{"thinking": false}' (keys: thinking, enable_thinking, reasoning_effort;
                            default: thinking on, effort high, as DeepSeek's API and vLLM)
  --reasoning-effort E      default effort of thinking requests: none (thinking off), low/medium/high
                            (-> high), xhigh/max (-> max); default high
  --plain-content           encode message text without matching special tokens (role markers typed by
                            users stay text); requests may set "plain_content" (default off: official)
  --profile                 keep the op census of every forward (calls, time, bytes, flops per op kind):
                            exported on /metrics as deepinfer_op_*; the table is printed at exit
  --backend engine          the engine (default); the test tree's deepinfer-fake binary adds "fake", a
                            deterministic stand-in (--fake-step-us N per step, --fake-context N tokens)
  --enable-test-hooks       honour deepinfer_test.forced_output in requests (tests only)
  --log-level LEVEL         debug, info, warn, error (default info)

vLLM / SGLang launch flags are accepted where they mean something here: --tensor-parallel-size / --tp 1,
--max-model-len, --context-length, --model-path, --served-model-name; no-ops (logged):
--reasoning-parser / --tool-call-parser deepseek_v4, --tokenizer-mode deepseek_v4, --enable-auto-tool-choice,
--trust-remote-code, --enable-prefix-caching, --gpu-memory-utilization / --mem-fraction-static (no GPU
backend: size the KV pool with --kv-cache-memory); others (--swap-space, --chat-template, ...) are refused
with the reason.

engine (with --backend engine; the KV pool defaults to every sequence reaching min(max-model-len, 16384)):
)";

#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
// PREFIX/share/deepinfer/tokenizer/deepseek-v4/tokenizer.json for the binary at PREFIX/bin/deepinfer
// (found from /proc/self/exe, so a copied or installed binary finds its data); empty if unknown.
std::string installed_tokenizer_path() {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec || exe.empty()) return {};
    return (exe.parent_path().parent_path() / "share/deepinfer/tokenizer/deepseek-v4/tokenizer.json")
        .string();
}
#endif

int serve_on_leader(const Args* args, parallel::StepChannel* channel, ParallelRun* par,
                    const std::vector<std::string>& compat_notes);

// Under mpirun: the leader's first failed step (a rank killed or stopped, a follower's step failing). The
// job cannot go on, so the server stops: the LeaderLm's failure callback records it and raises SIGTERM,
// which the signal thread of serve_on_leader takes (every other thread blocks it) to drain the server; in-
// flight requests end with the engine's error, new ones get 503, and serve exits 1.
struct JobFailure {
    std::mutex mu;
    core::Status status; // under mu
    std::atomic<bool> failed{false};

    void report(const core::Status& s) {
        {
            std::lock_guard<std::mutex> lock(mu);
            if (failed.load()) return;
            status = s;
            failed.store(true);
        }
        DI_LOG(Error) << "deepinfer serve: the parallel job failed: " << s.to_string()
                      << "; stopping the server (in-flight requests end with this error) and exiting";
        kill(getpid(), SIGTERM);
    }
    std::string message() {
        std::lock_guard<std::mutex> lock(mu);
        return status.to_string();
    }
};

int run_serve(const std::vector<std::string>& argv) {
    std::set<std::string> value_flags = {"model",           "host",         "port",
                                         "port-file",       "api-key",      "served-model-name",
                                         "max-inflight",    "http-threads", "max-n",
                                         "backend",         "fake-step-us", "fake-context",
                                         "log-level",       "tokenizer",    "allowed-hosts",
                                         "drain-timeout",   "effort-table", "default-chat-template-kwargs",
                                         "reasoning-effort"};
    std::set<std::string> bool_flags = {"help", "enable-test-hooks", "plain-content", "profile"};
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
    value_flags.merge(engine_value_flags());
    bool_flags.merge(engine_bool_flags());
    add_parallel_flags(value_flags);
#endif
    std::set<std::string> native = value_flags;
    native.insert(bool_flags.begin(), bool_flags.end());
    auto compat = translate_serve_compat_flags(argv, native);
    if (!compat.ok()) {
        std::fprintf(stderr, "deepinfer serve: %s\n", compat.status().message().c_str());
        return 2;
    }
    // The compat names join the known set only so that a misspelt one is suggested; they were translated.
    std::set<std::string> known_values = value_flags;
    known_values.merge(serve_compat_flag_names());
    auto args = Args::parse(compat->argv, known_values, bool_flags);
    if (!args.ok()) {
        std::fprintf(stderr, "deepinfer serve: %s\n\n%s", args.status().message().c_str(), kUsage);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kUsage);
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
        std::printf("%s%s", engine_flags_help(), parallel_flags_help());
#endif
        return 0;
    }
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
    // Under mpirun (engine backend): rank 0 serves HTTP, the others follow its steps (docs/parallelism.md).
    // SIGINT/SIGTERM are blocked before MPI starts its threads, so that they reach the leader's sigwait
    // (below) instead of killing it from an MPI thread; followers take them back (default action).
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::unique_ptr<ParallelRun> par;
    if (args->get_or("backend", "engine") == "engine" && args->has("model")) {
        auto started = start_parallel(
            *args, *args->get("model"),
            hash_flags(*args, {"block-size", "ep-stats-interval", "max-num-seqs", "max-num-batched-tokens"}));
        if (!started.ok()) {
            std::fprintf(stderr, "deepinfer serve: %s\n", started.status().to_string().c_str());
            return 1;
        }
        par = std::move(started).value();
        if (!par->leader()) {
            pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
            return par->finish(run_follower_rank(*args, *par, "serve"));
        }
    }
    std::optional<parallel::StepChannel> channel;
    if (par && par->active()) channel.emplace(*par->world());
    int rc = serve_on_leader(&*args, channel ? &*channel : nullptr, par.get(), compat->notes);
    // The backend (engine, LeaderLm) is gone: end the followers' loop.
    if (channel && !channel->publish_shutdown().ok() && rc == 0) rc = 1;
    return par ? par->finish(rc) : rc;
#else
    return serve_on_leader(&*args, nullptr, nullptr, compat->notes);
#endif
}

// Rank 0 (or the only process): HTTP, the engine, the tokenizer.
int serve_on_leader(const Args* args, parallel::StepChannel* channel, ParallelRun* par,
                    const std::vector<std::string>& compat_notes) {
    (void)channel; // used with the engine backend only
    (void)par;
    std::string level = args->get_or("log-level", "info");
    core::set_log_level(level == "debug"   ? core::LogLevel::kDebug
                        : level == "warn"  ? core::LogLevel::kWarn
                        : level == "error" ? core::LogLevel::kError
                                           : core::LogLevel::kInfo);
    for (const auto& note : compat_notes) DI_LOG(Info) << "deepinfer serve: " << note;
    std::optional<std::string> model_dir = args->get("model");
    if (!args->positional().empty()) { // `vllm serve MODEL` puts the model first
        if (args->positional().size() > 1 || model_dir) {
            std::fprintf(stderr,
                         "deepinfer serve: unexpected argument '%s' (the model is --model DIR or one "
                         "positional DIR)\n",
                         args->positional()[model_dir ? 0 : 1].c_str());
            return 2;
        }
        model_dir = args->positional()[0];
    }
    server::ServerConfig config;
    auto chat_defaults = tokenizer::chat_defaults_from_flags(args->get("default-chat-template-kwargs"),
                                                             args->get("reasoning-effort"));
    if (!chat_defaults.ok()) {
        std::fprintf(stderr, "deepinfer serve: %s\n", chat_defaults.status().message().c_str());
        return 2;
    }
    config.chat_defaults = *chat_defaults;
    config.host = args->get_or("host", "127.0.0.1");
    const char* env_key = std::getenv("DEEPINFER_API_KEY");
    config.api_key = args->get_or("api-key", env_key ? env_key : "");
    if (args->has("api-key") || env_key) {
        if (config.api_key.empty()) {
            std::fprintf(stderr,
                         "deepinfer serve: %s is empty; give a key, or neither for no authentication\n",
                         args->has("api-key") ? "--api-key" : "DEEPINFER_API_KEY");
            return 2;
        }
    }
    if (auto hosts = args->get("allowed-hosts")) {
        if (*hosts != "*") {
            std::stringstream ss(*hosts);
            for (std::string h; std::getline(ss, h, ',');) {
                if (!h.empty()) config.allowed_hosts.push_back(server::host_name_of(h));
            }
            if (config.allowed_hosts.empty()) {
                std::fprintf(stderr, "deepinfer serve: --allowed-hosts names no host (use '*' for any)\n");
                return 2;
            }
        }
    } else {
        config.allowed_hosts = server::default_allowed_hosts(config.host, config.api_key);
    }
    config.served_model_name = args->get_or("served-model-name", "");
    config.enable_test_hooks = args->has("enable-test-hooks");
    for (auto [flag, field, fallback] :
         {std::tuple{"port", &config.port, 8000}, std::tuple{"max-inflight", &config.max_inflight, 256},
          std::tuple{"http-threads", &config.http_threads, 512}, std::tuple{"max-n", &config.max_n, 16}}) {
        auto v = args->get_int(flag, fallback);
        if (!v.ok() || *v < 0 || *v > 1000000) {
            std::fprintf(stderr, "deepinfer serve: --%s must be a non-negative integer\n", flag);
            return 2;
        }
        *field = static_cast<int>(*v);
    }
    auto drain = args->get_int("drain-timeout", 30);
    if (!drain.ok() || *drain < 0 || *drain > 24 * 3600) {
        std::fprintf(stderr, "deepinfer serve: --drain-timeout must be 0..86400 seconds\n");
        return 2;
    }
    config.drain_timeout_ms = static_cast<int>(*drain * 1000);

    // SIGINT/SIGTERM are taken by one thread that stops the server; every other thread (the engine's, the
    // HTTP pool's: all started below) inherits this mask and blocks them.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    JobFailure job_failure; // outlives the backend, whose LeaderLm reports to it
    std::unique_ptr<server::Backend> backend;
    std::string kind = args->get_or("backend", "engine");
    const ServeBackend* registered = nullptr;
    for (const auto& b : serve_backend_registry()) {
        if (b.name == kind) registered = &b;
    }
    if (registered) {
        auto made = registered->make(*args);
        if (!made.ok()) {
            std::fprintf(stderr, "deepinfer serve: %s\n", made.status().message().c_str());
            return 2;
        }
        backend = std::move(made).value();
    } else if (kind == "engine") {
        const std::optional<std::string>& model = model_dir;
        if (!model) {
            std::fprintf(stderr, "deepinfer serve: --model DIR is required\n\n%s", kUsage);
            return 2;
        }
        if (std::error_code ec; !std::filesystem::is_directory(*model, ec)) {
            std::fprintf(
                stderr,
                "deepinfer serve: --model '%s' is not a directory; deepinfer serves a local checkpoint "
                "directory (config.json, *.safetensors): download it first, e.g. `huggingface-cli "
                "download %s --local-dir DIR`, then pass --model DIR\n",
                model->c_str(), model->c_str());
            return 2;
        }
#ifdef DEEPINFER_HAVE_ENGINE_BACKEND
        server::EngineBackendOptions eo;
        eo.model_dir = *model;
        const char* env_tok = std::getenv("DEEPINFER_TOKENIZER");
        eo.tokenizer_path = args->get_or("tokenizer", env_tok ? env_tok : "");
        eo.installed_tokenizer = installed_tokenizer_path();
        eo.effort_table = args->get_or("effort-table", "auto");
        eo.plain_content = args->has("plain-content");
        eo.profile = args->has("profile");
        auto engine_config = engine_config_from_args(*args);
        if (!engine_config.ok()) {
            std::fprintf(stderr, "deepinfer serve: %s\n", engine_config.status().message().c_str());
            return 2;
        }
        eo.engine = *engine_config;
        if (channel) { // the rank's shard, driven through the leader's step-publishing wrapper
            auto leader_lm = std::make_shared<model::deepseek_v4::LeaderLm*>(nullptr);
            eo.load_model = [args, par](const std::string&) { return load_sharded_model(*args, *par); };
            // The LeaderLm lives as long as the backend, which is destroyed before `leader_lm` goes.
            eo.wrap_model = [channel, &job_failure,
                             leader_lm](model::ShardedLm* m) -> std::unique_ptr<model::CausalLm> {
                auto leader = std::make_unique<model::deepseek_v4::LeaderLm>(m, channel);
                leader->set_on_failure([&job_failure](const core::Status& s) { job_failure.report(s); });
                leader->start_keep_alive(); // the engine thread sleeps while no request is in flight
                *leader_lm = leader.get();
                return leader;
            };
            // EP load statistics on /metrics (the leader's copy, taken after each exchange).
            eo.extra_metrics = [leader_lm]() -> std::string {
                if (!*leader_lm) return {};
                auto report = (*leader_lm)->expert_load_report();
                return report ? parallel::expert_load_prometheus(*report) : std::string();
            };
        }
        auto made = server::make_engine_backend(eo);
        if (!made.ok()) {
            std::fprintf(stderr, "deepinfer serve: %s\n", made.status().to_string().c_str());
            return 1;
        }
        backend = std::move(made).value();
#else
        std::fprintf(stderr, "deepinfer serve: this build has no engine backend\n");
        return 1;
#endif
    } else {
        std::string known = "engine";
        for (const auto& b : serve_backend_registry()) known += ", " + b.name;
        std::fprintf(stderr,
                     "deepinfer serve: --backend must be one of: %s (the fake backend is in the test "
                     "tree's deepinfer-fake binary)\n",
                     known.c_str());
        return 2;
    }

    server::HttpServer http(*backend, config);
    auto port = http.bind();
    if (!port.ok()) {
        std::fprintf(stderr, "deepinfer serve: %s\n", port.status().to_string().c_str());
        return 1;
    }
    if (auto pf = args->get("port-file")) {
        std::ofstream(*pf) << *port << "\n";
    }
    DI_LOG(Info) << "deepinfer serve: " << backend->model_name() << " on http://" << config.host << ":"
                 << *port;
    std::thread signal_thread([&] {
        int sig = 0;
        if (sigwait(&sigs, &sig) != 0 || sig == 0) return;
        if (job_failure.failed.load())
            http.shutdown("a rank of the parallel job failed: " + job_failure.message());
        else
            http.shutdown(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
    });
    core::Status st = http.serve();
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    if (args->has("profile")) {
        if (auto ops = backend->stats().ops) kernels::print_profile(stderr, *ops, {}, "serve");
    }
    if (!st.ok()) {
        std::fprintf(stderr, "deepinfer serve: %s\n", st.to_string().c_str());
        return 1;
    }
    if (job_failure.failed.load()) {
        std::fprintf(stderr, "deepinfer serve: exiting 1: the parallel job failed: %s\n",
                     job_failure.message().c_str());
        return 1;
    }
    return 0;
}

} // namespace
DI_REGISTER_COMMAND("serve", "serve a model over the OpenAI HTTP API", run_serve);
} // namespace deepinfer::cli
