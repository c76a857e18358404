#include "model/lm_head.h"

#include <atomic>

#include "kernels/cpu/linear.h"

namespace deepinfer::model {
namespace {

std::atomic<HeadFp8> g_head_fp8{HeadFp8::kAuto};

} // namespace

const char* head_fp8_name(HeadFp8 mode) {
    switch (mode) {
    case HeadFp8::kAuto:
        return "auto";
    case HeadFp8::kOff:
        return "off";
    case HeadFp8::kOn:
        return "on";
    }
    return "?";
}

bool parse_head_fp8(std::string_view name, HeadFp8* mode) {
    for (HeadFp8 m : {HeadFp8::kAuto, HeadFp8::kOff, HeadFp8::kOn}) {
        if (name == head_fp8_name(m)) {
            *mode = m;
            return true;
        }
    }
    return false;
}

void set_head_fp8(HeadFp8 mode) {
    g_head_fp8.store(mode, std::memory_order_relaxed);
}

HeadFp8 head_fp8() {
    return g_head_fp8.load(std::memory_order_relaxed);
}

bool head_as_fp8() {
    switch (head_fp8()) {
    case HeadFp8::kAuto:
        return kernels::cpu::default_numerics() == kernels::Numerics::kFast;
    case HeadFp8::kOff:
        return false;
    case HeadFp8::kOn:
        return true;
    }
    return false;
}

core::Result<core::Weight> bind_lm_head(const weights::Checkpoint& ckpt, const std::string& prefix,
                                        int64_t rows, int64_t cols, const weights::QuantizationConfig& q,
                                        int64_t row_begin, int64_t row_end) {
    if (!head_as_fp8()) return ckpt.weight(prefix, rows, cols, q);
    return ckpt.fp8_block_weight(prefix, rows, cols, kHeadFp8Block, kHeadFp8Block, q, row_begin, row_end);
}

HeadRows tp_head_rows(int64_t vocab, int64_t tp_rank, int64_t tp_size) {
    if (tp_size <= 1 || vocab % tp_size != 0) return {};
    const int64_t part = vocab / tp_size;
    return {tp_rank * part, (tp_rank + 1) * part};
}

} // namespace deepinfer::model
