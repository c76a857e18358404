#include "tokenizer/tokenizer.h"

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

void Tokenizer::encode_into(std::string_view text, bool match_added, std::vector<TokenId>& out) const {
    std::string sanitized;
    if (!utf8::is_valid(text)) {
        sanitized = utf8::sanitize(text);
        text = sanitized;
    }
    const Impl& im = *impl_;
    // Second pass: tokens with normalized=true, matched in the normalized text of each gap.
    auto normalized_pass = [&](std::string_view gap) {
        std::string normalized;
        if (!im.normalizer.is_identity()) {
            normalized = im.normalizer.apply(gap);
            gap = normalized;
        }
        if (!match_added || im.normalized_matcher.empty()) {
            encode_segment(gap, out);
            return;
        }
        std::vector<AddedTokenMatcher::Match> m;
        im.normalized_matcher.find_all(gap, im.added, m);
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
    im.raw_matcher.find_all(text, im.added, m);
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
        im.bpe->tokenize(text, out);
        return;
    }
    thread_local PreTokenizeState st;
    st.pieces.clear();
    st.arena.clear();
    st.pieces.push_back(text);
    im.pre_tokenizer->apply(st);
    for (std::string_view piece : st.pieces) im.bpe->tokenize(piece, out);
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
    const Impl& im = *impl_;
    std::string bytes;
    bytes.reserve(ids.size() * 4);
    for (TokenId id : ids) {
        if (id < 0 || static_cast<std::size_t>(id) >= im.known.size() || !im.known[id]) continue;
        if (skip_special_tokens && im.special[id]) continue;
        bytes += im.decoded[id];
    }
    if (utf8::is_valid(bytes)) return bytes;
    return utf8::sanitize(bytes);
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->known.size()) return {};
    return impl_->decoded[id];
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
    const std::string key(token);
    if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
    if (auto it = impl_->bpe->vocab().find(key); it != impl_->bpe->vocab().end()) return it->second;
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
