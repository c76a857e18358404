#pragma once
// A compiled tokenizer.json pattern (Oniguruma syntax). Patterns in the subset of split_matcher.h — every
// pattern of the DeepSeek V4 tokenizer and GPT-2's — run on the built-in matcher with compiled-in Unicode 16
// classes, so results do not depend on the host. Other patterns fall back to PCRE2 (UTF + UCP, JIT when
// available), whose classes follow the host's PCRE2 Unicode version. Matching is thread-safe.

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
    // True when the built-in matcher (host-independent Unicode classes) runs this pattern.
    bool builtin() const;

private:
    Regex() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::string pattern_;
};

} // namespace deepinfer::tokenizer
