// Test-only hook in V4.1's cache fake-quantization: at the elements (and block scales) where the
// reference's own fake-quant input lay within a margin of a rounding boundary
// (tests/fixtures/tiny-v41*/near_ties.safetensors, tools/oracle/near_ties_v41.py), take the reference's
// rounding instead of ours, so that a comparison with the reference's logits sees only fp32 noise. Strict
// both ways, so it cannot mask a real bug: an element of ours within margin / 2 of a boundary that the table
// lacks, a listed element whose input of ours is not within 2 margin of the reference's boundary, and a
// listed element this run never reaches (checked by the caller: `unused()`) are failures.
//
// Distances are the oracle's: |q - boundary| / amax_q for an element (q = x / scale, amax_q = block amax /
// scale), |t - boundary| / t for a block scale (t = amax / grid max). Absent (the default), the model calls
// the plain quantizers of kernels/ref/cache_quant.h: no effect, no cost. Not thread-safe (one forward at a
// time, as the goldens test runs it).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deepinfer::model::deepseek_v41 {

struct QuantTieOverride {
    enum Kind : int64_t { kWindowKv = 0, kIndexerK = 1, kCompressedKv = 2, kIndexerQ = 3 };
    // Row: the position (window KV, indexer queries) or the compressed entry (indexer keys, compressed
    // KV). Element: the index in the row (queries: head * index_head_dim + channel); -1 - b: block b's
    // scale.
    struct Key {
        int64_t layer, kind, row, element;
        auto operator<=>(const Key&) const = default;
    };
    struct Tie {
        float boundary = 0; // |q| (element) or t (scale) where the reference's rounding flips
        float value = 0;    // the reference's choice: signed grid value of q, or the scale
        bool used = false;
        float distance = -1; // ours to `boundary` (relative), once reached
    };

    double margin = 1e-4;
    std::map<Key, Tie> ties;
    int64_t applied = 0; // listed decisions taken from the reference
    int64_t flipped = 0; // of those, where our own rounding differed
    std::vector<std::string> failures;

    // Listed entries this run never reached.
    std::vector<Key> unused() const;
};

// The fake-quantization of kernels/ref/cache_quant.h for rows of width n (their ids in row_ids) of one
// layer's quantizer `kind`, with the table's overrides and checks.
void fake_quant_with_ties(float* x, int64_t rows, int64_t n, QuantTieOverride::Kind kind, int64_t layer,
                          const int64_t* row_ids, QuantTieOverride& ov);

} // namespace deepinfer::model::deepseek_v41
