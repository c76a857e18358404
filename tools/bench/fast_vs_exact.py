#!/usr/bin/env python3
"""Compares two `deepinfer bench --logits-out` files (e.g. DEEPINFER_NUMERICS=exact vs fast on the same model
and prompt): max |delta logit| against max |logit|, per-position argmax agreement, and the greedy tokens.
Standard library only (no numpy): safetensors is an 8-byte header length, a JSON header, raw data.

  tools/bench/fast_vs_exact.py exact.safetensors fast.safetensors
"""
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            begin, end = meta["data_offsets"]
            f.seek(base + begin)
            code = {"F32": "f", "I64": "q"}.get(meta["dtype"])
            if code is None:
                sys.exit(f"{path}: tensor {name}: dtype {meta['dtype']} not handled")
            a = array.array(code)
            a.frombytes(f.read(end - begin))
            out[name] = (meta["shape"], a)
        return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    for key in ("logits", "ids", "gen_ids"):
        if key not in a or key not in b:
            sys.exit(f"tensor {key} missing from one of the files")
    if list(a["ids"][1]) != list(b["ids"][1]):
        sys.exit("the two files are for different prompts (ids differ)")
    (p, v), la = a["logits"]
    _, lb = b["logits"]
    max_d = max_abs = 0.0
    agree = 0
    for i in range(p):
        ra, rb = la[i * v:(i + 1) * v], lb[i * v:(i + 1) * v]
        max_d = max(max_d, max(abs(x - y) for x, y in zip(ra, rb)))
        max_abs = max(max_abs, max(abs(x) for x in ra))
        agree += max(range(v), key=ra.__getitem__) == max(range(v), key=rb.__getitem__)
    ga, gb = list(a["gen_ids"][1]), list(b["gen_ids"][1])
    same = sum(x == y for x, y in zip(ga, gb))
    print(f"positions {p}, vocab {v}: max |dlogit| {max_d:.4g} (max |logit| {max_abs:.4g}), "
          f"argmax agreement {agree}/{p}, greedy tokens identical {same}/{len(ga)}")


if __name__ == "__main__":
    main()
