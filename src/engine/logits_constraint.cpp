#include "engine/logits_constraint.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace deepinfer::engine {

std::span<const float> apply_logits_constraint(const LogitsConstraint& constraint, std::span<const float> row,
                                               std::vector<float>& scratch, std::vector<uint32_t>& mask,
                                               int64_t* allowed_out, int32_t tokens_left) {
    mask.resize(static_cast<std::size_t>(constraint.mask_words())); // fill_mask writes every word
    constraint.fill_mask(mask, tokens_left);
    constexpr float kOff = -std::numeric_limits<float>::infinity();
    scratch.resize(row.size());
    int64_t allowed = 0;
    // By runs of equal words: inside a free string nearly every word is all ones (one block copy), in
    // structure nearly every word is zero (one block fill); only mixed words go bit by bit.
    const std::size_t full_words = std::min(mask.size(), row.size() / 32);
    const float* src = row.data();
    float* dst = scratch.data();
    for (std::size_t w = 0; w < full_words;) {
        const uint32_t bits = mask[w];
        if (bits == 0u || bits == ~0u) {
            std::size_t e = w + 1;
            while (e < full_words && mask[e] == bits) ++e;
            if (bits == 0u) {
                std::fill(dst + w * 32, dst + e * 32, kOff);
            } else {
                std::copy(src + w * 32, src + e * 32, dst + w * 32);
                allowed += static_cast<int64_t>(e - w) * 32;
            }
            w = e;
            continue;
        }
        for (std::size_t b = 0; b < 32; ++b) dst[w * 32 + b] = (bits >> b) & 1u ? src[w * 32 + b] : kOff;
        allowed += std::popcount(bits);
        ++w;
    }
    for (std::size_t id = full_words * 32; id < row.size(); ++id) { // the tail (and ids past the mask)
        const std::size_t w = id / 32;
        const bool on = w < mask.size() && ((mask[w] >> (id % 32)) & 1u);
        scratch[id] = on ? row[id] : kOff;
        allowed += on;
    }
    if (allowed_out != nullptr) *allowed_out = allowed;
    return scratch;
}

int64_t mask_logits_in_place(const LogitsConstraint& constraint, std::span<float> row,
                             std::vector<uint32_t>& mask, int32_t tokens_left) {
    mask.resize(static_cast<std::size_t>(constraint.mask_words()));
    constraint.fill_mask(mask, tokens_left);
    constexpr float kOff = -std::numeric_limits<float>::infinity();
    int64_t allowed = 0;
    const std::size_t full_words = std::min(mask.size(), row.size() / 32);
    float* l = row.data();
    for (std::size_t w = 0; w < full_words;) {
        const uint32_t bits = mask[w];
        if (bits == 0u || bits == ~0u) {
            std::size_t e = w + 1;
            while (e < full_words && mask[e] == bits) ++e;
            if (bits == 0u)
                std::fill(l + w * 32, l + e * 32, kOff);
            else
                allowed += static_cast<int64_t>(e - w) * 32;
            w = e;
            continue;
        }
        for (uint32_t off = ~bits; off != 0; off &= off - 1) l[w * 32 + std::countr_zero(off)] = kOff;
        allowed += std::popcount(bits);
        ++w;
    }
    for (std::size_t id = full_words * 32; id < row.size(); ++id) {
        const std::size_t w = id / 32;
        const bool on = w < mask.size() && ((mask[w] >> (id % 32)) & 1u);
        if (!on) row[id] = kOff;
        allowed += on;
    }
    return allowed;
}

DeferredConstraint::DeferredConstraint(std::unique_ptr<LogitsConstraint> inner, int32_t trigger,
                                       std::vector<int32_t> blocked, int32_t budget,
                                       std::shared_ptr<const TriggerText> text)
    : inner_(std::move(inner)), trigger_(trigger), blocked_(std::move(blocked)), budget_(budget),
      text_(std::move(text)) {}

DeferredConstraint::DeferredConstraint(const DeferredConstraint& other)
    : inner_(other.inner_->clone()), trigger_(other.trigger_), blocked_(other.blocked_),
      budget_(other.budget_), text_(other.text_), matched_(other.matched_), free_(other.free_),
      inner_accepted_(other.inner_accepted_), active_(other.active_) {}

int32_t DeferredConstraint::tokens_to_end() const {
    if (active_) return inner_->tokens_to_end();
    const int32_t inner = inner_->tokens_to_end();
    return inner >= kNoBudget ? kNoBudget : inner + 1; // the trigger first
}

void DeferredConstraint::fill_mask(std::span<uint32_t> mask, int32_t tokens_left) const {
    if (active_) return inner_->fill_mask(mask, tokens_left);
    auto set = [&](int32_t id, bool on) {
        const auto w = static_cast<std::size_t>(id) / 32;
        if (id < 0 || w >= mask.size()) return;
        const uint32_t bit = 1u << (static_cast<uint32_t>(id) % 32);
        mask[w] = on ? (mask[w] | bit) : (mask[w] & ~bit);
    };
    // One more free token must leave room for the trigger and the inner constraint's shortest ending.
    const int32_t inner_end = inner_->tokens_to_end();
    const bool no_room =
        inner_end < kNoBudget && static_cast<int64_t>(tokens_left) - 1 < 1 + int64_t{inner_end};
    if ((budget_ >= 0 && free_ >= budget_) || no_room) {
        std::fill(mask.begin(), mask.end(), 0u);
        set(trigger_, true);
        return;
    }
    std::fill(mask.begin(), mask.end(), ~0u);
    for (int32_t id : blocked_) set(id, false);
    if (text_) {
        for (int32_t id : text_->completes[matched_.empty() ? 0 : matched_.back()]) set(id, false);
    }
    set(trigger_, true);
}

bool DeferredConstraint::accept(int32_t token) {
    if (active_) {
        if (!inner_->accept(token)) return false;
        ++inner_accepted_;
        return true;
    }
    if (token == trigger_) {
        active_ = true;
        return true;
    }
    if ((budget_ >= 0 && free_ >= budget_) ||
        std::find(blocked_.begin(), blocked_.end(), token) != blocked_.end())
        return false;
    uint8_t matched = 0;
    if (text_) {
        const auto k = static_cast<size_t>(matched_.empty() ? 0 : matched_.back());
        const auto t = static_cast<size_t>(token) * static_cast<size_t>(text_->n) + k;
        if (token < 0 || t >= text_->advance.size()) return false;
        matched = text_->advance[t];
        if (matched >= text_->n) return false; // would spell the trigger's text
    }
    matched_.push_back(matched);
    ++free_;
    return true;
}

bool DeferredConstraint::rollback(int32_t n) {
    if (n < 0 || n > free_ + (active_ ? 1 + inner_accepted_ : 0)) return false;
    const int32_t k = std::min(n, inner_accepted_);
    if (k > 0 && !inner_->rollback(k)) return false;
    inner_accepted_ -= k;
    n -= k;
    if (n > 0 && active_) { // the trigger itself
        active_ = false;
        --n;
    }
    free_ -= n;
    matched_.resize(static_cast<size_t>(free_));
    return true;
}

} // namespace deepinfer::engine
