// ModelConfig::validate: the invariants the V4.1 model code relies on, each failure naming the field.
#include <cstdint>
#include <string>

#include "model/deepseek_v41/config.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

core::Status bad(const std::string& src, const std::string& field, const std::string& what) {
    return core::invalid_argument(src + ": field '" + field + "' " + what);
}

std::string list(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

// Layer ids: inside [0, n), strictly increasing.
core::Status check_layer_ids(const std::string& src, const char* field, const std::vector<int64_t>& ids,
                             int64_t n) {
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= n)
            return bad(src, field,
                       list(ids) + " has layer " + std::to_string(ids[i]) + " outside [0, " +
                           std::to_string(n) + ")");
        if (i > 0 && ids[i] <= ids[i - 1]) return bad(src, field, list(ids) + " must be strictly increasing");
    }
    return {};
}

core::Status validate_schedule(const ModelConfig& c, const std::string& src) {
    const int64_t n = c.num_hidden_layers;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t r = c.compress_ratios[i];
        if (r < 0 || r > 2)
            return bad(src, "compress_ratios[" + std::to_string(i) + "]",
                       "must be 0 (window only), 1 or 2 for V4.1, got " + std::to_string(r));
    }
    DI_RETURN_IF_ERROR(check_layer_ids(src, "kv_source_layer_ids", c.kv_source_layer_ids, n));
    DI_RETURN_IF_ERROR(check_layer_ids(src, "index_source_layer_ids", c.index_source_layer_ids, n));
    for (int64_t s : c.kv_source_layer_ids)
        if (c.compress_ratios[s] == 0)
            return bad(src, "kv_source_layer_ids",
                       "names layer " + std::to_string(s) + " whose compress_ratios entry is 0");
    for (int64_t s : c.index_source_layer_ids)
        if (c.compress_ratios[s] == 0)
            return bad(src, "index_source_layer_ids",
                       "names layer " + std::to_string(s) + " whose compress_ratios entry is 0");
    for (int64_t i = 0; i < n; ++i) {
        if (c.compress_ratios[i] == 0) continue;
        const int64_t kv = c.kv_source_of(i);
        if (kv < 0)
            return bad(src, "kv_source_layer_ids",
                       "has no source at or before layer " + std::to_string(i) + " (compress_ratios " +
                           std::to_string(c.compress_ratios[i]) + ")");
        // A layer reads its source's entries with its own ratio in the visibility rule (p+1)//ratio.
        if (c.compress_ratios[kv] != c.compress_ratios[i])
            return bad(src, "compress_ratios[" + std::to_string(i) + "]",
                       "is " + std::to_string(c.compress_ratios[i]) + " but its kv source, layer " +
                           std::to_string(kv) + ", has ratio " + std::to_string(c.compress_ratios[kv]));
    }
    if (c.candidate_source_layer_id >= 0) {
        if (!c.is_index_source(c.candidate_source_layer_id))
            return bad(src, "candidate_source_layer_id",
                       std::to_string(c.candidate_source_layer_id) +
                           " must be one of index_source_layer_ids " + list(c.index_source_layer_ids));
        if (c.candidate_topk_blocks <= 0) return bad(src, "candidate_topk_blocks", "must be > 0");
        if (c.candidate_block_size <= 0) return bad(src, "candidate_block_size", "must be > 0");
    }
    if (!c.index_source_layer_ids.empty()) {
        if (c.index_n_heads <= 0) return bad(src, "index_n_heads", "must be > 0");
        if (c.index_head_dim <= 0) return bad(src, "index_head_dim", "must be > 0");
        if (c.index_topk <= 0) return bad(src, "index_topk", "must be > 0");
        if (c.qk_rope_head_dim > c.index_head_dim)
            return bad(src, "index_head_dim", "must be >= qk_rope_head_dim (the indexer rotates its tail)");
    }
    return {};
}

core::Status validate_engram(const ModelConfig& c, const std::string& src) {
    const EngramConfig& e = c.engram;
    if (!e.enabled()) return {};
    DI_RETURN_IF_ERROR(check_layer_ids(src, "engram_layer_ids", e.layer_ids, c.num_hidden_layers));
    if (e.num_embeddings.size() != e.layer_ids.size())
        return bad(src, "engram_num_embeddings",
                   "has " + std::to_string(e.num_embeddings.size()) + " entries, engram_layer_ids has " +
                       std::to_string(e.layer_ids.size()));
    for (size_t i = 0; i < e.num_embeddings.size(); ++i)
        if (e.num_embeddings[i] <= 0)
            return bad(src, "engram_num_embeddings[" + std::to_string(i) + "]", "must be > 0");
    if (e.max_ngram_size < 2) return bad(src, "engram_max_ngram_size", "must be >= 2");
    if (e.n_heads <= 0) return bad(src, "engram_n_heads", "must be > 0");
    if (e.head_dim <= 0) return bad(src, "engram_head_dim", "must be > 0");
    if (e.vocab_size < 2) return bad(src, "engram_vocab_size", "must be >= 2");
    if (e.compressed_vocab_size <= 0 || e.compressed_vocab_size > c.vocab_size)
        return bad(src, "engram_compressed_vocab_size",
                   "must be in [1, vocab_size = " + std::to_string(c.vocab_size) + "], got " +
                       std::to_string(e.compressed_vocab_size));
    if (e.pad_token_id < 0 || e.pad_token_id >= c.vocab_size)
        return bad(src, "engram_pad_token_id", "must be a token id in [0, vocab_size)");
    // Each table holds (N-1)·heads prime-sized ranges, every prime > engram_vocab_size - 1.
    const int64_t cols = e.n_hash_cols();
    for (size_t i = 0; i < e.num_embeddings.size(); ++i)
        if (e.num_embeddings[i] / cols < e.vocab_size)
            return bad(src, "engram_num_embeddings[" + std::to_string(i) + "]",
                       std::to_string(e.num_embeddings[i]) + " is smaller than " + std::to_string(cols) +
                           " hash columns x engram_vocab_size " + std::to_string(e.vocab_size));
    return {};
}

} // namespace

