#pragma once
// Paths and shared loading for the tokenizer tests.

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {

inline std::string source_path(const std::string& rel) {
    return std::string(DEEPINFER_SOURCE_DIR) + "/" + rel;
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The DeepSeek V4 tokenizer shipped in data/, loaded once per test binary.
inline const Tokenizer& v4_tokenizer() {
    static const Tokenizer* tok = [] {
        auto r = Tokenizer::from_file(source_path("data/tokenizer/deepseek-v4/tokenizer.json"));
        if (!r.ok()) {
            ADD_FAILURE() << r.status().to_string();
            std::abort();
        }
        return new Tokenizer(std::move(r).value());
    }();
    return *tok;
}

} // namespace deepinfer::tokenizer::testing
