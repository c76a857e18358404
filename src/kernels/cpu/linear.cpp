// The dispatcher behind kernels::cpu::matmul: runs the ISA cpu_features.cpp picks, prepares the activations
// (FP4 even/odd split for the GEMV, the transposed [cols, n_pad] copy for the GEMM) and splits output rows
// over the pool. Compiled without ISA flags; the SIMD code lives in linear_avx512.cpp / linear_avx2.cpp.

#include "kernels/cpu/linear.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/linear_kernels.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::kernels::cpu {
namespace {

constexpr int64_t kMaxTokensPerCall = 512;
constexpr int64_t kF32GemmTokens = 128;

const detail::KernelTable& table(Isa isa) {
    static const detail::KernelTable avx512 = detail::avx512_table();
    static const detail::KernelTable avx2 = detail::avx2_table();
    return isa == Isa::kAvx512 ? avx512 : avx2;
}

// Whether every block scale (FP8 blocks, FP4 groups) of the call's rows (a.row_begin .. a.row_end) lies in
// [lo, hi]. A min / max over all of them, without an early exit, so the compiler vectorizes it: an FP4
// weight has a scale per 32 values (256 KiB for 2048 x 4096), read on every exact prefill call.
bool fp8_scales_within(const MatmulArgs& a, int lo, int hi) {
    const core::Weight& w = *a.w;
    const int64_t sr0 = a.row_begin / w.block_rows, sr1 = (a.row_end - 1) / w.block_rows;
    uint8_t mn = 255, mx = 0;
    for (int64_t i = sr0 * w.scale_cols(); i < (sr1 + 1) * w.scale_cols(); ++i) {
        mn = std::min(mn, w.scale[i]);
        mx = std::max(mx, w.scale[i]);
    }
    return mn >= lo && mx <= hi;
}

// Whether every row of this call has a register-decoding GEMV on a kW-float ISA.
bool gemv_fits(const MatmulArgs& a, int kw) {
    const core::Weight& w = *a.w;
    switch (w.format) {
    case core::WeightFormat::kF32:
    case core::WeightFormat::kBF16:
    case core::WeightFormat::kF16:
        return true;
    case core::WeightFormat::kFp8Block:
        return w.block_cols % kw == 0 && fp8_scales_within(a, 60, 134); // see kFp8Fold in linear_impl.h
    case core::WeightFormat::kFp4Group:
        return w.block_cols % (2 * kw) == 0;
    }
    return false;
}

// The 4-row groups per chunk are a multiple of this: whole FP8 row blocks where the weight has them (its
// scales are folded into the activations once per block and chunk); otherwise 8 groups (32 rows), or
// fewer when the weight has too few groups to give every thread one (the mHC `fn` weights: 24 rows, 6
// groups, had all gone to one thread). The split never changes a result: every row is computed by the
// same tile code whatever its chunk.
int64_t row_group_align(const core::Weight& w, int64_t groups, int64_t threads) {
    if (w.format == core::WeightFormat::kFp8Block && w.block_rows % 4 == 0) return w.block_rows / 4;
    return std::clamp<int64_t>((groups + threads - 1) / threads, 1, 8);
}

// Chunks of [0, groups) handed out from a shared counter, guided: each claim takes 1 / (4 x threads) of what
// is left, rounded up to whole `align` multiples and never below `min_chunk` (a multiple of align), so the
// chunks shrink toward the end and the thread that finishes first waits at most one small chunk for the
// other (equal chunks of 1/16 of the call left up to 1/16 of it to one core). Where the chunks fall depends
// only on groups, align, min_chunk and the pool's size (each claim's size on the counter's value), never on
// timing or on which thread claims them. fn(b, e) on the claiming thread.
template <class Fn>
void guided_chunks(core::ThreadPool* pool, int64_t groups, int64_t align, int64_t min_chunk, const Fn& fn) {
    const int64_t threads = pool->num_threads();
    std::atomic<int64_t> next{0};
    auto run = [&](int64_t, int64_t) {
        int64_t b = next.load(std::memory_order_relaxed);
        while (b < groups) {
            const int64_t c = std::max(min_chunk, ((groups - b) / (4 * threads) + align - 1) / align * align);
            if (!next.compare_exchange_weak(b, b + c, std::memory_order_relaxed)) continue; // b reloaded
            fn(b, std::min(b + c, groups));
            b = next.load(std::memory_order_relaxed);
        }
    };
    pool->parallel_for(threads, std::ref(run)); // std::ref: the std::function holds a pointer, no allocation
}

// The 4-row groups of one or more matmuls (matmul_multi: one parallel loop instead of one per weight, so the
// threads meet once at the end, not after every weight) cut into items, each weight on its own: whole
// `row_group_align` multiples of at least 1 / (64 x threads) of all the groups, so a thread that finished
// its share waits at most that long for the other. Each item is whole FP8 row blocks where the weight has
// them (its scales are folded into the activations once per block and item). Items go out as
// owner_first_items (work_split.h) hands them. fn(i, b, e): groups [b, e) of args[i].
template <class Fn>
void for_row_groups_multi(std::span<const MatmulArgs> args, core::ThreadPool* pool, bool serial,
                          const Fn& fn) {
    const int count = static_cast<int>(args.size());
    std::array<int64_t, kMaxMultiMatmuls> groups{}, chunk{}, first{}; // first: weight i's first item
    int64_t total = 0;
    for (int i = 0; i < count; ++i) {
        groups[i] = (args[i].row_end - args[i].row_begin + 3) / 4;
        total += groups[i];
    }
    if (serial) {
        for (int i = 0; i < count; ++i) fn(i, int64_t{0}, groups[i]);
        return;
    }
    const int64_t threads = pool->num_threads(), base = (total + 64 * threads - 1) / (64 * threads);
    int64_t items = 0;
    for (int i = 0; i < count; ++i) {
        const int64_t align = row_group_align(*args[i].w, groups[i], threads);
        chunk[i] = std::max(align, (base + align - 1) / align * align);
        first[i] = items;
        items += (groups[i] + chunk[i] - 1) / chunk[i];
    }
    owner_first_items(pool, items, [&](int64_t k, int64_t) {
        int i = 0;
        while (i + 1 < count && first[i + 1] <= k) ++i;
        const int64_t b = (k - first[i]) * chunk[i];
        fn(i, b, std::min(b + chunk[i], groups[i]));
    });
}

// One matmul's row groups, as for_row_groups_multi cuts them. fn(b, e).
template <class Fn>
void for_row_groups(const MatmulArgs& a, core::ThreadPool* pool, bool serial, const Fn& fn) {
    for_row_groups_multi(std::span<const MatmulArgs>(&a, 1), pool, serial,
                         [&](int, int64_t b, int64_t e) { fn(b, e); });
}

// Per-thread scratch, grown on first use and kept (a steady-state step allocates nothing).
std::vector<float>& scratch(int which) {
    thread_local std::vector<float> buf[4];
    return buf[which];
}

// Scratch `which` from its first 64-byte boundary, with room for `floats` floats there. A tile row or a
// vector of 64 bytes then never straddles two cache lines (a std::vector's data are 16-byte aligned: the AMX
// int8 GEMM's activations and panels were, and FP4 at 16-32 tokens ran 9-17% slower, gemm_bench).
float* scratch_at(int which, int64_t floats) {
    std::vector<float>& s = scratch(which);
    const auto need = static_cast<size_t>(floats + 16);
    if (s.size() < need) s.resize(need);
    const auto p = reinterpret_cast<uintptr_t>(s.data());
    return s.data() + (64 - p % 64) % 64 / 4;
}

} // namespace

