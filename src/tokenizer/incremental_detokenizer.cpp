#include "tokenizer/incremental_detokenizer.h"

namespace deepinfer::tokenizer {

std::string IncrementalDetokenizer::push(TokenId id) {
    if (skip_special_ && tok_->is_special(id)) return {};
    return repair_.push(tok_->token_bytes(id));
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
