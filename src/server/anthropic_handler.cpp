// POST /v1/messages: the Anthropic Messages API over the chat pipeline (anthropic_format.h).

#include <set>

#include "server/anthropic_format.h"
#include "server/json_fields.h"
#include "server/responder.h"

namespace deepinfer::server {

namespace {

const char* kEndpoint = "/v1/messages";
using ojson = nlohmann::ordered_json;

class AnthropicResponder : public Responder {
public:
    AnthropicResponder(HttpServer::State& s, std::unique_ptr<Generation> gen, ResponseMeta meta, bool stream,
                       int prompt_tokens)
        : Responder(s, kEndpoint, std::move(gen), std::move(meta), stream, false, prompt_tokens) {}

protected:
    // input_tokens excludes the prompt tokens read from the prefix cache (Anthropic's split); the final
    // message_delta repeats them so a stream's accumulated usage equals a non-streamed response's.
    ojson usage_json() const {
        const Usage u = usage();
        return ojson{{"input_tokens", u.prompt_tokens - u.cached_tokens},
                     {"cache_read_input_tokens", u.cached_tokens},
                     {"cache_creation_input_tokens", 0},
                     {"output_tokens", u.completion_tokens}};
    }

    ojson message_json(ojson content) const {
        return ojson{{"id", meta_.id},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", meta_.model},
                     {"content", std::move(content)},
                     {"stop_reason", nullptr},
                     {"stop_sequence", nullptr}};
    }

    std::string prelude() override {
        if (!stream_) return {};
        ojson m = message_json(ojson::array());
        m["usage"] = ojson{{"input_tokens", prompt_tokens_}, {"output_tokens", 0}};
        return AnthropicStreamWriter::event(ojson{{"type", "message_start"}, {"message", std::move(m)}});
    }

    void on_output(int, ChoiceOutput& out, std::string& buf) override {
        for (auto& tc : out.parsed.tool_calls) { // Anthropic ids for calls the parser left unnamed
            if (seen_calls_.insert(tc.index).second && tc.id.empty())
                tc.id = "toolu_" + meta_.id.substr(meta_.id.find('_') + 1) + "_" + std::to_string(tc.index);
        }
        if (stream_) {
            writer_.push(out.parsed, buf);
        } else {
            result_.merge(out.parsed);
        }
        if (out.finish_reason) {
            finish_ = *out.finish_reason;
            stop_sequence_ = out.stop_sequence;
        }
    }

    std::string finale() override {
        const std::string reason = anthropic_stop_reason(finish_, stop_sequence_);
        const ojson stop_sequence = reason == "stop_sequence" ? ojson(stop_sequence_) : ojson(nullptr);
        if (!stream_) {
            if (!error_.ok()) return anthropic_error_json(from_status(error_));
            ojson content = ojson::array();
            if (!result_.reasoning.empty())
                content.push_back(
                    ojson{{"type", "thinking"}, {"thinking", result_.reasoning}, {"signature", ""}});
            if (!result_.content.empty())
                content.push_back(ojson{{"type", "text"}, {"text", result_.content}});
            for (const auto& tc : result_.tool_calls) {
                content.push_back(ojson{{"type", "tool_use"},
                                        {"id", tc.id},
                                        {"name", tc.name},
                                        {"input", anthropic_tool_input(tc.arguments)}});
            }
            ojson m = message_json(std::move(content));
            m["stop_reason"] = reason;
            m["stop_sequence"] = stop_sequence;
            m["usage"] = usage_json();
            return detail::dump_json(m);
        }
        std::string buf;
        writer_.close(buf);
        if (!error_.ok())
            return buf +
                   AnthropicStreamWriter::event(ojson::parse(anthropic_error_json(from_status(error_))));
        buf += AnthropicStreamWriter::event(
            ojson{{"type", "message_delta"},
                  {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence}}},
                  {"usage", usage_json()}});
        return buf + AnthropicStreamWriter::event(ojson{{"type", "message_stop"}});
    }

private:
    AnthropicStreamWriter writer_;
    ChatChoiceResult result_;
    std::set<int> seen_calls_;
    std::string finish_ = "stop";
    std::string stop_sequence_;
};

// The Messages body as a validated chat request for the served model (count_tokens takes no max_tokens).
Parsed<ChatRequest> parse_messages_request(HttpServer::State& s, const std::string& body, bool count_only) {
    const std::string problem = json_shape_problem(body, s.limits);
    std::string text = body;
    if (count_only && problem.empty()) {
        ojson j = ojson::parse(body, nullptr, false);
        if (j.is_object() && !j.contains("max_tokens")) {
            j["max_tokens"] = 1;
            text = detail::dump_json(j);
        }
    }
    auto translated = anthropic_to_chat_request(text, problem);
    if (auto* e = std::get_if<ApiError>(&translated)) return *e;
    ojson& chat = std::get<ojson>(translated);
    // Anthropic clients always send a model; a missing one means the served model.
    if (!chat.contains("model")) chat["model"] = s.model_name;
    return parse_chat_request(detail::dump_json(chat), s.limits);
}

} // namespace

// POST /v1/messages/count_tokens: {"input_tokens": N}, the prompt the same request would render.
void handle_anthropic_count_tokens(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    auto parsed = parse_messages_request(s, body, true);
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
    ChatRequest& r = std::get<ChatRequest>(parsed);
    if (r.common.model != s.model_name) return s.send_error(kEndpoint, unknown_model(r.common.model), res);
    auto prompt = s.render_chat(r.prompt);
    if (!prompt.ok()) return s.send_error(kEndpoint, from_status(prompt.status(), "messages"), res);
    s.metrics.count_request(kEndpoint, 200);
    res.set_content(ojson{{"input_tokens", prompt->size()}}.dump(), "application/json");
}

void handle_anthropic_messages(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    auto parsed = parse_messages_request(s, body, false);
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
    ChatRequest& r = std::get<ChatRequest>(parsed);
    ResponseMeta meta;
    int n_prompt = 0;
    if (auto gen = start_chat_generation(s, kEndpoint, "msg_", r, meta, n_prompt, res))
        std::make_shared<AnthropicResponder>(s, std::move(gen), meta, r.common.stream, n_prompt)->attach(res);
}

} // namespace deepinfer::server
