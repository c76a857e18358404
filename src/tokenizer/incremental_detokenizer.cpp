#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

std::string IncrementalDetokenizer::push(TokenId id) {
    if (skip_special_ && tok_->is_special(id)) return {};
    pending_ += tok_->token_bytes(id);
    return drain(false);
}

std::string IncrementalDetokenizer::push(std::span<const TokenId> ids) {
    for (TokenId id : ids) {
        if (skip_special_ && tok_->is_special(id)) continue;
        pending_ += tok_->token_bytes(id);
    }
    return drain(false);
}

std::string IncrementalDetokenizer::finish() {
    return drain(true);
}

std::string IncrementalDetokenizer::drain(bool final) {
    std::string out;
    const std::string_view p = pending_;
    std::size_t i = 0;
    while (i < p.size()) {
        if (static_cast<unsigned char>(p[i]) < 0x80) {
            out.push_back(p[i++]);
            continue;
        }
        const std::size_t n = utf8::valid_sequence_length(p, i);
        if (n != 0) {
            out.append(p.substr(i, n));
            i += n;
            continue;
        }
        // An ill-formed run that reaches the end may still be a character whose rest has not arrived.
        const std::size_t sub = utf8::maximal_subpart_length(p, i);
        if (!final && i + sub == p.size() && utf8::incomplete_tail_length(p.substr(i)) == sub) break;
        out.append("\xEF\xBF\xBD");
        i += sub;
    }
    pending_.erase(0, i);
    return out;
}

} // namespace deepinfer::tokenizer
