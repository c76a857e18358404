// libFuzzer target over the OpenAI request parsers: any byte string is a request body. Parsing must return
// a typed request or an ApiError (400/413 family, a message, a JSON error object), never crash. When it
// accepts, the typed request must respect the limits it was given (checked here independently).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_parser.h"

namespace {
void check_common(const deepinfer::server::CommonRequest& c, const deepinfer::server::ParserLimits& l) {
    if (c.sampling.n < 1 || c.sampling.n > l.max_n) std::abort();
    if (c.sampling.temperature < 0 || c.sampling.temperature > 2) std::abort();
    if (c.sampling.top_p <= 0 || c.sampling.top_p > 1) std::abort();
    if (static_cast<int>(c.stop.size()) > l.max_stop) std::abort();
    if (c.sampling.logprobs.value_or(0) > l.max_top_logprobs) std::abort();
    for (const auto& [tok, bias] : c.sampling.logit_bias) {
        if (tok < 0 || tok >= l.vocab_size || bias < -100 || bias > 100) std::abort();
    }
}
void check_error(const deepinfer::server::ApiError& e) {
    if (e.http_status < 400 || e.http_status > 499 || e.message.empty()) std::abort();
    if (e.to_json().find("\"error\"") == std::string::npos) std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace deepinfer::server;
    std::string_view body(reinterpret_cast<const char*>(data), size);
    ParserLimits limits;
    limits.vocab_size = 1000;
    auto chat = parse_chat_request(body, limits);
    if (auto* e = std::get_if<ApiError>(&chat))
        check_error(*e);
    else
        check_common(std::get<ChatRequest>(chat).common, limits);
    auto comp = parse_completion_request(body, limits);
    if (auto* e = std::get_if<ApiError>(&comp)) {
        check_error(*e);
    } else {
        const auto& r = std::get<CompletionRequest>(comp);
        check_common(r.common, limits);
        if (r.prompts.empty()) std::abort();
    }
    return 0;
}
