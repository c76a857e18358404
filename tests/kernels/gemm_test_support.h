#pragma once
// Shared by the int8 / AMX GEMM tests (gemm_test.cpp: the dispatched matmul; gemm_int8_kernels_test.cpp: the
// kernel tables called directly): random FP8 / FP4 / BF16 weights and the scalar emulation of the fast int8
// numerics they are compared with.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/weight.h"
#include "kernels/cpu/gemm_int8.h"

namespace deepinfer::kernels::gemm_test {

struct Fp8Weight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
};

inline Fp8Weight random_fp8(int64_t rows, int64_t cols, int bc, std::mt19937* rng) {
    Fp8Weight s;
    s.w.format = core::WeightFormat::kFp8Block;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.block_rows = 128;
    s.w.block_cols = bc;
    std::uniform_int_distribution<int> byte(0, 255), sc(115, 130);
    s.data.resize(rows * cols);
    for (uint8_t& b : s.data) {
        b = static_cast<uint8_t>(byte(*rng));
        if ((b & 0x7f) == 0x7f) b ^= 1;
    }
    s.scale.resize(s.w.scale_rows() * s.w.scale_cols());
    for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
    s.w.data = s.data.data();
    s.w.scale = s.scale.data();
    return s;
}

// FP4 e2m1 weights in 32-column groups: random codes, group scales uniform in [lo, hi] (e8m0).
struct Fp4Weight {
    core::Weight w;
    std::vector<uint8_t> data, scale;
};

inline Fp4Weight random_fp4(int64_t rows, int64_t cols, int lo, int hi, std::mt19937* rng) {
    Fp4Weight s;
    std::uniform_int_distribution<int> byte(0, 255), sc(lo, hi);
    s.data.resize(rows * cols / 2);
    s.scale.resize(rows * cols / 32);
    for (uint8_t& b : s.data) b = static_cast<uint8_t>(byte(*rng));
    for (uint8_t& b : s.scale) b = static_cast<uint8_t>(sc(*rng));
    s.w.format = core::WeightFormat::kFp4Group;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.block_rows = 1;
    s.w.block_cols = 32;
    s.w.data = s.data.data();
    s.w.scale = s.scale.data();
    return s;
}

// The fast numerics' activation rounding, by definition: one token's 128-column block xb as int8 values q
// (x * 127 / amax, F32, nearest even; all zero when amax is 0). Returns the block's scale amax / 127.
inline float quantize_block_by_definition(const float* xb, int32_t q[128]) {
    float amax = 0.0f;
    for (int c = 0; c < 128; ++c) amax = std::max(amax, std::abs(xb[c]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int c = 0; c < 128; ++c) q[c] = static_cast<int32_t>(std::nearbyint(xb[c] * inv));
    return amax / 127.0f;
}

// The fast numerics, scalar: per token and 128 columns, x ~ qx * (amax / 127) (nearest even); per row and
// 128 columns the int8 values q and scale that block(r, kb, q) gives; the integer sums exact, the rest in
// double.
template <typename Block>
std::vector<double> emulate_blocks(const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols,
                                   int64_t r0, int64_t r1, const Block& block) {
    std::vector<double> y(n * (r1 - r0), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t kb = 0; kb < cols / 128; ++kb) {
            int32_t qx[128];
            const float xs = quantize_block_by_definition(x.data() + i * ldx + kb * 128, qx);
            for (int64_t r = r0; r < r1; ++r) {
                int8_t q[128];
                const double ws = block(r, kb, q);
                int64_t sum = 0;
                for (int c = 0; c < 128; ++c) sum += qx[c] * q[c];
                y[i * (r1 - r0) + r - r0] += static_cast<double>(sum) * ws * xs;
            }
        }
    }
    return y;
}

// FP8: w ~ qw * 2^(step - 9) * block scale (fp8_requant_code).
inline std::vector<double> emulate(const Fp8Weight& s, const std::vector<float>& x, int64_t n, int64_t ldx,
                                   int64_t r0, int64_t r1) {
    const core::Weight& w = s.w;
    return emulate_blocks(x, n, ldx, w.cols, r0, r1, [&](int64_t r, int64_t kb, int8_t* q) {
        const uint8_t* wb = s.data.data() + r * w.cols + kb * 128;
        uint8_t max_code = 0;
        for (int c = 0; c < 128; ++c) max_code = std::max<uint8_t>(max_code, wb[c] & 0x7f);
        for (int c = 0; c < 128; ++c) q[c] = cpu::detail::fp8_requant_code(wb[c], max_code);
        const uint8_t sb = s.scale[r / 128 * w.scale_cols() + kb * 128 / w.block_cols];
        return std::ldexp(1.0, sb - 127) * std::ldexp(1.0, cpu::detail::fp8_requant_step_log2(max_code) - 9);
    });
}

// y [n, ldy] (columns [0, out) for rows r0..) against want [n, out]: NMSE < 1e-11 per output row (rows may
// differ in magnitude by many binades), an all-zero row exactly, and nothing written past column out.
inline void expect_rows_match(const std::vector<float>& y, int64_t ldy, const std::vector<double>& want,
                              int64_t n, int64_t out, int64_t r0, double tol = 1e-11) {
    std::vector<double> num(out, 0.0), den(out, 0.0);
    int64_t past = 0;
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < out; ++r) {
            const double wv = want[i * out + r], d = y[i * ldy + r] - wv;
            num[r] += d * d;
            den[r] += wv * wv;
        }
        for (int64_t r = out; r < ldy; ++r) past += y[i * ldy + r] != -7.0f;
    }
    for (int64_t r = 0; r < out; ++r) {
        if (den[r] == 0.0)
            EXPECT_EQ(num[r], 0.0) << "row " << r0 + r;
        else
            EXPECT_LT(num[r] / den[r], tol) << "row " << r0 + r;
    }
    EXPECT_EQ(past, 0);
}

// BF16 weights: Gaussian values whose scale changes from row to row by up to 2^±20 (so the per-block
// scale, not a shared one, is what keeps them), with an all-zero 128-column block and a block of
// subnormals in the first rows.
struct Bf16Weight {
    core::Weight w;
    std::vector<uint16_t> data;
};

inline Bf16Weight random_bf16(int64_t rows, int64_t cols, std::mt19937* rng) {
    Bf16Weight s;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    s.data.resize(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float row_scale = std::ldexp(1.0f, ex(*rng));
        for (int64_t c = 0; c < cols; ++c) s.data[r * cols + c] = core::f32_to_bf16(nd(*rng) * row_scale);
    }
    if (rows > 1 && cols >= 256) {
        std::fill_n(s.data.begin() + 128, 128, uint16_t{0});
        for (int64_t c = 0; c < 128; ++c) s.data[cols + c] = core::f32_to_bf16(nd(*rng) * 1e-39f);
    }
    s.w.format = core::WeightFormat::kBF16;
    s.w.rows = rows;
    s.w.cols = cols;
    s.w.data = s.data.data();
    return s;
}

// BF16: the weights by bf16_requant_block.
inline std::vector<double> emulate_bf16(const Bf16Weight& s, const std::vector<float>& x, int64_t n,
                                        int64_t ldx, int64_t r0, int64_t r1) {
    const int64_t cols = s.w.cols;
    return emulate_blocks(x, n, ldx, cols, r0, r1, [&](int64_t r, int64_t kb, int8_t* q) {
        return static_cast<double>(cpu::detail::bf16_requant_block(s.data.data() + r * cols + kb * 128, q));
    });
}

} // namespace deepinfer::kernels::gemm_test
