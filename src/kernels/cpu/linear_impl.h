#pragma once
// Internal: the SIMD linear kernels, written once over an ISA traits type `I` and included by exactly one
// translation unit per ISA (linear_avx512.cpp, linear_avx2.cpp), each compiled with its own target flags.
// Everything here sits in that TU's own namespace (DI_ISA_NS) so no inline function compiled for one ISA
// can be picked by the linker for another; the only calls out are non-inline core functions (Weight::at;
// not even Weight's inline helpers, hence scale_cols below).
//
// Traits `I` provide: V (vector of I::kW floats), kNv (token vectors per GEMM microtile), zero, set1,
// loadu, storeu, fma, mul, reduce, and the weight decoders:
//   bf16(p) / f16(p)             kW columns widened (BF16 by a 16-bit shift),
//   fp8_raw(p)                   kW e4m3 bytes as floats scaled by 2^-kFp8RawLog2 (exact, all normal),
//   fp4_lut()                    the e2m1 table (times a group scale, it is the `lut` below),
//   fp4_pair(p, lut, even, odd)  2*kW e2m1 codes (kW bytes) through the table, even and odd columns,
//   fp4_natural(p, lut)          kW e2m1 codes (kW/2 bytes) in column order,
//   e8m0_vec(p)                  kW e8m0 scale bytes as floats 2^(s-127) (0: 2^-127, 255: NaN).

#include <cstdint>

#include "core/weight.h"
#include "kernels/cpu/linear_kernels.h"

#ifndef DI_ISA_NS
#error "define DI_ISA_NS before including linear_impl.h"
#endif

