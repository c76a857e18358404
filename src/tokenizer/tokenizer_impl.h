#pragma once
// Private state of Tokenizer, shared by tokenizer.cpp (running) and tokenizer_load.cpp (loading).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_level.h"

namespace deepinfer::tokenizer {

struct Tokenizer::Impl {
    std::vector<AddedToken> added;
    std::unordered_map<std::string, TokenId> added_by_content;
    AddedTokenMatcher raw_matcher;        // normalized == false
    AddedTokenMatcher normalized_matcher; // normalized == true
    Normalizer normalizer;
    std::unique_ptr<PreTokenizer> pre_tokenizer; // may be null
    // Exactly one model: BPE or WordLevel.
    std::unique_ptr<Bpe> bpe;
    std::unique_ptr<WordLevel> word_level;
    std::string separator; // between decoded tokens: " " when tokenizer.json has no decoder (HF's join)
    std::vector<TokenId> prefix_ids, suffix_ids; // post-processor template, for add_special_tokens

    // Per id: vocabulary string, decoded bytes, flags.
    std::vector<std::string> id_to_token;
    std::vector<std::string> decoded;
    std::vector<char> special;
    std::vector<char> known;

    void tokenize(std::string_view word, std::vector<TokenId>& out) const {
        if (bpe) {
            bpe->tokenize(word, out);
        } else {
            word_level->tokenize(word, out);
        }
    }
    const std::unordered_map<std::string, TokenId>& vocab() const {
        return bpe ? bpe->vocab() : word_level->vocab();
    }
};

} // namespace deepinfer::tokenizer
