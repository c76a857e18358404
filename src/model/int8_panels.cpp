#include "model/int8_panels.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear.h"

namespace deepinfer::model {

bool dense_int8_panels() {
    static const bool on = [] {
        const char* e = std::getenv("DEEPINFER_DENSE_PANELS");
        return e == nullptr || std::string_view(e) != "0";
    }();
    return on && kernels::cpu::default_numerics() == kernels::Numerics::kFast &&
           kernels::cpu::fp8_int8_supported() && !kernels::cpu::amx_supported();
}

int64_t int8_panel_bytes(int64_t rows, int64_t cols) {
    namespace kd = kernels::cpu::detail;
    return kd::int8_panel_code_bytes(rows, cols) + 4 * kd::int8_panel_scale_floats(rows, cols);
}

void pack_int8_panels(kernels::cpu::detail::PackPanelsFn pack, const core::Weight& src, int64_t row0,
                      int64_t row_end, uint8_t* dst) {
    namespace kd = kernels::cpu::detail;
    const int64_t tiles = kd::int8_panel_tiles(row_end - row0);
    auto* scales = reinterpret_cast<float*>(dst + kd::int8_panel_code_bytes(row_end - row0, src.cols));
    const int64_t nt = std::min<int64_t>(tiles, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> th;
    for (int64_t i = 0; i < nt; ++i)
        th.emplace_back(
            [&, i] { pack(src, row0, row_end, tiles * i / nt, tiles * (i + 1) / nt, dst, scales); });
    for (std::thread& t : th) t.join();
}

void point_at_int8_panels(core::Weight* w, const uint8_t* p, int64_t row0, int64_t rows) {
    w->panel_codes = p;
    w->panel_scales =
        reinterpret_cast<const float*>(p + kernels::cpu::detail::int8_panel_code_bytes(rows, w->cols));
    w->panel_row0 = row0;
    w->panel_rows = rows;
    w->panel_bytes = int8_panel_bytes(rows, w->cols);
}

void attach_fp8_int8_panels(const weights::Checkpoint& ckpt, const std::string& name, core::Weight* w) {
    namespace kd = kernels::cpu::detail;
    if (w->format != core::WeightFormat::kFp8Block || w->block_cols % kd::kQBlock != 0 ||
        w->cols % kd::kQBlock != 0 || w->rows <= 0 || w->panel_codes != nullptr)
        return;
    // The VNNI table's pack (dense_int8_panels() needs that table's CPU).
    const auto pack = kd::avx512_vnni_gemm_table().pack_fp8;
    const core::Weight src = *w;
    uint8_t* p =
        ckpt.derived_bytes(name, "int8 panels", static_cast<size_t>(int8_panel_bytes(w->rows, w->cols)),
                           [&](uint8_t* dst) { pack_int8_panels(pack, src, 0, src.rows, dst); });
    if (p == nullptr) return;
    point_at_int8_panels(w, p, 0, w->rows);
    w->panels_are_decode = true;
}

} // namespace deepinfer::model
