#pragma once
// Shared between request_parser.cpp (common fields, completions) and chat_request_parser.cpp.

#include <optional>

#include "server/json_fields.h"
#include "server/request_parser.h"

namespace deepinfer::server::detail {

std::optional<json> parse_body(std::string_view body, const ParserLimits& limits, FieldErrors& err);
bool parse_common(const json& j, const ParserLimits& limits, CommonRequest& r, FieldErrors& err);

} // namespace deepinfer::server::detail
