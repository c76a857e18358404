#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "kernels/moe_plan.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/layer.h"
#include "model/int8_panels.h"

namespace deepinfer::model::deepseek_v4 {

DeepseekV4Model::DeepseekV4Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config,
                                 ModelWeights w, const ShardSpec& shard, ExpertRange experts)
    : ckpt_(std::move(ckpt)), config_(std::move(config)), weights_(std::move(w)),
      main_rope_(make_main_rope(config_)), compress_rope_(make_compress_rope(config_)),
      backend_(kernels::make_cpu_backend(nullptr)), shard_(shard) {
    for (const LayerWeights& l : weights_.layers) moe_refs_.push_back(make_moe_refs(l.ffn));
    bind_shard(shard_, config_.n_routed_experts, experts.first,
               experts.last < 0 ? config_.n_routed_experts : experts.last, &ep_status_, moe_shard_, tp_, cp_,
               expert_load_);
    // Split CP rows run the MoE on this rank's rows only when every rank of the MoE group has the same CP
    // rank (so the same rows); EP on CP puts the whole CP group in it. Every rank of the MoE group loads
    // the model, so every one enters this gather once.
    if (moe_shard_.group && cp_.active()) {
        const int n = moe_shard_.group->size();
        std::vector<int64_t> mine = {cp_.rank()}, all(n);
        const core::Status s = moe_shard_.group->all_gather_i64(mine, all);
        if (!s.ok()) ep_status_ = s.with_context("MoE group's CP ranks");
        moe_spans_cp_ =
            !s.ok() || std::any_of(all.begin(), all.end(), [&](int64_t r) { return r != all[0]; });
    }
}

void bind_shard(const ShardSpec& spec, int64_t n_routed_experts, int64_t first, int64_t last,
                core::Status* status, MoeShard& moe, TpShard& tp, CpShard& cp,
                std::unique_ptr<parallel::ExpertLoadStats>& expert_load) {
    moe.first = first;
    moe.last = last;
    if (spec.moe && spec.moe->size() > 1) {
        moe.group = spec.moe;
        moe.has_shared = spec.moe->rank() == spec.moe->size() - 1;
        moe.status = status;
        if (spec.stats_interval > 0) {
            expert_load = std::make_unique<parallel::ExpertLoadStats>(static_cast<int>(n_routed_experts),
                                                                      spec.moe->size(), spec.stats_interval);
            moe.load = expert_load.get();
        }
    }
    if (spec.tp && spec.tp->size() > 1) {
        tp.group = spec.tp;
        tp.status = status;
    }
    if (spec.cp && spec.cp->size() > 1) {
        cp.group = spec.cp;
        cp.status = status;
    }
}

core::Result<std::unique_ptr<DeepseekV4Model>> DeepseekV4Model::load(const std::string& dir,
                                                                     const ShardSpec& shard) {
    DI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::from_json_file(dir + "/config.json"));
    DI_ASSIGN_OR_RETURN(std::unique_ptr<weights::Checkpoint> ckpt, weights::Checkpoint::open(dir));
    ExpertRange range;
    if (shard.tp && config.num_attention_heads % shard.tp->size() != 0)
        return core::invalid_argument(
            dir + "/config.json: num_attention_heads " + std::to_string(config.num_attention_heads) +
            " does not split over tensor parallel size " + std::to_string(shard.tp->size()));
    if (shard.moe && shard.moe->size() > 1) {
        const int64_t E = config.n_routed_experts, n = shard.moe->size(), r = shard.moe->rank();
        if (n > E)
            return core::invalid_argument(dir + "/config.json: " + std::to_string(n) +
                                          " expert-parallel ranks" + " exceeds n_routed_experts " +
                                          std::to_string(E));
        range = {r * E / n, (r + 1) * E / n};
    }
    const model::HeadRows head_rows =
        shard.tp ? model::tp_head_rows(config.vocab_size, shard.tp->rank(), shard.tp->size())
                 : model::HeadRows{};
    DI_ASSIGN_OR_RETURN(ModelWeights w, bind_weights(*ckpt, config, range, head_rows));
    if (model::dense_int8_panels() && !(shard.tp && shard.tp->size() > 1))
        attach_dense_int8_panels(*ckpt, &w);
    return std::unique_ptr<DeepseekV4Model>(
        new DeepseekV4Model(std::move(ckpt), std::move(config), std::move(w), shard, range));
}

