#!/usr/bin/env python3
"""Greedy tokens of every golden prompt of the tiny models under several numerics, against the transformers
goldens (tests/fixtures/<model>/goldens.safetensors: prompt.<i>.ids, prompt.<i>.gen_tokens): per model and
mode, how many of the golden prompts' 32 greedy tokens are identical, and where the first divergence is.
Runs `deepinfer generate --prompt-ids ... --max-tokens 32` once per prompt and mode (one process each, so
every mode loads the model the way a user would). Standard library only.

  tools/bench/golden_fast_vs_exact.py [--bin build/release/src/cli/deepinfer] [--models tiny-v4,tiny-v4-fp8]
                                      [--modes "exact;fast;fast --head-fp8 off;exact --head-fp8 on"]

A mode is the global flags it passes (docs/kernels.md, "Numerics"): e.g. `fast` = `--numerics fast` (the LM
head as FP8 blocks), `fast --head-fp8 off` = fast matmuls over the stored BF16 head.
"""
import argparse
import array
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, meta in header.items():
            if name == "__metadata__" or meta["dtype"] != "I64":
                continue
            begin, end = meta["data_offsets"]
            f.seek(base + begin)
            a = array.array("q")
            a.frombytes(f.read(end - begin))
            out[name] = list(a)
        return out


def mode_flags(mode):
    words = mode.split()
    return ["--numerics", words[0]] + words[1:]


def generate(binary, model_dir, flags, ids, n):
    cmd = [binary, "generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)),
           "--max-tokens", str(n)] + flags
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    line = r.stdout.strip().splitlines()[0]
    return [int(t) for t in line.split(",") if t.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/src/cli/deepinfer"))
    ap.add_argument("--models", default="tiny-v4,tiny-v4-fp8,tiny-v41,tiny-v41-fp8")
    ap.add_argument("--modes", default="exact;fast;fast --head-fp8 off;exact --head-fp8 on")
    args = ap.parse_args()
    print("| model | mode | prompts with all 32 tokens identical | tokens identical | first divergence "
          "(prompt: step) |")
    print("|---|---|---|---|---|")
    for model in args.models.split(","):
        g = load(os.path.join(ROOT, "tests/fixtures", model, "goldens.safetensors"))
        n_prompts = 0
        while f"prompt.{n_prompts}.ids" in g:
            n_prompts += 1
        for mode in args.modes.split(";"):
            whole = same = total = 0
            first = []
            for i in range(n_prompts):
                want = g[f"prompt.{i}.gen_tokens"]
                got = generate(args.bin, os.path.join(ROOT, "models", model), mode_flags(mode),
                               g[f"prompt.{i}.ids"], len(want))
                k = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), None)
                if k is None and len(got) != len(want):
                    k = min(len(got), len(want))
                whole += k is None
                same += sum(a == b for a, b in zip(got, want))
                total += len(want)
                if k is not None:
                    first.append(f"{i}: {k}")
            print(f"| {model} | {mode} | {whole}/{n_prompts} | {same}/{total} | {', '.join(first) or '-'} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
