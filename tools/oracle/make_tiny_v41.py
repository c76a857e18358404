#!/usr/bin/env python3
"""Oracle: tiny random DeepSeek V4.1 checkpoints + goldens from transformers' `deepseek_v41`.

transformers 5.24.0 does not ship deepseek_v41; the oracle venv carries the two files of the transformers
repository as an overlay (tools/oracle/README.md, "V4.1"). Their sha256 is checked before anything runs.

Writes (relative to --root, the repository root):
  models/tiny-v41/{config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
                   engram_hash.safetensors}            official names (released composite config), BF16/F32
  models/tiny-v41-fp8/{config.json, model.safetensors.index.json, model-0000{1,2}-of-00002.safetensors,
                   tokenizer.json, tokenizer_config.json, engram_hash.safetensors}
                                                        transformers config names; FP8 e4m3 32x32 + FP4 experts
  tests/fixtures/tiny-v41/{goldens.safetensors, manifest.json}
  tests/fixtures/tiny-v41-fp8/{goldens.safetensors, dequantized.safetensors, manifest.json}
  data/engram/deepseek-v41-flash/{engram_hash.safetensors, manifest.json}
        the Engram hash data of the real V4.1-Flash, from data/tokenizer/deepseek-v4 (the same tokenizer)

Everything numeric comes from DeepseekV41ForCausalLM run in fp32 (eager) on exactly the values stored in
the checkpoint (bf16-rounded / dequantized), always through the cache path (see README, Discrepancies).
No transformers code is copied here; it is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import platform
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import sympy
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast, cache_utils
from transformers.models.deepseek_v41 import configuration_deepseek_v41 as cdv41
from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mdv41

from goldens_v41 import (DEAD_CHECK, GEN_TOKENS, MIN_MARGIN, MIN_SELECT_GAP, PROMPT_LENGTHS, PROMPT_SEED, acceptable,
                         fresh, run_goldens)
from names_v41 import hf_to_official, official_to_hf, storage_kind
from quantize import FP8_BLOCK, quant_fp4, quant_fp8, unpack_fp4
from tokenizer_goldens_v41 import record_in_manifest as record_tokenizer_goldens
from tokenizer_goldens_v41 import write_goldens as write_tokenizer_goldens

torch.set_num_threads(1)

# The overlay (issue 10): repository, path, commit and the sha256 of the files read at that commit.
OVERLAY_REPO = "huggingface/transformers"
OVERLAY = {
    "modeling_deepseek_v41.py": ("src/transformers/models/deepseek_v41/modeling_deepseek_v41.py",
                                 "0a2080b43eb64e6d448186a4f3f0bc9c618f4797",
                                 "b06cef1007cba028030ee3914fa955b1d237c5d9c8498582b2be9e7877099f92"),
    "configuration_deepseek_v41.py": ("src/transformers/models/deepseek_v41/configuration_deepseek_v41.py",
                                      "f026c8315a275221a61e087edc3536f341e55f09",
                                      "fa31e747db62e4da82f1632a90cc07d2e1414b465c03baffc3b8e37ba86d2748"),
}

# ----------------------------------------------------------------------------------------------
# Configuration (spec §6.2, with index_n_heads 32: see README)
# ----------------------------------------------------------------------------------------------
N_LAYERS = 5
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
        "beta_fast": 32.0, "beta_slow": 1.0}
BASE_KW = dict(
    hidden_size=64, num_hidden_layers=N_LAYERS, num_attention_heads=4, num_key_value_heads=1,
    head_dim=64, qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=16, sliding_window=8,
    compress_ratios=[0, 2, 2, 1, 1], kv_source_layer_ids=[1, 3], index_source_layer_ids=[1, 3, 4],
    candidate_source_layer_id=3, candidate_topk_blocks=3, candidate_block_size=2,
    index_n_heads=32, index_head_dim=32, index_topk=4,
    n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32,
    swiglu_limit=1.0, gate_temp=1.0, routed_scaling_factor=1.5, scoring_func="sqrtsoftplus",
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6,
    engram_layer_ids=[1, 3], engram_vocab_size=101, engram_max_ngram_size=3, engram_n_heads=2,
    engram_head_dim=32, engram_pad_id=2,
    num_nextn_predict_layers=0, dspark_noise_token_id=3, dspark_target_layer_ids=[],
    rope_theta=10000.0, compress_rope_theta=160000.0, rope_scaling=dict(YARN), max_position_embeddings=1024,
    bos_token_id=0, eos_token_id=1, pad_token_id=2, tie_word_embeddings=False,
)


# ----------------------------------------------------------------------------------------------
# Overlay + canaries: refuse to produce goldens from anything but the pinned reference.
# ----------------------------------------------------------------------------------------------
def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_overlay() -> dict:
    pkg = Path(mdv41.__file__).parent
    out = {}
    for fname, (path, commit, want) in OVERLAY.items():
        got = sha256(pkg / fname)
        if got != want:
            raise SystemExit(f"{pkg / fname}: sha256 {got} != pinned {want} ({OVERLAY_REPO} {path} @ {commit})")
        out[fname] = {"repo": OVERLAY_REPO, "path": path, "commit": commit, "sha256": got}
    return out


def check_canaries() -> dict:
    src = lambda obj: inspect.getsource(obj)
    attn = src(mdv41.DeepseekV41Attention.forward)
    idx = src(mdv41.DeepseekV41Indexer.forward)
    layer = src(mdv41.DeepseekV41DecoderLayer.forward)
    mixes = src(mdv41.DeepseekV41DecoderLayer.hc_mixes)
    checks = {
        "window_kv_fp8_block32": "_fake_quant_fp8_block(kv, block_size=32)" in attn,
        "compressed_kv_fp4_block16_e4m3": "_fake_quant_fp4_block(rotated, block_size=16, e4m3_scales=True)" in attn,
        "indexer_k_and_q_fp4_block32": idx.count("_fake_quant_fp4_block(") == 2 and "block_size=32" in idx,
        "delayed_pre_collapse": "self.hc_collapse(hidden_streams, pre_mix)" in layer
        and "self.hc_collapse(hidden_streams, attn_pre)" in layer and "return hidden_streams, ffn_pre" in layer,
        "hc_post_2_sigmoid": "2 * torch.sigmoid" in mixes,
        "hc_comb_softmax": "torch.softmax(" in mixes,
        "engram_before_attention": layer.index("self.engram(") < layer.index("self.attn("),
        "engram_signed_sqrt_gate": "torch.copysign(" in src(mdv41.DeepseekV41Engram.forward),
        "router_gate_temp_and_1e-20": "/ self.gate_temp" in src(mdv41.DeepseekV41TopKRouter.forward)
        and "+ 1e-20" in src(mdv41.DeepseekV41TopKRouter.forward),
        "expert_clamp": "torch.clamp(up, min=-self.swiglu_limit" in src(mdv41.DeepseekV41Expert.forward),
        "hash_seed_10007": "10007 * layer_id" in src(mdv41.compute_hash_multipliers),
        "candidate_last_block_pinned": "torch.inf" in src(mdv41.select_candidate_blocks),
    }
    bad = [k for k, v in checks.items() if not v]
    if bad:
        raise SystemExit(f"canary failed: {bad}")
    return checks


# transformers 5.24.0's get_layer_types_and_kwargs passes the config only to V4's compressed layer types;
# the overlay's DeepseekV41CSACache ("shared_compressed_attention") needs it too. Shim, recorded in the
# manifest (the overlay targets a newer cache_utils).
_orig_layer_kwargs = cache_utils.get_layer_types_and_kwargs


def _layer_kwargs_with_v41(config):
    types, kwargs = _orig_layer_kwargs(config)
    for i, t in enumerate(types):
        if t == "shared_compressed_attention":
            kwargs[i] = {"config": config}
    return types, kwargs


cache_utils.get_layer_types_and_kwargs = _layer_kwargs_with_v41


# ----------------------------------------------------------------------------------------------
# Tokenizer: word level; the Engram normalization (NFKC, NFD, strip accents, lowercase, whitespace) merges
# case, accent, ligature, full-width and whitespace variants.
# ----------------------------------------------------------------------------------------------
BASE_WORDS = ("the of and to in is was for on that with as by at from it an be this are or his which but "
              "not were had have one all their they new been has more who first also two after time other "
              "into year city over only can when most used some its her made between she world during "
              "such three where may later many would these both under team known there film him because "
              "school state about then out river part war well than music group through season before "
              "being up game each same best while however album since people united second series "
              "national left them high area what if so data tree light stone water fire").split()
VARIANT_WORDS = ["The", "THE", "Of", "And", "AND", "City", "CITY", "World", "Music", "River",
                 "café", "cafe", "Café", "CAFÉ", "naïve", "naive", "résumé", "resume", "Résumé",
                 "élan", "Elan", "über", "Uber", "ÜBER", "fiancée", "fiancee", "ﬁle", "file", "FILE",
                 "ﬂow", "flow", "ＡＢＣ", "abc", "Ｄａｔａ", "Data", "Ｔｒｅｅ", "Tree", "ﬁre", "Fire",
                 "Ångström", "angstrom", "Straße", "strasse", "ﬀ", "ff", "½", "1⁄2", "Ⅳ", "iv", "IV"]
SPACE_TOKENS = [" ", "\t", "  ", "\n", " \n"]   # all normalize to " " (kept apart from "" by the sentinel)
BROKEN_TOKENS = ["\ufffd", "x\ufffd"]          # decode with U+FFFD: keyed by the raw token string
SPECIALS = ["<s>", "</s>", "<pad>", "<unk>"]    # ids 0..3; <pad> = 2 = engram_pad_id


def build_tokenizer() -> PreTrainedTokenizerFast:
    words, seen = [], set()
    for w in SPECIALS + BASE_WORDS + VARIANT_WORDS + SPACE_TOKENS + BROKEN_TOKENS:
        if w not in seen:
            seen.add(w)
            words.append(w)
    # numbers fill the vocabulary to 256 entries
    i = 0
    while len(words) < 256:
        if str(i) not in seen:
            words.append(str(i))
        i += 1
    tk = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


# ----------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------
def make_hf_config(vocab: int, cvs: int) -> cdv41.DeepseekV41TextConfig:
    base = dict(BASE_KW, vocab_size=vocab, engram_compressed_vocab_size=cvs)
    layout = mdv41.EngramLayout.from_config(cdv41.DeepseekV41TextConfig(**base, engram_num_embeddings=[0, 0]))
    rows = [sum(p for per in lay for p in per) for lay in layout.primes]
    cfg = cdv41.DeepseekV41TextConfig(**base, engram_num_embeddings=rows)
    cfg._attn_implementation = "eager"
    return cfg


def official_config(cfg) -> dict:
    """The released V4.1-Flash layout: composite, DeepSeek's names inside text_config."""
    comp = cfg.rope_parameters["compress"]
    text = {
        "model_type": "deepseek_v41_text",
        **{k: getattr(cfg, k) for k in (
            "vocab_size", "hidden_size", "moe_intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups",
            "hidden_act", "swiglu_limit", "rms_norm_eps", "attention_bias", "max_position_embeddings",
            "rope_theta")},
        "rope_scaling": {"rope_type": "yarn", "factor": comp["factor"], "beta_fast": comp["beta_fast"],
                         "beta_slow": comp["beta_slow"],
                         "original_max_position_embeddings": comp["original_max_position_embeddings"]},
        **{k: getattr(cfg, k) for k in (
            "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "scoring_func", "topk_method",
            "norm_topk_prob", "routed_scaling_factor", "gate_temp", "sliding_window", "compress_ratios",
            "compress_rope_theta", "kv_source_layer_ids", "index_source_layer_ids", "index_n_heads",
            "index_head_dim", "index_topk", "candidate_source_layer_id", "candidate_topk_blocks",
            "candidate_block_size", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "engram_layer_ids",
            "engram_num_embeddings", "engram_max_ngram_size", "engram_vocab_size", "engram_n_heads",
            "engram_head_dim")},
        "engram_pad_token_id": cfg.engram_pad_id,
        "engram_compressed_vocab_size": cfg.engram_compressed_vocab_size,
        "num_nextn_predict_layers": cfg.num_nextn_predict_layers,
    }
    return {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "dtype": "bfloat16",
            "bos_token_id": cfg.bos_token_id, "eos_token_id": cfg.eos_token_id, "pad_token_id": cfg.pad_token_id,
            "tie_word_embeddings": False, "text_config": text}


