#include "engine/grammar_constraint.h"

#include <algorithm>
#include <array>

#include "core/check.h"

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace deepinfer::engine {

core::Result<std::shared_ptr<const LogitsConstraint>>
make_grammar_constraint(GrammarKind kind, std::string_view source,
                        std::shared_ptr<const structured::TokenVocabulary> vocab,
                        const structured::DsmlToolsOptions& tools) {
    std::string gbnf;
    switch (kind) {
    case GrammarKind::kGbnf:
        gbnf = std::string(source);
        break;
    case GrammarKind::kRegex: {
        DI_ASSIGN_OR_RETURN(gbnf, structured::regex_to_gbnf(source));
        break;
    }
    case GrammarKind::kJsonSchema: {
        DI_ASSIGN_OR_RETURN(gbnf, structured::json_schema_to_gbnf(source));
        break;
    }
    case GrammarKind::kJsonObject:
        gbnf = structured::json_object_gbnf();
        break;
    case GrammarKind::kDsmlTools: {
        DI_ASSIGN_OR_RETURN(gbnf, structured::dsml_tool_calls_gbnf(source, tools));
        break;
    }
    }
    DI_ASSIGN_OR_RETURN(structured::GrammarAst ast, structured::parse_gbnf(gbnf));
    DI_ASSIGN_OR_RETURN(structured::Grammar grammar, structured::compile_grammar(ast));
    auto compiled = std::make_shared<structured::CompiledGrammar>(std::move(grammar), std::move(vocab));
    return std::shared_ptr<const LogitsConstraint>(std::make_shared<GrammarConstraint>(std::move(compiled)));
}

std::shared_ptr<const TriggerText> make_trigger_text(std::string_view text, int32_t vocab_size,
                                                     const std::function<std::string(int32_t)>& token_text) {
    auto out = std::make_shared<TriggerText>();
    const auto n = static_cast<int32_t>(text.size());
    DI_CHECK(n > 0 && n < 255);
    out->n = n;
    out->completes.resize(static_cast<size_t>(n));
    // step[k][c]: bytes matched after byte c with k matched (the longest suffix that is a prefix of text).
    std::vector<std::array<uint8_t, 256>> step(static_cast<size_t>(n));
    for (int32_t k = 0; k < n; ++k) {
        for (int c = 0; c < 256; ++c) {
            std::string s(text.substr(0, static_cast<size_t>(k)));
            s.push_back(static_cast<char>(c));
            auto m = static_cast<int32_t>(std::min<size_t>(s.size(), text.size()));
            while (m > 0 && s.compare(s.size() - static_cast<size_t>(m), static_cast<size_t>(m), text, 0,
                                      static_cast<size_t>(m)) != 0)
                --m;
            step[static_cast<size_t>(k)][static_cast<size_t>(c)] = static_cast<uint8_t>(m);
        }
    }
    out->advance.assign(static_cast<size_t>(vocab_size) * static_cast<size_t>(n), 0);
    for (int32_t t = 0; t < vocab_size; ++t) {
        const std::string bytes = token_text(t);
        for (int32_t k = 0; k < n; ++k) {
            int32_t m = k;
            for (unsigned char c : bytes) {
                m = step[static_cast<size_t>(m)][c];
                if (m == n) break;
            }
            out->advance[static_cast<size_t>(t) * static_cast<size_t>(n) + static_cast<size_t>(k)] =
                static_cast<uint8_t>(m);
            if (m == n) out->completes[static_cast<size_t>(k)].push_back(t);
        }
    }
    return out;
}

} // namespace deepinfer::engine
