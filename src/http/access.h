#pragma once
// Who may call: bearer-token matching and Host-header checks (against DNS rebinding).

#include <string>
#include <vector>

namespace deepinfer::http {

// The loopback names (localhost, 127.0.0.1, ::1) when `host` is a loopback address and there is no API key
// (a browser page could otherwise reach the server by DNS rebinding); empty (any Host) otherwise.
std::vector<std::string> default_allowed_hosts(const std::string& host, const std::string& api_key);

// "Bearer KEY" with the scheme in any case (RFC 7235) and KEY equal to `api_key`, compared in constant time.
bool authorization_matches(const std::string& header, const std::string& api_key);

// The host name of a Host header value: "example.com:8000" -> "example.com", "[::1]:80" -> "::1",
// lower-cased.
std::string host_name_of(const std::string& host_header);

// Whether the Host header value names one of `allowed` (port ignored); any does when `allowed` is empty.
bool host_allowed(const std::vector<std::string>& allowed, const std::string& host_header);

// Whether a request carries `api_key`: "Authorization: Bearer KEY" (OpenAI) or "x-api-key: KEY"
// (Anthropic; `x_api_key` null when the header is absent).
bool key_presented(const std::string& authorization, const std::string* x_api_key,
                   const std::string& api_key);

} // namespace deepinfer::http