# ----------------------------------------------------------------------------------------------
# Randomization (spec §6.3 recipe, V4.1 variant)
# ----------------------------------------------------------------------------------------------
def randomize(model, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("norm" in name and name.endswith(".weight")) or name.endswith(("q_weight", "k_weight")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(("hc_attn_scale", "hc_ffn_scale")):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith(("gate.bias", "gate.bias_vl")):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("engram.embed.scale"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.2 if p.dim() > 1 else 0.5))
        # rotary *_inv_freq buffers are never touched


# ----------------------------------------------------------------------------------------------
# Stored checkpoints
# ----------------------------------------------------------------------------------------------
def build_bf16(off, ratio_of):
    stored, eff = {}, {}
    for k, v in off.items():
        kind = storage_kind(k, ratio_of)
        if kind == "engram_scale":
            continue  # a float table has no scales (transformers ignores them); see README
        if kind == "f32":
            stored[k] = v.to(torch.float32).contiguous()
            eff[k] = stored[k]
        else:
            stored[k] = v.to(torch.bfloat16).contiguous()
            eff[k] = stored[k].to(torch.float32)
    return stored, eff


def build_fp8(off, ratio_of):
    stored, eff, deq = {}, {}, {}
    for k, v in off.items():
        kind = storage_kind(k, ratio_of)
        base = k[: -len(".weight")] if k.endswith(".weight") else None
        if kind == "engram_scale":
            continue  # written with its table below
        if kind == "fp8":
            q, s, d = quant_fp8(v)
            stored[k], stored[f"{base}.scale"] = q.contiguous(), s.contiguous()
            eff[k] = deq[k] = d
        elif kind == "engram_table":
            q, s, d = quant_fp8(v, block=(1, 32))
            stored[k], stored[f"{base}.scale"] = q.contiguous(), s.contiguous()
            eff[k] = deq[k] = d
        elif kind == "fp4":
            q, s, d = quant_fp4(v)
            assert torch.equal(unpack_fp4(q, s), d)
            stored[k], stored[f"{base}.scale"] = q, s.contiguous()
            eff[k] = deq[k] = d
        elif kind == "f32":
            stored[k] = v.to(torch.float32).contiguous()
            eff[k] = stored[k]
        else:
            stored[k] = v.to(torch.bfloat16).contiguous()
            eff[k] = stored[k].to(torch.float32)
    return stored, eff, deq


def load_effective(cfg, eff_official, tok):
    model = mdv41.DeepseekV41ForCausalLM(cfg).float().eval()
    hf = official_to_hf(eff_official)
    for name, p in model.state_dict().items():   # the float model's table scales are ones (unused)
        if name.endswith("engram.embed.scale") and name not in hf:
            hf[name] = torch.ones_like(p)
    model.load_state_dict(hf, strict=True)
    model.model.bind_tokenizer(tok)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 2
    return model


# ----------------------------------------------------------------------------------------------
# Engram hash data, shipped beside the checkpoint (exact: computed by the reference's own functions)
# ----------------------------------------------------------------------------------------------
def engram_data(cfg, tok, tokenizer_json: Path) -> tuple[dict[str, torch.Tensor], dict]:
    state = mdv41.DeepseekV41NgramHashState(cfg, tok)   # raises unless the compressed vocab size matches
    tm = state.token_map.to(torch.int64)
    assert int(tm.max()) < 2 ** 31
    tensors = {"token_map": tm.to(torch.int32).contiguous(),                       # [vocab] compressed ids
               "multipliers": state.multipliers.to(torch.int64).contiguous(),      # [nE, N]
               "primes": state.primes.to(torch.int64).contiguous(),                # [nE, N-1, heads]
               "offsets": state.offsets.to(torch.int64).contiguous()}              # [nE, (N-1)*heads]
    sums = [int(p.sum()) for p in state.primes]
    assert sums == list(cfg.engram_num_embeddings), (sums, cfg.engram_num_embeddings)
    meta = {"layer_ids": list(cfg.engram_layer_ids), "max_ngram_size": cfg.engram_max_ngram_size,
            "n_heads": cfg.engram_n_heads, "compressed_vocab_size": int(cfg.engram_compressed_vocab_size),
            "pad_token_id": int(cfg.engram_pad_id), "pad_compressed_id": int(state.pad_id),
            "vocab_size": int(tm.numel()), "num_embeddings": sums,
            "tokenizer_json_sha256": sha256(tokenizer_json)}
    return tensors, meta


def save_engram(tensors, meta, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    # one metadata key: safetensors writes the metadata map in no fixed order, one key keeps the file
    # byte-identical across runs
    safetensors.torch.save_file(tensors, str(path), metadata={"engram_hash": json.dumps(meta, sort_keys=True)})


def flash_engram(root: Path) -> dict:
    """V4.1-Flash's hash data from the V4 tokenizer (V4.1 keeps it: same vocab, and the compressed size
    comes out at exactly the config's 99092) and the released config's Engram fields."""
    tok_json = root / "data/tokenizer/deepseek-v4/tokenizer.json"
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tok_json))
    rel = json.loads((root / "tests/fixtures/deepseek-v41-flash/config.json").read_text())["text_config"]
    keys = ("engram_layer_ids", "engram_num_embeddings", "engram_max_ngram_size", "engram_vocab_size",
            "engram_n_heads", "engram_head_dim", "engram_compressed_vocab_size")
    cfg = cdv41.DeepseekV41TextConfig(vocab_size=rel["vocab_size"], engram_pad_id=rel["engram_pad_token_id"],
                                      **{k: rel[k] for k in keys})
    tensors, meta = engram_data(cfg, tok, tok_json)
    out = root / "data/engram/deepseek-v41-flash"
    save_engram(tensors, meta, out / "engram_hash.safetensors")
    return {"config": "tests/fixtures/deepseek-v41-flash/config.json",
            "tokenizer": "data/tokenizer/deepseek-v4/tokenizer.json", **meta,
            "files": {"data/engram/deepseek-v41-flash/engram_hash.safetensors":
                      {"bytes": (out / "engram_hash.safetensors").stat().st_size,
                       "sha256": sha256(out / "engram_hash.safetensors")}}}


