#include "model/deepseek_v4/model_weights.h"

#include <algorithm>
#include <string>

#include "core/dtype.h"
#include "model/int8_panels.h"
#include "model/weight_binding.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using core::Result;
using core::Status;
using model::load_f32_matrix;
using model::load_vector;

Status bind_hc(const weights::Checkpoint& ckpt, const std::string& p, const ModelConfig& c,
               HyperConnectionWeights* out) {
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    DI_ASSIGN_OR_RETURN(out->fn, load_f32_matrix(ckpt, p + "_fn", mix, c.hc_mult * c.hidden_size));
    DI_ASSIGN_OR_RETURN(out->base, load_vector(ckpt, p + "_base", mix));
    DI_ASSIGN_OR_RETURN(out->scale, load_vector(ckpt, p + "_scale", 3));
    return Status();
}

Status bind_compressor(const weights::Checkpoint& ckpt, const std::string& p, const ModelConfig& c,
                       int64_t ratio, int64_t width, int64_t coff, CompressorWeights* out) {
    out->ratio = ratio;
    out->width = width;
    out->coff = coff;
    DI_ASSIGN_OR_RETURN(out->wkv, ckpt.weight(p + ".wkv", coff * width, c.hidden_size, c.quant));
    DI_ASSIGN_OR_RETURN(out->wgate, ckpt.weight(p + ".wgate", coff * width, c.hidden_size, c.quant));
    DI_ASSIGN_OR_RETURN(out->ape, load_vector(ckpt, p + ".ape", ratio * coff * width));
    DI_ASSIGN_OR_RETURN(out->norm, load_vector(ckpt, p + ".norm.weight", width));
    return Status();
}

Status bind_expert(const weights::Checkpoint& ckpt, const std::string& p, const ModelConfig& c, int64_t inter,
                   ExpertWeights* out) {
    const int64_t d = c.hidden_size;
    DI_ASSIGN_OR_RETURN(out->w1, ckpt.weight(p + ".w1", inter, d, c.quant));
    DI_ASSIGN_OR_RETURN(out->w2, ckpt.weight(p + ".w2", d, inter, c.quant));
    DI_ASSIGN_OR_RETURN(out->w3, ckpt.weight(p + ".w3", inter, d, c.quant));
    return Status();
}

