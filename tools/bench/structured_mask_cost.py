#!/usr/bin/env python3
"""Cost of constrained decoding per decode step, through the server, on the tiny text model (random weights,
the real 129,280-token V4 vocabulary): `batch` concurrent chat requests of `--steps` tokens each, without a
constraint and with a JSON Schema (response_format json_schema), at batch 1 and batch 32. Time per decode
step = wall time of the batch / the longest completion's tokens (prefill of the short prompt included, the
same in both cases). Median of --repeat interleaved runs, after one warm-up run per case (the schema's
grammar compiled and its masks cached, as for a server that has seen the schema before); the first (cold)
run of the schema is printed too. Ratios are taken in the same run (docs/benchmarks.md).

    python3 tools/bench/structured_mask_cost.py [--bin build/release/src/cli/deepinfer] [--model DIR]
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "server", "py"))

import requests  # noqa: E402

import common  # noqa: E402
from common import Server  # noqa: E402

SCHEMA = os.path.join(ROOT, "tests", "structured", "data", "schemas", "017_flight_booking.json")


def run_batch(server, batch, steps, fmt, seed0):
    def one(i):
        body = {"model": server.model, "messages": [{"role": "user", "content": "Book a flight."}],
                "max_tokens": steps, "temperature": 1.0, "seed": seed0 + i}
        if fmt is not None:
            body["response_format"] = fmt
        r = requests.post(server.url("/v1/chat/completions"), json=body, timeout=600)
        r.raise_for_status()
        return r.json()["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(batch) as pool:
        tokens = list(pool.map(one, range(batch)))
    wall = time.perf_counter() - t0
    return wall / max(tokens), max(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "src", "cli", "deepinfer"))
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "tiny-v4-text"))
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="1,32")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.model, "config.json")):
        subprocess.run([args.bin, "make-synthetic", "--preset", "tiny-text", "--out", args.model], check=True,
                       stdout=subprocess.DEVNULL)
    os.environ["DEEPINFER_BIN"] = args.bin
    common.BIN = args.bin  # common reads DEEPINFER_BIN when imported, before --bin is known
    os.environ.setdefault("DEEPINFER_TOKENIZER",
                          os.path.join(ROOT, "data", "tokenizer", "deepseek-v4", "tokenizer.json"))
    with open(SCHEMA) as f:
        schema = json.load(f)
    fmt = {"type": "json_schema", "json_schema": {"name": "booking", "schema": schema, "strict": True}}
    print(f"tiny-v4-text, {args.steps} decode steps per request, median of {args.repeat}; ms per decode step")
    print("| batch | no constraint | JSON Schema (warm) | added | JSON Schema (cold, first request) |")
    print("|---|---|---|---|---|")
    with Server(model_dir=args.model) as server:
        for batch in [int(b) for b in args.batches.split(",")]:
            cold, _ = run_batch(server, batch, args.steps, fmt, 10_000 * batch)
            run_batch(server, batch, args.steps, None, 1)  # warm-up of the unconstrained path
            plain, constrained = [], []
            for rep in range(args.repeat):
                plain.append(run_batch(server, batch, args.steps, None, 100 * rep)[0])
                constrained.append(run_batch(server, batch, args.steps, fmt, 100 * rep)[0])
            p, c = statistics.median(plain), statistics.median(constrained)
            print(f"| {batch} | {p * 1e3:.2f} | {c * 1e3:.2f} | {100 * (c / p - 1):+.1f}% | {cold * 1e3:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
