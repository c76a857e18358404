#pragma once
// The executable spec of every V4 op (params.h): plain loops in the arithmetic order the model has always
// used (so the transformers goldens hold), no threads. cpu/ versions are tested against these.

#include "kernels/params.h"

namespace deepinfer::kernels::ref {

void rope(const RopeParams& p);
void hc_pre(const HcPreParams& p);
void hc_post(const HcPostParams& p);
void hc_head(const HcHeadParams& p);
void kv_store(const KvStoreParams& p);
void compressor(const CompressorParams& p);
void indexer(const IndexerParams& p);
void sparse_attention(const SparseAttentionParams& p);
void moe_routing(const MoeRoutingParams& p);
// Experts through ref::matmul (double accumulation).
void moe_experts(const MoeExpertsParams& p);

// torch's CPU top-k set (see ops.h topk_torch) with caller scratch [n] instead of an allocation.
struct TopkElem {
    float value;
    int64_t index;
};
void topk_torch_into(const float* x, int64_t n, int64_t k, int32_t* idx, TopkElem* scratch);

// One query of the indexer: scores [n_total] (scratch, -inf past n_visible) and the top-k into picks [topk]
// (visible picks ascending, -1 padded). Shared by ref and cpu so the selection rule lives in one place.
void indexer_select(const float* scores, int64_t n_visible, int64_t n_total, int64_t topk, int32_t* picks,
                    TopkElem* scratch, int32_t* sel);

// A head's attention weights in place: x [n] logits -> softmax over them and the sink (a logit that takes
// weight but has no value; none when sink == nullptr). mx = the largest of them; e_j = exp_ref(x_j - mx);
// sum = exp_ref(sink - mx) (0 without one) + the e_j added over kSoftmaxLanes interleaved partial sums (e_j
// into sum j % 16, in j order) folded in halves (sum l += sum l + 8, then + 4, + 2, + 1); x_j = e_j / sum.
// The partial sums vectorize (cpu/attention.cpp runs them on AVX-512 with the same bits); one running sum
// was bound by the add latency. Returns {mx, sum} (the CP merge's LSE parts).
constexpr int kSoftmaxLanes = 16;
struct SoftmaxStats {
    float max, sum;
};
SoftmaxStats softmax_sink(float* x, int64_t n, const float* sink);

// Query i, head h of sparse attention, keys enumerated as SparseAttentionParams says; logits: scratch
// [sparse_attention_max_keys]. o[i, h, :] overwritten.
void sparse_attention_head(const SparseAttentionParams& p, int64_t i, int64_t h, float* logits);
int64_t sparse_attention_max_keys(const SparseAttentionParams& p);

// RoPE angles of one position, as RopeTable computes them (float(p) * inv_freq in F32).
void rope_angles(const float* inv_freq, int64_t rope_dim, int64_t pos, float* cos, float* sin);

} // namespace deepinfer::kernels::ref
