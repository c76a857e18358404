// validate_json_schema: the checker for tool calls the model wrote unconstrained (tool_choice "auto").
// Instances that must pass and must fail, per keyword, and the violation's path in the message.

#include <gtest/gtest.h>

#include "structured/json_schema_validate.h"

namespace deepinfer::structured {
namespace {

struct Case {
    const char* schema;
    const char* instance;
    bool valid;
};

TEST(JsonSchemaValidate, Keywords) {
    const Case cases[] = {
        {R"({})", R"({"any": [1, "x"]})", true},
        {R"(true)", R"(3)", true},
        {R"(false)", R"(3)", false},
        {R"({"type": "string"})", R"("x")", true},
        {R"({"type": "string"})", R"(3)", false},
        {R"({"type": ["string", "null"]})", R"(null)", true},
        {R"({"type": ["string", "null"]})", R"(1)", false},
        {R"({"type": "integer"})", R"(3)", true},
        {R"({"type": "integer"})", R"(3.0)", true},
        {R"({"type": "integer"})", R"(3.5)", false},
        {R"({"type": "number"})", R"(3.5)", true},
        {R"({"type": "boolean"})", R"(0)", false},
        {R"({"enum": ["a", 1]})", R"(1.0)", true},
        {R"({"enum": ["a", 1]})", R"("b")", false},
        {R"({"const": {"k": [1]}})", R"({"k": [1]})", true},
        {R"({"const": {"k": [1]}})", R"({"k": [2]})", false},
        {R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})", R"({"a": "x"})",
         true},
        {R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})", R"({})", false},
        {R"({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false})",
         R"({"a": "x", "b": 1})", false},
        {R"({"type": "object", "additionalProperties": {"type": "integer"}})", R"({"x": 1, "y": 2})", true},
        {R"({"type": "object", "additionalProperties": {"type": "integer"}})", R"({"x": "1"})", false},
        {R"({"type": "object", "patternProperties": {"^n_": {"type": "number"}}, "additionalProperties": false})",
         R"({"n_a": 1})", true},
        {R"({"type": "object", "patternProperties": {"^n_": {"type": "number"}}, "additionalProperties": false})",
         R"({"m": 1})", false},
        {R"({"minProperties": 1})", R"({})", false},
        {R"({"maxProperties": 1})", R"({"a": 1, "b": 2})", false},
        {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2})", R"([1, 2])",
         true},
        {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2})", R"([])", false},
        {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2})", R"([1, 2, 3])",
         false},
        {R"({"type": "array", "items": {"type": "integer"}})", R"([1, "2"])", false},
        {R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})", R"(["a", 1])",
         true},
        {R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})", R"(["a", 1, 2])",
         false},
        {R"({"items": [{"type": "string"}], "additionalItems": false})", R"(["a", "b"])", false},
        {R"({"uniqueItems": true})", R"([1, 1.0])", false},
        {R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("日本")", true},
        {R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("日")", false},
        {R"({"type": "string", "minLength": 2, "maxLength": 3})", R"("abcd")", false},
        {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"})", R"("AB-12")", true},
        {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"})", R"("AB-")", false},
        {R"({"type": "string", "pattern": "x"})", R"("axb")", true}, // search semantics
        {R"({"minimum": 1, "maximum": 5})", R"(5)", true},
        {R"({"minimum": 1, "maximum": 5})", R"(0)", false},
        {R"({"exclusiveMaximum": 5})", R"(5)", false},
        {R"({"maximum": 5, "exclusiveMaximum": true})", R"(5)", false}, // draft 4
        {R"({"exclusiveMinimum": 0})", R"(0.5)", true},
        {R"({"multipleOf": 0.5})", R"(2.5)", true},
        {R"({"multipleOf": 0.5})", R"(2.25)", false},
        {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", R"(2)", true},
        {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", R"(2.5)", false},
        {R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", R"(2)", false},
        {R"({"allOf": [{"required": ["a"]}, {"required": ["b"]}]})", R"({"a": 1})", false},
        {R"({"not": {"type": "null"}})", R"(null)", false},
        {R"({"type": "string", "nullable": true})", R"(null)", true},
        {R"({"$defs": {"p": {"type": "object", "properties": {"next": {"$ref": "#/$defs/p"}, "v": {"type": "integer"}}}},
             "$ref": "#/$defs/p"})",
         R"({"v": 1, "next": {"v": 2, "next": {"v": "3"}}})", false},
        {R"({"$defs": {"p": {"type": "object", "properties": {"next": {"$ref": "#/$defs/p"}, "v": {"type": "integer"}}}},
             "$ref": "#/$defs/p"})",
         R"({"v": 1, "next": {"v": 2, "next": {}}})", true},
        {R"({"format": "email", "type": "string"})", R"("not an email")", true}, // format: an annotation
    };
    for (const Case& c : cases) {
        core::Status st = validate_json_schema(c.schema, c.instance);
        EXPECT_EQ(st.ok(), c.valid) << c.schema << " vs " << c.instance << ": " << st.to_string();
    }
}

TEST(JsonSchemaValidate, MessagesNameThePath) {
    core::Status st = validate_json_schema(
        R"({"type": "object", "properties": {"loc": {"type": "object", "properties": {"days": {"type": "integer"}}}}})",
        R"({"loc": {"days": "3"}})");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("$.loc.days"), std::string::npos) << st.message();
    EXPECT_FALSE(validate_json_schema("{", "1").ok());
    EXPECT_NE(validate_json_schema("{}", "{x").message().find("value"), std::string::npos);
    st = validate_json_schema(R"({"$ref": "#/$defs/missing"})", "1");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("missing"), std::string::npos);
}

} // namespace
} // namespace deepinfer::structured
