#pragma once
// JSON Schema -> GBNF, so a response is guaranteed to parse and validate. Supported (what OpenAI's
// structured outputs and vLLM's guided_json accept): type (and lists of types), properties / required,
// additionalProperties (false, true or a schema; extra keys are generated only when an object declares no
// properties), enum, const, anyOf / oneOf (as anyOf: keep oneOf branches disjoint), allOf of objects
// (merged), $ref into $defs / definitions (recursion allowed), items / prefixItems with
// minItems / maxItems, minProperties / maxProperties of property-less objects, strings with
// minLength / maxLength or `pattern` (search semantics, as JSON Schema specifies) or a format (date, time,
// date-time, uuid, email, ipv4, uri, hostname), integer / number with minimum / maximum / exclusive
// bounds, boolean, null, nullable (OpenAPI). A schema that asks for something the compiler cannot
// guarantee (uniqueItems, multipleOf, pattern together with min/maxLength, not, if/then/else,
// dependentSchemas, patternProperties, a `false` schema) is refused with an error naming the keyword and
// where it is.
//
// Output shape: keys in the schema's property order; between JSON tokens at most
// `max_whitespace` characters of [ \t\n] (default 16: enough for pretty-printing a few levels deep,
// bounded so random or degenerate sampling cannot run away in whitespace); numbers at most 16 digits
// before the point, 16 after, 2 in the exponent; free-form JSON values (a schema of `{}`, json_object
// mode) nest at most kMaxFreeDepth levels.

#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::structured {

struct JsonSchemaOptions {
    int32_t max_whitespace = 16;
};
constexpr int kMaxFreeDepth = 6;

core::Result<std::string> json_schema_to_gbnf(std::string_view schema_json, JsonSchemaOptions options = {});
// response_format json_object: any JSON object.
std::string json_object_gbnf(JsonSchemaOptions options = {});

} // namespace deepinfer::structured