core::Status DeepseekV4Model::on_step(uint64_t step) {
    if (!expert_load_) return core::Status();
    return expert_load_->on_step(*shard_.moe, step);
}

const parallel::ExpertLoadSnapshot* DeepseekV4Model::expert_load() const {
    return expert_load_ ? &expert_load_->latest() : nullptr;
}

core::Result<KvGeometry> DeepseekV4Model::kv_geometry(int64_t block_size) const {
    return KvCache::geometry(config_, block_size, cp_.size()); // CP: one rank's share (kv_cache.h)
}

core::Status DeepseekV4Model::init_kv_cache(const KvCacheSpec& spec) {
    pending_copies_.clear();
    DI_RETURN_IF_ERROR(
        cache_.init(config_, spec, *backend_, static_cast<int>(cp_.rank()), static_cast<int>(cp_.size())));
    if (runtime_.max_num_batched_tokens > 0)
        backend_->workspace().reserve(workspace_bytes(runtime_.max_num_batched_tokens));
    return core::Status();
}

int64_t DeepseekV4Model::workspace_bytes(int64_t T) const {
    const ModelConfig& c = config_;
    const int64_t D = c.hidden_size, hc = c.hc_mult, H = c.num_attention_heads, d = c.head_dim;
    const int64_t HI = c.index_n_heads, dI = c.index_head_dim, E = c.n_routed_experts,
                  K = c.num_experts_per_tok;
    const int64_t n_mix = (2 + hc) * hc, G = c.o_groups, R = c.o_lora_rank;
    int64_t I = c.moe_intermediate_size * std::max<int64_t>(1, c.n_shared_experts);
    I = std::max<int64_t>(I, c.moe_intermediate_size);
    const int64_t threads = backend_->num_threads();
    // The longest sequence the KV state can hold bounds the ops' per-query scratch: the indexer scores every
    // entry of a CSA layer; attention reads window + top-k (CSA) or window + every entry (HCA).
    int64_t max_pos = c.max_position_embeddings;
    if (cache_.initialized())
        max_pos = std::min<int64_t>(max_pos, static_cast<int64_t>(cache_.num_blocks()) * cache_.block_size());
    int64_t index_entries = 0, attn_keys = c.sliding_window;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const int64_t r = c.compress_ratios[l];
        if (c.layer_types[l] == AttentionType::kCompressedSparse) {
            index_entries = std::max(index_entries, max_pos / r + 1);
            attn_keys = std::max(attn_keys, c.sliding_window + c.index_topk);
        } else if (c.layer_types[l] != AttentionType::kSliding) {
            attn_keys = std::max(attn_keys, c.sliding_window + max_pos / r + 1);
        }
    }
    attn_keys += 16; // padded to whole key tiles
    // Floats per token: forward level (e, h, final x / flat / mix, head rows) ...
    const int64_t model_level = D + hc * D + D + hc * D + hc + D + 2; // ids, skip as floats
    // ... plus the widest layer: post, comb, x, y, hc flat + mix, and the larger of attention and MoE.
    const int64_t layer = hc + hc * hc + 2 * D + hc * D + n_mix;
    const int64_t attn = c.q_lora_rank + 2 * H * d + d + 4 * d + 4 * dI + HI * dI + HI + c.index_topk + G * R;
    const int64_t moe = E + 2 * K + 4 + 2 * D + 2 * I;
    const int64_t moe_ep = moe_shard_.group ? moe + moe_shard_floats_per_token(c) : moe;
    // TP: the gathered heads or groups and wo_b's rows (tensor_parallel.h), and the LM head's vocabulary
    // rows of up to max_num_seqs sequences.
    int64_t attn_tp = tp_.active() ? attn + 3 * (H * d + G * R + D) : attn;
    attn_tp += cp_merge_floats(cp_.size(), H, d); // CP: the partials' max / sum and the merge's gather
    const int64_t per_token = model_level + layer + std::max(attn_tp, moe_ep);
    // CP, split rows: the row gathers' buffers (cp_gather_rows), at most one live at a time — attention's
    // packed projections (every head: an upper bound under TP), the MoE input under EP on CP, the final x.
    const int64_t packed = H * d + d + 4 * d + 4 * dI + HI * dI + HI;
    const int64_t row_gather = cp_.active() ? cp_gather_rows_floats(cp_.size(), T, std::max(packed, D)) : 0;
    const int64_t head_tp =
        tp_.active() ? 3 * static_cast<int64_t>(std::max(1, runtime_.max_num_seqs)) * c.vocab_size : 0;
    // Indexer: [32, entries] scores + per thread [entries] top-k pairs (4 floats) and picks; attention: per
    // thread key pointers (2 floats), transposed keys [keys, d] and 4 heads' logits; experts: per-expert
    // counts.
    // The experts' decode-batch schedule: its grouped rows (kernels/params.h).
    const int64_t scratch = 32 * index_entries + threads * index_entries * 5 + threads * attn_keys * (d + 6) +
                            E + 1 + kernels::moe_experts_batch_floats(T, D, I, K, E, threads);
    const int64_t takes = 64; // buffers live at once (alignment slack each)
    // CP: per chunk its local block table and owned flags (5 bytes per block-table entry, two takes), and
    // the buffer of a block copied between owners (run_pending_copies, before anything else is taken).
    const int64_t bs = cache_.initialized() ? cache_.block_size() : 1;
    int64_t cp_flags = 0;
    if (cp_.active()) {
        cp_flags = static_cast<int64_t>(std::max(1, runtime_.max_num_seqs)) * (5 * (max_pos / bs + 1) + 256);
        if (cache_.initialized())
            cp_flags += static_cast<int64_t>(sizeof(float)) * cache_.split_block_floats();
        // The indexer's score rows, summed over the group, and its picks (cp_indexer).
        if (index_entries > 0)
            cp_flags += static_cast<int64_t>(sizeof(float)) *
                        cp_indexer_floats(index_entries, cp_.size(), c.index_topk);
    }
    return static_cast<int64_t>(sizeof(float)) * (T * per_token + scratch + head_tp + row_gather) +
           takes * 128 + cp_flags;
}

