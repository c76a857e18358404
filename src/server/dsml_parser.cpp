#include "server/dsml_parser.h"

#include <nlohmann/json.hpp>

namespace deepinfer::server {

namespace {

const std::string kFull = "\xef\xbd\x9c"; // ｜ (U+FF5C)

// Finds `tag` written with either bar spelling ("<｜DSML｜x" or "<|DSML|x"); npos if absent.
size_t find_tag(const std::string& s, const std::string& tag, size_t from, size_t* len) {
    std::string full = tag, ascii = tag;
    for (std::string* t : {&full}) {
        size_t p;
        while ((p = t->find('|')) != std::string::npos) t->replace(p, 1, kFull);
    }
    size_t a = s.find(full, from), b = s.find(ascii, from);
    if (a == std::string::npos && b == std::string::npos) return std::string::npos;
    if (b == std::string::npos || (a != std::string::npos && a < b)) {
        *len = full.size();
        return a;
    }
    *len = ascii.size();
    return b;
}

// Length of the longest suffix of s that is a proper prefix of one of the markers.
size_t partial_suffix(const std::string& s, std::initializer_list<std::string> markers) {
    size_t best = 0;
    for (std::string m : markers) {
        for (std::string variant : {m, std::string()}) {
            if (variant.empty()) {
                variant = m;
                size_t p;
                while ((p = variant.find('|')) != std::string::npos) variant.replace(p, 1, kFull);
            }
            for (size_t len = std::min(variant.size() - 1, s.size()); len > best; --len) {
                if (s.compare(s.size() - len, len, variant, 0, len) == 0) {
                    best = len;
                    break;
                }
            }
        }
    }
    return best;
}

std::string attr(const std::string& tag, const std::string& name) {
    size_t p = tag.find(name + "=\"");
    if (p == std::string::npos) return {};
    p += name.size() + 2;
    size_t e = tag.find('"', p);
    return e == std::string::npos ? tag.substr(p) : tag.substr(p, e - p);
}

} // namespace

DsmlOutputParser::DsmlOutputParser(ParserOptions options)
    : options_(options), mode_(options.thinking ? Mode::kReasoning : Mode::kContent) {}

ParsedDelta DsmlOutputParser::push(std::string_view text) {
    ParsedDelta out;
    buf_.append(text);
    run(out, false);
    return out;
}

ParsedDelta DsmlOutputParser::finish(bool) {
    ParsedDelta out;
    run(out, true);
    if (in_invoke_) { // unterminated call: close its arguments so they stay valid JSON
        out.tool_calls.push_back({call_index_, "", "", params_in_call_ ? "}" : "{}"});
        in_invoke_ = false;
    }
    return out;
}

void DsmlOutputParser::run(ParsedDelta& out, bool final) {
    for (;;) {
        if (mode_ == Mode::kReasoning) {
            size_t p = buf_.find("</think>");
            if (p != std::string::npos) {
                out.reasoning += buf_.substr(0, p);
                buf_.erase(0, p + 8);
                mode_ = Mode::kContent;
                continue;
            }
            size_t hold = final ? 0 : partial_suffix(buf_, {"</think>"});
            out.reasoning += buf_.substr(0, buf_.size() - hold);
            buf_.erase(0, buf_.size() - hold);
            return;
        }
        if (mode_ == Mode::kContent) {
            if (!options_.parse_tools) {
                out.content += buf_;
                buf_.clear();
                return;
            }
            size_t len1 = 0, len2 = 0;
            size_t a = find_tag(buf_, "<|DSML|tool_calls>", 0, &len1);
            size_t b = find_tag(buf_, "<|DSML|invoke", 0, &len2);
            if (a != std::string::npos || b != std::string::npos) {
                bool wrapper = a != std::string::npos && (b == std::string::npos || a < b);
                size_t p = wrapper ? a : b;
                out.content += buf_.substr(0, p);
                buf_.erase(0, wrapper ? p + len1 : p);
                mode_ = Mode::kTools;
                continue;
            }
            size_t hold = final ? 0 : partial_suffix(buf_, {"<|DSML|tool_calls>", "<|DSML|invoke"});
            out.content += buf_.substr(0, buf_.size() - hold);
            buf_.erase(0, buf_.size() - hold);
            return;
        }
        if (!step_tools(out, final)) return;
    }
}

// One element of the tool-call section; false when more text is needed.
bool DsmlOutputParser::step_tools(ParsedDelta& out, bool final) {
    size_t len = 0;
    size_t start = buf_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos) {
        buf_.clear();
        return false;
    }
    buf_.erase(0, start);
    if (find_tag(buf_, "<|DSML|invoke", 0, &len) == 0) {
        size_t end = buf_.find('>');
        if (end == std::string::npos) return false;
        std::string name = attr(buf_.substr(0, end), "name");
        buf_.erase(0, end + 1);
        ++call_index_;
        in_invoke_ = true;
        params_in_call_ = 0;
        out.tool_calls.push_back({call_index_, "", name, ""});
        return true;
    }
    if (find_tag(buf_, "<|DSML|parameter", 0, &len) == 0) {
        size_t end = buf_.find('>');
        size_t close_len = 0;
        size_t close = find_tag(buf_, "</|DSML|parameter>", 0, &close_len);
        if (end == std::string::npos || close == std::string::npos) return false;
        std::string tag = buf_.substr(0, end);
        std::string value = buf_.substr(end + 1, close - end - 1);
        buf_.erase(0, close + close_len);
        std::string name = attr(tag, "name");
        bool is_string = attr(tag, "string") != "false";
        std::string json_value = value;
        if (is_string || nlohmann::json::parse(value, nullptr, false).is_discarded()) {
            json_value = nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        }
        std::string key = nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        out.tool_calls.push_back(
            {call_index_, "", "", (params_in_call_++ ? ", " : "{") + key + ": " + json_value});
        return true;
    }
    if (find_tag(buf_, "</|DSML|invoke>", 0, &len) == 0) {
        buf_.erase(0, len);
        if (in_invoke_) out.tool_calls.push_back({call_index_, "", "", params_in_call_ ? "}" : "{}"});
        in_invoke_ = false;
        return true;
    }
    if (find_tag(buf_, "</|DSML|tool_calls>", 0, &len) == 0) {
        buf_.erase(0, len);
        mode_ = Mode::kContent;
        return true;
    }
    if (buf_[0] == '<' && !final) {
        // A tag still arriving: wait unless it can no longer be one of ours.
        if (partial_suffix(buf_, {"<|DSML|invoke", "<|DSML|parameter", "</|DSML|invoke>",
                                  "</|DSML|tool_calls>"}) == buf_.size() ||
            buf_.size() < 24) {
            return false;
        }
    }
    // Stray text inside the tool section is dropped up to the next tag (never leaked as markup).
    size_t next = buf_.find('<', 1);
    if (next == std::string::npos) {
        if (final) buf_.clear();
        return false;
    }
    buf_.erase(0, next);
    return true;
}

} // namespace deepinfer::server
