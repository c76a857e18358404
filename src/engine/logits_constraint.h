#pragma once
// A per-sequence constraint on which tokens may come next (structured outputs: JSON Schema, regex,
// grammar). The request carries a prototype in SamplingParams::constraint; every sequence of the request
// gets its own clone(), so n > 1 completions and forks keep separate state. The engine masks the
// sequence's logits row before sampling (disallowed tokens -> -inf) and calls accept() with each token
// it appends. The state lives in the Sequence, so preemption (recompute of prompt + outputs) leaves it
// as it is: the recomputed tokens were accepted already. rollback() undoes accepted tokens for
// speculative decoding.
//
// Logprobs of a constrained sequence are those of the masked distribution. A constraint should not be
// combined with min_tokens / ignore_eos where they contradict it (the server refuses such requests).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace deepinfer::engine {

class LogitsConstraint {
public:
    virtual ~LogitsConstraint() = default;
    // Allowed next tokens: bit (id % 32) of mask[id / 32] set = allowed. mask has mask_words() words;
    // ids past it are not allowed.
    virtual void fill_mask(std::span<uint32_t> mask) const = 0;
    virtual int32_t mask_words() const = 0;
    // Advances past an appended token; false if it was not allowed (the state is then unchanged).
    virtual bool accept(int32_t token) = 0;
    // Undoes the last n accepted tokens; false if fewer were accepted.
    virtual bool rollback(int32_t n) = 0;
    // An end token was accepted: nothing may follow.
    virtual bool is_terminated() const = 0;
    // A fresh copy with the same state.
    virtual std::unique_ptr<LogitsConstraint> clone() const = 0;
};

// Masks one logits row: returns the row with every disallowed token at -inf (a view of `scratch`).
// `allowed_out` (optional) receives how many tokens stayed allowed.
std::span<const float> apply_logits_constraint(const LogitsConstraint& constraint, std::span<const float> row,
                                               std::vector<float>& scratch, std::vector<uint32_t>& mask,
                                               int64_t* allowed_out = nullptr);

} // namespace deepinfer::engine
