#pragma once
// Regular expressions (the common ECMAScript subset) translated to a GBNF expression:
//   literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H...} \/ and escaped metacharacters), `.`,
//   classes [a-z] [^...] with \d \w \s \D \W \S, groups ( ) (?: ) (?<name> ), alternation, quantifiers
//   * + ? {m} {m,} {m,n} (lazy forms accepted; they match the same strings), and ^ / $ at the ends.
// Unsupported (an error naming it): backreferences, lookaround, \b / \B, anchors inside the pattern.
//
// Full-match semantics (Python's re.fullmatch; ^ and $ at the ends are optional). With `search`, a
// side without its anchor may be preceded / followed by any text (JSON Schema `pattern` semantics).
// With `json_string`, the expression matches the pattern's strings as they appear inside a JSON string
// literal: `"`, `\` and control characters only in their escaped forms.

#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::structured {

struct RegexOptions {
    bool search = false;
    bool json_string = false;
    bool no_angle = false; // '<' never matched (a raw DSML parameter value); a literal '<' is an error
};

core::Result<std::string> regex_to_gbnf_expr(std::string_view pattern, RegexOptions options = {});
// A whole grammar: `root ::= <expr>`.
core::Result<std::string> regex_to_gbnf(std::string_view pattern, RegexOptions options = {});

// Helpers shared with the JSON Schema compiler.
std::string gbnf_literal(std::string_view bytes); // "..." with escapes
std::string json_escape_codepoint(uint32_t cp);   // the JSON string body spelling of one code point

} // namespace deepinfer::structured
