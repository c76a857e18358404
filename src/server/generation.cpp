#include "server/generation.h"

#include <algorithm>

namespace deepinfer::server {

ChoicePipeline::ChoicePipeline(const Backend& backend, std::vector<std::string> stops, bool chat,
                               ParserOptions parser, bool include_stop)
    : detok_(backend.new_detokenizer()), stop_(std::move(stops), include_stop) {
    if (chat) parser_ = backend.new_output_parser(parser);
}

namespace {
void append(ParsedDelta& to, ParsedDelta d) {
    to.reasoning += d.reasoning;
    to.content += d.content;
    for (auto& tc : d.tool_calls) to.tool_calls.push_back(std::move(tc));
    to.reasoning_was_content = to.reasoning_was_content || d.reasoning_was_content;
}
} // namespace

void ChoicePipeline::emit(const std::string& text, ChoiceOutput& out) {
    if (text.empty()) return;
    if (parser_) {
        append(out.parsed, parser_->push(text));
    } else {
        out.text += text;
    }
}

void ChoicePipeline::finish(std::string_view reason, ChoiceOutput& out) {
    finished_ = true;
    emit(stop_.push(detok_->flush()), out);
    emit(stop_.flush(), out);
    if (parser_) append(out.parsed, parser_->finish(reason == "length"));
    if (!out.parsed.tool_calls.empty()) saw_tool_call_ = true;
    out.finish_reason = reason == "stop" && saw_tool_call_ ? "tool_calls" : std::string(reason);
}

ChoiceOutput ChoicePipeline::fail(core::Status error) {
    ChoiceOutput out;
    if (finished_) return out;
    out.error = error.ok() ? core::internal_error("engine failed the request") : std::move(error);
    finish("error", out);
    return out;
}

ChoiceOutput ChoicePipeline::push(std::span<const int32_t> tokens,
                                  std::span<const engine::TokenLogprob> logprobs,
                                  std::optional<engine::FinishReason> reason) {
    ChoiceOutput out;
    if (finished_) return out;
    for (size_t i = 0; i < tokens.size() && !stop_.stopped(); ++i) {
        ++completion_tokens_;
        ++out.new_tokens;
        if (i < logprobs.size()) out.logprobs.push_back(logprobs[i]);
        size_t reasoning_before = out.parsed.reasoning.size();
        size_t other_before = out.parsed.content.size() + out.parsed.tool_calls.size();
        emit(stop_.push(detok_->push(tokens[i])), out);
        if (out.parsed.reasoning.size() > reasoning_before &&
            out.parsed.content.size() + out.parsed.tool_calls.size() == other_before) {
            ++reasoning_tokens_;
        }
    }
    if (!out.parsed.tool_calls.empty()) saw_tool_call_ = true;
    if (stop_.stopped()) {
        out.stop_sequence = stop_.matched();
        finish("stop", out);
    } else if (reason) {
        finish(engine::finish_reason_name(*reason), out);
    }
    return out;
}

Generation::Generation(Backend& backend, std::string request_id, GenerationSpec spec)
    : backend_(backend), request_id_(std::move(request_id)), spec_(std::move(spec)),
      n_(std::max<int>(1, spec_.params.n)), channel_(std::make_shared<Channel>()) {
    const size_t choices = spec_.prompts.size() * static_cast<size_t>(n_);
    for (size_t i = 0; i < choices; ++i) {
        pipelines_.push_back(std::make_unique<ChoicePipeline>(backend_, spec_.stops, spec_.chat, spec_.parser,
                                                              spec_.include_stop_str));
    }
    cached_tokens_.assign(spec_.prompts.size(), 0);
    prompt_logprobs_.resize(spec_.prompts.size());
    engine_done_.assign(spec_.prompts.size(), true);
    remaining_ = static_cast<int>(choices);
}

Generation::~Generation() {
    abort_all();
}

// Test hook: the given text's tokens replayed for every choice as if the engine had sampled them.
void Generation::replay_forced(int prompt, const std::vector<int32_t>& forced) {
    const int limit = spec_.params.max_tokens.value_or(16);
    engine::RequestOutput out;
    out.request_id = engine_id(prompt);
    out.prompt_tokens = static_cast<int32_t>(spec_.prompts[prompt].size());
    out.finished = true;
    for (int c = 0; c < n_; ++c) {
        engine::CompletionDelta& d = out.deltas.emplace_back();
        d.index = c;
        const size_t take = std::min<size_t>(forced.size(), static_cast<size_t>(limit));
        d.token_ids.assign(forced.begin(), forced.begin() + static_cast<std::ptrdiff_t>(take));
        if (spec_.params.logprobs) {
            for (int32_t t : d.token_ids) d.logprobs.push_back({t, 0.0f, 1, {{t, 0.0f}}});
        }
        d.finish_reason = forced.size() > take ? engine::FinishReason::kLength : engine::FinishReason::kStop;
    }
    std::lock_guard<std::mutex> lock(channel_->mu);
    channel_->items.push_back({prompt, std::move(out)});
}

core::Status Generation::start() {
    std::vector<int32_t> forced;
    if (!spec_.forced_output.empty()) {
        DI_ASSIGN_OR_RETURN(forced, backend_.tokenize(spec_.forced_output));
    }
    for (size_t p = 0; p < spec_.prompts.size(); ++p) {
        const int prompt = static_cast<int>(p);
        if (!spec_.forced_output.empty()) {
            replay_forced(prompt, forced);
            continue;
        }
        engine::Request req;
        req.id = engine_id(prompt);
        req.prompt_ids = spec_.prompts[p];
        req.params = spec_.params;
        req.params.n = n_;
        std::weak_ptr<Channel> weak = channel_;
        engine_done_[p] = false;
        core::Status st =
            backend_.submit(std::move(req), spec_.constraint, [weak, prompt](const engine::RequestOutput& o) {
                if (auto ch = weak.lock()) {
                    {
                        std::lock_guard<std::mutex> lock(ch->mu);
                        ch->items.push_back({prompt, o});
                    }
                    ch->cv.notify_one();
                }
            });
        if (!st.ok()) {
            engine_done_[p] = true;
            abort_all();
            return st;
        }
    }
    return core::Status();
}

std::vector<std::pair<int, ChoiceOutput>> Generation::poll(std::chrono::milliseconds timeout) {
    std::deque<Item> items;
    {
        std::unique_lock<std::mutex> lock(channel_->mu);
        channel_->cv.wait_for(lock, timeout, [&] { return !channel_->items.empty(); });
        items.swap(channel_->items);
    }
    std::vector<std::pair<int, ChoiceOutput>> outs;
    auto record = [&](int choice, ChoiceOutput out) {
        if (pipelines_[choice]->finished()) --remaining_;
        outs.emplace_back(choice, std::move(out));
    };
    for (auto& [p, out] : items) {
        if (out.prompt_tokens > 0) cached_tokens_[p] = out.cached_tokens;
        if (out.prompt_logprobs) prompt_logprobs_[p] = std::move(*out.prompt_logprobs);
        if (out.finished) engine_done_[p] = true;
        const bool failed = !out.status.ok();
        for (const auto& d : out.deltas) {
            if (d.index < 0 || d.index >= n_) continue;
            const int i = p * n_ + d.index;
            if (pipelines_[i]->finished()) continue;
            // A failed request's tokens still count; the choice then ends with the error below.
            record(i, pipelines_[i]->push(d.token_ids, d.logprobs, failed ? std::nullopt : d.finish_reason));
        }
        if (out.finished) { // choices the engine ended without a reason (an abort or an error)
            for (int c = 0; c < n_; ++c) {
                const int i = p * n_ + c;
                if (pipelines_[i]->finished()) continue;
                record(i, failed ? pipelines_[i]->fail(out.status)
                                 : pipelines_[i]->push({}, {}, engine::FinishReason::kAbort));
            }
        }
        if (!engine_done_[p]) { // stop strings ended every choice: free the engine's slots and KV now
            bool all = true;
            for (int c = 0; c < n_; ++c) all = all && pipelines_[p * n_ + c]->finished();
            if (all) {
                backend_.abort(engine_id(p));
                engine_done_[p] = true;
            }
        }
    }
    return outs;
}

void Generation::abort_all() {
    for (size_t p = 0; p < engine_done_.size(); ++p) {
        if (!engine_done_[p]) {
            backend_.abort(engine_id(static_cast<int>(p)));
            engine_done_[p] = true;
        }
    }
}

} // namespace deepinfer::server