Status bind_layer(const weights::Checkpoint& ckpt, int64_t l, const ModelConfig& c, ExpertRange range,
                  LayerWeights* out) {
    const std::string p = "layers." + std::to_string(l);
    const int64_t d = c.hidden_size, hd = c.head_dim, h = c.num_attention_heads;
    DI_ASSIGN_OR_RETURN(out->attn_norm, load_vector(ckpt, p + ".attn_norm.weight", d));
    DI_ASSIGN_OR_RETURN(out->ffn_norm, load_vector(ckpt, p + ".ffn_norm.weight", d));
    DI_RETURN_IF_ERROR(bind_hc(ckpt, p + ".hc_attn", c, &out->hc_attn));
    DI_RETURN_IF_ERROR(bind_hc(ckpt, p + ".hc_ffn", c, &out->hc_ffn));

    AttentionWeights& a = out->attn;
    const std::string ap = p + ".attn";
    DI_ASSIGN_OR_RETURN(a.wq_a, ckpt.weight(ap + ".wq_a", c.q_lora_rank, d, c.quant));
    DI_ASSIGN_OR_RETURN(a.q_norm, load_vector(ckpt, ap + ".q_norm.weight", c.q_lora_rank));
    DI_ASSIGN_OR_RETURN(a.wq_b, ckpt.weight(ap + ".wq_b", h * hd, c.q_lora_rank, c.quant));
    DI_ASSIGN_OR_RETURN(a.wkv, ckpt.weight(ap + ".wkv", hd, d, c.quant));
    DI_ASSIGN_OR_RETURN(a.kv_norm, load_vector(ckpt, ap + ".kv_norm.weight", hd));
    DI_ASSIGN_OR_RETURN(a.wo_a,
                        ckpt.weight(ap + ".wo_a", c.o_groups * c.o_lora_rank, h * hd / c.o_groups, c.quant));
    DI_ASSIGN_OR_RETURN(a.wo_b, ckpt.weight(ap + ".wo_b", d, c.o_groups * c.o_lora_rank, c.quant));
    DI_ASSIGN_OR_RETURN(a.sink, load_vector(ckpt, ap + ".attn_sink", h));
    const AttentionType type = c.layer_types[l];
    const int64_t ratio = c.compress_ratios[l];
    if (type != AttentionType::kSliding) {
        a.has_compressor = true;
        const int64_t coff = type == AttentionType::kCompressedSparse ? 2 : 1;
        DI_RETURN_IF_ERROR(bind_compressor(ckpt, ap + ".compressor", c, ratio, hd, coff, &a.compressor));
    }
    if (type == AttentionType::kCompressedSparse) {
        a.has_indexer = true;
        IndexerWeights& ix = a.indexer;
        DI_ASSIGN_OR_RETURN(ix.wq_b, ckpt.weight(ap + ".indexer.wq_b", c.index_n_heads * c.index_head_dim,
                                                 c.q_lora_rank, c.quant));
        DI_ASSIGN_OR_RETURN(ix.weights_proj,
                            ckpt.weight(ap + ".indexer.weights_proj", c.index_n_heads, d, c.quant));
        DI_RETURN_IF_ERROR(
            bind_compressor(ckpt, ap + ".indexer.compressor", c, ratio, c.index_head_dim, 2, &ix.compressor));
    }

    MoeWeights& f = out->ffn;
    const std::string fp = p + ".ffn";
    DI_ASSIGN_OR_RETURN(f.gate, ckpt.weight(fp + ".gate", c.n_routed_experts, d, c.quant));
    if (c.mlp_layer_types[l] == MlpType::kHashMoe) {
        const int64_t k = c.num_experts_per_tok;
        DI_ASSIGN_OR_RETURN(core::TensorView t, ckpt.tensor(fp + ".gate.tid2eid", core::DType::kI64,
                                                            core::Shape{c.vocab_size, k}));
        f.tid2eid.resize(c.vocab_size * k);
        for (int64_t i = 0; i < c.vocab_size * k; ++i) {
            const int64_t e = t.as<int64_t>()[i];
            if (e < 0 || e >= c.n_routed_experts)
                return core::invalid_argument(ckpt.dir() + ": tensor '" + fp +
                                              ".gate.tid2eid' holds expert " + std::to_string(e) +
                                              " outside [0, " + std::to_string(c.n_routed_experts) + ")");
            f.tid2eid[i] = static_cast<int32_t>(e);
        }
    } else {
        DI_ASSIGN_OR_RETURN(f.bias, load_vector(ckpt, fp + ".gate.bias", c.n_routed_experts));
    }
    f.experts.resize(c.n_routed_experts);
    const int64_t last = range.last < 0 ? c.n_routed_experts : std::min(range.last, c.n_routed_experts);
    for (int64_t e = range.first; e < last; ++e)
        DI_RETURN_IF_ERROR(bind_expert(ckpt, fp + ".experts." + std::to_string(e), c, c.moe_intermediate_size,
                                       &f.experts[e]));
    f.has_shared = c.n_shared_experts > 0;
    if (f.has_shared)
        DI_RETURN_IF_ERROR(bind_expert(ckpt, fp + ".shared_experts", c,
                                       c.n_shared_experts * c.moe_intermediate_size, &f.shared));
    return Status();
}

} // namespace

int64_t ModelWeights::resident_weight_bytes() const {
    int64_t b = embed.resident_bytes() + (head.data == embed.data ? 0 : head.resident_bytes()) +
                hc_head_fn.resident_bytes() + vec_bytes(hc_head_base) + vec_bytes(hc_head_scale) +
                vec_bytes(norm);
    auto comp = [](const CompressorWeights& c) {
        return c.wkv.resident_bytes() + c.wgate.resident_bytes() + vec_bytes(c.ape) + vec_bytes(c.norm);
    };
    for (const LayerWeights& l : layers) {
        b += vec_bytes(l.attn_norm) + vec_bytes(l.ffn_norm) + hc_bytes(l.hc_attn) + hc_bytes(l.hc_ffn);
        const AttentionWeights& a = l.attn;
        b += attention_bytes(a);
        if (a.has_compressor) b += comp(a.compressor);
        if (a.has_indexer)
            b += a.indexer.wq_b.resident_bytes() + a.indexer.weights_proj.resident_bytes() +
                 comp(a.indexer.compressor);
        const MoeWeights& f = l.ffn;
        b += f.gate.resident_bytes() + vec_bytes(f.bias) +
             static_cast<int64_t>(f.tid2eid.size() * sizeof(int32_t));
        for (const ExpertWeights& e : f.experts) b += expert_bytes(e);
        if (f.has_shared) b += expert_bytes(f.shared);
    }
    return b;
}

