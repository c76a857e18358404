#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/check.h"
#include "core/logging.h"
#include "engine/admission.h"
#include "engine/batch_builder.h"
#include "engine/engine_impl.h"

namespace deepinfer::engine {

namespace {
uint64_t mix_seed(uint64_t a, uint64_t b) {
    uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    return x ^ (x >> 29);
}
} // namespace

core::Status LLMEngine::Impl::add_request(Request request) {
    if (request.id.empty()) return core::invalid_argument("request id is empty");
    if (requests_.count(request.id))
        return core::invalid_argument("duplicate request id '" + request.id + "'");
    if (request.prompt_ids.empty())
        return core::invalid_argument("request '" + request.id + "': empty prompt");
    for (int32_t t : request.prompt_ids)
        if (t < 0 || t >= vocab_)
            return core::invalid_argument("request '" + request.id + "': prompt token id " +
                                          std::to_string(t) + " outside the vocabulary [0, " +
                                          std::to_string(vocab_) + ")");
    DI_RETURN_IF_ERROR(request.params.validate(vocab_, config_.max_logprobs));
    const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
    auto max_tokens = resolve_max_tokens(prompt_len, request.params.max_tokens, config_);
    if (!max_tokens.ok()) return max_tokens.status().with_context("request '" + request.id + "'");

    auto r = std::make_unique<RequestState>();
    r->number = next_request_number_++;
    r->rng_seed = request.params.seed ? *request.params.seed : mix_seed(config_.default_seed, r->number);
    r->max_tokens = static_cast<int32_t>(std::min<int64_t>(*max_tokens, INT32_MAX));
    if (request.params.prompt_logprobs) r->prompt_logprobs.resize(prompt_len);
    r->pending_logprobs.resize(request.params.n);
    r->request = std::move(request);
    for (int32_t i = 0; i < r->request.params.n; ++i) {
        auto seq = std::make_unique<Sequence>();
        seq->seq_id = next_seq_id_++;
        seq->request = r.get();
        seq->sample_index = i;
        seq->tokens = r->request.prompt_ids;
        seq->prompt_len = static_cast<int32_t>(prompt_len);
        if (r->request.params.constraint) seq->constraint = r->request.params.constraint->clone();
        r->seqs.push_back(std::move(seq));
    }
    r->children_started = r->seqs.size() == 1;
    scheduler_.add_waiting(r->seqs[0].get());
    std::string id = r->request.id;
    requests_.emplace(std::move(id), std::move(r));
    return {};
}

bool LLMEngine::Impl::abort(const std::string& id) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second->finished) return false;
    for (auto& seq : it->second->seqs)
        if (!seq->is_finished()) finish(seq.get(), FinishReason::kAbort);
    return true;
}

void LLMEngine::Impl::append_token(Sequence* seq, const SampleResult& s) {
    RequestState* r = seq->request;
    const SamplingParams& p = r->request.params;
    const bool stops_allowed = seq->num_output() >= p.min_tokens;
    seq->tokens.push_back(s.token);
    if (seq->constraint) seq->constraint->accept(s.token);
    if (s.logprob) r->pending_logprobs[seq->sample_index].push_back(*s.logprob);
    mark_changed(r);
    if (stops_allowed && !p.ignore_eos && s.token == model_->eos_token_id()) {
        finish(seq, FinishReason::kStop, s.token);
    } else if (stops_allowed && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), s.token) !=
                                    p.stop_token_ids.end()) {
        finish(seq, FinishReason::kStop, s.token);
    } else if (seq->num_output() >= r->max_tokens || seq->num_tokens() >= config_.max_model_len) {
        finish(seq, FinishReason::kLength);
    }
}

// The tokens seq may still generate, the next one included (append_token's length checks): a constraint
// keeps only tokens after which it can still end in time.
int32_t LLMEngine::Impl::tokens_left(const Sequence* seq) const {
    const int64_t left = std::min<int64_t>(seq->request->max_tokens - seq->num_output(),
                                           config_.max_model_len - seq->num_tokens());
    return static_cast<int32_t>(std::clamp<int64_t>(left, 1, LogitsConstraint::kNoBudget));
}

// Constrained rows are masked where they lie (the engine owns logits_, and a sampling row is read by its
// own sequence only). The first row of an n > 1 request is left alone: its children sample from it too, each
// through its own constraint (sample_row's copy).
bool LLMEngine::Impl::maskable(const LogitsRow& lr) const {
    return lr.sample && lr.seq->constraint && !lr.seq->is_finished() && lr.seq->request->children_started;
}

