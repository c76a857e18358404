#include "server/generation.h"

namespace deepinfer::server {

ChoicePipeline::ChoicePipeline(const Backend& backend, std::vector<std::string> stops, bool chat,
                               ParserOptions parser)
    : detok_(backend.new_detokenizer()), stop_(std::move(stops)) {
    if (chat) parser_ = backend.new_output_parser(parser);
}

void ChoicePipeline::emit(const std::string& text, ChoiceOutput& out) {
    if (text.empty()) return;
    if (!parser_) {
        out.text += text;
        return;
    }
    ParsedDelta d = parser_->push(text);
    out.parsed.reasoning += d.reasoning;
    out.parsed.content += d.content;
    for (auto& tc : d.tool_calls) out.parsed.tool_calls.push_back(std::move(tc));
}

void ChoicePipeline::finish(FinishReason reason, ChoiceOutput& out) {
    finished_ = true;
    emit(stop_.push(detok_->flush()), out);
    emit(stop_.flush(), out);
    if (parser_) {
        ParsedDelta d = parser_->finish(reason == FinishReason::kLength);
        out.parsed.reasoning_was_content = d.reasoning_was_content;
        out.parsed.reasoning += d.reasoning;
        out.parsed.content += d.content;
        for (auto& tc : d.tool_calls) out.parsed.tool_calls.push_back(std::move(tc));
    }
    if (!out.parsed.tool_calls.empty()) saw_tool_call_ = true;
    switch (reason) {
    case FinishReason::kNone:
    case FinishReason::kStop:
        out.finish_reason = saw_tool_call_ ? "tool_calls" : "stop";
        break;
    case FinishReason::kLength:
        out.finish_reason = "length";
        break;
    case FinishReason::kAbort:
        out.finish_reason = "abort";
        break;
    case FinishReason::kError:
        out.finish_reason = "error";
        break;
    }
}

ChoiceOutput ChoicePipeline::push(const GenerationDelta& delta) {
    ChoiceOutput out;
    if (finished_) return out;
    if (delta.finish == FinishReason::kError) {
        out.error = delta.error.ok() ? core::internal_error("engine failed the request") : delta.error;
        finish(FinishReason::kError, out);
        return out;
    }
    for (size_t i = 0; i < delta.tokens.size() && !stop_.stopped(); ++i) {
        ++completion_tokens_;
        ++out.new_tokens;
        if (i < delta.logprobs.size()) out.logprobs.push_back(delta.logprobs[i]);
        size_t reasoning_before = out.parsed.reasoning.size();
        size_t other_before = out.parsed.content.size() + out.parsed.tool_calls.size();
        emit(stop_.push(detok_->push(delta.tokens[i])), out);
        if (out.parsed.reasoning.size() > reasoning_before &&
            out.parsed.content.size() + out.parsed.tool_calls.size() == other_before) {
            ++reasoning_tokens_;
        }
    }
    if (!out.parsed.tool_calls.empty()) saw_tool_call_ = true;
    if (stop_.stopped()) {
        out.stop_sequence = stop_.matched();
        finish(FinishReason::kStop, out);
    } else if (delta.finish != FinishReason::kNone) {
        finish(delta.finish, out);
    }
    return out;
}

Generation::Generation(Backend& backend, std::string request_id, std::vector<ChoiceSpec> choices,
                       std::vector<std::string> stops, bool chat, ParserOptions parser)
    : backend_(backend), request_id_(std::move(request_id)), specs_(std::move(choices)),
      channel_(std::make_shared<Channel>()) {
    for (size_t i = 0; i < specs_.size(); ++i) {
        pipelines_.push_back(std::make_unique<ChoicePipeline>(backend_, stops, chat, parser));
    }
    prompt_tokens_.assign(specs_.size(), 0);
    cached_tokens_.assign(specs_.size(), 0);
    engine_done_.assign(specs_.size(), true);
    remaining_ = static_cast<int>(specs_.size());
}

Generation::~Generation() {
    abort_all();
}

core::Status Generation::start() {
    for (size_t i = 0; i < specs_.size(); ++i) {
        ChoiceSpec& spec = specs_[i];
        prompt_tokens_[i] = static_cast<int>(spec.prompt.size());
        if (!spec.forced_output.empty()) {
            // Test hook: replay the given text's tokens as if the engine had sampled them.
            DI_ASSIGN_OR_RETURN(auto forced, backend_.tokenize(spec.forced_output));
            std::lock_guard<std::mutex> lock(channel_->mu);
            int limit = spec.sampling.max_tokens;
            for (size_t t = 0; t < forced.size() && static_cast<int>(t) < limit; ++t) {
                GenerationDelta d;
                d.tokens = {forced[t]};
                d.prompt_tokens = prompt_tokens_[i];
                if (spec.sampling.top_logprobs >= 0)
                    d.logprobs.push_back({forced[t], 0.0, {{forced[t], 0.0}}});
                channel_->items.push_back({static_cast<int>(i), std::move(d)});
            }
            GenerationDelta last;
            last.finish =
                static_cast<int>(forced.size()) > limit ? FinishReason::kLength : FinishReason::kStop;
            channel_->items.push_back({static_cast<int>(i), std::move(last)});
            continue;
        }
        GenerationRequest req;
        req.id = request_id_ + "-" + std::to_string(i);
        req.prompt_tokens = spec.prompt;
        req.sampling = spec.sampling;
        std::weak_ptr<Channel> weak = channel_;
        int index = static_cast<int>(i);
        engine_done_[i] = false;
        core::Status st = backend_.submit(std::move(req), [weak, index](GenerationDelta d) {
            if (auto ch = weak.lock()) {
                {
                    std::lock_guard<std::mutex> lock(ch->mu);
                    ch->items.push_back({index, std::move(d)});
                }
                ch->cv.notify_one();
            }
        });
        if (!st.ok()) {
            engine_done_[i] = true;
            abort_all();
            return st;
        }
    }
    return core::Status();
}

std::vector<std::pair<int, ChoiceOutput>> Generation::poll(std::chrono::milliseconds timeout) {
    std::deque<ChannelItem> items;
    {
        std::unique_lock<std::mutex> lock(channel_->mu);
        channel_->cv.wait_for(lock, timeout, [&] { return !channel_->items.empty(); });
        items.swap(channel_->items);
    }
    std::vector<std::pair<int, ChoiceOutput>> outs;
    for (auto& item : items) {
        int i = item.choice;
        if (item.delta.finish != FinishReason::kNone) engine_done_[i] = true;
        if (item.delta.prompt_tokens > 0) {
            prompt_tokens_[i] = item.delta.prompt_tokens;
            cached_tokens_[i] = item.delta.cached_prompt_tokens;
        }
        ChoicePipeline& p = *pipelines_[i];
        if (p.finished()) continue;
        ChoiceOutput out = p.push(item.delta);
        if (p.finished()) {
            --remaining_;
            if (!engine_done_[i]) { // a stop string ended it: free the engine's slot and KV now
                backend_.abort(request_id_ + "-" + std::to_string(i));
                engine_done_[i] = true;
            }
        }
        outs.emplace_back(i, std::move(out));
    }
    return outs;
}

void Generation::abort_all() {
    for (size_t i = 0; i < engine_done_.size(); ++i) {
        if (!engine_done_[i]) {
            backend_.abort(request_id_ + "-" + std::to_string(i));
            engine_done_[i] = true;
        }
    }
}

} // namespace deepinfer::server
