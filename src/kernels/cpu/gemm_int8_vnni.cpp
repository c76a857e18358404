// The fast (int8 VNNI) GEMMs for FP8 e4m3 block, FP4 e2m1 group and BF16 weights (gemm_int8.h), and the
// quantization of their activations. FP8: per weight row and 128-column block the 128 codes become int8
// through a 128-entry byte table picked by the block's largest magnitude (vpermi2b on the 7-bit magnitude,
// the sign applied by a masked subtract), with one F32 scale (block scale x the table's power-of-two step);
// decode_fp8_panel finds the 16 largest magnitudes of 16 rows together. The panel holds weights as u8 = int8
// + 128, the activations enter as int8, and each accumulator starts from its token's -128 x sum (the seeds
// `quantize` writes, once per call). The microkernel keeps 6 rows x 4 vectors of 16 tokens of int32
// accumulators over the whole 128 columns (one conversion per 128 multiply-adds per lane). FP4:
// decode_fp4_panel below, a panel's rows at a time. Compiled with -mavx512vnni -mavx512vbmi; reached only
// when the CPU reports both (linear.cpp).

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/weight.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/block_amax_avx512.h"
#include "kernels/cpu/gemm_int8.h"
#include "kernels/cpu/transpose_avx512.h"

namespace deepinfer::kernels::cpu::detail::gemm_vnni {
namespace {

inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
inline float bits_f32(uint32_t b) {
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
}
inline float e8m0(uint8_t s) {
    return bits_f32(s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : static_cast<uint32_t>(s) << 23);
}

// The weights a panel is decoded from.
enum class Src { kFp8, kFp4, kBf16, kPanels };

constexpr int kSteps = 15; // step_log2 in [-3, 11]

// tab[step + 3][c]: the int8 magnitude of 7-bit e4m3 magnitude code c at that step.
struct Fp8Tables {
    alignas(64) int8_t tab[kSteps][128];
};
const Fp8Tables& fp8_tables() {
    static const Fp8Tables t = [] {
        Fp8Tables k{};
        for (int s = 0; s < kSteps; ++s) {
            // A max code whose step is s - 3: exponent field s + 1 (s = 0 also covers exponent fields 0, 1).
            const auto max_code = static_cast<uint8_t>((s + 1) << 3);
            for (int c = 0; c < 128; ++c) k.tab[s][c] = fp8_requant_code(static_cast<uint8_t>(c), max_code);
        }
        return k;
    }();
    return t;
}

// The panel's weights as u8 = int8 + 128 (vpdpbusd's unsigned operand; the activations are the signed one,
// and the +128 is removed once per token by the seeds) and per (row, 32-column group g) a scale, stride 4 per
// row. A row whose 128 columns share one scale (FP8; FP4 whose group scales were folded into its int8)
// keeps it at [m * 4]. FP8 panel rows are in column order, FP4 rows in the order panel_dword gives.
struct Panel {
    int8_t* w;      // [kQRowTile, kQBlock]
    float* scale;   // [kQRowTile, ss]: row m's group g at m * ss + g (the decoders below write ss = 4)
    int64_t ss = 4; // 1: a panel pre-decoded at load (gemm_int8.h, "int8 panels"; read only)
};

// FP4 e2m1, 32-column groups. 2 x e2m1 is an exact int8 in [-12, 12]. When a row's four group scales in a
// 128-column block are within 2^3 of the smallest (Gaussian-like weights: nearly always), each group's
// values are shifted left by its difference d_g (|q| <= 96: still exact) and the block has one scale.
// tab[i], 128-bit lane g: the 16 values of 2 x e2m1 shifted left by d_g = (i >> 2g) & 3 (i = 0: unshifted),
// + 128 (the panel's u8).
// col[i]: the same values for the column-order decode (decode_fp4_panel<true>), whose 128-bit lane L of
// output half h holds columns 64 h + 16 L .. + 15, i.e. group 2 h + L / 2: lanes [d_0, d_0, d_1, d_1],
// then [d_2, d_2, d_3, d_3].
struct Fp4Tables {
    alignas(64) int8_t tab[256][64];
    alignas(64) int8_t col[256][128];
};
const Fp4Tables& fp4_tables() {
    static const Fp4Tables t = [] {
        static constexpr int8_t kE2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        Fp4Tables k{};
        for (int i = 0; i < 256; ++i)
            for (int g = 0; g < 4; ++g)
                for (int c = 0; c < 16; ++c)
                    k.tab[i][g * 16 + c] = static_cast<int8_t>(
                        static_cast<uint8_t>(kE2m1x2[c] * (1 << ((i >> (2 * g)) & 3)) + 128));
        for (int i = 0; i < 256; ++i)
            for (int l = 0; l < 8; ++l) // output lane l (of both halves) holds group l / 2
                for (int c = 0; c < 16; ++c) k.col[i][l * 16 + c] = k.tab[i][(l / 2) * 16 + c];
        return k;
    }();
    return t;
}

// Panel dword p (4 columns of a decoded row) that holds activation column chunk k4 = 4 q + j (q = 0..7,
// j = 0..3). FP4 rows are stored as vpunpcklbw / vpunpckhbw of their low- and high-nibble values: 128-bit
// lane L of the first 64 bytes holds columns 32 L .. 32 L + 15, of the second 32 L + 16 .. 32 L + 31.
template <bool kFp4Order> constexpr int64_t panel_dword(int64_t q, int j) {
    return kFp4Order ? (q & 1) * 16 + (q >> 1) * 4 + j : q * 4 + j;
}

// Block kb (128 columns) of weight rows [row0, row0 + rows) into panel rows [0, rows), in two passes:
// (1) the scales of 16 rows at a time in vectors: fold test, table index, block scale; (2) per row the 64
// code bytes through vpshufb on the row's table (low, high nibbles), interleaved by vpunpck{l,h}bw (the
// micro kernel reads the resulting column order through panel_dword). Returns true when every row folded
// (the G = 1 kernel runs). The next block's codes are prefetched into L2 (prefetcht1), not L1: a panel's 48
// rows lie a power-of-two row stride apart (2 KiB at 4096 columns), so their lines fall into two of L1's
// 64 sets (16 ways between them) and 48 lines prefetched into L1 evicted each other before the decode
// reached them (docs/kernels.md).
// kColumnOrder (the AMX kernel's): each row decoded straight into column order (nibbles widened into the
// bytes of words, one vpshufb per 64 columns on the `col` table), so a tile's 64 bytes are 64 consecutive
// columns, as xq's rows are.
template <bool kColumnOrder>
bool decode_fp4_panel(const core::Weight& w, int64_t row0, int64_t rows, int64_t kb, const Panel& p) {
    const Fp4Tables& t = fp4_tables();
    const int64_t sstride = w.cols / 32, cstride = w.cols / 2; // cols % 128 == 0
    const uint8_t* scale0 = w.scale + row0 * sstride + kb * 4;
    const uint8_t* code0 = static_cast<const uint8_t*>(w.data) + row0 * cstride + kb * (kQBlock / 2);
    const bool next = (kb + 1) * kQBlock < w.cols;
    alignas(64) int32_t idx[kQRowTile];
    alignas(64) float sc[kQRowTile];
    uint64_t folded = 0; // bit m: row m folded
    const __m512i zero = _mm512_setzero_si512();
    const __m512i vindex =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(static_cast<int32_t>(sstride)));
    const __m512i lane_byte0 = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
    for (int64_t m0 = 0; m0 < rows; m0 += 16) {
        const __mmask16 valid = rows - m0 >= 16 ? 0xffff : static_cast<__mmask16>((1u << (rows - m0)) - 1);
        // dword m: row m0 + m's 4 group scale bytes
        const __m512i v = _mm512_mask_i32gather_epi32(zero, valid, vindex, scale0 + m0 * sstride, 1);
        __m512i lo = _mm512_min_epu8(v, _mm512_srli_epi32(v, 8));
        lo = _mm512_and_si512(_mm512_min_epu8(lo, _mm512_srli_epi32(lo, 16)), _mm512_set1_epi32(0xff));
        __m512i hi = _mm512_max_epu8(v, _mm512_srli_epi32(v, 8));
        hi = _mm512_and_si512(_mm512_max_epu8(hi, _mm512_srli_epi32(hi, 16)), _mm512_set1_epi32(0xff));
        const __mmask16 fold = _mm512_cmple_epu32_mask(_mm512_sub_epi32(hi, lo), _mm512_set1_epi32(3)) &
                               _mm512_test_epi32_mask(lo, lo) &
                               _mm512_cmpneq_epi32_mask(hi, _mm512_set1_epi32(255)) & valid;
        folded |= static_cast<uint64_t>(fold) << m0;
        // d_g bytes (0..3 where folded) -> d_0 + 4 d_1 + 16 d_2 + 64 d_3
        const __m512i d = _mm512_sub_epi8(v, _mm512_shuffle_epi8(lo, lane_byte0));
        const __m512i ix = _mm512_maskz_dpbusd_epi32(fold, zero, d, _mm512_set1_epi32(0x40100401));
        _mm512_store_si512(idx + m0, ix);
        _mm512_store_ps(sc + m0,
                        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(lo, 23)), _mm512_set1_ps(0.5f)));
    }
    int8_t* pw = p.w;
    for (int64_t m = 0; m < rows; ++m) {
        const uint8_t* src = code0 + m * cstride;
        if (next) _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock / 2), _MM_HINT_T1);
        if constexpr (kColumnOrder) {
            // Per 32 code bytes (64 columns): word j = byte j (vpmovzxbw), (w | w << 4) & 0x0f0f puts its low
            // nibble in byte 2j and its high nibble in byte 2j + 1 (column order), then vpshufb on the
            // table whose lane L serves that lane's group: 2 shuffle-port µops per 64 columns where the
            // interleave by unpacks and lane exchanges took 3.
            const __m512i nib = _mm512_set1_epi16(0x0f0f);
            for (int h = 0; h < 2; ++h) {
                const __m512i wb =
                    _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * h)));
                const __m512i ix = _mm512_ternarylogic_epi32(wb, _mm512_slli_epi16(wb, 4), nib, 0xa8);
                _mm512_storeu_si512(pw + m * kQBlock + 64 * h,
                                    _mm512_shuffle_epi8(_mm512_load_si512(t.col[idx[m]] + 64 * h), ix));
            }
        } else {
            const __m512i low = _mm512_set1_epi8(0x0f);
            const __m512i table = _mm512_load_si512(t.tab[idx[m]]);
            const __m512i b = _mm512_loadu_si512(src);
            const __m512i qe = _mm512_shuffle_epi8(table, _mm512_and_si512(b, low));
            const __m512i qo = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b, 4), low));
            _mm512_storeu_si512(pw + m * kQBlock, _mm512_unpacklo_epi8(qe, qo));
            _mm512_storeu_si512(pw + m * kQBlock + 64, _mm512_unpackhi_epi8(qe, qo));
        }
    }
    const uint64_t all = (1ull << rows) - 1; // rows <= kQRowTile = 48
    if (folded == all) {
        // The G = 1 kernel: one scale per row.
        for (int64_t m = 0; m < rows; ++m) p.scale[m * 4] = sc[m];
        return true;
    }
    // Per-group kernel: a folded row's groups share its scale, and each group's sum is that group's q x
    // (its seed holds only that group's activations), as for an unfolded row.
    for (int64_t m = 0; m < rows; ++m) {
        float* scale = p.scale + m * 4;
        if ((folded >> m) & 1) {
            scale[0] = scale[1] = scale[2] = scale[3] = sc[m];
        } else {
            const uint8_t* srow = scale0 + m * sstride;
            for (int g = 0; g < 4; ++g) scale[g] = 0.5f * e8m0(srow[g]);
        }
    }
    return false;
}

