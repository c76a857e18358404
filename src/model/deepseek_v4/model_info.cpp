// DeepseekV4Model's family-neutral descriptions for runners (model::CausalLm): sizes, bench's decode cost
// model, and the probe recorder of `generate --dump-probes`.

#include <numeric>

#include "model/deepseek_v4/model.h"

namespace deepinfer::model::deepseek_v4 {

ModelInfo DeepseekV4Model::info() const {
    ModelInfo i;
    i.family = "deepseek_v4";
    i.num_layers = config_.num_hidden_layers;
    i.hidden_size = config_.hidden_size;
    i.n_routed_experts = config_.n_routed_experts;
    i.experts_per_tok = config_.num_experts_per_tok;
    i.bos_token_id = config_.bos_token_id;
    i.max_position_embeddings = config_.max_position_embeddings;
    for (int64_t r : config_.compress_ratios)
        if (r > 0) i.kv_block_unit = std::lcm(i.kv_block_unit, r);
    i.resident_weight_bytes = static_cast<double>(weights_.resident_weight_bytes());
    return i;
}

// Everything dense (mHC, attention, compressors, indexer, router, shared expert, head, one embedding row)
// plus one routed expert per layer.
DecodeCost DeepseekV4Model::decode_cost() const {
    DecodeCost c;
    auto add = [&](const core::Weight& x) {
        c.dense_bytes += static_cast<double>(x.stored_bytes());
        c.dense_macs += static_cast<double>(x.rows) * x.cols;
    };
    auto add_comp = [&](const CompressorWeights& x) {
        add(x.wkv);
        add(x.wgate);
    };
    const ModelWeights& w = weights_;
    for (const auto& l : w.layers) {
        add(l.hc_attn.fn);
        add(l.hc_ffn.fn);
        const auto& a = l.attn;
        for (const core::Weight* x : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b}) add(*x);
        if (a.has_compressor) add_comp(a.compressor);
        if (a.has_indexer) {
            add(a.indexer.wq_b);
            add(a.indexer.weights_proj);
            add_comp(a.indexer.compressor);
        }
        add(l.ffn.gate);
        if (l.ffn.has_shared)
            for (const core::Weight* x : {&l.ffn.shared.w1, &l.ffn.shared.w2, &l.ffn.shared.w3}) add(*x);
        const auto& e = l.ffn.experts.front();
        for (const core::Weight* x : {&e.w1, &e.w2, &e.w3}) {
            c.expert_bytes += static_cast<double>(x->stored_bytes());
            c.expert_macs += static_cast<double>(x->rows) * x->cols;
        }
    }
    add(w.hc_head_fn);
    add(w.head);
    c.head_macs = static_cast<double>(w.head.rows) * w.head.cols;
    c.dense_bytes += static_cast<double>(w.embed.stored_bytes()) / w.embed.rows;
    return c;
}

namespace {

class V4ProbeRecorder : public ProbeRecorder {
public:
    explicit V4ProbeRecorder(DeepseekV4Model* m) : m_(m) { m_->set_probes(&probes_); }
    ~V4ProbeRecorder() override { m_->set_probes(nullptr); }
    void record(const std::vector<int32_t>& tokens) override { log_.append(probes_, tokens); }
    core::Status write(const std::string& path) const override {
        const ModelConfig& c = m_->config();
        return log_.write_safetensors(path, c.hc_mult, c.hidden_size, c.num_experts_per_tok, c.index_topk);
    }

private:
    DeepseekV4Model* m_;
    ForwardProbes probes_;
    ProbeLog log_;
};

} // namespace

std::unique_ptr<ProbeRecorder> DeepseekV4Model::attach_probe_recorder() {
    return std::make_unique<V4ProbeRecorder>(this);
}

} // namespace deepinfer::model::deepseek_v4
