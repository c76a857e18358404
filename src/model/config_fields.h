#pragma once
// Reading a model family's config.json: one JSON object's fields, each under its first present spelling
// (official, inference-side short name, transformers), with errors that name the file and the field (with
// its path prefix, e.g. `text_config.`). Shared by every family's config parser.

#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::model {

class ConfigFields {
public:
    ConfigFields(const nlohmann::json& obj, std::string source, std::string prefix = "")
        : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

    const nlohmann::json* find(std::initializer_list<const char*> names, std::string* used = nullptr) const {
        for (const char* n : names) {
            auto it = obj_.find(n);
            if (it != obj_.end() && !it->is_null()) {
                if (used) *used = n;
                return &*it;
            }
        }
        return nullptr;
    }
    bool has(std::initializer_list<const char*> names) const { return find(names) != nullptr; }
    const std::string& source() const { return source_; }
    const std::string& prefix() const { return prefix_; }

    core::Status error(const std::string& field, const std::string& what) const {
        return core::invalid_argument(source_ + ": field '" + prefix_ + field + "' " + what);
    }

    core::Status get_int(std::initializer_list<const char*> names, int64_t* out, bool required) const {
        std::string used;
        const nlohmann::json* v = find(names, &used);
        if (v == nullptr) return required ? error(*names.begin(), "is missing") : core::Status();
        if (!v->is_number_integer()) return error(used, "must be an integer, got " + v->dump());
        *out = v->get<int64_t>();
        return {};
    }
    core::Status get_double(std::initializer_list<const char*> names, double* out, bool required) const {
        std::string used;
        const nlohmann::json* v = find(names, &used);
        if (v == nullptr) return required ? error(*names.begin(), "is missing") : core::Status();
        if (!v->is_number()) return error(used, "must be a number, got " + v->dump());
        *out = v->get<double>();
        return {};
    }
    core::Status get_bool(std::initializer_list<const char*> names, bool* out) const {
        std::string used;
        const nlohmann::json* v = find(names, &used);
        if (v == nullptr) return {};
        if (!v->is_boolean()) return error(used, "must be a boolean, got " + v->dump());
        *out = v->get<bool>();
        return {};
    }
    // A list of integers; `found` says whether the field was present.
    core::Status get_int_list(std::initializer_list<const char*> names, std::vector<int64_t>* out,
                              bool* found = nullptr) const {
        std::string used;
        const nlohmann::json* v = find(names, &used);
        if (found) *found = v != nullptr;
        if (v == nullptr) return {};
        if (!v->is_array()) return error(used, "must be a list of integers, got " + v->dump());
        out->clear();
        for (size_t i = 0; i < v->size(); ++i) {
            if (!(*v)[i].is_number_integer())
                return error(used + "[" + std::to_string(i) + "]",
                             "must be an integer, got " + (*v)[i].dump());
            out->push_back((*v)[i].get<int64_t>());
        }
        return {};
    }
    // A token id, or a list of them (HF allows several eos ids): the first is kept.
    core::Status get_token_id(const char* name, int64_t* out) const {
        const nlohmann::json* v = find({name});
        if (v == nullptr) return {};
        const nlohmann::json* first = v->is_array() && !v->empty() ? &(*v)[0] : v;
        if (!first->is_number_integer()) return error(name, "must be an integer or a list of integers");
        *out = first->get<int64_t>();
        return {};
    }

private:
    const nlohmann::json& obj_;
    std::string source_;
    std::string prefix_;
};

// config.json's text parsed as JSON; errors name the source.
inline core::Result<nlohmann::json> parse_config_json(const std::string& text,
                                                      const std::string& source_name) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return core::invalid_argument(source_name + ": not valid JSON: " + e.what());
    }
}

// The whole text of a model config file; errors name the path.
inline core::Result<std::string> read_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return core::not_found(path + ": cannot open model config");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace deepinfer::model
