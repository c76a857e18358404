#pragma once
// Validates a JSON value against a JSON Schema: for what was NOT generated under a grammar, such as a
// tool call the model wrote with tool_choice "auto" (docs/structured-outputs.md). Independent of the
// compiler on purpose (a validator, not a generator). Checked: boolean schemas, type (and lists), enum,
// const, properties / required / additionalProperties / patternProperties, minProperties /
// maxProperties, items (schema or draft-4 list) / prefixItems / minItems / maxItems / uniqueItems,
// minLength / maxLength (code points) / pattern (ECMAScript, search semantics, on strings up to 1000 bytes),
// minimum / maximum / exclusive bounds (draft-4 booleans too) / multipleOf, anyOf / oneOf / allOf / not, $ref
// to "#..." (JSON pointers into the root), OpenAPI nullable. Not checked (accepted): format (an annotation by
// default in JSON Schema 2020-12), remote $refs, if/then/else, dependent*, contains, propertyNames.

#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::structured {

// Ok when `instance_json` is valid; InvalidArgument naming the first violation and its JSON path
// (`$.location: 3 is not of type string`) otherwise, or naming what does not parse.
core::Status validate_json_schema(std::string_view schema_json, std::string_view instance_json);

} // namespace deepinfer::structured
