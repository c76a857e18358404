#include "server/responder.h"

#include "core/logging.h"
#include "server/json_fields.h"

namespace deepinfer::server {

Responder::Responder(HttpServer::State& s, std::string endpoint, std::unique_ptr<Generation> gen,
                     ResponseMeta meta, bool stream, bool include_usage, int prompt_tokens)
    : s_(s), endpoint_(std::move(endpoint)), gen_(std::move(gen)), meta_(std::move(meta)), stream_(stream),
      include_usage_(include_usage), prompt_tokens_(prompt_tokens), start_(std::chrono::steady_clock::now()),
      last_write_(start_), last_token_(gen_->num_choices()) {
    Backend* b = &s.backend;
    token_text_ = [b](int32_t t) { return b->token_text(t); };
}

std::unique_ptr<Generation> start_generation(HttpServer::State& s, const char* endpoint,
                                             const char* id_prefix, GenerationSpec spec, int prompt_tokens,
                                             ResponseMeta& meta, httplib::Response& res) {
    if (!s.admit(endpoint, res)) return nullptr;
    meta = ResponseMeta{s.new_id(id_prefix), 0, s.model_name};
    auto gen = std::make_unique<Generation>(s.backend, meta.id, std::move(spec));
    if (core::Status st = gen->start(); !st.ok()) {
        s.release();
        s.send_error(endpoint, from_status(st), res);
        return nullptr;
    }
    meta.created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    s.metrics.add_prompt_tokens(prompt_tokens);
    return gen;
}

void Responder::attach(httplib::Response& res) {
    auto self = shared_from_this();
    const char* type = stream_ ? "text/event-stream" : "application/json; charset=utf-8";
    if (stream_) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        type, [self](size_t, httplib::DataSink& sink) { return self->step(sink); },
        [self](bool success) { self->on_release(success); });
}

Usage Responder::usage() const {
    Usage u;
    u.prompt_tokens = prompt_tokens_;
    for (int i = 0; i < gen_->num_choices(); ++i) {
        u.completion_tokens += gen_->pipeline(i).completion_tokens();
        u.reasoning_tokens += gen_->pipeline(i).reasoning_tokens();
    }
    for (int p = 0; p < gen_->num_prompts(); ++p) u.cached_tokens += gen_->cached_tokens(p);
    return u;
}

std::string Responder::error_event() const {
    return sse_event(json::parse(from_status(error_).to_json()));
}

std::string Responder::openai_finale(const std::function<json()>& body, const char* chunk_object) {
    if (!stream_) return error_.ok() ? detail::dump_json(body()) : from_status(error_).to_json();
    std::string buf = error_.ok() ? std::string() : error_event();
    if (include_usage_) buf += sse_event(usage_chunk_json(meta_, chunk_object, usage()));
    return buf + sse_done();
}

bool Responder::step(httplib::DataSink& sink) {
    std::string buf;
    if (!started_) {
        started_ = true;
        buf = prelude();
    }
    auto outs = gen_->poll(std::chrono::milliseconds(std::min(s_.config.heartbeat_ms, 100)));
    auto now = std::chrono::steady_clock::now();
    for (auto& [i, out] : outs) {
        if (out.new_tokens > 0) {
            s_.metrics.add_generation_tokens(out.new_tokens);
            if (!first_token_seen_) {
                first_token_seen_ = true;
                s_.metrics.observe_ttft(std::chrono::duration<double>(now - start_).count());
            } else if (last_token_[i] != std::chrono::steady_clock::time_point()) {
                s_.metrics.observe_inter_token(std::chrono::duration<double>(now - last_token_[i]).count());
            }
            last_token_[i] = now;
        }
        if (!out.error.ok() && error_.ok()) error_ = out.error;
        if (out.finish_reason) s_.metrics.finished(*out.finish_reason);
        on_output(i, out, buf);
    }
    if (s_.cut && !gen_->done()) { // the server's drain timed out: end with an error now
        gen_->abort_all();
        if (error_.ok()) error_ = core::unavailable("the server is shutting down (drain timeout reached)");
    }
    if (gen_->done() || s_.cut) {
        buf += finale();
        completed_ = true;
        if (!sink.write(buf.data(), buf.size())) return false;
        sink.done();
        return true;
    }
    if (buf.empty() && now - last_write_ >= std::chrono::milliseconds(s_.config.heartbeat_ms)) {
        buf = stream_ ? ": keep-alive\n\n" : " ";
    }
    if (!buf.empty()) {
        last_write_ = now;
        if (!sink.write(buf.data(), buf.size())) {
            gen_->abort_all(); // the client went away
            return false;
        }
    }
    return true;
}

void Responder::on_release(bool success) {
    gen_->abort_all();
    bool ok = success && completed_;
    s_.metrics.count_request(endpoint_, ok ? 200 : 499);
    if (ok) {
        s_.metrics.observe_e2e(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    } else {
        DI_LOG(Info) << meta_.id << ": client disconnected; request aborted";
    }
    s_.release();
}

} // namespace deepinfer::server
