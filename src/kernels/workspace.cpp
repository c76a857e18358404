#include "kernels/workspace.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer::kernels {

void Workspace::reserve(int64_t bytes) {
    DI_CHECK(bytes >= 0);
    chunks_.clear();
    Chunk c;
    c.size = bytes + kAlign;
    c.mem.reset(new std::byte[c.size]);
    chunks_.push_back(std::move(c));
    capacity_ = bytes;
    used_ = 0;
}

void* Workspace::take_bytes(int64_t bytes) {
    DI_CHECK(bytes >= 0);
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    for (;;) {
        if (!chunks_.empty()) {
            Chunk& c = chunks_.back();
            const auto base = reinterpret_cast<uintptr_t>(c.mem.get());
            const int64_t start = static_cast<int64_t>((base + c.top + kAlign - 1) / kAlign * kAlign - base);
            if (start + bytes <= c.size) {
                used_ += start + bytes - c.top;
                c.top = start + bytes;
                high_water_ = std::max(high_water_, used_);
                return c.mem.get() + start;
            }
        }
        // The plan was short: chain a chunk (earlier pointers stay valid until reset).
        Chunk c;
        c.size = std::max<int64_t>(bytes + kAlign, capacity_) + kAlign;
        c.mem.reset(new std::byte[c.size]);
        chunks_.push_back(std::move(c));
        ++growths_;
    }
}

void Workspace::reset() {
    if (chunks_.size() > 1) {
        reserve(high_water_ + kAlign * 4);
    } else if (!chunks_.empty()) {
        chunks_[0].top = 0;
    }
    used_ = 0;
}

} // namespace deepinfer::kernels
