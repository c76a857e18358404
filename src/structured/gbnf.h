#pragma once
// GBNF, llama.cpp's grammar syntax, parsed into the grammar IR:
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z_]+ ws ":" ws value     # comments run to the end of the line
//
// Literals "..." with escapes (\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), classes [a-z0-9_] and
// [^...] over code points, `.` (any code point), rule references, ( groups ), alternation `|`, and the
// postfix operators * + ? {m} {m,} {m,n}. A rule ends at a line break unless an alternative or group is
// still open. The start rule is `root` unless named. Errors name the line and column.

#include <string>
#include <string_view>

#include "core/status.h"
#include "structured/grammar.h"

namespace deepinfer::structured {

core::Result<GrammarAst> parse_gbnf(std::string_view text, std::string_view root = "root");

} // namespace deepinfer::structured
