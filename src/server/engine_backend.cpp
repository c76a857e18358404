#include "server/engine_backend.h"

#include <deque>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/logging.h"
#include "engine/admission.h"
#include "engine/async_engine.h"
#include "engine/engine.h"
#include "engine/grammar_constraint.h"
#include "model/registry.h"
#include "server/engine_backend_text.h"
#include "structured/vocabulary.h"

namespace deepinfer::server {

namespace {

class EngineBackend : public Backend {
public:
    EngineBackend(std::string name, std::unique_ptr<model::CausalLm> model,
                  std::unique_ptr<model::CausalLm> wrapper, std::unique_ptr<engine::AsyncEngine> async,
                  std::unique_ptr<tokenizer::TextCodec> codec, engine::EngineConfig resolved, int context,
                  int vocab, tokenizer::EffortTable effort_table, const EngineBackendOptions& options)
        : name_(std::move(name)), model_(std::move(model)), wrapper_(std::move(wrapper)),
          async_(std::move(async)), codec_(std::move(codec)), engine_config_(std::move(resolved)),
          context_(context), effort_table_(effort_table), plain_content_(options.plain_content),
          vocab_(vocab), max_prompt_bytes_(max_prompt_bytes(*this)), extra_metrics_(options.extra_metrics) {}
    ~EngineBackend() override { async_->shutdown(); }

    std::string model_name() const override { return name_; }
    int context_length() const override { return context_; }
    int vocab_size() const override { return vocab_; }
    core::Result<int> resolve_max_tokens(int prompt_tokens, std::optional<int> max_tokens) const override {
        DI_ASSIGN_OR_RETURN(int64_t n, engine::resolve_max_tokens(prompt_tokens, max_tokens, engine_config_));
        return static_cast<int>(std::min<int64_t>(n, INT32_MAX));
    }

    core::Result<std::vector<int32_t>> render_chat(const ChatPrompt& prompt) const override {
        const bool plain = prompt.plain_content.value_or(plain_content_);
        std::vector<tokenizer::ContentRange> content;
        DI_ASSIGN_OR_RETURN(std::string text,
                            detail::render_chat_text(prompt, effort_table_, plain ? &content : nullptr));
        DI_RETURN_IF_ERROR(check_prompt_bytes(text.size()));
        return plain ? codec_->encode_plain(text, content) : codec_->encode(text);
    }
    core::Result<std::vector<int32_t>> tokenize(std::string_view text) const override {
        DI_RETURN_IF_ERROR(check_prompt_bytes(text.size()));
        return codec_->encode(text);
    }
    std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const override {
        return codec_->new_detokenizer();
    }
    std::string token_text(int32_t token) const override { return codec_->token_text(token); }
    std::unique_ptr<OutputParser> new_output_parser(const ParserOptions& options) const override {
        return detail::make_dsml_parser(options);
    }

    core::Status submit(engine::Request request, const OutputConstraint& constraint,
                        OutputCallback callback) override {
        if (constraint.kind) {
            DI_ASSIGN_OR_RETURN(request.params.constraint, constraint_for(constraint));
            if (constraint.after_thinking) {
                DI_ASSIGN_OR_RETURN(
                    request.params.constraint,
                    after_thinking(std::move(request.params.constraint),
                                   request.params.max_tokens.value_or(context_))); // the server resolves it
            }
        }
        // Checked here so that bad values are a 400 before the response starts, not an error mid-stream.
        DI_RETURN_IF_ERROR(request.params.validate(vocab_));
        return async_->submit(std::move(request), std::move(callback));
    }
    void abort(const std::string& request_id) override { async_->abort(request_id); }
    core::Status check_constraint(const OutputConstraint& constraint) const override {
        if (!constraint.kind) return {};
        return constraint_for(constraint).status();
    }

