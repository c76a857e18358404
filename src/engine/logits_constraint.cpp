#include "engine/logits_constraint.h"

#include <bit>
#include <limits>

namespace deepinfer::engine {

std::span<const float> apply_logits_constraint(const LogitsConstraint& constraint, std::span<const float> row,
                                               std::vector<float>& scratch, std::vector<uint32_t>& mask,
                                               int64_t* allowed_out) {
    mask.assign(static_cast<std::size_t>(constraint.mask_words()), 0u);
    constraint.fill_mask(mask);
    scratch.assign(row.size(), -std::numeric_limits<float>::infinity());
    int64_t allowed = 0;
    const std::size_t words = std::min(mask.size(), (row.size() + 31) / 32);
    for (std::size_t w = 0; w < words; ++w) {
        uint32_t bits = mask[w];
        while (bits != 0) {
            const std::size_t id = w * 32 + static_cast<std::size_t>(std::countr_zero(bits));
            bits &= bits - 1;
            if (id >= row.size()) break;
            scratch[id] = row[id];
            ++allowed;
        }
    }
    if (allowed_out != nullptr) *allowed_out = allowed;
    return scratch;
}

} // namespace deepinfer::engine
