#!/usr/bin/env python3
"""Analysis (writes no fixture): how close the reference's cache fake-quant inputs come to a rounding
boundary, per prompt, for the committed tiny-v41 checkpoints and golden prompts (prefill + the 31 cached
decode forwards of the golden protocol). Answers: could the oracle reject every (seed, prompt) that has an
element within a margin m of a boundary (issue 10, "seeds rejected at near-ties"), for an m that covers the
C++ engine's fp32 deviation?

Distances are measured two ways, for each element (and for each block's scale choice):
  * rel_value: |x - boundary| / |x|  (the manifest's quantizer_margins metric)
  * rel_amax:  |x - boundary| / amax(block)  (an engine error of e·amax moves the element by about that)
Scale boundaries: the ue8m0 scales flip where amax/448 (FP8) or amax/6 (FP4 indexer) crosses a power of
two; the e4m3 scales of the compressed KV where amax/6 crosses an e4m3 rounding midpoint.

    $ORACLE_VENV/bin/python tools/oracle/quant_margin_census_v41.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import safetensors.torch
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_v41 as mk  # noqa: E402
from goldens_v41 import GEN_TOKENS, fresh  # noqa: E402
from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mdv41  # noqa: E402

MARGINS = [1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 1e-4]
FP4_BOUNDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])


def pow2_rel(t: torch.Tensor) -> torch.Tensor:
    """Relative distance of t > 0 to the nearest power of two (where a ue8m0 ceil scale flips)."""
    lo = torch.exp2(torch.floor(torch.log2(t)))
    return torch.minimum(t / lo - 1, 2 * lo / t - 1).abs()


def e4m3_mid_rel(v: torch.Tensor) -> torch.Tensor:
    """Relative distance of v > 0 to the nearest e4m3 rounding midpoint (normal range; 3 mantissa bits)."""
    sp = torch.exp2(torch.floor(torch.log2(v.clamp_min(2.0 ** -6))) - 3)
    frac = v / sp - torch.floor(v / sp)
    return (frac - 0.5).abs() * sp / v


class Census:
    def __init__(self):
        self.fp8, self.fp4 = mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block
        mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block = self._fp8, self._fp4
        self.start()

    def start(self):
        self.d = {}   # kind -> list of (rel_value, rel_amax) tensors; scale kind -> rel tensors
        self.n = {}

    def _add(self, kind, rv, ra):
        self.d.setdefault(kind, []).append((rv.flatten(), ra.flatten()))
        self.n[kind] = self.n.get(kind, 0) + rv.numel()

    def _fp8(self, x, block_size=32):
        if x.shape[-1] % block_size == 0:
            b = x.float().view(*x.shape[:-1], -1, block_size)
            amax = b.abs().amax(-1).clamp_min(1e-4)
            s = mdv41._pow2_ceil_scale(amax * (1.0 / 448.0))
            q = (b / s.unsqueeze(-1)).abs().clamp(max=448.0)
            am = (amax / s).unsqueeze(-1).expand_as(q)
            keep = q > 0
            q, am = q[keep], am[keep]
            sp = torch.exp2(torch.floor(torch.log2(q.clamp_min(2.0 ** -6))) - 3)
            frac = q / sp - torch.floor(q / sp)
            dist = (frac - 0.5).abs() * sp
            self._add("window_kv_fp8", dist / q, dist / am)
            r = pow2_rel(amax * (1.0 / 448.0))
            self._add("window_kv_fp8_scale", r, r)
        return self.fp8(x, block_size)

    def _fp4(self, x, block_size, e4m3_scales=False):
        if x.shape[-1] % block_size == 0:
            kind = "compressed_kv_fp4" if e4m3_scales else "indexer_fp4"
            b = x.float().view(*x.shape[:-1], -1, block_size)
            amax = b.abs().amax(-1)
            if e4m3_scales:
                v = amax.clamp_min(6.0 * 2.0 ** -9) / 6.0
                s = v.to(torch.float8_e4m3fn).float()
                r = e4m3_mid_rel(v)
            else:
                v = amax.clamp_min(6.0 * 2.0 ** -126) * (1.0 / 6.0)
                s = mdv41._pow2_ceil_scale(v)
                r = pow2_rel(v)
            self._add(kind + "_scale", r, r)
            q = (b / s.unsqueeze(-1)).abs().clamp(max=6.0)
            am = (amax / s).unsqueeze(-1).expand_as(q)
            keep = q > 0
            q, am = q[keep], am[keep]
            dist = (q.unsqueeze(-1) - FP4_BOUNDS).abs().amin(-1)
            self._add(kind, dist / q, dist / am)
        return self.fp4(x, block_size, e4m3_scales)

    def summary(self):
        out = {}
        for kind, parts in self.d.items():
            rv = torch.cat([p[0] for p in parts])
            ra = torch.cat([p[1] for p in parts])
            out[kind] = {"elements": self.n[kind],
                         "min_rel_value": float(rv.min()), "min_rel_amax": float(ra.min()),
                         "within_rel_value": {f"{m:g}": int((rv < m).sum()) for m in MARGINS},
                         "within_rel_amax": {f"{m:g}": int((ra < m).sum()) for m in MARGINS}}
        return out


def load_models(root: Path):
    tok = mk.PreTrainedTokenizerFast(tokenizer_file=str(root / "models/tiny-v41/tokenizer.json"))
    token_map, cvs = mdv41.build_compressed_token_map(tok)
    cfg = mk.make_hf_config(len(tok), cvs)
    models = {}
    for name, d in (("tiny-v41", "models/tiny-v41"), ("tiny-v41-fp8", "models/tiny-v41-fp8")):
        stored = mk.read_st_dir(root / d)
        deq = (safetensors.torch.load_file(str(root / "tests/fixtures/tiny-v41-fp8/dequantized.safetensors"))
               if name.endswith("fp8") else {})
        eff = {k: (deq[k] if k in deq else v.to(torch.float32)) for k, v in stored.items()
               if not (k.endswith(".scale") and k[: -len(".scale")] + ".weight" in deq)}
        models[name] = mk.load_effective(cfg, eff, tok)
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    root = Path(args.root)
    torch.set_num_threads(1)
    census = Census()
    report = {}
    for name, model in load_models(root).items():
        gold = safetensors.torch.load_file(str(root / f"tests/fixtures/{name}/goldens.safetensors"))
        rows = []
        i = 0
        with torch.no_grad():
            while f"prompt.{i}.ids" in gold:
                ids = gold[f"prompt.{i}.ids"][None]
                census.start()
                cache = fresh(model)
                lg = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0, -1]
                assert torch.allclose(lg, gold[f"prompt.{i}.step_logits"][0], atol=1e-4, rtol=0)
                toks = gold[f"prompt.{i}.gen_tokens"]
                for t in range(GEN_TOKENS - 1):   # the golden protocol: 31 cached decode forwards
                    model(input_ids=toks[t].view(1, 1), past_key_values=cache, use_cache=True)
                s = census.summary()
                rows.append({"prompt": i, "length": ids.shape[1], **s})
                print(name, i, ids.shape[1], {k: (v["elements"], v["within_rel_amax"], v["within_rel_value"])
                                              for k, v in s.items()}, flush=True)
                i += 1
        report[name] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