void DeepseekV4Model::set_thread_pool(core::ThreadPool* pool) {
    backend_->set_thread_pool(pool);
    // Per-thread scratch scales with the pool: re-plan (setup time, not a step).
    if (runtime_.max_num_batched_tokens > 0) plan_runtime();
}

void DeepseekV4Model::plan_runtime() {
    backend_->workspace().reserve(workspace_bytes(runtime_.max_num_batched_tokens));
    // The kernels' own per-thread scratch too, sized by the largest matmul a step can make rather than by
    // the largest step seen so far (a server's heap grew whenever a busy moment batched more tokens than
    // any step before it).
    backend_->reserve_scratch(runtime_.max_num_batched_tokens, weights_.max_linear_cols());
}

void DeepseekV4Model::set_backend(std::unique_ptr<kernels::Backend> backend) {
    DI_CHECK(backend != nullptr);
    cache_ = KvCache();
    pending_copies_.clear();
    backend_ = std::move(backend);
    if (runtime_.max_num_batched_tokens > 0) plan_runtime();
}

core::Status DeepseekV4Model::configure_runtime(const RuntimeSpec& spec) {
    if (spec.max_num_batched_tokens <= 0 || spec.max_num_seqs <= 0)
        return core::invalid_argument(
            "configure_runtime: max_num_batched_tokens and max_num_seqs must be positive");
    runtime_ = spec;
    plan_runtime();
    covered_.reserve(spec.max_num_batched_tokens);
    return core::Status();
}