void reserve_thread_scratch(int64_t n, int64_t cols) {
    n = std::min(n, kMaxTokensPerCall);
    const int64_t n_pad = (n + 15) / 16 * 16;
    // The largest of: GEMV preparation / fold (n x cols), the GEMM's transposed activations (cols x n_pad),
    // the int8 quantized activations and scales, the F32 and int8 GEMM panels, the AMX-BF16 GEMMs' BF16
    // activation blocks (three pieces per 64-token chunk, one per 128) and their C tiles and panels.
    const int64_t need = std::max(
        {n_pad * cols + cols / detail::kQBlock * n_pad + 64, detail::gemv_q_scratch_floats(n, cols),
         detail::kGemmRowTile * (detail::kGemmKc + n_pad), detail::int8_scratch_floats(n_pad),
         detail::amx_bf16_scratch_floats(n_pad), 3 * std::min(n_pad, detail::kAmxBf16x3Tokens) * cols / 2,
         std::min(n_pad, detail::kAmxBf16x1Tokens) * cols / 2,
         detail::amx_bf16x3_scratch_floats(std::min(n_pad, detail::kAmxBf16x1Tokens) / 16)});
    for (int i = 0; i < 4; ++i) scratch_at(i, need); // what a later scratch_at(i, <= need) finds in place
}

void reserve_pool_scratch(core::ThreadPool* pool, int64_t n, int64_t cols) {
    if (pool == nullptr) {
        reserve_thread_scratch(n, cols);
        return;
    }
    // What each pool (by id) has reserved on all its threads. A pool is driven by one caller at a time, but
    // several pools (engines, tests) may share the process: the record is locked.
    struct Reserved {
        uint64_t pool;
        int64_t n, cols;
    };
    static std::mutex mu;
    static std::vector<Reserved> reserved;
    std::lock_guard<std::mutex> lock(mu);
    auto it = std::find_if(reserved.begin(), reserved.end(),
                           [&](const Reserved& r) { return r.pool == pool->id(); });
    if (it != reserved.end() && n <= it->n && cols <= it->cols) return;
    if (it == reserved.end()) it = reserved.insert(reserved.end(), {pool->id(), 0, 0});
    it->n = std::max(it->n, n);
    it->cols = std::max(it->cols, cols);
    const int64_t rn = it->n, rc = it->cols;
    pool->run_on_each_thread([rn, rc] { reserve_thread_scratch(rn, rc); });
}

