#include "tokenizer/incremental_detokenizer.h"

namespace deepinfer::tokenizer {

std::string IncrementalDetokenizer::push(TokenId id) {
    if (skip_special_ && tok_->is_special(id)) return {};
    const std::string_view sep = tok_->token_separator();
    if (sep.empty()) return repair_.push(tok_->token_bytes(id));
    // A separator goes between the tokens decode() keeps; it drops unknown ids.
    if (!tok_->id_to_token(id)) return {};
    std::string out;
    if (!first_) out = repair_.push(sep);
    first_ = false;
    out += repair_.push(tok_->token_bytes(id));
    return out;
}

std::string IncrementalDetokenizer::push(std::span<const TokenId> ids) {
    std::string out;
    for (TokenId id : ids) out += push(id);
    return out;
}

std::string IncrementalDetokenizer::finish() {
    return repair_.finish();
}

} // namespace deepinfer::tokenizer