namespace deepinfer::kernels::cpu::detail::DI_ISA_NS {

using core::WeightFormat;

inline float bits_f32(uint32_t b) {
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}
// e8m0 scale 2^(s-127) (s == 0 is the subnormal 2^-127, 255 NaN).
inline float e8m0(uint8_t s) {
    return bits_f32(s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : static_cast<uint32_t>(s) << 23);
}
inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
inline int64_t scale_cols(const core::Weight& w) {
    return (w.cols + w.block_cols - 1) / w.block_cols;
}

// ---------------------------------------------------------------------------------------------- GEMV
// FP8 GEMV folds the scales into the activations: per block, x' = x * 2^(s-127) * 2^kFp8Fold, so the inner
// loop is decode (fp8_raw: value * 2^-kFp8RawLog2) + FMA, and the sum is multiplied by
// 2^(kFp8RawLog2 - kFp8Fold) at the end. Only scales in [kFp8MinScale, kFp8MaxScale] take this path (others:
// the GEMM), which keeps x' finite for |x| < 2^61 and every product far from the subnormal range.
constexpr int kFp8Fold = 60;
constexpr int kFp8RawLog2 = 8; // fp8_raw's values are the e4m3 values times 2^-8 (as FP16 bits, widened)
constexpr int kFp8MinScale = 60, kFp8MaxScale = 134;

// FP4 on AVX-512 takes the "words" kernel for calls of at most this many tokens; it decodes 128 codes in
// ~15 ops but keeps R x T unscaled chunk sums, so it runs at most 2 tokens per pass over the weights. More
// tokens take the even/odd kernel (4 tokens per pass, decoding once per pass), which is ahead from n = 4.
constexpr int64_t kFp4WordsMaxTokens = 2;
template <class I> bool fp4_words(const MatmulArgs& a) {
    return I::kPairs && a.n <= kFp4WordsMaxTokens;
}

// Activation layouts the GEMV reads (xprep [n, cols], written once per call by `prep`):
//  - I::kPairs (AVX-512), BF16: per 32 columns the 16 even columns, then the 16 odd ones. One 64-byte load is
//    32 BF16 weights; the even ones become floats by a shift, the odd ones by a mask, with no word-to-dword
//    expansion (a shuffle) per vector.
//  - I::kPairs, FP4, calls of <= kFp4WordsMaxTokens tokens: "words": per 128 columns (64 bytes, 32 16-bit
//  words of 4 codes), for k = 0..3 the
//    vector [x(8j + k)]_j then [x(8j + 4 + k)]_j, j = 0..15: the k-th code of every word goes through one
//    vpermw on the BF16 e2m1 table, even words are lane j's column 8j + k, odd words 8j + 4 + k.
//  - other FP4 calls: per 2W columns the W even columns, then the W odd ones (the low / high nibbles).
// Columns past the last whole group are copied unchanged (the GEMV's scalar tail reads a.x anyway).
template <class I> void split_even_odd(const MatmulArgs& a, int64_t h, float* xprep) {
    const int64_t cols = a.w->cols, full = cols / (2 * h) * (2 * h);
    for (int64_t i = 0; i < a.n; ++i) {
        const float* x = a.x + i * a.ldx;
        float* dst = xprep + i * cols;
        int64_t g = 0;
        if constexpr (I::kPairs)
            if (h == 16)
                for (; g < full; g += 32) I::split32(x + g, dst + g);
        for (; g < full; g += 2 * h)
            for (int64_t j = 0; j < h; ++j) {
                dst[g + j] = x[g + 2 * j];
                dst[g + h + j] = x[g + 2 * j + 1];
            }
        for (int64_t c = full; c < cols; ++c) dst[c] = x[c];
    }
}
// c + a * b for the column tails: one fused multiply-add where the translation unit has FMA (what the
// compiler's contraction of `s += a * b` gave in a release build), mul then add where it has not. Spelled
// out because that contraction depended on the build: the sanitizer build's checks between the multiply
// and the add kept them apart, so its exact FP4 GEMV gave other bits than the release build's.
inline float tail_madd(float a, float b, float c) {
#ifdef __FMA__
    return __builtin_fmaf(a, b, c);
#else
    return c + a * b;
#endif
}
constexpr int64_t kFp4Chunk = 128; // columns per FP4 "words" step: 64 bytes
template <class I> void split_fp4_words(const MatmulArgs& a, float* xprep) {
    const int64_t cols = a.w->cols, full = cols / kFp4Chunk * kFp4Chunk;
    for (int64_t i = 0; i < a.n; ++i) {
        const float* x = a.x + i * a.ldx;
        float* dst = xprep + i * cols;
        for (int64_t c0 = 0; c0 < full; c0 += kFp4Chunk) I::words128(x + c0, dst + c0);
        for (int64_t c = full; c < cols; ++c) dst[c] = x[c];
    }
}

// Whether gemv_tile reads this format from its xprep argument: what prep wrote, or for FP8 the copy of the
// activations with the block scales folded in (gemv_format).
template <class I, WeightFormat F> constexpr bool uses_prep() {
    return F == WeightFormat::kFp4Group || F == WeightFormat::kFp8Block ||
           (I::kPairs && F == WeightFormat::kBF16);
}
// Columns of one vector step of the BF16 pair layout (kPairs).
constexpr int64_t kPairCols = 32;

template <class I> bool prep(const MatmulArgs& a, float* xprep) {
    switch (a.w->format) {
    case WeightFormat::kF32:
    case WeightFormat::kF16:
        return false;
    case WeightFormat::kBF16:
        if (!I::kPairs) return false;
        split_even_odd<I>(a, kPairCols / 2, xprep);
        return true;
    case WeightFormat::kFp8Block:
        // The FP8 GEMV folds its scales into a copy of a.x (fp8_fold_activations) in column order. (A pair
        // layout for FP8 saved only ~4% of its CPU time and changed its summation order, which flipped a
        // fake-quantized V4.1 cache value past the tiny-v41-fp8 golden's tolerance.)
        return false;
    case WeightFormat::kFp4Group:
        if constexpr (I::kPairs) {
            if (fp4_words<I>(a)) {
                split_fp4_words<I>(a, xprep);
                return true;
            }
        }
        split_even_odd<I>(a, I::kW, xprep);
        return true;
    }
    return false;
}

// FP4 "words" (kPairs): every 8-column lane group lies in one scale group, and a 128-column chunk's groups
// lie in one aligned window of 16 groups (so one decoded vector of 16 scales serves the chunk).
inline bool fp4_words_fit(int64_t bc) {
    return bc % 8 == 0 && (kFp4Chunk % bc == 0 || bc % kFp4Chunk == 0);
}

// One of the four code positions K of an FP4 "words" chunk for R rows x T tokens: b[i][t] += the chunk's
// codes K (even and odd words) x the matching activations (unscaled; the group scales multiply b once).
template <class I, int R, int T, int K>
inline void fp4_words_step(const typename I::VI* d, typename I::VI lut, const float* const* x, int64_t c0,
                           typename I::V (*b)[T]) {
    using V = typename I::V;
    V xe[T], xo[T];
    for (int t = 0; t < T; ++t) {
        xe[t] = I::loadu(x[t] + c0 + 32 * K);
        xo[t] = I::loadu(x[t] + c0 + 32 * K + 16);
    }
    for (int i = 0; i < R; ++i) {
        V e, o;
        I::template fp4_word<K>(d[i], lut, e, o);
        for (int t = 0; t < T; ++t) {
            b[i][t] = K == 0 ? I::mul(e, xe[t]) : I::fma(e, xe[t], b[i][t]);
            b[i][t] = I::fma(o, xo[t], b[i][t]);
        }
    }
}

// Bytes of one stored weight row (FP4: two codes per byte).
template <WeightFormat F> inline int64_t row_bytes(int64_t cols) {
    switch (F) {
    case WeightFormat::kF32:
        return cols * 4;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
        return cols * 2;
    case WeightFormat::kFp8Block:
        return cols;
    case WeightFormat::kFp4Group:
        return cols / 2;
    }
    return 0;
}

// Software prefetch of the next tile: while a tile streams its R rows, each row's loop also prefetches (into
// L2: prefetcht1) the same bytes of the row R rows further on, once per 64-byte line. The hardware stream
// prefetcher follows a tile's R streams only after they have started, and restarts at every tile: on the
// 2-vCPU Zen 4 the BF16 GEMV streamed at 23 GB/s (1024 columns) / 39 GB/s (4096) against a 62 GB/s read of
// the same bytes, and at 61 / 59 GB/s with this prefetch (an L1 prefetch, prefetcht0, or one a fixed
// distance ahead in the same row did not help). A tile of short rows is streamed in fewer steps than its
// prefetch needs to land, so the prefetch reaches at least kPrefetchAheadBytes ahead (prefetch_row,
// linear_kernels.h): whole tiles further on where a tile holds less (BF16 rows of 512 columns, 4 KiB a tile:
// the next tile but one; on the 2-vCPU Zen 4 bench-small's expert down-projections, 1024 x 512,
// went 21.7-26.3 -> 24.8-28.9 GB/s against a 29-34 GB/s read, interleaved; 16 KiB ahead measured the same).
// Rows past the weight's end prefetch their own row instead, so no address outside the weight is touched. It
// changes no arithmetic: results are bit-identical.
template <int R, WeightFormat F> struct NextTile {
    const char* p[R];
    NextTile(const core::Weight& w, int64_t r, int64_t rs) {
        const int64_t rb = row_bytes<F>(w.cols);
        const char* base = static_cast<const char*>(w.data);
        for (int i = 0; i < R; ++i) p[i] = base + next_rows_offset(r + i * rs, rs, R, rb, w.rows);
    }
    // Row i's line holding byte `off` of the row.
    void at(int i, int64_t off) const { __builtin_prefetch(p[i] + off, 0, 2); }
};

// R weight rows (R independent streams) x T tokens, decoded in registers, FP32 accumulators. Words: the FP4
// "words" kernel (else FP4 takes the even/odd one).
template <class I, int R, int T, WeightFormat F, bool Words>
void gemv_tile(const MatmulArgs& a, int64_t r, int64_t rs, int64_t t0, const float* xprep) {
    using V = typename I::V;
    constexpr int W = I::kW;
    const core::Weight& w = *a.w;
    const int64_t cols = w.cols;
    const NextTile<R, F> next(w, r, rs);
    V acc[R][T];
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t) acc[i][t] = I::zero();
    const float* x[T]; // [cols] per token, in the layout the format's loop reads
    for (int t = 0; t < T; ++t) x[t] = uses_prep<I, F>() ? xprep + (t0 + t) * cols : a.x + (t0 + t) * a.ldx;
    int64_t vec_cols = 0;
    float out_scale = 1.0f;
    if constexpr (F == WeightFormat::kFp8Block)
        out_scale = bits_f32(static_cast<uint32_t>(127 + kFp8RawLog2 - kFp8Fold) << 23);