// FP8 e4m3: block kb of the panel's rows (codes at wrow[m] + kb * 128, block scale srow[m][sb]) into panel
// rows [0, rows), in column order. Per 16 rows: each row's largest magnitude code as a vector of 64
// partial maxima, the 16 reduced together (a transposing max tree, ~3 ops per row instead of a horizontal
// reduction each) into each row's table; then per row the table lookup (vpermi2b on the 7-bit magnitude),
// the sign by a masked subtract from 128 (128 + q: the panel's u8), and the scale. Same int8 values and
// scales as one row at a time. The next block prefetched into L2, as FP4's (decode_fp4_panel). Also the
// load-time pack of an FP8 weight's int8 panels (pack_panels, below: p.ss = 1).
void decode_fp8_panel(const Fp8Tables& t, const uint8_t* const* wrow, const uint8_t* const* srow, int64_t sb,
                      int64_t kb, int64_t rows, bool next, const Panel& p) {
    alignas(64) uint8_t tix[kQRowTile]; // row m's table: step_log2 + 3
    const __m512i mask = _mm512_set1_epi8(0x7f);
    for (int64_t m0 = 0; m0 < rows; m0 += 16) {
        __m512i v[16];
        for (int i = 0; i < 16; ++i) { // rows past the panel's repeat its last row (no branch, no spill)
            const uint8_t* src = wrow[min64(m0 + i, rows - 1)] + kb * kQBlock;
            if (next) {
                _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock), _MM_HINT_T1);
                _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock + 64), _MM_HINT_T1);
            }
            v[i] = _mm512_max_epu8(_mm512_and_si512(_mm512_loadu_si512(src), mask),
                                   _mm512_and_si512(_mm512_loadu_si512(src + 64), mask));
        }
        // Byte j of every 128-bit lane ends up holding row m0 + j's partial maximum.
        for (int i = 0; i < 8; ++i)
            v[i] = _mm512_max_epu8(_mm512_unpacklo_epi8(v[2 * i], v[2 * i + 1]),
                                   _mm512_unpackhi_epi8(v[2 * i], v[2 * i + 1]));
        for (int i = 0; i < 4; ++i)
            v[i] = _mm512_max_epu8(_mm512_unpacklo_epi16(v[2 * i], v[2 * i + 1]),
                                   _mm512_unpackhi_epi16(v[2 * i], v[2 * i + 1]));
        for (int i = 0; i < 2; ++i)
            v[i] = _mm512_max_epu8(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                   _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
        __m512i mx = _mm512_max_epu8(_mm512_unpacklo_epi64(v[0], v[1]), _mm512_unpackhi_epi64(v[0], v[1]));
        mx = _mm512_max_epu8(mx, _mm512_shuffle_i32x4(mx, mx, 0x4e));
        mx = _mm512_max_epu8(mx, _mm512_shuffle_i32x4(mx, mx, 0xb1));
        // fp8_requant_step_log2 + 3 = max(exponent field, 1) - 1
        const __m128i ef = _mm_and_si128(_mm_srli_epi16(_mm512_castsi512_si128(mx), 3), _mm_set1_epi8(0x1f));
        _mm_store_si128(reinterpret_cast<__m128i*>(tix + m0),
                        _mm_sub_epi8(_mm_max_epu8(ef, _mm_set1_epi8(1)), _mm_set1_epi8(1)));
    }
    const __m512i c128 = _mm512_set1_epi8(static_cast<char>(0x80));
    int8_t* pw = p.w;
    for (int64_t m = 0; m < rows; ++m) {
        const uint8_t* src = wrow[m] + kb * kQBlock;
        const int step = tix[m] - 3;
        const int8_t* tab = t.tab[tix[m]];
        const __m512i lo = _mm512_load_si512(tab), hi = _mm512_load_si512(tab + 64);
        const __m512i b0 = _mm512_loadu_si512(src), b1 = _mm512_loadu_si512(src + 64);
        const __m512i a0 = _mm512_permutex2var_epi8(lo, _mm512_and_si512(b0, mask), hi);
        const __m512i a1 = _mm512_permutex2var_epi8(lo, _mm512_and_si512(b1, mask), hi);
        const __m512i q0 = _mm512_mask_sub_epi8(_mm512_add_epi8(c128, a0), _mm512_movepi8_mask(b0), c128, a0);
        const __m512i q1 = _mm512_mask_sub_epi8(_mm512_add_epi8(c128, a1), _mm512_movepi8_mask(b1), c128, a1);
        _mm512_storeu_si512(pw + m * kQBlock, q0);
        _mm512_storeu_si512(pw + m * kQBlock + 64, q1);
        p.scale[m * p.ss] = e8m0(srow[m][sb]) * bits_f32(static_cast<uint32_t>(127 + step - 9) << 23);
    }
}

