#pragma once
// GPT-2's byte-level alphabet: each byte 0..255 is shown as one printable code point so BPE vocabularies
// can be stored as text ("Ġ" is the space byte). Used when loading vocabularies and when decoding.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::byte_level {

// The code point that stands for byte b.
char32_t byte_to_char(unsigned char b);

// The byte that code point cp stands for, if cp is in the alphabet.
std::optional<unsigned char> char_to_byte(char32_t cp);

// Maps a vocabulary string (in the byte-level alphabet) back to raw bytes; nullopt when some code point
// is outside the alphabet (added tokens such as "<｜User｜>").
std::optional<std::string> decode_token(std::string_view token);

// Raw bytes -> alphabet string (for printing tokens).
std::string encode_bytes(std::string_view bytes);

} // namespace deepinfer::tokenizer::byte_level