    if constexpr (I::kPairs && F == WeightFormat::kBF16 && T == 1 && R > 1) {
        // One token (decode batch 1: the LM head, bench-small's layers): the same two chains per row as
        // below (bit-identical results), but the rows in a loop that is not unrolled, their accumulators
        // in an L1 array. Each step's load, FMA and store through the array make a loop that issues its
        // weight loads less far ahead than the register version; on the 2-vCPU Zen 4, with the next-tile
        // prefetch, this streamed at 97-98% of a plain read of the same bytes where the register-
        // accumulator loop reached 75% (4096 columns) / 70% (1024); see docs/kernels.md.
        alignas(64) float am[R][2][W];
        for (int i = 0; i < R; ++i) {
            I::storeu(am[i][0], I::zero());
            I::storeu(am[i][1], I::zero());
        }
        vec_cols = cols / kPairCols * kPairCols;
        const uint16_t* row0 = static_cast<const uint16_t*>(w.data) + r * cols;
        for (int64_t c = 0; c < vec_cols; c += kPairCols) {
            const V xe = I::loadu(x[0] + c), xo = I::loadu(x[0] + c + W);
#pragma GCC unroll 1
            for (int i = 0; i < R; ++i) {
                V e, o;
                I::bf16_pair(row0 + i * rs * cols + c, e, o);
                next.at(i, 2 * c); // 32 BF16: one line
                I::storeu(am[i][0], I::fma(e, xe, I::loadu(am[i][0])));
                I::storeu(am[i][1], I::fma(o, xo, I::loadu(am[i][1])));
            }
        }
        for (int i = 0; i < R; ++i) acc[i][0] = I::add(I::loadu(am[i][0]), I::loadu(am[i][1]));
    } else if constexpr (I::kPairs && F == WeightFormat::kBF16) {
        // 32 weights per row and step: even columns into acc, odd ones into acc2 (two chains per row and
        // token while the register budget allows).
        constexpr bool kTwo = R * T <= 8;
        V acc2[R][T];
        for (int i = 0; i < R; ++i)
            for (int t = 0; t < T; ++t) acc2[i][t] = I::zero();
        vec_cols = cols / kPairCols * kPairCols;
        for (int64_t c = 0; c < vec_cols; c += kPairCols) {
            V xe[T], xo[T];
            for (int t = 0; t < T; ++t) {
                xe[t] = I::loadu(x[t] + c);
                xo[t] = I::loadu(x[t] + c + W);
            }
            for (int i = 0; i < R; ++i) {
                next.at(i, 2 * c); // 32 BF16: one line
                V e, o;
                I::bf16_pair(static_cast<const uint16_t*>(w.data) + (r + i * rs) * cols + c, e, o);
                for (int t = 0; t < T; ++t) {
                    acc[i][t] = I::fma(e, xe[t], acc[i][t]);
                    if constexpr (kTwo)
                        acc2[i][t] = I::fma(o, xo[t], acc2[i][t]);
                    else
                        acc[i][t] = I::fma(o, xo[t], acc[i][t]);
                }
            }
        }
        if constexpr (kTwo)
            for (int i = 0; i < R; ++i)
                for (int t = 0; t < T; ++t) acc[i][t] = I::add(acc[i][t], acc2[i][t]);
    } else if constexpr (Words && F == WeightFormat::kFp4Group) {
        using VI = typename I::VI;
        vec_cols = cols / kFp4Chunk * kFp4Chunk;
        const uint8_t* base = static_cast<const uint8_t*>(w.data);
        const int64_t bc = w.block_cols, sc = scale_cols(w);
        const VI lut = I::fp4_word_lut();
        const VI lanes = I::lane_groups(bc); // lane j's group within the chunk: 8j / bc (0 if bc > 128)
        V sfv[R];                            // 16 decoded group scales per row, groups [g16, g16 + 16)
        int64_t cur16 = -1;
        // g = c0 / bc without a division per chunk: bc <= 128 divides the chunk, else is a multiple of it.
        const int64_t chunks_per_group = bc > kFp4Chunk ? bc / kFp4Chunk : 1;
        const int64_t groups_per_chunk = bc > kFp4Chunk ? 1 : kFp4Chunk / bc;
        int64_t g = 0, in_group = 0;
        for (int64_t c0 = 0; c0 < vec_cols; c0 += kFp4Chunk) {
            const int64_t g16 = g / 16 * 16;
            if (g16 != cur16) {
                cur16 = g16;
                for (int i = 0; i < R; ++i) {
                    const uint8_t* srow = w.scale + (r + i * rs) * sc;
                    if (g16 + 16 <= sc) {
                        sfv[i] = I::e8m0_vec(srow + g16);
                    } else {
                        alignas(64) float tmp[16] = {};
                        for (int64_t j = g16; j < sc; ++j) tmp[j - g16] = e8m0(srow[j]);
                        sfv[i] = I::loadu(tmp);
                    }
                }
            }
            const VI idx = I::add_i(lanes, static_cast<int>(g - g16));
            VI d[R];
            for (int i = 0; i < R; ++i) {
                next.at(i, c0 / 2); // 128 codes: one line
                d[i] = I::load_i(base + (r + i * rs) * (cols / 2) + c0 / 2);
            }
            V b[R][T];
            fp4_words_step<I, R, T, 0>(d, lut, x, c0, b);
            fp4_words_step<I, R, T, 1>(d, lut, x, c0, b);
            fp4_words_step<I, R, T, 2>(d, lut, x, c0, b);
            fp4_words_step<I, R, T, 3>(d, lut, x, c0, b);
            for (int i = 0; i < R; ++i) {
                const V s = I::perm(idx, sfv[i]);
                for (int t = 0; t < T; ++t) acc[i][t] = I::fma(b[i][t], s, acc[i][t]);
            }
            if (++in_group == chunks_per_group) {
                in_group = 0;
                g += groups_per_chunk;
            }
        }
    } else if constexpr (F == WeightFormat::kFp8Block && T == 1 && R > 1) {
        // One token, FP8: as the BF16 one-token loop above, the rows in a loop that is not unrolled with
        // their accumulators in L1; each visit of a row takes 4 vectors (AVX-512: one 64-byte line) in a
        // register chain, so the order of the FMAs per row is the register version's (bit-identical).
        constexpr int kU = 4;
        alignas(64) float am[R][W];
        for (int i = 0; i < R; ++i) I::storeu(am[i], I::zero());
        vec_cols = cols / W * W;
        const int64_t line_cols = vec_cols / (kU * W) * (kU * W);
        const uint8_t* row0 = static_cast<const uint8_t*>(w.data) + r * cols;
        for (int64_t c = 0; c < line_cols; c += kU * W) {
            V xv[kU];
            for (int k = 0; k < kU; ++k) xv[k] = I::loadu(x[0] + c + k * W);
#pragma GCC unroll 1
            for (int i = 0; i < R; ++i) {
                const uint8_t* p = row0 + i * rs * cols + c;
                next.at(i, c);
                V s = I::loadu(am[i]);
                for (int k = 0; k < kU; ++k) s = I::fma(I::fp8_raw(p + k * W), xv[k], s);
                I::storeu(am[i], s);
            }
        }
        for (int64_t c = line_cols; c < vec_cols; c += W) {
            const V xv = I::loadu(x[0] + c);
            for (int i = 0; i < R; ++i)
                I::storeu(am[i], I::fma(I::fp8_raw(row0 + i * rs * cols + c), xv, I::loadu(am[i])));
        }
        for (int i = 0; i < R; ++i) acc[i][0] = I::loadu(am[i]);
    } else if constexpr (F == WeightFormat::kF32 || F == WeightFormat::kBF16 || F == WeightFormat::kF16 ||
                         F == WeightFormat::kFp8Block) {
        vec_cols = cols / W * W;
        constexpr int64_t kStepBytes = F == WeightFormat::kF32        ? 4 * W
                                       : F == WeightFormat::kFp8Block ? W
                                                                      : 2 * W;
        for (int64_t c = 0; c < vec_cols; c += W) {
            V xv[T];
            for (int t = 0; t < T; ++t) xv[t] = I::loadu(x[t] + c);
            // Once per 64-byte line of each row (the step is 16..64 bytes).
            const int64_t off = c * (kStepBytes / W);
            if (kStepBytes >= 64 || off % 64 < kStepBytes)
                for (int i = 0; i < R; ++i) next.at(i, off);
            for (int i = 0; i < R; ++i) {
                V wv;
                if constexpr (F == WeightFormat::kF32)
                    wv = I::loadu(static_cast<const float*>(w.data) + (r + i * rs) * cols + c);
                else if constexpr (F == WeightFormat::kBF16)
                    wv = I::bf16(static_cast<const uint16_t*>(w.data) + (r + i * rs) * cols + c);
                else if constexpr (F == WeightFormat::kF16)
                    wv = I::f16(static_cast<const uint16_t*>(w.data) + (r + i * rs) * cols + c);
                else
                    wv = I::fp8_raw(static_cast<const uint8_t*>(w.data) + (r + i * rs) * cols + c);
                for (int t = 0; t < T; ++t) acc[i][t] = I::fma(wv, xv[t], acc[i][t]);
            }
        }
    } else {
        // FP4: each 2W columns are W bytes; the activations were split into evens and odds per 2W group.
        // The group scale multiplies the 16-entry table (not every decoded vector), row by row inside the
        // step: one live scaled table instead of R keeps the R x T accumulators, 2T activation vectors and
        // the decode within the 32 registers (holding R scaled tables, GCC kept the accumulators on the
        // stack, a store and a reload of each per step: one core of Zen 4, 2048 x 4096 cold weights, 16-128
        // tokens, 52-54% -> 71-77% of the FMA peak; bench/gemm_bench).
        vec_cols = cols / (2 * W) * (2 * W);
        const uint8_t* base = static_cast<const uint8_t*>(w.data);
        const int64_t bc = w.block_cols, sc = scale_cols(w), steps_per_group = bc / (2 * W);
        const V lut = I::fp4_lut();
        // The group scales, W groups at a time, decoded as vectors into sf (then one broadcast load and one
        // multiply per group and row, no scalar work).
        alignas(64) float sf[R][W];
        int64_t g = 0, in_group = 0;
        for (int64_t c = 0; c < vec_cols; c += 2 * W) {
            if (in_group == 0 && g % W == 0) {
                for (int i = 0; i < R; ++i) {
                    const uint8_t* srow = w.scale + (r + i * rs) * sc;
                    if (g + W <= sc) {
                        I::storeu(sf[i], I::e8m0_vec(srow + g));
                    } else {
                        for (int64_t j = g; j < sc; ++j) sf[i][j - g] = e8m0(srow[j]);
                    }
                }
            }
            V xe[T], xo[T];
            for (int t = 0; t < T; ++t) {
                xe[t] = I::loadu(x[t] + c);
                xo[t] = I::loadu(x[t] + c + W);
            }
            if (c / 2 % 64 < W) // once per 64-byte line of each row (W bytes per step)
                for (int i = 0; i < R; ++i) next.at(i, c / 2);
            for (int i = 0; i < R; ++i) {
                V e, o;
                I::fp4_pair(base + (r + i * rs) * (cols / 2) + c / 2, I::mul(lut, I::set1(sf[i][g % W])), e,
                            o);
                for (int t = 0; t < T; ++t) acc[i][t] = I::fma(o, xo[t], I::fma(e, xe[t], acc[i][t]));
            }
            if (++in_group == steps_per_group) {
                in_group = 0;
                ++g;
            }
        }
    }