// BF16: block kb of the panel's rows (wrow[m]: row m's 16-bit values) into panel rows [0, rows), in column
// order, by the definition gemm_int8.h gives (bf16_requant_block): per row, the largest magnitude over the
// 128 columns (the BF16 bit patterns' magnitudes compared as u16: their order is the values'), then each
// value times 127 / amax rounded to the nearest int8 (even on ties; vcvtps2dq, as the activations'
// quantize), stored + 128, with amax / 127 as the row's scale. Even and odd columns are converted in
// separate vectors (the high and low halves of each dword) and packed back into column order as int16
// before the narrowing to bytes. The next block is prefetched into L2 (as FP8's). Also the load-time pack of
// a BF16 weight's int8 panels (pack_bf16, below: p.ss = 1).
void decode_bf16_panel(const uint16_t* const* wrow, int64_t kb, int64_t rows, bool next, const Panel& p) {
    const __m512i mag = _mm512_set1_epi16(0x7fff), c128 = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i hi16 = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
    int8_t* pw = p.w;
    for (int64_t m = 0; m < rows; ++m) {
        const uint16_t* src = wrow[m] + kb * kQBlock;
        if (next)
            for (int l = 0; l < 4; ++l)
                _mm_prefetch(reinterpret_cast<const char*>(src + kQBlock + l * 32), _MM_HINT_T1);
        __m512i b[4];
        for (int l = 0; l < 4; ++l) b[l] = _mm512_loadu_si512(src + l * 32);
        __m512i mx =
            _mm512_max_epu16(_mm512_max_epu16(_mm512_and_si512(b[0], mag), _mm512_and_si512(b[1], mag)),
                             _mm512_max_epu16(_mm512_and_si512(b[2], mag), _mm512_and_si512(b[3], mag)));
        mx = _mm512_and_si512(_mm512_max_epu16(mx, _mm512_srli_epi32(mx, 16)), _mm512_set1_epi32(0xffff));
        const float amax = bits_f32(_mm512_reduce_max_epu32(mx) << 16);
        const __m512 inv = _mm512_set1_ps(amax >= kBf16RequantMin ? 127.0f / amax : 0.0f);
        __m256i q8[4];
        for (int l = 0; l < 4; ++l) {
            const __m512i qe =
                _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(b[l], 16)), inv));
            const __m512i qo =
                _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(b[l], hi16)), inv));
            // |q| <= 127: each int16 of (qe low half, qo high half) is that column's value
            q8[l] = _mm512_cvtepi16_epi8(_mm512_mask_blend_epi16(0xaaaaaaaau, qe, _mm512_slli_epi32(qo, 16)));
        }
        _mm512_storeu_si512(
            pw + m * kQBlock,
            _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q8[0]), q8[1], 1), c128));
        _mm512_storeu_si512(
            pw + m * kQBlock + 64,
            _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q8[2]), q8[3], 1), c128));
        p.scale[m * p.ss] = amax / 127.0f;
    }
}

