#pragma once
// LogitsConstraint over a structured::GrammarMatcher: what the server puts in SamplingParams::constraint
// for response_format / guided_* requests.
//
//   auto vocab = std::make_shared<structured::TokenVocabulary>(bytes, special, {eos});   // once
//   DI_ASSIGN_OR_RETURN(auto c, make_json_schema_constraint(schema_text, vocab));
//   params.constraint = c;

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/logits_constraint.h"
#include "structured/dsml_tools.h"
#include "structured/matcher.h"

namespace deepinfer::engine {

class GrammarConstraint final : public LogitsConstraint {
public:
    explicit GrammarConstraint(std::shared_ptr<structured::CompiledGrammar> grammar)
        : matcher_(std::move(grammar)) {}

    using LogitsConstraint::fill_mask;
    void fill_mask(std::span<uint32_t> mask, int32_t tokens_left) const override {
        matcher_.fill_mask(mask, tokens_left);
    }
    // Bytes bound tokens only with a vocabulary that has every byte as a token.
    int32_t tokens_to_end() const override {
        if (matcher_.is_terminated()) return 0;
        const int32_t d = matcher_.distance_to_end();
        if (!matcher_.budget_aware() || d >= structured::CompiledGrammar::kUnreachable) return kNoBudget;
        return d + 1;
    }
    int32_t mask_words() const override { return matcher_.vocab().mask_words(); }
    bool accept(int32_t token) override { return matcher_.accept_token(token); }
    bool rollback(int32_t n) override { return matcher_.rollback(n); }
    bool is_terminated() const override { return matcher_.is_terminated(); }
    std::unique_ptr<LogitsConstraint> clone() const override {
        return std::make_unique<GrammarConstraint>(*this);
    }

    const structured::GrammarMatcher& matcher() const { return matcher_; }

private:
    structured::GrammarMatcher matcher_;
};

enum class GrammarKind { kGbnf, kRegex, kJsonSchema, kJsonObject, kDsmlTools };

// Compiles `source` (ignored for kJsonObject; the OpenAI `tools` array for kDsmlTools, with `tools`
// options: named tool, max calls) for the vocabulary; errors name what is wrong in it.
core::Result<std::shared_ptr<const LogitsConstraint>>
make_grammar_constraint(GrammarKind kind, std::string_view source,
                        std::shared_ptr<const structured::TokenVocabulary> vocab,
                        const structured::DsmlToolsOptions& tools = {});

// The tokens that spell `text` (e.g. "</think>") alone or by completing a partial match, for
// DeferredConstraint; `token_text(id)` is the text the output parser sees for id (special tokens included).
// One pass over the vocabulary (~10 ms for the V4 one).
std::shared_ptr<const TriggerText> make_trigger_text(std::string_view text, int32_t vocab_size,
                                                     const std::function<std::string(int32_t)>& token_text);

} // namespace deepinfer::engine
