#pragma once
// Internal: the Numerics::kFast int8 GEMV for FP4 e2m1 weights (decode, a.n <= kGemvMaxTokens), written
// once and included inside the namespace of each translation unit that compiles it with its own target
// flags (linear_impl.h's pattern): linear_avx512_vnni.cpp (-mavx512vnni: vpdpbusd) and
// linear_avx512_int8.cpp (AVX-512 F/BW only, e.g. Skylake-SP: vpmaddubsw + vpmaddwd). Both form the same
// exact integer sums and then run the same F32 operations in the same order, so they give the same bits.
// The including file provides <immintrin.h>, <cstdint>, core/weight.h, kernels/cpu/linear_kernels.h,
// kernels/cpu/block_amax_avx512.h and min64, and includes this inside an anonymous namespace.

// acc + the dot products of the u8 weights with the s8 activations over each int32 lane's 4 + 4 bytes
// (even and odd columns). Exact: a lane sums 8 products of at most 24 x 127.
inline __m512i dot_q(__m512i acc, __m512i we, __m512i xe, __m512i wo, __m512i xo) {
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, we, xe), wo, xo);
#else
    // vpmaddubsw sums byte pairs into int16 with saturation, never reached here: even + odd pairs are at
    // most 4 x 24 x 127 = 12192 < 2^15. vpmaddwd by 1 then sums the int16 pairs into the int32 lanes.
    const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(we, xe), _mm512_maddubs_epi16(wo, xo));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
#endif
}

// Decode: weights decoded in registers, read once. Per row and 128-column block: the 64 weight bytes split
// into low / high nibbles, both through vpshufb on the 16-entry table of 2 x e2m1 + 12 (u8 in [0, 24]), two
// vpdpbusd against the token's even / odd int8 activations, seeded with the token's -12 x sum correction:
// int32 lane j holds columns 8j..8j+7, so 128-bit lane g is exactly 32-column group g. The group scales
// (4 bytes, broadcast, vpshufb'd to one per 128-bit lane, shifted into a float's exponent: 2^(s - 127);
// s == 0 reads as 0 and s == 255 as inf here) times the activation scale multiply the converted sums into
// F32 accumulators.
void quantize_gemv(const MatmulArgs& a, int8_t* xq, int32_t* corr, float* xs) {
    const int64_t cols = a.w->cols, nb = cols / kQBlock;
    // Per 128-bit lane (16 columns): the 8 even columns' bytes, then the 8 odd ones'.
    const __m512i split =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m512i lows = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7); // the lanes' even halves, then odd halves
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t t = 0; t < a.n; ++t) {
        for (int64_t kb = 0; kb < nb; ++kb) {
            const float* x = a.x + t * a.ldx + kb * kQBlock;
            const float amax = block_amax(x);
            const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
            xs[t * nb + kb] = 0.5f * (amax / 127.0f);
            int8_t* dst = xq + t * cols + kb * kQBlock;
            __m512i sad[2];
            for (int h = 0; h < 2; ++h) { // columns [64h, 64h + 64): the block's bytes 32h.. and 64 + 32h..
                // |x| <= amax, so the rounded x * 127 / amax is in [-127, 127]: the low byte is the int8.
                // The four inserts are written out: their lane must be an immediate, and at -O1 (the
                // sanitizer builds) a loop over it is not unrolled.
                const auto bytes16 = [&](int m) {
                    return _mm512_cvtepi32_epi8(
                        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 64 * h + 16 * m), inv)));
                };
                __m512i q = _mm512_castsi128_si512(bytes16(0));
                q = _mm512_inserti32x4(q, bytes16(1), 1);
                q = _mm512_inserti32x4(q, bytes16(2), 2);
                q = _mm512_inserti32x4(q, bytes16(3), 3);
                const __m512i eo = _mm512_permutexvar_epi64(lows, _mm512_shuffle_epi8(q, split));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * h), _mm512_castsi512_si256(eo));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 + 32 * h),
                                    _mm512_extracti64x4_epi64(eo, 1));
                // Sums of 8 consecutive columns (one int32 lane of the GEMV): |q + 128| summed per 8 bytes.
                sad[h] = _mm512_sad_epu8(_mm512_xor_si512(q, bias), _mm512_setzero_si512());
            }
            const __m512i sums = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(sad[0])),
                                                    _mm512_cvtepi64_epi32(sad[1]), 1);
            _mm512_storeu_si512(corr + (t * nb + kb) * 16,
                                _mm512_mullo_epi32(_mm512_sub_epi32(sums, _mm512_set1_epi32(8 * 128)),
                                                   _mm512_set1_epi32(-12)));
        }
    }
}

