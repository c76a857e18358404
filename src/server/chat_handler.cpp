// POST /v1/chat/completions.

#include <set>

#include "server/json_fields.h"
#include "server/responder.h"

namespace deepinfer::server {

namespace {

const char* kEndpoint = "/v1/chat/completions";

class ChatResponder : public Responder {
public:
    ChatResponder(HttpServer::State& s, std::unique_ptr<Generation> gen, ResponseMeta meta,
                  const ChatRequest& r, int prompt_tokens)
        : Responder(s, kEndpoint, std::move(gen), std::move(meta), r.common.stream, r.common.include_usage,
                    prompt_tokens),
          logprobs_(r.logprobs), results_(gen_->num_choices()), seen_calls_(gen_->num_choices()) {}

protected:
    std::string prelude() override {
        if (!stream_) return {};
        std::string buf;
        for (int i = 0; i < gen_->num_choices(); ++i) {
            buf += sse_event(chat_chunk_json(meta_, i, chat_delta_json({}, true), std::nullopt, nullptr));
        }
        return buf;
    }

    void on_output(int i, ChoiceOutput& out, std::string& buf) override {
        for (auto& tc : out.parsed.tool_calls) { // the server names calls the parser left unnamed
            if (seen_calls_[i].insert(tc.index).second && tc.id.empty()) {
                tc.id = "call_" + meta_.id.substr(meta_.id.find('-') + 1) + "_" + std::to_string(i) + "_" +
                        std::to_string(tc.index);
            }
        }
        std::optional<std::string> finish = out.finish_reason;
        if (finish && (*finish == "abort" || *finish == "error")) finish = "stop";
        if (!stream_) {
            results_[i].merge(out.parsed);
            for (auto& lp : out.logprobs) results_[i].logprobs.push_back(std::move(lp));
            if (finish) results_[i].finish_reason = *finish;
            return;
        }
        if (!out.parsed.empty() || (logprobs_ && !out.logprobs.empty())) {
            json lp = logprobs_ ? chat_logprobs_json(out.logprobs, token_text()) : json(nullptr);
            buf += sse_event(chat_chunk_json(meta_, i, chat_delta_json(out.parsed, false), std::nullopt, lp));
        }
        if (finish) buf += sse_event(chat_chunk_json(meta_, i, json::object(), finish, nullptr));
    }

    std::string finale() override {
        return openai_finale(
            [&] { return chat_completion_json(meta_, results_, usage(), logprobs_, token_text()); },
            "chat.completion.chunk");
    }

private:
    bool logprobs_;
    std::vector<ChatChoiceResult> results_;
    std::vector<std::set<int>> seen_calls_;
};

} // namespace

std::unique_ptr<Generation> start_chat_generation(HttpServer::State& s, const char* endpoint,
                                                  const char* id_prefix, ChatRequest& r, ResponseMeta& meta,
                                                  int& n_prompt, httplib::Response& res) {
    auto fail = [&](const ApiError& e) {
        s.send_error(endpoint, e, res);
        return nullptr;
    };
    if (auto e = s.check_request(r.common)) return fail(*e);
    auto prompt = s.render_chat(r.prompt);
    if (!prompt.ok()) return fail(from_status(prompt.status(), "messages"));
    n_prompt = static_cast<int>(prompt->size());
    int max_tokens = 0;
    if (auto e = s.resolve_max_tokens(n_prompt, "messages", r.common.sampling.max_tokens, std::nullopt,
                                      max_tokens))
        return fail(*e);
    GenerationSpec spec;
    spec.params = r.common.sampling;
    spec.params.max_tokens = max_tokens;
    spec.prompts.push_back(std::move(prompt).value());
    spec.constraint = std::move(r.common.constraint);
    spec.stops = r.common.stop;
    spec.include_stop_str = r.common.include_stop_str_in_output;
    spec.chat = true;
    spec.parser.thinking = r.prompt.thinking;
    spec.parser.parse_tools = r.prompt.has_tools() && r.prompt.tool_choice != "none";
    if (spec.parser.parse_tools && r.prompt.tool_choice == "auto")
        spec.parser.validate_tools = r.prompt.conversation.tools;
    spec.forced_output = r.common.forced_output;
    return start_generation(s, endpoint, id_prefix, std::move(spec), n_prompt, meta, res);
}

void handle_chat(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    auto parsed = parse_chat_request(body, s.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
    ChatRequest& r = std::get<ChatRequest>(parsed);
    ResponseMeta meta;
    int n_prompt = 0;
    if (auto gen = start_chat_generation(s, kEndpoint, "chatcmpl-", r, meta, n_prompt, res))
        std::make_shared<ChatResponder>(s, std::move(gen), meta, r, n_prompt)->attach(res);
}

} // namespace deepinfer::server
