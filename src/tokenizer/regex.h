#pragma once
// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) standing in for the Oniguruma
// patterns of tokenizer.json. Matching is thread-safe: each thread keeps its own match data and JIT stack.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

class Regex {
public:
    // Compiles an Oniguruma-style pattern from tokenizer.json.
    static core::Result<Regex> compile(std::string_view pattern);
    // A pattern that matches `literal` exactly.
    static core::Result<Regex> literal(std::string_view literal);

    Regex(Regex&&) noexcept;
    Regex& operator=(Regex&&) noexcept;
    ~Regex();

    struct Match {
        std::size_t start, end;
    };
    // All non-overlapping matches in `subject` (valid UTF-8), left to right; lookarounds see only
    // `subject`. Empty matches are skipped.
    void find_all(std::string_view subject, std::vector<Match>& out) const;

    const std::string& pattern() const { return pattern_; }

private:
    Regex() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::string pattern_;
};

} // namespace deepinfer::tokenizer
