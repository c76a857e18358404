// The official V4 tensor list (spec §4.1) for a config, and the check of a checkpoint against it.

#include <set>

#include "model/deepseek_v4/config.h"

namespace deepinfer::model::deepseek_v4 {
namespace {

using core::DType;

const std::vector<DType> kDense = {DType::kF32, DType::kBF16};
const std::vector<DType> kLinear = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3};
const std::vector<DType> kExpert = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kI8};

class SpecList {
public:
    void dense(const std::string& name, core::Shape shape) { specs_.push_back({name, kDense, shape, false}); }
    void linear(const std::string& prefix, int64_t rows, int64_t cols,
                const std::vector<DType>& dtypes = kLinear) {
        specs_.push_back({prefix + ".weight", dtypes, core::Shape{rows, cols}, true});
    }
    void exact(const std::string& name, DType dtype, core::Shape shape) {
        specs_.push_back({name, {dtype}, shape, false});
    }
    std::vector<TensorSpec> take() { return std::move(specs_); }

private:
    std::vector<TensorSpec> specs_;
};

// KV compressor of a CSA (coff 2) or HCA (coff 1) layer, or of the indexer (width = index_head_dim).
void add_compressor(SpecList& s, const std::string& p, int64_t width, int64_t coff, int64_t ratio,
                    int64_t dim) {
    s.linear(p + "wkv", coff * width, dim);
    s.linear(p + "wgate", coff * width, dim);
    s.dense(p + "ape", {ratio, coff * width});
    s.dense(p + "norm.weight", {width});
}

std::string dtype_list(const std::vector<DType>& ds) {
    std::string s;
    for (DType d : ds) s += (s.empty() ? "" : ", ") + std::string(core::dtype_name(d));
    return s;
}

} // namespace

core::Shape TensorSpec::stored_shape(DType dtype) const {
    if (linear && dtype == DType::kI8) return core::Shape{shape[0], shape[1] / 2};
    return shape;
}

std::vector<TensorSpec> required_tensors(const ModelConfig& c) {
    SpecList s;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim, nc = c.hc_mult;
    const int64_t hc_rows = (2 + nc) * nc;
    s.dense("embed.weight", {c.vocab_size, D});
    if (!c.tie_word_embeddings) s.linear("head", c.vocab_size, D);
    s.dense("norm.weight", {D});
    s.dense("hc_head_fn", {nc, nc * D});
    s.dense("hc_head_base", {nc});
    s.dense("hc_head_scale", {1});
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string p = "layers." + std::to_string(i) + ".";
        s.dense(p + "attn_norm.weight", {D});
        s.dense(p + "ffn_norm.weight", {D});
        for (const char* site : {"hc_attn", "hc_ffn"}) {
            s.dense(p + site + "_fn", {hc_rows, nc * D});
            s.dense(p + site + "_base", {hc_rows});
            s.dense(p + site + "_scale", {3});
        }
        s.dense(p + "attn.attn_sink", {H});
        s.linear(p + "attn.wq_a", c.q_lora_rank, D);
        s.dense(p + "attn.q_norm.weight", {c.q_lora_rank});
        s.linear(p + "attn.wq_b", H * d, c.q_lora_rank);
        s.linear(p + "attn.wkv", d, D);
        s.dense(p + "attn.kv_norm.weight", {d});
        s.linear(p + "attn.wo_a", c.o_groups * c.o_lora_rank, H * d / c.o_groups);
        s.linear(p + "attn.wo_b", D, c.o_groups * c.o_lora_rank);
        const AttentionType type = c.layer_types[i];
        const int64_t m = c.compress_ratios[i];
        if (type != AttentionType::kSliding) {
            const int64_t coff = type == AttentionType::kCompressedSparse ? 2 : 1;
            add_compressor(s, p + "attn.compressor.", d, coff, m, D);
        }
        if (type == AttentionType::kCompressedSparse) {
            s.linear(p + "attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
            s.linear(p + "attn.indexer.weights_proj", c.index_n_heads, D);
            add_compressor(s, p + "attn.indexer.compressor.", c.index_head_dim, 2, m, D);
        }
        s.dense(p + "ffn.gate.weight", {c.n_routed_experts, D});
        if (c.mlp_layer_types[i] == MlpType::kHashMoe) {
            s.exact(p + "ffn.gate.tid2eid", DType::kI64, {c.vocab_size, c.num_experts_per_tok});
        } else {
            s.dense(p + "ffn.gate.bias", {c.n_routed_experts});
        }
        const int64_t I = c.moe_intermediate_size;
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
            const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
            s.linear(ep + "w1", I, D, kExpert);
            s.linear(ep + "w3", I, D, kExpert);
            s.linear(ep + "w2", D, I, kExpert);
        }
        if (c.n_shared_experts > 0) {
            const int64_t Is = c.n_shared_experts * I;
            s.linear(p + "ffn.shared_experts.w1", Is, D);
            s.linear(p + "ffn.shared_experts.w3", Is, D);
            s.linear(p + "ffn.shared_experts.w2", D, Is);
        }
    }
    return s.take();
}

CheckpointCheck check_checkpoint(const weights::Checkpoint& ck, const ModelConfig& c) {
    CheckpointCheck out;
    std::set<std::string> expected;
    const std::vector<TensorSpec> specs = required_tensors(c);
    out.required = specs.size();
    for (const TensorSpec& spec : specs) {
        expected.insert(spec.name);
        const weights::TensorInfo* t = ck.find(spec.name);
        if (t == nullptr) {
            out.problems.push_back("missing tensor '" + spec.name + "'");
            continue;
        }
        bool accepted = false;
        for (DType d : spec.dtypes) accepted = accepted || d == t->dtype;
        if (!accepted) {
            out.problems.push_back(t->file + ": tensor '" + spec.name + "': dtype " +
                                   std::string(core::dtype_name(t->dtype)) + " not accepted (" +
                                   dtype_list(spec.dtypes) + ")");
            continue;
        }
        if (!spec.linear) {
            if (t->shape != spec.shape)
                out.problems.push_back(t->file + ": tensor '" + spec.name + "': shape " +
                                       t->shape.to_string() + ", expected " + spec.shape.to_string());
            continue;
        }
        const std::string prefix = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
        if (t->dtype == DType::kF8E4M3 || t->dtype == DType::kI8) expected.insert(prefix + ".scale");
        auto w = ck.weight(prefix, spec.shape[0], spec.shape[1], c.quant);
        if (!w.ok()) out.problems.push_back(w.status().message());
    }
    for (const weights::TensorInfo& t : ck.tensors())
        if (!expected.count(t.name)) out.unexpected.push_back(t.name);
    return out;
}

} // namespace deepinfer::model::deepseek_v4
