"""The V4.1 golden protocol: prompts, generation length and the near-tie thresholds a seed must clear,
the fake-quantizer boundary monitor, and the hooks that record goldens from transformers' `deepseek_v41`
(hidden streams, router / indexer / candidate picks, Engram hash ids) while checking selection gaps.
Used by make_tiny_v41.py; nothing here writes files."""

from __future__ import annotations

import math

import torch
from transformers import cache_utils
from transformers.models.deepseek_v41 import modeling_deepseek_v41 as mdv41

PROMPT_LENGTHS = [1, 2, 3, 5, 8, 9, 17, 64, 300]
GEN_TOKENS = 32
PROMPT_SEED = 4141
# Thresholds are 10-30x the fp32 noise measured between the cache path's own variants (logits ~1e-5,
# selection scores ~1e-6); V4's 1e-3 / 1e-4 reject nearly every seed at 300 tokens x 5 selections/layer.
MIN_MARGIN = 3e-4        # greedy top1 - top2 logit margin, every generated step
MIN_SELECT_GAP = 1e-5    # k-th vs (k+1)-th selection score: router, indexer top-k, candidate blocks
HIDDEN_MAX_LEN = 64      # hidden.{l} goldens only for prompts up to this length (fixture size)
CHUNKED_CHECK = [(7, 64), (7, 300), (3, 17)]   # (chunk size, prompt length): HF's own chunked prefill check
DEAD_CHECK = (7, [10, 11, 12])                 # prompt index, positions hashed as DEAD (padding)


class QuantizerMonitor:
    """Wraps the reference's fake-quantizers (module globals, looked up at call time) to record how close
    any quantizer input came to a rounding boundary, relative to its value. A C++ engine whose fp32 error
    (relative) stays below these margins rounds every element the same way. Values are unchanged."""

    def __init__(self):
        self.fp8, self.fp4 = mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block
        self.reset()
        mdv41._fake_quant_fp8_block, mdv41._fake_quant_fp4_block = self._fp8, self._fp4

    def reset(self):
        self.min = {"window_kv_fp8": math.inf, "compressed_kv_fp4": math.inf, "indexer_fp4": math.inf}
        self.below_1e6 = {k: 0 for k in self.min}

    def _note(self, kind, dist):
        if dist.numel():
            self.min[kind] = min(self.min[kind], float(dist.min()))
            self.below_1e6[kind] += int((dist < 1e-6).sum())

    def _fp8(self, x, block_size=32):
        if x.shape[-1] % block_size == 0:
            b = x.float().view(*x.shape[:-1], -1, block_size)
            s = mdv41._pow2_ceil_scale(b.abs().amax(-1).clamp_min(1e-4) * (1.0 / 448.0))
            q = (b / s.unsqueeze(-1)).abs().clamp(max=448.0)
            q = q[q > 0]
            sp = torch.exp2(torch.floor(torch.log2(q.clamp_min(2.0 ** -6))) - 3)   # e4m3 spacing
            frac = q / sp - torch.floor(q / sp)
            self._note("window_kv_fp8", (frac - 0.5).abs() * sp / q)
        return self.fp8(x, block_size)

    def _fp4(self, x, block_size, e4m3_scales=False):
        if x.shape[-1] % block_size == 0:
            b = x.float().view(*x.shape[:-1], -1, block_size)
            amax = b.abs().amax(-1)
            if e4m3_scales:
                s = (amax.clamp_min(6.0 * 2.0 ** -9) / 6.0).to(torch.float8_e4m3fn).float()
            else:
                s = mdv41._pow2_ceil_scale(amax.clamp_min(6.0 * 2.0 ** -126) * (1.0 / 6.0))
            q = (b / s.unsqueeze(-1)).abs().clamp(max=6.0)
            q = q[q > 0]
            t = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
            self._note("compressed_kv_fp4" if e4m3_scales else "indexer_fp4",
                       (q.unsqueeze(-1) - t).abs().amin(-1) / q)
        return self.fp4(x, block_size, e4m3_scales)

    def report(self):
        return {"min_relative_distance_to_rounding_boundary": dict(self.min),
                "elements_within_1e-6_relative": dict(self.below_1e6)}


QMON = QuantizerMonitor()


