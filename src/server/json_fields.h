#pragma once
// Typed field readers over nlohmann::json used by the request parsers. Each reader leaves the output
// untouched when the field is absent or null, and records the first error (naming the field) otherwise.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace deepinfer::server::detail {

// Requests keep their key order: tool schemas reach the prompt exactly as the client wrote them.
using json = nlohmann::ordered_json;

class FieldErrors {
public:
    bool fail(std::string param, std::string message) {
        if (!error_) error_ = invalid_param(std::move(param), std::move(message));
        return false;
    }
    bool fail(ApiError e) {
        if (!error_) error_ = std::move(e);
        return false;
    }
    bool ok() const { return !error_.has_value(); }
    const ApiError& error() const { return *error_; }

private:
    std::optional<ApiError> error_;
};

inline bool present(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && !it->is_null();
}

bool read_number(const json& obj, const char* key, double lo, double hi, double& out, FieldErrors& err,
                 const std::string& path = "");
bool read_int(const json& obj, const char* key, long long lo, long long hi, long long& out, FieldErrors& err,
              const std::string& path = "");
bool read_bool(const json& obj, const char* key, bool& out, FieldErrors& err, const std::string& path = "");
bool read_string(const json& obj, const char* key, std::string& out, FieldErrors& err,
                 const std::string& path = "");

std::string dump_json(const json& j);

} // namespace deepinfer::server::detail
