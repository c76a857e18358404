#pragma once
// UTF-8 helpers shared by the tokenizer, the incremental detokenizer and the output parser.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::utf8 {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not a complete,
// valid sequence (stray continuation, overlong, surrogate, > U+10FFFF, or truncated).
std::size_t valid_sequence_length(std::string_view s, std::size_t i);

// Length of the "maximal subpart" of an ill-formed sequence starting at s[i] (Unicode §3.9, the
// practice Python's and Rust's lossy decoders follow): each maximal subpart becomes one U+FFFD.
std::size_t maximal_subpart_length(std::string_view s, std::size_t i);

bool is_valid(std::string_view s);

// s with every ill-formed subsequence replaced by U+FFFD (like Rust's String::from_utf8_lossy and
// Python's bytes.decode("utf-8", "replace")).
std::string sanitize(std::string_view s);

// True when s ends inside a sequence that further bytes could still complete (e.g. "\xE4\xB8").
// Returns the number of such trailing bytes (0..3).
std::size_t incomplete_tail_length(std::string_view s);

// Lossy UTF-8 repair of a byte stream, incrementally: what push() and finish() return, concatenated, equals
// sanitize() of all the bytes pushed, and never ends inside a character (an unfinished one is held back until
// its rest arrives, or becomes U+FFFD at finish()). The one repair behind every detokenizer, so streamed text
// equals a full decode.
class StreamRepair {
public:
    std::string push(std::string_view bytes);
    std::string finish();
    std::size_t pending_bytes() const { return pending_.size(); }

private:
    std::string drain(bool final);
    std::string pending_;
};

// Appends the UTF-8 encoding of code point cp (cp must be a scalar value).
void append_codepoint(std::string& out, char32_t cp);

// Decodes the valid sequence at s[i] (caller checked validity); sets len.
char32_t decode_at(std::string_view s, std::size_t i, std::size_t* len);

} // namespace deepinfer::tokenizer::utf8