namespace {

// Numerics::kFast where an int8 kernel exists: FP4 e2m1, 32-column groups, whole 128-column activation
// blocks, AVX-512 VNNI (GEMV and GEMM), or AVX-512 F/BW without VNNI at decode token counts (the GEMV).
bool fast_fits(const MatmulArgs& a, Isa isa) {
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    const core::Weight& w = *a.w;
    return num == Numerics::kFast && isa == Isa::kAvx512 &&
           (int8_supported() || (int8_gemv_supported() && a.n <= kGemvMaxTokens)) &&
           w.format == core::WeightFormat::kFp4Group && w.block_cols == 32 && w.cols % detail::kQBlock == 0;
}

// Numerics::kFast at the int8 GEMMs' token counts on VNNI + VBMI (gemm_int8.h): from kInt8OverBf16Tokens
// (linear.h) where the CPU also has AVX-512 BF16, whose GEMV is as fast below it (the GEMM's panel decode is
// a fixed cost per weight byte; measured on Zen 4, one core, cold weights: FP8 equal at 24 tokens, 3.25 vs
// 2.80 ms at 32; BF16 within noise from 12 to 24), from kGemvMaxTokens + 1 elsewhere.
bool fast_int8_gemm_counts(const MatmulArgs& a, Isa isa) {
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    const int64_t min_n = amx_supported()    ? kAmxMinTokens
                          : bf16_supported() ? kInt8OverBf16Tokens
                                             : kGemvMaxTokens + 1;
    return num == Numerics::kFast && isa == Isa::kAvx512 && fp8_int8_supported() && a.n >= min_n;
}
static_assert(kInt8OverBf16Tokens > kGemvMaxTokens && kAmxMinTokens > kGemvMaxTokens,
              "the int8 GEMMs never take GEMV (matmul_multi) counts");

// FP8-block weights whose every 128-column activation block lies inside one weight block.
bool fast_fp8_int8_fits(const MatmulArgs& a, Isa isa) {
    const core::Weight& w = *a.w;
    return fast_int8_gemm_counts(a, isa) && w.format == core::WeightFormat::kFp8Block &&
           w.block_cols % detail::kQBlock == 0 && w.cols % detail::kQBlock == 0;
}

// Weights carrying int8 panels (gemm_int8.h), for rows within the panels' range starting on one of their
// tiles: fast's LM head (model/lm_head.h, panels from its BF16 weights) from kPanelsMinTokens; a dense FP8
// weight (model/int8_panels.h, panels_are_decode) exactly where its FP8 int8 GEMM runs (never on AMX,
// whose FP8 calls take other kernels), so its results do not change (from 8 tokens it would move the
// GEMV's calls to the int8 GEMM's coarser numerics).
bool fast_panels_fit(const MatmulArgs& a, Isa isa) {
    const core::Weight& w = *a.w;
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    return w.panel_codes != nullptr && w.panel_scales != nullptr && w.cols % detail::kQBlock == 0 &&
           a.row_begin >= w.panel_row0 && a.row_end <= w.panel_row0 + w.panel_rows &&
           (a.row_begin - w.panel_row0) % detail::kQRowTile == 0 && num == Numerics::kFast &&
           isa == Isa::kAvx512 && fp8_int8_supported() &&
           (w.panels_are_decode ? !amx_supported() && fast_fp8_int8_fits(a, isa) : a.n >= kPanelsMinTokens);
}

// FP8-block (whole 128-column blocks, every block scale of the rows in amx_bf16_fp8_scale_ok's range) and
// BF16 weights at the int8 GEMMs' token counts where the CPU has AMX-BF16: gemm_amx_bf16.h instead.
bool fast_amx_bf16_fits(const MatmulArgs& a, Isa isa) {
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    const core::Weight& w = *a.w;
    if (num != Numerics::kFast || isa != Isa::kAvx512 || !detail::amx_bf16_enabled() ||
        a.n < kAmxBf16MinTokens || w.cols % detail::kQBlock != 0)
        return false;
    if (w.format == core::WeightFormat::kBF16) return true;
    return w.format == core::WeightFormat::kFp8Block && w.block_cols % detail::kQBlock == 0 &&
           fp8_scales_within(a, detail::kAmxBf16Fp8ScaleMin, detail::kAmxBf16Fp8ScaleMax);
}

// Numerics::kExact above kGemvMaxTokens where the CPU has AMX-BF16 (gemm_amx_bf16.h, the exact GEMM on
// AMX-BF16 tiles): BF16, FP8-block (whole 128-column blocks) and FP4-group (whole 32-column groups) weights
// of whole 128-column blocks whose scales keep every value a normal BF16; F32 and F16 weights, and any
// other scale, take the F32 GEMM. One boundary, the GEMV's, as on every other CPU (token-split invariance).
// Only where the process runs exact: under fast the one exact matmul (the MoE router, linear.h) keeps the
// F32 GEMM. There its call was the only AMX-BF16 work between the int8 tile GEMMs of a prefill and the
// experts after it ran 5-9% slower (flash2 fast prefill of 128 tokens, moe_experts 103-109 -> 111-119 ms
// per forward, also with the router's output discarded; not reproduced in a loop of the two kernels
// alone); and fast's results stay those of the F32 router.
bool exact_amx_bf16x3_fits(const MatmulArgs& a, Isa isa) {
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    const core::Weight& w = *a.w;
    if (num != Numerics::kExact || default_numerics() != Numerics::kExact || isa != Isa::kAvx512 ||
        !detail::amx_bf16_enabled() || a.n <= kGemvMaxTokens || w.cols % detail::kQBlock != 0)
        return false;
    switch (w.format) {
    case core::WeightFormat::kBF16:
        return true;
    case core::WeightFormat::kFp8Block:
        return w.block_cols % detail::kQBlock == 0 &&
               fp8_scales_within(a, detail::kAmxBf16Fp8ScaleMin, detail::kAmxBf16Fp8ScaleMax);
    case core::WeightFormat::kFp4Group:
        return w.block_cols % 32 == 0 &&
               fp8_scales_within(a, detail::kAmxBf16Fp4ScaleMin, detail::kAmxBf16Fp4ScaleMax);
    default:
        return false;
    }
}

// BF16 weights, each row's 128-column blocks requantized to int8 in its panel (where the BF16 GEMV,
// vdpbf16ps at half the int8 rate, would otherwise run).
bool fast_bf16_int8_fits(const MatmulArgs& a, Isa isa) {
    const core::Weight& w = *a.w;
    return fast_int8_gemm_counts(a, isa) && w.format == core::WeightFormat::kBF16 &&
           w.cols % detail::kQBlock == 0;
}

// Numerics::kFast for BF16 and FP8-block weights where the CPU has AVX-512 BF16: whole 32-column pairs, FP8
// scales in the GEMV's range, few tokens.
bool fast_bf16_fits(const MatmulArgs& a, Isa isa) {
    const Numerics num = a.numerics == Numerics::kDefault ? default_numerics() : a.numerics;
    const core::Weight& w = *a.w;
    if (num != Numerics::kFast || isa != Isa::kAvx512 || !bf16_supported() || w.cols % 32 != 0) return false;
    return w.format == core::WeightFormat::kBF16 ||
           (w.format == core::WeightFormat::kFp8Block && gemv_fits(a, 32));
}

// Exact BF16, FP8-block and FP4-group weights on AVX-512 at prefill token counts: the GEMV (weights decoded
// in registers, 4 rows x 4 tokens per tile, every token pass over a 4-row group reading its weights from L1)
// beats the blocked F32 GEMM, whose panel decode (F32 stores and reloads: 24 KiB of panel beside the
// activations in a 32 KiB L1) is a fixed cost per weight byte. One core, thread CPU time, 2048 x 4096 cold
// weights (bench/gemm_bench), % of the FP32 FMA peak, GEMM -> GEMV: FP8 at 24 tokens 50 -> 83%, at 128
// 74 -> 86%; FP4 at 24 45 -> 76%, at 128 73 -> 74%; BF16 at 16 39 -> 75%, at 128 72 -> 89%. The GEMV runs
// in chunks of at most kF32GemmTokens (matmul_isa), so a chunk's activations (2 MiB at 4096 columns) are
// re-read from L2 / L3 by every 4-row group. F32 weights with few rows (the mHC `fn` matrices: 24 or 4 rows
// x 16384 columns at hc_mult 4) take the GEMV too: the GEMM transposes the whole [n, cols] activation
// block (8 MiB at 128 tokens, rows 64 KiB apart) for 4 microtiles of work, and its 6-row tiles give the
// pool 4 items. V4-Flash-shaped layers, 128 tokens, 2 threads: 8-12 ms -> 1.7-2.1 ms per call. Larger F32
// and all F16 weights keep the GEMM.
//
// Measured on AMD (Zen 4). On an Intel Xeon (AVX-512 with AMX, 2 vCPUs, session 17) the GEMV reached only
// 30-40% of the FMA peak at 24-512 tokens and the GEMM 50-55% from 48 up (gemm_bench, ms per matrix, GEMV ->
// GEMM: FP8 at 32 tokens 6.66 -> 5.24, 128 30.1 -> 19.1, 512 119.7 -> 74.4; FP4 at 32 5.80 -> 5.57, 128 26.7
// -> 19.2; BF16 at 32 5.96 -> 5.79, 128 26.4 -> 19.9; at 16-24 the GEMV was ahead, 3.0-4.7 against
// 3.6-5.3), so off AMD these formats take the GEMM above kGemvMaxTokens, as every other ISA does: the GEMV
// and the GEMM sum in different orders (exact numerics either way), and one boundary at kGemvMaxTokens keeps
// a token's result independent of how a prompt is cut into calls past it (GemmExact.
// EveryTokenIsComputedAsInAnyTokenSplit), which a second boundary at ~32 tokens would break.
constexpr int64_t kF32GemvMaxRows = 64;
bool gemv_beats_gemm(const MatmulArgs& a, Isa isa) {
    const core::WeightFormat f = a.w->format;
    if (isa != Isa::kAvx512) return false;
    if (f == core::WeightFormat::kF32) return a.row_end - a.row_begin <= kF32GemvMaxRows;
    return (f == core::WeightFormat::kBF16 || f == core::WeightFormat::kFp8Block ||
            f == core::WeightFormat::kFp4Group) &&
           detail::amd_cpu();
}

// Token chunks of kBf16MaxTokens: each chunk's BF16 activations (64 x cols x 2 bytes: 512 KiB at 4096
// columns) stay in L2 while the weights stream past once per chunk.
void gemv_bf16(const MatmulArgs& a, core::ThreadPool* pool, bool serial) {
    static const detail::Bf16Table k = detail::avx512_bf16_table();
    if (a.n > detail::kBf16MaxTokens) {
        for (int64_t t0 = 0; t0 < a.n; t0 += detail::kBf16MaxTokens) {
            MatmulArgs c = a;
            c.x = a.x + t0 * a.ldx;
            c.y = a.y + t0 * a.ldy;
            c.n = std::min(detail::kBf16MaxTokens, a.n - t0);
            gemv_bf16(c, pool, serial);
        }
        return;
    }
    const core::Weight& w = *a.w;
    const int64_t rows = a.row_end - a.row_begin;
    const int64_t need = (a.n * w.cols + 1) / 2;
    auto* xb = reinterpret_cast<uint16_t*>(scratch_at(3, need));
    if (w.format == core::WeightFormat::kBF16) k.convert(a, xb);
    auto body = [&](int64_t b, int64_t e) {
        uint16_t* fold = nullptr;
        if (w.format == core::WeightFormat::kFp8Block) {
            fold = reinterpret_cast<uint16_t*>(scratch_at(2, detail::bf16_fold_floats(a.n, w.cols)));
        }
        k.gemv(a, b * 4, std::min(e * 4, rows), xb, fold);
    };
    for_row_groups(a, pool, serial, body);
}

// kFast decode: the int8 GEMV (activations quantized once, rows split over the pool in groups of 4);
// vpdpbusd where the CPU has VNNI, else vpmaddubsw + vpmaddwd (the same results).
void gemv_int8(const MatmulArgs& a, core::ThreadPool* pool, bool serial) {
    static const detail::Int8Table q =
        int8_supported() ? detail::avx512_vnni_table() : detail::avx512_int8_gemv_table();
    const core::Weight& w = *a.w;
    const int64_t rows = a.row_end - a.row_begin, nb = w.cols / detail::kQBlock;
    float* buf = scratch_at(3, detail::gemv_q_scratch_floats(a.n, w.cols));
    auto* xq = reinterpret_cast<int8_t*>(buf);
    auto* corr = reinterpret_cast<int32_t*>(buf + a.n * w.cols / 4);
    float* xs = buf + a.n * w.cols / 4 + a.n * nb * 16;
    q.quantize_gemv(a, xq, corr, xs);
    auto body = [&](int64_t b, int64_t e) { q.gemv(a, b * 4, std::min(e * 4, rows), xq, corr, xs); };
    for_row_groups(a, pool, serial, body);
}

// a's tokens in balanced chunks of at most max_tokens (equal sizes but for the last): fn(c), c the chunk's
// MatmulArgs (x, y and n moved to it).
template <class Fn> void for_token_chunks(const MatmulArgs& a, int64_t max_tokens, const Fn& fn) {
    const int64_t chunks = (a.n + max_tokens - 1) / max_tokens, per = (a.n + chunks - 1) / chunks;
    for (int64_t t0 = 0; t0 < a.n; t0 += per) {
        MatmulArgs c = a;
        c.x = a.x + t0 * a.ldx;
        c.y = a.y + t0 * a.ldy;
        c.n = std::min(per, a.n - t0);
        fn(c);
    }
}

// Output rows of a tile GEMM over the pool: guided chunks of whole panels (panel_rows: the int8 GEMMs'
// kQRowTile, the AMX-BF16 GEMM's kAmxBf16RowTile; at least two panels), so every panel is the same rows
// whatever the split (an FP4 panel's kernel depends on which rows it holds: gemm_int8.h) and neither core
// idles for more than a short chunk at the end. gemm(r0, r1, scratch), scratch of scratch_floats floats.
template <typename Gemm>
void panel_gemm_rows(const MatmulArgs& a, core::ThreadPool* pool, bool serial, int64_t panel_rows,
                     int64_t scratch_floats, const Gemm& gemm) {
    const int64_t rows = a.row_end - a.row_begin, micro_rows = (rows + 3) / 4;
    auto body = [&](int64_t b, int64_t e) {
        gemm(b * 4, std::min(e * 4, rows), scratch_at(2, scratch_floats));
    };
    const int64_t panel_groups = panel_rows / 4;
    if (serial)
        body(0, micro_rows);
    else
        guided_chunks(pool, micro_rows, panel_groups, 2 * panel_groups, body);
}

// The int8 GEMMs' table, picked once: AMX (FP8, BF16, FP4) where amx_supported(), else VNNI.
const detail::GemmQTable& int8_gemm_table() {
    static const detail::GemmQTable t =
        amx_supported() ? detail::avx512_amx_gemm_table() : detail::avx512_vnni_gemm_table();
    return t;
}

// The int8 GEMMs of gemm_int8.h (FP8, FP4 and BF16 weights on VNNI + VBMI, or AMX) after their own
// quantization of the activations (int8 and the seeds), once for all output rows, over the pool in groups of
// 8 tokens.
void matmul_int8(const MatmulArgs& a, core::ThreadPool* pool, bool serial, detail::GemmQ8Fn gemm) {
    const detail::GemmQTable& g = int8_gemm_table();
    const core::Weight& w = *a.w;
    // On AMX at most 8 tokens are padded to 16: a lone group of 8 (xq's token stride 32 bytes, the tiles
    // still 16 tokens wide) ran FP4 at 0.73-0.84 ms per 2048 x 4096 matrix against 0.43-0.46 padded
    // (gemm_bench, one core); on tiles 8 tokens wide, 0.97 against 0.49-0.55 (session 22).
    const int64_t pad = detail::kGemmQPad, nkb = w.cols / detail::kQBlock,
                  n_pad = amx_supported() && a.n <= pad ? 2 * pad : (a.n + pad - 1) / pad * pad;
    // xq [cols / 4, n_pad, 4] bytes, xs [nkb, n_pad], seed [nkb, 5, n_pad]
    float* buf = scratch_at(3, detail::gemm_q8_act_floats(n_pad, w.cols));
    auto* xq = reinterpret_cast<int8_t*>(buf);
    float* xs = buf + w.cols * n_pad / 4;
    auto* seed = reinterpret_cast<int32_t*>(xs + nkb * n_pad);
    auto quant = [&](int64_t b, int64_t e) { g.quantize(a, b * pad, e * pad, n_pad, xq, xs, seed); };
    serial ? quant(0, n_pad / pad) : pool->parallel_for(n_pad / pad, std::ref(quant));
    panel_gemm_rows(a, pool, serial, detail::kQRowTile, detail::int8_scratch_floats(n_pad),
                    [&](int64_t r0, int64_t r1, float* s) { gemm(a, r0, r1, xq, xs, seed, n_pad, s); });
}

// The AMX-BF16 GEMM (gemm_amx_bf16.h): the activations rounded to BF16 in the weight's panel order once per
// call (over the pool in groups of 16 tokens), then guided chunks of whole 32-row panels (so every row is
// computed by the same tile code whatever the split).
void matmul_amx_bf16(const MatmulArgs& a, core::ThreadPool* pool, bool serial) {
    static const detail::AmxBf16Table t = detail::avx512_amx_bf16_table();
    const core::Weight& w = *a.w;
    const bool fp8 = w.format == core::WeightFormat::kFp8Block;
    const int64_t n_pad = (a.n + 15) / 16 * 16;
    auto* xb = reinterpret_cast<uint16_t*>(scratch_at(3, w.cols * n_pad / 2)); // [cols / 2, n_pad, 2] BF16
    const detail::AmxBf16PrepareFn prepare = fp8 ? t.prepare_fp8 : t.prepare_bf16;
    auto prep = [&](int64_t b, int64_t e) { prepare(a, b * 16, e * 16, n_pad, xb); };
    serial ? prep(0, n_pad / 16) : pool->parallel_for(n_pad / 16, std::ref(prep));
    const detail::AmxBf16GemmFn gemm = fp8 ? t.fp8 : t.bf16;
    panel_gemm_rows(a, pool, serial, detail::kAmxBf16RowTile, detail::amx_bf16_scratch_floats(n_pad),
                    [&](int64_t r0, int64_t r1, float* s) { gemm(a, r0, r1, xb, n_pad, s); });
}

// The exact AMX-BF16 GEMM (gemm_amx_bf16.h): chunks of at most kAmxBf16x3Tokens tokens (balanced), each
// chunk's activations split into their three BF16 pieces once (over the pool in groups of 16 tokens), then
// guided chunks of whole 32-row panels, each panel decoded once per token chunk. pieces = 1: the fast
// variant past kAmxBf16MaxTokens (the activations rounded to BF16, chunks of kAmxBf16x1Tokens).
void matmul_amx_bf16x3(const MatmulArgs& a, core::ThreadPool* pool, bool serial, int pieces = 3) {
    static const detail::AmxBf16x3Table t = detail::avx512_amx_bf16x3_table();
    const core::Weight& w = *a.w;
    const bool fp8 = w.format == core::WeightFormat::kFp8Block;
    const bool one = pieces == 1;
    const detail::AmxBf16x3PrepareFn prepare =
        one ? (fp8 ? t.prepare1_fp8 : t.prepare1_cols) : (fp8 ? t.prepare_fp8 : t.prepare_cols);
    const detail::AmxBf16x3GemmFn gemm = one   ? (fp8 ? t.fp8_1 : t.bf16_1)
                                         : fp8 ? t.fp8
                                         : w.format == core::WeightFormat::kFp4Group ? t.fp4
                                                                                     : t.bf16;
    for_token_chunks(a, one ? detail::kAmxBf16x1Tokens : detail::kAmxBf16x3Tokens, [&](const MatmulArgs& c) {
        const int64_t groups = (c.n + 15) / 16;
        // xb3: pieces x groups x [cols / 2, 16, 2] BF16
        auto* xb3 = reinterpret_cast<uint16_t*>(scratch_at(3, pieces * groups * 16 * w.cols / 2));
        auto prep = [&](int64_t b, int64_t e) { prepare(c, b, e, xb3); };
        serial ? prep(0, groups) : pool->parallel_for(groups, std::ref(prep));
        panel_gemm_rows(c, pool, serial, detail::kAmxBf16RowTile, detail::amx_bf16x3_scratch_floats(groups),
                        [&](int64_t r0, int64_t r1, float* s) { gemm(c, r0, r1, xb3, groups, s); });
    });
}

// The older FP4 int8 GEMM (linear_avx512_vnni.cpp: CPUs with VNNI but not VBMI), activations as u8 in
// tokens padded to 16.
void matmul_int8_u8(const MatmulArgs& a, core::ThreadPool* pool, bool serial) {
    static const detail::Int8Table q = detail::avx512_vnni_table();
    const core::Weight& w = *a.w;
    const int64_t n_pad = (a.n + 15) / 16 * 16;
    // xq [cols / 4, n_pad, 4] bytes, then xs [cols / 128, n_pad]
    const int64_t xq_floats = w.cols * n_pad / 4, xs_floats = w.cols / detail::kQBlock * n_pad;
    float* buf = scratch_at(3, xq_floats + xs_floats);
    auto* xq = reinterpret_cast<uint8_t*>(buf);
    float* xs = buf + xq_floats;
    auto quant = [&](int64_t b, int64_t e) { q.quantize(a, b, e, n_pad, xq, xs); };
    serial ? quant(0, n_pad) : pool->parallel_for(n_pad, std::ref(quant));
    panel_gemm_rows(a, pool, serial, detail::kQRowTile, detail::int8_scratch_floats(n_pad),
                    [&](int64_t r0, int64_t r1, float* s) { q.gemm(a, r0, r1, xq, xs, n_pad, s); });
}

// The F32 GEMV: the activations prepared once in the layout the ISA's kernel reads, output rows handed to
// the pool in groups of 4 (so every thread runs the 4-stream kernel).
void gemv_f32(const MatmulArgs& a, const detail::KernelTable& k, core::ThreadPool* pool, bool serial) {
    const core::Weight& w = *a.w;
    const int64_t rows = a.row_end - a.row_begin;
    if (w.format == core::WeightFormat::kF32 && !serial && a.n >= 8 && rows <= kF32GemvMaxRows) {
        // F32 weights of a few rows (the mHC `fn` matrices, 24 x 16384 and 4 x 16384) at prefill token
        // counts: the tokens, not the rows, go to the pool in groups of 4, each thread computing every row
        // for its tokens, so the weights (1.5 MiB) stay in its L2 and its tokens' activations stream once
        // (split by rows, each 4-row group streamed all the tokens' activations, 8 MiB at 128 tokens,
        // again). F32 has no prep and no one-token branch, and a token's sums do not depend on the tokens
        // beside it in a tile: the results do not change. flash2 fast 128-token prefill, per-call timing,
        // 3 alternating runs: median 919-1097 -> 847-1009 us per 24 x 16384 call (L2-bound either way).
        auto tokens = [&](int64_t b, int64_t e) {
            MatmulArgs c = a;
            c.x = a.x + b * 4 * a.ldx;
            c.y = a.y + b * 4 * a.ldy;
            c.n = std::min(e * 4, a.n) - b * 4;
            const bool ok = k.gemv(c, 0, rows, nullptr, nullptr);
            DI_CHECK(ok) << "GEMV refused a layout the table's fits accepted";
        };
        guided_chunks(pool, (a.n + 3) / 4, 1, 1, tokens);
        return;
    }
    float* buf = scratch_at(0, a.n * w.cols);
    const float* xprep = k.prep(a, buf) ? buf : nullptr;
    auto body = [&](int64_t b, int64_t e) {
        const bool ok = k.gemv(a, b * 4, std::min(e * 4, rows), xprep, scratch_at(2, a.n * w.cols));
        DI_CHECK(ok) << "GEMV refused a layout the table's fits accepted";
    };
    for_row_groups(a, pool, serial, body);
}

// The F32 GEMM (every format): activations transposed once to xt [cols, n_pad] (tokens contiguous, zero
// padding), output rows split over the pool in 6-row microtiles.
void gemm_f32(const MatmulArgs& a, const detail::KernelTable& k, core::ThreadPool* pool, bool serial) {
    const core::Weight& w = *a.w;
    const int64_t rows = a.row_end - a.row_begin;
    const int64_t n_pad = (a.n + 7) / 8 * 8; // the GEMM runs a last group of 8 tokens as 8 (GemmFn)
    float* xt = scratch_at(1, w.cols * n_pad);
    auto transpose = [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
            float* dst = xt + c * n_pad;
            for (int64_t i = 0; i < a.n; ++i) dst[i] = a.x[i * a.ldx + c];
            for (int64_t i = a.n; i < n_pad; ++i) dst[i] = 0.0f;
        }
    };
    serial ? transpose(0, w.cols) : pool->parallel_for(w.cols, std::ref(transpose));
    const int64_t micro_rows = (rows + 5) / 6;
    auto body = [&](int64_t b, int64_t e) {
        float* panel = scratch_at(2, detail::kGemmRowTile * (detail::kGemmKc + n_pad));
        k.gemm(a, b * 6, std::min(e * 6, rows), xt, n_pad, panel,
               panel + detail::kGemmRowTile * detail::kGemmKc);
    };
    serial ? body(0, micro_rows) : pool->parallel_for(micro_rows, std::ref(body));
}

