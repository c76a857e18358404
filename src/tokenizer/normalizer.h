#pragma once
// Normalizers of tokenizer.json that only rewrite text: Sequence, Replace (string pattern or regex),
// Prepend, Strip. Unicode normalization forms (NFC, NFKC, ...) and Lowercase are reported as
// unimplemented at load time rather than silently skipped. DeepSeek V4 uses an empty Sequence.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace deepinfer::tokenizer {

class Normalizer {
public:
    struct Step {
        enum class Kind { kReplace, kReplaceRegex, kPrepend, kStrip } kind;
        std::string pattern, content;
        std::shared_ptr<Regex> regex;
        bool strip_left = false, strip_right = false;
    };

    void add(Step step) { steps_.push_back(std::move(step)); }
    bool is_identity() const { return steps_.empty(); }
    std::string apply(std::string_view text) const;

private:
    std::vector<Step> steps_;
};

} // namespace deepinfer::tokenizer
