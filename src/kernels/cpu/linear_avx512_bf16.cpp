// Numerics::kFast for BF16 weights on AVX-512 BF16 (vdpbf16ps): the activations are rounded to BF16 once
// per call (round to nearest even), the weights are used as stored (no decoding at all), and each
// instruction multiplies 32 BF16 pairs into 16 F32 lanes (products exact, F32 accumulation; inputs
// denormal in BF16 read as zero). Small token counts only (decode and batched decode, n <= kBf16MaxTokens):
// 4 weight rows x up to 4 tokens per tile, so each weight byte comes from DRAM once and is reused from L1/L2
// by the other token tiles. Compiled with -mavx512bf16; reached only when the CPU reports it.

#include <immintrin.h>

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/linear_kernels.h"

namespace deepinfer::kernels::cpu::detail::avx512bf16 {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

inline __m512bh load_bh(const uint16_t* p) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

// xb [n, cols] = the activations in BF16, column order (cols % 32 == 0).
void convert(const MatmulArgs& a, uint16_t* xb) {
    const int64_t cols = a.w->cols;
    for (int64_t t = 0; t < a.n; ++t) {
        const float* x = a.x + t * a.ldx;
        for (int64_t c = 0; c < cols; c += 32) {
            const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + c + 16), _mm512_loadu_ps(x + c));
            _mm512_storeu_si512(xb + t * cols + c, reinterpret_cast<__m512i>(v));
        }
    }
}

// 32 weights of row p as BF16 pairs. FP8 e4m3: sign-extended to 16 bits, shifted left 4, masked 0x87f0:
// the BF16 is the value x 2^-120 (the e4m3 subnormals land on BF16 denormals, which vdpbf16ps reads as
// zero: fast mode drops weights below 2^-6 of their block scale).
template <bool kFp8> inline __m512bh load_w(const void* base, int64_t off) {
    if constexpr (kFp8) {
        const __m512i b = _mm512_cvtepi8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint8_t*>(base) + off)));
        return reinterpret_cast<__m512bh>(
            _mm512_and_si512(_mm512_slli_epi16(b, 4), _mm512_set1_epi16(static_cast<short>(0x87f0))));
    } else {
        return load_bh(static_cast<const uint16_t*>(base) + off);
    }
}

// Rows r, r + rs, ..., r + (R - 1) rs (rs = 1: consecutive rows; rs > 1: one row of each of R row streams,
// row_streams in linear_kernels.h).
template <bool kFp8, int R, int T>
void tile(const MatmulArgs& a, int64_t r, int64_t rs, int64_t t0, const uint16_t* xb, float out_scale) {
    const core::Weight& w = *a.w;
    const int64_t cols = w.cols;
    // The rows read next, prefetched into L2 by the first token tile, once per 64-byte line (the exact
    // GEMV's NextTile, linear_impl.h: the hardware prefetcher restarts at every tile).
    constexpr int64_t kBytes = kFp8 ? 1 : 2;
    const char* next[R];
    const bool prefetch = t0 == 0;
    for (int i = 0; i < R; ++i)
        next[i] =
            static_cast<const char*>(w.data) + next_rows_offset(r + i * rs, rs, R, cols * kBytes, w.rows);
    if (T == 1 && R > 1 && gemv_rows_in_l1()) {
        // One token where gemv_rows_in_l1 (AMD): the rows in a loop that is not unrolled, their accumulators
        // in an L1 array (the exact GEMV's batch-1 BF16 loop, linear_impl.h: on Zen 4 it issues its weight
        // loads less far ahead and streams at ~95% of a plain read, where the register loop below reached
        // 70-80%; on an Intel Xeon the register loop is ahead). Same arithmetic as the register loop.
        alignas(64) float am[R][16];
        for (int i = 0; i < R; ++i) _mm512_store_ps(am[i], _mm512_setzero_ps());
        const char* row0 = static_cast<const char*>(w.data) + r * cols * kBytes;
        for (int64_t c = 0; c < cols; c += 32) {
            const __m512bh xv = load_bh(xb + t0 * cols + c);
            const bool line = prefetch && (kBytes == 2 || c % 64 == 0);
#pragma GCC unroll 1
            for (int i = 0; i < R; ++i) {
                const __m512bh wv = load_w<kFp8>(row0 + i * rs * cols * kBytes, c);
                if (line) _mm_prefetch(next[i] + c * kBytes, _MM_HINT_T1);
                _mm512_store_ps(am[i], _mm512_dpbf16_ps(_mm512_load_ps(am[i]), wv, xv));
            }
        }
        for (int i = 0; i < R; ++i)
            a.y[t0 * a.ldy + (r + i * rs - a.row_begin)] =
                _mm512_reduce_add_ps(_mm512_load_ps(am[i])) * out_scale;
        return;
    }
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; c += 32) {
        __m512bh xv[T];
        for (int t = 0; t < T; ++t) xv[t] = load_bh(xb + (t0 + t) * cols + c);
        if (prefetch && (kBytes == 2 || c % 64 == 0))
            for (int i = 0; i < R; ++i) _mm_prefetch(next[i] + c * kBytes, _MM_HINT_T1);
        for (int i = 0; i < R; ++i) {
            const __m512bh wv = load_w<kFp8>(w.data, (r + i * rs) * cols + c);
            for (int t = 0; t < T; ++t) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv, xv[t]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t)
            a.y[(t0 + t) * a.ldy + (r + i * rs - a.row_begin)] = _mm512_reduce_add_ps(acc[i][t]) * out_scale;
}

