#include "tokenizer/word_level.h"

namespace deepinfer::tokenizer {

core::Result<std::unique_ptr<WordLevel>> WordLevel::create(std::unordered_map<std::string, TokenId> vocab,
                                                           const std::string& unk_token) {
    auto it = vocab.find(unk_token);
    if (it == vocab.end())
        return core::invalid_argument("model.unk_token: WordLevel unknown token '" + unk_token +
                                      "' is not in model.vocab");
    std::unique_ptr<WordLevel> m(new WordLevel());
    m->unk_id_ = it->second;
    m->vocab_ = std::move(vocab);
    return m;
}

void WordLevel::tokenize(std::string_view word, std::vector<TokenId>& out) const {
    if (word.empty()) return;
    // Heterogeneous lookup needs a transparent hash; words are short, so a copy is cheap enough.
    auto it = vocab_.find(std::string(word));
    out.push_back(it != vocab_.end() ? it->second : unk_id_);
}

} // namespace deepinfer::tokenizer
