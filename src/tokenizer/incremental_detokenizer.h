#pragma once
// Streaming detokenization: feed ids as they are sampled, get text that never ends inside a UTF-8
// character. An emoji split over three byte tokens comes out whole once its last byte arrives. The
// concatenation of everything push() and finish() return equals Tokenizer::decode() of all the ids.
//
//   IncrementalDetokenizer detok(tok);
//   for (TokenId id : sampled) send(detok.push(id));
//   send(detok.finish());

#include <span>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false)
        : tok_(&tokenizer), skip_special_(skip_special_tokens) {}

    // Returns the text completed by this id (possibly empty).
    std::string push(TokenId id);
    std::string push(std::span<const TokenId> ids);

    // End of stream: bytes of an unfinished character become U+FFFD, as decode() would render them.
    std::string finish();

    // Bytes held back waiting for the rest of a character (0..3).
    std::size_t pending_bytes() const { return repair_.pending_bytes(); }

private:
    const Tokenizer* tok_;
    bool skip_special_;
    utf8::StreamRepair repair_;
    bool first_ = true; // no token_separator() before the first token kept
};

} // namespace deepinfer::tokenizer
