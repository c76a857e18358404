#pragma once
// A model's text side for serving: ids from text and text from ids, streamed. Either the model's
// tokenizer.json, or a byte-level stand-in when the checkpoint's vocabulary is too small for the DeepSeek V4
// tokenizer (the tiny test models): bytes as ids 2..257 and the chat protocol's fixed strings as single ids.
// Immutable after construction; decoders are per stream.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::tokenizer {

// Ids -> text as they are generated.
class StreamDecoder {
public:
    virtual ~StreamDecoder() = default;
    // Text newly completed by this token; incomplete UTF-8 is held back until a later token completes it.
    virtual std::string push(int32_t token) = 0;
    // What is still held back at the end of the stream.
    virtual std::string flush() = 0;
};

// Every id below a model's vocabulary size as a stream spells it (for constrained decoding): its bytes,
// whether it is special (never text), and the ids that end the output (EOS).
struct TokenSpelling {
    std::vector<std::string> bytes;
    std::vector<bool> special;
    std::vector<int32_t> end_ids;
};

class TextCodec {
public:
    virtual ~TextCodec() = default;
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;
    // Encodes with the byte ranges `plain` matched as text only (no special token inside them).
    virtual std::vector<int32_t> encode_plain(std::string_view text,
                                              std::span<const ContentRange> plain) const {
        return encode(text);
    }
    // Special tokens are skipped.
    virtual std::unique_ptr<StreamDecoder> new_detokenizer() const = 0;
    // One token's text (special tokens included), for logprobs.
    virtual std::string token_text(int32_t token) const = 0;
    virtual std::string describe() const = 0;
    // Walks the whole vocabulary: build it once.
    virtual TokenSpelling spelling(int32_t model_vocab) const = 0;
};

// The tokenizer.json at `path`; fails if it cannot be loaded.
core::Result<std::unique_ptr<TextCodec>> load_hf_codec(const std::string& path);
// Bytes as ids 2..257, the model's BOS and EOS for DeepSeek's BOS/EOS strings, and the chat protocol's
// fixed strings (<think>, </think>, <｜User｜>, ｜DSML｜, the tools and effort prompts, ...) from id 258.
std::unique_ptr<TextCodec> make_byte_codec(int32_t bos, int32_t eos);
int32_t byte_codec_min_vocab();

struct ModelCodecSource {
    std::string model_dir;
    std::string tokenizer_path;      // given (--tokenizer); empty: looked for
    std::string installed_tokenizer; // the one in the installed data directory; empty: none
    int64_t model_vocab = 0;
    int32_t bos = 0, eos = 1; // the model's, for the byte-level stand-in
};
// A model's codec: the tokenizer given, else MODEL_DIR/tokenizer.json, else the installed one (an error names
// the places tried). One larger than the model's vocabulary (test models) gives way to the byte-level
// stand-in, with a warning.
core::Result<std::unique_ptr<TextCodec>> load_model_codec(const ModelCodecSource& source);

} // namespace deepinfer::tokenizer
