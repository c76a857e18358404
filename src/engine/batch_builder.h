#pragma once
// Turns a SchedulerOutput into the model's ragged ForwardBatch: one SequenceChunk per scheduled sequence
// (slot, start position, block table covering the chunk, reset/restore flags), the tokens and positions
// concatenated, and the logits rows wanted: every row feeding a prompt logprob, and the last row of each
// chunk that reaches the end of its sequence's known tokens (a decode, or the end of a prompt). With
// static-shape buckets, one padding chunk on the scratch block and slot fills the step to its bucket.

#include <cstdint>
#include <vector>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "model/forward_batch.h"

namespace deepinfer::engine {

struct LogitsRow {
    Sequence* seq = nullptr;
    int64_t position = 0; // of the row's input token
    bool sample = false;  // next-token sampling; otherwise the prompt logprob of token position + 1
};

struct BuiltBatch {
    model::ForwardBatch batch;
    std::vector<LogitsRow> rows; // parallel to batch.logits_rows
    int32_t num_padding = 0;
};

// The smallest bucket >= num_tokens (num_tokens itself when buckets is empty or too small).
int32_t bucket_for(int32_t num_tokens, const std::vector<int32_t>& buckets);

BuiltBatch build_forward_batch(const SchedulerOutput& sched, const BlockManager& blocks,
                               const std::vector<int32_t>& token_buckets);

} // namespace deepinfer::engine