// matmul_multi's fused paths. Which path matmul_isa takes for `a` when that path is a GEMV whose activation
// preparation one call can share (decode token counts; the GEMMs and the int8 GEMV keep their own calls).
enum class MultiPath { kNone, kGemvF32, kGemvBf16 };

MultiPath multi_path(const MatmulArgs& a, Isa isa, const detail::KernelTable& k) {
    if (isa == Isa::kRef || a.n > kGemvMaxTokens || a.row_end == a.row_begin) return MultiPath::kNone;
    if (fast_panels_fit(a, isa) || fast_amx_bf16_fits(a, isa)) return MultiPath::kNone;
    if (fast_bf16_fits(a, isa)) return MultiPath::kGemvBf16;
    if (fast_fits(a, isa)) return MultiPath::kNone;
    return k.fits(a) ? MultiPath::kGemvF32 : MultiPath::kNone;
}

// Whether entry i reads the same activations as entry i - 1 (its prepared copy can be reused).
bool same_x_as_previous(std::span<const MatmulArgs> args, size_t i) {
    return i > 0 && args[i].x == args[i - 1].x && args[i].ldx == args[i - 1].ldx;
}

// Floats per entry of the prepared-activation scratch: [n, cols], rounded up to whole 64-byte lines.
int64_t prep_stride(int64_t n, int64_t cols) {
    return (n * cols + 15) / 16 * 16;
}

