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
    static constexpr int32_t kNoBudget = INT32_MAX;

    virtual ~LogitsConstraint() = default;
    // Allowed next tokens: bit (id % 32) of mask[id / 32] set = allowed. mask has mask_words() words;
    // ids past it are not allowed. tokens_left: how many tokens the sequence may still generate, this one
    // and the end token included (max_tokens and the context both count); a constraint that can, keeps
    // only tokens after which it can still end in time, so the output ends complete, not cut.
    virtual void fill_mask(std::span<uint32_t> mask, int32_t tokens_left) const = 0;
    void fill_mask(std::span<uint32_t> mask) const { fill_mask(mask, kNoBudget); }
    // An upper bound on the tokens still needed to end, the end token included (0: ended); kNoBudget
    // when the constraint cannot bound it.
    virtual int32_t tokens_to_end() const = 0;
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

// The tokens that would spell a trigger's text without being the trigger token (a phrase containing it, or
// pieces completing it after a partial match): the output parser reads text, so such a token would end the
// thinking for the parser but not for the constraint. Built once per vocabulary (make_trigger_text in
// grammar_constraint.h).
struct TriggerText {
    int32_t n = 0; // bytes of the trigger's text
    std::vector<uint8_t>
        advance; // [vocab * n]: bytes matched after token t with k matched before (n: spelled)
    std::vector<std::vector<int32_t>>
        completes; // [n]: the ids that spell the text with k bytes matched before
};

// Thinking, then the constraint: every token is free until `trigger` (</think>) is accepted; from the token
// after it on, `inner` applies (its state machine starts there). While thinking, the `blocked` tokens (the
// end tokens) are not allowed, so a constrained answer always follows; after `budget` free tokens (< 0:
// unlimited) only `trigger` is allowed, so a request whose budget is below max_tokens cannot end inside
// its thinking with no answer. The server sets budget = max_tokens / 2 (docs/structured-outputs.md).
// With tokens_left known, the trigger is also forced as soon as one more free token would leave too few
// tokens for the trigger and the inner constraint's shortest ending.
class DeferredConstraint final : public LogitsConstraint {
public:
    // `text` (optional): tokens that spell the trigger's text are not allowed while thinking.
    DeferredConstraint(std::unique_ptr<LogitsConstraint> inner, int32_t trigger, std::vector<int32_t> blocked,
                       int32_t budget, std::shared_ptr<const TriggerText> text = nullptr);
    DeferredConstraint(const DeferredConstraint& other);

    using LogitsConstraint::fill_mask;
    void fill_mask(std::span<uint32_t> mask, int32_t tokens_left) const override;
    int32_t tokens_to_end() const override;
    int32_t mask_words() const override { return inner_->mask_words(); }
    bool accept(int32_t token) override;
    bool rollback(int32_t n) override;
    bool is_terminated() const override { return active_ && inner_->is_terminated(); }
    std::unique_ptr<LogitsConstraint> clone() const override {
        return std::make_unique<DeferredConstraint>(*this);
    }

    bool active() const { return active_; } // the trigger was accepted: the inner constraint applies

private:
    std::unique_ptr<LogitsConstraint> inner_;
    int32_t trigger_;
    std::vector<int32_t> blocked_;
    int32_t budget_;
    std::shared_ptr<const TriggerText> text_;
    std::vector<uint8_t> matched_; // per free token: bytes of the trigger's text matched after it
    int32_t free_ = 0;             // tokens accepted before the trigger (the trigger not counted)
    int32_t inner_accepted_ = 0;   // tokens accepted by inner_ (for rollback across the trigger)
    bool active_ = false;
};

// Masks one logits row: returns the row with every disallowed token at -inf (a view of `scratch`).
// `allowed_out` (optional) receives how many tokens stayed allowed; tokens_left as in fill_mask.
std::span<const float> apply_logits_constraint(const LogitsConstraint& constraint, std::span<const float> row,
                                               std::vector<float>& scratch, std::vector<uint32_t>& mask,
                                               int64_t* allowed_out = nullptr,
                                               int32_t tokens_left = LogitsConstraint::kNoBudget);

// Masks one logits row in place (disallowed -> -inf): writes only what changes, so a row where nearly
// everything is allowed (inside a free string) costs a scan of the mask, not a copy of the row. For rows
// the engine owns and reads only for this sequence. Returns how many tokens stayed allowed.
int64_t mask_logits_in_place(const LogitsConstraint& constraint, std::span<float> row,
                             std::vector<uint32_t>& mask, int32_t tokens_left = LogitsConstraint::kNoBudget);

} // namespace deepinfer::engine
