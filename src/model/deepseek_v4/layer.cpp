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
    // CP with split rows: this rank's rows [r0, r0 + nr) of h only (layer.h); without, every row.
    const CpRows rows = cp_rows(ctx.cp && ctx.cp->active() ? ctx.cp : nullptr, T);
    const int64_t r0 = rows.begin, nr = rows.count();
    float* hr = h + r0 * hc * D; // [nr, hc, D]
    float* postr = post + r0 * hc;
    float* combr = comb + r0 * hc * hc;
    float* xr = x + r0 * D;
    float* yr = y + r0 * D;

    if (nr > 0) {
        hc_pre(be, c, w.hc_attn, hr, nr, postr, combr, xr);
        be.rms_norm({xr, w.attn_norm.data(), nr, D, eps, xr});
    }
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
    attention_forward(actx, batch, x, y, probe.indexer_topk); // every rank: its collectives
    if (nr > 0) {
        hc_post(be, c, postr, combr, yr, nr, hr);
        hc_pre(be, c, w.hc_ffn, hr, nr, postr, combr, xr);
        be.rms_norm({xr, w.ffn_norm.data(), nr, D, eps, xr});
    }
    const bool hash = c.mlp_layer_types[ctx.layer] == MlpType::kHashMoe;
    const int64_t K = c.num_experts_per_tok;
    if (rows.split && ctx.moe_spans_cp) {
        // EP on CP: the MoE group holds every CP rank and its slot all-reduce needs every row on every
        // rank, so the MoE runs replicated on the gathered input (EP already divides the experts).
        cp_gather_rows(be, *ctx.cp, rows, x, D);
        moe_forward(be, c, w.ffn, *ctx.moe, hash, x, ids, skip, T, y, probe.router, probe.router_weights,
                    ctx.moe_shard);
    } else if (nr > 0) {
        // This rank's rows (hash layers route by the rows' own ids). A MoE group that does not span the CP
        // group (EP across the other axes) holds ranks of one CP rank: the same rows, so its collectives
        // match, and are skipped together when there are none.
        moe_forward(be, c, w.ffn, *ctx.moe, hash, xr, ids + r0, skip + r0, nr, yr,
                    probe.router ? probe.router + r0 * K : nullptr,
                    probe.router_weights ? probe.router_weights + r0 * K : nullptr, ctx.moe_shard);
    }
    if (nr > 0) hc_post(be, c, postr, combr, yr, nr, hr);
    ws.release(mark);
}

} // namespace deepinfer::model::deepseek_v4
