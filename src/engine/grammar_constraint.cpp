#include "engine/grammar_constraint.h"

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

} // namespace deepinfer::engine
