#pragma once
// Text side of the engine backend: a codec (the model's tokenizer, or a byte-level stand-in when the
// checkpoint's vocabulary is too small for the DeepSeek V4 tokenizer, as with the tiny test models), chat
// rendering through the DeepSeek V4 encoder, and the tokenizer module's DSML parser behind OutputParser.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/backend.h"
#include "structured/vocabulary.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server::detail {

class TextCodec {
public:
    virtual ~TextCodec() = default;
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;
    // Encodes with the byte ranges `plain` matched as text only (no special token inside them).
    virtual std::vector<int32_t> encode_plain(std::string_view text,
                                              std::span<const tokenizer::ContentRange> plain) const {
        return encode(text);
    }
    virtual std::unique_ptr<IncrementalDetokenizer> new_detokenizer() const = 0;
    virtual std::string token_text(int32_t token) const = 0;
    virtual std::string describe() const = 0;
    // Every id below model_vocab as the structured module sees it (its bytes; special ids excluded from
    // text; EOS as the end token), for constrained decoding. Built by the caller once: it walks the
    // vocabulary.
    virtual std::shared_ptr<const structured::TokenVocabulary> vocabulary(int32_t model_vocab) const = 0;
};

// The tokenizer.json at `path`; fails if it cannot be loaded.
core::Result<std::unique_ptr<TextCodec>> load_hf_codec(const std::string& path);
// Bytes as ids 2..257, the model's BOS and EOS for DeepSeek's BOS/EOS strings, and the chat protocol's
// fixed strings (<think>, </think>, <｜User｜>, ｜DSML｜, the tools and effort prompts, ...) from id 258.
std::unique_ptr<TextCodec> make_byte_codec(int32_t bos, int32_t eos);
int32_t byte_codec_min_vocab();
size_t hf_vocab_size(const TextCodec& codec); // 0 for the byte codec

// DeepSeek V4 prompt text for a chat (encoding_dsv4-exact), BOS included, with the checkpoint's effort
// table; `content` (optional) receives where message text landed (for plain-content encoding).
core::Result<std::string> render_chat_text(const ChatPrompt& prompt,
                                           tokenizer::EffortTable table = tokenizer::EffortTable::k0731,
                                           std::vector<tokenizer::ContentRange>* content = nullptr);

std::unique_ptr<OutputParser> make_dsml_parser(const ParserOptions& options);

} // namespace deepinfer::server::detail
