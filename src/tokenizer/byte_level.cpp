#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer::byte_level {

namespace {

struct Tables {
    std::array<char32_t, 256> to_char{};
    // Alphabet code points are all < 0x144.
    std::array<int, 0x200> to_byte{};

    Tables() {
        to_byte.fill(-1);
        auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        int next = 0;
        for (int b = 0; b < 256; ++b) {
            const char32_t cp = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
            to_char[b] = cp;
            to_byte[cp] = b;
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

} // namespace

char32_t byte_to_char(unsigned char b) {
    return tables().to_char[b];
}

std::optional<unsigned char> char_to_byte(char32_t cp) {
    if (cp >= tables().to_byte.size()) return std::nullopt;
    const int b = tables().to_byte[cp];
    if (b < 0) return std::nullopt;
    return static_cast<unsigned char>(b);
}

std::optional<std::string> decode_token(std::string_view token) {
    std::string out;
    out.reserve(token.size());
    std::size_t i = 0;
    while (i < token.size()) {
        const std::size_t n = utf8::valid_sequence_length(token, i);
        if (n == 0) return std::nullopt;
        std::size_t len = 0;
        const char32_t cp = utf8::decode_at(token, i, &len);
        const auto b = char_to_byte(cp);
        if (!b) return std::nullopt;
        out.push_back(static_cast<char>(*b));
        i += n;
    }
    return out;
}

std::string encode_bytes(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) utf8::append_codepoint(out, byte_to_char(b));
    return out;
}

} // namespace deepinfer::tokenizer::byte_level