int64_t ModelWeights::max_linear_cols() const {
    int64_t m = std::max(head.cols, hc_head_fn.cols);
    auto take = [&m](std::initializer_list<const core::Weight*> ws) {
        for (const core::Weight* w : ws) m = std::max(m, w->cols);
    };
    auto expert = [&take](const ExpertWeights& e) { take({&e.w1, &e.w2, &e.w3}); };
    for (const LayerWeights& l : layers) {
        const AttentionWeights& a = l.attn;
        take({&l.hc_attn.fn, &l.hc_ffn.fn, &a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &l.ffn.gate});
        if (a.has_compressor) take({&a.compressor.wkv, &a.compressor.wgate});
        if (a.has_indexer)
            take({&a.indexer.wq_b, &a.indexer.weights_proj, &a.indexer.compressor.wkv,
                  &a.indexer.compressor.wgate});
        for (const ExpertWeights& e : l.ffn.experts) expert(e);
        if (l.ffn.has_shared) expert(l.ffn.shared);
    }
    return m;
}

Result<ModelWeights> bind_weights(const weights::Checkpoint& ckpt, const ModelConfig& c, ExpertRange range,
                                  model::HeadRows head_rows) {
    ModelWeights w;
    const int64_t d = c.hidden_size;
    DI_ASSIGN_OR_RETURN(w.embed, ckpt.weight("embed", c.vocab_size, d, c.quant));
    if (c.tie_word_embeddings && !model::head_as_fp8()) {
        w.head = w.embed;
    } else {
        DI_ASSIGN_OR_RETURN(w.head,
                            model::bind_lm_head(ckpt, c.tie_word_embeddings ? "embed" : "head", c.vocab_size,
                                                d, c.quant, head_rows.begin, head_rows.end));
    }
    DI_ASSIGN_OR_RETURN(w.norm, load_vector(ckpt, "norm.weight", d));
    DI_ASSIGN_OR_RETURN(w.hc_head_fn, load_f32_matrix(ckpt, "hc_head_fn", c.hc_mult, c.hc_mult * d));
    DI_ASSIGN_OR_RETURN(w.hc_head_base, load_vector(ckpt, "hc_head_base", c.hc_mult));
    DI_ASSIGN_OR_RETURN(w.hc_head_scale, load_vector(ckpt, "hc_head_scale", 1));
    w.layers.resize(c.num_hidden_layers);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        DI_RETURN_IF_ERROR(bind_layer(ckpt, l, c, range, &w.layers[l]));
    return w;
}

void attach_dense_int8_panels(const weights::Checkpoint& ckpt, ModelWeights* w) {
    for (size_t l = 0; l < w->layers.size(); ++l) {
        LayerWeights& lw = w->layers[l];
        const std::string ap = "layers." + std::to_string(l) + ".attn";
        AttentionWeights& a = lw.attn;
        auto attach = [&ckpt](const std::string& name, core::Weight* x) {
            model::attach_fp8_int8_panels(ckpt, name, x);
        };
        attach(ap + ".wq_a", &a.wq_a);
        attach(ap + ".wq_b", &a.wq_b);
        attach(ap + ".wkv", &a.wkv);
        attach(ap + ".wo_a", &a.wo_a);
        attach(ap + ".wo_b", &a.wo_b);
        auto compressor = [&](const std::string& p, CompressorWeights* c) {
            attach(p + ".wkv", &c->wkv);
            attach(p + ".wgate", &c->wgate);
        };
        if (a.has_compressor) compressor(ap + ".compressor", &a.compressor);
        if (a.has_indexer) {
            attach(ap + ".indexer.wq_b", &a.indexer.wq_b);
            attach(ap + ".indexer.weights_proj", &a.indexer.weights_proj);
            compressor(ap + ".indexer.compressor", &a.indexer.compressor);
        }
        if (lw.ffn.has_shared) {
            const std::string sp = "layers." + std::to_string(l) + ".ffn.shared_experts";
            attach(sp + ".w1", &lw.ffn.shared.w1);
            attach(sp + ".w2", &lw.ffn.shared.w2);
            attach(sp + ".w3", &lw.ffn.shared.w3);
        }
    }
}

} // namespace deepinfer::model::deepseek_v4
