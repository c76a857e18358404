#!/usr/bin/env python3
"""Oracle: tiny random DeepSeek V4 checkpoints + goldens from Hugging Face transformers.

Writes (relative to --root, the repository root):
  models/tiny-v4/{config.json, model.safetensors}                 official names, BF16/F32/I64
  models/tiny-v4-fp8/{config.json, model.safetensors.index.json,  official names, FP8 e4m3 (32x32
                      model-0000{1,2}-of-00002.safetensors}         ue8m0 blocks) + FP4 routed experts
  tests/fixtures/tiny-v4/{goldens.safetensors, manifest.json}
  tests/fixtures/tiny-v4-fp8/{goldens.safetensors, dequantized.safetensors, manifest.json}

Everything numeric comes from transformers' DeepseekV4ForCausalLM run in fp32 (eager) on exactly the
values stored in the checkpoint (bf16-rounded / dequantized). See tools/oracle/README.md.
No transformers code is copied here; it is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import platform
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdv4

from names import hf_to_official, official_to_hf, storage_kind
from quantize import FP8_BLOCK, quant_fp4, quant_fp8, unpack_fp4

torch.set_num_threads(1)

# ----------------------------------------------------------------------------------------------
# Configuration (spec §6.1)
# ----------------------------------------------------------------------------------------------
VOCAB = 512
HIDDEN = 64
N_LAYERS = 4
LAYER_TYPES = [
    "sliding_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "compressed_sparse_attention",
]
MLP_LAYER_TYPES = ["hash_moe", "moe", "moe", "moe"]
COMPRESS_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
        "beta_fast": 32.0, "beta_slow": 1.0}

# Spec §6.1 says index_n_heads=2. With 2 heads, score = sum_h w_h*ReLU(q_h.k) is EXACTLY 0 for ~1/4 of
# (query, entry) pairs, so torch.topk meets exact ties at the top-k boundary and breaks them
# differently for the cached (1-row) and uncached (S-row) calls -> cached decode != full forward.
# 8 heads make exact-zero scores ~1/256 and the seed filter below rejects any remaining near-tie.
INDEX_N_HEADS = 8

HF_CONFIG_KW = dict(
    vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=N_LAYERS,
    num_attention_heads=4, num_key_value_heads=1, head_dim=32, partial_rotary_factor=0.5,
    q_lora_rank=32, o_groups=2, o_lora_rank=16,
    n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
    layer_types=LAYER_TYPES, mlp_layer_types=MLP_LAYER_TYPES, compress_rates=COMPRESS_RATES,
    sliding_window=8, index_n_heads=INDEX_N_HEADS, index_head_dim=32, index_topk=3,
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6,
    rope_theta=10000.0, compress_rope_theta=160000.0, rope_parameters=dict(YARN),
    max_position_embeddings=1024, scoring_func="sqrtsoftplus", routed_scaling_factor=1.5,
    swiglu_limit=1.0, num_nextn_predict_layers=0, tie_word_embeddings=False,
    bos_token_id=0, eos_token_id=1,
)

PROMPT_LENGTHS = [1, 3, 4, 5, 8, 9, 17, 40, 130]
GEN_TOKENS = 32
PROMPT_SEED = 1234
MIN_MARGIN = 1e-3        # greedy top1 - top2 logit margin, every generated step
MIN_SELECT_GAP = 1e-4    # k-th vs (k+1)-th selection score: router (scores+bias) and indexer


def make_hf_config() -> DeepseekV4Config:
    cfg = DeepseekV4Config(**{k: (dict(v) if isinstance(v, dict) else (list(v) if isinstance(v, list) else v))
                              for k, v in HF_CONFIG_KW.items()})
    cfg._attn_implementation = "eager"
    return cfg


def official_config(cfg: DeepseekV4Config) -> dict:
    """config.json in DeepSeek's released field names (as in DeepSeek-V4-Flash/config.json)."""
    ratio_of = {"sliding_attention": 0, **cfg.compress_rates}
    n_hash = sum(1 for t in cfg.mlp_layer_types if t == "hash_moe")
    assert cfg.mlp_layer_types == ["hash_moe"] * n_hash + ["moe"] * (N_LAYERS - n_hash)
    comp = cfg.rope_parameters["compress"]
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "qk_rope_head_dim": cfg.qk_rope_head_dim,
        "q_lora_rank": cfg.q_lora_rank,
        "o_groups": cfg.o_groups,
        "o_lora_rank": cfg.o_lora_rank,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "n_routed_experts": cfg.n_routed_experts,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "n_shared_experts": cfg.n_shared_experts,
        "scoring_func": cfg.scoring_func,
        "routed_scaling_factor": cfg.routed_scaling_factor,
        "norm_topk_prob": cfg.norm_topk_prob,
        "topk_method": "noaux_tc",
        "num_hash_layers": n_hash,
        "swiglu_limit": cfg.swiglu_limit,
        "sliding_window": cfg.sliding_window,
        "compress_ratios": [ratio_of[t] for t in cfg.layer_types],
        "compress_rope_theta": cfg.compress_rope_theta,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": {
            "type": "yarn",
            "factor": comp["factor"],
            "original_max_position_embeddings": comp["original_max_position_embeddings"],
            "beta_fast": comp["beta_fast"],
            "beta_slow": comp["beta_slow"],
        },
        "max_position_embeddings": cfg.max_position_embeddings,
        "index_n_heads": cfg.index_n_heads,
        "index_head_dim": cfg.index_head_dim,
        "index_topk": cfg.index_topk,
        "hc_mult": cfg.hc_mult,
        "hc_sinkhorn_iters": cfg.hc_sinkhorn_iters,
        "hc_eps": cfg.hc_eps,
        "rms_norm_eps": cfg.rms_norm_eps,
        "hidden_act": cfg.hidden_act,
        "num_nextn_predict_layers": cfg.num_nextn_predict_layers,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": "bfloat16",
    }