template <bool kFp8, int R>
void rows(const MatmulArgs& a, int64_t r, int64_t rs, const uint16_t* xb, float out_scale) {
    for (int64_t t0 = 0; t0 < a.n; t0 += 4) {
        switch (min64(4, a.n - t0)) {
        case 1:
            tile<kFp8, R, 1>(a, r, rs, t0, xb, out_scale);
            break;
        case 2:
            tile<kFp8, R, 2>(a, r, rs, t0, xb, out_scale);
            break;
        case 3:
            tile<kFp8, R, 3>(a, r, rs, t0, xb, out_scale);
            break;
        default:
            tile<kFp8, R, 4>(a, r, rs, t0, xb, out_scale);
            break;
        }
    }
}

// One token takes the tiles above (row streams, its sums in L1 on AMD) like any other count, so a token's
// sums are the same chains whether it runs alone or beside up to 3 others in a tile: the same bits
// (LinearHarness.FastBf16DotTokenAloneOrInATileIsBitIdentical). Until session 27 one token on AMD read one
// row at a time with four interleaved accumulators (its own summation order), measured ahead of the
// register tile in session 12 (before the row streams and the L1 sums). Against today's tile, flash2
// `fast` decode at batch 1 (bench --prompt-len 16 --gen 32 --repeats 3, 16 alternating runs): 30.3 -> 31.5
// tok/s median, the tile ahead in 13; its census, 4 alternating pairs: lm_head (129280 x 4096 FP8) 29.3,
// 29.6, 36.3, 29.8 -> 32.1, 31.1, 40.9, 31.3 GB/s, `linear` mixed. bench-small (BF16, 1024 columns): a tie
// (6 pairs). docs/kernels.md, "Session 27".
template <bool kFp8>
void range(const MatmulArgs& a, int64_t r, int64_t end, const uint16_t* xb, float out_scale) {
    if (row_streams())
        r = for_row_streams(r, end, [&](int64_t j, int64_t q) { rows<kFp8, 4>(a, j, q, xb, out_scale); });
    for (; r + 4 <= end; r += 4) rows<kFp8, 4>(a, r, 1, xb, out_scale);
    for (; r < end; ++r) rows<kFp8, 1>(a, r, 1, xb, out_scale);
}

inline float bits_f32(uint32_t b) {
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}

