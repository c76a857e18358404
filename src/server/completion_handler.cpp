// POST /v1/completions: raw prompts, no chat template.

#include "server/json_fields.h"
#include "server/responder.h"

namespace deepinfer::server {

namespace {

const char* kEndpoint = "/v1/completions";

class CompletionResponder : public Responder {
public:
    CompletionResponder(HttpServer::State& s, std::unique_ptr<Generation> gen, ResponseMeta meta,
                        const CompletionRequest& r, int prompt_tokens)
        : Responder(s, kEndpoint, std::move(gen), std::move(meta), r.common.stream, r.common.include_usage,
                    prompt_tokens),
          logprobs_(r.common.sampling.top_logprobs >= 0), results_(gen_->num_choices()),
          offsets_(gen_->num_choices(), 0) {
        for (int i = 0; i < gen_->num_choices(); ++i) prompt_of_choice_[i] = i / r.common.n;
    }

protected:
    void on_output(int i, ChoiceOutput& out, std::string& buf) override {
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
            offsets_[i] += out.text.size();
            buf += sse_event(text_chunk_json(meta_, i, out.text, std::nullopt, lp));
        }
        if (finish) buf += sse_event(text_chunk_json(meta_, i, "", finish, nullptr));
    }

    std::string finale() override {
        if (!stream_) {
            if (!error_.ok()) return from_status(error_).to_json();
            return detail::dump_json(text_completion_json(meta_, results_, usage(), logprobs_, token_text()));
        }
        std::string buf;
        if (!error_.ok()) buf += error_event();
        if (include_usage_) buf += sse_event(usage_chunk_json(meta_, "text_completion", usage()));
        return buf + sse_done();
    }

private:
    bool logprobs_;
    std::vector<TextChoiceResult> results_;
    std::vector<size_t> offsets_;
};

} // namespace

void handle_completion(HttpServer::State& s, const std::string& body, httplib::Response& res) {
    auto parsed = parse_completion_request(body, s.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return s.send_error(kEndpoint, *e, res);
    CompletionRequest& r = std::get<CompletionRequest>(parsed);
    if (r.common.model != s.model_name) return s.send_error(kEndpoint, unknown_model(r.common.model), res);
    if (!r.common.forced_output.empty() && !s.config.enable_test_hooks) {
        return s.send_error(kEndpoint, invalid_param("deepinfer_test", "test hooks are disabled"), res);
    }
    if (const OutputConstraint& c = r.common.sampling.constraint; c.kind != OutputConstraint::Kind::kNone) {
        if (core::Status st = s.backend.check_constraint(c); !st.ok()) {
            return s.send_error(
                kEndpoint,
                st.code() == core::StatusCode::kInvalidArgument
                    ? invalid_param(c.field, "'" + c.field + "' cannot be enforced: " + st.message())
                    : from_status(st, c.field),
                res);
        }
    }
    SamplingOptions& sp = r.common.sampling;
    std::vector<std::vector<int32_t>> prompts;
    int total_prompt = 0;
    for (auto& p : r.prompts) {
        std::vector<int32_t> ids;
        if (auto* text = std::get_if<std::string>(&p)) {
            auto tok = s.backend.tokenize(*text);
            if (!tok.ok()) return s.send_error(kEndpoint, from_status(tok.status(), "prompt"), res);
            ids = std::move(tok).value();
        } else {
            ids = std::get<std::vector<int32_t>>(p);
        }
        int n_prompt = static_cast<int>(ids.size());
        if (n_prompt == 0)
            return s.send_error(kEndpoint, invalid_param("prompt", "'prompt' must not be empty"), res);
        // One max_tokens for every prompt: the smallest any of them allows (unset: OpenAI's 16 at most).
        int max_tokens = r.common.sampling.max_tokens;
        if (auto e = s.resolve_max_tokens(n_prompt, "prompt", r.common.max_tokens_set, 16, max_tokens))
            return s.send_error(kEndpoint, *e, res);
        sp.max_tokens = prompts.empty() ? max_tokens : std::min(sp.max_tokens, max_tokens);
        total_prompt += n_prompt;
        prompts.push_back(std::move(ids));
    }
    if (!s.admit(kEndpoint, res)) return;
    std::vector<ChoiceSpec> specs;
    for (const auto& ids : prompts) {
        for (int i = 0; i < r.common.n; ++i) {
            ChoiceSpec spec{ids, sp, r.common.forced_output};
            if (sp.seed) spec.sampling.seed = *sp.seed + static_cast<uint64_t>(i);
            specs.push_back(std::move(spec));
        }
    }
    ResponseMeta meta{s.new_id("cmpl-"), 0, s.model_name};
    auto gen = std::make_unique<Generation>(s.backend, meta.id, std::move(specs), r.common.stop, false,
                                            ParserOptions{});
    if (core::Status st = gen->start(); !st.ok()) {
        s.release();
        return s.send_error(kEndpoint, from_status(st), res);
    }
    meta.created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    s.metrics.add_prompt_tokens(total_prompt);
    std::make_shared<CompletionResponder>(s, std::move(gen), meta, r, total_prompt)->attach(res);
}

} // namespace deepinfer::server