// A weight's int8 panels (gemm_int8.h, "Int8 panels"), each written by the panel decoder of the GEMM for
// its format, so the packed values and scales are the ones that GEMM decodes per call: BF16 (the scalar
// pack_bf16_int8_panels' bytes) by decode_bf16_panel, FP8 blocks by decode_fp8_panel.
template <Src kSrc>
void pack_panels(const core::Weight& w, int64_t row0, int64_t row_end, int64_t t0, int64_t t1, uint8_t* codes,
                 float* scales) {
    static_assert(kSrc == Src::kBf16 || kSrc == Src::kFp8);
    const int64_t nkb = w.cols / kQBlock;
    const Fp8Tables& tables = fp8_tables();
    const uint8_t* wrow[kQRowTile];
    const uint8_t* srow[kQRowTile];
    const uint16_t* wrow16[kQRowTile];
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t r = row0 + t * kQRowTile, rows = min64(kQRowTile, row_end - r);
        for (int64_t m = 0; m < rows; ++m) {
            if constexpr (kSrc == Src::kBf16) {
                wrow16[m] = static_cast<const uint16_t*>(w.data) + (r + m) * w.cols;
            } else {
                wrow[m] = static_cast<const uint8_t*>(w.data) + (r + m) * w.cols;
                srow[m] = w.scale + (r + m) / w.block_rows * ((w.cols + w.block_cols - 1) / w.block_cols);
            }
        }
        for (int64_t kb = 0; kb < nkb; ++kb) {
            const int64_t at = (t * nkb + kb) * kQRowTile;
            const Panel p{reinterpret_cast<int8_t*>(codes) + at * kQBlock, scales + at, 1};
            if constexpr (kSrc == Src::kBf16)
                decode_bf16_panel(wrow16, kb, rows, kb + 1 < nkb, p);
            else
                decode_fp8_panel(tables, wrow, srow, kb * kQBlock / w.block_cols, kb, rows, kb + 1 < nkb, p);
            for (int64_t m = rows; m < kQRowTile; ++m) { // the last tile's rows past the range: zero (u8 128)
                std::memset(codes + (at + m) * kQBlock, 0x80, kQBlock);
                scales[at + m] = 0.0f;
            }
        }
    }
}