void LLMEngine::Impl::mask_row(const LogitsRow& lr, size_t i, std::vector<uint32_t>& mask) {
    std::span<float> row(logits_.data() + i * size_t(vocab_), size_t(vocab_));
    mask_logits_in_place(*lr.seq->constraint, row, mask, tokens_left(lr.seq));
    row_masked_[i] = 1;
}

SampleInput LLMEngine::Impl::sample_input(const Sequence* seq, std::span<const float> row,
                                          int64_t position) const {
    const RequestState* r = seq->request;
    SampleInput in;
    in.logits = row;
    in.params = &r->request.params;
    in.prompt = std::span<const int32_t>(seq->tokens).first(seq->prompt_len);
    in.output = std::span<const int32_t>(seq->tokens).subspan(seq->prompt_len);
    in.seed = r->rng_seed;
    in.position = position;
    in.sample_index = seq->sample_index;
    in.eos_token_id = model_->eos_token_id();
    return in;
}

void LLMEngine::Impl::sample_row(Sequence* seq, std::span<const float> row, int64_t position,
                                 bool row_masked) {
    SampleInput in = sample_input(seq, row, position);
    if (seq->constraint && !row_masked)
        in.logits = apply_logits_constraint(*seq->constraint, row, constrained_row_, mask_, nullptr,
                                            tokens_left(seq));
    append_token(seq, sampler_.sample(in));
}

// A batch's rows are masked (constrained ones) and sampled in parallel on the compute pool, idle between
// forwards: each row by one thread, masked then sampled while it is still in that core's cache. Rows left to
// sample_row() in order: prompt-logprob rows, the shared first row of an n > 1 request, and every row of a
// batch too small to split (those constrained rows are masked here, on this thread).
void LLMEngine::Impl::presample(const std::vector<LogitsRow>& rows) {
    presampled_.assign(rows.size(), std::nullopt);
    row_masked_.assign(rows.size(), 0);
    const int threads = pool_ ? pool_->num_threads() : 1;
    plain_rows_.clear();
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].sample && !rows[i].seq->is_finished() && (!rows[i].seq->constraint || maskable(rows[i])))
            plain_rows_.push_back(i);
    if (threads < 2 || plain_rows_.size() < 2) {
        if (row_masks_.empty()) row_masks_.resize(1);
        for (size_t i = 0; i < rows.size(); ++i)
            if (maskable(rows[i])) mask_row(rows[i], i, row_masks_[0]);
        return;
    }
    samplers_.resize(threads);
    if (row_masks_.size() < static_cast<size_t>(threads)) row_masks_.resize(threads);
    const size_t n = plain_rows_.size();
    pool_->parallel_for(threads, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
            for (size_t j = static_cast<size_t>(k); j < n; j += static_cast<size_t>(threads)) {
                const size_t i = plain_rows_[j];
                if (rows[i].seq->constraint) mask_row(rows[i], i, row_masks_[static_cast<size_t>(k)]);
                std::span<const float> row(logits_.data() + i * size_t(vocab_), size_t(vocab_));
                presampled_[i] = samplers_[k].sample(sample_input(rows[i].seq, row, rows[i].position + 1));
            }
        }
    });
}

// n > 1: the other completions sample their first token from the same prompt logits, then share the
// prompt's blocks (fork) or, when no slot is free, wait to recompute like a preempted sequence.
void LLMEngine::Impl::start_children(RequestState* r, std::span<const float> row, int64_t position) {
    r->children_started = true;
    const Sequence& parent = *r->seqs[0];
    for (size_t i = 1; i < r->seqs.size(); ++i) {
        Sequence* child = r->seqs[i].get();
        sample_row(child, row, position);
        if (child->is_finished()) continue;
        if (parent.status == SequenceStatus::kRunning && scheduler_.fork(parent, child)) {
            model_->copy_slot(parent.slot, child->slot);
        } else {
            child->status = SequenceStatus::kPreempted;
            scheduler_.add_waiting(child, /*front=*/true);
        }
    }
}

std::vector<RequestOutput> LLMEngine::Impl::collect_outputs() {
    std::vector<RequestOutput> outs;
    for (RequestState* r : changed_) {
        r->changed = false;
        RequestOutput o;
        o.request_id = r->request.id;
        o.status = r->status;
        o.prompt_tokens = static_cast<int32_t>(r->request.prompt_ids.size());
        o.cached_tokens = std::max(r->cached_tokens, 0);
        if (r->wants_prompt_logprobs() && !r->prompt_logprobs_sent && r->seqs[0]->num_output() > 0) {
            o.prompt_logprobs = r->prompt_logprobs;
            r->prompt_logprobs_sent = true;
        }
        for (auto& seq : r->seqs) {
            o.completion_tokens += seq->num_output();
            bool report_finish = seq->is_finished() && !seq->finish_reported;
            if (seq->num_emitted == seq->num_output() && !report_finish) continue;
            CompletionDelta d;
            d.index = seq->sample_index;
            d.token_ids.assign(seq->tokens.begin() + seq->prompt_len + seq->num_emitted, seq->tokens.end());
            d.logprobs = std::move(r->pending_logprobs[seq->sample_index]);
            r->pending_logprobs[seq->sample_index].clear();
            seq->num_emitted = seq->num_output();
            d.num_output_tokens = seq->num_output();
            if (report_finish) {
                d.finish_reason = seq->finish_reason;
                d.stop_token_id = seq->stop_token_id;
                seq->finish_reported = true;
            }
            o.deltas.push_back(std::move(d));
        }
        r->finished = r->all_finished();
        o.finished = r->finished;
        outs.push_back(std::move(o));
    }
    changed_.clear();
    return outs;
}

} // namespace deepinfer::engine

