#pragma once
// A vocabulary as the mask sees it: each token id's bytes, which ids are special (never produced as text;
// allowed only as an end token when the grammar accepts), and a byte trie over the ordinary tokens,
// flattened in preorder so a mask is one linear walk that skips a subtree as soon as its prefix is dead.
// Built once per vocabulary and shared (immutable, thread-safe) by every grammar and matcher.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace deepinfer::structured {

class TokenVocabulary {
public:
    // token_bytes[id]: the bytes token id stands for (byte-level BPE: possibly part of a UTF-8
    // character). special[id] (may be empty = none): excluded from text. end_ids: tokens that end the
    // output (EOS, stop tokens): allowed exactly when the grammar accepts.
    TokenVocabulary(std::vector<std::string> token_bytes, std::vector<bool> special,
                    std::vector<int32_t> end_ids);

    int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
    int32_t mask_words() const { return (size() + 31) / 32; }
    const std::string& bytes(int32_t id) const { return bytes_[id]; }
    bool is_special(int32_t id) const { return special_[id]; }
    bool is_end(int32_t id) const;
    const std::vector<int32_t>& end_ids() const { return end_ids_; }
    // Every byte 0..255 is an ordinary one-byte token, so any text can be written in at most as many
    // tokens as it has bytes: a grammar's distance in bytes bounds its distance in tokens (the budget
    // rule of CompiledGrammar::fill_mask relies on it). Byte-level BPE vocabularies have this.
    bool has_all_bytes() const { return has_all_bytes_; }

    // Flattened trie: node i holds byte byte_[i] at depth depth_[i] (1 = first byte); its subtree ends
    // before skip_[i]; the tokens spelled by the path to i are tok_ids_[tok_begin_[i] .. tok_begin_[i+1]).
    struct Trie {
        std::vector<uint8_t> byte;
        std::vector<uint16_t> depth;
        std::vector<int32_t> skip;
        std::vector<int32_t> tok_begin; // [nodes + 1]
        std::vector<int32_t> tok_ids;
        int32_t max_depth = 0;
    };
    const Trie& trie() const { return trie_; }

private:
    std::vector<std::string> bytes_;
    std::vector<bool> special_;
    std::vector<int32_t> end_ids_;
    Trie trie_;
    bool has_all_bytes_ = false;
};

} // namespace deepinfer::structured
