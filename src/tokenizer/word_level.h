#pragma once
// The WordLevel model of a Hugging Face tokenizer.json: every pre-tokenized word is one vocabulary entry,
// or the unknown token. No merges, no subwords (tokenizers' `models::wordlevel`). Used by the tiny V4.1
// test checkpoints (tools/oracle/make_tiny_v41.py). Immutable, so thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

using TokenId = std::int32_t;

class WordLevel {
public:
    // vocab: word -> id. unk_token must be in vocab (HF fails the encoding of an unknown word otherwise;
    // here that is refused at load, so encoding never fails).
    static core::Result<std::unique_ptr<WordLevel>> create(std::unordered_map<std::string, TokenId> vocab,
                                                           const std::string& unk_token);

    // Appends the id of one pre-tokenized word: its vocabulary id, else the unknown token's.
    void tokenize(std::string_view word, std::vector<TokenId>& out) const;

    const std::unordered_map<std::string, TokenId>& vocab() const { return vocab_; }

private:
    WordLevel() = default;
    std::unordered_map<std::string, TokenId> vocab_;
    TokenId unk_id_ = -1;
};

} // namespace deepinfer::tokenizer