    for (int i = 0; i < R; ++i) {
        for (int t = 0; t < T; ++t) {
            float s = I::reduce(acc[i][t]) * out_scale;
            const float* xt = a.x + (t0 + t) * a.ldx;
            for (int64_t c = vec_cols; c < cols; ++c) s = tail_madd(w.at(r + i * rs, c), xt[c], s);
            a.y[(t0 + t) * a.ldy + (r + i * rs - a.row_begin)] = s;
        }
    }
}

template <class I, int R, WeightFormat F>
void gemv_rows(const MatmulArgs& a, int64_t r, int64_t rs, const float* xprep) {
    if constexpr (F == WeightFormat::kFp4Group && I::kPairs) {
        if (fp4_words<I>(a)) {
            static_assert(kFp4WordsMaxTokens == 2);
            a.n == 1 ? gemv_tile<I, R, 1, F, true>(a, r, rs, 0, xprep)
                     : gemv_tile<I, R, 2, F, true>(a, r, rs, 0, xprep);
            return;
        }
    }
    // One tile instantiation per token count 1..4 (an indirect call per tile of 4 rows x cols weights).
    using Tile = void (*)(const MatmulArgs&, int64_t, int64_t, int64_t, const float*);
    static constexpr Tile kByTokens[] = {&gemv_tile<I, R, 1, F, false>, &gemv_tile<I, R, 2, F, false>,
                                         &gemv_tile<I, R, 3, F, false>, &gemv_tile<I, R, 4, F, false>};
    for (int64_t t0 = 0; t0 < a.n; t0 += 4) kByTokens[min64(4, a.n - t0) - 1](a, r, rs, t0, xprep);
}

