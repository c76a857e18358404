// DSML tool-call grammars: the template's layout with typed parameters matches; wrong tools, missing
// required parameters, a closing marker inside a raw value, or too many calls do not.

#include "structured/dsml_tools.h"

#include <gtest/gtest.h>

#include "toy_vocab.h"

namespace deepinfer::structured {
namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"location": {"type": "string"}, "unit": {"enum": ["c", "f"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["location"]}}},
  {"name": "ping", "parameters": {"type": "object", "properties": {}}}
])";

std::string call(const std::string& name, const std::string& params) {
    return "<｜DSML｜invoke name=\"" + name + "\">\n" + params + "\n</｜DSML｜invoke>";
}
std::string block(const std::string& calls) {
    return "\n\n<｜DSML｜tool_calls>\n" + calls + "\n</｜DSML｜tool_calls>";
}
const std::string kLoc = "<｜DSML｜parameter name=\"location\" string=\"true\">Paris, FR</｜DSML｜parameter>";
const std::string kDays = "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>";

TEST(DsmlTools, CallsFollowTheToolSchemas) {
    auto gbnf = dsml_tool_calls_gbnf(kTools);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
    auto g = testing_util::compile(*gbnf);
    ASSERT_TRUE(g) << testing_util::last_error();
    for (const std::string& ok :
         {block(call("get_weather", kLoc)), block(call("get_weather", kLoc + "\n" + kDays)),
          block(call("ping", "")), block(call("ping", "") + "\n" + call("get_weather", kLoc)),
          block(call("get_weather",
                     kLoc + "\n<｜DSML｜parameter name=\"unit\" string=\"true\">f</｜DSML｜parameter>"))})
        EXPECT_TRUE(testing_util::matches(g, ok)) << ok;
    for (const std::string& bad :
         {block(call("get_time", "")), block(call("get_weather", "")),
          block(call("get_weather", kDays + "\n" + kLoc)),
          block(call("get_weather", "<｜DSML｜parameter name=\"location\" "
                                    "string=\"true\">a</｜DSML｜parameter>b</｜DSML｜parameter>")),
          block(call("get_weather",
                     kLoc + "\n<｜DSML｜parameter name=\"days\" string=\"false\">9</｜DSML｜parameter>")),
          block(call("get_weather",
                     kLoc + "\n<｜DSML｜parameter name=\"unit\" string=\"true\">k</｜DSML｜parameter>")),
          "Sure." + block(call("ping", ""))})
        EXPECT_FALSE(testing_util::matches(g, bad)) << bad;
}

TEST(DsmlTools, NamedToolAndSingleCall) {
    auto gbnf = dsml_tool_calls_gbnf(kTools, {.only = {"ping"}, .max_calls = 1, .json = {}});
    ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
    auto g = testing_util::compile(*gbnf);
    ASSERT_TRUE(g) << testing_util::last_error();
    EXPECT_TRUE(testing_util::matches(g, block(call("ping", ""))));
    EXPECT_FALSE(testing_util::matches(g, block(call("get_weather", kLoc))));
    EXPECT_FALSE(testing_util::matches(g, block(call("ping", "") + "\n" + call("ping", ""))));
    auto none = dsml_tool_calls_gbnf(kTools, {.only = {"nope"}, .max_calls = 0, .json = {}});
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.status().message().find("none of the allowed tools"), std::string::npos);
    auto bad =
        dsml_tool_calls_gbnf(R"([{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type":
        "array", "uniqueItems": true}}}}])");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("tool 'f'"), std::string::npos) << bad.status().message();
}

} // namespace
} // namespace deepinfer::structured