// The exact GEMV of several weights of one format and width: each distinct activation matrix prepared once
// (prep depends on x, the format, the width and, for FP4, the group size), then one loop over all their
// row groups.
void multi_gemv_f32(std::span<const MatmulArgs> args, const detail::KernelTable& k, core::ThreadPool* pool,
                    bool serial) {
    const MatmulArgs& a0 = args[0];
    const int64_t stride = prep_stride(a0.n, a0.w->cols);
    float* buf = scratch_at(0, stride * static_cast<int64_t>(args.size()));
    std::array<const float*, kMaxMultiMatmuls> xprep{};
    for (size_t i = 0; i < args.size(); ++i) {
        float* dst = buf + static_cast<int64_t>(i) * stride;
        xprep[i] = same_x_as_previous(args, i) ? xprep[i - 1] : k.prep(args[i], dst) ? dst : nullptr;
    }
    const int64_t need = a0.n * a0.w->cols;
    auto body = [&](int i, int64_t b, int64_t e) {
        const MatmulArgs& a = args[static_cast<size_t>(i)];
        const bool ok = k.gemv(a, b * 4, std::min(e * 4, a.row_end - a.row_begin),
                               xprep[static_cast<size_t>(i)], scratch_at(2, need));
        DI_CHECK(ok) << "GEMV refused a layout the table's fits accepted";
    };
    for_row_groups_multi(args, pool, serial, body);
}

