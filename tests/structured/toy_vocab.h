#pragma once
// Helpers for the structured tests: a toy vocabulary, compiling GBNF text, whole-string matching, and
// the allowed tokens of a matcher as strings.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/gbnf.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"

namespace deepinfer::structured::testing_util {

inline std::shared_ptr<const TokenVocabulary> toy_vocab() {
    std::vector<std::string> bytes = {"a", "b", "c", "d", "ab", "abc", "cd", "<s>", "</s>"};
    std::vector<bool> special(bytes.size(), false);
    special[7] = special[8] = true;
    return std::make_shared<TokenVocabulary>(bytes, special, std::vector<int32_t>{8});
}

// All 256 single bytes (enough to match any text), plus an end token.
inline std::shared_ptr<const TokenVocabulary> byte_vocab() {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("</s>");
    std::vector<bool> special(bytes.size(), false);
    special.back() = true;
    return std::make_shared<TokenVocabulary>(bytes, special, std::vector<int32_t>{256});
}

inline std::string& last_error() {
    static std::string e;
    return e;
}

inline std::shared_ptr<CompiledGrammar> compile(const std::string& gbnf,
                                                std::shared_ptr<const TokenVocabulary> vocab = byte_vocab()) {
    auto ast = parse_gbnf(gbnf);
    if (!ast.ok()) {
        last_error() = ast.status().message();
        return nullptr;
    }
    auto g = compile_grammar(*ast);
    if (!g.ok()) {
        last_error() = g.status().message();
        return nullptr;
    }
    return std::make_shared<CompiledGrammar>(std::move(*g), std::move(vocab));
}

inline std::string compile_error(const std::string& gbnf) {
    last_error().clear();
    return compile(gbnf) ? std::string("(compiled)") : last_error();
}

inline bool matches(const std::shared_ptr<CompiledGrammar>& g, const std::string& text) {
    GrammarMatcher m(g);
    return m.accept_bytes(text) && m.is_accepting();
}

inline int32_t id_of(const TokenVocabulary& v, const std::string& s) {
    for (int32_t i = 0; i < v.size(); ++i)
        if (v.bytes(i) == s) return i;
    return -1;
}

inline std::vector<std::string> allowed(const GrammarMatcher& m) {
    std::vector<uint32_t> mask(m.vocab().mask_words());
    m.fill_mask(mask);
    std::vector<std::string> out;
    for (int32_t i = 0; i < m.vocab().size(); ++i)
        if (mask[i >> 5] >> (i & 31) & 1) out.push_back(m.vocab().bytes(i));
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace deepinfer::structured::testing_util
