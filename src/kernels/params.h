#pragma once
// One params struct per hot op of DeepSeek V4 (FlashMLA style): every pointer, shape and constant an op
// needs, nothing implicit. All activations are F32; weights are core::Weight in their stored format. The
// shapes are written beside each field. Paged KV is addressed through a block table (logical block ->
// physical block) and per-layer base pointers, so a device backend sees the same description.

#include <cstdint>

#include "core/weight.h"

namespace deepinfer::kernels {

// out [n, table.cols] = rows ids[i] of the table.
struct EmbeddingParams {
    const core::Weight* table = nullptr;
    const int32_t* ids = nullptr; // [n]
    int64_t n = 0;
    float* out = nullptr;
};

// y [n, d] = x * rsqrt(mean(x^2) + eps) (* weight when weight != nullptr). In place allowed.
struct RmsNormParams {
    const float* x = nullptr;
    const float* weight = nullptr; // [d] or nullptr
    int64_t n = 0;
    int64_t d = 0;
    float eps = 0;
    float* y = nullptr;
};

// Interleaved RoPE (or its inverse) on the trailing rope_dim channels of n_vec vectors per token; token t's
// vectors start at x + t * token_stride and are ld apart; angles float(positions[t]) * inv_freq[i].
struct RopeParams {
    float* x = nullptr;
    int64_t n_tokens = 0;
    int64_t token_stride = 0;
    int64_t n_vec = 1;
    int64_t ld = 0;
    int64_t dim = 0;
    int64_t rope_dim = 0;
    const float* inv_freq = nullptr;    // [rope_dim / 2]
    const int64_t* positions = nullptr; // [n_tokens]
    int64_t position_offset = 0;        // added to positions[t]
    bool inverse = false;
};

// mHC pre, from mix = UnweightedRMSNorm(h.flatten) @ fn^T (computed by the caller with rms_norm + linear):
//   pre = sigmoid(mix[:hc] * scale0 + base) + hc_eps, post = 2 sigmoid(mix[hc:2hc] * scale1 + base),
//   comb = Sinkhorn(softmax(mix[2hc:] * scale2 + base) + hc_eps) over sinkhorn_iters, x = sum_k pre_k h_k.
struct HcPreParams {
    const float* mix = nullptr;   // [T, (2 + hc) * hc]
    const float* base = nullptr;  // [(2 + hc) * hc]
    const float* scale = nullptr; // [3]
    const float* h = nullptr;     // [T, hc, D]
    int64_t T = 0, hc = 0, D = 0;
    float hc_eps = 0;
    int64_t sinkhorn_iters = 0;
    float* post = nullptr; // [T, hc]
    float* comb = nullptr; // [T, hc, hc]
    float* x = nullptr;    // [T, D]
};

// h[t, k] = post[t, k] * y[t] + sum_i comb[t, i, k] h[t, i] (in place).
struct HcPostParams {
    const float* post = nullptr; // [T, hc]
    const float* comb = nullptr; // [T, hc, hc]
    const float* y = nullptr;    // [T, D]
    int64_t T = 0, hc = 0, D = 0;
    float* h = nullptr; // [T, hc, D]
};

// The final collapse: x = sum_k (sigmoid(mix[k] * scale0 + base[k]) + hc_eps) h_k.
struct HcHeadParams {
    const float* mix = nullptr;   // [T, hc]
    const float* base = nullptr;  // [hc]
    const float* scale = nullptr; // [1]
    const float* h = nullptr;     // [T, hc, D]
    int64_t T = 0, hc = 0, D = 0;
    float hc_eps = 0;
    float* x = nullptr; // [T, D]
};

// Paged storage of one layer's compressed entries: entry w (window [w m, (w+1) m)) of a sequence lives in
// physical block block_table[w m / block_size] at index (w m % block_size) / m.
struct PagedEntries {
    float* base = nullptr; // [blocks, block_size / m, width]
    int64_t width = 0;
    int64_t ratio = 0; // m
    int64_t block_size = 0;
    const int32_t* block_table = nullptr;
    float* entry(int64_t w) const {
        const int64_t pos = w * ratio;
        return base +
               (block_table[pos / block_size] * (block_size / ratio) + (pos % block_size) / ratio) * width;
    }
};

// kv rows [n, d] -> the paged raw store at positions start_pos + i.
struct KvStoreParams {
    const float* kv = nullptr; // [n, d]
    int64_t n = 0, d = 0, start_pos = 0;
    float* raw = nullptr; // [blocks, block_size, d]
    int64_t block_size = 0;
    const int32_t* block_table = nullptr;
};

// The compressor state machine (CSA coff 2, HCA coff 1, the indexer's) fed n tokens of one sequence at
// positions start_pos + i. Closed windows are pooled (per-channel softmax of gate + ape over the window's
// slots), RMS-normed, rotated at position w m and stored; for coff 2 a block's overlap snapshot is taken
// when its last position is processed.
struct CompressorParams {
    const float* kv = nullptr;   // [n, coff * width] (row stride ld)
    const float* gate = nullptr; // [n, coff * width] without the position bias
    int64_t ld = 0;
    int64_t n = 0, start_pos = 0;
    int64_t coff = 1;
    const float* ape = nullptr;  // [m, coff * width]
    const float* norm = nullptr; // [width]
    float eps = 0;
    const float* inv_freq = nullptr; // [rope_dim / 2] compress RoPE
    int64_t rope_dim = 0;
    // The sequence's slot: buffers of the open window and the live overlap state.
    float* buf_kv = nullptr;    // [m, coff * width]
    float* buf_gate = nullptr;  // [m, coff * width]
    float* ov_kv = nullptr;     // [m, width] (coff 2)
    float* ov_gate = nullptr;   // [m, width]
    PagedEntries out;           // where entries go (width, ratio, block_size, block_table)
    float* snapshots = nullptr; // [blocks, 2, m, width] (coff 2)
    // The snapshots' block table when it differs from out's (context parallelism stores entries per rank
    // but snapshots on every rank); nullptr = out.block_table.
    const int32_t* snapshot_block_table = nullptr;
};

// The lightning indexer for n queries of one sequence at positions start_pos + i: score(w) =
// sum_h weights_h * ReLU(q_h . K_w) / sqrt(d_I) over visible entries w < (p + 1) / m, then the set torch's
// CPU top-k picks over all n_total entries (later ones -inf) with k = min(topk, n_total); picks [n, topk]
// get the visible picks ascending, -1 padded.
struct IndexerParams {
    const float* q = nullptr; // [n, H_I, d_I] (row stride q_ld)
    int64_t q_ld = 0;
    const float* weights = nullptr; // [n, H_I] (w_ld), already scaled by H_I^-1/2
    int64_t w_ld = 0;
    int64_t n = 0, start_pos = 0, n_total = 0;
    int64_t n_heads = 0, head_dim = 0, topk = 0;
    PagedEntries keys;        // the indexer compressor's entries [*, d_I]
    int32_t* picks = nullptr; // [n, topk]
    // Context parallelism (split indexer keys, docs/parallelism.md): the two halves run apart, the scores
    // summed over the CP group in between. kScore writes scores [n, n_total] (row stride n_total): each
    // visible entry's score when it is scored, +0 for every other entry; with owned_blocks only entries in
    // blocks j (block-table index, entry e in block e * m / block_size) with owned_blocks[j] != 0 are
    // scored. kSelect reads the visible entries' scores from `scores` (the rest is overwritten with -inf)
    // and writes picks, as kBoth would from the same scores.
    enum class Phase : int { kBoth = 0, kScore = 1, kSelect = 2 };
    Phase phase = Phase::kBoth;
    float* scores = nullptr;               // [n, n_total] kScore / kSelect
    const uint8_t* owned_blocks = nullptr; // [block-table entries] or nullptr (every entry)
};

// Sparse MQA over the paged store for n queries of one sequence at positions start_pos + i: keys (= values)
// are the raw rows of the window (max(0, p - window + 1) .. p) then the compressed entries (every closed
// window w < (p + 1) / m when picks == nullptr and compressed.base != nullptr; else picks' entries). A
// per-head sink joins the softmax. o [n, H, d] is overwritten.
struct SparseAttentionParams {
    const float* q = nullptr; // [n, H, d] (row stride q_ld)
    int64_t q_ld = 0;
    int64_t n = 0, start_pos = 0, n_heads = 0, head_dim = 0, window = 0;
    float scale = 0;
    const float* sink = nullptr; // [H]
    const float* raw = nullptr;  // [blocks, block_size, d]
    int64_t block_size = 0;
    const int32_t* block_table = nullptr;
    PagedEntries compressed;        // base == nullptr: a sliding-only layer
    const int32_t* picks = nullptr; // [n, topk] -1 padded, or nullptr (HCA: all closed windows)
    int64_t topk = 0;
    float* o = nullptr; // [n, H, d] (row stride o_ld)
    int64_t o_ld = 0;
    // Context parallelism (a partial to be merged by log-sum-exp, docs/parallelism.md): with owned_blocks,
    // only keys in blocks j (block-table index) with owned_blocks[j] != 0 are read, in the same order (a raw
    // row k is in block k / block_size, a compressed entry e in block e * m / block_size); sink == nullptr
    // leaves the sink out. lse_max / lse_sum [n, H] (row stride n_heads), when set, get each head's max
    // logit (the sink included) and sum of exp(logit - max); o is normalised by that sum. A head with no
    // key and no sink gets max -inf, sum 0 and o = 0.
    const uint8_t* owned_blocks = nullptr; // [block-table entries] or nullptr (every key)
    float* lse_max = nullptr;              // [n, H] or nullptr
    float* lse_sum = nullptr;              // [n, H] or nullptr
};

// Router: scores [T, E] hold x W_gate^T on entry and sqrt(softplus(.)) on exit; selection by top-k of
// score + bias (the bias only selects) or, on hash layers, tid2eid[token]; idx ascending per row; weights
// s[idx] / (sum + 1e-20) * routed_scale. Skipped (padding) rows get idx -1, weight 0.
struct MoeRoutingParams {
    float* scores = nullptr;            // [T, E]
    const float* bias = nullptr;        // [E] (top-k layers)
    const int32_t* tid2eid = nullptr;   // [vocab, K] (hash layers; selects hash routing when non-null)
    const int32_t* token_ids = nullptr; // [T]
    const uint8_t* skip = nullptr;      // [T] or nullptr
    int64_t T = 0, E = 0, K = 0;
    float routed_scale = 1;
    int32_t* idx = nullptr;   // [T, K]
    float* weights = nullptr; // [T, K]
};

// One clamped SwiGLU expert: W2(silu(min(W1 x, L)) * clamp(W3 x, -L, L)).
struct ExpertRef {
    const core::Weight* w1 = nullptr; // [I, D]
    const core::Weight* w2 = nullptr; // [D, I]
    const core::Weight* w3 = nullptr; // [I, D]
};

// out [T, D] = sum_k weights[t, k] expert_{idx[t, k]}(x_t) (+ shared(x_t) on non-skipped rows). Tokens are
// grouped per expert: only the experts some row selected run, each once over all its rows; the shared
// expert runs as one more group over every live row. Per row, experts accumulate in ascending order.
struct MoeExpertsParams {
    const float* x = nullptr; // [T, D]
    int64_t T = 0, D = 0, E = 0, K = 0;
    const int32_t* idx = nullptr;       // [T, K]
    const float* weights = nullptr;     // [T, K]
    const uint8_t* skip = nullptr;      // [T] or nullptr
    const ExpertRef* experts = nullptr; // [E]
    const ExpertRef* shared = nullptr;  // or nullptr
    float swiglu_limit = 0;
    float* out = nullptr; // [T, D]
};

} // namespace deepinfer::kernels