# ----------------------------------------------------------------------------------------------
# Canaries (spec §6.3): refuse to produce goldens from a transformers build with older semantics.
# ----------------------------------------------------------------------------------------------
def check_canaries() -> dict:
    hc_src = inspect.getsource(mdv4.DeepseekV4HyperConnection.forward)
    layer_src = inspect.getsource(mdv4.DeepseekV4DecoderLayer.forward)
    mlp_src = inspect.getsource(mdv4.DeepseekV4MLP.forward)
    experts_src = inspect.getsource(mdv4.DeepseekV4Experts._apply_gate)
    checks = {
        "hc_post_2_sigmoid": "2 * torch.sigmoid" in hc_src,
        "hc_comb_softmax": "torch.softmax(" in hc_src,
        "layer_comb_transpose": layer_src.count(".transpose(-1, -2)") == 2,
        "shared_mlp_clamp": "clamp(max=self.limit)" in mlp_src and "clamp(min=-self.limit" in mlp_src,
        "experts_clamp": "clamp(max=self.limit)" in experts_src and "clamp(min=-self.limit" in experts_src,
    }
    bad = [k for k, v in checks.items() if not v]
    if bad:
        raise SystemExit(f"canary failed for transformers {transformers.__version__}: {bad}")
    return checks


# ----------------------------------------------------------------------------------------------
# Randomization (spec §6.3 recipe)
# ----------------------------------------------------------------------------------------------
def randomize(model: DeepseekV4ForCausalLM, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("_hc.scale") or name.endswith("hc_head.hc_scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.2 if p.dim() > 1 else 0.5))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("tid2eid"):
                rows = [torch.randperm(cfg.n_routed_experts, generator=g)[: cfg.num_experts_per_tok]
                        for _ in range(b.shape[0])]
                b.copy_(torch.stack(rows).to(torch.int64))
            # rotary *_inv_freq buffers are never touched


# ----------------------------------------------------------------------------------------------
# Building stored checkpoints
# ----------------------------------------------------------------------------------------------
def build_tiny_v4(off: dict[str, torch.Tensor]):
    """Return (stored tensors, effective fp32 values)."""
    stored, eff = {}, {}
    for k, v in off.items():
        kind = storage_kind(k)
        if kind == "i64":
            stored[k] = v.to(torch.int64).contiguous()
            eff[k] = stored[k]
        elif kind == "f32":
            stored[k] = v.to(torch.float32).contiguous()
            eff[k] = stored[k]
        else:  # bf16 / fp8-class / fp4-class linear weights: BF16 in tiny-v4
            stored[k] = v.to(torch.bfloat16).contiguous()
            eff[k] = stored[k].to(torch.float32)
    return stored, eff


def build_tiny_v4_fp8(off: dict[str, torch.Tensor]):
    """Return (stored tensors, effective fp32 values, dequantized fp32 of quantized weights)."""
    stored, eff, deq = {}, {}, {}
    for k, v in off.items():
        kind = storage_kind(k)
        base = k[: -len(".weight")] if k.endswith(".weight") else None
        if kind == "fp8":
            q, s, d = quant_fp8(v)
            stored[k], stored[f"{base}.scale"] = q.contiguous(), s.contiguous()
            eff[k] = deq[k] = d
        elif kind == "fp4":
            q, s, d = quant_fp4(v)
            assert torch.equal(unpack_fp4(q, s), d)
            stored[k], stored[f"{base}.scale"] = q, s.contiguous()
            eff[k] = deq[k] = d
        elif kind == "i64":
            stored[k] = v.to(torch.int64).contiguous()
            eff[k] = stored[k]
        elif kind == "f32":
            stored[k] = v.to(torch.float32).contiguous()
            eff[k] = stored[k]
        else:
            stored[k] = v.to(torch.bfloat16).contiguous()
            eff[k] = stored[k].to(torch.float32)
    return stored, eff, deq


def load_effective(cfg, eff_official: dict[str, torch.Tensor]) -> DeepseekV4ForCausalLM:
    model = DeepseekV4ForCausalLM(cfg).float().eval()
    hf_sd = official_to_hf(eff_official, cfg)
    model.load_state_dict(hf_sd, strict=True)   # raises on any missing / unexpected key
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


# ----------------------------------------------------------------------------------------------
# Mapping verification against transformers itself
# ----------------------------------------------------------------------------------------------
def verify_mapping(model: DeepseekV4ForCausalLM, cfg) -> dict:
    """(1) save_pretrained (default = revert conversion -> original format) must produce exactly our
    official key set with identical values; (2) from_pretrained on a dir holding OUR official-named
    tensors must reproduce every parameter and persistent buffer."""
    report = {}
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ours = hf_to_official(sd, cfg)
    with tempfile.TemporaryDirectory() as td:
        model.save_pretrained(td)
        files = sorted(Path(td).glob("*.safetensors"))
        theirs = {}
        for f in files:
            theirs.update(safetensors.torch.load_file(str(f)))
        # transformers 5.24.0 does not revert the conversion exactly (see README "save_pretrained"):
        # it keeps the "model." prefix, leaves the ^-anchored top-level renames (embed, hc_head)
        # unreverted, and turns attn.kv_norm into attn.norm (reverse of the \.norm\. -> .kv_norm. rule).
        # We record every difference and insist that values agree wherever names agree.
        strip = {(k[len("model."):] if k.startswith("model.") else k): k for k in theirs}
        only_theirs = sorted(set(strip) - set(ours))
        only_ours = sorted(set(ours) - set(strip))
        for k in set(strip) & set(ours):
            assert torch.equal(theirs[strip[k]], ours[k]), f"save_pretrained value differs for {k}"
        generic = lambda ks: sorted({re.sub(r"(layers|experts)\.\d+", r"\1.N", k) for k in ks})
        report["save_pretrained_model_prefix_kept"] = all(k.startswith("model.") for k in theirs
                                                          if k != "head.weight")
        report["save_pretrained_names_only_in_transformers_output"] = generic(only_theirs)
        report["save_pretrained_names_only_in_ours"] = generic(only_ours)
        report["save_pretrained_values_equal_where_names_agree"] = True
        saved_cfg = json.loads((Path(td) / "config.json").read_text())
    with tempfile.TemporaryDirectory() as td:
        safetensors.torch.save_file({k: v.contiguous() for k, v in ours.items()},
                                    str(Path(td) / "model.safetensors"), metadata={"format": "pt"})
        cfg.save_pretrained(td)
        loaded = DeepseekV4ForCausalLM.from_pretrained(td, dtype=torch.float32).eval()
        lsd = loaded.state_dict()
        assert set(lsd) == set(sd), "from_pretrained state_dict keys differ"
        for k in sd:
            assert torch.equal(lsd[k], sd[k]), f"from_pretrained value differs for {k}"
        report["from_pretrained_official_roundtrip"] = True
    report["n_official_tensors"] = len(ours)
    report["hf_save_pretrained_config_keys"] = sorted(saved_cfg)
    return report


# ----------------------------------------------------------------------------------------------
# Goldens
# ----------------------------------------------------------------------------------------------
def make_prompts() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(PROMPT_SEED)
    return [torch.randint(2, VOCAB, (1, n), generator=g) for n in PROMPT_LENGTHS]


class Recorder:
    """Forward hooks. `on` gates the prefill captures; the selection-gap monitors run on every call
    (prefill, cached decode inside generate(), and the no-cache check forward)."""

    def __init__(self, model):
        self.on = False
        self.data: dict[str, torch.Tensor] = {}
        self.handles = []
        self.min_router_gap = math.inf
        self.min_indexer_gap = math.inf
        self._scores = None
        inner = model.model
        for l, layer in enumerate(inner.layers):
            self.handles.append(layer.register_forward_hook(self._hidden(l)))
            self.handles.append(layer.mlp.gate.register_forward_hook(self._router(l)))
            comp = layer.self_attn.compressor
            if comp is not None and hasattr(comp, "indexer"):
                self.handles.append(comp.indexer.scorer.register_forward_hook(self._scorer))
                self.handles.append(comp.indexer.register_forward_hook(self._indexer(l), with_kwargs=True))
        self.handles.append(inner.norm.register_forward_hook(self._final))

    def _scorer(self, mod, args, out):
        self._scores = out.detach()

    def _gap_router(self, mod, logits):
        if isinstance(mod, mdv4.DeepseekV4HashRouter):
            return
        sel = mod.score_fn(logits.float()) + mod.e_score_correction_bias.float()
        top = sel.topk(mod.top_k + 1, dim=-1).values
        self.min_router_gap = min(self.min_router_gap, float((top[:, -2] - top[:, -1]).min()))

    def _gap_indexer(self, mod, position_ids):
        scores = self._scores                                     # [B, S, T]
        T = scores.shape[-1]
        k = mod.index_topk
        if T <= k:
            return
        thr = (position_ids + 1) // mod.compress_rate             # [B, S]
        masked = scores.masked_fill(torch.arange(T).view(1, 1, -1) >= thr.unsqueeze(-1), float("-inf"))
        n_valid = torch.minimum(thr, torch.full_like(thr, T))
        rows = n_valid > k
        if rows.any():
            top = masked.topk(k + 1, dim=-1).values[rows]
            self.min_indexer_gap = min(self.min_indexer_gap, float((top[:, k - 1] - top[:, k]).min()))

    def _hidden(self, l):
        def hook(mod, args, out):
            if self.on:
                t = out[0] if isinstance(out, tuple) else out
                self.data[f"hidden.{l}"] = t[0].detach().float().clone()      # [L, hc, D]
        return hook

    def _router(self, l):
        def hook(mod, args, out):
            self._gap_router(mod, out[0])
            if self.on:
                _, weights, indices = out
                self.data[f"router.{l}"] = indices.detach().to(torch.int64).clone()      # [L, K]
                self.data[f"router_weights.{l}"] = weights.detach().float().clone()     # [L, K]
        return hook

    def _indexer(self, l):
        def hook(mod, args, kwargs, out):
            pos = kwargs["position_ids"] if "position_ids" in kwargs else args[2]
            self._gap_indexer(mod, pos)
            if self.on:
                self.data[f"indexer_topk.{l}"] = out[0].detach().to(torch.int64).clone()  # [L, k]
        return hook

    def _final(self, mod, args, out):
        if self.on:
            self.data["final_hidden"] = out[0].detach().float().clone()                  # [L, D]


def run_goldens(model, prompts) -> tuple[dict[str, torch.Tensor], dict]:
    rec = Recorder(model)
    out: dict[str, torch.Tensor] = {}
    info = {"prompts": []}
    V = model.config.vocab_size
    with torch.no_grad():
        for i, ids in enumerate(prompts):
            L = ids.shape[1]
            rec.on, rec.data = True, {}
            full = model(input_ids=ids, use_cache=False).logits[0].float()              # [L, V]
            rec.on = False
            # the hooks captured what the schema says: last layer streams -> hc_head -> norm -> lm_head
            last = rec.data[f"hidden.{len(model.model.layers) - 1}"]
            fh = model.model.norm(model.model.hc_head(last[None]))[0]
            assert torch.allclose(fh, rec.data["final_hidden"], atol=1e-6, rtol=0)
            assert torch.allclose(rec.data["final_hidden"] @ model.lm_head.weight.T, full, atol=1e-5, rtol=0)
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=GEN_TOKENS,
                                 min_new_tokens=GEN_TOKENS, do_sample=False, use_cache=True,
                                 return_dict_in_generate=True, output_logits=True,
                                 eos_token_id=None, pad_token_id=0)
            toks = gen.sequences[0, L:].clone()
            assert toks.numel() == GEN_TOKENS
            step = torch.stack([x[0].float() for x in gen.logits])                       # [T, V]
            assert step.shape == (GEN_TOKENS, V)
            assert torch.equal(step.argmax(-1), toks), "generate tokens != argmax(step logits)"
            # cache consistency: full no-cache forward over prompt + generated
            chk = model(input_ids=gen.sequences, use_cache=False).logits[0].float()
            chk_steps = chk[L - 1: L - 1 + GEN_TOKENS]
            cache_ok = torch.equal(chk_steps.argmax(-1), toks)
            top2 = step.topk(2, dim=-1).values
            margins = (top2[:, 0] - top2[:, 1]).tolist()
            pfx = f"prompt.{i}."
            out[pfx + "ids"] = ids[0].to(torch.int64).clone()
            out[pfx + "prefill_logits"] = full.contiguous()
            out[pfx + "gen_tokens"] = toks.to(torch.int64)
            out[pfx + "step_logits"] = step.contiguous()
            for k, v in rec.data.items():
                out[pfx + k] = v.contiguous()
            info["prompts"].append({
                "index": i, "length": L, "margins": margins, "min_margin": min(margins),
                "cache_consistent_argmax": cache_ok,
                "max_abs_diff_step_vs_nocache": float((chk_steps - step).abs().max()),
                "max_abs_diff_prefill_last_vs_step0": float((full[-1] - step[0]).abs().max()),
            })
    for h in rec.handles:
        h.remove()
    info["min_margin"] = min(p["min_margin"] for p in info["prompts"])
    info["min_router_selection_gap"] = rec.min_router_gap
    info["min_indexer_selection_gap"] = rec.min_indexer_gap
    info["cache_consistent"] = all(p["cache_consistent_argmax"] for p in info["prompts"])
    return out, info


# ----------------------------------------------------------------------------------------------
# Writers
# ----------------------------------------------------------------------------------------------
def read_st_dir(d: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(safetensors.torch.load_file(str(f)))
    return out


def artifact_self_check(cfg, root: Path, prompts) -> dict:
    """Re-read the written artifacts and prove the goldens are a function of them:
    tiny-v4: transformers' from_pretrained (its own official-name conversion) on the written
    safetensors, upcast to fp32, reproduces every prefill golden.
    tiny-v4-fp8: an independent decode of the stored FP8/FP4 bytes equals dequantized.safetensors
    bit for bit, and the dequantized model reproduces every prefill golden.
    "Reproduces" = max |diff| recorded; identical parameters still give ~1e-6 differences on some
    shapes (CPU GEMM kernel choice depends on memory alignment), so this is not bitwise."""
    rep = {}
    tol = 1e-4
    gold_a = safetensors.torch.load_file(str(root / "tests/fixtures/tiny-v4/goldens.safetensors"))
    worst = 0.0
    with tempfile.TemporaryDirectory() as td:
        os.symlink((root / "models/tiny-v4/model.safetensors").resolve(), Path(td) / "model.safetensors")
        cfg.save_pretrained(td)
        m = DeepseekV4ForCausalLM.from_pretrained(td, dtype=torch.float32).eval()
        m.config._attn_implementation = "eager"
        with torch.no_grad():
            for i, ids in enumerate(prompts):
                lg = m(input_ids=ids, use_cache=False).logits[0]
                d = float((lg - gold_a[f"prompt.{i}.prefill_logits"]).abs().max())
                assert d <= tol, f"tiny-v4 reload mismatch prompt {i}: {d}"
                worst = max(worst, d)
    rep["tiny_v4_from_pretrained_max_abs_diff_prefill_logits"] = worst

    stored = read_st_dir(root / "models/tiny-v4-fp8")
    deq = safetensors.torch.load_file(str(root / "tests/fixtures/tiny-v4-fp8/dequantized.safetensors"))
    eff = {}
    for k, v in stored.items():
        if k.endswith(".scale"):
            continue
        if v.dtype == torch.float8_e4m3fn:
            sc = stored[k[: -len(".weight")] + ".scale"].to(torch.float32)
            sc = sc.repeat_interleave(FP8_BLOCK[0], 0).repeat_interleave(FP8_BLOCK[1], 1)
            eff[k] = v.to(torch.float32) * sc[: v.shape[0], : v.shape[1]]
            assert torch.equal(eff[k], deq[k]), k
        elif v.dtype == torch.int8:
            eff[k] = unpack_fp4(v, stored[k[: -len(".weight")] + ".scale"])
            assert torch.equal(eff[k], deq[k]), k
        elif v.dtype == torch.int64:
            eff[k] = v
        else:
            eff[k] = v.to(torch.float32)
    assert set(deq) == {k for k, v in stored.items() if v.dtype in (torch.float8_e4m3fn, torch.int8)}
    rep["fp8_independent_decode_equals_dequantized_safetensors"] = True
    gold_b = safetensors.torch.load_file(str(root / "tests/fixtures/tiny-v4-fp8/goldens.safetensors"))
    m = load_effective(cfg, eff)
    worst = 0.0
    with torch.no_grad():
        for i, ids in enumerate(prompts):
            lg = m(input_ids=ids, use_cache=False).logits[0]
            d = float((lg - gold_b[f"prompt.{i}.prefill_logits"]).abs().max())
            assert d <= tol, f"tiny-v4-fp8 reload mismatch prompt {i}: {d}"
            worst = max(worst, d)
    rep["fp8_reload_max_abs_diff_prefill_logits"] = worst
    return rep


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_st(tensors: dict[str, torch.Tensor], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file({k: tensors[k].contiguous() for k in sorted(tensors)}, str(path),
                                metadata={"format": "pt"})


def write_json(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def key_list(path: Path) -> list[dict]:
    res = []
    with safetensors.safe_open(str(path), "pt") as f:
        for k in f.keys():
            sl = f.get_slice(k)
            res.append({"name": k, "dtype": sl.get_dtype(), "shape": list(sl.get_shape())})
    return res


def versions() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "safetensors": safetensors.__version__}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--max-seeds", type=int, default=20)
    args = ap.parse_args()
    root = Path(args.root)

    canaries = check_canaries()
    cfg = make_hf_config()
    # sanity: what the config resolved to (YaRN / rope dims / types)
    assert cfg.qk_rope_head_dim == 16 and cfg.layer_types == LAYER_TYPES
    assert cfg.rope_parameters["compress"]["rope_type"] == "yarn"
    assert cfg.rope_parameters["compress"]["attention_factor"] == 1.0

    prompts = make_prompts()
    rejected = []
    mapping_report = None
    chosen = None
    for seed in range(args.seed_start, args.seed_start + args.max_seeds):
        torch.manual_seed(seed)
        base = DeepseekV4ForCausalLM(cfg).float().eval()
        randomize(base, seed)
        if mapping_report is None:
            mapping_report = verify_mapping(base, cfg)
        sd = {k: v.detach().clone() for k, v in base.state_dict().items()}
        off = hf_to_official(sd, cfg)
        st_a, eff_a = build_tiny_v4(off)
        st_b, eff_b, deq_b = build_tiny_v4_fp8(off)
        model_a = load_effective(cfg, eff_a)
        gold_a, info_a = run_goldens(model_a, prompts)
        model_b = load_effective(cfg, eff_b)
        gold_b, info_b = run_goldens(model_b, prompts)
        ok = all(i["min_margin"] >= MIN_MARGIN and i["cache_consistent"]
                 and i["min_router_selection_gap"] >= MIN_SELECT_GAP
                 and i["min_indexer_selection_gap"] >= MIN_SELECT_GAP for i in (info_a, info_b))
        print(f"seed {seed}: " + " | ".join(
            f"{n}: margin {i['min_margin']:.3g} router-gap {i['min_router_selection_gap']:.3g} "
            f"indexer-gap {i['min_indexer_selection_gap']:.3g} cache-ok {i['cache_consistent']}"
            for n, i in (("bf16", info_a), ("fp8", info_b))), flush=True)
        if ok:
            chosen = (seed, st_a, gold_a, info_a, st_b, deq_b, gold_b, info_b)
            break
        rejected.append({"seed": seed, **{f"{n}.{key}": i[key] for n, i in (("tiny-v4", info_a),
                                                                               ("tiny-v4-fp8", info_b))
                                           for key in ("min_margin", "min_router_selection_gap",
                                                       "min_indexer_selection_gap", "cache_consistent")}})
    if chosen is None:
        raise SystemExit("no acceptable seed found")
    seed, st_a, gold_a, info_a, st_b, deq_b, gold_b, info_b = chosen

    # ---- models/tiny-v4 (official config names, one file) ----
    d_a = root / "models" / "tiny-v4"
    if d_a.exists():
        shutil.rmtree(d_a)
    save_st(st_a, d_a / "model.safetensors")
    off_cfg = official_config(cfg)
    write_json(off_cfg, d_a / "config.json")

    # ---- models/tiny-v4-fp8 (transformers config names, two shards) ----
    d_b = root / "models" / "tiny-v4-fp8"
    if d_b.exists():
        shutil.rmtree(d_b)
    d_b.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as td:   # exactly what transformers' save_pretrained writes
        cfg.save_pretrained(td)
        hf_cfg = json.loads((Path(td) / "config.json").read_text())
    hf_cfg["dtype"] = "bfloat16"
    hf_cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                     "weight_block_size": list(FP8_BLOCK), "activation_scheme": "dynamic"}
    hf_cfg["expert_dtype"] = "fp4"
    write_json(hf_cfg, d_b / "config.json")
    shard_names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]

    def shard_of(name: str) -> int:
        m = re.match(r"^layers\.(\d+)\.", name)
        return 1 if (m and int(m.group(1)) >= N_LAYERS // 2) else 0

    shards = [{}, {}]
    for k, v in st_b.items():
        shards[shard_of(k)][k] = v
    weight_map, total = {}, 0
    for si, sh in enumerate(shards):
        save_st(sh, d_b / shard_names[si])
        for k, v in sh.items():
            weight_map[k] = shard_names[si]
            total += v.numel() * v.element_size()
    write_json({"metadata": {"total_size": total},
                "weight_map": {k: weight_map[k] for k in sorted(weight_map)}},
               d_b / "model.safetensors.index.json")

    # ---- fixtures ----
    fx_a = root / "tests" / "fixtures" / "tiny-v4"
    fx_b = root / "tests" / "fixtures" / "tiny-v4-fp8"
    for d in (fx_a, fx_b):
        if d.exists():
            shutil.rmtree(d)
    save_st(gold_a, fx_a / "goldens.safetensors")
    save_st(gold_b, fx_b / "goldens.safetensors")
    save_st(deq_b, fx_b / "dequantized.safetensors")

    self_check = artifact_self_check(cfg, root, prompts)
    print("artifact self-check:", self_check, flush=True)

    cmd = ("tools/oracle/generate.sh" + ("" if args.seed_start == 0 else f" --seed-start {args.seed_start}")
           + "   (with ORACLE_VENV=<venv holding requirements.txt> to skip the venv build)")
    common = {
        "generator": "tools/oracle/make_tiny_v4.py",
        "regenerate_command": cmd,
        "versions": versions(),
        "canaries": canaries,
        "mapping_verification": mapping_report,
        "artifact_self_check": self_check,
        "seeds": {"weights_seed": seed, "weights_seed_start": args.seed_start, "rejected_seeds": rejected,
                  "prompt_seed": PROMPT_SEED, "min_margin_threshold": MIN_MARGIN,
                  "min_selection_gap_threshold": MIN_SELECT_GAP},
        "hf_config": {k: v for k, v in cfg.to_dict().items() if k not in ("_attn_implementation",
                                                                             "transformers_version")},
        "official_config": off_cfg,
        "generation": {"max_new_tokens": GEN_TOKENS, "do_sample": False, "use_cache": True,
                       "cache": "DynamicCache (generate default)", "eos_token_id": None,
                       "dtype": "float32", "attn_implementation": "eager"},
        "prompt_lengths": PROMPT_LENGTHS,
    }

    def finish(fx: Path, model_dir: Path, info: dict, extra: dict):
        files = sorted([p for p in model_dir.rglob("*") if p.is_file()] +
                       [p for p in fx.rglob("*") if p.is_file() and p.name != "manifest.json"])
        man = dict(common)
        man.update(extra)
        man["per_prompt"] = info["prompts"]
        man["min_margin"] = info["min_margin"]
        man["min_router_selection_gap"] = info["min_router_selection_gap"]
        man["min_indexer_selection_gap"] = info["min_indexer_selection_gap"]
        man["golden_keys"] = key_list(fx / "goldens.safetensors")
        man["files"] = {str(p.relative_to(root)): {"bytes": p.stat().st_size, "sha256": sha256(p)}
                        for p in files}
        write_json(man, fx / "manifest.json")

    finish(fx_a, d_a, info_a, {"model": "tiny-v4", "model_dir": "models/tiny-v4",
                               "weights": "bf16-rounded stored values, computed in fp32"})
    finish(fx_b, d_b, info_b, {"model": "tiny-v4-fp8", "model_dir": "models/tiny-v4-fp8",
                               "weights": "dequantized FP8/FP4 + bf16-rounded stored values, fp32",
                               "quantization": hf_cfg["quantization_config"],
                               "dequantized_keys": key_list(fx_b / "dequantized.safetensors")})
    print(f"done: seed {seed}")


if __name__ == "__main__":
    main()