namespace deepinfer::engine {

core::Result<std::vector<RequestOutput>> LLMEngine::Impl::step() {
    const auto t0 = std::chrono::steady_clock::now();
    StepMetrics m;
    m.step = ++counters_.steps;
    m.kv_blocks_total = config_.num_kv_blocks;
    metrics_ = m;

    SchedulerOutput sched = scheduler_.schedule();
    metrics_.num_preemptions = static_cast<int32_t>(sched.preempted.size());
    metrics_.prefix_query_tokens = sched.prefix_query_tokens;
    metrics_.prefix_hit_tokens = sched.prefix_hit_tokens;
    metrics_.num_prefill_tokens = sched.num_prefill_tokens;
    metrics_.num_decode_tokens = sched.num_decode_tokens;
    metrics_.batch_size = static_cast<int32_t>(sched.chunks.size());
    if (sched.chunks.empty() && changed_.empty() && !scheduler_.waiting().empty())
        return core::internal_error("scheduler made no progress with " +
                                    std::to_string(scheduler_.waiting().size()) + " waiting sequences");

    if (!sched.chunks.empty()) {
        for (const auto& [src, dst] : sched.block_copies) model_->copy_block(src, dst);
        BuiltBatch built = build_forward_batch(sched, blocks_, config_.token_buckets);
        metrics_.num_padding_tokens = built.num_padding;
        metrics_.num_logits_rows = static_cast<int32_t>(built.rows.size());
        logits_.assign(built.rows.size() * size_t(vocab_), 0.0f);
        core::Status st = model_->forward(built.batch, logits_.data());
        if (!st.ok()) {
            DI_LOG(Error) << "forward failed: " << st.to_string();
            for (const ScheduledChunk& c : sched.chunks) {
                RequestState* r = c.seq->request;
                if (r->status.ok()) r->status = st;
                for (auto& seq : r->seqs)
                    if (!seq->is_finished()) finish(seq.get(), FinishReason::kAbort);
            }
        } else {
            for (const ScheduledChunk& c : sched.chunks) scheduler_.on_computed(c.seq, c.num_tokens);
            presample(built.rows);
            for (size_t i = 0; i < built.rows.size(); ++i) {
                const LogitsRow& lr = built.rows[i];
                std::span<const float> row(logits_.data() + i * size_t(vocab_), size_t(vocab_));
                RequestState* r = lr.seq->request;
                if (!lr.sample) {
                    r->prompt_logprobs[lr.position + 1] = Sampler::logprob_of(
                        row, lr.seq->tokens[lr.position + 1], *r->request.params.prompt_logprobs);
                    continue;
                }
                if (lr.seq->is_finished()) continue; // aborted meanwhile
                if (presampled_[i])
                    append_token(lr.seq, *presampled_[i]);
                else
                    sample_row(lr.seq, row, lr.position + 1, row_masked_[i] != 0);
                if (!r->children_started && lr.seq->sample_index == 0)
                    start_children(r, row, lr.position + 1);
            }
        }
    }

    counters_.prefill_tokens += metrics_.num_prefill_tokens;
    counters_.decode_tokens += metrics_.num_decode_tokens;
    counters_.preemptions += metrics_.num_preemptions;
    counters_.prefix_query_tokens += metrics_.prefix_query_tokens;
    counters_.prefix_hit_tokens += metrics_.prefix_hit_tokens;
    std::vector<RequestOutput> outs = collect_outputs();
    for (const RequestOutput& o : outs) {
        if (!o.finished) continue;
        ++counters_.requests_finished;
        requests_.erase(o.request_id);
    }
    metrics_.kv_blocks_used = blocks_.num_used_blocks();
    metrics_.kv_blocks_cached = blocks_.num_cached_blocks();
    metrics_.num_running = static_cast<int32_t>(scheduler_.running().size());
    metrics_.num_waiting = static_cast<int32_t>(scheduler_.waiting().size());
    metrics_.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return outs;
}

// ---- LLMEngine ----

core::Result<std::unique_ptr<LLMEngine>> LLMEngine::create(model::CausalLm* model,
                                                           const EngineConfig& config) {
    if (!model) return core::invalid_argument("engine: no model");
    EngineConfig c = config;
    if (c.block_size <= 0) return core::invalid_argument("--block-size must be positive");
    if (c.max_num_seqs <= 0) return core::invalid_argument("--max-num-seqs must be positive");
    if (c.max_num_batched_tokens <= 0)
        return core::invalid_argument("--max-num-batched-tokens must be positive");
    for (size_t i = 0; i < c.token_buckets.size(); ++i)
        if (c.token_buckets[i] <= 0 || (i > 0 && c.token_buckets[i] <= c.token_buckets[i - 1]))
            return core::invalid_argument("token buckets must be positive and ascending");
    DI_ASSIGN_OR_RETURN(model::KvGeometry geo, model->kv_geometry(c.block_size));
    if (c.num_kv_blocks <= 0) {
        if (c.kv_cache_memory_bytes <= 0)
            return core::invalid_argument("set --kv-cache-memory or --num-kv-blocks to size the KV pool");
        // The model adds one scratch block and one scratch slot; under context parallelism the budget is
        // per rank, and a rank stores about 1/cp of every block (kv_pool_bytes).
        c.num_kv_blocks = kv_blocks_for_memory(geo, c.kv_cache_memory_bytes, c.max_num_seqs);
        if (c.num_kv_blocks < 1)
            return core::resource_exhausted(
                "--kv-cache-memory of " + std::to_string(c.kv_cache_memory_bytes) +
                " bytes holds no KV block (" + std::to_string(geo.bytes_per_block) + " bytes per block of " +
                std::to_string(c.block_size) + " positions, " + std::to_string(geo.bytes_per_slot) +
                " per sequence slot)");
    }
    if (c.num_kv_blocks > INT32_MAX / 2) return core::invalid_argument("--num-kv-blocks too large");
    if (c.max_model_len <= 0) {
        c.max_model_len = geo.max_position > 0 ? geo.max_position : int64_t(1) << 40;
    } else if (geo.max_position > 0 && c.max_model_len > geo.max_position) {
        return core::invalid_argument("--max-model-len " + std::to_string(c.max_model_len) +
                                      " exceeds the model's maximum position " +
                                      std::to_string(geo.max_position));
    }
    DI_RETURN_IF_ERROR(model->configure_runtime({c.max_num_batched_tokens, c.max_num_seqs}));
    DI_RETURN_IF_ERROR(model->init_kv_cache({c.block_size, c.num_kv_blocks, c.max_num_seqs}));
    DI_LOG(Info) << "KV pool: " << c.num_kv_blocks << " blocks of " << c.block_size << " positions ("
                 << geo.bytes_per_block << " bytes each"
                 << (geo.cp_size > 1
                         ? ", " + std::to_string(geo.split_bytes_per_block) + " of them split over " +
                               std::to_string(geo.cp_size) + " context-parallel ranks"
                         : std::string())
                 << "), " << c.max_num_seqs << " slots, "
                 << model::kv_pool_bytes(geo, c.num_kv_blocks, c.max_num_seqs)
                 << " bytes per rank, max model length " << c.max_model_len;
    auto impl = std::make_unique<Impl>(model, c, static_cast<int32_t>(model->vocab_size()));
    // The engine owns the compute pool (persistent across steps); the model runs every op on it.
    const int threads = c.num_threads > 0
                            ? c.num_threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    impl->pool_ = std::make_unique<core::ThreadPool>(threads);
    model->set_thread_pool(impl->pool_.get());
    return std::unique_ptr<LLMEngine>(new LLMEngine(std::move(impl)));
}

LLMEngine::LLMEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LLMEngine::~LLMEngine() = default;
core::Status LLMEngine::add_request(Request request) {
    return impl_->add_request(std::move(request));
}
bool LLMEngine::abort(const std::string& request_id) {
    return impl_->abort(request_id);
}
core::Result<std::vector<RequestOutput>> LLMEngine::step() {
    return impl_->step();
}
bool LLMEngine::has_work() const {
    return impl_->has_work();
}
const EngineConfig& LLMEngine::config() const {
    return impl_->config_;
}
const StepMetrics& LLMEngine::last_step_metrics() const {
    return impl_->metrics_;
}
const EngineCounters& LLMEngine::counters() const {
    return impl_->counters_;
}
int32_t LLMEngine::num_live_requests() const {
    return static_cast<int32_t>(impl_->requests_.size());
}

} // namespace deepinfer::engine