template <class I, WeightFormat F>
void gemv_range(const MatmulArgs& a, int64_t r, int64_t end, const float* xprep) {
    // Row streams (row_streams, linear_kernels.h): 4-row tiles over 4 streams of consecutive rows. Without
    // them (DEEPINFER_GEMV_ROWS=tile), one token, BF16 rows of at most 1024 columns: one row at a time, so a
    // chunk is one sequential stream
    // (a tile of 4 reads 4 streams a row apart). Each row's two chains are the same operations whatever
    // the tile height (bit-identical). Exact BF16, 2 threads, >= 512 MiB of distinct matrices,
    // alternating in one process (a temporary switch), median GB/s tile -> one row (pairs won): 512 x 1024
    // 21.8 -> 24.2 (15 of 20), 1024 x 512 22.3 -> 25.4 (18/20), 32000 x 1024 27.3 -> 27.4 (12/20); but
    // 4096 x 2048 27.5 -> 26.5 (2/20) and 129280 x 4096 29.7 -> 29.2 (5/20): one row reads 4 bytes of F32
    // activations per 2 weight bytes, and past 4 KiB of them per row they crowd L1 beside the stream.
    if constexpr (I::kPairs && F == WeightFormat::kBF16) {
        if (a.n == 1 && a.w->cols <= 1024 && !row_streams()) {
            for (; r < end; ++r) gemv_rows<I, 1, F>(a, r, 1, xprep);
            return;
        }
    }
    if (row_streams())
        r = for_row_streams(r, end, [&](int64_t j, int64_t q) { gemv_rows<I, 4, F>(a, j, q, xprep); });
    for (; r + 4 <= end; r += 4) gemv_rows<I, 4, F>(a, r, 1, xprep);
    for (; r < end; ++r) gemv_rows<I, 1, F>(a, r, 1, xprep);
}