// GemmQuantizeFn (gemm_int8.h). Per 8 tokens and 128-column block: each token's block largest magnitude,
// its 128 values x 127 / amax to int32 (vcvtps2dq: nearest even), narrowed to bytes (|q| <= 127), and its
// four 32-column group sums for the seeds; then the 8 tokens' 32 dwords (4 columns each) transposed
// through registers so each dword column (one 4-column step, 8 tokens) leaves in one 32-byte store, where
// one scalar 4-byte store per token and step went before.
void quantize(const MatmulArgs& a, int64_t t0, int64_t t1, int64_t n_pad, int8_t* xq, float* xs,
              int32_t* seed) {
    const int64_t nkb = a.w->cols / kQBlock;
    alignas(32) int32_t d[8][32]; // token i's block: 32 dwords of 4 int8
    for (int64_t t = t0; t < t1; t += 8) {
        for (int64_t kb = 0; kb < nkb; ++kb) {
            for (int64_t i = 0; i < 8; ++i) {
                const int64_t tok = t + i;
                if (tok >= a.n) {
                    for (int k = 0; k < 32; ++k) d[i][k] = 0;
                    xs[kb * n_pad + tok] = 0.0f;
                    for (int g = 0; g < 5; ++g) seed[(kb * 5 + g) * n_pad + tok] = 0;
                    continue;
                }
                const float* x = a.x + tok * a.ldx + kb * kQBlock;
                const float amax = block_amax(x);
                const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
                xs[kb * n_pad + tok] = amax / 127.0f;
                int32_t total = 0;
                for (int g = 0; g < 4; ++g) {
                    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * g), inv));
                    const __m512i q1 =
                        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * g + 16), inv));
                    _mm_store_si128(reinterpret_cast<__m128i*>(&d[i][8 * g]), _mm512_cvtepi32_epi8(q0));
                    _mm_store_si128(reinterpret_cast<__m128i*>(&d[i][8 * g + 4]), _mm512_cvtepi32_epi8(q1));
                    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
                    seed[(kb * 5 + g) * n_pad + tok] = -128 * sum;
                    total += -128 * sum;
                }
                seed[(kb * 5 + 4) * n_pad + tok] = total;
            }
            for (int j = 0; j < 4; ++j) {
                __m256i r[8];
                for (int i = 0; i < 8; ++i)
                    r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(&d[i][8 * j]));
                detail::transpose8(r);
                for (int k = 0; k < 8; ++k)
                    _mm256_storeu_si256(
                        reinterpret_cast<__m256i*>(xq + ((kb * 32 + 8 * j + k) * n_pad + t) * 4), r[k]);
            }
        }
    }
}

// acc += the 64 u8 x s8 products of u and s, summed by 4 (vpdpbusd). Inline asm: GCC 12 copies the
// accumulator around every _mm512_dpbusd_epi32 and, past 16 accumulators, spills them (see
// docs/kernels.md).
using Int32Unaligned = int32_t __attribute__((may_alias, aligned(1)));
inline __m512i dpbusd(__m512i acc, __m512i u, __m512i s) {
#ifdef DEEPINFER_GEMM_INT8_EMULATED
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
#endif
}
// The same on 8 tokens (ymm): a token count that is 8 mod 16 runs its last 8 tokens at half the work of a
// zero-padded 16 (on Zen 4 a zmm vpdpbusd is two ymm ones).
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#ifdef DEEPINFER_GEMM_INT8_EMULATED
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
#endif
}

