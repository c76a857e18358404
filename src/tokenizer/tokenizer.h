#pragma once
// A Hugging Face tokenizer.json (model BPE or WordLevel), loaded and run natively:
//   text --(added/special tokens matched first)--> normalizer --> pre-tokenizer (regex splits with
//   compiled-in Unicode 16 classes, ByteLevel, WhitespaceSplit) --> BPE merges or WordLevel lookup -->
//   post-processor;
//   ids --> decoder (ByteLevel) --> text.
// Ids are bit-exact with HF `tokenizers` for the DeepSeek V4 tokenizer (tests/tokenizer goldens).
//
//   DI_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file("data/tokenizer/deepseek-v4/tokenizer.json"));
//   std::vector<TokenId> ids = tok.encode(prompt);        // "<｜User｜>" becomes one id
//   std::string text = tok.decode(ids);
//
// A Tokenizer is immutable after loading and safe to share between threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_vocabulary.h"

namespace deepinfer::tokenizer {

using TokenId = std::int32_t;

class Tokenizer {
public:
    static core::Result<Tokenizer> from_file(const std::string& path);
    static core::Result<Tokenizer> from_json(std::string_view json_text);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Encodes UTF-8 text. Ill-formed bytes are first replaced by U+FFFD (one per maximal subpart, as a
    // Python str decoded with errors="replace" would hold them). Added and special tokens that occur in
    // the text are always matched as single ids, like HF. add_special_tokens applies the post-processor
    // template (BOS/EOS); DeepSeek V4's ByteLevel post-processor adds nothing, and its chat prompts carry
    // their own BOS (see chat_encoding.h).
    std::vector<TokenId> encode(std::string_view text, bool add_special_tokens = false) const;

    // Like encode(), but no added token is matched: "<｜User｜>" inside untrusted content becomes ordinary
    // BPE pieces and cannot forge a turn boundary.
    std::vector<TokenId> encode_plain(std::string_view text) const;
    // Like encode(), except that no added token is matched across the `plain` byte ranges (sorted,
    // disjoint): a chat prompt whose message text is encoded as text (chat_encoding.h's content ranges).
    // Text without added-token spellings in those ranges encodes exactly like encode().
    std::vector<TokenId> encode_with_plain_ranges(std::string_view text,
                                                  std::span<const ByteRange> plain) const;

    // Decodes ids to UTF-8 (HF's ByteLevel decoder: token bytes concatenated, ill-formed sequences
    // replaced by U+FFFD; without a decoder, HF's `tokens.join(" ")`: token_separator() between tokens).
    // Unknown ids (and special ones when skipped) are dropped first, as HF does.
    std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

    // The raw bytes one token stands for (may be part of a UTF-8 character); empty for unknown ids.
    // Streaming detokenization builds on this (incremental_detokenizer.h).
    std::string_view token_bytes(TokenId id) const;

    // What decode() puts between two tokens that it keeps: " " for a tokenizer.json without a decoder
    // (HF joins the token strings with a space, e.g. the tiny V4.1 word-level tokenizer), else empty.
    std::string_view token_separator() const;

    // Vocabulary string (byte-level alphabet, "Ġworld") or added-token content -> id.
    std::optional<TokenId> token_to_id(std::string_view token) const;
    // id -> vocabulary string or added-token content.
    std::optional<std::string> id_to_token(TokenId id) const;
    bool is_special(TokenId id) const;
    // One past the largest id.
    std::size_t vocab_size() const;
    const std::vector<AddedToken>& added_tokens() const;

    struct Impl; // opaque (tokenizer_impl.h)

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    void encode_into(std::string_view text, bool match_added, std::vector<TokenId>& out,
                     std::span<const ByteRange> plain = {}) const;
    void encode_segment(std::string_view text, std::vector<TokenId>& out) const;
    std::unique_ptr<Impl> impl_;
};

} // namespace deepinfer::tokenizer
