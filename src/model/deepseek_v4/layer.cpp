#include "model/deepseek_v4/layer.h"

#include "kernels/ops.h"
#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/moe.h"

namespace deepinfer::model::deepseek_v4 {

void decoder_layer_forward(const LayerContext& ctx, const ForwardBatch& batch, const int32_t* ids,
                           const std::vector<bool>& skip, float* h, const LayerProbeOut& probe) {
    const ModelConfig& c = *ctx.config;
    const LayerWeights& w = *ctx.w;
    const int64_t T = batch.num_tokens(), D = c.hidden_size, hc = c.hc_mult;
    const float eps = static_cast<float>(c.rms_norm_eps);
    std::vector<float> post(T * hc), comb(T * hc * hc); // [T, hc], [T, hc, hc]
    std::vector<float> x(T * D), y(T * D);              // [T, D] sublayer input / output

    hc_pre(c, w.hc_attn, h, T, post.data(), comb.data(), x.data());
    kernels::rms_norm(x.data(), w.attn_norm.data(), T, D, eps, x.data());
    AttentionContext actx;
    actx.config = &c;
    actx.w = &w.attn;
    actx.layer = ctx.layer;
    actx.rope = c.layer_types[ctx.layer] == AttentionType::kSliding ? ctx.main_rope : ctx.compress_rope;
    actx.compress_rope = ctx.compress_rope;
    actx.cache = ctx.cache;
    attention_forward(actx, batch, x.data(), y.data(), probe.indexer_topk);
    hc_post(c, post.data(), comb.data(), y.data(), T, h);

    hc_pre(c, w.hc_ffn, h, T, post.data(), comb.data(), x.data());
    kernels::rms_norm(x.data(), w.ffn_norm.data(), T, D, eps, x.data());
    moe_forward(c, w.ffn, c.mlp_layer_types[ctx.layer] == MlpType::kHashMoe, x.data(), ids, skip, T, y.data(),
                probe.router, probe.router_weights);
    hc_post(c, post.data(), comb.data(), y.data(), T, h);
}

} // namespace deepinfer::model::deepseek_v4