// ct [MR, n_pad] += panel rows [MR, 128] x tokens [NV x 16 (+ 8 if kH)] over one 128-column block: each
// weight dword (4 columns of a row, u8) broadcast once and multiplied with every token vector of xq
// (int8), the accumulators seeded from the seeds (the weights' +128 removed). seed: block kb's [5, n_pad]
// at the first token.
// G == 1: one int32 sum per (row, token) over the 128 columns, one scale per row. G == 4: per 32-column
// group (FP4 rows whose group scales could not be folded), each group's sum scaled into ct on its own.
// kFp4Order: the panel rows are in decode_fp4_panel's order (the same products, other weight addresses).
template <bool kFp4Order, int MR, int NV, int G, bool kH>
void micro(const Panel& p, int64_t m0, const int8_t* xq, const int32_t* seed, int64_t n_pad, const float* xs,
           float* ct) {
    constexpr int64_t kQ = kQBlock / 16 / G; // 16-column steps per group
    constexpr int kNvA = NV > 0 ? NV : 1;
    const int8_t* pw = p.w + m0 * kQBlock;
    for (int g = 0; g < G; ++g) {
        const int32_t* sd = seed + (G == 1 ? 4 : g) * n_pad;
        __m512i acc[MR][kNvA];
        [[maybe_unused]] __m256i acch[MR];
        for (int v = 0; v < NV; ++v) {
            const __m512i s = _mm512_loadu_si512(sd + v * 16);
            for (int m = 0; m < MR; ++m) acc[m][v] = s;
        }
        if constexpr (kH) {
            const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sd + NV * 16));
            for (int m = 0; m < MR; ++m) acch[m] = s;
        }
        for (int64_t q = g * kQ; q < (g + 1) * kQ; ++q) {
            const int8_t* pq = pw + panel_dword<kFp4Order>(q, 0) * 4;
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const int64_t k4 = q * 4 + j;
                __m512i xv[kNvA];
                for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_si512(xq + (k4 * n_pad + v * 16) * 4);
                [[maybe_unused]] __m256i xh;
                if constexpr (kH)
                    xh =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (k4 * n_pad + NV * 16) * 4));
                for (int m = 0; m < MR; ++m) {
                    const __m512i wb =
                        _mm512_set1_epi32(*reinterpret_cast<const Int32Unaligned*>(pq + m * kQBlock + j * 4));
                    for (int v = 0; v < NV; ++v) acc[m][v] = dpbusd(acc[m][v], wb, xv[v]);
                    if constexpr (kH) acch[m] = dpbusd(acch[m], _mm512_castsi512_si256(wb), xh);
                }
            }
        }
        for (int v = 0; v < NV; ++v) {
            const __m512 xsv = _mm512_loadu_ps(xs + v * 16);
            for (int m = 0; m < MR; ++m) {
                float* c = ct + m * n_pad + v * 16;
                const __m512 s = _mm512_mul_ps(_mm512_set1_ps(p.scale[(m0 + m) * p.ss + g]), xsv);
                _mm512_storeu_ps(c, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m][v]), s, _mm512_loadu_ps(c)));
            }
        }
        if constexpr (kH) {
            const __m256 xsv = _mm256_loadu_ps(xs + NV * 16);
            for (int m = 0; m < MR; ++m) {
                float* c = ct + m * n_pad + NV * 16;
                const __m256 s = _mm256_mul_ps(_mm256_set1_ps(p.scale[(m0 + m) * p.ss + g]), xsv);
                _mm256_storeu_ps(c, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acch[m]), s, _mm256_loadu_ps(c)));
            }
        }
    }
}

// nv whole vectors of 16 tokens, then 8 more tokens if `half` (nv <= 3 then).
template <bool kFp4Order, int MR, int G>
void micro_nv(int nv, bool half, const Panel& p, int64_t m0, const int8_t* xq, const int32_t* seed,
              int64_t n_pad, const float* xs, float* ct) {
    if (half) {
        switch (nv) {
        case 0:
            return micro<kFp4Order, MR, 0, G, true>(p, m0, xq, seed, n_pad, xs, ct);
        case 1:
            return micro<kFp4Order, MR, 1, G, true>(p, m0, xq, seed, n_pad, xs, ct);
        case 2:
            return micro<kFp4Order, MR, 2, G, true>(p, m0, xq, seed, n_pad, xs, ct);
        default:
            return micro<kFp4Order, MR, 3, G, true>(p, m0, xq, seed, n_pad, xs, ct);
        }
    }
    switch (nv) {
    case 1:
        return micro<kFp4Order, MR, 1, G, false>(p, m0, xq, seed, n_pad, xs, ct);
    case 2:
        return micro<kFp4Order, MR, 2, G, false>(p, m0, xq, seed, n_pad, xs, ct);
    case 3:
        return micro<kFp4Order, MR, 3, G, false>(p, m0, xq, seed, n_pad, xs, ct);
    default:
        return micro<kFp4Order, MR, 4, G, false>(p, m0, xq, seed, n_pad, xs, ct);
    }
}

template <bool kFp4Order, int G>
void micro_dispatch(int mr, int nv, bool half, const Panel& p, int64_t m0, const int8_t* xq,
                    const int32_t* seed, int64_t n_pad, const float* xs, float* ct) {
    switch (mr) {
    case 1:
        return micro_nv<kFp4Order, 1, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    case 2:
        return micro_nv<kFp4Order, 2, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    case 3:
        return micro_nv<kFp4Order, 3, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    case 4:
        return micro_nv<kFp4Order, 4, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    case 5:
        return micro_nv<kFp4Order, 5, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    default:
        return micro_nv<kFp4Order, 6, G>(nv, half, p, m0, xq, seed, n_pad, xs, ct);
    }
}

#ifndef DEEPINFER_GEMM_INT8_EMULATED
// AMX (Intel's tile unit: tdpbusd multiplies a 16 x 64 u8 tile by a 64 x 16 s8 tile into 16 x 16 int32 in
// ~16 cycles, 8x the products of a zmm vpdpbusd per instruction). The G == 1 block of a panel in column
// order (FP8, BF16): A = 16 panel rows x 64 columns (the u8 weights, row stride 128), B = 16 dword rows (4
// columns each) x 16 tokens of xq (its [cols / 4, n_pad, 4] layout is AMX's B layout as it stands, row
// stride n_pad x 4), C = 16 rows x 16 tokens. Two tdpbusd per 128 columns, then the same epilogue as
// micro's: the int32 sum plus the token's seed, converted, times scale x xs, added to ct. Every int32 sum is
// the VNNI kernel's (integer sums are exact in any order) and the float operations are the same, so the
// results are bit-identical to it. Tiles: 0-1 C, 2-3 A (the two 64-column halves), 4-7 B (2 token groups x
// 2 halves). At 24 padded tokens the second group's C and B tiles (1, 6, 7) are 8 tokens (32 bytes) wide:
// FP4 at 24 tokens 0.82-0.88 -> 0.74-0.79 ms per 2048 x 4096 matrix (one core). A lone group of 8 is padded
// to 16 instead (linear.cpp). Reads past the panel's `rows` (stale panel rows, up to kQRowTile) and past the
// last token of n_pad (the next xq row, or xs after the last) are never stored.
static_assert(kQRowTile % 16 == 0, "AMX reads whole 16-row tiles of the panel");

