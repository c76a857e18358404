#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <optional>

#include "tokenizer/cancel.h"
#include "tokenizer/split_matcher.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

struct Regex::Impl {
    std::optional<SplitMatcher> builtin;
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Impl() {
        if (code) pcre2_code_free(code);
    }
};

namespace {

// Per-thread scratch: match data sized for one capture pair and a JIT stack large enough for long
// whitespace runs under lookahead.
struct ThreadScratch {
    pcre2_match_data* md = nullptr;
    pcre2_match_context* mctx = nullptr;
    pcre2_jit_stack* stack = nullptr;
    ThreadScratch() {
        md = pcre2_match_data_create(4, nullptr);
        mctx = pcre2_match_context_create(nullptr);
        stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
        if (stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
    }
    ~ThreadScratch() {
        if (stack) pcre2_jit_stack_free(stack);
        if (mctx) pcre2_match_context_free(mctx);
        if (md) pcre2_match_data_free(md);
    }
};

ThreadScratch& scratch() {
    thread_local ThreadScratch s;
    return s;
}

} // namespace

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

bool Regex::builtin() const {
    return impl_->builtin.has_value();
}

core::Result<Regex> Regex::compile(std::string_view pattern) {
    auto matcher = SplitMatcher::compile(pattern);
    if (matcher.ok()) {
        Regex r;
        r.impl_ = std::make_unique<Impl>();
        r.impl_->builtin.emplace(std::move(matcher).value());
        r.pattern_ = std::string(pattern);
        return r;
    }
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    if (!code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof(buf));
        return core::invalid_argument("regex '" + std::string(pattern) + "' at offset " +
                                      std::to_string(off) + ": " + reinterpret_cast<const char*>(buf));
    }
    Regex r;
    r.impl_ = std::make_unique<Impl>();
    r.impl_->code = code;
    r.impl_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    r.pattern_ = std::string(pattern);
    return r;
}

core::Result<Regex> Regex::literal(std::string_view literal) {
    Regex r;
    r.impl_ = std::make_unique<Impl>();
    r.impl_->builtin.emplace(SplitMatcher::literal(literal));
    r.pattern_ = std::string(literal);
    return r;
}

void Regex::find_all(std::string_view subject, std::vector<Match>& out) const {
    if (impl_->builtin) {
        thread_local std::vector<SplitMatcher::Span> spans;
        spans.clear();
        impl_->builtin->find_all(subject, spans);
        for (const auto& sp : spans) out.push_back({sp.start, sp.end});
        if (spans.capacity() > (1u << 16)) spans = {}; // a huge subject's scratch is not kept per thread
        return;
    }
    ThreadScratch& s = scratch();
    const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
    std::size_t pos = 0, next_check = kCancelCheckBytes;
    while (pos <= subject.size()) {
        if (pos >= next_check) { // a huge subject: stop early when the encode is cancelled (cancel.h)
            if (encode_cancelled()) return;
            next_check = pos + kCancelCheckBytes;
        }
        int rc;
        if (impl_->jit) {
            rc = pcre2_jit_match(impl_->code, subj, subject.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mctx);
        } else {
            rc = pcre2_match(impl_->code, subj, subject.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mctx);
        }
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            rc = pcre2_match(impl_->code, subj, subject.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.md,
                             nullptr);
        }
        if (rc < 0) return;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
        const std::size_t start = ov[0], end = ov[1];
        if (end > start) {
            out.push_back({start, end});
            pos = end;
        } else {
            // Empty match: step over one character.
            if (start >= subject.size()) return;
            std::size_t len = utf8::valid_sequence_length(subject, start);
            pos = start + (len ? len : 1);
        }
    }
}

} // namespace deepinfer::tokenizer
