#pragma once
// Shared by the tokenizer subcommands (cmd_tokenize.cpp, cmd_render_chat.cpp): where the tokenizer comes
// from and how input text is read.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

// --tokenizer PATH, else $DEEPINFER_TOKENIZER, else the DeepSeek V4 tokenizer shipped in data/.
inline std::string tokenizer_path(const Args& args) {
    if (auto p = args.get("tokenizer")) return *p;
    if (const char* env = std::getenv("DEEPINFER_TOKENIZER")) return env;
    return std::string(DEEPINFER_SOURCE_DIR) + "/data/tokenizer/deepseek-v4/tokenizer.json";
}

inline std::optional<tokenizer::Tokenizer> load_tokenizer(const Args& args) {
    auto r = tokenizer::Tokenizer::from_file(tokenizer_path(args));
    if (!r.ok()) {
        std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
        return std::nullopt;
    }
    return std::move(r).value();
}

// The whole file at path ("-": stdin); an error naming the file when it cannot be read.
inline std::optional<std::string> read_path(const std::string& path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "error: cannot open %s\n", path.c_str());
        return std::nullopt;
    }
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// --file F (or "-" for stdin), else the positional arguments joined by spaces, else stdin.
inline std::optional<std::string> read_input(const Args& args) {
    auto slurp = [](std::istream& in) { return std::string(std::istreambuf_iterator<char>(in), {}); };
    if (auto f = args.get("file")) {
        if (*f == "-") return slurp(std::cin);
        std::ifstream in(*f, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "error: cannot open %s\n", f->c_str());
            return std::nullopt;
        }
        return slurp(in);
    }
    if (!args.positional().empty()) {
        std::string s;
        for (std::size_t i = 0; i < args.positional().size(); ++i) s += (i ? " " : "") + args.positional()[i];
        return s;
    }
    return slurp(std::cin);
}

} // namespace deepinfer::cli