    EngineStats stats() const override {
        engine::StepMetrics m = async_->last_step_metrics();
        engine::EngineCounters c = async_->counters();
        int pending = async_->num_pending();
        EngineStats s;
        // The last step's gauges go stale once the engine idles; nothing live means nothing running.
        s.running = std::min(m.num_running, pending);
        s.waiting = std::max(0, pending - s.running);
        s.kv_cache_usage = pending > 0 && m.kv_blocks_total > 0 ? static_cast<double>(m.kv_blocks_used) /
                                                                      static_cast<double>(m.kv_blocks_total)
                                                                : 0.0;
        s.counters = c;
        // The profiler copies its table under its own lock: safe while the engine thread records.
        if (kernels::Profiler* p = model_->profiler(); p && p->enabled()) s.ops = p->snapshot();
        if (extra_metrics_) s.extra_metrics = extra_metrics_();
        return s;
    }

private:
    // The compiled constraint for a request: built once per distinct source (bounded FIFO cache), over the
    // codec's vocabulary (built on first use). Thread-safe; compiling holds the lock (rare, per new schema).
    core::Result<std::shared_ptr<const engine::LogitsConstraint>>
    constraint_for(const OutputConstraint& c) const {
        if (!c.kind) return core::invalid_argument("no constraint");
        std::string key = std::to_string(static_cast<int>(*c.kind)) + '\n' + (c.single_call ? "1" : "0") +
                          c.only_tool + '\n' + c.source;
        std::lock_guard<std::mutex> lock(constraint_mu_);
        if (auto it = constraint_cache_.find(key); it != constraint_cache_.end()) return it->second;
        if (!vocabulary_) {
            tokenizer::TokenSpelling sp = codec_->spelling(vocab_);
            vocabulary_ = std::make_shared<const structured::TokenVocabulary>(
                std::move(sp.bytes), std::move(sp.special), std::move(sp.end_ids));
        }
        structured::DsmlToolsOptions tools;
        if (!c.only_tool.empty()) tools.only.push_back(c.only_tool);
        tools.max_calls = c.single_call ? 1 : 0;
        DI_ASSIGN_OR_RETURN(auto compiled,
                            engine::make_grammar_constraint(*c.kind, c.source, vocabulary_, tools));
        if (constraint_order_.size() >= kConstraintCacheSize) {
            constraint_cache_.erase(constraint_order_.front());
            constraint_order_.pop_front();
        }
        constraint_order_.push_back(key);
        constraint_cache_.emplace(std::move(key), compiled);
        return compiled;
    }

    // Thinking first: free tokens until </think>, then `c`; thinking is capped at half of max_tokens so that
    // max_tokens cannot run out before the constrained answer starts (docs/structured-outputs.md).
    core::Result<std::shared_ptr<const engine::LogitsConstraint>>
    after_thinking(std::shared_ptr<const engine::LogitsConstraint> c, int64_t max_tokens) const {
        std::vector<int32_t> think_end = codec_->encode("</think>");
        if (think_end.size() != 1) {
            return core::invalid_argument("the tokenizer has no single </think> token: a constraint cannot "
                                          "follow thinking; request non-thinking mode");
        }
        std::vector<int32_t> ends;
        std::shared_ptr<const engine::TriggerText> text;
        {
            std::lock_guard<std::mutex> lock(constraint_mu_);
            if (vocabulary_) {
                ends = vocabulary_->end_ids();
                if (!think_text_) {
                    think_text_ = engine::make_trigger_text("</think>", vocab_,
                                                            [&](int32_t t) { return codec_->token_text(t); });
                }
                text = think_text_;
            }
        }
        const auto budget =
            max_tokens > 0 ? static_cast<int32_t>(std::min<int64_t>(max_tokens / 2, INT32_MAX)) : -1;
        return std::shared_ptr<const engine::LogitsConstraint>(std::make_shared<engine::DeferredConstraint>(
            c->clone(), think_end[0], std::move(ends), budget, std::move(text)));
    }

    core::Status check_prompt_bytes(size_t bytes) const {
        if (bytes <= max_prompt_bytes_) return {};
        return core::out_of_range("the prompt's " + std::to_string(bytes) +
                                  " bytes cannot fit in the context of " + std::to_string(context_) +
                                  " tokens (at most " + std::to_string(max_prompt_bytes_) +
                                  " bytes are tokenized)");
    }

