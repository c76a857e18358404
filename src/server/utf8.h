#pragma once
// UTF-8 helpers for streamed text.

#include <string>
#include <string_view>

namespace deepinfer::server {

// Replaces every ill-formed byte with U+FFFD, so stop strings match what clients see.
std::string valid_utf8(std::string_view s);

// Splits off an incomplete (but so far valid) UTF-8 sequence at the end of `s`: returns how many trailing
// bytes to hold back until more bytes arrive (0..3).
size_t incomplete_utf8_tail(std::string_view s);

} // namespace deepinfer::server
