#include "server/engine_backend_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "structured/json_schema_validate.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/dsml_parser.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::server::detail {

namespace {

class HfDetokenizer : public IncrementalDetokenizer {
public:
    explicit HfDetokenizer(const tokenizer::Tokenizer& tok) : detok_(tok, /*skip_special_tokens=*/true) {}
    std::string push(int32_t token) override { return detok_.push(token); }
    std::string flush() override { return detok_.finish(); }

private:
    tokenizer::IncrementalDetokenizer detok_;
};

class HfCodec : public TextCodec {
public:
    HfCodec(tokenizer::Tokenizer tok, std::string path) : tok_(std::move(tok)), path_(std::move(path)) {}
    std::vector<int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
    std::vector<int32_t> encode_plain(std::string_view text,
                                      std::span<const tokenizer::ContentRange> plain) const override {
        return tok_.encode_with_plain_ranges(text, plain);
    }
    std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const override {
        return std::make_unique<HfDetokenizer>(tok_);
    }
    std::string token_text(int32_t token) const override {
        int32_t ids[1] = {token};
        return tok_.decode(ids);
    }
    std::string describe() const override { return path_; }
    std::shared_ptr<const structured::TokenVocabulary> vocabulary(int32_t model_vocab) const override {
        const size_t n = std::min(tok_.vocab_size(), static_cast<size_t>(std::max(model_vocab, 0)));
        std::vector<std::string> bytes(n);
        std::vector<bool> special(n, false);
        for (size_t id = 0; id < n; ++id) {
            const auto t = static_cast<tokenizer::TokenId>(id);
            bytes[id] = std::string(tok_.token_bytes(t));
            special[id] = tok_.is_special(t);
        }
        std::vector<int32_t> end;
        if (auto eos = tok_.token_to_id(tokenizer::kEosToken)) end.push_back(static_cast<int32_t>(*eos));
        return std::make_shared<const structured::TokenVocabulary>(std::move(bytes), std::move(special),
                                                                   std::move(end));
    }
    size_t vocab() const { return tok_.vocab_size(); }

private:
    tokenizer::Tokenizer tok_;
    std::string path_;
};

constexpr int32_t kByteBase = 2, kFirstPhrase = 258;

// The chat protocol's fixed strings (special tokens, the tools / effort / format prompt texts) as single
// ids, so that a DeepSeek V4 prompt with tools still fits a tiny model's context.
std::vector<std::string> protocol_phrases() {
    const std::string split = "\x01";
    std::string tools = tokenizer::tools_prompt(split);
    size_t cut = tools.find(split);
    return {std::string(tokenizer::kThinkStart),
            std::string(tokenizer::kThinkEnd),
            std::string(tokenizer::kUserToken),
            std::string(tokenizer::kAssistantToken),
            std::string(tokenizer::kLatestReminderToken),
            std::string(tokenizer::kDsml),
            std::string(tokenizer::kImagePlaceholder),
            tools.substr(0, cut),
            tools.substr(cut + split.size()),
            tokenizer::response_format_prompt(""),
            std::string(tokenizer::reasoning_effort_prompt(tokenizer::ThinkingMode::kThinkingHigh)),
            std::string(tokenizer::reasoning_effort_prompt(tokenizer::ThinkingMode::kThinkingMax))};
}

class ByteDetokenizer : public IncrementalDetokenizer {
public:
    explicit ByteDetokenizer(const std::vector<std::string>* phrases) : phrases_(phrases) {}
    std::string push(int32_t token) override {
        int32_t phrase = token - kFirstPhrase;
        if (phrase >= 0 && phrase < static_cast<int32_t>(phrases_->size()))
            return flush() + (*phrases_)[phrase];
        if (token < kByteBase || token >= kByteBase + 256) return std::string(); // BOS, EOS, unused ids
        return repair_.push(std::string(1, static_cast<char>(token - kByteBase)));
    }
    std::string flush() override { return repair_.finish(); }

private:
    const std::vector<std::string>* phrases_;
    tokenizer::utf8::StreamRepair repair_;
};

class ByteCodec : public TextCodec {
public:
    ByteCodec(int32_t bos, int32_t eos) : bos_(bos), eos_(eos), phrases_(protocol_phrases()) {}

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int32_t> ids;
        ids.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, tokenizer::kBosToken.size(), tokenizer::kBosToken) == 0) {
                ids.push_back(bos_);
                i += tokenizer::kBosToken.size();
                continue;
            }
            if (text.compare(i, tokenizer::kEosToken.size(), tokenizer::kEosToken) == 0) {
                ids.push_back(eos_);
                i += tokenizer::kEosToken.size();
                continue;
            }
            int32_t best = -1;
            for (size_t p = 0; p < phrases_.size(); ++p) {
                const std::string& ph = phrases_[p];
                if (!ph.empty() && text.compare(i, ph.size(), ph) == 0 &&
                    (best < 0 || ph.size() > phrases_[best].size())) {
                    best = static_cast<int32_t>(p);
                }
            }
            if (best >= 0) {
                ids.push_back(kFirstPhrase + best);
                i += phrases_[best].size();
            } else {
                ids.push_back(kByteBase + static_cast<unsigned char>(text[i]));
                ++i;
            }
        }
        return ids;
    }
    std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const override {
        return std::make_unique<ByteDetokenizer>(&phrases_);
    }
    std::string token_text(int32_t token) const override {
        if (token >= kByteBase && token < kByteBase + 256)
            return std::string(1, static_cast<char>(token - kByteBase));
        int32_t phrase = token - kFirstPhrase;
        if (phrase >= 0 && phrase < static_cast<int32_t>(phrases_.size())) return phrases_[phrase];
        return "<|" + std::to_string(token) + "|>";
    }
    std::string describe() const override { return "byte-level stand-in"; }
    // Bytes are text; BOS, the protocol phrases and unused ids are special (a constraint spells text out
    // byte by byte); EOS ends the output.
    std::shared_ptr<const structured::TokenVocabulary> vocabulary(int32_t model_vocab) const override {
        const auto n = static_cast<size_t>(std::max(model_vocab, 0));
        std::vector<std::string> bytes(n);
        std::vector<bool> special(n, true);
        for (int32_t b = 0; b < 256 && static_cast<size_t>(kByteBase + b) < n; ++b) {
            bytes[kByteBase + b] = std::string(1, static_cast<char>(b));
            special[kByteBase + b] = false;
        }
        return std::make_shared<const structured::TokenVocabulary>(std::move(bytes), std::move(special),
                                                                   std::vector<int32_t>{eos_});
    }
    static int32_t min_vocab() { return kFirstPhrase + 12; }

