#pragma once
// Binds the server to the real stack: a DeepSeek V4 model (model/), the continuous-batching engine on its
// own thread (engine::AsyncEngine), the tokenizer, the DeepSeek V4 chat encoding and DSML output parser
// (tokenizer/). Built only when those libraries exist (DEEPINFER_HAVE_ENGINE_BACKEND).

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine_config.h"
#include "model/sharded_lm.h"
#include "server/backend.h"

namespace deepinfer::server {

struct EngineBackendOptions {
    std::string model_dir;
    // tokenizer.json to use; empty: MODEL_DIR/tokenizer.json when present, else installed_tokenizer when
    // present, else an error naming the places tried. A tokenizer too large for the model's vocabulary
    // (test models) gives way to a byte-level stand-in, with a warning.
    std::string tokenizer_path;
    std::string installed_tokenizer; // the one in the installed data directory (found from the binary)
    engine::EngineConfig engine;
    int max_pending_requests = 1024; // the engine's inbox bound (submit answers ResourceExhausted beyond)
    // The effort prompts' table: "auto" (what the checkpoint ships, decided as SGLang does:
    // tokenizer::detect_effort_table), "release" or "0731".
    std::string effort_table = "auto";
    bool plain_content = false; // default for requests that do not set "plain_content"
    bool profile = false;       // keep the op census of every forward (stats().ops, /metrics)
    // Multi-process runs (cli/parallel_run.h, docs/parallelism.md): this rank's shard instead of the whole
    // model, and the leader's step-publishing CausalLm that the engine drives instead of the model. Unset:
    // one process.
    std::function<core::Result<std::unique_ptr<model::ShardedLm>>(const std::string&)> load_model;
    std::function<std::unique_ptr<model::CausalLm>(model::ShardedLm*)> wrap_model;
    // More /metrics text (EngineStats::extra_metrics), called on the HTTP thread that serves /metrics.
    std::function<std::string()> extra_metrics;
};

core::Result<std::unique_ptr<Backend>> make_engine_backend(const EngineBackendOptions& options);

} // namespace deepinfer::server
