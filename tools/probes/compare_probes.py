#!/usr/bin/env python3
"""Compare a `deepinfer generate --dump-probes FILE` dump with the transformers goldens of one prompt and
print the first stage that diverges (layer order: indexer top-k, router, hidden streams; then final hidden).

  deepinfer generate --model models/tiny-v4 --prompt-ids <prompt.7.ids> --max-tokens 1 --dump-probes /tmp/p.st
  python3 tools/probes/compare_probes.py /tmp/p.st tests/fixtures/tiny-v4/goldens.safetensors 7

Only the prompt rows (the prefill) are compared; metric max|Δ| / max|ref| with tolerance 1e-4.
"""
import sys

import torch
from safetensors.torch import load_file


def main() -> int:
    probes, goldens, i = load_file(sys.argv[1]), load_file(sys.argv[2]), int(sys.argv[3])
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
    pfx = f"prompt.{i}."
    L = goldens[pfx + "ids"].numel()
    if not torch.equal(probes["ids"][:L], goldens[pfx + "ids"]):
        print("ids differ: the dump is not of this prompt")
        return 2
    layers = sorted(int(k.split(".")[1]) for k in probes if k.startswith("hidden."))
    for l in layers:
        key = f"indexer_topk.{l}"
        if key in probes and pfx + key in goldens:
            got, ref = probes[key][:L], goldens[pfx + key]
            for t in range(L):
                a = {int(x) for x in got[t] if x >= 0}
                b = {int(x) for x in ref[t] if x >= 0}
                if a != b:
                    print(f"first divergence: layer {l} indexer top-k, token {t}: got {sorted(a)} ref {sorted(b)}")
                    return 1
        got, ref = probes[f"router.{l}"][:L].sort(-1).values, goldens[pfx + f"router.{l}"].sort(-1).values
        if not torch.equal(got, ref):
            t = int((got != ref).any(-1).nonzero()[0])
            print(f"first divergence: layer {l} router, token {t}: got {got[t].tolist()} ref {ref[t].tolist()}")
            return 1
        got, ref = probes[f"hidden.{l}"][:L], goldens[pfx + f"hidden.{l}"]
        err = float((got - ref).abs().max() / ref.abs().max())
        if err > tol:
            t = int((got - ref).abs().flatten(1).max(-1).values.argmax())
            print(f"first divergence: layer {l} hidden streams, rel err {err:.3g} (worst token {t})")
            return 1
        print(f"layer {l}: ok (hidden rel err {err:.3g})")
    got, ref = probes["final_hidden"][:L], goldens[pfx + "final_hidden"]
    err = float((got - ref).abs().max() / ref.abs().max())
    print(f"final hidden: rel err {err:.3g}" + (" DIVERGES" if err > tol else " ok"))
    return 1 if err > tol else 0


if __name__ == "__main__":
    sys.exit(main())
