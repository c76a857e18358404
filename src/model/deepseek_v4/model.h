#pragma once
// DeepSeek V4 as a model::CausalLm: embedding -> hc_mult streams -> layers (mHC + attention, mHC + MoE)
// -> hc_head -> final norm -> LM head, over a ragged ForwardBatch with paged KV state (kv_cache.h). Every op
// runs on a kernels::Backend (the CPU one today) with buffers from its workspace: once the workspace is
// planned (configure_runtime) a steady-state step allocates nothing.

#include <memory>
#include <string>
#include <utility>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/context_parallel.h"
#include "model/deepseek_v4/kv_cache.h"
#include "model/deepseek_v4/model_weights.h"
#include "model/deepseek_v4/moe.h"
#include "model/deepseek_v4/probes.h"
#include "model/deepseek_v4/rope.h"
#include "model/deepseek_v4/tensor_parallel.h"
#include "model/sharded_lm.h"
#include "weights/checkpoint.h"

namespace deepinfer::model::deepseek_v4 {

// How this rank's model is sharded (docs/parallelism.md). Every rank holds the same tokens.
//  * moe: the routed experts split over these ranks in contiguous ranges (rank r of n: [r*E/n, (r+1)*E/n)),
//    the shared expert split over them (expert parallelism; with TP, the tp x ep ranks of the MoE group).
//  * tp: attention heads, wo_b rows and the vocabulary split over these ranks (tensor_parallel.h).
//  * cp: the sequences' KV blocks owned round-robin by these ranks, attention partials merged over them
//    (context_parallel.h); with EP on CP the same ranks are the moe group.
// Communicators outlive the model; nullptr or one rank = not split.
struct ShardSpec {
    parallel::Communicator* moe = nullptr;
    parallel::Communicator* tp = nullptr;
    parallel::Communicator* cp = nullptr;
    uint64_t stats_interval = 0; // EP load statistics every N steps (0 = none)
};

// Binds a shard's groups to the shard state both families (V4, V4.1) keep: routed experts [first, last)
// with the shared expert split over the group (on its last rank when it does not split) and, with
// stats_interval, EP load statistics; the TP and CP groups. Every collective failure of a forward lands in
// *status (docs/parallelism.md).
void bind_shard(const ShardSpec& spec, int64_t n_routed_experts, int64_t first, int64_t last,
                core::Status* status, MoeShard& moe, TpShard& tp, CpShard& cp,
                std::unique_ptr<parallel::ExpertLoadStats>& expert_load);

class DeepseekV4Model : public ShardedLm {
public:
    // Opens DIR (config.json + safetensors) and binds every weight in its stored format.
    // With a shard, binds only this rank's experts.
    static core::Result<std::unique_ptr<DeepseekV4Model>> load(const std::string& dir,
                                                               const ShardSpec& shard = {});

    int64_t vocab_size() const override { return config_.vocab_size; }
    int64_t eos_token_id() const override { return config_.eos_token_id; }
    ModelInfo info() const override;                                 // model_info.cpp
    DecodeCost decode_cost() const override;                         // model_info.cpp
    std::unique_ptr<ProbeRecorder> attach_probe_recorder() override; // model_info.cpp
    core::Result<KvGeometry> kv_geometry(int64_t block_size) const override;
    core::Status init_kv_cache(const KvCacheSpec& spec) override;
    core::Status configure_runtime(const RuntimeSpec& spec) override;
    void set_thread_pool(core::ThreadPool* pool) override;
    kernels::Profiler* profiler() override { return &backend_->profiler(); }
    core::Status forward(const ForwardBatch& batch, float* logits) override;
    // With CP a copy between blocks of two owners is a broadcast over the CP group, so every copy is
    // deferred to the start of the next forward, where every rank (leader and followers) runs them in order.
    void copy_block(int32_t src, int32_t dst) override;
    void copy_slot(int32_t src, int32_t dst) override { cache_.copy_slot(src, dst); }

    // Every rank, after every forward, with the leader's step counter (never a rank-local count): the EP
    // load-statistics exchange on multiples of the interval. A no-op without EP statistics.
    core::Status on_step(uint64_t step) override;
    // The latest exchanged EP load statistics, or nullptr without EP statistics.
    const parallel::ExpertLoadSnapshot* expert_load() const override;
    // The routed experts this rank holds: [first, last).
    std::pair<int64_t, int64_t> expert_range() const { return {moe_shard_.first, moe_shard_.last}; }

    // Attach (or detach with nullptr) a probe sink filled by every later forward.
    void set_probes(ForwardProbes* probes) { probes_ = probes; }
    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    const weights::Checkpoint& checkpoint() const { return *ckpt_; }
    // The paged KV state (tests inspect and poison it; with CP a rank reads only its own blocks).
    KvCache& kv_cache() { return cache_; }
    kernels::Backend& backend() { return *backend_; }
    // Swap the backend (a device one, or a test's decorator). Drops the KV state: call init_kv_cache after.
    void set_backend(std::unique_ptr<kernels::Backend> backend);
    // Workspace bytes a forward of T tokens (any chunking) needs; configure_runtime reserves it.
    int64_t workspace_bytes(int64_t T) const;

private:
    DeepseekV4Model(std::unique_ptr<weights::Checkpoint> ckpt, ModelConfig config, ModelWeights w,
                    const ShardSpec& shard, ExpertRange experts);
    core::Status validate(const ForwardBatch& batch) const;
    void run(const ForwardBatch& batch, float* logits);
    void run_pending_copies();
    void plan_runtime(); // the workspace and the kernels' scratch for runtime_ (setup time)

    std::unique_ptr<weights::Checkpoint> ckpt_;
    ModelConfig config_;
    ModelWeights weights_;
    RopeTable main_rope_;
    RopeTable compress_rope_;
    std::unique_ptr<kernels::Backend> backend_;
    KvCache cache_;
    std::vector<MoeRefs> moe_refs_; // [L]
    ShardSpec shard_;
    MoeShard moe_shard_;
    TpShard tp_;
    CpShard cp_;
    bool moe_spans_cp_ = false; // the MoE group holds several CP ranks (EP on CP): MoE on every row
    std::vector<std::pair<int32_t, int32_t>> pending_copies_; // CP: block copies for the next forward
    core::Status ep_status_;                                  // the first collective failure of a forward
    std::unique_ptr<parallel::ExpertLoadStats> expert_load_;
    RuntimeSpec runtime_;
    // validate()'s scratch, sized once (no allocation while a step's size is unchanged).
    mutable std::vector<int> covered_;
    mutable std::vector<uint8_t> slot_used_;
    ForwardProbes* probes_ = nullptr;
};

} // namespace deepinfer::model::deepseek_v4
