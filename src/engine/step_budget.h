#pragma once
// Step packing: what runs this step. Decodes are offered tokens first (one each, in admission order), then
// running prefills continue, then waiting sequences start, all under max_num_batched_tokens tokens and
// max_num_seqs sequences. A prompt longer than what is left is cut into a chunk; the rest runs next step.

#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace deepinfer::engine {

class StepBudget {
public:
    StepBudget(int32_t max_tokens, int32_t max_seqs) : tokens_left_(max_tokens), seqs_left_(max_seqs) {}

    // Tokens a sequence wanting `wanted` would get (0: the token or sequence budget is spent).
    int32_t peek(int64_t wanted) const {
        if (seqs_left_ <= 0 || wanted <= 0) return 0;
        return static_cast<int32_t>(wanted < tokens_left_ ? wanted : tokens_left_);
    }
    void commit(int32_t tokens) {
        tokens_left_ -= tokens;
        --seqs_left_;
    }
    int32_t tokens_left() const { return tokens_left_; }
    int32_t seqs_left() const { return seqs_left_; }

private:
    int32_t tokens_left_;
    int32_t seqs_left_;
};

// The order running sequences are offered tokens: decodes first, then prefills, each in admission order.
std::vector<Sequence*> packing_order(const std::vector<Sequence*>& running);

} // namespace deepinfer::engine
