"""HF <-> DeepSeek official tensor names (spec §4.1) and each tensor's stored dtype in the checkpoints.
Verified against transformers by make_tiny_v4.verify_mapping()."""

from __future__ import annotations

import re

import torch

TOP_MAP = {
    "model.embed_tokens.weight": "embed.weight",
    "lm_head.weight": "head.weight",
    "model.norm.weight": "norm.weight",
    "model.hc_head.hc_fn": "hc_head_fn",
    "model.hc_head.hc_base": "hc_head_base",
    "model.hc_head.hc_scale": "hc_head_scale",
}
# suffix after "model.layers.{i}." -> suffix after "layers.{i}."
LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "attn_hc.fn": "hc_attn_fn",
    "attn_hc.base": "hc_attn_base",
    "attn_hc.scale": "hc_attn_scale",
    "ffn_hc.fn": "hc_ffn_fn",
    "ffn_hc.base": "hc_ffn_base",
    "ffn_hc.scale": "hc_ffn_scale",
    "self_attn.sinks": "attn.attn_sink",
    "self_attn.q_a_proj.weight": "attn.wq_a.weight",
    "self_attn.q_a_norm.weight": "attn.q_norm.weight",
    "self_attn.q_b_proj.weight": "attn.wq_b.weight",
    "self_attn.kv_proj.weight": "attn.wkv.weight",
    "self_attn.kv_norm.weight": "attn.kv_norm.weight",
    "self_attn.o_a_proj.weight": "attn.wo_a.weight",
    "self_attn.o_b_proj.weight": "attn.wo_b.weight",
    "self_attn.compressor.kv_proj.weight": "attn.compressor.wkv.weight",
    "self_attn.compressor.gate_proj.weight": "attn.compressor.wgate.weight",
    "self_attn.compressor.position_bias": "attn.compressor.ape",
    "self_attn.compressor.kv_norm.weight": "attn.compressor.norm.weight",
    "self_attn.compressor.indexer.kv_proj.weight": "attn.indexer.compressor.wkv.weight",
    "self_attn.compressor.indexer.gate_proj.weight": "attn.indexer.compressor.wgate.weight",
    "self_attn.compressor.indexer.position_bias": "attn.indexer.compressor.ape",
    "self_attn.compressor.indexer.kv_norm.weight": "attn.indexer.compressor.norm.weight",
    "self_attn.compressor.indexer.q_b_proj.weight": "attn.indexer.wq_b.weight",
    "self_attn.compressor.indexer.scorer.weights_proj.weight": "attn.indexer.weights_proj.weight",
    "mlp.gate.weight": "ffn.gate.weight",
    "mlp.gate.e_score_correction_bias": "ffn.gate.bias",
    "mlp.gate.tid2eid": "ffn.gate.tid2eid",
    "mlp.shared_experts.gate_proj.weight": "ffn.shared_experts.w1.weight",
    "mlp.shared_experts.up_proj.weight": "ffn.shared_experts.w3.weight",
    "mlp.shared_experts.down_proj.weight": "ffn.shared_experts.w2.weight",
    # mlp.experts.gate_up_proj [E, 2I, D] -> ffn.experts.{e}.w1.weight = [e, :I], w3 = [e, I:]
    # mlp.experts.down_proj    [E, D, I]  -> ffn.experts.{e}.w2.weight = [e]
}
LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


def hf_to_official(sd: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    out = {}
    inter = cfg.moe_intermediate_size
    for k, v in sd.items():
        if k in TOP_MAP:
            out[TOP_MAP[k]] = v
            continue
        m = LAYER_RE.match(k)
        if not m:
            raise KeyError(f"unmapped HF key {k}")
        i, rest = m.group(1), m.group(2)
        if rest == "mlp.experts.gate_up_proj":
            for e in range(v.shape[0]):
                out[f"layers.{i}.ffn.experts.{e}.w1.weight"] = v[e, :inter].contiguous()
                out[f"layers.{i}.ffn.experts.{e}.w3.weight"] = v[e, inter:].contiguous()
        elif rest == "mlp.experts.down_proj":
            for e in range(v.shape[0]):
                out[f"layers.{i}.ffn.experts.{e}.w2.weight"] = v[e].contiguous()
        elif rest in LAYER_MAP:
            out[f"layers.{i}.{LAYER_MAP[rest]}"] = v
        else:
            raise KeyError(f"unmapped HF key {k}")
    return out


def official_to_hf(off: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    inv_top = {v: k for k, v in TOP_MAP.items()}
    inv_layer = {v: k for k, v in LAYER_MAP.items()}
    out = {}
    experts: dict[tuple[int, str], dict[int, torch.Tensor]] = {}
    for k, v in off.items():
        if k in inv_top:
            out[inv_top[k]] = v
            continue
        m = re.match(r"^layers\.(\d+)\.(.+)$", k)
        if not m:
            raise KeyError(k)
        i, rest = int(m.group(1)), m.group(2)
        me = re.match(r"^ffn\.experts\.(\d+)\.(w[123])\.weight$", rest)
        if me:
            experts.setdefault((i, me.group(2)), {})[int(me.group(1))] = v
            continue
        out[f"model.layers.{i}.{inv_layer[rest]}"] = v
    for i in range(cfg.num_hidden_layers):
        E = cfg.n_routed_experts
        w1 = torch.stack([experts[(i, "w1")][e] for e in range(E)])
        w3 = torch.stack([experts[(i, "w3")][e] for e in range(E)])
        w2 = torch.stack([experts[(i, "w2")][e] for e in range(E)])
        out[f"model.layers.{i}.mlp.experts.gate_up_proj"] = torch.cat([w1, w3], dim=1)
        out[f"model.layers.{i}.mlp.experts.down_proj"] = w2
    return out


# ----------------------------------------------------------------------------------------------
# Storage dtype policy (mirrors the released V4 checkpoint; spec §4.1 census)
# ----------------------------------------------------------------------------------------------
F32_RE = re.compile(r"(^hc_head_(fn|base|scale)$|\.hc_(attn|ffn)_(fn|base|scale)$|\.attn_sink$|\.ape$|"
                    r"\.ffn\.gate\.bias$)")
I64_RE = re.compile(r"\.ffn\.gate\.tid2eid$")
# Linear weights: FP8 in the real checkpoint (BF16 in tiny-v4).
FP8_LINEAR_RE = re.compile(r"(\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b)\.weight$|\.attn\.indexer\.wq_b\.weight$|"
                           r"\.ffn\.shared_experts\.w[123]\.weight$)")
FP4_EXPERT_RE = re.compile(r"\.ffn\.experts\.\d+\.w[123]\.weight$")


def storage_kind(name: str) -> str:
    if I64_RE.search(name):
        return "i64"
    if F32_RE.search(name):
        return "f32"
    if FP4_EXPERT_RE.search(name):
        return "fp4"
    if FP8_LINEAR_RE.search(name):
        return "fp8"
    return "bf16"  # embed, head, norms, compressor wkv/wgate, gate weight, indexer weights_proj
