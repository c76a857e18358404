#!/usr/bin/env python3
"""Cost of constrained decoding per decode step, through the server, on the tiny text model (random weights,
the real 129,280-token V4 vocabulary): `batch` concurrent chat requests of `--steps` tokens each, without a
constraint and with a JSON Schema, at batch 1 and batch 32. The schema is sent two ways:
  - `guided_json` (vLLM's field): the prompt is the same as the unconstrained one, so the difference is the
    constraint's own cost (masks, the masking pass, the sampler over a masked row);
  - `response_format` json_schema: DeepSeek's chat template also writes the schema into the prompt (~300
    more prompt tokens for 017_flight_booking), so the difference adds a longer prefill and a longer context
    for every step to the constraint's cost.
Time per decode step = wall time of the batch / the longest completion's tokens (prefill of the prompt
included); server CPU time per generated token from /proc (less sensitive to other processes' load than
wall time). Medians of --repeat interleaved runs, after one warm-up run per case (the schema's grammar
compiled and its masks cached, as for a server that has seen the schema before). With several --bin, the
binaries' servers run side by side and every repeat visits each binary in turn (a before/after in one run).
Ratios are taken in the same run (docs/benchmarks.md).

    python3 tools/bench/structured_mask_cost.py [--bin build/release/src/cli/deepinfer [--bin OTHER]] [--model DIR]
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


def server_cpu_s(pid):
    """CPU time of the server's threads, in ns resolution (schedstat: time on a CPU)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:  # the thread ended meanwhile
            pass
    return total * 1e-9


def run_batch(server, batch, steps, extra, seed0):
    """(wall s per step, server CPU s per generated token, prompt tokens, mean completion tokens)"""
    def one(i):
        body = {"model": server.model, "messages": [{"role": "user", "content": "Book a flight."}],
                "max_tokens": steps, "temperature": 1.0, "seed": seed0 + i, **extra}
        r = requests.post(server.url("/v1/chat/completions"), json=body, timeout=600)
        r.raise_for_status()
        usage = r.json()["usage"]
        return usage["prompt_tokens"], usage["completion_tokens"]

    cpu0, t0 = server_cpu_s(server.proc.pid), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(batch) as pool:
        usage = list(pool.map(one, range(batch)))
    wall, cpu = time.perf_counter() - t0, server_cpu_s(server.proc.pid) - cpu0
    tokens = [c for _, c in usage]
    return wall / max(tokens), cpu / sum(tokens), usage[0][0], statistics.mean(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", help="deepinfer binary (repeat to compare binaries in one run)")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "tiny-v4-text"))
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="1,32")
    args = ap.parse_args()
    bins = args.bin or [os.path.join(ROOT, "build", "release", "src", "cli", "deepinfer")]
    if not os.path.exists(os.path.join(args.model, "config.json")):
        subprocess.run([bins[0], "make-synthetic", "--preset", "tiny-text", "--out", args.model], check=True,
                       stdout=subprocess.DEVNULL)
    os.environ.setdefault("DEEPINFER_TOKENIZER",
                          os.path.join(ROOT, "data", "tokenizer", "deepseek-v4", "tokenizer.json"))
    with open(SCHEMA) as f:
        schema = json.load(f)
    cases = {
        "none": {},
        "guided_json": {"guided_json": schema},
        "response_format": {"response_format": {"type": "json_schema",
                                                "json_schema": {"name": "booking", "schema": schema, "strict": True}}},
    }
    print(f"tiny-v4-text, {args.steps} decode steps per request, median of {args.repeat}, load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    servers = []
    for b in bins:
        common.BIN = b  # common reads DEEPINFER_BIN when imported, before --bin is known
        servers.append(Server(model_dir=args.model).__enter__())
    try:
        for batch in [int(b) for b in args.batches.split(",")]:
            cold = {}
            for b, server in zip(bins, servers):
                cold[b] = run_batch(server, batch, args.steps, cases["guided_json"], 10_000 * batch)[0]
                for extra in cases.values():  # warm-up
                    run_batch(server, batch, args.steps, extra, 20_000 * batch)
            res = {(b, c): [] for b in bins for c in cases}
            for rep in range(args.repeat):
                for b, server in zip(bins, servers):
                    for c, extra in cases.items():
                        res[(b, c)].append(run_batch(server, batch, args.steps, extra, 100 * rep))
            print(f"\nbatch {batch}: wall ms per decode step (server CPU ms per generated token)")
            print("| binary | no constraint | guided_json | added | response_format | added | prompt tokens "
                  "(none / response_format) | completion tokens (mean: none / guided / rf) | guided_json cold |")
            print("|---|---|---|---|---|---|---|---|---|")
            for b in bins:
                med = {c: [statistics.median(r[k] for r in res[(b, c)]) for k in range(4)] for c in cases}
                n, g, r = med["none"], med["guided_json"], med["response_format"]
                print(f"| {b} | {n[0] * 1e3:.2f} ({n[1] * 1e3:.2f}) | {g[0] * 1e3:.2f} ({g[1] * 1e3:.2f}) | "
                      f"{100 * (g[0] / n[0] - 1):+.1f}% ({100 * (g[1] / n[1] - 1):+.1f}%) | "
                      f"{r[0] * 1e3:.2f} ({r[1] * 1e3:.2f}) | "
                      f"{100 * (r[0] / n[0] - 1):+.1f}% ({100 * (r[1] / n[1] - 1):+.1f}%) | "
                      f"{n[2]:.0f} / {r[2]:.0f} | {n[3]:.0f} / {g[3]:.0f} / {r[3]:.0f} | {cold[b] * 1e3:.2f} |",
                      flush=True)
    finally:
        for server in servers:
            server.__exit__(None, None, None)


if __name__ == "__main__":
    main()
