#include "server/json_fields.h"

#include <cmath>
#include <cstdio>

namespace deepinfer::server::detail {

namespace {
std::string field(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
}
std::string range(double lo, double hi) {
    auto fmt = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return std::string(buf);
    };
    return "[" + fmt(lo) + ", " + fmt(hi) + "]";
}
} // namespace

bool read_number(const json& obj, const char* key, double lo, double hi, double& out, FieldErrors& err,
                 const std::string& path) {
    if (!present(obj, key)) return true;
    const json& v = obj.at(key);
    std::string name = field(path, key);
    if (!v.is_number()) return err.fail(name, "'" + name + "' must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
        return err.fail(name, "'" + name + "' must be in " + range(lo, hi) + ", got " + v.dump());
    }
    out = d;
    return true;
}

bool read_int(const json& obj, const char* key, long long lo, long long hi, long long& out, FieldErrors& err,
              const std::string& path) {
    if (!present(obj, key)) return true;
    const json& v = obj.at(key);
    std::string name = field(path, key);
    long long x = 0;
    if (v.is_number_integer()) {
        if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi)) {
            return err.fail(name, "'" + name + "' is too large");
        }
        x = v.get<long long>();
    } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
               v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9e15) {
        x = static_cast<long long>(v.get<double>()); // 4.0 is an integer to Python clients
    } else {
        return err.fail(name, "'" + name + "' must be an integer");
    }
    if (x < lo || x > hi) {
        return err.fail(name, "'" + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "], got " + std::to_string(x));
    }
    out = x;
    return true;
}

bool read_bool(const json& obj, const char* key, bool& out, FieldErrors& err, const std::string& path) {
    if (!present(obj, key)) return true;
    const json& v = obj.at(key);
    std::string name = field(path, key);
    if (!v.is_boolean()) return err.fail(name, "'" + name + "' must be a boolean");
    out = v.get<bool>();
    return true;
}

bool read_string(const json& obj, const char* key, std::string& out, FieldErrors& err,
                 const std::string& path) {
    if (!present(obj, key)) return true;
    const json& v = obj.at(key);
    std::string name = field(path, key);
    if (!v.is_string()) return err.fail(name, "'" + name + "' must be a string");
    out = v.get<std::string>();
    return true;
}

std::string dump_json(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace deepinfer::server::detail
