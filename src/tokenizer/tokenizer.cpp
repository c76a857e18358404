#include "tokenizer/tokenizer.h"

#include <malloc.h>

#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special_tokens) out.insert(out.end(), impl_->prefix_ids.begin(), impl_->prefix_ids.end());
    encode_into(text, true, out);
    if (add_special_tokens) out.insert(out.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
    return out;
}

std::vector<TokenId> Tokenizer::encode_plain(std::string_view text) const {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 4);
    encode_into(text, false, out);
    return out;
}

std::vector<TokenId> Tokenizer::encode_with_plain_ranges(std::string_view text,
                                                         std::span<const ByteRange> plain) const {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 4);
    if (utf8::is_valid(text)) {
        encode_into(text, true, out, plain);
        return out;
    }
    // Sanitize piece by piece so the ranges still point at the same text.
    std::string sanitized;
    std::vector<ByteRange> moved;
    std::size_t pos = 0;
    for (const ByteRange& r : plain) {
        sanitized += utf8::sanitize(text.substr(pos, r.begin - pos));
        const std::size_t b = sanitized.size();
        sanitized += utf8::sanitize(text.substr(r.begin, r.end - r.begin));
        moved.push_back({b, sanitized.size()});
        pos = r.end;
    }
    sanitized += utf8::sanitize(text.substr(pos));
    encode_into(sanitized, true, out, moved);
    return out;
}

void Tokenizer::encode_into(std::string_view text, bool match_added, std::vector<TokenId>& out,
                            std::span<const ByteRange> plain) const {
    std::string sanitized;
    if (!utf8::is_valid(text)) {
        sanitized = utf8::sanitize(text);
        text = sanitized;
    }
    const Impl& im = *impl_;
    std::vector<ByteRange> gap_plain;
    // Second pass: tokens with normalized=true, matched in the normalized text of each gap.
    auto normalized_pass = [&](std::string_view gap) {
        // The plain ranges inside this gap, relative to it.
        gap_plain.clear();
        const std::size_t off = static_cast<std::size_t>(gap.data() - text.data());
        for (const ByteRange& r : plain)
            if (r.end > off && r.begin < off + gap.size())
                gap_plain.push_back({std::max(r.begin, off) - off, std::min(r.end, off + gap.size()) - off});
        std::string normalized;
        if (!im.normalizer.is_identity()) {
            normalized = im.normalizer.apply(gap);
            gap = normalized;
            // Offsets no longer map into the normalized text: protect all of it.
            if (!gap_plain.empty()) gap_plain.assign(1, ByteRange{0, gap.size()});
        }
        if (!match_added || im.normalized_matcher.empty()) {
            encode_segment(gap, out);
            return;
        }
        std::vector<AddedTokenMatcher::Match> m;
        im.normalized_matcher.find_all(gap, im.added, m, gap_plain);
        std::size_t pos = 0;
        for (const auto& x : m) {
            if (x.start > pos) encode_segment(gap.substr(pos, x.start - pos), out);
            out.push_back(im.added[x.index].id);
            pos = x.end;
        }
        if (pos < gap.size()) encode_segment(gap.substr(pos), out);
    };
    if (!match_added || im.raw_matcher.empty()) {
        normalized_pass(text);
        return;
    }
    std::vector<AddedTokenMatcher::Match> m;
    im.raw_matcher.find_all(text, im.added, m, plain);
    std::size_t pos = 0;
    for (const auto& x : m) {
        if (x.start > pos) normalized_pass(text.substr(pos, x.start - pos));
        out.push_back(im.added[x.index].id);
        pos = x.end;
    }
    if (pos < text.size()) normalized_pass(text.substr(pos));
}

void Tokenizer::encode_segment(std::string_view text, std::vector<TokenId>& out) const {
    if (text.empty()) return;
    const Impl& im = *impl_;
    if (!im.pre_tokenizer) {
        im.tokenize(text, out);
        return;
    }
    thread_local PreTokenizeState st;
    st.pieces.clear();
    st.arena.clear();
    st.pieces.push_back(text);
    im.pre_tokenizer->apply(st);
    for (std::string_view piece : st.pieces) im.tokenize(piece, out);
    // The scratch keeps its capacity for the next call, up to a bound: a 10 MiB prompt grows it to
    // ~190 MiB, which must not stay resident in this (HTTP worker) thread after the request.
    constexpr std::size_t kKeepPieces = 1 << 16; // ~1 MiB of string_views
    if (st.pieces.capacity() > kKeepPieces || st.next.capacity() > kKeepPieces ||
        st.matches.capacity() > kKeepPieces || st.arena.size() > kKeepPieces) {
        st = PreTokenizeState{};
        // glibc keeps what a thread frees in that thread's arena (tens of MiB here, per thread): hand it
        // back to the system now. Rare (huge inputs only) and a few ms.
        malloc_trim(0);
    }
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
    const Impl& im = *impl_;
    std::string bytes;
    bytes.reserve(ids.size() * 4);
    bool first = true;
    for (TokenId id : ids) {
        if (id < 0 || static_cast<std::size_t>(id) >= im.known.size() || !im.known[id]) continue;
        if (skip_special_tokens && im.special[id]) continue;
        if (!first) bytes += im.separator;
        first = false;
        bytes += im.decoded[id];
    }
    if (utf8::is_valid(bytes)) return bytes;
    return utf8::sanitize(bytes);
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->known.size()) return {};
    return impl_->decoded[id];
}

std::string_view Tokenizer::token_separator() const {
    return impl_->separator;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    const std::string key(token);
    if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
    if (auto it = impl_->vocab().find(key); it != impl_->vocab().end()) return it->second;
    return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->known.size() || !impl_->known[id])
        return std::nullopt;
    return impl_->id_to_token[id];
}

bool Tokenizer::is_special(TokenId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() && impl_->special[id];
}

std::size_t Tokenizer::vocab_size() const {
    return impl_->known.size();
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return impl_->added;
}

} // namespace deepinfer::tokenizer