// kFast: the BF16 GEMV (vdpbf16ps) of several BF16 or FP8-block weights of one format and width, each
// distinct activation matrix converted to BF16 once (BF16 weights; FP8 folds its scales per chunk).
void multi_gemv_bf16(std::span<const MatmulArgs> args, core::ThreadPool* pool, bool serial) {
    static const detail::Bf16Table k = detail::avx512_bf16_table();
    const MatmulArgs& a0 = args[0];
    const int64_t stride = prep_stride(a0.n, a0.w->cols); // floats: room for twice the BF16 needed
    float* buf = scratch_at(3, stride * static_cast<int64_t>(args.size()));
    std::array<uint16_t*, kMaxMultiMatmuls> xb{};
    for (size_t i = 0; i < args.size(); ++i) {
        xb[i] = same_x_as_previous(args, i)
                    ? xb[i - 1]
                    : reinterpret_cast<uint16_t*>(buf + static_cast<int64_t>(i) * stride);
        if (!same_x_as_previous(args, i) && a0.w->format == core::WeightFormat::kBF16)
            k.convert(args[i], xb[i]);
    }
    auto body = [&](int i, int64_t b, int64_t e) {
        const MatmulArgs& a = args[static_cast<size_t>(i)];
        uint16_t* fold = nullptr;
        if (a.w->format == core::WeightFormat::kFp8Block) {
            fold = reinterpret_cast<uint16_t*>(scratch_at(2, detail::bf16_fold_floats(a.n, a.w->cols)));
        }
        k.gemv(a, b * 4, std::min(e * 4, a.row_end - a.row_begin), xb[static_cast<size_t>(i)], fold);
    };
    for_row_groups_multi(args, pool, serial, body);
}

} // namespace

