#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/layer.h"

namespace deepinfer::model::deepseek_v4 {

DeepseekV4Model::DeepseekV4Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config,
                                 ModelWeights w)
    : ckpt_(std::move(ckpt)), config_(std::move(config)), weights_(std::move(w)),
      main_rope_(make_main_rope(config_)), compress_rope_(make_compress_rope(config_)) {}

core::Result<std::unique_ptr<DeepseekV4Model>> DeepseekV4Model::load(const std::string& dir) {
    DI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::from_json_file(dir + "/config.json"));
    DI_ASSIGN_OR_RETURN(std::unique_ptr<weights::Checkpoint> ckpt, weights::Checkpoint::open(dir));
    DI_ASSIGN_OR_RETURN(ModelWeights w, bind_weights(*ckpt, config));
    return std::unique_ptr<DeepseekV4Model>(
        new DeepseekV4Model(std::move(ckpt), std::move(config), std::move(w)));
}

core::Result<KvGeometry> DeepseekV4Model::kv_geometry(int64_t block_size) const {
    return KvCache::geometry(config_, block_size);
}

core::Status DeepseekV4Model::init_kv_cache(const KvCacheSpec& spec) {
    return cache_.init(config_, spec);
}

core::Status DeepseekV4Model::validate(const ForwardBatch& b) const {
    if (!cache_.initialized()) return core::failed_precondition("forward: init_kv_cache was not called");
    const int64_t T = b.num_tokens();
    if (static_cast<int64_t>(b.positions.size()) != T)
        return core::invalid_argument("forward: positions and token_ids differ in length");
    std::vector<int> covered(T, 0);
    std::vector<bool> slot_used(cache_.num_slots(), false);
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
        slot_used[ch.slot] = true;
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
    const ModelConfig& c = config_;
    const int64_t T = batch.num_tokens(), D = c.hidden_size, hc = c.hc_mult, L = c.num_hidden_layers;

    // Padding chunks are redirected to the scratch slot and block, and their rows skip the MoE.
    ForwardBatch b = batch;
    std::vector<bool> skip(T, false);
    for (SequenceChunk& ch : b.chunks) {
        if (!ch.is_padding) continue;
        ch.slot = cache_.scratch_slot();
        for (int32_t i = 0; i < ch.num_tokens; ++i) skip[ch.token_offset + i] = true;
    }
    for (const SequenceChunk& ch : b.chunks) {
        if (ch.is_padding) continue;
        if (ch.restore_slot_from_block)
            cache_.restore_slot_from_block(ch.slot, ch.block_table[ch.start_pos / cache_.block_size() - 1]);
        else if (ch.reset_slot || ch.start_pos == 0)
            cache_.reset_slot(ch.slot);
    }
    std::vector<int32_t> ids(b.token_ids);
    for (int64_t t = 0; t < T; ++t)
        if (skip[t]) ids[t] = 0;

    if (probes_) {
        probes_->num_tokens = T;
        probes_->hidden.assign(L, {});
        probes_->router.assign(L, {});
        probes_->router_weights.assign(L, {});
        probes_->indexer_topk.assign(L, {});
    }

    std::vector<float> e(T * D); // [T, D]
    kernels::embedding(weights_.embed, ids.data(), T, e.data());
    std::vector<float> h(T * hc * D); // [T, hc, D]
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < hc; ++k) std::copy_n(e.data() + t * D, D, h.data() + (t * hc + k) * D);

    for (int64_t l = 0; l < L; ++l) {
        LayerContext lctx;
        lctx.config = &c;
        lctx.w = &weights_.layers[l];
        lctx.layer = l;
        lctx.main_rope = &main_rope_;
        lctx.compress_rope = &compress_rope_;
        lctx.cache = &cache_;
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
        decoder_layer_forward(lctx, b, ids.data(), skip, h.data(), probe);
        if (probes_) probes_->hidden[l] = h;
    }

    // Final collapse of the streams, norm and LM head (logits only for the requested rows).
    const float eps = static_cast<float>(c.rms_norm_eps);
    std::vector<float> x(T * D); // [T, D]
    hc_head(c, weights_.hc_head_fn, weights_.hc_head_base.data(), weights_.hc_head_scale.data(), h.data(), T,
            x.data());
    kernels::rms_norm(x.data(), weights_.norm.data(), T, D, eps, x.data());
    if (probes_) probes_->final_hidden = x;

    const int64_t n_out = static_cast<int64_t>(b.logits_rows.size());
    std::vector<float> sel(n_out * D); // [n_out, D]
    for (int64_t i = 0; i < n_out; ++i) std::copy_n(x.data() + b.logits_rows[i] * D, D, sel.data() + i * D);
    kernels::linear(sel.data(), n_out, weights_.head, logits);
    return core::Status();
}

} // namespace deepinfer::model::deepseek_v4