// xs [n, cols] = x scaled per column block by 2^(s - 127 + kFp8Fold), s the scales of row block rb.
template <class I> void fp8_fold_activations(const MatmulArgs& a, int64_t rb, float* xs) {
    constexpr int W = I::kW;
    const core::Weight& w = *a.w;
    const int64_t cols = w.cols, vec_cols = cols / W * W, bc = w.block_cols;
    const uint8_t* srow = w.scale + rb * scale_cols(w);
    for (int64_t t = 0; t < a.n; ++t) {
        const float* x = a.x + t * a.ldx;
        float* dst = xs + t * cols;
        for (int64_t c0 = 0; c0 < vec_cols; c0 += bc) {
            const typename I::V f = I::set1(bits_f32(static_cast<uint32_t>(srow[c0 / bc] + kFp8Fold) << 23));
            for (int64_t c = c0; c < min64(vec_cols, c0 + bc); c += W)
                I::storeu(dst + c, I::mul(I::loadu(x + c), f));
        }
    }
}

template <class I, WeightFormat F>
void gemv_format(const MatmulArgs& a, int64_t r0, int64_t r1, const float* xprep, float* scratch) {
    const int64_t begin = a.row_begin + r0, end = a.row_begin + r1;
    if constexpr (F == WeightFormat::kFp8Block) {
        // One row block at a time, its scales folded into the activations.
        const int64_t br = a.w->block_rows;
        for (int64_t r = begin; r < end;) {
            const int64_t stop = min64(end, (r / br + 1) * br);
            fp8_fold_activations<I>(a, r / br, scratch);
            gemv_range<I, F>(a, r, stop, scratch);
            r = stop;
        }
    } else {
        gemv_range<I, F>(a, begin, end, xprep);
    }
}

// Whether rows [r0, r1) (relative to a.row_begin) have a register-decoding GEMV on this ISA.
template <class I> bool fits(const MatmulArgs& a, int64_t r0, int64_t r1) {
    const core::Weight& w = *a.w;
    switch (w.format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
        return true;
    case WeightFormat::kFp8Block: {
        if (w.block_cols % I::kW != 0) return false;
        const int64_t sr0 = (a.row_begin + r0) / w.block_rows, sr1 = (a.row_begin + r1 - 1) / w.block_rows;
        for (int64_t i = sr0 * scale_cols(w); i < (sr1 + 1) * scale_cols(w); ++i)
            if (w.scale[i] < kFp8MinScale || w.scale[i] > kFp8MaxScale) return false;
        return true;
    }
    case WeightFormat::kFp4Group:
        return fp4_words<I>(a) ? fp4_words_fit(w.block_cols) : w.block_cols % (2 * I::kW) == 0;
    }
    return false;
}

template <class I> bool gemv_fits(const MatmulArgs& a) {
    return fits<I>(a, 0, a.row_end - a.row_begin);
}

// WeightFormat's values index the per-format tables below.
constexpr bool formats_in_order() {
    return static_cast<int>(WeightFormat::kF32) == 0 && static_cast<int>(WeightFormat::kBF16) == 1 &&
           static_cast<int>(WeightFormat::kF16) == 2 && static_cast<int>(WeightFormat::kFp8Block) == 3 &&
           static_cast<int>(WeightFormat::kFp4Group) == 4;
}
static_assert(formats_in_order());

template <class I>
bool gemv(const MatmulArgs& a, int64_t r0, int64_t r1, const float* xprep, float* scratch) {
    if (!fits<I>(a, r0, r1)) return false;
    using Fn = void (*)(const MatmulArgs&, int64_t, int64_t, const float*, float*);
    static constexpr Fn kByFormat[] = {
        &gemv_format<I, WeightFormat::kF32>, &gemv_format<I, WeightFormat::kBF16>,
        &gemv_format<I, WeightFormat::kF16>, &gemv_format<I, WeightFormat::kFp8Block>,
        &gemv_format<I, WeightFormat::kFp4Group>};
    const auto f = static_cast<size_t>(a.w->format);
    if (f >= sizeof(kByFormat) / sizeof(kByFormat[0])) return false;
    kByFormat[f](a, r0, r1, xprep, scratch);
    return true;
}

