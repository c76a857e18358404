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

void attach_fp8_int8_panels(const weights::Checkpoint& ckpt, const std::string& name, core::Weight* w) {
    namespace kd = kernels::cpu::detail;
    if (w->format != core::WeightFormat::kFp8Block || w->block_cols % kd::kQBlock != 0 ||
        w->cols % kd::kQBlock != 0 || w->rows <= 0 || w->panel_codes != nullptr)
        return;
    const int64_t rows = w->rows, cols = w->cols;
    const int64_t code_bytes = kd::int8_panel_code_bytes(rows, cols);
    const int64_t bytes = code_bytes + 4 * kd::int8_panel_scale_floats(rows, cols);
    const int64_t tiles = kd::int8_panel_tiles(rows);
    // The VNNI table's pack (dense_int8_panels() needs that table's CPU).
    const auto pack = kd::avx512_vnni_gemm_table().pack_fp8;
    const core::Weight src = *w;
    uint8_t* p = ckpt.derived_bytes(name, "int8 panels", static_cast<size_t>(bytes), [&](uint8_t* dst) {
        auto* scales = reinterpret_cast<float*>(dst + code_bytes);
        const int64_t nt = std::min<int64_t>(tiles, std::max(1u, std::thread::hardware_concurrency()));
        std::vector<std::thread> th;
        for (int64_t i = 0; i < nt; ++i)
            th.emplace_back(
                [&, i] { pack(src, 0, rows, tiles * i / nt, tiles * (i + 1) / nt, dst, scales); });
        for (std::thread& t : th) t.join();
    });
    if (p == nullptr) return;
    w->panel_codes = p;
    w->panel_scales = reinterpret_cast<const float*>(p + code_bytes);
    w->panel_row0 = 0;
    w->panel_rows = rows;
    w->panel_bytes = bytes;
    w->panels_are_decode = true;
}

} // namespace deepinfer::model
