#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace deepinfer::server {

std::string ApiError::to_json() const {
    nlohmann::json e = {{"message", message}, {"type", type}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError invalid_param(std::string param, std::string message) {
    return ApiError{400, "invalid_request_error", std::move(message), std::move(param), "invalid_value"};
}

ApiError unknown_model(const std::string& model) {
    return ApiError{404, "invalid_request_error", "The model '" + model + "' does not exist", "model",
                    "model_not_found"};
}

ApiError unauthorized() {
    return ApiError{401, "invalid_request_error", "Incorrect or missing API key", "", "invalid_api_key"};
}

ApiError context_too_long(std::string param, int prompt_tokens, int context_length) {
    return ApiError{400, "invalid_request_error",
                    "This model's maximum context length is " + std::to_string(context_length) +
                        " tokens; the prompt ('" + param + "') has " + std::to_string(prompt_tokens) +
                        " tokens",
                    param, "context_length_exceeded"};
}

ApiError server_busy() {
    return ApiError{429, "rate_limit_error", "The server is at its request limit; retry later", "",
                    "rate_limit_exceeded"};
}

ApiError shutting_down() {
    return ApiError{503, "server_error", "The server is shutting down; retry on another instance", "",
                    "shutting_down"};
}

ApiError not_found_route(const std::string& path) {
    return ApiError{404, "invalid_request_error", "No route " + path, "", "not_found"};
}

ApiError from_status(const core::Status& status, std::string param) {
    using core::StatusCode;
    ApiError e;
    e.message = status.message();
    e.param = std::move(param);
    // (HTTP status, error type, code) per status code.
    auto set = [&e](int http_status, const char* type, const char* code) {
        e.http_status = http_status;
        e.type = type;
        e.code = code;
    };
    switch (status.code()) {
    case StatusCode::kOk: // callers never map an ok status; treat it as a bug report rather than success
    case StatusCode::kInternal:
    case StatusCode::kDataLoss:
    case StatusCode::kIoError:
    case StatusCode::kFailedPrecondition:
        set(500, "server_error", "internal_error");
        break;
    case StatusCode::kInvalidArgument:
        set(400, "invalid_request_error", "invalid_value");
        break;
    case StatusCode::kUnimplemented:
        set(400, "invalid_request_error", "unsupported_value");
        break;
    case StatusCode::kNotFound:
        set(404, "invalid_request_error", "not_found");
        break;
    case StatusCode::kOutOfRange: // a context overflow is a bad request (400), as OpenAI and vLLM answer
        set(400, "invalid_request_error", "context_length_exceeded");
        break;
    case StatusCode::kResourceExhausted:
        set(429, "rate_limit_error", "rate_limit_exceeded");
        break;
    case StatusCode::kUnavailable:
        set(503, "server_error", "unavailable");
        break;
    case StatusCode::kCancelled:
        set(499, "server_error", "cancelled");
        break;
    }
    return e;
}

} // namespace deepinfer::server
