#include "model/lm_head.h"

#include <atomic>
#include <cstdlib>

#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"
#include "model/int8_panels.h"

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

bool head_int8_panels() {
    static const bool on = [] {
        const char* e = std::getenv("DEEPINFER_HEAD_PANELS");
        return e == nullptr || std::string_view(e) != "0";
    }();
    return on && head_as_fp8() && kernels::cpu::fp8_int8_supported() && !kernels::cpu::amx_supported();
}

core::Result<core::Weight> bind_lm_head(const weights::Checkpoint& ckpt, const std::string& prefix,
                                        int64_t rows, int64_t cols, const weights::QuantizationConfig& q,
                                        int64_t row_begin, int64_t row_end) {
    if (!head_as_fp8()) return ckpt.weight(prefix, rows, cols, q);
    DI_ASSIGN_OR_RETURN(core::Weight w, ckpt.fp8_block_weight(prefix, rows, cols, kHeadFp8Block,
                                                              kHeadFp8Block, q, row_begin, row_end));
    namespace kd = kernels::cpu::detail;
    // Int8 panels from a BF16 head: the FP8 copy serves the GEMV (decode), the panels the int8 GEMM.
    if (!head_int8_panels() || w.format != core::WeightFormat::kFp8Block || cols % kd::kQBlock != 0) return w;
    // The rows this rank computes (a tensor-parallel rank's vocabulary rows), tile 0 at the first of them.
    const int64_t end = row_end < 0 ? rows : row_end, n = end - row_begin;
    if (n <= 0) return w;
    // The VNNI table's pack (head_int8_panels() needs that table's CPU): the scalar pack's bytes, vectorized
    // (flash2's 129280 x 4096 head: 1.7 s of load on 2 threads scalar).
    const auto pack = kd::avx512_vnni_gemm_table().pack_bf16;
    uint8_t* p = ckpt.derived_copy(
        prefix, "int8 panels", rows, cols, q, core::WeightFormat::kBF16,
        static_cast<size_t>(int8_panel_bytes(n, cols)),
        [&](const core::Weight& src, uint8_t* dst) { pack_int8_panels(pack, src, row_begin, end, dst); });
    if (p == nullptr) return w; // F32 / F16 heads keep the FP8 int8 GEMM
    point_at_int8_panels(&w, p, row_begin, n);
    return w;
}

HeadRows tp_head_rows(int64_t vocab, int64_t tp_rank, int64_t tp_size) {
    if (tp_size <= 1 || vocab % tp_size != 0) return {};
    const int64_t part = vocab / tp_size;
    return {tp_rank * part, (tp_rank + 1) * part};
}

} // namespace deepinfer::model
