#pragma once
// Text side of the engine backend beside its codec (tokenizer/text_codec.h): chat rendering through the
// DeepSeek V4 encoder, and the tokenizer module's DSML parser behind OutputParser.

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/backend.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server::detail {

// DeepSeek V4 prompt text for a chat (encoding_dsv4-exact), BOS included, with the checkpoint's effort
// table; `content` (optional) receives where message text landed (for plain-content encoding).
core::Result<std::string> render_chat_text(const ChatPrompt& prompt,
                                           tokenizer::EffortTable table = tokenizer::EffortTable::k0731,
                                           std::vector<tokenizer::ContentRange>* content = nullptr);

std::unique_ptr<OutputParser> make_dsml_parser(const ParserOptions& options);

} // namespace deepinfer::server::detail
