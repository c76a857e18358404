// `deepinfer tokenize` and `deepinfer detokenize`: look at exactly what the model sees.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/tokenizer_common.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_text.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kTokenizeHelp =
    "usage: deepinfer tokenize [--tokenizer PATH] [--file F|-] [--plain] [--tokens] [TEXT...]\n"
    "       deepinfer tokenize --jsonl [--tokenizer PATH] [--file F|-] [--plain]\n"
    "Prints the token ids of TEXT (or of the file, or stdin), space-separated.\n"
    "  --jsonl    batch: one input per line, a JSON string or {\"text\": ..., \"plain\": bool}; one output\n"
    "             line each, {\"ids\": [...]} (or {\"error\": ...}); the tokenizer is loaded once\n"
    "  --tokens   one token per line: id, then its bytes (special tokens as themselves)\n"
    "  --plain    do not match special tokens in the text (how untrusted content should be encoded)\n"
    "  --count    print only the number of tokens\n";

// Printable form of a token's bytes: escapes control bytes and invalid UTF-8.
std::string printable(std::string_view bytes) {
    std::string out;
    for (unsigned char c : bytes) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof(b), "\\x%02x", c);
            out += b;
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out;
}

// Runs `line_fn` on every line of the input (--file F, '-' or stdin), printing one JSON line each; a
// failing line prints {"error": ...} and makes the exit code 1, the other lines still run.
template <typename Fn> int run_jsonl(const Args& args, Fn line_fn) {
    std::ifstream file;
    const std::string path = args.get_or("file", "-");
    if (path != "-") {
        file.open(path, std::ios::binary);
        if (!file) {
            std::fprintf(stderr, "error: cannot open %s\n", path.c_str());
            return 1;
        }
    }
    std::istream& in = path == "-" ? std::cin : file;
    int rc = 0;
    std::string line;
    for (long n = 1; std::getline(in, line); ++n) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        tokenizer::Json out;
        try {
            out = line_fn(tokenizer::Json::parse(line));
        } catch (const std::exception& e) {
            out = {{"error", path + " line " + std::to_string(n) + ": " + e.what()}};
            rc = 1;
        }
        const std::string s = out.dump(-1, ' ', false, tokenizer::Json::error_handler_t::replace);
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
    }
    return rc;
}

int run_tokenize(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv, {"tokenizer", "file"}, {"plain", "tokens", "count", "jsonl", "help"});
    if (!args.ok()) {
        std::fprintf(stderr, "error: %s\n%s", args.status().message().c_str(), kTokenizeHelp);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kTokenizeHelp);
        return 0;
    }
    auto tok = load_tokenizer(*args);
    if (!tok) return 1;
    if (args->has("jsonl")) {
        return run_jsonl(*args, [&](const tokenizer::Json& j) {
            const bool plain = j.is_object() ? j.value("plain", args->has("plain")) : args->has("plain");
            const std::string text = j.is_object() ? j.at("text").get<std::string>() : j.get<std::string>();
            return tokenizer::Json{{"ids", plain ? tok->encode_plain(text) : tok->encode(text)}};
        });
    }
    auto text = read_input(*args);
    if (!text) return 1;
    const auto ids = args->has("plain") ? tok->encode_plain(*text) : tok->encode(*text);
    if (args->has("count")) {
        std::printf("%zu\n", ids.size());
    } else if (args->has("tokens")) {
        for (auto id : ids) {
            const std::string_view b = tok->token_bytes(id);
            std::printf("%d\t%s%s\n", id, printable(b).c_str(), tok->is_special(id) ? "\t(special)" : "");
        }
    } else {
        for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
        std::printf("\n");
    }
    return 0;
}

constexpr const char* kDetokenizeHelp =
    "usage: deepinfer detokenize [--tokenizer PATH] [--skip-special] [--file F|-] [ID...]\n"
    "       deepinfer detokenize --jsonl [--tokenizer PATH] [--skip-special] [--file F|-]\n"
    "Prints the text of token ids (arguments, or whitespace/comma-separated on stdin or in a file).\n"
    "  --jsonl    batch: one input per line, a JSON array of ids or {\"ids\": [...]}; one output line\n"
    "             each, {\"text\": ...} (or {\"error\": ...}); the tokenizer is loaded once\n";

int run_detokenize(const std::vector<std::string>& argv) {
    auto args = Args::parse(argv, {"tokenizer", "file"}, {"skip-special", "jsonl", "help"});
    if (!args.ok()) {
        std::fprintf(stderr, "error: %s\n%s", args.status().message().c_str(), kDetokenizeHelp);
        return 2;
    }
    if (args->has("help")) {
        std::printf("%s", kDetokenizeHelp);
        return 0;
    }
    auto tok = load_tokenizer(*args);
    if (!tok) return 1;
    if (args->has("jsonl")) {
        return run_jsonl(*args, [&](const tokenizer::Json& j) {
            const tokenizer::Json& arr = j.is_object() ? j.at("ids") : j;
            const auto ids = arr.get<std::vector<tokenizer::TokenId>>();
            return tokenizer::Json{{"text", tok->decode(ids, args->has("skip-special"))}};
        });
    }
    auto text = read_input(*args);
    if (!text) return 1;
    std::vector<tokenizer::TokenId> ids;
    std::string cur;
    auto flush = [&]() -> bool {
        if (cur.empty()) return true;
        char* end = nullptr;
        const long v = std::strtol(cur.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > 0x7fffffff) {
            std::fprintf(stderr, "error: '%s' is not a token id\n", cur.c_str());
            return false;
        }
        ids.push_back(static_cast<tokenizer::TokenId>(v));
        cur.clear();
        return true;
    };
    for (char c : *text) {
        if (c == ' ' || c == '\n' || c == '\t' || c == ',' || c == '[' || c == ']' || c == '\r') {
            if (!flush()) return 1;
        } else {
            cur.push_back(c);
        }
    }
    if (!flush()) return 1;
    for (auto id : ids) {
        if (static_cast<std::size_t>(id) >= tok->vocab_size() || !tok->id_to_token(id))
            std::fprintf(stderr, "warning: unknown token id %d (skipped)\n", id);
    }
    const std::string out = tok->decode(ids, args->has("skip-special"));
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::printf("\n");
    return 0;
}

} // namespace

DI_REGISTER_COMMAND("tokenize", "text -> token ids (--tokens shows each token)", run_tokenize);
DI_REGISTER_COMMAND("detokenize", "token ids -> text", run_detokenize);

} // namespace deepinfer::cli
