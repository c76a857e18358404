#include "tokenizer/json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace deepinfer::tokenizer {

void json_escape_append(std::string_view s, std::string& out) {
    for (unsigned char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                out += buf;
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
    }
}

namespace {

void dump_string(const std::string& s, std::string& out) {
    out.push_back('"');
    json_escape_append(s, out);
    out.push_back('"');
}

void dump(const Json& v, std::string& out) {
    switch (v.type()) {
    case Json::value_t::null:
        out += "null";
        break;
    case Json::value_t::boolean:
        out += v.get<bool>() ? "true" : "false";
        break;
    case Json::value_t::number_integer:
        out += std::to_string(v.get<std::int64_t>());
        break;
    case Json::value_t::number_unsigned:
        out += std::to_string(v.get<std::uint64_t>());
        break;
    case Json::value_t::number_float:
        out += python_float_repr(v.get<double>());
        break;
    case Json::value_t::string:
        dump_string(v.get_ref<const std::string&>(), out);
        break;
    case Json::value_t::array: {
        out.push_back('[');
        bool first = true;
        for (const auto& x : v) {
            if (!first) out += ", ";
            first = false;
            dump(x, out);
        }
        out.push_back(']');
        break;
    }
    case Json::value_t::object: {
        out.push_back('{');
        bool first = true;
        for (const auto& [k, x] : v.items()) {
            if (!first) out += ", ";
            first = false;
            dump_string(k, out);
            out += ": ";
            dump(x, out);
        }
        out.push_back('}');
        break;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
        out += "null";
        break;
    }
}

} // namespace

std::string python_float_repr(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    // sci = [-]d[.ddd]e[+-]XX
    std::string sign;
    if (sci[0] == '-') {
        sign = "-";
        sci.erase(0, 1);
    }
    const std::size_t epos = sci.find('e');
    std::string digits = sci.substr(0, epos);
    const int exp10 = std::stoi(sci.substr(epos + 1));
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int decpt = exp10 + 1; // value = 0.digits * 10^decpt
    const int nd = static_cast<int>(digits.size());
    std::string out = sign;
    if (decpt <= -4 || decpt > 16) {
        out += digits.substr(0, 1);
        if (nd > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof(eb), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
        out += eb;
    } else if (decpt <= 0) {
        out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
    } else if (decpt >= nd) {
        out += digits + std::string(static_cast<std::size_t>(decpt - nd), '0') + ".0";
    } else {
        out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
}

std::string python_json_dumps(const Json& value) {
    std::string out;
    dump(value, out);
    return out;
}

} // namespace deepinfer::tokenizer
