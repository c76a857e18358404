#pragma once
// Int8 panels for the dense FP8-block weights under `fast` (docs/kernels.md, "fast: the dense FP8 weights'
// int8 panels"). At batch token counts the fast int8 GEMM decodes each 48-row x 128-column panel of an FP8
// weight into int8 on every call; on CPUs without AMX that decode was ~30% of the GEMM's time. So the
// panels are decoded once at load (kernels/cpu/gemm_int8.h, "Int8 panels"), by the GEMM's own decoder:
// the GEMM over them gives the same bits as decoding per call. The FP8 weight still serves the GEMV
// (decode); the panels add 1 + 1/32 bytes per element. Routed experts get none (they are most of a
// checkpoint's bytes, and at batch sizes a step sees each one for a few tokens, where the GEMV runs).

#include <string>

#include "core/weight.h"
#include "kernels/cpu/gemm_int8.h"
#include "weights/checkpoint.h"

namespace deepinfer::model {

// Whether dense FP8-block weights get int8 panels at load: the process numerics are fast
// (kernels::cpu::default_numerics()), the CPU has the int8 GEMM (VNNI + VBMI) without AMX (whose machines
// run FP8 through AMX-BF16 tiles), and DEEPINFER_DENSE_PANELS is not 0.
bool dense_int8_panels();

// Attaches int8 panels of all of *w's rows (tile 0 at row 0) when it is FP8 blocks whose blocks are whole
// 128-column activation blocks (block_cols % 128 == 0, cols % 128 == 0); leaves any other weight, or one
// the checkpoint's arena has no room for, as it is. `name`: the weight's tensor prefix (the arena key).
void attach_fp8_int8_panels(const weights::Checkpoint& ckpt, const std::string& name, core::Weight* w);

// The pieces both kinds of panels share (this file's and the LM head's, model/lm_head.cpp):
// bytes of the panels of rows x cols (the codes, then the scales; kernels/cpu/gemm_int8.h);
int64_t int8_panel_bytes(int64_t rows, int64_t cols);
// rows [row0, row_end) of src packed into dst (int8_panel_bytes of them) by `pack`, tiles split over every
// core;
void pack_int8_panels(kernels::cpu::detail::PackPanelsFn pack, const core::Weight& src, int64_t row0,
                      int64_t row_end, uint8_t* dst);
// w's panels pointed at p, which holds rows [row0, row0 + rows) of w's columns.
void point_at_int8_panels(core::Weight* w, const uint8_t* p, int64_t row0, int64_t rows);

} // namespace deepinfer::model