core::Status ModelConfig::validate(const std::string& src) const {
    auto positive = [&](int64_t v, const char* field) -> core::Status {
        if (v <= 0) return bad(src, field, "must be > 0, got " + std::to_string(v));
        return {};
    };
    DI_RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
    DI_RETURN_IF_ERROR(positive(hidden_size, "hidden_size"));
    DI_RETURN_IF_ERROR(positive(num_hidden_layers, "num_hidden_layers"));
    DI_RETURN_IF_ERROR(positive(num_attention_heads, "num_attention_heads"));
    DI_RETURN_IF_ERROR(positive(head_dim, "head_dim"));
    DI_RETURN_IF_ERROR(positive(q_lora_rank, "q_lora_rank"));
    DI_RETURN_IF_ERROR(positive(o_groups, "o_groups"));
    DI_RETURN_IF_ERROR(positive(o_lora_rank, "o_lora_rank"));
    DI_RETURN_IF_ERROR(positive(moe_intermediate_size, "moe_intermediate_size"));
    DI_RETURN_IF_ERROR(positive(n_routed_experts, "n_routed_experts"));
    DI_RETURN_IF_ERROR(positive(sliding_window, "sliding_window"));
    DI_RETURN_IF_ERROR(positive(hc_mult, "hc_mult"));
    DI_RETURN_IF_ERROR(positive(hc_sinkhorn_iters, "hc_sinkhorn_iters"));
    DI_RETURN_IF_ERROR(positive(max_position_embeddings, "max_position_embeddings"));
    if (num_key_value_heads != 1)
        return bad(src, "num_key_value_heads",
                   "must be 1 (one shared K=V latent), got " + std::to_string(num_key_value_heads));
    if (num_experts_per_tok <= 0 || num_experts_per_tok > n_routed_experts)
        return bad(src, "num_experts_per_tok", "must be in [1, n_routed_experts]");
    if (n_shared_experts != 1) return bad(src, "n_shared_experts", "must be 1 (V4.1 has one shared expert)");
    if (qk_rope_head_dim <= 0 || qk_rope_head_dim > head_dim || qk_rope_head_dim % 2 != 0)
        return bad(src, "qk_rope_head_dim",
                   "must be even and in (0, head_dim], got " + std::to_string(qk_rope_head_dim));
    if ((num_attention_heads * head_dim) % o_groups != 0)
        return bad(src, "o_groups", "must divide num_attention_heads * head_dim");
    if (!(gate_temp > 0.0)) return bad(src, "gate_temp", "must be > 0");
    if (!(rms_norm_eps > 0.0)) return bad(src, "rms_norm_eps", "must be > 0");
    if (swiglu_limit < 0.0) return bad(src, "swiglu_limit", "must be >= 0");
    if (yarn.enabled && (yarn.factor <= 0.0 || yarn.original_max_position_embeddings <= 0))
        return bad(src, "rope_scaling", "yarn needs factor > 0 and original_max_position_embeddings > 0");
    if (num_nextn_predict_layers < 0) return bad(src, "num_nextn_predict_layers", "must be >= 0");
    if (static_cast<int64_t>(compress_ratios.size()) != num_hidden_layers)
        return bad(src, "compress_ratios", "must have num_hidden_layers entries");
    DI_RETURN_IF_ERROR(validate_schedule(*this, src));
    DI_RETURN_IF_ERROR(validate_engram(*this, src));
    if (quant.fp8 && (quant.block_rows <= 0 || quant.block_cols <= 0))
        return bad(src, "quantization_config.weight_block_size", "must be positive");
    if (quant.fp4_group <= 0) return bad(src, "quantization_config.fp4_group_size", "must be positive");
    if (eos_token_id < 0 || eos_token_id >= vocab_size)
        return bad(src, "eos_token_id", "must be in [0, vocab_size)");
    return {};
}

} // namespace deepinfer::model::deepseek_v41