// ---------------------------------------------------------------------------------------------- GEMM
// out [kc] = W[r, k0 : k0 + kc] in F32, vectorized where a whole vector shares one scale.
template <class I> void decode_row(const core::Weight& w, int64_t r, int64_t k0, int64_t kc, float* out) {
    constexpr int W = I::kW;
    const int64_t cols = w.cols;
    int64_t c = k0;
    const int64_t end = k0 + kc;
    switch (w.format) {
    case WeightFormat::kF32:
        for (; c + W <= end; c += W)
            I::storeu(out + c - k0, I::loadu(static_cast<const float*>(w.data) + r * cols + c));
        break;
    case WeightFormat::kBF16:
        for (; c + W <= end; c += W)
            I::storeu(out + c - k0, I::bf16(static_cast<const uint16_t*>(w.data) + r * cols + c));
        break;
    case WeightFormat::kF16:
        for (; c + W <= end; c += W)
            I::storeu(out + c - k0, I::f16(static_cast<const uint16_t*>(w.data) + r * cols + c));
        break;
    // FP8 / FP4: walked block by block (one division per block, not three per vector: at ~24 tokens the
    // panel decode is half of the GEMM's time); a vector that would straddle two blocks ends the vector
    // part, the rest goes through Weight::at.
    case WeightFormat::kFp8Block: {
        const uint8_t* srow = w.scale + r / w.block_rows * scale_cols(w);
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * cols;
        const typename I::V undo = I::set1(bits_f32(static_cast<uint32_t>(127 + kFp8RawLog2) << 23));
        int64_t b = c / w.block_cols;
        for (int64_t b_end = (b + 1) * w.block_cols; c + W <= end; b_end += w.block_cols, ++b) {
            const typename I::V s = I::set1(e8m0(srow[b]));
            for (; c + W <= end && c + W <= b_end; c += W)
                I::storeu(out + c - k0, I::mul(I::mul(I::fp8_raw(src + c), undo), s));
            if (c != b_end) break; // a vector straddles two blocks
        }
        break;
    }
    case WeightFormat::kFp4Group: {
        const uint8_t* srow = w.scale + r * scale_cols(w);
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + r * (cols / 2);
        const typename I::V lut = I::fp4_lut();
        if (c % 2 != 0) break;
        int64_t b = c / w.block_cols;
        for (int64_t b_end = (b + 1) * w.block_cols; c + W <= end; b_end += w.block_cols, ++b) {
            const typename I::V scaled = I::mul(lut, I::set1(e8m0(srow[b])));
            for (; c + W <= end && c + W <= b_end; c += W)
                I::storeu(out + c - k0, I::fp4_natural(src + c / 2, scaled));
            if (c != b_end) break;
        }
        break;
    }
    }
    for (; c < end; ++c) out[c - k0] = w.at(r, c); // ragged blocks and the column tail
}

// Prefetches row r's bytes for columns [k0, k0 + kc) into L1: the panel after the one being computed. The
// rows of a panel lie a row stride apart (dozens of streams: more than the hardware prefetcher follows), so
// without it the panel decode waits on DRAM for every row (at ~24 tokens most of the GEMM's time).
inline void prefetch_row(const core::Weight& w, int64_t r, int64_t k0, int64_t kc) {
    int64_t num = 1, den = 1; // bytes per weight
    switch (w.format) {
    case WeightFormat::kF32:
        num = 4;
        break;
    case WeightFormat::kBF16:
    case WeightFormat::kF16:
        num = 2;
        break;
    case WeightFormat::kFp8Block:
        break;
    case WeightFormat::kFp4Group:
        den = 2;
        break;
    }
    const char* p = static_cast<const char*>(w.data) + (r * w.cols + k0) * num / den;
    const int64_t bytes = kc * num / den;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
}

// ct [MR, ld] += panel [MR, kGemmKc] x xt [kc, ld] over NV vectors of tokens (+ 8 tokens in a 256-bit
// half vector if kH, AVX-512 only): weights broadcast, tokens in vectors, MR * NV accumulators in
// registers. Every output is one FMA chain over k in column order, whatever the tile shape.
template <class I, int MR, int NV, bool kH = false>
void micro(const float* panel, const float* xt, int64_t ld, int64_t kc, float* ct) {
    using V = typename I::V;
    constexpr int W = I::kW;
    constexpr int kNvA = NV > 0 ? NV : 1;
    V acc[MR][kNvA];
    [[maybe_unused]] __m256 acch[MR];
    for (int m = 0; m < MR; ++m) {
        for (int v = 0; v < NV; ++v) acc[m][v] = I::loadu(ct + m * ld + v * W);
        if constexpr (kH) acch[m] = _mm256_loadu_ps(ct + m * ld + NV * W);
    }
    for (int64_t k = 0; k < kc; ++k) {
        V xv[kNvA];
        for (int v = 0; v < NV; ++v) xv[v] = I::loadu(xt + k * ld + v * W);
        [[maybe_unused]] __m256 xh;
        if constexpr (kH) xh = _mm256_loadu_ps(xt + k * ld + NV * W);
        for (int m = 0; m < MR; ++m) {
            const V wb = I::set1(panel[m * kGemmKc + k]);
            for (int v = 0; v < NV; ++v) acc[m][v] = I::fma(wb, xv[v], acc[m][v]);
            if constexpr (kH) acch[m] = _mm256_fmadd_ps(_mm256_set1_ps(panel[m * kGemmKc + k]), xh, acch[m]);
        }
    }
    for (int m = 0; m < MR; ++m) {
        for (int v = 0; v < NV; ++v) I::storeu(ct + m * ld + v * W, acc[m][v]);
        if constexpr (kH) _mm256_storeu_ps(ct + m * ld + NV * W, acch[m]);
    }
}