// ct rows [m0, m0 + mr), tokens [i0, i0 + nt) (nt <= 16) += C tile cb (16 x 16 int32) + seeds, scaled.
inline void amx_epilogue(const int32_t* cb, const Panel& p, int64_t m0, int64_t mr, int64_t nt,
                         const int32_t* sd, const float* xs, float* ct, int64_t n_pad) {
    const __mmask16 k = static_cast<__mmask16>((1u << nt) - 1);
    const __m512i seed = _mm512_maskz_loadu_epi32(k, sd);
    const __m512 xsv = _mm512_maskz_loadu_ps(k, xs);
    for (int64_t m = 0; m < mr; ++m) {
        float* c = ct + (m0 + m) * n_pad;
        const __m512i acc = _mm512_add_epi32(_mm512_load_si512(cb + m * 16), seed);
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(p.scale[(m0 + m) * p.ss]), xsv);
        _mm512_mask_storeu_ps(c, k, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, _mm512_maskz_loadu_ps(k, c)));
    }
}

// Block kb of the panel (rows rows, column order, one scale per row) for all n_pad tokens.
void amx_block(const Panel& p, int64_t rows, const int8_t* xqb, const int32_t* sdb, const float* xsb,
               int64_t n_pad, float* ct) {
    alignas(64) int32_t cb[2][256];
    const int64_t stride = n_pad * 4;
    for (int64_t i0 = 0; i0 < n_pad; i0 += 32) {
        const int64_t nt0 = min64(16, n_pad - i0), nt1 = min64(16, n_pad - i0 - 16);
        const int8_t* b = xqb + i0 * 4;
        _tile_loadd(4, b, stride);
        _tile_loadd(5, b + 16 * stride, stride);
        if (nt1 > 0) {
            _tile_loadd(6, b + 64, stride);
            _tile_loadd(7, b + 16 * stride + 64, stride);
        }
        for (int64_t m0 = 0; m0 < rows; m0 += 16) {
            const int8_t* a = p.w + m0 * kQBlock;
            _tile_loadd(2, a, kQBlock);
            _tile_loadd(3, a + 64, kQBlock);
            _tile_zero(0);
            _tile_dpbusd(0, 2, 4);
            _tile_dpbusd(0, 3, 5);
            _tile_stored(0, cb[0], 64);
            if (nt1 > 0) {
                _tile_zero(1);
                _tile_dpbusd(1, 2, 6);
                _tile_dpbusd(1, 3, 7);
                _tile_stored(1, cb[1], 64);
            }
            const int64_t mr = min64(16, rows - m0);
            amx_epilogue(cb[0], p, m0, mr, nt0, sdb + i0, xsb + i0, ct + i0, n_pad);
            if (nt1 > 0)
                amx_epilogue(cb[1], p, m0, mr, nt1, sdb + i0 + 16, xsb + i0 + 16, ct + i0 + 16, n_pad);
        }
    }
}
#endif

