#pragma once
// OpenAI-style error objects. Every error the server returns goes through here: a Status from anywhere in
// deepinfer becomes an HTTP code plus {"error": {"message", "type", "param", "code"}} in one place.

#include <string>

#include "core/status.h"

namespace deepinfer::server {

struct ApiError {
    int http_status = 400;
    std::string type = "invalid_request_error";
    std::string message;
    std::string param; // the offending request field; empty when none
    std::string code;  // machine-readable code; empty when none

    std::string to_json() const;
};

ApiError invalid_param(std::string param, std::string message);
ApiError unknown_model(const std::string& model);
ApiError unauthorized();
ApiError context_too_long(std::string param, int prompt_tokens, int context_length);
ApiError server_busy();
ApiError shutting_down(); // 503 while the server drains
ApiError not_found_route(const std::string& path);

// Maps a Status to its HTTP code and error type: the single table of status -> HTTP.
ApiError from_status(const core::Status& status, std::string param = "");

} // namespace deepinfer::server
