#include "server/engine_backend_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "structured/json_schema_validate.h"
#include "tokenizer/chat_defaults.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server::detail {

namespace {

// tool_choice "auto": calls are held back until the output ends (the tool block is the end of a V4 reply:
// the parser drops text after it), then each is checked against the declared tools (name, and arguments
// against the parameters schema). Valid calls are passed on with their fragments, renumbered from 0; an
// invalid one becomes content: its DSML markup as the template writes it (rebuilt from the parsed call).
class ToolCallValidator : public OutputParser {
public:
    ToolCallValidator(std::unique_ptr<OutputParser> inner, const tokenizer::Json& tools)
        : inner_(std::move(inner)) {
        for (const auto& t : tools) { // the chat parser validated their shape
            const tokenizer::Json& f = t.contains("function") ? t.at("function") : t;
            DeclaredTool d;
            d.name = f.value("name", std::string());
            d.schema = f.contains("parameters") ? f.at("parameters").dump() : "{}";
            tools_.push_back(std::move(d));
        }
    }

    ParsedDelta push(std::string_view text) override { return hold(inner_->push(text)); }
    ParsedDelta finish(bool length_cut) override {
        ParsedDelta d = hold(inner_->finish(length_cut));
        std::string rejected;
        int next = 0;
        for (const Call& c : calls_) {
            if (valid(c)) { // the parser's fragments as they came (streams still see arguments grow)
                d.tool_calls.push_back({next, c.id, c.name, c.fragments.empty() ? "" : c.fragments[0]});
                for (size_t f = 1; f < c.fragments.size(); ++f)
                    d.tool_calls.push_back({next, "", "", c.fragments[f]});
                ++next;
            } else {
                rejected += markup(c);
            }
        }
        if (!rejected.empty()) d.content += "\n\n<｜DSML｜tool_calls>\n" + rejected + "</｜DSML｜tool_calls>";
        return d;
    }

private:
    struct Call {
        int index = 0;
        std::string id, name, arguments;
        std::vector<std::string> fragments; // of `arguments`
    };

    ParsedDelta hold(ParsedDelta d) {
        for (auto& tc : d.tool_calls) {
            auto it = std::find_if(calls_.begin(), calls_.end(),
                                   [&](const Call& c) { return c.index == tc.index; });
            if (it == calls_.end()) it = calls_.insert(calls_.end(), Call{tc.index, "", "", "", {}});
            if (!tc.id.empty()) it->id = tc.id;
            if (!tc.name.empty()) it->name = tc.name;
            it->arguments += tc.arguments;
            if (!tc.arguments.empty()) it->fragments.push_back(tc.arguments);
        }
        d.tool_calls.clear();
        return d;
    }

    bool valid(const Call& c) const {
        auto t = std::find_if(tools_.begin(), tools_.end(),
                              [&](const DeclaredTool& s) { return s.name == c.name; });
        if (t == tools_.end()) return false;
        const std::string& schema = t->schema;
        return structured::validate_json_schema(schema, c.arguments.empty() ? "{}" : c.arguments).ok();
    }

    static std::string markup(const Call& c) {
        std::string out = "<｜DSML｜invoke name=\"" + c.name + "\">\n";
        nlohmann::json args = nlohmann::json::parse(c.arguments, nullptr, false);
        if (args.is_object()) {
            for (auto it = args.begin(); it != args.end(); ++it) {
                const bool str = it->is_string();
                out += "<｜DSML｜parameter name=\"" + it.key() + "\" string=\"" + (str ? "true" : "false") +
                       "\">" + (str ? it->get<std::string>() : it->dump()) + "</｜DSML｜parameter>\n";
            }
        } else {
            out += c.arguments + "\n";
        }
        return out + "</｜DSML｜invoke>\n";
    }

    std::unique_ptr<OutputParser> inner_;
    struct DeclaredTool {
        std::string name;
        std::string schema; // the parameters JSON Schema as text ("{}" when absent)
    };
    std::vector<DeclaredTool> tools_;
    std::vector<Call> calls_;
};

} // namespace

core::Result<std::string> render_chat_text(const ChatPrompt& prompt, tokenizer::EffortTable table,
                                           std::vector<tokenizer::ContentRange>* content) {
    tokenizer::Conversation conv = prompt.conversation;
    if (prompt.tool_choice == "none") conv.tools = nullptr;
    if (!prompt.response_format.is_null()) {
        // Like tools, the format instruction rides on the first system message (one is added if needed).
        auto sys = std::find_if(conv.messages.begin(), conv.messages.end(),
                                [](const auto& m) { return m.role == tokenizer::Role::kSystem; });
        if (sys == conv.messages.end()) {
            tokenizer::Message m;
            m.role = tokenizer::Role::kSystem;
            sys = conv.messages.insert(conv.messages.begin(), m);
        }
        sys->response_format = prompt.response_format;
    }
    tokenizer::ChatOptions opts;
    opts.mode = tokenizer::ThinkingChoice{prompt.thinking, prompt.reasoning_effort}.mode();
    opts.effort_table = table;
    return tokenizer::render_chat(conv, opts, content);
}

std::unique_ptr<OutputParser> make_dsml_parser(const ParserOptions& options) {
    auto parser = tokenizer::make_dsml_output_parser(options.thinking, options.parse_tools);
    if (!options.validate_tools.is_array() || options.validate_tools.empty()) return parser;
    return std::make_unique<ToolCallValidator>(std::move(parser), options.validate_tools);
}

} // namespace deepinfer::server::detail