    std::string name_;
    std::unique_ptr<model::CausalLm> model_;   // outlives the engine below
    std::unique_ptr<model::CausalLm> wrapper_; // multi-process: what the engine drives
    std::unique_ptr<engine::AsyncEngine> async_;
    std::unique_ptr<tokenizer::TextCodec> codec_;
    engine::EngineConfig engine_config_; // resolved: the pool and model length the engine admits against
    int context_;
    tokenizer::EffortTable effort_table_;
    bool plain_content_;
    static constexpr size_t kConstraintCacheSize = 64;
    mutable std::mutex constraint_mu_;
    mutable std::shared_ptr<const structured::TokenVocabulary> vocabulary_;
    mutable std::shared_ptr<const engine::TriggerText> think_text_; // tokens spelling "</think>"
    mutable std::map<std::string, std::shared_ptr<const engine::LogitsConstraint>> constraint_cache_;
    mutable std::deque<std::string> constraint_order_;
    int vocab_;
    size_t max_prompt_bytes_ = 0;
    std::function<std::string()> extra_metrics_;
};

} // namespace

core::Result<std::unique_ptr<Backend>> make_engine_backend(const EngineBackendOptions& options) {
    namespace fs = std::filesystem;
    tokenizer::EffortTable effort_table = tokenizer::EffortTable::k0731;
    if (options.effort_table == "auto") {
        const tokenizer::EffortTableChoice choice = tokenizer::detect_effort_table(options.model_dir);
        effort_table = choice.table;
        DI_LOG(Info) << "effort table " << tokenizer::effort_table_name(choice.table) << ": "
                     << choice.reason;
    } else {
        auto parsed = tokenizer::parse_effort_table(options.effort_table);
        if (!parsed.ok()) return parsed.status().with_context("--effort-table");
        effort_table = *parsed;
    }
    // Multi-process: this rank's shard of a V4 model, and the leader's step-publishing wrapper the engine
    // drives; otherwise whatever family the registry finds (one process).
    std::unique_ptr<model::CausalLm> model;
    std::unique_ptr<model::CausalLm> wrapper;
    if (options.load_model) {
        DI_ASSIGN_OR_RETURN(auto v4, options.load_model(options.model_dir));
        if (options.wrap_model) wrapper = options.wrap_model(v4.get());
        model = std::move(v4);
    } else {
        DI_ASSIGN_OR_RETURN(model, model::load_causal_lm(options.model_dir));
    }
    const int64_t vocab = model->vocab_size();
    if (options.profile) {
        if (kernels::Profiler* p = model->profiler()) p->set_enabled(true);
    }

    DI_ASSIGN_OR_RETURN(
        auto codec,
        tokenizer::load_model_codec({options.model_dir, options.tokenizer_path, options.installed_tokenizer,
                                     vocab, static_cast<int32_t>(model->info().bos_token_id),
                                     static_cast<int32_t>(model->eos_token_id())}));

    engine::EngineConfig cfg = options.engine;
    if (cfg.max_model_len <= 0) cfg.max_model_len = model->info().max_position_embeddings;
    if (cfg.num_kv_blocks <= 0 && cfg.kv_cache_memory_bytes <= 0) {
        // Default pool: every running sequence can reach min(max_model_len, 16k) tokens.
        int64_t per_seq = (std::min<int64_t>(cfg.max_model_len, 16384) + cfg.block_size - 1) / cfg.block_size;
        cfg.num_kv_blocks = per_seq * cfg.max_num_seqs;
    }
    DI_ASSIGN_OR_RETURN(auto llm, engine::LLMEngine::create(wrapper ? wrapper.get() : model.get(), cfg));
    engine::EngineConfig resolved = llm->config();
    const int context = static_cast<int>(std::min<int64_t>(resolved.max_model_len, INT32_MAX));
    engine::AsyncEngineConfig acfg;
    acfg.max_pending_requests = options.max_pending_requests;
    auto async = std::make_unique<engine::AsyncEngine>(std::move(llm), acfg);
    std::string name = fs::path(options.model_dir).lexically_normal().filename().string();
    if (name.empty()) name = fs::path(options.model_dir).lexically_normal().parent_path().filename().string();
    DI_LOG(Info) << "engine backend: " << name << ", context " << context << ", tokenizer "
                 << codec->describe();
    return std::unique_ptr<Backend>(std::make_unique<EngineBackend>(
        name, std::move(model), std::move(wrapper), std::move(async), std::move(codec), std::move(resolved),
        context, static_cast<int>(vocab), effort_table, options));
}

} // namespace deepinfer::server
