// `generate --dump-probes` for V4.1: every forward's V41Probes of one sequence, rows concatenated, written
// with the golden key names of tools/oracle/goldens_v41.py (ids, hidden.{l}, router.{l}, index_topk.{l},
// candidate_blocks.{l}, engram_hash.{layer}), so a run can be compared stage by stage with the reference.

#include "model/deepseek_v41/model.h"
#include "weights/safetensors_writer.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

class V41ProbeRecorder : public ProbeRecorder {
public:
    explicit V41ProbeRecorder(DeepseekV41Model* m) : m_(m) {
        const ModelConfig& c = m_->config();
        hidden_.resize(c.num_hidden_layers);
        router_.resize(c.num_hidden_layers);
        picks_.resize(c.num_hidden_layers);
        m_->set_probes(&probes_);
    }
    ~V41ProbeRecorder() override { m_->set_probes(nullptr); }

    void record(const std::vector<int32_t>& tokens) override {
        ids_.insert(ids_.end(), tokens.begin(), tokens.end());
        for (size_t l = 0; l < hidden_.size(); ++l) {
            hidden_[l].insert(hidden_[l].end(), probes_.hidden[l].begin(), probes_.hidden[l].end());
            router_[l].insert(router_[l].end(), probes_.router[l].begin(), probes_.router[l].end());
            picks_[l].insert(picks_[l].end(), probes_.picks[l].begin(), probes_.picks[l].end());
        }
        candidates_.insert(candidates_.end(), probes_.candidate_blocks.begin(),
                           probes_.candidate_blocks.end());
        hash_.insert(hash_.end(), probes_.hash_ids.begin(), probes_.hash_ids.end());
    }

    core::Status write(const std::string& path) const override {
        const ModelConfig& c = m_->config();
        const int64_t N = static_cast<int64_t>(ids_.size()), L = c.num_hidden_layers;
        auto i64 = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
        weights::SafetensorsWriter w;
        w.add_i64("ids", core::Shape{N}, i64(ids_));
        for (int64_t l = 0; l < L; ++l) {
            const std::string ls = std::to_string(l);
            w.add_f32("hidden." + ls, core::Shape{N, c.hc_mult, c.hidden_size}, hidden_[l]);
            w.add_i64("router." + ls, core::Shape{N, c.num_experts_per_tok}, i64(router_[l]));
            if (c.is_index_source(l))
                w.add_i64("index_topk." + ls, core::Shape{N, c.index_topk}, i64(picks_[l]));
        }
        if (c.candidate_source_layer_id >= 0)
            w.add_i64("candidate_blocks." + std::to_string(c.candidate_source_layer_id),
                      core::Shape{N, c.candidate_topk_blocks}, i64(candidates_));
        const int64_t E = static_cast<int64_t>(c.engram.layer_ids.size()), cols = c.engram.n_hash_cols();
        for (int64_t e = 0; e < E; ++e) {
            std::vector<int64_t> v;
            for (int64_t t = 0; t < N; ++t)
                for (int64_t k = 0; k < cols; ++k) v.push_back(hash_[(t * E + e) * cols + k]);
            w.add_i64("engram_hash." + std::to_string(c.engram.layer_ids[e]), core::Shape{N, cols}, v);
        }
        return w.write(path);
    }

private:
    DeepseekV41Model* m_;
    V41Probes probes_;
    std::vector<int32_t> ids_;
    std::vector<std::vector<float>> hidden_;
    std::vector<std::vector<int32_t>> router_, picks_;
    std::vector<int32_t> candidates_;
    std::vector<int64_t> hash_;
};

} // namespace

std::unique_ptr<ProbeRecorder> DeepseekV41Model::attach_probe_recorder() {
    return std::make_unique<V41ProbeRecorder>(this);
}

} // namespace deepinfer::model::deepseek_v41
