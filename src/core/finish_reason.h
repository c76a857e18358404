#pragma once
// Why a completion stopped: the one enum the engine (RequestOutput), the tokenizer's output parser and the
// server share.

#include <cstdint>
#include <string_view>

namespace deepinfer::core {

enum class FinishReason : uint8_t {
    kStop,   // EOS or a stop token id (or a stop string, in the server)
    kLength, // max_tokens or the max model length
    kAbort,  // aborted by the caller, or an error (see RequestOutput::status)
};

// "stop", "length", "abort": the OpenAI / vLLM names.
inline std::string_view finish_reason_name(FinishReason r) {
    switch (r) {
    case FinishReason::kStop:
        return "stop";
    case FinishReason::kLength:
        return "length";
    case FinishReason::kAbort:
        return "abort";
    }
    return "unknown";
}

} // namespace deepinfer::core
