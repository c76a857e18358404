#pragma once
// The scheduler ties admission (admission.h) and step packing (step_budget.h) to the BlockManager:
//  1. running sequences, decodes first then prefill chunks, each extends its blocks; when the pool is
//     out, the most recently admitted running sequence not yet scheduled this step is preempted (blocks
//     and slot freed, requeued at the front of the waiting queue to be recomputed); if none is left, the
//     sequence itself is;
//  2. if nothing was preempted, waiting sequences are admitted in FIFO order while the token budget, the
//     sequence cap and the pool allow (prefix hits first, then a first chunk); the first that does not fit
//     stops admission, so a long request is never starved by shorter ones behind it.
// Progress: the oldest running sequence is never a victim of a younger one, and every admitted request
// fits in an empty pool (checked at add_request), so the oldest always advances: no deadlock.

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace deepinfer::engine {

struct SchedulerConfig {
    int32_t max_num_seqs = 64;
    int32_t max_num_batched_tokens = 2048;
    int32_t watermark_blocks = 1; // kept free when admitting while others run, for their growth
};

struct ScheduledChunk {
    Sequence* seq = nullptr;
    int32_t num_tokens = 0; // tokens seq->tokens[num_computed, num_computed + num_tokens) run this step
};

struct SchedulerOutput {
    std::vector<ScheduledChunk> chunks;                    // decodes, then prefill chunks
    std::vector<std::pair<int32_t, int32_t>> block_copies; // copy-on-write (src, dst), before the forward
    std::vector<Sequence*> preempted;
    int64_t prefix_query_tokens = 0;
    int64_t prefix_hit_tokens = 0;
    int32_t num_prefill_tokens = 0;
    int32_t num_decode_tokens = 0;
};

class Scheduler {
public:
    Scheduler(const SchedulerConfig& config, BlockManager* blocks);

    void add_waiting(Sequence* seq, bool front = false);
    SchedulerOutput schedule();
    // After the forward: the chunk's tokens are in the KV cache; full blocks join the prefix cache.
    void on_computed(Sequence* seq, int32_t num_tokens);
    // Frees a sequence's blocks and slot and drops it from the queues (finish or abort).
    void remove(Sequence* seq);
    // n > 1: a running child shares the parent's blocks and gets its own slot (the caller copies the slot
    // state). False when no slot or running place is free; the caller then queues the child to recompute.
    bool fork(const Sequence& parent, Sequence* child);

    const std::vector<Sequence*>& running() const { return running_; }
    const std::deque<Sequence*>& waiting() const { return waiting_; }
    int32_t max_running() const { return max_running_; }
    const SchedulerConfig& config() const { return config_; }

private:
    void preempt(Sequence* seq, SchedulerOutput* out);
    void extend(Sequence* seq, int32_t num_new, SchedulerOutput* out);
    bool try_admit(Sequence* seq, class StepBudget* budget, SchedulerOutput* out);
    void release_kv(Sequence* seq);

    SchedulerConfig config_;
    BlockManager* blocks_;
    int32_t max_running_;
    std::vector<Sequence*> running_; // admission order
    std::deque<Sequence*> waiting_;
};

} // namespace deepinfer::engine