// nv whole vectors, then (AVX-512) 8 more tokens if `half` (nv < kNv then).
template <class I, int MR>
void micro_nv(int nv, bool half, const float* panel, const float* xt, int64_t ld, int64_t kc, float* ct) {
    if constexpr (I::kW == 16) {
        if (half) {
            if (nv == 0) return micro<I, MR, 0, true>(panel, xt, ld, kc, ct);
            if (nv == 1) return micro<I, MR, 1, true>(panel, xt, ld, kc, ct);
            if (nv == 2) return micro<I, MR, 2, true>(panel, xt, ld, kc, ct);
            return micro<I, MR, 3, true>(panel, xt, ld, kc, ct);
        }
    }
    if constexpr (I::kNv >= 4) {
        if (nv == 4) return micro<I, MR, 4>(panel, xt, ld, kc, ct);
        if (nv == 3) return micro<I, MR, 3>(panel, xt, ld, kc, ct);
    }
    if (nv == 2) return micro<I, MR, 2>(panel, xt, ld, kc, ct);
    micro<I, MR, 1>(panel, xt, ld, kc, ct);
}

template <class I>
void micro_dispatch(int mr, int nv, bool half, const float* panel, const float* xt, int64_t ld, int64_t kc,
                    float* ct) {
    switch (mr) {
    case 1:
        return micro_nv<I, 1>(nv, half, panel, xt, ld, kc, ct);
    case 2:
        return micro_nv<I, 2>(nv, half, panel, xt, ld, kc, ct);
    case 3:
        return micro_nv<I, 3>(nv, half, panel, xt, ld, kc, ct);
    case 4:
        return micro_nv<I, 4>(nv, half, panel, xt, ld, kc, ct);
    case 5:
        return micro_nv<I, 5>(nv, half, panel, xt, ld, kc, ct);
    default:
        return micro_nv<I, 6>(nv, half, panel, xt, ld, kc, ct);
    }
}

// Blocked GEMM: a panel of up to kGemmRowTile weight rows x kGemmKc columns is dequantized once into F32
// and reused by every token; the C tile [rows, n_pad] accumulates over column panels and is written to y
// (transposed back to [tokens, rows]) once.
template <class I>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const float* xt, int64_t n_pad, float* panel,
          float* ct) {
    constexpr int W = I::kW;
    const core::Weight& w = *a.w;
    for (int64_t rt = r0; rt < r1; rt += kGemmRowTile) {
        const int64_t rows = min64(kGemmRowTile, r1 - rt);
        for (int64_t i = 0; i < rows * n_pad; ++i) ct[i] = 0.0f;
        for (int64_t k0 = 0; k0 < w.cols; k0 += kGemmKc) {
            const int64_t kc = min64(kGemmKc, w.cols - k0);
            for (int64_t m = 0; m < rows; ++m)
                decode_row<I>(w, a.row_begin + rt + m, k0, kc, panel + m * kGemmKc);
            const int64_t nk0 =
                k0 + kc < w.cols ? k0 + kc : 0; // the next panel: these rows', else the next rows'
            const int64_t nrt = k0 + kc < w.cols ? rt : rt + kGemmRowTile;
            for (int64_t m = 0; m < kGemmRowTile && nrt + m < r1; ++m)
                prefetch_row(w, a.row_begin + nrt + m, nk0, min64(kGemmKc, w.cols - nk0));
            for (int64_t i0 = 0; i0 < n_pad; i0 += I::kNv * W) {
                const int nv = static_cast<int>(min64(I::kNv, (n_pad - i0) / W));
                const bool half = n_pad - i0 < I::kNv * W && (n_pad - i0) % W != 0; // 8 of 16 (AVX-512)
                for (int64_t m0 = 0; m0 < rows; m0 += 6)
                    micro_dispatch<I>(static_cast<int>(min64(6, rows - m0)), nv, half, panel + m0 * kGemmKc,
                                      xt + k0 * n_pad + i0, n_pad, kc, ct + m0 * n_pad + i0);
            }
        }
        for (int64_t i = 0; i < a.n; ++i)
            for (int64_t m = 0; m < rows; ++m) a.y[i * a.ldy + (rt + m)] = ct[m * n_pad + i];
    }
}

inline KernelTable table() {
    KernelTable t;
    t.gemv = &gemv<Isa>;
    t.gemm = &gemm<Isa>;
    t.fits = &gemv_fits<Isa>;
    t.prep = &prep<Isa>;
    return t;
}

} // namespace deepinfer::kernels::cpu::detail::DI_ISA_NS
