#!/usr/bin/env python3
"""Near-tie fixture for the V4.1 cache fake-quantization: for every golden prompt of both tiny-v41
checkpoints, run exactly as the goldens were made (one-shot prefill, then the 31 cached decode forwards of
the golden tokens) and record every fake-quant decision of the reference that lies within MARGIN of a
rounding boundary, with the reference's own choice. The C++ test (tests/model/v41_near_ties_test.cpp)
takes the reference's choice at those elements only, and fails when its own run has a near-boundary element
the list lacks or a listed element that is not near the same boundary (docs/deepseek-v41-model.md, "The
1e-4 logit point").

Distance metric (the census's, tools/oracle/quant_margin_census_v41.py): |q - boundary| / amax_q, where q is
the element divided by its block scale and amax_q the block's amax divided by the scale (an fp32 error
of e * amax at the quantizer input moves q by about e * amax_q). Scale choices (ue8m0 power-of-two ceil,
e4m3 scales of the compressed KV) are listed too, at |t - boundary| / t (t = amax / grid max).

Output, per checkpoint, tests/fixtures/<name>/near_ties.safetensors:
  prompt.<i>.tie_keys   int64 [K, 4]: layer, kind, row, element
      kind 0 window KV (FP8, block 32; row = position), 1 indexer keys (FP4 ue8m0, block 32; row = compressed
      entry), 2 compressed KV (FP4 e4m3 scales, block 16; row = entry), 3 indexer queries (FP4 ue8m0, block
      32; row = position, element = head * index_head_dim + channel); element -1 - b: the scale of block b
  prompt.<i>.tie_values float32 [K, 3]: boundary (|q| space; for a scale the t boundary), the reference's
      choice (signed grid value of q; for a scale the scale), the reference's distance (relative, as above)
and a "near_ties" entry in the checkpoint's manifest.json (file sha256, margin, per-prompt counts,
versions). The goldens are not touched: the script checks that its run reproduces them bit for bit.

    $ORACLE_VENV/bin/python tools/oracle/near_ties_v41.py   # make_tiny_v41.py also runs it, last
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
from pathlib import Path

import safetensors
import safetensors.torch
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from goldens_v41 import GEN_TOKENS, fresh  # noqa: E402
from quant_margin_census_v41 import load_models  # noqa: E402
from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mdv41  # noqa: E402

MARGIN = 1e-4
FP4_BOUNDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
WINDOW, INDEX_K, COMP, INDEX_Q = 0, 1, 2, 3
ORIG_FP8, ORIG_FP4 = mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block


def e4m3_boundary(a: torch.Tensor, r: torch.Tensor, top: float):
    """Nearest e4m3 rounding boundary of magnitudes a (fp32) that round to grid magnitudes r; `top`: the
    clamp (no boundary above it). Returns (boundary, distance)."""
    sp_up = torch.exp2(torch.floor(torch.log2(r.clamp_min(2.0 ** -6))) - 3)
    pow2 = (r > 2.0 ** -6) & (torch.exp2(torch.floor(torch.log2(r.clamp_min(2.0 ** -6)))) == r)
    sp_dn = torch.where(pow2, sp_up / 2, sp_up)
    hi = torch.where(r >= top, torch.full_like(r, float("inf")), r + sp_up / 2)
    lo = torch.where(r == 0, torch.full_like(r, -float("inf")), r - sp_dn / 2)
    use_hi = (hi - a) <= (a - lo)
    b = torch.where(use_hi, hi, lo)
    return b, (a - b).abs()


def pow2_boundary(t: torch.Tensor):
    lo = torch.exp2(torch.floor(torch.log2(t)))
    b = torch.where(t / lo - 1 <= 2 - t / lo, lo, 2 * lo)
    return b, (t - b).abs() / t


class Recorder:
    def __init__(self, model):
        self.fp8, self.fp4 = ORIG_FP8, ORIG_FP4
        mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block = self._fp8, self._fp4
        self.layer, self.pos = -1, None
        for m in model.modules():
            if isinstance(m, mdv41.DeepseekV41Attention):
                m.register_forward_pre_hook(self._pre, with_kwargs=True)
        self.start()

    def _pre(self, module, args, kwargs):
        self.layer = module.layer_idx
        self.pos = kwargs["position_ids"][0].to(torch.int64)

    def start(self):
        self.keys, self.vals, self.entries = [], [], {}

    def _emit(self, kind, rows, elem, bnd, val, dist):
        self.keys.append(torch.stack([torch.full_like(rows, self.layer), torch.full_like(rows, kind), rows,
                                      elem], -1))
        self.vals.append(torch.stack([bnd.float(), val.float(), dist.float()], -1))

    def _record(self, kind, row_ids, blocks, amax, scale, values, scale_b, scale_d):
        """blocks [R, nb, bs] inputs, amax/scale [R, nb], values [R, nb, bs] the reference's signed grid
        values of q; scale_b/scale_d: the scale boundary and distance [R, nb]."""
        R, nb, bs = blocks.shape
        q = (blocks / scale.unsqueeze(-1))
        a = q.abs()
        amax_q = (amax / scale).unsqueeze(-1).expand_as(q)
        r = values.abs()
        if kind == WINDOW:
            a = a.clamp(max=448.0)
            bnd, dist = e4m3_boundary(a, r, 448.0)
        else:
            a = a.clamp(max=6.0)
            d = (a.unsqueeze(-1) - FP4_BOUNDS).abs()
            dist, j = d.min(-1)
            bnd = FP4_BOUNDS[j]
        rel = dist / amax_q
        hit = (rel < MARGIN).nonzero()
        if len(hit):
            rr, bb, ee = hit.unbind(-1)
            self._emit(kind, row_ids[rr], bb * bs + ee, bnd[rr, bb, ee], values[rr, bb, ee], rel[rr, bb, ee])
        hit = (scale_d < MARGIN).nonzero()
        if len(hit):
            rr, bb = hit.unbind(-1)
            self._emit(kind, row_ids[rr], -1 - bb, scale_b[rr, bb], scale[rr, bb], scale_d[rr, bb])

    def _rows(self, kind, count):
        """Row ids: positions for window KV and indexer queries, running entry numbers for the keys."""
        if kind in (WINDOW, INDEX_Q):
            assert count == self.pos.numel()
            return self.pos
        k = (self.layer, kind)
        first = self.entries.get(k, 0)
        self.entries[k] = first + count
        return torch.arange(first, first + count, dtype=torch.int64)

    def _fp8(self, x, block_size=32):
        out = self.fp8(x, block_size)
        n = x.shape[-1]
        assert n % block_size == 0 and x.shape[0] == 1 and x.dim() == 4   # [B, 1, S, d]
        blocks = x.float().reshape(-1, n // block_size, block_size)
        amax = blocks.abs().amax(-1).clamp_min(1e-4)
        t = amax * (1.0 / 448.0)
        scale = mdv41._pow2_ceil_scale(t)
        values = (blocks / scale.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()
        assert torch.equal((values * scale.unsqueeze(-1)).view_as(out), out.float())
        sb, sd = pow2_boundary(t)
        self._record(WINDOW, self._rows(WINDOW, blocks.shape[0]), blocks, amax, scale, values, sb, sd)
        return out

    def _fp4(self, x, block_size, e4m3_scales=False):
        out = self.fp4(x, block_size, e4m3_scales)
        n = x.shape[-1]
        assert n % block_size == 0 and x.shape[0] == 1
        if e4m3_scales:
            kind = COMP
        else:
            kind = INDEX_Q if x.dim() == 4 else INDEX_K   # q [B, S, H, dI], k [B, G, dI]
        rows = x.shape[1]
        width = n * (x.shape[2] if kind == INDEX_Q else 1)
        blocks = x.float().reshape(rows, width // block_size, block_size)
        amax = blocks.abs().amax(-1)
        if e4m3_scales:
            t = amax.clamp_min(6.0 * 2.0 ** -9) / 6.0
            scale = t.to(torch.float8_e4m3fn).float()
            sb, sdist = e4m3_boundary(t, scale, 448.0)
            sd = sdist / t
        else:
            t = amax.clamp_min(6.0 * 2.0 ** -126) * (1.0 / 6.0)
            scale = mdv41._pow2_ceil_scale(t)
            sb, sd = pow2_boundary(t)
        q = (blocks / scale.unsqueeze(-1)).clamp(-6.0, 6.0)
        values = mdv41._fp4_lut(q.device)[mdv41._e2m1_codes(q).long()]
        assert torch.equal((values * scale.unsqueeze(-1)).reshape(out.shape), out.float())
        self._record(kind, self._rows(kind, rows), blocks, amax, scale, values, sb, sd)
        return out

    def result(self):
        if not self.keys:
            return torch.zeros(0, 4, dtype=torch.int64), torch.zeros(0, 3)
        return torch.cat(self.keys).contiguous(), torch.cat(self.vals).contiguous()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_near_ties(root: Path) -> None:
    """Writes both checkpoints' near_ties.safetensors and manifest entries (make_tiny_v41.py calls this last,
    so a full regeneration gives the committed files)."""
    for name, model in load_models(root).items():
        rec = Recorder(model)
        gpath = root / f"tests/fixtures/{name}/goldens.safetensors"
        gold_sha = sha256(gpath)
        gold = safetensors.torch.load_file(str(gpath))
        out, counts, kinds = {}, [], []
        i = 0
        with torch.no_grad():
            while f"prompt.{i}.ids" in gold:
                ids = gold[f"prompt.{i}.ids"][None]
                rec.start()
                cache = fresh(model)
                rows = [model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0, -1].float()]
                toks = gold[f"prompt.{i}.gen_tokens"]
                for t in range(GEN_TOKENS - 1):
                    assert int(rows[-1].argmax()) == int(toks[t])
                    rows.append(model(input_ids=toks[t].view(1, 1), past_key_values=cache,
                                      use_cache=True).logits[0, -1].float())
                same = torch.equal(torch.stack(rows), gold[f"prompt.{i}.step_logits"])
                assert same, f"{name} prompt {i}: the run does not reproduce the golden step logits bit for bit"
                keys, vals = rec.result()
                out[f"prompt.{i}.tie_keys"] = keys
                out[f"prompt.{i}.tie_values"] = vals
                counts.append(int(keys.shape[0]))
                kinds.append({k: int((keys[:, 1] == v).sum()) for k, v in
                              (("window_kv", 0), ("indexer_k", 1), ("compressed_kv", 2), ("indexer_q", 3))}
                             | {"scales": int((keys[:, 3] < 0).sum())})
                print(name, i, ids.shape[1], counts[-1], kinds[-1], flush=True)
                i += 1
        path = root / f"tests/fixtures/{name}/near_ties.safetensors"
        safetensors.torch.save_file(out, str(path), metadata={"margin": f"{MARGIN:g}"})
        assert sha256(gpath) == gold_sha
        man_path = root / f"tests/fixtures/{name}/manifest.json"
        man = json.loads(man_path.read_text())
        files = dict(man.get("files", {}))
        files[str(path.relative_to(root))] = {"bytes": path.stat().st_size, "sha256": sha256(path)}
        man["files"] = dict(sorted(files.items()))
        man.pop("near_ties", None)
        man["near_ties"] = {
            "file": str(path.relative_to(root)), "margin": MARGIN,
            "metric": "|q - boundary| / amax_q per element; |t - boundary| / t per block scale",
            "protocol": "one-shot prefill + 31 cached decode forwards of the golden tokens (step logits "
                        "reproduced bit for bit)",
            "goldens_sha256": gold_sha, "per_prompt": counts, "per_prompt_kinds": kinds,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "safetensors": safetensors.__version__},
            "command": "$ORACLE_VENV/bin/python tools/oracle/near_ties_v41.py"}
        man_path.write_text(json.dumps(man, indent=2, sort_keys=False, ensure_ascii=False) + "\n")
        print(path, sum(counts))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    write_near_ties(Path(ap.parse_args().root))


if __name__ == "__main__":
    main()