# ----------------------------------------------------------------------------------------------
# Writers
# ----------------------------------------------------------------------------------------------
def save_st(tensors, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file({k: tensors[k].contiguous() for k in sorted(tensors)}, str(path),
                                metadata={"format": "pt"})


def write_json(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


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
            "safetensors": safetensors.__version__, "tokenizers": tokenizers.__version__,
            "sympy": sympy.__version__}


def read_st_dir(d: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(d.glob("model*.safetensors")):
        out.update(safetensors.torch.load_file(str(f)))
    return out


def artifact_self_check(cfg, root: Path, prompts, tok) -> dict:
    """Re-read the written checkpoints and prove the goldens are a function of them: the BF16 file upcast,
    and an independent decode of the FP8/FP4 bytes (equal to dequantized.safetensors bit for bit), each
    reproduce every prefill golden (max |diff| recorded; not bitwise, see README)."""
    rep = {}
    for name, d in (("tiny-v41", "models/tiny-v41"), ("tiny-v41-fp8", "models/tiny-v41-fp8")):
        stored = read_st_dir(root / d)
        eff = {}
        deq = (safetensors.torch.load_file(str(root / "tests/fixtures/tiny-v41-fp8/dequantized.safetensors"))
               if name.endswith("fp8") else {})
        for k, v in stored.items():
            if k.endswith(".scale"):
                continue
            if v.dtype == torch.float8_e4m3fn:
                sc = stored[k[: -len(".weight")] + ".scale"].to(torch.float32)
                br, bc = -(-v.shape[0] // sc.shape[0]), -(-v.shape[1] // sc.shape[1])
                sc = sc.repeat_interleave(br, 0).repeat_interleave(bc, 1)
                eff[k] = v.to(torch.float32) * sc[: v.shape[0], : v.shape[1]]
                assert torch.equal(eff[k], deq[k]), k
            elif v.dtype == torch.int8:
                eff[k] = unpack_fp4(v, stored[k[: -len(".weight")] + ".scale"])
                assert torch.equal(eff[k], deq[k]), k
            else:
                eff[k] = v.to(torch.float32)
        if deq:
            assert set(deq) == {k for k, v in stored.items() if v.dtype in (torch.float8_e4m3fn, torch.int8)}
            rep["fp8_independent_decode_equals_dequantized_safetensors"] = True
        gold = safetensors.torch.load_file(str(root / f"tests/fixtures/{name}/goldens.safetensors"))
        m = load_effective(cfg, eff, tok)
        worst = 0.0
        with torch.no_grad():
            for i, ids in enumerate(prompts):
                lg = m(input_ids=ids, past_key_values=fresh(m), use_cache=True).logits[0]
                d_ = float((lg - gold[f"prompt.{i}.prefill_logits"]).abs().max())
                assert d_ <= 1e-4, f"{name} reload mismatch prompt {i}: {d_}"
                worst = max(worst, d_)
        rep[f"{name}_reload_max_abs_diff_prefill_logits"] = worst
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--max-seeds", type=int, default=30)
    ap.add_argument("--seeds", default="", help="BF16,FP8: take these seeds (still filtered) instead of searching")
    args = ap.parse_args()
    root = Path(args.root)

    overlay = check_overlay()
    canaries = check_canaries()
    tok = build_tokenizer()
    token_map, cvs = mdv41.build_compressed_token_map(tok)
    cfg = make_hf_config(len(tok), cvs)
    assert cfg.layer_types == ["sliding_attention", "shared_compressed_attention", "sliding_attention",
                               "shared_compressed_attention", "sliding_attention"]
    assert cfg.rope_parameters["compress"]["rope_type"] == "yarn"
    assert cfg.rope_parameters["compress"]["attention_factor"] == 1.0
    ratio_of = lambda layer: cfg.compress_ratios[layer]
    engram_layers = list(cfg.engram_layer_ids)

    g = torch.Generator().manual_seed(PROMPT_SEED)
    prompts = [torch.randint(2, len(tok), (1, n), generator=g) for n in PROMPT_LENGTHS]

    # The two checkpoints are searched independently (each from its own accepted seed): with 300-token
    # prompts a seed passes the filter for one storage format about one time in three.
    summary = lambda i: (f"margin {i['min_margin']:.3g} router {i['min_router_selection_gap']:.3g} "
                         f"indexer {i['min_indexer_selection_gap']:.3g} cand {i['min_candidate_block_gap']:.3g} "
                         f"mism {i['monitor_mismatches']} cache {i['cache_consistent']} "
                         f"chunked {i['chunked_consistent']}")
    keys = ("min_margin", "monitor_mismatches", "min_router_selection_gap", "min_indexer_selection_gap",
            "min_candidate_block_gap", "cache_consistent", "chunked_consistent")
    rejected = {"tiny-v41": [], "tiny-v41-fp8": []}
    chosen: dict[str, tuple] = {}
    forced = [int(x) for x in args.seeds.split(",")] if args.seeds else []
    candidates = sorted(set(forced)) if forced else range(args.seed_start, args.seed_start + args.max_seeds)
    for seed in candidates:
        torch.manual_seed(seed)
        base = mdv41.DeepseekV41ForCausalLM(cfg).float().eval()
        randomize(base, seed)
        off = hf_to_official({k: v.detach().clone() for k, v in base.state_dict().items()})
        for n_, name in enumerate(("tiny-v41", "tiny-v41-fp8")):
            if name in chosen or (forced and forced[n_] != seed):
                continue
            if name == "tiny-v41":
                stored, eff = build_bf16(off, ratio_of)
                deq = None
            else:
                stored, eff, deq = build_fp8(off, ratio_of)
            gold, info = run_goldens(load_effective(cfg, eff, tok), prompts, engram_layers)
            print(f"seed {seed}: {name}: {summary(info)}", flush=True)
            if acceptable(info):
                chosen[name] = (seed, stored, gold, info, deq)
            else:
                rejected[name].append({"seed": seed, **{k: info[k] for k in keys}})
        if len(chosen) == 2:
            break
    if len(chosen) != 2:
        raise SystemExit(f"no acceptable seed found for {sorted(set(rejected) - set(chosen))}")
    seed_a, st_a, gold_a, info_a, _ = chosen["tiny-v41"]
    seed_b, st_b, gold_b, info_b, deq_b = chosen["tiny-v41-fp8"]

    # ---- models/tiny-v41: official names, released composite config, one file ----
    d_a = root / "models" / "tiny-v41"
    d_b = root / "models" / "tiny-v41-fp8"
    for d in (d_a, d_b):
        if d.exists():
            shutil.rmtree(d)
    save_st(st_a, d_a / "model.safetensors")
    off_cfg = official_config(cfg)
    write_json(off_cfg, d_a / "config.json")
    # ---- models/tiny-v41-fp8: what DeepseekV41Config.save_pretrained writes + quantization_config ----
    with tempfile.TemporaryDirectory() as td:
        cdv41.DeepseekV41Config(text_config=cfg.to_dict()).save_pretrained(td)
        hf_cfg = json.loads((Path(td) / "config.json").read_text())
    hf_cfg["architectures"] = ["DeepseekV41ForCausalLM"]
    hf_cfg["dtype"] = "bfloat16"
    hf_cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                     "weight_block_size": list(FP8_BLOCK), "activation_scheme": "dynamic",
                                     "expert_dtype": "fp4"}
    hf_cfg.pop("transformers_version", None)
    hf_cfg["text_config"].pop("transformers_version", None)
    write_json(hf_cfg, d_b / "config.json")
    shards, weight_map, total = [{}, {}], {}, 0
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    for k, v in st_b.items():
        m = re.match(r"^layers\.(\d+)\.", k)
        shards[1 if (m and int(m.group(1)) >= 3) else 0][k] = v
    for si, sh in enumerate(shards):
        save_st(sh, d_b / names[si])
        for k, v in sh.items():
            weight_map[k] = names[si]
            total += v.numel() * v.element_size()
    write_json({"metadata": {"total_size": total}, "weight_map": {k: weight_map[k] for k in sorted(weight_map)}},
               d_b / "model.safetensors.index.json")
    for d in (d_a, d_b):
        tok.save_pretrained(str(d))
        for extra in ("special_tokens_map.json", "chat_template.jinja"):
            if (d / extra).exists():
                (d / extra).unlink()
    tok_json = d_a / "tokenizer.json"
    assert sha256(tok_json) == sha256(d_b / "tokenizer.json")
    reloaded = PreTrainedTokenizerFast(tokenizer_file=str(tok_json))
    assert mdv41.build_compressed_token_map(reloaded) == (token_map, cvs), "written tokenizer maps differently"
    e_tensors, e_meta = engram_data(cfg, reloaded, tok_json)
    for d in (d_a, d_b):
        save_engram(e_tensors, e_meta, d / "engram_hash.safetensors")

    # ---- fixtures ----
    fx_a = root / "tests" / "fixtures" / "tiny-v41"
    fx_b = root / "tests" / "fixtures" / "tiny-v41-fp8"
    for d in (fx_a, fx_b):
        if d.exists():
            shutil.rmtree(d)
    save_st(gold_a, fx_a / "goldens.safetensors")
    save_st(gold_b, fx_b / "goldens.safetensors")
    save_st(deq_b, fx_b / "dequantized.safetensors")
    tok_goldens = write_tokenizer_goldens(root)  # HF's ids / text for a few texts (recorded after the manifest)

    self_check = artifact_self_check(cfg, root, prompts, reloaded)
    print("artifact self-check:", self_check, flush=True)
    flash = flash_engram(root)
    write_json({"generator": "tools/oracle/make_tiny_v41.py", "versions": versions(), "overlay": overlay,
                **flash}, root / "data/engram/deepseek-v41-flash/manifest.json")

    cmd = ("tools/oracle/generate.sh v41" + (f" --seeds {args.seeds}" if args.seeds else "")
           + ("" if args.seed_start == 0 or args.seeds else f" --seed-start {args.seed_start}")
           + "   (ORACLE_VENV=<venv with requirements.txt + the deepseek_v41 overlay>)")
    merges = {}
    for tid, cid in enumerate(token_map):
        merges.setdefault(cid, []).append(tok.convert_ids_to_tokens(tid))
    common = {
        "generator": "tools/oracle/make_tiny_v41.py",
        "regenerate_command": cmd,
        "versions": versions(),
        "overlay": overlay,
        "quantizer_monitor": "QuantizerMonitor wraps _fake_quant_fp8_block / _fake_quant_fp4_block (values unchanged)",
        "compat_shims": ["transformers.cache_utils.get_layer_types_and_kwargs: passes the config to "
                         "'shared_compressed_attention' cache layers (5.24.0 passes it only to V4's types)"],
        "canaries": canaries,
        "artifact_self_check": self_check,
        "seeds": {"weights_seed_start": args.seed_start, "prompt_seed": PROMPT_SEED,
                  "min_margin_threshold": MIN_MARGIN, "min_selection_gap_threshold": MIN_SELECT_GAP},
        "hf_config": {k: v for k, v in cfg.to_dict().items() if k not in ("_attn_implementation",
                                                                             "transformers_version")},
        "official_config": off_cfg,
        "tokenizer": {"vocab_size": len(tok), "compressed_vocab_size": cvs,
                      "merged_groups": [v for v in merges.values() if len(v) > 1]},
        "generation": {"max_new_tokens": GEN_TOKENS, "do_sample": False, "use_cache": True,
                       "cache": "DynamicCache(config) for every forward (prefill goldens too)",
                       "eos_token_id": None, "dtype": "float32", "attn_implementation": "eager"},
        "prompt_lengths": PROMPT_LENGTHS,
        "dead_token_check": {"prompt": DEAD_CHECK[0], "dead_positions": DEAD_CHECK[1]},
    }

    def finish(fx: Path, model_dir: Path, info: dict, extra: dict):
        files = sorted([p for p in model_dir.rglob("*") if p.is_file()] +
                       [p for p in fx.rglob("*") if p.is_file() and p.name != "manifest.json"])
        man = dict(common)
        man.update(extra)
        man["seeds"] = dict(man["seeds"], weights_seed=extra["weights_seed"], rejected_seeds=rejected[extra["model"]])
        man["per_prompt"] = info["prompts"]
        man["chunked_prefill"] = info["chunked_prefill"]
        man["quantizer_margins"] = info["quantizer_margins"]
        for k in ("min_margin", "min_router_selection_gap", "min_indexer_selection_gap", "min_candidate_block_gap"):
            man[k] = info[k]
        man["golden_keys"] = key_list(fx / "goldens.safetensors")
        man["files"] = {str(p.relative_to(root)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files}
        write_json(man, fx / "manifest.json")

    finish(fx_a, d_a, info_a, {"model": "tiny-v41", "model_dir": "models/tiny-v41", "weights_seed": seed_a,
                               "weights": "bf16-rounded stored values (F32 where stored F32), computed in fp32"})
    finish(fx_b, d_b, info_b, {"model": "tiny-v41-fp8", "model_dir": "models/tiny-v41-fp8", "weights_seed": seed_b,
                               "weights": "dequantized FP8/FP4 + bf16-rounded stored values, fp32",
                               "quantization": hf_cfg["quantization_config"],
                               "dequantized_keys": key_list(fx_b / "dequantized.safetensors")})
    record_tokenizer_goldens(root, tok_goldens)
    from near_ties_v41 import write_near_ties  # imports this module: here, not at the top
    write_near_ties(root)  # the reference's near-ties of the golden runs (docs/deepseek-v41-model.md)
    print(f"done: tiny-v41 seed {seed_a}, tiny-v41-fp8 seed {seed_b}")


if __name__ == "__main__":
    main()
