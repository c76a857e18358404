#pragma once
// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "
// separators, insertion-ordered keys, non-ASCII kept, floats in repr() form). DeepSeek's encoder embeds
// tool schemas and non-string tool arguments this way, so byte-exact prompts depend on it.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer::tokenizer {

using Json = nlohmann::ordered_json;

std::string python_json_dumps(const Json& value);

// Appends s escaped as the body of a JSON string (no quotes), as json.dumps(ensure_ascii=False) does.
void json_escape_append(std::string_view s, std::string& out);

// Python's repr() of a float (shortest round-trip digits; exponent form below 1e-4 and from 1e16).
std::string python_float_repr(double v);

} // namespace deepinfer::tokenizer