int64_t fast_fp4_gemv_max_tokens() {
    return amx_supported() ? kAmxFp4MinTokens - 1 : kGemvMaxTokens;
}

void matmul(const MatmulArgs& a) {
    matmul_isa(a, active_isa());
}

void matmul_isa(const MatmulArgs& a, Isa isa) {
    DI_CHECK(a.w != nullptr);
    const core::Weight& w = *a.w;
    DI_CHECK(a.row_begin >= 0 && a.row_begin <= a.row_end && a.row_end <= w.rows);
    DI_CHECK(a.ldx >= w.cols && a.ldy >= a.row_end - a.row_begin);
    DI_CHECK(isa_supported(isa)) << "ISA " << isa_name(isa) << " is not supported by this CPU";
    const int64_t rows = a.row_end - a.row_begin;
    if (rows == 0 || a.n == 0) return;
    core::ThreadPool* pool = a.pool != nullptr ? a.pool : &core::ThreadPool::global();
    if (isa == Isa::kRef) {
        detail::matmul_generic(a, pool);
        return;
    }
    // Long prompts go through in token chunks: scratch (the transposed / quantized activations) stays
    // bounded at kMaxTokensPerCall x cols, and each chunk still reuses every weight panel 512 times.
    if (a.n > kMaxTokensPerCall) {
        for (int64_t t0 = 0; t0 < a.n; t0 += kMaxTokensPerCall) {
            MatmulArgs c = a;
            c.x = a.x + t0 * a.ldx;
            c.y = a.y + t0 * a.ldy;
            c.n = std::min(kMaxTokensPerCall, a.n - t0);
            matmul_isa(c, isa);
        }
        return;
    }
    const detail::KernelTable& k = table(isa);
    // Small problems are not worth waking the pool.
    const bool serial = rows * a.n * w.cols < (1 << 16) || pool->num_threads() == 1;
    if (fast_panels_fit(a, isa)) {
        matmul_int8(a, pool, serial, int8_gemm_table().panels);
        return;
    }
    if (fast_amx_bf16_fits(a, isa)) {
        if (a.n <= detail::kAmxBf16MaxTokens)
            matmul_amx_bf16(a, pool, serial);
        else
            matmul_amx_bf16x3(a, pool, serial, 1);
        return;
    }
    if (exact_amx_bf16x3_fits(a, isa)) {
        matmul_amx_bf16x3(a, pool, serial);
        return;
    }
    if (fast_fp8_int8_fits(a, isa)) {
        matmul_int8(a, pool, serial, int8_gemm_table().fp8);
        return;
    }
    if (fast_bf16_int8_fits(a, isa)) {
        matmul_int8(a, pool, serial, int8_gemm_table().bf16);
        return;
    }
    if (fast_bf16_fits(a, isa)) {
        gemv_bf16(a, pool, serial);
        return;
    }
    if (fast_fits(a, isa)) {
        // The GEMM of gemm_int8.h where the CPU has VBMI (AMX where it has that), else
        // linear_avx512_vnni.cpp's (VNNI only).
        if (a.n <= fast_fp4_gemv_max_tokens())
            gemv_int8(a, pool, serial);
        else if (fp8_int8_supported())
            matmul_int8(a, pool, serial, int8_gemm_table().fp4);
        else
            matmul_int8_u8(a, pool, serial);
        return;
    }

    // The F32 paths, in chunks of kF32GemmTokens. GEMM: each weight panel is decoded once per chunk, and the
    // chunk's transposed activations (128 x cols floats: 2 MiB at 4096 columns) are reused from L2 / L3 by
    // every panel instead of 512 x cols streaming from memory per panel (one core: 58% -> 67% of FMA at 512
    // tokens). GEMV (decode, and exact FP8 / FP4 on AVX-512 at every token count: gemv_beats_gemm): the
    // chunk's activations likewise stay in L2 / L3 while each 4-row group's weights sit in L1. Every
    // output is the same sum in the same order whatever the chunking (each kernel's tiles compute a token
    // independently of the others). Chunks are balanced (at least 65 tokens when there are several), so no
    // chunk is short enough to take the FP4 GEMV's 1-2 token kernel.
    for_token_chunks(a, kF32GemmTokens, [&](const MatmulArgs& c) {
        if ((c.n <= kGemvMaxTokens || gemv_beats_gemm(c, isa)) && k.fits(c))
            gemv_f32(c, k, pool, serial);
        else
            gemm_f32(c, k, pool, serial);
    });
}