private:
    int32_t bos_, eos_;
    std::vector<std::string> phrases_;
};

class DsmlParserAdapter : public OutputParser {
public:
    explicit DsmlParserAdapter(const ParserOptions& o)
        : parser_(tokenizer::DsmlStreamParser::Options{o.thinking, o.parse_tools}) {}
    ParsedDelta push(std::string_view text) override { return convert(parser_.feed(text)); }
    ParsedDelta finish(bool length_cut) override {
        ParsedDelta d = convert(
            parser_.finish(length_cut ? tokenizer::FinishReason::kLength : tokenizer::FinishReason::kStop));
        close_open_call(d);
        return d;
    }

private:
    ParsedDelta convert(const std::vector<tokenizer::ParseEvent>& events) {
        ParsedDelta d;
        for (const auto& e : events) {
            switch (e.kind) {
            case tokenizer::ParseEventKind::kReasoningDelta:
                d.reasoning += e.text;
                break;
            case tokenizer::ParseEventKind::kContentDelta:
                d.content += e.text;
                break;
            case tokenizer::ParseEventKind::kToolCallBegin:
                d.tool_calls.push_back({e.index, "", e.text, ""});
                open_index_ = e.index;
                open_args_.clear();
                break;
            case tokenizer::ParseEventKind::kToolCallArgsDelta:
                if (!d.tool_calls.empty() && d.tool_calls.back().index == e.index) {
                    d.tool_calls.back().arguments += e.text;
                } else {
                    d.tool_calls.push_back({e.index, "", "", e.text});
                }
                if (e.index == open_index_) open_args_ += e.text;
                break;
            case tokenizer::ParseEventKind::kToolCallEnd:
                if (e.index == open_index_) open_index_ = -1;
                break;
            case tokenizer::ParseEventKind::kReasoningWasContent:
                d.reasoning_was_content = true;
                break;
            }
        }
        return d;
    }

    // Output that ends inside a tool call (cut off, or stopped mid-call) still gets arguments that are one
    // JSON object: the shortest closing suffix that makes the streamed fragments parse is appended.
    void close_open_call(ParsedDelta& d) {
        if (open_index_ < 0) return;
        std::string suffix;
        for (const char* s : {"}", "\"}", "\"\"}"}) {
            if (nlohmann::json::accept(open_args_ + s)) {
                suffix = s;
                break;
            }
        }
        if (open_args_.empty()) suffix = "{}";
        if (!suffix.empty()) d.tool_calls.push_back({open_index_, "", "", suffix});
        open_index_ = -1;
    }

    tokenizer::DsmlStreamParser parser_;
    int open_index_ = -1;   // tool call begun but not ended
    std::string open_args_; // its argument fragments so far
};

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

core::Result<std::unique_ptr<TextCodec>> load_hf_codec(const std::string& path) {
    DI_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::from_file(path));
    return std::unique_ptr<TextCodec>(std::make_unique<HfCodec>(std::move(tok), path));
}

std::unique_ptr<TextCodec> make_byte_codec(int32_t bos, int32_t eos) {
    return std::make_unique<ByteCodec>(bos, eos);
}
int32_t byte_codec_min_vocab() {
    return ByteCodec::min_vocab();
}

size_t hf_vocab_size(const TextCodec& codec) {
    auto* hf = dynamic_cast<const HfCodec*>(&codec);
    return hf ? hf->vocab() : 0;
}

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
    opts.mode = !prompt.thinking                    ? tokenizer::ThinkingMode::kNonThinking
                : prompt.reasoning_effort == "max"  ? tokenizer::ThinkingMode::kThinkingMax
                : prompt.reasoning_effort == "high" ? tokenizer::ThinkingMode::kThinkingHigh
                                                    : tokenizer::ThinkingMode::kThinkingLow;
    opts.effort_table = table;
    return tokenizer::render_chat(conv, opts, content);
}

std::unique_ptr<OutputParser> make_dsml_parser(const ParserOptions& options) {
    auto parser = std::make_unique<DsmlParserAdapter>(options);
    if (!options.validate_tools.is_array() || options.validate_tools.empty()) return parser;
    return std::make_unique<ToolCallValidator>(std::move(parser), options.validate_tools);
}

} // namespace deepinfer::server::detail
