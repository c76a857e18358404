#pragma once
// The model side of the step protocol (parallel/step_channel.h): the leader's CausalLm publishes every
// step and KV operation before running it; followers replay them on their shard.
//
//   leader (rank 0):  LeaderLm wraps the rank's model; the runner (engine, generate) drives it as any
//                     CausalLm. configure_runtime / init_kv_cache publish a control step at once;
//                     copy_block / copy_slot ride with the next forward, applied before it in call order.
//   followers:        run_model_follower(model, channel) until the leader's shutdown step.
// After every forward each rank calls model.on_step(leader's step counter), so the EP load-statistics
// exchange is entered by every rank on the same steps.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "model/causal_lm.h"
#include "model/forward_batch.h"
#include "model/sharded_lm.h"
#include "parallel/step_channel.h"

namespace deepinfer::model::deepseek_v4 {

parallel::StepMessage to_step_message(const ForwardBatch& batch);
ForwardBatch to_forward_batch(const parallel::StepMessage& m);

class LeaderLm : public CausalLm {
public:
    // Neither is owned; both outlive this. Any family that shards (DeepSeek V4, V4.1).
    LeaderLm(ShardedLm* model, parallel::StepChannel* channel) : model_(model), channel_(channel) {}
    ~LeaderLm() override;
    LeaderLm(const LeaderLm&) = delete;
    LeaderLm& operator=(const LeaderLm&) = delete;

    int64_t vocab_size() const override { return model_->vocab_size(); }
    int64_t eos_token_id() const override { return model_->eos_token_id(); }
    ModelInfo info() const override { return model_->info(); }
    DecodeCost decode_cost() const override { return model_->decode_cost(); }
    core::Result<KvGeometry> kv_geometry(int64_t block_size) const override {
        return model_->kv_geometry(block_size);
    }
    core::Status init_kv_cache(const KvCacheSpec& spec) override;
    core::Status configure_runtime(const RuntimeSpec& spec) override;
    void set_thread_pool(core::ThreadPool* pool) override { model_->set_thread_pool(pool); }
    kernels::Profiler* profiler() override { return model_->profiler(); }
    core::Status forward(const ForwardBatch& batch, float* logits) override;
    void copy_block(int32_t src, int32_t dst) override;
    void copy_slot(int32_t src, int32_t dst) override;

    // Ends the followers' loop (call once, at a clean exit). Stops the keep-alive thread first.
    core::Status shutdown();
    // The leader's idle loop: an idle step every deadline / 3.
    core::Status keep_alive();
    // For runners whose idle wait cannot call keep_alive() (an engine thread asleep on a condition
    // variable): a thread that does. From then on every use of the channel and every forward (whose
    // collectives are MPI calls too) runs under one mutex, so two threads never enter MPI at once
    // (MPI_THREAD_SERIALIZED). A keep-alive failure is returned by the next forward.
    void start_keep_alive();
    // Bytes published so far (step messages, both broadcasts' payloads).
    int64_t published_bytes() const { return published_bytes_; }

    // Called once, on the thread that saw it, with the first failure of a step (a publish, a forward and
    // its collectives, a keep-alive): the job cannot go on (the followers failed the same step, or a rank
    // is gone and the communicator is broken), so a server stops serving and exits (cmd_serve.cpp). Runs
    // under the channel's lock: it must not call back into this object. Set before the first step.
    void set_on_failure(std::function<void(const core::Status&)> f) { on_failure_ = std::move(f); }

    // A copy of the model's EP load statistics (nullopt without them or before the first exchange), for
    // another thread (/metrics) while the engine thread runs forwards: updated after each exchange under
    // its own lock.
    std::optional<parallel::ExpertLoadReport> expert_load_report() const;

private:
    core::Status publish(parallel::StepMessage m);
    core::Status failed(core::Status s); // reports the first failure to on_failure_, returns s

    ShardedLm* model_;
    parallel::StepChannel* channel_;
    void stop_keep_alive();

    std::vector<parallel::StepOp> pending_; // KV copies since the last forward
    int64_t published_bytes_ = 0;
    std::mutex mu_; // the channel and MPI, once the keep-alive thread runs
    std::condition_variable cv_;
    bool stop_ = false;
    core::Status keep_alive_status_;
    std::thread keep_alive_thread_;
    std::function<void(const core::Status&)> on_failure_;
    bool failure_reported_ = false; // under mu_
    mutable std::mutex snapshot_mu_;
    std::optional<parallel::ExpertLoadReport> report_; // under snapshot_mu_
};

// A follower's loop: applies each step's ops, runs its forward (logits discarded: the leader samples) and
// on_step, until the leader's shutdown step (ok) or an error (returned; the caller exits non-zero).
core::Status run_model_follower(ShardedLm& model, parallel::StepChannel& channel);

} // namespace deepinfer::model::deepseek_v4
