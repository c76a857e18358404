#include "tokenizer/dsml_parser.h"
#include "tokenizer/json_text.h"

#include <array>
#include <cstdio>

namespace deepinfer::tokenizer {

namespace {

// Each DSML marker in its fullwidth (trained) and ASCII spelling.
using Spellings = std::array<std::string_view, 2>;
constexpr std::string_view kThinkEndMarker = "</think>";
constexpr Spellings kToolStart = {"<｜DSML｜tool_calls>", "<|DSML|tool_calls>"};
// Any other DSML tag in text also starts the tool region (nothing after it is shown as text).
constexpr Spellings kDsmlTag = {"<｜DSML｜", "<|DSML|"};
constexpr Spellings kToolEnd = {"</｜DSML｜tool_calls>", "</|DSML|tool_calls>"};
constexpr Spellings kInvokeStart = {"<｜DSML｜invoke name=\"", "<|DSML|invoke name=\""};
constexpr Spellings kInvokeEnd = {"</｜DSML｜invoke>", "</|DSML|invoke>"};
constexpr Spellings kParamStart = {"<｜DSML｜parameter name=\"", "<|DSML|parameter name=\""};
constexpr Spellings kParamEnd = {"</｜DSML｜parameter>", "</|DSML|parameter>"};

// A bare invoke name longer than this (or spanning lines) is prose, not a tool name.
constexpr std::size_t kMaxBareName = 256;

bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Length of the longest suffix of s that is a proper prefix of m.
std::size_t partial_suffix(std::string_view s, std::string_view m) {
    const std::size_t max = std::min(s.size(), m.size() - 1);
    for (std::size_t n = max; n > 0; --n)
        if (s.substr(s.size() - n) == m.substr(0, n)) return n;
    return 0;
}

enum class Starts { kNo, kYes, kMaybe };

// Does s start with one spelling of m (kYes, sets *len), or is s a proper prefix of one (kMaybe)?
Starts starts_with(std::string_view s, const Spellings& m, std::size_t* len) {
    Starts r = Starts::kNo;
    for (std::string_view sp : m) {
        if (s.substr(0, sp.size()) == sp) {
            *len = sp.size();
            return Starts::kYes;
        }
        if (s.size() < sp.size() && sp.substr(0, s.size()) == s) r = Starts::kMaybe;
    }
    return r;
}

std::string json_escape(std::string_view s) {
    std::string out;
    json_escape_append(s, out);
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool is_json_object(std::string_view s) {
    return !s.empty() && s.front() == '{' && Json::accept(s);
}

} // namespace

DsmlStreamParser::DsmlStreamParser(Options options)
    : opt_(options), state_(options.thinking ? State::kReasoning : State::kContent) {}

std::vector<ParseEvent> DsmlStreamParser::feed(std::string_view text) {
    std::vector<ParseEvent> ev;
    if (finished_) return ev;
    buf_.append(text);
    while (step(ev, false)) {
    }
    return ev;
}

void DsmlStreamParser::emit_text(std::vector<ParseEvent>& ev, std::string_view s) {
    if (at_segment_start_) {
        std::size_t i = 0;
        while (i < s.size() && s[i] == '\n') ++i;
        s.remove_prefix(i);
        if (s.empty()) return;
        at_segment_start_ = false;
    }
    if (s.empty()) return;
    const bool reasoning = state_ == State::kReasoning;
    (reasoning ? msg_.reasoning : msg_.content).append(s);
    ev.push_back(
        {reasoning ? ParseEventKind::kReasoningDelta : ParseEventKind::kContentDelta, std::string(s)});
}

void DsmlStreamParser::emit_args(std::vector<ParseEvent>& ev, std::string_view s) {
    if (s.empty()) return;
    if (holding_) {
        held_.append(s);
        return;
    }
    msg_.tool_calls[call_index_].arguments.append(s);
    ev.push_back({ParseEventKind::kToolCallArgsDelta, std::string(s), call_index_});
}

void DsmlStreamParser::close_call(std::vector<ParseEvent>& ev) {
    if (holding_ && wrapper_ && params_ == 1 && is_json_object(trim(held_raw_))) {
        // {"arguments": {...}} with nothing else: the inner object is the arguments.
        holding_ = wrapper_ = false;
        held_.clear();
        emit_args(ev, trim(held_raw_));
    } else {
        flush_held(ev);
        emit_args(ev, params_ == 0 ? "{}" : "}");
    }
    msg_.tool_calls[call_index_].complete = true;
    ev.push_back({ParseEventKind::kToolCallEnd, "", call_index_});
}

void DsmlStreamParser::flush_held(std::vector<ParseEvent>& ev) {
    if (!holding_) return;
    holding_ = wrapper_ = false;
    std::string h = std::move(held_);
    held_.clear();
    emit_args(ev, h);
}

void DsmlStreamParser::begin_call(std::vector<ParseEvent>& ev) {
    call_index_ = static_cast<int>(msg_.tool_calls.size());
    msg_.tool_calls.push_back({pending_name_, "", false});
    ev.push_back({ParseEventKind::kToolCallBegin, pending_name_, call_index_});
    call_pending_ = invoke_from_text_ = false;
    raw_.clear();
}

// The bare header was quoted prose: everything consumed since it is text again.
void DsmlStreamParser::invoke_was_prose(std::vector<ParseEvent>& ev) {
    state_ = text_state_;
    call_pending_ = invoke_from_text_ = false;
    std::string text = std::move(raw_);
    raw_.clear();
    emit_text(ev, text);
}

void DsmlStreamParser::consume(std::size_t n) {
    if (call_pending_ && invoke_from_text_) raw_.append(buf_, 0, n);
    buf_.erase(0, n);
}

// Reasoning or answer text: emit up to the first marker, holding back what could still become one.
bool DsmlStreamParser::step_text(std::vector<ParseEvent>& ev, bool final) {
    struct Found {
        std::size_t pos = std::string::npos, len = 0;
        int which = -1; // 0 think end, 1 tool block, 2 bare invoke, 3 other DSML tag (left in place)
    } f;
    auto consider = [&](std::string_view m, int which) {
        const std::size_t p = buf_.find(m);
        if (p != std::string::npos && p < f.pos) f = {p, m.size(), which};
    };
    consider(kThinkEndMarker, 0);
    if (opt_.parse_tool_calls) {
        for (auto m : kToolStart) consider(m, 1);
        for (auto m : kInvokeStart) consider(m, 2);
        for (auto m : kDsmlTag) consider(m, 3);
    }
    if (f.which < 0) {
        std::size_t hold = 0;
        if (!final) {
            hold = partial_suffix(buf_, kThinkEndMarker);
            if (opt_.parse_tool_calls) {
                for (auto m : kToolStart) hold = std::max(hold, partial_suffix(buf_, m));
                for (auto m : kInvokeStart) hold = std::max(hold, partial_suffix(buf_, m));
            }
            // Newlines right before a marker are dropped, so they wait too.
            while (hold < buf_.size() && buf_[buf_.size() - hold - 1] == '\n') ++hold;
        }
        emit_text(ev, std::string_view(buf_).substr(0, buf_.size() - hold));
        buf_.erase(0, buf_.size() - hold);
        return false;
    }
    std::size_t unused = 0;
    if (f.which == 3 && !final &&
        starts_with(std::string_view(buf_).substr(f.pos), kInvokeStart, &unused) == Starts::kMaybe) {
        // Maybe the start of a bare invoke (which is treated differently): wait for more text.
        std::string_view before = std::string_view(buf_).substr(0, f.pos);
        while (!before.empty() && before.back() == '\n') before.remove_suffix(1);
        emit_text(ev, before);
        buf_.erase(0, before.size());
        return false;
    }
    std::string_view before = std::string_view(buf_).substr(0, f.pos);
    const bool absorbed_think_end = f.which == 0 && state_ == State::kContent;
    if (!absorbed_think_end)
        while (!before.empty() && before.back() == '\n') before.remove_suffix(1);
    emit_text(ev, before);
    if (f.which == 2) {
        // A bare invoke: unconfirmed until a parameter, a JSON body or its end follows.
        call_pending_ = invoke_from_text_ = true;
        text_state_ = state_;
        raw_ = buf_.substr(before.size(), f.pos + f.len - before.size());
    }
    buf_.erase(0, f.which == 3 ? f.pos : f.pos + f.len);
    if (f.which == 0) {
        if (state_ == State::kReasoning) {
            state_ = State::kContent;
            saw_think_end_ = true;
            at_segment_start_ = true;
        }
    } else {
        state_ = f.which == 2 ? State::kInvokeName : State::kToolBlock;
        pending_name_.clear();
        params_ = 0;
    }
    return true;
}

bool DsmlStreamParser::step(std::vector<ParseEvent>& ev, bool final) {
    std::size_t len = 0;
    switch (state_) {
    case State::kReasoning:
    case State::kContent:
        return step_text(ev, final);
    case State::kDone:
        buf_.clear();
        return false;
    case State::kToolBlock:
    case State::kInvokeBody: {
        std::size_t i = 0;
        while (i < buf_.size() && is_space(buf_[i])) ++i;
        consume(i);
        if (buf_.empty()) return false;
        bool maybe = false;
        if (state_ == State::kInvokeBody) {
            switch (starts_with(buf_, kParamStart, &len)) {
            case Starts::kYes:
                if (call_pending_) begin_call(ev);
                consume(len);
                flush_held(ev);
                if (params_ == 0) {
                    // Held until the name shows whether this is an {"arguments": …} wrapper.
                    holding_ = true;
                    wrapper_ = false;
                    held_.clear();
                    held_raw_.clear();
                }
                param_name_.clear();
                emit_args(ev, params_ == 0 ? "{\"" : ", \"");
                state_ = State::kParamName;
                return true;
            case Starts::kMaybe:
                maybe = true;
                break;
            case Starts::kNo:
                break;
            }
            switch (starts_with(buf_, kInvokeEnd, &len)) {
            case Starts::kYes:
                if (call_pending_) begin_call(ev);
                consume(len);
                close_call(ev);
                state_ = State::kToolBlock;
                return true;
            case Starts::kMaybe:
                maybe = true;
                break;
            case Starts::kNo:
                break;
            }
            if (params_ == 0 && buf_[0] == '{') {
                json_body_.clear();
                state_ = State::kInvokeJson;
                return true;
            }
        } else {
            switch (starts_with(buf_, kToolStart, &len)) {
            case Starts::kYes:
                consume(len);
                return true;
            case Starts::kMaybe:
                maybe = true;
                break;
            case Starts::kNo:
                break;
            }
            switch (starts_with(buf_, kInvokeStart, &len)) {
            case Starts::kYes:
                consume(len);
                pending_name_.clear();
                params_ = 0;
                call_pending_ = true;
                state_ = State::kInvokeName;
                return true;
            case Starts::kMaybe:
                maybe = true;
                break;
            case Starts::kNo:
                break;
            }
        }
        switch (starts_with(buf_, kToolEnd, &len)) {
        case Starts::kYes:
            if (call_pending_) begin_call(ev);
            consume(len);
            if (state_ == State::kInvokeBody) close_call(ev);
            state_ = State::kDone;
            return true;
        case Starts::kMaybe:
            maybe = true;
            break;
        case Starts::kNo:
            break;
        }
        if (maybe && !final) return false;
        if (state_ == State::kInvokeBody && call_pending_ && invoke_from_text_) {
            invoke_was_prose(ev); // prose after a quoted header
            return true;
        }
        consume(1); // stray text between DSML elements is ignored
        return true;
    }
    case State::kInvokeName: {
        const std::size_t q = buf_.find('"');
        const std::string_view name_part = std::string_view(buf_).substr(0, q);
        if (invoke_from_text_ && (name_part.find('\n') != std::string_view::npos ||
                                  pending_name_.size() + name_part.size() > kMaxBareName)) {
            invoke_was_prose(ev); // not a tool name: quoted markup in prose
            return true;
        }
        if (q == std::string::npos) {
            pending_name_ += buf_;
            consume(buf_.size());
            return false;
        }
        const std::size_t gt = buf_.find('>', q);
        if (gt == std::string::npos) return false;
        pending_name_ += buf_.substr(0, q);
        consume(gt + 1);
        params_ = 0;
        state_ = State::kInvokeBody;
        return true;
    }
    case State::kInvokeJson: {
        std::size_t end = std::string::npos;
        for (auto m : kInvokeEnd) {
            const std::size_t p = buf_.find(m);
            if (p < end) end = p, len = m.size();
        }
        if (end == std::string::npos) {
            std::size_t hold = 0;
            for (auto m : kInvokeEnd) hold = std::max(hold, partial_suffix(buf_, m));
            const std::size_t take = buf_.size() - hold;
            json_body_.append(buf_, 0, take);
            consume(take);
            return false;
        }
        json_body_.append(buf_, 0, end);
        consume(end + len);
        const std::string_view body = trim(json_body_);
        if (!is_json_object(body) && call_pending_ && invoke_from_text_) {
            invoke_was_prose(ev);
            return true;
        }
        if (call_pending_) begin_call(ev);
        emit_args(ev, is_json_object(body) ? body : std::string_view("{}"));
        msg_.tool_calls[call_index_].complete = true;
        ev.push_back({ParseEventKind::kToolCallEnd, "", call_index_});
        state_ = State::kToolBlock;
        return true;
    }
    case State::kParamName: {
        const std::size_t q = buf_.find('"');
        const std::string_view piece = std::string_view(buf_).substr(0, std::min(q, buf_.size()));
        param_name_.append(piece);
        emit_args(ev, json_escape(piece));
        if (q == std::string::npos) {
            buf_.clear();
            return false;
        }
        buf_.erase(0, q + 1);
        if (holding_ && !wrapper_) {
            if (param_name_ == "arguments")
                wrapper_ = true;
            else
                flush_held(ev);
        }
        emit_args(ev, "\": ");
        param_attrs_.clear();
        state_ = State::kParamAttrs;
        return true;
    }
    case State::kParamAttrs: {
        const std::size_t gt = buf_.find('>');
        param_attrs_ += buf_.substr(0, std::min(gt, buf_.size()));
        if (gt == std::string::npos) {
            buf_.clear();
            return false;
        }
        buf_.erase(0, gt + 1);
        param_is_string_ = param_attrs_.find("string=\"true\"") != std::string::npos;
        if (param_is_string_) emit_args(ev, "\"");
        state_ = State::kParamValue;
        return true;
    }
    case State::kParamValue: {
        std::size_t end = std::string::npos;
        for (auto m : kParamEnd) {
            const std::size_t p = buf_.find(m);
            if (p < end) end = p, len = m.size();
        }
        std::size_t take = end;
        if (end == std::string::npos) {
            std::size_t hold = 0;
            if (!final)
                for (auto m : kParamEnd) hold = std::max(hold, partial_suffix(buf_, m));
            take = buf_.size() - hold;
        }
        const std::string_view v = std::string_view(buf_).substr(0, take);
        if (wrapper_) held_raw_.append(v);
        emit_args(ev, param_is_string_ ? json_escape(v) : std::string(v));
        if (end == std::string::npos) {
            buf_.erase(0, take);
            return false;
        }
        buf_.erase(0, end + len);
        if (param_is_string_) emit_args(ev, "\"");
        ++params_;
        state_ = State::kInvokeBody;
        return true;
    }
    }
    return false;
}

std::vector<ParseEvent> DsmlStreamParser::finish(FinishReason reason) {
    std::vector<ParseEvent> ev;
    if (finished_) return ev;
    finished_ = true;
    const bool stop = reason == FinishReason::kStop;
    if (call_pending_ && invoke_from_text_) {
        // An unconfirmed bare header at the end of the output was quoted in prose.
        consume(buf_.size());
        invoke_was_prose(ev);
    }
    if (state_ == State::kReasoning || state_ == State::kContent) {
        if (!stop && opt_.parse_tool_calls) {
            // A length cut may end inside a DSML marker: the half-written marker is not text, nor are
            // the newlines before it.
            std::size_t hold = 0;
            for (auto m : kToolStart) hold = std::max(hold, partial_suffix(buf_, m));
            for (auto m : kInvokeStart) hold = std::max(hold, partial_suffix(buf_, m));
            if (hold > 0) {
                buf_.resize(buf_.size() - hold);
                while (!buf_.empty() && buf_.back() == '\n') buf_.pop_back();
            }
        }
        while (step(ev, true)) {
        }
    } else if (state_ == State::kParamValue) {
        // Output ended inside a value: what was held back (a possible closing marker) is value text. The
        // call stays incomplete, its arguments partial, as in the reference.
        if (wrapper_) held_raw_.append(buf_);
        emit_args(ev, param_is_string_ ? json_escape(buf_) : buf_);
    } else if (call_pending_ && state_ == State::kInvokeBody) {
        begin_call(ev); // a header in a tool block, cut before its body: the call, no arguments yet
    } else if (state_ == State::kInvokeJson) {
        if (call_pending_) begin_call(ev);
        emit_args(ev, json_body_ + buf_); // partial, as a cut value is
    }
    flush_held(ev);
    buf_.clear();
    if (opt_.thinking && stop && !saw_think_end_ && msg_.tool_calls.empty() && state_ == State::kReasoning) {
        // No </think> and a normal stop: the model answered without thinking; keep the answer.
        ev.push_back({ParseEventKind::kReasoningWasContent, msg_.reasoning});
        msg_.content = msg_.reasoning + msg_.content;
        msg_.reasoning.clear();
    }
    msg_.finish_reason = !stop ? "length" : msg_.tool_calls.empty() ? "stop" : "tool_calls";
    return ev;
}

} // namespace deepinfer::tokenizer
