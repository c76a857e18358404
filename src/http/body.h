#pragma once
// A request body read within limits: its size (also for chunked bodies, which httplib does not limit) and
// the time it may take to arrive.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <httplib.h>

namespace deepinfer::http {

struct BodyLimits {
    size_t max_bytes = 32u << 20; // -> 413
    int timeout_ms = 30000;       // from the call -> 408
};

// What a bad body gets: the HTTP status, a message and a machine-readable code.
struct BodyError {
    int status = 400;
    std::string message;
    std::string code; // body_too_large, request_timeout, bad_body
};

// Reads the whole body into `body`, stopping as soon as it passes max_bytes (a Content-Length over it is
// refused unread) or the deadline. After an error the rest of the body is unread: close the connection.
std::optional<BodyError> read_body(const BodyLimits& limits, const httplib::Request& req,
                                   const httplib::ContentReader& reader, std::string& body);

// A lower bound on the decoded length of the longest JSON string in `body` (each escape counted as one
// byte). One pass, no allocation: a body is measured before it is parsed (a string longer than anything the
// server could use is refused unparsed). Not a validator: a malformed body is the parser's to refuse.
size_t longest_json_string(std::string_view body);

} // namespace deepinfer::http
