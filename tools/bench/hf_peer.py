#!/usr/bin/env python3
"""Hugging Face transformers as the peer of `deepinfer bench`: same checkpoint (official names, loaded with
from_pretrained), same prompt tokens, prompt length, generation length and thread count.

First checks that transformers' prefill logits agree with deepinfer's (--deepinfer-logits, written by
`deepinfer bench --logits-out`), then times prefill (one forward over the prompt, cache on) and greedy decode
(one token per forward through the returned cache): median of --repeats after a warm-up. Batch 1.
Prints one JSON object.
"""
import argparse
import inspect
import json
import statistics
import sys
import time


def prompt_token(b: int, i: int, vocab: int) -> int:
    # Must match cmd_bench.cpp's prompt_token.
    return 2 + ((i + 1000 * b) * 7919 + 13) % (vocab - 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--deepinfer-logits", help="safetensors from `deepinfer bench --logits-out`")
    ap.add_argument("--max-rel-diff", type=float, default=1e-3,
                    help="fail when max|Δ| / max|logit| exceeds this (default 1e-3)")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(a.threads)
    dtype = torch.float32 if a.dtype == "fp32" else torch.bfloat16
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype).eval()
    load_s = time.perf_counter() - t0
    vocab = model.config.vocab_size
    ids = torch.tensor([[prompt_token(0, i, vocab) for i in range(a.prompt_len)]], dtype=torch.long)
    out = {"engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
           "dtype": a.dtype, "threads": a.threads, "prompt_len": a.prompt_len, "gen": a.gen,
           "repeats": a.repeats, "load_s": round(load_s, 2)}

    with torch.no_grad():
        if a.deepinfer_logits:
            from safetensors.torch import load_file
            ref = load_file(a.deepinfer_logits)
            if not torch.equal(ref["ids"].to(torch.long), ids[0]):
                print("hf_peer: deepinfer's prompt ids differ from ours", file=sys.stderr)
                return 1
            got = model(ids, use_cache=False).logits[0].float()
            want = ref["logits"].float()
            diff = (got - want).abs()
            out["logits_max_abs_diff"] = float(diff.max())
            out["logits_max_abs"] = float(want.abs().max())
            out["logits_rel_diff"] = out["logits_max_abs_diff"] / out["logits_max_abs"]
            out["argmax_agreement"] = float((got.argmax(-1) == want.argmax(-1)).float().mean())
            # Where the rows first differ by more than the bound (a flipped router/indexer pick shows here).
            bad = (diff.amax(-1) > a.max_rel_diff * out["logits_max_abs"]).nonzero()
            out["first_bad_row"] = int(bad[0]) if len(bad) else -1
            out["logits_agree"] = out["logits_rel_diff"] <= a.max_rel_diff

        # transformers 5.x names the cache `cache` (older: `past_key_values`); pass whichever forward takes.
        cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

        def cycle(gen: int):
            t0 = time.perf_counter()
            o = model(ids, use_cache=True)
            t1 = time.perf_counter()
            nxt = o.logits[:, -1].argmax(-1, keepdim=True)
            toks = [int(nxt)]
            for _ in range(gen):
                o = model(nxt, use_cache=True, **{cache_kw: o[cache_kw]})
                nxt = o.logits[:, -1].argmax(-1, keepdim=True)
                toks.append(int(nxt))
            t2 = time.perf_counter()
            return t1 - t0, t2 - t1, toks

        _, _, toks = cycle(min(a.gen, 4))  # warm-up
        if a.deepinfer_logits and "gen_ids" in ref:
            # Greedy tokens through the cache must be deepinfer's (same model, same cache semantics).
            want_toks = ref["gen_ids"].tolist()[: len(toks)]
            out["greedy_tokens_agree"] = toks[: len(want_toks)] == want_toks
            out["logits_agree"] = out["logits_agree"] and out["greedy_tokens_agree"]
        pre, dec = [], []
        for _ in range(a.repeats):
            p, d, _ = cycle(a.gen)
            pre.append(a.prompt_len / p)
            dec.append(a.gen / d)
    out["prefill_tok_s"] = statistics.median(pre)
    out["decode_tok_s"] = statistics.median(dec)
    print(json.dumps(out))
    return 0 if out.get("logits_agree", True) else 3


if __name__ == "__main__":
    sys.exit(main())
