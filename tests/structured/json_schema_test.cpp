// JSON Schema -> GBNF on hand-picked instances: what must match, what must not, what is refused.

#include "structured/json_schema.h"

#include <gtest/gtest.h>

#include "structured/number_ranges.h"
#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

std::shared_ptr<CompiledGrammar> compile_schema(const std::string& schema, JsonSchemaOptions o = {}) {
    auto g = json_schema_to_gbnf(schema, o);
    if (!g.ok()) {
        testing_util::last_error() = g.status().message();
        return nullptr;
    }
    auto c = testing_util::compile(*g);
    if (!c) testing_util::last_error() += "\n" + *g;
    return c;
}

TEST(JsonSchema, ObjectsPropertiesAndRequired) {
    auto g =
        compile_schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer",
        "minimum":0},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["name"],
        "additionalProperties":false})");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok :
         {R"({"name":"x"})", R"({"name":"x","age":3})", R"({ "name": "é\n", "tags": ["a", "b"] })",
          R"({"name":"","age":0,"tags":[]})", "{\n  \"name\": \"q\"\n}"})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad :
         {R"({})", R"({"age":3})", R"({"name":"x","age":-1})", R"({"name":"x","tags":["a","b","a"]})",
          R"({"name":"x","extra":1})", R"({"age":3,"name":"x"})", R"({"name":"x",})", R"({"name":"a"b"})",
          R"({"name":"x","age":01})", R"({"name":"x"} )"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(JsonSchema, RefsAnyOfFormatsAndPatterns) {
    auto g = compile_schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
        "anyOf":[{"$ref":"#/$defs/node"},{"type":"null"},{"type":"string","format":"date"},
                 {"type":"string","pattern":"^[A-Z]{3}$"}]})");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok :
         {R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]})", "null", R"("2024-02-28")", R"("ABC")"})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {R"("2024-02-30")", R"("2024-13-01")", R"("ABCD")", R"({"kids":[]})", "true"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(JsonSchema, StringLengthsCountCodePoints) {
    auto g = compile_schema(R"({"type":"string","minLength":2,"maxLength":3})");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok : {R"("ab")", R"("日本語")", R"("a\nb")", R"("\u00e9x")"})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {R"("a")", R"("abcd")", R"("\ud800x")"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(JsonSchema, WhitespaceIsBounded) {
    auto g = compile_schema(R"({"type":"array","items":{"type":"boolean"}})", {.max_whitespace = 2});
    ASSERT_TRUE(g) << testing_util::last_error();
    EXPECT_TRUE(testing_util::matches(g, "[ true,\n false]"));
    EXPECT_FALSE(testing_util::matches(g, "[   true]"));
    g = compile_schema(R"({"type":"array","items":{"type":"boolean"}})", {.max_whitespace = 0});
    EXPECT_TRUE(testing_util::matches(g, "[true,false]"));
    EXPECT_FALSE(testing_util::matches(g, "[true, false]"));
}

TEST(JsonSchema, NumberRanges) {
    // Every integer in a window against the bounds: exact.
    for (auto [lo, hi] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {-15, 7}, {3, 250}, {-1009, -98}, {17, 17}}) {
        auto g = testing_util::compile("root ::= " + integer_range_expr(lo, hi) + "\n");
        ASSERT_TRUE(g) << testing_util::last_error();
        for (int64_t v = lo - 30; v <= hi + 30; ++v)
            EXPECT_EQ(testing_util::matches(g, std::to_string(v)), v >= lo && v <= hi)
                << v << " in " << lo << ".." << hi;
        EXPECT_FALSE(testing_util::matches(g, "-0"));
        EXPECT_FALSE(testing_util::matches(g, "0" + std::to_string(std::max<int64_t>(lo, 1))));
    }
    auto g = compile_schema(R"({"type":"number","minimum":-2,"exclusiveMaximum":1.5})");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok : {"-2", "-1.5", "-0.25", "0", "0.75", "1"})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {"-2.5", "1.5", "2", "-3", "1.0"})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
    g = compile_schema(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})");
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const char* ok : {"0.5", "0.000001", "0.999999"}) EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const char* bad : {"0", "1", "-0.5", "1.5"}) EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(JsonSchema, JsonObjectModeAndErrors) {
    auto g = testing_util::compile(json_object_gbnf());
    ASSERT_TRUE(g) << testing_util::last_error();
    EXPECT_TRUE(testing_util::matches(g, R"({"a":[1,{"b":null}],"c":"d"})"));
    EXPECT_FALSE(testing_util::matches(g, "[1]"));
    EXPECT_FALSE(testing_util::matches(g, R"({"a":})"));
    auto err = [](const std::string& s) {
        auto r = json_schema_to_gbnf(s);
        return r.ok() ? std::string("(ok)") : r.status().message();
    };
    EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
    EXPECT_NE(err(R"({"type":"array","uniqueItems":true})").find("'uniqueItems' is not supported"),
              std::string::npos);
    EXPECT_NE(err(R"({"properties":{"a":{"$ref":"#/$defs/missing"}}})").find("at '#/properties/a'"),
              std::string::npos);
    EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":2})").find("no integer"), std::string::npos);
    EXPECT_NE(err(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
    EXPECT_NE(err(R"({"type":"object","required":["b"],"additionalProperties":false})").find("no instance"),
              std::string::npos);
}

} // namespace
} // namespace deepinfer::structured
