#include "tokenizer/text_codec.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "core/logging.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

namespace {

class HfDetokenizer : public StreamDecoder {
public:
    explicit HfDetokenizer(const Tokenizer& tok) : detok_(tok, /*skip_special_tokens=*/true) {}
    std::string push(int32_t token) override { return detok_.push(token); }
    std::string flush() override { return detok_.finish(); }

private:
    IncrementalDetokenizer detok_;
};

class HfCodec : public TextCodec {
public:
    HfCodec(Tokenizer tok, std::string path) : tok_(std::move(tok)), path_(std::move(path)) {}
    std::vector<int32_t> encode(std::string_view text) const override { return tok_.encode(text); }
    std::vector<int32_t> encode_plain(std::string_view text,
                                      std::span<const ContentRange> plain) const override {
        return tok_.encode_with_plain_ranges(text, plain);
    }
    std::unique_ptr<StreamDecoder> new_detokenizer() const override {
        return std::make_unique<HfDetokenizer>(tok_);
    }
    std::string token_text(int32_t token) const override {
        int32_t ids[1] = {token};
        return tok_.decode(ids);
    }
    std::string describe() const override { return path_; }
    TokenSpelling spelling(int32_t model_vocab) const override {
        const size_t n = std::min(tok_.vocab_size(), static_cast<size_t>(std::max(model_vocab, 0)));
        // A tokenizer without a decoder (the WordLevel one of the tiny V4.1 models) joins tokens with its
        // separator: the detokenizer writes it before each token it keeps but the first, and keeps no unknown
        // id. So a token's text is separator + bytes (the grammar sees one leading separator the client
        // does not), and an unknown id writes nothing.
        const std::string sep(tok_.token_separator());
        std::vector<std::string> bytes(n);
        std::vector<bool> special(n, false);
        for (size_t id = 0; id < n; ++id) {
            const auto t = static_cast<TokenId>(id);
            special[id] = tok_.is_special(t) || (!sep.empty() && !tok_.id_to_token(t));
            bytes[id] = (special[id] ? std::string() : sep) + std::string(tok_.token_bytes(t));
        }
        std::vector<int32_t> end;
        if (auto eos = tok_.token_to_id(kEosToken)) end.push_back(static_cast<int32_t>(*eos));
        return {std::move(bytes), std::move(special), std::move(end)};
    }
    size_t vocab() const { return tok_.vocab_size(); }

private:
    Tokenizer tok_;
    std::string path_;
};

constexpr int32_t kByteBase = 2, kFirstPhrase = 258;

// The chat protocol's fixed strings (special tokens, the tools / effort / format prompt texts) as single
// ids, so that a DeepSeek V4 prompt with tools still fits a tiny model's context.
std::vector<std::string> protocol_phrases() {
    const std::string split = "\x01";
    std::string tools = tools_prompt(split);
    size_t cut = tools.find(split);
    return {std::string(kThinkStart),
            std::string(kThinkEnd),
            std::string(kUserToken),
            std::string(kAssistantToken),
            std::string(kLatestReminderToken),
            std::string(kDsml),
            std::string(kImagePlaceholder),
            tools.substr(0, cut),
            tools.substr(cut + split.size()),
            response_format_prompt(""),
            std::string(reasoning_effort_prompt(ThinkingMode::kThinkingHigh)),
            std::string(reasoning_effort_prompt(ThinkingMode::kThinkingMax))};
}

class ByteDetokenizer : public StreamDecoder {
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
    utf8::StreamRepair repair_;
};

class ByteCodec : public TextCodec {
public:
    ByteCodec(int32_t bos, int32_t eos) : bos_(bos), eos_(eos), phrases_(protocol_phrases()) {}

    std::vector<int32_t> encode(std::string_view text) const override {
        std::vector<int32_t> ids;
        ids.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, kBosToken.size(), kBosToken) == 0) {
                ids.push_back(bos_);
                i += kBosToken.size();
                continue;
            }
            if (text.compare(i, kEosToken.size(), kEosToken) == 0) {
                ids.push_back(eos_);
                i += kEosToken.size();
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
    std::unique_ptr<StreamDecoder> new_detokenizer() const override {
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
    TokenSpelling spelling(int32_t model_vocab) const override {
        const auto n = static_cast<size_t>(std::max(model_vocab, 0));
        std::vector<std::string> bytes(n);
        std::vector<bool> special(n, true);
        for (int32_t b = 0; b < 256 && static_cast<size_t>(kByteBase + b) < n; ++b) {
            bytes[kByteBase + b] = std::string(1, static_cast<char>(b));
            special[kByteBase + b] = false;
        }
        return {std::move(bytes), std::move(special), {eos_}};
    }
    static int32_t min_vocab() { return kFirstPhrase + 12; }

private:
    int32_t bos_, eos_;
    std::vector<std::string> phrases_;
};

} // namespace

core::Result<std::unique_ptr<TextCodec>> load_hf_codec(const std::string& path) {
    DI_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file(path));
    return std::unique_ptr<TextCodec>(std::make_unique<HfCodec>(std::move(tok), path));
}

std::unique_ptr<TextCodec> make_byte_codec(int32_t bos, int32_t eos) {
    return std::make_unique<ByteCodec>(bos, eos);
}
int32_t byte_codec_min_vocab() {
    return ByteCodec::min_vocab();
}

core::Result<std::unique_ptr<TextCodec>> load_model_codec(const ModelCodecSource& source) {
    namespace fs = std::filesystem;
    const std::string beside = (fs::path(source.model_dir) / "tokenizer.json").string();
    std::string path = source.tokenizer_path;
    std::error_code ec;
    if (path.empty() && fs::exists(beside, ec)) path = beside;
    if (path.empty() && !source.installed_tokenizer.empty() && fs::exists(source.installed_tokenizer, ec))
        path = source.installed_tokenizer;
    if (path.empty()) {
        return core::not_found(
            "no tokenizer for model " + source.model_dir + ": none given (--tokenizer), no " + beside +
            ", none installed" +
            (source.installed_tokenizer.empty() ? std::string() : " at " + source.installed_tokenizer));
    }
    auto hf = load_hf_codec(path);
    if (!hf.ok()) return hf.status().with_context("tokenizer " + path);
    if (static_cast<const HfCodec&>(**hf).vocab() <=
        static_cast<size_t>(std::max<int64_t>(source.model_vocab, 0)))
        return hf;
    if (source.model_vocab < byte_codec_min_vocab())
        return core::invalid_argument("the model's vocabulary is too small for any tokenizer");
    DI_LOG(Warn) << "tokenizer " << path << " does not fit the model's " << source.model_vocab
                 << "-token vocabulary; using a byte-level stand-in (test models)";
    return make_byte_codec(source.bos, source.eos);
}

} // namespace deepinfer::tokenizer
