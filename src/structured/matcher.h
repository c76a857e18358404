#pragma once
// Per-sequence grammar state: the automaton state after each accepted token, so rollback(n) (speculative
// decoding, a rejected draft) is a pop and a copy is a vector of ints. The heavy tables live in the
// shared CompiledGrammar.
//
//   GrammarMatcher m(compiled);
//   m.fill_mask(mask);                  // before sampling: allowed tokens
//   m.accept_token(sampled);            // after sampling
//   if (m.is_terminated()) ...          // an end token was accepted

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"

namespace deepinfer::structured {

class GrammarMatcher {
public:
    explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

    // False (state unchanged) if the token is not allowed here. An end token is allowed only where the
    // grammar accepts; after it the matcher is terminated and accepts nothing more.
    bool accept_token(int32_t id);
    // Forced text (e.g. a prefix the server inserts); false (unchanged) if the grammar rejects it.
    bool accept_bytes(std::string_view bytes);
    // mask: [vocab().mask_words()]; bit id set = token id allowed. A terminated matcher allows nothing.
    // tokens_left: the tokens the output may still have, the end token included; when it is tight only
    // tokens after which the grammar can still end in time are allowed (CompiledGrammar::fill_mask).
    void fill_mask(std::span<uint32_t> mask, int32_t tokens_left = CompiledGrammar::kNoBudget) const;
    // The fewest bytes (with a vocabulary that has every byte: at most that many tokens) before the
    // grammar may end; 0 when it may end now or has ended, CompiledGrammar::kUnreachable if it never can.
    int32_t distance_to_end() const;
    bool is_accepting() const; // the output so far is a complete sentence (end tokens allowed)
    bool is_terminated() const { return terminated_; }
    // Undoes the last n accepted tokens (or accept_bytes calls); false if fewer were accepted.
    bool rollback(int32_t n);
    int32_t num_accepted() const { return static_cast<int32_t>(states_.size()) - 1; }
    // The current automaton state of the shared CompiledGrammar (CompiledGrammar::kDead never: a rejected
    // token leaves the state unchanged). For tests and diagnostics.
    int32_t state() const { return states_.back(); }
    const TokenVocabulary& vocab() const { return grammar_->vocab(); }
    bool budget_aware() const { return grammar_->budget_aware(); }

private:
    std::shared_ptr<CompiledGrammar> grammar_;
    std::vector<int32_t> states_; // [accepted + 1]; the last one is current
    bool terminated_ = false;     // the last accepted token was an end token
};

} // namespace deepinfer::structured