# ----------------------------------------------------------------------------------------------
# Hooks: goldens + selection-gap monitors
# ----------------------------------------------------------------------------------------------
def picks_from_bias(bias: torch.Tensor, k: int) -> torch.Tensor:
    """[1, 1, S, T] 0/-inf -> [S, k] ascending entry ids, -1 padded."""
    sel = bias[0, 0] == 0
    out = torch.full((sel.shape[0], k), -1, dtype=torch.int64)
    for s in range(sel.shape[0]):
        ids = torch.nonzero(sel[s]).flatten()
        assert ids.numel() <= k
        out[s, : ids.numel()] = ids
    return out


def blocks_from_mask(mask: torch.Tensor, bs: int, k: int) -> torch.Tensor:
    """[1, S, T] bool -> [S, k] ascending block ids, -1 padded."""
    out = torch.full((mask.shape[1], k), -1, dtype=torch.int64)
    for s in range(mask.shape[1]):
        b = torch.unique(torch.nonzero(mask[0, s]).flatten() // bs)
        assert b.numel() <= k
        out[s, : b.numel()] = b
    return out


class Recorder:
    def __init__(self, model):
        self.on = False
        self.data: dict[str, torch.Tensor] = {}
        self.hash_rows: list[torch.Tensor] = []   # hash ids of every forward, [S, nE, cols] each
        self.min_router_gap = math.inf
        self.min_indexer_gap = math.inf
        self.min_candidate_gap = math.inf
        self.monitor_mismatches = 0   # recomputed selections that differ from the module's (ties)
        self.near_ties = []           # (layer, S, T, top k+1 scores) of rows failing the gap filter
        self.handles = []
        self._idx_in = {}
        inner = model.model
        self.handles.append(inner.layers[0].register_forward_pre_hook(self._hash))
        for l, layer in enumerate(inner.layers):
            self.handles.append(layer.register_forward_hook(self._hidden(l)))
            self.handles.append(layer.ffn.gate.register_forward_hook(self._router(l)))
            if layer.attn.indexer is not None:
                self.handles.append(layer.attn.indexer.register_forward_pre_hook(self._indexer_pre(l)))
                self.handles.append(layer.attn.indexer.register_forward_hook(self._indexer(l)))
        self.handles.append(inner.norm.register_forward_hook(self._final))

    def remove(self):
        for h in self.handles:
            h.remove()

    def _hash(self, mod, args):
        hash_ids = args[2]
        self.hash_rows.append(hash_ids[0].detach().clone())

    def _hidden(self, l):
        def hook(mod, args, out):
            if self.on:
                self.data[f"hidden.{l}"] = out[0][0].detach().float().clone()        # [L, hc, D]
        return hook

    def _router(self, l):
        def hook(mod, args, out):
            weights, indices = out
            x = args[0].reshape(-1, args[0].shape[-1]).float()
            sel = mod.score_fn(torch.nn.functional.linear(x, mod.weight.float()) / mod.gate_temp) + mod.bias
            top = sel.topk(mod.top_k + 1, dim=-1).values
            self.min_router_gap = min(self.min_router_gap, float((top[:, -2] - top[:, -1]).min()))
            if self.on:
                self.data[f"router.{l}"] = indices.detach().to(torch.int64).clone()       # [L, K]
                self.data[f"router_weights.{l}"] = weights.detach().float().clone()      # [L, K]
        return hook

    def _indexer_pre(self, l):
        def hook(mod, args):
            shared = args[6]
            self._idx_in[l] = (args, shared.get("candidates"))
        return hook

    def _indexer(self, l):
        def hook(mod, args, out):
            (hs, q_res, _latent, _fgp, pos, _cache, shared), cand_in = self._idx_in.pop(l)
            index_k = shared.get("index_k")
            if index_k is None or index_k.shape[2] == 0:
                return
            # Recompute the masked scores with the module's own weights and helpers (a monitor only; its
            # picks are checked equal to what the module published).
            T = index_k.shape[2]
            B, S, _ = hs.shape
            cos, sin = mod.rotary_emb(hs, position_ids=pos, layer_type="compress")
            q = mod.wq_b(q_res).view(B, S, mod.num_heads, mod.head_dim)
            q = mdv41._fake_quant_fp4_block(mdv41.apply_rotary_pos_emb(q, cos, sin), block_size=32)
            sc = torch.einsum("bshd,btd->bsht", q.float(), index_k[:, 0].float()).relu() * mod.softmax_scale
            w = mod.weights_proj(hs).float() * mod.heads_scaling
            score = (sc * w.unsqueeze(-1)).sum(dim=2)                                   # [B, S, T]
            lens = (pos.long().unsqueeze(-1) + 1) // mod.compress_ratio
            score = score.masked_fill(torch.arange(T).view(1, 1, -1) >= lens, float("-inf"))
            if mod.is_candidate_source:
                nb = -(-T // mod.candidate_block_size)
                blk = torch.nn.functional.pad(score, (0, -T % mod.candidate_block_size), value=float("-inf"))
                blk = blk.unflatten(-1, (-1, mod.candidate_block_size)).amax(-1)
                blk = blk.masked_fill(torch.arange(nb).view(-1) == (lens - 1) // mod.candidate_block_size,
                                      torch.inf)
                kb = mod.candidate_topk_blocks
                finite = (blk > float("-inf")).sum(-1)
                rows = finite > kb
                if rows.any():
                    top = blk.topk(kb + 1, dim=-1).values[rows]
                    self.min_candidate_gap = min(self.min_candidate_gap, float((top[:, kb - 1] - top[:, kb]).min()))
                if not torch.equal(shared["candidates"], mdv41.select_candidate_blocks(
                        score, lens, kb, mod.candidate_block_size)):
                    self.monitor_mismatches += 1
            elif mod.uses_candidates and cand_in is not None:
                score = score.masked_fill(~cand_in, float("-inf"))
            k = min(mod.index_topk, T)
            valid = (score > float("-inf")).sum(-1)
            rows = valid > k
            if rows.any():
                top = score.topk(k + 1, dim=-1).values[rows]
                gap = top[:, k - 1] - top[:, k]
                self.min_indexer_gap = min(self.min_indexer_gap, float(gap.min()))
                if float(gap.min()) < MIN_SELECT_GAP and len(self.near_ties) < 8:
                    self.near_ties.append((l, S, T, top[int(gap.argmin())].tolist()))
            picks = picks_from_bias(shared["topk_bias"], k)
            mine = score.topk(k, dim=-1)
            for s in range(S):
                want = set(mine.indices[0, s][mine.values[0, s] > float("-inf")].tolist())
                got = set(x for x in picks[s].tolist() if x >= 0)
                self.monitor_mismatches += int(want != got)
            if self.on:
                self.data[f"index_topk.{l}"] = picks                                       # [L, k]
                if mod.is_candidate_source:
                    kb = min(mod.candidate_topk_blocks, -(-T // mod.candidate_block_size))
                    self.data[f"candidate_blocks.{l}"] = blocks_from_mask(
                        shared["candidates"], mod.candidate_block_size, kb)               # [L, kb]
        return hook

    def _final(self, mod, args, out):
        if self.on:
            self.data["final_hidden"] = out[0].detach().float().clone()                    # [L, D]


def fresh(model):
    """A new sequence: empty DynamicCache and no n-gram history (it lives on the model, not the cache)."""
    model.model.engram_hash_state.history = None
    return cache_utils.DynamicCache(config=model.config)


def run_goldens(model, prompts, engram_layers) -> tuple[dict[str, torch.Tensor], dict]:
    rec = Recorder(model)
    QMON.reset()
    out: dict[str, torch.Tensor] = {}
    info = {"prompts": [], "chunked_prefill": []}
    V = model.config.vocab_size
    with torch.no_grad():
        for i, ids in enumerate(prompts):
            L = ids.shape[1]
            # greedy decode through the cache path: prefill (also the prefill golden and step 0), then one
            # token per forward. (generate() of transformers 5.24.0 passes the cache as `cache=`, which the
            # overlay's forward does not take: every step would start a new cache. See README.)
            rec.on, rec.data, rec.hash_rows = True, {}, []
            cache = fresh(model)
            full = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[0].float()  # [L, V]
            rec.on = False
            assert torch.allclose(rec.data["final_hidden"] @ model.lm_head.weight.T, full, atol=1e-5, rtol=0)
            rows = [full[-1]]
            for _ in range(GEN_TOKENS - 1):
                nxt = rows[-1].argmax().view(1, 1)
                rows.append(model(input_ids=nxt, past_key_values=cache, use_cache=True).logits[0, -1].float())
            prefill_hash = rec.hash_rows[0]
            decode_hash = torch.cat(rec.hash_rows[1:]) if len(rec.hash_rows) > 1 else None
            step = torch.stack(rows)                                                         # [T, V]
            toks = step.argmax(-1)
            sequence = torch.cat([ids[0], toks])[None]
            # consistency: one cached forward over prompt + generated gives the same argmax at every step
            rec.hash_rows = []
            chk = model(input_ids=sequence, past_key_values=fresh(model), use_cache=True).logits[0].float()
            seq_hash = rec.hash_rows[0]                                                     # [L+T, nE, cols]
            assert torch.equal(seq_hash[:L], prefill_hash), "prefill hash ids != full-sequence hash ids"
            if decode_hash is not None:
                assert torch.equal(seq_hash[L: L + decode_hash.shape[0]], decode_hash), "decode hash ids differ"
            chk_steps = chk[L - 1: L - 1 + GEN_TOKENS]
            cache_ok = torch.equal(chk_steps.argmax(-1), toks)
            top2 = step.topk(2, dim=-1).values
            margins = (top2[:, 0] - top2[:, 1]).tolist()
            pfx = f"prompt.{i}."
            out[pfx + "ids"] = ids[0].to(torch.int64).clone()
            out[pfx + "prefill_logits"] = full.contiguous()
            out[pfx + "gen_tokens"] = toks.to(torch.int64)
            out[pfx + "step_logits"] = step.contiguous()
            for e, layer in enumerate(engram_layers):
                out[pfx + f"engram_hash.{layer}"] = seq_hash[:, e].to(torch.int64).contiguous()  # [L+T, cols]
            for k, v in rec.data.items():
                if k.startswith("hidden.") and L > HIDDEN_MAX_LEN:
                    continue   # fixture size: 1.5 MB per checkpoint for the 300-token prompt alone
                out[pfx + k] = v.contiguous()
            info["prompts"].append({
                "index": i, "length": L, "margins": margins, "min_margin": min(margins),
                "cache_consistent_argmax": cache_ok,
                "max_abs_diff_step_vs_one_forward": float((chk_steps - step).abs().max()),
            })
        # transformers' own chunked prefill (the cache path) against its one-shot prefill
        for chunk, length in CHUNKED_CHECK:
            ids = prompts[PROMPT_LENGTHS.index(length)]
            ref = out[f"prompt.{PROMPT_LENGTHS.index(length)}.prefill_logits"]
            cache = fresh(model)
            parts = [model(input_ids=ids[:, s: s + chunk], past_key_values=cache, use_cache=True).logits[0]
                     for s in range(0, length, chunk)]
            got = torch.cat(parts).float()
            info["chunked_prefill"].append({"chunk": chunk, "length": length,
                                            "max_abs_diff": float((got - ref).abs().max()),
                                            "argmax_equal": bool(torch.equal(got.argmax(-1), ref.argmax(-1)))})
        # pad / dead tokens: hash ids with a token mask (attention_mask == 0 -> DEAD), straight from the
        # reference's hash state
        pi, dead = DEAD_CHECK
        ids = prompts[pi]
        mask = torch.ones_like(ids, dtype=torch.bool)
        mask[0, dead] = False
        fresh(model)
        hs = model.model.engram_hash_state(ids, torch.arange(ids.shape[1])[None], mask)[0]
        for e, layer in enumerate(engram_layers):
            out[f"prompt.{pi}.engram_hash_dead.{layer}"] = hs[:, e].to(torch.int64).contiguous()
        out[f"prompt.{pi}.engram_dead_mask"] = (~mask[0]).to(torch.uint8)
    rec.remove()
    info["min_margin"] = min(p["min_margin"] for p in info["prompts"])
    info["min_router_selection_gap"] = rec.min_router_gap
    info["min_indexer_selection_gap"] = rec.min_indexer_gap
    info["min_candidate_block_gap"] = rec.min_candidate_gap
    info["monitor_mismatches"] = rec.monitor_mismatches
    info["cache_consistent"] = all(p["cache_consistent_argmax"] for p in info["prompts"])
    info["chunked_consistent"] = all(c["argmax_equal"] for c in info["chunked_prefill"])
    info["quantizer_margins"] = QMON.report()
    return out, info


def acceptable(info) -> bool:
    return (info["min_margin"] >= MIN_MARGIN and info["cache_consistent"] and info["monitor_mismatches"] == 0 and info["chunked_consistent"]
            and info["min_router_selection_gap"] >= MIN_SELECT_GAP
            and info["min_indexer_selection_gap"] >= MIN_SELECT_GAP
            and info["min_candidate_block_gap"] >= MIN_SELECT_GAP)
