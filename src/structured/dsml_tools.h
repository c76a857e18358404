#pragma once
// A grammar for DeepSeek V4 tool calls (the DSML markup the chat template renders and DsmlStreamParser
// reads), whose arguments follow each tool's JSON Schema: what `tool_choice: "required"` or a named tool
// enforces.
//
//   \n\n<｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="location" string="true">Paris</｜DSML｜parameter>
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls>
//
// Parameters come in the schema's property order; required ones always, optional ones may be left out.
// A parameter whose schema is a string (type string, or an enum / const of strings) is written raw with
// string="true" (the parser JSON-escapes it): plain strings exclude '<' so the value cannot contain the
// closing marker; patterns, formats and length bounds apply to the raw text. Every other parameter is JSON
// (string="false", the parser copies it verbatim) from the JSON Schema compiler. The grammar starts where
// the answer starts (after </think> in thinking mode) and ends after </｜DSML｜tool_calls>; EOS follows.

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "structured/json_schema.h"

namespace deepinfer::structured {

struct DsmlToolsOptions {
    std::vector<std::string> only; // the tools that may be called (named tool_choice); empty = all
    int32_t max_calls = 0;         // 0 = any number (parallel_tool_calls), 1 = exactly one call
    JsonSchemaOptions json;        // for JSON-valued parameters
};

// tools_json: an OpenAI `tools` array ([{"type": "function", "function": {"name", "parameters"}}]) or a
// bare array of {"name", "parameters"}. Errors name the tool and the schema path.
core::Result<std::string> dsml_tool_calls_gbnf(std::string_view tools_json,
                                               const DsmlToolsOptions& options = {});

} // namespace deepinfer::structured
