#pragma once
// The DeepSeek V4 vocabulary as the structured module takes it: each id's bytes (through the tokenizer
// library), special tokens excluded from text, EOS as the end token.

#include <memory>
#include <string>
#include <vector>

#include "structured/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::structured::testing_util {

inline std::shared_ptr<const TokenVocabulary> vocab_from_tokenizer(const tokenizer::Tokenizer& tok) {
    const std::size_t n = tok.vocab_size();
    std::vector<std::string> bytes(n);
    std::vector<bool> special(n, false);
    for (std::size_t id = 0; id < n; ++id) {
        bytes[id] = std::string(tok.token_bytes(static_cast<tokenizer::TokenId>(id)));
        special[id] = tok.is_special(static_cast<tokenizer::TokenId>(id));
    }
    std::vector<int32_t> end;
    if (auto eos = tok.token_to_id("<｜end▁of▁sentence｜>")) end.push_back(*eos);
    return std::make_shared<TokenVocabulary>(std::move(bytes), std::move(special), std::move(end));
}

} // namespace deepinfer::structured::testing_util
