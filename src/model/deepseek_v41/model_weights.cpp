#include "model/deepseek_v41/model_weights.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "model/int8_panels.h"
#include "model/weight_binding.h"

namespace deepinfer::model::deepseek_v41 {
namespace {

using core::Result;
using core::Status;
using model::load_f32_matrix;
using model::load_vector;

Status bind_hc(const weights::Checkpoint& ckpt, const std::string& p, const ModelConfig& c, HcWeights* out) {
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    DI_ASSIGN_OR_RETURN(out->fn, load_f32_matrix(ckpt, p + "_fn", mix, c.hc_mult * c.hidden_size));
    DI_ASSIGN_OR_RETURN(out->base, load_vector(ckpt, p + "_base", mix));
    DI_ASSIGN_OR_RETURN(out->scale, load_vector(ckpt, p + "_scale", 3));
    return {};
}

Status bind_expert(const weights::Checkpoint& ckpt, const std::string& p, const ModelConfig& c,
                   ExpertWeights* out) {
    const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
    DI_ASSIGN_OR_RETURN(out->w1, ckpt.weight(p + ".w1", I, D, c.quant));
    DI_ASSIGN_OR_RETURN(out->w2, ckpt.weight(p + ".w2", D, I, c.quant));
    DI_ASSIGN_OR_RETURN(out->w3, ckpt.weight(p + ".w3", I, D, c.quant));
    return {};
}

Status bind_layer(const weights::Checkpoint& ckpt, const ModelConfig& c, int64_t l, int64_t first_expert,
                  int64_t last_expert, LayerWeights* out) {
    const std::string p = "layers." + std::to_string(l);
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim;
    const auto& q = c.quant;
    DI_RETURN_IF_ERROR(bind_hc(ckpt, p + ".hc_attn", c, &out->hc_attn));
    DI_RETURN_IF_ERROR(bind_hc(ckpt, p + ".hc_ffn", c, &out->hc_ffn));
    DI_ASSIGN_OR_RETURN(out->attn_norm, load_vector(ckpt, p + ".attn_norm.weight", D));
    DI_ASSIGN_OR_RETURN(out->ffn_norm, load_vector(ckpt, p + ".ffn_norm.weight", D));

    AttentionWeights& a = out->attn;
    const std::string ap = p + ".attn";
    DI_ASSIGN_OR_RETURN(a.wq_a, ckpt.weight(ap + ".wq_a", c.q_lora_rank, D, q));
    DI_ASSIGN_OR_RETURN(a.q_norm, load_vector(ckpt, ap + ".q_norm.weight", c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(a.wq_b, ckpt.weight(ap + ".wq_b", H * d, c.q_lora_rank, q));
    DI_ASSIGN_OR_RETURN(a.wkv, ckpt.weight(ap + ".wkv", d, D, q));
    DI_ASSIGN_OR_RETURN(a.kv_norm, load_vector(ckpt, ap + ".kv_norm.weight", d));
    DI_ASSIGN_OR_RETURN(a.wo_a, ckpt.weight(ap + ".wo_a", c.o_groups * c.o_lora_rank, H * d / c.o_groups, q));
    DI_ASSIGN_OR_RETURN(a.wo_b, ckpt.weight(ap + ".wo_b", D, c.o_groups * c.o_lora_rank, q));
    DI_ASSIGN_OR_RETURN(a.sink, load_vector(ckpt, ap + ".attn_sink", H));
    if (c.is_kv_source(l)) {
        a.has_compressor = true;
        const std::string cp = ap + ".compressor";
        DI_ASSIGN_OR_RETURN(a.compressor.wkv, ckpt.weight(cp + ".wkv", d, D, q));
        if (c.compress_ratios[l] > 1) {
            DI_ASSIGN_OR_RETURN(a.compressor.wgate, ckpt.weight(cp + ".wgate", d, D, q));
        }
        DI_ASSIGN_OR_RETURN(a.compressor.norm, load_vector(ckpt, cp + ".norm.weight", d));
    }
    if (c.is_index_source(l)) {
        a.has_indexer = true;
        const std::string ip = ap + ".indexer";
        IndexerWeights& x = a.indexer;
        DI_ASSIGN_OR_RETURN(x.wq_b,
                            ckpt.weight(ip + ".wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank, q));
        DI_ASSIGN_OR_RETURN(x.weights_proj, ckpt.weight(ip + ".weights_proj", c.index_n_heads, D, q));
        x.owns_k = c.is_kv_source(l);
        if (x.owns_k) {
            DI_ASSIGN_OR_RETURN(x.wk, ckpt.weight(ip + ".wk", c.index_head_dim, d, q));
            DI_ASSIGN_OR_RETURN(x.k_norm, load_vector(ckpt, ip + ".k_norm.weight", c.index_head_dim));
        }
    }

    MoeWeights& m = out->ffn;
    DI_ASSIGN_OR_RETURN(m.gate, ckpt.weight(p + ".ffn.gate", c.n_routed_experts, D, q));
    DI_ASSIGN_OR_RETURN(m.bias, load_vector(ckpt, p + ".ffn.gate.bias", c.n_routed_experts));
    m.experts.resize(c.n_routed_experts);
    for (int64_t e = first_expert; e < last_expert; ++e)
        DI_RETURN_IF_ERROR(bind_expert(ckpt, p + ".ffn.experts." + std::to_string(e), c, &m.experts[e]));
    DI_RETURN_IF_ERROR(bind_expert(ckpt, p + ".ffn.shared_experts", c, &m.shared));

    const int64_t ei = c.engram.layer_index(l);
    if (ei >= 0) {
        out->has_engram = true;
        const std::string ep = p + ".engram";
        const int64_t hc = c.hc_mult;
        DI_ASSIGN_OR_RETURN(out->engram.wkv, ckpt.weight(ep + ".wkv", (hc + 1) * D,
                                                         c.engram.n_hash_cols() * c.engram.head_dim, q));
        DI_ASSIGN_OR_RETURN(std::vector<float> qw, load_vector(ckpt, ep + ".q_weight", hc * D));
        DI_ASSIGN_OR_RETURN(std::vector<float> kw, load_vector(ckpt, ep + ".k_weight", hc * D));
        out->engram.qk_weight.resize(hc * D);
        for (int64_t i = 0; i < hc * D; ++i) out->engram.qk_weight[i] = qw[i] * kw[i];
    }
    return {};
}

} // namespace

int64_t ModelWeights::resident_weight_bytes() const {
    int64_t b =
        embed.resident_bytes() + (head.data == embed.data ? 0 : head.resident_bytes()) + vec_bytes(norm);
    for (const EngramTable& t : engram_tables) b += t.rows() * t.row_bytes();
    auto comp = [](const CompressorWeights& c) {
        return c.wkv.resident_bytes() + c.wgate.resident_bytes() + vec_bytes(c.norm);
    };
    for (const LayerWeights& l : layers) {
        b += vec_bytes(l.attn_norm) + vec_bytes(l.ffn_norm) + hc_bytes(l.hc_attn) + hc_bytes(l.hc_ffn);
        const AttentionWeights& a = l.attn;
        b += attention_bytes(a);
        if (a.has_compressor) b += comp(a.compressor);
        if (a.has_indexer) {
            const IndexerWeights& x = a.indexer;
            b += x.wq_b.resident_bytes() + x.weights_proj.resident_bytes() + x.wk.resident_bytes() +
                 vec_bytes(x.k_norm);
        }
        const MoeWeights& f = l.ffn;
        b += f.gate.resident_bytes() + vec_bytes(f.bias) + expert_bytes(f.shared);
        for (const ExpertWeights& e : f.experts) b += expert_bytes(e);
        if (l.has_engram) b += l.engram.wkv.resident_bytes() + vec_bytes(l.engram.qk_weight);
    }
    return b;
}

int64_t ModelWeights::max_linear_cols() const {
    int64_t m = head.cols;
    auto take = [&m](std::initializer_list<const core::Weight*> ws) {
        for (const core::Weight* w : ws) m = std::max(m, w->cols);
    };
    auto expert = [&take](const ExpertWeights& e) { take({&e.w1, &e.w2, &e.w3}); };
    for (const LayerWeights& l : layers) {
        const AttentionWeights& a = l.attn;
        take({&l.hc_attn.fn, &l.hc_ffn.fn, &a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &l.ffn.gate,
              &a.compressor.wkv, &a.compressor.wgate, &a.indexer.wq_b, &a.indexer.weights_proj, &a.indexer.wk,
              &l.engram.wkv});
        for (const ExpertWeights& e : l.ffn.experts) expert(e);
        expert(l.ffn.shared);
    }
    return m;
}

Result<ModelWeights> ModelWeights::bind(const weights::Checkpoint& ckpt, const ModelConfig& c,
                                        int64_t first_expert, int64_t last_expert,
                                        model::HeadRows head_rows) {
    if (last_expert < 0) last_expert = c.n_routed_experts;
    ModelWeights w;
    DI_ASSIGN_OR_RETURN(w.embed, ckpt.weight("embed", c.vocab_size, c.hidden_size, c.quant));
    DI_ASSIGN_OR_RETURN(w.norm, load_vector(ckpt, "norm.weight", c.hidden_size));
    DI_ASSIGN_OR_RETURN(w.head, model::bind_lm_head(ckpt, "head", c.vocab_size, c.hidden_size, c.quant,
                                                    head_rows.begin, head_rows.end));
    w.layers.resize(c.num_hidden_layers);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        DI_RETURN_IF_ERROR(bind_layer(ckpt, c, l, first_expert, last_expert, &w.layers[l]));
    DI_ASSIGN_OR_RETURN(w.engram_tables, EngramTable::bind_all(ckpt, c));
    return w;
}

void ModelWeights::attach_dense_int8_panels(const weights::Checkpoint& ckpt) {
    for (size_t l = 0; l < layers.size(); ++l) {
        LayerWeights& lw = layers[l];
        const std::string p = "layers." + std::to_string(l);
        auto attach = [&ckpt](const std::string& name, core::Weight* w) {
            model::attach_fp8_int8_panels(ckpt, name, w);
        };
        AttentionWeights& a = lw.attn;
        const std::string ap = p + ".attn";
        attach(ap + ".wq_a", &a.wq_a);
        attach(ap + ".wq_b", &a.wq_b);
        attach(ap + ".wkv", &a.wkv);
        attach(ap + ".wo_a", &a.wo_a);
        attach(ap + ".wo_b", &a.wo_b);
        if (a.has_compressor) {
            attach(ap + ".compressor.wkv", &a.compressor.wkv);
            attach(ap + ".compressor.wgate", &a.compressor.wgate);
        }
        if (a.has_indexer) {
            attach(ap + ".indexer.wq_b", &a.indexer.wq_b);
            attach(ap + ".indexer.weights_proj", &a.indexer.weights_proj);
            if (a.indexer.owns_k) attach(ap + ".indexer.wk", &a.indexer.wk);
        }
        attach(p + ".ffn.shared_experts.w1", &lw.ffn.shared.w1);
        attach(p + ".ffn.shared_experts.w2", &lw.ffn.shared.w2);
        attach(p + ".ffn.shared_experts.w3", &lw.ffn.shared.w3);
        if (lw.has_engram) attach(p + ".engram.wkv", &lw.engram.wkv);
    }
}

} // namespace deepinfer::model::deepseek_v41
