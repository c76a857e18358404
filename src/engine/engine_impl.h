#pragma once
// LLMEngine's internals, shared by engine.cpp (add_request / abort / step / create) and
// engine_invariants.cpp (the test-facing consistency check). Internal to the engine.

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_builder.h"
#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/request_state.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

class LLMEngine::Impl {
public:
    Impl(model::CausalLm* model, const EngineConfig& config, int32_t vocab)
        : model_(model), config_(config), vocab_(vocab),
          blocks_(static_cast<int32_t>(config.num_kv_blocks), config.block_size, config.max_num_seqs,
                  config.enable_prefix_caching),
          scheduler_({config.max_num_seqs, config.max_num_batched_tokens,
                      std::max<int32_t>(1, static_cast<int32_t>(config.num_kv_blocks / 100))},
                     &blocks_) {
        metrics_.kv_blocks_total = config.num_kv_blocks;
        // A step's per-row buffers, planned for its most sampling rows (one per running sequence) rather than
        // grown by the busiest step so far (a server's heap then moved with the load it had seen; only
        // prompt-logprob rows can ask for more).
        const auto rows = static_cast<size_t>(std::max<int32_t>(config.max_num_seqs, 1));
        logits_.reserve(rows * static_cast<size_t>(vocab));
        presampled_.reserve(rows);
        plain_rows_.reserve(rows);
        row_masked_.reserve(rows);
        changed_.reserve(rows);
    }

    ~Impl() {
        if (pool_) model_->set_thread_pool(nullptr); // the model outlives the engine's pool
    }

    core::Status add_request(Request request);
    bool abort(const std::string& id);
    core::Result<std::vector<RequestOutput>> step();
    bool has_work() const {
        return !scheduler_.running().empty() || !scheduler_.waiting().empty() || !changed_.empty();
    }

    model::CausalLm* model_;
    EngineConfig config_;
    int32_t vocab_;
    BlockManager blocks_;
    Scheduler scheduler_;
    Sampler sampler_;
    // The step's rows masked and sampled in parallel on pool_ (presample()): one Sampler (scratch) per pool
    // thread, and per logits row its result, or nothing for a row sample_row() takes in order (prompt
    // logprobs, an n > 1 request's shared first row, or a batch too small to split).
    std::vector<Sampler> samplers_;
    std::vector<std::optional<SampleResult>> presampled_;
    std::vector<size_t> plain_rows_;
    std::unordered_map<std::string, std::unique_ptr<RequestState>> requests_;
    std::vector<RequestState*> changed_; // requests with something to report
    uint64_t next_request_number_ = 0;
    int64_t next_seq_id_ = 0;
    StepMetrics metrics_;
    EngineCounters counters_;
    std::vector<float> logits_;
    std::vector<float> constrained_row_; // a constrained sequence's masked logits row
    std::vector<uint32_t> mask_;
    std::vector<std::vector<uint32_t>> row_masks_; // per pool thread: a constrained row's mask
    std::vector<uint8_t> row_masked_;              // per logits row: masked in place already
    std::unique_ptr<core::ThreadPool> pool_;       // persistent compute pool every forward runs on

private:
    void mark_changed(RequestState* r) {
        if (!r->changed) changed_.push_back(r);
        r->changed = true;
    }
    void finish(Sequence* seq, FinishReason reason, std::optional<int32_t> stop_token = std::nullopt) {
        seq->finish_reason = reason;
        seq->stop_token_id = stop_token;
        seq->status = SequenceStatus::kFinished;
        scheduler_.remove(seq);
        ++metrics_.num_finished;
        mark_changed(seq->request);
    }
    // Appends a sampled token and applies the stop rules.
    void append_token(Sequence* seq, const SampleResult& s);
    // row_masked: the constraint's mask is applied to row already (presample()).
    void sample_row(Sequence* seq, std::span<const float> row, int64_t position, bool row_masked = false);
    // The row is a constrained sampling row whose own sequence alone reads it: masked in place.
    bool maskable(const LogitsRow& lr) const;
    // Masks logits_ row i (lr's) in place with the sequence's constraint; sets row_masked_[i].
    void mask_row(const LogitsRow& lr, size_t i, std::vector<uint32_t>& mask);
    int32_t tokens_left(const Sequence* seq) const;
    SampleInput sample_input(const Sequence* seq, std::span<const float> row, int64_t position) const;
    // Masks the constrained rows of `rows` (logits_: one row each) in place and samples them and the
    // unconstrained ones in parallel into presampled_. Each draw depends only on its own row and sequence,
    // so the tokens are those sample_row() would give.
    void presample(const std::vector<LogitsRow>& rows);
    void start_children(RequestState* r, std::span<const float> row, int64_t position);
    std::vector<RequestOutput> collect_outputs();
};

} // namespace deepinfer::engine