// Rows r, r + rs, ..., r + (R - 1) rs (rs > 1: one row of each of R row streams, linear_kernels.h).
template <int R, int T>
void gemv_q_tile(const MatmulArgs& a, int64_t r, int64_t rs, int64_t t0, const int8_t* xq,
                 const int32_t* corr, const float* xs) {
    const core::Weight& w = *a.w;
    const int64_t cols = w.cols, nb = cols / kQBlock;
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i sidx = _mm512_setr_epi32(
        static_cast<int>(0x80808000u), static_cast<int>(0x80808000u), static_cast<int>(0x80808000u),
        static_cast<int>(0x80808000u), static_cast<int>(0x80808001u), static_cast<int>(0x80808001u),
        static_cast<int>(0x80808001u), static_cast<int>(0x80808001u), static_cast<int>(0x80808002u),
        static_cast<int>(0x80808002u), static_cast<int>(0x80808002u), static_cast<int>(0x80808002u),
        static_cast<int>(0x80808003u), static_cast<int>(0x80808003u), static_cast<int>(0x80808003u),
        static_cast<int>(0x80808003u));
    const uint8_t* wrow[R];
    const uint8_t* srow[R];
    const uint8_t* next[R]; // the rows read next, prefetched into L2 by the first token tile (linear_impl.h)
    const bool prefetch = t0 == 0;
    for (int i = 0; i < R; ++i) {
        wrow[i] = static_cast<const uint8_t*>(w.data) + (r + i * rs) * (cols / 2);
        srow[i] = w.scale + (r + i * rs) * (cols / 32);
        next[i] = static_cast<const uint8_t*>(w.data) + next_rows_offset(r + i * rs, rs, R, cols / 2, w.rows);
    }
    __m512 f[R][T];
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t) f[i][t] = _mm512_setzero_ps();
    for (int64_t kb = 0; kb < nb; ++kb) {
        __m512i xe[T], xo[T], c0[T];
        __m512 xsb[T];
        for (int t = 0; t < T; ++t) {
            const int8_t* xt = xq + (t0 + t) * cols + kb * kQBlock;
            xe[t] = _mm512_loadu_si512(xt);
            xo[t] = _mm512_loadu_si512(xt + 64);
            c0[t] = _mm512_loadu_si512(corr + ((t0 + t) * nb + kb) * 16);
            xsb[t] = _mm512_set1_ps(xs[(t0 + t) * nb + kb]);
        }
        for (int i = 0; i < R; ++i) {
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(next[i] + kb * 64), _MM_HINT_T1);
            const __m512i b = _mm512_loadu_si512(wrow[i] + kb * 64);
            const __m512i we = _mm512_shuffle_epi8(table, _mm512_and_si512(b, low));
            const __m512i wo = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b, 4), low));
            int32_t s4;
            __builtin_memcpy(&s4, srow[i] + kb * 4, 4);
            const __m512 sv =
                _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_shuffle_epi8(_mm512_set1_epi32(s4), sidx), 23));
            for (int t = 0; t < T; ++t) {
                const __m512i acc = dot_q(c0[t], we, xe[t], wo, xo[t]);
                f[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(sv, xsb[t]), f[i][t]);
            }
        }
    }
    for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t)
            a.y[(t0 + t) * a.ldy + (r + i * rs - a.row_begin)] = _mm512_reduce_add_ps(f[i][t]);
}

template <int R>
void gemv_q_rows(const MatmulArgs& a, int64_t r, int64_t rs, const int8_t* xq, const int32_t* corr,
                 const float* xs) {
    for (int64_t t0 = 0; t0 < a.n; t0 += 4) {
        switch (min64(4, a.n - t0)) {
        case 1:
            gemv_q_tile<R, 1>(a, r, rs, t0, xq, corr, xs);
            break;
        case 2:
            gemv_q_tile<R, 2>(a, r, rs, t0, xq, corr, xs);
            break;
        case 3:
            gemv_q_tile<R, 3>(a, r, rs, t0, xq, corr, xs);
            break;
        default:
            gemv_q_tile<R, 4>(a, r, rs, t0, xq, corr, xs);
            break;
        }
    }
}

void gemv_q(const MatmulArgs& a, int64_t r0, int64_t r1, const int8_t* xq, const int32_t* corr,
            const float* xs) {
    int64_t r = a.row_begin + r0;
    const int64_t end = a.row_begin + r1;
    // Row streams (row_streams, linear_kernels.h): the 4-row tile over 4 streams of consecutive rows,
    // every token count. FP4 one token, linear_bench 246720 x 4096, 2 rounds, one row -> streams: 25.4, 25.7
    // -> 27.8, 27.8 GB/s. Without them (DEEPINFER_GEMV_ROWS=tile), one token: one row at a time, so a chunk's
    // codes are one sequential stream (a tile of 4 consecutive rows read 4 streams a row apart). Each row's
    // sums are the same operations whatever the tile height, so the results are bit-identical. FP4, 2
    // threads, ~100 MiB of distinct matrices, alternating in one process, median GB/s tile -> one row (pairs
    // won): 2048 x 4096 32.6 -> 33.3 (23 of 30); 4096 x 2048 26.5 -> 35.6 (28/30); 3072 x 7168 34.4 -> 36.2
    // (26/30); but 2048 x 8192 41.7 -> 38.6 (2/30), where the row's 12 KiB of activations and corrections
    // crowd L1 beside the streamed codes: wider rows keep the tile.
    if (row_streams()) {
        r = for_row_streams(r, end, [&](int64_t j, int64_t q) { gemv_q_rows<4>(a, j, q, xq, corr, xs); });
    } else if (a.n == 1 && a.w->cols <= 7168) {
        for (; r < end; ++r) gemv_q_tile<1, 1>(a, r, 1, 0, xq, corr, xs);
        return;
    }
    for (; r + 4 <= end; r += 4) gemv_q_rows<4>(a, r, 1, xq, corr, xs);
    for (; r < end; ++r) gemv_q_rows<1>(a, r, 1, xq, corr, xs);
}