// Blocked: a panel of kQRowTile rows x 128 columns is requantized once and reused by every token; within
// it, one group of up to 64 tokens (their 8 KiB of activations stay in L1) meets every 6-row microtile.
template <Src kSrc, bool kAmx = false>
void gemm(const MatmulArgs& a, int64_t r0, int64_t r1, const int8_t* xq, const float* xs, const int32_t* seed,
          int64_t n_pad, float* scratch) {
    const core::Weight& w = *a.w;
    const Fp8Tables& t = fp8_tables();
    const int64_t nkb = w.cols / kQBlock;
    float* ct = scratch;                                           // [kQRowTile, n_pad]
    float* scale = ct + kQRowTile * n_pad;                         // [kQRowTile, 4]
    int8_t* wq = reinterpret_cast<int8_t*>(scale + kQRowTile * 4); // [kQRowTile, kQBlock]
    const Panel scratch_panel{wq, scale};
    constexpr bool kFp4 = kSrc == Src::kFp4;
    // FP4 panels: decode_fp4_panel's interleaved order for VNNI, column order for the AMX variant (its tiles
    // and the per-group VNNI microkernel both read it then).
    constexpr bool kFp4Order = kFp4 && !kAmx;
    const uint8_t* wrow[kQRowTile]; // FP8: each panel row's codes and block-scale row
    const uint8_t* srow[kQRowTile];
    const uint16_t* wrow16[kQRowTile]; // BF16: each panel row's values
#ifndef DEEPINFER_GEMM_INT8_EMULATED
    if constexpr (kAmx) // the tile configuration is per thread
        amx_configure_16x64(n_pad == 8 ? 32 : 64, n_pad == 24 ? 32 : 64);
#endif
    for (int64_t rt = r0; rt < r1; rt += kQRowTile) {
        const int64_t rows = min64(kQRowTile, r1 - rt);
        for (int64_t i = 0; i < rows * n_pad; ++i) ct[i] = 0.0f;
        if constexpr (kSrc == Src::kBf16) {
            for (int64_t m = 0; m < rows; ++m)
                wrow16[m] = static_cast<const uint16_t*>(w.data) + (a.row_begin + rt + m) * w.cols;
        } else if constexpr (kSrc == Src::kFp8) {
            const int64_t sc = (w.cols + w.block_cols - 1) / w.block_cols;
            for (int64_t m = 0; m < rows; ++m) {
                const int64_t r = a.row_begin + rt + m;
                wrow[m] = static_cast<const uint8_t*>(w.data) + r * w.cols;
                srow[m] = w.scale + r / w.block_rows * sc;
            }
        }
        for (int64_t kb = 0; kb < nkb; ++kb) {
            bool one_scale = true;
            Panel p = scratch_panel;
            if constexpr (kSrc == Src::kPanels) {
                // Tile (a.row_begin - panel_row0 + rt) / kQRowTile (a whole tile: linear.cpp), block kb.
                const int64_t at = ((a.row_begin - w.panel_row0 + rt) / kQRowTile * nkb + kb) * kQRowTile;
                p = Panel{const_cast<int8_t*>(reinterpret_cast<const int8_t*>(w.panel_codes)) + at * kQBlock,
                          const_cast<float*>(w.panel_scales) + at, 1};
                // The next panel (contiguous: the next block, or the next tile's first) into L2 while this
                // one is multiplied, as the decoders prefetch their next block.
                if (kb + 1 < nkb || rt + kQRowTile < r1)
                    for (int64_t l = 0; l < kQRowTile * kQBlock; l += 64)
                        _mm_prefetch(reinterpret_cast<const char*>(p.w + kQRowTile * kQBlock + l),
                                     _MM_HINT_T1);
            } else if constexpr (kFp4) {
                one_scale = decode_fp4_panel<!kFp4Order>(w, a.row_begin + rt, rows, kb, p);
            } else if constexpr (kSrc == Src::kBf16) {
                decode_bf16_panel(wrow16, kb, rows, kb + 1 < nkb, p);
            } else {
                decode_fp8_panel(t, wrow, srow, kb * kQBlock / w.block_cols, kb, rows, kb + 1 < nkb, p);
            }
#ifndef DEEPINFER_GEMM_INT8_EMULATED
            if (kAmx && one_scale) {
                amx_block(p, rows, xq + kb * (kQBlock / 4) * n_pad * 4, seed + (kb * 5 + 4) * n_pad,
                          xs + kb * n_pad, n_pad, ct);
                continue;
            }
#endif
            for (int64_t i0 = 0; i0 < n_pad; i0 += 64) {
                const int nv = static_cast<int>(min64(4, (n_pad - i0) / 16));
                const bool half = n_pad - i0 < 64 && (n_pad - i0) % 16 != 0;
                const int8_t* xqb = xq + (kb * (kQBlock / 4) * n_pad + i0) * 4;
                const float* xsb = xs + kb * n_pad + i0;
                const int32_t* sdb = seed + kb * 5 * n_pad + i0;
                for (int64_t m0 = 0; m0 < rows; m0 += 6) {
                    const int mr = static_cast<int>(min64(6, rows - m0));
                    float* c = ct + m0 * n_pad + i0;
                    one_scale ? micro_dispatch<kFp4Order, 1>(mr, nv, half, p, m0, xqb, sdb, n_pad, xsb, c)
                              : micro_dispatch<kFp4Order, 4>(mr, nv, half, p, m0, xqb, sdb, n_pad, xsb, c);
                }
            }
        }
        detail::store_transposed(ct, rows, a.n, n_pad, a.y + rt, a.ldy);
    }
#ifndef DEEPINFER_GEMM_INT8_EMULATED
    if constexpr (kAmx) _tile_release();
#endif
}

} // namespace
} // namespace deepinfer::kernels::cpu::detail::gemm_vnni

namespace deepinfer::kernels::cpu::detail {
// tests/kernels/gemm_int8_emulated.cpp compiles this file again with the VNNI / VBMI instructions emulated
// (exact AVX-512 BW sequences), so the kernels' logic is tested on CPUs without them too.
#ifdef DEEPINFER_GEMM_INT8_EMULATED
GemmQTable emulated_vnni_gemm_table() {
#else
GemmQTable avx512_vnni_gemm_table() {
#endif
    GemmQTable t;
    t.quantize = &gemm_vnni::quantize;
    t.fp8 = &gemm_vnni::gemm<gemm_vnni::Src::kFp8>;
    t.fp4 = &gemm_vnni::gemm<gemm_vnni::Src::kFp4>;
    t.bf16 = &gemm_vnni::gemm<gemm_vnni::Src::kBf16>;
    t.panels = &gemm_vnni::gemm<gemm_vnni::Src::kPanels>;
    t.pack_bf16 = &gemm_vnni::pack_panels<gemm_vnni::Src::kBf16>;
    t.pack_fp8 = &gemm_vnni::pack_panels<gemm_vnni::Src::kFp8>;
    return t;
}
#ifndef DEEPINFER_GEMM_INT8_EMULATED
GemmQTable avx512_amx_gemm_table() {
    GemmQTable t = avx512_vnni_gemm_table();
    t.fp8 = &gemm_vnni::gemm<gemm_vnni::Src::kFp8, true>;
    t.bf16 = &gemm_vnni::gemm<gemm_vnni::Src::kBf16, true>;
    t.fp4 = &gemm_vnni::gemm<gemm_vnni::Src::kFp4, true>;
    return t;
}
#endif
} // namespace deepinfer::kernels::cpu::detail