void matmul_multi(std::span<const MatmulArgs> args) {
    matmul_multi_isa(args, active_isa());
}

void matmul_multi_isa(std::span<const MatmulArgs> args, Isa isa) {
    DI_CHECK(args.size() <= static_cast<size_t>(kMaxMultiMatmuls))
        << "matmul_multi: " << args.size() << " matmuls, at most " << kMaxMultiMatmuls;
    if (args.empty()) return;
    const MatmulArgs& a0 = args[0];
    for (const MatmulArgs& a : args) {
        DI_CHECK(a.w != nullptr);
        DI_CHECK(a.n == a0.n && a.pool == a0.pool && a.numerics == a0.numerics)
            << "matmul_multi: every matmul must have the same token count, pool and numerics";
        DI_CHECK(a.row_begin >= 0 && a.row_begin <= a.row_end && a.row_end <= a.w->rows);
        DI_CHECK(a.ldx >= a.w->cols && a.ldy >= a.row_end - a.row_begin);
    }
    DI_CHECK(isa_supported(isa)) << "ISA " << isa_name(isa) << " is not supported by this CPU";
    // Fused when every matmul takes the same GEMV over weights of one format, width and group size (the
    // activations prepared the same way for all); otherwise one call each.
    MultiPath path = MultiPath::kNone;
    if (args.size() > 1 && a0.n > 0 && isa != Isa::kRef) {
        const detail::KernelTable& k = table(isa);
        path = multi_path(a0, isa, k);
        for (const MatmulArgs& a : args.subspan(1)) {
            if (path == MultiPath::kNone) break;
            if (multi_path(a, isa, k) != path || a.w->format != a0.w->format || a.w->cols != a0.w->cols ||
                a.w->block_cols != a0.w->block_cols)
                path = MultiPath::kNone;
        }
    }
    if (path == MultiPath::kNone) {
        for (const MatmulArgs& a : args) matmul_isa(a, isa);
        return;
    }
    core::ThreadPool* pool = a0.pool != nullptr ? a0.pool : &core::ThreadPool::global();
    int64_t work = 0;
    for (const MatmulArgs& a : args) work += (a.row_end - a.row_begin) * a.n * a.w->cols;
    const bool serial = work < (1 << 16) || pool->num_threads() == 1;
    if (path == MultiPath::kGemvBf16)
        multi_gemv_bf16(args, pool, serial);
    else
        multi_gemv_f32(args, table(isa), pool, serial);
}

} // namespace deepinfer::kernels::cpu
