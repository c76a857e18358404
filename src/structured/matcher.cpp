#include "structured/matcher.h"

#include <algorithm>

namespace deepinfer::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
    states_.push_back(grammar_->initial_state());
}

bool GrammarMatcher::accept_token(int32_t id) {
    const TokenVocabulary& v = grammar_->vocab();
    if (terminated_ || id < 0 || id >= v.size()) return false;
    const int32_t cur = states_.back();
    if (v.is_end(id)) {
        if (!grammar_->is_accepting(cur)) return false;
        states_.push_back(cur);
        terminated_ = true;
        return true;
    }
    if (v.is_special(id) || v.bytes(id).empty()) return false;
    const int32_t next = grammar_->advance(cur, v.bytes(id));
    if (next == CompiledGrammar::kDead) return false;
    states_.push_back(next);
    return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
    if (terminated_) return false;
    const int32_t next = grammar_->advance(states_.back(), bytes);
    if (next == CompiledGrammar::kDead) return false;
    states_.push_back(next);
    return true;
}

void GrammarMatcher::fill_mask(std::span<uint32_t> mask, int32_t tokens_left) const {
    if (terminated_) {
        std::fill(mask.begin(), mask.end(), 0u);
        return;
    }
    grammar_->fill_mask(states_.back(), mask, tokens_left);
}

int32_t GrammarMatcher::distance_to_end() const {
    return terminated_ ? 0 : grammar_->distance(states_.back());
}

bool GrammarMatcher::is_accepting() const {
    return terminated_ || grammar_->is_accepting(states_.back());
}

bool GrammarMatcher::rollback(int32_t n) {
    if (n < 0 || n > num_accepted()) return false;
    if (n == 0) return true;
    states_.resize(states_.size() - n);
    terminated_ = false; // an end token is always the last accepted
    return true;
}

} // namespace deepinfer::structured
