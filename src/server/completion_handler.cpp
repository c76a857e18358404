// POST /v1/completions: raw prompts, no chat template.

#include "server/json_fields.h"
#include "server/responder.h"

namespace deepinfer::server {

namespace {

const char* kEndpoint = "/v1/completions";

class CompletionResponder : public Responder {
public:
    CompletionResponder(HttpServer::State& s, std::unique_ptr<Generation> gen, ResponseMeta meta,
                        const CompletionRequest& r, int prompt_tokens, std::vector<std::string> echo_text)
        : Responder(s, kEndpoint, std::move(gen), std::move(meta), r.common.stream, r.common.include_usage,
                    prompt_tokens),
          logprobs_(r.common.sampling.logprobs.has_value()), echo_(r.echo), prompt_lp_(r.prompt_logprobs),
          echo_text_(std::move(echo_text)), prompts_(gen_->num_prompts()), results_(gen_->num_choices()),
          offsets_(gen_->num_choices(), 0), begun_(gen_->num_choices(), false) {}

protected:
    void on_output(int i, ChoiceOutput& out, std::string& buf) override {
        if (!begun_[i]) begin(i, buf);
        std::optional<std::string> finish = out.finish_reason;
        if (finish && (*finish == "abort" || *finish == "error" || *finish == "tool_calls")) finish = "stop";
        if (!stream_) {
            results_[i].text += out.text;
            for (auto& lp : out.logprobs) results_[i].logprobs.push_back(std::move(lp));
            if (finish) results_[i].finish_reason = *finish;
            return;
        }
        if (!out.text.empty() || (logprobs_ && !out.logprobs.empty())) {
            json lp = logprobs_ ? text_logprobs_json(out.logprobs, token_text(), offsets_[i]) : json(nullptr);
            offsets_[i] += utf8_chars(out.text);
            buf += sse_event(text_chunk_json(meta_, i, out.text, std::nullopt, lp));
        }
        if (finish) buf += sse_event(text_chunk_json(meta_, i, "", finish, nullptr));
    }

    // A choice's first output: the echoed prompt (and its logprobs) goes first. The engine sent the prompt's
    // logprobs with its first output, so Generation has them by now.
    void begin(int i, std::string& buf) {
        begun_[i] = true;
        const int p = gen_->prompt_of(i);
        EchoedPrompt& prompt = prompts_[p];
        if (prompt.ids.empty()) {
            prompt.ids = gen_->prompt(p);
            prompt.logprobs = gen_->prompt_logprobs(p);
        }
        const std::string& echo = echo_ ? echo_text_[p] : std::string();
        if (!stream_) {
            results_[i].text = echo;
            if (echo_ && logprobs_) results_[i].echo = &prompt;
            if (prompt_lp_) results_[i].prompt_logprobs = &prompt;
            return;
        }
        if (!echo_ && !prompt_lp_) return;
        json lp = echo_ && logprobs_ ? text_logprobs_json({}, token_text(), 0, &prompt) : json(nullptr);
        json chunk = text_chunk_json(meta_, i, echo, std::nullopt, std::move(lp));
        if (prompt_lp_) chunk["choices"][0]["prompt_logprobs"] = prompt_logprobs_json(prompt, token_text());
        buf += sse_event(chunk);
        offsets_[i] = utf8_chars(echo);
    }

    std::string finale() override {
        return openai_finale(
            [&] { return text_completion_json(meta_, results_, usage(), logprobs_, token_text()); },
            "text_completion");
    }

private:
    bool logprobs_;
    bool echo_;
    bool prompt_lp_;
    std::vector<std::string> echo_text_; // per prompt
    std::vector<EchoedPrompt> prompts_;  // per prompt, filled by the first output of its choices
    std::vector<TextChoiceResult> results_;
    std::vector<size_t> offsets_; // characters sent so far per choice (text_offset)
    std::vector<bool> begun_;
};

} // namespace

void handle_completion(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    auto parsed = parse_completion_request(body, s.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
    CompletionRequest& r = std::get<CompletionRequest>(parsed);
    if (auto e = s.check_request(r.common)) return s.send_error(kEndpoint, *e, res);
    GenerationSpec spec;
    spec.params = r.common.sampling;
    int total_prompt = 0;
    std::vector<std::string> echo_text; // per prompt, with echo: its text as given, or its ids decoded
    for (auto& p : r.prompts) {
        std::vector<int32_t> ids;
        if (auto* text = std::get_if<std::string>(&p)) {
            auto tok = s.tokenize(*text);
            if (!tok.ok()) return s.send_error(kEndpoint, from_status(tok.status(), "prompt"), res);
            ids = std::move(tok).value();
            if (r.echo) echo_text.push_back(*text);
        } else {
            ids = std::get<std::vector<int32_t>>(p);
            if (r.echo) {
                auto detok = s.backend.new_detokenizer();
                std::string& t = echo_text.emplace_back();
                for (int32_t id : ids) t += detok->push(id);
                t += detok->flush();
            }
        }
        int n_prompt = static_cast<int>(ids.size());
        if (n_prompt == 0)
            return s.send_error(kEndpoint, invalid_param("prompt", "'prompt' must not be empty"), res);
        // One max_tokens for every prompt: the smallest any of them allows (unset: OpenAI's 16 at most).
        int max_tokens = 0;
        if (auto e = s.resolve_max_tokens(n_prompt, "prompt", r.common.sampling.max_tokens, 16, max_tokens))
            return s.send_error(kEndpoint, *e, res);
        spec.params.max_tokens =
            spec.prompts.empty() ? max_tokens : std::min(*spec.params.max_tokens, max_tokens);
        total_prompt += n_prompt;
        spec.prompts.push_back(std::move(ids));
    }
    spec.constraint = std::move(r.common.constraint);
    spec.stops = r.common.stop;
    spec.include_stop_str = r.common.include_stop_str_in_output;
    spec.forced_output = r.common.forced_output;
    ResponseMeta meta;
    if (auto gen = start_generation(s, kEndpoint, "cmpl-", std::move(spec), total_prompt, meta, res)) {
        std::make_shared<CompletionResponder>(s, std::move(gen), meta, r, total_prompt, std::move(echo_text))
            ->attach(res);
    }
}

} // namespace deepinfer::server
