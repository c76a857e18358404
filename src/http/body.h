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

// Gives a large body's memory back to the system when it goes out of scope (however the request ends): glibc
// keeps what a worker thread frees (the body, its parse, its tokens) in the worker's arena, so without this
// every idle worker would hold its last peak.
class TrimAfterLargeBody {
public:
    explicit TrimAfterLargeBody(std::string& body) : body_(body) {}
    ~TrimAfterLargeBody();
    TrimAfterLargeBody(const TrimAfterLargeBody&) = delete;
    TrimAfterLargeBody& operator=(const TrimAfterLargeBody&) = delete;

private:
    std::string& body_;
};

// A lower bound on the decoded length of the longest JSON string in `body` (each escape counted as one
// byte). One pass, no allocation: a body is measured before it is parsed (a string longer than anything the
// server could use is refused unparsed). Not a validator: a malformed body is the parser's to refuse.
size_t longest_json_string(std::string_view body);

// The JSON shapes a body may have (the parser keeps key order, which makes huge objects quadratic).
struct JsonShapeLimits {
    int max_depth = 64;             // JSON nesting accepted at all
    int max_object_members = 1024;  // members of any one object
    int max_total_members = 100000; // members of all objects together
};

// Rejects hostile shapes before the JSON is built: nesting deeper than max_depth, too many members in one
// object or in all. Returns the reason, empty when the body is acceptable. One pass, like the above.
std::string json_shape_problem(std::string_view body, const JsonShapeLimits& limits);

} // namespace deepinfer::http
