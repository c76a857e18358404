"""DeepSeek V4.1: HF <-> official tensor names and each tensor's stored dtype in the released layout.

transformers' deepseek_v41 modules are named after DeepSeek's own (`attn.wq_a`, `ffn.gate.bias_vl`,
`engram.embed.weight`, `hc_attn_fn`, ...), so the mapping is only: drop the `model.` prefix, and
`lm_head.weight` <-> `head.weight` (as in V4). Storage classes follow the released V4.1-Flash checkpoint
(FP8 e4m3 32x32 linears, FP4 routed experts, F32 mHC/sinks/gate biases, BF16 norms) as described by
transformers' `_keep_in_fp32_modules_strict` and the modeling comments; see tools/oracle/README.md.
"""

from __future__ import annotations

import re

import torch


def hf_to_official(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in sd.items():
        if k == "lm_head.weight":
            out["head.weight"] = v
        elif k.startswith("model."):
            out[k[len("model."):]] = v
        else:
            raise KeyError(f"unmapped HF key {k}")
    return out


def official_to_hf(off: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {("lm_head.weight" if k == "head.weight" else "model." + k): v for k, v in off.items()}


F32_RE = re.compile(r"(\.hc_(attn|ffn)_(fn|base|scale)$|\.attn\.attn_sink$|\.ffn\.gate\.bias(_vl)?$)")
FP8_LINEAR_RE = re.compile(r"(\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b)\.weight$|\.attn\.indexer\.wq_b\.weight$|"
                           r"\.ffn\.shared_experts\.w[123]\.weight$|\.engram\.wkv\.weight$)")
FP4_EXPERT_RE = re.compile(r"\.ffn\.experts\.\d+\.w[123]\.weight$")
ENGRAM_TABLE_RE = re.compile(r"\.engram\.embed\.weight$")
ENGRAM_SCALE_RE = re.compile(r"\.engram\.embed\.scale$")


def storage_kind(name: str, compress_ratio_of_layer) -> str:
    """'f32' | 'fp8' | 'fp4' | 'engram_table' | 'engram_scale' | 'bf16'."""
    if ENGRAM_SCALE_RE.search(name):
        return "engram_scale"
    if ENGRAM_TABLE_RE.search(name):
        return "engram_table"
    if F32_RE.search(name):
        return "f32"
    m = re.match(r"^layers\.(\d+)\.attn\.compressor\.wkv\.weight$", name)
    if m and compress_ratio_of_layer(int(m.group(1))) > 1:
        return "f32"  # the pooling compressor's wkv is stored fp32 ("fp32 above ratio 1")
    if FP4_EXPERT_RE.search(name):
        return "fp4"
    if FP8_LINEAR_RE.search(name):
        return "fp8"
    # embed, head, norms, compressor wgate / ratio-1 wkv, indexer wk / k_norm / weights_proj,
    # gate weight, engram q_weight / k_weight
    return "bf16"
