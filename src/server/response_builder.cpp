#include "server/response_builder.h"

#include "server/json_fields.h"

namespace deepinfer::server {

namespace {
json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
}
json finish_json(const std::optional<std::string>& f) {
    return f ? json(*f) : json(nullptr);
}
// The object every response and stream chunk is: its id, type, creation time, model, choices and (unless
// null) usage.
json envelope(const ResponseMeta& meta, const char* object, json choices, json usage = nullptr) {
    json j = {{"id", meta.id},
              {"object", object},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", std::move(choices)}};
    if (!usage.is_null()) j["usage"] = std::move(usage);
    return j;
}
} // namespace

json usage_json(const Usage& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
            {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

void ChatChoiceResult::merge(const ParsedDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    if (d.reasoning_was_content) {
        content = reasoning + content;
        reasoning.clear();
    }
    for (const auto& tc : d.tool_calls) {
        ToolCallDelta* call = nullptr;
        for (auto& c : tool_calls) call = c.index == tc.index ? &c : call;
        if (!call) {
            tool_calls.push_back(tc);
            continue;
        }
        if (!tc.id.empty()) call->id = tc.id;
        if (!tc.name.empty()) call->name = tc.name;
        call->arguments += tc.arguments;
    }
}

json chat_logprobs_json(const std::vector<engine::TokenLogprob>& lps, const TokenText& token_text) {
    json content = json::array();
    for (const auto& lp : lps) {
        std::string t = token_text(lp.token_id);
        json top = json::array();
        for (const auto& [tok, logprob] : lp.top) {
            std::string tt = token_text(tok);
            top.push_back({{"token", tt}, {"logprob", logprob}, {"bytes", bytes_of(tt)}});
        }
        content.push_back(
            {{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
}

size_t utf8_chars(std::string_view text) {
    size_t n = 0;
    for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

json text_logprobs_json(const std::vector<engine::TokenLogprob>& lps, const TokenText& token_text,
                        size_t text_offset, const EchoedPrompt* echo) {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    auto add = [&](int32_t id, const engine::TokenLogprob* lp) {
        std::string t = token_text(id);
        tokens.push_back(t);
        token_logprobs.push_back(lp ? json(lp->logprob) : json(nullptr));
        json m = lp ? json::object() : json(nullptr);
        if (lp) {
            for (const auto& [tok, logprob] : lp->top) m[token_text(tok)] = logprob;
        }
        top.push_back(m);
        offsets.push_back(text_offset);
        text_offset += utf8_chars(t);
    };
    if (echo) {
        for (size_t k = 0; k < echo->ids.size(); ++k) {
            const bool has = k < echo->logprobs.size() && echo->logprobs[k].has_value();
            add(echo->ids[k], has ? &*echo->logprobs[k] : nullptr);
        }
    }
    for (const auto& lp : lps) add(lp.token_id, &lp);
    return {{"tokens", tokens},
            {"token_logprobs", token_logprobs},
            {"top_logprobs", top},
            {"text_offset", offsets}};
}

json prompt_logprobs_json(const EchoedPrompt& prompt, const TokenText& token_text) {
    json out = json::array();
    for (size_t k = 0; k < prompt.ids.size(); ++k) {
        if (k >= prompt.logprobs.size() || !prompt.logprobs[k]) {
            out.push_back(nullptr);
            continue;
        }
        const engine::TokenLogprob& lp = *prompt.logprobs[k];
        json m = json::object();
        m[std::to_string(lp.token_id)] = {
            {"logprob", lp.logprob}, {"rank", lp.rank}, {"decoded_token", token_text(lp.token_id)}};
        for (size_t r = 0; r < lp.top.size(); ++r) {
            const std::string key = std::to_string(lp.top[r].token_id);
            if (m.contains(key)) continue;
            m[key] = {{"logprob", lp.top[r].logprob},
                      {"rank", static_cast<int>(r) + 1},
                      {"decoded_token", token_text(lp.top[r].token_id)}};
        }
        out.push_back(std::move(m));
    }
    return out;
}

json chat_completion_json(const ResponseMeta& meta, const std::vector<ChatChoiceResult>& choices,
                          const Usage& usage, bool with_logprobs, const TokenText& token_text) {
    json cs = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const auto& c = choices[i];
        json msg = {{"role", "assistant"}};
        msg["content"] = c.content.empty() && !c.tool_calls.empty() ? json(nullptr) : json(c.content);
        msg["reasoning_content"] = msg["reasoning"] = c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
        if (!c.tool_calls.empty()) {
            json tcs = json::array();
            for (const auto& tc : c.tool_calls) {
                tcs.push_back({{"id", tc.id},
                               {"type", "function"},
                               {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
            }
            msg["tool_calls"] = tcs;
        }
        cs.push_back(
            {{"index", i},
             {"message", msg},
             {"logprobs", with_logprobs ? chat_logprobs_json(c.logprobs, token_text) : json(nullptr)},
             {"finish_reason", c.finish_reason}});
    }
    return envelope(meta, "chat.completion", std::move(cs), usage_json(usage));
}

json text_completion_json(const ResponseMeta& meta, const std::vector<TextChoiceResult>& choices,
                          const Usage& usage, bool with_logprobs, const TokenText& token_text) {
    json cs = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const auto& c = choices[i];
        cs.push_back({{"index", i},
                      {"text", c.text},
                      {"logprobs",
                       with_logprobs ? text_logprobs_json(c.logprobs, token_text, 0, c.echo) : json(nullptr)},
                      {"finish_reason", c.finish_reason}});
        if (c.prompt_logprobs)
            cs.back()["prompt_logprobs"] = prompt_logprobs_json(*c.prompt_logprobs, token_text);
    }
    return envelope(meta, "text_completion", std::move(cs), usage_json(usage));
}

json chat_delta_json(const ParsedDelta& d, bool first) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!d.reasoning.empty()) {
        delta["reasoning_content"] = d.reasoning;
        delta["reasoning"] = d.reasoning;
    }
    if (!d.content.empty()) delta["content"] = d.content;
    if (first && d.content.empty()) delta["content"] = "";
    if (!d.tool_calls.empty()) {
        json tcs = json::array();
        for (const auto& tc : d.tool_calls) {
            json call = {{"index", tc.index}};
            json fn = {{"arguments", tc.arguments}};
            if (!tc.id.empty()) {
                call["id"] = tc.id;
                call["type"] = "function";
            }
            if (!tc.name.empty()) fn["name"] = tc.name;
            call["function"] = fn;
            tcs.push_back(call);
        }
        delta["tool_calls"] = tcs;
    }
    return delta;
}

namespace {
// A stream chunk of one choice: its index, `key` (delta or text), logprobs and finish reason.
json chunk_json(const ResponseMeta& meta, const char* object, int index, const char* key, json value,
                const std::optional<std::string>& finish, json logprobs) {
    json choice = {{"index", index},
                   {key, std::move(value)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", finish_json(finish)}};
    return envelope(meta, object, json::array({std::move(choice)}));
}
} // namespace

json chat_chunk_json(const ResponseMeta& meta, int index, json delta,
                     const std::optional<std::string>& finish, json logprobs) {
    return chunk_json(meta, "chat.completion.chunk", index, "delta", std::move(delta), finish,
                      std::move(logprobs));
}

json text_chunk_json(const ResponseMeta& meta, int index, const std::string& text,
                     const std::optional<std::string>& finish, json logprobs) {
    return chunk_json(meta, "text_completion", index, "text", text, finish, std::move(logprobs));
}

json usage_chunk_json(const ResponseMeta& meta, const char* object, const Usage& usage) {
    return envelope(meta, object, json::array(), usage_json(usage));
}

std::string sse_event(const json& j) {
    return "data: " + detail::dump_json(j) + "\n\n";
}

} // namespace deepinfer::server
