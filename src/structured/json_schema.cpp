#include "structured/json_schema.h"

#include "structured/json_schema_compiler.h"

namespace deepinfer::structured {

using detail::Compiler;
using detail::Json;

core::Result<std::string> json_schema_to_gbnf(std::string_view schema_json, JsonSchemaOptions options) {
    Json schema = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return core::invalid_argument("json schema: not valid JSON");
    try {
        return Compiler(schema, options).run();
    } catch (const std::exception& e) { // nlohmann type errors on malformed schemas
        return core::invalid_argument(std::string("json schema: ") + e.what());
    }
}

std::string json_object_gbnf(JsonSchemaOptions options) {
    Json empty = Json::object();
    return Compiler(empty, options).free_object();
}

} // namespace deepinfer::structured