// One token, FP8: rows r + i q (i < 4), each with its own folded activations f[i] (its row block's scales):
// the register tile above with T = 1 (the same chain per row, bit-identical), for row streams that span
// several row blocks.
void tile_fp8_streams(const MatmulArgs& a, int64_t r, int64_t q, const uint16_t* const* f, float out_scale) {
    const core::Weight& w = *a.w;
    const int64_t cols = w.cols;
    const auto* base = static_cast<const uint8_t*>(w.data);
    const uint8_t* row[4];
    const char* next[4];
    for (int i = 0; i < 4; ++i) {
        row[i] = base + (r + i * q) * cols;
        next[i] = reinterpret_cast<const char*>(base) + next_rows_offset(r + i * q, q, 4, cols, w.rows);
    }
    __m512 acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; c += 32) {
        if (c % 64 == 0)
            for (int i = 0; i < 4; ++i) _mm_prefetch(next[i] + c, _MM_HINT_T1);
        for (int i = 0; i < 4; ++i)
            acc[i] = _mm512_dpbf16_ps(acc[i], load_w<true>(row[i], c), load_bh(f[i] + c));
    }
    for (int i = 0; i < 4; ++i) a.y[r + i * q - a.row_begin] = _mm512_reduce_add_ps(acc[i]) * out_scale;
}

// BF16 weights: xb is the converted activations. FP8 blocks: one row block at a time, the block scales
// folded into a BF16 copy of the activations in `fold` [n, cols] (x * 2^(s - 127 + kFold), the sum times
// 2^(120 - kFold)), as the exact FP8 GEMV does; the caller checked every scale is in [60, 134].
constexpr int kFold = 60;
void gemv(const MatmulArgs& a, int64_t r0, int64_t r1, const uint16_t* xb, uint16_t* fold) {
    const core::Weight& w = *a.w;
    int64_t r = a.row_begin + r0;
    const int64_t end = a.row_begin + r1;
    if (w.format != core::WeightFormat::kFp8Block) {
        range<false>(a, r, end, xb, 1.0f);
        return;
    }
    const int64_t cols = w.cols, br = w.block_rows, bc = w.block_cols, sc = (cols + bc - 1) / bc;
    const float out_scale = bits_f32(static_cast<uint32_t>(127 + 120 - kFold) << 23);
    // fold [n, cols] = token t's activations times row block rb's scales.
    auto fold_block = [&](int64_t rb, int64_t n, uint16_t* out) {
        const uint8_t* srow = w.scale + rb * sc;
        for (int64_t t = 0; t < n; ++t) {
            const float* x = a.x + t * a.ldx;
            for (int64_t c = 0; c < cols; c += 32) {
                const __m512 f = _mm512_set1_ps(bits_f32(static_cast<uint32_t>(srow[c / bc] + kFold) << 23));
                const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_loadu_ps(x + c + 16), f),
                                                       _mm512_mul_ps(_mm512_loadu_ps(x + c), f));
                _mm512_storeu_si512(out + t * cols + c, reinterpret_cast<__m512i>(v));
            }
        }
    };
    // One token with row streams of at least a row block each: the streams run through several row blocks,
    // each stream with its own fold (fold [4, cols]), refolded as it enters a block. Longer streams read
    // faster than 4 streams inside each 128-row block (docs/kernels.md, "Session 23").
    if (a.n == 1 && row_streams() && !gemv_rows_in_l1() && !amd_cpu() && (end - r) / 4 >= br) {
        const uint16_t* f[4] = {fold, fold + cols, fold + 2 * cols, fold + 3 * cols};
        int64_t held[4] = {-1, -1, -1, -1}; // the row block each stream's fold holds
        r = for_row_streams(r, end, [&](int64_t j, int64_t q) {
            for (int i = 0; i < 4; ++i) {
                const int64_t rb = (j + i * q) / br;
                if (rb != held[i]) {
                    fold_block(rb, 1, fold + i * cols);
                    held[i] = rb;
                }
            }
            tile_fp8_streams(a, j, q, f, out_scale);
        });
    }
    while (r < end) {
        const int64_t stop = min64(end, (r / br + 1) * br);
        fold_block(r / br, a.n, fold);
        range<true>(a, r, stop, fold, out_scale);
        r = stop;
    }
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::avx512bf16

namespace deepinfer::kernels::cpu::detail {
Bf16Table avx512_bf16_table() {
    Bf16Table t;
    t.convert = &avx512bf16::convert;
    t.gemv = &avx512bf16::gemv;
    return t;
}
} // namespace deepinfer::kernels::cpu::detail
