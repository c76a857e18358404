#include "model/deepseek_v4/layer.h"

#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/hyper_connection.h"

namespace deepinfer::model::deepseek_v4 {

void decoder_layer_forward(const LayerContext& ctx, const ForwardBatch& batch, const int32_t* ids,
                           const uint8_t* skip, float* h, const LayerProbeOut& probe) {
    const ModelConfig& c = *ctx.config;
    const LayerWeights& w = *ctx.w;
    kernels::Backend& be = *ctx.backend;
    kernels::Workspace& ws = be.workspace();
    const kernels::Workspace::Mark mark = ws.mark();
    const int64_t T = batch.num_tokens(), D = c.hidden_size, hc = c.hc_mult;
    const float eps = static_cast<float>(c.rms_norm_eps);
    float* post = ws.take<float>(T * hc);      // [T, hc]
    float* comb = ws.take<float>(T * hc * hc); // [T, hc, hc]
    float* x = ws.take<float>(T * D);          // [T, D] sublayer input
    float* y = ws.take<float>(T * D);          // [T, D] sublayer output

    hc_pre(be, c, w.hc_attn, h, T, post, comb, x);
    be.rms_norm({x, w.attn_norm.data(), T, D, eps, x});
    AttentionContext actx;
    actx.config = &c;
    actx.w = &w.attn;
    actx.layer = ctx.layer;
    actx.rope = c.layer_types[ctx.layer] == AttentionType::kSliding ? ctx.main_rope : ctx.compress_rope;
    actx.compress_rope = ctx.compress_rope;
    actx.cache = ctx.cache;
    actx.backend = &be;
    actx.tp = ctx.tp;
    actx.cp = ctx.cp;
    attention_forward(actx, batch, x, y, probe.indexer_topk);
    hc_post(be, c, post, comb, y, T, h);

    hc_pre(be, c, w.hc_ffn, h, T, post, comb, x);
    be.rms_norm({x, w.ffn_norm.data(), T, D, eps, x});
    moe_forward(be, c, w.ffn, *ctx.moe, c.mlp_layer_types[ctx.layer] == MlpType::kHashMoe, x, ids, skip, T, y,
                probe.router, probe.router_weights, ctx.moe_shard);
    hc_post(be, c, post, comb, y, T, h);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
