#pragma once
// A rank's model in a multi-process run (docs/parallelism.md): a CausalLm plus what the step protocol
// needs of it. The leader's LeaderLm and the followers' run_model_follower (deepseek_v4/step_sync.h) drive
// any family that implements it (DeepSeek V4 and V4.1), and the server reads the EP statistics from it.

#include <cstdint>

#include "model/causal_lm.h"
#include "parallel/expert_load.h"

namespace deepinfer::model {

class ShardedLm : public CausalLm {
public:
    // Every rank, after every forward, with the leader's step counter (never a rank-local count): the EP
    // load-statistics exchange on multiples of the interval. A no-op without EP statistics.
    virtual core::Status on_step(uint64_t step) = 0;
    // The latest exchanged EP load statistics, or nullptr without EP statistics. Written by on_step: read
    // it on the thread that drives the model (or while it is not running).
    virtual const parallel::ExpertLoadSnapshot* expert_load() const = 0;
};

} // namespace deepinfer::model