core::Status DeepseekV4Model::validate(const ForwardBatch& b) const {
    if (!cache_.initialized()) return core::failed_precondition("forward: init_kv_cache was not called");
    const int64_t T = b.num_tokens();
    if (static_cast<int64_t>(b.positions.size()) != T)
        return core::invalid_argument("forward: positions and token_ids differ in length");
    std::vector<int>& covered = covered_;
    covered.assign(T, 0);
    std::vector<uint8_t>& slot_used = slot_used_;
    slot_used.assign(cache_.num_slots(), 0);
    for (const SequenceChunk& ch : b.chunks) {
        if (ch.num_tokens < 0 || ch.token_offset < 0 || ch.token_offset + ch.num_tokens > T)
            return core::invalid_argument("forward: chunk of seq " + std::to_string(ch.seq_id) +
                                          " is outside the batch");
        for (int32_t i = 0; i < ch.num_tokens; ++i) ++covered[ch.token_offset + i];
        if (ch.is_padding) continue;
        if (ch.slot < 0 || ch.slot >= cache_.scratch_slot())
            return core::invalid_argument("forward: slot " + std::to_string(ch.slot) + " out of range");
        // Chunks of one sequence run in position order through one slot: at most one chunk per slot.
        if (slot_used[ch.slot])
            return core::invalid_argument("forward: two chunks use slot " + std::to_string(ch.slot));
        slot_used[ch.slot] = 1;
        const int64_t end = ch.start_pos + ch.num_tokens;
        if (ch.start_pos < 0 || end > config_.max_position_embeddings)
            return core::out_of_range("forward: positions of seq " + std::to_string(ch.seq_id) + " exceed " +
                                      std::to_string(config_.max_position_embeddings));
        if (static_cast<int64_t>(ch.block_table.size()) * cache_.block_size() < end)
            return core::invalid_argument("forward: block table of seq " + std::to_string(ch.seq_id) +
                                          " does not cover its positions");
        for (int32_t blk : ch.block_table)
            if (blk < 0 || blk >= cache_.scratch_block())
                return core::invalid_argument("forward: block " + std::to_string(blk) + " out of range");
        if (ch.restore_slot_from_block && (ch.start_pos == 0 || ch.start_pos % cache_.block_size() != 0))
            return core::invalid_argument("forward: slot restore needs start_pos at a block boundary");
        for (int32_t i = 0; i < ch.num_tokens; ++i) {
            const int64_t t = ch.token_offset + i;
            if (b.token_ids[t] < 0 || b.token_ids[t] >= config_.vocab_size)
                return core::invalid_argument("forward: token id " + std::to_string(b.token_ids[t]) +
                                              " outside the vocabulary of " +
                                              std::to_string(config_.vocab_size));
            if (b.positions[t] != ch.start_pos + i)
                return core::invalid_argument("forward: positions of seq " + std::to_string(ch.seq_id) +
                                              " are not start_pos + i");
        }
    }
    for (int v : covered)
        if (v != 1) return core::invalid_argument("forward: every row must belong to exactly one chunk");
    for (int32_t r : b.logits_rows)
        if (r < 0 || r >= T) return core::invalid_argument("forward: logits row out of range");
    return core::Status();
}

