#pragma once
// DeepSeek V4 as a model::CausalLm: embedding -> hc_mult streams -> layers (mHC + attention, mHC + MoE)
// -> hc_head -> final norm -> LM head, over a ragged ForwardBatch with paged KV state (kv_cache.h).

#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/probes.h"
#include "model/deepseek_v4/rope.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v4 {

class DeepseekV4Model : public CausalLm {
public:
    // Opens DIR (config.json + safetensors) and binds every weight in its stored format.
    static core::Result<std::unique_ptr<DeepseekV4Model>> load(const std::string& dir);

    int64_t vocab_size() const override { return config_.vocab_size; }
    int64_t eos_token_id() const override { return config_.eos_token_id; }
    core::Result<KvGeometry> kv_geometry(int64_t block_size) const override;
    core::Status init_kv_cache(const KvCacheSpec& spec) override;
    core::Status forward(const ForwardBatch& batch, float* logits) override;
    void copy_block(int32_t src, int32_t dst) override { cache_.copy_block(src, dst); }
    void copy_slot(int32_t src, int32_t dst) override { cache_.copy_slot(src, dst); }

    // Attach (or detach with nullptr) a probe sink filled by every later forward.
    void set_probes(ForwardProbes* probes) { probes_ = probes; }
    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    const weights::Checkpoint& checkpoint() const { return *ckpt_; }

private:
    DeepseekV4Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config, ModelWeights w);
    core::Status validate(const ForwardBatch& batch) const;

    std::unique_ptr<weights::Checkpoint> ckpt_;
    ModelConfig config_;
    ModelWeights weights_;
    RopeTable main_rope_;
    RopeTable compress_rope_;
    KvCache cache_;
    ForwardProbes* probes_ = nullptr;
};

} // namespace deepinfer::model::deepseek_v4
