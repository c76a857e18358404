#pragma once
// Drives one sequence through a CausalLm without an engine: a fixed slot and a fixed list of blocks,
// prompt chunks of any size, then one-token decode steps. Used by `deepinfer generate` and the tests.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/causal_lm.h"

namespace deepinfer::model {

class SequenceRunner {
public:
    // blocks: the sequence's physical blocks in logical order (must cover every position it will reach).
    SequenceRunner(CausalLm* lm, int32_t slot, std::vector<int32_t> blocks, int64_t seq_id = 0)
        : lm_(lm), slot_(slot), blocks_(std::move(blocks)), seq_id_(seq_id) {}

    // The chunk's batch: tokens at positions pos()..pos()+n-1, logits for every row when all_logits.
    ForwardBatch next_batch(const std::vector<int32_t>& ids, bool all_logits) const;
    // Feeds tokens in chunks of at most `chunk` (<= 0: one shot). logits: [ids.size(), V] when all_logits,
    // else [V] for the last token.
    core::Status feed(const std::vector<int32_t>& ids, int64_t chunk, bool all_logits,
                      std::vector<float>* logits);
    int64_t position() const { return pos_; }
    // Mark that position() tokens are already in the KV state (after a batched forward run elsewhere).
    void advance(int64_t n) { pos_ += n; }

private:
    CausalLm* lm_;
    int32_t slot_;
    std::vector<int32_t> blocks_;
    int64_t seq_id_;
    int64_t pos_ = 0;
};

// Index of the largest logit (lowest index on ties; NaN never wins): kernels::argmax.
int32_t argmax(const float* logits, int64_t n);

} // namespace deepinfer::model