core::Status DeepseekV4Model::forward(const ForwardBatch& batch, float* logits) {
    DI_RETURN_IF_ERROR(validate(batch));
    // A failed collective breaks the communicator for good: report it, on this and every later step.
    if (!ep_status_.ok()) return ep_status_;
    const auto t0 = std::chrono::steady_clock::now();
    run(batch, logits);
    if (!ep_status_.ok()) return ep_status_;
    if (backend_->profiler().enabled())
        backend_->profiler().record_step(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return core::Status();
}

void DeepseekV4Model::copy_block(int32_t src, int32_t dst) {
    if (!cp_.active()) {
        cache_.copy_block(src, dst);
        return;
    }
    pending_copies_.emplace_back(src, dst);
}

void DeepseekV4Model::run_pending_copies() {
    kernels::Workspace& ws = backend_->workspace();
    for (const auto& [src, dst] : pending_copies_) {
        cache_.copy_block(src, dst); // the whole stores, and the split ones when one rank owns both
        const int64_t n = cp_.size(), owner_src = src % n, owner_dst = dst % n;
        if (owner_src == owner_dst || !ep_status_.ok()) continue;
        // Different owners: the source's owner broadcasts the block's split stores (every rank enters).
        const kernels::Workspace::Mark mark = ws.mark();
        const int64_t floats = cache_.split_block_floats();
        float* buf = ws.take<float>(floats); // [split floats of one block]
        if (cp_.rank() == owner_src) cache_.pack_split_block(src, buf);
        core::Status s = cp_.group->broadcast_f32(std::span<float>(buf, static_cast<size_t>(floats)),
                                                  static_cast<int>(owner_src));
        if (!s.ok() && ep_status_.ok()) ep_status_ = s.with_context("context parallel copy_block");
        if (s.ok() && cp_.rank() == owner_dst) cache_.unpack_split_block(dst, buf);
        ws.release(mark);
    }
    pending_copies_.clear();
}

void DeepseekV4Model::run(const ForwardBatch& b, float* logits) {
    const ModelConfig& c = config_;
    const int64_t T = b.num_tokens(), D = c.hidden_size, hc = c.hc_mult, L = c.num_hidden_layers;
    kernels::Backend& be = *backend_;
    kernels::Workspace& ws = be.workspace();
    ws.reset();
    if (!pending_copies_.empty()) run_pending_copies();

    // Padding rows embed token 0, touch no KV state (attention skips their chunks) and skip the MoE.
    int32_t* ids = ws.take<int32_t>(T);  // [T]
    uint8_t* skip = ws.take<uint8_t>(T); // [T]
    std::copy_n(b.token_ids.data(), T, ids);
    std::fill_n(skip, T, 0);
    for (const SequenceChunk& ch : b.chunks) {
        if (!ch.is_padding) continue;
        for (int32_t i = 0; i < ch.num_tokens; ++i) {
            skip[ch.token_offset + i] = 1;
            ids[ch.token_offset + i] = 0;
        }
    }
    for (const SequenceChunk& ch : b.chunks) {
        if (ch.is_padding) continue;
        if (ch.restore_slot_from_block)
            cache_.restore_slot_from_block(ch.slot, ch.block_table[ch.start_pos / cache_.block_size() - 1]);
        else if (ch.reset_slot || ch.start_pos == 0)
            cache_.reset_slot(ch.slot);
    }

    if (probes_) {
        probes_->num_tokens = T;
        probes_->hidden.assign(L, {});
        probes_->router.assign(L, {});
        probes_->router_weights.assign(L, {});
        probes_->indexer_topk.assign(L, {});
    }

    float* e = ws.take<float>(T * D); // [T, D]
    be.embedding({&weights_.embed, ids, T, e});
    float* h = ws.take<float>(T * hc * D); // [T, hc, D]
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < hc; ++k) std::copy_n(e + t * D, D, h + (t * hc + k) * D);

    for (int64_t l = 0; l < L; ++l) {
        LayerContext lctx;
        lctx.config = &c;
        lctx.w = &weights_.layers[l];
        lctx.layer = l;
        lctx.main_rope = &main_rope_;
        lctx.compress_rope = &compress_rope_;
        lctx.cache = &cache_;
        lctx.backend = &be;
        lctx.moe = &moe_refs_[l];
        lctx.moe_shard = moe_shard_.group ? &moe_shard_ : nullptr;
        lctx.tp = tp_.active() ? &tp_ : nullptr;
        lctx.cp = cp_.active() ? &cp_ : nullptr;
        lctx.moe_spans_cp = moe_spans_cp_;
        LayerProbeOut probe;
        if (probes_) {
            if (weights_.layers[l].attn.has_indexer) {
                probes_->indexer_topk[l].resize(T * c.index_topk);
                probe.indexer_topk = probes_->indexer_topk[l].data();
            }
            probes_->router[l].resize(T * c.num_experts_per_tok);
            probes_->router_weights[l].resize(T * c.num_experts_per_tok);
            probe.router = probes_->router[l].data();
            probe.router_weights = probes_->router_weights[l].data();
        }
        decoder_layer_forward(lctx, b, ids, skip, h, probe);
        if (probes_) probes_->hidden[l].assign(h, h + T * hc * D);
    }

    // Final collapse of the streams, norm and LM head (logits only for the requested rows).
    const float eps = static_cast<float>(c.rms_norm_eps);
    // CP with split rows: this rank's rows, then gathered (the layers left only those current in h).
    const CpRows rows = cp_rows(cp_.active() ? &cp_ : nullptr, T);
    const int64_t r0 = rows.begin, nr = rows.count();
    float* x = ws.take<float>(T * D); // [T, D]
    if (nr > 0) {
        hc_head(be, c, weights_.hc_head_fn, weights_.hc_head_base.data(), weights_.hc_head_scale.data(),
                h + r0 * hc * D, nr, x + r0 * D);
        be.rms_norm({x + r0 * D, weights_.norm.data(), nr, D, eps, x + r0 * D});
    }
    if (rows.split) cp_gather_rows(be, cp_, rows, x, D);
    if (probes_) probes_->final_hidden.assign(x, x + T * D);

    const int64_t n_out = static_cast<int64_t>(b.logits_rows.size());
    float* sel = ws.take<float>(n_out * D); // [n_out, D]
    for (int64_t i = 0; i < n_out; ++i) std::copy_n(x + b.logits_rows[i] * D, D, sel + i * D);
    if (tp_.active()) // vocabulary-parallel: each rank its rows of the head, gathered
        tp_linear(be, tp_, sel, n_out, weights_.head, logits, kernels::OpKind::kLmHead);
    else
        be.linear(kernels::linear_args(sel, n_out, weights_.head, logits), kernels::OpKind::kLmHead);
}

} // namespace deepinfer::model::deepseek_v4
